//! Agent output → [`Outcome`]: what one iteration's agent said and how it ended.
//!
//! Pure and streaming: the supervisor feeds stdout lines as they arrive and
//! memory stays bounded whatever the output's size (a 1 GB log is analysed in
//! constant memory). Time comes in as an argument, never from the clock.
//!
//! Each agent CLI's output is read by its own module ([`Format`] picks it)
//! into one shared set of facts, which [`Analyzer::finish`] turns into an
//! [`Outcome`]; `analyzer.rs` says how failures are classified. Only the
//! agent's own words count: its assistant messages and final result, never
//! tool output or an echoed prompt, which may quote a limit message or the
//! completion marker. Tool output counts for one thing only: the error lines
//! of a tool call that failed, for the error signature.

mod aider;
mod analyzer;
mod claude;
mod codex;
mod gemini;
mod json;
#[cfg(test)]
mod observed_tests;
mod opencode;
mod outcome;
mod patterns;
mod reader;
mod reset;
mod signature;
pub mod status_block;
mod tail;
#[cfg(test)]
mod tests;
mod text;
mod tool_errors;
mod tools;

pub use analyzer::{Analyzer, Format, ProcessEnd, StopReason};
pub(crate) use outcome::AgentError;
pub use outcome::Outcome;
pub use patterns::Patterns;
pub(crate) use patterns::{PatternError, PatternTexts};
pub use reader::analyze_reader;
pub(crate) use status_block::Status;
pub use status_block::StatusBlock;

/// The completion marker of the ralph.sh protocol.
pub(crate) const PROMISE_COMPLETE: &str = "<promise>COMPLETE</promise>";
