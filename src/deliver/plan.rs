//! What to do for each pull request ralph wants, given what it knows of the
//! one it opened before (pure, table-tested): open one, bring it up to
//! date, or leave it.
//!
//! ```text
//! known        its state   the work    →  step
//! none                                 →  create   (a 422/409 "already exists" then finds it and updates it)
//! #n           open        same, same text, same base, draft as wanted  →  keep
//! #n           open        anything else differs                        →  update (and out of draft once verified)
//! #n           merged or closed, same commit                            →  keep (a person's decision stands)
//! #n           merged or closed, new commit (a redo)                    →  create a new one
//! ```
//!
//! A pull request ralph made ready is never turned back into a draft: a
//! person may have done it, and a draft is ralph's only "not yet".

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::forge::{Ci, PrState};

/// What a pull request is for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Piece {
    /// The whole run branch.
    Run,
    Story(String),
}

impl Piece {
    /// Its key in deliver.json.
    pub fn key(&self) -> String {
        match self {
            Piece::Run => "run".into(),
            Piece::Story(id) => format!("story:{id}"),
        }
    }

    pub fn from_key(key: &str) -> Option<Piece> {
        match key {
            "run" => Some(Piece::Run),
            k => k.strip_prefix("story:").map(|id| Piece::Story(id.into())),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Piece::Run => "the run".into(),
            Piece::Story(id) => id.clone(),
        }
    }
}

/// A pull request ralph wants to be there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub piece: Piece,
    /// The branch it comes from (pushed first).
    pub head: String,
    /// The commit that branch is at.
    pub sha: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
}

/// A pull request ralph opened, as it last saw it (deliver.json).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Known {
    pub number: u64,
    pub url: String,
    pub head: String,
    pub base: String,
    /// The commit its branch was pushed at.
    pub sha: String,
    pub title: String,
    /// The sha-256 of the description ralph last wrote.
    pub body_digest: String,
    pub state: PrState,
    pub draft: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<Ci>,
    /// GitHub's node id (to make it ready through GraphQL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// When ralph last asked the forge about it.
    pub checked_at: chrono::DateTime<chrono::Utc>,
}

pub fn digest(body: &str) -> String {
    let d = sha2::Sha256::digest(body.as_bytes());
    d.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// What to do for one wanted pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Create,
    /// Title, description, base; `ready`: also out of draft.
    Update {
        number: u64,
        ready: bool,
    },
    Keep {
        number: u64,
    },
}

pub fn step(want: &Want, known: Option<&Known>) -> Step {
    let Some(k) = known else { return Step::Create };
    match k.state {
        PrState::Open => {
            let ready = k.draft && !want.draft;
            let same = k.sha == want.sha
                && k.base == want.base
                && k.title == want.title
                && k.body_digest == digest(&want.body);
            if same && !ready {
                Step::Keep { number: k.number }
            } else {
                Step::Update { number: k.number, ready }
            }
        }
        PrState::Merged | PrState::Closed if k.sha == want.sha => Step::Keep { number: k.number },
        PrState::Merged | PrState::Closed => Step::Create,
    }
}

/// The base of each story's pull request, in the order the stories' commits
/// are on the run branch: `base` for every one, or stacked (each on the
/// branch of the one before, the first on `base`).
pub fn bases(heads: &[String], base: &str, stack: bool) -> Vec<String> {
    heads
        .iter()
        .enumerate()
        .map(|(i, _)| if stack && i > 0 { heads[i - 1].clone() } else { base.to_string() })
        .collect()
}

