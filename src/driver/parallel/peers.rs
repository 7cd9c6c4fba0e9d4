//! Who else works the run's stories, behind one trait: nobody ([`Alone`],
//! a `--jobs N` run on one machine) or the workers of `ralph worker
//! --remote` on other machines ([`Shared`], through the clone's `origin`).
//! The loop and the merge queue ask [`Peers`] and never which it is: a
//! claim, a renewal, a delivery, a stop or a limit to share, a story given
//! up — each is a no-op, or instant success, for a run that is alone.

use std::time::Duration;

use chrono::{DateTime, Utc};
use git2::Oid;

use super::remote::{self, Claimed, Delivery, Hold, Remote, Unreachable};
use crate::event::RunOutcome;
use crate::git::Repo;

/// What the others did since the last look.
#[derive(Debug, Clone, Default)]
pub(super) struct News {
    /// The run branch's tip as they left it.
    pub tip: Option<Oid>,
    /// A usage limit another worker met, until then.
    pub usage_limit_until: Option<DateTime<Utc>>,
    /// Another worker stopped the whole run: this one stops too, for the
    /// same reason.
    pub stop: Option<(RunOutcome, String)>,
}

/// How current this process's view of the others is.
#[derive(Debug)]
pub(super) enum Look {
    /// Just fetched (or there is nobody else): up to date, with the news.
    Fresh(News),
    /// Not looked now (too soon since the last look, or backing off).
    Stale,
}

/// The other workers of the run.
pub(super) trait Peers {
    /// Looks at what the others did, at most every `every` (`ZERO`: now).
    fn look(&mut self, repo: &Repo, branch: &str, every: Duration) -> Result<Look, Unreachable>;

    /// Stories the others hold or gave up: not to start here.
    fn taken(&self, now: DateTime<Utc>) -> Vec<String>;

    /// Another worker still holds a live claim: the run is not over.
    fn others_at_work(&self, now: DateTime<Utc>) -> bool;

    /// Deliveries may arrive from elsewhere: a run with nothing to do here
    /// waits for them instead of ending.
    fn expects_deliveries(&self) -> bool;

    /// Which of `runnable` stories this process's first claim goes to
    /// (workers started together spread over the stories); `None`: the best.
    fn first_pick(&mut self, runnable: usize) -> Option<usize>;

    /// Claims `story` to start it, asserting the run branch is at `tip`.
    fn claim_on_tip(&mut self, repo: &Repo, story: &str, tip: Oid) -> Result<Claimed, Unreachable>;

    /// Claims (or renews the claim on) `story`: whether it is ours now.
    fn claim(&mut self, repo: &Repo, story: &str) -> Result<bool, Unreachable>;

    /// Right after a look: renews the claims on `here` (the stories at work
    /// in this process) that are due, and makes again those the remote
    /// lost. The stories another worker took over meanwhile.
    fn renew(&mut self, repo: &Repo, here: &[String], now: DateTime<Utc>) -> Vec<String>;

    /// Attempts of a merge whose tip keeps moving before it is an error.
    fn merge_tries(&self) -> usize;

    /// Stories one merge may deliver at once, `configured` at most.
    fn batch_limit(&self, configured: usize) -> usize;

    /// Puts `commit` (gated, `story`'s merge) on the shared run branch
    /// before the local one moves; releases the story's claim with it.
    fn deliver(
        &mut self,
        repo: &Repo,
        commit: Oid,
        story: &str,
        branch: &str,
    ) -> Result<Delivery, Unreachable>;

    /// Lets go of `story` (passing already, or not to be worked here).
    fn release(&mut self, story: &str, branch: &str);

    /// A story's attempt is redone from the new tip: its pushed branch goes.
    fn drop_branch(&mut self, branch: &str);

    /// A story's turn ended without passing: its branch is kept where a
    /// takeover can start from it.
    fn keep_turn(&mut self, branch: &str);

    /// `story` is given up here: no other worker takes it.
    fn give_up(&mut self, repo: &Repo, story: &str, why: &str);

    /// The branch a worker that died pushed for `branch`, to go on from.
    fn pushed_branch(&self, repo: &Repo, branch: &str) -> Option<Oid>;

    /// Tells the others of a usage limit until `at`.
    fn share_limit(&mut self, repo: &Repo, at: DateTime<Utc>) -> Result<(), Unreachable>;

    /// Tells the others this process stopped the whole run, and why.
    fn share_stop(
        &mut self,
        repo: &Repo,
        outcome: RunOutcome,
        message: &str,
    ) -> Result<(), Unreachable>;

    /// ralph's bookkeeping files are committed on the run branch here
    /// before the first worker starts (a shared branch is the remote's).
    fn owns_branch(&self) -> bool;
}

/// A run on one machine: nobody else to ask or tell.
pub(super) struct Alone;

