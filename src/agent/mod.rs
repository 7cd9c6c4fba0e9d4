//! Running one agent: which command line each CLI needs ([`backend`]), and
//! supervising the process ([`supervise`]) while its output is captured
//! ([`capture`]) and shown ([`display`]).

pub mod backend;
pub mod capture;
pub mod display;
pub mod supervise;
pub mod words;

pub use backend::{Backend, Invocation, PromptChannel, Tool};
pub use supervise::{Finished, Spec};

use std::fs::File;
use std::path::Path;
use std::sync::mpsc;

use chrono::Utc;

use crate::analyze::{Analyzer, Outcome, ProcessEnd};
use capture::{LineSplitter, Log, LogLines, SharedLog, Tail};
use supervise::{Limits, Sink, SpawnError};

/// Bytes of the agent's stderr kept for error messages and analysis.
const STDERR_TAIL: usize = 16 * 1024;
/// Lines waiting to be shown; beyond this, lines are skipped (they are in the log).
const DISPLAY_QUEUE: usize = 1024;

/// One finished agent run.
#[derive(Debug)]
pub struct AgentRun {
    pub finished: Finished,
    pub outcome: Outcome,
    /// Writing the log failed (disk full, file-size limit): the first error.
    pub log_error: Option<std::io::Error>,
    pub log_bytes: u64,
    pub stderr_tail: String,
    /// Output lines not shown because the display fell behind.
    pub hidden_lines: u64,
}

struct Display {
    tx: mpsc::SyncSender<String>,
    format: crate::analyze::Format,
    hidden: u64,
    redactor: crate::redact::Redactor,
}

impl Display {
    fn show(&mut self, line: &[u8]) {
        if let Some(text) = display::render(self.format, line)
            && !text.is_empty()
            && self.tx.try_send(self.redactor.text(&text).into_owned()).is_err()
        {
            self.hidden += 1;
        }
    }
}

struct OutSink {
    log: SharedLog,
    lines: LogLines,
    splitter: LineSplitter,
    analyzer: Analyzer,
    display: Option<Display>,
}

impl Sink for OutSink {
    fn write(&mut self, chunk: &[u8]) {
        self.lines.push(chunk, &self.log);
        let (analyzer, display) = (&mut self.analyzer, &mut self.display);
        self.splitter.push(chunk, &mut |line, _cut| {
            analyzer.feed(line);
            if let Some(d) = display.as_mut() {
                d.show(line);
            }
        });
    }

    fn finish(&mut self) {
        self.lines.flush(&self.log);
        let (analyzer, display) = (&mut self.analyzer, &mut self.display);
        self.splitter.finish(&mut |line, _cut| {
            analyzer.feed(line);
            if let Some(d) = display.as_mut() {
                d.show(line);
            }
        });
    }
}

struct ErrSink {
    log: SharedLog,
    lines: LogLines,
    tail: Tail,
    splitter: LineSplitter,
    display: Option<Display>,
}

impl Sink for ErrSink {
    fn write(&mut self, chunk: &[u8]) {
        self.lines.push(chunk, &self.log);
        self.tail.push(chunk);
        if let Some(d) = self.display.as_mut() {
            self.splitter.push(chunk, &mut |line, _| d.show(line));
        }
    }

    fn finish(&mut self) {
        self.lines.flush(&self.log);
        if let Some(d) = self.display.as_mut() {
            self.splitter.finish(&mut |line, _| d.show(line));
        }
    }
}

/// Who hears about a running agent: its pid when it starts, its readable
/// output lines as they come (on the calling thread).
pub struct Watch<'a> {
    pub on_spawn: &'a mut dyn FnMut(u32),
    pub on_output: Option<&'a mut dyn FnMut(String)>,
}

/// Runs one agent invocation: the log at `log_path`, output analysed with
/// `analyzer`, readable lines passed to `on_output` (when given) on this thread.
pub fn run(
    invocation: &Invocation,
    cwd: &Path,
    log_path: &Path,
    limits: Limits,
    analyzer: Analyzer,
    redactor: &crate::redact::Redactor,
    watch: Watch<'_>,
) -> Result<AgentRun, SpawnError> {
    let Watch { on_spawn, mut on_output } = watch;
    let (file, open_error) = match File::create(log_path) {
        Ok(f) => (Some(f), None),
        Err(e) => (None, Some(e)),
    };
    let log = Log::redacted(file, Some(redactor.clone()));
    let format = analyzer.format();
    let (tx, rx) = mpsc::sync_channel(DISPLAY_QUEUE);
    let display = |on: bool| {
        on.then(|| Display { tx: tx.clone(), format, hidden: 0, redactor: redactor.clone() })
    };
    let show = on_output.is_some();
    let out = OutSink {
        log: log.clone(),
        lines: LogLines::default(),
        splitter: LineSplitter::keeping_cr(),
        analyzer,
        display: display(show),
    };
    let err = ErrSink {
        log: log.clone(),
        lines: LogLines::default(),
        tail: Tail::new(STDERR_TAIL),
        splitter: LineSplitter::default(),
        display: display(show),
    };
    drop(tx);
    let spec = Spec {
        program: &invocation.program,
        args: &invocation.args,
        cwd,
        env_remove: &invocation.env_remove,
        env_set: &invocation.env_set,
        stdin: invocation.stdin.clone(),
        limits,
    };
    let mut drain = || {
        if let Some(f) = on_output.as_mut() {
            while let Ok(line) = rx.try_recv() {
                f(line);
            }
        }
    };
    let (finished, out, err) = supervise::run_watched(&spec, out, err, on_spawn, &mut drain)?;
    drain();
    let stderr_tail = redactor.text(&err.tail.text()).into_owned();
    let end = ProcessEnd {
        exit_code: finished.exit_code,
        signal: finished.signal,
        stopped: finished.stopped,
        stderr_tail: stderr_tail.clone(),
    };
    let hidden_lines =
        out.display.as_ref().map_or(0, |d| d.hidden) + err.display.as_ref().map_or(0, |d| d.hidden);
    let mut outcome = out.analyzer.finish(&end, Utc::now());
    // The final text feeds events, lessons and prompts.
    if let std::borrow::Cow::Owned(clean) = redactor.text(&outcome.final_text) {
        outcome.final_text = clean;
    }
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    Ok(AgentRun {
        finished,
        outcome,
        log_error: open_error.or_else(|| log.take_error()),
        log_bytes: log.bytes(),
        stderr_tail,
        hidden_lines,
    })
}
