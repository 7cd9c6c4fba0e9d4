//! Trust, but verify: the gate decides, lessons and rules carry what failed
//! into later prompts, handoffs are validated, budgets end runs in time,
//! and a run killed with SIGKILL resumes where it stopped.

use std::time::{Duration, Instant};

use crate::harness::*;

const ONE_STORY: &str = r#"{"project":"P","branchName":"ralph/one","userStories":[
  {"id":"US-001","title":"Make done.txt","priority":1,"passes":false}]}"#;

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn a_lying_agent_never_completes_the_run() {
    let p = Project::with_prd(ONE_STORY);
    let handoff = r#"{"status":"complete","summary":"done","evidence":["trust me"],"nextSteps":[],"blocker":""}"#;
    p.script(&format!("[run *]\nmark-pass\ncommit feat: {{id}} - {{title}}\nhandoff {handoff}\npromise\nstatus COMPLETE true\n"));
    let r = p.run(&["3", "--gate", "test -f done.txt", "--auto-reset"]);
    // Commits that touch only prd.json are no progress: the breaker stops it.
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert!(!p.passes("US-001"));
    assert!(r.stdout.contains("US-001 was claimed but the gate failed"), "{r:?}");
    assert!(r.stdout.contains("claimed: yes, not verified"), "{r:?}");
    assert!(p.log().iter().any(|s| s == "chore: US-001 does not pass ralph's gate yet"));
}

#[test]
fn a_silent_agent_whose_gate_passes_gets_its_story_marked() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nwrite done.txt yes\ncommit feat: {id} - {title}\n");
    let r = p.run(&["3", "--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001"));
    assert!(r.stdout.contains("ralph marked US-001 as passing"), "{r:?}");
    assert_eq!(p.log()[0], "chore: mark US-001 as passing (verified by ralph's gate)");
    assert!(r.stdout.contains("claimed: no, verified"), "{r:?}");
}

