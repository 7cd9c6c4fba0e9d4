//! The run checkpoint, `.ralph/state.json`: written atomically at every
//! phase boundary, so that after a crash or `kill -9` the next `ralph`
//! continues the same run — iteration numbering, budgets and the feedback
//! for the next prompt — instead of starting over.

use std::io;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{self, Loaded, Store};

pub const VERSION: u32 = 1;

/// Where in an iteration the run was when the checkpoint was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Between iterations.
    Idle,
    /// The agent is running.
    Agent,
    /// The gate is running (or the agent's work is being judged).
    Gate,
    /// The run is over.
    Ended,
}

/// What carrying out a verdict is about to write, recorded (durably)
/// before it is written: a resume after a crash in between finishes it,
/// so a story is never left passing with its work uncommitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub story: String,
    pub passes: bool,
    /// ralph's commit: the paths (relative to the work tree) and message.
    pub commit: Option<(Vec<String>, String)>,
}

/// The iteration closest to passing, for the final report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub iteration: u32,
    pub commit: Option<String>,
    /// Sort key: higher is better (gate passed, stories passing, fewer failures).
    pub rank: (bool, usize, i64),
    pub description: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    pub version: u32,
    pub run_id: String,
    pub started_at: DateTime<Utc>,
    pub max_iterations: u32,
    /// The last iteration started.
    pub iteration: u32,
    pub phase: Phase,
    pub story: Option<String>,
    /// The story's `passes` before its iteration started: what a crash
    /// mid-iteration restores, so a dead iteration never counts as passed.
    pub story_passed_before: bool,
    pub cost_usd: f64,
    pub tokens: u64,
    /// Run time spent by earlier processes of this run (for `--max-duration`).
    pub elapsed_ms: u64,
    /// Stories the agent marked passing in this run.
    pub claimed: Vec<String>,
    /// Stories that already passed when the run started (someone claimed them before).
    #[serde(default)]
    pub passing_at_start: Vec<String>,
    /// Stories the gate verified in this run.
    pub verified: Vec<String>,
    /// The gate command the run checked stories with (empty: none), so the
    /// next run can say when it has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gate: Vec<String>,
    /// Stories whose gate passed with the agent's work left uncommitted,
    /// when ralph may not commit it (`run.commit_leftovers = false`).
    #[serde(default)]
    pub uncommitted: Vec<String>,
    pub best: Option<Best>,
    /// What the next prompt should be told about the last iteration.
    pub feedback: Option<String>,
    /// The last valid handoff, as the agent wrote it.
    pub handoff: Option<serde_json::Value>,
    pub outcome: Option<crate::event::RunOutcome>,
    pub exit_code: Option<u8>,
    /// The running agent's process group, so a run that resumes after a
    /// crash can end what the dead run left running.
    #[serde(default)]
    pub agent_pgid: Option<i32>,
    /// A verdict being carried out (see [`Pending`]).
    #[serde(default)]
    pub pending: Option<Pending>,
    /// Why the run ended, in the words of its end message (the blocker,
    /// the breaker's reason, the limit's reset time, the missing program).
    #[serde(default)]
    pub message: Option<String>,
    /// The last iteration that failed (or failed its gate): where to look.
    #[serde(default)]
    pub last_failure: Option<FailureRef>,
    /// Per story: its iterations, the cost its agents reported and, in a
    /// parallel run, the commit it was merged as.
    #[serde(default)]
    pub stories: std::collections::BTreeMap<String, StoryTally>,
    /// Every change of agent (a fallback took over, or the configured
    /// agent came back), for the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<crate::event::SwitchReport>,
    /// Edits of prd.json the agents made and ralph set back, for the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prd_proposals: Vec<crate::event::PrdProposal>,
    /// Stories a parallel run gave up, and why (where their work is kept):
    /// for the report and `ralph status`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub given_up: std::collections::BTreeMap<String, String>,
    /// When the running iteration's agent call was recorded for the
    /// calls-per-hour limit: taken back if ralph's own end cuts the agent off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_at: Option<DateTime<Utc>>,
    /// Changes of protected paths ralph set back, for the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_refused: Vec<crate::event::ProtectedChange>,
    /// What the gate's test runners counted at the run's baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_baseline: Option<crate::gate::TestCounts>,
    /// The ralph process working the run (`process::instance`): a run whose
    /// process still lives is never resumed as an interrupted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// progress.txt as it was when the running iteration started: an
    /// attempt that ralph's end cut off (a crash, `kill -9`, Ctrl-C,
    /// SIGTERM) runs again from it, so the cut-off agent's entry is not
    /// there twice. Cleared once the iteration is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_at_start: Option<FileMark>,
}

