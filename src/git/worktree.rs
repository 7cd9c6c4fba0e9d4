//! Worktrees and merging without a checkout, for parallel runs: a linked
//! worktree per story, a squash merge computed in memory, ralph's own
//! files written into the merged tree, and the run branch moved by
//! compare-and-swap — so the main work tree is only ever advanced, never
//! checked out over.

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid, Repository};

use super::{GitError, Repo, err};

/// The mark, in a worktree's git directory, of a worktree made to the end.
const READY: &str = "ralph-ready";

impl Repo {
    /// A branch's tip.
    pub fn branch_tip(&self, branch: &str) -> Option<Oid> {
        self.repo.find_branch(branch, BranchType::Local).ok()?.get().target()
    }

    /// A linked worktree at `path`, named `name`, on `branch`: the branch
    /// is made at `from` unless it exists (a story's earlier work is then
    /// its starting point). Returns the worktree's repository.
    pub fn add_worktree(
        &self,
        name: &str,
        path: &Path,
        branch: &str,
        from: Oid,
    ) -> Result<Repo, GitError> {
        let reference = match self.repo.find_branch(branch, BranchType::Local) {
            Ok(b) => b.into_reference(),
            Err(_) => {
                let commit = self.repo.find_commit(from).map_err(|e| err("read the tip", e))?;
                self.repo
                    .branch(branch, &commit, false)
                    .map_err(|e| err(format!("create {branch}"), e))?
                    .into_reference()
            }
        };
        // A worktree of that name left by a crash is replaced.
        self.remove_worktree(name, path);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut opts = git2::WorktreeAddOptions::new();
        opts.reference(Some(&reference));
        let wt = self
            .repo
            .worktree(name, path, Some(&opts))
            .map_err(|e| err(format!("add the worktree {}", path.display()), e))?;
        let repo = Repository::open_from_worktree(&wt)
            .map_err(|e| err(format!("open the worktree {}", path.display()), e))?;
        // Made to the end (a kill during the checkout leaves files missing
        // or half-written): only a worktree with this mark is reused.
        std::fs::write(repo.path().join(READY), b"")
            .map_err(|e| GitError::io("mark the worktree ready", e))?;
        Ok(Repo { repo })
    }

    /// This linked worktree was made to the end by [`Repo::add_worktree`].
    pub fn worktree_ready(&self) -> bool {
        self.repo.is_worktree() && self.repo.path().join(READY).exists()
    }

    /// Removes a linked worktree and its folder (best effort: what is
    /// already gone is fine).
    pub fn remove_worktree(&self, name: &str, path: &Path) {
        if let Ok(wt) = self.repo.find_worktree(name) {
            let mut opts = git2::WorktreePruneOptions::new();
            opts.valid(true).locked(true).working_tree(true);
            let _ = wt.prune(Some(&mut opts));
        }
        let _ = std::fs::remove_dir_all(path);
        // A kill while git made the worktree leaves its folder under
        // `.git/worktrees/` half-written: git cannot open it to prune it,
        // and will not make a worktree of that name while it is there.
        if !matches!(name, "" | "." | "..") && !name.contains(['/', '\\']) {
            let _ = std::fs::remove_dir_all(self.repo.commondir().join("worktrees").join(name));
        }
    }

