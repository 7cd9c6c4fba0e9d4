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
mod oracle;
mod paths;
pub mod prd;
mod process;
mod prompt;
mod redact;
mod sandbox;
mod screenful;
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
    let result = commands::dispatch(cli);
    store::drop_spares();
    match result {
        Ok(code) => code,
        Err(e) => {
            let mut text = format!("error: {e}\n");
            for cause in error::causes(&e) {
                text.push_str(&format!("  caused by: {cause}\n"));
            }
            if let Some(h) = e.hint() {
                text.push_str(&format!("hint: {h}\n"));
            }
            // eprintln! would panic on a closed stderr; the exit code still tells.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
            e.exit_code()
        }
    }
}

/// One child's sandbox set-up as a run does it, for `benches/sandbox.rs`
/// (the one caller; not an interface): the kernel asked, the policy for
/// `program` in `cwd` computed (the home listed, config files read, the
/// program found), the private temp dir made, the Landlock ruleset built
/// and, when `spawn`, `program` started confined and waited for; the temp
/// dir is removed on the way out. `Err` where the kernel cannot confine.
/// The bench only prints the error, so it is boxed rather than given a
/// type of its own; its causes are kept.
#[doc(hidden)]
pub fn sandbox_setup(
    cwd: &std::path::Path,
    program: &str,
    spawn: bool,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let env = |k: &str| std::env::var(k).ok();
    let sandbox = sandbox::Sandbox::new(sandbox::Settings::default(), &env)?;
    let child = sandbox
        .child(Some(agent::Tool::Claude), cwd, program, &[])?
        .ok_or("this kernel has no Landlock")?;
    let mut cmd = std::process::Command::new(program);
    cmd.current_dir(cwd).stdin(std::process::Stdio::null());
    process::confine(&mut cmd, &child.policy, child.abi)?;
    if spawn {
        let status = cmd.status()?;
        if !status.success() {
            return Err(format!("{program} ended with {status}").into());
        }
    }
    Ok(())
}
