//! The background thread's side: turning a job into a request (or a
//! notify-send), bounded in time, retried with back-off, a channel's
//! failure reported once.

use std::sync::mpsc;
use std::time::Duration;

use super::{Channel, Job, Kind, Target};
use crate::event::Event;

pub(super) struct Sender {
    targets: Vec<Target>,
    timeout: Duration,
    agent: ureq::Agent,
    failures: mpsc::Sender<String>,
    failed: Vec<bool>,
}

/// Why one delivery failed, in the words its warning uses (a URL never
/// in them: it carries the secret).
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// The request failed: [`describe`]'s words, the URL taken out. The
    /// `ureq::Error` itself is not kept, as its text may name the URL.
    #[error("{0}")]
    Request(String),
    #[error("cannot start {}: {source}", program.display())]
    Start { program: std::path::PathBuf, source: std::io::Error },
    #[error("notify-send ended with {0}")]
    Ended(std::process::ExitStatus),
    #[error("notify-send did not finish in time")]
    TimedOut,
}

/// What one request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) content_type: &'static str,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: String,
}

/// A title for people: "ralph: the run ended".
fn title(kind: Kind) -> &'static str {
    match kind {
        Kind::RunEnd => "ralph: the run ended",
        Kind::Blocked => "ralph: a story is blocked",
        Kind::CircuitOpen => "ralph: the circuit breaker opened",
        Kind::UsageLimitWait => "ralph: waiting for a usage limit",
        Kind::Budget => "ralph: a budget is 80% spent",
        Kind::WorkerLost => "ralph: a worker was lost",
    }
}

/// The event in words, without colour; the run's end without its story list.
pub(crate) fn text(event: &Event) -> String {
    let style =
        crate::ui::Style { color: false, agent_output: false, quiet: false, verbose: false };
    let event = match event {
        Event::RunEnd { .. } => {
            let mut e = event.clone();
            if let Event::RunEnd { report, best, .. } = &mut e {
                report.clear();
                *best = None;
            }
            e
        }
        e => e.clone(),
    };
    crate::ui::describe(&event, style).unwrap_or_default()
}

/// The request a channel gets for an event (pure).
/// `line` is the event as `--json` printed it.
pub(crate) fn request(channel: &Channel, kind: Kind, event: &Event, line: &str) -> Option<Request> {
    Some(match channel {
        Channel::Webhook(_) => Request {
            content_type: "application/json",
            headers: Vec::new(),
            body: line.to_string(),
        },
        Channel::Slack(_) => Request {
            content_type: "application/json",
            headers: Vec::new(),
            body: serde_json::json!({ "text": format!("*{}*\n{}", title(kind), text(event)) })
                .to_string(),
        },
        Channel::Ntfy(_) => Request {
            content_type: "text/plain; charset=utf-8",
            headers: vec![
                ("Title", title(kind).to_string()),
                ("Tags", kind.as_str().to_string()),
                (
                    "Priority",
                    match kind {
                        Kind::RunEnd | Kind::Budget | Kind::UsageLimitWait => "default",
                        Kind::Blocked | Kind::CircuitOpen | Kind::WorkerLost => "high",
                    }
                    .to_string(),
                ),
            ],
            body: text(event),
        },
        Channel::Desktop(_) => return None,
    })
}

/// An error in words that never repeat the URL (it carries the secret).
fn describe(e: &ureq::Error, url: &str, timeout: Duration) -> String {
    match e {
        ureq::Error::StatusCode(c) => format!("HTTP {c}"),
        ureq::Error::Timeout(_) => {
            format!("no answer within {}", humantime::format_duration(timeout))
        }
        ureq::Error::BadUri(_) => "the URL is not valid".into(),
        e => e.to_string().replace(url, "<the URL>"),
    }
}