    /// The names of the linked worktrees whose names start with `prefix`.
    pub fn worktrees(&self, prefix: &str) -> Vec<String> {
        self.repo
            .worktrees()
            .map(|names| {
                names
                    .iter()
                    .flatten()
                    .flatten()
                    .filter(|n| n.starts_with(prefix))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Deletes a local branch (best effort).
    pub fn delete_branch(&self, branch: &str) {
        if let Ok(mut b) = self.repo.find_branch(branch, BranchType::Local) {
            let _ = b.delete();
        }
    }

    /// A file's bytes in a commit's tree.
    pub fn file_at(&self, commit: Oid, path: &Path) -> Option<Vec<u8>> {
        let tree = self.repo.find_commit(commit).ok()?.tree().ok()?;
        let entry = tree.get_path(path).ok()?;
        Some(self.repo.find_blob(entry.id()).ok()?.content().to_vec())
    }

    /// The changes `tip` made since it forked from `onto` (their merge
    /// base), applied to `onto`'s tree: a squash merge, in memory. Paths in
    /// `skip` (prd.json, progress.txt: ralph writes those) keep `onto`'s
    /// version. `Ok(Err(paths))` names the paths that conflict.
    pub fn squash(
        &self,
        onto: Oid,
        tip: Oid,
        skip: &[PathBuf],
    ) -> Result<Result<Oid, Vec<String>>, GitError> {
        let base = self.repo.merge_base(onto, tip).map_err(|e| err("find the merge base", e))?;
        let tree = |oid: Oid| {
            self.repo.find_commit(oid).and_then(|c| c.tree()).map_err(|e| err("read a tree", e))
        };
        let (base_tree, onto_tree, tip_tree) = (tree(base)?, tree(onto)?, tree(tip)?);
        // Their side, with ralph's files as they were at the fork: no change
        // there can conflict or be merged.
        let mut theirs = git2::Index::new().map_err(|e| err("make an index", e))?;
        theirs.read_tree(&tip_tree).map_err(|e| err("read a tree", e))?;
        for path in skip {
            match base_tree.get_path(path) {
                Ok(entry) => {
                    let path = path.to_string_lossy();
                    let mode = entry.filemode() as u32;
                    let e = super::index_entry(path.as_bytes(), entry.id(), mode, 0);
                    theirs.add(&e).map_err(|e| err("stage", e))?;
                }
                Err(_) => {
                    let _ = theirs.remove_path(path);
                }
            }
        }
        let theirs_id = theirs.write_tree_to(&self.repo).map_err(|e| err("write a tree", e))?;
        let theirs_tree = self.repo.find_tree(theirs_id).map_err(|e| err("read a tree", e))?;
        let mut merged = self
            .repo
            .merge_trees(&base_tree, &onto_tree, &theirs_tree, None)
            .map_err(|e| err("merge", e))?;
        if merged.has_conflicts() {
            let mut paths: Vec<String> = merged
                .conflicts()
                .map_err(|e| err("read the conflicts", e))?
                .flatten()
                .filter_map(|c| {
                    let e = c.our.or(c.their).or(c.ancestor)?;
                    String::from_utf8(e.path).ok()
                })
                .collect();
            paths.sort();
            paths.dedup();
            return Ok(Err(paths));
        }
        let id = merged.write_tree_to(&self.repo).map_err(|e| err("write the merged tree", e))?;
        Ok(Ok(id))
    }

    /// A tree with `files` (relative path → new bytes) put in it.
    pub fn with_files(&self, tree: Oid, files: &[(PathBuf, Vec<u8>)]) -> Result<Oid, GitError> {
        let tree = self.repo.find_tree(tree).map_err(|e| err("read a tree", e))?;
        let mut index = git2::Index::new().map_err(|e| err("make an index", e))?;
        index.read_tree(&tree).map_err(|e| err("read a tree", e))?;
        for (path, bytes) in files {
            let blob = self.repo.blob(bytes).map_err(|e| err("store a file", e))?;
            let path = path.to_string_lossy();
            let e = super::index_entry(path.as_bytes(), blob, 0o100644, bytes.len());
            index.add(&e).map_err(|e| err("stage", e))?;
        }
        index.write_tree_to(&self.repo).map_err(|e| err("write a tree", e))
    }

    /// A commit of `tree` on top of `parent`, not yet on any branch.
    pub fn commit_tree(&self, tree: Oid, parent: Oid, message: &str) -> Result<Oid, GitError> {
        let tree = self.repo.find_tree(tree).map_err(|e| err("read a tree", e))?;
        let parent = self.repo.find_commit(parent).map_err(|e| err("read the tip", e))?;
        let sig = self
            .repo
            .signature()
            .or_else(|_| git2::Signature::now("ralph", "ralph@localhost"))
            .map_err(|e| err("make a commit signature", e))?;
        self.repo.commit(None, &sig, &sig, message, &tree, &[&parent]).map_err(|e| err("commit", e))
    }

    /// Moves `branch` from `expected` to `new`, only if it is still at
    /// `expected` (a compare-and-swap on the ref).
    pub fn move_branch(&self, branch: &str, expected: Oid, new: Oid) -> Result<(), GitError> {
        let name = format!("refs/heads/{branch}");
        self.repo
            .reference_matching(&name, new, true, expected, &format!("ralph: merge into {branch}"))
            .map(|_| ())
            .map_err(|e| err(format!("move {branch}"), e))
    }

    /// Brings the work tree from `old`'s content to `new`'s for the paths
    /// that differ between them, when the work tree still holds `old`'s
    /// version there (nobody edited it): what a checkout does, without
    /// touching anything a person changed. The index follows. Returns the
    /// paths left alone. Running it again is harmless.
    pub fn advance_work_tree(&self, old: Oid, new: Oid) -> Result<Vec<String>, GitError> {
        let tree = |oid: Oid| {
            self.repo.find_commit(oid).and_then(|c| c.tree()).map_err(|e| err("read a tree", e))
        };
        let (old_tree, new_tree) = (tree(old)?, tree(new)?);
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old_tree), Some(&new_tree), None)
            .map_err(|e| err("compare trees", e))?;
        let workdir = self.workdir();
        let mut index = self.repo.index().map_err(|e| err("open the git index", e))?;
        // The repository keeps the index it first read: what is on disk now counts.
        index.read(false).map_err(|e| err("read the git index", e))?;
        let mut skipped = Vec::new();
        let hash = |p: &Path| -> Option<Oid> {
            let bytes = std::fs::read(p).ok()?;
            Oid::hash_object(git2::ObjectType::Blob, &bytes).ok()
        };
        for delta in diff.deltas() {
            let Some(path) = delta.new_file().path().or_else(|| delta.old_file().path()) else {
                continue;
            };
            let file = workdir.join(path);
            let now = hash(&file);
            let old_id = Some(delta.old_file().id()).filter(|id| !id.is_zero());
            let new_id = Some(delta.new_file().id()).filter(|id| !id.is_zero());
            if now == new_id {
                // The file is there already (the agent's own copy): the index follows.
                let _ = match new_id {
                    Some(_) => index.add_path(path),
                    None => index.remove_path(path),
                };
                continue;
            }
            if now != old_id {
                skipped.push(path.display().to_string());
                continue;
            }
            match new_id {
                Some(id) => {
                    let blob = self.repo.find_blob(id).map_err(|e| err("read a file", e))?;
                    if let Some(dir) = file.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    // Whole or not at all: a kill halfway must not leave a
                    // file that looks like a person's edit to the next try.
                    crate::store::write_replace(&file, blob.content())
                        .map_err(|e| GitError::io(format!("write {}", file.display()), e))?;
                    if delta.new_file().mode() == git2::FileMode::BlobExecutable {
                        use std::os::unix::fs::PermissionsExt;
                        let _ =
                            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755));
                    }
                    index.add_path(path).map_err(|e| err("stage", e))?;
                }
                None => {
                    let _ = std::fs::remove_file(&file);
                    let _ = index.remove_path(path);
                }
            }
        }
        index.write().map_err(|e| err("write the git index", e))?;
        Ok(skipped)
    }

    /// Puts the worktree's HEAD, index and files at `commit` (detached),
    /// whatever was there: where the merged tree is gated. The worktree is
    /// no longer one to reuse for its branch ([`Repo::add_worktree`]'s mark
    /// goes first): a kill between the checkout and the detach would leave
    /// HEAD on the branch with another commit's files (other stories'
    /// progress entries and passes), which the next turn would take for
    /// the story's own.
    pub fn checkout_detached(&self, commit: Oid) -> Result<(), GitError> {
        let c = self.repo.find_commit(commit).map_err(|e| err("read the commit", e))?;
        match std::fs::remove_file(self.repo.path().join(READY)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(GitError::io("unmark the worktree", e));
            }
            _ => {}
        }
        let mut opts = git2::build::CheckoutBuilder::new();
        opts.force();
        self.repo.checkout_tree(c.as_object(), Some(&mut opts)).map_err(|e| err("check out", e))?;
        self.repo.set_head_detached(commit).map_err(|e| err("detach HEAD", e))
    }

    /// Commits everything changed or new in the work tree (what `.gitignore`
    /// ignores aside) on HEAD's branch; `None` when there was nothing.
    pub fn commit_all(&self, message: &str) -> Result<Option<Oid>, GitError> {
        let mut index = self.repo.index().map_err(|e| err("open the git index", e))?;
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .map_err(|e| err("stage the work tree", e))?;
        index.update_all(["*"], None).map_err(|e| err("stage the work tree", e))?;
        index.write().map_err(|e| err("write the git index", e))?;
        let tree = index.write_tree().map_err(|e| err("write a tree", e))?;
        let head = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        if head.as_ref().is_some_and(|h| h.tree_id() == tree) {
            return Ok(None);
        }
        let tree = self.repo.find_tree(tree).map_err(|e| err("read a tree", e))?;
        let sig = self
            .repo
            .signature()
            .or_else(|_| git2::Signature::now("ralph", "ralph@localhost"))
            .map_err(|e| err("make a commit signature", e))?;
        let parents: Vec<&git2::Commit> = head.iter().collect();
        self.repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .map(Some)
            .map_err(|e| err("commit", e))
    }
}

