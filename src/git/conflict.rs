//! A conflict made into a resolver's starting point: a story's work
//! squashed onto the run branch's tip with git's conflict markers left in
//! the files that conflict, put into the story's worktree; and the checks
//! of what the resolver left (markers, the paths a story changed).

use std::path::{Path, PathBuf};

use git2::{BranchType, Oid};

use super::{GitError, Repo, err};

/// A squash that conflicts, with the markers written in.
#[derive(Debug, Clone)]
pub struct Conflicted {
    /// The tip's tree with the story's changes, and markers where they conflict.
    pub tree: Oid,
    /// The files that conflict.
    pub files: Vec<String>,
    /// The conflicting hunks with a few lines around each, for the prompt
    /// (bounded).
    pub hunks: String,
}

/// Lines of context around a conflict in the prompt's excerpt.
const CONTEXT: usize = 3;
/// The excerpt's size at most.
const HUNKS_MAX: usize = 12_000;

impl Repo {
    /// The paths whose content differs between two commits.
    pub fn changed_paths(&self, from: Oid, to: Oid) -> Result<Vec<String>, GitError> {
        let tree = |oid: Oid| {
            self.repo.find_commit(oid).and_then(|c| c.tree()).map_err(|e| err("read a tree", e))
        };
        let (a, b) = (tree(from)?, tree(to)?);
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&a), Some(&b), None)
            .map_err(|e| err("compare trees", e))?;
        let mut paths: Vec<String> = diff
            .deltas()
            .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        Ok(paths)
    }

    /// A commit's first parent.
    pub fn first_parent(&self, commit: Oid) -> Option<Oid> {
        self.repo.find_commit(commit).ok()?.parent_id(0).ok()
    }

    /// Paths that differ from HEAD in the work tree, untracked ones too.
    pub fn uncommitted_paths(&self) -> Vec<String> {
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true).recurse_untracked_dirs(true).exclude_submodules(true);
        let Ok(statuses) = self.repo.statuses(Some(&mut opts)) else { return Vec::new() };
        statuses.iter().filter_map(|s| s.path().ok().map(str::to_string)).collect()
    }

    /// `tip`'s changes since it forked from `onto`, applied to `onto` as
    /// [`Repo::squash`] does, but with every conflict written out with
    /// markers (`ours` names `onto`'s side, `theirs` the story's). `None`
    /// when nothing conflicts.
    pub fn squash_with_markers(
        &self,
        onto: Oid,
        tip: Oid,
        skip: &[PathBuf],
        labels: (&str, &str),
    ) -> Result<Option<Conflicted>, GitError> {
        let Some((mut merged, conflicts)) = self.conflicting_merge(onto, tip)? else {
            return Ok(None);
        };
        let mut files = Vec::new();
        let mut hunks = String::new();
        for c in conflicts {
            let Some(entry) = c.our.as_ref().or(c.their.as_ref()).or(c.ancestor.as_ref()) else {
                continue;
            };
            let path = String::from_utf8_lossy(&entry.path).into_owned();
            // ralph writes these itself when it merges.
            if skip.iter().any(|s| s.as_os_str() == path.as_str()) {
                let _ = merged.remove_path(Path::new(&path));
                let _ = merged.conflict_remove(Path::new(&path));
                continue;
            }
            let content = self.marked(&c, &path, labels)?;
            let excerpt = excerpt(&String::from_utf8_lossy(&content));
            if hunks.len() < HUNKS_MAX {
                hunks.push_str(&format!("--- {path}\n{excerpt}\n"));
            }
            let blob = self.repo.blob(&content).map_err(|e| err("store a file", e))?;
            let mode = c.our.as_ref().or(c.their.as_ref()).map_or(0o100644, |e| e.mode);
            let _ = merged.conflict_remove(Path::new(&path));
            let entry = super::index_entry(path.as_bytes(), blob, mode, content.len());
            merged.add(&entry).map_err(|e| err("stage", e))?;
            files.push(path);
        }
        if files.is_empty() {
            return Ok(None);
        }
        // ralph's own files as the tip has them.
        let with_skip: Vec<(PathBuf, Vec<u8>)> =
            skip.iter().filter_map(|p| Some((p.clone(), self.file_at(onto, p)?))).collect();
        let tree = merged.write_tree_to(&self.repo).map_err(|e| err("write the merged tree", e))?;
        let tree = self.with_files(tree, &with_skip)?;
        if hunks.len() > HUNKS_MAX {
            hunks = crate::text::tail_chars(&hunks, HUNKS_MAX).to_string();
        }
        files.sort();
        Ok(Some(Conflicted { tree, files, hunks }))
    }

    /// The three-way merge of `tip`'s changes since its fork onto `onto`,
    /// with its conflicts; `None` when nothing conflicts.
    fn conflicting_merge(
        &self,
        onto: Oid,
        tip: Oid,
    ) -> Result<Option<(git2::Index, Vec<git2::IndexConflict>)>, GitError> {
        let base = self.repo.merge_base(onto, tip).map_err(|e| err("find the merge base", e))?;
        let tree = |oid: Oid| {
            self.repo.find_commit(oid).and_then(|c| c.tree()).map_err(|e| err("read a tree", e))
        };
        let (base_tree, onto_tree, tip_tree) = (tree(base)?, tree(onto)?, tree(tip)?);
        let merged = self
            .repo
            .merge_trees(&base_tree, &onto_tree, &tip_tree, None)
            .map_err(|e| err("merge", e))?;
        if !merged.has_conflicts() {
            return Ok(None);
        }
        let conflicts: Vec<git2::IndexConflict> = merged
            .conflicts()
            .map_err(|e| err("read the conflicts", e))?
            .collect::<Result<_, _>>()
            .map_err(|e| err("read the conflicts", e))?;
        Ok(Some((merged, conflicts)))
    }

    /// One conflicting file with git's markers: merged line by line when
    /// all three sides have it; else (added on both sides, or changed on
    /// one and deleted on the other) both versions, marked as git marks
    /// them.
    fn marked(
        &self,
        c: &git2::IndexConflict,
        path: &str,
        labels: (&str, &str),
    ) -> Result<Vec<u8>, GitError> {
        if let (Some(a), Some(o), Some(t)) = (&c.ancestor, &c.our, &c.their) {
            let mut opts = git2::MergeFileOptions::new();
            opts.our_label(labels.0).their_label(labels.1).ancestor_label("base");
            let r = self
                .repo
                .merge_file_from_index(a, o, t, Some(&mut opts))
                .map_err(|e| err(format!("merge {path}"), e))?;
            return Ok(r.content().to_vec());
        }
        let side = |e: &Option<git2::IndexEntry>| {
            e.as_ref()
                .and_then(|e| self.repo.find_blob(e.id).ok())
                .map(|b| b.content().to_vec())
                .unwrap_or_default()
        };
        let mut v = format!("<<<<<<< {}\n", labels.0).into_bytes();
        v.extend(side(&c.our));
        if !v.ends_with(b"\n") {
            v.push(b'\n');
        }
        v.extend(b"=======\n");
        v.extend(side(&c.their));
        if !v.ends_with(b"\n") {
            v.push(b'\n');
        }
        v.extend(format!(">>>>>>> {}\n", labels.1).into_bytes());
        Ok(v)
    }

    /// In a story's worktree: its branch moved to `tip` and checked out,
    /// and `tree`'s files (the squash with its markers) written over it,
    /// uncommitted — what a resolver starts from.
    pub fn start_resolution(&self, branch: &str, tip: Oid, tree: Oid) -> Result<(), GitError> {
        let commit = self.repo.find_commit(tip).map_err(|e| err("read the tip", e))?;
        // Detached first: git does not move the branch HEAD is on.
        self.repo.set_head_detached(tip).map_err(|e| err("detach HEAD", e))?;
        self.repo.branch(branch, &commit, true).map_err(|e| err(format!("move {branch}"), e))?;
        let mut opts = git2::build::CheckoutBuilder::new();
        opts.force().remove_untracked(false);
        self.repo
            .checkout_tree(commit.as_object(), Some(&mut opts))
            .map_err(|e| err("check out the tip", e))?;
        let reference = self
            .repo
            .find_branch(branch, BranchType::Local)
            .map_err(|e| err(format!("find {branch}"), e))?;
        let name = reference.get().name().unwrap_or_default().to_string();
        self.repo.set_head(&name).map_err(|e| err(format!("check out {branch}"), e))?;
        let tree = self.repo.find_tree(tree).map_err(|e| err("read a tree", e))?;
        let mut opts = git2::build::CheckoutBuilder::new();
        opts.force();
        self.repo
            .checkout_tree(tree.as_object(), Some(&mut opts))
            .map_err(|e| err("write the conflicts", e))?;
        // The index stays the tip's: the squash shows as changes to commit.
        let mut index = self.repo.index().map_err(|e| err("open the git index", e))?;
        index
            .read_tree(&commit.tree().map_err(|e| err("read a tree", e))?)
            .map_err(|e| err("reset the index", e))?;
        index.write().map_err(|e| err("write the git index", e))
    }
}

