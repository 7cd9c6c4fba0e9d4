//! Telling people what happened while they were away: a generic webhook
//! (the event's JSON line, as `--json` prints it), a Slack-compatible
//! incoming webhook, an ntfy topic and `notify-send`, each with the events
//! it wants (`notify.*` in the config).
//!
//! Delivery never blocks or breaks the loop: [`Notifier::notify`] only puts
//! a job on a bounded queue (a full queue drops it, and says so once); one
//! background thread sends, each request bounded by `notify.timeout`,
//! retried with back-off; a channel's failure is reported once per run.
//! The end of a run waits at most `notify.timeout` for what is queued.
//!
//! URLs carry their secret (a Slack hook's path, an ntfy topic, a token in
//! a query): they come from the environment (`RALPH_NOTIFY_WEBHOOK`, …) or
//! a file names the variable that holds them (`webhook = "env:MY_HOOK"`);
//! a URL written in a config file is refused when it is read.

mod deliver;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::keys::Setting;
use crate::event::{Event, RunOutcome};

/// Keys whose value is a URL with a secret in it.
pub(crate) const SECRET_KEYS: &[Setting] =
    &[Setting::NotifyWebhook, Setting::NotifySlack, Setting::NotifyNtfy];

/// Jobs waiting to be delivered before new ones are dropped.
const QUEUE: usize = 64;
/// Tries per delivery (the first and its retries).
const TRIES: u32 = 3;

pub(crate) fn is_url(v: &str) -> bool {
    v.contains("://")
}

/// `notify.*` as the configuration resolves it.
#[derive(Debug, Clone, Default)]
pub(crate) struct NotifyConfig {
    pub(crate) webhook: Option<String>,
    pub(crate) slack: Option<String>,
    pub(crate) ntfy: Option<String>,
    pub(crate) desktop: bool,
    pub(crate) events: Vec<String>,
    pub(crate) webhook_events: Vec<String>,
    pub(crate) slack_events: Vec<String>,
    pub(crate) ntfy_events: Vec<String>,
    pub(crate) desktop_events: Vec<String>,
    pub(crate) wait_longer_than: Duration,
    pub(crate) timeout: Duration,
}

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The run ended, however.
    RunEnd,
    /// A story is blocked: the run stopped for it, or a parallel run gave it up.
    Blocked,
    /// A circuit breaker opened.
    CircuitOpen,
    /// A wait for a usage limit or a back-off longer than `notify.wait_longer_than`.
    UsageLimitWait,
    /// A budget is 80% spent.
    Budget,
    /// A parallel run's worker failed (crashed, or could not start).
    WorkerLost,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::RunEnd,
        Kind::Blocked,
        Kind::CircuitOpen,
        Kind::UsageLimitWait,
        Kind::Budget,
        Kind::WorkerLost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::RunEnd => "run_end",
            Kind::Blocked => "blocked",
            Kind::CircuitOpen => "circuit_open",
            Kind::UsageLimitWait => "usage_limit_wait",
            Kind::Budget => "budget",
            Kind::WorkerLost => "worker_lost",
        }
    }

    fn parse(name: &str) -> Result<Kind, NotifyError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .ok_or_else(|| NotifyError::UnknownEvent { name: name.to_string() })
    }

    /// Every event's name, for the message that names a wrong one.
    fn names() -> String {
        Kind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// Why the notifier the configuration asks for cannot start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotifyError {
    /// A setting names an event there is none of (exit 2).
    #[error("notify: unknown event `{name}` (one of {})", Kind::names())]
    UnknownEvent { name: String },
    /// A URL setting is no URL (exit 2).
    #[error("notify: `{value}` is neither a URL nor env:VARIABLE")]
    NotAUrl { value: String },
    /// The machine would not give it a thread (exit 7).
    #[error("notify: cannot start its thread: {source}")]
    Thread { source: std::io::Error },
}

/// What an event is, for notifications (empty: nothing to notify).
pub fn kinds(event: &Event, wait_longer_than: Duration) -> Vec<Kind> {
    use crate::event::{MergeResult, WorkerOutcome};
    match event {
        Event::RunEnd { outcome: RunOutcome::Blocked, .. } => vec![Kind::RunEnd, Kind::Blocked],
        Event::RunEnd { .. } => vec![Kind::RunEnd],
        Event::Circuit { to: crate::circuit::State::Open, .. } => vec![Kind::CircuitOpen],
        Event::Waiting { seconds, .. } if *seconds > wait_longer_than.as_secs() => {
            vec![Kind::UsageLimitWait]
        }
        Event::BudgetWarning { .. } => vec![Kind::Budget],
        Event::Merge { result: MergeResult::Blocked, .. } => vec![Kind::Blocked],
        // plan::turn's words for a worker's end (driver/parallel).
        Event::WorkerEnd { outcome: WorkerOutcome::GivenUp, .. } => vec![Kind::Blocked],
        Event::WorkerEnd { outcome: WorkerOutcome::Failed, .. } => vec![Kind::WorkerLost],
        Event::Worker { inner, .. } => match inner.as_ref() {
            Event::Circuit { to: crate::circuit::State::Open, .. } => vec![Kind::CircuitOpen],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Where a notification goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Channel {
    Webhook(String),
    Slack(String),
    Ntfy(String),
    /// The path of notify-send.
    Desktop(std::path::PathBuf),
}

impl Channel {
    fn name(&self) -> &'static str {
        match self {
            Channel::Webhook(_) => "the webhook (notify.webhook)",
            Channel::Slack(_) => "Slack (notify.slack)",
            Channel::Ntfy(_) => "ntfy (notify.ntfy)",
            Channel::Desktop(_) => "the desktop notification (notify-send)",
        }
    }
}

/// A channel and what it wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) channel: Channel,
    pub(crate) wants: Vec<Kind>,
}

/// A URL setting's value: itself (from the environment or a flag), or the
/// variable an `env:NAME` names.
fn url(
    value: &Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, NotifyError> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => match v.strip_prefix("env:") {
            Some(var) => Ok(env(var.trim()).filter(|u| !u.trim().is_empty())),
            None if is_url(v) => Ok(Some(v.to_string())),
            None => Err(NotifyError::NotAUrl { value: v.to_string() }),
        },
    }
}

