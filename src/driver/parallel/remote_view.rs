//! `ralph status --remote`: a run of remote workers as the remote alone
//! tells it — the run branch's prd.json, the claims (who holds what until
//! when, and when each holder last renewed: its heartbeat) and the shared
//! state. Read from a throw-away fetch; nothing is written to the remote.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::plan;
use super::remote::{Shared, SharedStop, StoryClaim, parse};
use crate::error::Error;
use crate::git::{Repo, remote};
use crate::prd::Prd;

/// One run on the remote: its branch and what its workers are at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteRun {
    pub branch: String,
    /// The run branch's tip (None: only ralph's refs are left of it).
    pub tip: Option<String>,
    pub stories: Vec<RemoteStory>,
    pub passing: usize,
    pub total: usize,
    pub workers: Vec<RemoteWorker>,
    pub usage_limit_until: Option<DateTime<Utc>>,
    /// The last worker that stopped the run for all (a spent budget, an
    /// open breaker), and why: the workers at work then stopped too.
    pub stopped: Option<SharedStop>,
    /// Why the stories could not be read (no prd.json at the tip, or a broken one).
    pub prd_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteStory {
    pub id: String,
    pub title: String,
    pub passes: bool,
    pub state: StoryState,
    /// Unfinished stories of its `dependsOn`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_on: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimLine>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoryState {
    Verified,
    /// A worker holds it, its lease running.
    Claimed,
    /// Its holder's lease ran out: the next free worker takes it over.
    Expired,
    GivenUp,
    /// Waits on unfinished stories of its `dependsOn`.
    Waiting,
    /// Free for the next worker.
    Open,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimLine {
    pub worker: String,
    pub lease_until: DateTime<Utc>,
    /// When its holder last wrote it (claimed or renewed).
    pub heartbeat: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub given_up: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteWorker {
    pub id: String,
    pub stories: Vec<String>,
    /// Its latest claim or renewal.
    pub heartbeat: Option<DateTime<Utc>>,
    /// Every lease it holds ran out: the worker is gone or cut off.
    pub lost: bool,
}

/// A claim as fetched: what it says and when it was written.
pub type Fetched = (StoryClaim, Option<DateTime<Utc>>);

/// Why a run's stories cannot be read from the remote.
#[derive(Debug, thiserror::Error)]
pub enum NoPrd {
    #[error("the remote has no branch {0}")]
    NoBranch(String),
    #[error("{branch} has no {}", path.display())]
    NoFile { branch: String, path: std::path::PathBuf },
    #[error("{0}")]
    Invalid(#[source] crate::prd::PrdError),
}

/// The run as its prd.json, claims and shared state say, at `now`.
pub fn view(
    branch: &str,
    tip: Option<String>,
    prd: Result<Prd, NoPrd>,
    claims: &BTreeMap<String, Fetched>,
    shared: &Shared,
    now: DateTime<Utc>,
) -> RemoteRun {
    let (stories, prd_error) = match prd {
        Ok(prd) => {
            let passes: BTreeMap<&str, bool> =
                prd.stories().iter().map(|s| (s.id.as_str(), s.passes)).collect();
            let lines = prd
                .stories()
                .iter()
                .map(|s| {
                    let claim = claims.get(&s.id).map(|(c, at)| ClaimLine {
                        worker: c.worker.clone(),
                        lease_until: c.lease_until,
                        heartbeat: *at,
                        given_up: c.given_up.clone(),
                    });
                    let waiting_on: Vec<String> = s
                        .depends_on
                        .iter()
                        .filter(|d| !passes.get(d.as_str()).copied().unwrap_or(false))
                        .cloned()
                        .collect();
                    let state = match &claim {
                        _ if s.passes => StoryState::Verified,
                        Some(c) if c.given_up.is_some() => StoryState::GivenUp,
                        Some(c) if c.lease_until > now => StoryState::Claimed,
                        Some(_) => StoryState::Expired,
                        None if !waiting_on.is_empty() => StoryState::Waiting,
                        None => StoryState::Open,
                    };
                    RemoteStory {
                        id: s.id.clone(),
                        title: s.title.clone(),
                        passes: s.passes,
                        state,
                        waiting_on,
                        claim,
                    }
                })
                .collect();
            (lines, None)
        }
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let mut workers: BTreeMap<String, RemoteWorker> = BTreeMap::new();
    for (story, (c, at)) in claims {
        if c.given_up.is_some() {
            continue;
        }
        let w = workers.entry(c.worker.clone()).or_insert_with(|| RemoteWorker {
            id: c.worker.clone(),
            stories: Vec::new(),
            heartbeat: None,
            lost: true,
        });
        w.stories.push(story.clone());
        w.heartbeat = w.heartbeat.max(*at);
        w.lost &= c.lease_until <= now;
    }
    RemoteRun {
        branch: branch.to_string(),
        tip,
        passing: stories.iter().filter(|s| s.passes).count(),
        total: stories.len(),
        stories,
        workers: workers.into_values().collect(),
        usage_limit_until: shared.usage_limit_until.filter(|t| *t > now),
        stopped: shared.stop.clone(),
        prd_error,
    }
}

/// Every run on the remote at `url` (or only `branch`'s), read from a
/// fetch into a throw-away repository in `scratch`; the PRD is the first
/// of `prds` (paths in the repository) that the run branch has.
pub fn remote_runs(
    url: &str,
    scratch: &Path,
    branch: Option<&str>,
    prds: &[&Path],
) -> Result<Vec<RemoteRun>, Error> {
    remote::snapshot(url, scratch)?;
    let repo = Repo::discover(scratch)?;
    let branches: Vec<String> = repo
        .refs_under("refs/remotes/origin/")
        .into_iter()
        .map(|(name, _)| name["refs/remotes/origin/".len()..].to_string())
        .filter(|b| !b.contains("--"))
        .collect();
    let namespaces: Vec<String> = repo
        .refs_under("refs/remotes/origin-ralph/")
        .into_iter()
        .filter_map(|(name, _)| {
            name["refs/remotes/origin-ralph/".len()..].split('/').next().map(str::to_string)
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let runs: Vec<String> = match branch {
        Some(b) => vec![b.to_string()],
        None => namespaces
            .iter()
            .map(|ns| branches.iter().find(|b| plan::slug(b) == *ns).cloned().unwrap_or(ns.clone()))
            .collect(),
    };
    if runs.is_empty() {
        return Err(Error::Usage(format!(
            "no ralph run on {url}: no worker has claimed a story there (refs/ralph/* is empty); \
             name the run branch with --branch"
        )));
    }
    let now = Utc::now();
    Ok(runs.iter().map(|b| read_run(&repo, b, prds, now)).collect())
}

fn read_run(repo: &Repo, branch: &str, prds: &[&Path], now: DateTime<Utc>) -> RemoteRun {
    let ns = format!("refs/remotes/origin-ralph/{}", plan::slug(branch));
    let tip = repo.ref_target(&format!("refs/remotes/origin/{branch}"));
    let prd = match tip {
        None => Err(NoPrd::NoBranch(branch.to_string())),
        Some(t) => match prds.iter().find_map(|p| Some((p, repo.file_at(t, p)?))) {
            None => Err(NoPrd::NoFile { branch: branch.to_string(), path: prds[0].to_path_buf() }),
            Some((p, bytes)) => Prd::parse(&bytes, p).map_err(NoPrd::Invalid),
        },
    };
    let claims: BTreeMap<String, Fetched> = repo
        .refs_under(&format!("{ns}/claims/"))
        .into_iter()
        .filter_map(|(_, oid)| {
            let c: StoryClaim = parse(&repo.message(oid)?)?;
            Some((c.story.clone(), (c, repo.commit_time(oid))))
        })
        .collect();
    let shared: Shared = repo
        .ref_target(&format!("{ns}/state"))
        .and_then(|o| repo.message(o))
        .and_then(|m| parse(&m))
        .unwrap_or_default();
    view(branch, tip.map(|t| t.to_string()), prd, &claims, &shared, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    const PRD: &str = r#"{"project":"P","branchName":"ralph/x","userStories":[
        {"id":"US-1","title":"One","priority":1,"passes":true},
        {"id":"US-2","title":"Two","priority":2,"passes":false},
        {"id":"US-3","title":"Three","priority":3,"passes":false},
        {"id":"US-4","title":"Four","priority":4,"passes":false},
        {"id":"US-5","title":"Five","priority":5,"passes":false,"dependsOn":["US-2"]},
        {"id":"US-6","title":"Six","priority":6,"passes":false}]}"#;

    #[test]
    fn each_story_is_verified_claimed_expired_given_up_waiting_or_open() {
        let now = Utc::now();
        let prd = Prd::parse(PRD.as_bytes(), Path::new("prd.json")).unwrap();
        let claim = |w: &str, story: &str, secs: i64, given_up: Option<&str>| {
            let c = StoryClaim {
                worker: w.into(),
                story: story.into(),
                lease_until: now + TimeDelta::seconds(secs),
                given_up: given_up.map(str::to_string),
            };
            (story.to_string(), (c, Some(now - TimeDelta::seconds(5))))
        };
        let claims: BTreeMap<String, Fetched> = [
            claim("a", "US-1", 60, None),
            claim("a", "US-2", 60, None),
            claim("b", "US-3", -1, None),
            claim("c", "US-4", 60, Some("needs a key")),
        ]
        .into_iter()
        .collect();
        let later = now + TimeDelta::hours(1);
        let shared = Shared { usage_limit_until: Some(later), ..Shared::default() };
        let run = view("ralph/x", None, Ok(prd), &claims, &shared, now);
        let states: Vec<(&str, StoryState)> =
            run.stories.iter().map(|s| (s.id.as_str(), s.state)).collect();
        assert_eq!(
            states,
            [
                ("US-1", StoryState::Verified),
                ("US-2", StoryState::Claimed),
                ("US-3", StoryState::Expired),
                ("US-4", StoryState::GivenUp),
                ("US-5", StoryState::Waiting),
                ("US-6", StoryState::Open),
            ]
        );
        assert_eq!(run.stories[4].waiting_on, ["US-2"]);
        assert_eq!((run.passing, run.total), (1, 6));
        let workers: Vec<(&str, usize, bool)> =
            run.workers.iter().map(|w| (w.id.as_str(), w.stories.len(), w.lost)).collect();
        // c gave its story up: it holds nothing; b's only lease ran out.
        assert_eq!(workers, [("a", 2, false), ("b", 1, true)]);
        assert_eq!(run.usage_limit_until, Some(later));
        let past =
            Shared { usage_limit_until: Some(now - TimeDelta::seconds(1)), ..Shared::default() };
        let prd = Prd::parse(PRD.as_bytes(), Path::new("prd.json")).unwrap();
        assert_eq!(view("ralph/x", None, Ok(prd), &claims, &past, now).usage_limit_until, None);
    }

    #[test]
    fn a_run_without_a_readable_prd_still_shows_its_workers() {
        let now = Utc::now();
        let c = StoryClaim {
            worker: "a".into(),
            story: "US-9".into(),
            lease_until: now + TimeDelta::seconds(9),
            given_up: None,
        };
        let claims: BTreeMap<String, Fetched> = [("US-9".to_string(), (c, None))].into();
        let no_prd = NoPrd::NoFile { branch: "b".into(), path: "prd.json".into() };
        let run = view("b", None, Err(no_prd), &claims, &Shared::default(), now);
        assert_eq!(run.prd_error.as_deref(), Some("b has no prd.json"));
        assert!(run.stories.is_empty());
        assert_eq!(run.workers.len(), 1);
    }
}
