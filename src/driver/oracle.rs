//! The oracle is the person's: what an iteration did to the protected paths
//! (set back before the gate runs, the agent's version kept as a patch for
//! the person), to the tests the gate counts, and to the tests in its diff.
//! The decisions are `oracle::protect` and `oracle::vanish`; this carries
//! them out against git and the work tree.

use std::collections::BTreeMap;
use std::path::Path;

use super::Run;
use crate::gate::{TestCounts, Verdict};
use crate::git::{Changes, Snapshot};
use crate::oracle::base::{self, TestRecord};
use crate::oracle::git_dir;
use crate::oracle::vanish::{self, FileChange, Flag, Vanished};

/// Files read for the test flags: at most this many, each at most this big.
const MAX_FLAG_FILES: usize = 200;
const MAX_FLAG_BYTES: u64 = 1 << 20;

/// A protected file's content at the start of an iteration, when it
/// differed from HEAD (a person's uncommitted edit): git cannot give it back.
pub(super) type Saved = BTreeMap<String, Vec<u8>>;

impl Run<'_> {
    /// `path` (relative to the repository) relative to the project, when it
    /// is inside it.
    fn in_project(&self, path: &str) -> Option<String> {
        let project = self.repo.relative(&self.paths.project)?;
        let rel = Path::new(path).strip_prefix(&project).ok()?;
        Some(rel.to_string_lossy().into_owned())
    }

    fn is_protected(&self, path: &str) -> bool {
        let Some(p) = &self.kit.protected else { return false };
        self.in_project(path).is_some_and(|rel| p.covers(&rel))
    }

    /// The protected files a person left uncommitted, as they are now.
    pub(super) fn save_protected(&self, before: &Snapshot) -> Saved {
        let workdir = self.repo.workdir();
        before
            .dirty_paths()
            .filter(|p| self.is_protected(p))
            .filter_map(|p| {
                let bytes = crate::store::read_regular(&workdir.join(p)).ok()?;
                Some((p.to_string(), bytes))
            })
            .collect()
    }

    /// Sets back every protected file whose content the iteration changed
    /// — in the work tree, and with a commit of ralph's when the agent
    /// committed it — and keeps the agent's version as a patch. Returns the
    /// paths set back (relative to the project) and takes them out of
    /// `changes`: they are not the iteration's work.
    pub(super) fn set_back_protected(
        &mut self,
        n: u32,
        before: &Snapshot,
        after: &Snapshot,
        saved: &Saved,
        changes: &mut Changes,
    ) -> Vec<String> {
        let workdir = self.repo.workdir();
        let changed: Vec<String> = changes
            .files
            .iter()
            .filter(|f| self.is_protected(f))
            .filter(|f| {
                let start = saved.get(*f).cloned().or_else(|| self.repo.blob_in(before.head, f));
                let end = crate::store::read_regular(&workdir.join(f)).ok();
                start != end
            })
            .cloned()
            .collect();
        if changed.is_empty() {
            return Vec::new();
        }
        self.kit.reusable_snapshot = None;
        let mut patch = String::new();
        for f in &changed {
            let old = saved.get(f).cloned().or_else(|| self.repo.blob_in(before.head, f));
            let new = crate::store::read_regular(&workdir.join(f)).ok();
            patch.push_str(&unified(f, old.as_deref(), new.as_deref()));
        }
        let file = self.kit.log_dir.join(format!("iter-{n}.protected.patch"));
        let kept = crate::store::write_replace(&file, patch.as_bytes()).is_ok();
        let mut failed = Vec::new();
        for f in &changed {
            if let Err(e) = self.repo.restore_file(before.head, f) {
                failed.push(format!("{f}: {e}"));
            }
        }
        if after.head != before.head {
            let paths: Vec<&Path> = changed.iter().map(Path::new).collect();
            let message = format!(
                "chore: set back {} the agent changed\n\nralph protects what judges the work \
                 (gate.protect); the agent's version is in {}.\n\nCommitted-by: ralph",
                changed.join(", "),
                file.display()
            );
            if let Err(e) = self.repo.commit_paths(&paths, &message) {
                failed.push(e.message);
            }
        }
        for (f, bytes) in saved.iter().filter(|(f, _)| changed.contains(f)) {
            if let Err(e) = crate::store::write_replace(&workdir.join(f), bytes) {
                failed.push(format!("{f}: {e}"));
            }
        }
        for why in failed {
            self.warn(format!("cannot set back a protected file: {why}"));
        }
        changes.files.retain(|f| !changed.contains(f));
        let shown: Vec<String> =
            changed.iter().map(|f| self.in_project(f).unwrap_or(f.clone())).collect();
        self.warn(format!(
            "the agent changed {}, which ralph protects: set back{}",
            shown.join(", "),
            if kept { format!(" (its version: {})", file.display()) } else { String::new() }
        ));
        self.state.protected_refused.push(crate::event::ProtectedChange {
            iteration: n,
            story_id: self.state.story.clone().unwrap_or_default(),
            paths: shown.clone(),
            patch: kept.then(|| file.display().to_string()),
        });
        shown
    }

    /// Sets back what the iteration changed of the git directory's config
    /// and hooks (`oracle::git_dir`). Returns the paths, as `.git/…`.
    pub(super) fn set_back_git_dir(&mut self, n: u32, before: &git_dir::Mark) -> Vec<String> {
        let dir = self.repo.common_dir();
        let paths =
            git_dir::changed(before, &git_dir::mark_with(&dir, &mut self.kit.git_dir_cache));
        if paths.is_empty() {
            return Vec::new();
        }
        for why in git_dir::set_back(&dir, before, &paths) {
            self.warn(format!("cannot set back the git directory's {why}"));
        }
        let shown: Vec<String> = paths.iter().map(|p| format!(".git/{p}")).collect();
        self.warn(format!(
            "the agent changed {}, which ralph's own git commands read or run: set back",
            shown.join(", ")
        ));
        self.state.protected_refused.push(crate::event::ProtectedChange {
            iteration: n,
            story_id: self.state.story.clone().unwrap_or_default(),
            paths: shown.clone(),
            patch: None,
        });
        shown
    }

    /// Skip markers added and tests deleted by the iteration, from its diff.
    pub(super) fn test_flags(&self, before: &Snapshot, changes: &Changes) -> Vec<Flag> {
        let workdir = self.repo.workdir();
        let files: Vec<FileChange> = changes
            .files
            .iter()
            .filter(|f| vanish::is_test_source(f))
            .take(MAX_FLAG_FILES)
            .map(|f| {
                let text = |b: Vec<u8>| String::from_utf8(b).ok();
                let small =
                    std::fs::metadata(workdir.join(f)).is_ok_and(|m| m.len() <= MAX_FLAG_BYTES);
                let new =
                    small.then(|| crate::store::read_regular(&workdir.join(f)).ok()).flatten();
                FileChange {
                    path: f.clone(),
                    old: self.repo.blob_in(before.head, f).and_then(text),
                    new: new.and_then(text),
                }
            })
            .collect();
        vanish::flags(&files)
    }

    /// The run branch whose test counts a gate is held to.
    pub(super) fn tests_branch(&self) -> Option<String> {
        match self.opts.mode.worker() {
            Some(w) => Some(w.branch.rsplit_once("--").map_or(w.branch.clone(), |(r, _)| r.into())),
            None => self.kit.branch.clone().or_else(|| self.repo.current_branch()),
        }
    }

    /// What the gate counted last on the run branch, for `command`.
    pub(super) fn tests_before_record(&self, command: &[String]) -> Option<TestRecord> {
        self.tests_before(command)
    }

    fn tests_before(&self, command: &[String]) -> Option<TestRecord> {
        let branch = self.tests_branch()?;
        base::test_record(&self.paths.project, &branch)
            .filter(|r| r.command == crate::gate::display(command))
    }

    /// Whether tests vanished between the last record and this passing gate.
    pub(super) fn tests_vanished(&self, command: &[String], v: &Verdict) -> Option<Vanished> {
        let after = v.counts.filter(|_| v.passed)?;
        let before = self.tests_before(command)?;
        vanish::vanished(before.counts, after)
    }

    /// Records what the gate counted (at the baseline, or after a story it
    /// verified) as what the next stories are held to. A worker's turn
    /// leaves it to its run: its worktree holds one story's work.
    pub(super) fn record_tests(&mut self, command: &[String], counts: TestCounts, at: String) {
        if self.opts.mode.worker().is_some() {
            return;
        }
        let Some(branch) = self.tests_branch() else { return };
        let record = TestRecord { command: crate::gate::display(command), counts, at };
        base::set_test_record(&self.paths.project, &branch, Some(record));
    }

    /// The baseline's counts: the first record of the branch, or compared
    /// with the record an earlier run left (tests that vanished since are
    /// named, and the record stands).
    pub(super) fn baseline_tests(&mut self, command: &[String], v: &Verdict) {
        let Some(counts) = v.counts else { return };
        self.state.tests_baseline = Some(counts);
        match self.tests_before(command) {
            Some(before) => {
                if let Some(gone) = vanish::vanished(before.counts, counts) {
                    self.warn(format!(
                        "tests vanished since {}: {gone}; stories are held to {} until they are \
                         back (or `ralph trust` accepts the counts as they are)",
                        before.at,
                        before.counts.describe()
                    ));
                }
            }
            None => {
                let at = format!("the baseline of run {}", self.state.run_id);
                self.record_tests(command, counts, at);
            }
        }
    }
}

/// A unified diff of one file, as `git diff` would show it.
fn unified(path: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> String {
    let patch = git2::Patch::from_buffers(
        old.unwrap_or_default(),
        old.map(|_| Path::new(path)),
        new.unwrap_or_default(),
        new.map(|_| Path::new(path)),
        None,
    );
    patch
        .and_then(|mut p| p.to_buf())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|_| format!("{path}: changed (binary)\n"))
}
