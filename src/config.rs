//! Settings, resolved in layers: built-in defaults < `~/.config/ralph/config.toml`
//! < `.ralph/config.toml` < `RALPH_*` environment < command-line flags.
//!
//! Every setting is one row of [`KEYS`] (in `config/keys.rs`): its TOML
//! key, type, default, the command-line flag that sets it (if any) and
//! help. The same table drives validation, `ralph config show` (each value
//! with the layer it came from), the commented `config.toml` that `ralph
//! init` writes, the environment variable names, and which flag lands on
//! which key. Unknown keys and values of the wrong type are errors that
//! name the file (or flag) and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::Tool;
use crate::analyze::Format;

pub(crate) mod keys;

pub(crate) use keys::{KEYS, Key, decides_trust, env_name, parse_duration};
use keys::{check, find, format_from, parse_text, tool_from};

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Source {
    Default,
    User(PathBuf),
    Project(PathBuf),
    /// The project file as committed on the run's base branch (`oracle::base`).
    Base {
        path: PathBuf,
        branch: String,
    },
    Env(String),
    Flag(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::User(p) | Source::Project(p) => write!(f, "{}", p.display()),
            Source::Base { path, branch } => write!(f, "{} at {branch}", path.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    Auto,
    Always,
    Never,
}

impl Color {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Color::Auto => "auto",
            Color::Always => "always",
            Color::Never => "never",
        }
    }
}

/// How a run shows its progress (`ui.progress`, `--progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Progress {
    // Plain comments, not doc comments: clap would turn those into a long
    // "Possible values" list in every command's help.
    // The live display on an interactive terminal, plain lines elsewhere.
    Auto,
    // Timestamped lines, even on a terminal.
    Plain,
    // The live display whenever stdout is a terminal, even on CI.
    Bar,
}

impl Progress {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Progress::Auto => "auto",
            Progress::Plain => "plain",
            Progress::Bar => "bar",
        }
    }
}

/// A configuration error, naming where the bad value came from (the file
/// with line and column, the variable, the flag) and the key, with a hint
/// when there is something better to say than the message. A hint never
/// points at a command that would fail with the same error.
#[derive(Debug)]
pub struct ConfigError {
    message: String,
    hint: Option<String>,
}

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>) -> ConfigError {
        ConfigError { message: message.into(), hint: None }
    }

    fn hint(mut self, hint: impl Into<String>) -> ConfigError {
        self.hint = Some(hint.into());
        self
    }

    pub(crate) fn hint_text(&self) -> Option<&str> {
        self.hint.as_deref()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl From<crate::analyze::PatternError> for ConfigError {
    fn from(e: crate::analyze::PatternError) -> ConfigError {
        ConfigError::new(format!("patterns.{}: {e}: {}", e.kind, e.source))
    }
}

/// What lists every key without reading the config files, so it works
/// while one of them is broken.
const EVERY_KEY: &str = "`ralph config show --no-config` lists every key with its default";

/// `path:line:column` of byte `offset` in `text` (both counted from 1).
fn at(path: &Path, text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
    format!("{}:{line}:{column}", path.display())
}

/// The line of `text` that holds byte `offset`, trimmed.
fn line_at(text: &str, offset: usize) -> &str {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    text[start..end].trim()
}

/// The `[section]` a byte offset of a TOML text falls in: the last table
/// header before it.
fn section_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    text[..start].lines().rev().map(str::trim).find_map(|l| {
        let name = l.strip_prefix('[')?.split(']').next()?.trim();
        Some(name.trim_matches(['[', '"', '\'']).to_string())
    })
}

/// A TOML syntax error, at its line and column, with the key for a
/// duplicate one.
fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let offset = e.span().map_or(0, |s| s.start);
    let line = line_at(text, offset);
    if e.message() == "duplicate key"
        && let Some(span) = e.span()
    {
        let name = text[span].trim().trim_matches(['"', '\'']);
        if line.starts_with('[') {
            return ConfigError::new(format!(
                "{}: invalid TOML: the table [{name}] appears twice",
                at(path, text, offset)
            ))
            .hint(format!("merge the two [{name}] tables into one"));
        }
        let key = match section_at(text, offset) {
            Some(section) => format!("{section}.{name}"),
            None => name.to_string(),
        };
        return ConfigError::new(format!(
            "{}: invalid TOML: duplicate key `{key}`",
            at(path, text, offset)
        ))
        .hint(format!("`{key}` is set twice; keep one (this one reads `{line}`)"));
    }
    ConfigError::new(format!("{}: invalid TOML: {}", at(path, text, offset), e.message()))
        .hint(format!("the line reads `{line}`; {EVERY_KEY}"))
}