impl Peers for Alone {
    fn look(&mut self, _: &Repo, _: &str, _: Duration) -> Result<Look, Unreachable> {
        Ok(Look::Fresh(News::default()))
    }
    fn taken(&self, _: DateTime<Utc>) -> Vec<String> {
        Vec::new()
    }
    fn others_at_work(&self, _: DateTime<Utc>) -> bool {
        false
    }
    fn expects_deliveries(&self) -> bool {
        false
    }
    fn first_pick(&mut self, _: usize) -> Option<usize> {
        None
    }
    fn claim_on_tip(&mut self, _: &Repo, _: &str, _: Oid) -> Result<Claimed, Unreachable> {
        Ok(Claimed::Ours)
    }
    fn claim(&mut self, _: &Repo, _: &str) -> Result<bool, Unreachable> {
        Ok(true)
    }
    fn renew(&mut self, _: &Repo, _: &[String], _: DateTime<Utc>) -> Vec<String> {
        Vec::new()
    }
    fn merge_tries(&self) -> usize {
        5
    }
    fn batch_limit(&self, configured: usize) -> usize {
        configured.max(1)
    }
    fn deliver(&mut self, _: &Repo, _: Oid, _: &str, _: &str) -> Result<Delivery, Unreachable> {
        Ok(Delivery::Landed)
    }
    fn release(&mut self, _: &str, _: &str) {}
    fn drop_branch(&mut self, _: &str) {}
    fn keep_turn(&mut self, _: &str) {}
    fn give_up(&mut self, _: &Repo, _: &str, _: &str) {}
    fn pushed_branch(&self, _: &Repo, _: &str) -> Option<Oid> {
        None
    }
    fn share_limit(&mut self, _: &Repo, _: DateTime<Utc>) -> Result<(), Unreachable> {
        Ok(())
    }
    fn share_stop(&mut self, _: &Repo, _: RunOutcome, _: &str) -> Result<(), Unreachable> {
        Ok(())
    }
    fn owns_branch(&self) -> bool {
        true
    }
}

/// Workers on other machines, through the git remote.
pub(super) struct Shared {
    pub remote: Remote,
    /// When this process started: a stop recorded before it does not
    /// concern it (a person started it again on purpose).
    pub started: DateTime<Utc>,
}

impl Peers for Shared {
    fn look(&mut self, repo: &Repo, branch: &str, every: Duration) -> Result<Look, Unreachable> {
        let r = &mut self.remote;
        if !r.sync(repo, every)? {
            return Ok(Look::Stale);
        }
        let stop = remote::stop_for(&r.shared, &r.worker, self.started)
            .map(|s| (s.outcome, format!("worker {} stopped the run: {}", s.by, s.message)));
        Ok(Look::Fresh(News {
            tip: r.tip(repo, branch),
            usage_limit_until: r.shared.usage_limit_until.filter(|t| *t > Utc::now()),
            stop,
        }))
    }
    fn taken(&self, now: DateTime<Utc>) -> Vec<String> {
        self.remote.taken(now)
    }
    fn others_at_work(&self, now: DateTime<Utc>) -> bool {
        self.remote.others_at_work(now)
    }
    fn expects_deliveries(&self) -> bool {
        true
    }
    fn first_pick(&mut self, runnable: usize) -> Option<usize> {
        if !self.remote.first_claim {
            return None;
        }
        self.remote.first_claim = false;
        Some(super::plan::first_pick(&self.remote.worker, runnable))
    }
    fn claim_on_tip(&mut self, repo: &Repo, story: &str, tip: Oid) -> Result<Claimed, Unreachable> {
        self.remote.claim_on_tip(repo, story, tip)
    }
    fn claim(&mut self, repo: &Repo, story: &str) -> Result<bool, Unreachable> {
        self.remote.claim(repo, story, None)
    }
    fn renew(&mut self, repo: &Repo, here: &[String], now: DateTime<Utc>) -> Vec<String> {
        let r = &mut self.remote;
        // A claim gone from the remote (deleted by hand, or dropped by a
        // worker that thought the story delivered) is made again: a story
        // at work here is never left unclaimed for another to start.
        let renew: Vec<String> = r
            .due(now)
            .into_iter()
            .filter(|s| here.contains(s))
            .chain(here.iter().filter(|s| r.hold(s, now) == Hold::Free).cloned())
            .collect();
        let mut lost = Vec::new();
        for story in renew {
            match r.claim(repo, &story, None) {
                Ok(true) => {}
                // Our lease ran out and another worker took the story over.
                Ok(false) => lost.push(story),
                Err(_) => break,
            }
        }
        lost
    }
    fn merge_tries(&self) -> usize {
        50
    }
    fn batch_limit(&self, _: usize) -> usize {
        // A delivery pushes one story's merge and releases its claim.
        1
    }
    fn deliver(
        &mut self,
        repo: &Repo,
        commit: Oid,
        story: &str,
        branch: &str,
    ) -> Result<Delivery, Unreachable> {
        self.remote.deliver(repo, commit, story, branch)
    }
    fn release(&mut self, story: &str, branch: &str) {
        let _ = self.remote.release(story, branch);
    }
    fn drop_branch(&mut self, branch: &str) {
        let _ = self.remote.delete_branch(branch);
    }
    fn keep_turn(&mut self, branch: &str) {
        let _ = self.remote.push_branch(branch);
    }
    fn give_up(&mut self, repo: &Repo, story: &str, why: &str) {
        let _ = self.remote.claim(repo, story, Some(why.to_string()));
    }
    fn pushed_branch(&self, repo: &Repo, branch: &str) -> Option<Oid> {
        self.remote.story_branch(repo, branch)
    }
    fn share_limit(&mut self, repo: &Repo, at: DateTime<Utc>) -> Result<(), Unreachable> {
        self.remote.share_limit(repo, at)
    }
    fn share_stop(
        &mut self,
        repo: &Repo,
        outcome: RunOutcome,
        message: &str,
    ) -> Result<(), Unreachable> {
        self.remote.share_stop(repo, outcome, message)
    }
    fn owns_branch(&self) -> bool {
        false
    }
}
