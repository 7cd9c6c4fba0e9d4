//! Every key's value and the layer it came from: defaults, the user's and
//! the project's files (trust keys from the run's base), the environment,
//! the flags.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::error::{EVERY_KEY, Spans, at, did_you_mean, syntax_error};
use super::keys::Setting;
use super::kind::{check, parse_text};
use super::{ConfigError, KEYS, Key, Source, decides_trust, env_name};

/// Every key's value and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Layers {
    /// By [`Setting`]: `values[s as usize]`.
    pub(super) values: Vec<(toml::Value, Source)>,
    /// Settings the run branch's project file changes that decide trust,
    /// read from the base instead.
    pub(super) ignored: Vec<Ignored>,
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
        let values = KEYS.iter().map(|k| (default_value(k), Source::Default)).collect();
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
        for &s in Setting::ALL.iter().filter(|s| decides_trust(s.key().key)) {
            let (mine, theirs) = (layers.get(s), plain.get(s));
            if mine != theirs {
                layers.ignored.push(Ignored {
                    key: s.key().key.to_string(),
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
                let Some(setting) = Setting::find(&full) else {
                    let error = ConfigError::new(format!(
                        "{}: unknown key `{full}`",
                        at(path, text, key_at)
                    ));
                    return Err(match did_you_mean(&full) {
                        Some(near) => error.hint(format!("{near} ({EVERY_KEY})")),
                        None => error.hint(EVERY_KEY),
                    });
                };
                let key = setting.key();
                check(key, &value).map_err(|e| {
                    ConfigError::new(format!("{}: `{full}`: {e}", at(path, text, value_at)))
                        .hint(format!("its default reads `{name} = {}`", key.default))
                })?;
                if crate::notify::SECRET_KEYS.contains(&setting)
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
                    self.values[setting as usize] = (value, source.clone());
                }
            }
        }
        Ok(())
    }

    fn env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        for &setting in Setting::ALL {
            let key = setting.key();
            let var = env_name(key.key);
            let Some(text) = env(&var).filter(|t| !t.is_empty()) else { continue };
            let value = parse_text(key, &text).map_err(|e| {
                ConfigError::new(format!("{var}={text:?}: {e}"))
                    .hint(format!("fix {var} in the environment, or unset it"))
            })?;
            self.values[setting as usize] = (value, Source::Env(var));
        }
        Ok(())
    }

    /// Sets a value from a command-line flag (already typed by clap). A
    /// value of the wrong type is an error rather than a flag that silently
    /// does nothing.
    pub(crate) fn flag(
        &mut self,
        setting: Setting,
        value: toml::Value,
        flag: &str,
    ) -> Result<(), ConfigError> {
        check(setting.key(), &value).map_err(|e| ConfigError::new(format!("{flag}: {e}")))?;
        self.values[setting as usize] = (value, Source::Flag(flag.to_string()));
        Ok(())
    }

    /// Each key with its value (as TOML text) and source, in table order.
    pub(crate) fn show(&self) -> Vec<(&'static Key, String, &Source)> {
        KEYS.iter().zip(&self.values).map(|(k, (v, s))| (k, v.to_string(), s)).collect()
    }

    /// Every key's effective value as one TOML document: what a worker
    /// process of a parallel run loads, so it runs with exactly this
    /// configuration whatever its own folder holds.
    pub(crate) fn document(&self) -> String {
        let mut sections: BTreeMap<&str, toml::Table> = BTreeMap::new();
        for (k, (value, _)) in KEYS.iter().zip(&self.values) {
            let (section, name) = k.key.split_once('.').unwrap_or(("run", k.key));
            sections.entry(section).or_default().insert(name.to_string(), value.clone());
        }
        let table: toml::Table =
            sections.into_iter().map(|(s, t)| (s.to_string(), toml::Value::Table(t))).collect();
        toml::to_string(&table).unwrap_or_default()
    }

    /// Sets a value for a parallel run's workers.
    pub(crate) fn set(&mut self, setting: Setting, value: toml::Value) {
        self.values[setting as usize] = (value, Source::Flag("--jobs".into()));
    }

    pub(super) fn get(&self, setting: Setting) -> &toml::Value {
        &self.values[setting as usize].0
    }

    /// Where a setting's value came from.
    pub(super) fn source(&self, setting: Setting) -> &Source {
        &self.values[setting as usize].1
    }
}

/// A key's default, parsed from its TOML text.
pub(super) fn default_value(k: &Key) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {}", k.default))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(String::new()))
}
