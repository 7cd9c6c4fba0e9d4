//! `progress.txt` and the archive of finished runs, ralph.sh-compatible:
//! when the PRD's `branchName` changes, the previous run's PRD and progress
//! log move to `archive/YYYY-MM-DD-<feature>/` and a fresh log starts.
//!
//! Unlike ralph.sh, the archived PRD is the *previous* one (ralph keeps a
//! copy in `.ralph/last-prd.json`; ralph.sh archives the new PRD by
//! mistake), an existing archive folder is never overwritten, and the
//! folder name is one safe path segment whatever the branch name holds.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Local, NaiveDate};

/// The first lines of a new progress log.
pub fn header(now: DateTime<Local>) -> String {
    format!("# Ralph Progress Log\nStarted: {}\n---\n", now.format("%a %b %e %H:%M:%S %Z %Y"))
}

/// Creates the progress log with its header if it does not exist.
/// Returns whether it was created.
pub fn ensure_progress(path: &Path, now: DateTime<Local>) -> io::Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    crate::store::write_atomic(path, header(now).as_bytes())?;
    Ok(true)
}

/// A branch name as one path segment: without the `ralph/` prefix, with
/// separators and anything unusual replaced, never `.`/`..`, never empty.
pub fn folder_name(branch: &str) -> String {
    let name = branch.trim().strip_prefix("ralph/").unwrap_or(branch.trim());
    let mut out: String = name
        .chars()
        .map(|c| if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .collect();
    while out.contains("..") {
        out = out.replace("..", ".");
    }
    let out = out.trim_matches(|c| c == '.' || c == '-').to_string();
    let out: String = out.chars().take(100).collect();
    if out.is_empty() { "unnamed".into() } else { out }
}

/// `archive/<date>-<feature>`, with `-2`, `-3`… if that folder exists.
pub fn archive_dir(archive_root: &Path, date: NaiveDate, branch: &str) -> PathBuf {
    let base = format!("{}-{}", date.format("%Y-%m-%d"), folder_name(branch));
    let mut dir = archive_root.join(&base);
    let mut n = 2;
    while dir.exists() {
        dir = archive_root.join(format!("{base}-{n}"));
        n += 1;
    }
    dir
}

/// What an archive step did.
#[derive(Debug)]
pub struct Archived {
    pub dir: PathBuf,
    /// Why the previous PRD could not be archived, if it could not.
    pub missing_prd: Option<String>,
}

/// Archives the previous run — `previous_prd` (the old PRD's text, if
/// ralph has it) and `previous_progress` (the old progress log, read before
/// any branch switch) — then starts a fresh progress log at `progress`.
pub fn archive_previous(
    prd_dir: &Path,
    last_branch: &str,
    previous_prd: Option<&[u8]>,
    previous_progress: Option<&[u8]>,
    progress: &Path,
    now: DateTime<Local>,
) -> io::Result<Archived> {
    let dir = archive_dir(&prd_dir.join("archive"), now.date_naive(), last_branch);
    fs::create_dir_all(&dir)?;
    let missing_prd = match previous_prd {
        Some(bytes) => {
            let p = dir.join("prd.json");
            crate::store::write_atomic(&p, bytes)?;
            None
        }
        None => Some("no copy of the previous prd.json was kept (first run of this ralph?)".into()),
    };
    if let Some(bytes) = previous_progress {
        let p = dir.join("progress.txt");
        crate::store::write_atomic(&p, bytes)?;
    }
    crate::store::write_atomic(progress, header(now).as_bytes())?;
    Ok(Archived { dir, missing_prd })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_become_one_safe_segment() {
        let cases = [
            ("ralph/task-priority", "task-priority"),
            ("ralph/team/x", "team-x"),
            ("ralph/../../etc", "etc"),
            ("/abs/path", "abs-path"),
            ("..", "unnamed"),
            ("", "unnamed"),
            ("feature", "feature"),
            ("ralph/a b:c*d", "a-b-c-d"),
            ("ralph/.hidden", "hidden"),
        ];
        for (branch, want) in cases {
            let got = folder_name(branch);
            assert_eq!(got, want, "{branch}");
            assert!(!got.contains('/') && got != "." && got != "..");
        }
    }

    #[test]
    fn archive_keeps_previous_prd_and_progress_then_resets() {
        let dir = tempfile::tempdir().unwrap();
        let progress = dir.path().join("progress.txt");
        fs::write(&progress, "# Ralph Progress Log\nold learnings\n").unwrap();
        let now = Local::now();
        let old = fs::read(&progress).unwrap();
        let a = archive_previous(
            dir.path(),
            "ralph/old",
            Some(b"{\"old\":true}"),
            Some(&old),
            &progress,
            now,
        )
        .unwrap();
        assert!(a.dir.starts_with(dir.path().join("archive")));
        assert!(a.dir.file_name().unwrap().to_str().unwrap().ends_with("-old"));
        assert_eq!(fs::read_to_string(a.dir.join("prd.json")).unwrap(), "{\"old\":true}");
        assert!(fs::read_to_string(a.dir.join("progress.txt")).unwrap().contains("old learnings"));
        let fresh = fs::read_to_string(&progress).unwrap();
        assert!(fresh.starts_with("# Ralph Progress Log\nStarted: ") && fresh.ends_with("---\n"));
        // A second archive of the same branch on the same day gets its own folder.
        let b = archive_previous(dir.path(), "ralph/old", None, None, &progress, now).unwrap();
        assert_ne!(a.dir, b.dir);
        assert!(b.missing_prd.is_some());
    }
}
