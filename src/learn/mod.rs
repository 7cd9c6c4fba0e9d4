//! Learning from failed iterations, in stores under `.ralph/`:
//!
//! - [`lessons`]: per story, what its failed iterations left, shown in that
//!   story's next prompt.
//! - [`events`]: `events.jsonl`, the append-only record of every failure.
//!
//! Nothing here may stop the loop: every function returns its error for
//! the caller to log, and damaged files are reported, never a panic.

pub mod events;
pub mod lessons;
mod text;
