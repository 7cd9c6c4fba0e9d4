//! Running one agent: which command line each CLI needs ([`backend`]),
//! which agent runs next when one meets a usage limit ([`fallback`]), and
//! supervising the process ([`supervise`]) while its output is captured
//! ([`capture`]) and shown ([`display`]).

pub(crate) mod backend;
pub mod capture;
pub(crate) mod display;
pub(crate) mod fallback;
pub(crate) mod supervise;
pub(crate) mod words;

pub(crate) use backend::{
    Backend, ConfigureError, Invocation, InvocationError, PreflightError, Tool,
};
pub(crate) use fallback::Agents;
pub(crate) use supervise::{Finished, Spec};

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::Utc;

use crate::analyze::{Analyzer, Outcome, ProcessEnd};
use capture::{LineSplitter, Log, LogLines, SharedLog, Tail};
use supervise::{Sink, SpawnError, TimeLimits};

/// Why a run's agents cannot be made or started: the agent layer's
/// errors, each kind its exit code in [`crate::error::Error::exit_code`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// The settings name no usable agent.
    #[error(transparent)]
    Configure(#[from] ConfigureError),
    /// This prompt cannot be given to this agent.
    #[error(transparent)]
    Invocation(#[from] InvocationError),
    /// The agent cannot start; `fallback` names a fallback agent, `None`
    /// is the configured one.
    #[error("{}{source}", fallback.map(|t| format!("fallback agent {t}: ")).unwrap_or_default())]
    Preflight { fallback: Option<Tool>, source: PreflightError },
    /// The agent's process could not be started (`hint`: where its
    /// command is set, for the command that started it).
    #[error("the agent cannot start: {source}")]
    Spawn { source: SpawnError, hint: &'static str },
}

/// Bytes of the agent's stderr kept for error messages and analysis.
const STDERR_TAIL: usize = 16 * 1024;
/// Lines waiting to be shown; beyond this the oldest are skipped (they are
/// in the log), so the display always ends with the agent's last words.
const DISPLAY_QUEUE: usize = 1024;

/// One finished agent run.
#[derive(Debug)]
pub(crate) struct AgentRun {
    pub(crate) finished: Finished,
    pub(crate) outcome: Outcome,
    /// Writing the log failed (disk full, file-size limit): the first error.
    pub(crate) log_error: Option<std::io::Error>,
    /// What the sandbox denied it, as its output tells ("sandbox denied /etc/x").
    pub(crate) sandbox_denials: Vec<String>,
}

/// Readable lines waiting for the calling thread to show them. When the
/// display falls behind (a burst of thousands of lines), the oldest waiting
/// lines are dropped and counted — never the newest: the end of the output
/// (the final error) is what a person needs to see.
#[derive(Debug, Default)]
struct Queue {
    lines: VecDeque<String>,
    skipped: u64,
}

type SharedQueue = Arc<Mutex<Queue>>;

impl Queue {
    fn push(shared: &SharedQueue, line: String) {
        let mut q = shared.lock().unwrap_or_else(|p| p.into_inner());
        if q.lines.len() == DISPLAY_QUEUE {
            q.lines.pop_front();
            q.skipped += 1;
        }
        q.lines.push_back(line);
    }

    /// What to show now: a line saying how many were skipped, then the rest.
    fn drain(shared: &SharedQueue) -> Vec<String> {
        let mut q = shared.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::with_capacity(q.lines.len() + 1);
        if q.skipped > 0 {
            out.push(format!(
                "… {} skipped to keep up (the log has every line)",
                crate::text::count(q.skipped as usize, "line", "lines")
            ));
            q.skipped = 0;
        }
        out.extend(q.lines.drain(..));
        out
    }
}

struct Display {
    queue: SharedQueue,
    format: crate::analyze::Format,
    redactor: crate::redact::Redactor,
    fold: display::Fold,
}

impl Display {
    /// Queues the line's readable form (a `RALPH_STATUS` block folded).
    fn show(&mut self, line: &[u8]) {
        if let Some(text) = display::render(self.format, line)
            && !text.is_empty()
        {
            for text in self.fold.push(&text) {
                Queue::push(&self.queue, self.redactor.text(&text).into_owned());
            }
        }
    }
}

/// The analyser both pumps feed: stdout for everything, stderr for the
/// retries some CLIs announce there, in the order the lines arrived.
type SharedAnalyzer = Arc<Mutex<Analyzer>>;

fn lock(analyzer: &SharedAnalyzer) -> std::sync::MutexGuard<'_, Analyzer> {
    analyzer.lock().unwrap_or_else(|p| p.into_inner())
}

struct OutSink {
    log: SharedLog,
    lines: LogLines,
    splitter: LineSplitter,
    analyzer: SharedAnalyzer,
    display: Option<Display>,
    denials: crate::sandbox::Denials,
}

impl Sink for OutSink {
    fn write(&mut self, chunk: &[u8]) {
        self.lines.push(chunk, &self.log);
        let mut analyzer = lock(&self.analyzer);
        let mut each = out_line(&mut analyzer, &mut self.denials, &mut self.display);
        self.splitter.push(chunk, &mut each);
    }

    fn stopping(&mut self) {
        lock(&self.analyzer).stopping();
    }

    fn is_sign_of_life(&self, chunk: &[u8]) -> bool {
        let format = lock(&self.analyzer).format();
        !chunk
            .split(|b| *b == b'\n')
            .filter(|line| !line.trim_ascii().is_empty())
            .all(|line| format.is_waiting_notice(line))
    }

    fn finish(&mut self) {
        self.lines.flush(&self.log);
        let mut analyzer = lock(&self.analyzer);
        let mut each = out_line(&mut analyzer, &mut self.denials, &mut self.display);
        self.splitter.finish(&mut each);
    }
}

/// What each line of the agent's stdout goes to: the analyser, the
/// sandbox's denial reader, the live display.
fn out_line<'a>(
    analyzer: &'a mut Analyzer,
    denials: &'a mut crate::sandbox::Denials,
    display: &'a mut Option<Display>,
) -> impl FnMut(&[u8], usize) + 'a {
    move |line, len| {
        analyzer.feed_part(line, len);
        denials.line(line);
        if let Some(d) = display.as_mut() {
            d.show(line);
        }
    }
}

