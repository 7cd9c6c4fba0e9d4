//! The streaming [`Analyzer`]: stdout lines in, one [`Outcome`] out.
//!
//! Every CLI's events are reduced to the same [`StreamFacts`] (final text, session,
//! usage, tool calls, the terminal event, error texts, a rejected rate
//! limit); [`Analyzer::finish`] then decides the outcome the same way for all
//! of them:
//!
//! 1. ralph interrupted the run or its budget ran out → `Stopped`.
//! 2. A terminal event decides when there is one (Claude's `result`, Codex
//!    `turn.completed`/`turn.failed`, Gemini's result, opencode's last step),
//!    whatever the exit code, which the CLIs get wrong both ways. A terminal
//!    success also wins over an idle or timeout stop (claude sometimes hangs
//!    after printing its result), but only one printed before ralph decided
//!    to stop ([`Analyzer::stopping`]): claude answers SIGTERM by cancelling
//!    its tool and printing a success, and a timeout must stay a timeout.
//! 3. Otherwise a stop is `Stopped`, and a clean exit is success, except for
//!    the CLIs that always print a terminal event (a missing one is a failure).
//! 4. A failure is classified: a rejected `rate_limit_event`, then the HTTP
//!    status, then a signal ralph did not send (named with who sent it, not
//!    with whatever the agent last printed; see [`killed`]), then
//!    [`Patterns`] over the CLI's error texts (newest first), stderr, and
//!    stray non-JSON stdout lines; else `Failed`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::json::{DocBuffer, DocLine};
use super::outcome::{AgentError, Outcome, Tokens};
use super::patterns::{PatternKind, Patterns};
use super::status_block::{self, Scanner};
use super::tail::{Tail, suffix};
use super::tool_errors::ToolErrors;
use super::tools::ToolTally;
use super::{PROMISE_COMPLETE, aider, claude, codex, gemini, opencode, reset, signature, text};
use crate::process::Signal;

/// How the agent CLI formats its stdout. Config spells it in kebab case
/// (`format = "claude"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Plain text (aider, custom commands, claude without a JSON mode).
    Text,
    /// Claude Code `--output-format json` or `stream-json` (told apart per line).
    Claude,
    /// Amp `--stream-json` (Claude-compatible events).
    Amp,
    /// Codex `exec --json` JSONL events.
    Codex,
    /// Gemini CLI `--output-format json|stream-json`.
    Gemini,
    /// opencode `run --format json`.
    Opencode,
    /// Cursor agent `--output-format stream-json`.
    Cursor,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Text => "the agent",
            Format::Claude => "claude",
            Format::Amp => "amp",
            Format::Codex => "codex",
            Format::Gemini => "gemini",
            Format::Opencode => "opencode",
            Format::Cursor => "cursor-agent",
        }
    }

    /// A whole line of output that only says the CLI is still waiting to
    /// reach its API: no sign of life for the idle timeout.
    pub(crate) fn is_waiting_notice(self, line: &[u8]) -> bool {
        self == Format::Codex && codex::is_network_wait(line)
    }

    /// Whether a run that ends well always prints a terminal event.
    fn needs_terminal(self) -> bool {
        !matches!(self, Format::Text | Format::Opencode)
    }
}

/// How the agent process ended, as the supervisor saw it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcessEnd {
    /// Exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<Signal>,
    /// Why ralph stopped it, if ralph did.
    pub stopped: Option<StopReason>,
    /// The last lines of its stderr.
    pub stderr_tail: String,
}

/// Why ralph stopped an agent before it ended on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The per-iteration wall-clock timeout.
    Timeout,
    /// No output for the idle timeout.
    Idle,
    /// SIGINT or SIGTERM to ralph.
    Interrupted,
    /// The run's `--max-duration` budget.
    Budget,
}

/// The final answer is kept up to this many bytes (its end).
pub(crate) const TEXT_CAP: usize = 64 * 1024;
/// Non-JSON lines of a structured CLI (banners, errors) kept for classification.
const STRAY_CAP: usize = 8 * 1024;
/// Error texts kept (the newest), and the length of each.
const MAX_ERROR_TEXTS: usize = 8;
const ERROR_TEXT_CAP: usize = 2048;
/// Distinct error-line shapes kept for the signature (the newest).
const MAX_ERROR_LINES: usize = 4;
const MAX_DENIALS: usize = 100;

