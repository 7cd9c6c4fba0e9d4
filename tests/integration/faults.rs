//! Fault injection: ralph killed at random points, signals during a
//! hostile agent, an agent that wrecks prd.json, file-size limits, and
//! damaged state files of every kind.

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use crate::harness::*;

/// A small deterministic generator, so a failing seed can be replayed.
const FIVE_STORIES: &str = r#"{"project":"P","branchName":"ralph/faults","userStories":[
  {"id":"US-001","title":"One","priority":1,"passes":false,"verify":"test -f src/us-001.txt"},
  {"id":"US-002","title":"Two","priority":2,"passes":false,"verify":"test -f src/us-002.txt"},
  {"id":"US-003","title":"Three","priority":3,"passes":false,"verify":"test -f src/us-003.txt"},
  {"id":"US-004","title":"Four","priority":4,"passes":false,"verify":"test -f src/us-004.txt"},
  {"id":"US-005","title":"Five","priority":5,"passes":false,"verify":"test -f src/us-005.txt"}]}"#;

fn assert_state_files_parse(p: &Project, context: &str) {
    assert_state_files_parse_n(p, context, 5);
}

fn assert_state_files_parse_n(p: &Project, context: &str, stories: usize) {
    // ralph writes prd.json atomically; an agent killed along with it may
    // have left its own write half-done, which the next ralph repairs.
    let Ok(prd) = serde_json::from_str::<serde_json::Value>(&p.read("prd.json")) else {
        return assert_ralph_files_parse(p, context);
    };
    // A story may pass without its work only while ralph's checkpoint says
    // its iteration was in flight: the next ralph reverts that claim.
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(p.path(".git/ralph/state.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let in_flight = matches!(state["phase"].as_str(), Some("agent" | "gate"));
    for s in prd["userStories"].as_array().unwrap() {
        if s["passes"] == true {
            let file = format!("src/{}.txt", s["id"].as_str().unwrap().to_lowercase());
            let unverified_claim = in_flight && state["story"] == s["id"];
            assert!(
                p.path(&file).exists() || unverified_claim,
                "{context}: {} passes without its work, unknown to the checkpoint",
                s["id"]
            );
        }
    }
    assert_eq!(
        prd["userStories"].as_array().unwrap().len(),
        stories,
        "{context}: a story was lost"
    );
    assert_ralph_files_parse(p, context);
}

fn assert_ralph_files_parse(p: &Project, context: &str) {
    for f in ["state.json", "circuit.json", "limits.json", "last-prd.json"] {
        let path = p.path(&format!(".git/ralph/{f}"));
        if path.exists() {
            let text = std::fs::read_to_string(&path).unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| {
                panic!("{context}: .git/ralph/{f} does not parse ({e}): {text:?}")
            });
        }
    }
    for f in ["circuit-history.jsonl", "failures.jsonl", "runs.jsonl"] {
        let text = std::fs::read_to_string(p.path(&format!(".git/ralph/{f}"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        // A kill can cut only the last line short; readers skip it.
        for line in lines.iter().take(lines.len().saturating_sub(1)) {
            serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| {
                panic!("{context}: .git/ralph/{f} has a bad line ({e}): {line}")
            });
        }
    }
    if let Ok(dir) = std::fs::read_dir(p.path(".git/ralph/lessons")) {
        // A hidden `.<file>.tmp<pid>` is a write a kill cut short before its
        // rename: never read, never a lesson.
        for e in dir.flatten().filter(|e| !e.file_name().to_string_lossy().starts_with('.')) {
            let text = std::fs::read_to_string(e.path()).unwrap();
            serde_json::from_str::<serde_json::Value>(&text)
                .unwrap_or_else(|err| panic!("{context}: lesson file: {err}"));
        }
    }
}

#[test]
fn kill_9_at_twenty_random_points_loses_nothing() {
    let seed = env_or("RALPH_FAULT_SEED", 20261202);
    let mut rng = Lcg(seed);
    let p = Project::with_prd(FIVE_STORIES);
    // Each run does a little work, slowly enough to be caught mid-way;
    // every third run botches its story (no file), so the gate rejects it.
    // Every run also starts a test run and a dev server of its own (in its
    // group and in a session of its own), which must not outlive ralph.
    p.script(
        "[run 3]\nmark-pass\nsleep 0.05\ncommit botched\n\
         [run 6]\nmark-pass\nsleep 0.05\ncommit botched\n\
         [run *]\nspawn group 300\nspawn setsid 300\nsleep 0.03\nimplement\nsleep 0.03\n",
    );
    let dir = p.dir().canonicalize().unwrap();
    p.write(
        ".ralph/config.toml",
        "[circuit]\nno_progress = 0\nsame_error = 0\nfailures = 0\n[limits]\ncalls_per_hour = 0\n",
    );
    for kill in 0..20 {
        let delay = Duration::from_millis(rng.next() % 250);
        let mut child = p.spawn(&["50"]);
        std::thread::sleep(delay);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        // The agent dies with ralph (parent-death signal), not later.
        for pid in p.agent_pids() {
            assert!(
                eventually(Duration::from_secs(2), || !alive(pid)),
                "agent {pid} outlived ralph"
            );
        }
        // What it started is ended by ralph's watchdog, not by the next ralph.
        assert!(
            eventually(Duration::from_secs(20), || processes_in(&dir).is_empty()),
            "seed {seed}, kill {kill}: {:?} outlived ralph",
            processes_in(&dir)
        );
        assert_state_files_parse(&p, &format!("seed {seed}, kill {kill} after {delay:?}"));
    }
    let r = p.run(&["50"]);
    assert_eq!(r.code, code(exit::COMPLETE), "seed {seed}: {r:?}");
    serde_json::from_str::<serde_json::Value>(&p.read("prd.json"))
        .expect("prd.json parses at the end");
    assert_state_files_parse(&p, "after the final run");
    for id in ["US-001", "US-002", "US-003", "US-004", "US-005"] {
        assert!(p.passes(id), "seed {seed}: {id} unfinished");
    }
}

#[test]
fn sigterm_during_a_hostile_agent_exits_143_and_leaves_no_process() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nignore-sigterm\nspawn group 120\nspawn setsid 120\nsleep 120\n");
    let child = p.spawn(&["3"]);
    assert!(eventually(Duration::from_secs(20), || p.spawned_pids().len() == 2));
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (r, _) = wait_with_rusage(child);
    assert_eq!(r.code, code(exit::TERMINATED), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
    for pid in p.spawned_pids() {
        assert!(!alive(pid), "{pid} survived");
    }
    // Interrupted runs stay resumable.
    let state: serde_json::Value = serde_json::from_str(&p.read(".git/ralph/state.json")).unwrap();
    assert_ne!(state["phase"], "ended");
}

#[test]
fn a_second_ctrl_c_skips_the_grace_period() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nignore-sigterm\nsleep 120\n");
    let child = p
        .ralph()
        .args(["3"])
        .env("RALPH_AGENT_GRACE", "60s")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    let started = Instant::now();
    let pid = child.id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let (r, _) = wait_with_rusage(child);
    assert_eq!(r.code, code(exit::INTERRUPTED), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the 60 s grace was not skipped: {:?}",
        started.elapsed()
    );
}

#[test]
fn an_agent_that_wrecks_prd_json_gets_it_restored_and_the_run_goes_on() {
    for how in ["invalid", "delete", "flip"] {
        let p = Project::with_prd(THREE_STORIES);
        p.script(&format!("[run 1]\ncorrupt-prd {how}\n[run *]\nimplement\n"));
        let r = p.run(&["6"]);
        assert_eq!(r.code, code(exit::COMPLETE), "{how}: {r:?}");
        assert!(
            r.stdout.contains("prd.json was damaged")
                && r.stdout.contains("restored the last good copy"),
            "{how}: {r:?}"
        );
        // Set right and explained, but not a failed run of the agent CLI.
        assert!(r.stdout.contains("iteration 1 made no progress"), "{how}: {r:?}");
        let ids: Vec<String> = p.prd()["userStories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ids, ["US-001", "US-003", "US-002"], "{how}");
        assert!(p.prompt(2).contains("prd.json was left invalid"), "{how}");
    }
}

#[test]
fn a_file_size_limit_while_logging_is_a_clear_error_and_corrupts_nothing() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\noutput 3000000\n");
    let mut cmd = p.ralph();
    cmd.args(["3"]);
    // SAFETY: setrlimit is async-signal-safe; it runs in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 1 << 20, rlim_max: 1 << 20 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        });
    }
    let r = to_run(cmd.output().unwrap());
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("File too large") || r.stdout.contains("File too large"), "{r:?}");
    assert!(r.stderr.contains("ulimit") || r.stdout.contains("ulimit"), "{r:?}");
    let _ = p.prd();
    for f in ["state.json", "circuit.json", "limits.json"] {
        let text = std::fs::read_to_string(p.path(&format!(".git/ralph/{f}"))).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

#[test]
fn damaged_files_of_every_kind_are_rebuilt_or_refused_never_a_panic() {
    let cases: &[(&str, &str)] = &[
        (".git/ralph/state.json", "{\"version\":1,\"run_id\":\"../../escape\"}"),
        (
            ".git/ralph/state.json",
            "{\"version\":1,\"run_id\":\"../../escape\",\"started_at\":\"2026-01-01T00:00:00Z\",\"max_iterations\":3,\"iteration\":1,\"phase\":\"agent\",\"story\":null,\"story_passed_before\":false,\"cost_usd\":0,\"tokens\":0,\"elapsed_ms\":0,\"claimed\":[],\"verified\":[],\"best\":null,\"feedback\":null,\"handoff\":null,\"outcome\":null,\"exit_code\":null}",
        ),
        (".git/ralph/last-prd.json", "not json"),
        (".git/ralph/lock", "garbage not a pid"),
        (".ralph/handoff.json", "\u{ff}\u{fe}"),
        (".git/ralph/lessons/0000.json", "{"),
        (".git/ralph/circuit.json", "{\"version\":1,\"state\":\"OPEN\"}"),
        (".git/ralph/limits.json", "[1,2,3]"),
        (".last-branch", "\u{0}\u{0}\u{0}"),
    ];
    for (file, content) in cases {
        let p = Project::with_prd(THREE_STORIES);
        p.write(file, content);
        p.script("[run *]\nimplement\n");
        let r = p.run(&["5"]);
        assert!(!r.stderr.contains("panicked"), "{file}: {r:?}");
        assert_eq!(r.code, code(exit::COMPLETE), "{file} = {content:?}: {r:?}");
        assert!(
            !p.tmp.path().join("escape").exists() && !p.path("escape").exists(),
            "{file}: a path escaped .ralph/logs"
        );
    }
    // A rules file a person is editing is refused, never overwritten.
    let p = Project::with_prd(THREE_STORIES);
    p.write(".git/ralph/rules.json", "{\"version\":1,");
    p.script("[run *]\nprint nope\n");
    let r = p.run(&["2", "--auto-reset"]);
    assert!(!r.stderr.contains("panicked"), "{r:?}");
    assert_eq!(p.read(".git/ralph/rules.json"), "{\"version\":1,");
}

#[test]
#[ignore = "heavy: writes 1 GB through ralph; run with `cargo test -- --ignored one_gigabyte`"]
fn one_gigabyte_of_agent_output_in_flat_memory() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\noutput 1073741824\n");
    let (r, max_rss_kib) = wait_with_rusage(p.spawn(&["1", "--quiet"]));
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(max_rss_kib < 64 * 1024, "peak RSS {max_rss_kib} KiB");
}

#[test]
fn secrets_never_reach_the_log_the_output_or_the_next_prompt() {
    let p = Project::with_prd(THREE_STORIES);
    let key = "sk-test-not-a-real-key-0123456789";
    p.script(&format!(
        "[run *]\nprint my key is {key}\nstderr token sk-ant-api03-ABCDEFGHIJKLMNOPQRSTUVWX\nprint done\n"
    ));
    let r = to_run(
        p.ralph()
            .args(["1", "--gate", "sh -c 'echo $ANTHROPIC_API_KEY; exit 1'"])
            .env("ANTHROPIC_API_KEY", key)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(!r.stdout.contains(key) && !r.stdout.contains("sk-ant-api03"), "{r:?}");
    assert!(r.stdout.contains("[redacted ANTHROPIC_API_KEY]"), "{r:?}");
    let logs = p.path(".git/ralph/logs");
    let mut seen = 0;
    for run in std::fs::read_dir(&logs).unwrap().flatten().filter(|e| e.path().is_dir()) {
        for f in std::fs::read_dir(run.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(f.path()).unwrap_or_default();
            assert!(!text.contains(key) && !text.contains("sk-ant-api03"), "{:?} leaks", f.path());
            seen += 1;
        }
    }
    assert!(seen >= 2, "no logs were checked");
    for f in [".git/ralph/failures.jsonl", ".git/ralph/state.json"] {
        let text = std::fs::read_to_string(p.path(f)).unwrap_or_default();
        assert!(!text.contains(key), "{f} leaks");
    }
}

#[test]
fn the_halt_hook_runs_when_ralph_is_terminated() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nsleep 60\n");
    // Hooks run in the sandbox: the marker goes where it may write.
    let marker = p.agent_dir().join("halted");
    p.write(
        ".ralph/config.toml",
        &format!(
            "[hooks]\non_halt = [\"sh\", \"-c\", \"sleep 0.3; echo $RALPH_OUTCOME > {}\"]\n",
            marker.display()
        ),
    );
    let child = p.spawn(&["3"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (r, _) = wait_with_rusage(child);
    assert_eq!(r.code, code(exit::TERMINATED), "{r:?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap_or_default().trim(), "interrupted", "{r:?}");
}

#[test]
fn sighup_has_its_own_exit_code() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nsleep 60\n");
    let child = p.spawn(&["3"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let (r, _) = wait_with_rusage(child);
    assert_eq!(r.code, code(exit::HANGUP), "{r:?}");
}

#[test]
fn sigterm_during_the_gate_is_no_verdict() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    p.write(".ralph/config.toml", "[gate]\nbaseline = false\n");
    let child = p.spawn(&["3", "--gate", "sleep 60"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (r, _) = wait_with_rusage(child);
    assert_eq!(r.code, code(exit::TERMINATED), "{r:?}");
    assert!(!r.stdout.contains("gate failed"), "{r:?}");
    assert!(!p.log().iter().any(|c| c.contains("does not pass")), "{:?}", p.log());
    assert!(!p.passes("US-001"), "an unverified claim survived");
    assert!(
        !p.path(".git/ralph/lessons").exists()
            || std::fs::read_dir(p.path(".git/ralph/lessons")).unwrap().count() == 0
    );
}

#[test]
fn processes_that_left_the_group_are_ended_when_a_killed_run_resumes() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1]\nspawn setsid 300\nsleep 60\n[run *]\nimplement\n");
    let mut child = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.spawned_pids().len() == 1));
    // With its watchdog killed too, nothing ends the stray but the resume.
    kill_9_with_its_watchdog(&mut child);
    let stray = p.spawned_pids()[0];
    assert!(alive(stray), "the setsid child should outlive a SIGKILLed ralph and watchdog");
    let r = p.run(&["5"]);
    assert!(r.stdout.contains("left its process group"), "{r:?}");
    assert!(eventually(Duration::from_secs(5), || !alive(stray)), "{stray} survived the resume");
}

/// Starts a run whose first agent leaves a process in a session of its own,
/// kills ralph and its watchdog with SIGKILL mid-agent, and returns that
/// process's pid.
fn crash_leaving_a_stray(p: &Project) -> i32 {
    p.script("[run 1]\nspawn setsid 300\nsleep 60\n[run *]\nimplement\n");
    let mut child = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.spawned_pids().len() == 1));
    kill_9_with_its_watchdog(&mut child);
    p.spawned_pids()[0]
}