struct ErrSink {
    log: SharedLog,
    lines: LogLines,
    tail: Tail,
    splitter: LineSplitter,
    analyzer: SharedAnalyzer,
    display: Option<Display>,
    denials: crate::sandbox::Denials,
}

impl Sink for ErrSink {
    fn write(&mut self, chunk: &[u8]) {
        self.lines.push(chunk, &self.log);
        self.tail.push(chunk);
        let mut analyzer = lock(&self.analyzer);
        let (display, denials) = (&mut self.display, &mut self.denials);
        self.splitter.push(chunk, &mut |line, _| {
            analyzer.stderr_line(line);
            denials.line(line);
            if let Some(d) = display.as_mut() {
                d.show(line);
            }
        });
    }

    fn finish(&mut self) {
        self.lines.flush(&self.log);
        let mut analyzer = lock(&self.analyzer);
        let (display, denials) = (&mut self.display, &mut self.denials);
        self.splitter.finish(&mut |line, _| {
            analyzer.stderr_line(line);
            denials.line(line);
            if let Some(d) = display.as_mut() {
                d.show(line);
            }
        });
    }
}

/// Who watches a running agent: whether its output is shown, and the
/// callback that hears everything, on the calling thread.
pub(crate) struct Watch<'a> {
    pub(crate) show: bool,
    pub(crate) on_event: &'a mut dyn FnMut(AgentEvent),
}

