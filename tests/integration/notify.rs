//! Notifications delivered to a local HTTP server that records what it
//! received, and to servers that answer 500 or never answer: the run ends
//! as it would have, and a failing channel is reported once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::harness::*;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Answer {
    Ok,
    Error500,
    Never,
}

/// A request as the server read it.
pub(crate) struct Request {
    head: String,
    body: String,
}

/// A local webhook receiver that records every request (also the page
/// test's, for the notifications of its overnight run).
pub(crate) struct Server {
    pub(crate) url: String,
    pub(crate) requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    pub(crate) fn start(answer: Answer) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    let mut body = vec![0; len];
                    let _ = reader.read_exact(&mut body);
                    seen.lock()
                        .unwrap()
                        .push(Request { head, body: String::from_utf8_lossy(&body).into_owned() });
                    let mut stream = stream;
                    match answer {
                        Answer::Ok => {
                            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        }
                        Answer::Error500 => {
                            let _ = stream.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        }
                        // Holds the connection open, answering nothing.
                        Answer::Never => std::thread::sleep(std::time::Duration::from_secs(600)),
                    }
                });
            }
        });
        Server { url, requests }
    }

    pub(crate) fn bodies(&self) -> Vec<Value> {
        let r = self.requests.lock().unwrap();
        r.iter()
            .map(|r| serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.body)))
            .collect()
    }
}

fn notify_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.contains("notify:")).collect()
}

#[test]
fn the_webhook_gets_the_run_end_and_the_block_as_json_prints_them() {
    let server = Server::start(Answer::Ok);
    let p = Project::with_prd(THREE_STORIES);
    p.script(crate::history::OVERNIGHT);
    let out = p
        .ralph()
        .args(["10", "--json"])
        .env("RALPH_AGENT_FORMAT", "claude")
        .env("RALPH_NOTIFY_WEBHOOK", &server.url)
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::BLOCKED), "{r:?}");
    let bodies = server.bodies();
    // One run end, which is also the block: sent once.
    assert_eq!(bodies.len(), 1, "{:?}", bodies);
    let b = &bodies[0];
    assert_eq!((b["event"].as_str(), b["outcome"].as_str()), (Some("run_end"), Some("blocked")));
    // The very line --json printed.
    let printed: Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "run_end")
        .unwrap();
    // Stamped each where it was written, a few microseconds apart.
    let unstamped = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("ts");
        v
    };
    assert_eq!(unstamped(b), unstamped(&printed));
    let head = &server.requests.lock().unwrap()[0].head;
    assert!(
        head.starts_with("POST /hook ")
            && head.to_ascii_lowercase().contains("content-type: application/json"),
        "{head}"
    );
    assert!(notify_lines(&r.stdout).is_empty(), "{r:?}");
}

#[test]
fn a_server_that_answers_500_is_retried_and_reported_once() {
    let server = Server::start(Answer::Error500);
    let p = Project::with_prd(THREE_STORIES);
    p.script(crate::history::OVERNIGHT);
    let out = p
        .ralph()
        .arg("10")
        .env("RALPH_AGENT_FORMAT", "claude")
        .env("RALPH_NOTIFY_WEBHOOK", &server.url)
        // The usage-limit wait is notified too: two deliveries that fail.
        .env("RALPH_NOTIFY_EVENTS", "run_end,usage_limit_wait")
        .env("RALPH_NOTIFY_WAIT_LONGER_THAN", "0")
        .env("RALPH_NOTIFY_TIMEOUT", "5s")
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::BLOCKED), "{r:?}");
    let said = notify_lines(&r.stdout);
    assert_eq!(said.len(), 1, "{r:?}");
    assert!(
        said[0].contains("the webhook (notify.webhook) failed (HTTP 500, 3 tries)"),
        "{said:?}"
    );
    assert!(!said[0].contains(&server.url), "the URL is a secret: {said:?}");
    let events: Vec<String> =
        server.bodies().iter().map(|b| b["event"].as_str().unwrap().to_string()).collect();
    assert_eq!(&events[..3], ["waiting", "waiting", "waiting"], "{events:?}");
}

