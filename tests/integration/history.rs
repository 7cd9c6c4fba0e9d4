//! `events.jsonl`, `ralph history`, `ralph report`, report.md and log
//! retention, on scripted runs of the fake agent.

use serde_json::Value;

use crate::harness::*;

/// US-001 passes at once; US-002 meets a usage limit, then passes; US-003
/// is blocked. Claude-style results: $0.01 per answered run.
pub const OVERNIGHT: &str = "[story US-001 1]\nimplement\nclaude-result done\n\
[story US-002 1]\nusage-limit 2\n\
[story US-002 2]\nimplement\nclaude-result done\n\
[story US-003]\nhandoff {\"status\":\"blocked\",\"summary\":\"stuck\",\"evidence\":[],\"nextSteps\":[],\"blocker\":\"need an API key\"}\nclaude-result stuck\n";

pub fn overnight(p: &Project) -> Run {
    p.script(OVERNIGHT);
    let out = p.ralph().arg("10").env("RALPH_AGENT_FORMAT", "claude").output().unwrap();
    to_run(out)
}

/// The run folders under .git/ralph/logs/, oldest first.
pub fn run_dirs(p: &Project) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p.path(".git/ralph/logs"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn an_overnight_run_reports_what_its_events_say() {
    let p = Project::with_prd(THREE_STORIES);
    let r = overnight(&p);
    assert_eq!(r.code, code(exit::BLOCKED), "{r:?}");
    let run = run_dirs(&p).pop().unwrap();
    let dir = p.path(&format!(".git/ralph/logs/{run}"));
    // The Markdown report is written beside the logs, and its path printed.
    let md_path = dir.join("report.md");
    assert!(r.stdout.contains(&format!("report: {}", md_path.display())), "{r:?}");
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(
        md.contains("outcome: blocked (the agent is blocked on US-003: need an API key)"),
        "{md}"
    );

    // The events as --json would print them: a start, an end, and what is between.
    let events = lines(&dir.join("events.jsonl"));
    // Notices of the run's setup come first, then its start.
    let started = events.iter().position(|e| e["event"] == "run_start").unwrap();
    assert!(events[..started].iter().all(|e| e["event"] == "notice"), "{events:?}");
    assert!(events.iter().all(|e| e["v"] == 1 && e["ts"].is_string()));
    assert!(events.iter().any(|e| e["event"] == "run_end" && e["outcome"] == "blocked"));
    let ends: Vec<&Value> = events.iter().filter(|e| e["event"] == "iteration_end").collect();
    let of = |id: &str| ends.iter().filter(|e| e["story_id"] == id).copied().collect::<Vec<_>>();
    let waited: u64 = events
        .iter()
        .filter(|e| e["event"] == "waiting")
        .map(|e| e["seconds"].as_u64().unwrap())
        .sum();
    assert!(waited >= 1, "no usage-limit wait recorded");

    let out = p.run(&["report", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    let stories = report["stories"].as_array().unwrap();
    let ids: Vec<&str> = stories.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["US-001", "US-003", "US-002"], "the PRD's order");
    for s in stories {
        let id = s["id"].as_str().unwrap();
        let its = of(id);
        let counted = its.iter().filter(|e| e["result"] != "transient").count();
        let retried = its.iter().filter(|e| e["result"] == "transient").count();
        let cost: f64 = its.iter().filter_map(|e| e["cost_usd"].as_f64()).sum();
        let wall: u64 = its.iter().map(|e| e["duration_ms"].as_u64().unwrap()).sum();
        assert_eq!(s["attempts"].as_u64().unwrap() as usize, counted, "{id}");
        assert_eq!(s["retried"].as_u64().unwrap() as usize, retried, "{id}");
        assert!((s["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9, "{id}");
        assert_eq!(s["wall_ms"].as_u64().unwrap(), wall, "{id}");
        assert_eq!(s["cost_estimated"], false, "{id}: claude reports its cost");
    }
    let by = |id: &str| stories.iter().find(|s| s["id"] == id).unwrap();
    assert_eq!(
        (by("US-001")["delivered"].clone(), by("US-001")["first_pass"].clone()),
        (true.into(), true.into())
    );
    assert_eq!(by("US-002")["retried"], 1);
    assert_eq!(by("US-003")["delivered"], false);
    // The delivering commit is the branch's commit that has the story's work.
    let commit = by("US-002")["commit"].as_str().unwrap().to_string();
    let subject = p.git(&["log", "-1", "--format=%s", &commit]);
    assert!(subject.contains("US-002"), "{subject}");
    let t = &report["totals"];
    assert_eq!(t["delivered"], 2);
    assert_eq!(t["first_pass_rate"], 1.0);
    // The time the wait lasted: as planned at most (its seconds are rounded up).
    let waited_ms = t["waited_ms"].as_u64().unwrap();
    assert!(waited_ms > 0 && waited_ms <= waited * 1000, "{waited_ms} of {waited} s");
    let total: f64 = ends.iter().filter_map(|e| e["cost_usd"].as_f64()).sum();
    assert!((t["cost_usd"].as_f64().unwrap() - total).abs() < 1e-9);
    assert!((t["cost_per_delivered_story"].as_f64().unwrap() - total / 2.0).abs() < 1e-9);
    assert_eq!(report["summary"]["outcome"], "blocked");
    assert_eq!(report["summary"]["iterations"], 3);

    // The Markdown on stdout is the file's.
    let again = p.run(&["report", &run[..15], "--markdown"]);
    assert_eq!(again.stdout, md, "{again:?}");
}

#[test]
fn history_lists_the_runs_since_a_time() {
    let p = Project::with_prd(THREE_STORIES);
    let none = p.run(&["history"]);
    assert_eq!((none.code, none.stdout.as_str()), (0, "no recorded runs\n"), "{none:?}");
    assert_eq!(overnight(&p).code, code(exit::BLOCKED));
    // US-003 is still blocked, and now it is the only story left.
    p.script("[run *]\nimplement\nclaude-result done\n");
    let second = p.ralph().arg("5").env("RALPH_AGENT_FORMAT", "claude").output().unwrap();
    assert_eq!(to_run(second).code, code(exit::COMPLETE));
    let out = p.run(&["history", "--json", "--since", "1h"]);
    let rows: Vec<Value> =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(rows.len(), 2, "{out:?}");
    assert_eq!(
        (rows[0]["outcome"].as_str(), rows[1]["outcome"].as_str()),
        (Some("blocked"), Some("complete"))
    );
    assert_eq!((rows[0]["delivered"].as_u64(), rows[1]["delivered"].as_u64()), (Some(2), Some(1)));
    // No gate: all three pass, none verified.
    assert_eq!((&rows[1]["passing"], &rows[1]["verified"]), (&3.into(), &0.into()));
    assert_eq!(rows[1]["gated"], false);
    assert!(rows[0]["cost_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(rows[0]["tool"], "custom");
    let text = p.run(&["history"]).stdout;
    assert!(
        text.contains("blocked (the agent is blocked on US-003") && text.contains("complete"),
        "{text}"
    );
    // --since in the future of every run: none.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let out = p.run(&["history", "--json", "--since", "1s"]);
    assert_eq!(out.stdout.trim(), "[]", "{out:?}");
}

#[test]
fn old_run_logs_go_but_never_the_current_or_the_last_failed_one() {
    let p = Project::with_prd(THREE_STORIES);
    let old = [
        "20200101-000000-0001-000001",
        "20200102-000000-0001-000002",
        "20200103-000000-0001-000003",
    ];
    for id in old {
        p.write(&format!(".git/ralph/logs/{id}/iter-1.log"), "x\n");
    }
    // The middle one failed; the newest old one completed.
    let runs = format!(
        "{{\"run_id\":\"{}\",\"outcome\":\"circuit_open\"}}\n{{\"run_id\":\"{}\",\"outcome\":\"complete\"}}\n",
        old[1], old[2]
    );
    p.write(".git/ralph/runs.jsonl", &runs);
    p.script("[run *]\nimplement\n");
    let r = p.ralph().arg("5").env("RALPH_LOGS_KEEP_RUNS", "1").output().unwrap();
    let r = to_run(r);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let left = run_dirs(&p);
    assert_eq!(left.len(), 2, "{left:?}");
    assert_eq!(left[0], old[1], "the last failed run's logs stay");
    assert!(left[1].as_str() > old[2], "the current run's logs stay: {left:?}");
    assert!(r.stdout.contains("removed the logs of 2 old runs"), "{r:?}");
}
