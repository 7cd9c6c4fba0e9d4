//! A run story by story: `ralph report`, and the Markdown written at the
//! end of every run.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Recorded, RunSummary, inner, summarize};
use crate::event::{Event, IterationResult, MergeResult, SwitchReport};

/// One gate run on a story's work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    pub iteration: u32,
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub summary: String,
}

/// One story's share of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoryLine {
    pub id: String,
    pub title: String,
    /// Counted iterations on it (not the retried `transient` ones, not stopped ones).
    pub attempts: u32,
    /// Iterations that hit an API limit and were retried.
    pub retried: u32,
    /// Resolver iterations: a parallel run's agent merging the story's work
    /// onto the run branch where it conflicted (not among `attempts`).
    #[serde(default)]
    pub resolves: u32,
    /// Why each merge attempt of it that failed did (a parallel run).
    #[serde(default)]
    pub merge_failures: Vec<String>,
    /// It passes at the end of the run.
    pub passes: bool,
    /// The gate verified it (`None`: no gate).
    pub verified: Option<bool>,
    /// This run got it to pass.
    pub delivered: bool,
    /// Delivered by its first attempt, never sent back by the merge queue.
    pub first_pass: bool,
    /// Its iterations end to end (agent, gate, ralph's checks).
    pub wall_ms: u64,
    /// Of which the agent ran (the iterations less their gates).
    pub agent_ms: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost_usd: f64,
    /// Some of `cost_usd` is ralph's estimate from a price table.
    pub cost_estimated: bool,
    pub gates: Vec<GateResult>,
    /// The commit that delivered it.
    pub commit: Option<String>,
    /// The agents that ran its iterations, in the order they first did.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Lessons its iterations produced.
    pub lessons: Vec<String>,
    /// Why it does not count although it looks done, when ralph knows.
    pub note: Option<String>,
    /// Its gate, its test counts, and what ralph refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<StoryOracle>,
}

/// The run as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub attempts: u32,
    pub delivered: usize,
    pub first_pass: usize,
    /// `first_pass / delivered`; `None` when nothing was delivered.
    pub first_pass_rate: Option<f64>,
    pub cost_usd: f64,
    pub cost_estimated: bool,
    /// `cost_usd / delivered`; `None` when nothing was delivered.
    pub cost_per_delivered_story: Option<f64>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Waiting for usage limits, the calls-per-hour window and back-offs.
    pub waited_ms: u64,
    /// Iterations cut short by an API limit (retried, not counted).
    pub retried_ms: u64,
    /// `waited_ms + retried_ms`: time lost to limits and back-offs.
    pub lost_ms: u64,
}

/// A run's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub summary: RunSummary,
    pub stories: Vec<StoryLine>,
    pub totals: Totals,
    /// Each change of agent (a fallback for a usage limit, the way back).
    #[serde(default)]
    pub switches: Vec<SwitchReport>,
    /// Edits of prd.json the agents made and ralph set back.
    #[serde(default)]
    pub prd_proposals: Vec<crate::event::PrdProposal>,
    /// Changes of protected paths the agents made and ralph set back.
    #[serde(default)]
    pub protected_refused: Vec<crate::event::ProtectedChange>,
    /// What the sandbox denied agents and gates, in order.
    #[serde(default)]
    pub sandbox_denials: Vec<SandboxDenial>,
}

/// What the sandbox denied one iteration's agent or gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxDenial {
    pub iteration: u32,
    /// The story the iteration worked on (when known).
    pub story_id: Option<String>,
    pub who: crate::event::Confined,
    pub denials: Vec<String>,
}

/// What judged a story and what ralph refused (from the run's end).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoryOracle {
    /// The gate command and where it came from.
    pub gate: Option<String>,
    pub gate_source: Option<String>,
    /// What the oracle found, every key written (`null`, `[]`) as `ralph
    /// report --json` always did; state.json and the run end leave them out.
    #[serde(flatten, serialize_with = "crate::oracle::Findings::serialize_in_full")]
    pub findings: crate::oracle::Findings,
}

fn line(id: &str, title: &str) -> StoryLine {
    StoryLine {
        id: id.to_string(),
        title: title.to_string(),
        attempts: 0,
        retried: 0,
        resolves: 0,
        merge_failures: Vec::new(),
        passes: false,
        verified: None,
        delivered: false,
        first_pass: false,
        wall_ms: 0,
        agent_ms: 0,
        tokens_in: 0,
        tokens_out: 0,
        cost_usd: 0.0,
        cost_estimated: false,
        gates: Vec::new(),
        commit: None,
        agents: Vec::new(),
        lessons: Vec::new(),
        note: None,
        oracle: None,
    }
}

