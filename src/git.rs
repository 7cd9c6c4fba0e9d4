//! Git through git2, in process: the branch the PRD names, and what each
//! iteration changed (commits, files — untracked ones included).
//!
//! No `git` child processes: a loop that runs all night should spawn the
//! agent and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use git2::{BranchType, ErrorCode, Oid, Repository, StatusOptions};

pub mod remote;
mod worktree;

pub struct Repo {
    repo: Repository,
}

/// A git failure, with what ralph was doing and what the user can do.
#[derive(Debug)]
pub struct GitError {
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for GitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GitError {}

pub(crate) fn err(message: impl Into<String>, e: git2::Error) -> GitError {
    GitError { message: format!("{}: {}", message.into(), e.message()), hint: None }
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
            Ok(repo) if repo.is_bare() => Err(GitError {
                message: format!("{} is inside a bare git repository", dir.display()),
                hint: Some("run ralph in a work tree".into()),
            }),
            Ok(repo) => Ok(Repo { repo }),
            Err(e) if e.code() == ErrorCode::NotFound => Err(GitError {
                message: format!("{} is not inside a git repository", dir.display()),
                hint: Some(
                    "ralph keeps the agent's memory in git history: run `git init` and commit, \
                     or pass -C <project dir>"
                        .into(),
                ),
            }),
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
            return Err(GitError {
                message: format!("branchName {name:?} is not a valid git branch name"),
                hint: Some("fix \"branchName\" in prd.json".into()),
            });
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
                let mut carried = Vec::new();
                if target.id() != head {
                    let mut modified = self.tracked_changes()?;
                    let workdir = self.workdir();
                    for path in carry {
                        let key = path.to_string_lossy();
                        if let Some(i) = modified.iter().position(|m| *m == key) {
                            modified.remove(i);
                            let bytes =
                                std::fs::read(workdir.join(path)).map_err(|e| GitError {
                                    message: format!("cannot read {}: {e}", path.display()),
                                    hint: None,
                                })?;
                            carried.push((path.clone(), bytes));
                        }
                    }
                    if !modified.is_empty() {
                        let mut list =
                            modified.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
                        if modified.len() > 5 {
                            list.push_str(&format!(" and {} more", modified.len() - 5));
                        }
                        return Err(GitError {
                            message: format!(
                                "cannot switch from {} to {name}: uncommitted changes in {list}",
                                current.as_deref().unwrap_or("a detached HEAD")
                            ),
                            hint: Some(format!(
                                "commit or stash them (`git stash`), or check out {name} yourself, then run ralph again"
                            )),
                        });
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
                        GitError {
                            message: format!("cannot check out {name}: {}", e.message()),
                            hint: Some(
                                "move the conflicting untracked files away, then run ralph again"
                                    .into(),
                            ),
                        }
                    })?;
                }
                self.repo.set_head(&refname).map_err(|e| err(format!("switch to {name}"), e))?;
                let workdir = self.workdir();
                for (path, bytes) in &carried {
                    std::fs::write(workdir.join(path), bytes).map_err(|e| GitError {
                        message: format!("cannot write {} back: {e}", path.display()),
                        hint: None,
                    })?;
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
                        return Err(GitError {
                            message: format!(
                                "{} is held by a running process (pid {pid})",
                                lock.display()
                            ),
                            hint: Some(
                                "another git command is at work in this repository: let it finish \
                                 (or end it), then run ralph again"
                                    .into(),
                            ),
                        });
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
                        std::fs::remove_file(&lock).map_err(|e| GitError {
                            message: format!("cannot remove the stale {}: {e}", lock.display()),
                            hint: None,
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
        if let Ok(branches) = self.repo.branches(Some(BranchType::Local)) {
            for (b, _) in branches.flatten() {
                if let (Ok(Some(name)), Some(oid)) = (b.name(), b.get().target()) {
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
        let (Some(&old), Some(&new)) =
            (before.tips.get(run_branch), self.refs().tips.get(run_branch))
        else {
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

    /// Tracked files with staged or unstaged changes.
    fn tracked_changes(&self) -> Result<Vec<String>, GitError> {
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
            let entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode,
                uid: 0,
                gid: 0,
                file_size: bytes.len() as u32,
                id: blob,
                flags: 0,
                flags_extended: 0,
                path: path.to_string_lossy().as_bytes().to_vec(),
            };
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
    let cannot = |e: std::io::Error| GitError {
        message: format!("cannot read {}: {e}", path.display()),
        hint: None,
    };
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
mod tests {
    use super::*;
    use std::fs;

    fn repo_with_commit() -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path()).unwrap();
        fs::write(dir.path().join("a.txt"), "a").unwrap();
        repo.commit_paths(&[Path::new("a.txt")], "init").unwrap();
        (dir, repo)
    }

    #[test]
    fn ralphs_commits_take_only_their_own_paths() {
        let (dir, repo) = repo_with_commit();
        fs::write(dir.path().join("staged.txt"), "the agent's").unwrap();
        let mut index = repo.repo.index().unwrap();
        index.add_path(Path::new("staged.txt")).unwrap();
        index.write().unwrap();
        fs::write(dir.path().join("a.txt"), "ralph's").unwrap();
        let id = repo.commit_paths(&[Path::new("a.txt")], "chore: x").unwrap();
        let tree = repo.repo.find_commit(id).unwrap().tree().unwrap();
        assert!(tree.get_path(Path::new("a.txt")).is_ok());
        assert!(
            tree.get_path(Path::new("staged.txt")).is_err(),
            "the agent's staged file was committed"
        );
        // Still staged, and a.txt is clean.
        let statuses = repo.repo.statuses(None).unwrap();
        let st = |p: &str| statuses.iter().find(|e| e.path().ok() == Some(p)).map(|e| e.status());
        assert_eq!(st("staged.txt"), Some(git2::Status::INDEX_NEW));
        assert_eq!(st("a.txt"), None);
    }

    #[test]
    fn ralphs_commits_keep_deletions_modes_and_links() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, repo) = repo_with_commit();
        fs::write(dir.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("run.sh", dir.path().join("link")).unwrap();
        fs::remove_file(dir.path().join("a.txt")).unwrap();
        let paths = [Path::new("run.sh"), Path::new("link"), Path::new("a.txt")];
        let id = repo.commit_paths(&paths, "feat: x").unwrap();
        let tree = repo.repo.find_commit(id).unwrap().tree().unwrap();
        let mode = |p: &str| tree.get_path(Path::new(p)).map(|e| e.filemode()).ok();
        assert_eq!(mode("run.sh"), Some(0o100755));
        assert_eq!(mode("link"), Some(0o120000));
        assert_eq!(mode("a.txt"), None, "the deleted file is still committed");
        // The work tree is clean afterwards, and committing it again makes
        // no empty commit.
        let after = repo.snapshot().unwrap();
        assert!(after.dirty.is_empty(), "{:?}", after.dirty);
        assert_eq!(repo.commit_paths(&paths[..2], "again").unwrap(), id);
    }

    #[test]
    fn stale_locks_are_cleared_and_held_ones_named() {
        // A sweep in a parallel test would end the child holding the lock.
        let _serial = crate::agent::supervise::serial();
        let (dir, repo) = repo_with_commit();
        let git = dir.path().join(".git");
        let start = std::time::SystemTime::now();
        std::fs::create_dir_all(git.join("refs/heads/ralph")).unwrap();
        for name in ["index.lock", "refs/heads/ralph/x.lock"] {
            fs::write(git.join(name), "").unwrap();
        }
        // Made before the run started: a dead writer's.
        let cleared =
            repo.clear_stale_locks(start + std::time::Duration::from_secs(1), Default::default());
        assert_eq!(cleared.unwrap().len(), 2);
        assert!(!git.join("index.lock").exists());
        fs::write(dir.path().join("a.txt"), "b").unwrap();
        repo.commit_paths(&[Path::new("a.txt")], "after the crash").unwrap();
        // Held by a live process (here: this one's child holding it open).
        fs::write(git.join("index.lock"), "").unwrap();
        let mut holder = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3<index.lock; sleep 30")
            .current_dir(&git)
            .spawn()
            .unwrap();
        let held = || crate::process::holder_of(&git.join("index.lock")).is_some();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !held() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let e = repo
            .clear_stale_locks(std::time::SystemTime::now(), std::time::Duration::from_millis(200))
            .unwrap_err();
        assert!(e.message.contains("index.lock is held by a running process"), "{}", e.message);
        assert!(git.join("index.lock").exists(), "a held lock was removed");
        let _ = holder.kill();
        let _ = holder.wait();
    }

    #[test]
    fn outside_a_repository_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Repo::discover(dir.path()).err().unwrap();
        assert!(e.message.contains("not inside a git repository"), "{}", e.message);
        assert!(e.hint.unwrap().contains("git init"));
    }

    #[test]
    fn changes_count_commits_and_untracked_files() {
        let (dir, repo) = repo_with_commit();
        fs::write(dir.path().join("dirty.txt"), "old").unwrap();
        let before = repo.snapshot().unwrap();
        // Unchanged dirty file is not a change; a new untracked one is.
        fs::write(dir.path().join("new.txt"), "n").unwrap();
        let mid = repo.snapshot().unwrap();
        assert_eq!(repo.changes(&before, &mid).files, ["new.txt"]);
        // A commit of a tracked change counts too.
        fs::write(dir.path().join("a.txt"), "a2").unwrap();
        repo.commit_paths(&[Path::new("a.txt")], "feat: x").unwrap();
        let after = repo.snapshot().unwrap();
        let changes = repo.changes(&before, &after);
        assert_eq!(changes.commits.len(), 1);
        assert_eq!(changes.files, ["a.txt", "new.txt"]);
        // Nothing happened → nothing reported.
        let again = repo.snapshot().unwrap();
        assert_eq!(repo.changes(&after, &again), Changes::default());
    }

    #[test]
    fn branch_is_created_from_head_then_reused() {
        let (_dir, repo) = repo_with_commit();
        let start = repo.current_branch().unwrap();
        assert_eq!(
            repo.ensure_branch("ralph/feature").unwrap(),
            BranchAction::Created { from: start.clone() }
        );
        assert_eq!(repo.current_branch().as_deref(), Some("ralph/feature"));
        assert_eq!(repo.ensure_branch("ralph/feature").unwrap(), BranchAction::AlreadyOn);
        assert_eq!(repo.ensure_branch(&start).unwrap(), BranchAction::SwitchedTo);
        assert!(repo.ensure_branch("bad..name").is_err());
    }

    #[test]
    fn switching_over_uncommitted_changes_is_refused() {
        let (dir, repo) = repo_with_commit();
        let main = repo.current_branch().unwrap();
        repo.ensure_branch("other").unwrap();
        fs::write(dir.path().join("a.txt"), "other").unwrap();
        repo.commit_paths(&[Path::new("a.txt")], "other").unwrap();
        fs::write(dir.path().join("a.txt"), "uncommitted").unwrap();
        let e = repo.ensure_branch(&main).unwrap_err();
        assert!(e.message.contains("uncommitted changes in a.txt"), "{}", e.message);
        assert!(e.hint.unwrap().contains("stash"));
        assert_eq!(fs::read_to_string(dir.path().join("a.txt")).unwrap(), "uncommitted");
    }

    #[test]
    fn edits_to_prd_json_are_carried_across_a_switch() {
        let (dir, repo) = repo_with_commit();
        let main = repo.current_branch().unwrap();
        fs::write(dir.path().join("prd.json"), "old").unwrap();
        repo.commit_paths(&[Path::new("prd.json")], "prd").unwrap();
        repo.ensure_branch("feature").unwrap();
        fs::write(dir.path().join("a.txt"), "feature work").unwrap();
        repo.commit_paths(&[Path::new("a.txt")], "work").unwrap();
        repo.ensure_branch(&main).unwrap();
        // On main, prd.json is edited to name the existing branch.
        fs::write(dir.path().join("prd.json"), "points at feature").unwrap();
        let carry = [PathBuf::from("prd.json")];
        assert_eq!(
            repo.ensure_branch_carrying("feature", &carry).unwrap(),
            BranchAction::SwitchedTo
        );
        assert_eq!(fs::read_to_string(dir.path().join("prd.json")).unwrap(), "points at feature");
        assert_eq!(fs::read_to_string(dir.path().join("a.txt")).unwrap(), "feature work");
        // Other uncommitted changes are still refused.
        repo.ensure_branch_carrying(&main, &carry).unwrap();
        fs::write(dir.path().join("a.txt"), "uncommitted").unwrap();
        assert!(repo.ensure_branch_carrying("feature", &carry).is_err());
    }

    #[test]
    fn unborn_repository_gets_the_branch_on_first_commit() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo::init(dir.path()).unwrap();
        assert!(matches!(repo.ensure_branch("ralph/x").unwrap(), BranchAction::Created { .. }));
        assert_eq!(repo.current_branch().as_deref(), Some("ralph/x"));
    }
}
