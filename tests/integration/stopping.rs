//! Knowing when to stop: the circuit breaker, rate and usage limits, and
//! `ralph status` explaining what happened.

use std::time::{Duration, Instant};

use crate::harness::*;

#[test]
fn an_agent_that_makes_no_progress_opens_the_circuit_and_status_says_why() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nprint looked around, changed nothing\n");
    let r = p.run(&["10"]);
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert_eq!(p.agent_runs().len(), 3, "{r:?}");
    assert!(
        r.stdout.contains("CLOSED → HALF_OPEN") && r.stdout.contains("HALF_OPEN → OPEN"),
        "{r:?}"
    );
    assert!(r.stdout.contains("ralph reset-circuit"), "{r:?}");
    let status = p.run(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.stdout.contains("circuit: OPEN"), "{status:?}");
    assert!(status.stdout.contains("iterations without progress: 3"), "{status:?}");
    assert!(status.stdout.contains("→ US-001"), "the next story is marked: {status:?}");
    // Why the run stopped, once: the breaker's advice is in the circuit lines.
    assert!(status.stdout.contains("  why: the circuit breaker opened: "), "{status:?}");
    assert_eq!(status.stdout.matches("ralph reset-circuit").count(), 1, "{status:?}");
    // A second run inside the cooldown stops before calling the agent.
    let again = p.run(&["10"]);
    assert_eq!(again.code, code(exit::CIRCUIT_OPEN), "{again:?}");
    assert_eq!(p.agent_runs().len(), 3);
    // Resetting lets it run again, and the reset is on record.
    let reset = p.run(&["--reset-circuit"]);
    assert_eq!(reset.code, 0, "{reset:?}");
    let history = p.read(".git/ralph/circuit-history.jsonl");
    assert!(history.contains("reset by hand"), "{history}");
    p.script("[run *]\nimplement\n");
    let after = p.run(&["10"]);
    assert_eq!(after.code, code(exit::COMPLETE), "{after:?}");
}

#[test]
fn the_reset_circuit_subcommand_works_too() {
    let p = Project::with_prd(THREE_STORIES);
    let r = p.run(&["reset-circuit"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("→ CLOSED"), "{r:?}");
}

#[test]
fn a_failing_agent_opens_the_breaker_instead_of_looping_forever() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nstderr fatal: something broke\nexit 1\n");
    let r = p.run(&["50"]);
    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert_eq!(p.agent_runs().len(), 3, "{r:?}");
    assert!(r.stdout.contains("failed 3 runs in a row"), "{r:?}");
}

#[test]
fn a_damaged_circuit_file_is_rebuilt_closed_with_a_warning() {
    for content in ["", "{}", "garbage", "{\"version\":1,\"state\":\"BOGUS\"}"] {
        let p = Project::with_prd(THREE_STORIES);
        p.write(".git/ralph/circuit.json", content);
        p.script("[run *]\nimplement\n");
        let r = p.run(&["5"]);
        assert_eq!(r.code, code(exit::COMPLETE), "{content:?}: {r:?}");
        assert!(
            r.stdout.contains("warning:") && r.stdout.contains("circuit"),
            "{content:?}: {r:?}"
        );
    }
}

#[test]
fn damaged_state_files_of_every_kind_never_stop_a_run() {
    let p = Project::with_prd(THREE_STORIES);
    for (file, content) in [
        (".git/ralph/limits.json", "{not json"),
        (".git/ralph/state.json", "\u{0}\u{1}binary"),
        (".git/ralph/circuit-history.jsonl", "{bad\n"),
        (".git/ralph/failures.jsonl", "not json\n"),
        (".git/ralph/runs.jsonl", "[[[\n"),
    ] {
        p.write(file, content);
    }
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let status = p.run(&["status", "--json"]);
    assert_eq!(status.code, 0, "{status:?}");
    serde_json::from_str::<serde_json::Value>(&status.stdout).expect("status --json parses");
}

#[test]
fn the_calls_per_hour_limit_stops_under_no_wait() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5", "--calls-per-hour", "1", "--no-wait"]);
    assert_eq!(r.code, code(exit::RATE_LIMITED), "{r:?}");
    assert_eq!(p.agent_runs().len(), 1);
    assert!(r.stdout.contains("calls-per-hour limit"), "{r:?}");
    let status = p.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(v["calls_this_hour"], 1);
}

