//! What the analyzer concludes about one agent run: [`Outcome`], and the
//! [`AgentError`] that says what a failure means for the loop.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::status_block::StatusBlock;
use crate::process::Signal;

/// Token counts the agent CLI reported. The four parts do not overlap, so
/// [`Tokens::total`] counts each token once (Codex and Gemini report cached
/// input inside their input count; it is moved to `cache_read`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Tokens {
    pub(crate) input: u64,
    pub(crate) output: u64,
    pub(crate) cache_read: u64,
    pub(crate) cache_write: u64,
}

impl Tokens {
    /// All four parts (saturating: the counts come from the CLI's output).
    pub(crate) fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    pub(crate) fn add(&mut self, other: Tokens) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
    }
}

/// What went wrong, by what it means for the loop.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum AgentError {
    /// Authentication failed (401, invalid key, not logged in): stop the run.
    Auth { message: String },
    /// A subscription usage limit: wait until `resets_at` (unknown → configured wait).
    UsageLimit { resets_at: Option<DateTime<Utc>>, message: String },
    /// Out of credits, quota or plan with no reset time (credit balance too
    /// low, usage allocation disabled): waiting will not help, stop the run.
    Billing { message: String },
    /// An API rate limit (429 without a usage-limit reset): transient, back off.
    RateLimited { message: String },
    /// The API is overloaded (529, 503): transient, back off.
    Overloaded { message: String },
    /// The API could not be reached at all.
    Unreachable { message: String },
    /// The agent CLI reported an error result or exited non-zero for another reason.
    Failed { exit_code: Option<i32>, message: String },
    /// ralph stopped it (timeout, idle, interrupt, budget).
    Stopped { reason: super::StopReason },
    /// A signal ralph did not send ended it: someone's `kill`, the OOM
    /// killer, a crash. `message` says which, as far as ralph can tell.
    Killed { signal: Signal, message: String },
}

/// A one-line description: "authentication failed: Invalid API key".
impl std::fmt::Display for AgentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::StopReason;
        match self {
            AgentError::Auth { message } => write!(f, "authentication failed: {message}"),
            AgentError::Billing { message } => write!(f, "out of credits: {message}"),
            AgentError::UsageLimit { message, .. } => write!(f, "usage limit: {message}"),
            AgentError::RateLimited { message } => write!(f, "rate limited: {message}"),
            AgentError::Overloaded { message } => write!(f, "overloaded: {message}"),
            AgentError::Unreachable { message } => write!(f, "cannot reach the API: {message}"),
            AgentError::Failed { exit_code, message } => {
                match exit_code {
                    Some(c) => write!(f, "exit {c}")?,
                    None => f.write_str("killed")?,
                }
                match message.trim() {
                    "" => Ok(()),
                    m => write!(f, ": {m}"),
                }
            }
            AgentError::Killed { message, .. } => f.write_str(message),
            AgentError::Stopped { reason } => f.write_str(match reason {
                StopReason::Timeout => "stopped: iteration timeout",
                StopReason::Idle => "stopped: no output for the idle timeout",
                StopReason::Interrupted => "stopped: interrupted",
                StopReason::Budget => "stopped: the run's time budget is spent",
            }),
        }
    }
}

impl AgentError {
    /// The CLI's own words for the error; `None` for [`AgentError::Stopped`].
    pub(crate) fn message(&self) -> Option<&str> {
        match self {
            AgentError::Auth { message }
            | AgentError::UsageLimit { message, .. }
            | AgentError::Billing { message }
            | AgentError::RateLimited { message }
            | AgentError::Overloaded { message }
            | AgentError::Unreachable { message }
            | AgentError::Failed { message, .. }
            | AgentError::Killed { message, .. } => Some(message),
            AgentError::Stopped { .. } => None,
        }
    }
}

/// Everything the loop needs to know about one agent run's output.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    /// The agent's final answer (bounded tail): the CLI's final result text,
    /// else its last assistant message; in text format the end of stdout.
    pub final_text: String,
    /// The last complete status block, if any.
    pub status_block: Option<StatusBlock>,
    /// Why a status block that was present could not be read.
    pub status_block_error: Option<String>,
    /// `<promise>COMPLETE</promise>` appeared in the agent's own output
    /// (its final text or a line of its own), not in an echo of the prompt.
    pub(crate) claimed_complete: bool,
    pub(crate) session_id: Option<String>,
    pub(crate) cost_usd: Option<f64>,
    /// `cost_usd` is ralph's estimate from `tokens` and `cost.prices`.
    pub(crate) cost_estimated: bool,
    pub(crate) tokens: Option<Tokens>,
    pub(crate) turns: Option<u32>,
    /// The CLI flagged an error in its own structured output (Claude
    /// `is_error`, Codex `turn.failed`, a Gemini or opencode error).
    pub(crate) is_error: bool,
    /// The HTTP status of the API error behind it, when the CLI says.
    pub(crate) api_error_status: Option<u16>,
    pub(crate) error: Option<AgentError>,
    /// Tools the CLI refused to run, as `Tool(detail)` strings.
    pub permission_denials: Vec<String>,
    /// A normalised signature of the error lines, for "same error N times":
    /// the run's own, else its error's message, else its `tool_errors`.
    pub(crate) error_signature: Option<String>,
    /// One line of that error as it was printed (`error[E0308]: mismatched
    /// types`), to name it where a person reads why the run stopped.
    pub(crate) error_example: Option<String>,
    /// Error lines in the output of tool calls that failed (a build that
    /// did not compile), newest last, each shape once, at most 8 of ~300
    /// bytes. Tool output, not the agent's words: never an answer, a claim
    /// or a limit.
    pub(crate) tool_errors: Vec<String>,
    /// The agent only ran tests (no implementation work).
    pub(crate) test_only: bool,
    /// The agent ended by asking the user something (or tried to, through a
    /// tool headless mode refuses): the next prompt should say not to.
    pub(crate) asking_questions: bool,
    /// Bytes and lines of stdout seen.
    pub(crate) output_bytes: u64,
    pub(crate) output_lines: u64,
}
