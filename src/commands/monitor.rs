//! `ralph monitor` / `ralph --monitor`: the loop in a tmux session, with
//! `ralph status --watch` and the live log of the current iteration beside
//! it. Detaching leaves the loop running.

use std::path::Path;
use std::process::Command;

use crate::cli::Global;
use crate::error::Error;

use super::common::{print, project_dir};

/// Why `ralph monitor` cannot set up its session (exit 7).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MonitorError {
    #[error("ralph monitor needs tmux, which is not installed")]
    NoTmux,
    /// `args` is the tmux command line, without `tmux`.
    #[error("tmux {args} failed")]
    Tmux { args: String },
}

impl MonitorError {
    pub(crate) fn hint(&self) -> Option<&'static str> {
        match self {
            MonitorError::NoTmux => Some(
                "install it (apt install tmux / brew install tmux), or run `ralph` and `ralph status --watch` in two terminals",
            ),
            MonitorError::Tmux { .. } => None,
        }
    }
}

/// The arguments of this ralph, turned into the loop's own command line:
/// `monitor` becomes `run`, `--monitor` is dropped.
fn loop_args() -> Vec<String> {
    let mut out = Vec::new();
    let mut replaced = false;
    for a in std::env::args().skip(1) {
        if a == "--monitor" {
            continue;
        }
        if a == "monitor" && !replaced {
            out.push("run".to_string());
            replaced = true;
            continue;
        }
        out.push(a);
    }
    out
}

fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub(crate) fn run(g: &Global) -> Result<u8, Error> {
    let tmux = which::which("tmux").map_err(|_| MonitorError::NoTmux)?;
    let project = project_dir(g)?
        .canonicalize()
        .map_err(|e| Error::Usage(format!("cannot use the project directory: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("find ralph's own executable", e))?;
    let exe = quote(&exe.display().to_string());
    // The panes start where ralph was started, so relative paths in the
    // loop's arguments (-C, --prd, --prompt) mean what they meant here.
    let cwd = std::env::current_dir().map_err(|e| Error::io("read the current directory", e))?;
    let env = handed_over_env();
    let name = format!(
        "ralph-{}-{}",
        project.file_name().and_then(|n| n.to_str()).unwrap_or("project").replace(['.', ':'], "-"),
        std::process::id()
    );
    let loop_pane = loop_pane(&exe, &env, &name);
    let status_pane = status_pane(g, &exe, &env, &project, &cwd);
    let log = crate::paths::Paths::resolve(&project, g.prd.as_deref())?
        .store
        .logs_dir()
        .join("current.log");
    let log_pane = log_pane(&log);
    let dir = cwd.display().to_string();
    let tmux_run = |args: &[&str]| run_tmux(&tmux, args);
    tmux_run(&["new-session", "-d", "-s", &name, "-c", &dir, "-n", "ralph", &loop_pane])?;
    tmux_run(&["split-window", "-h", "-t", &format!("{name}:ralph"), "-c", &dir, &status_pane])?;
    tmux_run(&["split-window", "-v", "-t", &format!("{name}:ralph"), "-c", &dir, &log_pane])?;
    tmux_run(&["select-pane", "-t", &format!("{name}:ralph.0")])?;
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("TMUX").is_none() {
        let _ = Command::new(&tmux).args(["attach-session", "-t", &name]).status();
        print(&format!(
            "detached from {name}; the loop keeps running. Re-attach: tmux attach -t {name}\n"
        ))?;
    } else {
        print(&format!("started tmux session {name}\nattach: tmux attach -t {name}\n"))?;
    }
    Ok(0)
}

/// ralph's settings from its environment (`RALPH_*`, `NO_COLOR`), as
/// `NAME=value ` words to put before each pane's command. A tmux server
/// that is already running gives new panes its own environment, not ours:
/// they are handed over explicitly.
fn handed_over_env() -> String {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| {
            (k.starts_with("RALPH_") || k == "NO_COLOR")
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(|(k, v)| format!("{k}={} ", quote(&v)))
        .collect()
}

/// The loop's pane. When the loop ends the status and log panes go, the
/// loop's final report stays on screen, and Enter ends the whole session:
/// nothing is left behind in tmux.
fn loop_pane(exe: &str, env: &str, name: &str) -> String {
    let mut run_cmd = vec![exe.to_string()];
    run_cmd.extend(loop_args().iter().map(|a| quote(a)));
    let session = quote(name);
    format!(
        "{env}{}; tmux kill-pane -a -t \"$TMUX_PANE\" 2>/dev/null; echo; \
         echo '[ralph finished: press Enter to end the tmux session {name}]'; read _; \
         tmux kill-session -t {session} 2>/dev/null",
        run_cmd.join(" ")
    )
}

/// The pane of `ralph status --watch` for the same project and PRD.
fn status_pane(g: &Global, exe: &str, env: &str, project: &Path, cwd: &Path) -> String {
    let project = quote(&project.display().to_string());
    let mut status_cmd =
        vec![exe.to_string(), "status".into(), "--watch".into(), "-C".into(), project];
    if let Some(prd) = &g.prd {
        status_cmd.extend(["--prd".into(), quote(&cwd.join(prd).display().to_string())]);
    }
    format!("{env}{}", status_cmd.join(" "))
}

/// The pane that follows the current iteration's log. tail's notes on the
/// file appearing and being replaced (a new iteration) are noise here; the
/// header says what the pane shows.
fn log_pane(log: &Path) -> String {
    format!(
        "echo 'live log of the current iteration ({})'; tail -n 200 -F {} 2>/dev/null",
        log.display(),
        quote(&log.display().to_string())
    )
}

fn run_tmux(tmux: &Path, args: &[&str]) -> Result<(), Error> {
    let status = Command::new(tmux).args(args).status().map_err(|e| Error::io("run tmux", e))?;
    if status.success() { Ok(()) } else { Err(MonitorError::Tmux { args: args.join(" ") }.into()) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quoting_keeps_arguments_whole() {
        assert_eq!(super::quote("plain-arg"), "plain-arg");
        assert_eq!(super::quote("two words"), "'two words'");
        assert_eq!(super::quote("it's"), "'it'\\''s'");
        assert_eq!(super::quote(""), "''");
    }
}