#[test]
fn a_resume_never_ends_another_projects_processes_even_with_the_same_run_id() {
    let a = Project::with_prd(THREE_STORIES);
    let b = Project::with_prd(THREE_STORIES);
    let stray_a = crash_leaving_a_stray(&a);
    let stray_b = crash_leaving_a_stray(&b);
    let state = |p: &Project| -> serde_json::Value {
        serde_json::from_str(&p.read(".git/ralph/state.json")).unwrap()
    };
    let (id_a, id_b) = (state(&a)["run_id"].clone(), state(&b)["run_id"].clone());
    assert_ne!(id_a, id_b, "two runs got the same id");
    // The collision two ralphs started in the same second used to have:
    // b's checkpoint names a's run.
    let mut forced = state(&b);
    forced["run_id"] = id_a.clone();
    b.write(".git/ralph/state.json", &serde_json::to_string_pretty(&forced).unwrap());
    let r = b.run(&["5"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(alive(stray_a), "resuming project b ended project a's process {stray_a}: {r:?}");
    // a's own resume still finds its leftover.
    let r = a.run(&["5"]);
    assert!(r.stdout.contains("left its process group"), "{r:?}");
    assert!(eventually(Duration::from_secs(5), || !alive(stray_a)), "{stray_a} survived");
    // SAFETY: ending the test's own leftover (b's resume looked for a's id).
    unsafe { libc::kill(stray_b, libc::SIGKILL) };
}

#[test]
fn ralphs_own_crashes_are_neither_agent_failures_nor_used_iterations() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1-3]\nsleep 60\n[run *]\nimplement\n");
    for run in 1..=3 {
        let mut child = p.spawn(&["3"]);
        assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == run));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
    }
    // Three crashes on one story: the breaker is untouched, and all three
    // of the run's iterations are still there for the three stories.
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(!r.stdout.contains("circuit"), "{r:?}");
    assert_eq!(p.agent_runs().len(), 6, "{r:?}");
    assert!(r.stdout.contains("iteration 3/3 · US-003"), "{r:?}");
}

