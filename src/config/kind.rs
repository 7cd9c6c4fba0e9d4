//! The type of each setting, and how a value of each type is checked
//! (files, flags) or parsed from text (the environment).

use std::time::Duration;

use super::Key;
use crate::agent::Tool;
use crate::analyze::Format;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Str,
    Bool,
    Int,
    Float,
    Duration,
    /// A list of strings (TOML array, or comma-separated in the environment).
    List,
    /// A command: an argv array, or a string split like a shell splits words.
    Command,
    /// The agent's command: an argv array, or a string whose leading
    /// `NAME=value` words are its environment, with no other shell syntax
    /// (`agent::words::command`).
    AgentCommand,
    Tool,
    /// Agent names: a TOML array, or comma-separated in the environment.
    Tools,
    Format,
    Color,
    Progress,
    /// `merge.resolve`: agent or redo.
    Resolve,
    /// An agent's name, or "" for none given.
    MaybeTool,
    /// `agent.sandbox`: auto, strict or off.
    Sandbox,
    /// `sandbox.net`: ports or any.
    Net,
    /// TCP ports (1–65535): a TOML array of integers, or comma-separated in the environment.
    Ports,
    /// `deliver.pr`: off, run or story.
    Pr,
    /// `deliver.forge`: auto, github or gitlab.
    Forge,
}

impl Kind {
    /// Whether it is one of `kinds` (a `const fn`, so the settings table
    /// can check each row's type against its kind as it compiles).
    pub(crate) const fn is_one_of(self, kinds: &[Kind]) -> bool {
        let mut i = 0;
        while i < kinds.len() {
            if kinds[i] as u8 == self as u8 {
                return true;
            }
            i += 1;
        }
        false
    }

    fn expected(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Bool => "true or false",
            Kind::Int => "a non-negative integer",
            Kind::Float => "a non-negative number",
            Kind::Duration => {
                "a duration such as \"30m\", \"90s\" or \"1h 30m\" (\"0\" turns it off)"
            }
            Kind::List => "an array of strings",
            Kind::Command => {
                "a command: an array of strings, or a string (split like a shell; in the environment also a JSON array of strings; a gate with shell syntax runs with sh -c)"
            }
            Kind::AgentCommand => {
                "a command: an array of strings, or a string (split like a shell; leading NAME=value words set its environment; no other shell syntax, as the agent never runs in a shell)"
            }
            Kind::Tool => {
                "one of claude, amp, codex, gemini, opencode, cursor-agent, aider, custom"
            }
            Kind::Tools => {
                "an array of agent names, each once, from claude, amp, codex, gemini, opencode, cursor-agent, aider"
            }
            Kind::Format => "one of text, claude, amp, codex, gemini, opencode, cursor",
            Kind::Color => "one of auto, always, never",
            Kind::Progress => "one of auto, plain, bar",
            Kind::Resolve => "one of agent, redo",
            Kind::MaybeTool => {
                "\"\" or one of claude, amp, codex, gemini, opencode, cursor-agent, aider, custom"
            }
            Kind::Sandbox => "one of auto, strict, off",
            Kind::Net => "one of ports, any",
            Kind::Ports => "an array of TCP port numbers (1 to 65535)",
            Kind::Pr => "one of off, run, story",
            Kind::Forge => "one of auto, github, gitlab",
        }
    }
}

pub(crate) fn tool_from(s: &str) -> Option<Tool> {
    <Tool as clap::ValueEnum>::from_str(s, true).ok()
}

pub(super) fn format_from(s: &str) -> Option<Format> {
    Some(match s {
        "text" => Format::Text,
        "claude" => Format::Claude,
        "amp" => Format::Amp,
        "codex" => Format::Codex,
        "gemini" => Format::Gemini,
        "opencode" => Format::Opencode,
        "cursor" | "cursor-agent" => Format::Cursor,
        _ => return None,
    })
}

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A bare number: ralph-claude-code's --timeout counts minutes, so
    /// either unit would be a guess.
    #[error("no unit: write \"{0}m\" for minutes or \"{0}s\" for seconds")]
    NoUnit(String),
    #[error("{text:?} is not a duration ({reason})")]
    NotADuration { text: String, reason: String },
}

/// "30m", "1h 30m", "90s", "0" → a duration.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DurationError::NoUnit(t.to_string()));
    }
    humantime::parse_duration(t)
        .map_err(|e| DurationError::NotADuration { text: t.to_string(), reason: e.to_string() })
}

