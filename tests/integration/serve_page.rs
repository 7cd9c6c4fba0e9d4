//! `ralph serve`'s page in headless Chromium, during a scripted run in
//! another process: what a person would see as the run goes on.

use std::process::Stdio;

use crate::chromium::{self, Browser};
use crate::harness::*;
use crate::serve::{PATIENCE, PRD, command_json, serve};

/// What the page shows of each story: `[[id, state], …]`.
fn board(b: &mut Browser) -> Vec<(String, String)> {
    let v = b.eval(
        "JSON.stringify([...document.querySelectorAll('[data-story]')].map(e => [e.dataset.story, e.dataset.state]))",
    );
    serde_json::from_str(v.as_str().unwrap_or("[]")).unwrap_or_default()
}

fn state_of(b: &mut Browser, id: &str) -> String {
    board(b).into_iter().find(|(s, _)| s == id).map(|(_, st)| st).unwrap_or_default()
}

/// The page's per-story report: `[[id, cell, …], …]`.
fn report_rows(b: &mut Browser) -> Vec<Vec<String>> {
    let v = b.eval(
        "JSON.stringify([...document.querySelectorAll('[data-report]')].map(r => \
         [r.dataset.report, ...[...r.cells].map(c => c.textContent)]))",
    );
    serde_json::from_str(v.as_str().unwrap_or("[]")).unwrap_or_default()
}