/// The terminal event, when the CLI printed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Terminal {
    #[default]
    None,
    Ok,
    Failed,
}

/// A rejected `rate_limit_event`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limit {
    pub(crate) resets_at: Option<DateTime<Utc>>,
    pub(crate) kind: Option<String>,
}

/// What the events of one run said, in a shape shared by every CLI.
#[derive(Debug)]
pub(crate) struct StreamFacts {
    pub(crate) session_id: Option<String>,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) tokens: Option<Tokens>,
    pub(crate) turns: Option<u32>,
    /// The CLI's final result text (Claude `result`, Gemini `response`).
    pub(crate) result_text: Option<String>,
    /// The last assistant message (or, for streaming deltas, segment).
    pub(crate) last_text: Tail,
    /// Whether the next assistant text continues `last_text` (deltas).
    pub(crate) text_open: bool,
    pub(crate) claimed_complete: bool,
    pub(crate) terminal: Terminal,
    pub(crate) is_error: bool,
    pub(crate) api_status: Option<u16>,
    /// The CLI said whether its API error is worth retrying (opencode's `isRetryable`).
    pub(crate) retryable: Option<bool>,
    /// Text format: an API error line (litellm's) that no later request
    /// made up for; aider prints it and exits 0.
    pub(crate) pending_api_error: Option<String>,
    /// The next text line may be the rest of `pending_api_error`, wrapped.
    pub(crate) api_error_open: bool,
    /// The CLI's error messages, oldest first.
    pub(crate) error_texts: Vec<String>,
    /// Claude's synthetic assistant `error` kind (`rate_limit`, …).
    pub(crate) assistant_error: Option<String>,
    pub(crate) limit: Option<Limit>,
    pub(crate) permission_denials: Vec<String>,
    pub(crate) asked_user: bool,
    pub(crate) tools: ToolTally,
    /// Error lines in the output of tool calls that failed.
    pub(crate) tool_errors: ToolErrors,
    /// Usage of the assistant message being streamed (Claude repeats it on
    /// every event of one message) and the sum of the finished ones.
    pub(crate) message_usage: Option<(String, Tokens)>,
    pub(crate) streamed_tokens: Option<Tokens>,
    /// The newest error the CLI said it is retrying by itself, until a
    /// response arrives: what a run stopped in the middle of that retry
    /// is judged by.
    pub(crate) retrying: Option<Retrying>,
}

/// An API error a CLI announced it will retry by itself (gemini's `Attempt
/// 1 failed: …`, aider's `Retrying in 2.0 seconds...`, codex's
/// `Reconnecting... 1/5 (…)`, opencode's logged `stream error`): the limit,
/// the server error or the failed connection the CLI was still waiting out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Retrying {
    /// The HTTP status, when the CLI names it.
    pub(crate) status: Option<u16>,
    /// The error as the CLI worded it.
    pub(crate) text: String,
}

impl StreamFacts {
    fn new() -> StreamFacts {
        StreamFacts {
            session_id: None,
            cost_usd: None,
            tokens: None,
            turns: None,
            result_text: None,
            last_text: Tail::new(TEXT_CAP),
            text_open: false,
            claimed_complete: false,
            terminal: Terminal::None,
            is_error: false,
            api_status: None,
            retryable: None,
            pending_api_error: None,
            api_error_open: false,
            error_texts: Vec::new(),
            assistant_error: None,
            limit: None,
            permission_denials: Vec::new(),
            asked_user: false,
            tools: ToolTally::default(),
            tool_errors: ToolErrors::default(),
            message_usage: None,
            streamed_tokens: None,
            retrying: None,
        }
    }

    /// The CLI is retrying an API error by itself.
    pub(crate) fn retrying(&mut self, status: Option<u16>, text: &str) {
        let text = status_block::truncate(text.trim(), ERROR_TEXT_CAP).to_string();
        if !text.is_empty() {
            self.retrying = Some(Retrying { status, text });
        }
    }

    /// A response arrived (a message, a tool call, a step): whatever the
    /// CLI was retrying went through.
    pub(crate) fn answered(&mut self) {
        self.retrying = None;
    }

