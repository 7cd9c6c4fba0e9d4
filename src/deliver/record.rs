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

    /// How `branch` was delivered before: per story when a story's pull
    /// request is recorded, else for the run when the run's is; `None`
    /// when nothing is.
    pub fn mode_of(&self, branch: &str) -> Option<super::PrMode> {
        let prs = &self.branches.get(branch)?.prs;
        let pieces: Vec<_> = prs.keys().filter_map(|k| super::plan::Piece::from_key(k)).collect();
        if pieces.iter().any(|p| matches!(p, super::plan::Piece::Story(_))) {
            Some(super::PrMode::Story)
        } else if pieces.contains(&super::plan::Piece::Run) {
            Some(super::PrMode::Run)
        } else {
            None
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_is_delivered_again_as_it_was_before() {
        let known = |sha: &str| Known {
            number: 1,
            url: "u".into(),
            head: "h".into(),
            base: "main".into(),
            sha: sha.into(),
            title: "t".into(),
            body_digest: String::new(),
            state: super::super::forge::PrState::Open,
            draft: false,
            node_id: None,
            ci: None,
            checked_at: chrono::Utc::now(),
        };
        let mut rec = Record::default();
        let with = |keys: &[&str]| BranchRecord {
            prs: keys.iter().map(|k| (k.to_string(), known("s"))).collect(),
            ..BranchRecord::default()
        };
        rec.branches.insert("a".into(), with(&["run"]));
        rec.branches.insert("b".into(), with(&["story:US-1", "story:US-2"]));
        rec.branches.insert("c".into(), with(&[]));
        use super::super::PrMode;
        assert_eq!(rec.mode_of("a"), Some(PrMode::Run));
        assert_eq!(rec.mode_of("b"), Some(PrMode::Story));
        assert_eq!(rec.mode_of("c"), None);
        assert_eq!(rec.mode_of("d"), None);
    }
}
