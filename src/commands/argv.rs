//! The command line as people type it: clap's parse, plus what users of
//! ralph.sh and ralph-claude-code bring along.
//!
//! Some of their spellings are accepted as they are (`--status`,
//! `--max-iterations N`, `-n N`, `--calls N`, `--auto-reset-circuit`,
//! declared hidden in `cli`) and folded here into ralph's own; the others
//! are refused with ralph's spelling. A word where a command goes that is
//! no command (`ralph stauts`) is called an unknown command, with the
//! closest one, instead of "invalid digit found in string" from reading it
//! as the iteration count.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command, RunArgs};

/// What ralph calls the flags of other loop drivers it does not take, as
/// the tip of the error (`-5` and `-n` without a number are handled apart).
const PEERS: &[(&str, &str)] = &[
    ("-s", "for the status, run `ralph status` (or `ralph --status`)"),
    ("--circuit-status", "`ralph status` shows the circuit breaker with the rest"),
    ("-m", "for tmux, run `ralph monitor` (or `ralph --monitor`)"),
    ("-c", "the calls-per-hour limit is `--calls-per-hour N`"),
    ("-t", "the time limit is `--timeout 15m` (a duration: 15m, 90s, 1h)"),
    ("-p", "the prompt template is `--prompt FILE`"),
    ("-l", "ralph shows the agent's output as it works (`-q` hides it)"),
    ("--live", "ralph shows the agent's output as it works (`-q` hides it)"),
    (
        "--notify",
        "notifications are settings: [notify] in .ralph/config.toml (desktop = true for notify-send, or a webhook, Slack or ntfy), or hooks.on_complete / hooks.on_halt",
    ),
    (
        "--reset-session",
        "every iteration starts a fresh agent, so there is no session to reset (`--fresh` starts a new run)",
    ),
    ("--no-continue", "every iteration starts a fresh agent; no session is ever continued"),
    (
        "--output-format",
        "`--json` prints ralph's events as JSON lines; agent.format names a custom agent's output",
    ),
    ("--allowed-tools", "set agent.allowed_tools in .ralph/config.toml and run with `--safe`"),
    ("-b", "ralph commits every story's work; `git log` is the backup"),
    ("--backup", "ralph commits every story's work; `git log` is the backup"),
];

/// Parses `args` (the program name first), or the error clap prints.
pub(crate) fn parse(args: Vec<OsString>) -> Result<Cli, clap::Error> {
    let mut cli = Cli::try_parse_from(&args).map_err(|e| explain(e, &args))?;
    fold(&mut cli.run);
    if let Some(Command::Run(run) | Command::Monitor(run)) = &mut cli.command {
        fold(run);
    }
    Ok(cli)
}

/// `--max-iterations N` and `-n N` are the positional count.
fn fold(run: &mut RunArgs) {
    if let Some(n) = run.iterations.take() {
        run.settings.max_iterations = Some(n);
    }
}

fn text(e: &clap::Error, kind: ContextKind) -> Option<String> {
    match e.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// clap's error, or a better one.
fn explain(e: clap::Error, args: &[OsString]) -> clap::Error {
    let arg = text(&e, ContextKind::InvalidArg).unwrap_or_default();
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let flag = arg.split('=').next().unwrap_or_default();
            let tip = PEERS.iter().find(|(f, _)| *f == flag).map(|(_, t)| t.to_string());
            let tip = tip.or_else(|| {
                let n = flag.strip_prefix('-')?;
                n.bytes().all(|b| b.is_ascii_digit()).then(|| {
                    format!("the iteration count is a plain number: `ralph {n}`")
                })
            });
            match tip {
                Some(tip) => unknown_argument(&e, &arg, Some(tip)),
                // Never clap's "to pass '--x' as a value, use '-- --x'": after
                // `--` it would be read as the iteration count, and fail again.
                None if e.get(ContextKind::SuggestedArg).is_none() => {
                    unknown_argument(&e, &arg, Some("`ralph --help` lists the options".into()))
                }
                None => unknown_argument(&e, &arg, None),
            }
        }
        ErrorKind::ValueValidation if arg == "[MAX_ITERATIONS]" => {
            let value = text(&e, ContextKind::InvalidValue).unwrap_or_default();
            if value.is_empty() || value.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
                return e;
            }
            let mut cmd = Cli::command();
            let message = if is_command_position(&value, args) {
                let names: Vec<String> = cmd
                    .get_subcommands()
                    .filter(|c| !c.is_hide_set())
                    .flat_map(|c| {
                        std::iter::once(c.get_name().to_string())
                            .chain(c.get_all_aliases().map(str::to_string))
                    })
                    .collect();
                match crate::text::closest(&value, names.iter().map(String::as_str)) {
                    Some(near) => format!("unknown command `{value}`; did you mean `{near}`?"),
                    None => format!(
                        "unknown command `{value}`; `ralph --help` lists the commands (a number alone is the iteration count)"
                    ),
                }
            } else {
                format!("`{value}` is not an iteration count: give a number such as `5`")
            };
            clap::Error::raw(ErrorKind::InvalidSubcommand, message).format(&mut cmd)
        }
        // `-n` alone: ralph-claude-code's --notify, which takes no value.
        ErrorKind::InvalidValue
            if arg.starts_with("--max-iterations") && args.iter().any(|a| a == "-n") =>
        {
            clap::Error::raw(
                ErrorKind::InvalidValue,
                "`-n` takes the iteration count (`-n 5`)\n\n  tip: ralph-claude-code's -n (--notify) is [notify] in .ralph/config.toml here (desktop = true for notify-send)",
            )
            .format(&mut Cli::command())
        }
        _ => e,
    }
}