    pub(crate) fn session(&mut self, id: &str) {
        if self.session_id.as_deref() != Some(id) {
            self.session_id = Some(suffix(id, 256).to_string());
        }
    }

    /// A whole assistant message: it replaces the previous one.
    pub(crate) fn assistant_text(&mut self, text: &str) {
        self.last_text.clear();
        self.assistant_delta(text);
        self.text_open = false;
    }

    /// A piece of an assistant message that continues the open one.
    pub(crate) fn assistant_delta(&mut self, text: &str) {
        self.retrying = None;
        if !self.text_open {
            self.last_text.clear();
            self.text_open = true;
        }
        if self.last_text.push_find(text, PROMISE_COMPLETE) {
            self.claimed_complete = true;
        }
    }

    pub(crate) fn result_text(&mut self, text: &str) {
        if text.contains(PROMISE_COMPLETE) {
            self.claimed_complete = true;
        }
        self.result_text = Some(suffix(text, TEXT_CAP).to_string());
    }

    pub(crate) fn error_text(&mut self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if self.error_texts.len() == MAX_ERROR_TEXTS {
            self.error_texts.remove(0);
        }
        self.error_texts.push(status_block::truncate(text, ERROR_TEXT_CAP).to_string());
    }

    pub(crate) fn denial(&mut self, denial: String) {
        if self.permission_denials.len() < MAX_DENIALS {
            self.permission_denials.push(denial);
        }
    }

    pub(crate) fn add_tokens(&mut self, tokens: Tokens) {
        self.tokens.get_or_insert_default().add(tokens);
    }

    /// Usage of one assistant message, which may arrive on several events.
    pub(crate) fn message_usage(&mut self, id: &str, tokens: Tokens) {
        match &mut self.message_usage {
            Some((current, usage)) if current == id => *usage = tokens,
            _ => {
                self.flush_message_usage();
                self.message_usage = Some((id.to_string(), tokens));
            }
        }
    }

    fn flush_message_usage(&mut self) {
        if let Some((_, usage)) = self.message_usage.take() {
            self.streamed_tokens.get_or_insert_default().add(usage);
        }
    }
}

/// Streaming analyser of one agent run's stdout.
#[derive(Debug)]
pub struct Analyzer {
    format: Format,
    patterns: Patterns,
    facts: StreamFacts,
    output_bytes: u64,
    output_lines: u64,
    /// Text format: all of stdout's end; structured: stray non-JSON lines.
    plain: Tail,
    doc: DocBuffer,
    /// The terminal event as it stood when ralph decided to stop the run.
    terminal_at_stop: Option<Terminal>,
    // Text format only.
    scanner: Scanner,
    /// (shape, line) of the error lines, each shape once, newest last.
    error_lines: Vec<(String, String)>,
    text_tests: bool,
    text_edits: bool,
}

impl Analyzer {
    /// An analyzer with the built-in patterns.
    pub fn new(format: Format) -> Analyzer {
        Analyzer::with_patterns(format, Patterns::default())
    }

    /// An analyzer with configured patterns (and local zone).
    pub(crate) fn with_patterns(format: Format, patterns: Patterns) -> Analyzer {
        let plain_cap = if format == Format::Text { TEXT_CAP } else { STRAY_CAP };
        Analyzer {
            format,
            patterns,
            facts: StreamFacts::new(),
            output_bytes: 0,
            output_lines: 0,
            plain: Tail::new(plain_cap),
            doc: DocBuffer::default(),
            terminal_at_stop: None,
            scanner: Scanner::default(),
            error_lines: Vec::new(),
            text_tests: false,
            text_edits: false,
        }
    }

    pub(crate) fn format(&self) -> Format {
        self.format
    }

    /// One line of stdout, without its newline. May be any bytes.
    pub fn feed(&mut self, line: &[u8]) {
        self.feed_part(line, line.len());
    }

    /// The first bytes of a line that was `full_len` long (the reader caps
    /// lines; the rest was never kept).
    pub(crate) fn feed_part(&mut self, line: &[u8], full_len: usize) {
        self.output_bytes += full_len as u64 + 1;
        self.output_lines += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if self.format == Format::Text {
            self.text_line(line);
            return;
        }
        match self.doc.push(line) {
            DocLine::Taken => return,
            DocLine::Complete => {
                let doc = self.doc.take();
                if !self.json(&doc) {
                    self.stray_line(&doc);
                }
                return;
            }
            DocLine::Outside => {}
        }
        let trimmed = line.trim_ascii_start();
        let is_json = matches!(trimmed.first(), Some(b'{' | b'['));
        if !(is_json && self.json(trimmed)) {
            self.stray_line(line);
        }
    }

