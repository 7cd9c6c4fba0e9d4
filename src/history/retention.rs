//! Keeping run logs bounded (`logs.keep_runs`, `logs.keep_bytes`): the
//! newest runs stay, the oldest go first, and two are never removed: the
//! current run's and the last failed run's (the one a person most likely
//! wants to read).

use std::path::Path;

use super::RunDir;

/// What to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// 0: no limit.
    pub keep_runs: u64,
    /// 0: no limit.
    pub keep_bytes: u64,
}

/// The runs to remove, from `(run id, bytes)` oldest first. Protected runs
/// count towards both limits but are never removed; once a limit is
/// reached every older run goes.
pub fn plan(runs: &[(String, u64)], protected: &[&str], keep: Retention) -> Vec<String> {
    let mut kept_runs = 0u64;
    let mut kept_bytes = 0u64;
    let mut full = false;
    let mut remove = Vec::new();
    for (id, bytes) in runs.iter().rev() {
        if protected.contains(&id.as_str()) {
            kept_runs += 1;
            kept_bytes += bytes;
            continue;
        }
        full = full
            || (keep.keep_runs > 0 && kept_runs >= keep.keep_runs)
            || (keep.keep_bytes > 0 && kept_bytes + bytes > keep.keep_bytes);
        if full {
            remove.push(id.clone());
        } else {
            kept_runs += 1;
            kept_bytes += bytes;
        }
    }
    remove.reverse();
    remove
}

/// Bytes in a folder (links not followed).
pub(crate) fn size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// Removes what [`plan`] says; returns the runs removed and the errors.
pub(crate) fn prune(
    runs: &[RunDir],
    protected: &[&str],
    keep: Retention,
) -> (Vec<String>, Vec<String>) {
    if keep.keep_runs == 0 && keep.keep_bytes == 0 {
        return (Vec::new(), Vec::new());
    }
    let sized: Vec<(String, u64)> = runs
        .iter()
        .map(|r| (r.run_id.clone(), if keep.keep_bytes > 0 { size(&r.dir) } else { 0 }))
        .collect();
    let mut removed = Vec::new();
    let mut errors = Vec::new();
    for id in plan(&sized, protected, keep) {
        let Some(run) = runs.iter().find(|r| r.run_id == id) else { continue };
        match std::fs::remove_dir_all(&run.dir) {
            Ok(()) => removed.push(id),
            Err(e) => errors.push(format!("cannot remove {}: {e}", run.dir.display())),
        }
    }
    (removed, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(sizes: &[u64]) -> Vec<(String, u64)> {
        sizes.iter().enumerate().map(|(i, b)| (format!("r{i}"), *b)).collect()
    }

    #[test]
    fn the_oldest_go_first_and_the_protected_stay() {
        let k = |keep_runs, keep_bytes| Retention { keep_runs, keep_bytes };
        // (sizes oldest first, protected, keep, removed)
        let cases: &[(&[u64], &[&str], Retention, &[&str])] = &[
            (&[1, 1, 1], &[], k(0, 0), &[]),
            (&[1, 1, 1], &[], k(2, 0), &["r0"]),
            (&[1, 1, 1, 1], &[], k(1, 0), &["r0", "r1", "r2"]),
            // The current (newest) and the last failed (r1) are kept past the limit.
            (&[1, 1, 1, 1], &["r3", "r1"], k(1, 0), &["r0", "r2"]),
            (&[1, 1, 1, 1], &["r0"], k(2, 0), &["r1"]),
            // Bytes: from the newest down until the next would not fit.
            (&[5, 5, 5, 5], &[], k(0, 12), &["r0", "r1"]),
            // Once full, older small runs go too: the oldest go first.
            (&[1, 1, 9, 5], &[], k(0, 12), &["r0", "r1", "r2"]),
            (&[5, 20], &["r1"], k(0, 12), &["r0"]),
            (&[1, 1, 1, 1], &[], k(3, 2), &["r0", "r1"]),
        ];
        for (sizes, protected, keep, want) in cases {
            let got = plan(&runs(sizes), protected, *keep);
            assert_eq!(got, *want, "{sizes:?} {protected:?} {keep:?}");
        }
    }
}
