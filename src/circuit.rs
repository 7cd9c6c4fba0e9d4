//! The circuit breaker: stops the loop once iterations stop paying off.
//!
//! ```text
//!            2 iterations without progress          progress
//!   CLOSED ─────────────────────────────► HALF_OPEN ─────────► CLOSED
//!     │                                       │
//!     │ a threshold reached                   │ a threshold reached
//!     ▼                                       ▼
//!    OPEN ◄───────────────────────────────────┘
//!     │  next run after the cooldown ─► HALF_OPEN (counters kept)
//!     │  --auto-reset, `ralph reset-circuit` ─► CLOSED (counters zeroed)
//! ```
//!
//! The thresholds: iterations in a row without progress, the same error
//! signature in a row, iterations in a row with permission denials, and
//! failed agent runs in a row. The breaker opens in the iteration that
//! reaches one, so the driver stops at once. While OPEN it ignores
//! iterations; only [`Breaker::on_start`] and [`Breaker::reset`] leave it.
//!
//! Pure: the driver fills a [`Signals`] per iteration and passes the clock
//! in. [`Breaker::load`] and [`Breaker::save`] are the only effects:
//! `.ralph/circuit.json` (versioned, written atomically) and one line per
//! transition in `.ralph/circuit-history.jsonl`.

use std::fmt;
use std::io;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{self, Loaded, Store};

/// Format version of `circuit.json`.
pub const VERSION: u32 = 1;

/// How long an OPEN breaker waits before a new run may try again (HALF_OPEN).
#[cfg(test)]
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Normal operation.
    Closed,
    /// Iterations are not paying off; one more bad one opens it.
    HalfOpen,
    /// The loop must stop.
    Open,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Closed => "CLOSED",
            State::HalfOpen => "HALF_OPEN",
            State::Open => "OPEN",
        })
    }
}

/// When the breaker moves. A threshold of 0 turns its rule off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Iterations in a row without progress that open it.
    pub no_progress: u32,
    /// Iterations in a row without progress that move CLOSED to HALF_OPEN.
    pub half_open_after: u32,
    /// Iterations in a row with the same error signature that open it.
    pub same_error: u32,
    /// Iterations in a row with permission denials that open it.
    pub permission_denials: u32,
    /// Failed agent runs in a row that open it.
    pub failures: u32,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            no_progress: 3,
            half_open_after: 2,
            same_error: 5,
            permission_denials: 2,
            failures: 3,
        }
    }
}

/// What one iteration amounted to, as the driver judged it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signals {
    pub iteration: u64,
    /// Commits, changed or new files, stories newly passing, tasks completed.
    pub progress: bool,
    /// The agent run failed on the agent's or model's side: non-zero exit,
    /// `is_error`, timeout. Counts whatever the run changed, since a run that
    /// keeps failing wastes its whole timeout every time.
    pub failed: bool,
    /// A rate limit, overload or usage-limit wait. Such an iteration is not
    /// counted at all: the agent never got to work.
    pub transient: bool,
    /// The agent stopped to ask a question: neither progress nor stagnation.
    pub asking_questions: bool,
    /// Normalised error signature, for "the same error N times in a row".
    pub error_signature: Option<String>,
    /// One line of that error as printed, for the reason the breaker gives.
    pub error_example: Option<String>,
    pub permission_denials: usize,
    /// The agent left no valid handoff. Never a failed run: it only names
    /// the cause when iterations without progress open the breaker.
    pub handoff_problem: bool,
}

/// Which rule opened the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    NoProgress,
    /// No progress, and no valid handoff in any of those iterations.
    NoHandoff,
    SameError,
    PermissionDenied,
    Failures,
}

/// One state change, as appended to `circuit-history.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// `None` when the previous state was unreadable (a rebuilt file).
    pub from: Option<State>,
    pub to: State,
    pub reason: String,
    pub at: DateTime<Utc>,
    /// The iteration that caused it; `None` for start-up, reset and rebuild.
    pub iteration: Option<u64>,
}

/// The consecutive counts the thresholds are compared with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub no_progress: u32,
    /// Of the iterations without progress in a row, those that also left
    /// no valid handoff, in a row.
    #[serde(default)]
    pub no_handoff: u32,
    pub same_error: u32,
    pub permission_denials: u32,
    pub failures: u32,
}

