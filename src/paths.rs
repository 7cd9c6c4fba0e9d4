//! Where ralph's files are for one project: the project directory, the
//! PRD and what lives beside it (ralph.sh's layout), and the store (state
//! in the git directory, the user's files in the work tree's `.ralph/`).

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::store::Store;

/// Where ralph's files are for one project.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The project directory (where the agent runs).
    pub project: PathBuf,
    pub prd: PathBuf,
    /// The folder of prd.json: progress.txt, archive/ and .last-branch live here.
    pub prd_dir: PathBuf,
    pub progress: PathBuf,
    pub last_branch: PathBuf,
    pub store: Store,
}

impl Paths {
    /// `--prd` if given; else the project is found the way git finds its
    /// repository: the nearest folder, from `dir` up to the top of its git
    /// repository, that holds `prd.json` (or `scripts/ralph/prd.json`, the
    /// ralph.sh layout). Without one, `dir` itself is the project and its
    /// `prd.json` (missing) the PRD: [`Paths::require_prd`] says so. Paths
    /// are absolute, so the prompt can name them for an agent whatever its
    /// working directory.
    pub fn resolve(dir: &Path, prd: Option<&Path>) -> Result<Paths, Error> {
        let dir = dir.canonicalize().map_err(|e| {
            Error::Usage(format!("cannot use {} as the project directory: {e}", dir.display()))
        })?;
        let (project, prd) = match prd {
            Some(p) if p.is_absolute() => (dir, p.to_path_buf()),
            Some(p) => {
                let p = std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| dir.join(p));
                (dir, p)
            }
            None => find_project(&dir).unwrap_or_else(|| {
                let prd = dir.join("prd.json");
                (dir, prd)
            }),
        };
        let prd_dir = prd.parent().map(Path::to_path_buf).unwrap_or_else(|| project.clone());
        Ok(Paths {
            progress: prd_dir.join("progress.txt"),
            last_branch: prd_dir.join(".last-branch"),
            store: Store::for_project(&project, &prd),
            prd_dir,
            prd,
            project,
        })
    }
}

impl Paths {
    /// The PRD must be there before anything is run or created.
    pub fn require_prd(&self) -> Result<(), Error> {
        if std::fs::symlink_metadata(&self.prd).is_ok() {
            return Ok(());
        }
        Err(Error::Usage(format!(
            "no prd.json in {} or above; `ralph init` creates one, or pass --prd PATH",
            self.project.display()
        )))
    }
}

/// The nearest folder from `dir` up that holds `prd.json` or
/// `scripts/ralph/prd.json`, not leaving the git repository `dir` is in
/// (outside one, only `dir` itself is looked at).
fn find_project(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let top = git2::Repository::discover(dir)
        .ok()
        .and_then(|r| r.workdir().and_then(|w| w.canonicalize().ok()));
    let mut at = Some(dir);
    while let Some(d) = at {
        for candidate in [d.join("prd.json"), d.join("scripts/ralph/prd.json")] {
            if std::fs::symlink_metadata(&candidate).is_ok() {
                return Some((d.to_path_buf(), candidate));
            }
        }
        if top.as_deref().is_none_or(|t| d == t) {
            return None;
        }
        at = d.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_is_found_upwards_within_the_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join("app/tests/unit")).unwrap();
        git2::Repository::init(&repo).unwrap();
        // A prd.json above the repository is not the project's.
        std::fs::write(root.join("prd.json"), "{}").unwrap();
        std::fs::write(repo.join("app/prd.json"), "{}").unwrap();
        let p = Paths::resolve(&repo.join("app/tests/unit"), None).unwrap();
        assert_eq!(
            (p.project.as_path(), p.prd.as_path()),
            (repo.join("app").as_path(), repo.join("app/prd.json").as_path())
        );
        // The ralph.sh layout counts too.
        std::fs::create_dir_all(repo.join("scripts/ralph")).unwrap();
        std::fs::write(repo.join("scripts/ralph/prd.json"), "{}").unwrap();
        let p = Paths::resolve(&repo.join("scripts"), None).unwrap();
        assert_eq!(p.prd, repo.join("scripts/ralph/prd.json"));
        // Nothing up to the repository's top: the folder itself, and a clear error.
        std::fs::create_dir_all(repo.join("docs")).unwrap();
        std::fs::remove_file(repo.join("scripts/ralph/prd.json")).unwrap();
        let p = Paths::resolve(&repo.join("docs"), None).unwrap();
        assert_eq!(p.project, repo.join("docs"));
        let e = p.require_prd().unwrap_err().to_string();
        assert!(e.contains("no prd.json in") && e.contains("ralph init"), "{e}");
    }
}