/// The conflict regions of a file's text, with a few lines around each.
pub fn excerpt(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut keep = vec![false; lines.len()];
    let mut inside = false;
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("<<<<<<<") {
            inside = true;
        }
        if inside {
            let from = i.saturating_sub(CONTEXT);
            let to = (i + CONTEXT + 1).min(lines.len());
            keep[from..to].iter_mut().for_each(|k| *k = true);
        }
        if l.starts_with(">>>>>>>") {
            inside = false;
        }
    }
    let mut out = String::new();
    let mut gap = false;
    for (i, l) in lines.iter().enumerate() {
        if keep[i] {
            if gap && !out.is_empty() {
                out.push_str("...\n");
            }
            out.push_str(l);
            out.push('\n');
            gap = false;
        } else {
            gap = true;
        }
    }
    out
}

/// The lines of `text` that are conflict markers git leaves (1-based), so
/// a resolution that left any is refused. `labelled` only: the opening and
/// closing markers with their label, which no ordinary file has (a
/// Markdown heading may well be underlined with seven `=`).
pub fn marker_lines(text: &str, labelled: bool) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let opening = l.starts_with("<<<<<<< ") || l.starts_with(">>>>>>> ");
            let bare = *l == "<<<<<<<"
                || *l == ">>>>>>>"
                || l.trim_end() == "======="
                || l.starts_with("||||||| ");
            opening || (!labelled && bare)
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn markers_are_found_and_only_markers() {
        let text = "a\n<<<<<<< run branch\nx\n=======\ny\n>>>>>>> US-002\nb\n";
        assert_eq!(marker_lines(text, false), [2, 4, 6]);
        assert_eq!(marker_lines(text, true), [2, 6]);
        assert!(marker_lines("a\n== heading ==\n<<< not one\n", false).is_empty());
        assert_eq!(marker_lines("=======\n", false), [1]);
        // A heading underlined with seven `=` is only a marker in a file that conflicted.
        assert!(marker_lines("Title\n=======\n", true).is_empty());
        let ex = excerpt(&format!("{}{text}{}", "p\n".repeat(10), "q\n".repeat(10)));
        assert!(ex.starts_with("p\np\na\n<<<<<<< run branch\n"), "{ex}");
        assert!(ex.ends_with(">>>>>>> US-002\nb\nq\nq\n"), "{ex}");
        let two =
            excerpt(&format!("<<<<<<< a\n=======\n>>>>>>> b\n{}<<<<<<< c\n", "x\n".repeat(9)));
        assert!(two.contains("x\n...\nx\n"), "a gap between two regions: {two}");
    }

    fn commit(repo: &Repo, root: &Path, files: &[(&str, &str)], msg: &str) -> Oid {
        for (f, t) in files {
            fs::write(root.join(f), t).unwrap();
        }
        let paths: Vec<&Path> = files.iter().map(|(f, _)| Path::new(*f)).collect();
        repo.commit_paths(&paths, msg).unwrap()
    }

    #[test]
    fn a_conflicting_squash_is_written_with_markers_and_ralphs_files_as_the_tip_has_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = Repo::init(&root).unwrap();
        let base = commit(&repo, &root, &[("a.txt", "one\ntwo\n"), ("prd.json", "{}\n")], "base");
        let story = commit(
            &repo,
            &root,
            &[("a.txt", "one\nstory\n"), ("prd.json", "{\"s\":1}\n"), ("new.txt", "n\n")],
            "story",
        );
        // The tip, cut from the base: the same line changed, and prd.json too.
        repo.repo.set_head_detached(base).unwrap();
        let mut o = git2::build::CheckoutBuilder::new();
        o.force();
        repo.repo.checkout_head(Some(&mut o)).unwrap();
        let tip =
            commit(&repo, &root, &[("a.txt", "one\ntip\n"), ("prd.json", "{\"t\":1}\n")], "tip");
        let skip = [PathBuf::from("prd.json")];
        let c =
            repo.squash_with_markers(tip, story, &skip, ("run branch", "US-002")).unwrap().unwrap();
        assert_eq!(c.files, ["a.txt"]);
        let tree = repo.repo.find_tree(c.tree).unwrap();
        let blob = |p: &str| {
            let id = tree.get_path(Path::new(p)).unwrap().id();
            String::from_utf8(repo.repo.find_blob(id).unwrap().content().to_vec()).unwrap()
        };
        let a = blob("a.txt");
        assert!(a.contains("<<<<<<< run branch\ntip\n=======\nstory\n>>>>>>> US-002"), "{a}");
        assert_eq!(blob("prd.json"), "{\"t\":1}\n");
        assert_eq!(blob("new.txt"), "n\n");
        assert!(
            c.hunks.contains("--- a.txt") && c.hunks.contains("<<<<<<< run branch"),
            "{}",
            c.hunks
        );
        assert_eq!(repo.changed_paths(base, story).unwrap(), ["a.txt", "new.txt", "prd.json"]);
        // Nothing conflicts: nothing to resolve.
        assert!(repo.squash_with_markers(story, story, &skip, ("a", "b")).unwrap().is_none());
    }
}