/// A run's report from its events (in the order recorded).
pub fn report(run_id: &str, events: &[Recorded]) -> RunReport {
    let mut t = Tally::default();
    for r in events {
        t.add(r);
    }
    if let Some(w) = t.wait {
        t.waited_ms += waited(w, t.last_tick.unwrap_or(w.0));
    }
    let (prd_proposals, protected_refused) = events
        .iter()
        .rev()
        .find_map(|r| match &r.event {
            Event::RunEnd { prd_proposals, protected_refused, .. } => {
                Some((prd_proposals.clone(), protected_refused.clone()))
            }
            _ => None,
        })
        .unwrap_or_default();
    let mut stories = t.stories;
    // The end's report has every story, in the PRD's order, and the verdicts.
    if let Some(end) = events.iter().rev().find_map(|r| match &r.event {
        Event::RunEnd { report, .. } => Some(report),
        _ => None,
    }) {
        stories = in_the_end_s_order(stories, end);
    }
    RunReport {
        summary: summarize(run_id, events),
        totals: totals(&stories, t.waited_ms, t.retried_ms),
        stories,
        switches: t.switches,
        prd_proposals,
        protected_refused,
        sandbox_denials: t.sandbox_denials,
    }
}

/// What the events told so far, story by story.
#[derive(Default)]
struct Tally {
    stories: Vec<StoryLine>,
    /// Stories whose merge failed or went to a resolver (not a first pass).
    sent_back: std::collections::BTreeSet<String>,
    waited_ms: u64,
    retried_ms: u64,
    switches: Vec<SwitchReport>,
    /// Gate time of each story's iteration under way (inside its wall time).
    gate_ms: std::collections::BTreeMap<String, u64>,
    sandbox_denials: Vec<SandboxDenial>,
    current_story: Option<String>,
    /// A wait under way: since when, and for how long it was planned.
    wait: Option<(DateTime<Utc>, u64)>,
    last_tick: Option<DateTime<Utc>>,
}

/// A wait counts for as long as it lasted: until the next event (a run
/// killed or stopped in it resumes with a new start), never more than it
/// was planned for; a wait with nothing after it, until its last tick.
fn waited((from, planned_ms): (DateTime<Utc>, u64), to: DateTime<Utc>) -> u64 {
    ((to - from).num_milliseconds().max(0) as u64).min(planned_ms)
}

/// The line of story `id` in `stories`, added when it has none yet.
fn story<'s>(stories: &'s mut Vec<StoryLine>, id: &str, title: &str) -> &'s mut StoryLine {
    match stories.iter().position(|s| s.id == id) {
        Some(i) => &mut stories[i],
        None => {
            stories.push(line(id, title));
            stories.last_mut().expect("just pushed")
        }
    }
}

impl Tally {
    /// An iteration's end: its kind counted, its time, cost and tokens
    /// added, and the story delivered when it passed (a worker's pass is
    /// not: its merge is).
    fn iteration_end(&mut self, e: &Event, from_worker: bool) {
        let Event::IterationEnd {
            story_id,
            result,
            duration_ms,
            story_passes,
            cost_usd,
            cost_estimated,
            tokens,
            tokens_in,
            tokens_out,
            commit,
            lessons,
            resolve,
            ..
        } = e
        else {
            return;
        };
        let s = story(&mut self.stories, story_id, "");
        match result {
            IterationResult::Transient => {
                s.retried += 1;
                self.retried_ms += duration_ms;
            }
            IterationResult::Stopped => {}
            _ if *resolve => s.resolves += 1,
            _ => s.attempts += 1,
        }
        s.wall_ms += duration_ms;
        // The iteration's gates ran inside it.
        s.agent_ms += duration_ms.saturating_sub(self.gate_ms.remove(story_id).unwrap_or(0));
        s.cost_usd += cost_usd.unwrap_or(0.0);
        s.cost_estimated |= *cost_estimated && cost_usd.is_some();
        s.tokens_in += tokens_in.or(*tokens).unwrap_or(0);
        s.tokens_out += tokens_out.unwrap_or(0);
        s.lessons.extend(lessons.iter().cloned());
        if *story_passes && !from_worker && !s.delivered {
            s.delivered = true;
            s.first_pass = s.attempts == 1;
            s.commit.clone_from(commit);
        }
    }

    /// An iteration's start: the story it works on, its title, its agent.
    fn iteration_start(&mut self, story_id: &str, title: &str, agent: &str) {
        self.current_story = Some(story_id.to_string());
        let s = story(&mut self.stories, story_id, title);
        if s.title.is_empty() {
            s.title = title.to_string();
        }
        if !agent.is_empty() && !s.agents.iter().any(|a| a == agent) {
            s.agents.push(agent.to_string());
        }
    }