/// What a running agent's watcher hears.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentEvent {
    /// It started: its pid, which is its process group.
    Spawned(u32),
    /// A readable line of its output (only when output is shown).
    Output(String),
    /// ralph is stopping it (timeout, idle, Ctrl-C, budget) and waits up
    /// to this long before it kills it.
    Stopping { reason: crate::analyze::StopReason, grace: std::time::Duration },
}

/// Where and how one agent runs: its folder, its log, its limits and its sandbox.
pub(crate) struct Place<'a> {
    pub(crate) cwd: &'a Path,
    pub(crate) log: &'a Path,
    pub(crate) limits: TimeLimits,
    /// `None`: unconfined.
    pub(crate) sandbox: Option<&'a crate::sandbox::Child>,
    /// The log's cap in bytes (`logs.max_file_bytes`; 0: none).
    pub(crate) log_cap: u64,
}

/// Runs one agent invocation: the log at `place.log`, output analysed with
/// `analyzer`, readable lines passed to `on_output` (when given) on this thread.
pub(crate) fn run(
    invocation: &Invocation,
    place: Place<'_>,
    analyzer: Analyzer,
    redactor: &crate::redact::Redactor,
    watch: Watch<'_>,
) -> Result<AgentRun, SpawnError> {
    let Place { cwd, log: log_path, limits, sandbox, log_cap } = place;
    let Watch { show, on_event } = watch;
    let (file, open_error) = match File::create(log_path) {
        Ok(f) => (Some(f), None),
        Err(e) => (None, Some(e)),
    };
    let log = Log::capped(file, Some(redactor.clone()), log_cap);
    let format = analyzer.format();
    let analyzer = Arc::new(Mutex::new(analyzer));
    let queue = SharedQueue::default();
    let display = || {
        show.then(|| Display {
            queue: queue.clone(),
            format,
            redactor: redactor.clone(),
            fold: display::Fold::default(),
        })
    };
    let (out, err) = sinks(&log, &analyzer, display, sandbox);
    let spec = Spec {
        program: &invocation.program,
        args: &invocation.args,
        cwd,
        env_remove: &invocation.env_remove,
        env_set: &invocation.env_set,
        stdin: invocation.stdin.clone(),
        limits,
        sandbox,
    };
    let mut watch = |s: supervise::Supervised| match s {
        supervise::Supervised::Spawned(pid) => on_event(AgentEvent::Spawned(pid)),
        supervise::Supervised::Stopping { reason, grace } => {
            on_event(AgentEvent::Stopping { reason, grace })
        }
        supervise::Supervised::Tick => {
            for line in Queue::drain(&queue) {
                on_event(AgentEvent::Output(line));
            }
        }
    };
    let (finished, out, err) = supervise::run_watched(&spec, out, err, &mut watch)?;
    watch(supervise::Supervised::Tick);
    let end = ProcessEnd {
        exit_code: finished.exit_code,
        signal: finished.signal,
        stopped: finished.stopped,
        stderr_tail: redactor.text(&err.tail.text()).into_owned(),
    };
    let sandbox_denials = sandbox_denials(&out, &err);
    drop((out, err));
    let outcome = outcome(analyzer, &end, redactor);
    let log_error = close_log(&log, open_error, &sandbox_denials);
    Ok(AgentRun { finished, outcome, log_error, sandbox_denials })
}

/// The sinks of the agent's stdout and stderr: each writes the log, feeds
/// the analyser and the display (`display`: `None` when output is not
/// shown) and looks for what the sandbox denied.
fn sinks(
    log: &SharedLog,
    analyzer: &SharedAnalyzer,
    display: impl Fn() -> Option<Display>,
    sandbox: Option<&crate::sandbox::Child>,
) -> (OutSink, ErrSink) {
    let denials = || sandbox.map(|s| s.denials()).unwrap_or_default();
    let out = OutSink {
        log: log.clone(),
        lines: LogLines::default(),
        splitter: LineSplitter::keeping_cr(),
        analyzer: analyzer.clone(),
        display: display(),
        denials: denials(),
    };
    let err = ErrSink {
        log: log.clone(),
        lines: LogLines::default(),
        tail: Tail::new(STDERR_TAIL),
        splitter: LineSplitter::default(),
        analyzer: analyzer.clone(),
        display: display(),
        denials: denials(),
    };
    (out, err)
}