/// Where each key and value of a parsed file is, by `section.name`.
struct Spans(Vec<(String, usize, usize)>);

impl Spans {
    fn new(text: &str) -> Spans {
        let mut out = Vec::new();
        if let Ok(doc) = toml::de::DeTable::parse(text) {
            for (section, value) in doc.get_ref().iter() {
                let section_name = section.get_ref().to_string();
                out.push((section_name.clone(), section.span().start, value.span().start));
                if let toml::de::DeValue::Table(items) = value.get_ref() {
                    for (name, value) in items.iter() {
                        out.push((
                            format!("{section_name}.{}", name.get_ref()),
                            name.span().start,
                            value.span().start,
                        ));
                    }
                }
            }
        }
        Spans(out)
    }

    /// Where `key` is written, and where its value is.
    fn of(&self, key: &str) -> (usize, usize) {
        self.0.iter().find(|(k, _, _)| k == key).map_or((0, 0), |(_, k, v)| (*k, *v))
    }
}

/// "did you mean …?" for a key ralph does not have: a close spelling of a
/// key, else keys of that name in other sections.
fn did_you_mean(full: &str) -> Option<String> {
    if let Some(near) = crate::text::closest(full, KEYS.iter().map(|k| k.key)) {
        return Some(format!("did you mean `{near}`?"));
    }
    let name = full.rsplit('.').next().unwrap_or(full);
    let same: Vec<String> = KEYS
        .iter()
        .filter(|k| k.key.rsplit('.').next() == Some(name))
        .map(|k| format!("`{}`", k.key))
        .collect();
    match same.len() {
        0 => None,
        1 => Some(format!("did you mean {}?", same[0])),
        _ => Some(format!("did you mean one of {}?", same.join(", "))),
    }
}

/// Every key's value and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Layers {
    values: BTreeMap<&'static str, (toml::Value, Source)>,
    /// Settings the run branch's project file changes that decide trust,
    /// read from the base instead.
    ignored: Vec<Ignored>,
}

/// A setting that decides trust which the run branch's project file sets
/// differently from its base: the base's value is used.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Ignored {
    pub key: String,
    /// The run branch.
    pub branch: String,
    /// The branch it was cut from.
    pub base: String,
    /// The value on the run branch, and the one used (TOML text).
    pub branch_value: String,
    pub base_value: String,
}

impl fmt::Display for Ignored {
    /// "ralph/x changes gate.command to "true" (main has "test -f x"): ignored".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} changes {} to {} ({} has {}): ignored; run `ralph trust` to accept it",
            self.branch,
            self.key,
            crate::text::clip(&self.branch_value, 80),
            self.base,
            crate::text::clip(&self.base_value, 80)
        )
    }
}

impl Layers {
    /// Only the built-in defaults.
    pub(crate) fn defaults() -> Layers {
        let values = KEYS
            .iter()
            .map(|k| {
                let v: toml::Value = toml::from_str::<toml::Table>(&format!("v = {}", k.default))
                    .ok()
                    .and_then(|mut t| t.remove("v"))
                    .unwrap_or_else(|| toml::Value::String(String::new()));
                (k.key, (v, Source::Default))
            })
            .collect();
        Layers { values, ignored: Vec::new() }
    }