#[test]
fn an_agent_cut_off_by_ralphs_crash_is_not_a_call_of_the_hourly_limit() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1-2]\nsleep 60\n[run *]\nimplement\n");
    p.write(".ralph/config.toml", "[limits]\ncalls_per_hour = 3\n");
    for run in 1..=2 {
        let mut child = p.spawn(&["3"]);
        assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == run));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
    }
    // Two crashes cost none of the hour's three calls: all three stories fit.
    let r = p.run(&["3", "--no-wait"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(
        r.stdout.contains("its agent call not counted against limits.calls_per_hour (the agent's API may have counted it)"),
        "{r:?}"
    );
    let limits: serde_json::Value =
        serde_json::from_str(&p.read(".git/ralph/limits.json")).unwrap();
    assert_eq!(limits["calls"].as_array().map(Vec::len), Some(3), "{limits}");
}

#[test]
fn an_interrupted_iteration_does_not_use_up_one_of_the_n() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1]\nsleep 60\n[run *]\nimplement\n");
    let child = p.spawn(&["3"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let r = to_run(child.wait_with_output().unwrap());
    assert_eq!(r.code, code(exit::TERMINATED), "{r:?}");
    assert!(r.stdout.contains("iteration 1 was stopped"), "{r:?}");
    let r = p.run(&[]);
    assert_eq!(r.code, code(exit::COMPLETE), "three stories in the run's three iterations: {r:?}");
    assert!(r.stdout.contains("iteration 1/3 · US-001"), "{r:?}");
    assert!(p.prompt(2).contains("was interrupted (Ctrl-C or SIGTERM)"), "{}", p.prompt(2));
}

#[test]
fn a_checkpoint_that_cannot_be_written_stops_the_run_and_loses_no_verification() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    // The first iteration's end-of-iteration checkpoint cannot be written,
    // as on a full disk: its hook sets ralph's file-size limit below the
    // checkpoint's size (ralph ignores SIGXFSZ, so the write fails with
    // EFBIG), above the line the run's end appends to the empty runs.jsonl.
    let hook = r#"sh -c 'test "$RALPH_ITERATION" = 1 && prlimit --pid "$PPID" --fsize=400; true'"#;
    p.write(".ralph/config.toml", &format!("[hooks]\non_iteration_end = {hook:?}\n"));
    let r = p.run(&["5", "--gate", "true"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stdout.contains("cannot write the checkpoint"), "{r:?}");
    assert!(r.stdout.contains("state.json"), "{r:?}");
    assert!(p.passes("US-001"), "{r:?}");
    assert_eq!(
        p.read(".git/ralph/runs.jsonl").lines().count(),
        1,
        "the run's end is not on record"
    );
    // Once there is room again (a new process, with no limit), the resume
    // keeps US-001 verified and goes on.
    let r = p.run(&["5", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(!r.stdout.contains("marked unfinished again"), "{r:?}");
    assert_eq!(p.agent_runs(), ["US-001", "US-002", "US-003"], "{r:?}");
}

#[test]
fn git_locks_left_by_a_writer_killed_mid_commit_are_cleared_with_a_word() {
    let p = Project::with_prd(THREE_STORIES);
    p.git(&["branch", "ralph/demo"]);
    // What a kill -9 inside a commit leaves: the index's and the branch's lock.
    p.write(".git/index.lock", "");
    p.write(".git/refs/heads/ralph/demo.lock", "");
    std::thread::sleep(Duration::from_millis(20));
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("index.lock: a git lock left by a process that died"), "{r:?}");
    assert!(r.stdout.contains("ralph/demo.lock"), "{r:?}");
    assert_eq!(p.log().len(), 5, "every story committed: {:?}", p.log());
}

#[test]
fn a_git_lock_a_live_process_holds_is_named_not_taken() {
    let p = Project::with_prd(THREE_STORIES);
    p.write(".git/index.lock", "");
    let mut holder = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 3<.git/index.lock; sleep 60")
        .current_dir(p.dir())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("index.lock is held by a running process"), "{r:?}");
    assert!(p.agent_runs().is_empty(), "{r:?}");
    assert!(p.path(".git/index.lock").exists());
}

#[test]
fn stopping_says_so_and_waits_one_grace_for_everything() {
    let p = Project::with_prd(THREE_STORIES);
    // An agent and a process of its own session that both ignore SIGTERM:
    // the stop used to wait one grace for each, in silence.
    p.script("[run *]\nignore-sigterm\nspawn stubborn-setsid 120\nsleep 120\n");
    let child = p
        .ralph()
        .args(["3"])
        .env("RALPH_AGENT_GRACE", "5s")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(20), || p.spawned_pids().len() == 1));
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (r, _) = wait_with_rusage(child);
    let took = started.elapsed();
    assert_eq!(r.code, code(exit::TERMINATED), "{r:?}");
    assert!(
        r.stdout.contains("stopping the agent (interrupted): waiting up to 5s for it to end (Ctrl-C again to kill it now)"),
        "{r:?}"
    );
    // Two graces in a row would be 10 s at least.
    assert!(took < Duration::from_secs(9), "the stop took {took:?}: {r:?}");
    assert!(!alive(p.spawned_pids()[0]), "the stubborn process survived");
}

