//! The end of a run: the report (claimed vs verified per story, the
//! iteration closest to passing), `runs.jsonl`, the end hook, and the
//! exit code.

use chrono::Utc;

use super::{End, Run};
use crate::error::Error;
use crate::event::{BestIteration, Event, RunOutcome, StoryReport};
use crate::prd::{Prd, Story};
use crate::state::Phase;
use crate::store;

impl Run<'_> {
    pub(super) fn finish(mut self, end: End) -> Result<u8, Error> {
        let prd = self.reload_prd().unwrap_or_else(|| self.good_prd.clone());
        let report: Vec<StoryReport> = prd.stories().iter().map(|s| self.story_report(s)).collect();
        let best = (end.outcome != RunOutcome::Complete)
            .then(|| self.state.best.clone())
            .flatten()
            .map(|b| BestIteration {
                iteration: b.iteration,
                commit: b.commit,
                score: b.description,
            });
        self.record_end(&end, &prd);
        self.end_hook(&end, prd.passing(), prd.stories().len());
        let code = end.code;
        let end = Event::RunEnd {
            outcome: end.outcome,
            exit_code: end.code,
            iterations: self.state.iteration,
            passing: prd.passing(),
            stories: prd.stories().len(),
            cost_usd: self.state.cost_usd,
            tokens: self.state.tokens,
            duration_ms: self.clock.started.elapsed().as_millis() as u64,
            message: end.message,
            report,
            best,
            switches: self.state.switches.clone(),
            prd_proposals: self.state.prd_proposals.clone(),
            protected_refused: self.state.protected_refused.clone(),
        };
        self.deliver_at_end(&end);
        self.reporter.emit(&end);
        Ok(code)
    }

    /// Where one story stands at the end: claimed, verified, what it cost,
    /// what its gate was, and what was refused or flagged on the way.
    fn story_report(&self, s: &Story) -> StoryReport {
        let verified = self.kit.gate.as_ref().map(|_| self.state.verified.contains(&s.id));
        let uncommitted = self.state.uncommitted.contains(&s.id);
        let tally = self.state.stories.get(&s.id).cloned().unwrap_or_default();
        StoryReport {
            id: s.id.clone(),
            title: s.title.clone(),
            claimed: self.state.claimed.contains(&s.id)
                || self.state.passing_at_start.contains(&s.id),
            verified,
            passes: s.passes,
            note: match self.state.given_up.get(&s.id) {
                Some(why) if !s.passes => Some(format!("given up: {why}")),
                _ => uncommitted.then(|| {
                    "its work passed but is not committed (run.commit_leftovers = false)".into()
                }),
            },
            work: tally.work,
            gate: self.gate_command(s).map(|c| crate::gate::display(&c)),
            gate_source: self.gate_command(s).map(|_| match &s.verify {
                Some(_) => "its \"verify\" in prd.json".to_string(),
                None => self.cfg.gate.source.clone(),
            }),
            findings: tally.findings,
        }
    }

    /// The end in the checkpoint (closed, or left to resume) and a line in
    /// `runs.jsonl`.
    fn record_end(&mut self, end: &End, prd: &Prd) {
        // An interrupted run stays resumable; every other end closes the run.
        // A worker's turn ends after one iteration: its story's run goes on
        // at the next turn, with its feedback, handoff and breaker.
        let turn_over = self.opts.mode.worker().is_some()
            && matches!(end.outcome, RunOutcome::MaxIterations | RunOutcome::RateLimited);
        let resumable = end.outcome == RunOutcome::Interrupted || turn_over;
        self.state.outcome = Some(end.outcome);
        self.state.message = Some(end.message.clone());
        self.state.exit_code = Some(end.code);
        self.checkpoint(if resumable { Phase::Idle } else { Phase::Ended });
        let _ = store::append_jsonl(
            &self.paths.store.runs(),
            &serde_json::json!({
                "run_id": self.state.run_id,
                "ended_at": Utc::now(),
                "outcome": end.outcome,
                "exit_code": end.code,
                "iterations": self.state.iteration,
                "passing": prd.passing(),
                "stories": prd.stories().len(),
                "cost_usd": self.state.cost_usd,
                "tokens": self.state.tokens,
            }),
        );
    }
}
