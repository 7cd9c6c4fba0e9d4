//! The settings given on the command line, as the top configuration layer.
//!
//! A flag that sets a key is declared in the key's row of the settings
//! table (`config/keys.rs`), which makes the field of `cli::SettingArgs`
//! (for `--color`, of `cli::GlobalSettingArgs`; for `--progress`, of
//! `cli::DisplaySettingArgs`, a run's display options) and
//! says what value each given flag puts on its key
//! (`config::keys::given`). The tests below fail when the flag a row names
//! is not the one clap made of its field, when a flag's help shows another
//! default than its key's, or when the `flag #N` places in `--help` are not
//! 1..N each once.

use std::path::Path;

use toml::Value;

use crate::cli::{Global, SettingArgs};
use crate::config::keys::{Setting, given};
use crate::config::{ConfigError, Layers};
use crate::error::Error;
use crate::store::Store;

use super::common::env;

/// The configuration layers for a project, with the setting flags on top.
pub(crate) fn layers(g: &Global, project: &Path, settings: &SettingArgs) -> Result<Layers, Error> {
    let mut layers = if g.no_config {
        Layers::load(None, &project.join(".ralph/none"), &env)?
    } else {
        let config = Store::new(project).config();
        let base = crate::oracle::base::trusted(project, &config);
        Layers::load_with_base(
            crate::config::user_file(&env).as_deref(),
            &config,
            base.as_ref(),
            &env,
        )?
    };
    apply(&mut layers, g, settings)?;
    Ok(layers)
}