    /// One JSON line of a structured CLI; false when it is not valid JSON.
    fn json(&mut self, bytes: &[u8]) -> bool {
        let facts = &mut self.facts;
        match self.format {
            Format::Claude | Format::Amp | Format::Cursor => claude::line(facts, bytes),
            Format::Codex => codex::line(facts, bytes),
            Format::Gemini => gemini::line(facts, bytes),
            Format::Opencode => opencode::line(facts, bytes),
            Format::Text => false,
        }
    }

    /// A line of a structured CLI that is not one of its events: a banner, a
    /// wrapper's message, an error printed as text. Kept for classification
    /// only; it is not the agent's answer.
    fn stray_line(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        if !line.is_empty() {
            self.plain.push(status_block::truncate(line, 1024));
            self.plain.push("\n");
        }
    }

    fn text_line(&mut self, line: &[u8]) {
        let trimmed = line.trim_ascii();
        if trimmed == PROMISE_COMPLETE.as_bytes() {
            self.facts.claimed_complete = true;
        }
        let text = String::from_utf8_lossy(line);
        self.plain.push(&text);
        self.plain.push("\n");
        self.scanner.line(&text);
        aider::line(&mut self.facts, trimmed);
        if text::is_error_line(trimmed) {
            let shape = signature::normalize(&String::from_utf8_lossy(trimmed));
            self.error_lines.retain(|(seen, _)| *seen != shape);
            if self.error_lines.len() == MAX_ERROR_LINES {
                self.error_lines.remove(0);
            }
            let line = status_block::truncate(&String::from_utf8_lossy(trimmed), 300).to_string();
            self.error_lines.push((shape, line));
        }
        // One edit settles test_only; the scan is the costliest check here.
        if !self.text_edits {
            let (test, edit) = text::keywords(trimmed);
            self.text_tests |= test;
            self.text_edits |= edit;
        }
    }

    /// One line of the agent's stderr, where some CLIs announce their own
    /// retries (gemini) or log them (opencode): read for that alone.
    pub(crate) fn stderr_line(&mut self, line: &[u8]) {
        match self.format {
            Format::Gemini => gemini::stderr_line(&mut self.facts, line),
            Format::Opencode => opencode::stderr_line(&mut self.facts, line),
            _ => {}
        }
    }

    /// ralph decided to stop the run: output from here on is the agent's
    /// reaction to the stop, and a terminal event in it does not decide
    /// the outcome when the run ends [`StopReason::Timeout`] or
    /// [`StopReason::Idle`].
    pub(crate) fn stopping(&mut self) {
        self.terminal_at_stop.get_or_insert(self.facts.terminal);
    }

    /// The analysis, once the process has ended.
    pub fn finish(mut self, end: &ProcessEnd, now: DateTime<Utc>) -> Outcome {
        self.doc.abandon();
        self.facts.flush_message_usage();
        let error = self.error(end, now);
        let exit_status = self.status_from_exit(end);
        let facts = self.facts;
        let (final_text, parsed, test_only) = if self.format == Format::Text {
            let test_only = self.text_tests && !self.text_edits;
            (self.plain.into_string(), self.scanner.finish(), test_only)
        } else {
            let final_text = facts.result_text.unwrap_or_else(|| facts.last_text.into_string());
            let parsed = status_block::parse(&final_text);
            (final_text, parsed, facts.tools.test_only())
        };
        // The run's own error lines, else its error, else the errors of its
        // failed tool calls: an agent that exits 0 while the same compiler
        // error fails its every build still repeats an error.
        // With each signature, one line of the error as printed, for a
        // person: what "the same error" was.
        let (error_signature, error_example) = match &error {
            Some(AgentError::Stopped { .. }) => (None, None),
            _ if !self.error_lines.is_empty() => {
                let shapes: Vec<String> = self.error_lines.iter().map(|(s, _)| s.clone()).collect();
                (signature::combine(&shapes), self.error_lines.first().map(|(_, l)| l.clone()))
            }
            Some(error) => {
                let first = error.message().map(|m| first_line(m.lines().next().unwrap_or("")));
                (first.as_deref().map(signature::normalize), first)
            }
            None => (facts.tool_errors.signature(), facts.tool_errors.first_line()),
        };
        Outcome {
            asking_questions: facts.asked_user || text::asks_questions(&final_text),
            final_text,
            status_block: parsed.block,
            status_block_error: parsed.error,
            claimed_complete: facts.claimed_complete,
            session_id: facts.session_id,
            cost_usd: facts.cost_usd,
            cost_estimated: false,
            tokens: facts.tokens.or(facts.streamed_tokens),
            turns: facts.turns,
            is_error: facts.is_error,
            api_error_status: facts.api_status.or(exit_status),
            error,
            permission_denials: facts.permission_denials,
            error_signature,
            error_example,
            tool_errors: facts.tool_errors.into_lines(),
            test_only,
            output_bytes: self.output_bytes,
            output_lines: self.output_lines,
        }
    }

