//! What ralph says at the end of a run, in `status` and in the report is
//! exactly true: after resumes, limits and give-ups, with no gate, with a
//! gate that hangs, with a PRD too long to list.

use crate::harness::*;

/// `ralph status` without a usable prd.json is an error to a script (exit
/// 2, as `ralph run` says), says what to do about a missing one, and names
/// the byte that is not UTF-8.
#[test]
fn status_without_a_usable_prd_fails_and_says_why() {
    let p = Project::with_prd(THREE_STORIES);
    let ok = p.run(&["status"]);
    assert_eq!(ok.code, code(exit::COMPLETE), "{ok:?}");

    std::fs::remove_file(p.path("prd.json")).unwrap();
    let r = p.run(&["status"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stdout.contains("hint: create one with `ralph init`"), "{r:?}");
    assert!(r.stdout.contains("`ralph import`"), "{r:?}");
    assert!(!r.stdout.contains("(no project name)"), "{r:?}");

    p.write("prd.json", "{\"userStories\": [");
    let r = p.run(&["status"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stdout.contains("invalid JSON"), "{r:?}");

    let mut bytes = THREE_STORIES.as_bytes().to_vec();
    let at = THREE_STORIES.find("First").unwrap();
    bytes[at] = 0xff;
    std::fs::write(p.path("prd.json"), &bytes).unwrap();
    let r = p.run(&["status"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stdout.contains(&format!("byte {at} (0xff) is not UTF-8")), "{r:?}");
    let json = p.run(&["status", "--json"]);
    assert_eq!(json.code, code(exit::USAGE), "{json:?}");
}

/// A gate that times out on the baseline stops the run before any agent
/// runs (it could verify nothing), `--gate-timeout` sets its limit, and a
/// gate that timed out is called so, not "killed".
#[test]
fn a_gate_that_times_out_on_the_baseline_stops_the_run() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["3", "--gate", "sleep 30", "--gate-timeout", "1s"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stdout.contains("the gate timed out on the baseline"), "{r:?}");
    assert!(r.stdout.contains("--gate-timeout"), "{r:?}");
    assert!(p.agent_runs().is_empty(), "an agent ran: {r:?}");

    // Without a baseline, the iteration's gate times out: said so everywhere.
    p.write(".ralph/config.toml", "[gate]\nbaseline = false\n");
    let r = p.run(&["1", "--gate", "sleep 30", "--gate-timeout", "1s"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(r.stdout.contains("closest to passing: iteration 1 (gate timed out)"), "{r:?}");
    assert!(!r.stdout.contains("killed"), "{r:?}");
    let report = p.run(&["report"]);
    assert!(report.stdout.contains("US-001 iteration 1: stopped: timed out"), "{report:?}");
}

/// A gate is a setting, not remembered: a run without the gate the last
/// run had says so, a run with no gate is not called verified, and `ralph
/// init` writes the gate and the agent it is given.
#[test]
fn a_run_without_the_last_runs_gate_is_warned_and_not_called_verified() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["3", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(
        r.stdout.contains("checked stories with the gate `true`; this one has no gate"),
        "{r:?}"
    );
    let report = p.run(&["report"]);
    assert!(report.stdout.contains("3 passing at the end, none verified (no gate)"), "{report:?}");
    assert!(!report.stdout.contains("3 verified"), "{report:?}");
    let history = p.run(&["history"]);
    assert!(history.stdout.contains("3/3 pass, none verified (no gate)"), "{history:?}");
    assert!(history.stdout.contains("3/3 verified"), "the gated run: {history:?}");

    let fresh = Project::new();
    let r = fresh.run(&["init", "--tool", "codex", "--gate", "python3 -m pytest -q"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let config = fresh.read(".ralph/config.toml");
    assert!(config.contains("\ntool = \"codex\""), "{config}");
    assert!(config.contains("\ncommand = \"python3 -m pytest -q\""), "{config}");
    let shown = fresh.ralph().env_remove("RALPH_AGENT_TOOL").args(["config", "show"]).output();
    let shown = to_run(shown.unwrap());
    assert!(shown.stdout.contains("codex"), "{shown:?}");
}
