//! One function per subcommand, dispatched from [`dispatch`]. Each turns
//! parsed arguments into calls on the library and returns an exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use crate::cli::{Cli, Command, ConfigCommand, Global, RunArgs};
use crate::config::{Config, Layers};
use crate::error::Error;
use crate::event::Reporter;
use crate::ui::{self, Mode, Style};

/// Runs what the command line asks for.
pub fn dispatch(cli: Cli) -> Result<u8, Error> {
    let g = &cli.global;
    if let Some(command) = &cli.command
        && cli.run != RunArgs::default()
    {
        let name =
            format!("{command:?}").split([' ', '(', '{']).next().unwrap_or("").to_lowercase();
        return Err(Error::Usage(format!(
            "run options (an iteration count, --tool, --gate, …) go with `ralph run`, not before `{name}`"
        )));
    }
    match cli.command {
        None => {
            if cli.run.reset_circuit {
                return crate::status::reset_circuit(&project_dir(g)?);
            }
            if cli.run.monitor {
                return crate::monitor::start(g, &cli.run);
            }
            run(g, &cli.run)
        }
        Some(Command::Run(args)) => {
            if args.reset_circuit {
                return crate::status::reset_circuit(&project_dir(g)?);
            }
            if args.monitor {
                return crate::monitor::start(g, &args);
            }
            run(g, &args)
        }
        Some(Command::Monitor(args)) => crate::monitor::start(g, &args),
        Some(Command::Status(args)) => crate::status::command(g, &args),
        Some(Command::ResetCircuit) => crate::status::reset_circuit(&project_dir(g)?),
        Some(Command::Analyze(args)) => crate::status::analyze(g, &args),
        Some(Command::Demo(args)) => crate::demo::run(g, &args),
        Some(Command::DemoAgent { pace }) => Ok(crate::demo::agent(pace)),
        Some(Command::DemoCheck { story }) => Ok(crate::demo::check(&story)),
        Some(Command::Init(args)) => crate::init::run(&project_dir(g)?, &args),
        Some(Command::Agents) => crate::init::agents(g),
        Some(Command::Rules(cmd)) => crate::rules_cmd::run(&project_dir(g)?, g, cmd),
        Some(Command::Config(ConfigCommand::Show)) => config_show(g, &RunArgs::default()),
        Some(Command::Completions { shell }) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "ralph", &mut std::io::stdout());
            Ok(0)
        }
        Some(Command::Man) => {
            let cmd = <Cli as clap::CommandFactory>::command();
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .map_err(|e| Error::io("render the man page", e))?;
            let _ = std::io::stdout().write_all(&out);
            Ok(0)
        }
    }
}

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
pub fn layers(g: &Global, project: &std::path::Path, args: &RunArgs) -> Result<Layers, Error> {
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

fn run(g: &Global, args: &RunArgs) -> Result<u8, Error> {
    let project = project_dir(g)?;
    let paths = crate::driver::Paths::resolve(&project, g.prd.as_deref())?;
    let layers = layers(g, &paths.project, args)?;
    let config = layers.resolve();
    let (mut reporter, style) = reporter(g, &config);
    let opts = crate::driver::Options {
        max_iterations: config.run.max_iterations.max(1),
        prompt_file: args.prompt.clone(),
        fresh: args.fresh,
        explicit_max: args.max_iterations.is_some(),
        agent_output: style.agent_output || g.json,
        config,
    };
    crate::driver::run(&paths, &opts, reporter.as_mut())
}

fn config_show(g: &Global, args: &RunArgs) -> Result<u8, Error> {
    let project = project_dir(g)?;
    let layers = layers(g, &project, args)?;
    if g.json {
        let rows: Vec<_> = layers
            .show()
            .into_iter()
            .map(|(k, v, s)| serde_json::json!({"key": k, "value": v, "source": s.to_string(), "env": crate::config::env_name(k)}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows).unwrap_or_default());
        return Ok(0);
    }
    let rows = layers.show();
    // Aligned comments, except after a long value (a list of patterns, a
    // long command), which would push every other row's source off screen.
    let width =
        rows.iter().map(|(k, v, _)| k.len() + v.len() + 3).filter(|w| *w <= 48).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for (key, value, source) in rows {
        let left = format!("{key} = {value}");
        let _ = writeln!(out, "{left:<width$}  # {source}");
    }
    Ok(0)
}
