//! Git through git2, in process: the branch the PRD names, and what each
//! iteration changed (commits, files — untracked ones included).
//!
//! No `git` child processes: a loop that runs all night should spawn the
//! agent and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use git2::{BranchType, ErrorCode, Oid, Repository, StatusOptions};

mod conflict;
mod export;
pub mod remote;
mod worktree;

pub use conflict::marker_lines;

pub struct Repo {
    repo: Repository,
}

/// A git failure, with what ralph was doing and what the user can do.
///
/// `message` is the whole line a person reads (the cause's text already in
/// it); `source()` keeps the cause typed (libgit2's error, an I/O error)
/// for code that decides by it, and `kind` decides the exit code.
#[derive(Debug)]
pub struct GitError {
    pub message: String,
    pub hint: Option<String>,
    pub kind: GitKind,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// Whether a person must change the repository or git failed at its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitKind {
    /// The repository is not as a run needs it: not a work tree, an invalid
    /// branch name, uncommitted changes or untracked files in the way. A
    /// person fixes it and runs ralph again (exit 2, like a bad prd.json).
    Refused,
    /// git could not do what ralph asked: libgit2 failed, a file could not
    /// be read or written, another git command holds a lock, the `git`
    /// program or the remote failed (exit 7: the environment).
    Failed,
}

impl GitError {
    /// The repository is not as the run needs it; `hint` says what to change.
    pub(crate) fn refused(message: impl Into<String>, hint: impl Into<String>) -> GitError {
        GitError {
            message: message.into(),
            hint: Some(hint.into()),
            kind: GitKind::Refused,
            source: None,
        }
    }

    /// git failed at its work, with no cause but its own words.
    pub(crate) fn failed(message: impl Into<String>, hint: Option<String>) -> GitError {
        GitError { message: message.into(), hint, kind: GitKind::Failed, source: None }
    }

    /// A file git's work needed could not be read or written: `cannot
    /// {what}: {e}`, the I/O error kept as the cause.
    pub(crate) fn io(what: impl fmt::Display, e: std::io::Error) -> GitError {
        GitError {
            message: format!("cannot {what}: {e}"),
            hint: None,
            kind: GitKind::Failed,
            source: Some(Box::new(e)),
        }
    }

    /// The same failure with another hint.
    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> GitError {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for GitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// libgit2's error as a cause: its message only. `git2::Error`'s own text
/// adds `; class=…; code=…`, which would make main print the message a
/// second time as a "caused by" line; the class and code stay on the value.
#[derive(Debug)]
pub struct Libgit2(pub git2::Error);

impl fmt::Display for Libgit2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.message())
    }
}

impl std::error::Error for Libgit2 {}

/// An index entry for `path` holding blob `id`: no stat data, which a
/// tree written from an in-memory index does not need.
pub(crate) fn index_entry(path: &[u8], id: Oid, mode: u32, size: usize) -> git2::IndexEntry {
    git2::IndexEntry {
        ctime: git2::IndexTime::new(0, 0),
        mtime: git2::IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: u32::try_from(size).unwrap_or(u32::MAX),
        id,
        flags: 0,
        flags_extended: 0,
        path: path.to_vec(),
    }
}

/// libgit2 failed at `message`: `{message}: {libgit2's message}`, its
/// error kept as the cause.
pub(crate) fn err(message: impl Into<String>, e: git2::Error) -> GitError {
    GitError {
        message: format!("{}: {}", message.into(), e.message()),
        hint: None,
        kind: GitKind::Failed,
        source: Some(Box::new(Libgit2(e))),
    }
}

/// What [`Repo::ensure_branch`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum BranchAction {
    AlreadyOn,
    SwitchedTo,
    Created { from: String },
}

/// The state of HEAD and the work tree at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub head: Option<Oid>,
    /// Every path that differs from HEAD (untracked included) → what is in
    /// the work tree there.
    dirty: BTreeMap<String, Content>,
}

impl Snapshot {
    /// Whether `path` differed from HEAD (or was untracked) at this instant.
    pub fn is_dirty(&self, path: &str) -> bool {
        self.dirty.contains_key(path)
    }