    fn error(&self, end: &ProcessEnd, now: DateTime<Utc>) -> Option<AgentError> {
        use StopReason::{Budget, Interrupted};
        if let Some(reason @ (Interrupted | Budget)) = end.stopped {
            return Some(AgentError::Stopped { reason });
        }
        let terminal = match (end.stopped, self.terminal_at_stop) {
            (Some(_), Some(at_stop)) => at_stop,
            _ => self.facts.terminal,
        };
        match terminal {
            Terminal::Ok => return self.limit_in_success(now),
            Terminal::Failed => {}
            Terminal::None => {
                if let Some(reason) = end.stopped {
                    return Some(self.cut_off(now).unwrap_or(AgentError::Stopped { reason }));
                }
                let clean_exit = end.exit_code == Some(0) && end.signal.is_none();
                if clean_exit && !self.format.needs_terminal() {
                    // aider exits 0 after an API error it gave up on.
                    return self.facts.pending_api_error.is_some().then(|| self.classify(end, now));
                }
            }
        }
        Some(self.classify(end, now))
    }

    /// A run ralph stopped (idle, timeout) in the middle of its CLI's own
    /// retries is judged by what the CLI was retrying, not by the timeout:
    /// a limit is waited out, a server error backed off from, a connection
    /// that never came is "cannot reach the API". A CLI silent with no such
    /// word (a server that accepted the request and never answered, or one
    /// whose answer was still arriving) was simply timed out.
    fn cut_off(&self, now: DateTime<Utc>) -> Option<AgentError> {
        if let Some(retrying) = &self.facts.retrying {
            return Some(retry_verdict(retrying, &self.patterns, now));
        }
        let newest = self.facts.error_texts.last()?;
        let line = self.patterns.matches(PatternKind::Unreachable, newest)?;
        Some(AgentError::Unreachable { message: line.to_string() })
    }

    /// Older claude builds printed a usage limit as a plain result; a short
    /// final text that is nothing but a limit message is one, error flag or not.
    fn limit_in_success(&self, now: DateTime<Utc>) -> Option<AgentError> {
        let text = self.facts.result_text.as_deref()?.trim();
        if text.len() > 300 || text.contains('\n') {
            return None;
        }
        let line = self.patterns.matches(PatternKind::UsageLimit, text)?;
        let resets_at = reset::from_text(text, self.patterns.local_zone(), now);
        Some(AgentError::UsageLimit { resets_at, message: line.to_string() })
    }

