//! ralph-claude-code's `.ralphrc` read as ralph settings: pure, text in,
//! one [`Mapping`] per assignment out.
//!
//! ralph-claude-code `source`s the file; ralph never runs it. Only plain
//! assignments are read (`KEY=value`, `export KEY="value"`, `KEY='value'`);
//! a value with an expansion (`$HOME`, `$(…)`, backticks) or a line that is
//! not an assignment is reported and left alone, never guessed at.

use toml::Value;

/// What one assignment becomes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Mapping {
    /// Settings for `.ralph/config.toml`, with a note when the meaning shifts.
    Set(Vec<(&'static str, Value)>, Option<&'static str>),
    /// The `project` of the prd.json made from fix_plan.md.
    Project(String),
    /// Nothing to write: the value says what ralph does anyway.
    Same,
    /// No equivalent in ralph, and why.
    Dropped(&'static str),
    /// The value cannot be read as what the key needs.
    Invalid(String),
    /// Not a key ralph-claude-code documents.
    Unknown,
}

/// One line of the file that is an assignment, or could not be read as one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) line: usize,
    pub(crate) name: String,
    pub(crate) mapping: Mapping,
}

const SESSION: &str = "every iteration starts a fresh agent process, so there is no session to continue or expire; what carries over is git, prd.json, progress.txt and the handoff file";
const NOTIFY: &str = "notifications are [notify] in ralph (notify.desktop = true for notify-send, or a webhook, Slack or ntfy), or hooks.on_complete and hooks.on_halt";
const GITHUB: &str =
    "ralph has no GitHub integration; hooks.on_complete can comment, close the issue or open a PR";
const SANDBOX: &str = "ralph runs the agent where ralph runs: start ralph itself in the container or VM (deploy/ has examples)";
const ENABLE: &str = "used by ralph-enable when it set the project up; the loop never read it";
const VERSION: &str = "ralph neither updates nor version-checks the agent CLI; `ralph agents` shows the installed one";

