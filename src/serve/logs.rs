//! A run's log folder, read-only: the files in it (for the page's links)
//! and one file by a name [`super::http::safe_log_path`] let through. The
//! file's real path must still be inside the logs folder once links are
//! followed, and must be a regular file: an agent that can write to the
//! folder cannot make the server read anything else.

use std::fs::File;
use std::path::Path;

use crate::store::Store;

/// The files of run `run`'s log folder, as paths relative to it (a story
/// folder's files as `<story>/<file>`), in a natural order (`iter-2.log`
/// before `iter-10.log`).
pub fn list(store: &Store, run: &str) -> Vec<String> {
    let dir = store.run_log_dir(run);
    let mut out = Vec::new();
    let names = |d: &Path| -> Vec<(String, bool)> {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let kind = e.file_type().ok()?;
                        Some((e.file_name().to_str()?.to_string(), kind.is_dir()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    for (name, is_dir) in names(&dir) {
        if is_dir {
            for (inner, inner_dir) in names(&dir.join(&name)) {
                if !inner_dir {
                    out.push(format!("{name}/{inner}"));
                }
            }
        } else {
            out.push(name);
        }
    }
    out.retain(|rel| super::http::safe_log_path(rel));
    out.sort_by_key(|rel| natural_key(rel));
    out
}

/// Digits compare as numbers.
fn natural_key(s: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((std::mem::take(&mut text), digits.parse().unwrap_or(u64::MAX)));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((text, digits.parse().unwrap_or(0)));
    key
}

/// Opens log `rel` of run `run`, when it is a regular file inside the
/// logs folder.
pub fn open(store: &Store, run: &str, rel: &str) -> Option<File> {
    let root = store.logs_dir().canonicalize().ok()?;
    let real = store.run_log_dir(run).join(rel).canonicalize().ok()?;
    if !real.starts_with(&root) {
        return None;
    }
    crate::store::open_regular(&real).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_listed_in_natural_order_and_links_out_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path());
        let run = "20261203-101500-3a7f-9c41e2";
        let dir = store.run_log_dir(run);
        std::fs::create_dir_all(dir.join("US-001")).unwrap();
        for f in ["iter-10.log", "iter-2.log", "gate-2.log", "US-001/iter-1.log", ".hidden"] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        std::fs::write(tmp.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), dir.join("out.log")).unwrap();
        assert_eq!(
            list(&store, run),
            ["US-001/iter-1.log", "gate-2.log", "iter-2.log", "iter-10.log", "out.log"]
        );
        assert!(open(&store, run, "iter-2.log").is_some());
        assert!(open(&store, run, "US-001/iter-1.log").is_some());
        assert!(open(&store, run, "out.log").is_none(), "a link out of the logs folder");
        assert!(open(&store, run, "US-001").is_none(), "a folder");
        assert!(open(&store, run, "missing.log").is_none());
    }
}