/// The branch a story's pull request comes from: beside the run branch,
/// not under it (git cannot have `ralph/x` and `ralph/x/US-1` at once).
pub fn story_branch(run_branch: &str, story: &str) -> String {
    let mut slug: String = story
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .collect();
    // git refuses `..` in a branch name, and a leading or trailing dot.
    while slug.contains("..") {
        slug = slug.replace("..", ".");
    }
    let slug = slug.trim_matches('.');
    format!("{run_branch}-stories/{}", if slug.is_empty() { "story" } else { slug })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want() -> Want {
        Want {
            piece: Piece::Story("US-1".into()),
            head: "ralph/x-stories/US-1".into(),
            sha: "a".repeat(40),
            base: "main".into(),
            title: "feat: US-1 - One".into(),
            body: "body".into(),
            draft: false,
        }
    }

    fn known(state: PrState) -> Known {
        let w = want();
        Known {
            number: 4,
            url: "u".into(),
            head: w.head,
            base: w.base,
            sha: w.sha,
            title: w.title,
            body_digest: digest(&w.body),
            state,
            draft: false,
            ci: None,
            node_id: None,
            checked_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn create_update_or_keep() {
        let w = want();
        let with = |f: &dyn Fn(&mut Known)| {
            let mut k = known(PrState::Open);
            f(&mut k);
            k
        };
        let cases: Vec<(&str, Option<Known>, Want, Step)> = vec![
            ("none yet", None, w.clone(), Step::Create),
            ("open, nothing new", Some(known(PrState::Open)), w.clone(), Step::Keep { number: 4 }),
            (
                "open, a redo's commit",
                Some(with(&|k| k.sha = "b".repeat(40))),
                w.clone(),
                Step::Update { number: 4, ready: false },
            ),
            (
                "open, new text",
                Some(with(&|k| k.body_digest = digest("old"))),
                w.clone(),
                Step::Update { number: 4, ready: false },
            ),
            (
                "open, new title",
                Some(with(&|k| k.title = "old".into())),
                w.clone(),
                Step::Update { number: 4, ready: false },
            ),
            (
                "open, restacked",
                Some(with(&|k| k.base = "other".into())),
                w.clone(),
                Step::Update { number: 4, ready: false },
            ),
            (
                "a draft now verified",
                Some(with(&|k| k.draft = true)),
                w.clone(),
                Step::Update { number: 4, ready: true },
            ),
            (
                "a draft still a draft",
                Some(with(&|k| k.draft = true)),
                Want { draft: true, ..w.clone() },
                Step::Keep { number: 4 },
            ),
            (
                "ready stays ready",
                Some(known(PrState::Open)),
                Want { draft: true, ..w.clone() },
                Step::Keep { number: 4 },
            ),
            (
                "merged, same work",
                Some(known(PrState::Merged)),
                w.clone(),
                Step::Keep { number: 4 },
            ),
            (
                "closed, same work",
                Some(known(PrState::Closed)),
                w.clone(),
                Step::Keep { number: 4 },
            ),
            (
                "closed, redone",
                Some(known(PrState::Closed)),
                Want { sha: "c".repeat(40), ..w.clone() },
                Step::Create,
            ),
            (
                "merged, more work",
                Some(known(PrState::Merged)),
                Want { sha: "c".repeat(40), ..w.clone() },
                Step::Create,
            ),
        ];
        for (name, k, w, want) in cases {
            assert_eq!(step(&w, k.as_ref()), want, "{name}");
        }
    }

    #[test]
    fn bases_are_the_base_or_the_story_before() {
        let heads: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        assert_eq!(bases(&heads, "main", false), ["main", "main", "main"]);
        assert_eq!(bases(&heads, "main", true), ["main", "a", "b"]);
        assert!(bases(&[], "main", true).is_empty());
    }

    #[test]
    fn story_branches_sit_beside_the_run_branch() {
        assert_eq!(story_branch("ralph/shop", "US-001"), "ralph/shop-stories/US-001");
        assert_eq!(story_branch("feature", "a b/c..d"), "feature-stories/a-b-c.d");
        assert_eq!(story_branch("x", "..."), "x-stories/story");
        for key in ["run", "story:US-1"] {
            assert_eq!(Piece::from_key(key).unwrap().key(), key);
        }
    }
}
