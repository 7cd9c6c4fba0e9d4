//! What the commands share besides the configuration (`flags`): the project
//! directory and the renderer for this terminal. Commands import from here;
//! nothing here imports a command.

use std::io::IsTerminal;
use std::path::PathBuf;

use crate::cli::Global;
use crate::config::Config;
use crate::error::Error;
use crate::event::Reporter;
use crate::ui::{self, Mode, Style};

/// `-C DIR`, or the current directory.
pub(crate) fn project_dir(g: &Global) -> Result<PathBuf, Error> {
    match &g.dir {
        Some(d) => Ok(d.clone()),
        None => std::env::current_dir().map_err(|e| Error::io("read the current directory", e)),
    }
}

/// The process environment, as `config::Layers::load` takes it.
pub(crate) fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The renderer for this terminal and these flags.
pub(crate) fn reporter(g: &Global, config: &Config) -> (Box<dyn Reporter>, Style) {
    let tty = std::io::stdout().is_terminal();
    let (mode, color) = ui::decide(
        g.json,
        tty,
        config.color,
        env("NO_COLOR").is_some_and(|v| !v.is_empty()),
        env("TERM").as_deref() == Some("dumb"),
        env("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0"),
    );
    let style = Style { color, agent_output: !g.quiet, quiet: g.quiet, verbose: g.verbose > 0 };
    let reporter: Box<dyn Reporter> = match mode {
        Mode::Json => Box::new(ui::Json::new(std::io::stdout())),
        Mode::Plain => Box::new(ui::Plain::new(std::io::stdout(), style)),
        Mode::Tty => Box::new(ui::tty::Tty::new(style)),
    };
    (reporter, style)
}