    fn classify(&self, end: &ProcessEnd, now: DateTime<Utc>) -> AgentError {
        let facts = &self.facts;
        let stray = self.plain_tail_lines(20);
        let texts: Vec<&str> = facts
            .pending_api_error
            .iter()
            .chain(facts.error_texts.iter().rev())
            .map(String::as_str)
            .chain([end.stderr_tail.as_str(), stray])
            .filter(|text| !text.trim().is_empty())
            .collect();
        let zone = self.patterns.local_zone();
        let reset_in_texts = || texts.iter().find_map(|text| reset::from_text(text, zone, now));
        let first = |fallback: String| texts.first().map_or(fallback, |text| first_line(text));
        let usage_text =
            || texts.iter().find_map(|t| self.patterns.matches(PatternKind::UsageLimit, t));

        if let Some(limit) = &facts.limit {
            let message = usage_text().map(str::to_string).unwrap_or_else(|| {
                first(format!("usage limit ({})", limit.kind.as_deref().unwrap_or("unknown")))
            });
            return AgentError::UsageLimit {
                resets_at: limit.resets_at.or_else(reset_in_texts),
                message,
            };
        }
        let status = facts.api_status.or_else(|| self.status_from_exit(end));
        let status_kind = match (status, facts.assistant_error.as_deref()) {
            (Some(401), _) | (_, Some("authentication_failed")) => Some(PatternKind::Auth),
            (Some(429), _) | (_, Some("rate_limit")) => Some(PatternKind::RateLimit),
            (Some(500..=599), _) => Some(PatternKind::Overload),
            (_, Some("billing_error")) => Some(PatternKind::Billing),
            _ if self.format == Format::Gemini && end.exit_code == Some(41) => {
                Some(PatternKind::Auth)
            }
            _ => None,
        };
        if let Some(kind) = status_kind {
            if kind == PatternKind::RateLimit
                && let Some(e) = self.a_429_that_is_more(&texts, now)
            {
                return e;
            }
            let message = texts
                .iter()
                .find_map(|t| self.patterns.matches(kind, t))
                .map_or_else(|| first(format!("HTTP {}", status.unwrap_or(0))), str::to_string);
            return error_of(kind, message, None);
        }
        // ralph's own stops are `Stopped` already: this signal came from
        // elsewhere, and it, not the agent's last words, is why it ended.
        if let (Some(signal), None) = (end.signal, end.stopped) {
            return AgentError::Killed { signal, message: killed(signal) };
        }
        for text in &texts {
            if let Some((kind, line)) = self.patterns.classify(text) {
                let resets_at = (kind == PatternKind::UsageLimit)
                    .then(|| reset_in_texts().or_else(|| daily_reset(line, now)))
                    .flatten();
                return error_of(kind, line.to_string(), resets_at);
            }
        }
        // A provider that called its own error retryable (opencode's
        // `isRetryable`) is backed off from, not counted as a failure.
        if facts.retryable == Some(true) {
            let message = first("the API failed (retryable)".to_string());
            return AgentError::Overloaded { message };
        }
        self.failed(end, stray)
    }

    /// A 429 is a usage limit when its text says so; one that says when
    /// to retry is waited out until then; one that says the account is out
    /// of quota stops the run. `None`: a plain rate limit.
    fn a_429_that_is_more(&self, texts: &[&str], now: DateTime<Utc>) -> Option<AgentError> {
        let zone = self.patterns.local_zone();
        let usage = texts.iter().find_map(|t| self.patterns.matches(PatternKind::UsageLimit, t));
        if let Some(line) = usage {
            let resets_at = texts.iter().find_map(|text| reset::from_text(text, zone, now));
            return Some(AgentError::UsageLimit {
                resets_at: resets_at.or_else(|| daily_reset(line, now)),
                message: line.to_string(),
            });
        }
        if let Some((at, text)) =
            texts.iter().find_map(|t| reset::retry_in(t, now).map(|at| (at, *t)))
        {
            return Some(AgentError::UsageLimit { resets_at: Some(at), message: first_line(text) });
        }
        texts
            .iter()
            .find_map(|t| self.patterns.matches(PatternKind::Billing, t))
            .map(|line| AgentError::Billing { message: line.to_string() })
    }

    /// A failure no pattern named: an error line says most; then that an
    /// expected result is missing; then whatever was printed last; then how
    /// the process ended.
    fn failed(&self, end: &ProcessEnd, stray: &str) -> AgentError {
        let facts = &self.facts;
        let missing = (facts.terminal == Terminal::None && self.format.needs_terminal())
            .then(|| format!("{} ended without a result event", self.format.name()));
        let ended = match (end.exit_code, end.signal) {
            (_, Some(signal)) => format!("killed by signal {}", signal.as_raw()),
            (Some(code), None) => format!("exited with code {code}"),
            (None, None) => "failed".to_string(),
        };
        let message = facts
            .error_texts
            .last()
            .map(|t| first_line(t))
            .or_else(|| last_line(&end.stderr_tail, true))
            .or_else(|| last_line(stray, true))
            .or(missing)
            .or_else(|| last_line(&end.stderr_tail, false))
            .or_else(|| last_line(stray, false))
            .unwrap_or(ended);
        AgentError::Failed { exit_code: end.exit_code, message }
    }

