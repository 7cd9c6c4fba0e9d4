//! The pull requests a delivery wants: the run's, or one per story at the
//! commit that delivered it, in the order of the run branch (stacked, with
//! the stories earlier runs delivered whose pull requests are open, so each
//! sits on the one before it; see `plan::lineup`).

use std::collections::BTreeMap;

use super::plan::{self, By, Known, Piece, Want};
use super::{DeliverConfig, DeliverError, Job, PrMode, body, forge, record};
use crate::prd::Prd;

/// The pull requests ralph wants for this run.
pub(super) fn wants(
    cfg: &DeliverConfig,
    job: &Job,
    repo: &git2::Repository,
    base: &str,
    rec: &record::Record,
) -> Result<Vec<Want>, DeliverError> {
    let branch_err = |why: String| DeliverError::Branch { branch: job.branch.clone(), why };
    let tip = repo
        .revparse_single(&format!("refs/heads/{}", job.branch))
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| branch_err(e.message().into()))?;
    match job.mode {
        PrMode::Off => Ok(Vec::new()),
        PrMode::Run => Ok(vec![run_want(cfg, job, &tip, base)]),
        PrMode::Story => story_wants(cfg, job, repo, &tip, base, rec),
    }
}

/// The run's one pull request: a draft unless every story passes verified.
fn run_want(cfg: &DeliverConfig, job: &Job, tip: &git2::Commit<'_>, base: &str) -> Want {
    let r = job.report;
    let (title, body) = body::run(r, &job.branch, job.prd.and_then(Prd::project));
    let verified = r.summary.outcome == Some(crate::event::RunOutcome::Complete)
        && r.stories.iter().all(|s| s.passes && s.verified != Some(false));
    Want {
        piece: Piece::Run,
        head: job.branch.clone(),
        sha: tip.id().to_string(),
        base: base.to_string(),
        title,
        body,
        draft: cfg.draft && !verified,
        earlier: false,
    }
}

/// One pull request per story at the commit that delivered it, stacked in
/// the run branch's order with the open ones of earlier runs.
fn story_wants(
    cfg: &DeliverConfig,
    job: &Job,
    repo: &git2::Repository,
    tip: &git2::Commit<'_>,
    base: &str,
    rec: &record::Record,
) -> Result<Vec<Want>, DeliverError> {
    let branch_err = |why: String| DeliverError::Branch { branch: job.branch.clone(), why };
    let r = job.report;
    // The run branch's commits, newest first: each story's place is
    // its commit's distance from the root.
    let mut walk = repo.revwalk().map_err(|e| branch_err(e.message().into()))?;
    walk.push(tip.id()).map_err(|e| branch_err(e.message().into()))?;
    walk.simplify_first_parent().map_err(|e| branch_err(e.message().into()))?;
    let order: Vec<git2::Oid> = walk.filter_map(Result::ok).collect();
    let at = |oid: git2::Oid| order.iter().position(|o| *o == oid).map(|p| order.len() - p);
    let mut mine: Vec<(String, Option<usize>)> = Vec::new();
    let mut commits = BTreeMap::new();
    for st in r.stories.iter().filter(|s| s.passes && s.delivered) {
        let Some(c) = &st.commit else { continue };
        let Ok(oid) = repo.revparse_single(c).and_then(|o| o.peel_to_commit()).map(|c| c.id())
        else {
            continue;
        };
        mine.push((st.id.clone(), at(oid)));
        commits.insert(st.id.clone(), (oid, st));
    }
    let earlier = earlier_stories(rec, &job.branch);
    let recorded: Vec<(String, Option<usize>, forge::PrState)> = earlier
        .iter()
        .map(|(id, k)| (id.clone(), git2::Oid::from_str(&k.sha).ok().and_then(at), k.state))
        .collect();
    let lineup = plan::lineup(&mine, &recorded, cfg.stack);
    let heads: Vec<String> = lineup
        .iter()
        .map(|(id, by)| match by {
            By::ThisRun => plan::story_branch(&job.branch, id),
            By::Earlier => earlier[id].head.clone(),
        })
        .collect();
    let bases = plan::bases(&heads, base, cfg.stack);
    Ok(lineup
        .into_iter()
        .zip(heads)
        .zip(bases)
        .map(|(((id, by), head), base)| match by {
            By::Earlier => {
                let k = earlier[&id];
                Want {
                    piece: Piece::Story(id),
                    head,
                    sha: k.sha.clone(),
                    base,
                    title: k.title.clone(),
                    body: String::new(),
                    draft: k.draft,
                    earlier: true,
                }
            }
            By::ThisRun => {
                let (oid, st) = commits[&id];
                let prd_story = job.prd.and_then(|p| p.story(&id));
                let (title, body) = body::story(r, st, prd_story);
                Want {
                    piece: Piece::Story(id),
                    head,
                    sha: oid.to_string(),
                    base,
                    title,
                    body,
                    draft: cfg.draft && st.verified != Some(true),
                    earlier: false,
                }
            }
        })
        .collect())
}

/// The stories earlier runs delivered on `branch`, as last recorded.
fn earlier_stories<'r>(rec: &'r record::Record, branch: &str) -> BTreeMap<String, &'r Known> {
    rec.branches
        .get(branch)
        .map(|b| {
            b.prs
                .iter()
                .filter_map(|(key, k)| match Piece::from_key(key)? {
                    Piece::Story(id) => Some((id, k)),
                    Piece::Run => None,
                })
                .collect()
        })
        .unwrap_or_default()
}
