//! ralph: runs a coding agent in a loop over the stories of a `prd.json`,
//! one fresh agent process per story, until every story is verified done.
//!
//! `main.rs` only calls [`run`]; everything else lives in the library so the
//! integration tests and benches can reach it.

pub mod agent;
pub mod analyze;
pub mod archive;
pub mod circuit;
pub mod config;
pub mod error;
pub mod event;
pub mod exit;
pub mod git;
pub mod handoff;
pub mod learn;
pub mod limits;
pub mod prd;
pub mod prompt;
pub mod signals;
pub mod store;
pub mod ui;