impl Repo {
    /// A commit that only carries `message` (its tree is empty), on top of
    /// `parent`: how a claim or the run's shared state is written as a ref.
    pub fn note_commit(&self, message: &str, parent: Option<Oid>) -> Result<Oid, GitError> {
        let tree = git2::Index::new()
            .and_then(|mut i| i.write_tree_to(&self.repo))
            .map_err(|e| err("write an empty tree", e))?;
        let tree = self.repo.find_tree(tree).map_err(|e| err("read a tree", e))?;
        let sig = git2::Signature::now("ralph", "ralph@localhost")
            .map_err(|e| err("make a commit signature", e))?;
        let parent = match parent {
            Some(p) => Some(self.repo.find_commit(p).map_err(|e| err("read a commit", e))?),
            None => None,
        };
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        self.repo.commit(None, &sig, &sig, message, &tree, &parents).map_err(|e| err("commit", e))
    }

    /// A commit's message.
    pub fn message(&self, commit: Oid) -> Option<String> {
        Some(self.repo.find_commit(commit).ok()?.message().ok()?.to_string())
    }

    /// When a commit was made (its committer's time).
    pub fn commit_time(&self, commit: Oid) -> Option<chrono::DateTime<chrono::Utc>> {
        let t = self.repo.find_commit(commit).ok()?.time();
        chrono::DateTime::from_timestamp(t.seconds(), 0)
    }

