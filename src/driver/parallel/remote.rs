//! Workers on several machines (`ralph worker --remote`): the git remote is
//! the only shared state. A story is claimed by creating
//! `refs/ralph/<run>/claims/<story>` on the remote, a commit whose message
//! says who holds it until when (the lease); the holder renews it by
//! pushing a commit on top of its own, and a lease that ran out is taken
//! over by pushing on top of the dead holder's. Pushes are never forced, so
//! each one is a compare-and-swap: it lands only if the ref is still where
//! the pusher read it. Delivery is the same: the merged commit is pushed to
//! the run branch as a fast-forward of the tip it was made and gated on.
//! `refs/ralph/<run>/state` carries what every worker must know at once: a
//! usage limit's reset time, a stop.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use git2::Oid;
use serde::{Deserialize, Serialize};

use super::plan;
use crate::git::remote::{self, Lease, Pushed};
use crate::git::{GitError, Repo};

/// What a claim ref says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoryClaim {
    pub worker: String,
    pub story: String,
    pub lease_until: DateTime<Utc>,
    /// The holder gave the story up (blocked, its breaker opened): nobody takes it.
    #[serde(default)]
    pub given_up: Option<String>,
}

/// The run's shared stop signals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Shared {
    pub usage_limit_until: Option<DateTime<Utc>>,
    /// A worker stopped for a reason that is the whole run's (a spent
    /// budget, an open breaker): the workers at work then stop too.
    #[serde(default)]
    pub stop: Option<SharedStop>,
}

/// Why a worker stopped the run, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedStop {
    pub by: String,
    /// Why: a spent budget or an open breaker (`budget`, `circuit_open`
    /// on the wire, as `run_end` names them).
    pub outcome: crate::event::RunOutcome,
    pub message: String,
    pub at: DateTime<Utc>,
}

/// The stop a worker that started at `started` heeds: one another worker
/// recorded after that. A worker started later was started on purpose
/// (a person raised the budget, reset the breaker): it goes on.
pub(super) fn stop_for<'a>(
    shared: &'a Shared,
    me: &str,
    started: DateTime<Utc>,
) -> Option<&'a SharedStop> {
    shared.stop.as_ref().filter(|s| s.by != me && s.at > started)
}

/// Who may work a story, as its claim stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hold {
    Free,
    Mine,
    /// Another worker's, its lease running.
    Theirs(String),
    /// Its holder's lease ran out: it may be taken over (on top of `Oid`).
    Expired(Oid),
    GivenUp(String),
}

/// A story's claim (as fetched, with its commit) seen by worker `me` at `now`.
pub(super) fn hold(claim: Option<&(StoryClaim, Oid)>, me: &str, now: DateTime<Utc>) -> Hold {
    match claim {
        None => Hold::Free,
        Some((c, _)) if c.given_up.is_some() => {
            Hold::GivenUp(c.given_up.clone().unwrap_or_default())
        }
        Some((c, _)) if c.worker == me => Hold::Mine,
        Some((c, oid)) if c.lease_until <= now => Hold::Expired(*oid),
        Some((c, _)) => Hold::Theirs(c.worker.clone()),
    }
}

/// The worker's side of the remote.
pub(super) struct Remote {
    pub worker: String,
    pub lease: Duration,
    /// The clone's work dir, where `git` runs.
    dir: PathBuf,
    /// `refs/ralph/<run>`: the run's refs on the remote.
    ns: String,
    /// The run branch's ref on the remote.
    run: String,
    /// The stories' claims as last fetched.
    claims: BTreeMap<String, (StoryClaim, Oid)>,
    pub shared: Shared,
    last_sync: Option<Instant>,
    /// Not yet tried a claim: the first goes to [`plan::first_pick`].
    pub first_claim: bool,
    /// Remote calls that failed in a row: the back-off before the next.
    failures: u32,
    retry_at: Option<Instant>,
    /// The remote takes atomic pushes (until it says it does not).
    atomic: bool,
    /// The remote refuses to delete branches (a protection rule): story
    /// branches are left there.
    keep_branches: bool,
}

/// A remote call that could not be made (unreachable, refused credentials).
pub(super) type Unreachable = GitError;