#[test]
fn a_server_that_never_answers_does_not_hold_the_run() {
    let server = Server::start(Answer::Never);
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let out = p
        .ralph()
        .arg("5")
        .env("RALPH_NOTIFY_WEBHOOK", &server.url)
        .env("RALPH_NOTIFY_TIMEOUT", "1s")
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002") && p.passes("US-003"));
    let said = notify_lines(&r.stdout);
    assert_eq!(said.len(), 1, "{r:?}");
    assert!(
        said[0].contains("gave up waiting") || said[0].contains("no answer within 1s"),
        "{said:?}"
    );
    assert_eq!(server.requests.lock().unwrap().len(), 1, "the request reached the server");
}

#[test]
fn a_webhook_url_in_the_project_config_is_refused_before_anything_runs() {
    let p = Project::with_prd(THREE_STORIES);
    p.write(
        ".ralph/config.toml",
        "[notify]\nwebhook = \"https://example.invalid/hook?token=s3cret\"\n",
    );
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(
        r.stderr.contains("notify.webhook") && r.stderr.contains("RALPH_NOTIFY_WEBHOOK"),
        "{r:?}"
    );
    assert!(!r.stderr.contains("s3cret"), "{r:?}");
    assert!(p.agent_runs().is_empty());
}

#[test]
fn a_budget_80_percent_spent_is_notified_once_before_the_budget_ends_the_run() {
    let server = Server::start(Answer::Ok);
    let p = Project::with_prd(THREE_STORIES);
    // No story is ever done (and the breaker waits): only the budget ends it.
    p.script("[run *]\nclaude-result nothing done\n");
    // $0.01 per iteration: 80% of $0.024 is passed after two, the budget after three.
    let out = p
        .ralph()
        .args(["10", "--max-cost", "0.024"])
        .env("RALPH_AGENT_FORMAT", "claude")
        .env("RALPH_NOTIFY_WEBHOOK", &server.url)
        .env("RALPH_NOTIFY_EVENTS", "budget")
        .env("RALPH_CIRCUIT_NO_PROGRESS", "10")
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::BUDGET), "{r:?}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(
        (bodies[0]["event"].as_str(), bodies[0]["budget"].as_str()),
        (Some("budget_warning"), Some("cost"))
    );
    assert_eq!(bodies[0]["limit"].as_f64(), Some(0.024));
    assert!(r.stdout.contains("warning: the cost budget is 80% spent ($0.02 of $0.02)"), "{r:?}");
}

#[test]
fn notify_send_gets_the_run_end_where_it_exists() {
    let p = Project::with_prd(THREE_STORIES);
    let bin = p.tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let said = p.tmp.path().join("notify-send.txt");
    let script = format!("#!/bin/sh\nprintf '%s\\n' \"$@\" >> {}\n", said.display());
    std::fs::write(bin.join("notify-send"), script).unwrap();
    std::fs::set_permissions(
        bin.join("notify-send"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    p.script("[run *]\nimplement\n");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out =
        p.ralph().arg("5").env("PATH", path).env("RALPH_NOTIFY_DESKTOP", "true").output().unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let args = std::fs::read_to_string(&said).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    let lines: Vec<&str> = args.lines().collect();
    assert_eq!(&lines[..2], ["--app-name=ralph", "ralph: the run ended"], "{args}");
    assert!(args.contains("every story passes"), "{args}");
}

#[test]
fn a_parallel_run_notifies_once_for_all_its_workers_and_keeps_the_url_out_of_their_file() {
    let server = Server::start(Answer::Ok);
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let out = p
        .ralph()
        .args(["10", "--jobs", "2"])
        .env("RALPH_NOTIFY_WEBHOOK", &server.url)
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let events: Vec<String> =
        server.bodies().iter().map(|b| b["event"].as_str().unwrap().to_string()).collect();
    assert_eq!(events, ["run_end"], "{r:?}");
    let run = crate::history::run_dirs(&p).pop().unwrap();
    let settings = p.read(&format!(".git/ralph/logs/{run}/worker-settings.toml"));
    assert!(!settings.contains(&server.url), "{settings}");
    // The run's report has its merged stories, each with its merge commit.
    let report: Value = serde_json::from_str(&p.run(&["report", "--json"]).stdout).unwrap();
    assert_eq!(report["totals"]["delivered"], 3, "{report}");
    assert!(
        report["stories"].as_array().unwrap().iter().all(|s| s["commit"].is_string()),
        "{report}"
    );
}
