//! What a person or a program sees: help, status, the plain and JSON
//! renderings of a short run, the live display under a pseudo-terminal,
//! colour, init, config, hooks, completions and monitor.
//!
//! Snapshots live in `snapshots/`; what differs between machines and runs
//! (temporary paths, clock times, run ids, durations) is redacted first.
//! `INSTA_UPDATE=always cargo test` rewrites them; review every change.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use regex::Regex;
use serde_json::Value;

use crate::harness::*;

const TWO_STORIES: &str = r#"{
  "project": "Demo",
  "branchName": "ralph/demo",
  "description": "test project",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["works"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Second", "description": "", "acceptanceCriteria": ["works"], "priority": 2, "passes": false, "notes": ""}
  ]
}
"#;

const ONE_STORY: &str = r#"{
  "project": "Solo",
  "branchName": "ralph/solo",
  "userStories": [
    {"id": "US-001", "title": "Only", "acceptanceCriteria": ["works"], "priority": 1, "passes": false}
  ]
}
"#;

/// A story's work, with a line of output before it.
const WORKING_AGENT: &str = "[run *]\nprint reading the code\nimplement\n";

/// Replaces what differs between machines and runs with fixed markers.
fn redact(text: &str, p: &Project) -> String {
    let mut s = text.replace(FAKE_AGENT, "[FAKE_AGENT]");
    let tmp = p.tmp.path();
    if let Ok(real) = tmp.canonicalize() {
        s = s.replace(&real.display().to_string(), "[TMP]");
    }
    s = s.replace(&tmp.display().to_string(), "[TMP]");
    let rules = [
        // RFC 3339 (JSON `ts`, `ended_at`) before the clock times inside them.
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", "[TS]"),
        (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", "[DATETIME]"),
        (r"\b\d{8}-\d{6}-[0-9a-f]{4}-[0-9a-f]{6}\b", "[RUN_ID]"),
        (r"\[\d{2}:\d{2}:\d{2}\]", "[TIME]"),
        (r"\b\d{2}:\d{2}:\d{2}\b", "[CLOCK]"),
        (r"\b(in|after) (\d+ms|\d+\.\d+s|\d+m \d{2}s|\d+h \d{2}m)\b", "$1 [DURATION]"),
        (r"\bpid \d+\b", "pid [PID]"),
        (r"ralph-project-\d+", "ralph-project-[PID]"),
        // The kernel's Landlock version is the machine's.
        (r"Landlock ABI \d+", "Landlock ABI [N]"),
    ];
    for (pattern, with) in rules {
        s = Regex::new(pattern).unwrap().replace_all(&s, with).into_owned();
    }
    s
}

/// stdout, a stderr block when there is one, and the exit status: one snapshot.
fn shown(r: &Run, p: &Project) -> String {
    let mut s = redact(&r.stdout, p);
    if !r.stderr.is_empty() {
        s.push_str("------- stderr -------\n");
        s.push_str(&redact(&r.stderr, p));
    }
    s.push_str(&format!("[exit status: {}]\n", r.code));
    s
}

/// `ralph` with a fixed help width.
fn help(p: &Project, args: &[&str]) -> Run {
    to_run(p.ralph().env("COLUMNS", "100").args(args).output().expect("run ralph"))
}

#[test]
fn help_for_ralph_and_every_subcommand() {
    let p = Project::new();
    let top = help(&p, &["--help"]);
    assert_eq!(top.code, 0, "{top:?}");
    assert!(top.stdout.contains("Examples:") && top.stdout.contains("Exit codes:"), "{top:?}");
    insta::assert_snapshot!("help", shown(&top, &p));
    insta::assert_snapshot!("help_short", shown(&help(&p, &["-h"]), &p));
    let subcommands: &[&[&str]] = &[
        &["run"],
        &["status"],
        &["serve"],
        &["reset-circuit"],
        &["analyze"],
        &["demo"],
        &["init"],
        &["import"],
        &["agents"],
        &["rules"],
        &["rules", "arm"],
        &["config"],
        &["config", "show"],
        &["monitor"],
        &["completions"],
        &["man"],
    ];
    for sub in subcommands {
        let mut args = sub.to_vec();
        args.push("--help");
        let r = help(&p, &args);
        assert_eq!(r.code, 0, "{sub:?}: {r:?}");
        // Help that teaches: every command shows how it is used.
        if sub.len() == 1 {
            assert!(r.stdout.contains("Example"), "{sub:?} has no example:\n{}", r.stdout);
        }
        insta::assert_snapshot!(format!("help_{}", sub.join("_")), shown(&r, &p));
        // `ralph help run` is the same text as `ralph run --help`.
        let mut via_help = vec!["help"];
        via_help.extend_from_slice(sub);
        assert_eq!(help(&p, &via_help).stdout, r.stdout, "ralph help {sub:?}");
    }
}

#[test]
fn plain_output_of_a_short_run_and_the_status_after_it() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(WORKING_AGENT);
    let r = p.run(&["5"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'), "{r:?}");
    insta::assert_snapshot!("plain_run", shown(&r, &p));

    let status = p.run(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    insta::assert_snapshot!("status", shown(&status, &p));

    let json = p.run(&["status", "--json"]);
    assert_eq!(json.code, 0, "{json:?}");
    let v: Value = serde_json::from_str(&json.stdout).expect("status --json is one JSON document");
    assert_eq!((v["passing"].as_u64(), v["total"].as_u64()), (Some(2), Some(2)), "{v}");
    insta::assert_snapshot!("status_json", shown(&json, &p));
}

#[test]
fn quiet_shows_iteration_results_and_the_report_only() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(WORKING_AGENT);
    let r = p.run(&["5", "--quiet"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("reading the code"), "agent output with --quiet: {r:?}");
    assert!(!r.stdout.contains("iteration 1/5"), "iteration starts with --quiet: {r:?}");
    assert!(r.stdout.contains("iteration 2 made progress"), "{r:?}");
    assert!(r.stdout.contains("2/2 stories pass after 2 iterations"), "{r:?}");
}

/// Each line of a `--json` run, checked against the envelope every event has.
fn events(r: &Run) -> Vec<Value> {
    r.stdout
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {line}"));
            assert_eq!(v["v"], 1, "schema version: {line}");
            let ts = v["ts"].as_str().unwrap_or_else(|| panic!("no ts: {line}"));
            chrono::DateTime::parse_from_rfc3339(ts).unwrap_or_else(|e| panic!("ts {ts}: {e}"));
            assert!(v["event"].is_string(), "no event name: {line}");
            v
        })
        .collect()
}

#[test]
fn the_json_event_stream_of_a_short_run() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(WORKING_AGENT);
    // Colour asked for, and still none: JSON is for programs.
    let r = p.run(&["5", "--json", "--color", "always"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains('\x1b'), "{r:?}");
    let events = events(&r);
    let names: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(names.iter().filter(|n| **n == "run_start").count(), 1, "{names:?}");
    assert_eq!(names.last(), Some(&"run_end"), "{names:?}");
    assert_eq!(events.last().unwrap()["exit_code"], 0);
    // Each event, with the fields that change from run to run fixed.
    let lines: Vec<String> = events
        .into_iter()
        .map(|mut e| {
            e["ts"] = "[TS]".into();
            if e.get("duration_ms").is_some() {
                e["duration_ms"] = "[MS]".into();
            }
            // A commit's id changes with its time.
            if e.get("commit").is_some_and(|c| c.is_string()) {
                e["commit"] = "[COMMIT]".into();
            }
            redact(&e.to_string(), &p)
        })
        .collect();
    insta::assert_snapshot!("json_events", lines.join("\n"));
}

#[test]
fn every_field_of_the_json_stream_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/events.md"))
        .expect("docs/events.md");
    let p = Project::with_prd(TWO_STORIES);
    p.script("[run 1]\nimplement\n[run *]\nprint stuck\n");
    let r = p.run(&["3", "--json", "--gate", "test -f src/us-001.txt"]);
    let mut missing = Vec::new();
    for e in events(&r) {
        let name = e["event"].as_str().unwrap().to_string();
        if !doc.contains(&format!("### `{name}`")) {
            missing.push(format!("event {name}"));
        }
        for key in e.as_object().unwrap().keys() {
            if !doc.contains(&format!("`{key}`")) {
                missing.push(format!("{name}.{key}"));
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/events.md: {missing:?}\n{r:?}");
}

#[test]
fn output_that_is_not_a_terminal_has_no_escape_codes() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(
        "[run 1]\nprint reading\nimplement\n[run 2]\nstderr oops\nexit 3\n[run *]\nimplement\n",
    );
    // A terminal type that could colour, and no NO_COLOR: still plain, because stdout is a pipe.
    let out = p.ralph().args(["5", "--auto-reset"]).env("TERM", "xterm-256color").output().unwrap();
    let r = to_run(out);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("warning:") || r.stdout.contains("failed"), "{r:?}");
    assert!(!r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'), "{r:?}");
    for args in [&["status"][..], &["config", "show"], &["init"]] {
        let r = to_run(p.ralph().args(args).env("TERM", "xterm").output().unwrap());
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        assert!(!r.stdout.contains('\x1b') && !r.stderr.contains('\x1b'), "{args:?}: {r:?}");
    }
}

#[test]
fn color_always_colours_and_overrides_no_color() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(WORKING_AGENT);
    let r =
        to_run(p.ralph().args(["5", "--color", "always"]).env("NO_COLOR", "1").output().unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("\x1b[32m"), "no colour with --color always: {r:?}");
    // Every coloured line closes its colour.
    for line in r.stdout.lines().filter(|l| l.contains("\x1b[")) {
        assert!(line.ends_with("\x1b[0m"), "{line:?}");
    }
    // ralph status takes --color too: passing stories green, the breaker by its state.
    let status = to_run(
        p.ralph().args(["status", "--color", "always"]).env("NO_COLOR", "1").output().unwrap(),
    );
    assert_eq!(status.code, code(exit::COMPLETE), "{status:?}");
    assert!(status.stdout.contains("\x1b[32m  ✓ US-001"), "{status:?}");
    assert!(status.stdout.contains("\x1b[32mcircuit: CLOSED"), "{status:?}");
    for line in status.stdout.lines().filter(|l| l.contains("\x1b[")) {
        assert!(line.ends_with("\x1b[0m"), "{line:?}");
    }
    let plain = p.run(&["status", "--color", "never"]);
    assert!(!plain.stdout.contains('\x1b'), "{plain:?}");
    // The config file's ui.color is a layer like any other.
    p.write(".ralph/config.toml", "[ui]\ncolor = \"always\"\n");
    let r = p.run(&["5"]);
    assert!(r.stdout.contains('\x1b'), "ui.color = always ignored: {r:?}");
    assert!(p.run(&["status"]).stdout.contains('\x1b'), "ui.color = always ignored by status");
}

/// `script` gives ralph a pseudo-terminal for stdout, as a person's terminal would.
fn under_a_terminal(p: &Project, args: &str, env: &[(&str, &str)]) -> Option<(i32, String)> {
    if Command::new("script").arg("--version").output().is_err() {
        println!("skipped: `script` (util-linux) is not installed, so there is no pseudo-terminal");
        return None;
    }
    let ralph = p.ralph();
    let mut cmd = Command::new("script");
    cmd.env_clear().current_dir(p.dir());
    for (k, v) in ralph.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.envs(env.iter().copied())
        .env("TERM", "xterm-256color")
        .arg("-qec")
        .arg(format!("stty cols 120 rows 30; exec {RALPH} {args}"))
        .arg("/dev/null")
        .stdin(std::process::Stdio::null());
    let out = cmd.output().expect("run script");
    Some((out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// Screen text without escape sequences, frame by frame.
fn frames(raw: &str) -> Vec<String> {
    let escape = Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]").unwrap();
    escape.replace_all(raw, "").split(['\r', '\n']).map(|f| f.trim_end().to_string()).collect()
}

#[test]
fn the_live_display_draws_the_bar_and_spinner_and_ends_with_the_report() {
    let p = Project::with_prd(TWO_STORIES);
    // A second per story, so the bar and spinner draw at least a few frames.
    p.script("[run *]\nprint reading the code\nsleep 1\nimplement\n");
    let Some((code, raw)) = under_a_terminal(&p, "5", &[]) else { return };
    assert_eq!(code, 0, "{raw}");
    assert!(raw.contains("\x1b["), "no escape codes on a terminal: {raw:?}");
    let screen = frames(&raw).join("\n");
    assert!(!screen.contains("0/0 stories"), "bar drawn before the run started:\n{screen}");
    assert!(screen.contains("0/2 stories pass · iteration 1/5"), "{screen}");
    assert!(screen.contains("1/2 stories pass · iteration 2/5"), "bar did not advance:\n{screen}");
    assert!(screen.contains("iteration 1 · US-001"), "no spinner for the iteration:\n{screen}");
    assert!(screen.contains("reading the code"), "no agent line on the spinner:\n{screen}");
    assert!(screen.contains("iteration 1 made progress"), "{screen}");
    // The report is printed last, whole, after the bars are gone.
    let tail = &screen[screen.rfind("every story passes").expect("no report")..];
    assert!(tail.contains("2/2 stories pass after 2 iterations"), "{tail}");
    assert!(tail.contains("✓ US-002 Second"), "{tail}");
    assert!(!tail.contains("stories pass ·"), "a bar drawn after the report:\n{tail}");
}

#[test]
fn progress_plain_gives_lines_on_a_terminal_and_bar_draws_even_on_ci() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(WORKING_AGENT);
    let Some((status, raw)) = under_a_terminal(&p, "5 --progress plain", &[]) else { return };
    assert_eq!(status, code(exit::COMPLETE), "{raw}");
    let screen = frames(&raw).join("\n");
    assert!(
        Regex::new(r"\[\d{2}:\d{2}:\d{2}\] iteration 1/5 · US-001 First")
            .unwrap()
            .is_match(&screen),
        "no timestamped lines:\n{screen}"
    );
    assert!(!screen.contains("stories pass · iteration"), "the live display with plain:\n{screen}");
    // The same from the configuration, and `bar` on CI, where auto would print lines.
    let p = Project::with_prd(TWO_STORIES);
    p.script("[run *]\nprint reading the code\nsleep 1\nimplement\n");
    p.write(".ralph/config.toml", "[ui]\nprogress = \"bar\"\n");
    let Some((status, raw)) = under_a_terminal(&p, "5", &[("CI", "true")]) else { return };
    assert_eq!(status, code(exit::COMPLETE), "{raw}");
    let screen = frames(&raw).join("\n");
    assert!(screen.contains("stories pass · iteration 1/5"), "no live display:\n{screen}");
    let p = Project::with_prd(TWO_STORIES);
    p.script(WORKING_AGENT);
    let Some((_, raw)) = under_a_terminal(&p, "5", &[("RALPH_UI_PROGRESS", "plain")]) else {
        return;
    };
    assert!(!frames(&raw).join("\n").contains("stories pass · iteration"), "{raw}");
}

#[test]
fn the_live_display_counts_down_a_limit() {
    let p = Project::with_prd(TWO_STORIES);
    // The limit resets a few seconds after the agent reports it: enough that
    // a loaded machine still has a wait left to show when ralph gets to it.
    p.script("[run 1]\nusage-limit 5\n[run *]\nimplement\nclaude-result done\n");
    let Some((code, raw)) = under_a_terminal(&p, "5", &[("RALPH_AGENT_FORMAT", "claude")]) else {
        return;
    };
    let screen = frames(&raw).join("\n");
    assert_eq!(code, 0, "{screen}");
    // How many seconds are left when the screen is drawn depends on the
    // machine's load; that there is a wait and a countdown does not.
    assert!(Regex::new(r"waiting [1-7]s until").unwrap().is_match(&screen), "{screen}");
    assert!(
        Regex::new(r"waiting [1-7]s left · the agent's usage limit").unwrap().is_match(&screen),
        "no countdown:\n{screen}"
    );
    assert!(screen.contains("2/2 stories pass after 2 iterations"), "{screen}");
}

#[test]
fn init_scaffolds_once_and_never_overwrites() {
    let p = Project::new();
    p.write(".gitignore", "target/");
    let first = p.run(&["init"]);
    assert_eq!(first.code, 0, "{first:?}");
    insta::assert_snapshot!("init_first", shown(&first, &p));
    for f in [
        "prd.json",
        ".ralph/config.toml",
        ".ralph/prompt.md",
        ".ralph/.gitignore",
        "AGENTS.md",
        ".claude/skills/prd/SKILL.md",
        ".claude/skills/ralph/SKILL.md",
    ] {
        assert!(p.path(f).is_file(), "{f} missing");
    }
    assert_eq!(p.read(".gitignore").matches(".last-branch").count(), 1, "{}", p.read(".gitignore"));
    assert!(p.read(".gitignore").starts_with("target/\n"), "{}", p.read(".gitignore"));
    // The scaffolded project is valid as it stands.
    let show = p.run(&["config", "show"]);
    assert_eq!(show.code, 0, "{show:?}");

    p.write("prd.json", "{\"mine\": true}\n");
    p.write(".ralph/config.toml", "[agent]\ntool = \"codex\"\n");
    let second = p.run(&["init"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(!second.stdout.contains("created"), "{second:?}");
    insta::assert_snapshot!("init_second", shown(&second, &p));
    assert_eq!(p.read("prd.json"), "{\"mine\": true}\n");
    assert_eq!(p.read(".ralph/config.toml"), "[agent]\ntool = \"codex\"\n");
    assert_eq!(p.read(".gitignore").matches(".last-branch").count(), 1);
}

#[test]
fn init_puts_the_skills_where_each_agent_finds_them() {
    let cases = [
        ("claude", Some(".claude/skills")),
        ("codex", Some(".agents/skills")),
        ("gemini", Some(".gemini/skills")),
        ("aider", None),
    ];
    for (tool, dir) in cases {
        let p = Project::new();
        let r = p.run(&["init", "--tool", tool]);
        assert_eq!(r.code, 0, "{tool}: {r:?}");
        match dir {
            Some(dir) => {
                for skill in ["prd", "ralph"] {
                    let f = format!("{dir}/{skill}/SKILL.md");
                    assert!(p.path(&f).is_file(), "{tool}: {f}");
                    assert!(r.stdout.contains(&format!("created  {f}")), "{tool}: {r:?}");
                }
            }
            None => {
                assert!(
                    r.stdout.contains(&format!("skipped  skills ({tool} has no skills folder")),
                    "{r:?}"
                );
                assert!(r.stdout.contains("skills/"), "does not say where the skills are: {r:?}");
            }
        }
    }
}

/// The `ralph config show` line of `key`: (value, source).
fn config_line(stdout: &str, key: &str) -> (String, String) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("{key} not shown:\n{stdout}"));
    let (left, source) = line.split_once("  # ").unwrap_or_else(|| panic!("no source: {line}"));
    let value = left[key.len() + 3..].trim().to_string();
    (value, source.trim().to_string())
}

#[test]
fn config_show_lists_every_key_with_its_source() {
    let p = Project::new();
    // A command of fixed length: the comments' column depends on the values.
    // (Without the harness's sandbox paths, which are this machine's.)
    let show = |args: &[&str]| {
        let mut ralph = p.ralph();
        ralph.env_remove("RALPH_SANDBOX_READ").env_remove("RALPH_SANDBOX_WRITE");
        to_run(ralph.args(args).env("RALPH_AGENT_COMMAND", "my-agent --fast").output().unwrap())
    };
    let r = show(&["config", "show"]);
    assert_eq!(r.code, 0, "{r:?}");
    insta::assert_snapshot!("config_show", shown(&r, &p));
    // The two views show the same keys, one line (one object) each.
    let json = show(&["config", "show", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&json.stdout).expect("config show --json");
    for row in &rows {
        let key = row["key"].as_str().expect("a key");
        let (value, source) = config_line(&r.stdout, key);
        assert_eq!(row["value"], value, "{key}");
        assert_eq!(row["source"], source, "{key}");
    }
    assert_eq!(r.stdout.lines().count(), rows.len(), "{r:?}");
    let timeout = rows.iter().find(|r| r["key"] == "agent.timeout").unwrap();
    assert_eq!(timeout["env"], "RALPH_AGENT_TIMEOUT");
    assert_eq!(timeout["flag"], "--timeout");
    assert_eq!(timeout["source"], "default");
    let grace = rows.iter().find(|r| r["key"] == "agent.grace").unwrap();
    assert_eq!(grace["flag"], Value::Null, "agent.grace has no flag");
}

#[test]
fn config_precedence_defaults_user_project_env_flag() {
    let user = ".config/ralph/config.toml";
    // (user file, project file, RALPH_UI_COLOR, flags) → (value, source)
    let cases: &[(Option<&str>, Option<&str>, Option<&str>, &[&str], &str, &str)] = &[
        (None, None, None, &[], "\"auto\"", "default"),
        (Some("always"), None, None, &[], "\"always\"", "[TMP]/home/.config/ralph/config.toml"),
        (Some("always"), Some("never"), None, &[], "\"never\"", "[TMP]/project/.ralph/config.toml"),
        (Some("always"), Some("never"), Some("always"), &[], "\"always\"", "env RALPH_UI_COLOR"),
        (None, Some("never"), Some("always"), &["--color", "never"], "\"never\"", "flag --color"),
        (Some("always"), Some("never"), None, &["--no-config"], "\"auto\"", "default"),
    ];
    for (i, (u, proj, env, flags, value, source)) in cases.iter().enumerate() {
        let p = Project::new();
        if let Some(c) = u {
            let f = p.home().join(user);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, format!("[ui]\ncolor = \"{c}\"\n")).unwrap();
        }
        if let Some(c) = proj {
            p.write(".ralph/config.toml", &format!("[ui]\ncolor = \"{c}\"\n"));
        }
        let mut cmd = p.ralph();
        cmd.args(["config", "show"]).args(*flags);
        if let Some(e) = env {
            cmd.env("RALPH_UI_COLOR", e);
        }
        let r = to_run(cmd.output().unwrap());
        assert_eq!(r.code, 0, "case {i}: {r:?}");
        let got = config_line(&redact(&r.stdout, &p), "ui.color");
        assert_eq!(got, (value.to_string(), source.to_string()), "case {i}");
    }
    // Values from the environment are typed like file values.
    let p = Project::new();
    let r = to_run(
        p.ralph().args(["config", "show"]).env("RALPH_AGENT_TIMEOUT", "7m").output().unwrap(),
    );
    assert_eq!(
        config_line(&r.stdout, "agent.timeout"),
        ("\"7m\"".to_string(), "env RALPH_AGENT_TIMEOUT".to_string())
    );
}

#[test]
fn bad_config_is_a_usage_error_naming_file_key_and_type() {
    let p = Project::with_prd(TWO_STORIES);
    p.script(WORKING_AGENT);
    let project_file = p.path(".ralph/config.toml").display().to_string();
    let cases = [
        ("[agent]\ntimeuot = \"5m\"\n", "unknown key `agent.timeuot`"),
        ("[agent]\ntimeout = 5\n", "`agent.timeout`: expected a duration"),
        ("[ui]\ncolor = \"sometimes\"\n", "`ui.color`: expected one of auto, always, never"),
        ("[agent\n", "invalid TOML"),
    ];
    for (text, want) in cases {
        p.write(".ralph/config.toml", text);
        for args in [&["1"][..], &["config", "show"], &["status"]] {
            let r = p.run(args);
            assert_eq!(r.code, code(exit::USAGE), "{text:?} {args:?}: {r:?}");
            assert!(r.stderr.contains(&project_file) && r.stderr.contains(want), "{text:?}: {r:?}");
        }
    }
    assert!(p.agent_runs().is_empty(), "an agent ran with a bad config");

    // Where, which key, and what would be right; the command the hint names works.
    let mut errors = String::new();
    for text in [
        "[agent]\nmodel = \"opus\"\nmodel = \"sonnet\"\n",
        "[agent]\nmodle = \"opus\"\n",
        "[gate]\ncommand = [\"cargo\", \"test\"]\ntimeout = 600\n",
        "[agent]\ntimeout = \n",
    ] {
        p.write(".ralph/config.toml", text);
        let r = p.run(&["1"]);
        assert_eq!(r.code, code(exit::USAGE), "{text:?}: {r:?}");
        errors.push_str(&format!("{text}{}\n", redact(&r.stderr, &p)));
        let every_key = p.run(&["config", "show", "--no-config"]);
        assert_eq!(every_key.code, code(exit::COMPLETE), "{text:?}: {every_key:?}");
    }
    insta::assert_snapshot!("config_errors", errors);
    std::fs::remove_file(p.path(".ralph/config.toml")).unwrap();
    let user = p.home().join(".config/ralph/config.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(&user, "[limits]\ncalls_per_hour = -3\n").unwrap();
    let r = p.run(&["config", "show"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains(&user.display().to_string()), "{r:?}");
    assert!(r.stderr.contains("`limits.calls_per_hour`: expected a non-negative integer"), "{r:?}");
    std::fs::remove_file(&user).unwrap();
    let r = to_run(
        p.ralph().args(["config", "show"]).env("RALPH_LIMITS_WAIT", "maybe").output().unwrap(),
    );
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("RALPH_LIMITS_WAIT") && r.stderr.contains("true or false"), "{r:?}");
}

#[test]
fn analyze_reads_a_saved_output_in_words() {
    let p = Project::new();
    p.write(
        "iter-3.log",
        "reading the code\nerror: tests failed\n---RALPH_STATUS---\nSTATUS: IN_PROGRESS\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 2\nTESTS_STATUS: FAILING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: false\nRECOMMENDATION: fix the failing test next\n---END_RALPH_STATUS---\n",
    );
    let r = p.run(&["analyze", "iter-3.log"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    for debug in ["Some(", "None", "InProgress", "Text)"] {
        assert!(!r.stdout.contains(debug), "Rust's Debug formatting in {r:?}");
    }
    insta::assert_snapshot!("analyze", shown(&r, &p));
}

/// `KEY=value` lines of a file the hook wrote.
fn hook_env(path: &Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the hook did not write {}: {e}", path.display()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A `[hooks]` table whose hooks save their RALPH_* variables in `dir`,
/// one file per call: `<event>-<iteration>.env`.
fn recording_hooks(dir: &Path) -> String {
    let record = toml::Value::Array(
        [
            "sh",
            "-c",
            "env | grep '^RALPH_' > \"$0/$RALPH_EVENT-$RALPH_ITERATION.env\"",
            &dir.display().to_string(),
        ]
        .iter()
        .map(|s| toml::Value::String(s.to_string()))
        .collect(),
    );
    format!("[hooks]\non_iteration_end = {record}\non_complete = {record}\non_halt = {record}\n")
}

#[test]
fn hooks_receive_their_variables() {
    let p = Project::with_prd(TWO_STORIES);
    // Hooks run in the sandbox: they record where they may write.
    let dir = p.agent_dir().join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    p.write(".ralph/config.toml", &recording_hooks(&dir));
    p.script("[run *]\nimplement\nclaude-result done\n");
    let r = to_run(p.ralph().args(["5"]).env("RALPH_AGENT_FORMAT", "claude").output().unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("warning"), "{r:?}");

    let end = hook_env(&dir.join("iteration_end-1.env"));
    let want = [
        ("RALPH_EVENT", "iteration_end"),
        ("RALPH_ITERATION", "1"),
        ("RALPH_STORY_ID", "US-001"),
        ("RALPH_STORY_TITLE", "First"),
        ("RALPH_OUTCOME", "progress"),
        ("RALPH_STORY_PASSES", "true"),
        ("RALPH_COST_USD", "0.0100"),
        ("RALPH_TOTAL_COST_USD", "0.0100"),
        ("RALPH_AGENT", "custom"),
    ];
    for (k, v) in want {
        assert_eq!(end.get(k).map(String::as_str), Some(v), "{k} in {end:?}");
    }
    let project = p.dir().canonicalize().unwrap().display().to_string();
    assert_eq!(end["RALPH_PROJECT_DIR"], project);
    assert!(end["RALPH_PRD"].ends_with("prd.json"), "{end:?}");
    assert!(end["RALPH_LOG"].ends_with("iter-1.log"), "{end:?}");
    assert!(
        Regex::new(r"^\d{8}-\d{6}-[0-9a-f]{4}-[0-9a-f]{6}$")
            .unwrap()
            .is_match(&end["RALPH_RUN_ID"]),
        "{end:?}"
    );
    assert_eq!(hook_env(&dir.join("iteration_end-2.env"))["RALPH_STORY_ID"], "US-002");

    let done = hook_env(&dir.join("complete-2.env"));
    let want = [
        ("RALPH_EVENT", "complete"),
        ("RALPH_OUTCOME", "complete"),
        ("RALPH_EXIT_CODE", "0"),
        ("RALPH_EXIT_REASON", "every story passes"),
        ("RALPH_PASSING", "2"),
        ("RALPH_TOTAL", "2"),
        ("RALPH_TOTAL_COST_USD", "0.0200"),
    ];
    for (k, v) in want {
        assert_eq!(done.get(k).map(String::as_str), Some(v), "{k} in {done:?}");
    }
    assert_eq!(done["RALPH_RUN_ID"], end["RALPH_RUN_ID"]);
    assert!(!dir.join("halt-2.env").exists());
}

#[test]
fn the_halt_hook_says_why_the_run_stopped() {
    let p = Project::with_prd(TWO_STORIES);
    // Hooks run in the sandbox: they record where they may write.
    let dir = p.agent_dir().join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    p.write(".ralph/config.toml", &recording_hooks(&dir));
    p.script(WORKING_AGENT);
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let halt = hook_env(&dir.join("halt-1.env"));
    assert_eq!(halt["RALPH_EVENT"], "halt");
    assert_eq!(halt["RALPH_OUTCOME"], "max_iterations");
    assert_eq!(halt["RALPH_EXIT_CODE"], "1");
    assert!(halt["RALPH_EXIT_REASON"].starts_with("reached the iteration limit (1)"), "{halt:?}");
    assert_eq!((halt["RALPH_PASSING"].as_str(), halt["RALPH_TOTAL"].as_str()), ("1", "2"));
    assert!(!dir.join("complete-1.env").exists());
}

#[test]
fn a_failing_hook_is_a_warning_and_the_run_goes_on() {
    let p = Project::with_prd(TWO_STORIES);
    p.write(
        ".ralph/config.toml",
        "[hooks]\non_iteration_end = [\"sh\", \"-c\", \"echo hook broke >&2; exit 3\"]\non_complete = [\"/nonexistent/ralph-hook\"]\n",
    );
    p.script(WORKING_AGENT);
    let r = p.run(&["5"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002"));
    assert_eq!(r.stdout.matches("warning: hook on_iteration_end").count(), 2, "{r:?}");
    assert!(r.stdout.contains("failed with exit 3: hook broke"), "{r:?}");
    assert!(r.stdout.contains("warning: hook on_complete"), "{r:?}");
    // A JSON consumer sees the same warnings as notices.
    let p = Project::with_prd(TWO_STORIES);
    p.write(".ralph/config.toml", "[hooks]\non_iteration_end = [\"false\"]\n");
    p.script(WORKING_AGENT);
    let r = p.run(&["5", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let warnings =
        events(&r).into_iter().filter(|e| e["event"] == "notice" && e["level"] == "warn").count();
    assert_eq!(warnings, 2, "{r:?}");
}

#[test]
fn completions_and_man_page_are_generated() {
    let p = Project::new();
    for shell in ["bash", "zsh", "fish"] {
        let r = p.run(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {r:?}");
        assert!(r.stdout.len() > 1000 && r.stdout.contains("monitor"), "{shell}: {r:?}");
    }
    let r = p.run(&["man"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(".TH ralph"), "{r:?}");
}

#[test]
fn monitor_without_tmux_says_so() {
    let p = Project::with_prd(ONE_STORY);
    let empty = p.tmp.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let r = to_run(p.ralph().args(["monitor", "1"]).env("PATH", &empty).output().unwrap());
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("needs tmux, which is not installed"), "{r:?}");
    assert!(r.stderr.contains("hint:"), "{r:?}");
    let r = to_run(p.ralph().args(["--monitor", "1"]).env("PATH", &empty).output().unwrap());
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(p.agent_runs().is_empty());
}

/// Kills the test's tmux session however the test ends.
struct Session<'a> {
    name: String,
    socket_dir: &'a Path,
}

impl Session<'_> {
    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(args)
            .env("TMUX_TMPDIR", self.socket_dir)
            .env_remove("TMUX")
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.tmux(&["kill-session", "-t", &self.name]);
    }
}

#[test]
fn monitor_runs_the_loop_in_a_detached_tmux_session_with_three_panes() {
    if !Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success()) {
        // Straight to stderr: the test harness captures println!, and a
        // skip nobody sees looks like a pass.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIPPED: monitor_runs_the_loop_in_a_detached_tmux_session_with_three_panes: tmux is not installed\n",
        );
        return;
    }
    let p = Project::with_prd(ONE_STORY);
    // The agent takes a while, so the watching panes are still there to be
    // counted: a loop of a few milliseconds ends before `list-panes` runs.
    p.script("[run *]\nprint reading the code\nsleep 3\nimplement\n");
    // A tmux server of its own, so the test neither sees nor disturbs a person's sessions.
    let sockets = p.tmp.path().join("tmux");
    std::fs::create_dir_all(&sockets).unwrap();
    let r = to_run(p.ralph().args(["monitor", "1"]).env("TMUX_TMPDIR", &sockets).output().unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    let name = Regex::new(r"started tmux session (\S+)")
        .unwrap()
        .captures(&r.stdout)
        .unwrap_or_else(|| panic!("no session name: {r:?}"))[1]
        .to_string();
    let session = Session { name, socket_dir: &sockets };
    insta::assert_snapshot!("monitor_started", shown(&r, &p));
    let panes = || session.tmux(&["list-panes", "-t", &format!("{}:ralph", session.name)]);
    assert_eq!(panes().lines().count(), 3, "{}", panes());
    let finished = eventually(Duration::from_secs(60), || {
        std::fs::read_to_string(p.path(".git/ralph/runs.jsonl"))
            .is_ok_and(|t| t.contains("complete"))
    });
    let loop_pane =
        session.tmux(&["capture-pane", "-p", "-t", &format!("{}:ralph.0", session.name)]);
    assert!(finished, "the loop did not finish:\n{loop_pane}");
    assert!(p.passes("US-001"));
    // The watching panes go; the loop's report stays, with the way out.
    let loop_pane =
        || session.tmux(&["capture-pane", "-p", "-t", &format!("{}:ralph.0", session.name)]);
    let alone = eventually(Duration::from_secs(10), || panes().lines().count() == 1);
    assert!(alone, "{}", panes());
    let asks = eventually(Duration::from_secs(10), || {
        loop_pane().contains("press Enter to end the tmux session")
    });
    assert!(asks, "{}", loop_pane());
    assert!(loop_pane().contains("1/1 stories pass"), "{}", loop_pane());
    // Enter ends the session: nothing lingers in tmux.
    session.tmux(&["send-keys", "-t", &format!("{}:ralph.0", session.name), "Enter"]);
    let gone = eventually(Duration::from_secs(10), || {
        !Command::new("tmux")
            .args(["has-session", "-t", &session.name])
            .env("TMUX_TMPDIR", &sockets)
            .env_remove("TMUX")
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(gone, "the tmux session outlived the loop");
}
