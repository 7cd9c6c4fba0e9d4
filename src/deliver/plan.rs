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
//! an earlier run's, in a stack (`Want::earlier`):
//! #n           open, on another base than its place wants               →  restack (its base only)
//! #n           anything else                                            →  keep
//! ```
//!
//! A pull request ralph made ready is never turned back into a draft: a
//! person may have done it, and a draft is ralph's only "not yet".
//!
//! A stack (`deliver.stack`) is every story with an open pull request on
//! the run branch, not only this run's: [`lineup`] puts them in the order
//! of their commits on it, so a redone story (its new commit last) moves to
//! the top and the one that was stacked on it moves down onto the story
//! before; [`bases`] then gives each the branch of the one before.

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
    /// An earlier run's pull request, here only for its place in a stack:
    /// its base follows the stories before it; its branch, title and
    /// description are as that run left them (`head`, `sha`, `title` are
    /// the recorded ones, `body` is empty). Always made from its record.
    pub earlier: bool,
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
    /// Its base only: an earlier run's pull request whose place in the
    /// stack changed.
    Restack {
        number: u64,
    },
}

pub fn step(want: &Want, known: Option<&Known>) -> Step {
    let Some(k) = known else { return Step::Create };
    if want.earlier {
        return match k.state {
            PrState::Open if k.base != want.base => Step::Restack { number: k.number },
            _ => Step::Keep { number: k.number },
        };
    }
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

/// Who delivered a story that has a place in the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    ThisRun,
    /// An earlier run, whose pull request is recorded open.
    Earlier,
}

/// The stories to deliver, in the order of their commits on the run
/// branch. `this_run`: each story this run delivered and where its commit
/// is (its distance from the root along the run branch's first parents;
/// `None`: not on it, rewritten away). `recorded`: each story with a pull
/// request in deliver.json, where its recorded commit is and the state
/// ralph last saw. Stacked, an earlier run's story whose pull request is
/// open keeps its place (a story this run delivered again takes its new
/// one); otherwise only this run's stories are delivered.
pub fn lineup(
    this_run: &[(String, Option<usize>)],
    recorded: &[(String, Option<usize>, PrState)],
    stack: bool,
) -> Vec<(String, By)> {
    let mut placed: Vec<(usize, String, By)> =
        this_run.iter().filter_map(|(id, at)| Some((((*at)?), id.clone(), By::ThisRun))).collect();
    if stack {
        for (id, at, state) in recorded {
            if *state == PrState::Open
                && let Some(at) = at
                && !this_run.iter().any(|(mine, _)| mine == id)
            {
                placed.push((*at, id.clone(), By::Earlier));
            }
        }
    }
    placed.sort_by_key(|(at, ..)| *at);
    placed.into_iter().map(|(_, id, by)| (id, by)).collect()
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
            earlier: false,
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
    fn an_earlier_run_s_pull_request_only_moves_in_the_stack() {
        let earlier = Want { earlier: true, body: String::new(), ..want() };
        let on = |base: &str, state: PrState| Known { base: base.into(), ..known(state) };
        let cases: Vec<(&str, Known, Step)> = vec![
            ("in its place", on("main", PrState::Open), Step::Keep { number: 4 }),
            (
                "moved in the stack",
                on("x-stories/US-0", PrState::Open),
                Step::Restack { number: 4 },
            ),
            (
                "its text is not this run's to write",
                Known { title: "old".into(), body_digest: digest("old"), ..known(PrState::Open) },
                Step::Keep { number: 4 },
            ),
            (
                "a draft stays a draft",
                Known { draft: true, ..known(PrState::Open) },
                Step::Keep { number: 4 },
            ),
            ("merged", on("other", PrState::Merged), Step::Keep { number: 4 }),
            ("closed", on("other", PrState::Closed), Step::Keep { number: 4 }),
        ];
        for (name, k, want) in cases {
            assert_eq!(step(&earlier, Some(&k)), want, "{name}");
        }
    }

    #[test]
    fn a_stack_is_every_open_story_in_run_branch_order() {
        use By::{Earlier, ThisRun};
        use PrState::{Closed, Merged, Open};
        let mine = |v: &[(&str, Option<usize>)]| -> Vec<(String, Option<usize>)> {
            v.iter().map(|(id, at)| (id.to_string(), *at)).collect()
        };
        let rec = |v: &[(&str, Option<usize>, PrState)]| -> Vec<(String, Option<usize>, PrState)> {
            v.iter().map(|(id, at, s)| (id.to_string(), *at, *s)).collect()
        };
        let first = rec(&[("A", Some(1), Open), ("B", Some(2), Open), ("C", Some(3), Open)]);
        type Case = (
            &'static str,
            Vec<(String, Option<usize>)>,
            Vec<(String, Option<usize>, PrState)>,
            bool,
            Vec<(&'static str, By)>,
        );
        let cases: Vec<Case> = vec![
            (
                "the first run",
                mine(&[("B", Some(2)), ("A", Some(1)), ("C", Some(3))]),
                vec![],
                true,
                vec![("A", ThisRun), ("B", ThisRun), ("C", ThisRun)],
            ),
            (
                "a redo goes last, the rest keep their places",
                mine(&[("B", Some(4))]),
                first.clone(),
                true,
                vec![("A", Earlier), ("C", Earlier), ("B", ThisRun)],
            ),
            (
                "a later run stacks on the earlier ones",
                mine(&[("D", Some(4))]),
                first.clone(),
                true,
                vec![("A", Earlier), ("B", Earlier), ("C", Earlier), ("D", ThisRun)],
            ),
            (
                "not stacked: only this run's",
                mine(&[("B", Some(4))]),
                first.clone(),
                false,
                vec![("B", ThisRun)],
            ),
            (
                "merged, closed or rewritten away: no place",
                mine(&[("D", Some(4))]),
                rec(&[("A", Some(1), Merged), ("B", Some(2), Closed), ("C", None, Open)]),
                true,
                vec![("D", ThisRun)],
            ),
            (
                "this run's commit rewritten away",
                mine(&[("D", None)]),
                first[..1].to_vec(),
                true,
                vec![("A", Earlier)],
            ),
        ];
        for (name, this_run, recorded, stack, want) in cases {
            let got = lineup(&this_run, &recorded, stack);
            let want: Vec<(String, By)> =
                want.into_iter().map(|(id, by)| (id.into(), by)).collect();
            assert_eq!(got, want, "{name}");
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
