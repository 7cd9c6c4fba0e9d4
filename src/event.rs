//! What the loop reports. The driver never prints: it emits these, and a
//! [`Reporter`] (see `ui`) renders them as a live display, plain lines or
//! JSON. `--json` writes each event as one JSON object per line; its shape
//! is versioned by [`SCHEMA_VERSION`] and documented in the README.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Bumped when a field changes meaning or disappears (adding fields is not a break).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Warn,
}

/// What one iteration amounted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IterationResult {
    /// Evidence of work: changed files, commits beyond bookkeeping, a story newly verified.
    Progress,
    /// The agent ran and nothing changed that counts.
    NoProgress,
    /// The agent run failed (non-zero exit, error result, timeout) or could not be judged.
    Failed,
    /// The gate ran and failed.
    GateFailed,
    /// It changed what judges it — a protected path (set back), or tests
    /// that vanished: its story is not verified.
    Tampered,
    /// A rate, usage or API limit: retried, not counted.
    Transient,
    /// Ctrl-C or SIGTERM stopped it: no verdict.
    Stopped,
}

impl IterationResult {
    /// How it reads in a sentence: "iteration 3 made progress".
    pub fn phrase(self) -> &'static str {
        match self {
            IterationResult::Progress => "made progress",
            IterationResult::NoProgress => "made no progress",
            IterationResult::Failed => "failed",
            IterationResult::GateFailed => "failed the gate",
            IterationResult::Tampered => "was refused (tampered)",
            IterationResult::Transient => "hit an API limit (not counted)",
            IterationResult::Stopped => "was stopped",
        }
    }

    /// The name `--json` and hooks (`RALPH_OUTCOME`) use.
    pub fn as_str(self) -> &'static str {
        match self {
            IterationResult::Progress => "progress",
            IterationResult::NoProgress => "no_progress",
            IterationResult::Failed => "failed",
            IterationResult::GateFailed => "gate_failed",
            IterationResult::Tampered => "tampered",
            IterationResult::Transient => "transient",
            IterationResult::Stopped => "stopped",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    Complete,
    MaxIterations,
    CircuitOpen,
    RateLimited,
    Blocked,
    Budget,
    Environment,
    GateDisagrees,
    /// A parallel run gave stories up (their merges kept failing) and no
    /// other story can start.
    GivenUp,
    Interrupted,
}

impl RunOutcome {
    /// The name `--json`, runs.jsonl and hooks use.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Complete => "complete",
            RunOutcome::MaxIterations => "max_iterations",
            RunOutcome::CircuitOpen => "circuit_open",
            RunOutcome::RateLimited => "rate_limited",
            RunOutcome::Blocked => "blocked",
            RunOutcome::Budget => "budget",
            RunOutcome::Environment => "environment",
            RunOutcome::GateDisagrees => "gate_disagrees",
            RunOutcome::GivenUp => "given_up",
            RunOutcome::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a worker's turn came to, as `worker_end` says it (the words are
/// the JSON's, kept as they were when this was a string).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerOutcome {
    /// The story passes in its worktree: queued for merging.
    #[serde(rename = "passes in its worktree")]
    Passes,
    /// One iteration done, not the story: another turn follows.
    #[serde(rename = "turn over")]
    TurnOver,
    #[serde(rename = "usage limit")]
    UsageLimit,
    /// Blocked, or its breaker opened: the story is given up.
    #[serde(rename = "given up")]
    GivenUp,
    #[serde(rename = "stopped")]
    Stopped,
    /// Its worktree is still held by the last worker: tried again shortly.
    #[serde(rename = "waiting")]
    Waiting,
    /// The worker could not do its turn (the agent cannot start, git fails).
    #[serde(rename = "failed")]
    Failed,
    /// A resolver merged the story onto the run branch's tip.
    #[serde(rename = "resolved")]
    Resolved,
    /// A resolver could not: the merge judge decides what follows.
    #[serde(rename = "not resolved")]
    NotResolved,
    /// A resolver met a limit or a passing API error: resolved again later.
    #[serde(rename = "to be resolved again")]
    ResolveAgain,
}

