//! What the commands share: the project directory, the configuration layers
//! with the flags on top, and the renderer for this terminal. Commands import
//! from here; nothing here imports a command.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use crate::cli::{Global, RunArgs};
use crate::config::{Config, Layers};
use crate::error::Error;
use crate::event::Reporter;
use crate::ui::{self, Mode, Style};

/// `-C DIR`, or the current directory.
pub fn project_dir(g: &Global) -> Result<PathBuf, Error> {
    match &g.dir {
        Some(d) => Ok(d.clone()),
        None => std::env::current_dir().map_err(|e| Error::io("read the current directory", e)),
    }
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The configuration layers for a project, with the run flags on top.
pub fn layers(g: &Global, project: &Path, args: &RunArgs) -> Result<Layers, Error> {
    let project_file = crate::store::Store::new(project).config();
    let mut layers = if g.no_config {
        Layers::load(None, &project.join(".ralph/none"), &env)?
    } else {
        Layers::load(crate::config::user_file(&env).as_deref(), &project_file, &env)?
    };
    let s = |v: &str| toml::Value::String(v.to_string());
    if let Some(t) = args.tool {
        layers.flag("agent.tool", s(t.name()), "--tool");
    }
    if let Some(cmd) = &args.agent_cmd {
        crate::agent::words::split(cmd).map_err(|e| Error::Usage(format!("--agent-cmd: {e}")))?;
        layers.flag("agent.command", s(cmd), "--agent-cmd");
        if args.tool.is_none() {
            layers.flag("agent.tool", s("custom"), "--agent-cmd");
        }
    }
    if let Some(m) = &args.model {
        layers.flag("agent.model", s(m), "--model");
    }
    if args.safe {
        layers.flag("agent.safe", toml::Value::Boolean(true), "--safe");
    }
    if let Some(g) = &args.gate {
        crate::agent::words::split(g).map_err(|e| Error::Usage(format!("--gate: {e}")))?;
        layers.flag("gate.command", s(g), "--gate");
    }
    let durations = [
        ("agent.timeout", &args.timeout, "--timeout"),
        ("agent.idle_timeout", &args.idle_timeout, "--idle-timeout"),
        ("run.pause", &args.pause, "--pause"),
        ("budget.max_duration", &args.max_duration, "--max-duration"),
        ("limits.max_wait", &args.max_wait, "--max-wait"),
    ];
    for (key, value, flag) in durations {
        if let Some(v) = value {
            layers.flag(key, s(v), flag);
        }
    }
    if let Some(p) = &args.prompt {
        layers.flag("run.prompt", s(&p.display().to_string()), "--prompt");
    }
    if let Some(c) = args.max_cost {
        if !(c >= 0.0 && c.is_finite()) {
            return Err(Error::Usage(format!(
                "--max-cost must be a non-negative number, found {c}"
            )));
        }
        layers.flag("budget.max_cost", toml::Value::Float(c), "--max-cost");
    }
    if let Some(t) = args.max_tokens {
        layers.flag(
            "budget.max_tokens",
            toml::Value::Integer(t.min(i64::MAX as u64) as i64),
            "--max-tokens",
        );
    }
    if let Some(n) = args.calls_per_hour {
        layers.flag(
            "limits.calls_per_hour",
            toml::Value::Integer(i64::from(n)),
            "--calls-per-hour",
        );
    }
    if args.no_wait {
        layers.flag("limits.wait", toml::Value::Boolean(false), "--no-wait");
    }
    if args.auto_reset {
        layers.flag("circuit.auto_reset", toml::Value::Boolean(true), "--auto-reset");
    }
    if let Some(n) = args.max_iterations {
        layers.flag("run.max_iterations", toml::Value::Integer(i64::from(n)), "MAX_ITERATIONS");
    }
    if let Some(c) = g.color {
        layers.flag("ui.color", s(c.name()), "--color");
    }
    Ok(layers)
}

/// The renderer for this terminal and these flags.
pub fn reporter(g: &Global, config: &Config) -> (Box<dyn Reporter>, Style) {
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
