//! Agents that rewrite what ralph relies on, and files that are not what
//! they seem: FIFOs, symbolic links, read-only modes, history rewritten,
//! branches switched.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::harness::*;

const ONE_STORY: &str = r#"{"project":"P","branchName":"ralph/one","userStories":[
  {"id":"US-001","title":"Make done.txt","priority":1,"passes":false}]}"#;

/// Runs ralph, but never lets a hang hang the suite: after `limit` it is
/// killed and the test fails saying so.
fn run_within(p: &Project, args: &[&str], limit: Duration) -> Run {
    let mut child = p.spawn(args);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let r = to_run(child.wait_with_output().unwrap());
            panic!("ralph hung for {limit:?}: {r:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    to_run(child.wait_with_output().unwrap())
}

#[test]
fn a_fifo_where_a_file_should_be_never_hangs_ralph() {
    let limit = Duration::from_secs(60);
    // The handoff.
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nfifo handoff\n");
    let r = run_within(&p, &["1"], limit);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(r.stdout.contains("is a FIFO, not a regular file"), "{r:?}");
    // prd.json, replaced by the agent: the last good copy comes back.
    let p = Project::with_prd(ONE_STORY);
    p.script("[run 1]\nfifo prd\n[run *]\nimplement\n");
    let r = run_within(&p, &["3"], limit);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("is a FIFO, not a regular file); restored"), "{r:?}");
    assert!(p.path("prd.json").metadata().unwrap().is_file());
    // prd.json a FIFO before the run: a clear error, nothing changed.
    let p = Project::new();
    let fifo = std::process::Command::new("mkfifo").arg(p.path("prd.json")).status().unwrap();
    assert!(fifo.success());
    let r = run_within(&p, &["1"], limit);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("is a FIFO, not a regular file"), "{r:?}");
}

#[test]
fn a_prd_json_that_is_a_link_stays_a_link_and_its_target_gets_the_verdict() {
    let p = Project::new();
    p.write("plan/prd.json", ONE_STORY);
    std::os::unix::fs::symlink("plan/prd.json", p.path("prd.json")).unwrap();
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "Add the PRD"]);
    // A liar: marks its story, does nothing the gate accepts.
    p.script("[run *]\nmark-pass\ncommit feat: {id} - {title}\n");
    let r = p.run(&["1", "--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(r.stdout.contains("claimed but the gate failed"), "{r:?}");
    let link = std::fs::symlink_metadata(p.path("prd.json")).unwrap();
    assert!(link.file_type().is_symlink(), "prd.json was replaced by a regular file");
    let target: serde_json::Value = serde_json::from_str(&p.read("plan/prd.json")).unwrap();
    assert_eq!(target["userStories"][0]["passes"], false, "the target kept the false claim");
    let staged = p.git(&["ls-files", "-s", "prd.json"]);
    assert!(staged.starts_with("120000"), "git no longer sees a link: {staged}");
}

#[test]
fn a_read_only_prd_json_keeps_its_mode() {
    let p = Project::with_prd(ONE_STORY);
    let prd = p.path("prd.json");
    std::fs::set_permissions(&prd, std::fs::Permissions::from_mode(0o444)).unwrap();
    p.script("[run *]\nwrite done.txt yes\ncommit feat: {id} - {title}\n");
    let r = p.run(&["1", "--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001"), "{r:?}");
    let mode = std::fs::metadata(&prd).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o444, "prd.json's mode changed");
}

