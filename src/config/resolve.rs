//! How the layers' values become the typed [`Config`]: each field's Rust
//! type says how it is read ([`FromSetting`]), and the few fields the type
//! alone does not explain are read by the functions below, named in their
//! rows of the settings table (`keys.rs`), which makes
//! [`Layers::resolve`].

use std::path::PathBuf;
use std::time::Duration;

use toml::Value;

use super::keys::Setting;
use super::kind::{Kind, format_from, tool_from};
use super::{Color, Config, Ignored, Layers, Progress, parse_duration};
use crate::agent::Tool;
use crate::agent::words::AgentCommand;
use crate::analyze::Format;
use crate::deliver::PrMode;
use crate::deliver::target::{Forge, ForgeSetting};
use crate::driver::ResolveMode;
use crate::sandbox::{Mode, Net};

/// A Rust type a setting's value is read as. Values are checked when a
/// layer is read (`kind::check`), so reading cannot fail: what no check
/// lets through reads as the type's nothing.
pub(crate) trait FromSetting: Sized {
    /// The kinds of setting (`Kind`) this type is read from; the table
    /// refuses to compile a row whose kind is not among them.
    const KINDS: &'static [Kind];

    fn from_value(value: &Value) -> Self;

    fn read(layers: &Layers, s: Setting) -> Self {
        Self::from_value(layers.value(s, Self::KINDS))
    }
}

impl FromSetting for bool {
    const KINDS: &'static [Kind] = &[Kind::Bool];
    fn from_value(value: &Value) -> bool {
        value.as_bool().unwrap_or(false)
    }
}

impl FromSetting for u64 {
    const KINDS: &'static [Kind] = &[Kind::Int];
    fn from_value(value: &Value) -> u64 {
        value.as_integer().and_then(|i| u64::try_from(i).ok()).unwrap_or(0)
    }
}

/// A count; one too large for a `u32` is as many as there can be.
impl FromSetting for u32 {
    const KINDS: &'static [Kind] = &[Kind::Int];
    fn from_value(value: &Value) -> u32 {
        u32::try_from(u64::from_value(value)).unwrap_or(u32::MAX)
    }
}

impl FromSetting for usize {
    const KINDS: &'static [Kind] = &[Kind::Int];
    fn from_value(value: &Value) -> usize {
        usize::try_from(u64::from_value(value)).unwrap_or(usize::MAX)
    }
}

/// A limit where 0 means none.
impl FromSetting for Option<u64> {
    const KINDS: &'static [Kind] = &[Kind::Int];
    fn from_value(value: &Value) -> Option<u64> {
        Some(u64::from_value(value)).filter(|n| *n > 0)
    }
}

/// A limit where 0 means none.
impl FromSetting for Option<f64> {
    const KINDS: &'static [Kind] = &[Kind::Float];
    fn from_value(value: &Value) -> Option<f64> {
        let n = match value {
            Value::Float(f) => *f,
            Value::Integer(i) => *i as f64,
            _ => 0.0,
        };
        Some(n).filter(|n| *n > 0.0)
    }
}

impl FromSetting for Duration {
    const KINDS: &'static [Kind] = &[Kind::Duration];
    fn from_value(value: &Value) -> Duration {
        parse_duration(value.as_str().unwrap_or("0")).unwrap_or_default()
    }
}

/// A limit where "0" means none.
impl FromSetting for Option<Duration> {
    const KINDS: &'static [Kind] = &[Kind::Duration];
    fn from_value(value: &Value) -> Option<Duration> {
        Some(Duration::from_value(value)).filter(|d| !d.is_zero())
    }
}

impl FromSetting for String {
    const KINDS: &'static [Kind] = &[Kind::Str];
    fn from_value(value: &Value) -> String {
        value.as_str().unwrap_or_default().to_string()
    }
}

/// A string where blank means none given.
impl FromSetting for Option<String> {
    const KINDS: &'static [Kind] = &[Kind::Str];
    fn from_value(value: &Value) -> Option<String> {
        Some(String::from_value(value)).filter(|s| !s.trim().is_empty())
    }
}

impl FromSetting for Option<PathBuf> {
    const KINDS: &'static [Kind] = &[Kind::Str];
    fn from_value(value: &Value) -> Option<PathBuf> {
        Option::<String>::from_value(value).map(PathBuf::from)
    }
}

/// A list, or a command: an array as it is, a string split like a shell
/// splits words.
impl FromSetting for Vec<String> {
    const KINDS: &'static [Kind] = &[Kind::List, Kind::Tools, Kind::Command];
    fn from_value(value: &Value) -> Vec<String> {
        match value {
            Value::String(s) => crate::agent::words::split(s).unwrap_or_default(),
            v => strings(v),
        }
    }
}