#[test]
fn a_usage_limit_a_few_seconds_away_is_waited_out() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1]\nusage-limit 3\n[run *]\nimplement\nclaude-result done\n");
    let started = Instant::now();
    let r = p.ralph().args(["3"]).env("RALPH_AGENT_FORMAT", "claude").output().unwrap();
    let r = to_run(r);
    let waited = started.elapsed();
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(waited >= Duration::from_secs(3), "did not wait: {waited:?}");
    assert!(waited < Duration::from_secs(40), "waited too long: {waited:?}");
    assert!(r.stdout.contains("usage limit"), "{r:?}");
    // The limited attempt keeps its own log next to the retry's.
    let run_dir = std::fs::read_dir(p.path(".git/ralph/logs"))
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    let first = std::fs::read_to_string(run_dir.join("iter-1.log")).unwrap();
    assert!(first.contains("rate_limit_event"), "{first}");
    assert!(run_dir.join("iter-1.retry-2.log").exists());
    // The limited run counted neither as an iteration nor as a failure.
    assert!(r.stdout.contains("3/3 stories pass after 3 iterations"), "{r:?}");
    assert!(!r.stdout.contains("HALF_OPEN"), "{r:?}");
}

#[test]
fn a_usage_limit_beyond_max_wait_stops_with_the_rate_limit_code() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nusage-limit 7200\n");
    let r = p
        .ralph()
        .args(["3", "--max-wait", "10m"])
        .env("RALPH_AGENT_FORMAT", "claude")
        .output()
        .unwrap();
    let r = to_run(r);
    assert_eq!(r.code, code(exit::RATE_LIMITED), "{r:?}");
    assert!(r.stdout.contains("usage limit") && r.stdout.contains("--max-wait"), "{r:?}");
    let status = p.run(&["status"]);
    assert!(status.stdout.contains("usage limit: calls resume at"), "{status:?}");
    let why = status.stdout.lines().find(|l| l.starts_with("  why: ")).unwrap_or_default();
    assert!(why.contains("usage limit") && why.contains("--max-wait"), "{status:?}");
    // A new run before the reset time waits (or here, stops) too.
    let again = to_run(
        p.ralph().args(["3", "--no-wait"]).env("RALPH_AGENT_FORMAT", "claude").output().unwrap(),
    );
    assert_eq!(again.code, code(exit::RATE_LIMITED), "{again:?}");
    assert_eq!(p.agent_runs().len(), 1);
}

#[test]
fn status_works_before_ralph_ever_ran_and_never_creates_state() {
    let p = Project::with_prd(THREE_STORIES);
    let r = p.run(&["status"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("stories: 0/3 pass"), "{r:?}");
    assert!(r.stdout.contains("running: no"), "{r:?}");
    assert!(!p.path(".ralph").exists(), "status created .ralph/");
    let j = p.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["total"], 3);
    assert_eq!(v["stories"][0]["next"], true);
    assert_eq!(v["circuit"]["state"], "CLOSED");
}