/// The breaker, exactly as `circuit.json` holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    version: u32,
    state: State,
    reason: String,
    /// The rule that last opened it; cleared when it closes.
    cause: Option<Cause>,
    changed_at: DateTime<Utc>,
    /// When it last opened; kept after it leaves OPEN, as a record.
    opened_at: Option<DateTime<Utc>>,
    total_opens: u64,
    counters: Counters,
    /// The signature `counters.same_error` counts.
    last_error: Option<String>,
    /// The newest line of that error as printed: what the reason names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_error_example: Option<String>,
    last_iteration: Option<u64>,
    /// Transitions not yet appended to the history file.
    #[serde(skip)]
    unsaved: Vec<Transition>,
}

impl Breaker {
    pub fn new(now: DateTime<Utc>) -> Breaker {
        Breaker {
            version: VERSION,
            state: State::Closed,
            reason: "new".into(),
            cause: None,
            changed_at: now,
            opened_at: None,
            total_opens: 0,
            counters: Counters::default(),
            last_error: None,
            last_error_example: None,
            last_iteration: None,
            unsaved: Vec::new(),
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn is_open(&self) -> bool {
        self.state == State::Open
    }

    pub fn reason(&self) -> &str {
        &self.reason
    }

    #[cfg(test)]
    pub fn cause(&self) -> Option<Cause> {
        self.cause
    }

    pub fn opened_at(&self) -> Option<DateTime<Utc>> {
        self.opened_at
    }

    #[cfg(test)]
    pub fn total_opens(&self) -> u64 {
        self.total_opens
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Called once when a run starts. With `reset` (`--auto-reset`,
    /// `--fresh`) the breaker starts CLOSED with its counters zeroed from
    /// whatever state it was in (`total_opens` kept). Otherwise an OPEN
    /// breaker moves to HALF_OPEN once `cooldown` has passed since it
    /// opened, with its counters kept so one more bad iteration re-opens
    /// it. An `opened_at` in the future means the clock moved back: it
    /// stays OPEN rather than guess.
    pub fn on_start(
        &mut self,
        now: DateTime<Utc>,
        reset: bool,
        cooldown: Duration,
    ) -> Option<Transition> {
        if reset {
            self.clear();
            return (self.state != State::Closed)
                .then(|| self.go(State::Closed, "auto-reset at start".into(), now, None));
        }
        if self.state != State::Open {
            return None;
        }
        // A negative `elapsed` (clock moved back) is below any cooldown.
        let elapsed = now - self.opened_at.unwrap_or(self.changed_at);
        if elapsed < delta(cooldown) {
            return None;
        }
        let reason = format!(
            "cooldown of {} over: opened {}m ago",
            humantime::format_duration(cooldown),
            elapsed.num_minutes()
        );
        Some(self.go(State::HalfOpen, reason, now, None))
    }

    /// Feeds one iteration's signals; returns the transition it caused.
    /// Ignored while OPEN: the driver must stop then.
    pub fn record(
        &mut self,
        signals: &Signals,
        thresholds: &Thresholds,
        now: DateTime<Utc>,
    ) -> Option<Transition> {
        if self.state == State::Open || signals.transient {
            return None;
        }
        self.last_iteration = Some(signals.iteration);
        let stagnant = !signals.progress && !signals.asking_questions;
        self.count(signals, stagnant);
        let (c, t) = (self.counters, thresholds);
        let iteration = Some(signals.iteration);
        if let Some((cause, reason)) = trip(&c, t, stagnant) {
            let reason = self.naming_the_error(cause, reason);
            self.cause = Some(cause);
            self.opened_at = Some(now);
            self.total_opens += 1;
            return Some(self.go(State::Open, reason, now, iteration));
        }
        match self.state {
            State::HalfOpen if signals.progress => {
                self.cause = None;
                Some(self.go(State::Closed, "progress made: recovered".into(), now, iteration))
            }
            State::Closed if stagnant && reached(c.no_progress, t.half_open_after) => {
                let reason = format!("no progress in {} iterations in a row", c.no_progress);
                Some(self.go(State::HalfOpen, reason, now, iteration))
            }
            _ => None,
        }
    }

    /// The streaks one iteration extends or ends, and the error it repeats.
    fn count(&mut self, signals: &Signals, stagnant: bool) {
        let c = &mut self.counters;
        if signals.progress {
            c.no_progress = 0;
        } else if stagnant {
            c.no_progress = c.no_progress.saturating_add(1);
        }
        c.no_handoff = match (signals.progress || !signals.handoff_problem, stagnant) {
            (true, _) => 0,
            (false, true) => c.no_handoff.saturating_add(1),
            (false, false) => c.no_handoff,
        };
        c.failures = if signals.failed { c.failures.saturating_add(1) } else { 0 };
        c.permission_denials =
            if signals.permission_denials > 0 { c.permission_denials.saturating_add(1) } else { 0 };
        match &signals.error_signature {
            Some(sig) if self.last_error.as_ref() == Some(sig) => {
                c.same_error = c.same_error.saturating_add(1);
            }
            Some(sig) => {
                c.same_error = 1;
                self.last_error = Some(sig.clone());
            }
            None => {
                c.same_error = 0;
                self.last_error = None;
            }
        }
        self.last_error_example = match &self.last_error {
            Some(_) => signals.error_example.clone().or(self.last_error_example.take()),
            None => None,
        };
    }

    /// A streak of iterations that all failed with the same error is named
    /// by it: "no progress in 3 iterations in a row, each with the same
    /// error: error[E0308]: mismatched types".
    fn naming_the_error(&self, cause: Cause, reason: String) -> String {
        let c = self.counters;
        let streak = match cause {
            Cause::NoProgress | Cause::NoHandoff => c.no_progress,
            Cause::Failures => c.failures,
            Cause::SameError => c.same_error,
            Cause::PermissionDenied => return reason,
        };
        match &self.last_error_example {
            Some(example) if streak > 1 && c.same_error >= streak => {
                let example = crate::text::clip(example, 200);
                match cause {
                    Cause::SameError => format!("{reason}: {example}"),
                    _ => format!("{reason}, each with the same error: {example}"),
                }
            }
            _ => reason,
        }
    }

    /// `ralph reset-circuit`: back to CLOSED with counters zeroed, whatever
    /// the state. `total_opens` is kept. Always recorded.
    pub fn reset(&mut self, now: DateTime<Utc>, reason: &str) -> Transition {
        self.clear();
        self.go(State::Closed, reason.into(), now, None)
    }

    /// What a person needs to see, above all when it is OPEN.
    pub fn report(&self, cooldown: Duration) -> Report {
        let open = self.state == State::Open;
        let opened_at = self.opened_at.filter(|_| self.state != State::Closed);
        let mut likely_causes = Vec::new();
        let mut how_to_go_on = Vec::new();
        if open {
            likely_causes = self.likely_causes();
            how_to_go_on.push("fix the cause, then run `ralph reset-circuit`".to_string());
            if let Some(at) = opened_at.and_then(|at| at.checked_add_signed(delta(cooldown))) {
                how_to_go_on.push(format!(
                    "or start ralph again after {} (cooldown {}): it resumes HALF_OPEN",
                    at.format("%Y-%m-%d %H:%M:%S UTC"),
                    humantime::format_duration(cooldown)
                ));
            }
            how_to_go_on.push("or start ralph with `--auto-reset`".to_string());
        }
        Report {
            state: self.state,
            reason: self.reason.clone(),
            iterations_without_progress: self.counters.no_progress,
            total_opens: self.total_opens,
            opened_at,
            likely_causes,
            how_to_go_on,
        }
    }

    fn likely_causes(&self) -> Vec<String> {
        let lines: &[&str] = match self.cause {
            Some(Cause::NoProgress) | None => &[
                "the agent ends its turn without committing or changing files",
                "the story is too large or too vague for one iteration",
                "the agent is stuck on something it cannot fix (a failing check, a missing tool)",
            ],
            Some(Cause::SameError) => &[
                "the agent keeps hitting the same error (see the iteration logs)",
                "the environment is broken in a way the agent cannot repair",
            ],
            Some(Cause::NoHandoff) => &[
                "the agent does not write .ralph/handoff.json: a custom prompt without the handoff step, a sandbox that forbids writing there, or an agent that ignores the protocol",
                "the agent ends its turn without doing the story (see the iteration logs)",
                "agents that cannot write files: set run.require_handoff = false",
            ],
            Some(Cause::PermissionDenied) => {
                &["the agent CLI refuses a tool the story needs: allow it in the agent's settings"]
            }
            Some(Cause::Failures) => &[
                "the agent CLI fails to run: a bad flag, an expired login, a bad session id",
                "the model errors or the run times out (see the iteration logs)",
            ],
        };
        let mut causes: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        if let (Some(Cause::SameError), Some(sig)) = (self.cause, &self.last_error) {
            causes.insert(0, format!("repeated error: {sig}"));
        }
        causes
    }

    /// Reads `circuit.json`. Missing → a fresh CLOSED breaker. Damaged
    /// (empty, `{}`, not JSON, unknown state, other version) → a fresh CLOSED
    /// breaker, a warning for the caller, and the rebuild queued for the
    /// history. The file itself is rewritten on the next [`Breaker::save`].
    pub fn load(store: &Store, now: DateTime<Utc>) -> io::Result<(Breaker, Option<String>)> {
        let path = store.circuit();
        let problem = match store::read_versioned::<Breaker>(&path, VERSION)? {
            Loaded::Missing => return Ok((Breaker::new(now), None)),
            Loaded::Ok(breaker) => return Ok((breaker, None)),
            Loaded::Damaged(problem) => problem,
        };
        let mut breaker = Breaker::new(now);
        let reason = format!("rebuilt: {} was damaged ({problem})", path.display());
        breaker.reason = reason.clone();
        breaker.unsaved.push(Transition {
            from: None,
            to: State::Closed,
            reason: reason.clone(),
            at: now,
            iteration: None,
        });
        Ok((breaker, Some(format!("circuit breaker reset to CLOSED: {reason}"))))
    }

    /// Writes `circuit.json` atomically, then appends the transitions made
    /// since the last save to the history. The state file comes first: it is
    /// what the next run acts on; the history is the record. A state change
    /// is written durably (fsync); a counter that merely ticked is not:
    /// losing the tick to a power cut costs one iteration of patience, and
    /// the fsync would cost every iteration.
    pub fn save(&mut self, store: &Store) -> io::Result<()> {
        let bytes = store::json_bytes(self)?;
        if self.unsaved.is_empty() {
            store::write_kept(&store.circuit(), &bytes)?;
        } else {
            store::write_own(&store.circuit(), &bytes)?;
        }
        let path = store.circuit_history();
        for transition in &self.unsaved {
            store::append_jsonl(&path, transition)?;
        }
        self.unsaved.clear();
        Ok(())
    }

    fn clear(&mut self) {
        self.counters = Counters::default();
        self.last_error = None;
        self.last_error_example = None;
        self.cause = None;
    }

    fn go(
        &mut self,
        to: State,
        reason: String,
        now: DateTime<Utc>,
        iteration: Option<u64>,
    ) -> Transition {
        let transition =
            Transition { from: Some(self.state), to, reason: reason.clone(), at: now, iteration };
        self.state = to;
        self.reason = reason;
        self.changed_at = now;
        self.unsaved.push(transition.clone());
        transition
    }
}

/// The transitions in `circuit-history.jsonl`, oldest first, and how many
/// lines could not be read.
#[cfg(test)]
pub fn history(store: &Store) -> io::Result<(Vec<Transition>, usize)> {
    store::read_jsonl(&store.circuit_history())
}

/// The breaker's state explained for a person; `Display` renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub state: State,
    pub reason: String,
    pub iterations_without_progress: u32,
    pub total_opens: u64,
    /// When it opened, unless it is CLOSED.
    pub opened_at: Option<DateTime<Utc>>,
    /// Empty unless OPEN.
    pub likely_causes: Vec<String>,
    /// Empty unless OPEN.
    pub how_to_go_on: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "circuit breaker {}: {}", self.state, self.reason)?;
        writeln!(f, "  iterations without progress: {}", self.iterations_without_progress)?;
        writeln!(f, "  times opened: {}", self.total_opens)?;
        if let Some(at) = self.opened_at {
            writeln!(f, "  opened at: {}", at.format("%Y-%m-%d %H:%M:%S UTC"))?;
        }
        if !self.likely_causes.is_empty() {
            writeln!(f, "likely causes:")?;
            for cause in &self.likely_causes {
                writeln!(f, "  - {cause}")?;
            }
        }
        if !self.how_to_go_on.is_empty() {
            writeln!(f, "to go on:")?;
            for step in &self.how_to_go_on {
                writeln!(f, "  - {step}")?;
            }
        }
        Ok(())
    }
}

/// The rule the counters break, first match wins, and why in words. Each
/// rule fires only on an iteration that itself counted towards it, so
/// counters kept through a cooldown cannot re-open the breaker on an
/// iteration that was fine (a question, say).
fn trip(c: &Counters, t: &Thresholds, stagnant: bool) -> Option<(Cause, String)> {
    if reached(c.permission_denials, t.permission_denials) {
        Some((
            Cause::PermissionDenied,
            format!("permission denied in {} iterations in a row", c.permission_denials),
        ))
    } else if reached(c.failures, t.failures) {
        Some((Cause::Failures, format!("the agent failed {} runs in a row", c.failures)))
    } else if stagnant && reached(c.no_progress, t.no_progress) && c.no_handoff >= c.no_progress {
        Some((
            Cause::NoHandoff,
            format!("no progress and no valid handoff in {} iterations in a row", c.no_progress),
        ))
    } else if stagnant && reached(c.no_progress, t.no_progress) {
        Some((Cause::NoProgress, format!("no progress in {} iterations in a row", c.no_progress)))
    } else if reached(c.same_error, t.same_error) {
        Some((Cause::SameError, format!("the same error in {} iterations in a row", c.same_error)))
    } else {
        None
    }
}

fn reached(count: u32, threshold: u32) -> bool {
    threshold > 0 && count >= threshold
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::{Closed, HalfOpen, Open};

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z").unwrap().with_timezone(&Utc)
    }