/// A file's content, recorded without keeping it: its length and the
/// SHA-256 of its bytes (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMark {
    pub len: u64,
    pub sha256: String,
}

impl FileMark {
    pub fn of(bytes: &[u8]) -> FileMark {
        use sha2::{Digest, Sha256};
        let hex = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
        FileMark { len: bytes.len() as u64, sha256: hex }
    }
}

/// One story's share of a run, for the final report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoryTally {
    /// What was spent on it (flattened: the keys state.json always had).
    #[serde(flatten)]
    pub work: StoryWork,
    /// Its test counts, refusals, flags and check on the base (flattened:
    /// the keys state.json always had, last).
    #[serde(flatten)]
    pub findings: crate::oracle::Findings,
}

/// What a run spent on one story and how it landed: one owner for
/// state.json's tally and the run end's report (both flatten it, so their
/// keys keep their order).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoryWork {
    /// Iterations spent on it in this run.
    #[serde(default)]
    pub iterations: u32,
    /// What its agents reported spending on it, in USD.
    #[serde(default)]
    pub cost_usd: f64,
    /// The commit a parallel run merged it as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The agents that ran its iterations, in the order they first did
    /// (more than one when a fallback agent took over).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Of its iterations, the resolver iterations of a parallel run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resolves: u32,
    /// Why each of its merge attempts failed (a parallel run), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merge_failures: Vec<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// An iteration that failed, for `ralph status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRef {
    pub iteration: u32,
    pub story: String,
    /// Its agent log.
    pub log: String,
    /// What went wrong, in a line.
    pub error: Option<String>,
}

impl RunState {
    pub fn new(run_id: String, now: DateTime<Utc>, max_iterations: u32) -> RunState {
        RunState {
            version: VERSION,
            run_id,
            started_at: now,
            max_iterations,
            iteration: 0,
            phase: Phase::Idle,
            story: None,
            story_passed_before: false,
            cost_usd: 0.0,
            tokens: 0,
            elapsed_ms: 0,
            claimed: Vec::new(),
            passing_at_start: Vec::new(),
            verified: Vec::new(),
            gate: Vec::new(),
            uncommitted: Vec::new(),
            best: None,
            feedback: None,
            handoff: None,
            outcome: None,
            exit_code: None,
            agent_pgid: None,
            pending: None,
            message: None,
            last_failure: None,
            stories: Default::default(),
            switches: Vec::new(),
            prd_proposals: Vec::new(),
            protected_refused: Vec::new(),
            tests_baseline: None,
            call_at: None,
            owner: None,
            given_up: Default::default(),
            progress_at_start: None,
        }
    }

    /// Writes the checkpoint durably: on disk when this returns.
    pub fn save(&self, store: &Store) -> io::Result<()> {
        store::write_json_own(&store.state(), self)
    }

    /// Writes the checkpoint to the page cache only ([`store::write_kept`]):
    /// it survives ralph being killed; a power cut may lose it.
    pub fn save_cached(&self, store: &Store) -> io::Result<()> {
        store::write_kept(&store.state(), &store::json_bytes(self)?)
    }

    /// The checkpoint of a run that did not end, if there is one. A damaged
    /// file is reported (the caller warns and starts a fresh run).
    pub fn load(store: &Store) -> io::Result<(Option<RunState>, Option<String>)> {
        let path = store.state();
        let damaged = |why: String| {
            Some(format!("{} is damaged ({why}); starting a new run", path.display()))
        };
        Ok(match store::read_versioned::<RunState>(&path, VERSION)? {
            Loaded::Missing => (None, None),
            Loaded::Damaged(why) => (None, damaged(why)),
            // The run id names a folder under .ralph/logs: it must stay one
            // plain path segment whatever the file says.
            Loaded::Ok(s) if !valid_run_id(&s.run_id) => {
                (None, damaged(format!("an invalid run id {:?}", s.run_id)))
            }
            Loaded::Ok(s) => (Some(s), None),
        })
    }

