//! What the run makes of its workers' turns: their events re-emitted
//! with the worker and the story (iterations numbered as the story's own,
//! counted for the run), and each turn's end turned into what comes next —
//! the merge queue, another turn, a shared pause, a story given up.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::plan::{self, Turn};
use super::workers::{Job, Slot};
use super::{End, Pool, Queued};
use crate::driver::Run;
use crate::event::{Event, IterationResult};
use crate::learn::lessons;

impl Run<'_> {
    pub(super) fn worker_event(&mut self, pool: &mut Pool, no: u32, mut event: Event) {
        let Some(slot) = pool.slots.iter_mut().find(|s| s.no == no) else { return };
        // A worker numbers its iterations by its worktree's store, which a
        // redo starts afresh: the story's own count is the one to show.
        let done = self.state.stories.get(&slot.story).map_or(0, |t| t.work.iterations);
        number_for_story(&mut event, done + 1);
        match &event {
            Event::RunStart { .. } => return,
            Event::RunEnd { outcome, message, .. } => {
                slot.end = Some((*outcome, message.clone()));
                return;
            }
            Event::IterationEnd { result, cost_usd, tokens, agent, .. } => {
                let tally = self.state.stories.entry(slot.story.clone()).or_default();
                tally.work.cost_usd += cost_usd.unwrap_or(0.0);
                if !agent.is_empty() && !tally.work.agents.contains(agent) {
                    tally.work.agents.push(agent.clone());
                }
                if !matches!(result, IterationResult::Transient | IterationResult::Stopped) {
                    self.state.iteration += 1;
                    tally.work.iterations += 1;
                    tally.work.resolves += u32::from(slot.job != Job::Story);
                }
                self.state.cost_usd += cost_usd.unwrap_or(0.0);
                self.state.tokens += tokens.unwrap_or(0);
                self.state.elapsed_ms = self.elapsed_ms();
                let _ = self.save_checkpoint(crate::state::Phase::Idle);
            }
            Event::AgentSwitch { from, to, reason, until, .. } => {
                // A worker numbers its iterations on its own: the run's count is the one to report.
                self.state.switches.push(crate::event::SwitchReport {
                    iteration: self.state.iteration + 1,
                    from: from.clone(),
                    to: to.clone(),
                    reason: *reason,
                    until: *until,
                });
            }
            _ => {}
        }
        let story_id = slot.story.clone();
        self.reporter.emit(&Event::Worker { worker: no, story_id, inner: Box::new(event) });
    }

    pub(super) fn worker_exited(
        &mut self,
        pool: &mut Pool,
        no: u32,
        code: Option<i32>,
    ) -> Option<End> {
        let i = pool.slots.iter().position(|s| s.no == no)?;
        let slot = pool.slots.remove(i);
        crate::process::release(slot.pid);
        let turn = plan::turn(slot.end.as_ref().map(|(o, _)| *o), code);
        let message = match &slot.end {
            Some((_, m)) => m.clone(),
            None => self.worker_stderr(&slot),
        };
        if slot.job != Job::Story {
            return self.resolver_exited(pool, slot, turn, message);
        }
        self.learn_paths(pool, &slot);
        use crate::event::WorkerOutcome as W;
        let (outcome, said) = match &turn {
            Turn::Passed => (W::Passes, "queued for merging".to_string()),
            Turn::Again => (W::TurnOver, String::new()),
            Turn::UsageLimit => (W::UsageLimit, message.clone()),
            Turn::GiveUp(_) => (W::GivenUp, message.clone()),
            Turn::Stopped => (W::Stopped, message.clone()),
            Turn::Busy => (W::Waiting, "its worktree is still held by the last worker".into()),
            Turn::Fatal(_) => (W::Failed, message.clone()),
        };
        self.reporter.emit(&Event::WorkerEnd {
            worker: no,
            story_id: slot.story.clone(),
            outcome,
            message: said,
        });
        // What the turn learned outlives its worktree: the run's store keeps it.
        let worktree = crate::store::Store::for_project(&slot.project, &slot.prd);
        if let Err(e) = lessons::carry(&worktree, &self.paths.store, &slot.story, None) {
            self.warn(format!("cannot keep the lessons of {}: {e}", slot.story));
        }
        // A takeover starts from what this turn left on the branch (a
        // story about to be delivered needs no takeover).
        if turn != Turn::Passed {
            pool.peers.keep_turn(&slot.branch);
        }
        if let Turn::GiveUp(_) = turn {
            pool.peers.give_up(&self.repo, &slot.story, &message);
        }
        let end = match turn {
            Turn::Passed => {
                // The agent marked it and its gate passed in its worktree:
                // claimed, whatever becomes of it at the merge.
                self.state.note_claimed(&slot.story);
                // A story a resolver merged before a crash keeps the other
                // stories' checks for its merge.
                let with = pool.board.resolved_with.get(&slot.story).cloned();
                pool.queue.push_back(Queued { resolved_with: with, ..Queued::of(&slot) });
                None
            }
            Turn::Again | Turn::Stopped => None,
            Turn::Busy => {
                pool.not_before.insert(slot.story.clone(), Instant::now() + Duration::from_secs(1));
                None
            }
            Turn::UsageLimit => {
                self.share_usage_limit(pool, &slot, no);
                None
            }
            Turn::GiveUp(why) => {
                pool.board.given_up.insert(slot.story.clone(), message.clone());
                self.state.given_up.insert(slot.story.clone(), message.clone());
                pool.given_up.insert(slot.story.clone(), (why, message));
                None
            }
            Turn::Fatal(outcome) => {
                Some(End::new(outcome, format!("worker {no} ({}): {message}", slot.story)))
            }
        };
        pool.save_board(&self.paths.store);
        end
    }

    /// A usage limit one worker met pauses them all: the run's own limits
    /// take its reset time, and no agent starts before it.
    pub(super) fn share_usage_limit(&mut self, pool: &mut Pool, slot: &Slot, no: u32) {
        let store = crate::store::Store::for_project(&slot.project, &slot.prd);
        // When the worker's next agent is free (its fallbacks counted).
        let now = Utc::now();
        let at = crate::limits::Limits::load(&store).ok().and_then(|(l, _)| {
            let free = self.kit.agents.choose(&l, now, self.fallback_after()).err();
            let free = free.map(|h| h.at);
            free.or_else(|| l.usage_hold(now))
        });
        let resume = match at {
            Some(at) => {
                self.limits.hold_usage_until(at);
                at
            }
            None => self.limits.set_usage_limit(None, now, self.cfg.limits.usage_limit_wait),
        };
        let _ = self.limits.save(&self.paths.store);
        // The other machines' workers learn it from the remote.
        if let Err(e) = pool.peers.share_limit(&self.repo, resume) {
            self.remote_unreachable(pool, &e.message);
        }
        self.notice(format!(
            "usage limit met by worker {no} ({}): every worker pauses until {}",
            slot.story,
            resume.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S")
        ));
    }

    /// The last lines a worker wrote to stderr: its error, when it failed
    /// before it could report one.
    fn worker_stderr(&self, slot: &Slot) -> String {
        let f = self.kit.log_dir.join(format!("worker-{}.stderr", plan::slug(&slot.story)));
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let text = crate::text::tail_chars(text.trim(), 1500);
        if text.is_empty() { format!("see {}", f.display()) } else { text.to_string() }
    }
}

/// A worker's event renumbered as the story's `n`-th iteration.
fn number_for_story(event: &mut Event, n: u32) {
    match event {
        Event::IterationStart { iteration, .. }
        | Event::IterationEnd { iteration, .. }
        | Event::AgentOutput { iteration, .. }
        | Event::Gate { iteration, .. } => *iteration = n,
        _ => {}
    }
}
