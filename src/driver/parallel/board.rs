//! `parallel.json`: what a parallel run has in flight — its workers, the
//! merge queue, what it gave up on and why, and the merge being made — for
//! `ralph status`, and for the next ralph after a crash.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::Store;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Board {
    pub run_id: String,
    /// The run branch, where stories are merged.
    pub branch: String,
    pub jobs: u32,
    pub workers: Vec<BoardWorker>,
    /// Stories whose worker finished, waiting to be merged (first first).
    pub queue: Vec<String>,
    /// Stories given up, and why.
    #[serde(default)]
    pub given_up: BTreeMap<String, String>,
    /// Of those, the ones whose merges failed `merge.attempts` times (the
    /// others: the agent was blocked, or the story's breaker opened).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub given_up_merging: BTreeSet<String>,
    /// Times the merge queue sent a story back (its attempts that failed).
    #[serde(default)]
    pub sent_back: BTreeMap<String, u32>,
    /// Why each of those attempts failed, in order: the report lists them.
    #[serde(default)]
    pub failures: BTreeMap<String, Vec<String>>,
    /// Paths each story's attempts changed or conflicted in: with its
    /// `touches`, what keeps it from running beside a story that touches
    /// the same ones.
    #[serde(default)]
    pub learnt: BTreeMap<String, BTreeSet<String>>,
    /// Stories a resolver is preparing or working on, and the ref their
    /// work was kept under before the worktree was reset for it: a resume
    /// puts the story's branch back there.
    #[serde(default)]
    pub resolving: BTreeMap<String, String>,
    /// Resolutions that met an API error, per story: each waits longer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resolve_retries: BTreeMap<String, u32>,
    /// Stories waiting for a worker to run their resolver (for `ralph status`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to_resolve: Vec<String>,
    /// Stories a resolver merged onto the tip, against which stories: their
    /// merge runs those stories' `verify` too, after a crash as well.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resolved_with: BTreeMap<String, Vec<String>>,
    /// Stories whose resolver is running now (for `ralph status`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolving_now: Vec<String>,
    /// Why a story was sent back, for its next attempt's prompt.
    #[serde(default)]
    pub feedback: BTreeMap<String, String>,
    /// Turns each story had.
    #[serde(default)]
    pub turns: BTreeMap<String, u32>,
    /// The commit each story was merged as.
    #[serde(default)]
    pub merged: BTreeMap<String, String>,
    /// Written before the run branch moves, cleared once the main work tree
    /// has followed: a crash in between is finished by the next ralph.
    pub merging: Option<Merging>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BoardWorker {
    pub worker: u32,
    pub story: String,
    pub branch: String,
    pub worktree: String,
    pub pid: i32,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Merging {
    /// The story (the last of a batch).
    pub story: String,
    /// Every story of the batch.
    #[serde(default)]
    pub stories: Vec<String>,
    pub from: String,
    pub to: String,
}

impl Board {
    /// Adds paths to what a story is known to touch.
    pub(super) fn learn(&mut self, story: &str, paths: impl IntoIterator<Item = String>) {
        self.learnt.entry(story.to_string()).or_default().extend(paths);
    }

    pub fn path(store: &Store) -> std::path::PathBuf {
        store.path("parallel.json")
    }

    /// The board, if a parallel run left one. A damaged one reads as none;
    /// what a resume depends on in it (the merge journal, the resolutions
    /// under way) is written with an fsync before the branch or a story's
    /// worktree is touched, so only a damaged disk loses it.
    pub fn load(store: &Store) -> Option<Board> {
        let bytes = crate::store::read_regular(&Board::path(store)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn save(&self, store: &Store) -> std::io::Result<()> {
        let bytes = crate::store::json_bytes(self)?;
        crate::store::write_replace(&Board::path(store), &bytes)
    }
}