    /// The refs under `prefix` (`refs/remotes/origin-ralph/…`), by full name.
    pub fn refs_under(&self, prefix: &str) -> Vec<(String, Oid)> {
        let Ok(refs) = self.repo.references_glob(&format!("{prefix}*")) else { return Vec::new() };
        refs.flatten().filter_map(|r| Some((r.name().ok()?.to_string(), r.target()?))).collect()
    }

    /// A ref's target.
    pub fn ref_target(&self, name: &str) -> Option<Oid> {
        self.repo.find_reference(name).ok()?.target()
    }

    /// Makes (or moves) the local branch `name` to `at`.
    pub fn set_branch(&self, name: &str, at: Oid) -> Result<(), GitError> {
        let c = self.repo.find_commit(at).map_err(|e| err("read a commit", e))?;
        self.repo.branch(name, &c, true).map(|_| ()).map_err(|e| err(format!("create {name}"), e))
    }

    /// Where two commits' histories meet.
    pub fn merge_base(&self, a: Oid, b: Oid) -> Option<Oid> {
        self.repo.merge_base(a, b).ok()
    }

    /// Keeps `commit` reachable under `name` (a ref outside refs/heads, so
    /// no branch list fills up with it).
    pub fn keep_ref(&self, name: &str, commit: Oid, why: &str) -> Result<(), GitError> {
        self.repo
            .reference(name, commit, true, why)
            .map(|_| ())
            .map_err(|e| err(format!("keep {name}"), e))
    }

