//! A parallel run on stories that overlap, as real PRDs do: stories that
//! touch the same files are scheduled apart, conflicts go to a resolver
//! agent (scripted here: it really edits the markers out), a failed
//! resolution is redone and given up only after `merge.attempts`, and
//! what the run learnt about a story's paths survives kill -9. Nothing here
//! is timed: agents that wait for each other prove what runs at once.

use std::time::Duration;

use serde_json::Value;

use crate::harness::*;
use crate::parallel::{assert_tidy, events, merged};

/// Stories that each add a line to one file.
fn shared_file_prd(n: usize) -> String {
    let stories: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                r#"{{"id": "US-{i:03}", "title": "Line {i}", "priority": {i}, "passes": false, "acceptanceCriteria": ["src/shared.txt has line {i}"]}}"#
            )
        })
        .collect();
    format!(
        "{{\"project\": \"Par\", \"branchName\": \"ralph/par\", \"userStories\": [{}]}}\n",
        stories.join(",\n")
    )
}

/// Every story merged, once, and the shared file holds every story's line.
fn assert_all_lines(p: &Project, n: usize) {
    let shared = p.read("src/shared.txt");
    for i in 1..=n {
        let id = format!("US-{i:03}");
        assert!(p.passes(&id), "{id} does not pass");
        assert_eq!(shared.matches(&format!("line of {id}\n")).count(), 1, "{id} in {shared}");
    }
    assert!(!shared.contains("<<<<<<<") && !shared.contains(">>>>>>>"), "{shared}");
    assert_eq!(merged(p).len(), n, "{:?}", merged(p));
}

