//! The verdict on one story at a parallel run's merge queue: pure, no I/O,
//! the counterpart of [`super::judge`] for an iteration.
//!
//! The queue gathers [`MergeFacts`] — how the story's work met the run
//! branch's tip (clean, conflicting, or a resolver's attempt that failed),
//! whether it was resolved onto that tip, the gate on the merged tree and
//! the `verify` commands of the stories it was resolved against, and how
//! many attempts it has had — and [`judge_merge`] says what happens:
//!
//! 1. **Clean, and every check passes: merged.** The only way onto the
//!    run branch; the breaker is told of progress.
//! 2. **A conflict of fresh work: resolved.** With `merge.resolve =
//!    "agent"`, a resolver agent merges both stories' intents onto the tip.
//!    Not yet an attempt that failed: the resolution's outcome is.
//! 3. **Anything else that keeps it off the branch is a failed attempt**
//!    (a conflict with `resolve = "redo"` or after resolving, a resolver
//!    that failed or left markers, a gate or another story's `verify` that
//!    fails on the merged tree): redone from the new tip, and given up only
//!    once `merge.attempts` attempts failed. The breaker counts a failed
//!    resolution or check as an iteration without progress, so a run whose
//!    every merge fails stops; a plain conflict is the cost of working
//!    stories at once, not a sign the work is wrong, and counts nothing.
//! 4. **A gate stopped by a signal decides nothing**: the story stays queued.

use crate::event::MergeResult;

/// What the merge queue found for one story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergeFacts {
    /// How the story's work met the run branch's tip.
    pub met: Met,
    /// It was resolved onto the tip by a resolver, against these stories.
    pub resolved_with: Option<Vec<String>>,
    /// The gate on the merged tree (run only when it merged cleanly).
    pub gate: MergeGate,
    /// Attempts of the story that already failed at the merge.
    pub failures: u32,
    /// `merge.attempts`: how many may fail before it is given up.
    pub attempts: u32,
    pub resolve: ResolveMode,
}

/// How a story's work met the tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Met {
    /// Squashed without a conflict.
    Clean,
    /// These files conflict.
    Conflict(Vec<String>),
    /// A resolver ran and could not merge it (why, in a line).
    ResolveFailed(String),
}

/// The checks on the merged tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MergeGate {
    /// Not run: the story did not merge cleanly.
    NotRun,
    /// No gate applies: the worker's verdict stands.
    None,
    Passed,
    /// `other`: the failing check is another story's `verify` (one the
    /// story was resolved against), not the story's own gate.
    Failed {
        feedback: String,
        other: Option<String>,
    },
    Interrupted,
}

/// `merge.resolve`: what a conflict of fresh work gets first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResolveMode {
    /// A resolver agent merges both stories onto the tip.
    Agent,
    /// The story is redone from the new tip.
    Redo,
}

/// What the queue does with the story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MergeAction {
    /// Onto the run branch.
    Merge,
    /// A resolver starts on these files.
    Resolve(Vec<String>),
    /// Redone from the new tip, with the failure as its lesson.
    Redo,
    /// No attempts left.
    GiveUp,
    /// Still queued: nothing was decided.
    Wait,
}

/// What the breaker hears of a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeSignal {
    /// A story reached the run branch.
    Progress,
    /// An attempt failed: an iteration without progress.
    Failure,
    /// Nothing to count (a resolver starts, a gate was interrupted).
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergeJudgement {
    pub action: MergeAction,
    /// The merge event's result.
    pub result: MergeResult,
    /// The failed attempt, in a line ("conflicts with the run branch in
    /// src/a.rs"): the report lists every one; `None` unless it failed.
    pub failure: Option<String>,
    /// For the merge event and the log.
    pub message: String,
    pub breaker: MergeSignal,
    /// The gate's (or a `verify`'s) output, for the redo's lesson.
    pub feedback: Option<String>,
}

