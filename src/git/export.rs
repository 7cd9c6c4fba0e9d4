//! A commit's files written out to a directory of their own, without a
//! checkout, an index or a worktree: what ralph runs a story's check on
//! when it asks whether the check fails before the story's work.

use std::path::Path;

use git2::{ObjectType, Oid, TreeWalkMode, TreeWalkResult};

use super::{GitError, Repo, err};

impl Repo {
    /// The tree id of `commit`.
    pub fn tree_of(&self, commit: Oid) -> Option<Oid> {
        Some(self.repo.find_commit(commit).ok()?.tree_id())
    }

    /// Writes the files of `commit` under `dir` (which must not exist):
    /// blobs with their executable bit, symlinks as symlinks; submodules
    /// are left out (their commits are not in this repository).
    pub fn export_commit(&self, commit: Oid, dir: &Path) -> Result<(), GitError> {
        let tree = self
            .repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| err("read the commit's tree", e))?;
        std::fs::create_dir_all(dir).map_err(|e| io("make", dir, e))?;
        let mut failed: Option<GitError> = None;
        let walked = tree.walk(TreeWalkMode::PreOrder, |parent, entry| {
            let Ok(name) = entry.name() else { return TreeWalkResult::Skip };
            let path = dir.join(parent).join(name);
            let written = match entry.kind() {
                Some(ObjectType::Tree) => {
                    std::fs::create_dir_all(&path).map_err(|e| io("make", &path, e))
                }
                Some(ObjectType::Blob) => self.write_blob(entry.id(), entry.filemode(), &path),
                _ => Ok(()),
            };
            match written {
                Ok(()) => TreeWalkResult::Ok,
                Err(e) => {
                    failed = Some(e);
                    TreeWalkResult::Abort
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        walked.map_err(|e| err("walk the commit's tree", e))
    }

    fn write_blob(&self, id: Oid, mode: i32, path: &Path) -> Result<(), GitError> {
        let blob = self.repo.find_blob(id).map_err(|e| err("read a file of the commit", e))?;
        if mode == i32::from(git2::FileMode::Link) {
            let target = String::from_utf8_lossy(blob.content()).into_owned();
            return std::os::unix::fs::symlink(target, path).map_err(|e| io("link", path, e));
        }
        std::fs::write(path, blob.content()).map_err(|e| io("write", path, e))?;
        if mode == i32::from(git2::FileMode::BlobExecutable) {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| io("make executable", path, e))?;
        }
        Ok(())
    }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> GitError {
    GitError::io(format!("{what} {}", path.display()), e)
}
