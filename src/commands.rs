//! The subcommands, one file each, dispatched from [`dispatch`]. Each turns
//! parsed arguments into calls on the library and returns an exit code;
//! the setting flags become configuration in [`flags`], and what else they
//! share is in [`common`].

mod agents;
mod analyze;
mod argv;
mod common;
mod config;
mod deliver;
mod demo;
mod flags;
mod generate;
mod history;
mod import;
mod init;
mod monitor;
mod remote_worker;
mod reset_circuit;
mod rules;
mod run;
mod serve;
mod status;
mod status_remote;
mod trust;
mod worker;

use crate::cli::{Cli, Command, ConfigCommand, Global, RunArgs, StatusArgs};
use crate::error::Error;

pub(crate) use argv::parse;
pub(crate) use monitor::MonitorError;

/// Runs what the command line asks for.
pub(crate) fn dispatch(cli: Cli) -> Result<u8, Error> {
    let g = &cli.global;
    if let Some(command) = &cli.command
        && cli.run != RunArgs::default()
    {
        let shown_only =
            cli.run == RunArgs { display: cli.run.display.clone(), ..RunArgs::default() };
        let name = name(command);
        return Err(Error::Usage(match command {
            Command::Monitor(_)
            | Command::Demo(_)
            | Command::RemoteWorker(_)
            | Command::Deliver(_)
                if shown_only =>
            {
                format!("--progress, -q and -v go after the command: `ralph {name} -q`")
            }
            _ if shown_only => {
                format!(
                    "--progress, -q and -v are options of a run; `ralph {name}` has none of them"
                )
            }
            _ => format!(
                "run options (an iteration count, --tool, --gate, …) go with `ralph run`, not before `{name}`"
            ),
        }));
    }
    if g.json
        && let Some(why) = no_json(cli.command.as_ref(), &cli.run)
    {
        return Err(Error::Usage(why.into()));
    }
    match cli.command {
        None => run_or_alias(&g.showing(&cli.run.display), &cli.run),
        Some(Command::Run(args)) => run_or_alias(&g.showing(&args.display), &args),
        Some(Command::Monitor(args)) => monitor::run(&g.showing(&args.display)),
        Some(Command::Status(args)) => status::run(g, &args),
        Some(Command::Serve(args)) => serve::run(g, &args),
        Some(Command::History(args)) => history::history(g, &args),
        Some(Command::Report(args)) => history::report(g, &args),
        Some(Command::ResetCircuit) => reset_circuit::run(g),
        Some(Command::Trust) => trust::run(g),
        Some(Command::Deliver(args)) => deliver::run(&g.showing(&args.display), &args),
        Some(Command::Analyze(args)) => analyze::run(g, &args),
        Some(Command::Demo(args)) => demo::run(&g.showing(&args.display), &args),
        Some(Command::DemoAgent { pace }) => Ok(demo::agent(pace)),
        Some(Command::DemoCheck { story }) => Ok(demo::check(&story)),
        Some(Command::Worker(args)) => worker::run(&args),
        Some(Command::Watchdog { instance }) => Ok(crate::watchdog::serve(&instance)),
        Some(Command::RemoteWorker(args)) => remote_worker::run(&g.showing(&args.display), &args),
        Some(Command::Init(args)) => init::run(g, &args),
        Some(Command::Import(args)) => import::run(g, &args),
        Some(Command::Agents) => agents::run(g),
        Some(Command::Rules(cmd)) => rules::run(g, cmd),
        Some(Command::Config(ConfigCommand::Show)) => config::show(g),
        Some(Command::Completions { shell }) => generate::completions(shell),
        Some(Command::Man) => generate::man(),
    }
}

/// Why `--json` does not apply, for the commands whose output is not data:
/// refused out loud rather than silently ignored.
fn no_json(command: Option<&Command>, run: &RunArgs) -> Option<&'static str> {
    match command {
        Some(Command::Monitor(_)) => Some(MONITOR_JSON),
        None if run.monitor => Some(MONITOR_JSON),
        Some(Command::Completions { .. }) => {
            Some("--json does not apply to `ralph completions`: it prints a shell script")
        }
        Some(Command::Man) => Some("--json does not apply to `ralph man`: it prints a roff page"),
        _ => None,
    }
}

const MONITOR_JSON: &str = "--json does not apply to `ralph monitor`, which lays the loop out in tmux for a person; for JSON events run the loop itself: `ralph --json`";

/// The command as typed.
fn name(command: &Command) -> &'static str {
    match command {
        Command::Run(_) => "run",
        Command::Status(_) => "status",
        Command::Serve(_) => "serve",
        Command::History(_) => "history",
        Command::Report(_) => "report",
        Command::ResetCircuit => "reset-circuit",
        Command::Trust => "trust",
        Command::Deliver(_) => "deliver",
        Command::Analyze(_) => "analyze",
        Command::Demo(_) => "demo",
        Command::Init(_) => "init",
        Command::Import(_) => "import",
        Command::Agents => "agents",
        Command::Rules(_) => "rules",
        Command::Config(_) => "config",
        Command::Monitor(_) => "monitor",
        Command::Completions { .. } => "completions",
        Command::Man => "man",
        Command::DemoAgent { .. } => "__demo-agent",
        Command::DemoCheck { .. } => "__demo-check",
        Command::Worker(_) => "__worker",
        Command::Watchdog { .. } => "__watchdog",
        Command::RemoteWorker(_) => "worker",
    }
}

/// `ralph [run]`: the loop, unless `--reset-circuit`, `--monitor` or
/// `--status` names another command.
fn run_or_alias(g: &Global, args: &RunArgs) -> Result<u8, Error> {
    if args.reset_circuit {
        return reset_circuit::run(g);
    }
    if args.status {
        return status::run(
            g,
            &StatusArgs { all: false, watch: false, interval: 2, remote: None, branch: None },
        );
    }
    if args.monitor {
        return monitor::run(g);
    }
    run::run(g, args)
}