    /// One iteration per letter: `p` progress, `n` no progress, `f` failed
    /// without progress, `F` failed with progress, `t` transient (also
    /// failed, with an error and a denial, to show none of it counts), `q`
    /// a question, `d` a denial with progress, `a`/`b` error signatures with
    /// progress, `h` no progress and no handoff, `H` progress without a
    /// handoff.
    fn signals(script: &str) -> Vec<Signals> {
        script
            .chars()
            .zip(1..)
            .map(|(c, iteration)| {
                let mut s = Signals { iteration, ..Signals::default() };
                match c {
                    'p' => s.progress = true,
                    'n' => {}
                    'f' => s.failed = true,
                    'F' => (s.failed, s.progress) = (true, true),
                    't' => {
                        s.transient = true;
                        s.failed = true;
                        s.error_signature = Some("429".into());
                        s.permission_denials = 1;
                    }
                    'q' => s.asking_questions = true,
                    'h' => s.handoff_problem = true,
                    'H' => (s.handoff_problem, s.progress) = (true, true),
                    'd' => (s.permission_denials, s.progress) = (1, true),
                    'a' | 'b' => (s.error_signature, s.progress) = (Some(c.to_string()), true),
                    _ => panic!("unknown step {c}"),
                }
                s
            })
            .collect()
    }