#[test]
fn global_options_may_precede_a_subcommand_but_run_options_may_not() {
    let p = Project::with_prd(THREE_STORIES);
    let elsewhere = tempfile::tempdir().unwrap();
    let r = to_run(
        p.ralph()
            .current_dir(elsewhere.path())
            .args(["-C"])
            .arg(p.dir())
            .args(["--json", "status"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["total"], 3);
    for (args, name) in [
        (&["5", "status"][..], "status"),
        (&["--tool", "amp", "status"], "status"),
        (&["--gate", "true", "rules", "list"], "rules"),
        (&["-n", "5", "reset-circuit"], "reset-circuit"),
    ] {
        let r = p.run(args);
        assert_eq!(r.code, code(exit::USAGE), "{args:?}: {r:?}");
        assert!(r.stderr.contains("go with `ralph run`"), "{args:?}: {r:?}");
        assert!(r.stderr.contains(&format!("not before `{name}`")), "{args:?}: {r:?}");
    }
}

#[test]
fn status_reads_a_running_loop_without_blocking_it() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nsleep 30\n");
    let mut child = p.spawn(&["1"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    let r = p.run(&["status", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["running_pid"], child.id());
    assert_eq!(v["current_run"]["iteration"], 1);
    assert_eq!(v["current_run"]["phase"], "agent");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(143));
}

#[test]
fn reset_circuit_refuses_while_a_loop_runs() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nsleep 30\n");
    let mut child = p.spawn(&["1"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    let r = p.run(&["reset-circuit"]);
    assert_eq!(r.code, code(exit::LOCKED), "{r:?}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

#[test]
fn a_zero_timeout_means_no_timeout() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nsleep 0.5\nimplement\n");
    let r = p.run(&["1", "--timeout", "0"]);
    assert!(p.passes("US-001"), "{r:?}");
}

/// `ralph status` with the temporary directory and the run id fixed.
fn status_text(p: &Project) -> String {
    let r = p.run(&["status"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let tmp = p.tmp.path().canonicalize().unwrap().display().to_string();
    let text = r.stdout.replace(&tmp, "[TMP]");
    regex::Regex::new(r"\b\d{8}-\d{6}-[0-9a-f]{4}-[0-9a-f]{6}\b")
        .unwrap()
        .replace_all(&text, "[RUN_ID]")
        .into_owned()
}

#[test]
fn status_says_why_the_last_run_stopped_and_where_its_logs_are() {
    // A gate that fails: the last failure, its log, the run's logs.
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["1", "--gate", "false"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let text = status_text(&p);
    insta::assert_snapshot!("status_after_a_failed_gate", text);
    let v: serde_json::Value =
        serde_json::from_str(&p.run(&["status", "--json"]).stdout).expect("status --json");
    let run = &v["current_run"];
    assert!(run["message"].as_str().unwrap().starts_with("reached the iteration limit (1)"), "{v}");
    assert_eq!(run["exit_code"], exit::MAX_ITERATIONS);
    assert_eq!(
        (run["last_failure"]["iteration"].as_u64(), run["last_failure"]["story"].as_str()),
        (Some(1), Some("US-001")),
        "{v}"
    );
    let log = run["last_failure"]["log"].as_str().unwrap();
    assert!(std::path::Path::new(log).is_file(), "{log}");
    let logs = run["log_dir"].as_str().unwrap();
    assert!(log.starts_with(logs) && logs.contains(".git/ralph/logs/"), "{v}");

    // The last failure shows what the gate said, its numbers unmasked.
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["1", "--gate", "sh -c 'echo \"AssertionError: assert 1 == 22\"; exit 1'"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let text = status_text(&p);
    assert!(text.contains("last failure: iteration 1 (US-001): "), "{text}");
    assert!(text.contains("assert 1 == 22"), "{text}");

    // A gate program that is missing: the run refuses before it creates
    // anything, so status checks it itself and names it, with the hint.
    let p = Project::with_prd(THREE_STORIES);
    p.write(".ralph/config.toml", "[gate]\ncommand = \"no-such-gate-program\"\n");
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    let text = status_text(&p);
    assert!(
        text.contains(
            "cannot start: the gate cannot run: `no-such-gate-program` (gate.command) not found\n"
        ),
        "{text}"
    );
    assert!(text.contains("  hint: install it or fix the command"), "{text}");

    // A blocked agent: its blocker.
    let p = Project::with_prd(THREE_STORIES);
    p.script(
        "[run *]\nhandoff {\"status\":\"blocked\",\"summary\":\"stuck\",\"evidence\":[],\"nextSteps\":[],\"blocker\":\"the staging database is down\"}\n",
    );
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::BLOCKED), "{r:?}");
    let text = status_text(&p);
    assert!(text.contains("why:") && text.contains("the staging database is down"), "{text}");
}

#[test]
fn status_watch_json_is_one_json_document_per_line() {
    use std::io::BufRead;
    let p = Project::with_prd(THREE_STORIES);
    let mut child = p.spawn(&["status", "--watch", "--json", "--interval", "1"]);
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        let line = lines.next().expect("a line").expect("read");
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert_eq!(v["total"], 3, "{line}");
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(code(exit::COMPLETE)));
}

/// Issue 32, item 9: after SIGTERM the end of the run says what happened in
/// words a person reads: terminated, how many stories pass of how many, the
/// exit code; and an agent that starts nothing has left nothing running.
#[test]
fn sigterm_ends_the_run_with_its_own_words_and_no_leftovers_claimed() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nprint working\nsleep 120\n");
    let child = p.spawn(&["3", "--progress", "plain"]);
    assert!(
        eventually(Duration::from_secs(20), || p.agent_runs().len() == 1),
        "the agent never started"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (r, _) = wait_with_rusage(child);
    assert_eq!(r.code, 143, "{r:?}");
    let lines: Vec<&str> =
        r.stdout.lines().map(|l| l.split_once("] ").map_or(l, |x| x.1)).collect();
    let end = lines.iter().position(|l| *l == "terminated; run ralph again to resume");
    let end = end.unwrap_or_else(|| panic!("no end message: {r:?}"));
    let summary = lines[end + 1].trim_start();
    assert!(
        summary.starts_with("0/3 stories pass after 0 iterations in ")
            && summary.ends_with(" · exit 143 (interrupted)"),
        "{summary:?} in {r:?}"
    );
    assert!(!r.stdout.contains(" stopped\n"), "{r:?}");
    assert!(!r.stdout.contains("left running"), "the agent started nothing: {r:?}");
}