    /// Loads the user and project files and the environment on top of the defaults.
    /// `env` is passed in so tests can give a fixed environment.
    pub(crate) fn load(
        user_file: Option<&Path>,
        project_file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Layers, ConfigError> {
        let mut layers = Layers::defaults();
        if let Some(user) = user_file {
            layers.file(user, Source::User(user.to_path_buf()))?;
        }
        layers.file(project_file, Source::Project(project_file.to_path_buf()))?;
        layers.env(env)?;
        Ok(layers)
    }

    /// [`Layers::load`], with the settings that decide trust read from
    /// `base` (the project file as committed on the run's base) instead of
    /// the project file; each one the project file sets differently is
    /// kept in [`Layers::ignored`].
    pub(crate) fn load_with_base(
        user_file: Option<&Path>,
        project_file: &Path,
        base: Option<&crate::oracle::base::BaseConfig>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Layers, ConfigError> {
        let Some(base) = base else { return Layers::load(user_file, project_file, env) };
        let mut layers = Layers::defaults();
        if let Some(user) = user_file {
            layers.file(user, Source::User(user.to_path_buf()))?;
        }
        let mut plain = layers.clone();
        plain.file(project_file, Source::Project(project_file.to_path_buf()))?;
        layers.file_keys(project_file, Source::Project(project_file.to_path_buf()), &|k| {
            !decides_trust(k)
        })?;
        let source = Source::Base { path: base.path.clone(), branch: base.base.clone() };
        let shown = PathBuf::from(format!("{} at {}", base.path.display(), base.base));
        layers.text_keys(&shown, &base.text, source, &decides_trust)?;
        for k in KEYS.iter().filter(|k| decides_trust(k.key)) {
            let (mine, theirs) = (layers.get(k.key), plain.get(k.key));
            if mine != theirs {
                layers.ignored.push(Ignored {
                    key: k.key.to_string(),
                    branch: base.branch.clone(),
                    base: base.base.clone(),
                    branch_value: theirs.to_string(),
                    base_value: mine.to_string(),
                });
            }
        }
        layers.env(env)?;
        Ok(layers)
    }

    fn file(&mut self, path: &Path, source: Source) -> Result<(), ConfigError> {
        self.file_keys(path, source, &|_| true)
    }

    fn file_keys(
        &mut self,
        path: &Path,
        source: Source,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<(), ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(ConfigError::new(format!("cannot read {}: {e}", path.display()))),
        };
        self.text_keys(path, &text, source, keep)
    }

    /// Checks `text` as the project file at `path` would be read: what
    /// `ralph import` proves before it writes one.
    pub(crate) fn check_project_text(path: &Path, text: &str) -> Result<(), ConfigError> {
        Layers::defaults().text(path, text, Source::Project(path.to_path_buf()))
    }

    fn text(&mut self, path: &Path, text: &str, source: Source) -> Result<(), ConfigError> {
        self.text_keys(path, text, source, &|_| true)
    }

    /// Reads `text` as a config file and sets the keys `keep` accepts.
    fn text_keys(
        &mut self,
        path: &Path,
        text: &str,
        source: Source,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<(), ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(path, text, &e))?;
        let spans = Spans::new(text);
        for (section, value) in table {
            let toml::Value::Table(items) = value else {
                let here = at(path, text, spans.of(&section).0);
                let error = ConfigError::new(format!(
                    "{here}: unknown key `{section}`: settings live in sections such as [agent] and [gate]"
                ));
                return Err(match did_you_mean(&format!(".{section}")) {
                    Some(near) => error.hint(format!("{near} (write it under its [section])")),
                    None => error.hint(EVERY_KEY),
                });
            };
            for (name, value) in items {
                let full = format!("{section}.{name}");
                let (key_at, value_at) = spans.of(&full);
                let Some(key) = find(&full) else {
                    let error = ConfigError::new(format!(
                        "{}: unknown key `{full}`",
                        at(path, text, key_at)
                    ));
                    return Err(match did_you_mean(&full) {
                        Some(near) => error.hint(format!("{near} ({EVERY_KEY})")),
                        None => error.hint(EVERY_KEY),
                    });
                };
                check(key, &value).map_err(|e| {
                    ConfigError::new(format!("{}: `{full}`: {e}", at(path, text, value_at)))
                        .hint(format!("its default reads `{name} = {}`", key.default))
                })?;
                if crate::notify::SECRET_KEYS.contains(&key.key)
                    && let Some(url) = value.as_str().filter(|v| crate::notify::is_url(v))
                {
                    return Err(ConfigError::new(format!(
                        "{}: `{full}` is a URL ({}…); a notification URL carries its token and stays out of files",
                        at(path, text, value_at),
                        &url[..url.find("://").map_or(0, |i| i + 3)]
                    ))
                    .hint(format!(
                        "set it in the environment ({}), or write `{name} = \"env:VARIABLE\"` to name the variable that holds it",
                        env_name(key.key)
                    )));
                }
                if keep(key.key) {
                    self.values.insert(key.key, (value, source.clone()));
                }
            }
        }
        Ok(())
    }