fn text_of(b: &mut Browser, id: &str) -> String {
    b.eval(&format!("(document.getElementById('{id}') || {{}}).textContent || ''"))
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn live_lines(b: &mut Browser) -> String {
    b.eval("document.getElementById('live-lines').textContent").as_str().unwrap_or("").to_string()
}

/// The overnight run of the issue, end to end: several stories, one
/// blocked, one usage-limit wait; the page follows it live, the report's
/// numbers match the events, the webhook hears of the wait and of the
/// blocked end, and the page shows the report and the history.
#[test]
fn the_page_in_chromium_follows_a_scripted_run() {
    let Some(chromium) = chromium::find("the_page_in_chromium_follows_a_scripted_run") else {
        return;
    };
    let artifacts = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../serve-artifacts");
    let p = Project::with_prd(PRD);
    // US-001 waits for the test twice, so the page is seen mid-iteration;
    // US-002 meets a usage limit first; US-003 is blocked.
    p.script(
        "[story US-001]\nprint reading the parser\nwait-shared go-1 600\nprint writing the parser tests\n\
         wait-shared go-2 600\nimplement\nclaude-result done\n\
         [story US-002 1]\nusage-limit 2\n\
         [story US-002]\nprint writing the output\nimplement\nclaude-result done\n\
         [story US-003]\nprint looking at the deploy\nhandoff {\"status\":\"blocked\",\"summary\":\"stuck\",\
         \"evidence\":[],\"nextSteps\":[],\"blocker\":\"the staging database is down\"}\nclaude-result blocked\n",
    );
    let s = serve(&p, &[]);
    let hook = crate::notify::Server::start(crate::notify::Answer::Ok);
    let mut run = KillOnDrop(
        p.ralph()
            .args(["8", "--max-cost", "5"])
            .env("RALPH_AGENT_FORMAT", "claude")
            .env("RALPH_NOTIFY_WEBHOOK", &hook.url)
            .env("RALPH_NOTIFY_EVENTS", "run_end,blocked,usage_limit_wait")
            .env("RALPH_NOTIFY_WAIT_LONGER_THAN", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut b = Browser::launch(&chromium);
    b.open(&format!("http://{}/", s.addr));

    assert!(
        eventually(PATIENCE, || live_lines(&mut b).contains("reading the parser")
            && state_of(&mut b, "US-001") == "running"),
        "the live line and the running story: {:?}\n{}",
        board(&mut b),
        b.text()
    );
    assert_eq!(state_of(&mut b, "US-002"), "waiting");
    // The run's own budget, given on its command line.
    assert!(eventually(PATIENCE, || b.text().contains("of $5.00")), "{}", b.text());
    assert!(b.text().contains("waits on US-001"), "{}", b.text());
    b.screenshot(&artifacts.join("running.png"));
    // The same page, not reloaded, takes the next line as it comes.
    std::fs::write(p.agent_dir().join("go-1"), "").unwrap();
    assert!(
        eventually(PATIENCE, || live_lines(&mut b).contains("writing the parser tests")),
        "the live line did not move on: {}",
        live_lines(&mut b)
    );
    std::fs::write(p.agent_dir().join("go-2"), "").unwrap();
    assert!(
        eventually(PATIENCE, || state_of(&mut b, "US-001") == "verified"),
        "US-001 verified: {:?}",
        board(&mut b)
    );
    assert!(
        eventually(PATIENCE, || b.text().contains("usage limit")),
        "the usage-limit wait: {}",
        b.text()
    );
    assert!(
        eventually(PATIENCE, || {
            let mut all = board(&mut b);
            all.sort();
            all == [
                ("US-001".to_string(), "verified".to_string()),
                ("US-002".into(), "verified".into()),
                ("US-003".into(), "blocked".into()),
            ]
        }),
        "the board at the end: {:?}\n{}",
        board(&mut b),
        b.text()
    );
    assert_eq!(run.0.wait().unwrap().code(), Some(code(exit::BLOCKED)));
    assert!(
        eventually(PATIENCE, || {
            let t = b.text();
            t.contains("ended: blocked") && t.contains("the staging database is down")
        }),
        "the run's end: {}",
        b.text()
    );
    assert!(b.text().contains("iter-1.log"), "links to the logs: {}", b.text());

    // The report's numbers are the events': an attempt or a retry (the
    // limited call) per iteration_end, the cost the agent reported, the
    // wait out of the limit.
    let report = command_json(&p, &["report", "--json"]);
    let run_id = report["summary"]["run_id"].as_str().unwrap().to_string();
    let events =
        std::fs::read_to_string(p.path(&format!(".git/ralph/logs/{run_id}/events.jsonl"))).unwrap();
    let events: Vec<serde_json::Value> =
        events.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ends: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["event"] == "iteration_end").collect();
    let cost: f64 = ends.iter().map(|e| e["cost_usd"].as_f64().unwrap_or(0.0)).sum();
    let t = &report["totals"];
    let retried: u64 =
        report["stories"].as_array().unwrap().iter().map(|s| s["retried"].as_u64().unwrap()).sum();
    assert_eq!(retried, 1, "the usage-limited call: {report}");
    assert_eq!(t["attempts"].as_u64().unwrap() + retried, ends.len() as u64, "{report}");
    assert!((t["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9, "{report}");
    assert!(cost > 0.0, "the agent reported its cost: {report}");
    assert!(t["waited_ms"].as_u64().unwrap() >= 1000, "the usage-limit wait: {report}");
    let stories = report["stories"].as_array().unwrap();
    for s in stories {
        let id = s["id"].as_str().unwrap();
        let iterations = ends.iter().filter(|e| e["story_id"] == id).count() as u64;
        let (attempts, retried) = (s["attempts"].as_u64().unwrap(), s["retried"].as_u64().unwrap());
        assert_eq!(attempts + retried, iterations, "{id}: {report}");
    }
    assert_eq!(report["summary"]["outcome"], "blocked", "{report}");

    // The webhook heard of the wait and of the blocked end, once each.
    let heard: Vec<(String, String)> = hook
        .bodies()
        .iter()
        .map(|b| {
            (b["event"].as_str().unwrap_or("").into(), b["outcome"].as_str().unwrap_or("").into())
        })
        .collect();
    assert!(heard.contains(&("waiting".into(), "".into())), "{heard:?}");
    assert_eq!(
        heard.iter().filter(|(e, _)| e == "run_end").collect::<Vec<_>>(),
        [&("run_end".to_string(), "blocked".to_string())],
        "{heard:?}"
    );

    // The page shows the same report, story by story, and its totals.
    let rows_match = |rows: &[Vec<String>]| {
        rows.len() == stories.len()
            && stories.iter().all(|s| {
                rows.iter().any(|r| {
                    r[0] == s["id"].as_str().unwrap()
                        && r[2].parse::<u64>().ok() == s["attempts"].as_u64()
                        && r[8] == format!("${:.2}", s["cost_usd"].as_f64().unwrap())
                })
            })
    };
    assert!(
        eventually(PATIENCE, || rows_match(&report_rows(&mut b))),
        "the page's report: {:?}\nwant {report}",
        report_rows(&mut b)
    );
    let totals = text_of(&mut b, "report-totals");
    assert!(
        totals.contains(&format!("total ${cost:.2}")) && totals.contains("waited out limits"),
        "{totals}"
    );
    // And the run, at the top of its history (the page fetches the report
    // and the history side by side: either may come in first).
    let ended = |h: &str| h.starts_with(&run_id) && h.contains("blocked");
    assert!(
        eventually(PATIENCE, || ended(&text_of(&mut b, "history-rows"))),
        "{}",
        text_of(&mut b, "history-rows")
    );
    b.screenshot(&artifacts.join("ended.png"));

    // Off loopback, the page needs its token.
    let open = serve(&p, &["--bind", "0.0.0.0"]);
    let token = open.token.clone().unwrap();
    b.open(&format!("http://{}/", open.addr));
    assert!(
        eventually(PATIENCE, || b.text().contains("a token is required")),
        "without the token: {}",
        b.text()
    );
    assert!(!b.text().contains("Overnight"));
    b.open(&format!("http://{}/?token={token}", open.addr));
    assert!(
        eventually(PATIENCE, || state_of(&mut b, "US-003") == "blocked"
            && b.text().contains("Overnight")),
        "with the token: {}",
        b.text()
    );
    b.screenshot(&artifacts.join("with-token.png"));
}

/// Two stories at once, one waiting on the first, one given up.
const PARALLEL: &str = r#"{
  "project": "Parallel",
  "branchName": "ralph/parallel",
  "description": "test project",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["works"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Second", "description": "", "acceptanceCriteria": ["works"], "priority": 2, "passes": false, "notes": ""},
    {"id": "US-003", "title": "Third", "description": "", "acceptanceCriteria": ["works"], "priority": 3, "passes": false, "notes": "", "dependsOn": ["US-001"]}
  ]
}
"#;

#[test]
fn the_page_in_chromium_shows_a_parallel_run_and_what_it_gave_up() {
    let Some(chromium) =
        chromium::find("the_page_in_chromium_shows_a_parallel_run_and_what_it_gave_up")
    else {
        return;
    };
    let artifacts = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../serve-artifacts");
    let p = Project::with_prd(PARALLEL);
    p.script(
        "[story US-002]\nprint stuck on {id}\nwait-shared go 600\nhandoff {\"status\":\"blocked\",\
         \"summary\":\"stuck\",\"evidence\":[],\"nextSteps\":[],\"blocker\":\"no credentials for the API\"}\n\
         [run *]\nprint working on {id}\nwait-shared go 600\nimplement\n",
    );
    let s = serve(&p, &[]);
    let run = p
        .ralph()
        .args(["8", "--jobs", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _run = KillOnDrop(run);
    let mut b = Browser::launch(&chromium);
    b.open(&format!("http://{}/", s.addr));
    assert!(
        eventually(PATIENCE, || state_of(&mut b, "US-001") == "running"
            && state_of(&mut b, "US-002") == "running"),
        "both workers at work: {:?}\n{}",
        board(&mut b),
        b.text()
    );
    assert!(
        eventually(PATIENCE, || {
            let lines = live_lines(&mut b);
            lines.contains("US-001] working on US-001") && lines.contains("US-002] stuck on US-002")
        }),
        "each worker's lines, named: {}",
        live_lines(&mut b)
    );
    assert_eq!(state_of(&mut b, "US-003"), "waiting");
    b.screenshot(&artifacts.join("parallel-running.png"));
    std::fs::write(p.agent_dir().join("go"), "").unwrap();
    assert!(
        eventually(PATIENCE, || {
            let mut all = board(&mut b);
            all.sort();
            all == [
                ("US-001".to_string(), "verified".to_string()),
                ("US-002".into(), "blocked".into()),
                ("US-003".into(), "verified".into()),
            ] && b.text().contains("no credentials for the API")
        }),
        "the board at the end: {:?}\n{}",
        board(&mut b),
        b.text()
    );
    b.screenshot(&artifacts.join("parallel-ended.png"));
}

/// A child killed if the test fails before it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}