impl Remote {
    pub(super) fn new(worker: String, lease: Duration, dir: PathBuf, run_branch: &str) -> Remote {
        Remote {
            worker,
            lease,
            dir,
            ns: format!("refs/ralph/{}", plan::slug(run_branch)),
            run: format!("refs/heads/{run_branch}"),
            claims: BTreeMap::new(),
            shared: Shared::default(),
            last_sync: None,
            first_claim: true,
            failures: 0,
            retry_at: None,
            atomic: true,
            keep_branches: false,
        }
    }

    fn claim_ref(&self, story: &str) -> String {
        format!("{}/claims/{}", self.ns, plan::slug(story))
    }

    /// Where fetched copies of the run's refs live locally.
    fn fetched(&self, name: &str) -> String {
        name.replacen("refs/ralph/", "refs/remotes/origin-ralph/", 1)
    }

    /// Fetches, unless it did less than `every` ago or is backing off;
    /// `Ok(false)` when it did not. Reads the claims and the shared state.
    pub(super) fn sync(&mut self, repo: &Repo, every: Duration) -> Result<bool, Unreachable> {
        let now = Instant::now();
        if self.last_sync.is_some_and(|t| now.duration_since(t) < every)
            || self.retry_at.is_some_and(|t| now < t)
        {
            return Ok(false);
        }
        self.last_sync = Some(now);
        if let Err(e) = remote::fetch(&self.dir) {
            self.failed();
            return Err(e);
        }
        self.reached();
        let prefix = self.fetched(&format!("{}/claims/", self.ns));
        self.claims = repo
            .refs_under(&prefix)
            .into_iter()
            .filter_map(|(_, oid)| Some((parse::<StoryClaim>(&repo.message(oid)?)?, oid)))
            .map(|(c, oid)| (c.story.clone(), (c, oid)))
            .collect();
        let state = repo.ref_target(&self.fetched(&format!("{}/state", self.ns)));
        self.shared =
            state.and_then(|o| repo.message(o)).and_then(|m| parse(&m)).unwrap_or_default();
        Ok(true)
    }

    /// A call got through: no back-off before the next.
    fn reached(&mut self) {
        self.failures = 0;
        self.retry_at = None;
    }

    /// Backs off after a failed call: half a second, doubling, at most 10 s
    /// (a lease is renewed a third of the way through: the default 10
    /// minutes survive a long outage).
    fn failed(&mut self) {
        self.failures += 1;
        let wait =
            (Duration::from_millis(500) * (1 << self.failures.min(5))).min(Duration::from_secs(10));
        self.retry_at = Some(Instant::now() + wait);
    }

    pub(super) fn hold(&self, story: &str, now: DateTime<Utc>) -> Hold {
        hold(self.claims.get(story), &self.worker, now)
    }

    /// Stories another worker holds or gave up: not for this one.
    pub(super) fn taken(&self, now: DateTime<Utc>) -> Vec<String> {
        self.claims
            .keys()
            .filter(|s| matches!(self.hold(s, now), Hold::Theirs(_) | Hold::GivenUp(_)))
            .cloned()
            .collect()
    }

    /// Some other worker holds a live claim: the run is not over while it does.
    pub(super) fn others_at_work(&self, now: DateTime<Utc>) -> bool {
        self.claims.keys().any(|s| matches!(self.hold(s, now), Hold::Theirs(_)))
    }

    /// Claims `story` (or takes over an expired claim, or renews ours):
    /// `Ok(true)` when the remote took the push.
    pub(super) fn claim(
        &mut self,
        repo: &Repo,
        story: &str,
        given_up: Option<String>,
    ) -> Result<bool, Unreachable> {
        let Some((claim, commit, lease)) = self.claim_commit(repo, story, given_up)? else {
            return Ok(false);
        };
        let landed =
            self.push_one_leased(&format!("{commit}:{}", self.claim_ref(story)), &[lease])?;
        self.claimed(story, landed.then_some((claim, commit)));
        Ok(landed)
    }