    /// Runs a script at one instant (as if every iteration fell in the same
    /// second) and returns the breaker and `(from, to, iteration)` of each
    /// transition.
    fn run(breaker: &mut Breaker, script: &str) -> Vec<(State, State, u64)> {
        signals(script)
            .iter()
            .filter_map(|s| breaker.record(s, &Thresholds::default(), t0()))
            .map(|t| (t.from.unwrap(), t.to, t.iteration.unwrap()))
            .collect()
    }

    /// Expected transitions as `(from, to, iteration)`.
    type Steps = &'static [(State, State, u64)];

    #[test]
    fn iteration_sequences() {
        #[rustfmt::skip]
        let cases: &[(&str, &str, State, Steps, Option<Cause>)] = &[
            ("three without progress", "nnn", Open, &[(Closed, HalfOpen, 2), (HalfOpen, Open, 3)], Some(Cause::NoProgress)),
            ("progress in HALF_OPEN closes", "nnp", Closed, &[(Closed, HalfOpen, 2), (HalfOpen, Closed, 3)], None),
            ("progress resets the count", "nnpnn", HalfOpen, &[(Closed, HalfOpen, 2), (HalfOpen, Closed, 3), (Closed, HalfOpen, 5)], None),
            ("same error five times", "aaaaa", Open, &[(Closed, Open, 5)], Some(Cause::SameError)),
            ("four times is not enough", "aaaa", Closed, &[], None),
            ("alternating errors are not the same", "ababababab", Closed, &[], None),
            ("same error also counts in HALF_OPEN", "nnaaaaa", Open, &[(Closed, HalfOpen, 2), (HalfOpen, Closed, 3), (Closed, Open, 7)], Some(Cause::SameError)),
            ("denials twice", "dd", Open, &[(Closed, Open, 2)], Some(Cause::PermissionDenied)),
            ("denials not in a row", "dpdpd", Closed, &[], None),
            ("three failed runs despite progress", "FFF", Open, &[(Closed, Open, 3)], Some(Cause::Failures)),
            ("three failed runs without progress", "fff", Open, &[(Closed, HalfOpen, 2), (HalfOpen, Open, 3)], Some(Cause::Failures)),
            ("failure streak broken", "FFpFF", Closed, &[], None),
            ("transient never counts", "tttttttttt", Closed, &[], None),
            ("transient neither breaks nor extends a streak", "nttttn", HalfOpen, &[(Closed, HalfOpen, 6)], None),
            ("questions are neither progress nor stagnation", "nqqqqn", HalfOpen, &[(Closed, HalfOpen, 6)], None),
            ("a question in HALF_OPEN stays there", "nnqq", HalfOpen, &[(Closed, HalfOpen, 2)], None),
            ("no handoff and no progress has its own reason", "hhh", Open, &[(Closed, HalfOpen, 2), (HalfOpen, Open, 3)], Some(Cause::NoHandoff)),
            ("a missing handoff is never a failed run", "HHHHHH", Closed, &[], None),
            ("one handoff in the streak makes it plain no progress", "hnh", Open, &[(Closed, HalfOpen, 2), (HalfOpen, Open, 3)], Some(Cause::NoProgress)),
            ("progress resets the handoff streak", "hhHhh", HalfOpen, &[(Closed, HalfOpen, 2), (HalfOpen, Closed, 3), (Closed, HalfOpen, 5)], None),
        ];
        for (name, script, state, transitions, cause) in cases {
            let mut breaker = Breaker::new(t0());
            let got = run(&mut breaker, script);
            assert_eq!(&got, transitions, "{name}");
            assert_eq!(breaker.state(), *state, "{name}");
            assert_eq!(breaker.cause(), *cause, "{name}");
            assert_eq!(breaker.total_opens(), u64::from(*state == Open), "{name}");
        }
    }

