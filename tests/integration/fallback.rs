//! A fallback agent (`agent.fallback`, `--fallback-tool`): two scripted
//! CLIs, the configured one (the fake agent as a custom command, printing
//! claude's stream) and `claude` on PATH (a wrapper running the fake agent
//! with its own script and run log), one of them limited.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::Value;

use crate::harness::*;

const TWO_STORIES: &str = r#"{
  "project": "Demo",
  "branchName": "ralph/demo",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["works"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Second", "description": "", "acceptanceCriteria": ["works"], "priority": 2, "passes": false, "notes": ""}
  ]
}
"#;

/// The project, with a second scripted CLI installed as `claude` on PATH.
struct Two {
    p: Project,
    bin: PathBuf,
}

impl Two {
    /// `primary` scripts the configured agent, `fallback` the `claude` on PATH.
    fn new(prd: &str, primary: &str, fallback: &str) -> Two {
        let p = Project::with_prd(prd);
        p.script(primary);
        let bin = p.tmp.path().join("bin");
        let dir = p.tmp.path().join("claude-agent");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("script"), fallback).unwrap();
        let wrapper = bin.join("claude");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nFAKE_AGENT_SCRIPT='{0}/script' FAKE_AGENT_DIR='{0}' exec '{FAKE_AGENT}' \"$@\"\n",
                dir.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        Two { p, bin }
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (Run, Vec<Value>) {
        let path = format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap_or_default());
        let mut c = self.p.ralph();
        c.args(args)
            .arg("--json")
            .env("PATH", path)
            // claude refuses to skip permissions as root outside a sandbox.
            .env("IS_SANDBOX", "1")
            .env("RALPH_AGENT_FORMAT", "claude")
            // The `claude` on PATH keeps its runs beside its script.
            .env("RALPH_SANDBOX_WRITE", self.sandbox_write());
        for (k, v) in env {
            c.env(k, v);
        }
        let r = to_run(c.output().unwrap());
        let events = r.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        (r, events)
    }

    /// Where both scripted CLIs keep their run logs and counters.
    fn sandbox_write(&self) -> String {
        let claude = self.p.tmp.path().join("claude-agent");
        format!("{},{}", self.p.agent_dir().display(), claude.display())
    }

    /// Story ids of the `claude` CLI's runs, in order.
    fn fallback_runs(&self) -> Vec<String> {
        let log = self.p.tmp.path().join("claude-agent/runs.log");
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("story=")))
            .map(str::to_string)
            .collect()
    }
}

fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// (agent, result) of each iteration, from `iteration_end`.
fn iterations(events: &[Value]) -> Vec<(String, String)> {
    of(events, "iteration_end")
        .iter()
        .map(|e| (e["agent"].as_str().unwrap().into(), e["result"].as_str().unwrap().into()))
        .collect()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.into(), b.into())
}

const DONE: &str = "implement\nclaude-result done\n";