    /// A merge attempt (a parallel run): the story delivered when merged;
    /// sent back when not, and a failure unless a resolver takes it on.
    fn merge(
        &mut self,
        story_id: &str,
        result: MergeResult,
        commit: &Option<String>,
        message: &str,
    ) {
        let s = story(&mut self.stories, story_id, "");
        match result {
            MergeResult::Merged => {
                s.delivered = true;
                s.first_pass = s.attempts == 1 && !self.sent_back.contains(story_id);
                s.commit.clone_from(commit);
            }
            // Not yet a failure: the resolution's outcome is.
            MergeResult::Resolving => {
                self.sent_back.insert(story_id.to_string());
            }
            MergeResult::Conflict
            | MergeResult::GateFailed
            | MergeResult::ResolveFailed
            | MergeResult::Blocked => {
                self.sent_back.insert(story_id.to_string());
                s.merge_failures.push(message.to_string());
            }
        }
    }

    /// One recorded event, tallied: a dispatch on its kind.
    fn add(&mut self, r: &Recorded) {
        let from_worker = matches!(r.event, Event::Worker { .. });
        if matches!(r.event, Event::WaitTick { .. }) {
            self.last_tick = Some(r.ts);
            return;
        }
        if let Some(w) = self.wait.take() {
            self.waited_ms += waited(w, r.ts);
        }
        match inner(&r.event) {
            Event::IterationStart { story_id, story_title, agent, .. } => {
                self.iteration_start(story_id, story_title, agent);
            }
            Event::AgentSwitch { iteration, from, to, reason, until } => {
                self.switches.push(SwitchReport {
                    iteration: *iteration,
                    from: from.clone(),
                    to: to.clone(),
                    reason: *reason,
                    until: *until,
                });
            }
            Event::Gate { iteration, story_id, passed, exit_code, duration_ms, summary } => {
                let s = story(&mut self.stories, story_id, "");
                *self.gate_ms.entry(story_id.clone()).or_default() += duration_ms;
                s.gates.push(GateResult {
                    iteration: *iteration,
                    passed: *passed,
                    exit_code: *exit_code,
                    duration_ms: *duration_ms,
                    summary: summary.clone(),
                });
            }
            e @ Event::IterationEnd { .. } => self.iteration_end(e, from_worker),
            Event::Merge { story_id, result, commit, message, .. } => {
                self.merge(story_id, *result, commit, message);
            }
            Event::Waiting { seconds, .. } if !from_worker => {
                self.wait = Some((r.ts, seconds.saturating_mul(1000)));
                self.last_tick = None;
            }
            // A worker's own wait (its events arrive among the others').
            Event::Waiting { seconds, .. } => self.waited_ms += seconds.saturating_mul(1000),
            Event::SandboxDenied { iteration, who, denials } => {
                self.sandbox_denials.push(SandboxDenial {
                    iteration: *iteration,
                    story_id: self.current_story.clone(),
                    who: *who,
                    denials: denials.clone(),
                });
            }
            _ => {}
        }
    }
}

/// `stories` in the order of the run end's report (the PRD's), with its
/// verdicts; stories it does not list after them.
fn in_the_end_s_order(
    mut stories: Vec<StoryLine>,
    end: &[crate::event::StoryReport],
) -> Vec<StoryLine> {
    let mut ordered = Vec::new();
    for st in end {
        let mut s = match stories.iter().position(|s| s.id == st.id) {
            Some(i) => stories.remove(i),
            None => line(&st.id, &st.title),
        };
        s.title.clone_from(&st.title);
        s.passes = st.passes;
        s.verified = st.verified;
        s.note.clone_from(&st.note);
        s.oracle = Some(StoryOracle {
            gate: st.gate.clone(),
            gate_source: st.gate_source.clone(),
            findings: st.findings.clone(),
        })
        .filter(|o| o.gate.is_some() || o.findings.refused_or_flagged());
        if s.commit.is_none() {
            s.commit.clone_from(&st.work.commit);
        }
        ordered.push(s);
    }
    ordered.append(&mut stories);
    ordered
}

fn totals(stories: &[StoryLine], waited_ms: u64, retried_ms: u64) -> Totals {
    let delivered = stories.iter().filter(|s| s.delivered).count();
    let first_pass = stories.iter().filter(|s| s.first_pass).count();
    let cost_usd: f64 = stories.iter().map(|s| s.cost_usd).sum();
    Totals {
        attempts: stories.iter().map(|s| s.attempts).sum(),
        delivered,
        first_pass,
        first_pass_rate: (delivered > 0).then(|| first_pass as f64 / delivered as f64),
        cost_usd,
        cost_estimated: stories.iter().any(|s| s.cost_estimated),
        cost_per_delivered_story: (delivered > 0).then(|| cost_usd / delivered as f64),
        tokens_in: stories.iter().map(|s| s.tokens_in).sum(),
        tokens_out: stories.iter().map(|s| s.tokens_out).sum(),
        waited_ms,
        retried_ms,
        lost_ms: waited_ms + retried_ms,
    }
}