    /// Every path that differed from HEAD (or was untracked).
    pub fn dirty_paths(&self) -> impl Iterator<Item = &str> {
        self.dirty.keys().map(String::as_str)
    }
}

/// What a path holds, as far as telling "changed" from "unchanged" needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Content {
    /// Committed content (from a tree).
    Blob(Oid),
    /// A file in the work tree, known by its size, modification time and
    /// inode: reading (and hashing) every untracked file each iteration
    /// would make a big untracked dataset cost a read per iteration. A file
    /// rewritten with the same bytes counts as changed, which errs the
    /// right way for a progress signal.
    File {
        size: u64,
        mtime_ns: i128,
        ino: u64,
    },
    Missing,
}

impl Content {
    fn of(path: &Path) -> Content {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(path) {
            Ok(m) => Content::File {
                size: m.size(),
                mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
                ino: m.ino(),
            },
            Err(_) => Content::Missing,
        }
    }
}

/// Where HEAD and the local branches are at one instant: refs only, cheap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refs {
    /// The checked-out branch; `None` for a detached HEAD.
    pub branch: Option<String>,
    pub tips: BTreeMap<String, Oid>,
}

/// What an agent did to the run branch and HEAD, and what ralph put right.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Integrity {
    /// What it did, for the person and the next prompt.
    pub findings: Vec<String>,
    /// What ralph could not put right: the run must stop, with this.
    pub fatal: Option<String>,
}

/// What one iteration changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Changes {
    /// Commits made, newest first (short ids).
    pub commits: Vec<String>,
    /// Paths (relative to the repository root) whose content differs
    /// between the start and the end of the iteration.
    pub files: Vec<String>,
}

impl Repo {
    /// Opens the repository that contains `dir`.
    pub fn discover(dir: &Path) -> Result<Repo, GitError> {
        match Repository::discover(dir) {
            Ok(repo) if repo.is_bare() => Err(GitError::refused(
                format!("{} is inside a bare git repository", dir.display()),
                "run ralph in a work tree",
            )),
            Ok(repo) => Ok(Repo { repo }),
            Err(e) if e.code() == ErrorCode::NotFound => Err(GitError::refused(
                format!("{} is not inside a git repository", dir.display()),
                "ralph keeps the agent's memory in git history: run `git init` and commit, \
                 or pass -C <project dir>",
            )),
            Err(e) => Err(err(format!("cannot open the git repository at {}", dir.display()), e)),
        }
    }

    /// Creates a repository (for `ralph demo` and tests).
    pub fn init(dir: &Path) -> Result<Repo, GitError> {
        Repository::init(dir).map(|repo| Repo { repo }).map_err(|e| err("git init", e))
    }

    pub fn workdir(&self) -> PathBuf {
        self.repo.workdir().map(Path::to_path_buf).unwrap_or_default()
    }

    /// The git directory the repository's worktrees share (`.git/`): its
    /// config and hooks.
    pub fn common_dir(&self) -> PathBuf {
        self.repo.commondir().to_path_buf()
    }

    /// The checked-out branch's short name (also for an unborn branch).
    pub fn current_branch(&self) -> Option<String> {
        match self.repo.head() {
            Ok(head) if head.is_branch() => head.shorthand().ok().map(str::to_string),
            Ok(_) => None,
            Err(e) if e.code() == ErrorCode::UnbornBranch => {
                let head = self.repo.find_reference("HEAD").ok()?;
                let target = head.symbolic_target().ok()??;
                target.strip_prefix("refs/heads/").map(str::to_string)
            }
            Err(_) => None,
        }
    }

    pub fn head(&self) -> Option<Oid> {
        self.repo.head().ok().and_then(|h| h.target())
    }

    /// Puts the work on `name`: stays if already there, checks it out if it
    /// exists, creates it from the current HEAD otherwise. Refuses to switch
    /// over uncommitted changes to tracked files, because the checkout
    /// could carry them to the wrong branch or fail half-way.
    pub fn ensure_branch(&self, name: &str) -> Result<BranchAction, GitError> {
        self.ensure_branch_carrying(name, &[])
    }