#[test]
fn eight_stories_appending_to_one_file_all_merge_with_four_workers() {
    let p = Project::with_prd(&shared_file_prd(8));
    p.write("src/shared.txt", "# shared\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "shared file"]);
    p.script("[run *]\nappend src/shared.txt line of {id}\nimplement\n");
    // Every story's own line must be there: a resolution that dropped a
    // side fails the gate.
    let gate = "test -f src/shared.txt && ! grep -q '^<<<<<<<' src/shared.txt";
    let r = p.run(&["40", "--jobs", "4", "--gate", gate, "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_all_lines(&p, 8);
    let ev = events(&r.stdout);
    let merges: Vec<&Value> = ev.iter().filter(|e| e["event"] == "merge").collect();
    assert!(merges.iter().all(|e| e["result"] != "blocked"), "a story was given up: {}", r.stdout);
    assert_eq!(merges.iter().filter(|e| e["result"] == "merged").count(), 8, "{}", r.stdout);
    // Each merge was gated on the merged tree.
    let gated = merges
        .iter()
        .filter(|e| e["result"] == "merged")
        .all(|e| e["message"].as_str().is_some_and(|m| m.contains("gated on the merged tree")));
    assert!(gated, "{}", r.stdout);
    assert_tidy(&p);
}

/// Index of the first event that matches.
fn at(ev: &[Value], f: impl Fn(&Value) -> bool) -> usize {
    ev.iter().position(f).unwrap_or(usize::MAX)
}

fn merge_of(ev: &[Value], story: &str, result: &str) -> usize {
    at(ev, |e| e["event"] == "merge" && e["story_id"] == story && e["result"] == result)
}

fn start_of(ev: &[Value], story: &str) -> usize {
    at(ev, |e| e["event"] == "worker_start" && e["story_id"] == story)
}

/// A Python list every story adds its id to, on the same line: the
/// stories' own `verify` checks their id is in it.
const FEATURES: &str = "def features():\n    return [\n\"base\",\n    ]\n";
const CHECK: &str = "import sys\nsys.path.insert(0, 'src')\nimport features\n\
    f = features.features()\nassert 'base' in f, f\nfor i in sys.argv[1:]:\n    assert i in f, (i, f)\n";

#[test]
fn four_stories_editing_the_same_lines_all_merge_through_the_resolver() {
    let stories: Vec<String> = (1..=4)
        .map(|i| {
            format!(
                r#"{{"id": "US-00{i}", "title": "Feature {i}", "priority": {i}, "passes": false,
                    "acceptanceCriteria": ["features() lists US-00{i}"], "verify": "python3 check.py US-00{i}"}}"#
            )
        })
        .collect();
    let prd = format!(
        "{{\"project\": \"Par\", \"branchName\": \"ralph/par\", \"userStories\": [{}]}}\n",
        stories.join(",\n")
    );
    let p = Project::with_prd(&prd);
    p.write("src/features.py", FEATURES);
    p.write("check.py", CHECK);
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "features"]);
    // All four start from the same tip and change the same line.
    let waits: String = (1..=4).map(|i| format!("wait-shared started-US-00{i} 60\n")).collect();
    p.script(&format!(
        "[run *]\ntouch-shared started-{{id}}\n{waits}replace-line src/features.py \"base\", \"base\",\\n\"{{id}}\",\nimplement\n"
    ));
    let r = p.run(&["30", "--jobs", "4", "--gate", "python3 check.py", "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let ev = events(&r.stdout);
    let features = p.read("src/features.py");
    for i in 1..=4 {
        let id = format!("US-00{i}");
        assert!(p.passes(&id), "{id}");
        assert_eq!(features.matches(&format!("\"{id}\",")).count(), 1, "{features}");
    }
    assert!(!features.contains("<<<<<<<"), "{features}");
    assert_eq!(merged(&p).len(), 4, "{:?}", p.log());
    // At least the three that came after the first conflicted; each went
    // through a resolver (its own iteration, marked as such) and none was
    // redone or given up.
    let resolving: Vec<&Value> =
        ev.iter().filter(|e| e["event"] == "merge" && e["result"] == "resolving").collect();
    assert!(resolving.len() >= 3, "{}", r.stdout);
    for e in &resolving {
        let story = e["story_id"].as_str().unwrap();
        let resolved = merge_of(&ev, story, "merged");
        assert!(resolved > merge_of(&ev, story, "resolving"), "{story} {}", r.stdout);
        let msg = ev[resolved]["message"].as_str().unwrap_or("");
        assert!(msg.starts_with("resolved onto US-00"), "{msg}");
    }
    let resolver_ends =
        ev.iter().filter(|e| e["event"] == "iteration_end" && e["resolve"] == true).count();
    assert_eq!(resolver_ends, resolving.len(), "{}", r.stdout);
    assert!(ev.iter().all(|e| {
        e["event"] != "merge"
            || !["blocked", "conflict", "resolve_failed"]
                .contains(&e["result"].as_str().unwrap_or(""))
    }));
    // The run branch's commits say which were resolved, onto what.
    let log = p.git(&["log", "--format=%B", "ralph/par"]);
    assert!(log.matches("by a resolver agent").count() >= 3, "{log}");
    // Resolver logs are kept beside the story's own.
    let logs =
        std::fs::read_dir(p.path(".git/ralph/logs")).unwrap().flatten().next().unwrap().path();
    let found = walk(&logs).iter().any(|f| f.ends_with(".resolve.log"));
    assert!(found, "no iter-N.resolve.log under {}", logs.display());
    // The report counts the resolver iterations of each story.
    let end = ev.iter().find(|e| e["event"] == "run_end").unwrap();
    let resolves: u64 =
        end["report"].as_array().unwrap().iter().filter_map(|s| s["resolves"].as_u64()).sum();
    assert_eq!(resolves as usize, resolving.len(), "{end}");
    assert_tidy(&p);
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

const TWO_SHARED: &str = r#"{
  "project": "Par",
  "branchName": "ralph/par",
  "userStories": [
    {"id": "US-001", "title": "One", "priority": 1, "passes": false},
    {"id": "US-002", "title": "Two", "priority": 2, "passes": false}
  ]
}
"#;

/// Two stories that rewrite one line at the same time: one of them
/// conflicts when it merges. The resolver (a scripted one that gives up)
/// leaves the markers.
fn two_conflicting(p: &Project) {
    p.write("shared.txt", "base\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "shared file"]);
    p.script(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nwrite shared.txt from {id}\nimplement\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nwrite shared.txt from {id}\nimplement\n\
         [resolve *]\nprint I cannot tell which line wins\n\
         [run *]\nappend shared.txt and {id}\nimplement\n",
    );
}

#[test]
fn a_resolver_that_leaves_markers_is_redone_from_the_new_tip_and_the_story_still_merges() {
    let p = Project::with_prd(TWO_SHARED);
    two_conflicting(&p);
    let r = p.run(&["10", "--jobs", "2", "--gate", "! grep -q '^<<<<<<<' shared.txt", "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002"));
    let ev = events(&r.stdout);
    let failed = at(&ev, |e| e["event"] == "merge" && e["result"] == "resolve_failed");
    assert!(failed < ev.len(), "{}", r.stdout);
    let story = ev[failed]["story_id"].as_str().unwrap().to_string();
    let msg = ev[failed]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("the resolver could not merge it: conflict markers left in shared.txt:1"),
        "{msg}"
    );
    assert!(
        msg.contains("sent back, to be redone from the new tip (attempt 2 of 3 next)"),
        "{msg}"
    );
    // The redo started from the tip and merged cleanly.
    assert!(merge_of(&ev, &story, "merged") > failed, "{}", r.stdout);
    let shared = p.read("shared.txt");
    assert!(!shared.contains("<<<<<<<") && shared.contains(&format!("and {story}")), "{shared}");
    // Its prompt was told why, and where its first attempt is kept.
    let told = (1..=8).map(|n| p.prompt(n)).find(|t| t.contains("did not reach the run branch"));
    let told = told.unwrap_or_else(|| panic!("no redo prompt: {r:?}"));
    assert!(
        told.contains("conflict markers left in shared.txt")
            && told.contains("refs/ralph/attempts/")
    );
    // The story's iterations are numbered as its own: the first turn, the
    // resolver, then the redo in a new worktree — not "iteration 1" again.
    let numbers: Vec<u64> = ev
        .iter()
        .filter(|e| e["event"] == "iteration_end" && e["story_id"] == story.as_str())
        .filter_map(|e| e["iteration"].as_u64())
        .collect();
    assert_eq!(numbers, [1, 2, 3], "{}", r.stdout);
    // The report lists the failed attempt.
    let end = ev.iter().find(|e| e["event"] == "run_end").unwrap();
    let entry =
        end["report"].as_array().unwrap().iter().find(|s| s["id"] == story.as_str()).unwrap();
    assert_eq!(entry["merge_failures"].as_array().map(Vec::len), Some(1), "{entry}");
    assert_eq!(entry["resolves"], 1, "{entry}");
    assert_tidy(&p);
}

#[test]
fn a_story_is_given_up_only_when_merge_attempts_are_spent_with_every_reason() {
    let p = Project::with_prd(TWO_SHARED);
    two_conflicting(&p);
    let mut ralph = p.ralph();
    ralph.args(["10", "--jobs", "2", "--gate", "! grep -q '^<<<<<<<' shared.txt", "--json"]);
    let r = to_run(ralph.env("RALPH_MERGE_ATTEMPTS", "1").output().unwrap());
    // Its own exit code: not the agent's "blocked".
    assert_eq!(r.code, code(exit::GIVEN_UP), "{r:?}");
    let ev = events(&r.stdout);
    let blocked = at(&ev, |e| e["event"] == "merge" && e["result"] == "blocked");
    assert!(blocked < ev.len(), "{}", r.stdout);
    let msg = ev[blocked]["message"].as_str().unwrap();
    assert!(
        msg.contains("conflict markers left in shared.txt")
            && msg.ends_with("1 attempt failed: given up"),
        "{msg}"
    );
    let story = ev[blocked]["story_id"].as_str().unwrap();
    assert!(!p.passes(story) && merged(&p).len() == 1);
    let end = ev.iter().find(|e| e["event"] == "run_end").unwrap();
    let why = end["message"].as_str().unwrap();
    assert!(
        why.contains(&format!("{story}: "))
            && why.contains("attempt 1: the resolver could not merge it"),
        "{why}"
    );
    // Its work is not lost: kept under refs/ralph/attempts, and said so.
    let kept = p.git(&["for-each-ref", "--format=%(refname)", "refs/ralph/attempts"]);
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert!(why.contains("its work is kept as") && why.contains(kept.trim()), "{why}");
    // The report calls it what it is: claimed (it passed in its worktree), given up.
    let entry = end["report"].as_array().unwrap().iter().find(|s| s["id"] == story).unwrap();
    assert_eq!(entry["claimed"], true, "{entry}");
    assert!(entry["note"].as_str().is_some_and(|n| n.starts_with("given up: ")), "{entry}");
    // So does status, and it does not call it next.
    let status = p.run(&["status"]);
    let line = status.stdout.lines().find(|l| l.contains(story)).unwrap_or("").to_string();
    assert!(line.contains("✗") && line.contains("(given up: "), "{status:?}");
    assert!(!line.contains("(next)"), "{line}");
    let json: Value = serde_json::from_str(&p.run(&["status", "--json"]).stdout).unwrap();
    let s = json["stories"].as_array().unwrap().iter().find(|s| s["id"] == story).unwrap();
    assert!(s["given_up"].as_str().is_some_and(|g| g.contains("refs/ralph/attempts/")), "{s}");
}

#[test]
fn stories_that_touch_the_same_files_never_run_at_once_and_never_conflict() {
    let prd = r#"{
  "project": "Par",
  "branchName": "ralph/par",
  "userStories": [
    {"id": "A", "title": "A", "priority": 1, "touches": ["a.txt"]},
    {"id": "B", "title": "B", "priority": 2, "touches": ["a.txt"]},
    {"id": "C", "title": "C", "priority": 3, "touches": ["b/**"]},
    {"id": "D", "title": "D", "priority": 4, "touches": ["b/x.txt"]},
    {"id": "E", "title": "E", "priority": 5},
    {"id": "F", "title": "F", "priority": 6}
  ]
}
"#;
    let p = Project::with_prd(prd);
    p.write("a.txt", "a\n");
    p.write("b/x.txt", "x\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "files"]);
    // The plan, before anything runs.
    let dry = p.run(&["--dry-run", "--jobs", "4"]);
    assert!(dry.stdout.contains("wave 1:    A, C, E, F\nwave 2:    B, D\n"), "{dry:?}");
    assert!(dry.stdout.contains("B: waits for A: both touch a.txt"), "{dry:?}");
    assert!(dry.stdout.contains("D: waits for C: both touch b/x.txt (b/**)"), "{dry:?}");
    // Each story rewrites the one line of its file: at once, they would conflict.
    p.script(
        "[story A]\nwrite a.txt from A\nimplement\n[story B]\nwrite a.txt from B\nimplement\n\
         [story C]\nwrite b/x.txt from C\nimplement\n[story D]\nwrite b/x.txt from D\nimplement\n\
         [run *]\nimplement\n",
    );
    let r = p.run(&["12", "--jobs", "4", "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let ev = events(&r.stdout);
    for (first, second) in [("A", "B"), ("C", "D")] {
        // The second starts only once the first is on the run branch.
        assert!(
            start_of(&ev, second) > merge_of(&ev, first, "merged"),
            "{second} ran beside {first}: {}",
            r.stdout
        );
    }
    assert!(ev.iter().all(|e| e["event"] != "merge" || e["result"] == "merged"), "{}", r.stdout);
    assert_eq!(p.read("a.txt"), "from B\n");
    assert_eq!(p.read("b/x.txt"), "from D\n");
    assert_tidy(&p);
}

#[test]
fn what_a_story_was_learnt_to_touch_survives_kill_9_and_keeps_it_apart_on_resume() {
    let p = Project::with_prd(TWO_SHARED);
    p.write("shared.txt", "base\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "shared file"]);
    // First turns, side by side: each changes shared.txt and stops short of
    // passing. Second turns: they now share a path, so only one may run.
    p.script(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nappend shared.txt one\ncommit wip {id}\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nappend shared.txt two\ncommit wip {id}\n\
         [run *]\ntouch-shared second-{id}\nwait-shared never 120\n",
    );
    let mut child = p.spawn(&["20", "--jobs", "2"]);
    let second = || {
        std::fs::read_dir(p.agent_dir()).map_or(0, |d| {
            d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("second-")).count()
        })
    };
    assert!(eventually(Duration::from_secs(60), || second() == 1), "no second turn started");
    // Had both been let run, the other would be at work by now too.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(second(), 1, "both second turns ran at once");
    kill_9_and_settle(&mut child, &p.dir());
    let board: Value = serde_json::from_str(&p.read(".git/ralph/parallel.json")).unwrap();
    for id in ["US-001", "US-002"] {
        let learnt = &board["learnt"][id];
        assert!(learnt.as_array().is_some_and(|a| a.iter().any(|p| p == "shared.txt")), "{board}");
    }
    // What status says of the one that waits.
    let status = p.run(&["status"]);
    assert!(
        status.stdout.contains("waits for US-00")
            && status.stdout.contains("both touch shared.txt"),
        "{status:?}"
    );
    // Resumed, the two still never run at once.
    p.script("[run *]\nappend shared.txt line {id}\nimplement\n");
    let r = p.run(&["20", "--jobs", "2", "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let ev = events(&r.stdout);
    let (a, b) = (start_of(&ev, "US-001"), start_of(&ev, "US-002"));
    let (first, later) = if a < b { ("US-001", b) } else { ("US-002", a) };
    assert!(later > merge_of(&ev, first, "merged"), "{}", r.stdout);
    // Their first turns' work, cut from one tip, still meets at the merge:
    // resolved, never redone or given up.
    let lost = ["conflict", "gate_failed", "resolve_failed", "blocked"];
    let bad = ev
        .iter()
        .any(|e| e["event"] == "merge" && lost.contains(&e["result"].as_str().unwrap_or("")));
    assert!(!bad, "{}", r.stdout);
    assert!(p.passes("US-001") && p.passes("US-002"));
    let shared = p.read("shared.txt");
    assert!(
        shared.contains("one") && shared.contains("two") && !shared.contains("<<<<<<<"),
        "{shared}"
    );
}

#[test]
fn a_run_whose_every_merge_fails_stops_like_any_stuck_run() {
    let prd = r#"{
  "project": "Par",
  "branchName": "ralph/par",
  "userStories": [
    {"id": "US-001", "title": "One", "priority": 1},
    {"id": "US-002", "title": "Two", "priority": 2},
    {"id": "US-003", "title": "Three", "priority": 3}
  ]
}
"#;
    let p = Project::with_prd(prd);
    // Each story alone passes the gate; any two together fail it: after
    // the first, every merge fails on the merged tree.
    let waits: String = (1..=3).map(|i| format!("wait-shared started-US-00{i} 60\n")).collect();
    p.script(&format!("[run *]\ntouch-shared started-{{id}}\n{waits}implement\n"));
    let gate = "test $(ls src | wc -l) -le 1";
    let mut ralph = p.ralph();
    ralph.args(["20", "--jobs", "3", "--gate", gate, "--json"]);
    ralph.env("RALPH_CIRCUIT_NO_PROGRESS", "2").env("RALPH_MERGE_ATTEMPTS", "5");
    let r = to_run(ralph.output().unwrap());
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    let ev = events(&r.stdout);
    let failed =
        ev.iter().filter(|e| e["event"] == "merge" && e["result"] == "gate_failed").count();
    assert_eq!(failed, 2, "{}", r.stdout);
    let end = ev.iter().find(|e| e["event"] == "run_end").unwrap();
    assert!(end["message"].as_str().unwrap().contains("no progress in 2 iterations"), "{end}");
    assert_eq!(merged(&p).len(), 1);
}

/// The CPU time a process has used so far, in clock ticks (utime + stime).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    // After the command's name: state is field 3, utime 14 and stime 15.
    let at = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    at(14) + at(15)
}

#[test]
fn a_queue_that_waits_for_a_resolver_does_not_keep_the_run_busy() {
    let prd = r#"{
  "project": "Par",
  "branchName": "ralph/par",
  "userStories": [
    {"id": "US-001", "title": "One", "priority": 1},
    {"id": "US-002", "title": "Two", "priority": 2},
    {"id": "US-003", "title": "Three", "priority": 3}
  ]
}
"#;
    let p = Project::with_prd(prd);
    p.write("shared.txt", "base\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "shared file"]);
    // US-001 and US-002 rewrite the line at once; US-002's resolver is slow,
    // and US-003 (which appends to the file) waits in the queue for it.
    p.script(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nwrite shared.txt from {id}\nimplement\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nwrite shared.txt from {id}\nimplement\n\
         [story US-003]\nwait-shared resolving 60\nappend shared.txt and {id}\nimplement\ntouch-shared queued\n\
         [resolve *]\ntouch-shared resolving\nwait-shared go 120\nresolve\n",
    );
    let child = p.spawn(&["12", "--jobs", "2"]);
    let ready = |name: &str| p.agent_dir().join(name).exists();
    assert!(eventually(Duration::from_secs(60), || ready("queued")), "US-003 never finished");
    // Give the run a moment to queue US-003 behind the resolver, then see
    // what two seconds of that cost it.
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(child.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(child.id()) - before;
    // Status shows the resolver for what it is, and the story queued behind it.
    let status = p.run(&["status"]);
    assert!(status.stdout.contains(" (resolving) · "), "{status:?}");
    assert!(status.stdout.contains("merge queue: US-003"), "{status:?}");
    std::fs::write(p.agent_dir().join("go"), b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    // Clock ticks are 1/100 s: a loop that spins uses most of the 200.
    assert!(used < 50, "the run used {used} ticks of CPU in 2 s while it waited");
}

#[test]
fn a_resolution_cut_short_by_kill_9_is_made_again_even_by_a_fresh_run() {
    let p = Project::with_prd(TWO_SHARED);
    p.write("shared.txt", "base\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "shared file"]);
    p.script(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nwrite shared.txt from {id}\nimplement\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nwrite shared.txt from {id}\nimplement\n\
         [resolve *]\ntouch-shared resolving\nwait-shared never 120\n\
         [run *]\nimplement\n",
    );
    let mut child = p.spawn(&["12", "--jobs", "2"]);
    let resolving = || p.agent_dir().join("resolving").exists();
    assert!(eventually(Duration::from_secs(60), resolving), "no resolver started");
    kill_9_and_settle(&mut child, &p.dir());
    // Whatever run comes next puts the story's work back and resolves again.
    p.script("[resolve *]\nresolve\n[run *]\nimplement\n");
    let r = p.run(&["12", "--jobs", "2", "--fresh"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002"));
    let shared = p.read("shared.txt");
    for id in ["US-001", "US-002"] {
        assert!(shared.contains(&format!("from {id}")), "{id}'s work was lost: {shared}");
    }
    assert!(!shared.contains("<<<<<<<"), "{shared}");
}

#[test]
fn a_resolution_that_fails_at_the_merge_is_kept_beside_the_work_it_was_made_from() {
    let p = Project::with_prd(TWO_SHARED);
    two_conflicting(&p);
    // The resolver merges the lines, and breaks the build.
    p.script(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nwrite shared.txt from {id}\nimplement\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nwrite shared.txt from {id}\nimplement\n\
         [resolve * 1]\nresolve\nwrite boom BOOM\n\
         [run *]\nappend shared.txt and {id}\nimplement\n",
    );
    let gate = "! grep -qs BOOM boom";
    let r = p.run(&["12", "--jobs", "2", "--gate", gate, "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let ev = events(&r.stdout);
    let failed = at(&ev, |e| e["event"] == "merge" && e["result"] == "resolve_failed");
    assert!(failed < ev.len(), "{}", r.stdout);
    let story = ev[failed]["story_id"].as_str().unwrap();
    let msg = ev[failed]["message"].as_str().unwrap();
    assert!(msg.starts_with("its resolution fails the gate on the merged tree"), "{msg}");
    // Both are kept: the story's own work, and the resolution that failed.
    let slug = story;
    let kept = p.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname)",
        &format!("refs/ralph/attempts/{slug}"),
    ]);
    assert_eq!(kept.lines().count(), 2, "{kept}");
    let shas: Vec<&str> = kept.lines().filter_map(|l| l.split(' ').nth(1)).collect();
    assert_ne!(shas[0], shas[1], "{kept}");
    let own = p.git(&["show", &format!("{}:shared.txt", shas[0])]);
    let both = shas
        .iter()
        .any(|s| p.git(&["show", &format!("{s}:shared.txt")]).trim() == format!("from {story}"));
    assert!(both, "the story's own work is not among the kept attempts: {own}");
    assert!(p.passes("US-001") && p.passes("US-002"));
}

/// A resolver is an agent like any other: a hook it plants in the git
/// directory (which the merge after it, and ralph's pushes, would run) is
/// set back and its resolution does not stand; the redo merges.
#[test]
fn a_resolver_that_plants_a_git_hook_has_it_set_back_and_its_resolution_refused() {
    let p = Project::with_prd(TWO_SHARED);
    two_conflicting(&p);
    let hook = p.path(".git/hooks/post-merge");
    p.script(&format!(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nwrite shared.txt from {{id}}\nimplement\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nwrite shared.txt from {{id}}\nimplement\n\
         [resolve * 1]\nresolve\nput {} #!/bin/sh\\ntouch hooked\\n\n\
         [run *]\nappend shared.txt and {{id}}\nimplement\n",
        hook.display()
    ));
    let r = p.run(&["12", "--jobs", "2", "--gate", "! test -e hooked", "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let ev = events(&r.stdout);
    let failed = at(&ev, |e| e["event"] == "merge" && e["result"] == "resolve_failed");
    assert!(failed < ev.len(), "{}", r.stdout);
    let msg = ev[failed]["message"].as_str().unwrap();
    assert!(msg.contains("the resolver changed .git/hooks/post-merge: set back"), "{msg}");
    assert!(!hook.exists(), "the planted hook is still there");
    assert!(!p.path("hooked").exists(), "the planted hook ran");
    assert!(p.passes("US-001") && p.passes("US-002"));
    assert_tidy(&p);
}