    fn env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        for key in KEYS {
            let var = env_name(key.key);
            let Some(text) = env(&var).filter(|t| !t.is_empty()) else { continue };
            let value = parse_text(key, &text).map_err(|e| {
                ConfigError::new(format!("{var}={text:?}: {e}"))
                    .hint(format!("fix {var} in the environment, or unset it"))
            })?;
            self.values.insert(key.key, (value, Source::Env(var)));
        }
        Ok(())
    }

    /// Sets a value from a command-line flag (already typed by clap). A key
    /// that is not in [`KEYS`], or a value of the wrong type, is an error
    /// rather than a flag that silently does nothing.
    pub(crate) fn flag(
        &mut self,
        key: &str,
        value: toml::Value,
        flag: &str,
    ) -> Result<(), ConfigError> {
        let k =
            find(key).ok_or_else(|| ConfigError::new(format!("{flag}: unknown key `{key}`")))?;
        check(k, &value).map_err(|e| ConfigError::new(format!("{flag}: {e}")))?;
        self.values.insert(k.key, (value, Source::Flag(flag.to_string())));
        Ok(())
    }

    /// Each key with its value (as TOML text) and source, in table order.
    pub(crate) fn show(&self) -> Vec<(&'static Key, String, &Source)> {
        KEYS.iter()
            .map(|k| {
                let (v, s) = &self.values[k.key];
                (k, v.to_string(), s)
            })
            .collect()
    }

    /// Every key's effective value as one TOML document: what a worker
    /// process of a parallel run loads, so it runs with exactly this
    /// configuration whatever its own folder holds.
    pub(crate) fn document(&self) -> String {
        let mut sections: BTreeMap<&str, toml::Table> = BTreeMap::new();
        for k in KEYS {
            let (section, name) = k.key.split_once('.').unwrap_or(("run", k.key));
            sections.entry(section).or_default().insert(name.to_string(), self.get(k.key).clone());
        }
        let table: toml::Table =
            sections.into_iter().map(|(s, t)| (s.to_string(), toml::Value::Table(t))).collect();
        toml::to_string(&table).unwrap_or_default()
    }

    /// Sets a value for a parallel run's workers (a key of [`KEYS`]).
    pub(crate) fn set(&mut self, key: &'static str, value: toml::Value) {
        self.values.insert(key, (value, Source::Flag("--jobs".into())));
    }

    fn get(&self, key: &str) -> &toml::Value {
        &self.values[key].0
    }

    fn str(&self, key: &str) -> String {
        self.get(key).as_str().unwrap_or_default().to_string()
    }

    fn opt_str(&self, key: &str) -> Option<String> {
        Some(self.str(key)).filter(|s| !s.trim().is_empty())
    }

    fn bool(&self, key: &str) -> bool {
        self.get(key).as_bool().unwrap_or(false)
    }

    fn int(&self, key: &str) -> u64 {
        self.get(key).as_integer().and_then(|i| u64::try_from(i).ok()).unwrap_or(0)
    }

    fn float(&self, key: &str) -> f64 {
        match self.get(key) {
            toml::Value::Float(f) => *f,
            toml::Value::Integer(i) => *i as f64,
            _ => 0.0,
        }
    }

    fn duration(&self, key: &str) -> Duration {
        parse_duration(self.get(key).as_str().unwrap_or("0")).unwrap_or_default()
    }

    fn list(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            toml::Value::Array(a) => {
                a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The agent's command and the environment its text gives it
    /// ([`crate::agent::words::agent_command`]).
    fn agent_command(&self, key: &str) -> crate::agent::words::AgentCommand {
        match self.get(key) {
            toml::Value::String(s) => crate::agent::words::agent_command(s).unwrap_or_default(),
            _ => crate::agent::words::AgentCommand { env: Vec::new(), argv: self.list(key) },
        }
    }

    fn command(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            toml::Value::String(s) => crate::agent::words::split(s).unwrap_or_default(),
            _ => self.list(key),
        }
    }

    /// A gate given as text runs through `sh -c` when it has shell syntax
    /// ([`crate::gate::argv`]); an array is its argv.
    fn gate_command(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            toml::Value::String(s) => crate::gate::argv(s).unwrap_or_default(),
            _ => self.list(key),
        }
    }

    /// The typed configuration.
    pub(crate) fn resolve(&self) -> Config {
        let tool = tool_from(&self.str("agent.tool")).unwrap_or(Tool::Claude);
        let nonzero = |d: Duration| (!d.is_zero()).then_some(d);
        Config {
            agent: AgentConfig {
                tool,
                fallback: self.list("agent.fallback").iter().filter_map(|t| tool_from(t)).collect(),
                command: self.agent_command("agent.command"),
                format: format_from(&self.str("agent.format")).unwrap_or(Format::Text),
                model: self.opt_str("agent.model"),
                args: self.list("agent.args"),
                safe: self.bool("agent.safe"),
                allowed_tools: self.list("agent.allowed_tools"),
                timeout: self.duration("agent.timeout"),
                idle_timeout: nonzero(self.duration("agent.idle_timeout")),
                grace: self.duration("agent.grace"),
            },
            sandbox: crate::sandbox::Settings {
                mode: crate::sandbox::Mode::parse(&self.str("agent.sandbox")).unwrap_or_default(),
                read: self.list("sandbox.read"),
                write: self.list("sandbox.write"),
                net: if self.str("sandbox.net") == "any" {
                    crate::sandbox::Net::Any
                } else {
                    crate::sandbox::Net::Ports
                },
                ports: match self.get("sandbox.ports") {
                    toml::Value::Array(a) => a
                        .iter()
                        .filter_map(|v| v.as_integer().and_then(|p| u16::try_from(p).ok()))
                        .collect(),
                    _ => Vec::new(),
                },
            },
            run: RunConfig {
                max_iterations: u32::try_from(self.int("run.max_iterations")).unwrap_or(u32::MAX),
                jobs: u32::try_from(self.int("run.jobs")).unwrap_or(1).max(1),
                pause: self.duration("run.pause"),
                prompt: self.opt_str("run.prompt").map(PathBuf::from),
                context: self.list("run.context"),
                require_handoff: self.bool("run.require_handoff"),
                commit_leftovers: self.bool("run.commit_leftovers"),
                allow_dirty: self.bool("run.allow_dirty"),
            },
            gate: GateConfig {
                command: self.gate_command("gate.command"),
                timeout: self.duration("gate.timeout"),
                tail_bytes: usize::try_from(self.int("gate.tail_bytes")).unwrap_or(4096),
                fatal_signatures: self.list("gate.fatal_signatures"),
                baseline: self.bool("gate.baseline"),
                require_red: self.bool("gate.require_red"),
                protect: self.list("gate.protect"),
                source: self.values["gate.command"].1.to_string(),
            },
            ignored: self.ignored.clone(),
            circuit: CircuitConfig {
                no_progress: self.int("circuit.no_progress") as u32,
                same_error: self.int("circuit.same_error") as u32,
                permission_denials: self.int("circuit.permission_denials") as u32,
                failures: self.int("circuit.failures") as u32,
                cooldown: self.duration("circuit.cooldown"),
                auto_reset: self.bool("circuit.auto_reset"),
            },
            limits: LimitsConfig {
                calls_per_hour: self.int("limits.calls_per_hour") as u32,
                wait: self.bool("limits.wait"),
                max_wait: self.duration("limits.max_wait"),
                usage_limit_wait: self.duration("limits.usage_limit_wait"),
                fallback_after: self.duration("limits.fallback_after"),
            },
            merge: MergeConfig {
                resolve: if self.str("merge.resolve") == "redo" {
                    crate::driver::ResolveMode::Redo
                } else {
                    crate::driver::ResolveMode::Agent
                },
                resolver: tool_from(&self.str("merge.resolver")),
                attempts: u32::try_from(self.int("merge.attempts")).unwrap_or(3).max(1),
                batch: u32::try_from(self.int("merge.batch")).unwrap_or(1).max(1),
            },
            worker: WorkerConfig {
                remote: self.opt_str("worker.remote"),
                lease: self.duration("worker.lease"),
                id: self.opt_str("worker.id"),
            },
            budget: BudgetConfig {
                max_duration: nonzero(self.duration("budget.max_duration")),
                max_cost: Some(self.float("budget.max_cost")).filter(|c| *c > 0.0),
                max_tokens: Some(self.int("budget.max_tokens")).filter(|t| *t > 0),
            },
            patterns: crate::analyze::PatternTexts {
                usage_limit: self.list("patterns.usage_limit"),
                billing: self.list("patterns.billing"),
                auth: self.list("patterns.auth"),
                rate_limit: self.list("patterns.rate_limit"),
                overload: self.list("patterns.overload"),
                unreachable: self.list("patterns.unreachable"),
            },
            hooks: HooksConfig {
                on_iteration_end: self.command("hooks.on_iteration_end"),
                on_complete: self.command("hooks.on_complete"),
                on_halt: self.command("hooks.on_halt"),
            },
            cost: CostConfig { prices: self.list("cost.prices") },
            logs: LogsConfig {
                keep_runs: self.int("logs.keep_runs"),
                keep_bytes: self.int("logs.keep_bytes"),
                max_file_bytes: self.int("logs.max_file_bytes"),
            },
            notify: crate::notify::NotifyConfig {
                webhook: self.opt_str("notify.webhook"),
                slack: self.opt_str("notify.slack"),
                ntfy: self.opt_str("notify.ntfy"),
                desktop: self.bool("notify.desktop"),
                events: self.list("notify.events"),
                webhook_events: self.list("notify.webhook_events"),
                slack_events: self.list("notify.slack_events"),
                ntfy_events: self.list("notify.ntfy_events"),
                desktop_events: self.list("notify.desktop_events"),
                wait_longer_than: self.duration("notify.wait_longer_than"),
                timeout: self.duration("notify.timeout"),
            },
            deliver: crate::deliver::DeliverConfig {
                pr: crate::deliver::PrMode::parse(&self.str("deliver.pr")).unwrap_or_default(),
                forge: match self.str("deliver.forge").as_str() {
                    "github" => crate::deliver::target::ForgeSetting::Is(
                        crate::deliver::target::Forge::GitHub,
                    ),
                    "gitlab" => crate::deliver::target::ForgeSetting::Is(
                        crate::deliver::target::Forge::GitLab,
                    ),
                    _ => crate::deliver::target::ForgeSetting::Auto,
                },
                repo: self.opt_str("deliver.repo"),
                remote: self.opt_str("deliver.remote").unwrap_or_else(|| "origin".into()),
                base: self.opt_str("deliver.base"),
                draft: self.bool("deliver.draft"),
                stack: self.bool("deliver.stack"),
                api: self.opt_str("deliver.api"),
                timeout: self.duration("deliver.timeout"),
                reopen_on_close: self.bool("deliver.reopen_on_close"),
            },
            color: match self.str("ui.color").as_str() {
                "always" => Color::Always,
                "never" => Color::Never,
                _ => Color::Auto,
            },
            progress: match self.str("ui.progress").as_str() {
                "plain" => Progress::Plain,
                "bar" => Progress::Bar,
                _ => Progress::Auto,
            },
        }
    }
}

