//! Agent output → [`Outcome`]: what one iteration's agent said and how it ended.
//!
//! Pure and streaming: the supervisor feeds stdout lines as they arrive and
//! memory stays bounded whatever the output's size (a 1 GB log is analysed in
//! constant memory). Time comes in as an argument, never from the clock.

use chrono::{DateTime, Utc};
use serde::Serialize;

pub mod status;

pub use status::{Status, StatusBlock};

/// The completion marker of the ralph.sh protocol.
pub const PROMISE_COMPLETE: &str = "<promise>COMPLETE</promise>";

/// How the agent CLI formats its stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// How the agent process ended, as the supervisor saw it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcessEnd {
    /// Exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
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

/// Token counts the agent CLI reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }
}

/// What went wrong, by what it means for the loop.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentError {
    /// Authentication failed (401, invalid key, not logged in): stop the run.
    Auth { message: String },
    /// A subscription usage limit: wait until `resets_at` (unknown → configured wait).
    UsageLimit {
        resets_at: Option<DateTime<Utc>>,
        message: String,
    },
    /// An API rate limit (429 without a usage-limit reset): transient, back off.
    RateLimited { message: String },
    /// The API is overloaded (529, 503): transient, back off.
    Overloaded { message: String },
    /// The API could not be reached at all.
    Unreachable { message: String },
    /// The agent CLI reported an error result or exited non-zero for another reason.
    Failed {
        exit_code: Option<i32>,
        message: String,
    },
    /// ralph stopped it (timeout, idle, interrupt, budget).
    Stopped { reason: StopReason },
}

/// Everything the loop needs to know about one agent run's output.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    /// The agent's final answer (bounded tail).
    pub final_text: String,
    /// The last complete status block, if any.
    pub status_block: Option<StatusBlock>,
    /// Why a status block that was present could not be read.
    pub status_block_error: Option<String>,
    /// `<promise>COMPLETE</promise>` appeared in the agent's own output
    /// (its final text or a line of its own), not in an echo of the prompt.
    pub claimed_complete: bool,
    pub session_id: Option<String>,
    pub cost_usd: Option<f64>,
    pub tokens: Option<Tokens>,
    pub turns: Option<u32>,
    /// The CLI's own error flag (Claude `is_error`).
    pub is_error: bool,
    pub api_error_status: Option<u16>,
    pub error: Option<AgentError>,
    /// Tools the CLI refused to run, as `Tool(detail)` strings.
    pub permission_denials: Vec<String>,
    /// A normalised signature of the error lines, for "same error N times".
    pub error_signature: Option<String>,
    /// The agent only ran tests (no implementation work).
    pub test_only: bool,
    /// Bytes and lines of stdout seen.
    pub output_bytes: u64,
    pub output_lines: u64,
}

/// Streaming analyser of one agent run's stdout.
#[derive(Debug)]
pub struct Analyzer {
    format: Format,
    outcome: Outcome,
}

impl Analyzer {
    pub fn new(format: Format) -> Analyzer {
        Analyzer {
            format,
            outcome: Outcome::default(),
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// One line of stdout, without its newline. May be any bytes.
    pub fn feed(&mut self, line: &[u8]) {
        self.outcome.output_bytes += line.len() as u64 + 1;
        self.outcome.output_lines += 1;
        let text = String::from_utf8_lossy(line);
        if text.trim() == PROMISE_COMPLETE {
            self.outcome.claimed_complete = true;
        }
    }

    /// The analysis, once the process has ended.
    pub fn finish(self, end: &ProcessEnd, _now: DateTime<Utc>) -> Outcome {
        let mut outcome = self.outcome;
        if let Some(reason) = end.stopped {
            outcome.error = Some(AgentError::Stopped { reason });
        } else if end.exit_code != Some(0) {
            outcome.error = Some(AgentError::Failed {
                exit_code: end.exit_code,
                message: end.stderr_tail.lines().last().unwrap_or("").to_string(),
            });
        }
        outcome
    }
}
