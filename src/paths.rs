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
    /// `--prd` if given, else `./prd.json`, else `./scripts/ralph/prd.json`
    /// (the ralph.sh layout). Paths are absolute, so the prompt can name
    /// them for an agent whatever its working directory.
    pub fn resolve(project: &Path, prd: Option<&Path>) -> Result<Paths, Error> {
        let project = project.canonicalize().map_err(|e| {
            Error::Usage(format!("cannot use {} as the project directory: {e}", project.display()))
        })?;
        let prd = match prd {
            Some(p) if p.is_absolute() => p.to_path_buf(),
            Some(p) => {
                std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| project.join(p))
            }
            None => {
                let root = project.join("prd.json");
                let legacy = project.join("scripts/ralph/prd.json");
                if !root.exists() && legacy.exists() { legacy } else { root }
            }
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
