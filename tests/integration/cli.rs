//! The command line as people use it: output piped into `head` or `true`,
//! the spellings of ralph.sh and ralph-claude-code, typos, and the flags
//! every command honours or refuses out loud.

use std::os::fd::FromRawFd;
use std::process::Stdio;

use crate::harness::*;

/// The write end of a pipe whose read end is already closed: what a
/// command's stdout is after `| head` has read its fill, or under `| true`.
/// Every write to it fails with EPIPE, so the test does not race the reader.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: fds[0] was just opened by pipe(2) and is not used again.
    unsafe { libc::close(fds[0]) };
    // SAFETY: fds[1] is an open descriptor that nothing else owns.
    Stdio::from(unsafe { std::fs::File::from_raw_fd(fds[1]) })
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_with_the_commands_own_code() {
    let p = Project::with_prd(THREE_STORIES);
    p.write("agent.log", "some agent output\n");
    let commands: &[&[&str]] = &[
        &["config", "show"],
        &["config", "show", "--json"],
        &["agents"],
        &["agents", "--json"],
        &["rules", "list"],
        &["rules", "list", "--json"],
        &["completions", "bash"],
        &["man"],
        &["status"],
        &["status", "--json"],
        &["analyze", "agent.log"],
        &["analyze", "agent.log", "--json"],
        &["--help"],
        &["--version"],
    ];
    for args in commands {
        let out = p.ralph().args(*args).stdout(closed_pipe()).output().expect("run ralph");
        let r = to_run(out);
        assert!(!r.stderr.contains("panicked"), "{args:?}: {r:?}");
        assert_eq!(r.stderr, "", "{args:?}: {r:?}");
        assert_eq!(r.code, code(exit::COMPLETE), "{args:?}: {r:?}");
    }
}

#[test]
fn an_error_with_stderr_closed_still_exits_with_its_code() {
    let p = Project::with_prd(THREE_STORIES);
    let out = p
        .ralph()
        .args(["analyze", "no-such-file"])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .output()
        .expect("run ralph");
    assert_eq!(out.status.code(), Some(code(exit::USAGE)), "{out:?}");
}

/// stderr and the exit status, for a snapshot of a refusal.
fn refusal(r: &Run) -> String {
    format!("{}[exit status: {}]\n", r.stderr, r.code)
}

