//! Keeping up with the other workers of the run ([`super::peers::Peers`]):
//! looking at what they did, following their deliveries with the run
//! branch and the work tree, renewing and making claims.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::peers::Look;
use super::{Pool, board, remote, workers};
use crate::driver::{End, Run};
use crate::process::Signal;

impl Run<'_> {
    /// Looks at what the other workers did (at most every `every`): brings
    /// the run branch and the work tree up to the shared tip, takes in a
    /// usage limit another machine met or a stop it recorded, and renews
    /// this process's claims (a claim another worker took over stops the
    /// story here). Whether the view is current now (always, alone).
    pub(super) fn sync_peers(&mut self, pool: &mut Pool, every: Duration) -> bool {
        let news = match pool.peers.look(&self.repo, &pool.branch, every) {
            Ok(Look::Fresh(news)) => news,
            Ok(Look::Stale) => return false,
            Err(e) => {
                self.remote_unreachable(pool, &e.message);
                return false;
            }
        };
        if pool.unreachable {
            pool.unreachable = false;
            self.notice("the remote can be reached again");
        }
        let local = self.repo.branch_tip(&pool.branch);
        if let (Some(tip), Some(local)) = (news.tip, local)
            && tip != local
            && self.repo.contains(tip, local)
        {
            self.follow(pool, local, tip);
        }
        if let Some(at) = news.usage_limit_until
            && self.limits.usage_resume_at().is_none_or(|ours| ours < at)
        {
            self.limits.hold_usage_until(at);
            let _ = self.limits.save(&self.paths.store);
            self.notice(format!(
                "another worker met a usage limit: no agent starts before {}",
                at.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S")
            ));
        }
        if let Some((outcome, why)) = news.stop {
            pool.stopped_by = Some(End::new(outcome, why));
        }
        // Only the stories at work here are renewed: a claim a killed
        // process of this worker left runs out, to be taken over (or
        // taken up again by this worker, on top of it).
        let here = pool.in_flight();
        for story in pool.peers.renew(&self.repo, &here, Utc::now()) {
            if let Some(s) = pool.slots.iter().find(|s| s.story == story) {
                workers::signal(s, Signal::Term);
            }
            pool.not_before.insert(story.clone(), Instant::now() + Duration::from_secs(5));
            self.warn(format!("lost the claim on {story} to another worker: stopping it here"));
        }
        true
    }

    /// Moves the run branch and the work tree from `local` to another
    /// machine's `tip`, journalled in parallel.json so a kill halfway is
    /// finished by the next ralph ([`tidy::finish_advance`]).
    fn follow(&mut self, pool: &mut Pool, local: git2::Oid, tip: git2::Oid) {
        pool.board.merging = Some(board::Merging {
            story: String::new(),
            stories: Vec::new(),
            from: local.to_string(),
            to: tip.to_string(),
        });
        if pool.save_board_durably(&self.paths.store).is_err()
            || self.repo.move_branch(&pool.branch, local, tip).is_err()
        {
            pool.board.merging = None;
            return;
        }
        let _ = self.repo.advance_work_tree(local, tip);
        pool.board.merging = None;
        pool.save_board(&self.paths.store);
    }

    /// Claims `story` to work on it: `Ok(true)` when it is ours and still
    /// to do on the run branch's tip. The claim is made on the tip this
    /// worker has (see [`remote::Remote::claim_on_tip`]), so a story
    /// delivered and released after our last look is never worked twice;
    /// when the tip moved, look again and claim on the new one.
    pub(super) fn claim_to_start(
        &mut self,
        pool: &mut Pool,
        story: &str,
    ) -> Result<bool, remote::Unreachable> {
        for _ in 0..3 {
            let Some(tip) = self.repo.branch_tip(&pool.branch) else { break };
            match pool.peers.claim_on_tip(&self.repo, story, tip)? {
                remote::Claimed::Ours => return Ok(self.still_to_do(pool, story)),
                remote::Claimed::Lost => return Ok(false),
                remote::Claimed::Unchecked => return Ok(self.look_again(pool, story)),
                // Not claimed: on a tip we could not fetch, not again.
                remote::Claimed::Moved => {
                    if !self.sync_peers(pool, Duration::ZERO) || self.passes_on_tip(pool, story) {
                        return Ok(false);
                    }
                }
            }
        }
        // The tip keeps moving (or this clone's is not the remote's): claim
        // first, then look, and see again.
        if !pool.peers.claim(&self.repo, story)? {
            return Ok(false);
        }
        Ok(self.look_again(pool, story))
    }

    /// A story claimed without knowing the tip is current: looked again,
    /// still to do? Unless the look went through, it is let go (a delivery
    /// we have not seen must not be worked again).
    fn look_again(&mut self, pool: &mut Pool, story: &str) -> bool {
        if self.sync_peers(pool, Duration::ZERO) {
            return self.still_to_do(pool, story);
        }
        pool.let_go(story);
        false
    }

    /// A story just claimed that passes on the tip already is let go.
    fn still_to_do(&mut self, pool: &mut Pool, story: &str) -> bool {
        if !self.passes_on_tip(pool, story) {
            return true;
        }
        pool.let_go(story);
        false
    }

    pub(super) fn remote_unreachable(&mut self, pool: &mut Pool, why: &str) {
        if !pool.unreachable {
            pool.unreachable = true;
            self.warn(format!("the remote cannot be reached ({why}): retrying with back-off"));
        }
    }
}