/// How a key's value becomes settings.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Int(&'static str),
    Minutes(&'static str),
    Bool(&'static str),
    Tools,
    Command,
    Str(&'static str),
    Effort,
    TokensPerHour,
    Project,
    Drop(&'static str),
}

/// Every key ralph-claude-code documents (v0.11.5), legacy names included.
const KEYS: &[(&str, Rule)] = &[
    ("MAX_CALLS_PER_HOUR", Rule::Int("limits.calls_per_hour")),
    ("MAX_TOKENS_PER_HOUR", Rule::TokensPerHour),
    ("CLAUDE_TIMEOUT_MINUTES", Rule::Minutes("agent.timeout")),
    (
        "CLAUDE_OUTPUT_FORMAT",
        Rule::Drop("ralph picks each agent CLI's output format itself and reads it"),
    ),
    ("ALLOWED_TOOLS", Rule::Tools),
    ("CLAUDE_ALLOWED_TOOLS", Rule::Tools),
    ("SESSION_CONTINUITY", Rule::Drop(SESSION)),
    ("CLAUDE_USE_CONTINUE", Rule::Drop(SESSION)),
    ("SESSION_EXPIRY_HOURS", Rule::Drop(SESSION)),
    ("CLAUDE_SESSION_EXPIRY_HOURS", Rule::Drop(SESSION)),
    ("CLAUDE_CODE_CMD", Rule::Command),
    ("CLAUDE_MODEL", Rule::Str("agent.model")),
    ("CLAUDE_EFFORT", Rule::Effort),
    ("CLAUDE_AUTO_UPDATE", Rule::Drop(VERSION)),
    ("CLAUDE_MIN_VERSION", Rule::Drop(VERSION)),
    ("RALPH_VERBOSE", Rule::Drop("verbosity is chosen per run: `ralph -v`")),
    ("VERBOSE_PROGRESS", Rule::Drop("verbosity is chosen per run: `ralph -v`")),
    (
        "RALPH_SHELL_INIT_FILE",
        Rule::Drop(
            "ralph starts the agent from an argv, without a shell, with the environment ralph was started with: source the file before starting ralph",
        ),
    ),
    ("CB_NO_PROGRESS_THRESHOLD", Rule::Int("circuit.no_progress")),
    ("CB_SAME_ERROR_THRESHOLD", Rule::Int("circuit.same_error")),
    ("CB_PERMISSION_DENIAL_THRESHOLD", Rule::Int("circuit.permission_denials")),
    (
        "CB_OUTPUT_DECLINE_THRESHOLD",
        Rule::Drop("ralph-claude-code documents it but never reads it"),
    ),
    ("CB_COOLDOWN_MINUTES", Rule::Minutes("circuit.cooldown")),
    ("CB_AUTO_RESET", Rule::Bool("circuit.auto_reset")),
    ("ENABLE_NOTIFICATIONS", Rule::Drop(NOTIFY)),
    ("ENABLE_BACKUP", Rule::Drop("ralph commits every story's work: git history is the backup")),
    (
        "LIVE_SHOW_TOOL_ARGS",
        Rule::Drop("ralph shows the agent's output as it works (`-v` for more, `-q` for less)"),
    ),
    (
        "OPTIONAL_SECTIONS",
        Rule::Drop(
            "ralph has no optional stories: the items of such sections are imported last and must pass like the others (remove them from prd.json if they should not)",
        ),
    ),
    ("DRY_RUN", Rule::Drop("`ralph --dry-run` shows the next iteration without running it")),
    ("GITHUB_ISSUE", Rule::Drop(GITHUB)),
    ("COMMENT_PROGRESS", Rule::Drop(GITHUB)),
    ("COMMENT_INTERVAL", Rule::Drop(GITHUB)),
    ("AUTO_CLOSE", Rule::Drop(GITHUB)),
    ("CLOSE_SUMMARY", Rule::Drop(GITHUB)),
    ("CREATE_PR", Rule::Drop(GITHUB)),
    ("LINK_ISSUE", Rule::Drop(GITHUB)),
    ("DRAFT_PR", Rule::Drop(GITHUB)),
    ("CREATE_FOLLOWUPS", Rule::Drop(GITHUB)),
    ("FOLLOWUP_LABEL", Rule::Drop(GITHUB)),
    ("ADD_COMPLETION_LABELS", Rule::Drop(GITHUB)),
    ("PROJECT_NAME", Rule::Project),
    ("PROJECT_TYPE", Rule::Drop(ENABLE)),
    ("TASK_SOURCES", Rule::Drop(ENABLE)),
    ("GITHUB_TASK_LABEL", Rule::Drop(ENABLE)),
    ("BEADS_FILTER", Rule::Drop(ENABLE)),
];

/// Families of keys, by prefix (the sandbox and file-sync settings).
const PREFIXES: &[(&str, &str)] = &[("SANDBOX_", SANDBOX), ("SYNC_", SANDBOX)];

const SAFE_NOTE: &str = "ralph-claude-code always limited claude to this list; ralph does in safe mode, which this turns on";

/// Reads every line of a `.ralphrc`.
pub(crate) fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map(str::trim_start).unwrap_or(line);
        let assignment = line.split_once('=').filter(|(name, _)| is_name(name));
        let Some((name, value)) = assignment else {
            out.push(Entry {
                line: n + 1,
                name: crate::text::clip(line, 40),
                mapping: Mapping::Invalid("not a plain KEY=value assignment".into()),
            });
            continue;
        };
        let mapping = match unquote(value) {
            Ok(value) => map(name, &value),
            Err(why) => Mapping::Invalid(why.to_string()),
        };
        out.push(Entry { line: n + 1, name: name.to_string(), mapping });
    }
    out
}

fn is_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

const EXPANSION: &str = "the value is a shell expression (it expands $…, `…` or $(…)): ralph does not run .ralphrc, so set it by hand";

/// Why a value is not one plain shell word ralph can read without a shell.
#[derive(Debug, thiserror::Error)]
enum NotAWord {
    #[error("an unclosed {0} quote")]
    Unclosed(char),
    #[error("{EXPANSION}")]
    Expansion,
    #[error("more than one word after `=` ({0:?})")]
    MoreThanOne(String),
}

/// A shell word's value, without running anything.
fn unquote(value: &str) -> Result<String, NotAWord> {
    let value = value.trim();
    let (word, rest) = if let Some(inner) = value.strip_prefix('"') {
        let end = inner.find('"').ok_or(NotAWord::Unclosed('"'))?;
        let word = &inner[..end];
        if word.contains(['$', '`']) {
            return Err(NotAWord::Expansion);
        }
        (word.replace("\\\\", "\\"), &inner[end + 1..])
    } else if let Some(inner) = value.strip_prefix('\'') {
        let end = inner.find('\'').ok_or(NotAWord::Unclosed('\''))?;
        (inner[..end].to_string(), &inner[end + 1..])
    } else {
        let end = value.find([' ', '\t']).unwrap_or(value.len());
        let word = &value[..end];
        if word.contains(['$', '`', '(', '"', '\'']) {
            return Err(NotAWord::Expansion);
        }
        (word.to_string(), &value[end..])
    };
    let rest = rest.trim();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return Err(NotAWord::MoreThanOne(rest.to_string()));
    }
    Ok(word)
}