#[test]
fn a_typo_of_a_command_is_an_unknown_command_with_the_closest_one() {
    let p = Project::with_prd(THREE_STORIES);
    let r = p.run(&["stauts"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(!r.stderr.contains("invalid digit"), "{r:?}");
    insta::assert_snapshot!("unknown_command", refusal(&r));
    let r = p.run(&["deploy"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(
        r.stderr.contains("unknown command `deploy`; `ralph --help` lists the commands"),
        "{r:?}"
    );
    assert!(p.agent_runs().is_empty());
}

#[test]
fn the_spellings_of_ralph_sh_and_ralph_claude_code_work_or_point_to_ralphs() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    // ralph.sh: `./ralph.sh --tool amp 10`; ralph-claude-code: `ralph --status`,
    // `--calls 50`, `--auto-reset-circuit`; other drivers: `--max-iterations N`, `-n N`.
    let status = p.run(&["--status"]);
    assert_eq!(status.code, code(exit::COMPLETE), "{status:?}");
    assert_eq!(status.stdout, p.run(&["status"]).stdout);
    let r = p.run(&["--max-iterations", "1", "--calls", "50", "--auto-reset-circuit"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(p.agent_runs().len(), 1, "{r:?}");
    let r = p.run(&["-n", "1"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(p.agent_runs().len(), 2, "{r:?}");

    let refused: &[(&[&str], &str)] = &[
        (&["-5"], "the iteration count is a plain number: `ralph 5`"),
        (&["-s"], "`ralph status`"),
        (&["-m"], "`ralph monitor`"),
        (&["--notify"], "[notify] in .ralph/config.toml"),
        (&["-n"], "ralph-claude-code's -n (--notify) is [notify] in .ralph/config.toml here"),
        (&["--reset-session"], "every iteration starts a fresh agent"),
    ];
    let mut shown = String::new();
    for (args, want) in refused {
        let r = p.run(args);
        assert_eq!(r.code, code(exit::USAGE), "{args:?}: {r:?}");
        assert!(r.stderr.contains(want), "{args:?}: {r:?}");
        // clap's own tip would send `-5` after `--`, where it fails again.
        assert!(!r.stderr.contains("'-- "), "{args:?}: {r:?}");
        shown.push_str(&format!("$ ralph {}\n{}", args.join(" "), refusal(&r)));
    }
    insta::assert_snapshot!("peer_spellings_refused", shown);
    assert_eq!(p.agent_runs().len(), 2, "a refused command line ran an agent");
}

#[test]
fn json_is_given_by_every_command_or_refused_out_loud() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    p.write("agent.log", "some agent output\n");
    let demo = p.tmp.path().join("demo");
    let demo = demo.to_str().unwrap();
    // One JSON document each; `run` and `demo` print JSON lines.
    let documents: &[&[&str]] = &[
        &["status"],
        &["reset-circuit"],
        &["analyze", "agent.log"],
        &["agents"],
        &["rules", "list"],
        &["config", "show"],
        &["init"],
    ];
    for args in documents {
        let r = p.run(&[args, &["--json"][..]].concat());
        assert_eq!(r.code, code(exit::COMPLETE), "{args:?}: {r:?}");
        serde_json::from_str::<serde_json::Value>(&r.stdout)
            .unwrap_or_else(|e| panic!("{args:?} --json is not one JSON document ({e}): {r:?}"));
    }
    for (args, want) in [
        (&["1", "--json"][..], code(exit::MAX_ITERATIONS)),
        (&["demo", "--json", "--pace", "0", "--into", demo], code(exit::COMPLETE)),
    ] {
        let r = p.run(args);
        assert_eq!(r.code, want, "{args:?}: {r:?}");
        for line in r.stdout.lines() {
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("{args:?}: not a JSON line ({e}): {line}"));
        }
    }
    let refused: &[&[&str]] = &[
        &["monitor", "--json"],
        &["--monitor", "--json"],
        &["completions", "bash", "--json"],
        &["man", "--json"],
    ];
    for args in refused {
        let r = p.run(args);
        assert_eq!(r.code, code(exit::USAGE), "{args:?}: {r:?}");
        assert!(r.stderr.contains("--json does not apply to `ralph "), "{args:?}: {r:?}");
        assert_eq!(r.stdout, "", "{args:?}: {r:?}");
    }
}

/// What `ralph agents` says about this project (the installed CLIs above it
/// differ from machine to machine).
fn this_project(r: &Run) -> String {
    let at = r.stdout.find("this project:").unwrap_or_else(|| panic!("{r:?}"));
    let text = r.stdout[at..].replace(FAKE_AGENT, "[FAKE_AGENT]");
    // The sandbox's policy names this machine's paths: its own test
    // (`sandbox::the_policy_is_printed_by_agents_and_dry_run`) reads it.
    let text: String = text
        .lines()
        .filter(|l| {
            !l.starts_with("  sandbox ")
                && !["writes ", "reads ", "connects "].iter().any(|w| l.trim_start().starts_with(w))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    format!("{text}[exit status: {}]\n", r.code)
}

#[test]
fn doctor_checks_the_configured_agent_and_the_gate_and_fails_when_they_cannot_run() {
    let p = Project::with_prd(THREE_STORIES);
    let r = p.run(&["agents"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("claude") && r.stdout.contains("codex"), "the CLIs: {r:?}");
    let mut shown = format!("$ ralph agents\n{}", this_project(&r));

    // A custom agent command that is not there, and a gate program that is not.
    // (command, environment, what it says, its exit code: `ralph`'s for the same)
    let cases: &[(&str, &[(&str, &str)], &str, u8)] = &[
        (
            "doctor",
            &[("RALPH_AGENT_COMMAND", "/nonexistent/my-agent --fast")],
            "agent command `/nonexistent/my-agent` not found",
            exit::ENVIRONMENT,
        ),
        (
            "agents",
            &[("RALPH_GATE_COMMAND", "no-such-gate-program --all")],
            "`no-such-gate-program` (gate.command) not found",
            exit::ENVIRONMENT,
        ),
        (
            "agents",
            &[("RALPH_AGENT_TOOL", "custom"), ("RALPH_AGENT_COMMAND", "")],
            "tool custom needs a command",
            exit::USAGE,
        ),
    ];
    for (command, env, want, exit_code) in cases {
        let r = to_run(p.ralph().arg(command).envs(env.iter().copied()).output().unwrap());
        assert_eq!(r.code, code(*exit_code), "{env:?}: {r:?}");
        let run = to_run(p.ralph().arg("1").envs(env.iter().copied()).output().unwrap());
        assert_eq!(run.code, r.code, "ralph itself ends otherwise: {run:?}");
        assert!(r.stdout.contains(want), "{env:?}: {r:?}");
        shown.push_str(&format!(
            "$ {} ralph {command}\n{}",
            env.iter().map(|(k, v)| format!("{k}={v:?}")).collect::<Vec<_>>().join(" "),
            this_project(&r)
        ));
    }
    // A story's own gate, from prd.json.
    let prd = THREE_STORIES.replacen(
        r#""notes": """#,
        r#""notes": "", "verify": "no-such-checker US-001""#,
        1,
    );
    let p = Project::with_prd(&prd);
    let r = p.run(&["agents"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stdout.contains(r#"`no-such-checker` (the "verify" of US-001) not found"#), "{r:?}");
    shown.push_str(&format!("$ ralph agents   # a story's verify\n{}", this_project(&r)));
    insta::assert_snapshot!("doctor", shown);

    let json = p.run(&["agents", "--json"]);
    assert_eq!(json.code, code(exit::ENVIRONMENT), "{json:?}");
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("agents --json");
    assert_eq!(v["ready"], false, "{v}");
    assert_eq!(v["configured"]["problems"], serde_json::json!([]), "{v}");
    assert_eq!(v["gate"]["story_gates"], 1, "{v}");
    assert!(v["gate"]["problem"].as_str().unwrap().contains("no-such-checker"), "{v}");
    assert!(v["agents"].as_array().unwrap().iter().any(|a| a["tool"] == "claude"), "{v}");
    // The same check the run makes: it stops with the same code before any agent.
    let run = p.run(&["1"]);
    assert_eq!(run.code, code(exit::ENVIRONMENT), "{run:?}");
    assert!(p.agent_runs().is_empty());
}

/// Issue 32, item 10: `--progress`, `-q` and `-v` shape how a run shows
/// itself; they are offered where a run is (or its events are printed), and
/// nowhere else, while `ralph -q 1` and `ralph --progress plain 1` go on working.
#[test]
fn the_run_display_options_are_offered_only_where_they_apply() {
    let p = Project::with_prd(THREE_STORIES);
    let run_only = ["--progress", "--quiet", "--verbose"];
    for command in ["serve", "import", "status", "history", "report", "agents", "init"] {
        let r = p.run(&[command, "--help"]);
        assert_eq!(r.code, 0, "{command}: {r:?}");
        for flag in run_only {
            assert!(!r.stdout.contains(flag), "`ralph {command} --help` lists {flag}: {r:?}");
        }
        let r = p.run(&[command, "-q"]);
        assert_eq!(r.code, code(exit::USAGE), "`ralph {command} -q` is refused: {r:?}");
    }
    for command in
        [&["--help"][..], &["run", "--help"], &["demo", "--help"], &["deliver", "--help"]]
    {
        let r = p.run(command);
        for flag in run_only {
            assert!(r.stdout.contains(flag), "`ralph {command:?}` lacks {flag}: {r:?}");
        }
    }
    let before = p.run(&["-q", "status"]);
    assert_eq!(before.code, code(exit::USAGE), "{before:?}");
    assert!(
        before.stderr.contains(
            "--progress, -q and -v are options of a run; `ralph status` has none of them"
        ),
        "{before:?}"
    );
    let demo = p.run(&["-q", "demo"]);
    assert!(demo.stderr.contains("go after the command: `ralph demo -q`"), "{demo:?}");
    p.script("[run *]\nprint nothing to do\n");
    for args in [&["-q", "1"][..], &["--progress", "plain", "1"], &["run", "-q", "1"], &["1", "-v"]]
    {
        // Each run is a new one with a closed breaker: four runs of one idle
        // iteration each would open it.
        let r = p.run(&[args, &["--fresh"]].concat());
        assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{args:?}: {r:?}");
    }
}

/// Issue 32, item 10: `init --tool codex` makes codex the agent, not only
/// the skills folder.
#[test]
fn init_with_a_tool_makes_it_the_agent() {
    let p = Project::new();
    let r = p.run(&["init", "--tool", "codex"]);
    assert_eq!(r.code, 0, "{r:?}");
    let config = p.read(".ralph/config.toml");
    assert!(config.contains("\ntool = \"codex\""), "{config}");
}

/// Issue 32, item 10: ralph-claude-code's `--notify` points to `[notify]`,
/// which ralph has, not only to hooks.
#[test]
fn notify_points_to_the_notify_settings() {
    let p = Project::with_prd(THREE_STORIES);
    let r = p.run(&["--notify"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("[notify] in .ralph/config.toml (desktop = true"), "{r:?}");
    assert!(!r.stderr.contains("notifications are hooks"), "{r:?}");
}
