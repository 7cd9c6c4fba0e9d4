//! What counts: only evidence (files changed, commits beyond bookkeeping, a
//! story the gate verified) is progress, done means committed, a missing
//! handoff is not a broken CLI, and what ralph reports is what happened.

use crate::harness::*;

const ONE_STORY: &str = r#"{"project":"P","branchName":"ralph/one","userStories":[
  {"id":"US-001","title":"Make done.txt","priority":1,"passes":false}]}"#;

const HANDOFF: &str = r#"{"status":"continue","summary":"worked on it","evidence":["it compiles"],"nextSteps":["go on"],"blocker":""}"#;

/// A status block claiming three tasks done, and a valid handoff: a liar
/// that follows the protocol to the letter.
fn liar() -> String {
    let block = [
        "---RALPH_STATUS---",
        "STATUS: IN_PROGRESS",
        "TASKS_COMPLETED_THIS_LOOP: 3",
        "FILES_MODIFIED: 4",
        "TESTS_STATUS: PASSING",
        "WORK_TYPE: IMPLEMENTATION",
        "EXIT_SIGNAL: false",
        "RECOMMENDATION: keep going",
        "---END_RALPH_STATUS---",
    ];
    let prints: String = block.iter().map(|l| format!("print {l}\n")).collect();
    format!("[run *]\n{prints}handoff {HANDOFF}\n")
}

/// What `git status` shows besides ralph's own files (`.ralph/`, and the
/// progress.txt ralph created before the run).
fn uncommitted(p: &Project) -> Vec<String> {
    p.git(&["status", "--porcelain"])
        .lines()
        .map(|l| l[3..].to_string())
        .filter(|f| f != ".ralph/" && f != "progress.txt")
        .collect()
}

#[test]
fn a_liar_without_a_gate_opens_the_breaker_within_three_iterations() {
    let p = Project::with_prd(ONE_STORY);
    p.script(&liar());
    let r = p.run(&["10"]);
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert_eq!(p.agent_runs().len(), 3, "{r:?}");
    assert!(!r.stdout.contains("made progress"), "claims counted as progress: {r:?}");
    assert!(r.stdout.contains("it completed 3 tasks, but no file changed"), "{r:?}");
    assert!(r.stdout.contains("no progress in 3 iterations in a row"), "{r:?}");
}

#[test]
fn a_liar_whose_gate_output_varies_opens_the_breaker_within_three_iterations() {
    let p = Project::with_prd(ONE_STORY);
    p.script(&liar());
    // A different failure every time: the same-error rule never fires.
    let gate = "sh -c 'head -c 6 /dev/urandom | od -An -tx1; exit 1'";
    let r = p.run(&["10", "--gate", gate]);
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert_eq!(p.agent_runs().len(), 3, "{r:?}");
}

