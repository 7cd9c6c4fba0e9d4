//! What the commands share besides the configuration (`flags`): the project
//! directory, the renderer for this terminal, and writing to stdout so that
//! a reader who went away (`ralph agents | head`) ends a command quietly.
//! Commands import from here; nothing here imports a command.

use std::io::{IsTerminal, Write};
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

/// The renderer and colour for this terminal, these flags and this configuration.
fn decide(g: &Global, config: &Config) -> (Mode, bool) {
    let facts = ui::Console {
        json: g.json,
        stdout_is_terminal: std::io::stdout().is_terminal(),
        no_color: env("NO_COLOR").is_some_and(|v| !v.is_empty()),
        term_dumb: env("TERM").as_deref() == Some("dumb"),
        ci: env("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0"),
    };
    ui::decide(facts, config.ui.color, config.ui.progress)
}

/// Whether a command's own output (`ralph status`) is coloured.
pub(crate) fn color(g: &Global, config: &Config) -> bool {
    decide(g, config).1
}

/// The renderer for this terminal and these flags.
pub(crate) fn reporter(g: &Global, config: &Config) -> (Box<dyn Reporter>, Style) {
    let (mode, color) = decide(g, config);
    let d = &g.display;
    let style = Style { color, agent_output: !d.quiet, quiet: d.quiet, verbose: d.verbose > 0 };
    let reporter: Box<dyn Reporter> = match mode {
        Mode::Json => Box::new(ui::Json::new(std::io::stdout())),
        Mode::Plain => Box::new(ui::Plain::new(std::io::stdout(), style)),
        Mode::Tty => Box::new(ui::tty::Tty::new(style)),
    };
    (reporter, style)
}

/// Writes `text` to stdout. A reader that closed the pipe (`| head`, `| true`)
/// has all it wanted: that is not an error and ends the command's output
/// quietly, with the command's own exit code, as other command-line tools do
/// (ripgrep, git). Any other write error (a full disk under `> file`) is one.
pub(crate) fn print(text: &str) -> Result<(), Error> {
    print_more(text).map(|_| ())
}

/// [`print`] for output that goes on (`status --watch`): `false` once the
/// reader has gone, so the caller stops producing more.
pub(crate) fn print_more(text: &str) -> Result<bool, Error> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Error::io("write to stdout", e)),
    }
}

/// `value` as pretty JSON on stdout, one document.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::io("write JSON", std::io::Error::other(e)))?;
    print(&(text + "\n"))
}

/// A line on stderr (a warning beside a command's output). A closed stderr
/// loses the line and nothing else.
pub(crate) fn eprint(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|_| err.flush());
}

/// Waits `seconds` between two looks of a `--watch`; `false` when a signal
/// (Ctrl-C) came meanwhile and the watch is to end.
pub(crate) fn watch_pause(seconds: u64) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds.max(1));
    while std::time::Instant::now() < until {
        if crate::signals::pending().is_some() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    true
}