    /// Claims `story` to start work on it, if the run branch is still at
    /// `tip` (the push asserts it, in the same atomic push): a claim won
    /// on the tip this worker has needs no fetch to learn whether the
    /// story was delivered meanwhile.
    pub(super) fn claim_on_tip(
        &mut self,
        repo: &Repo,
        story: &str,
        tip: Oid,
    ) -> Result<Claimed, Unreachable> {
        let Some((claim, commit, lease)) = self.claim_commit(repo, story, None)? else {
            return Ok(Claimed::Lost);
        };
        let claim_ref = self.claim_ref(story);
        let specs = [format!("{commit}:{claim_ref}"), format!("{tip}:{}", self.run)];
        let leases = [(self.run.clone(), tip.to_string()), lease.clone()];
        let Some(pushed) = self.atomic_push(&specs, &leases)? else {
            // No atomic pushes: the claim alone, and the caller fetches.
            let landed = self.push_one_leased(&specs[0], &[lease])?;
            self.claimed(story, landed.then_some((claim, commit)));
            return Ok(if landed { Claimed::Unchecked } else { Claimed::Lost });
        };
        let claimed = claimed(&pushed, &claim_ref, &self.run);
        self.claimed(story, (claimed == Claimed::Ours).then_some((claim, commit)));
        Ok(claimed)
    }

    /// An atomic push: `Ok(None)` when the remote cannot make one (it is
    /// then not asked again).
    fn atomic_push(
        &mut self,
        specs: &[String],
        leases: &[Lease],
    ) -> Result<Option<Vec<Pushed>>, Unreachable> {
        if !self.atomic {
            return Ok(None);
        }
        match remote::push_atomic(&self.dir, specs, leases) {
            Ok(pushed) => {
                self.reached();
                self.atomic = pushed.is_some();
                Ok(pushed)
            }
            Err(e) => {
                self.failed();
                Err(e)
            }
        }
    }

    /// The claim commit that would claim `story` for this worker: `None`
    /// when another worker holds it or gave it up.
    fn claim_commit(
        &self,
        repo: &Repo,
        story: &str,
        given_up: Option<String>,
    ) -> Result<Option<(StoryClaim, Oid, Lease)>, Unreachable> {
        let now = Utc::now();
        let parent = match self.hold(story, now) {
            Hold::Free => None,
            Hold::Mine => self.claims.get(story).map(|(_, o)| *o),
            Hold::Expired(oid) => Some(oid),
            Hold::Theirs(_) | Hold::GivenUp(_) => return Ok(None),
        };
        let lease_until = now + chrono::TimeDelta::from_std(self.lease).unwrap_or_default();
        let claim = StoryClaim {
            worker: self.worker.clone(),
            story: story.to_string(),
            lease_until,
            given_up,
        };
        let message = format!(
            "ralph: {} holds {story}\n\n{}",
            self.worker,
            serde_json::to_string(&claim).unwrap_or_default()
        );
        // The push lands only on the claim it was made on top of (or where
        // there is none): a renewal must not bring back a released claim.
        let lease = (self.claim_ref(story), parent.map(|p| p.to_string()).unwrap_or_default());
        Ok(Some((claim.clone(), repo.note_commit(&message, parent)?, lease)))
    }

    /// Notes what a claim push did: `Some` the claim now ours.
    fn claimed(&mut self, story: &str, ours: Option<(StoryClaim, Oid)>) {
        match ours {
            Some(c) => {
                self.claims.insert(story.to_string(), c);
            }
            None => {
                // Someone else's, or the tip moved: the next fetch says.
                self.claims.remove(story);
                self.last_sync = None;
            }
        }
    }