/// Whether `value` stands where a command would: before it on the command
/// line are only options (and their values), no `run` or `monitor`.
fn is_command_position(value: &str, args: &[OsString]) -> bool {
    let before = args.iter().skip(1).take_while(|a| *a != value);
    !before.into_iter().any(|a| a == "run" || a == "monitor")
}

/// "unexpected argument" with ralph's tip instead of clap's.
fn unknown_argument(e: &clap::Error, arg: &str, tip: Option<String>) -> clap::Error {
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = clap::Error::new(ErrorKind::UnknownArgument).with_cmd(&cmd);
    out.insert(ContextKind::InvalidArg, ContextValue::String(arg.to_string()));
    match tip {
        Some(tip) => {
            out.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![tip.into()]));
        }
        None => {
            if let Some(similar) = e.get(ContextKind::SuggestedArg) {
                out.insert(ContextKind::SuggestedArg, similar.clone());
            }
        }
    }
    if let Some(usage) = e.get(ContextKind::Usage) {
        out.insert(ContextKind::Usage, usage.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<OsString> {
        std::iter::once("ralph").chain(line.split_whitespace()).map(OsString::from).collect()
    }

    #[test]
    fn the_spellings_of_other_drivers_that_ralph_takes() {
        // (command line, iteration count, --status)
        let cases: &[(&str, Option<u32>, bool)] = &[
            ("5", Some(5), false),
            ("--max-iterations 5", Some(5), false),
            ("--max-iterations=7", Some(7), false),
            ("-n 3", Some(3), false),
            ("run -n 4", Some(4), false),
            ("--tool amp 10", Some(10), false),
            ("--status", None, true),
        ];
        for (line, count, status) in cases {
            let cli = parse(argv(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
            let run = match &cli.command {
                Some(Command::Run(r)) => r,
                _ => &cli.run,
            };
            assert_eq!(run.settings.max_iterations, *count, "{line}");
            assert_eq!(run.iterations, None, "{line}: not folded");
            assert_eq!(run.status, *status, "{line}");
        }
        let cli = parse(argv("--calls 5 --auto-reset-circuit")).unwrap();
        assert_eq!(cli.run.settings.calls_per_hour, Some(5));
        assert!(cli.run.settings.auto_reset);
    }

    #[test]
    fn the_others_are_refused_with_ralphs_spelling() {
        let cases: &[(&str, &str)] = &[
            ("stauts", "unknown command `stauts`; did you mean `status`?"),
            ("agnets", "did you mean `agents`?"),
            ("doctr", "did you mean `doctor`?"),
            ("deploy", "unknown command `deploy`; `ralph --help` lists the commands"),
            ("run five", "`five` is not an iteration count"),
            ("-5", "the iteration count is a plain number: `ralph 5`"),
            ("-s", "`ralph status`"),
            ("--notify", "[notify] in .ralph/config.toml (desktop = true for notify-send"),
            ("-n", "ralph-claude-code's -n (--notify) is [notify] in .ralph/config.toml here"),
            ("--output-format=json", "`--json`"),
            ("--bogus", "`ralph --help` lists the options"),
            ("--no-such-flag", "a similar argument exists: '--no-config'"),
            ("--max-iterations 5 7", "cannot be used with"),
        ];
        for (line, want) in cases {
            let e = parse(argv(line)).err().unwrap_or_else(|| panic!("{line}: parsed"));
            let text = e.render().to_string();
            assert!(text.contains(want), "{line}: {text}");
            assert!(!text.contains("'-- "), "{line}: clap's `--` tip: {text}");
            assert_eq!(e.exit_code(), i32::from(crate::exit::USAGE), "{line}");
        }
    }
}