/// The commented `config.toml` that `ralph init` writes: every key at its default.
pub(crate) fn template() -> String {
    let mut out = String::from(
        "# ralph configuration. Every setting is shown at its default, commented out.\n\
         # Precedence: defaults < ~/.config/ralph/config.toml < this file < RALPH_* env < flags.\n\
         # `ralph config show` prints each effective value and where it came from.\n",
    );
    let mut section = "";
    for k in KEYS {
        let (sec, name) = k.key.split_once('.').unwrap_or(("", k.key));
        if sec != section {
            out.push_str(&format!("\n[{sec}]\n"));
            section = sec;
        }
        let flag = match k.flag {
            Some(f) if f.starts_with('-') => format!(", flag {f}"),
            Some(f) => format!(", argument {f}"),
            None => String::new(),
        };
        out.push_str(&format!(
            "# {}\n# (env {}{flag})\n# {name} = {}\n",
            k.help,
            env_name(k.key),
            k.default
        ));
    }
    out
}

/// The user's config file: `$XDG_CONFIG_HOME/ralph/config.toml` or `~/.config/ralph/config.toml`.
pub(crate) fn user_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(x) = env("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("ralph/config.toml"));
    }
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".config/ralph/config.toml"))
}

#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) agent: AgentConfig,
    /// `agent.sandbox` and `sandbox.*`: what agents, the gate and hooks may touch.
    pub(crate) sandbox: crate::sandbox::Settings,
    pub(crate) run: RunConfig,
    pub(crate) gate: GateConfig,
    pub(crate) circuit: CircuitConfig,
    pub(crate) limits: LimitsConfig,
    pub(crate) budget: BudgetConfig,
    /// How a parallel run's merge queue treats conflicts.
    pub(crate) merge: MergeConfig,
    /// `ralph worker --remote`'s settings.
    pub(crate) worker: WorkerConfig,
    pub(crate) patterns: crate::analyze::PatternTexts,
    pub(crate) hooks: HooksConfig,
    pub(crate) cost: CostConfig,
    pub(crate) logs: LogsConfig,
    pub(crate) notify: crate::notify::NotifyConfig,
    /// `deliver.*`: pull requests for the run's work.
    pub(crate) deliver: crate::deliver::DeliverConfig,
    pub(crate) color: Color,
    pub(crate) progress: Progress,
    /// Settings of the run branch's project file read from its base instead.
    pub(crate) ignored: Vec<Ignored>,
}

