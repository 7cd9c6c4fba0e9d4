//! Imported settings written into `.ralph/config.toml` as text: pure.
//!
//! The file is the user's (or `ralph init`'s commented template), so it is
//! edited line by line, never re-serialised: a new key goes under its
//! `[section]` header with a comment saying where it came from, a key
//! already set to another value is a conflict that only `--force`
//! replaces, and the result is parsed back to prove each key now reads as
//! wanted. What cannot be edited that way is refused, not mangled.

use toml::Value;

/// A setting to write, and where it came from (`.ralphrc MAX_CALLS_PER_HOUR`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Want {
    pub(crate) key: &'static str,
    pub(crate) value: Value,
    pub(crate) from: String,
}

/// The file after the edit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Edit {
    /// The new text, `None` when nothing changes.
    pub(crate) text: Option<String>,
    /// Keys the file already sets to these values.
    pub(crate) already: Vec<&'static str>,
    /// Keys the file sets otherwise: (key, its value there). Replaced only with `force`.
    pub(crate) conflicts: Vec<(&'static str, String)>,
}

/// Why the settings cannot be written into the file safely (the import
/// then says to set them by hand).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EditError {
    #[error("it is not valid TOML: {}", .0.message())]
    NotToml(#[source] toml::de::Error),
    /// Set, but not on a line ralph can find (a dotted key, an inline table).
    #[error("cannot find the line of `{0}` to replace")]
    NoLine(&'static str),
    #[error("the edited file would not parse ({})", .0.message())]
    WouldNotParse(#[source] toml::de::Error),
    #[error("`{key}` would not read back as {value}")]
    WouldNotReadBack { key: &'static str, value: Value },
}

const HEADER: &str = "# ralph configuration (`ralph config show` lists every setting).\n";

fn value_in<'a>(table: &'a toml::Table, key: &str) -> Option<&'a Value> {
    let (section, name) = key.split_once('.')?;
    table.get(section)?.as_table()?.get(name)
}

/// Edits `existing` (`None`: no file yet) to set `wants`, each new key
/// under a comment saying it was imported from its source.
pub(crate) fn edit(existing: Option<&str>, wants: &[Want], force: bool) -> Result<Edit, EditError> {
    edit_noted(existing, wants, force, &|w| format!("# imported from {}", w.from))
}

/// [`edit`], each new key under the comment `note` gives it.
pub(crate) fn edit_noted(
    existing: Option<&str>,
    wants: &[Want],
    force: bool,
    note: &dyn Fn(&Want) -> String,
) -> Result<Edit, EditError> {
    let table: toml::Table = match existing {
        Some(t) => toml::from_str(t).map_err(EditError::NotToml)?,
        None => toml::Table::new(),
    };
    let mut lines: Vec<String> = match existing {
        Some(t) => t.lines().map(str::to_string).collect(),
        None => HEADER.lines().map(str::to_string).collect(),
    };
    let mut out = Edit { text: None, already: Vec::new(), conflicts: Vec::new() };
    let mut changed = false;
    for w in wants {
        let (section, name) = w.key.split_once('.').expect("keys are section.name");
        let assignment = format!("{name} = {}", w.value);
        match value_in(&table, w.key) {
            Some(v) if *v == w.value => out.already.push(w.key),
            Some(v) => {
                out.conflicts.push((w.key, v.to_string()));
                if force {
                    let at = find_key(&lines, section, name).ok_or(EditError::NoLine(w.key))?;
                    lines[at] = assignment;
                    changed = true;
                }
            }
            None => {
                let comment = note(w);
                match lines.iter().position(|l| is_header(l, section)) {
                    Some(h) => {
                        // At the end of the section, so keys keep their order.
                        let mut end = lines[h + 1..]
                            .iter()
                            .position(|l| l.trim_start().starts_with('['))
                            .map_or(lines.len(), |i| h + 1 + i);
                        while end > h + 1 && lines[end - 1].trim().is_empty() {
                            end -= 1;
                        }
                        lines.insert(end, assignment);
                        lines.insert(end, comment);
                    }
                    None => {
                        if lines.last().is_some_and(|l| !l.trim().is_empty()) {
                            lines.push(String::new());
                        }
                        lines.extend([format!("[{section}]"), comment, assignment]);
                    }
                }
                changed = true;
            }
        }
    }
    if !changed {
        return Ok(out);
    }
    let text = lines.join("\n") + "\n";
    // Proof that the edit means what it should.
    let back: toml::Table = toml::from_str(&text).map_err(EditError::WouldNotParse)?;
    for w in wants {
        let kept_theirs = !force && out.conflicts.iter().any(|(k, _)| *k == w.key);
        if !kept_theirs && value_in(&back, w.key) != Some(&w.value) {
            return Err(EditError::WouldNotReadBack { key: w.key, value: w.value.clone() });
        }
    }
    out.text = Some(text);
    Ok(out)
}

fn is_header(line: &str, section: &str) -> bool {
    let t = line.split('#').next().unwrap_or_default().trim();
    t.strip_prefix('[').and_then(|r| r.strip_suffix(']')).is_some_and(|s| s.trim() == section)
}

/// The line that assigns `name` inside `[section]`.
fn find_key(lines: &[String], section: &str, name: &str) -> Option<usize> {
    let start = lines.iter().position(|l| is_header(l, section))? + 1;
    lines[start..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with('['))
        .position(|l| {
            l.trim_start().strip_prefix(name).is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| start + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(key: &'static str, value: Value) -> Want {
        Want { key, value, from: format!("test {key}") }
    }

    #[test]
    fn new_keys_go_under_their_section_and_say_where_they_came_from() {
        let wants = [
            want("agent.tool", Value::String("amp".into())),
            want("limits.calls_per_hour", Value::Integer(50)),
        ];
        let fresh = edit(None, &wants, false).unwrap();
        let text = fresh.text.unwrap();
        assert_eq!(
            text,
            format!(
                "{HEADER}\n[agent]\n# imported from test agent.tool\ntool = \"amp\"\n\n[limits]\n# imported from test limits.calls_per_hour\ncalls_per_hour = 50\n"
            )
        );
        // Into ralph init's template: under the existing headers, and it
        // still parses.
        let template = crate::config::template();
        let into = edit(Some(&template), &wants, false).unwrap().text.unwrap();
        assert!(
            into.contains("\n# imported from test agent.tool\ntool = \"amp\"\n\n[run]\n"),
            "{into}"
        );
        assert_eq!(into.matches("[agent]").count(), 1);
        // Again: nothing to do.
        let again = edit(Some(&into), &wants, false).unwrap();
        assert_eq!(again.text, None);
        assert_eq!(again.already, ["agent.tool", "limits.calls_per_hour"]);
    }

    #[test]
    fn a_different_value_is_replaced_only_with_force() {
        let text = "[agent]\ntool = \"codex\" # mine\nmodel = \"x\"\n";
        let wants = [want("agent.tool", Value::String("amp".into()))];
        let kept = edit(Some(text), &wants, false).unwrap();
        assert_eq!(kept.text, None);
        assert_eq!(kept.conflicts, [("agent.tool", "\"codex\"".to_string())]);
        let forced = edit(Some(text), &wants, true).unwrap();
        assert_eq!(forced.text.unwrap(), "[agent]\ntool = \"amp\"\nmodel = \"x\"\n");
    }

    #[test]
    fn what_cannot_be_edited_safely_is_refused() {
        let wants = [want("agent.tool", Value::String("amp".into()))];
        let e = edit(Some("[agent\n"), &wants, false).unwrap_err();
        assert!(matches!(e, EditError::NotToml(_)), "{e}");
        assert!(e.to_string().contains("not valid TOML"), "{e}");
        // A dotted key: set, but not on a line ralph can find.
        let e = edit(Some("agent.tool = \"codex\"\n"), &wants, true).unwrap_err();
        assert!(matches!(e, EditError::NoLine("agent.tool")), "{e}");
        assert!(e.to_string().contains("cannot find the line"), "{e}");
    }
}
