use std::time::Duration;

use super::keys::Setting;
use super::kind::{Kind, check};
use super::*;
use crate::agent::Tool;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn defaults_parse_and_match_the_documented_values() {
    let c = Config::default();
    assert_eq!(c.agent.tool, Tool::Claude);
    assert_eq!(c.agent.timeout, Duration::from_secs(30 * 60));
    assert_eq!(c.agent.idle_timeout, Some(Duration::from_secs(600)));
    assert_eq!(c.run.max_iterations, 10);
    assert_eq!(c.run.pause, Duration::ZERO);
    assert_eq!(c.circuit.no_progress, 3);
    assert_eq!(c.limits.calls_per_hour, 100);
    assert!(c.gate.command.is_empty());
    assert_eq!(c.budget.max_duration, None);
    for (k, (value, _)) in KEYS.iter().zip(&Layers::defaults().values) {
        check(k, value).unwrap_or_else(|e| panic!("{}: {e}", k.key));
    }
}

/// `Setting::X` is row X of the table, named after its key, so code that
/// reads `Setting::AgentIdleTimeout` reads `agent.idle_timeout`.
#[test]
fn each_setting_is_its_row_and_named_after_its_key() {
    assert_eq!(Setting::ALL.len(), KEYS.len());
    for (i, &s) in Setting::ALL.iter().enumerate() {
        assert_eq!(s as usize, i);
        let key = s.key().key;
        let camel: String =
            key.split(['.', '_']).map(|w| w[..1].to_uppercase() + &w[1..]).collect();
        assert_eq!(format!("{s:?}"), camel, "{key}");
        assert_eq!(Setting::find(key), Some(s));
    }
    assert_eq!(Setting::find("agent.timeuot"), None);
}

/// A value of each kind that differs from `default` (and passes `check`).
fn another(kind: Kind, default: &toml::Value) -> toml::Value {
    use toml::Value as V;
    let s = |t: &str| V::String(t.into());
    let list = |t: &str| V::Array(vec![s(t)]);
    let candidates = match kind {
        Kind::Bool => vec![V::Boolean(true), V::Boolean(false)],
        Kind::Int => vec![V::Integer(7), V::Integer(9)],
        Kind::Float => vec![V::Float(1.5), V::Float(2.5)],
        Kind::Duration => vec![s("7m"), s("9m")],
        Kind::Str => vec![s("x"), s("y")],
        Kind::List | Kind::Command | Kind::AgentCommand => vec![list("x"), list("y")],
        Kind::Tool | Kind::MaybeTool => vec![s("codex"), s("amp")],
        Kind::Tools => vec![list("codex"), list("amp")],
        Kind::Format => vec![s("claude"), s("amp")],
        Kind::Color => vec![s("never"), s("always")],
        Kind::Progress => vec![s("plain"), s("bar")],
        Kind::Resolve => vec![s("redo"), s("agent")],
        Kind::Sandbox => vec![s("off"), s("strict")],
        Kind::Net => vec![s("any"), s("ports")],
        Kind::Ports => vec![V::Array(vec![V::Integer(22)]), V::Array(vec![V::Integer(23)])],
        Kind::Pr => vec![s("story"), s("run")],
        Kind::Forge => vec![s("github"), s("gitlab")],
    };
    candidates.into_iter().find(|v| v != default).unwrap()
}

/// Every setting in the table reaches the typed `Config`: changing any one
/// of them changes what `resolve` makes. (That every field of `Config` is
/// some row's, the compiler checks: `resolve` is one struct literal the
/// table makes.)
#[test]
fn every_setting_is_resolved_into_the_config() {
    let defaults = Layers::defaults();
    let before = format!("{:?}", defaults.resolve());
    for &setting in Setting::ALL {
        let key = setting.key();
        let value = another(key.kind, defaults.get(setting));
        check(key, &value).unwrap_or_else(|e| panic!("{}: {e}", key.key));
        let mut layers = defaults.clone();
        layers.values[setting as usize].0 = value.clone();
        let after = format!("{:?}", layers.resolve());
        assert_ne!(after, before, "{} = {value} does not change the resolved Config", key.key);
    }
}