impl WorkerOutcome {
    /// The words `worker_end` carries.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerOutcome::Passes => "passes in its worktree",
            WorkerOutcome::TurnOver => "turn over",
            WorkerOutcome::UsageLimit => "usage limit",
            WorkerOutcome::GivenUp => "given up",
            WorkerOutcome::Stopped => "stopped",
            WorkerOutcome::Waiting => "waiting",
            WorkerOutcome::Failed => "failed",
            WorkerOutcome::Resolved => "resolved",
            WorkerOutcome::NotResolved => "not resolved",
            WorkerOutcome::ResolveAgain => "to be resolved again",
        }
    }
}

impl std::fmt::Display for WorkerOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the merge queue did with a story.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeResult {
    /// On the run branch, gated after merging.
    Merged,
    /// Its changes conflict with the run branch's: redone from the new tip.
    Conflict,
    /// The gate failed on the merged tree: redone from the new tip.
    GateFailed,
    /// Its changes conflict with the run branch's: a resolver agent merges
    /// both onto the tip (`merge.resolve = "agent"`).
    Resolving,
    /// The resolver could not merge it (markers left, its agent failed, or
    /// the resolution failed a check on the merged tree): redone from the
    /// new tip.
    ResolveFailed,
    /// `merge.attempts` attempts failed: given up.
    Blocked,
}

/// Which budget a [`Event::BudgetWarning`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// `budget.max_cost`, USD.
    Cost,
    /// `budget.max_tokens`.
    Tokens,
    /// `budget.max_duration`, seconds.
    Duration,
}

/// Who a sandbox denial was reported for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confined {
    Agent,
    Gate,
    /// A hook the person configured (it runs in the project the agent wrote).
    Hook,
}

/// One story in the final report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StoryReport {
    pub id: String,
    pub title: String,
    /// The agent marked it `passes: true` at some point in this run (or before).
    pub claimed: bool,
    /// ralph's verdict: the gate passed (`None` without a gate: the PRD's word).
    pub verified: Option<bool>,
    pub passes: bool,
    /// Why a story that looks done does not count, when ralph knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What was spent on it and how it landed (flattened: the keys the
    /// report always had, in their place).
    #[serde(flatten)]
    pub work: crate::state::StoryWork,
    /// The gate command that judged it, and where it came from ("default",
    /// ".ralph/config.toml at main", "flag --gate", "its \"verify\"").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_source: Option<String>,
    /// Its test counts, refusals, flags and check on the base (flattened:
    /// the keys the report always had, last).
    #[serde(flatten)]
    pub findings: crate::oracle::Findings,
}

/// Changes of protected paths an agent made that ralph set back: the
/// agent's proposal, for the person (its version is in `patch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedChange {
    pub iteration: u32,
    pub story_id: String,
    /// The paths, relative to the project.
    pub paths: Vec<String>,
    /// The agent's changes as a patch (`iter-N.protected.patch` in the run's logs).
    pub patch: Option<String>,
}

/// Edits of prd.json an agent made that ralph set back (a story added or
/// renamed, a priority, a `verify`): the agent's proposal, for the person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrdProposal {
    pub iteration: u32,
    /// The story the iteration worked on.
    pub story_id: String,
    /// What it changed: `a new story (X)`, `US-002's "title"`.
    pub changes: Vec<String>,
    /// The agent's prd.json, kept in the run's log folder.
    pub file: String,
}

