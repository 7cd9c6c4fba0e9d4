//! What ralph did in a project, read back from what it recorded: each
//! run's events (`logs/<run>/events.jsonl`, written by [`Recorder`] as
//! `--json` prints them) are the one source of truth. `ralph history`,
//! `ralph report`, the Markdown report at the end of a run and any page
//! that shows them are pure functions over the parsed events:
//!
//! ```text
//! recorder.rs   the reporter that appends every event to events.jsonl, and
//!               at the run's end writes report.md, prunes old logs, notifies
//! summary.rs    events → RunSummary (one `ralph history` row)
//! report.rs     events → RunReport (per story, and totals)
//! markdown.rs   RunReport → Markdown; RunSummary rows → text
//! retention.rs  which runs' logs go (pure), and removing them
//! cost.rs       the price table for agents that report no cost
//! ```

pub mod cost;
pub mod markdown;
mod recorder;
pub mod report;
pub mod retention;
pub mod summary;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::event::Event;
use crate::store::Store;

pub use markdown::{history_text, markdown};
pub use recorder::Recorder;
pub use report::{RunReport, report};
pub use retention::Retention;
pub use summary::{RunSummary, summarize};

/// The file of a run's events, in its log folder.
pub const EVENTS_FILE: &str = "events.jsonl";
/// The Markdown report written at the end of a run, beside its logs.
pub const REPORT_FILE: &str = "report.md";

/// One event as it was recorded, with its time.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub ts: DateTime<Utc>,
    pub event: Event,
}

/// One line of events.jsonl (as `--json` prints it) back into its event.
/// A worker's event was written as the inner event with `worker` and
/// `story` added: it comes back wrapped as [`Event::Worker`]. Lines this
/// ralph does not know (a newer one's events) are `None`.
pub fn parse_line(line: &str) -> Option<Recorded> {
    let mut v: serde_json::Value = serde_json::from_str(line).ok()?;
    let ts = v.get("ts").and_then(|t| serde_json::from_value(t.clone()).ok())?;
    let map = v.as_object_mut()?;
    // Only the envelope of a worker's event has `story`.
    let worker = match (map.get("story"), map.get("worker")) {
        (Some(serde_json::Value::String(s)), Some(w)) => Some((w.as_u64()? as u32, s.clone())),
        _ => None,
    };
    if worker.is_some() {
        map.remove("story");
        map.remove("worker");
    }
    let event: Event = serde_json::from_value(v).ok()?;
    let event = match worker {
        Some((worker, story_id)) => Event::Worker { worker, story_id, inner: Box::new(event) },
        None => event,
    };
    Some(Recorded { ts, event })
}

/// The event itself, a worker's unwrapped.
pub(crate) fn inner(event: &Event) -> &Event {
    match event {
        Event::Worker { inner, .. } => inner,
        e => e,
    }
}

/// A run that has a log folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    pub run_id: String,
    pub dir: PathBuf,
}

impl RunDir {
    pub fn events(&self) -> PathBuf {
        self.dir.join(EVENTS_FILE)
    }

    /// Its recorded events (none when it has no events.jsonl: a run of an
    /// older ralph), read line by line: the agent's output, which may be
    /// most of the file and which no report uses, is skipped unparsed.
    pub fn read(&self) -> std::io::Result<(Vec<Recorded>, usize)> {
        use std::io::BufRead;
        let file = match std::fs::File::open(self.events()) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(e),
        };
        let (mut events, mut skipped) = (Vec::new(), 0);
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = line?;
            let line = String::from_utf8_lossy(&line);
            if line.trim().is_empty() || is_agent_output(&line) {
                continue;
            }
            match parse_line(&line) {
                Some(r) => events.push(r),
                None => skipped += 1,
            }
        }
        Ok((events, skipped))
    }
}

/// Whether a line of events.jsonl is the agent's output, without parsing
/// it (history and `serve`'s replay skip these by the thousand). Inside a
/// JSON string the quotes are escaped, so no other event's text matches;
/// the serialiser writes no space after the colon.
pub(crate) fn is_agent_output(line: &str) -> bool {
    line.contains(r#""event":"agent_output""#)
}

/// Every run with a log folder, oldest first (run ids begin with their
/// start time).
pub fn runs(store: &Store) -> std::io::Result<Vec<RunDir>> {
    runs_in(&store.logs_dir())
}

pub(crate) fn runs_in(logs: &Path) -> std::io::Result<Vec<RunDir>> {
    let entries = match std::fs::read_dir(logs) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut runs: Vec<RunDir> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let run_id = e.file_name().to_str()?.to_string();
            Some(RunDir { run_id, dir: e.path() })
        })
        .collect();
    runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    Ok(runs)
}

/// The summaries of every recorded run started since `since`, oldest first.
pub fn history(store: &Store, since: Option<DateTime<Utc>>) -> std::io::Result<Vec<RunSummary>> {
    let mut out = Vec::new();
    for run in runs(store)? {
        let (events, _) = run.read()?;
        if events.is_empty() {
            continue;
        }
        let summary = summarize(&run.run_id, &events);
        if since.is_none_or(|s| summary.started_at.is_some_and(|t| t >= s)) {
            out.push(summary);
        }
    }
    Ok(out)
}

/// Why there is no report of the run asked for.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// The logs cannot be read (exit 7).
    #[error("cannot read {}: {source}", path.display())]
    Read { path: std::path::PathBuf, source: std::io::Error },
    /// The run asked for is not there, or not one (exit 2).
    #[error("`{id}` names {count} runs; give more of the run id")]
    Ambiguous { id: String, count: usize },
    #[error("no recorded run `{id}` (see `ralph history`)")]
    NoSuchRun { id: String },
    #[error("no recorded run yet in this project")]
    NoRunYet,
}

/// The report of one run: `run` is its id or the start of it; `None` is
/// the latest recorded run.
pub fn find_report(store: &Store, run: Option<&str>) -> Result<RunReport, FindError> {
    let runs = runs(store).map_err(|source| FindError::Read { path: store.logs_dir(), source })?;
    let recorded: Vec<&RunDir> = runs.iter().filter(|r| r.events().is_file()).collect();
    let chosen = match run {
        None => recorded.last().copied(),
        Some(id) => {
            let matching: Vec<&RunDir> =
                recorded.iter().copied().filter(|r| r.run_id.starts_with(id)).collect();
            if matching.len() > 1 && !matching.iter().any(|r| r.run_id == id) {
                return Err(FindError::Ambiguous { id: id.to_string(), count: matching.len() });
            }
            matching.iter().find(|r| r.run_id == id).or(matching.first()).copied()
        }
    };
    let Some(dir) = chosen else {
        return Err(match run {
            Some(id) => FindError::NoSuchRun { id: id.to_string() },
            None => FindError::NoRunYet,
        });
    };
    let (events, _) =
        dir.read().map_err(|source| FindError::Read { path: dir.events(), source })?;
    Ok(report(&dir.run_id, &events))
}

#[cfg(test)]
mod tests;