#[test]
fn precedence_is_default_user_project_env_flag() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("user.toml");
    let project = dir.path().join("project.toml");
    std::fs::write(&user, "[agent]\ntimeout = \"5m\"\nmodel = \"u\"\n[run]\npause = \"1s\"\n")
        .unwrap();
    std::fs::write(
        &project,
        "[agent]\ntimeout = \"6m\"\n[gate]\ncommand = \"cargo test --quiet\"\n",
    )
    .unwrap();
    // (key, env value, flag value, expected, expected source prefix)
    let cases: &[(&str, Option<&str>, Option<toml::Value>, &str, &str)] = &[
        ("agent.grace", None, None, "\"10s\"", "default"),
        ("run.pause", None, None, "\"1s\"", "/"),
        ("agent.model", None, None, "\"u\"", "/"),
        ("agent.timeout", None, None, "\"6m\"", "/"),
        ("agent.timeout", Some("7m"), None, "\"7m\"", "env RALPH_AGENT_TIMEOUT"),
        ("agent.timeout", Some("7m"), Some("8m".into()), "\"8m\"", "flag --timeout"),
    ];
    for (key, env_value, flag, want, source) in cases {
        let var = env_name(key);
        let env = |k: &str| (k == var).then(|| env_value.map(str::to_string)).flatten();
        let mut layers = Layers::load(Some(&user), &project, &env).unwrap();
        if let Some(v) = flag {
            layers.flag(Setting::find(key).unwrap(), v.clone(), "--timeout").unwrap();
        }
        let (_, value, src) = layers.show().into_iter().find(|(k, _, _)| k.key == *key).unwrap();
        assert_eq!(value, *want, "{key}");
        assert!(src.to_string().starts_with(source), "{key}: {src}");
    }
    let c = Layers::load(Some(&user), &project, &no_env).unwrap().resolve();
    assert_eq!(c.gate.command, ["cargo", "test", "--quiet"]);
}

#[test]
fn a_list_in_the_environment_may_be_a_json_array() {
    let env = |k: &str| {
        (k == "RALPH_AGENT_ALLOWED_TOOLS").then(|| r#"["Read","Bash(git add:*)"]"#.to_string())
    };
    let dir = tempfile::tempdir().unwrap();
    let c = Layers::load(None, &dir.path().join("none"), &env).unwrap().resolve();
    assert_eq!(c.agent.allowed_tools, ["Read", "Bash(git add:*)"]);
    let env = |k: &str| (k == "RALPH_AGENT_ALLOWED_TOOLS").then(|| "Read, Edit".to_string());
    let c = Layers::load(None, &dir.path().join("none"), &env).unwrap().resolve();
    assert_eq!(c.agent.allowed_tools, ["Read", "Edit"]);
}

#[test]
fn bad_files_and_values_are_errors_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.toml");
    let cases = [
        ("[agent]\ntimeuot = \"5m\"\n", "unknown key `agent.timeuot`"),
        ("[agent]\ntimeout = 5\n", "`agent.timeout`: expected a duration"),
        ("[agent]\ntimeout = \"15\"\n", "found \"15\": no unit: write \"15m\" for minutes"),
        ("[agent]\ntool = \"vim\"\n", "`agent.tool`: expected one of claude"),
        (
            "[limits]\ncalls_per_hour = -1\n",
            "`limits.calls_per_hour`: expected a non-negative integer",
        ),
        ("[gate]\ncommand = \"a 'b\"\n", "`gate.command`: expected a command"),
        ("timeout = \"5m\"\n", "unknown key `timeout`"),
        ("[agent\n", "invalid TOML"),
    ];
    for (text, want) in cases {
        std::fs::write(&p, text).unwrap();
        let e = Layers::load(None, &p, &no_env).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
        assert!(e.contains(&p.display().to_string()), "{e}");
    }
    let env = |k: &str| (k == "RALPH_LIMITS_WAIT").then(|| "maybe".to_string());
    let e = Layers::load(None, &dir.path().join("none"), &env).unwrap_err().to_string();
    assert!(e.contains("RALPH_LIMITS_WAIT"), "{e}");
}

