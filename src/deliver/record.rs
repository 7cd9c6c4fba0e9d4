//! `.git/ralph/deliver.json`: the pull requests ralph opened, per run
//! branch, as it last saw them (number, URL, state, CI, the commit and the
//! digest of the description it wrote). It is what `ralph status` and the
//! page show, and what lets a delivery update instead of opening again.
//! No token or description is kept in it. A damaged or missing file is an
//! empty record: the forge's "already exists" answer finds what it forgot.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::plan::Known;
use super::target::Forge;

pub const VERSION: u32 = 1;
pub const FILE: &str = "deliver.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    /// Per run branch.
    pub branches: BTreeMap<String, BranchRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BranchRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<Forge>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// `run` or `story:<id>` → the pull request.
    pub prs: BTreeMap<String, Known>,
}

impl Default for Record {
    fn default() -> Record {
        Record { version: VERSION, branches: BTreeMap::new() }
    }
}

impl Record {
    pub fn load(path: &Path) -> Record {
        match crate::store::read_versioned::<Record>(path, VERSION) {
            Ok(crate::store::Loaded::Ok(r)) => r,
            _ => Record::default(),
        }
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        crate::store::write_json(path, self)
    }

    pub fn get(&self, branch: &str, key: &str) -> Option<&Known> {
        self.branches.get(branch)?.prs.get(key)
    }

    pub fn put(&mut self, branch: &str, key: &str, known: Known) {
        self.branches.entry(branch.to_string()).or_default().prs.insert(key.to_string(), known);
    }

    pub fn set_target(&mut self, branch: &str, forge: Forge, repo: &str) {
        let b = self.branches.entry(branch.to_string()).or_default();
        b.forge = Some(forge);
        b.repo = Some(repo.to_string());
    }
}

/// One pull request as `ralph status` and the page show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shown {
    /// Its story; `None` for the run's.
    pub story: Option<String>,
    pub number: u64,
    pub url: String,
    pub state: super::forge::PrState,
    pub draft: bool,
    pub ci: Option<super::forge::Ci>,
    /// When ralph last asked the forge (a delivery, or `ralph deliver`).
    pub checked_at: chrono::DateTime<chrono::Utc>,
}

/// The pull requests recorded for `branch`, the run's first.
pub fn shown(path: &Path, branch: &str) -> Vec<Shown> {
    let rec = Record::load(path);
    let Some(b) = rec.branches.get(branch) else { return Vec::new() };
    let mut out: Vec<Shown> = b
        .prs
        .iter()
        .filter_map(|(key, k)| {
            let story = match super::plan::Piece::from_key(key)? {
                super::plan::Piece::Run => None,
                super::plan::Piece::Story(id) => Some(id),
            };
            Some(Shown {
                story,
                number: k.number,
                url: k.url.clone(),
                state: k.state,
                draft: k.draft,
                ci: k.ci,
                checked_at: k.checked_at,
            })
        })
        .collect();
    out.sort_by(|a, b| a.story.cmp(&b.story).then(a.number.cmp(&b.number)));
    out
}

/// A pull request in a line: `#3 open (draft) · CI success · URL`.
pub fn line(s: &Shown) -> String {
    let state = match s.state {
        super::forge::PrState::Open if s.draft => "open (draft)",
        super::forge::PrState::Open => "open",
        super::forge::PrState::Merged => "merged",
        super::forge::PrState::Closed => "closed",
    };
    let ci = match s.ci {
        Some(super::forge::Ci::Success) => " · CI passed",
        Some(super::forge::Ci::Failure) => " · CI failed",
        Some(super::forge::Ci::Pending) => " · CI running",
        None => "",
    };
    format!("{} #{} {state}{ci} · {}", s.story.as_deref().unwrap_or("run"), s.number, s.url)
}