    /// `commit` is part of `branch`'s history.
    pub fn contains(&self, branch_tip: Oid, commit: Oid) -> bool {
        branch_tip == commit || self.repo.graph_descendant_of(branch_tip, commit).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn repo() -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = Repo::init(&root).unwrap();
        for (f, t) in [("a.txt", "one\ntwo\nthree\n"), ("prd.json", "{}\n")] {
            fs::write(root.join(f), t).unwrap();
        }
        repo.commit_paths(&[Path::new("a.txt"), Path::new("prd.json")], "init").unwrap();
        (dir, repo)
    }

    /// Commits `files` on top of `parent` (no branch moves).
    fn commit_on(repo: &Repo, parent: Oid, files: &[(&str, &str)]) -> Oid {
        let tree = repo.repo.find_commit(parent).unwrap().tree_id();
        let files: Vec<(PathBuf, Vec<u8>)> =
            files.iter().map(|(p, t)| (PathBuf::from(p), t.as_bytes().to_vec())).collect();
        let tree = repo.with_files(tree, &files).unwrap();
        repo.commit_tree(tree, parent, "c").unwrap()
    }

    #[test]
    fn a_squash_applies_a_storys_changes_and_names_the_files_that_conflict() {
        let (_d, repo) = repo();
        let base = repo.head().unwrap();
        let skip = [PathBuf::from("prd.json")];
        // Another story changed the first line meanwhile; this one the last.
        let tip = commit_on(&repo, base, &[("a.txt", "ONE\ntwo\nthree\n")]);
        let story =
            commit_on(&repo, base, &[("a.txt", "one\ntwo\nTHREE\n"), ("prd.json", "{\"x\":1}\n")]);
        let tree = repo.squash(tip, story, &skip).unwrap().unwrap();
        let merged = repo.commit_tree(tree, tip, "m").unwrap();
        assert_eq!(repo.file_at(merged, Path::new("a.txt")).unwrap(), b"ONE\ntwo\nTHREE\n");
        // ralph's own file keeps the tip's version: ralph writes it itself.
        assert_eq!(repo.file_at(merged, Path::new("prd.json")).unwrap(), b"{}\n");
        // The same line changed on both sides: a conflict, by name.
        let other = commit_on(&repo, base, &[("a.txt", "uno\ntwo\nthree\n")]);
        assert_eq!(repo.squash(tip, other, &skip).unwrap(), Err(vec!["a.txt".to_string()]));
        // Both sides changing prd.json is never a conflict.
        let tip2 = commit_on(&repo, tip, &[("prd.json", "{\"y\":2}\n")]);
        assert!(repo.squash(tip2, story, &skip).unwrap().is_ok());
    }

    #[test]
    fn the_run_branch_moves_only_from_where_the_merge_started() {
        let (_d, repo) = repo();
        let branch = repo.current_branch().unwrap();
        let base = repo.head().unwrap();
        let a = commit_on(&repo, base, &[("b.txt", "b")]);
        let b = commit_on(&repo, base, &[("c.txt", "c")]);
        repo.move_branch(&branch, base, a).unwrap();
        // Someone else moved it: the swap is refused, nothing changes.
        assert!(repo.move_branch(&branch, base, b).is_err());
        assert_eq!(repo.branch_tip(&branch), Some(a));
        assert!(repo.contains(a, base) && !repo.contains(base, a));
    }