    #[test]
    fn opening_stamps_and_then_ignores_iterations() {
        let mut breaker = Breaker::new(t0());
        run(&mut breaker, "nnn");
        assert_eq!(breaker.opened_at(), Some(t0()));
        assert_eq!(breaker.reason(), "no progress in 3 iterations in a row");
        let before = breaker.clone();
        assert_eq!(run(&mut breaker, "ppp"), []);
        assert_eq!(breaker, before);
    }

    /// The reason a streak opened the breaker names the error every one of
    /// its iterations failed with, as printed (the newest line of it).
    #[test]
    fn a_streak_of_one_error_is_named_in_the_reason() {
        let e0308 = "error[E0308]: mismatched types";
        let step = |c: char, error: Option<(&str, &str)>| {
            let mut s = signals(&c.to_string()).remove(0);
            if let Some((signature, example)) = error {
                s.error_signature = Some(signature.to_string());
                s.error_example = Some(example.to_string());
            }
            s
        };
        let same = Some(("error[e#]: mismatched types", e0308));
        let other = Some(("error: other", "error: other"));
        #[rustfmt::skip]
        let cases: &[(&str, Vec<Signals>, &str)] = &[
            ("no progress, no handoff, one error", vec![step('h', same), step('h', same), step('h', same)],
             "no progress and no valid handoff in 3 iterations in a row, each with the same error: error[E0308]: mismatched types"),
            ("no progress, one error", vec![step('n', same), step('n', same), step('n', same)],
             "no progress in 3 iterations in a row, each with the same error: error[E0308]: mismatched types"),
            ("failed runs, one error", vec![step('F', same), step('F', same), step('F', same)],
             "the agent failed 3 runs in a row, each with the same error: error[E0308]: mismatched types"),
            ("the same error rule", (0..5).map(|_| step('a', same)).collect(),
             "the same error in 5 iterations in a row: error[E0308]: mismatched types"),
            ("another error in the streak: not named", vec![step('h', same), step('h', other), step('h', same)],
             "no progress and no valid handoff in 3 iterations in a row"),
            ("an iteration without an error: not named", vec![step('n', same), step('n', None), step('n', same)],
             "no progress in 3 iterations in a row"),
        ];
        for (name, steps, want) in cases {
            let mut breaker = Breaker::new(t0());
            for s in steps {
                breaker.record(s, &Thresholds::default(), t0());
            }
            assert_eq!(breaker.state(), Open, "{name}");
            assert_eq!(breaker.reason(), *want, "{name}");
        }
    }