impl FromSetting for Vec<u16> {
    const KINDS: &'static [Kind] = &[Kind::Ports];
    fn from_value(value: &Value) -> Vec<u16> {
        match value {
            Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_integer().and_then(|p| u16::try_from(p).ok()))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The agent's command and the environment its text gives it
/// ([`crate::agent::words::command`]).
impl FromSetting for AgentCommand {
    const KINDS: &'static [Kind] = &[Kind::AgentCommand];
    fn from_value(value: &Value) -> AgentCommand {
        match value {
            Value::String(s) => crate::agent::words::command(s).unwrap_or_default(),
            v => AgentCommand { env: Vec::new(), argv: strings(v) },
        }
    }
}

impl FromSetting for Tool {
    const KINDS: &'static [Kind] = &[Kind::Tool];
    fn from_value(value: &Value) -> Tool {
        tool_from(value.as_str().unwrap_or_default()).unwrap_or(Tool::Claude)
    }
}

/// An agent, or "" for none given.
impl FromSetting for Option<Tool> {
    const KINDS: &'static [Kind] = &[Kind::MaybeTool];
    fn from_value(value: &Value) -> Option<Tool> {
        tool_from(value.as_str().unwrap_or_default())
    }
}

impl FromSetting for Vec<Tool> {
    const KINDS: &'static [Kind] = &[Kind::Tools];
    fn from_value(value: &Value) -> Vec<Tool> {
        strings(value).iter().filter_map(|t| tool_from(t)).collect()
    }
}

impl FromSetting for Format {
    const KINDS: &'static [Kind] = &[Kind::Format];
    fn from_value(value: &Value) -> Format {
        format_from(value.as_str().unwrap_or_default()).unwrap_or(Format::Text)
    }
}

impl FromSetting for Mode {
    const KINDS: &'static [Kind] = &[Kind::Sandbox];
    fn from_value(value: &Value) -> Mode {
        Mode::parse(value.as_str().unwrap_or_default()).unwrap_or_default()
    }
}

impl FromSetting for Net {
    const KINDS: &'static [Kind] = &[Kind::Net];
    fn from_value(value: &Value) -> Net {
        if value.as_str() == Some("any") { Net::Any } else { Net::Ports }
    }
}

impl FromSetting for ResolveMode {
    const KINDS: &'static [Kind] = &[Kind::Resolve];
    fn from_value(value: &Value) -> ResolveMode {
        if value.as_str() == Some("redo") { ResolveMode::Redo } else { ResolveMode::Agent }
    }
}

impl FromSetting for PrMode {
    const KINDS: &'static [Kind] = &[Kind::Pr];
    fn from_value(value: &Value) -> PrMode {
        PrMode::parse(value.as_str().unwrap_or_default()).unwrap_or_default()
    }
}

impl FromSetting for ForgeSetting {
    const KINDS: &'static [Kind] = &[Kind::Forge];
    fn from_value(value: &Value) -> ForgeSetting {
        match value.as_str() {
            Some("github") => ForgeSetting::Is(Forge::GitHub),
            Some("gitlab") => ForgeSetting::Is(Forge::GitLab),
            _ => ForgeSetting::Auto,
        }
    }
}

impl FromSetting for Color {
    const KINDS: &'static [Kind] = &[Kind::Color];
    fn from_value(value: &Value) -> Color {
        match value.as_str() {
            Some("always") => Color::Always,
            Some("never") => Color::Never,
            _ => Color::Auto,
        }
    }
}

impl FromSetting for Progress {
    const KINDS: &'static [Kind] = &[Kind::Progress];
    fn from_value(value: &Value) -> Progress {
        match value.as_str() {
            Some("plain") => Progress::Plain,
            Some("bar") => Progress::Bar,
            _ => Progress::Auto,
        }
    }
}

// The readers the settings table names where a field's type alone does
// not say how its value is read.

/// A count of which there is always at least one (`run.jobs`,
/// `merge.attempts`, `merge.batch`).
pub(super) fn at_least_one(layers: &Layers, s: Setting) -> u32 {
    u32::read(layers, s).max(1)
}

/// A gate given as text runs through `sh -c` when it has shell syntax
/// ([`crate::gate::argv`]); an array is its argv.
pub(super) fn gate_argv(layers: &Layers, s: Setting) -> Vec<String> {
    match layers.value(s, &[Kind::Command]) {
        Value::String(s) => crate::gate::argv(s).unwrap_or_default(),
        v => strings(v),
    }
}

/// A string that may not be blank: blank is its default (`deliver.remote`).
pub(super) fn or_default(layers: &Layers, s: Setting) -> String {
    Option::<String>::read(layers, s)
        .unwrap_or_else(|| String::from_value(&super::layers::default_value(s.key())))
}

// The fields that are not one setting's value.

/// Where `gate.command` came from, for the report.
pub(super) fn gate_source(layers: &Layers) -> String {
    layers.source(Setting::GateCommand).to_string()
}

/// The sandbox's mode is set with the agent (`agent.sandbox`), where people
/// look for it; the rest of the sandbox is `[sandbox]`.
pub(super) fn sandbox_mode(layers: &Layers) -> Mode {
    Mode::read(layers, Setting::AgentSandbox)
}

pub(super) fn ignored(layers: &Layers) -> Vec<Ignored> {
    layers.ignored.clone()
}

impl Layers {
    /// A setting's value, read as one of `kinds`: reading a setting as
    /// another type than its row's is a mistake every test that resolves
    /// a configuration catches (and the table does not compile for a
    /// field read by its type).
    fn value(&self, setting: Setting, kinds: &[Kind]) -> &Value {
        debug_assert!(
            kinds.contains(&setting.key().kind),
            "{} is a {:?}, read as one of {kinds:?}",
            setting.key().key,
            setting.key().kind
        );
        self.get(setting)
    }
}

/// The strings of an array value.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(a) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

impl Default for Config {
    fn default() -> Config {
        Layers::defaults().resolve()
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "agent.tool is a Tool, read as one of [Duration]")]
    fn reading_a_setting_as_another_type_is_caught() {
        Duration::read(&Layers::defaults(), Setting::AgentTool);
    }
}