/// What `name=value` becomes in ralph.
pub(crate) fn map(name: &str, value: &str) -> Mapping {
    let rule = KEYS.iter().find(|(k, _)| *k == name).map(|(_, r)| *r).or_else(|| {
        PREFIXES.iter().find(|(p, _)| name.starts_with(p)).map(|(_, why)| Rule::Drop(why))
    });
    let Some(rule) = rule else { return Mapping::Unknown };
    let number = || value.parse::<u32>().map_err(|_| format!("{value:?} is not a whole number"));
    let set = |key, v: Value| Mapping::Set(vec![(key, v)], None);
    let result = match rule {
        Rule::Int(key) => number().map(|n| set(key, Value::Integer(n.into()))),
        Rule::Minutes(key) => number().map(|n| set(key, Value::String(format!("{n}m")))),
        Rule::Bool(key) => match value {
            "true" => Ok(set(key, Value::Boolean(true))),
            "false" => Ok(set(key, Value::Boolean(false))),
            _ => Err(format!("{value:?} is neither true nor false")),
        },
        Rule::Tools => {
            let tools: Vec<Value> = value
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(|t| Value::String(t.to_string()))
                .collect();
            if tools.is_empty() {
                Ok(Mapping::Same)
            } else {
                Ok(Mapping::Set(
                    vec![
                        ("agent.allowed_tools", Value::Array(tools)),
                        ("agent.safe", Value::Boolean(true)),
                    ],
                    Some(SAFE_NOTE),
                ))
            }
        }
        Rule::Command => match crate::agent::words::split(value) {
            Ok(w) if w.is_empty() || w == ["claude"] => Ok(Mapping::Same),
            Ok(w) => Ok(Mapping::Set(
                vec![("agent.command", Value::Array(w.into_iter().map(Value::String).collect()))],
                Some("the program ralph runs for claude"),
            )),
            Err(e) => Err(format!("cannot split {value:?} into words: {e}")),
        },
        Rule::Str(_) if value.is_empty() => Ok(Mapping::Same),
        Rule::Str(key) => Ok(set(key, Value::String(value.to_string()))),
        Rule::Effort if value.is_empty() => Ok(Mapping::Same),
        Rule::Effort => Ok(Mapping::Set(
            vec![(
                "agent.args",
                Value::Array(vec![Value::String("--effort".into()), Value::String(value.into())]),
            )],
            Some("passed to claude as --effort"),
        )),
        Rule::TokensPerHour => match number() {
            Ok(0) => Ok(Mapping::Same),
            Ok(_) => Ok(Mapping::Dropped(
                "ralph has no hourly token window; budget.max_tokens caps the tokens of a whole run",
            )),
            Err(e) => Err(e),
        },
        Rule::Project if value.trim().is_empty() => Ok(Mapping::Same),
        Rule::Project => Ok(Mapping::Project(value.trim().to_string())),
        Rule::Drop(why) => Ok(Mapping::Dropped(why)),
    };
    result.unwrap_or_else(Mapping::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn each_key_maps_or_says_why_not() {
        #[rustfmt::skip]
        let cases: &[(&str, Mapping)] = &[
            ("MAX_CALLS_PER_HOUR=50", Mapping::Set(vec![("limits.calls_per_hour", Value::Integer(50))], None)),
            ("export CLAUDE_TIMEOUT_MINUTES=\"20\"", Mapping::Set(vec![("agent.timeout", s("20m"))], None)),
            ("CB_COOLDOWN_MINUTES=0", Mapping::Set(vec![("circuit.cooldown", s("0m"))], None)),
            ("CB_AUTO_RESET=true", Mapping::Set(vec![("circuit.auto_reset", Value::Boolean(true))], None)),
            ("ALLOWED_TOOLS=\"Write,Read, Bash(git commit *)\"", Mapping::Set(vec![
                ("agent.allowed_tools", Value::Array(vec![s("Write"), s("Read"), s("Bash(git commit *)")])),
                ("agent.safe", Value::Boolean(true)),
            ], Some(SAFE_NOTE))),
            ("CLAUDE_CODE_CMD=claude", Mapping::Same),
            ("CLAUDE_CODE_CMD='npx @anthropic-ai/claude-code'", Mapping::Set(vec![
                ("agent.command", Value::Array(vec![s("npx"), s("@anthropic-ai/claude-code")])),
            ], Some("the program ralph runs for claude"))),
            ("CLAUDE_MODEL=\"\"", Mapping::Same),
            ("CLAUDE_MODEL=opus # the big one", Mapping::Set(vec![("agent.model", s("opus"))], None)),
            ("MAX_TOKENS_PER_HOUR=0", Mapping::Same),
            ("SESSION_CONTINUITY=true", Mapping::Dropped(SESSION)),
            ("SANDBOX_DOCKER_IMAGE=x", Mapping::Dropped(SANDBOX)),
            ("PROJECT_NAME=\"my app\"", Mapping::Project("my app".into())),
            ("SOMETHING_ELSE=1", Mapping::Unknown),
        ];
        for (line, want) in cases {
            let got = parse(line);
            assert_eq!(got.len(), 1, "{line}");
            assert_eq!(&got[0].mapping, want, "{line}");
        }
    }

    #[test]
    fn nothing_is_guessed() {
        #[rustfmt::skip]
        let cases: &[(&str, &str)] = &[
            ("MAX_CALLS_PER_HOUR=lots", "is not a whole number"),
            ("CB_AUTO_RESET=yes", "neither true nor false"),
            ("CLAUDE_MODEL=\"$MODEL\"", "shell expression"),
            ("CLAUDE_MODEL=$(pick-model)", "shell expression"),
            ("CLAUDE_MODEL=`pick`", "shell expression"),
            ("CLAUDE_MODEL=\"open", "unclosed"),
            ("CLAUDE_MODEL=a b", "more than one word"),
            ("if [ -f x ]; then", "not a plain KEY=value"),
            ("lower=1", "not a plain KEY=value"),
        ];
        for (line, want) in cases {
            let got = parse(line);
            match &got[0].mapping {
                Mapping::Invalid(why) => assert!(why.contains(want), "{line}: {why}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        assert!(parse("# comment\n\n   \n").is_empty());
    }

    #[test]
    fn every_documented_key_is_known_and_lines_are_counted() {
        for (key, _) in KEYS {
            let m = map(key, "1");
            assert_ne!(m, Mapping::Unknown, "{key}");
        }
        let e = parse("# settings\nMAX_CALLS_PER_HOUR=5\n\nCLAUDE_ALLOWED_TOOLS=Read\n");
        let lines: Vec<(usize, &str)> = e.iter().map(|e| (e.line, e.name.as_str())).collect();
        assert_eq!(lines, [(2, "MAX_CALLS_PER_HOUR"), (4, "CLAUDE_ALLOWED_TOOLS")]);
    }
}