#[test]
fn verified_work_the_agent_never_committed_is_committed_by_ralph() {
    let p = Project::with_prd(ONE_STORY);
    p.script(&format!(
        "[run *]\nwrite done.txt yes\nmark-pass\nprogress did it\nhandoff {HANDOFF}\n"
    ));
    let r = p.run(&["3", "--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(p.log()[0], "feat: US-001 - Make done.txt", "{r:?}");
    let files = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    let files: Vec<&str> = files.split_whitespace().collect();
    assert_eq!(files, ["done.txt", "prd.json", "progress.txt"], "{r:?}");
    assert_eq!(uncommitted(&p), Vec::<String>::new(), "work left uncommitted");
}

#[test]
fn without_a_gate_the_agents_mark_stands_and_its_work_is_committed() {
    let p = Project::with_prd(ONE_STORY);
    p.script(&format!("[run *]\nwrite done.txt yes\nmark-pass\nhandoff {HANDOFF}\n"));
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(p.log()[0], "feat: US-001 - Make done.txt", "{r:?}");
    assert!(p.git(&["log", "-1", "--format=%B"]).contains("after the agent marked the story"));
    assert_eq!(uncommitted(&p), Vec::<String>::new(), "work left uncommitted");
}

#[test]
fn with_commit_leftovers_off_uncommitted_work_does_not_count_and_the_report_says_why() {
    let p = Project::with_prd(ONE_STORY);
    p.write(".ralph/config.toml", "[run]\ncommit_leftovers = false\n");
    p.script(&format!("[run *]\nwrite done.txt yes\nmark-pass\nhandoff {HANDOFF}\n"));
    let r = p.run(&["2", "--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(!p.passes("US-001"), "{r:?}");
    assert!(r.stdout.contains("left its work uncommitted (run.commit_leftovers = false)"), "{r:?}");
    assert!(r.stdout.contains("its work passed but is not committed"), "{r:?}");
    assert_eq!(p.log()[0], "Add the PRD", "ralph committed anyway");
    // The next prompt says what to do.
    assert!(
        p.prompt(2).contains("is not committed. Commit it as `feat: US-001"),
        "{}",
        p.prompt(2)
    );
}

#[test]
fn verified_iterations_without_a_handoff_are_not_failed_runs() {
    let p = Project::with_prd(THREE_STORIES);
    // `write` takes its path literally: each run gets its own file.
    p.script(
        "[run 1]\nwrite src/a.txt a\nmark-pass\ncommit feat: a\n\
         [run 2]\nwrite src/b.txt b\nmark-pass\ncommit feat: b\n\
         [run 3]\nwrite src/c.txt c\nmark-pass\ncommit feat: c\n",
    );
    let r = p.run(&["5", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(r.stdout.matches("made progress").count(), 3, "{r:?}");
    assert!(!r.stdout.contains(" failed"), "{r:?}");
    assert!(r.stdout.contains("· handoff: "), "the missing handoff is not named: {r:?}");
    assert!(!r.stdout.contains("circuit"), "{r:?}");
}

#[test]
fn no_handoff_and_no_progress_open_the_breaker_with_their_own_reason() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint thinking\n");
    let r = p.run(&["10"]);
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert!(r.stdout.contains("no progress and no valid handoff in 3 iterations"), "{r:?}");
    assert!(r.stdout.contains("does not write .ralph/handoff.json"), "{r:?}");
    assert!(!r.stdout.contains("expired login"), "{r:?}");
}

#[test]
fn auto_reset_starts_closed_with_zeroed_counters_from_half_open() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nexit 1\n");
    // Two failed runs: HALF_OPEN, two failures counted.
    let r = p.run(&["2"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let circuit: serde_json::Value =
        serde_json::from_str(&p.read(".git/ralph/circuit.json")).unwrap();
    assert_eq!(circuit["state"], "HALF_OPEN");
    assert_eq!(circuit["counters"]["failures"], 2);
    // One more failure after --auto-reset is the first, not the third.
    let r = p.run(&["1", "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let circuit: serde_json::Value =
        serde_json::from_str(&p.read(".git/ralph/circuit.json")).unwrap();
    assert_eq!(circuit["counters"]["failures"], 1, "{circuit}");
    // --fresh starts closed too.
    let r = p.run(&["1", "--fresh"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let circuit: serde_json::Value =
        serde_json::from_str(&p.read(".git/ralph/circuit.json")).unwrap();
    assert_eq!(circuit["counters"]["failures"], 1, "{circuit}");
}

#[test]
fn the_prompt_numbers_its_iteration_and_drops_the_note_for_people() {
    let p = Project::with_prd(THREE_STORIES);
    p.write(
        ".ralph/prompt.md",
        "<!-- a note for whoever edits this file -->\nIteration {{iteration}} of {{max_iterations}}: {{story_id}}\n",
    );
    p.script("[run *]\nimplement\n");
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    for n in 1..=3 {
        let prompt = p.prompt(n);
        assert!(prompt.starts_with(&format!("Iteration {n} of 3: ")), "{n}: {prompt}");
        assert!(!prompt.contains("a note for whoever"), "{n}: {prompt}");
    }
}

#[test]
fn the_closest_iteration_is_one_that_did_work() {
    // Nobody worked on the story: no "closest to passing", passed gate or not.
    for gate in ["false", "true"] {
        let p = Project::with_prd(ONE_STORY);
        p.script(&format!("[run *]\nhandoff {HANDOFF}\n"));
        let r = p.run(&["2", "--gate", gate]);
        assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{gate}: {r:?}");
        assert!(!r.stdout.contains("closest to passing"), "{gate}: {r:?}");
    }
    // Work left uncommitted is closest, but names no commit that lacks it.
    let p = Project::with_prd(ONE_STORY);
    p.script(&format!("[run *]\nwrite notes.txt x\nhandoff {HANDOFF}\n"));
    let r = p.run(&["1", "--gate", "false"]);
    assert!(r.stdout.contains("closest to passing: iteration 1 (gate failed: exit 1)"), "{r:?}");
    assert!(!r.stdout.contains("git checkout"), "{r:?}");
}

#[test]
fn completion_beats_the_breaker() {
    let p = Project::with_prd(ONE_STORY);
    // The iteration that finishes the last story also trips the breaker
    // (a permission denial, with a threshold of one).
    p.write(".ralph/config.toml", "[circuit]\npermission_denials = 1\n");
    let result = r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"done","session_id":"s","total_cost_usd":0.01,"permission_denials":[{"tool_name":"Bash","tool_input":{"command":"rm -rf /tmp/x"}}]}"#;
    p.script(&format!("[run *]\nimplement\nprint {result}\n"));
    let run = || {
        to_run(
            p.ralph()
                .args(["3", "--gate", "test -f src/us-001.txt"])
                .env("RALPH_AGENT_FORMAT", "claude")
                .output()
                .unwrap(),
        )
    };
    let r = run();
    assert!(r.stdout.contains("circuit CLOSED → OPEN"), "{r:?}");
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    // And a run that finds the breaker open with everything verified is done, not stuck.
    let r = run();
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(p.agent_runs().len(), 1, "{r:?}");
}

/// ralph as the claude CLI's driver, with the fake agent printing claude's events.
fn claude_run(p: &Project, args: &[&str]) -> Run {
    to_run(p.ralph().args(args).env("RALPH_AGENT_FORMAT", "claude").output().unwrap())
}

#[test]
fn a_timeout_stays_a_timeout_when_the_agent_answers_sigterm_with_success() {
    let p = Project::with_prd(ONE_STORY);
    // claude cancels the running tool on SIGTERM and reports success.
    p.script("[run *]\nterm-succeeds\nmark-pass\nsleep 60\n");
    let r = claude_run(&p, &["1", "--timeout", "1s", "--json"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let end = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["event"] == "iteration_end")
        .expect("an iteration_end event");
    assert_eq!(end["result"], "failed", "{end}");
    assert_eq!(end["error"], "stopped: iteration timeout", "{end}");
    assert!(!p.passes("US-001"), "a claim made before the timeout survived");
    let circuit: serde_json::Value =
        serde_json::from_str(&p.read(".git/ralph/circuit.json")).unwrap();
    assert_eq!(circuit["counters"]["failures"], 1, "the breaker did not count a failed run");
}

#[test]
fn errors_inside_failed_tool_calls_reach_the_next_prompt_a_lesson_and_the_breaker() {
    let p = Project::with_prd(ONE_STORY);
    let text = r"Exit code 101\n   Compiling demo v0.1.0\nerror[E0308]: mismatched types\n  --> src/lib.rs:12:5";
    p.script(&format!(
        "[run *]\nclaude-tool-error {text}\nclaude-result I could not get it to compile.\nhandoff {HANDOFF}\n"
    ));
    p.write(".ralph/config.toml", "[circuit]\nsame_error = 2\nno_progress = 5\n");
    let r = claude_run(&p, &["5"]);
    // The same compiler error twice in a row opens the breaker.
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert!(r.stdout.contains("the same error in 2 iterations in a row"), "{r:?}");
    assert!(p.prompt(2).contains("error[E0308]: mismatched types"), "{}", p.prompt(2));
    let lessons: String = std::fs::read_dir(p.path(".git/ralph/lessons"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(lessons.contains("E0308"), "{lessons}");
}

#[test]
fn ralph_finds_its_project_from_a_subdirectory_and_an_error_creates_nothing() {
    let p = Project::with_prd(ONE_STORY);
    std::fs::create_dir_all(p.path("tests/unit")).unwrap();
    p.script(&format!("[run *]\nwrite done.txt yes\nmark-pass\ncommit feat: {{id}} - {{title}}\nhandoff {HANDOFF}\n"));
    let r = to_run(p.ralph().current_dir(p.path("tests/unit")).args(["1"]).output().unwrap());
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(!p.path("tests/unit/.ralph").exists() && !p.path("tests/.ralph").exists());
    // No prd.json here or above: a clear error, and not a file created.
    let empty = Project::new();
    let r = empty.run(&["1"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("no prd.json in") && r.stderr.contains("ralph init"), "{r:?}");
    assert!(!empty.path(".ralph").exists() && !empty.path(".git/ralph").exists(), "{r:?}");
}

#[test]
fn the_example_prd_that_init_wrote_is_not_run() {
    let p = Project::new();
    let init = p.run(&["init"]);
    assert_eq!(init.code, 0, "{init:?}");
    p.script("[run *]\nimplement\n");
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("is still the example `ralph init` wrote"), "{r:?}");
    assert!(p.agent_runs().is_empty());
    assert_eq!(p.git(&["branch", "--show-current"]).trim(), "main", "a branch was made for it");
}

#[test]
fn ralph_n_on_a_resume_is_the_runs_n() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1]\nimplement\n[run 2]\nsleep 60\n[run *]\nimplement\n");
    let mut child = p.spawn(&["2"]);
    assert!(eventually(std::time::Duration::from_secs(20), || p.agent_runs().len() == 2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    // The same `ralph 2`: the run's two iterations, not two more.
    let r = p.run(&["2"]);
    assert!(r.stdout.contains("iteration 2 of 2, resumed"), "{r:?}");
    assert!(r.stdout.contains("up to 2 iterations"), "{r:?}");
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(p.agent_runs(), ["US-001", "US-002", "US-002"], "{r:?}");
}

#[test]
fn dry_run_shows_the_next_iteration_and_changes_nothing() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let before = p.git(&["status", "--porcelain", "--ignored"]);
    let r = p.run(&["--dry-run", "--gate", "cargo test --quiet"]);
    assert_eq!(r.code, 0, "{r:?}");
    for needle in [
        "dry run: what the next iteration would do (nothing is changed)",
        "story:     US-001 First",
        "iteration: 1 of 10",
        "env:     RALPH_STORY_ID=US-001",
        "gate:      cargo test --quiet",
        "# Ralph iteration 1 of 10: story US-001",
    ] {
        assert!(r.stdout.contains(needle), "no {needle:?} in {r:?}");
    }
    assert!(r.stdout.contains(&format!("agent:     {FAKE_AGENT}")), "{r:?}");
    assert!(p.agent_runs().is_empty(), "an agent ran");
    assert_eq!(p.git(&["status", "--porcelain", "--ignored"]), before, "something changed");
    assert_eq!(p.git(&["branch", "--show-current"]).trim(), "main");
    assert!(!p.path(".git/ralph").exists() && !p.path(".ralph").exists());
    // The same as JSON.
    let r = p.run(&["--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    assert_eq!(v["story"]["id"], "US-001");
    assert_eq!(v["agent"]["prompt_channel"], "stdin");
    assert!(v["prompt"].as_str().unwrap().contains("US-001"));
}

/// The README's Quick start, as written, from a subdirectory of a fresh
/// project: init, write the PRD, run with a gate, look at the status.
#[test]
fn the_quick_start_from_a_subdirectory_gets_to_a_verified_story() {
    let p = Project::new();
    std::fs::create_dir_all(p.path("src/deep")).unwrap();
    let here = p.path("src/deep");
    let ralph = |args: &[&str]| to_run(p.ralph().current_dir(&here).args(args).output().unwrap());
    let init = ralph(&["init"]);
    assert_eq!(init.code, 0, "{init:?}");
    assert!(p.path("prd.json").exists() && !here.join("prd.json").exists(), "{init:?}");
    // "$EDITOR prd.json": the user's own story replaces the example.
    p.write("prd.json", ONE_STORY);
    p.script(&format!("[run *]\nwrite done.txt yes\nmark-pass\ncommit feat: {{id}} - {{title}}\nhandoff {HANDOFF}\n"));
    let r = ralph(&["--gate", "test -f done.txt"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(
        r.stdout.contains("✓ US-001")
            || r.stdout.contains("US-001 Make done.txt (claimed: yes, verified)"),
        "{r:?}"
    );
    let status = ralph(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.stdout.contains("1/1 pass"), "{status:?}");
}