    #[test]
    fn three_productive_iterations_in_one_second_stay_closed() {
        let mut breaker = Breaker::new(t0());
        assert_eq!(run(&mut breaker, "ppp"), []);
        assert_eq!(breaker.state(), Closed);
        assert_eq!(breaker.last_iteration, Some(3));
        assert_eq!(breaker.counters(), Counters::default());
        assert!(breaker.unsaved.is_empty());
    }

    #[test]
    fn zero_threshold_turns_a_rule_off() {
        let thresholds = Thresholds { permission_denials: 0, ..Thresholds::default() };
        let mut breaker = Breaker::new(t0());
        for s in signals("dddddd") {
            assert_eq!(breaker.record(&s, &thresholds, t0()), None);
        }
    }

    fn opened(script: &str) -> Breaker {
        let mut breaker = Breaker::new(t0());
        run(&mut breaker, script);
        assert!(breaker.is_open());
        breaker
    }

    #[test]
    fn start_of_a_run() {
        let minutes = |m: i64| t0() + TimeDelta::minutes(m);
        #[rustfmt::skip]
        let cases: &[(&str, DateTime<Utc>, bool, Duration, State)] = &[
            ("within the cooldown", minutes(29), false, DEFAULT_COOLDOWN, Open),
            ("cooldown exactly over", minutes(30), false, DEFAULT_COOLDOWN, HalfOpen),
            ("cooldown over", minutes(31), false, DEFAULT_COOLDOWN, HalfOpen),
            ("no cooldown", minutes(0), false, Duration::ZERO, HalfOpen),
            ("opened_at in the future", minutes(-5), false, Duration::ZERO, Open),
            ("far in the future", minutes(-60 * 24 * 365), false, DEFAULT_COOLDOWN, Open),
            ("auto-reset", minutes(1), true, DEFAULT_COOLDOWN, Closed),
            ("auto-reset despite skew", minutes(-5), true, DEFAULT_COOLDOWN, Closed),
        ];
        for (name, now, auto_reset, cooldown, state) in cases {
            let mut breaker = opened("nnn");
            let transition = breaker.on_start(*now, *auto_reset, *cooldown);
            assert_eq!(breaker.state(), *state, "{name}");
            assert_eq!(transition.is_some(), *state != Open, "{name}");
            assert_eq!(breaker.total_opens(), 1, "{name}");
            let counters = if *auto_reset { 0 } else { 3 };
            assert_eq!(breaker.counters().no_progress, counters, "{name}");
        }
    }