    /// The HTTP status an exit code stands for: Gemini CLI exits with the
    /// status of the API error mod 256 (401 → 145, 429 → 173, 500 → 244).
    fn status_from_exit(&self, end: &ProcessEnd) -> Option<u16> {
        match (self.format, end.exit_code) {
            (Format::Gemini, Some(code @ 144..=255)) => u16::try_from(code + 256).ok(),
            _ => None,
        }
    }

    /// The last `n` lines of the plain tail.
    fn plain_tail_lines(&self, n: usize) -> &str {
        let text = self.plain.as_str().trim_end();
        let start = text.rmatch_indices('\n').nth(n - 1).map_or(0, |(i, _)| i + 1);
        &text[start..]
    }
}

/// What a CLI was retrying when ralph stopped it means for the loop. A
/// wait it names (`Please retry in 20s`) is a limit to wait out, whatever
/// else the text says (Google words a per-minute quota like an account out
/// of credit); then the texts decide as for any error; then the status; an
/// error a CLI retries with none of these is a server's, to back off from.
pub(crate) fn retry_verdict(
    retrying: &Retrying,
    patterns: &Patterns,
    now: DateTime<Utc>,
) -> AgentError {
    let text = retrying.text.as_str();
    if let Some(at) = reset::retry_in(text, now) {
        return AgentError::UsageLimit { resets_at: Some(at), message: first_line(text) };
    }
    match patterns.classify(text) {
        Some((PatternKind::UsageLimit, line)) => AgentError::UsageLimit {
            resets_at: reset::from_text(text, patterns.local_zone(), now)
                .or_else(|| daily_reset(line, now)),
            message: line.to_string(),
        },
        Some((kind, line)) => error_of(kind, line.to_string(), None),
        None => {
            let message = first_line(text);
            match retrying.status {
                Some(401 | 403) => AgentError::Auth { message },
                Some(429) => AgentError::RateLimited { message },
                _ => AgentError::Overloaded { message },
            }
        }
    }
}

/// A daily quota with no reset time resets at midnight Pacific time
/// (Google's documented rule for the Gemini API).
fn daily_reset(line: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    line.to_ascii_lowercase().contains("daily quota").then(|| reset::next_pacific_midnight(now))?
}

fn error_of(kind: PatternKind, message: String, resets_at: Option<DateTime<Utc>>) -> AgentError {
    match kind {
        PatternKind::UsageLimit => AgentError::UsageLimit { resets_at, message },
        PatternKind::Billing => AgentError::Billing { message },
        PatternKind::Auth => AgentError::Auth { message },
        PatternKind::RateLimit => AgentError::RateLimited { message },
        PatternKind::Overload => AgentError::Overloaded { message },
        PatternKind::Unreachable => AgentError::Unreachable { message },
    }
}

/// Why an agent that a signal ended stopped, when ralph did not send the
/// signal (its timeouts and stops are [`AgentError::Stopped`]): "stopped
/// by signal 9 (KILL), sent by someone other than ralph"; a crash or a
/// resource limit is named as such.
fn killed(signal: Signal) -> String {
    let name = signal.name().map(|n| format!(" ({n})")).unwrap_or_default();
    let by = match signal {
        Signal::Segv
        | Signal::Bus
        | Signal::Ill
        | Signal::Fpe
        | Signal::Abrt
        | Signal::Trap
        | Signal::Sys => ": the agent crashed",
        Signal::Xcpu | Signal::Xfsz => ": it hit a resource limit (ulimit)",
        Signal::Pipe => ": its output was closed",
        _ => ", sent by someone other than ralph",
    };
    format!("stopped by signal {}{name}{by}", signal.as_raw())
}

fn first_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("").trim();
    status_block::truncate(line, 300).to_string()
}

/// The last non-empty line of `text` (that reads as an error, if `error`).
fn last_line(text: &str, error: bool) -> Option<String> {
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .find(|l| !error || text::is_error_line(l.as_bytes()))?;
    Some(status_block::truncate(line, 300).to_string())
}
