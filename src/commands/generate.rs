//! `ralph completions SHELL` and `ralph man`: generated from the clap
//! definition, never written by hand.

use crate::cli::Cli;
use crate::error::Error;

use super::common::print;

pub(crate) fn completions(shell: clap_complete::Shell) -> Result<u8, Error> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    // Into memory first: clap_complete panics when its writer fails, and
    // `ralph completions bash | true` closes the pipe early.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ralph", &mut out);
    print(&String::from_utf8_lossy(&out))?;
    Ok(0)
}

pub(crate) fn man() -> Result<u8, Error> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out).map_err(|e| Error::io("render the man page", e))?;
    print(&String::from_utf8_lossy(&out))?;
    Ok(0)
}