#[test]
fn a_passing_gate_does_not_mark_a_story_nobody_worked_on() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint thinking\n");
    let r = p.run(&["2", "--gate", "true", "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(!p.passes("US-001"));
    assert!(p.prompt(2).contains("nothing was done for US-001"), "{}", p.prompt(2));
}

#[test]
fn the_gate_summary_printed_last_reaches_the_next_prompt() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nimplement\n");
    let gate =
        "sh -c 'seq 1 10000; echo FAIL_SUMMARY; seq 1 3000 >&2; echo ERR_SUMMARY >&2; exit 1'";
    let r = p.run(&["2", "--gate", gate, "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let prompt = p.prompt(2);
    assert!(prompt.contains("FAIL_SUMMARY") && prompt.contains("ERR_SUMMARY"), "{prompt}");
    assert!(!prompt.contains("\n1\n2\n3\n"), "the head of the output should be cut");
    // Two tails of at most 4 KB each, plus ralph's own words.
    assert!(prompt.len() < p.prompt(1).len() + 3 * 4096 + 2000, "prompt grew to {}", prompt.len());
}

#[test]
fn a_gate_that_cannot_run_stops_before_any_agent() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["3", "--gate", "/nonexistent/gate"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("the gate cannot run"), "{r:?}");
    assert!(p.agent_runs().is_empty());
    // Checked before anything is created: no branch, no progress.txt, no state.
    assert_eq!(p.git(&["branch", "--show-current"]).trim(), "main");
    assert!(!p.path("progress.txt").exists() && !p.path(".git/ralph").exists(), "{r:?}");
}

#[test]
fn a_gate_that_hangs_is_a_failed_iteration_not_a_hang() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nimplement\n");
    p.write(".ralph/config.toml", "[gate]\ntimeout = \"1s\"\nbaseline = false\n");
    let started = Instant::now();
    let r = p.run(&["1", "--gate", "sleep 60"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(r.stdout.contains("gate failed"), "{r:?}");
    assert!(!p.passes("US-001"));
}

#[test]
fn the_lesson_of_iteration_one_is_in_iteration_two_once() {
    let p = Project::with_prd(ONE_STORY);
    let handoff = r#"{"status":"continue","summary":"tried","evidence":[],"nextSteps":["fix it"],"blocker":"","lesson":"LESSON-MARKER-42: done.txt must exist"}"#;
    p.script(&format!(
        "[run 1]\nhandoff {handoff}\n[run *]\nwrite done.txt ok\ncommit feat: {{id}} - {{title}}\n"
    ));
    let r = p.run(&["3", "--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let prompt = p.prompt(2);
    assert_eq!(count(&prompt, "LESSON-MARKER-42"), 1, "{prompt}");
    assert!(prompt.contains("Lessons — do not repeat"), "{prompt}");
    assert!(!p.prompt(1).contains("LESSON-MARKER-42"));
}

#[test]
fn repeated_failures_stay_a_candidate_until_a_person_arms_the_rule() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint nothing useful\n");
    p.write(
        ".ralph/config.toml",
        "[circuit]\nno_progress = 0\nsame_error = 0\nfailures = 0\n[limits]\ncalls_per_hour = 0\n[run]\nrequire_handoff = false\n",
    );
    let gate = "sh -c 'echo error: the widget is broken; exit 1'";
    let r = p.run(&["100", "--gate", gate]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(p.agent_runs().len(), 100);
    let list = p.run(&["rules", "list", "--json"]);
    let rules: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let cards = rules["cards"].as_array().unwrap();
    let card = cards.iter().find(|c| c["category"] == "gate-failure").expect("a gate-failure card");
    assert_eq!(card["state"], "candidate", "{card}");
    assert_eq!(card["occurrences"], 100);
    assert!(!p.prompt(100).contains("Rules for this project"));
    let id = card["id"].as_str().unwrap();
    let armed = p.run(&["rules", "arm", id, "--statement", "RULE-MARKER: never break the widget"]);
    assert_eq!(armed.code, 0, "{armed:?}");
    p.run(&["1", "--gate", gate, "--fresh"]);
    let prompt = p.prompt(101);
    assert!(
        prompt.contains("Rules for this project") && prompt.contains("RULE-MARKER"),
        "{prompt}"
    );
}

#[test]
fn an_unreadable_rules_file_is_never_overwritten() {
    let p = Project::with_prd(ONE_STORY);
    p.write(".git/ralph/rules.json", "{ hand edit in progress");
    let r = p.run(&["rules", "arm", "abc"]);
    assert_ne!(r.code, code(exit::COMPLETE));
    assert!(r.stderr.contains("rules file unreadable"), "{r:?}");
    assert_eq!(p.read(".git/ralph/rules.json"), "{ hand edit in progress");
    p.script("[run *]\nprint hi\n");
    let r = p.run(&["1", "--gate", "false"]);
    assert!(r.stdout.contains("rules file unreadable"), "{r:?}");
    assert_eq!(p.read(".git/ralph/rules.json"), "{ hand edit in progress");
}

#[test]
fn invalid_and_oversized_handoffs_are_named_and_their_reason_goes_next() {
    let p = Project::with_prd(ONE_STORY);
    let big = format!(
        r#"{{"status":"continue","summary":"{}","evidence":[],"nextSteps":["x"],"blocker":""}}"#,
        "y".repeat(20_000)
    );
    p.script(&format!(
        "[run 1]\nhandoff {{\"status\":\"continue\",\"nextSteps\":[]}}\n[run 2]\nhandoff {big}\n[run *]\nprint hi\n"
    ));
    p.write(".ralph/config.toml", "[circuit]\nfailures = 5\nno_progress = 5\n");
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    // A bad handoff is its own signal, never a failed run.
    assert!(r.stdout.contains("iteration 1 made no progress"), "{r:?}");
    assert!(r.stdout.contains("· handoff: "), "{r:?}");
    assert!(!r.stdout.contains("iteration 2 failed"), "{r:?}");
    let second = p.prompt(2);
    assert!(second.contains("handoff was rejected") && second.contains("nextSteps"), "{second}");
    let third = p.prompt(3);
    assert!(third.contains("handoff was rejected") && third.contains("16384"), "{third}");
}

#[test]
fn a_blocked_handoff_stops_with_its_exit_code_and_says_why() {
    let p = Project::with_prd(ONE_STORY);
    p.script(r#"[run *]
handoff {"status":"blocked","summary":"stuck","evidence":[],"nextSteps":[],"blocker":"need an API key for the payments sandbox"}
"#);
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::BLOCKED), "{r:?}");
    assert!(r.stdout.contains("need an API key for the payments sandbox"), "{r:?}");
    assert_eq!(p.agent_runs().len(), 1);
}

#[test]
fn max_duration_ends_a_run_in_time_with_one_run_end_event() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nsleep 60\n");
    let started = Instant::now();
    let r = p.run(&["5", "--max-duration", "2s", "--json"]);
    assert_eq!(r.code, code(exit::BUDGET), "{r:?}");
    // 2 s budget + 1 s grace + slack for a busy machine.
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    assert_eq!(count(&r.stdout, "\"event\":\"run_end\""), 1, "{r:?}");
    let state = p.read(".git/ralph/state.json");
    assert!(state.contains("\"outcome\": \"budget\""), "{state}");
}

#[test]
fn the_report_names_the_iteration_closest_to_passing() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run 1]\nwrite fails.txt 5\ncommit one\n[run 2]\nwrite fails.txt 2\ncommit two\n[run 3]\nwrite fails.txt 4\ncommit three\n");
    let gate = "sh -c 'echo \"test result: FAILED. 1 passed; $(cat fails.txt) failed; 0 ignored\"; exit 101'";
    let r = p.run(&["3", "--gate", gate, "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let sha = p.git(&["log", "--format=%h", "-1", "--grep=^two$"]).trim().to_string();
    assert!(
        r.stdout.contains("closest to passing: iteration 2 (gate failed: 2 tests failing"),
        "{r:?}"
    );
    assert!(r.stdout.contains(&format!("commit {}", &sha[..7])), "{sha}: {r:?}");
    // The work tree is left as the agent left it.
    assert_eq!(p.read("fails.txt").trim(), "4");
}

#[test]
fn a_run_killed_mid_iteration_resumes_with_nothing_lost() {
    let p = Project::with_prd(super::harness::THREE_STORIES);
    p.script("[run 1]\nimplement\n[run 2]\nmark-pass\nsleep 60\n[run *]\nimplement\n");
    let mut child = p.spawn(&["10"]);
    assert!(
        eventually(Duration::from_secs(20), || p.agent_runs().len() == 2),
        "iteration 2 never started"
    );
    // Let the agent mark its story before the crash.
    assert!(eventually(Duration::from_secs(10), || p.passes_now("US-002")));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let state: serde_json::Value = serde_json::from_str(&p.read(".git/ralph/state.json")).unwrap();
    assert_eq!(state["iteration"], 2);
    assert_eq!(state["phase"], "agent");
    let r = p.run(&["10"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(
        r.stdout.contains("iteration 2 of 10, resumed; iteration 2 was cut off and runs again"),
        "{r:?}"
    );
    assert!(r.stdout.contains("iteration 2 died before US-002 was verified"), "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002") && p.passes("US-003"));
    // Iteration 2 ran again and redid US-002, which the dead one never finished.
    assert_eq!(p.agent_runs(), ["US-001", "US-002", "US-002", "US-003"]);
    assert!(r.stdout.contains("iteration 2/10 · US-002"), "{r:?}");
    assert!(r.stdout.contains("after 3 iterations"), "{r:?}");
    assert!(
        p.path(".git/ralph/logs")
            .read_dir()
            .unwrap()
            .flatten()
            .any(|run| run.path().join("iter-2.retry-2.log").exists()),
        "the dead attempt's log was overwritten"
    );
}

/// Issue 29: an agent cut off after it appended its progress entry, before
/// the iteration's commit. The iteration runs again from progress.txt as
/// it was when it started, so the entry is there once; the earlier
/// iteration's entry stays, and what was cut is kept in the log folder.
fn cut_off_after_its_progress_entry(signal: i32) {
    let p = Project::with_prd(super::harness::THREE_STORIES);
    p.script(
        "[story US-002 1]\nprogress ## entry US-002\ntouch-shared appended\nsleep 60\n\
         [run *]\nprogress ## entry {id}\nimplement\n",
    );
    let mut child = p.spawn(&["10"]);
    let appended = p.agent_dir().join("appended");
    assert!(eventually(Duration::from_secs(30), || appended.exists()), "no entry appended");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let _ = child.wait();
    let dir = p.dir().canonicalize().unwrap();
    let gone = eventually(Duration::from_secs(30), || processes_in(&dir).is_empty());
    assert!(gone, "{:?} outlived ralph", processes_in(&dir));
    assert_eq!(count(&p.read("progress.txt"), "## entry US-002\n"), 1);
    let r = p.run(&["10"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(p.agent_runs(), ["US-001", "US-002", "US-002", "US-003"]);
    let progress = p.read("progress.txt");
    for id in ["US-001", "US-002", "US-003"] {
        assert_eq!(count(&progress, &format!("## entry {id}\n")), 1, "{id}:\n{progress}");
        assert_eq!(count(&progress, &format!("## now - {id}\n")), 1, "{id}:\n{progress}");
    }
    assert!(r.stdout.contains("set back to how it was when iteration 2 started"), "{r:?}");
    assert_eq!(p.git(&["show", "HEAD:progress.txt"]), progress);
    let kept: Vec<String> = p
        .path(".git/ralph/logs")
        .read_dir()
        .unwrap()
        .flatten()
        .filter_map(|run| std::fs::read_to_string(run.path().join("iter-2.progress-cut.txt")).ok())
        .collect();
    assert_eq!(kept, ["## entry US-002\n"]);
}

#[test]
fn a_run_killed_after_its_agent_wrote_progress_has_the_entry_once() {
    cut_off_after_its_progress_entry(libc::SIGKILL);
}

#[test]
fn a_run_terminated_after_its_agent_wrote_progress_has_the_entry_once() {
    cut_off_after_its_progress_entry(libc::SIGTERM);
}

#[test]
fn fresh_starts_over_instead_of_resuming() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run 1]\nsleep 60\n[run *]\nimplement\n");
    let mut child = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let r = p.run(&["5", "--fresh"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(!r.stdout.contains("resuming"), "{r:?}");
    assert!(r.stdout.contains("iteration 1/5"), "{r:?}");
}

const TWO_STORIES: &str = r#"{"project":"P","branchName":"ralph/two","userStories":[
  {"id":"US-001","title":"One","priority":1,"passes":false},
  {"id":"US-002","title":"Two","priority":2,"passes":false}]}"#;

#[test]
fn an_agent_cannot_mark_other_stories_or_rewrite_verify() {
    let p = Project::with_prd(TWO_STORIES);
    p.script("[run 1]\nset-all-passing\n[run 2]\nset-verify true\n[run *]\nprint nothing\n");
    let r = p.run(&["3", "--gate", "test -f never", "--auto-reset"]);
    assert_ne!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(!p.passes("US-001") && !p.passes("US-002"), "{r:?}");
    assert!(
        r.stdout.contains("the agent changed US-002's \"passes\" in prd.json: set back"),
        "{r:?}"
    );
    assert!(r.stdout.contains("\"verify\" in prd.json: set back"), "{r:?}");
    assert!(p.prd()["userStories"][0].get("verify").is_none(), "verify survived");
    assert!(p.prompt(2).contains("Only the \"passes\" field of your"), "{}", p.prompt(2));
}

#[test]
fn an_empty_commit_is_not_work() {
    let p = Project::with_prd(TWO_STORIES);
    p.script("[run *]\nprogress notes only\ncommit feat: {id} - {title}\n");
    let r = p.run(&["2", "--gate", "true", "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(!p.passes("US-001"), "a bookkeeping-only commit finished a story: {r:?}");
}

#[test]
fn a_claim_is_undone_when_the_iteration_ends_before_any_verdict() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(
        "[run *]\nmark-pass\nclaude-error 429 API Error: Request rejected (429) · slow down\n",
    );
    let r = to_run(
        p.ralph()
            .args(["3", "--gate", "test -f never", "--no-wait"])
            .env("RALPH_AGENT_FORMAT", "claude")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, code(exit::RATE_LIMITED), "{r:?}");
    assert!(r.stdout.contains("--no-wait"), "{r:?}");
    assert!(!p.passes("US-001"), "{r:?}");
    assert_eq!(p.agent_runs().len(), 1);
}

#[test]
fn a_missing_verify_program_stops_before_any_agent() {
    let p = Project::with_prd(
        r#"{"userStories":[{"id":"US-001","title":"x","passes":false,"verify":"no-such-checker --all"}]}"#,
    );
    p.script("[run *]\nimplement\n");
    let r = p.run(&["2"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("`no-such-checker` (the \"verify\" of US-001) not found"), "{r:?}");
    assert!(p.agent_runs().is_empty());
}

#[test]
fn every_story_marked_but_the_gate_failing_has_its_own_exit_code() {
    let p = Project::with_prd(&TWO_STORIES.replace("\"passes\":false", "\"passes\":true"));
    p.script("[run *]\nimplement\n");
    let r = p.run(&["2", "--gate", "false"]);
    assert_eq!(r.code, code(exit::GATE_DISAGREES), "{r:?}");
    assert!(r.stdout.contains("every story is marked passing, but the gate fails"), "{r:?}");
    assert!(p.agent_runs().is_empty());
}

#[test]
fn fresh_after_a_crash_still_undoes_the_dead_iterations_claim() {
    let p = Project::with_prd(TWO_STORIES);
    p.script("[run 1]\nmark-pass\nsleep 60\n[run *]\nprint hi\n");
    let mut child = p.spawn(&["5", "--gate", "test -f never"]);
    assert!(eventually(Duration::from_secs(20), || p.passes_now("US-001")));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let r = p.run(&["1", "--fresh", "--gate", "test -f never"]);
    assert!(r.stdout.contains("US-001 is marked unfinished again"), "{r:?}");
    assert!(!p.passes("US-001"));
}

#[test]
fn the_run_clock_is_not_counted_twice_across_checkpoints() {
    let p = Project::with_prd(TWO_STORIES);
    p.script("[run *]\nsleep 0.3\n");
    let started = Instant::now();
    p.run(&["4", "--auto-reset"]);
    let wall = started.elapsed().as_millis() as u64;
    let state: serde_json::Value = serde_json::from_str(&p.read(".git/ralph/state.json")).unwrap();
    let recorded = state["elapsed_ms"].as_u64().unwrap();
    assert!(recorded <= wall + 50, "recorded {recorded} ms of a {wall} ms run");
}

#[test]
fn a_failure_that_differs_only_in_timings_and_addresses_is_one_lesson_and_one_card() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint nothing useful\n");
    p.write(".ralph/config.toml", "[circuit]\nno_progress = 0\nsame_error = 0\nfailures = 0\n");
    // Python's unittest, as it prints a failure: the time and the object's
    // address change on every run.
    let gate = "sh -c 'echo \"ERROR: test_zero (tests.test_calc.TestCalc.test_zero)\"; \
                echo \"ZeroDivisionError: division by zero <Calc at 0x7ffd$(date +%N)>\"; \
                echo \"Ran 3 tests in 0.$(date +%N)s\"; exit 1'";
    let r = p.run(&["3", "--gate", gate]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let prompt = p.prompt(3);
    // One lesson, seen twice before this prompt, not two that differ in a time.
    assert_eq!(count(&prompt, "\nFrom the failure output"), 1, "{prompt}");
    assert!(prompt.contains("From the failure output, 2 times"), "{prompt}");
    let list = p.run(&["rules", "list", "--json"]);
    let rules: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let cards = rules["cards"].as_array().unwrap();
    let gate_cards: Vec<_> = cards.iter().filter(|c| c["category"] == "gate-failure").collect();
    assert_eq!(gate_cards.len(), 1, "{cards:?}");
    let id = gate_cards[0]["id"].as_str().unwrap();
    let show = p.run(&["rules", "show", id]);
    assert_eq!(show.code, code(exit::COMPLETE), "{show:?}");
    assert!(show.stdout.contains("occurrences:  3 (ready)"), "{show:?}");
    assert!(!show.stdout.contains("once"), "{show:?}");
}

#[test]
fn a_failed_gate_names_the_failing_test_and_its_log() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint working\n");
    p.write(".ralph/config.toml", "[gate]\nbaseline = false\n");
    let gate = "sh -c 'echo \"ERROR: test_zero (tests.test_calc.TestCalc.test_zero)\" >&2; \
                echo \"ZeroDivisionError: division by zero\" >&2; \
                echo \"Ran 3 tests in 0.001s\" >&2; echo \"FAILED (errors=1)\" >&2; exit 1'";
    let r = p.run(&["1", "--gate", gate]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let line = r.stdout.lines().find(|l| l.contains("gate failed for US-001")).expect("gate line");
    let (_, what) = line.split_once(" (exit 1) in ").unwrap_or_else(|| panic!("{line}"));
    let (_, what) = what.split_once(": ").unwrap_or_else(|| panic!("{line}"));
    let (what, log) = what.split_once(" · log: ").unwrap_or_else(|| panic!("{line}"));
    assert_eq!(what, "1 test failing: test_zero", "{line}");
    assert!(log.starts_with(".git/ralph/logs/") && log.ends_with("/gate-1.log"), "{line}");
    assert!(p.read(log).contains("ZeroDivisionError"), "{log}");
    // The same summary in the JSON event.
    let r = p.run(&["1", "--gate", "sh -c 'echo error: the widget is broken; exit 1'", "--json"]);
    let event: serde_json::Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "gate")
        .unwrap_or_else(|| panic!("no gate event: {r:?}"));
    let summary = event["summary"].as_str().unwrap();
    assert!(summary.starts_with("error: the widget is broken · log: .git/ralph/logs/"), "{event}");
}

#[test]

fn a_gate_with_shell_syntax_runs_through_sh() {
    let p = Project::with_prd(ONE_STORY);
    p.write("tests/.keep", "");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "tests folder"]);
    p.script("[run *]\nwrite tests/done.txt yes\ncommit feat: {id} - {title}\n");
    let r = p.run(&["2", "--gate", "cd tests && test -f done.txt"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001"), "{r:?}");
    // A story's own verify is the user's command too.
    let p = Project::with_prd(
        r#"{"userStories":[{"id":"US-001","title":"x","passes":false,"verify":"cd tests && test -f done.txt"}]}"#,
    );
    p.write("tests/.keep", "");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "tests folder"]);
    p.script("[run *]\nwrite tests/done.txt yes\ncommit feat: {id} - {title}\n");
    let r = p.run(&["2"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
}

#[test]
fn a_shell_gate_whose_program_is_missing_stops_before_any_agent() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nimplement\n");
    // Written as argv, as config files may: `sh` exists, the script's program does not.
    p.write(
        ".ralph/config.toml",
        "[gate]\ncommand = [\"sh\", \"-c\", \"no-such-test-runner -q | tee gate.log\"]\n",
    );
    let r = p.run(&["2"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("`no-such-test-runner` (gate.command) not found"), "{r:?}");
    assert!(p.agent_runs().is_empty());
}

/// Issue 32, item 1: a run killed after its first story was verified
/// reports that story as claimed and verified when it resumes — the kill
/// does not turn the run's own work into someone else's.
#[test]
fn a_resumed_run_reports_the_stories_verified_before_the_kill_as_verified() {
    let p = Project::with_prd(super::harness::THREE_STORIES);
    p.script("[run 1]\nimplement\n[run 2]\nsleep 60\n[run *]\nimplement\n");
    let mut child = p.spawn(&["10", "--gate", "true"]);
    assert!(
        eventually(Duration::from_secs(20), || p.agent_runs().len() == 2),
        "iteration 2 never started"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let r = p.run(&["10", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    for id in ["US-001 First", "US-002 Second", "US-003 Third"] {
        assert!(r.stdout.contains(&format!("✓ {id} (claimed: yes, verified)")), "{id}: {r:?}");
    }
    let report = p.run(&["report"]);
    assert!(report.stdout.contains("3 verified at the end"), "{report:?}");
}

/// The same for a parallel run killed after its first merge.
#[test]
fn a_resumed_parallel_run_reports_the_stories_merged_before_the_kill_as_verified() {
    let p = Project::with_prd(super::harness::THREE_STORIES);
    p.script("[run 1]\nimplement\n[run *]\nsleep 3\nimplement\n");
    let mut child = p.spawn(&["10", "--gate", "true", "--jobs", "2"]);
    assert!(
        eventually(Duration::from_secs(30), || p.passes_now("US-001")),
        "US-001 was never merged"
    );
    kill_9_and_settle(&mut child, &p.dir());
    let r = p.run(&["10", "--gate", "true", "--jobs", "2"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    for id in ["US-001 First", "US-002 Second", "US-003 Third"] {
        assert!(r.stdout.contains(&format!("✓ {id} (claimed: yes, verified)")), "{id}: {r:?}");
    }
    let report = p.run(&["report"]);
    assert!(report.stdout.contains("3 verified at the end"), "{report:?}");
}

/// Issue 32, item 6: a gate that prints more than `logs.max_file_bytes`
/// leaves logs of about that size — the start of its output, a line saying
/// how much was cut, and its end — not one copy of everything per run.
#[test]
fn gate_logs_are_capped_keeping_their_head_and_tail() {
    let p = Project::with_prd(ONE_STORY);
    p.write(".ralph/config.toml", "[logs]\nmax_file_bytes = 100000\n");
    p.script("[run *]\nprint working\n");
    let gate = "sh -c 'echo first-line; yes filler | head -c 3000000; echo last-line; exit 1'";
    let r = p.run(&["2", "--gate", gate, "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let runs: Vec<_> = p.path(".git/ralph/logs").read_dir().unwrap().flatten().collect();
    let mut seen = 0;
    for run in runs {
        for name in ["gate-baseline.log", "gate-1.log", "gate-2.log"] {
            let Ok(log) = std::fs::read_to_string(run.path().join(name)) else { continue };
            seen += 1;
            assert!(log.len() < 100_300, "{name}: {} bytes", log.len());
            assert!(log.starts_with("first-line\n"), "{name}");
            assert!(log.ends_with("last-line\n"), "{name}: ends {:?}", &log[log.len() - 40..]);
            assert!(log.contains("bytes of output cut here (logs.max_file_bytes)"), "{name}");
        }
    }
    assert_eq!(seen, 3, "the baseline's and both iterations' gate logs");
}