#[test]
fn file_errors_say_where_and_what_would_be_right() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.toml");
    let f = p.display().to_string();
    // (file, message, hint)
    let cases: &[(&str, String, &str)] = &[
        (
            "[agent]\nmodel = \"a\"\nmodel = \"b\"\n",
            format!("{f}:3:1: invalid TOML: duplicate key `agent.model`"),
            "`agent.model` is set twice; keep one (this one reads `model = \"b\"`)",
        ),
        (
            "[agent]\ntool = \"codex\"\n[agent]\n",
            format!("{f}:3:2: invalid TOML: the table [agent] appears twice"),
            "merge the two [agent] tables into one",
        ),
        (
            "# mine\n[agent\n",
            format!("{f}:2:7: invalid TOML: unclosed table, expected `]`"),
            "the line reads `[agent`; `ralph config show --no-config` lists every key",
        ),
        (
            "[agent]\nmodle = \"x\"\n",
            format!("{f}:2:1: unknown key `agent.modle`"),
            "did you mean `agent.model`? (`ralph config show --no-config` lists every key",
        ),
        (
            "[agnet]\nmodel = \"x\"\n",
            format!("{f}:2:1: unknown key `agnet.model`"),
            "did you mean `agent.model`?",
        ),
        (
            "[run]\ntimeout = \"5m\"\n",
            format!("{f}:2:1: unknown key `run.timeout`"),
            "did you mean one of `agent.timeout`, `gate.timeout`, `notify.timeout`, `deliver.timeout`?",
        ),
        (
            "\ntimeout = \"5m\"\n",
            format!("{f}:2:1: unknown key `timeout`: settings live in sections"),
            "did you mean one of `agent.timeout`, `gate.timeout`, `notify.timeout`, `deliver.timeout`? (write it under its [section])",
        ),
        (
            "[agent]\nxyzzy = 1\n",
            format!("{f}:2:1: unknown key `agent.xyzzy`"),
            "`ralph config show --no-config` lists every key",
        ),
        (
            "[agent]\ntool = \"claude\"\ntimeout = 5\n",
            format!("{f}:3:11: `agent.timeout`: expected a duration"),
            "its default reads `timeout = \"30m\"`",
        ),
    ];
    for (text, message, hint) in cases {
        std::fs::write(&p, text).unwrap();
        let e = Layers::load(None, &p, &no_env).unwrap_err();
        assert!(e.to_string().starts_with(message.as_str()), "{text:?}: {e}");
        let got = e.hint_text().unwrap_or_default();
        assert!(got.contains(hint), "{text:?}: hint {got:?}");
        // The hint never sends the person to a command that reads the broken file.
        assert!(!got.contains("`ralph config show`"), "{text:?}: {got}");
    }
    let env = |k: &str| (k == "RALPH_LIMITS_WAIT").then(|| "maybe".to_string());
    let e = Layers::load(None, &dir.path().join("none"), &env).unwrap_err();
    assert_eq!(e.hint_text(), Some("fix RALPH_LIMITS_WAIT in the environment, or unset it"));
}

#[test]
fn a_flag_of_the_wrong_type_is_an_error() {
    // (A flag for a key ralph does not have cannot be written: a flag names
    // its key by `Setting`.)
    let mut layers = Layers::defaults();
    let s = |v: &str| toml::Value::String(v.into());
    let cases: &[(&str, toml::Value, Option<&str>)] = &[
        ("agent.timeout", s("5m"), None),
        ("agent.timeout", s("soon"), Some("--timeout: expected a duration")),
        ("budget.max_cost", toml::Value::Float(f64::INFINITY), Some("expected a non-negative")),
        ("budget.max_cost", toml::Value::Float(-1.0), Some("expected a non-negative")),
    ];
    for (key, value, want) in cases {
        let got = layers.flag(Setting::find(key).unwrap(), value.clone(), "--timeout");
        match want {
            None => assert!(got.is_ok(), "{key} = {value}: {got:?}"),
            Some(w) => {
                let e = got.unwrap_err().to_string();
                assert!(e.contains(w), "{key} = {value}: {e}");
            }
        }
    }
    assert_eq!(layers.resolve().agent.timeout, Duration::from_secs(300));
}

#[test]
fn template_lists_every_key_and_parses_when_uncommented() {
    let t = template();
    let uncommented: String = t
        .lines()
        .map(|l| {
            let setting = KEYS.iter().any(|k| {
                let name = k.key.split_once('.').unwrap().1;
                l.strip_prefix("# ").is_some_and(|rest| rest.starts_with(&format!("{name} = ")))
            });
            if setting { &l[2..] } else { l }
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.toml");
    std::fs::write(&p, uncommented).unwrap();
    let layers = Layers::load(None, &p, &no_env).unwrap();
    for (key, _, source) in layers.show() {
        assert!(matches!(source, Source::Project(_)), "{} not in the template", key.key);
    }
}