#[test]
fn the_end_of_a_burst_of_output_is_shown() {
    let p = Project::with_prd(THREE_STORIES);
    // 20,000 lines in a burst, then the line that matters.
    p.script("[run *]\noutput 2000000\nprint FINAL: the build failed\nexit 1\n");
    let r = p.run(&["1", "--json"]);
    let outputs: Vec<String> = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "agent_output")
        .map(|e| e["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        outputs.last().map(String::as_str),
        Some("FINAL: the build failed"),
        "{} lines",
        outputs.len()
    );
    if outputs.len() < 20_001 {
        assert!(
            outputs.iter().any(|t| t.contains("skipped to keep up")),
            "lines vanished without a word"
        );
    }
}

/// The soak the brief asks for: at least 200 kill -9s at random points of
/// a run whose every story ends in ralph's own commit (the agent leaves its
/// work uncommitted), so many land inside it. After each kill nothing of
/// the agent's outlives ralph, the files parse and no story passes without
/// its work; every ralph that ends on
/// its own ends well; the last run finishes every story, each one
/// committed. `RALPH_SOAK_KILLS` sets the count; `RALPH_FAULT_SEED` the seed.
#[test]
#[ignore = "a soak of a few minutes: cargo test -- --ignored kill_9_soak"]
fn kill_9_soak() {
    let kills: usize = env_or("RALPH_SOAK_KILLS", 200);
    let seed = env_or("RALPH_FAULT_SEED", 20261203);
    let mut rng = Lcg(seed);
    let n = 40;
    let stories: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                r#"{{"id":"US-{i:03}","title":"Story {i}","priority":{i},"passes":false,"verify":"test -f src/us-{i:03}.txt"}}"#
            )
        })
        .collect();
    let p = Project::with_prd(&format!(
        r#"{{"project":"P","branchName":"ralph/soak","userStories":[{}]}}"#,
        stories.join(",")
    ));
    // The work, the mark and the progress entry, never committed: ralph
    // commits them. And a process of the agent's, which must not outlive ralph.
    p.script("[run *]\nspawn setsid 300\nsleep 0.02\nwrite-story-file\nmark-pass\nprogress done\n");
    let dir = p.dir().canonicalize().unwrap();
    p.write(
        ".ralph/config.toml",
        "[circuit]\nno_progress = 0\nsame_error = 0\nfailures = 0\n[limits]\ncalls_per_hour = 0\n",
    );
    let mut ended_badly = Vec::new();
    for kill in 0..kills {
        let delay = Duration::from_millis(rng.next() % 300);
        let mut child = p.spawn(&["500"]);
        std::thread::sleep(delay);
        if let Ok(Some(status)) = child.try_wait() {
            if status.code() != Some(0) {
                let r = to_run(child.wait_with_output().unwrap());
                ended_badly.push(format!("kill {kill}: {r:?}"));
            }
        } else {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            let _ = child.wait();
        }
        let at = format!("seed {seed}, kill {kill} after {delay:?}");
        let gone = eventually(Duration::from_secs(20), || processes_in(&dir).is_empty());
        assert!(gone, "{at}: {:?} outlived ralph", processes_in(&dir));
        assert_state_files_parse_n(&p, &at, n);
    }
    assert!(ended_badly.is_empty(), "runs that did not resume well: {ended_badly:#?}");
    let r = p.run(&["500"]);
    assert_eq!(r.code, code(exit::COMPLETE), "seed {seed}: {r:?}");
    let committed = p.git(&["ls-files", "src"]);
    for i in 1..=n {
        let id = format!("US-{i:03}");
        assert!(p.passes(&id), "seed {seed}: {id} unfinished");
        assert!(
            committed.contains(&format!("src/us-{i:03}.txt")),
            "seed {seed}: {id}'s work is not committed"
        );
    }
    assert_eq!(p.git(&["status", "--porcelain", "src"]).trim(), "", "work left uncommitted");
}

