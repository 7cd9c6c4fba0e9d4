//! ralph: runs a coding agent in a loop over the stories of a `prd.json`,
//! one fresh agent process per story, until every story is verified done.
//!
//! `main.rs` only calls [`main_entry`]; everything else lives in the library
//! so the fuzz targets and the integration tests can reach what they need:
//! the public surface is exactly that (`agent::capture::LineSplitter`,
//! `analyze`, `prd::Prd` for the fuzzers; `exit` for the tests). The rest is
//! crate-private.

pub mod agent;
pub mod analyze;
mod archive;
mod circuit;
mod cli;
mod commands;
mod config;
mod deliver;
mod driver;
mod error;
mod event;
pub mod exit;
mod gate;
mod git;
mod handoff;
mod history;
mod learn;
mod limits;
mod notify;
mod paths;
pub mod prd;
mod process;
mod prompt;
mod redact;
mod serve;
mod signals;
mod state;
mod store;
mod text;
mod ui;
mod watchdog;

/// Parses the command line, runs the command, prints a fatal error once
/// (with its hint) and returns the exit code.
pub fn main_entry() -> u8 {
    let cli = match commands::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        // Help and --version too: clap prints them, to stdout, and a
        // closed pipe there is not an error.
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { exit::USAGE } else { exit::COMPLETE };
        }
    };
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let mut text = format!("error: {e}\n");
            if let Some(h) = e.hint() {
                text.push_str(&format!("hint: {h}\n"));
            }
            // eprintln! would panic on a closed stderr; the exit code still tells.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
            e.exit_code()
        }
    }
}
