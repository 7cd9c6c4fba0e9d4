//! `ralph rules`: a person's review of the rule candidates ralph learned.

use std::path::Path;

use crate::cli::{Global, RulesCommand};
use crate::error::Error;

pub fn run(_project: &Path, _g: &Global, _cmd: RulesCommand) -> Result<u8, Error> {
    Err(Error::Usage("ralph rules: rule cards are not recorded by this build yet".into()))
}
