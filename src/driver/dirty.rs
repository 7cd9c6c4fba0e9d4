//! A new run refuses a work tree with a person's uncommitted edits.
//!
//! Agents commit with `git add -A`, and ralph commits what an agent leaves:
//! an edit of a tracked file that was there before the run would end up in
//! a story's commit, under the agent's name. So a new run starts only on a
//! work tree whose tracked files are as committed, ralph's own bookkeeping
//! aside (prd.json, progress.txt, `.last-branch`, the archive, `.ralph/`),
//! unless `--allow-dirty` says otherwise. Untracked files do not count:
//! most work trees have some (build output, local notes), git's own
//! `git stash` leaves them too, and refusing them would teach everyone to
//! pass `--allow-dirty`. A resumed run is not checked: what is uncommitted
//! then is the interrupted iteration's work, which the agent goes on with.

use std::path::{Path, PathBuf};

use crate::git::{GitError, Repo};
use crate::paths::Paths;

/// At most this many files are named; the rest are counted.
const NAMED: usize = 3;

/// Refuses to start when tracked files other than ralph's own have
/// uncommitted changes.
pub(super) fn refuse_a_dirty_tree(paths: &Paths) -> Result<(), GitError> {
    let repo = Repo::discover(&paths.project)?;
    let changed = repo.tracked_changes()?;
    let top = repo.workdir().canonicalize().unwrap_or_else(|_| repo.workdir());
    let own: Vec<String> = [&paths.prd, &paths.progress, &paths.last_branch]
        .into_iter()
        .filter_map(|p| relative(&top, p))
        .collect();
    let dirs: Vec<String> = [paths.prd_dir.join("archive"), paths.store.work().to_path_buf()]
        .iter()
        .filter_map(|d| relative(&top, &d.join("x")))
        .filter_map(|x| x.strip_suffix('x').map(str::to_string))
        .collect();
    let bookkeeping = |f: &str| own.iter().any(|o| o == f) || dirs.iter().any(|d| f.starts_with(d));
    match dirty(&changed, &bookkeeping) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `path` relative to the work tree `top`, whether or not it exists.
fn relative(top: &Path, path: &Path) -> Option<String> {
    let dir = path.parent()?.canonicalize().ok()?;
    let full: PathBuf = dir.join(path.file_name()?);
    full.strip_prefix(top).ok()?.to_str().map(str::to_string)
}

/// The refusal, if any of `changed` is not ralph's `bookkeeping`.
fn dirty(changed: &[String], bookkeeping: &dyn Fn(&str) -> bool) -> Option<GitError> {
    let theirs: Vec<&String> = changed.iter().filter(|f| !bookkeeping(f)).collect();
    if theirs.is_empty() {
        return None;
    }
    let mut list = theirs.iter().take(NAMED).map(|f| f.as_str()).collect::<Vec<_>>().join(", ");
    if theirs.len() > NAMED {
        list.push_str(&format!(" and {} more", theirs.len() - NAMED));
    }
    Some(GitError::refused(
        format!(
            "uncommitted changes to tracked files: {list}; the agent's commits would take them in"
        ),
        "commit them, or `git stash` them (and `git stash pop` after the run), or pass \
         --allow-dirty (run.allow_dirty = true) to start anyway",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persons_edits_refuse_a_new_run_ralphs_own_do_not() {
        let ours = |f: &str| f == "prd.json" || f == "progress.txt" || f.starts_with(".ralph/");
        #[rustfmt::skip]
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], None),
            (&["prd.json", "progress.txt", ".ralph/config.toml"], None),
            (&["src/main.rs"], Some("uncommitted changes to tracked files: src/main.rs; the agent's")),
            (&["prd.json", "README.md"], Some("tracked files: README.md;")),
            (&["a", "b", "c"], Some("tracked files: a, b, c;")),
            (&["a", "b", "c", "d", "e"], Some("tracked files: a, b, c and 2 more;")),
        ];
        for (changed, want) in cases {
            let changed: Vec<String> = changed.iter().map(|s| s.to_string()).collect();
            let got = dirty(&changed, &ours);
            match (got, want) {
                (None, None) => {}
                (Some(e), Some(w)) => {
                    assert!(e.message.contains(w), "{changed:?}: {}", e.message);
                    assert!(e.hint.unwrap().contains("--allow-dirty"), "{changed:?}");
                }
                (got, want) => panic!("{changed:?}: {got:?}, want {want:?}"),
            }
        }
    }
}