/// The channels the configuration asks for. `notify_send` is where
/// notify-send is, if anywhere.
pub(crate) fn targets(
    cfg: &NotifyConfig,
    env: &dyn Fn(&str) -> Option<String>,
    notify_send: Option<std::path::PathBuf>,
) -> Result<Vec<Target>, NotifyError> {
    let wants = |own: &[String]| -> Result<Vec<Kind>, NotifyError> {
        let names = if own.is_empty() { &cfg.events } else { own };
        names.iter().map(|n| Kind::parse(n.trim())).collect()
    };
    let mut out = Vec::new();
    if let Some(u) = url(&cfg.webhook, env)? {
        out.push(Target { channel: Channel::Webhook(u), wants: wants(&cfg.webhook_events)? });
    }
    if let Some(u) = url(&cfg.slack, env)? {
        out.push(Target { channel: Channel::Slack(u), wants: wants(&cfg.slack_events)? });
    }
    if let Some(u) = url(&cfg.ntfy, env)? {
        out.push(Target { channel: Channel::Ntfy(u), wants: wants(&cfg.ntfy_events)? });
    }
    if cfg.desktop
        && let Some(p) = notify_send
    {
        out.push(Target { channel: Channel::Desktop(p), wants: wants(&cfg.desktop_events)? });
    }
    Ok(out)
}

/// One delivery: where, and what.
pub(crate) struct Job {
    pub(crate) target: usize,
    pub(crate) kind: Kind,
    pub(crate) event: Event,
    /// The event as `--json` printed it, stamped when it happened.
    pub(crate) line: String,
}

/// The queue's end the loop holds.
pub struct Notifier {
    tx: Option<mpsc::SyncSender<Job>>,
    failures: mpsc::Receiver<String>,
    thread: std::thread::JoinHandle<()>,
    targets: Vec<Target>,
    wait_longer_than: Duration,
    timeout: Duration,
    dropped: std::cell::Cell<bool>,
}

impl Notifier {
    /// The notifier the configuration asks for; `None` when it asks for nothing.
    pub(crate) fn start(
        cfg: &NotifyConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Notifier>, NotifyError> {
        let notify_send = cfg.desktop.then(|| which::which("notify-send").ok()).flatten();
        let targets = targets(cfg, env, notify_send)?;
        if targets.is_empty() {
            return Ok(None);
        }
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
        let (ftx, failures) = mpsc::channel();
        let sender = deliver::Sender::new(targets.clone(), cfg.timeout, ftx);
        let thread = std::thread::Builder::new()
            .name("ralph-notify".into())
            .spawn(move || sender.run(rx, TRIES))
            .map_err(|source| NotifyError::Thread { source })?;
        Ok(Some(Notifier {
            tx: Some(tx),
            failures,
            thread,
            targets,
            wait_longer_than: cfg.wait_longer_than,
            timeout: cfg.timeout,
            dropped: std::cell::Cell::new(false),
        }))
    }

    /// Queues the event for every channel that wants it; never waits.
    /// `line` is the event as `--json` prints it.
    pub fn notify(&self, event: &Event, line: &str) {
        let kinds = kinds(event, self.wait_longer_than);
        if kinds.is_empty() {
            return;
        }
        let Some(tx) = &self.tx else { return };
        for (i, t) in self.targets.iter().enumerate() {
            let Some(kind) = kinds.iter().find(|k| t.wants.contains(k)) else { continue };
            let job = Job { target: i, kind: *kind, event: event.clone(), line: line.to_string() };
            // Full: the thread is stuck on a slow channel; said at the end.
            if tx.try_send(job).is_err() {
                self.dropped.set(true);
            }
        }
    }

    /// Failures reported since the last call (each channel's first only).
    pub fn failures(&self) -> Vec<String> {
        self.failures.try_iter().collect()
    }

    /// The run is over: waits at most `notify.timeout` for what is queued,
    /// then leaves the rest. Returns the failures not yet reported.
    pub fn finish(mut self) -> Vec<String> {
        drop(self.tx.take());
        let deadline = Instant::now() + self.timeout;
        while !self.thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut out = self.failures();
        if self.dropped.get() {
            out.push("notify: some notifications were dropped: the queue was full".into());
        }
        if !self.thread.is_finished() {
            out.push(format!(
                "notify: gave up waiting for deliveries still under way after {}",
                humantime::format_duration(self.timeout)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests;