    /// Our claims whose lease is a third gone: to renew now.
    pub(super) fn due(&self, now: DateTime<Utc>) -> Vec<String> {
        let third = chrono::TimeDelta::from_std(self.lease / 3).unwrap_or_default();
        self.claims
            .iter()
            .filter(|(_, (c, _))| c.worker == self.worker && c.given_up.is_none())
            .filter(|(_, (c, _))| c.lease_until - now < third * 2)
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// Drops our claim and the story's branch once it is delivered (one
    /// push, each ref for itself): a claim another worker took over
    /// meanwhile is left to it, with the branch.
    pub(super) fn release(&mut self, story: &str, branch: &str) -> Result<(), Unreachable> {
        let (specs, leases) = self.release_specs(story, branch, !self.keep_branches);
        self.claims.remove(story);
        if specs.is_empty() {
            return Ok(());
        }
        match remote::push_leased(&self.dir, &specs, &leases) {
            Ok(pushed) => {
                self.reached();
                let dst = format!("refs/heads/{branch}");
                if pushed.iter().any(|p| p.dst == dst && p.rejected.is_some()) {
                    self.keep_branches = true;
                }
                Ok(())
            }
            Err(e) => {
                self.failed();
                Err(e)
            }
        }
    }

    /// The pushes that release `story`: our claim, deleted only if the
    /// remote still has it as we made it, and (`with_branch`) the story's
    /// branch, unless another worker holds the story now.
    fn release_specs(
        &self,
        story: &str,
        branch: &str,
        with_branch: bool,
    ) -> (Vec<String>, Vec<Lease>) {
        let (mut specs, mut leases) = (Vec::new(), Vec::new());
        let held = self.claims.get(story);
        if let Some((_, oid)) = held.filter(|(c, _)| c.worker == self.worker) {
            let claim = self.claim_ref(story);
            specs.push(format!(":{claim}"));
            leases.push((claim, oid.to_string()));
        }
        if with_branch && held.is_none_or(|(c, _)| c.worker == self.worker) {
            specs.push(format!(":refs/heads/{branch}"));
        }
        (specs, leases)
    }

    /// Pushes the story's branch (ours while we hold the claim): a takeover
    /// starts from it.
    pub(super) fn push_branch(&mut self, branch: &str) -> Result<bool, Unreachable> {
        self.push_one(&format!("+refs/heads/{branch}:refs/heads/{branch}"))
    }

    pub(super) fn delete_branch(&mut self, branch: &str) -> Result<bool, Unreachable> {
        self.push_one(&format!(":refs/heads/{branch}"))
    }

    /// Delivers `commit` as the run branch's new tip, if the tip is still
    /// its parent, and in the same atomic push drops our claim on `story`
    /// (only if it is still the one we hold) and the story's branch.
    pub(super) fn deliver(
        &mut self,
        repo: &Repo,
        commit: Oid,
        story: &str,
        branch: &str,
    ) -> Result<Delivery, Unreachable> {
        let run = self.run.clone();
        // Only a branch the remote has: some servers refuse a whole atomic
        // push for deleting a ref that is not there.
        let with_branch = !self.keep_branches && self.story_branch(repo, branch).is_some();
        let (release, leases) = self.release_specs(story, branch, with_branch);
        let specs: Vec<String> =
            std::iter::once(format!("{commit}:{run}")).chain(release).collect();
        let answer = match self.atomic_push(&specs, &leases)? {
            Some(pushed) => answer(&pushed, &run),
            None => Answer::Blocked,
        };
        match answer {
            Answer::Landed => {}
            // The release could not go with it: our view of the claim was
            // out of date, another worker took the story over, or the
            // remote refuses to delete the branch (or to push atomically).
            // Deliver alone, then look again and release what is ours.
            Answer::Blocked => {
                if !self.push_one(&specs[0])? {
                    return Ok(Delivery::Raced);
                }
                self.last_sync = None;
                if self.sync(repo, Duration::ZERO).is_ok() {
                    let _ = self.release(story, branch);
                }
            }
            Answer::Raced => return Ok(Delivery::Raced),
        }
        self.claims.remove(story);
        Ok(Delivery::Landed)
    }

    /// The run branch as last fetched.
    pub(super) fn tip(&self, repo: &Repo, run_branch: &str) -> Option<Oid> {
        repo.ref_target(&format!("refs/remotes/origin/{run_branch}"))
    }

    /// The story branch a dead worker pushed, to take over from.
    pub(super) fn story_branch(&self, repo: &Repo, branch: &str) -> Option<Oid> {
        repo.ref_target(&format!("refs/remotes/origin/{branch}"))
    }

    /// Tells every worker of a usage limit until `at` (the later of theirs and ours).
    pub(super) fn share_limit(
        &mut self,
        repo: &Repo,
        at: DateTime<Utc>,
    ) -> Result<(), Unreachable> {
        self.publish(repo, |s| {
            if s.usage_limit_until.is_some_and(|t| t >= at) {
                return false;
            }
            s.usage_limit_until = Some(at);
            true
        })
    }

    /// Tells the workers at work that this one stopped the run, and why.
    pub(super) fn share_stop(
        &mut self,
        repo: &Repo,
        outcome: crate::event::RunOutcome,
        message: &str,
    ) -> Result<(), Unreachable> {
        let stop = SharedStop {
            by: self.worker.clone(),
            outcome,
            message: message.into(),
            at: Utc::now(),
        };
        self.publish(repo, |s| {
            s.stop = Some(stop.clone());
            true
        })
    }

    /// Changes the shared state by compare-and-swap: `change` edits the
    /// state as last fetched (and says whether anything is to be written);
    /// a lost race fetches and changes again.
    fn publish(
        &mut self,
        repo: &Repo,
        change: impl Fn(&mut Shared) -> bool,
    ) -> Result<(), Unreachable> {
        for _ in 0..5 {
            let mut shared = self.shared.clone();
            if !change(&mut shared) {
                return Ok(());
            }
            let dst = format!("{}/state", self.ns);
            let parent = repo.ref_target(&self.fetched(&dst));
            let message = format!(
                "ralph: shared state\n\n{}",
                serde_json::to_string(&shared).unwrap_or_default()
            );
            let commit = repo.note_commit(&message, parent)?;
            if self.push_one(&format!("{commit}:{dst}"))? {
                self.shared = shared;
                return Ok(());
            }
            self.last_sync = None;
            self.sync(repo, Duration::ZERO)?;
        }
        Ok(())
    }

    fn push_one(&mut self, spec: &str) -> Result<bool, Unreachable> {
        self.push_one_leased(spec, &[])
    }

    fn push_one_leased(&mut self, spec: &str, leases: &[Lease]) -> Result<bool, Unreachable> {
        match remote::push_leased(&self.dir, &[spec.to_string()], leases) {
            Ok(results) => {
                self.reached();
                Ok(results.iter().all(|Pushed { rejected, .. }| rejected.is_none()))
            }
            Err(e) => {
                self.failed();
                Err(e)
            }
        }
    }
}

/// What a claim to start a story did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Claimed {
    Ours,
    /// Ours, but the remote could not assert the tip with it (no atomic
    /// pushes): fetch, and see whether the story is still to do.
    Unchecked,
    /// Another worker holds the story (or made its claim first).
    Lost,
    /// The run branch moved on since this worker last looked: fetch, and
    /// see whether the story is still to do.
    Moved,
}

