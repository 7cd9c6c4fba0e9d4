//! The reporter every run's events pass through on their way to the
//! screen: it appends each one to `logs/<run>/events.jsonl` as `--json`
//! prints it (the countdown ticks aside), hands it to the notifier, and at
//! the run's end writes `report.md` beside the logs, says where, prunes
//! old runs' logs and waits (bounded) for the notifications, all before the
//! `run_end` it passes on, which stays the run's last event.

use std::io::Write;
use std::path::PathBuf;

use super::retention::{self, Retention};
use super::{EVENTS_FILE, REPORT_FILE};
use crate::event::{Event, Level, Reporter};
use crate::notify::Notifier;
use crate::store::Store;

/// Lines before `run_start` kept for the file; more are not written.
const EARLY: usize = 64;

pub struct Recorder<'a> {
    inner: &'a mut dyn Reporter,
    store: &'a Store,
    keep: Retention,
    notifier: Option<Notifier>,
    /// Lines before the run's start (its id names the folder).
    pending: Vec<String>,
    file: Option<std::fs::File>,
    run: Option<(String, PathBuf)>,
    /// The events log could not be written: said once.
    failed: bool,
}

impl<'a> Recorder<'a> {
    pub fn new(
        inner: &'a mut dyn Reporter,
        store: &'a Store,
        keep: Retention,
        notifier: Option<Notifier>,
    ) -> Recorder<'a> {
        Recorder {
            inner,
            store,
            keep,
            notifier,
            pending: Vec::new(),
            file: None,
            run: None,
            failed: false,
        }
    }

    fn warn(&mut self, message: String) {
        self.own(&Event::Notice { level: Level::Warn, message });
    }

    /// An event of the recorder's own: shown and recorded, never notified.
    fn own(&mut self, event: &Event) {
        self.inner.emit(event);
        self.record(event);
    }

    fn record(&mut self, event: &Event) {
        if let Some(line) = crate::ui::json_line(event) {
            self.record_line(event, line);
        }
    }

    fn record_line(&mut self, event: &Event, line: String) {
        if line.is_empty() || matches!(event, Event::WaitTick { .. }) {
            return;
        }
        if let Event::RunStart { run_id, .. } = event
            && self.run.is_none()
        {
            let dir = self.store.run_log_dir(run_id);
            let path = dir.join(EVENTS_FILE);
            match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => self.file = Some(f),
                Err(e) => {
                    self.failed = true;
                    let message = format!("cannot write {}: {e}", path.display());
                    self.inner.emit(&Event::Notice { level: Level::Warn, message });
                }
            }
            self.run = Some((run_id.clone(), dir));
        }
        let Some(file) = &mut self.file else {
            if self.run.is_none() && self.pending.len() < EARLY {
                self.pending.push(line);
            }
            return;
        };
        let mut text = std::mem::take(&mut self.pending).join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&line);
        text.push('\n');
        if let Err(e) = file.write_all(text.as_bytes())
            && !self.failed
        {
            self.failed = true;
            self.file = None;
            let message = format!("cannot append to the run's {EVENTS_FILE}: {e}");
            self.inner.emit(&Event::Notice { level: Level::Warn, message });
        }
    }

    fn notify_failures(&mut self, failures: Vec<String>) {
        for f in failures {
            self.warn(f);
        }
    }

    /// The run is ending (`end` is its `run_end`, not yet shown or
    /// recorded, so that it stays the run's last event): its report, old
    /// logs pruned, what is queued delivered.
    fn end(&mut self, end: &Event) {
        if let Some((run_id, dir)) = self.run.clone() {
            self.write_report(&run_id, &dir, end);
            self.prune(&run_id);
        }
        if let Some(n) = self.notifier.take() {
            let failures = n.finish();
            self.notify_failures(failures);
        }
    }

    fn write_report(&mut self, run_id: &str, dir: &std::path::Path, end: &Event) {
        let events = super::RunDir { run_id: run_id.to_string(), dir: dir.to_path_buf() }.read();
        let (mut events, _) = match events {
            Ok(e) => e,
            Err(e) => return self.warn(format!("cannot read back the run's events: {e}")),
        };
        events.push(super::Recorded { ts: chrono::Utc::now(), event: end.clone() });
        let text =
            super::markdown(&super::report(run_id, &events), crate::screenful::Show::Screenful);
        let path = dir.join(REPORT_FILE);
        match crate::store::write_replace(&path, text.as_bytes()) {
            Ok(()) => self.own(&Event::Notice {
                level: Level::Info,
                message: format!("report: {}", path.display()),
            }),
            Err(e) => self.warn(format!("cannot write {}: {e}", path.display())),
        }
    }

    fn prune(&mut self, current: &str) {
        let runs = match super::runs(self.store) {
            Ok(r) => r,
            Err(e) => return self.warn(format!("cannot list old run logs: {e}")),
        };
        let last_failed = last_failed(self.store, current);
        let mut protected = vec![current];
        if let Some(f) = &last_failed {
            protected.push(f);
        }
        let (removed, errors) = retention::prune(&runs, &protected, self.keep);
        if !removed.is_empty() {
            let n = crate::text::count(removed.len(), "old run", "old runs");
            self.own(&Event::Notice {
                level: Level::Info,
                message: format!(
                    "removed the logs of {n} (logs.keep_runs = {}, logs.keep_bytes = {})",
                    self.keep.keep_runs, self.keep.keep_bytes
                ),
            });
        }
        if let Some(e) = errors.into_iter().next() {
            self.warn(e);
        }
    }
}

/// The most recent finished run other than `current` that did not
/// complete, from runs.jsonl.
fn last_failed(store: &Store, current: &str) -> Option<String> {
    let (rows, _) = crate::store::read_jsonl::<serde_json::Value>(&store.runs()).ok()?;
    rows.iter()
        .rev()
        .filter(|r| r["run_id"].as_str() != Some(current))
        .find(|r| r["outcome"].as_str() != Some("complete"))
        .and_then(|r| r["run_id"].as_str().map(str::to_string))
}

impl Reporter for Recorder<'_> {
    fn emit(&mut self, event: &Event) {
        let line = crate::ui::json_line(event).unwrap_or_default();
        if let Some(n) = &self.notifier {
            n.notify(event, &line);
        }
        if matches!(event, Event::RunEnd { .. }) {
            self.end(event);
            self.inner.emit(event);
            self.record(event);
            return;
        }
        self.inner.emit(event);
        self.record_line(event, line);
        if let Some(n) = &self.notifier {
            let failures = n.failures();
            self.notify_failures(failures);
        }
    }
}
