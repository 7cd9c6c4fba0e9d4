//! `ralph config show`: every setting, its effective value and the layer it
//! came from.

use std::fmt::Write as _;

use crate::cli::{Global, SettingArgs};
use crate::error::Error;

use super::common::{print, print_json, project_dir};
use super::flags::layers;

pub(crate) fn show(g: &Global) -> Result<u8, Error> {
    let project = project_dir(g)?;
    // Run flags go with `ralph run`, so only the global ones (--color) apply.
    let layers = layers(g, &project, &SettingArgs::default())?;
    if g.json {
        let rows: Vec<_> = layers
            .show()
            .into_iter()
            .map(|(k, v, s)| serde_json::json!({"key": k.key, "value": v, "source": s.to_string(), "env": crate::config::env_name(k.key), "flag": k.flag}))
            .collect();
        print_json(&rows)?;
        return Ok(0);
    }
    let rows = layers.show();
    // Aligned comments, except after a long value (a list of patterns, a
    // long command), which would push every other row's source off screen.
    let width = rows
        .iter()
        .map(|(k, v, _)| k.key.len() + v.len() + 3)
        .filter(|w| *w <= 48)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (key, value, source) in rows {
        let left = format!("{} = {value}", key.key);
        let _ = writeln!(out, "{left:<width$}  # {source}");
    }
    print(&out)?;
    Ok(0)
}