/// The verdict.
pub(crate) fn judge_merge(f: &MergeFacts) -> MergeJudgement {
    let resolved = f.resolved_with.is_some();
    let failed = |why: String, result: MergeResult, feedback: Option<String>| {
        attempt_failed(f, why, result, feedback, MergeSignal::Failure)
    };
    match (&f.met, &f.gate) {
        (_, MergeGate::Interrupted) => MergeJudgement {
            action: MergeAction::Wait,
            result: MergeResult::Conflict,
            failure: None,
            message: "the gate was stopped: still queued".into(),
            breaker: MergeSignal::Nothing,
            feedback: None,
        },
        (Met::ResolveFailed(why), _) => failed(
            format!("the resolver could not merge it: {why}"),
            MergeResult::ResolveFailed,
            None,
        ),
        (Met::Conflict(files), _) if !resolved && f.resolve == ResolveMode::Agent => {
            MergeJudgement {
                action: MergeAction::Resolve(files.clone()),
                result: MergeResult::Resolving,
                failure: None,
                message: format!(
                    "conflicts with the run branch in {}: a resolver merges both",
                    files.join(", ")
                ),
                breaker: MergeSignal::Nothing,
                feedback: None,
            }
        }
        (Met::Conflict(files), _) => {
            let again = if resolved { " again, after it was resolved" } else { "" };
            let why = format!("conflicts with the run branch in {}{again}", files.join(", "));
            attempt_failed(f, why, MergeResult::Conflict, None, MergeSignal::Nothing)
        }
        (Met::Clean, MergeGate::Failed { feedback, other }) => {
            let why = match (other, resolved) {
                (Some(o), _) => format!("its resolution fails {o}'s verify on the merged tree"),
                (None, true) => "its resolution fails the gate on the merged tree".to_string(),
                (None, false) => "fails the gate once merged".to_string(),
            };
            let result =
                if resolved { MergeResult::ResolveFailed } else { MergeResult::GateFailed };
            failed(why, result, Some(feedback.clone()))
        }
        (Met::Clean, MergeGate::Passed | MergeGate::None) => MergeJudgement {
            action: MergeAction::Merge,
            result: MergeResult::Merged,
            failure: None,
            message: match (&f.gate, &f.resolved_with) {
                (MergeGate::Passed, Some(with)) => {
                    format!("resolved onto {}, gated on the merged tree", with.join(", "))
                }
                (MergeGate::Passed, None) => "gated on the merged tree".into(),
                (_, Some(with)) => format!("resolved onto {}", with.join(", ")),
                _ => String::new(),
            },
            breaker: MergeSignal::Progress,
            feedback: None,
        },
        // Clean and not gated: it cannot be put on the branch unchecked.
        (Met::Clean, MergeGate::NotRun) => MergeJudgement {
            action: MergeAction::Wait,
            result: MergeResult::Conflict,
            failure: None,
            message: "not gated yet: still queued".into(),
            breaker: MergeSignal::Nothing,
            feedback: None,
        },
    }
}

