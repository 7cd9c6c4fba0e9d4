//! `ralph serve`'s API over plain HTTP, with a std TcpStream client (its
//! page in Chromium is `serve_page.rs`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::harness::*;

pub const PATIENCE: Duration = Duration::from_secs(90);

/// Three stories; the second waits on the first.
pub const PRD: &str = r#"{
  "project": "Overnight",
  "branchName": "ralph/overnight",
  "description": "test project",
  "userStories": [
    {"id": "US-001", "title": "Parse the input", "description": "", "acceptanceCriteria": ["works"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Write the output", "description": "", "acceptanceCriteria": ["works"], "priority": 2, "passes": false, "notes": "", "dependsOn": ["US-001"]},
    {"id": "US-003", "title": "Deploy it", "description": "", "acceptanceCriteria": ["works"], "priority": 3, "passes": false, "notes": ""}
  ]
}
"#;

/// A running `ralph serve`, stopped when dropped.
pub struct Served {
    child: Child,
    /// `127.0.0.1:PORT`, whatever address it is bound to.
    pub addr: String,
    pub token: Option<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn serve(p: &Project, args: &[&str]) -> Served {
    let mut child = p
        .ralph()
        .args(["serve", "--port", "0", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ralph serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let port = v["addr"].as_str().unwrap().rsplit(':').next().unwrap().to_string();
    Served {
        child,
        addr: format!("127.0.0.1:{port}"),
        token: v["token"].as_str().map(str::to_string),
    }
}

struct Reply {
    code: u16,
    head: String,
    body: String,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n{}", self.head, self.body)
    }
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// One request, its target sent as it is (no normalising of `..`).
fn request(addr: &str, method: &str, target: &str, headers: &[&str]) -> Reply {
    let mut s = connect(addr);
    let mut req = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|h| h.starts_with("Host:")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for h in headers {
        req.push_str(&format!("{h}\r\n"));
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Reply { code, head: head.to_string(), body: body.to_string() }
}

fn get(addr: &str, target: &str) -> Reply {
    request(addr, "GET", target, &[])
}

/// The status document as `ralph status --json` prints it.
fn status_json(p: &Project) -> Value {
    let r = p.run(&["status", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    serde_json::from_str(&r.stdout).unwrap()
}

/// An event stream, read message by message.
struct Stream(BufReader<TcpStream>);

impl Stream {
    fn open(addr: &str, last_event_id: Option<&str>) -> Stream {
        let mut s = connect(addr);
        let last = last_event_id.map(|id| format!("Last-Event-ID: {id}\r\n")).unwrap_or_default();
        write!(
            s,
            "GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{last}\r\n"
        )
        .unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
        }
        Stream(r)
    }

    /// The next message: its `event:` (`message` when none), `id:` and data.
    fn next(&mut self) -> (String, Option<String>, String) {
        let (mut event, mut id, mut data) = ("message".to_string(), None, String::new());
        loop {
            let mut line = String::new();
            assert!(self.0.read_line(&mut line).unwrap() > 0, "the stream ended");
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    return (event, id, data);
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
    }

    /// Run events until one named `name`; all of them, in order.
    fn until(&mut self, name: &str) -> Vec<(Option<String>, Value)> {
        let mut seen = Vec::new();
        loop {
            let (event, id, data) = self.next();
            if event != "message" {
                continue;
            }
            let v: Value = serde_json::from_str(&data).unwrap();
            let done = v["event"] == name;
            seen.push((id, v));
            if done {
                return seen;
            }
        }
    }
}

fn finished_run(p: &Project) {
    p.script("[run *]\nprint working on {id}\nimplement\n");
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
}

#[test]
fn api_status_is_the_status_document() {
    let p = Project::with_prd(PRD);
    finished_run(&p);
    let s = serve(&p, &[]);
    let r = get(&s.addr, "/api/status");
    assert_eq!(r.code, 200, "{r:?}");
    assert!(r.head.contains("Content-Type: application/json"), "{r:?}");
    let served: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(served, status_json(&p));
    assert_eq!(served["passing"], 1);
    let page = get(&s.addr, "/");
    assert_eq!(page.code, 200, "{page:?}");
    assert!(page.body.contains("<script src=\"/page/app.js\""), "{page:?}");
    assert_eq!(get(&s.addr, "/page/app.js").code, 200);
    assert_eq!(get(&s.addr, "/page/style.css").code, 200);
}

#[test]
fn events_stream_a_run_started_in_another_process() {
    let p = Project::with_prd(PRD);
    p.script("[run *]\nprint working on {id}\nimplement\n");
    let s = serve(&p, &[]);
    let mut stream = Stream::open(&s.addr, None);
    let (event, _, data) = stream.next();
    assert_eq!(event, "status", "{data}");
    let run = p.spawn(&["2"]);
    let seen = stream.until("run_end");
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(code(exit::MAX_ITERATIONS)));
    let names: Vec<&str> = seen.iter().filter_map(|(_, v)| v["event"].as_str()).collect();
    assert!(names.contains(&"run_start") && names.contains(&"iteration_end"), "{names:?}");
    let said = |needle: &str| seen.iter().any(|(_, v)| v["text"].as_str() == Some(needle));
    assert!(said("working on US-001") && said("working on US-002"), "{seen:?}");
    // The lines are the ones `--json` prints: versioned and stamped.
    assert!(seen.iter().all(|(_, v)| v["v"] == 1 && v["ts"].is_string()), "{seen:?}");

    // A client that comes back names the last event it had and goes on
    // from there; a new one is sent the run so far.
    let (start_id, _) = seen.iter().find(|(_, v)| v["event"] == "run_start").unwrap();
    let mut again = Stream::open(&s.addr, start_id.as_deref());
    let resumed = again.until("run_end");
    let after_start = seen.iter().skip_while(|(_, v)| v["event"] != "run_start").nth(1).unwrap();
    assert_eq!(resumed[0].1, after_start.1, "{resumed:?}");
    assert_eq!(
        resumed.len() + 1,
        seen.iter().skip_while(|(_, v)| v["event"] != "run_start").count()
    );
    let mut fresh = Stream::open(&s.addr, None);
    let replayed = fresh.until("run_end");
    assert_eq!(replayed.len(), seen.len(), "{replayed:?}");
}

#[test]
fn a_server_off_loopback_needs_its_token() {
    let p = Project::with_prd(PRD);
    let s = serve(&p, &["--bind", "0.0.0.0"]);
    let token = s.token.clone().expect("a generated token");
    assert_eq!(token.len(), 32, "{token}");
    for target in ["/", "/api/status", "/events", "/nothing", "/?token=wrong"] {
        let r = get(&s.addr, target);
        assert_eq!(r.code, 401, "{target}: {r:?}");
        assert!(!r.body.contains("Overnight"), "{r:?}");
    }
    assert_eq!(request(&s.addr, "POST", "/", &[]).code, 401);
    let r = get(&s.addr, &format!("/api/status?token={token}"));
    assert_eq!(r.code, 200, "{r:?}");
    assert!(r.body.contains("Overnight"), "{r:?}");
    let bearer = format!("Authorization: Bearer {token}");
    assert_eq!(request(&s.addr, "GET", "/api/status", &[&bearer]).code, 200);

    // A token given on loopback is required there too; without one, only
    // loopback host names are answered (no DNS rebinding onto it).
    let r = p.run(&["serve", "--token", "a b"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("--token"), "{r:?}");
    let s = serve(&p, &["--token", "let-me-in"]);
    assert_eq!(get(&s.addr, "/api/status").code, 401);
    assert_eq!(get(&s.addr, "/api/status?token=let-me-in").code, 200);
    let s = serve(&p, &[]);
    assert_eq!(s.token, None);
    let r = request(&s.addr, "GET", "/api/status", &["Host: rebind.example"]);
    assert!(r.code == 403 || r.code == 400, "{r:?}");
}

#[test]
fn logs_are_served_read_only_and_nothing_outside_them() {
    let p = Project::with_prd(PRD);
    finished_run(&p);
    let s = serve(&p, &[]);
    let run: Value = serde_json::from_str(&get(&s.addr, "/api/run").body).unwrap();
    let id = run["run"]["run_id"].as_str().unwrap().to_string();
    let logs: Vec<&str> =
        run["logs"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert!(logs.contains(&"iter-1.log") && logs.contains(&"events.jsonl"), "{logs:?}");
    let r = get(&s.addr, &format!("/logs/{id}/iter-1.log"));
    assert_eq!(r.code, 200, "{r:?}");
    assert!(r.body.contains("working on US-001"), "{r:?}");

    let dir = p.path(&format!(".git/ralph/logs/{id}"));
    std::os::unix::fs::symlink(p.path("prd.json"), dir.join("prd.log")).unwrap();
    for target in [
        format!("/logs/{id}/../state.json"),
        format!("/logs/{id}/../../lock"),
        format!("/logs/{id}/%2e%2e/state.json"),
        format!("/logs/{id}/..%2f..%2f..%2fprd.json"),
        format!("/logs/{id}/prd.log"),
        format!("/logs/{id}//etc/passwd"),
        "/logs/../../prd.json".to_string(),
        "/logs/%2e%2e/state.json".to_string(),
        "/../../../../etc/passwd".to_string(),
    ] {
        let r = get(&s.addr, &target);
        assert_eq!(r.code, 404, "{target}: {r:?}");
        assert!(!r.body.contains("userStories") && !r.body.contains("root:"), "{target}: {r:?}");
    }
}

#[test]
fn unknown_paths_are_404_and_every_endpoint_is_read_only() {
    let p = Project::with_prd(PRD);
    finished_run(&p);
    let s = serve(&p, &[]);
    let before = status_json(&p);
    for target in ["/nothing", "/api", "/api/statuses", "/page/secret.js", "/logs/"] {
        assert_eq!(get(&s.addr, target).code, 404, "{target}");
    }
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for target in ["/", "/api/status", "/api/run", "/events", "/nothing"] {
            let r = request(&s.addr, method, target, &[]);
            assert_eq!(r.code, 405, "{method} {target}: {r:?}");
            assert!(r.head.contains("Allow: GET, HEAD"), "{r:?}");
        }
    }
    assert_eq!(status_json(&p), before);
}

/// What a command prints with `--json`, parsed.
pub fn command_json(p: &Project, args: &[&str]) -> Value {
    let r = p.run(args);
    assert_eq!(r.code, 0, "{args:?}: {r:?}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {r:?}"))
}

#[test]
fn history_and_report_answer_what_the_commands_print() {
    let p = Project::with_prd(PRD);
    let s = serve(&p, &[]);
    let r = get(&s.addr, "/api/report");
    assert_eq!(r.code, 404, "no run yet: {r:?}");
    assert!(r.body.contains("no recorded run yet"), "{r:?}");
    let r = get(&s.addr, "/api/history");
    assert_eq!((r.code, r.body.trim()), (200, "[]"), "{r:?}");

    finished_run(&p);
    finished_run(&p);
    let history = command_json(&p, &["history", "--json"]);
    assert_eq!(history.as_array().map(Vec::len), Some(2), "{history}");
    let r = get(&s.addr, "/api/history");
    assert_eq!(r.code, 200, "{r:?}");
    assert!(r.head.contains("Content-Type: application/json"), "{r:?}");
    assert_eq!(serde_json::from_str::<Value>(&r.body).unwrap(), history);

    // The latest run's without `run`; the first's by the start of its id.
    let delivered = |report: &Value| -> Vec<String> {
        let stories = report["stories"].as_array().unwrap();
        stories.iter().filter(|s| s["delivered"] == true).map(|s| s["id"].to_string()).collect()
    };
    let latest = command_json(&p, &["report", "--json"]);
    assert_eq!(delivered(&latest), ["\"US-002\""], "{latest}");
    assert_eq!(serde_json::from_str::<Value>(&get(&s.addr, "/api/report").body).unwrap(), latest);
    let first = history[0]["run_id"].as_str().unwrap();
    let prefix = &first[..first.len() - 2];
    let report = command_json(&p, &["report", prefix, "--json"]);
    assert_eq!(delivered(&report), ["\"US-001\""], "{report}");
    let r = get(&s.addr, &format!("/api/report?run={prefix}"));
    assert_eq!(r.code, 200, "{r:?}");
    assert_eq!(serde_json::from_str::<Value>(&r.body).unwrap(), report);

    let r = get(&s.addr, "/api/report?run=19990101");
    assert_eq!(r.code, 404, "{r:?}");
    assert!(r.body.contains("no recorded run `19990101`"), "{r:?}");
}