    /// [`Repo::ensure_branch`], carrying the uncommitted edits of `carry`
    /// (paths relative to the work tree: prd.json and progress.txt) across
    /// the switch instead of refusing over them. Pointing prd.json at an
    /// existing branch is itself an uncommitted edit of prd.json.
    pub fn ensure_branch_carrying(
        &self,
        name: &str,
        carry: &[PathBuf],
    ) -> Result<BranchAction, GitError> {
        if git2::Branch::name_is_valid(name).ok() != Some(true) {
            return Err(GitError::refused(
                format!("branchName {name:?} is not a valid git branch name"),
                "fix \"branchName\" in prd.json",
            ));
        }
        let current = self.current_branch();
        if current.as_deref() == Some(name) {
            return Ok(BranchAction::AlreadyOn);
        }
        let refname = format!("refs/heads/{name}");
        let Some(head) = self.head() else {
            // No commit yet: the first commit will create the branch.
            self.repo.set_head(&refname).map_err(|e| err(format!("switch to {name}"), e))?;
            return Ok(BranchAction::Created { from: "an empty repository".into() });
        };
        match self.repo.find_branch(name, BranchType::Local) {
            Ok(branch) => {
                let target =
                    branch.get().peel_to_commit().map_err(|e| err(format!("read {name}"), e))?;
                let carried = if target.id() != head {
                    self.check_out_carrying(name, current.as_deref(), &target, carry)?
                } else {
                    Vec::new()
                };
                self.repo.set_head(&refname).map_err(|e| err(format!("switch to {name}"), e))?;
                let workdir = self.workdir();
                for (path, bytes) in &carried {
                    std::fs::write(workdir.join(path), bytes)
                        .map_err(|e| GitError::io(format!("write {} back", path.display()), e))?;
                }
                Ok(BranchAction::SwitchedTo)
            }
            Err(e) if e.code() == ErrorCode::NotFound => {
                let commit = self.repo.find_commit(head).map_err(|e| err("read HEAD", e))?;
                self.repo
                    .branch(name, &commit, false)
                    .map_err(|e| err(format!("create {name}"), e))?;
                self.repo.set_head(&refname).map_err(|e| err(format!("switch to {name}"), e))?;
                let from = current.unwrap_or_else(|| format!("{:.7}", head.to_string()));
                Ok(BranchAction::Created { from })
            }
            Err(e) => Err(err(format!("look up branch {name}"), e)),
        }
    }

    /// Checks `target` out for a switch to branch `name` from `current`,
    /// refusing over uncommitted changes to tracked files but those of
    /// `carry`, which are set back for the switch and returned to be
    /// written again on the other side.
    fn check_out_carrying(
        &self,
        name: &str,
        current: Option<&str>,
        target: &git2::Commit<'_>,
        carry: &[PathBuf],
    ) -> Result<Vec<(PathBuf, Vec<u8>)>, GitError> {
        let mut carried = Vec::new();
        let mut modified = self.tracked_changes()?;
        let workdir = self.workdir();
        for path in carry {
            let key = path.to_string_lossy();
            if let Some(i) = modified.iter().position(|m| *m == key) {
                modified.remove(i);
                let bytes = std::fs::read(workdir.join(path))
                    .map_err(|e| GitError::io(format!("read {}", path.display()), e))?;
                carried.push((path.clone(), bytes));
            }
        }
        if !modified.is_empty() {
            let mut list = modified.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
            if modified.len() > 5 {
                list.push_str(&format!(" and {} more", modified.len() - 5));
            }
            return Err(GitError::refused(
                format!(
                    "cannot switch from {} to {name}: uncommitted changes in {list}",
                    current.unwrap_or("a detached HEAD")
                ),
                format!(
                    "commit or stash them (`git stash`), or check out {name} yourself, then run ralph again"
                ),
            ));
        }
        if !carried.is_empty() {
            // Back to HEAD's version for the switch; the edits
            // are written again on the other side.
            let mut opts = git2::build::CheckoutBuilder::new();
            opts.force();
            for (path, _) in &carried {
                opts.path(path);
            }
            self.repo
                .checkout_head(Some(&mut opts))
                .map_err(|e| err("set aside prd.json's edits", e))?;
        }
        let mut opts = git2::build::CheckoutBuilder::new();
        opts.safe();
        self.repo.checkout_tree(target.as_object(), Some(&mut opts)).map_err(|e| {
            // Files in the way are the person's to move; any other failure
            // is git's.
            let in_the_way = e.code() == ErrorCode::Conflict;
            let mut e = err(format!("cannot check out {name}"), e)
                .with_hint("move the conflicting untracked files away, then run ralph again");
            if in_the_way {
                e.kind = GitKind::Refused;
            }
            e
        })?;
        Ok(carried)
    }