#[test]
fn a_long_usage_limit_hands_the_story_to_the_fallback_which_completes_it() {
    let two = Two::new(TWO_STORIES, "[run *]\nusage-limit 7200\n", &format!("[run *]\n{DONE}"));
    let before = chrono::Utc::now();
    let (r, ev) = two.run(&["5", "--fallback-tool", "claude"], &[]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(two.p.passes("US-001") && two.p.passes("US-002"));
    // The configured agent met the limit once; claude did both stories.
    assert_eq!(two.p.agent_runs(), ["US-001"]);
    assert_eq!(two.fallback_runs(), ["US-001", "US-002"]);
    assert_eq!(
        iterations(&ev),
        [pair("custom", "transient"), pair("claude", "progress"), pair("claude", "progress")]
    );
    let starts: Vec<&str> =
        of(&ev, "iteration_start").iter().map(|e| e["agent"].as_str().unwrap()).collect();
    assert_eq!(starts, ["custom", "claude", "claude"]);
    // One switch, before the retry of iteration 1, saying why.
    let switches = of(&ev, "agent_switch");
    assert_eq!(switches.len(), 1, "{r:?}");
    let s = switches[0];
    assert_eq!(
        (&s["from"], &s["to"], &s["reason"]),
        (&"custom".into(), &"claude".into(), &"usage_limit".into())
    );
    assert_eq!(s["iteration"], 1);
    let until: chrono::DateTime<chrono::Utc> = s["until"].as_str().unwrap().parse().unwrap();
    assert!(until > before + chrono::TimeDelta::minutes(110), "{until}");
    // Claude's story and the story claude took over, in the report.
    let end = ev.last().unwrap();
    assert_eq!(end["event"], "run_end");
    assert_eq!(end["switches"].as_array().unwrap().len(), 1);
    assert_eq!(end["switches"][0]["reason"], "usage_limit");
    assert_eq!(end["report"][0]["agents"], serde_json::json!(["custom", "claude"]));
    assert_eq!(end["report"][1]["agents"], serde_json::json!(["claude"]));
    // `ralph report` (and report.md) names them and the switch.
    let report = to_run(two.p.ralph().args(["report"]).output().unwrap());
    assert!(report.stdout.contains("| custom, claude |"), "{report:?}");
    assert!(report.stdout.contains("- agent custom → claude from iteration 1"), "{report:?}");
    // The limit is the configured agent's alone, and it is kept for the next run.
    let limits: Value = serde_json::from_str(&two.p.read(".git/ralph/limits.json")).unwrap();
    assert!(limits["agents"]["custom"].is_string(), "{limits}");
    assert!(limits["agents"].get("claude").is_none(), "{limits}");
    // `ralph status` says whose limit it is.
    let mut status = two.p.ralph();
    let status =
        to_run(status.args(["status"]).env("RALPH_AGENT_FALLBACK", "claude").output().unwrap());
    assert!(
        status.stdout.contains("usage limit of custom: it can be called again at"),
        "{status:?}"
    );
    assert!(!status.stdout.contains("calls resume at"), "{status:?}");
    // The plain report says it in words.
    let two_plain =
        Two::new(TWO_STORIES, "[run *]\nusage-limit 7200\n", &format!("[run *]\n{DONE}"));
    let path = format!("{}:{}", two_plain.bin.display(), std::env::var("PATH").unwrap());
    let out = two_plain
        .p
        .ralph()
        .args(["5", "--fallback-tool", "claude"])
        .env("PATH", path)
        .env("IS_SANDBOX", "1")
        .env("RALPH_AGENT_FORMAT", "claude")
        .env("RALPH_SANDBOX_WRITE", two_plain.sandbox_write())
        .output()
        .unwrap();
    let plain = to_run(out);
    assert_eq!(plain.code, code(exit::COMPLETE), "{plain:?}");
    assert!(
        plain
            .stdout
            .contains("agent custom → claude from iteration 1: custom's usage limit lasts until"),
        "{plain:?}"
    );
    assert!(
        plain.stdout.contains("✓ US-001 First (claimed: yes, no gate) · by custom, claude"),
        "{plain:?}"
    );
}

#[test]
fn a_limit_that_resets_sooner_than_fallback_after_is_waited_out() {
    let two = Two::new(
        TWO_STORIES,
        &format!("[run 1]\nusage-limit 1\n[run *]\n{DONE}"),
        &format!("[run *]\n{DONE}"),
    );
    // limits.fallback_after stays at its default, 10 minutes.
    let (r, ev) = two.run(&["5", "--fallback-tool", "claude"], &[]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(of(&ev, "agent_switch").is_empty(), "{r:?}");
    assert_eq!(of(&ev, "waiting").len(), 1, "{r:?}");
    let reason = &of(&ev, "waiting")[0]["reason"];
    assert_eq!(reason, "custom's usage limit, which resets sooner than limits.fallback_after");
    assert!(two.fallback_runs().is_empty(), "the fallback never ran");
    assert_eq!(
        iterations(&ev),
        [pair("custom", "transient"), pair("custom", "progress"), pair("custom", "progress")]
    );
}

#[test]
fn with_no_wait_even_a_short_limit_goes_to_the_fallback() {
    let two = Two::new(TWO_STORIES, "[run *]\nusage-limit 300\n", &format!("[run *]\n{DONE}"));
    let (r, ev) = two.run(&["5", "--fallback-tool", "claude", "--no-wait"], &[]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(two.fallback_runs(), ["US-001", "US-002"]);
    assert_eq!(of(&ev, "agent_switch").len(), 1, "{r:?}");
}

#[test]
fn after_its_reset_the_configured_agent_takes_over_again() {
    // The configured agent's limit resets 1 s (plus ralph's 2 s guard)
    // after it is met; claude's first run outlasts that by 3 s, room for a
    // loaded machine (with 1 s of room it failed once under full load).
    let two = Two::new(
        TWO_STORIES,
        &format!("[run 1]\nusage-limit 1\n[run *]\n{DONE}"),
        &format!("[run 1]\nsleep 6\n{DONE}[run *]\n{DONE}"),
    );
    let (r, ev) = two
        .run(&["5"], &[("RALPH_AGENT_FALLBACK", "claude"), ("RALPH_LIMITS_FALLBACK_AFTER", "0")]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(two.fallback_runs(), ["US-001"]);
    assert_eq!(two.p.agent_runs(), ["US-001", "US-002"]);
    assert_eq!(
        iterations(&ev),
        [pair("custom", "transient"), pair("claude", "progress"), pair("custom", "progress")]
    );
    let switches: Vec<(String, String, String, u64)> = of(&ev, "agent_switch")
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            (s("from"), s("to"), s("reason"), e["iteration"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        switches,
        [
            ("custom".into(), "claude".into(), "usage_limit".into(), 1),
            ("claude".into(), "custom".into(), "limit_reset".into(), 2),
        ]
    );
    assert!(of(&ev, "agent_switch")[1]["until"].is_null());
    let end = ev.last().unwrap();
    assert_eq!(end["report"][1]["agents"], serde_json::json!(["custom"]));
}

#[test]
fn with_every_agent_limited_the_run_waits_for_the_earliest_reset_or_stops() {
    let two = Two::new(TWO_STORIES, "[run *]\nusage-limit 7200\n", "[run *]\nusage-limit 3600\n");
    let (r, ev) = two.run(&["5", "--fallback-tool", "claude", "--no-wait"], &[]);
    assert_eq!(r.code, code(exit::RATE_LIMITED), "{r:?}");
    assert_eq!(iterations(&ev), [pair("custom", "transient"), pair("claude", "transient")]);
    let end = ev.last().unwrap();
    let message = end["message"].as_str().unwrap();
    let head = "every agent's usage limit (claude's resets first) until ";
    assert!(message.starts_with(head), "{message}");
    // The earliest reset is claude's, an hour away (in local time, as TZ=UTC).
    let claude_at: chrono::DateTime<chrono::Utc> = {
        let limits: Value = serde_json::from_str(&two.p.read(".git/ralph/limits.json")).unwrap();
        limits["agents"]["claude"].as_str().unwrap().parse().unwrap()
    };
    assert!(message.contains(&claude_at.format("%Y-%m-%d %H:%M:%S").to_string()), "{message}");
    // --dry-run names the agent the next iteration would run: the first to reset.
    let path = format!("{}:{}", two.bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut dry = two.p.ralph();
    dry.args(["--dry-run", "--json", "--fallback-tool", "claude"]).env("PATH", path);
    let out = to_run(dry.env("IS_SANDBOX", "1").output().unwrap());
    let dry: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|_| panic!("{out:?}"));
    assert_eq!(dry["agent"]["argv"][0], "claude", "{out:?}");
}

#[test]
fn a_fallback_the_config_cannot_name_is_a_clear_error() {
    let two = Two::new(TWO_STORIES, DONE, DONE);
    two.p.write(".ralph/config.toml", "[agent]\nfallback = [\"kodex\"]\n");
    let (r, _) = two.run(&["5"], &[]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(
        r.stderr.contains("config.toml:2:12: `agent.fallback`: unknown agent \"kodex\""),
        "{r:?}"
    );
    assert!(two.p.agent_runs().is_empty());

    std::fs::remove_file(two.p.path(".ralph/config.toml")).unwrap();
    let (r, _) = two.run(&["5"], &[("RALPH_AGENT_FALLBACK", "custom")]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("custom cannot be a fallback"), "{r:?}");

    let (r, _) = two.run(&["5", "--fallback-tool", "kodex"], &[]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("invalid value 'kodex' for '--fallback-tool"), "{r:?}");

    // A fallback that is not installed stops the run before it starts.
    let (r, _) = two.run(&["5", "--fallback-tool", "amp"], &[("PATH", "/usr/bin:/bin")]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("fallback agent amp: agent command `amp` not found"), "{r:?}");
}

#[test]
fn in_a_parallel_run_a_worker_falls_back_on_its_own() {
    let two = Two::new(
        TWO_STORIES,
        &format!("[story US-001 1]\nusage-limit 7200\n[run *]\n{DONE}"),
        &format!("[run *]\n{DONE}"),
    );
    let (r, ev) = two.run(&["6", "--jobs", "2", "--fallback-tool", "claude"], &[]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(two.p.passes("US-001") && two.p.passes("US-002"));
    assert_eq!(two.fallback_runs(), ["US-001"]);
    let switches = of(&ev, "agent_switch");
    assert_eq!(switches.len(), 1, "{r:?}");
    assert_eq!((&switches[0]["story"], &switches[0]["to"]), (&"US-001".into(), &"claude".into()));
    // Nobody paused: the other worker's agent was never limited.
    assert!(!r.stdout.contains("every worker pauses"), "{r:?}");
    let end = ev.last().unwrap();
    assert_eq!(end["switches"].as_array().map(Vec::len), Some(1), "{r:?}");
    let agents = |id: &str| {
        end["report"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()["agents"].clone()
    };
    assert_eq!(agents("US-001"), serde_json::json!(["custom", "claude"]));
    assert_eq!(agents("US-002"), serde_json::json!(["custom"]));
}

#[test]
fn ralph_agents_checks_the_fallbacks_too() {
    let two = Two::new(TWO_STORIES, DONE, DONE);
    let path = format!("{}:/usr/bin:/bin", two.bin.display());
    let env = [("RALPH_AGENT_FALLBACK", "claude,amp"), ("PATH", path.as_str())];
    let out = two.p.ralph().arg("agents").env("IS_SANDBOX", "1").envs(env).output().unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    let claude = format!("  then    claude · ready ({}/claude)", two.bin.display());
    assert!(r.stdout.contains(&claude), "{r:?}");
    assert!(r.stdout.contains("  then    amp · cannot run"), "{r:?}");
    assert!(r.stdout.contains("agent command `amp` not found on PATH"), "{r:?}");
}