/// An attempt that failed: redone while attempts are left, else given up.
fn attempt_failed(
    f: &MergeFacts,
    why: String,
    result: MergeResult,
    feedback: Option<String>,
    breaker: MergeSignal,
) -> MergeJudgement {
    let failures = f.failures + 1;
    let attempts = f.attempts.max(1);
    let (action, result, message) = if failures >= attempts {
        let n = crate::text::count(failures as usize, "attempt", "attempts");
        (MergeAction::GiveUp, MergeResult::Blocked, format!("{why}; {n} failed: given up"))
    } else {
        let message = format!(
            "{why}: sent back, to be redone from the new tip (attempt {} of {attempts} next)",
            failures + 1
        );
        (MergeAction::Redo, result, message)
    };
    MergeJudgement { action, result, failure: Some(why), message, breaker, feedback }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(met: Met, resolved: bool, gate: MergeGate, failures: u32) -> MergeFacts {
        MergeFacts {
            met,
            resolved_with: resolved.then(|| vec!["US-001".to_string()]),
            gate,
            failures,
            attempts: 3,
            resolve: ResolveMode::Agent,
        }
    }

    fn conflict() -> Met {
        Met::Conflict(vec!["src/shared.rs".into()])
    }

    fn gate_failed(other: Option<&str>) -> MergeGate {
        MergeGate::Failed { feedback: "1 test failed".into(), other: other.map(str::to_string) }
    }

    #[test]
    fn the_merge_table() {
        use MergeAction as A;
        use MergeResult as R;
        use MergeSignal as S;
        #[rustfmt::skip]
        let rows: Vec<(MergeFacts, A, R, S, Option<&str>)> = vec![
            // Clean: the checks decide.
            (facts(Met::Clean, false, MergeGate::Passed, 0), A::Merge, R::Merged, S::Progress, None),
            (facts(Met::Clean, false, MergeGate::None, 2), A::Merge, R::Merged, S::Progress, None),
            (facts(Met::Clean, true, MergeGate::Passed, 1), A::Merge, R::Merged, S::Progress, None),
            (facts(Met::Clean, false, gate_failed(None), 0), A::Redo, R::GateFailed, S::Failure, Some("fails the gate once merged")),
            (facts(Met::Clean, false, gate_failed(None), 1), A::Redo, R::GateFailed, S::Failure, Some("fails the gate once merged")),
            (facts(Met::Clean, false, gate_failed(None), 2), A::GiveUp, R::Blocked, S::Failure, Some("fails the gate once merged")),
            // Resolved: the resolution must pass the gate and the other story's verify.
            (facts(Met::Clean, true, gate_failed(None), 0), A::Redo, R::ResolveFailed, S::Failure, Some("its resolution fails the gate on the merged tree")),
            (facts(Met::Clean, true, gate_failed(Some("US-001")), 0), A::Redo, R::ResolveFailed, S::Failure, Some("its resolution fails US-001's verify on the merged tree")),
            (facts(Met::Clean, true, gate_failed(Some("US-001")), 2), A::GiveUp, R::Blocked, S::Failure, Some("its resolution fails US-001's verify on the merged tree")),
            // A conflict of fresh work goes to a resolver, at any attempt.
            (facts(conflict(), false, MergeGate::NotRun, 0), A::Resolve(vec!["src/shared.rs".into()]), R::Resolving, S::Nothing, None),
            (facts(conflict(), false, MergeGate::NotRun, 2), A::Resolve(vec!["src/shared.rs".into()]), R::Resolving, S::Nothing, None),
            // A conflict after resolving: the tip moved over the same lines.
            (facts(conflict(), true, MergeGate::NotRun, 0), A::Redo, R::Conflict, S::Nothing, Some("conflicts with the run branch in src/shared.rs again, after it was resolved")),
            (facts(conflict(), true, MergeGate::NotRun, 2), A::GiveUp, R::Blocked, S::Nothing, Some("conflicts with the run branch in src/shared.rs again, after it was resolved")),
            // A resolver that failed.
            (facts(Met::ResolveFailed("conflict markers left in src/shared.rs".into()), false, MergeGate::NotRun, 0), A::Redo, R::ResolveFailed, S::Failure, Some("the resolver could not merge it: conflict markers left in src/shared.rs")),
            (facts(Met::ResolveFailed("the agent failed".into()), false, MergeGate::NotRun, 2), A::GiveUp, R::Blocked, S::Failure, Some("the resolver could not merge it: the agent failed")),
            // Nothing decided.
            (facts(Met::Clean, false, MergeGate::Interrupted, 2), A::Wait, R::Conflict, S::Nothing, None),
            (facts(conflict(), false, MergeGate::Interrupted, 0), A::Wait, R::Conflict, S::Nothing, None),
            (facts(Met::Clean, false, MergeGate::NotRun, 0), A::Wait, R::Conflict, S::Nothing, None),
        ];
        for (f, action, result, signal, why) in rows {
            let j = judge_merge(&f);
            assert_eq!(j.action, action, "{f:?}");
            assert_eq!(j.result, result, "{f:?}");
            assert_eq!(j.breaker, signal, "{f:?}");
            assert_eq!(j.failure.as_deref(), why, "{f:?}");
        }
    }

    #[test]
    fn redo_mode_sends_a_conflict_back_at_once() {
        let mut f = facts(conflict(), false, MergeGate::NotRun, 0);
        f.resolve = ResolveMode::Redo;
        let j = judge_merge(&f);
        assert_eq!(j.action, MergeAction::Redo);
        assert!(j.message.contains("attempt 2 of 3 next"), "{}", j.message);
        f.failures = 2;
        let j = judge_merge(&f);
        assert_eq!(j.action, MergeAction::GiveUp);
        assert!(j.message.ends_with("3 attempts failed: given up"), "{}", j.message);
    }

    /// Over every combination: what may reach the branch, when a story is
    /// given up, and what the breaker hears.
    #[test]
    fn invariants_over_every_combination() {
        let mets = [conflict(), Met::Clean, Met::ResolveFailed("x".into())];
        let gates = [
            MergeGate::NotRun,
            MergeGate::None,
            MergeGate::Passed,
            gate_failed(None),
            gate_failed(Some("US-001")),
            MergeGate::Interrupted,
        ];
        for met in &mets {
            for gate in &gates {
                for resolved in [false, true] {
                    for failures in 0..4 {
                        for attempts in 1..4 {
                            for resolve in [ResolveMode::Agent, ResolveMode::Redo] {
                                let f = MergeFacts {
                                    met: met.clone(),
                                    resolved_with: resolved.then(|| vec!["US-001".into()]),
                                    gate: gate.clone(),
                                    failures,
                                    attempts,
                                    resolve,
                                };
                                let j = judge_merge(&f);
                                let checked = matches!(gate, MergeGate::Passed | MergeGate::None);
                                // Only clean, checked work is merged.
                                assert_eq!(
                                    j.action == MergeAction::Merge,
                                    *met == Met::Clean && checked,
                                    "{f:?}"
                                );
                                // Given up only with no attempt left; a failure is always named.
                                if j.action == MergeAction::GiveUp {
                                    assert!(failures + 1 >= attempts, "{f:?}");
                                }
                                let lost =
                                    matches!(j.action, MergeAction::Redo | MergeAction::GiveUp);
                                assert_eq!(lost, j.failure.is_some(), "{f:?}");
                                // The breaker hears of every lost attempt but
                                // a plain conflict.
                                let conflict = matches!(met, Met::Conflict(_));
                                let told = j.breaker == MergeSignal::Failure;
                                assert_eq!(lost && !conflict, told, "{f:?}");
                                assert_eq!(
                                    j.action == MergeAction::Merge,
                                    j.breaker == MergeSignal::Progress
                                );
                                // A resolver never runs twice on one resolution, nor in redo mode.
                                if matches!(j.action, MergeAction::Resolve(_)) {
                                    assert!(!resolved && resolve == ResolveMode::Agent, "{f:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