#[test]
fn a_verdict_cut_off_by_a_crash_is_finished_on_resume() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    p.run(&["1", "--gate", "true"]);
    // As if ralph died between recording US-002's verdict and carrying it
    // out: the work is in the tree, uncommitted, and prd.json not updated.
    p.write("src/us-002.txt", "implementation of US-002\n");
    let mut state: serde_json::Value =
        serde_json::from_str(&p.read(".git/ralph/state.json")).unwrap();
    state["phase"] = "gate".into();
    state["iteration"] = 2.into();
    state["story"] = "US-002".into();
    state["verified"] = serde_json::json!(["US-001", "US-002"]);
    state["pending"] = serde_json::json!({
        "story": "US-002",
        "passes": true,
        "commit": [["prd.json", "src/us-002.txt"], "feat: US-002 - Second\n\nCommitted-by: ralph"]
    });
    state["outcome"] = serde_json::Value::Null;
    p.write(".git/ralph/state.json", &serde_json::to_string_pretty(&state).unwrap());
    let r = p.run(&["5", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("iteration 2 verified US-002 before ralph died"), "{r:?}");
    assert!(p.log().iter().any(|s| s == "feat: US-002 - Second"), "{:?}", p.log());
    assert!(p.git(&["ls-files", "src/us-002.txt"]).contains("us-002"));
    // US-002 was not done again.
    assert_eq!(p.agent_runs(), ["US-001", "US-003"], "{r:?}");
}

#[test]
fn a_story_whose_commit_fails_is_not_done() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nwrite src/us-001.txt done\n");
    p.write(".ralph/config.toml", "[gate]\nbaseline = false\n");
    // The gate passes, and leaves the repository's index a folder: no
    // commit can be made.
    let r = p.run(&["1", "--gate", "sh -c 'rm -f .git/index && mkdir .git/index'"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stdout.contains("cannot commit US-001"), "{r:?}");
    assert!(r.stdout.contains("it is marked unfinished again"), "{r:?}");
    assert!(!p.passes("US-001"), "a story with its work uncommitted counts as done");
}