    #[test]
    fn the_work_tree_follows_a_merge_but_keeps_what_a_person_changed() {
        let (d, repo) = repo();
        let root = d.path().canonicalize().unwrap();
        let branch = repo.current_branch().unwrap();
        let base = repo.head().unwrap();
        let next = commit_on(
            &repo,
            base,
            &[("a.txt", "merged\n"), ("new/n.txt", "n"), ("prd.json", "{\"p\":1}\n")],
        );
        fs::write(root.join("prd.json"), "{\"mine\":true}\n").unwrap();
        repo.move_branch(&branch, base, next).unwrap();
        let skipped = repo.advance_work_tree(base, next).unwrap();
        assert_eq!(skipped, ["prd.json"]);
        assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "merged\n");
        assert_eq!(fs::read_to_string(root.join("new/n.txt")).unwrap(), "n");
        assert_eq!(fs::read_to_string(root.join("prd.json")).unwrap(), "{\"mine\":true}\n");
        // Only the person's edit shows as a change; running it again is harmless.
        let statuses: Vec<String> = repo
            .repo
            .statuses(None)
            .unwrap()
            .iter()
            .filter_map(|e| e.path().ok().map(str::to_string))
            .collect();
        assert_eq!(statuses, ["prd.json"]);
        assert_eq!(repo.advance_work_tree(base, next).unwrap(), ["prd.json"]);
    }

    #[test]
    fn a_worktree_is_made_on_its_branch_reused_with_it_and_removed_with_its_folder() {
        let (d, repo) = repo();
        let root = d.path().canonicalize().unwrap();
        let tip = repo.head().unwrap();
        let path = root.join(".git/ralph/worktrees/US-1");
        let wt = repo.add_worktree("ralph-US-1", &path, "main--US-1", tip).unwrap();
        assert_eq!(wt.current_branch().as_deref(), Some("main--US-1"));
        assert!(wt.worktree_ready() && !repo.worktree_ready());
        assert_eq!(fs::read_to_string(path.join("a.txt")).unwrap(), "one\ntwo\nthree\n");
        fs::write(path.join("w.txt"), "work").unwrap();
        let work = wt.commit_all("wip").unwrap().unwrap();
        assert_eq!(wt.commit_all("again").unwrap(), None, "nothing left to commit");
        assert_eq!(repo.worktrees("ralph-"), ["ralph-US-1"]);
        // Made again (a crash left it): on the branch, with the work on it.
        let wt = repo.add_worktree("ralph-US-1", &path, "main--US-1", tip).unwrap();
        assert!(path.join("w.txt").exists());
        // A merged tree checked out there for its gate: never reused as the
        // branch's, even were a kill to leave HEAD on the branch.
        wt.checkout_detached(tip).unwrap();
        assert!(!wt.worktree_ready() && !path.join("w.txt").exists());
        let wt = repo.add_worktree("ralph-US-1", &path, "main--US-1", tip).unwrap();
        assert!(wt.worktree_ready() && path.join("w.txt").exists());
        assert_eq!(repo.branch_tip("main--US-1"), Some(work));
        repo.remove_worktree("ralph-US-1", &path);
        repo.delete_branch("main--US-1");
        assert!(!path.exists());
        assert!(repo.worktrees("ralph-").is_empty());
        assert_eq!(repo.branch_tip("main--US-1"), None);
    }

    /// kill -9 while git was making the worktree: its folder under
    /// `.git/worktrees/` is there, half-written, and git cannot open it.
    #[test]
    fn a_worktree_a_kill_left_half_made_is_made_again() {
        let (d, repo) = repo();
        let root = d.path().canonicalize().unwrap();
        let tip = repo.head().unwrap();
        let path = root.join(".git/ralph/worktrees/US-4");
        let meta = root.join(".git/worktrees/ralph-US-4");
        fs::create_dir_all(&meta).unwrap();
        fs::write(meta.join("HEAD"), "ref: refs/heads/main--US-4\n").unwrap();
        let wt = repo.add_worktree("ralph-US-4", &path, "main--US-4", tip).unwrap();
        assert_eq!(wt.current_branch().as_deref(), Some("main--US-4"));
        assert!(wt.worktree_ready());
        assert_eq!(repo.worktrees("ralph-"), ["ralph-US-4"]);
    }
}
