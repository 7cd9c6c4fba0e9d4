//! `--jobs N`: stories in their own worktrees at once, one merge queue,
//! the gate run again on the merged tree. Scripted agents that wait for
//! each other prove that they run at the same time; nothing here is timed.

use std::time::Duration;

use serde_json::Value;

use crate::harness::*;

/// Four independent stories and a fifth that depends on the first.
const FIVE: &str = r#"{
  "project": "Par",
  "branchName": "ralph/par",
  "userStories": [
    {"id": "US-001", "title": "One", "priority": 1, "passes": false},
    {"id": "US-002", "title": "Two", "priority": 2, "passes": false},
    {"id": "US-003", "title": "Three", "priority": 3, "passes": false},
    {"id": "US-004", "title": "Four", "priority": 4, "passes": false},
    {"id": "US-005", "title": "Five", "priority": 0, "passes": false, "dependsOn": ["US-001"]}
  ]
}
"#;

const TWO: &str = r#"{
  "project": "Par",
  "branchName": "ralph/par",
  "userStories": [
    {"id": "US-001", "title": "One", "priority": 1, "passes": false},
    {"id": "US-002", "title": "Two", "priority": 2, "passes": false}
  ]
}
"#;

/// Each agent run: (pid, start in ms since the epoch, story).
pub(crate) fn runs(p: &Project) -> Vec<(i32, u128, String)> {
    let log = std::fs::read_to_string(p.agent_dir().join("runs.log")).unwrap_or_default();
    log.lines()
        .map(|l| {
            let field = |k: &str| {
                l.split_whitespace().find_map(|w| w.strip_prefix(k)).unwrap_or("").to_string()
            };
            (field("pid=").parse().unwrap_or(0), field("at=").parse().unwrap_or(0), field("story="))
        })
        .collect()
}