/// An agent switch, for the final report: as the `agent_switch` event said it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchReport {
    pub iteration: u32,
    pub from: String,
    pub to: String,
    pub reason: crate::agent::fallback::SwitchReason,
    pub until: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStart {
        run_id: String,
        project: Option<String>,
        branch: Option<String>,
        prd: String,
        agent: String,
        max_iterations: u32,
        stories: usize,
        passing: usize,
        /// The iteration number this run continues from, when it resumes a crashed run.
        resumed_from: Option<u32>,
        /// The run's budgets; left out when it has none.
        #[serde(default, skip_serializing_if = "Budget::is_empty")]
        budget: Budget,
        /// The agent CLI (`claude`, `codex`, …, `custom`).
        #[serde(default)]
        tool: Option<String>,
        /// The model configured for it (`agent.model`), when one is.
        #[serde(default)]
        model: Option<String>,
    },
    Notice {
        level: Level,
        message: String,
    },
    IterationStart {
        iteration: u32,
        max_iterations: u32,
        story_id: String,
        story_title: String,
        /// The agent that runs it (`claude`, `codex`, …, `custom`).
        #[serde(default)]
        agent: String,
        /// A resolver iteration of a parallel run: the agent merges the
        /// story's work onto the run branch, where it conflicted.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resolve: bool,
    },
    /// The next iteration runs another agent than the last: the one left
    /// met a usage limit resetting later than `limits.fallback_after`, or
    /// the one returned to is free again.
    AgentSwitch {
        /// The iteration the new agent runs.
        iteration: u32,
        from: String,
        to: String,
        reason: crate::agent::fallback::SwitchReason,
        /// When `from` may be called again (a usage limit).
        until: Option<DateTime<Utc>>,
    },
    AgentOutput {
        iteration: u32,
        text: String,
    },
    IterationEnd {
        iteration: u32,
        story_id: String,
        /// The agent that ran it.
        #[serde(default)]
        agent: String,
        result: IterationResult,
        duration_ms: u64,
        exit_code: Option<i32>,
        commits: usize,
        files_changed: usize,
        story_passes: bool,
        claimed_complete: bool,
        cost_usd: Option<f64>,
        tokens: Option<u64>,
        error: Option<String>,
        log: String,
        /// Input tokens (cache reads and writes included), if reported.
        #[serde(default)]
        tokens_in: Option<u64>,
        /// Output tokens, if reported.
        #[serde(default)]
        tokens_out: Option<u64>,
        /// `cost_usd` is ralph's estimate from the token counts and
        /// `cost.prices`, not the agent's own figure.
        #[serde(default)]
        cost_estimated: bool,
        /// HEAD after the iteration, when the story newly passes: the commit
        /// that delivered it.
        #[serde(default)]
        commit: Option<String>,
        /// The lessons the iteration produced for its story.
        #[serde(default)]
        lessons: Vec<String>,
        /// Why its work was refused (result `tampered`): the protected
        /// paths it changed, the tests that vanished.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refused: Vec<String>,
        /// A resolver iteration (see `IterationStart`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        resolve: bool,
    },
    /// A budget is 80% spent (once per budget and run).
    BudgetWarning {
        budget: BudgetKind,
        used: f64,
        limit: f64,
    },
    /// The sandbox denied the iteration's agent or gate something outside
    /// its policy, as the child's output tells (`sandbox denied <path>`).
    SandboxDenied {
        iteration: u32,
        who: Confined,
        denials: Vec<String>,
    },
    Gate {
        iteration: u32,
        story_id: String,
        passed: bool,
        exit_code: Option<i32>,
        duration_ms: u64,
        summary: String,
    },
    Circuit {
        from: crate::circuit::State,
        to: crate::circuit::State,
        reason: String,
    },
    Waiting {
        reason: String,
        until: DateTime<Utc>,
        seconds: u64,
    },
    /// A countdown tick while waiting (not written to `--json` more than once a minute).
    WaitTick {
        remaining_s: u64,
    },
    /// A parallel run gave a story to a worker, in the story's worktree.
    WorkerStart {
        worker: u32,
        story_id: String,
        story_title: String,
        branch: String,
        worktree: String,
        /// 1 for the first try; more after the merge queue sent it back.
        attempt: u32,
        /// With a remote: how long claiming the story took (one push).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        claim_ms: Option<u64>,
    },
    /// An event of a parallel run's worker: its iterations, gates, notices
    /// and agent output. `--json` writes the inner event itself, with
    /// `worker` and `story` added.
    Worker {
        worker: u32,
        story_id: String,
        inner: Box<Event>,
    },
    /// A worker's turn ended (its process exited).
    WorkerEnd {
        worker: u32,
        story_id: String,
        /// What its turn came to.
        outcome: WorkerOutcome,
        message: String,
    },
    /// The merge queue dealt with a story.
    Merge {
        story_id: String,
        result: MergeResult,
        /// The run branch's new commit, when merged.
        commit: Option<String>,
        /// Conflicting files, for a conflict.
        files: Vec<String>,
        duration_ms: u64,
        message: String,
    },
    RunEnd {
        outcome: RunOutcome,
        exit_code: u8,
        iterations: u32,
        passing: usize,
        stories: usize,
        cost_usd: f64,
        tokens: u64,
        duration_ms: u64,
        message: String,
        report: Vec<StoryReport>,
        /// The iteration closest to passing and its commit, when the run ended unfinished.
        best: Option<BestIteration>,
        /// Every change of agent in the run, and why.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        switches: Vec<SwitchReport>,
        /// Edits of prd.json the agents made and ralph set back: theirs to propose, the person's to make.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        prd_proposals: Vec<PrdProposal>,
        /// Changes of protected paths the agents made and ralph set back:
        /// theirs to propose, the person's to make.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        protected_refused: Vec<ProtectedChange>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BestIteration {
    pub iteration: u32,
    pub commit: Option<String>,
    pub score: String,
}

