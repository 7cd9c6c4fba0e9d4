//! Configuration errors that name where the bad value is: the file with
//! its line and column, the key, and what would have been right.

use std::fmt;
use std::path::Path;

use super::KEYS;

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

    pub(super) fn hint(mut self, hint: impl Into<String>) -> ConfigError {
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
pub(super) const EVERY_KEY: &str =
    "`ralph config show --no-config` lists every key with its default";

/// `path:line:column` of byte `offset` in `text` (both counted from 1).
pub(super) fn at(path: &Path, text: &str, offset: usize) -> String {
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
pub(super) fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
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
pub(super) struct Spans(Vec<(String, usize, usize)>);

impl Spans {
    pub(super) fn new(text: &str) -> Spans {
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
    pub(super) fn of(&self, key: &str) -> (usize, usize) {
        self.0.iter().find(|(k, _, _)| k == key).map_or((0, 0), |(_, k, v)| (*k, *v))
    }
}

/// "did you mean …?" for a key ralph does not have: a close spelling of a
/// key, else keys of that name in other sections.
pub(super) fn did_you_mean(full: &str) -> Option<String> {
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