impl Sender {
    pub(super) fn new(
        targets: Vec<Target>,
        timeout: Duration,
        failures: mpsc::Sender<String>,
    ) -> Sender {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(true)
            .user_agent(concat!("ralph/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let failed = vec![false; targets.len()];
        Sender { targets, timeout, agent, failures, failed }
    }

    pub(super) fn run(mut self, jobs: mpsc::Receiver<Job>, tries: u32) {
        for job in jobs {
            let mut last = None;
            for attempt in 0..tries {
                if attempt > 0 {
                    // 0.5 s, 1 s, 2 s …
                    std::thread::sleep(Duration::from_millis(500 << (attempt - 1).min(4)));
                }
                match self.deliver(&job) {
                    Ok(()) => {
                        last = None;
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            if let Some(last) = last
                && !self.failed[job.target]
            {
                self.failed[job.target] = true;
                let name = self.targets[job.target].channel.name();
                let _ = self.failures.send(format!(
                    "notify: {name} failed ({last}, {tries} tries); further failures of it in this run are not reported"
                ));
            }
        }
    }

    fn deliver(&self, job: &Job) -> Result<(), Failure> {
        let channel = &self.targets[job.target].channel;
        let url = match channel {
            Channel::Webhook(u) | Channel::Slack(u) | Channel::Ntfy(u) => u,
            Channel::Desktop(program) => return self.desktop(program, job),
        };
        let Some(req) = request(channel, job.kind, &job.event, &job.line) else { return Ok(()) };
        let mut builder = self.agent.post(url).header("Content-Type", req.content_type);
        for (k, v) in &req.headers {
            builder = builder.header(*k, v);
        }
        builder
            .send(req.body.as_str())
            .map(|_| ())
            .map_err(|e| Failure::Request(describe(&e, url, self.timeout)))
    }

    /// notify-send through the one runner of helper commands: its own
    /// process group, ended whole when it outlives `notify.timeout`.
    fn desktop(&self, program: &std::path::Path, job: &Job) -> Result<(), Failure> {
        let mut cmd = std::process::Command::new(program);
        cmd.args(["--app-name=ralph", title(job.kind), &text(&job.event)]);
        let brief = crate::agent::supervise::run_brief(&mut cmd, self.timeout)
            .map_err(|source| Failure::Start { program: program.to_path_buf(), source })?;
        match brief.status {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(Failure::Ended(s)),
            None => Err(Failure::TimedOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    use super::*;

    fn notify_send(dir: &std::path::Path, script: &str) -> std::path::PathBuf {
        let program = dir.join("notify-send");
        std::fs::write(&program, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    fn sender(program: &std::path::Path, timeout: Duration) -> Sender {
        let target =
            Target { channel: Channel::Desktop(program.into()), wants: vec![Kind::RunEnd] };
        Sender::new(vec![target], timeout, mpsc::channel().0)
    }

    fn job() -> Job {
        let event = Event::Notice { level: crate::event::Level::Warn, message: "m".into() };
        Job { target: 0, kind: Kind::RunEnd, event, line: String::new() }
    }

    #[test]
    fn notify_send_gets_the_title_and_the_text_and_its_status_counts() {
        let _serial = crate::agent::supervise::serial();
        let dir = tempfile::tempdir().unwrap();
        let said = dir.path().join("said");
        let ok = notify_send(dir.path(), &format!("printf '%s\\n' \"$@\" > '{}'", said.display()));
        assert!(sender(&ok, Duration::from_secs(30)).deliver(&job()).is_ok());
        let args = std::fs::read_to_string(&said).unwrap();
        assert!(args.starts_with("--app-name=ralph\nralph: the run ended\n"), "{args}");

        let failing = notify_send(dir.path(), "exit 3");
        let e = sender(&failing, Duration::from_secs(30)).deliver(&job()).unwrap_err();
        assert!(matches!(e, Failure::Ended(s) if s.code() == Some(3)), "{e}");
    }

    #[test]
    fn a_hanging_notify_send_is_ended_with_its_group_when_its_time_is_up() {
        let _serial = crate::agent::supervise::serial();
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        // It and a child of its own both hang; the child holds the pipes.
        let hang =
            notify_send(dir.path(), &format!("sleep 60 & echo $$ $! > '{}'; wait", pids.display()));
        let started = Instant::now();
        let e = sender(&hang, Duration::from_millis(300)).deliver(&job()).unwrap_err();
        assert!(matches!(e, Failure::TimedOut), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let pids = std::fs::read_to_string(&pids).unwrap();
        for pid in pids.split_whitespace() {
            let pid: i32 = pid.parse().unwrap();
            // The child, orphaned, may wait a moment for its reaper.
            let until = Instant::now() + Duration::from_secs(5);
            while crate::process::running(pid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(!crate::process::running(pid), "{pid} of {pids} still runs");
        }
    }

    #[test]
    fn a_notify_send_that_cannot_start_says_which() {
        let _serial = crate::agent::supervise::serial();
        let e = sender(std::path::Path::new("/nonexistent/notify-send"), Duration::from_secs(1))
            .deliver(&job())
            .unwrap_err();
        assert!(e.to_string().starts_with("cannot start /nonexistent/notify-send: "), "{e}");
    }
}