    pub fn note_claimed(&mut self, id: &str) {
        if !self.claimed.iter().any(|c| c == id) {
            self.claimed.push(id.to_string());
        }
    }

    pub fn note_uncommitted(&mut self, id: &str, uncommitted: bool) {
        self.uncommitted.retain(|v| v != id);
        if uncommitted {
            self.uncommitted.push(id.to_string());
        }
    }

    pub fn note_verified(&mut self, id: &str, verified: bool) {
        self.verified.retain(|v| v != id);
        if verified {
            self.verified.push(id.to_string());
        }
    }
}

/// A new run id: the local start time to the second, then this process's
/// pid and random bits (`20261202-101500-3a7f-9c41e2`). Two ralphs started
/// in the same second, by cron at :00 on one machine, get different ids:
/// the id is what a resume uses to find a dead run's processes.
pub fn new_run_id(now: DateTime<chrono::Local>) -> String {
    let mut random = [0u8; 3];
    if getrandom::fill(&mut random).is_err() {
        // No source of randomness: the clock's nanoseconds are random enough here.
        random = now.timestamp_subsec_nanos().to_le_bytes()[..3].try_into().unwrap_or_default();
    }
    format!(
        "{}-{:04x}-{:02x}{:02x}{:02x}",
        now.format("%Y%m%d-%H%M%S"),
        std::process::id() & 0xffff,
        random[0],
        random[1],
        random[2]
    )
}

/// Run ids are ralph's own timestamps with a suffix (`20261202-101500-…`):
/// letters, digits, `-` and `_` only.
pub fn valid_run_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_started_in_the_same_second_differ_and_are_valid() {
        let now = chrono::Local::now();
        let ids: std::collections::BTreeSet<String> = (0..50).map(|_| new_run_id(now)).collect();
        assert_eq!(ids.len(), 50, "{ids:?}");
        for id in &ids {
            assert!(valid_run_id(id), "{id}");
            assert!(id.starts_with(&now.format("%Y%m%d-%H%M%S").to_string()), "{id}");
        }
    }

    #[test]
    fn roundtrip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure().unwrap();
        assert!(RunState::load(&store).unwrap().0.is_none());
        let mut s = RunState::new("r1".into(), Utc::now(), 10);
        s.iteration = 2;
        s.phase = Phase::Agent;
        s.note_claimed("A");
        s.note_claimed("A");
        s.save(&store).unwrap();
        let (back, warn) = RunState::load(&store).unwrap();
        let back = back.unwrap();
        assert!(warn.is_none());
        assert_eq!((back.iteration, back.phase, back.claimed.len()), (2, Phase::Agent, 1));
        let mut escaping = RunState::new("../../x".into(), Utc::now(), 1);
        escaping.iteration = 1;
        escaping.save(&store).unwrap();
        let (s, warn) = RunState::load(&store).unwrap();
        assert!(s.is_none() && warn.unwrap().contains("invalid run id"));
        for bad in ["", "{}", "{\"version\":1}", "garbage", "{\"version\":99}"] {
            std::fs::write(store.state(), bad).unwrap();
            let (s, warn) = RunState::load(&store).unwrap();
            assert!(s.is_none() && warn.is_some(), "{bad:?}");
        }
    }

    #[test]
    fn a_checkpoint_that_kept_the_run_branch_s_base_still_loads() {
        // Before trust.json was the one record of a run branch's base, the
        // checkpoint kept it too (`branch`, `base`).
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure().unwrap();
        let mut v = serde_json::to_value(RunState::new("r1".into(), Utc::now(), 10)).unwrap();
        v["branch"] = "ralph/x".into();
        v["base"] = "develop".into();
        std::fs::write(store.state(), v.to_string()).unwrap();
        let (back, warn) = RunState::load(&store).unwrap();
        assert_eq!((back.map(|s| s.run_id), warn), (Some("r1".into()), None));
    }
}
