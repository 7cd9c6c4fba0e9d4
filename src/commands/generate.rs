//! `ralph completions SHELL` and `ralph man`: generated from the clap
//! definition, never written by hand.

use std::io::Write;

use crate::cli::Cli;
use crate::error::Error;

pub(crate) fn completions(shell: clap_complete::Shell) -> Result<u8, Error> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut cmd, "ralph", &mut std::io::stdout());
    Ok(0)
}

pub(crate) fn man() -> Result<u8, Error> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out).map_err(|e| Error::io("render the man page", e))?;
    let _ = std::io::stdout().write_all(&out);
    Ok(0)
}
