//! ralph: runs a coding agent in a loop over the stories of a `prd.json`,
//! one fresh agent process per story, until every story is verified done.
//!
//! `main.rs` only calls [`main_entry`]; everything else lives in the library
//! so the fuzz targets and the integration tests can reach what they need.

pub mod agent;
pub mod analyze;
pub mod archive;
pub mod circuit;
mod cli;
mod commands;
pub mod config;
pub mod driver;
pub mod error;
pub mod event;
pub mod exit;
pub mod gate;
pub mod git;
pub mod handoff;
pub mod learn;
pub mod limits;
pub mod paths;
pub mod prd;
pub mod process;
pub mod prompt;
pub mod redact;
pub mod signals;
pub mod state;
pub mod store;
pub mod text;
pub mod ui;

/// Parses the command line, runs the command, prints a fatal error once
/// (with its hint) and returns the exit code.
pub fn main_entry() -> u8 {
    use clap::Parser;
    let cli = cli::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("hint: {h}");
            }
            e.exit_code()
        }
    }
}