/// What the sandbox denied, as stdout told it and then what only stderr did.
fn sandbox_denials(out: &OutSink, err: &ErrSink) -> Vec<String> {
    let mut all = out.denials.texts();
    for d in err.denials.texts() {
        if !all.contains(&d) {
            all.push(d);
        }
    }
    all
}

/// The analyser's outcome once the pumps have ended and their sinks are
/// dropped, its final text redacted (it feeds events, lessons and prompts).
fn outcome(
    analyzer: SharedAnalyzer,
    end: &ProcessEnd,
    redactor: &crate::redact::Redactor,
) -> Outcome {
    // This is the last handle (a poisoned lock still holds a whole analyser).
    let analyzer = Arc::into_inner(analyzer).expect("the analyser's other handles are dropped");
    let analyzer = analyzer.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut outcome = analyzer.finish(end, Utc::now());
    if let std::borrow::Cow::Owned(clean) = redactor.text(&outcome.final_text) {
        outcome.final_text = clean;
    }
    outcome
}

/// The log closed, each sandbox denial named after the agent's own lines;
/// the first error writing it (or opening it), if any.
fn close_log(
    log: &SharedLog,
    open_error: Option<std::io::Error>,
    sandbox_denials: &[String],
) -> Option<std::io::Error> {
    if !sandbox_denials.is_empty() {
        let mut lines = log.lock().unwrap_or_else(|p| p.into_inner());
        for d in sandbox_denials {
            lines.write(format!("[ralph] {d}\n").as_bytes());
        }
    }
    open_error.or_else(|| {
        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
        log.finish();
        log.take_error()
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::analyze::{AgentError, Format, StopReason};

    /// Runs `script` as a claude-format agent with a 300 ms timeout.
    fn run_claude(script: &str) -> AgentRun {
        run_agent(script, Duration::from_millis(300))
    }

    fn run_agent(script: &str, timeout: Duration) -> AgentRun {
        let _serial = supervise::serial();
        let dir = tempfile::tempdir().unwrap();
        let invocation = Invocation {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            stdin: None,
            env_remove: Vec::new(),
            env_set: Vec::new(),
            format: Format::Claude,
        };
        let limits = TimeLimits {
            timeout: Some(timeout),
            idle: None,
            grace: Duration::from_secs(5),
            deadline: None,
            interruptible: true,
        };

        let redactor = crate::redact::Redactor::new(Vec::new());
        let log = dir.path().join("iter-1.log");
        let analyzer = Analyzer::new(Format::Claude);
        let watch = Watch { show: false, on_event: &mut |_| {} };
        let place = Place { cwd: dir.path(), log: &log, limits, sandbox: None, log_cap: 0 };
        run(&invocation, place, analyzer, &redactor, watch).unwrap()
    }

    /// codex repeats its network wait for ever when the API is down: that
    /// is no output for the idle timeout, and the run ends saying why.
    #[test]
    fn codex_waiting_for_the_network_is_idle_and_unreachable() {
        let _serial = supervise::serial();
        let dir = tempfile::tempdir().unwrap();
        let line = r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#;
        let invocation = Invocation {
            program: "sh".into(),
            args: vec!["-c".into(), format!("while :; do echo '{line}'; sleep 0.05; done")],
            stdin: None,
            env_remove: Vec::new(),
            env_set: Vec::new(),
            format: Format::Codex,
        };
        let limits = TimeLimits {
            timeout: Some(Duration::from_secs(90)),
            idle: Some(Duration::from_secs(1)),
            grace: Duration::from_secs(5),
            deadline: None,
            interruptible: true,
        };
        let redactor = crate::redact::Redactor::new(Vec::new());
        let log = dir.path().join("iter-1.log");
        let watch = Watch { show: false, on_event: &mut |_| {} };
        let analyzer = Analyzer::new(Format::Codex);
        let place = Place { cwd: dir.path(), log: &log, limits, sandbox: None, log_cap: 0 };
        let run = run(&invocation, place, analyzer, &redactor, watch).unwrap();
        assert_eq!(run.finished.stopped, Some(StopReason::Idle));
        assert!(run.outcome.output_lines > 0);
        assert_eq!(
            run.outcome.error.map(|e| e.to_string()),
            Some(
                "cannot reach the API: Reconnecting... waiting for network \
                 (Connection failed: error sending request)"
                    .into()
            )
        );
    }

    /// The live path and `ralph analyze` on the same bytes agree, down to
    /// the bytes of a line over the cap and a line ending in `\r\r`.
    #[test]
    fn a_live_run_and_its_saved_output_analyse_alike() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let mut bytes = br#"{"type":"system","subtype":"init","session_id":"s-1"}"#.to_vec();
        bytes.extend_from_slice(b"\n");
        bytes.extend(std::iter::repeat_n(b'x', capture::MAX_LINE + 100));
        bytes.extend_from_slice(b"\nnot json\r\r\n");
        bytes.extend_from_slice(br#"{"type":"result","subtype":"success","is_error":false,"result":"Done.","session_id":"s-1"}"#);
        std::fs::write(&path, &bytes).unwrap();
        let live = run_agent(&format!("cat '{}'", path.display()), Duration::from_secs(20));
        let end = ProcessEnd { exit_code: Some(0), ..ProcessEnd::default() };
        let reader = std::io::BufReader::with_capacity(4096, std::fs::File::open(&path).unwrap());
        let saved = crate::analyze::analyze_reader(
            reader,
            Format::Claude,
            crate::analyze::Patterns::default(),
            &end,
            Utc::now(),
        )
        .unwrap();
        assert_eq!(live.outcome.output_bytes, bytes.len() as u64 + 1);
        assert_eq!(format!("{:?}", live.outcome), format!("{saved:?}"));
    }

    const RESULT: &str = r#"{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"Done.\",\"session_id\":\"s-1\"}"#;

    /// claude answers SIGTERM by cancelling its tool and printing a
    /// success; the run still timed out.
    #[test]
    fn a_success_printed_on_sigterm_is_still_a_timeout() {
        let script = format!("trap 'echo \"{RESULT}\"; exit 0' TERM; sleep 30 & wait");
        let run = run_claude(&script);
        assert_eq!(run.finished.stopped, Some(StopReason::Timeout));
        assert_eq!(run.outcome.final_text, "Done.");
        assert_eq!(run.outcome.error, Some(AgentError::Stopped { reason: StopReason::Timeout }));
    }

    /// claude sometimes hangs after printing its result: that is a success.
    #[test]
    fn a_burst_the_display_cannot_keep_up_with_keeps_its_last_lines() {
        let queue = SharedQueue::default();
        for i in 0..(DISPLAY_QUEUE + 500) {
            Queue::push(&queue, format!("line {i}"));
        }
        let shown = Queue::drain(&queue);
        assert_eq!(shown[0], "… 500 lines skipped to keep up (the log has every line)");
        assert_eq!(shown.len(), DISPLAY_QUEUE + 1);
        assert_eq!(shown.last().unwrap(), &format!("line {}", DISPLAY_QUEUE + 499));
        // Once said, the count starts over.
        Queue::push(&queue, "one more".into());
        assert_eq!(Queue::drain(&queue), ["one more"]);
    }

    #[test]
    fn a_success_printed_before_the_timeout_stands() {
        let script = format!("echo \"{RESULT}\"; sleep 30 & wait");
        let run = run_claude(&script);
        assert_eq!(run.finished.stopped, Some(StopReason::Timeout));
        assert_eq!(run.outcome.error, None);
    }
}