/// A run's budgets (`budget.*`, `--max-cost` and the like), for a reader
/// that follows the run from elsewhere (`ralph serve`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }
}

/// Where events go.
pub trait Reporter {
    fn emit(&mut self, event: &Event);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each event, with every optional field filled in.
    fn samples() -> Vec<Event> {
        let now = Utc::now();
        vec![
            Event::RunStart {
                run_id: "20261202-101500".into(),
                project: Some("p".into()),
                branch: Some("b".into()),
                prd: "prd.json".into(),
                agent: "claude".into(),
                max_iterations: 10,
                stories: 3,
                passing: 1,
                resumed_from: Some(2),
                budget: Budget {
                    max_cost_usd: Some(5.0),
                    max_duration_s: Some(3600),
                    max_tokens: Some(1000),
                },
                tool: Some("claude".into()),
                model: Some("opus".into()),
            },
            Event::Notice { level: Level::Warn, message: "m".into() },
            Event::WorkerStart {
                worker: 1,
                story_id: "US-001".into(),
                story_title: "t".into(),
                branch: "ralph/x--US-001".into(),
                worktree: "/p/.git/ralph/worktrees/US-001".into(),
                attempt: 1,
                claim_ms: Some(12),
            },
            Event::WorkerEnd {
                worker: 1,
                story_id: "US-001".into(),
                outcome: WorkerOutcome::Passes,
                message: "queued for merging".into(),
            },
            Event::Merge {
                story_id: "US-001".into(),
                result: MergeResult::Conflict,
                commit: Some("abc".into()),
                files: vec!["a.txt".into()],
                duration_ms: 5,
                message: "m".into(),
            },
            Event::IterationStart {
                iteration: 1,
                max_iterations: 10,
                story_id: "US-001".into(),
                story_title: "t".into(),
                agent: "claude".into(),
                resolve: true,
            },
            Event::AgentSwitch {
                iteration: 2,
                from: "claude".into(),
                to: "codex".into(),
                reason: crate::agent::fallback::SwitchReason::UsageLimit,
                until: Some(now),
            },
            Event::AgentOutput { iteration: 1, text: "x".into() },
            Event::IterationEnd {
                iteration: 1,
                story_id: "US-001".into(),
                agent: "claude".into(),
                result: IterationResult::Progress,
                duration_ms: 1,
                exit_code: Some(0),
                commits: 1,
                files_changed: 1,
                story_passes: true,
                claimed_complete: false,
                cost_usd: Some(0.1),
                tokens: Some(10),
                error: Some("e".into()),
                log: "l".into(),
                tokens_in: Some(7),
                tokens_out: Some(3),
                cost_estimated: true,
                commit: Some("abc1234".into()),
                lessons: vec!["l".into()],
                refused: vec!["r".into()],
                resolve: true,
            },
            Event::BudgetWarning { budget: BudgetKind::Cost, used: 8.0, limit: 10.0 },
            Event::SandboxDenied {
                iteration: 1,
                who: Confined::Agent,
                denials: vec!["sandbox denied /etc/x".into()],
            },
            Event::Gate {
                iteration: 1,
                story_id: "US-001".into(),
                passed: false,
                exit_code: Some(1),
                duration_ms: 1,
                summary: "s".into(),
            },
            Event::Circuit {
                from: crate::circuit::State::Closed,
                to: crate::circuit::State::Open,
                reason: "r".into(),
            },
            Event::Waiting { reason: "r".into(), until: now, seconds: 5 },
            Event::WaitTick { remaining_s: 4 },
            Event::RunEnd {
                outcome: RunOutcome::MaxIterations,
                exit_code: 1,
                iterations: 10,
                passing: 1,
                stories: 3,
                cost_usd: 0.5,
                tokens: 100,
                duration_ms: 1,
                message: "m".into(),
                report: vec![StoryReport {
                    id: "US-001".into(),
                    title: "t".into(),
                    claimed: true,
                    verified: Some(true),
                    passes: true,
                    note: Some("n".into()),
                    work: crate::state::StoryWork {
                        iterations: 2,
                        cost_usd: 0.5,
                        commit: Some("abc1234".into()),
                        agents: vec!["claude".into(), "codex".into()],
                        resolves: 1,
                        merge_failures: vec!["conflicts with the run branch in a.txt".into()],
                    },
                    gate: Some("cargo test".into()),
                    gate_source: Some(".ralph/config.toml at main".into()),
                    findings: crate::oracle::Findings {
                        tests_before: Some(crate::gate::TestCounts::default()),
                        tests_after: Some(crate::gate::TestCounts::default()),
                        refused: vec!["r".into()],
                        test_flags: vec!["f".into()],
                        red: Some(crate::oracle::red::RedEvidence {
                            base: "main".into(),
                            commit: "abc".into(),
                            check: "./check.sh".into(),
                            passed_on_base: false,
                            detail: "exit 1".into(),
                        }),
                    },
                }],
                best: Some(BestIteration {
                    iteration: 3,
                    commit: Some("abc1234".into()),
                    score: "s".into(),
                }),
                switches: vec![SwitchReport {
                    iteration: 2,
                    from: "claude".into(),
                    to: "codex".into(),
                    reason: crate::agent::fallback::SwitchReason::UsageLimit,
                    until: Some(now),
                }],
                prd_proposals: vec![],
                protected_refused: vec![ProtectedChange {
                    iteration: 1,
                    story_id: "US-001".into(),
                    paths: vec![".ralph/config.toml".into()],
                    patch: Some("p".into()),
                }],
            },
        ]
    }

    fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    out.push(k.clone());
                    keys(v, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }

    #[test]
    fn a_workers_outcome_reads_as_the_words_it_always_had() {
        use WorkerOutcome as W;
        for o in [
            W::Passes,
            W::TurnOver,
            W::UsageLimit,
            W::GivenUp,
            W::Stopped,
            W::Waiting,
            W::Failed,
            W::Resolved,
            W::NotResolved,
            W::ResolveAgain,
        ] {
            let json = serde_json::to_value(o).unwrap();
            assert_eq!(json, o.as_str(), "{o:?}");
            assert_eq!(serde_json::from_value::<W>(json).unwrap(), o);
            assert!(
                include_str!("../docs/events.md").contains(&format!("`{o}`")),
                "{o} undocumented"
            );
        }
    }

    #[test]
    fn docs_events_md_describes_every_event_and_field() {
        let doc = include_str!("../docs/events.md");
        let mut missing = Vec::new();
        for event in samples() {
            let v = serde_json::to_value(&event).unwrap();
            let name = v["event"].as_str().unwrap().to_string();
            if !doc.contains(&format!("### `{name}`")) {
                missing.push(format!("event {name}"));
            }
            let mut fields = Vec::new();
            keys(&v, &mut fields);
            for f in fields {
                if !doc.contains(&format!("| `{f}` |")) {
                    missing.push(format!("{name}.{f}"));
                }
            }
        }
        assert!(missing.is_empty(), "not described in docs/events.md: {missing:?}");
        assert_eq!(samples().len(), doc.matches("\n### `").count(), "an event without a sample");
    }
}
