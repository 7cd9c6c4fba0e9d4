//! What ralph owns so that "verified" means something: the oracle is the
//! person's, not the agent's.
//!
//! - `base`: the settings that decide trust (the gate, the breaker, the
//!   sandbox) come from the project config as committed on the run's base,
//!   never from what the run branch committed; `ralph trust` accepts the
//!   branch's copy. Where ralph keeps the run branch's base, accepted
//!   copies and test counts (`trust.json`).
//! - `protect`: paths the agent may not change (pure).
//! - `vanish`: tests may not vanish — counts before and after, skip
//!   markers and deleted tests in the diff (pure).
//! - `git_dir`: the repository's config and hooks, which ralph's own git
//!   commands read and run, are set back when an iteration changed them.
//! - `red`: red, then green — a story's own check must fail on the base
//!   before its work (pure).

pub(crate) mod base;
pub(crate) mod git_dir;
pub(crate) mod protect;
pub(crate) mod red;
pub(crate) mod vanish;