    #[test]
    fn start_without_reset_leaves_a_breaker_that_is_not_open_alone() {
        let mut breaker = Breaker::new(t0());
        run(&mut breaker, "nn");
        assert_eq!(breaker.on_start(t0() + TimeDelta::days(1), false, DEFAULT_COOLDOWN), None);
        assert_eq!(breaker.state(), HalfOpen);
    }

    #[test]
    fn reset_at_start_closes_and_zeroes_from_any_state() {
        // (script, transition expected) — HALF_OPEN with a failure streak is
        // the case an --auto-reset used to leave one failure from OPEN.
        for (script, moves) in [("nnn", true), ("ff", true), ("f", false), ("", false)] {
            let mut breaker = Breaker::new(t0());
            run(&mut breaker, script);
            let t = breaker.on_start(t0(), true, DEFAULT_COOLDOWN);
            assert_eq!(t.is_some(), moves, "{script}");
            assert_eq!(breaker.state(), Closed, "{script}");
            assert_eq!(breaker.counters(), Counters::default(), "{script}");
            // One more failure is one, not the third.
            run(&mut breaker, "f");
            assert_eq!(breaker.state(), Closed, "{script}");
        }
    }

    #[test]
    fn after_the_cooldown_one_bad_iteration_reopens_and_one_good_closes() {
        let later = t0() + TimeDelta::minutes(31);
        for (script, state, total_opens) in [("n", Open, 2), ("p", Closed, 1), ("q", HalfOpen, 1)] {
            let mut breaker = opened("nnn");
            breaker.on_start(later, false, DEFAULT_COOLDOWN).unwrap();
            let s = &signals(script)[0];
            breaker.record(s, &Thresholds::default(), later);
            assert_eq!(breaker.state(), state, "{script}");
            assert_eq!(breaker.total_opens(), total_opens, "{script}");
        }
    }