/// Reads the answer to [`Remote::claim_on_tip`]'s push. A claim refused
/// for its own sake is lost, even if the tip moved too.
pub(super) fn claimed(pushed: &[Pushed], claim: &str, run: &str) -> Claimed {
    let refused = |dst: &str| {
        pushed
            .iter()
            .find(|p| p.dst == dst)
            .map(|p| p.rejected.as_deref().map(|w| !remote::collateral(w)))
    };
    match (refused(claim), refused(run)) {
        (Some(None), Some(None)) => Claimed::Ours,
        (Some(Some(true)), _) | (None, _) => Claimed::Lost,
        _ => Claimed::Moved,
    }
}

/// What a delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Delivery {
    /// The run branch has the commit, and nothing of the story is left on
    /// the remote for this worker to release.
    Landed,
    /// The run branch moved on first: merge again onto its new tip.
    Raced,
}

/// What the remote said of an atomic delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// Every ref of the push went.
    Landed,
    /// The run branch would have gone, but another ref of the push was
    /// refused (git says "atomic push failed" for the run branch then).
    Blocked,
    /// The run branch was refused for its own sake: another delivery won.
    Raced,
}

pub(super) fn answer(pushed: &[Pushed], run: &str) -> Answer {
    match pushed.iter().find(|p| p.dst == run).map(|p| p.rejected.as_deref()) {
        Some(None) if pushed.iter().all(|p| p.rejected.is_none()) => Answer::Landed,
        Some(None) => Answer::Blocked,
        Some(Some(why)) if remote::collateral(why) => Answer::Blocked,
        _ => Answer::Raced,
    }
}

/// The JSON after a note commit's first blank line.
pub(super) fn parse<T: for<'de> Deserialize<'de>>(message: &str) -> Option<T> {
    let body = message.split_once("\n\n").map_or(message, |(_, b)| b);
    serde_json::from_str(body.trim()).ok()
}

#[cfg(test)]
mod tests;
