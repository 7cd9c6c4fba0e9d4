//! Settings, resolved in layers: built-in defaults < `~/.config/ralph/config.toml`
//! < `.ralph/config.toml` < `RALPH_*` environment < command-line flags.
//!
//! Every setting is one row of the settings table (`settings!` in
//! `config/keys.rs`): its TOML key, type, default, help, the field of the
//! typed [`Config`] it becomes and the command-line flag that sets it (if
//! any), which makes its [`KEYS`] row, its `keys::Setting`, its field, its
//! line of [`Layers::resolve`] and the flag. The same table drives
//! validation, `ralph config show` (each value with the layer it came
//! from), the commented `config.toml` that `ralph init` writes, the
//! environment variable names, and which flag lands on which key. Unknown
//! keys and values of the wrong type are errors that name the file (or
//! flag) and the key.
//!
//! The module is split by concern: `keys.rs` the table, `kind.rs` each
//! kind of value's checks and parsing, `error.rs` the errors that say where
//! a bad value is, `layers.rs` reading the layers, `resolve.rs` how a value
//! is read as its field's Rust type, `types.rs` the enums of `[ui]`.

use std::fmt;
use std::path::PathBuf;

mod error;
pub(crate) mod keys;
pub(crate) mod kind;
mod layers;
mod resolve;
mod types;

pub use error::ConfigError;
pub use keys::Config;
pub(crate) use keys::{AgentConfig, KEYS, Key, decides_trust, env_name};
pub(crate) use kind::{DurationError, parse_duration};
pub use layers::Ignored;
pub(crate) use layers::Layers;
pub use types::{Color, Progress};

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

#[cfg(test)]
mod tests;