    /// git's lock files that a writer killed mid-write left behind: open in
    /// no live process, and older than `since` (the run's start) or than a
    /// few seconds. They are removed and returned. A lock a live process
    /// holds is waited for up to `wait`, then it is an error naming it.
    /// Without this, one `kill -9` inside a commit makes every later commit
    /// — the agent's and ralph's — fail.
    pub fn clear_stale_locks(
        &self,
        since: std::time::SystemTime,
        wait: std::time::Duration,
    ) -> Result<Vec<PathBuf>, GitError> {
        let mut cleared = Vec::new();
        for lock in self.lock_files() {
            let until = std::time::Instant::now() + wait;
            while let Ok(meta) = std::fs::symlink_metadata(&lock) {
                match crate::process::holder_of(&lock) {
                    Some(pid) if std::time::Instant::now() >= until => {
                        return Err(GitError::failed(
                            format!("{} is held by a running process (pid {pid})", lock.display()),
                            Some(
                                "another git command is at work in this repository: let it finish \
                                 (or end it), then run ralph again"
                                    .into(),
                            ),
                        ));
                    }
                    Some(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
                    None => {
                        let modified = meta.modified().unwrap_or(std::time::SystemTime::now());
                        let age = modified.elapsed().unwrap_or_default();
                        let fresh = modified >= since && age < std::time::Duration::from_secs(5);
                        if fresh && std::time::Instant::now() < until {
                            // Just made by a writer that has not opened it
                            // yet, or closed it a moment ago: give it time.
                            std::thread::sleep(std::time::Duration::from_millis(100));
                            continue;
                        }
                        // Nobody holds it, and nobody came for it: stale.
                        std::fs::remove_file(&lock).map_err(|e| {
                            GitError::io(format!("remove the stale {}", lock.display()), e)
                        })?;
                        cleared.push(lock.clone());
                        break;
                    }
                }
            }
        }
        Ok(cleared)
    }

    /// The lock files git and libgit2 take for the writes ralph and agents
    /// make: the index, HEAD, packed refs, config and every branch ref.
    fn lock_files(&self) -> Vec<PathBuf> {
        let git = self.repo.path();
        let mut found: Vec<PathBuf> =
            ["index.lock", "HEAD.lock", "ORIG_HEAD.lock", "packed-refs.lock", "config.lock"]
                .iter()
                .map(|name| git.join(name))
                .filter(|p| p.exists())
                .collect();
        let mut dirs = vec![git.join("refs/heads")];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "lock") {
                    found.push(path);
                }
            }
        }
        found
    }

    /// The checked-out branch and every local branch's tip.
    pub fn refs(&self) -> Refs {
        let mut tips = BTreeMap::new();
        // A glob walks refs/heads/ alone; `branches()` walks every ref
        // (refs/ralph/ holds a run's attempts and claims) and filters.
        if let Ok(refs) = self.repo.references_glob("refs/heads/*") {
            for r in refs.flatten() {
                let name = r.name().ok().and_then(|n| n.strip_prefix("refs/heads/"));
                if let (Some(name), Some(oid)) = (name, r.target()) {
                    tips.insert(name.to_string(), oid);
                }
            }
        }
        let branch = self
            .repo
            .head()
            .ok()
            .filter(|h| h.is_branch())
            .and_then(|h| h.shorthand().ok().map(str::to_string));
        Refs { branch, tips }
    }

    /// After an agent ran: HEAD must be back on `run_branch`, and that
    /// branch's tip must descend from where it was (`before`). A switched
    /// HEAD is switched back (when the work tree allows it); commits the
    /// agent made elsewhere are named and left there; commits it dropped
    /// from the run branch (`git reset --hard HEAD~2`) are restored when
    /// that is clean, and otherwise the run must stop, saying how to
    /// recover them.
    ///
    /// Branches `others_own` names are left out: a parallel run's other
    /// stories and its run branch, which others move meanwhile.
    pub fn check_integrity(
        &self,
        before: &Refs,
        run_branch: &str,
        others_own: &dyn Fn(&str) -> bool,
    ) -> Integrity {
        let mut out = Integrity::default();
        let now = self.refs();
        let short = |o: &Oid| format!("{:.7}", o.to_string());
        if now.branch.as_deref() != Some(run_branch) {
            let place = match &now.branch {
                Some(b) => format!("branch {b}"),
                None => match self.head() {
                    Some(h) => format!("a detached HEAD at {}", short(&h)),
                    None => "no commit".into(),
                },
            };
            out.findings.push(format!("the agent left HEAD on {place}"));
            match self.ensure_branch(run_branch) {
                Ok(_) => out.findings.push(format!("ralph switched back to {run_branch}")),
                Err(e) => {
                    out.fatal = Some(format!(
                        "the agent left HEAD on {place}, not the run branch {run_branch}, and \
                         ralph cannot switch back: {}",
                        e.message
                    ));
                    return out;
                }
            }
        }
        for (name, tip) in
            now.tips.iter().filter(|(n, _)| n.as_str() != run_branch && !others_own(n))
        {
            let old = before.tips.get(name);
            if old != Some(tip) {
                let n = self.count_between(*tip, old.copied());
                out.findings.push(format!(
                    "the agent committed to {name} ({}); ralph left {} there",
                    crate::text::count(n, "commit", "commits"),
                    if n == 1 { "it" } else { "them" }
                ));
            }
        }
        // Read again, alone: switching back above may have made the branch.
        let new = self.repo.refname_to_id(&format!("refs/heads/{run_branch}")).ok();
        let (Some(&old), Some(new)) = (before.tips.get(run_branch), new) else {
            return out;
        };
        if old == new || self.repo.graph_descendant_of(new, old).unwrap_or(false) {
            return out;
        }
        let dropped = crate::text::count(self.count_between(old, Some(new)), "commit", "commits");
        let clean_reset = self.repo.graph_descendant_of(old, new).unwrap_or(false)
            && self.tracked_changes().is_ok_and(|c| c.is_empty());
        if clean_reset && self.restore_tip(run_branch, old).is_ok() {
            out.findings.push(format!(
                "the agent rewrote the history of {run_branch}: {dropped} dropped; ralph restored \
                 {run_branch} to {}",
                short(&old)
            ));
        } else {
            out.fatal = Some(format!(
                "the agent rewrote the history of {run_branch}: {dropped} dropped, which ralph \
                 cannot restore cleanly. They are not lost: `git reset --hard {}` on {run_branch} \
                 brings them back (see `git reflog {run_branch}`)",
                short(&old)
            ));
        }
        out
    }

    /// Commits reachable from `tip` but not from `base`.
    fn count_between(&self, tip: Oid, base: Option<Oid>) -> usize {
        let Ok(mut walk) = self.repo.revwalk() else { return 0 };
        if walk.push(tip).is_err() {
            return 0;
        }
        if let Some(b) = base {
            let _ = walk.hide(b);
        }
        walk.flatten().take(10_000).count()
    }

    /// Moves `branch` (checked out, work tree clean) back to `tip`.
    fn restore_tip(&self, branch: &str, tip: Oid) -> Result<(), git2::Error> {
        let commit = self.repo.find_commit(tip)?;
        let mut opts = git2::build::CheckoutBuilder::new();
        opts.safe();
        self.repo.checkout_tree(commit.as_object(), Some(&mut opts))?;
        self.repo
            .find_reference(&format!("refs/heads/{branch}"))?
            .set_target(tip, "ralph: restore the commits an agent dropped")?;
        Ok(())
    }

    /// Tracked files with staged or unstaged changes (paths relative to the work tree).
    pub fn tracked_changes(&self) -> Result<Vec<String>, GitError> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(false).include_ignored(false).exclude_submodules(true);
        let statuses =
            self.repo.statuses(Some(&mut opts)).map_err(|e| err("read git status", e))?;
        Ok(statuses.iter().filter_map(|s| s.path().ok().map(str::to_string)).collect())
    }

    /// Records HEAD and every path that differs from it, with content ids.
    pub fn snapshot(&self) -> Result<Snapshot, GitError> {
        let mut opts = StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false)
            .exclude_submodules(true);
        let statuses =
            self.repo.statuses(Some(&mut opts)).map_err(|e| err("read git status", e))?;
        let workdir = self.workdir();
        let mut dirty = BTreeMap::new();
        for entry in statuses.iter() {
            let Ok(path) = entry.path() else { continue };
            dirty.insert(path.to_string(), Content::of(&workdir.join(path)));
        }
        Ok(Snapshot { head: self.head(), dirty })
    }

    /// What changed between two snapshots.
    pub fn changes(&self, before: &Snapshot, after: &Snapshot) -> Changes {
        let mut commits = Vec::new();
        if after.head != before.head
            && let (Some(new), Ok(mut walk)) = (after.head, self.repo.revwalk())
        {
            let _ = walk.push(new);
            if let Some(old) = before.head {
                let _ = walk.hide(old);
            }
            for oid in walk.flatten().take(1000) {
                commits.push(format!("{:.7}", oid.to_string()));
            }
        }
        let mut candidates: BTreeSet<String> =
            before.dirty.keys().chain(after.dirty.keys()).cloned().collect();
        let tree_of = |oid: Option<Oid>| {
            oid.and_then(|o| self.repo.find_commit(o).ok()).and_then(|c| c.tree().ok())
        };
        let (old_tree, new_tree) = (tree_of(before.head), tree_of(after.head));
        if before.head != after.head
            && let Ok(diff) =
                self.repo.diff_tree_to_tree(old_tree.as_ref(), new_tree.as_ref(), None)
        {
            for delta in diff.deltas() {
                for file in [delta.old_file(), delta.new_file()] {
                    if let Some(p) = file.path().and_then(Path::to_str) {
                        candidates.insert(p.to_string());
                    }
                }
            }
        }
        let blob_in = |tree: &Option<git2::Tree>, path: &str| {
            tree.as_ref()
                .and_then(|t| t.get_path(Path::new(path)).ok())
                .map_or(Content::Missing, |e| Content::Blob(e.id()))
        };
        let files = candidates
            .into_iter()
            .filter(|path| {
                let start =
                    before.dirty.get(path).copied().unwrap_or_else(|| blob_in(&old_tree, path));
                let end =
                    after.dirty.get(path).copied().unwrap_or_else(|| blob_in(&new_tree, path));
                start != end
            })
            .collect();
        Changes { commits, files }
    }

    /// Commits exactly `paths` (relative to the work tree) as they are in
    /// the work tree — a deleted file is removed, an executable keeps its
    /// bit, a symlink stays a link — with `message`, leaving every other
    /// change alone.
    pub fn commit_paths(&self, paths: &[&Path], message: &str) -> Result<Oid, GitError> {
        // The commit's tree is HEAD's tree plus exactly these files, built
        // in an in-memory index: whatever the agent left staged in the real
        // index stays staged and out of ralph's commit.
        let parent = self.head().and_then(|h| self.repo.find_commit(h).ok());
        let mut tree_index = git2::Index::new().map_err(|e| err("make an index", e))?;
        if let Some(p) = &parent {
            let tree = p.tree().map_err(|e| err("read HEAD's tree", e))?;
            tree_index.read_tree(&tree).map_err(|e| err("read HEAD's tree", e))?;
        }
        let workdir = self.workdir();
        let mut real_index = self.repo.index().map_err(|e| err("open the git index", e))?;
        for path in paths {
            let Some((bytes, mode)) = work_tree_entry(&workdir.join(path))? else {
                // Gone from the work tree: gone from the commit.
                let _ = tree_index.remove_path(path);
                let _ = real_index.remove_path(path);
                continue;
            };
            let blob =
                self.repo.blob(&bytes).map_err(|e| err(format!("store {}", path.display()), e))?;
            let entry = index_entry(path.to_string_lossy().as_bytes(), blob, mode, bytes.len());
            tree_index.add(&entry).map_err(|e| err(format!("stage {}", path.display()), e))?;
            // Keep the real index in step for these paths only, so the file
            // does not show up as changed after ralph's commit.
            real_index.add_path(path).map_err(|e| err(format!("stage {}", path.display()), e))?;
        }
        let tree_id = tree_index.write_tree_to(&self.repo).map_err(|e| err("write tree", e))?;
        if let Some(p) = parent.as_ref().filter(|p| p.tree_id() == tree_id) {
            // Nothing differs from HEAD: no empty commit.
            real_index.write().map_err(|e| err("write the git index", e))?;
            return Ok(p.id());
        }
        let tree = self.repo.find_tree(tree_id).map_err(|e| err("read tree", e))?;
        let sig = self
            .repo
            .signature()
            .or_else(|_| git2::Signature::now("ralph", "ralph@localhost"))
            .map_err(|e| err("make a commit signature", e))?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let id = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .map_err(|e| err("commit", e))?;
        real_index.write().map_err(|e| err("write the git index", e))?;
        Ok(id)
    }

    /// The bytes of `path` (relative to the work tree) in `commit`'s tree;
    /// `None` when it has no such file.
    pub fn blob_in(&self, commit: Option<Oid>, path: &str) -> Option<Vec<u8>> {
        let tree = self.repo.find_commit(commit?).ok()?.tree().ok()?;
        let entry = tree.get_path(Path::new(path)).ok()?;
        Some(self.repo.find_blob(entry.id()).ok()?.content().to_vec())
    }

    /// Puts `path` (relative to the work tree) back in the work tree as
    /// `commit` has it — its content, its executable bit, a link as a link
    /// — or removes it when `commit` has no such file.
    pub fn restore_file(&self, commit: Option<Oid>, path: &str) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let file = self.workdir().join(path);
        let entry = commit
            .and_then(|c| self.repo.find_commit(c).ok())
            .and_then(|c| c.tree().ok())
            .and_then(|t| t.get_path(Path::new(path)).ok());
        let _ = std::fs::remove_file(&file);
        let Some(entry) = entry else { return Ok(()) };
        let blob = self.repo.find_blob(entry.id()).map_err(std::io::Error::other)?;
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if entry.filemode() == 0o120000 {
            let target = String::from_utf8_lossy(blob.content()).into_owned();
            return std::os::unix::fs::symlink(target, &file);
        }
        std::fs::write(&file, blob.content())?;
        if entry.filemode() == 0o100755 {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(())
    }

    /// Adds `path` (relative to the work tree) to `.git/info/exclude`, the
    /// repository's own ignore list that is never committed. Best effort.
    pub fn exclude_locally(&self, path: &Path) {
        let Some(rel) = path.to_str() else { return };
        let line = format!("/{rel}");
        let file = self.repo.path().join("info/exclude");
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.lines().any(|l| l.trim() == line) {
            return;
        }
        let _ = std::fs::create_dir_all(self.repo.path().join("info"));
        let sep = if text.is_empty() || text.ends_with('\n') { "" } else { "\n" };
        let _ = std::fs::write(&file, format!("{text}{sep}# ralph's bookkeeping\n{line}\n"));
    }

    /// A path relative to the work tree, if `path` is inside it.
    pub fn relative(&self, path: &Path) -> Option<PathBuf> {
        let workdir = self.workdir().canonicalize().ok()?;
        let path = path.canonicalize().ok()?;
        path.strip_prefix(workdir).ok().map(Path::to_path_buf)
    }
}

/// A work-tree file's content and git mode; `None` when it is gone (or is
/// a directory, which git does not track as such).
fn work_tree_entry(path: &Path) -> Result<Option<(Vec<u8>, u32)>, GitError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let cannot = |e: std::io::Error| GitError::io(format!("read {}", path.display()), e);
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cannot(e)),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).map_err(cannot)?;
        return Ok(Some((target.as_os_str().as_bytes().to_vec(), 0o120000)));
    }
    if !meta.is_file() {
        return Ok(None);
    }
    let mode = if meta.permissions().mode() & 0o111 != 0 { 0o100755 } else { 0o100644 };
    Ok(Some((std::fs::read(path).map_err(cannot)?, mode)))
}

#[cfg(test)]
mod tests;