pub(crate) fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Nothing of the run's own is left: no worktree, no story branch.
pub(crate) fn assert_tidy(p: &Project) {
    let worktrees = p.git(&["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "worktrees left: {worktrees}");
    let branches = p.git(&["branch", "--format=%(refname:short)"]);
    assert!(!branches.contains("--"), "story branches left: {branches}");
    assert!(!p.path(".git/ralph/worktrees").exists());
}

/// ralph's merge commits, story by story.
pub(crate) fn merged(p: &Project) -> Vec<String> {
    p.log().into_iter().filter(|s| s.starts_with("feat: ")).collect()
}

#[test]
fn independent_stories_run_at_once_and_each_merges_once_after_its_gate() {
    let p = Project::with_prd(FIVE);
    // US-001 and US-002 each wait for the other to have started: with one
    // agent at a time neither would ever finish.
    p.script(
        "[story US-001]\ntouch-shared US-001\nwait-shared US-002 60\nimplement\n\
         [story US-002]\ntouch-shared US-002\nwait-shared US-001 60\nimplement\n\
         [story US-005]\ncat src/us-001.txt\nimplement\n\
         [run *]\nimplement\n",
    );
    let r = p.run(&["12", "--jobs", "3", "--gate", "test -d src", "--json"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    for id in ["US-001", "US-002", "US-003", "US-004", "US-005"] {
        assert!(p.passes(id), "{id} does not pass");
    }
    // One commit per story, each named as the issue asks, none twice.
    let mut feats = merged(&p);
    feats.sort();
    assert_eq!(
        feats,
        [
            "feat: US-001 - One",
            "feat: US-002 - Two",
            "feat: US-003 - Three",
            "feat: US-004 - Four",
            "feat: US-005 - Five"
        ]
    );
    // Each story's work is on the run branch, with its progress entry.
    let progress = p.read("progress.txt");
    for id in ["US-001", "US-002", "US-003", "US-004", "US-005"] {
        assert!(p.path(&format!("src/{}.txt", id.to_lowercase())).exists(), "{id}'s file");
        assert!(progress.contains(&format!("- {id}")), "{id} missing from {progress}");
    }
    // US-005 waited for US-001 to be merged: its worktree already had US-001's file.
    let ev = events(&r.stdout);
    let started_5 =
        ev.iter().position(|e| e["event"] == "worker_start" && e["story_id"] == "US-005").unwrap();
    let merged_1 =
        ev.iter().position(|e| e["event"] == "merge" && e["story_id"] == "US-001").unwrap();
    assert!(started_5 > merged_1, "US-005 started before US-001 merged");
    // Workers' events carry the worker and the story.
    let ends: Vec<&Value> = ev.iter().filter(|e| e["event"] == "iteration_end").collect();
    assert_eq!(ends.len(), 5, "{}", r.stdout);
    assert!(ends.iter().all(|e| e["worker"].as_u64().is_some_and(|w| (1..=3).contains(&w))));
    assert!(ends.iter().all(|e| e["story"] == e["story_id"]));
    assert!(ev.iter().filter(|e| e["event"] == "merge").all(|e| e["result"] == "merged"));
    assert_tidy(&p);
    assert!(p.git(&["status", "--porcelain", "--untracked-files=no"]).trim().is_empty());
}

#[test]
fn two_stories_editing_the_same_lines_one_merges_the_other_is_redone_from_the_new_tip() {
    let p = Project::with_prd(TWO);
    p.write("shared.txt", "base\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "shared file"]);
    // Both first attempts start from the same tip and rewrite the same line.
    p.script(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nwrite shared.txt from {id}\nimplement\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nwrite shared.txt from {id}\nimplement\n\
         [run *]\nappend shared.txt and {id}\nimplement\n",
    );
    // Redo, not resolve: the path a conflict takes with `merge.resolve = "redo"`.
    let mut ralph = p.ralph();
    ralph.args(["8", "--jobs", "2", "--gate", "test -f shared.txt"]);
    let r = to_run(ralph.env("RALPH_MERGE_RESOLVE", "redo").output().unwrap());
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002"));
    assert!(r.stdout.contains("conflicts with the run branch in shared.txt: sent back"), "{r:?}");
    // The redo started from the tip that held the other story's line.
    let shared = p.read("shared.txt");
    assert!(shared.starts_with("from US-00") && shared.contains("and US-00"), "{shared}");
    let mut feats = merged(&p);
    feats.sort();
    assert_eq!(feats, ["feat: US-001 - One", "feat: US-002 - Two"]);
    // The redo was told why, and where its earlier attempt is kept.
    let told = (1..=6).map(|n| p.prompt(n)).any(|t| {
        t.contains("did not reach the run branch: conflicts with the run branch in shared.txt")
    });
    assert!(told, "no prompt carried the conflict");
    let kept = p.git(&["for-each-ref", "refs/ralph/attempts"]);
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert_tidy(&p);
}

#[test]
fn a_story_that_passes_alone_but_fails_the_gate_after_merging_is_not_marked() {
    let p = Project::with_prd(TWO);
    // Either story alone passes; both together fail.
    p.script(
        "[story US-001]\ntouch-shared a\nwait-shared b 60\nimplement\n\
         [story US-002]\ntouch-shared b\nwait-shared a 60\nimplement\n",
    );
    let gate = "test ! -f src/us-001.txt || test ! -f src/us-002.txt";
    let r = p.run(&["6", "--jobs", "2", "--gate", gate, "--json"]);
    assert_ne!(r.code, code(exit::COMPLETE), "{r:?}");
    let ev = events(&r.stdout);
    let merges: Vec<&Value> = ev.iter().filter(|e| e["event"] == "merge").collect();
    assert_eq!(merges.iter().filter(|e| e["result"] == "merged").count(), 1, "{}", r.stdout);
    assert!(merges.iter().any(|e| e["result"] == "gate_failed"), "{}", r.stdout);
    // Exactly one story passes, and the branch holds only its work.
    let passing = ["US-001", "US-002"].iter().filter(|id| p.passes(id)).count();
    assert_eq!(passing, 1);
    assert_eq!(merged(&p).len(), 1);
    assert!(!(p.path("src/us-001.txt").exists() && p.path("src/us-002.txt").exists()));
    // No worktree survives the finished run; the unfinished story's work
    // stays on its branch, named, for the next run to start from.
    assert_eq!(p.git(&["worktree", "list"]).lines().count(), 1);
    let left = if p.passes("US-001") { "US-002" } else { "US-001" };
    let branch = format!("ralph/par--{left}");
    assert!(r.stdout.contains(&format!("unfinished work is kept on {branch}")), "{}", r.stdout);
    assert!(p.git(&["branch", "--format=%(refname:short)"]).lines().any(|b| b == branch));
}

#[test]
fn a_usage_limit_one_worker_meets_pauses_every_worker_until_it_resets() {
    let p = Project::with_prd(FIVE);
    p.script(
        "[story US-001 1]\nusage-limit 3\n\
         [story US-002 1]\ntouch-shared limited\nsleep 1\nimplement\nclaude-result done\n\
         [run *]\nimplement\nclaude-result done\n",
    );
    let r = p
        .ralph()
        .args(["12", "--jobs", "2", "--json"])
        .env("RALPH_AGENT_FORMAT", "claude")
        .output()
        .unwrap();
    let r = to_run(r);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let ev = events(&r.stdout);
    let limit = ev
        .iter()
        .find(|e| {
            e["event"] == "notice"
                && e["message"].as_str().is_some_and(|m| m.contains("every worker pauses"))
        })
        .unwrap_or_else(|| panic!("no shared pause: {}", r.stdout));
    assert!(limit["message"].as_str().unwrap().contains("US-001"));
    // The limited run was the first of US-001: its reset is 3 s after it started.
    let all = runs(&p);
    let (_, limited_at, _) = all.iter().find(|(_, _, s)| s == "US-001").unwrap().clone();
    let reset = limited_at + 3000;
    // Only the runs already at work (US-002's first; on a loaded machine,
    // even a story after it, begun before US-001's agent was) went on;
    // every agent started after the limit was met started after the reset.
    let first_002 = all.iter().position(|(_, _, s)| s == "US-002").unwrap();
    let later: Vec<_> = all
        .iter()
        .enumerate()
        .filter(|(i, (_, at, _))| *i != first_002 && *at > limited_at)
        .map(|(_, r)| r)
        .collect();
    assert!(!later.is_empty());
    for (_, at, story) in later {
        assert!(*at + 1000 >= reset, "{story} started at {at}, before the reset at {reset}");
    }
}

#[test]
fn ctrl_c_with_four_agents_at_work_exits_130_leaves_no_process_and_resumes() {
    let p = Project::with_prd(FIVE);
    p.script("[run 1-4]\ntouch-shared {id}\nsleep 120\n[run *]\nimplement\n");
    let mut child = p.spawn(&["12", "--jobs", "4"]);
    let started = eventually(Duration::from_secs(60), || {
        ["US-001", "US-002", "US-003", "US-004"].iter().all(|id| p.agent_dir().join(id).exists())
    });
    assert!(started, "four agents did not start");
    let agents: Vec<i32> = runs(&p).iter().map(|(pid, _, _)| *pid).collect();
    assert_eq!(agents.len(), 4);
    // `ralph status` shows the four workers and their stories.
    let status = p.run(&["status", "--json"]);
    let v: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(v["parallel"]["workers"].as_array().map(Vec::len), Some(4), "{}", status.stdout);
    let at_work = v["stories"].as_array().unwrap().iter().filter(|s| s["worker"].is_u64()).count();
    assert_eq!(at_work, 4);
    let text = p.run(&["status"]).stdout;
    assert!(text.contains("workers: 4 of 4 at work, merging into ralph/par"), "{text}");
    // The run is its workers' work, and no story at work is "next" (the
    // one left waits on US-001).
    assert!(text.contains("· 4 workers at work"), "{text}");
    assert!(!text.contains("between iterations"), "{text}");
    assert!(!text.contains("(next)"), "{text}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    for pid in &agents {
        assert!(eventually(Duration::from_secs(10), || !alive(*pid)), "agent {pid} outlived ralph");
    }
    let dir = p.dir().canonicalize().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || processes_in(&dir).is_empty()),
        "{:?}",
        processes_in(&dir)
    );
    // Interrupted: the run resumes, reusing its worktrees, and completes.
    let r = p.run(&["--jobs", "4"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(merged(&p).len(), 5, "{:?}", p.log());
    assert_tidy(&p);
}

#[test]
fn kill_9_of_a_parallel_run_then_resume_loses_and_doubles_nothing() {
    let p = Project::with_prd(FIVE);
    p.script(
        "[story US-001 1]\nimplement\n[run *]\ntouch-shared started-{id}\nsleep 2\nimplement\n",
    );
    let mut child = p.spawn(&["12", "--jobs", "2"]);
    // Killed once the first story merged and others are at work.
    let ready = eventually(Duration::from_secs(60), || {
        !merged(&p).is_empty()
            && std::fs::read_dir(p.agent_dir()).is_ok_and(|d| {
                d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("started-"))
            })
    });
    assert!(ready, "the run did not get going");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let dir = p.dir().canonicalize().unwrap();
    // The workers stop their agents when ralph dies.
    assert!(
        eventually(Duration::from_secs(20), || processes_in(&dir).is_empty()),
        "{:?}",
        processes_in(&dir)
    );
    let r = p.run(&["12", "--jobs", "2"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let mut feats = merged(&p);
    feats.sort();
    feats.dedup();
    assert_eq!(merged(&p).len(), 5, "merged twice or lost: {:?}", p.log());
    assert_eq!(feats.len(), 5);
    for id in ["US-001", "US-002", "US-003", "US-004", "US-005"] {
        assert!(p.passes(id), "{id}");
    }
    assert_tidy(&p);
    // The main work tree is the run branch's tip, nothing half-applied.
    let status = p.git(&["status", "--porcelain", "--untracked-files=no"]);
    assert!(status.trim().is_empty(), "{status}\n{r:?}");
}

/// Issue 29: a worker whose agent appended its progress entry is stopped
/// (ralph killed) before the iteration's commit; the turn that runs the
/// iteration again starts from progress.txt as it was, so the run branch
/// gets the entry once.
#[test]
fn a_worker_cut_off_after_its_progress_entry_merges_it_once() {
    let p = Project::with_prd(TWO);
    p.script(
        "[story US-001 1]\nprogress ## entry US-001\ntouch-shared appended\nsleep 60\n\
         [run *]\nprogress ## entry {id}\nimplement\n",
    );
    let mut child = p.spawn(&["12", "--jobs", "2"]);
    let appended = p.agent_dir().join("appended");
    assert!(eventually(Duration::from_secs(60), || appended.exists()), "no entry appended");
    kill_9_and_settle(&mut child, &p.dir());
    let r = p.run(&["12", "--jobs", "2"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(merged(&p).len(), 2, "{:?}", p.log());
    let progress = p.git(&["show", "ralph/par:progress.txt"]);
    for id in ["US-001", "US-002"] {
        assert_eq!(progress.matches(&format!("## entry {id}\n")).count(), 1, "{id}:\n{progress}");
        assert_eq!(progress.matches(&format!("## now - {id}\n")).count(), 1, "{id}:\n{progress}");
    }
    assert_progress_once(&p, "ralph/par", "the end");
    assert_tidy(&p);
}

/// kill -9 of a parallel run at random moments (inside merges among them),
/// each followed by a resume: after every kill prd.json parses and no
/// story is merged twice; the last run finishes every story, each merged
/// exactly once, with nothing left behind.
fn parallel_kills(kills: usize, seed: u64) {
    let n = 10;
    let stories: Vec<String> = (1..=n)
        .map(|i| {
            format!(r#"{{"id":"US-{i:03}","title":"Story {i}","priority":{i},"passes":false}}"#)
        })
        .collect();
    let p = Project::with_prd(&format!(
        r#"{{"project":"P","branchName":"ralph/soak","userStories":[{}]}}"#,
        stories.join(",")
    ));
    // Each agent leaves a process in a session of its own: nothing may outlive ralph.
    p.script("[run *]\nspawn setsid 300\nsleep 0.05\nimplement\n");
    // Every kill's workers are agent calls: no hourly limit for a soak.
    p.write(
        ".ralph/config.toml",
        "[circuit]\nno_progress = 0\nsame_error = 0\nfailures = 0\n[limits]\ncalls_per_hour = 0\n",
    );
    let dir = p.dir().canonicalize().unwrap();
    let mut state = seed;
    for kill in 0..kills {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let delay = Duration::from_millis((state >> 33) % 600);
        let mut child = p.spawn(&["200", "--jobs", "3", "--gate", "test -d src"]);
        std::thread::sleep(delay);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        let gone = eventually(Duration::from_secs(30), || processes_in(&dir).is_empty());
        assert!(gone, "seed {seed}, kill {kill}: {:?} outlived ralph", processes_in(&dir));
        let at = format!("seed {seed}, kill {kill} after {delay:?}");
        let _ = p.prd();
        let mut feats = merged(&p);
        let all = feats.len();
        feats.sort();
        feats.dedup();
        assert_eq!(feats.len(), all, "{at}: a story merged twice: {:?}", p.log());
        assert_progress_once(&p, "ralph/soak", &at);
    }
    let r = p.run(&["200", "--jobs", "3", "--gate", "test -d src"]);
    assert_eq!(r.code, code(exit::COMPLETE), "seed {seed}: {r:?}");
    assert_eq!(merged(&p).len(), n, "seed {seed}: {:?}", p.log());
    for i in 1..=n {
        assert!(p.passes(&format!("US-{i:03}")), "seed {seed}: US-{i:03}");
    }
    assert_tidy(&p);
    assert_progress_once(&p, "ralph/soak", &format!("seed {seed}, the end"));
    let status = p.git(&["status", "--porcelain", "--untracked-files=no"]);
    assert!(status.trim().is_empty(), "seed {seed}: {status}");
}

/// Each story's progress entry is on the run branch at most once. A kill
/// before the first merge leaves the branch without progress.txt (ralph
/// made it in the work tree; the first merge commits it), one before ralph
/// cut the branch no branch: no entry yet.
fn assert_progress_once(p: &Project, branch: &str, at: &str) {
    if p.git(&["branch", "--list", branch]).trim().is_empty() {
        return;
    }
    let listed = p.git(&["ls-tree", "--name-only", branch, "progress.txt"]);
    if listed.trim().is_empty() {
        return;
    }
    let progress = p.git(&["show", &format!("{branch}:progress.txt")]);
    let mut heads: Vec<&str> = progress.lines().filter(|l| l.starts_with("## ")).collect();
    let all = heads.len();
    heads.sort_unstable();
    heads.dedup();
    assert_eq!(heads.len(), all, "{at}: a progress entry twice:\n{progress}");
}

#[test]
fn a_few_kill_9s_of_a_parallel_run_lose_and_double_nothing() {
    parallel_kills(6, 20261203);
}

/// A killed `--jobs 3` run resumed with `--jobs 1`: the resume finishes
/// the stories in the project itself and leaves no worktree or branch of
/// the parallel run behind.
#[test]
fn a_parallel_run_resumed_one_story_at_a_time_leaves_no_worktree_behind() {
    let p = Project::with_prd(FIVE);
    p.script("[run *]\ntouch-shared started-{id}\nwait-shared never 120\n");
    let mut child = p.spawn(&["12", "--jobs", "3"]);
    let started = || {
        std::fs::read_dir(p.agent_dir()).map_or(0, |d| {
            d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("started-")).count()
        })
    };
    assert!(eventually(Duration::from_secs(60), || started() == 3), "three workers did not start");
    kill_9_and_settle(&mut child, &p.dir());
    assert_eq!(p.git(&["worktree", "list"]).lines().count(), 4, "the kill left its worktrees");
    p.script("[run *]\nimplement\n");
    let r = p.run(&["12", "--jobs", "1"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    for id in ["US-001", "US-002", "US-003", "US-004", "US-005"] {
        assert!(p.passes(id), "{id}");
    }
    assert_tidy(&p);
    assert!(!p.path(".git/ralph/parallel.json").exists());
}

#[test]
#[ignore = "a soak of a few minutes: cargo test -- --ignored parallel_kill_9_soak"]
fn parallel_kill_9_soak() {
    parallel_kills(env_or("RALPH_SOAK_KILLS", 100), env_or("RALPH_FAULT_SEED", 7));
}

/// An agent killed with ralph while writing its worktree's prd.json leaves
/// it empty (a write truncates first): the resumed run restores ralph's
/// copy there and goes on.
#[test]
fn a_worktree_prd_left_half_written_by_a_kill_is_restored_on_resume() {
    let p = Project::with_prd(TWO);
    p.script("[run *]\ntouch-shared started-{id}\nsleep 30\n");
    let mut child = p.spawn(&["4", "--jobs", "2"]);
    let started = eventually(Duration::from_secs(60), || {
        std::fs::read_dir(p.agent_dir()).is_ok_and(|d| {
            d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("started-"))
        })
    });
    assert!(started, "the agent never started");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let dir = p.dir().canonicalize().unwrap();
    assert!(eventually(Duration::from_secs(20), || processes_in(&dir).is_empty()));
    // What the killed agent's write left behind.
    let mut emptied = 0;
    for e in std::fs::read_dir(p.path(".git/ralph/worktrees")).unwrap().flatten() {
        if e.path().join("prd.json").exists() {
            std::fs::write(e.path().join("prd.json"), "").unwrap();
            emptied += 1;
        }
    }
    assert!(emptied >= 1, "no worktree was kept to resume from");
    p.script("[run *]\nimplement\n");
    let r = p.run(&["4", "--jobs", "2"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("prd.json was damaged"), "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002"));
    assert_tidy(&p);
}

/// What a story's turns learned outlives its worktree: the redo of a story
/// sent back after a conflict, in a new worktree, is shown the lesson of its
/// first attempt's failed turn, and the run's store keeps it.
#[test]
fn a_worktrees_lessons_reach_the_redo_in_a_new_worktree_and_the_runs_store() {
    let p = Project::with_prd(TWO);
    p.write("shared.txt", "base\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "shared file"]);
    // Each story's first turn fails the gate, saying why; its second passes;
    // both rewrote one line, so the later merge conflicts.
    p.script(
        "[story US-001 1]\ntouch-shared a\nwait-shared b 60\nwrite shared.txt from {id}\nwrite boom BOOM-{id}\nimplement\n\
         [story US-002 1]\ntouch-shared b\nwait-shared a 60\nwrite shared.txt from {id}\nwrite boom BOOM-{id}\nimplement\n\
         [story US-001 2]\nwrite boom fixed\nimplement\n\
         [story US-002 2]\nwrite boom fixed\nimplement\n\
         [run *]\nwrite boom fixed\nappend shared.txt and {id}\nimplement\n",
    );
    let gate = "test -f shared.txt && ! grep BOOM boom";
    let mut ralph = p.ralph();
    ralph.args(["12", "--jobs", "2", "--gate", gate]);
    let r = to_run(ralph.env("RALPH_MERGE_RESOLVE", "redo").output().unwrap());
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("conflicts with the run branch in shared.txt: sent back"), "{r:?}");
    let redo = (1..=8)
        .map(|n| p.prompt(n))
        .find(|t| t.contains("did not reach the run branch"))
        .unwrap_or_else(|| panic!("no redo: {r:?}"));
    let story = if redo.contains("Your earlier work on US-001") { "US-001" } else { "US-002" };
    let lessons = redo.split("## Lessons — do not repeat").nth(1).unwrap_or_default();
    assert!(lessons.contains(&format!("BOOM-{story}")), "the redo was not told: {redo}");
    let kept: String = std::fs::read_dir(p.path(".git/ralph/lessons"))
        .map(|d| {
            d.flatten().map(|e| std::fs::read_to_string(e.path()).unwrap_or_default()).collect()
        })
        .unwrap_or_default();
    for id in ["US-001", "US-002"] {
        assert!(kept.contains(&format!("BOOM-{id}")), "the run's store lost {id}'s lesson: {kept}");
    }
}

/// Rules a person armed hold in every worktree: each worker's prompt has
/// them, and what workers observe lands on the project's own cards.
#[test]
fn armed_rules_reach_every_parallel_worker() {
    let p = Project::with_prd(TWO);
    p.script("[run 1]\nprint nothing useful\n[run 2]\nprint nothing useful\n[run *]\nimplement\n");
    let gate = "sh -c 'test -f src/us-001.txt || { echo error: the widget is broken; exit 1; }'";
    let r = p.run(&["2", "--gate", gate]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let list = p.run(&["rules", "list", "--json"]);
    let rules: Value = serde_json::from_str(&list.stdout).unwrap();
    let card = rules["cards"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["category"] == "gate-failure").cloned())
        .unwrap_or_else(|| panic!("no gate-failure card: {}", list.stdout));
    let id = card["id"].as_str().unwrap();
    let armed = p.run(&["rules", "arm", id, "--statement", "RULE-MARKER: never break the widget"]);
    assert_eq!(armed.code, 0, "{armed:?}");
    let r = p.run(&["6", "--jobs", "2", "--gate", "test -d src", "--fresh"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let runs = p.agent_runs().len();
    assert!(runs >= 4, "{runs} agent runs");
    for n in 3..=runs {
        let prompt = p.prompt(n);
        assert!(prompt.contains("RULE-MARKER"), "worker prompt {n} has no rules: {prompt}");
    }
}

/// A parallel run killed between moving the run branch to a merge and
/// bringing the work tree along: the next ralph — here one story at a time
/// — finishes the advance first, and works only what is left.
#[test]
fn a_merge_whose_work_tree_did_not_follow_is_finished_by_a_jobs_1_run() {
    let p = Project::with_prd(TWO);
    p.git(&["checkout", "-q", "-b", "ralph/par"]);
    let from = p.git(&["rev-parse", "HEAD"]).trim().to_string();
    // The merge of US-001, made the way the merge queue makes it: a commit
    // the branch is moved to, the work tree left where it was.
    let passing = TWO.replacen("\"passes\": false", "\"passes\": true", 1);
    let blob = |text: &str| {
        let f = p.path("blob.tmp");
        std::fs::write(&f, text).unwrap();
        let id = p.git(&["hash-object", "-w", "blob.tmp"]).trim().to_string();
        std::fs::remove_file(f).unwrap();
        id
    };
    let (prd, work) = (blob(&passing), blob("implementation of US-001\n"));
    let index = p.path(".git/merge-index");
    let git_with_index = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(p.dir())
            .env("GIT_INDEX_FILE", &index)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git_with_index(&["read-tree", &from]);
    git_with_index(&["update-index", "--add", "--cacheinfo", &format!("100644,{prd},prd.json")]);
    git_with_index(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("100644,{work},src/us-001.txt"),
    ]);
    let tree = git_with_index(&["write-tree"]);
    let to =
        p.git(&["commit-tree", &tree, "-p", &from, "-m", "feat: US-001 - One"]).trim().to_string();
    p.git(&["update-ref", "refs/heads/ralph/par", &to, &from]);
    std::fs::create_dir_all(p.path(".git/ralph")).unwrap();
    let journal = serde_json::json!({
        "run_id": "20261205-000000-0000-000000", "branch": "ralph/par", "jobs": 2,
        "workers": [], "queue": [],
        "merging": {"story": "US-001", "stories": ["US-001"], "from": from, "to": to},
    });
    std::fs::write(p.path(".git/ralph/parallel.json"), journal.to_string()).unwrap();
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5", "--jobs", "1"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    // US-001's work is there, and only US-002 was worked.
    assert_eq!(p.read("src/us-001.txt"), "implementation of US-001\n");
    let worked: Vec<String> = runs(&p).into_iter().map(|(_, _, s)| s).collect();
    assert_eq!(worked, ["US-002"], "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002"));
    assert!(!p.path(".git/ralph/parallel.json").exists());
}