#[derive(Debug, Clone)]
pub(crate) struct AgentConfig {
    pub(crate) tool: Tool,
    /// Agents to go on with when `tool` meets a long usage limit, in order.
    pub(crate) fallback: Vec<Tool>,
    /// `agent.command`: the program and its arguments, and the environment
    /// its leading `NAME=value` words give the agent.
    pub(crate) command: crate::agent::words::AgentCommand,
    pub(crate) format: Format,
    pub(crate) model: Option<String>,
    pub(crate) args: Vec<String>,
    pub(crate) safe: bool,
    pub(crate) allowed_tools: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) grace: Duration,
}

#[derive(Debug, Clone)]
pub(crate) struct RunConfig {
    pub(crate) max_iterations: u32,
    /// Stories worked at once (1: the single loop).
    pub(crate) jobs: u32,
    pub(crate) pause: Duration,
    pub(crate) prompt: Option<PathBuf>,
    /// Files the prompt points the agent to (relative to the project).
    pub(crate) context: Vec<String>,
    pub(crate) require_handoff: bool,
    pub(crate) commit_leftovers: bool,
    /// A new run may start with tracked files changed (`--allow-dirty`).
    pub(crate) allow_dirty: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct GateConfig {
    pub(crate) command: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) tail_bytes: usize,
    pub(crate) fatal_signatures: Vec<String>,
    pub(crate) baseline: bool,
    /// `gate.require_red`: a story's own check must fail on the base first.
    pub(crate) require_red: bool,
    /// `gate.protect`: globs the agent may not change, besides the built-in ones.
    pub(crate) protect: Vec<String>,
    /// Where `gate.command` came from ("default", ".ralph/config.toml at
    /// main", "flag --gate"), for the report.
    pub(crate) source: String,
}