/// Why a value does not fit its key (the line names the key and where).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// Not of the key's kind; `found` is the value as TOML writes it
    /// (none for an environment variable's text, which the line shows).
    #[error("expected {expected}{}", found.as_ref().map(|f| format!(", found {f}")).unwrap_or_default())]
    Expected { expected: &'static str, found: Option<String> },
    /// A duration without a unit.
    #[error("expected {expected}, found {found}: {source}")]
    Duration { expected: &'static str, found: String, source: DurationError },
    /// An agent command that cannot be split into words.
    #[error(transparent)]
    Words(#[from] crate::agent::words::WordsError),
    #[error("unknown agent {name:?}: expected {expected}")]
    UnknownAgent { name: String, expected: &'static str },
    #[error(
        "custom cannot be a fallback: the custom command (agent.command) is the configured agent's"
    )]
    CustomFallback,
    #[error("{0:?} is listed twice")]
    ListedTwice(String),
}

impl ValueError {
    fn expected(kind: Kind, found: Option<&toml::Value>) -> ValueError {
        ValueError::Expected { expected: kind.expected(), found: found.map(|v| v.to_string()) }
    }
}

/// Checks a TOML value against a key's type.
pub(super) fn check(key: &Key, value: &toml::Value) -> Result<(), ValueError> {
    use toml::Value as V;
    if let (Kind::Duration, V::String(s)) = (key.kind, value)
        && let Err(source @ DurationError::NoUnit(_)) = parse_duration(s)
    {
        let (expected, found) = (key.kind.expected(), value.to_string());
        return Err(ValueError::Duration { expected, found, source });
    }
    let ok = match (key.kind, value) {
        (Kind::Str, V::String(_)) | (Kind::Bool, V::Boolean(_)) => true,
        (Kind::Int, V::Integer(i)) => *i >= 0,
        (Kind::Float, V::Float(f)) => *f >= 0.0 && f.is_finite(),
        (Kind::Float, V::Integer(i)) => *i >= 0,
        (Kind::Duration, V::String(s)) => parse_duration(s).is_ok(),
        (Kind::List, V::Array(a)) => a.iter().all(V::is_str),
        (Kind::Command, V::Array(a)) => a.iter().all(V::is_str),
        (Kind::Command, V::String(s)) => crate::agent::words::split(s).is_ok(),
        (Kind::AgentCommand, V::Array(a)) => a.iter().all(V::is_str),
        (Kind::AgentCommand, V::String(s)) => {
            return crate::agent::words::command(s).map(|_| ()).map_err(ValueError::from);
        }
        (Kind::Tool, V::String(s)) => tool_from(s).is_some(),
        (Kind::Tools, V::Array(a)) => return check_tools(a),
        (Kind::Format, V::String(s)) => format_from(s).is_some(),
        (Kind::Color, V::String(s)) => matches!(s.as_str(), "auto" | "always" | "never"),
        (Kind::Progress, V::String(s)) => matches!(s.as_str(), "auto" | "plain" | "bar"),
        (Kind::Resolve, V::String(s)) => matches!(s.as_str(), "agent" | "redo"),
        (Kind::MaybeTool, V::String(s)) => s.is_empty() || tool_from(s).is_some(),
        (Kind::Sandbox, V::String(s)) => crate::sandbox::Mode::parse(s).is_some(),
        (Kind::Net, V::String(s)) => matches!(s.as_str(), "ports" | "any"),
        (Kind::Ports, V::Array(a)) => {
            a.iter().all(|v| v.as_integer().is_some_and(|p| (1..=65535).contains(&p)))
        }
        (Kind::Pr, V::String(s)) => crate::deliver::PrMode::parse(s).is_some(),
        (Kind::Forge, V::String(s)) => matches!(s.as_str(), "auto" | "github" | "gitlab"),
        _ => false,
    };
    if ok { Ok(()) } else { Err(ValueError::expected(key.kind, Some(value))) }
}

/// A list of fallback agents: known names, each once, no custom command
/// (that is the configured agent's).
fn check_tools(items: &[toml::Value]) -> Result<(), ValueError> {
    let mut seen: Vec<Tool> = Vec::new();
    for item in items {
        let name = item.as_str().ok_or_else(|| ValueError::expected(Kind::Tools, Some(item)))?;
        let tool = tool_from(name).ok_or_else(|| ValueError::UnknownAgent {
            name: name.to_string(),
            expected: Kind::Tools.expected(),
        })?;
        if tool == Tool::Custom {
            return Err(ValueError::CustomFallback);
        }
        if seen.contains(&tool) {
            return Err(ValueError::ListedTwice(name.to_string()));
        }
        seen.push(tool);
    }
    Ok(())
}

/// Parses an environment variable's text as a key's value.
pub(super) fn parse_text(key: &Key, text: &str) -> Result<toml::Value, ValueError> {
    use toml::Value as V;
    let not_kind = || ValueError::expected(key.kind, None);
    let value = match key.kind {
        Kind::Str
        | Kind::Duration
        | Kind::Tool
        | Kind::Format
        | Kind::Color
        | Kind::Progress
        | Kind::Resolve
        | Kind::MaybeTool
        | Kind::Sandbox
        | Kind::Net
        | Kind::Pr
        | Kind::Forge
        | Kind::Command
        | Kind::AgentCommand => V::String(text.into()),
        Kind::Bool => match text.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => V::Boolean(true),
            "0" | "false" | "no" | "off" => V::Boolean(false),
            _ => return Err(not_kind()),
        },
        Kind::Int => V::Integer(text.trim().parse::<i64>().map_err(|_| not_kind())?),
        Kind::Float => V::Float(text.trim().parse::<f64>().map_err(|_| not_kind())?),
        Kind::Ports => V::Array(
            text.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<i64>().map(V::Integer).map_err(|_| not_kind()))
                .collect::<Result<_, _>>()?,
        ),
        // A JSON array of strings, or else items separated by commas.
        Kind::List | Kind::Tools => match crate::agent::words::strings_argv(text) {
            Some(Ok(items)) => V::Array(items.into_iter().map(V::String).collect()),
            Some(Err(e)) => return Err(e.into()),
            None => V::Array(
                text.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| V::String(s.into()))
                    .collect(),
            ),
        },
    };
    check(key, &value)?;
    Ok(value)
}
