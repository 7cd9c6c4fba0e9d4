//! What stops a parallel run that no worker's turn can fix: a branch or a
//! file the run relies on is gone, or someone moved the run branch under
//! the merge queue. Each is the machine's state (exit 7), not a setting.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ParallelError {
    /// The run was started without the layers its workers' settings file
    /// is written from.
    #[error("a parallel run needs its configuration layers")]
    NoLayers,
    /// A worktree cannot be cut: the run branch has no tip.
    #[error("the run branch {branch} has no commit")]
    RunBranchEmpty { branch: String },
    /// The run branch disappeared while a merge was about to start.
    #[error("the run branch {branch} is gone")]
    RunBranchGone { branch: String },
    /// A story's work cannot be squashed: its branch disappeared.
    #[error("the story branch {branch} is gone")]
    StoryBranchGone { branch: String },
    /// A resolver cannot start: the run branch or the story's is gone.
    #[error("the run branch or {branch} is gone")]
    ResolveBranchGone { branch: String },
    /// A resolver cannot start: the story's work has no commit to keep.
    #[error("{branch} has no commit to keep")]
    NothingToKeep { branch: String },
    /// A resolver cannot start: its story left prd.json.
    #[error("{story} is no longer a story of prd.json")]
    NotAStory { story: String },
    /// The merge's bookkeeping cannot be written: the run branch has no prd.json.
    #[error("the run branch has no {}", path.display())]
    NoPrd { path: PathBuf },
    /// Every try to move the run branch lost to someone else's commits.
    #[error("the run branch {branch} kept moving while ralph merged {}", queue.join(", "))]
    Raced { branch: String, queue: Vec<String> },
}

impl ParallelError {
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            ParallelError::Raced { .. } => {
                Some("do not commit on the run branch during a parallel run")
            }
            _ => None,
        }
    }
}