/// Puts every setting flag that was given on top of `layers`.
pub(crate) fn apply(
    layers: &mut Layers,
    g: &Global,
    settings: &SettingArgs,
) -> Result<(), ConfigError> {
    for (setting, flag, value) in given(&g.settings, &g.display.settings, settings) {
        layers.flag(setting, value, flag)?;
    }
    // `--agent-cmd` alone means that command is the agent. (agent.command
    // in a file, without agent.tool, replaces claude's program instead.)
    if settings.agent_cmd.is_some() && settings.tool.is_none() {
        layers.flag(Setting::AgentTool, Value::String("custom".into()), "--agent-cmd")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{Args, CommandFactory, Parser};

    use super::*;
    use crate::cli::{Cli, DisplaySettingArgs, GlobalSettingArgs};
    use crate::config::KEYS;
    use crate::config::Source;
    use crate::config::kind::Kind;

    /// An argument as a person types it: `--timeout`, or `MAX_ITERATIONS`.
    fn shown(arg: &clap::Arg) -> String {
        match arg.get_long() {
            Some(long) => format!("--{long}"),
            None => arg
                .get_value_names()
                .and_then(|v| v.first())
                .map_or_else(|| arg.get_id().to_string(), |v| v.to_string()),
        }
    }

    fn declared() -> Vec<(&'static str, &'static str)> {
        KEYS.iter().filter_map(|k| Some((k.flag?, k.key))).collect()
    }

    /// Every argument of `ralph` and `ralph run`, as typed.
    fn every_argument() -> Vec<String> {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("ralph run").clone();
        cli.get_arguments().chain(run.get_arguments()).map(shown).collect()
    }

    #[test]
    fn every_setting_flag_is_in_the_table_and_every_flag_in_the_table_exists() {
        let settings: Vec<String> = SettingArgs::augment_args(clap::Command::new("s"))
            .get_arguments()
            .chain(GlobalSettingArgs::augment_args(clap::Command::new("g")).get_arguments())
            .chain(DisplaySettingArgs::augment_args(clap::Command::new("d")).get_arguments())
            .map(shown)
            .collect();
        let declared = declared();
        for flag in &settings {
            let rows = declared.iter().filter(|(f, _)| f == flag).count();
            assert_eq!(
                rows, 1,
                "{flag} sets configuration but {rows} rows of the settings table name it"
            );
        }
        let all = every_argument();
        for (flag, key) in &declared {
            assert!(
                all.iter().any(|a| a == flag),
                "KEYS row {key} names {flag}, which ralph does not have"
            );
            assert!(
                settings.iter().any(|s| s == flag),
                "KEYS row {key} names {flag}, which is not the flag its field makes"
            );
        }
        assert!(all.iter().any(|a| a == "--fresh"), "the command line was not enumerated: {all:?}");
    }

    /// `flag #N` numbers the setting flags in `--help`: each number once,
    /// and no flag unnumbered, so none lands after the run's own options.
    #[test]
    fn the_setting_flags_have_each_their_own_place_in_help() {
        let settings = SettingArgs::augment_args(clap::Command::new("s"));
        let mut places: Vec<(usize, String)> = settings
            .get_arguments()
            .filter(|a| a.get_long().is_some())
            .map(|a| (a.get_display_order(), shown(a)))
            .collect();
        places.sort();
        for (i, (place, flag)) in places.iter().enumerate() {
            assert_eq!(
                *place,
                100 + i,
                "{flag} is not flag #{} of the settings table: {places:?}",
                i + 1
            );
        }
    }

    #[test]
    fn each_declared_flag_sets_its_key_and_nothing_else() {
        for (flag, key) in declared() {
            let kind = KEYS.iter().find(|k| k.key == key).unwrap().kind;
            let sample = match kind {
                Kind::Bool => None,
                Kind::Duration => Some("7m"),
                Kind::Int | Kind::Float => Some("7"),
                Kind::Str | Kind::List => Some("x"),
                Kind::Command | Kind::AgentCommand => Some("my-agent --fast"),
                Kind::Tool | Kind::Tools | Kind::Format | Kind::MaybeTool => Some("codex"),
                Kind::Resolve => Some("redo"),
                Kind::Sandbox => Some("strict"),
                Kind::Net => Some("any"),
                Kind::Ports => Some("22"),
                Kind::Color => Some("never"),
                Kind::Progress => Some("plain"),
                Kind::Forge => Some("github"),
                // `--pr` alone is `--pr=run` (require_equals: `--pr story` is not it).
                Kind::Pr => None,
            };
            let mut argv = vec!["ralph"];
            match (flag.starts_with('-'), sample) {
                (true, Some(v)) => argv.extend([flag, v]),
                (true, None) => argv.push(flag),
                (false, v) => argv.push(v.unwrap()),
            }
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let mut layers = Layers::defaults();
            let g = cli.global.showing(&cli.run.display);
            apply(&mut layers, &g, &cli.run.settings).unwrap();
            let defaults = Layers::defaults();
            let changed: Vec<&str> = layers
                .show()
                .into_iter()
                .zip(defaults.show())
                .filter(|((_, v, s), (_, d, _))| v != d || **s != Source::Default)
                .inspect(|((k, _, s), _)| {
                    assert_eq!(**s, Source::Flag(flag.into()), "{argv:?}: {}", k.key)
                })
                .map(|((k, _, _), _)| k.key)
                .collect();
            let want: &[&str] = if flag == "--agent-cmd" { &["agent.tool", key] } else { &[key] };
            assert_eq!(changed, want, "{argv:?}");
        }
    }

    #[test]
    fn agent_cmd_with_a_tool_replaces_that_tools_program() {
        let cli =
            Cli::try_parse_from(["ralph", "--tool", "codex", "--agent-cmd", "my-codex"]).unwrap();
        let mut layers = Layers::defaults();
        apply(&mut layers, &cli.global, &cli.run.settings).unwrap();
        let c = layers.resolve();
        assert_eq!(c.agent.tool, crate::agent::Tool::Codex);
        assert_eq!(c.agent.command.argv, ["my-codex"]);
    }

    #[test]
    fn fallback_tools_repeat_or_come_as_a_comma_list() {
        let argv = ["ralph", "--fallback-tool", "codex,gemini", "--fallback-tool", "amp"];
        let cli = Cli::try_parse_from(argv).unwrap();
        let mut layers = Layers::defaults();
        apply(&mut layers, &cli.global, &cli.run.settings).unwrap();
        use crate::agent::Tool;
        assert_eq!(layers.resolve().agent.fallback, [Tool::Codex, Tool::Gemini, Tool::Amp]);
        let twice = Cli::try_parse_from(["ralph", "--fallback-tool", "codex,codex"]).unwrap();
        let e = apply(&mut Layers::defaults(), &twice.global, &twice.run.settings).unwrap_err();
        assert!(e.to_string().contains("\"codex\" is listed twice"), "{e}");
        assert!(Cli::try_parse_from(["ralph", "--fallback-tool", "custom"]).is_err());
    }

    #[test]
    fn a_flags_help_shows_its_keys_default() {
        let declared = declared();
        let mut compared = 0;
        let cli = Cli::command();
        for arg in cli.get_arguments() {
            let flag = shown(arg);
            let Some((_, key)) = declared.iter().find(|(f, _)| *f == flag) else { continue };
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let Some(shown_default) = help.split_once("[default: ").map(|(_, d)| d) else {
                continue;
            };
            let shown_default = shown_default.split([',', ']']).next().unwrap();
            let row = KEYS.iter().find(|k| k.key == *key).unwrap();
            assert_eq!(shown_default, row.default.trim_matches('"'), "{flag}: {help}");
            compared += 1;
        }
        assert!(compared >= 5, "only {compared} flags show a default");
    }

    #[test]
    fn bad_flag_values_are_refused_when_parsed() {
        let cases: &[(&[&str], bool)] = &[
            (&["--gate", "cargo test"], true),
            (&["--gate", "a 'b"], false),
            (&["--agent-cmd", "my-agent \"x"], false),
            (&["--max-cost", "2.5"], true),
            (&["--max-cost", "inf"], false),
            (&["--max-cost=-1"], false),
            (&["--timeout", "5 parsecs"], false),
            (&["--timeout", "15"], false),
            (&["0"], false),
        ];
        for (args, ok) in cases {
            let argv = std::iter::once(&"ralph").chain(args.iter());
            assert_eq!(Cli::try_parse_from(argv).is_ok(), *ok, "{args:?}");
        }
    }
}
