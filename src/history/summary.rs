//! One run in a line: `ralph history`'s rows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Recorded, inner};
use crate::event::{Event, IterationResult, RunOutcome};

/// A run as `ralph history` shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    /// Its first recorded event.
    pub started_at: Option<DateTime<Utc>>,
    /// Its `run_end`; `None` while it runs, or when it died without one.
    pub ended_at: Option<DateTime<Utc>>,
    /// From its first event to its last.
    pub duration_ms: u64,
    pub outcome: Option<RunOutcome>,
    pub exit_code: Option<u8>,
    /// Why it ended: the first line of the end message.
    pub why: Option<String>,
    /// Counted iterations (not the retried `transient` ones).
    pub iterations: u32,
    pub stories: usize,
    /// Stories passing at the end that the gate verified: with no gate,
    /// none (the agent's word is not a verification).
    pub verified: usize,
    /// Stories passing at the end, verified or not.
    #[serde(default)]
    pub passing: usize,
    /// The run had a gate (its end report judged some story by one).
    #[serde(default)]
    pub gated: bool,
    /// Stories this run got to pass.
    pub delivered: usize,
    pub cost_usd: f64,
    /// Some of `cost_usd` is ralph's estimate from a price table.
    pub cost_estimated: bool,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The agent as the run described it (`codex (gpt-5)`).
    pub agent: Option<String>,
    pub tool: Option<String>,
    pub model: Option<String>,
    /// The branch it worked on (its `run_start`'s): what `ralph deliver`
    /// pushes for it, whatever prd.json names now.
    #[serde(default)]
    pub branch: Option<String>,
}

/// A run's summary from its events (in the order recorded).
pub fn summarize(run_id: &str, events: &[Recorded]) -> RunSummary {
    let mut s = RunSummary {
        run_id: run_id.to_string(),
        started_at: events.first().map(|r| r.ts),
        duration_ms: match (events.first(), events.last()) {
            (Some(a), Some(b)) => (b.ts - a.ts).num_milliseconds().max(0) as u64,
            _ => 0,
        },
        ..RunSummary::default()
    };
    let mut delivered = std::collections::BTreeSet::new();
    for r in events {
        // A worker's own start names its worktree's branch, not the run's.
        if let Event::RunStart { branch: Some(b), .. } = &r.event {
            s.branch.get_or_insert_with(|| b.clone());
        }
        match inner(&r.event) {
            Event::RunStart { agent, tool, model, stories, .. } => {
                s.agent.get_or_insert_with(|| agent.clone());
                if s.tool.is_none() {
                    s.tool.clone_from(tool);
                }
                if s.model.is_none() {
                    s.model.clone_from(model);
                }
                s.stories = *stories;
            }
            e @ Event::IterationEnd { story_id, story_passes, .. } => {
                s.add_iteration(e);
                // A worker's story passes in its worktree; it is delivered
                // when merged.
                if *story_passes && !matches!(r.event, Event::Worker { .. }) {
                    delivered.insert(story_id.clone());
                }
            }
            Event::Merge { story_id, result: crate::event::MergeResult::Merged, .. } => {
                delivered.insert(story_id.clone());
            }
            e @ Event::RunEnd { .. } => s.add_end(r.ts, e),
            _ => {}
        }
    }
    // A resumed run's earlier end was not its end.
    if let Some(last_start) = events.iter().rposition(|r| matches!(r.event, Event::RunStart { .. }))
        && !events[last_start..].iter().any(|r| matches!(r.event, Event::RunEnd { .. }))
    {
        s.ended_at = None;
        s.outcome = None;
        s.exit_code = None;
        s.why = None;
    }
    s.delivered = delivered.len();
    s
}

impl RunSummary {
    /// An iteration's end counted (unless retried or stopped), with its
    /// cost and tokens.
    fn add_iteration(&mut self, e: &Event) {
        let Event::IterationEnd {
            result,
            cost_usd,
            cost_estimated,
            tokens,
            tokens_in,
            tokens_out,
            ..
        } = e
        else {
            return;
        };
        if !matches!(result, IterationResult::Transient | IterationResult::Stopped) {
            self.iterations += 1;
        }
        self.cost_usd += cost_usd.unwrap_or(0.0);
        self.cost_estimated |= *cost_estimated && cost_usd.is_some();
        // An older line has only the total: count it as input.
        self.tokens_in += tokens_in.or(*tokens).unwrap_or(0);
        self.tokens_out += tokens_out.unwrap_or(0);
    }

    /// How the run ended, and where its stories stood then.
    fn add_end(&mut self, ts: DateTime<Utc>, e: &Event) {
        let Event::RunEnd { outcome, exit_code, message, stories, report, .. } = e else { return };
        self.ended_at = Some(ts);
        self.outcome = Some(*outcome);
        self.exit_code = Some(*exit_code);
        self.why = message.lines().next().map(str::to_string);
        self.stories = *stories;
        self.verified = report.iter().filter(|st| st.passes && st.verified == Some(true)).count();
        self.passing = report.iter().filter(|st| st.passes).count();
        self.gated = report.iter().any(|st| st.verified.is_some());
    }
}