    #[test]
    fn reset_closes_keeps_total_opens_and_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure().unwrap();
        let mut breaker = opened("dd");
        let transition = breaker.reset(t0(), "ralph reset-circuit");
        assert_eq!((transition.from, transition.to), (Some(Open), Closed));
        assert_eq!(breaker.counters(), Counters::default());
        assert_eq!(breaker.total_opens(), 1);
        breaker.save(&store).unwrap();
        let (history, bad) = history(&store).unwrap();
        assert_eq!(bad, 0);
        let got: Vec<_> = history.iter().map(|t| (t.from, t.to, t.reason.as_str())).collect();
        assert_eq!(
            got,
            [
                (Some(Closed), Open, "permission denied in 2 iterations in a row"),
                (Some(Open), Closed, "ralph reset-circuit"),
            ]
        );
        // A second save does not repeat the history.
        breaker.save(&store).unwrap();
        assert_eq!(super::history(&store).unwrap().0.len(), 2);
    }

    #[test]
    fn save_and_load_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure().unwrap();
        let (fresh, warning) = Breaker::load(&store, t0()).unwrap();
        assert_eq!((fresh.state(), warning), (Closed, None));
        for script in ["", "na", "nnn", "aaaaa"] {
            let mut breaker = Breaker::new(t0());
            run(&mut breaker, script);
            breaker.save(&store).unwrap();
            let (loaded, warning) = Breaker::load(&store, t0()).unwrap();
            assert_eq!(warning, None, "{script}");
            assert_eq!(loaded, breaker, "{script}");
        }
        let text = std::fs::read_to_string(store.circuit()).unwrap();
        assert!(text.contains("\"version\": 1"), "{text}");
        assert!(text.contains("\"state\": \"OPEN\""), "{text}");
    }

    #[test]
    fn damaged_file_is_rebuilt_closed_with_a_warning() {
        let valid = serde_json::to_value(opened("nnn")).unwrap();
        let with = |key: &str, value: serde_json::Value| {
            let mut v = valid.clone();
            v[key] = value;
            v.to_string()
        };
        #[rustfmt::skip]
        let cases: &[(&str, String, &str)] = &[
            ("empty", String::new(), "empty file"),
            ("empty object", "{}".into(), "no version field"),
            ("garbage", "invalid json{".into(), "expected"),
            ("bogus state without version", r#"{"state":"BOGUS"}"#.into(), "no version field"),
            ("bogus state", with("state", "BOGUS".into()), "unknown variant"),
            ("future version", with("version", 2.into()), "version 2"),
            ("negative counter", with("total_opens", (-1).into()), "invalid value"),
        ];
        for (name, content, problem) in cases {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::new(dir.path());
            store.ensure().unwrap();
            std::fs::write(store.circuit(), content).unwrap();
            let (mut breaker, warning) = Breaker::load(&store, t0()).unwrap();
            assert_eq!(breaker.state(), Closed, "{name}");
            let warning = warning.unwrap_or_else(|| panic!("{name}: no warning"));
            assert!(warning.contains(problem), "{name}: {warning}");
            breaker.save(&store).unwrap();
            let (history, _) = history(&store).unwrap();
            assert_eq!(history.len(), 1, "{name}");
            assert_eq!((history[0].from, history[0].to), (None, Closed), "{name}");
            // Rebuilt for good: the next load is clean and the breaker works.
            let (mut again, warning) = Breaker::load(&store, t0()).unwrap();
            assert_eq!(warning, None, "{name}");
            run(&mut again, "nnn");
            assert!(again.is_open(), "{name}");
        }
    }

    #[test]
    fn report_explains_an_open_breaker() {
        #[rustfmt::skip]
        let cases: &[(&str, &[&str])] = &[
            ("nnn", &["no progress in 3", "without committing"]),
            ("aaaaa", &["same error in 5", "repeated error: a"]),
            ("dd", &["permission denied in 2", "refuses a tool"]),
            ("fff", &["failed 3 runs", "expired login"]),
        ];
        for (script, expected) in cases {
            let text = opened(script).report(DEFAULT_COOLDOWN).to_string();
            for needle in expected.iter().chain(&[
                "circuit breaker OPEN",
                "times opened: 1",
                "opened at: 2026-03-01 12:00:00 UTC",
                "ralph reset-circuit",
                "after 2026-03-01 12:30:00 UTC (cooldown 30m)",
                "--auto-reset",
            ]) {
                assert!(text.contains(needle), "{script}: no {needle:?} in\n{text}");
            }
        }
        let report = opened("nnn").report(DEFAULT_COOLDOWN);
        assert_eq!(report.iterations_without_progress, 3);
    }

    #[test]
    fn report_of_a_closed_breaker_is_short() {
        let report = Breaker::new(t0()).report(DEFAULT_COOLDOWN);
        assert_eq!(report.opened_at, None);
        assert!(report.likely_causes.is_empty() && report.how_to_go_on.is_empty());
        assert_eq!(report.to_string().lines().count(), 3);
    }
}