#[derive(Debug, Clone)]
pub(crate) struct CircuitConfig {
    pub(crate) no_progress: u32,
    pub(crate) same_error: u32,
    pub(crate) permission_denials: u32,
    pub(crate) failures: u32,
    pub(crate) cooldown: Duration,
    pub(crate) auto_reset: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct LimitsConfig {
    pub(crate) calls_per_hour: u32,
    pub(crate) wait: bool,
    pub(crate) max_wait: Duration,
    pub(crate) usage_limit_wait: Duration,
    /// A usage limit resetting sooner than this is waited out, not handed
    /// to a fallback agent.
    pub(crate) fallback_after: Duration,
}

#[derive(Debug, Clone)]
pub(crate) struct BudgetConfig {
    pub(crate) max_duration: Option<Duration>,
    pub(crate) max_cost: Option<f64>,
    pub(crate) max_tokens: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct MergeConfig {
    /// `merge.resolve`: a conflict of fresh work gets a resolver agent, or a redo.
    pub(crate) resolve: crate::driver::ResolveMode,
    /// `merge.resolver`: the agent that resolves (`None`: the story's).
    pub(crate) resolver: Option<Tool>,
    /// Failed merge attempts before a story is given up.
    pub(crate) attempts: u32,
    /// Stories merged together and gated once.
    pub(crate) batch: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct WorkerConfig {
    pub(crate) remote: Option<String>,
    pub(crate) lease: Duration,
    pub(crate) id: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct HooksConfig {
    pub(crate) on_iteration_end: Vec<String>,
    pub(crate) on_complete: Vec<String>,
    pub(crate) on_halt: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct CostConfig {
    /// `MODEL=IN/OUT` entries (see `history::cost`).
    pub(crate) prices: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct LogsConfig {
    /// 0: no limit.
    pub(crate) keep_runs: u64,
    /// 0: no limit.
    pub(crate) keep_bytes: u64,
    /// `logs.max_file_bytes`: one agent or gate log's cap (0: none).
    pub(crate) max_file_bytes: u64,
}

impl Default for Config {
    fn default() -> Config {
        Layers::defaults().resolve()
    }
}

#[cfg(test)]
mod tests;