#[test]
fn commits_an_agent_drops_with_git_reset_hard_are_restored() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1-2]\nimplement\n[run 3]\nrun git reset -q --hard HEAD~2\n[run *]\nimplement\n");
    let r = p.run(&["10", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(
        r.stdout.contains("rewrote the history of ralph/demo: 2 commits dropped; ralph restored"),
        "{r:?}"
    );
    assert!(r.stdout.contains("iteration 3 failed"), "{r:?}");
    let log = p.log();
    assert!(
        log.iter().any(|s| s == "feat: US-001 - First")
            && log.iter().any(|s| s == "feat: US-002 - Second"),
        "{log:?}"
    );
    assert!(p.path("src/us-001.txt").exists() && p.path("src/us-002.txt").exists());
    assert!(p.prompt(4).contains("never rewrite its history"), "{}", p.prompt(4));
}

#[test]
fn history_rewritten_past_repair_stops_the_run_with_the_way_back() {
    let p = Project::with_prd(THREE_STORIES);
    p.script(
        "[run 1-2]\nimplement\n\
         [run 3]\nrun git reset -q --hard HEAD~2\nwrite other.txt x\ncommit rewritten\n\
         [run *]\nimplement\n",
    );
    let r = p.run(&["10", "--gate", "true"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stdout.contains("git reset --hard"), "{r:?}");
    // The stories whose commits are gone do not pass, and are not reported verified.
    assert!(!p.passes("US-001") && !p.passes("US-002"), "{r:?}");
    assert!(!r.stdout.contains("✓ US-001"), "{r:?}");
}

#[test]
fn an_agent_that_checks_out_another_branch_is_put_back_and_fails_its_iteration() {
    let p = Project::with_prd(THREE_STORIES);
    p.script(
        "[run 1]\nrun git checkout -q main\nwrite stray.txt x\ncommit stray on main\n\
         [run *]\nimplement\n",
    );
    let r = p.run(&["10", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("the agent left HEAD on branch main"), "{r:?}");
    assert!(r.stdout.contains("ralph switched back to ralph/demo"), "{r:?}");
    assert!(
        r.stdout.contains("the agent committed to main (1 commit); ralph left it there"),
        "{r:?}"
    );
    assert!(r.stdout.contains("iteration 1 failed"), "{r:?}");
    // Nothing of ralph's went to main: only the agent's stray commit is there.
    let main = p.git(&["log", "--format=%s", "main"]);
    assert_eq!(main.lines().next(), Some("stray on main"), "{main}");
    assert!(!main.contains("chore:") && !main.contains("feat: US-"), "{main}");
}

#[test]
fn ralphs_state_survives_git_clean_and_rm_rf_of_ralph() {
    let p = Project::with_prd(THREE_STORIES);
    // An earlier run left a lesson (its gate failed once).
    p.script("[run 1]\nprint nothing\n[run *]\nimplement\n");
    p.run(&["1", "--gate", "test -f src/us-001.txt"]);
    let lessons = || -> std::collections::BTreeSet<String> {
        std::fs::read_dir(p.path(".git/ralph/lessons"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    };
    let before = lessons();
    assert_eq!(before.len(), 1);
    p.script(
        "[run 2]\nimplement\nrun git clean -q -fdx\n\
         [run 3]\nimplement\nrun rm -rf .ralph\n\
         [run *]\nimplement\n",
    );
    let r = p.run(&["10", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(lessons().is_superset(&before), "the lesson went with the work tree's clean-up");
    assert!(p.path(".git/ralph/circuit.json").exists());
    assert!(p.path(".ralph/.gitignore").exists(), ".ralph/ was not recreated");
}

#[test]
fn state_an_older_ralph_kept_in_dot_ralph_moves_to_the_git_directory() {
    let p = Project::with_prd(THREE_STORIES);
    let open = r#"{"version":1,"state":"OPEN","reason":"no progress in 3 iterations in a row","cause":"no_progress","changed_at":"2026-01-01T00:00:00Z","opened_at":"2999-01-01T00:00:00Z","total_opens":1,"counters":{"no_progress":3,"same_error":0,"permission_denials":0,"failures":0},"last_error":null,"last_iteration":3}"#;
    p.write(".ralph/circuit.json", open);
    p.write(".ralph/.gitignore", "# Written by ralph: its runtime state stays out of your commits.\n# config.toml and prompt.md are yours to commit.\n*\n!.gitignore\n!config.toml\n!prompt.md\n");
    p.script("[run *]\nimplement\n");
    let r = p.run(&["3"]);
    // The breaker it left open still holds: it moved, it was not lost.
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert!(r.stdout.contains("moved ralph's state (circuit.json)"), "{r:?}");
    assert!(!p.path(".ralph/circuit.json").exists() && p.path(".git/ralph/circuit.json").exists());
    // Its old ignore-everything rule is replaced by one that names ralph's files only.
    let ignore = p.read(".ralph/.gitignore");
    assert!(!ignore.lines().any(|l| l == "*"), "{ignore}");
}

/// Starts a run whose agent sleeps in its second iteration, once the
/// first deleted the lock file; returns when the second iteration runs.
fn running_after_its_lock_was_deleted(p: &Project) -> std::process::Child {
    p.script("[run 1]\nrun rm -f .git/ralph/lock\n[run *]\nsleep 60\n");
    let child = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 2));
    child
}

#[test]
fn the_lock_holds_even_after_an_agent_deleted_it() {
    let p = Project::with_prd(THREE_STORIES);
    let mut first = running_after_its_lock_was_deleted(&p);
    let second = p.run(&["5"]);
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(second.code, code(exit::LOCKED), "{second:?}");
    assert_eq!(p.agent_runs().len(), 2, "the second ralph ran an agent");
}

#[test]
fn two_ralphs_on_one_prd_from_different_folders_are_one_project() {
    let p = Project::with_prd(THREE_STORIES);
    std::fs::create_dir_all(p.path("sub")).unwrap();
    p.script("[run *]\nsleep 60\n");
    let mut first = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    let second = to_run(
        p.ralph()
            .current_dir(p.path("sub"))
            .args(["-C", ".", "--prd", "../prd.json", "5"])
            .output()
            .unwrap(),
    );
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(second.code, code(exit::LOCKED), "{second:?}");
}

#[test]
fn numbers_and_fields_ralph_does_not_change_are_written_as_they_were() {
    let text = r#"{
  "project": "P",
  "branchName": "ralph/one",
  "budget": 99999999999999999999999999,
  "userStories": [
    {
      "id": "US-001",
      "title": "Make done.txt",
      "priority": 1e2,
      "estimate": 2.50,
      "passes": false
    }
  ]
}
"#;
    let p = Project::with_prd(text);
    p.script("[run *]\nwrite done.txt yes\ncommit feat: {id} - {title}\n");
    let r = p.run(&["1", "--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    // ralph set "passes" and nothing else.
    assert_eq!(p.read("prd.json"), text.replace("\"passes\": false", "\"passes\": true"));
}

#[test]
fn an_agent_that_rewrites_the_plan_has_it_set_back_and_proposed_to_the_person() {
    let p = Project::with_prd(THREE_STORIES);
    p.script(
        "[run 1]\n\
         add-story {\"id\":\"EVIL-1\",\"title\":\"Invented\",\"priority\":0,\"passes\":false}\n\
         set-story US-002 title \"Something else\"\n\
         set-story US-001 notes \"tried the easy way first\"\n\
         implement\n\
         [run *]\nimplement\n",
    );
    let r = p.run(&["2", "--gate", "true"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    // The invented story was never worked on, nor "verified" by the gate.
    assert_eq!(p.agent_runs(), ["US-001", "US-002"], "{r:?}");
    let prd = p.prd();
    let stories = prd["userStories"].as_array().unwrap();
    assert!(!stories.iter().any(|s| s["id"] == "EVIL-1"), "{prd}");
    let story = |id: &str| stories.iter().find(|s| s["id"] == id).unwrap().clone();
    assert_eq!(story("US-002")["title"], "Second", "{prd}");
    // What is the agent's to change stays changed.
    assert_eq!(story("US-001")["notes"], "tried the easy way first", "{prd}");
    assert_eq!(story("US-001")["passes"], true, "{prd}");
    // Named in the log and in the next prompt…
    assert!(
        r.stdout.contains(
            "the agent changed US-002's \"title\", a new story (EVIL-1) in prd.json: set back"
        ),
        "{r:?}"
    );
    assert!(p.prompt(2).contains("US-002's \"title\", a new story (EVIL-1)"), "{}", p.prompt(2));
    // …and proposed to the person in the report, with the agent's version kept.
    assert!(
        r.stdout.contains("proposed for prd.json by the agent in iteration 1 (US-001)"),
        "{r:?}"
    );
    let logs = p.path(".git/ralph/logs");
    let run = std::fs::read_dir(&logs).unwrap().flatten().find(|e| e.path().is_dir()).unwrap();
    let report = std::fs::read_to_string(run.path().join("report.md")).unwrap();
    assert!(report.contains("## Changes the agent proposed to prd.json"), "{report}");
    assert!(report.contains("a new story (EVIL-1)"), "{report}");
    let theirs = std::fs::read_to_string(run.path().join("iter-1.prd-proposed.json")).unwrap();
    assert!(theirs.contains("EVIL-1") && theirs.contains("Something else"), "{theirs}");
}

/// ralph's own git commands (pushes, fetches) run outside the sandbox and
/// read `.git/config` and `.git/hooks/`, which the agent can write: a
/// credential helper or a pre-push hook planted there is set back before
/// anything of ralph's reads it, and the iteration is judged tampered.
#[test]
fn an_agent_that_plants_a_git_hook_or_a_credential_helper_has_them_set_back() {
    let p = Project::with_prd(ONE_STORY);
    let config = p.read(".git/config");
    p.script(
        "[run *]\nrun git config credential.helper !touch-outside\n\
         put .git/hooks/pre-push #!/bin/sh\\ntouch /tmp/owned\\n\n\
         write done.txt done\nmark-pass\ncommit feat: {id} - {title}\n",
    );
    let r = p.run(&["1", "--gate", "true"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(
        r.stdout.contains(
            "the agent changed .git/config, .git/hooks/pre-push, which ralph's own git commands \
             read or run: set back"
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("US-001 Make done.txt (claimed: yes, not verified)"), "{r:?}");
    assert!(!p.passes("US-001"));
    assert_eq!(p.read(".git/config"), config);
    assert!(!p.path(".git/hooks/pre-push").exists());
    let status = p.run(&["status"]);
    assert!(status.stdout.contains("the protected path .git/config"), "{status:?}");
}
