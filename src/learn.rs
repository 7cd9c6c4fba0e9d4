//! Learning from failed iterations, in three stores under `.ralph/`:
//!
//! - [`lessons`]: per story, what its failed iterations left, shown in that
//!   story's next prompt.
//! - [`failures`]: `failures.jsonl`, the append-only record of every failure.
//! - [`rules`]: `rules.json`, failures that keep recurring merged into
//!   cards, which a person may arm as rules for every prompt.
//!
//! Nothing here may stop the loop: every function returns its error for
//! the caller to log, and damaged files are reported, never a panic.

pub mod failures;
pub mod lessons;
mod render;
pub mod rules;
