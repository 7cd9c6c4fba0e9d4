//! The verdict's table: one row per case of how the agent ended × what it
//! claimed × what the gate said × what git shows, and the invariants that
//! hold over every combination.

use super::*;
use crate::analyze::StopReason as R;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Ok,
    Fail,
    Timeout,
    Idle,
    Interrupt,
    Budget,
    Auth,
    Billing,
    Usage,
    Rate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    Nothing,
    Marked,
    Done,
    Tasks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    No,
    Pass,
    Fail,
    Interrupt,
    Cannot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Git {
    Nothing,
    Committed,
    Uncommitted,
    BookkeepingOnly,
}

const ENDS: [End; 10] = [
    End::Ok,
    End::Fail,
    End::Timeout,
    End::Idle,
    End::Interrupt,
    End::Budget,
    End::Auth,
    End::Billing,
    End::Usage,
    End::Rate,
];
const SAID: [Said; 4] = [Said::Nothing, Said::Marked, Said::Done, Said::Tasks];
const GATES: [Gate; 5] = [Gate::No, Gate::Pass, Gate::Fail, Gate::Interrupt, Gate::Cannot];
const GITS: [Git; 4] = [Git::Nothing, Git::Committed, Git::Uncommitted, Git::BookkeepingOnly];

fn agent(end: End) -> Option<AgentError> {
    let m = || "m".to_string();
    match end {
        End::Ok => None,
        End::Fail => Some(AgentError::Failed { exit_code: Some(1), message: m() }),
        End::Timeout => Some(AgentError::Stopped { reason: R::Timeout }),
        End::Idle => Some(AgentError::Stopped { reason: R::Idle }),
        End::Interrupt => Some(AgentError::Stopped { reason: R::Interrupted }),
        End::Budget => Some(AgentError::Stopped { reason: R::Budget }),
        End::Auth => Some(AgentError::Auth { message: m() }),
        End::Billing => Some(AgentError::Billing { message: m() }),
        End::Usage => Some(AgentError::UsageLimit { resets_at: None, message: m() }),
        End::Rate => Some(AgentError::RateLimited { message: m() }),
    }
}

fn facts(end: End, said: Said, gate: Gate, git: Git) -> Facts {
    let gate = if needs_gate(agent(end).as_ref()) || gate == Gate::No {
        match gate {
            Gate::No => GateRun::None,
            Gate::Pass => GateRun::Passed,
            Gate::Fail => GateRun::Failed(GateFailure {
                feedback: "gate output".into(),
                signature: "test x failed".into(),
                detail: "test x failed".into(),
            }),
            Gate::Interrupt => GateRun::Interrupted,
            Gate::Cannot => GateRun::CannotRun { message: "no gate".into(), hint: "h".into() },
        }
    } else {
        GateRun::Skipped
    };
    let evidence = match git {
        Git::Nothing => Evidence::default(),
        Git::Committed => Evidence { commits: 1, work_files: 2, ..Evidence::default() },
        Git::Uncommitted => Evidence { work_files: 2, uncommitted_work: 2, ..Evidence::default() },
        Git::BookkeepingOnly => {
            Evidence { commits: 1, progress_uncommitted: true, ..Evidence::default() }
        }
    };
    Facts {
        iteration: 4,
        story: StoryFacts { id: "US-001".into(), title: "First".into(), ..StoryFacts::default() },
        agent: agent(end),
        exit_code: Some(0),
        final_text: "done".into(),
        claim: Claim {
            marked: said == Said::Marked,
            said_done: said == Said::Done,
            tasks: if said == Said::Tasks { 3 } else { 0 },
            blocked: None,
        },
        evidence,
        gate,
        handoff: HandoffFacts::Valid { blocked: None, lesson: None },
        prd: PrdCheck::default(),
        git: GitCheck::default(),
        permission_denials: Vec::new(),
        sandbox_denials: Vec::new(),
        asking_questions: false,
        error_signature: None,
        error_example: None,
        tool_errors: Vec::new(),
        commit_leftovers: true,
        tampered: Vec::new(),
        test_flags: Vec::new(),
    }
}

/// What the agent did to ralph's oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Oracle {
    Kept,
    /// It changed a protected path (set back before the gate ran).
    Protected,
    /// Its passing gate counted fewer tests.
    Vanished,
}

const ORACLES: [Oracle; 3] = [Oracle::Kept, Oracle::Protected, Oracle::Vanished];

fn facts_with(end: End, said: Said, gate: Gate, git: Git, oracle: Oracle) -> Facts {
    let mut f = facts(end, said, gate, git);
    let counts = |passed| crate::gate::TestCounts { passed, ..Default::default() };
    f.tampered = match oracle {
        Oracle::Kept => Vec::new(),
        Oracle::Protected => vec![Tamper::Protected(".ralph/config.toml".into())],
        Oracle::Vanished => vec![Tamper::TestsVanished(crate::oracle::vanish::Vanished {
            before: counts(41),
            after: counts(39),
        })],
    };
    f
}

/// What a row expects: result, passes, verified, commit, progress,
/// failed (None: the breaker is not told), and where the run goes.
type Want = (IterationResult, bool, Option<bool>, Commit, bool, Option<bool>, &'static str);

fn next_name(next: &Next) -> &'static str {
    match next {
        Next::Continue => "continue",
        Next::UsageLimit { .. } => "usage-limit",
        Next::Backoff { .. } => "backoff",
        Next::Stop(Stop::Interrupted) => "interrupted",
        Next::Stop(Stop::Budget) => "budget",
        Next::Stop(Stop::Environment { .. }) => "environment",
        Next::Stop(Stop::Blocked { .. }) => "blocked",
    }
}

#[test]
fn the_matrix() {
    use Commit as C;
    use IterationResult::*;
    const N: Option<bool> = None;
    const T: Option<bool> = Some(true);
    const F: Option<bool> = Some(false);
    #[rustfmt::skip]
    let rows: &[(End, Said, Gate, Git, Want)] = &[
        // A working agent and a gate.
        (End::Ok, Said::Marked, Gate::Pass, Git::Committed, (Progress, true, T, C::None, true, F, "continue")),
        (End::Ok, Said::Nothing, Gate::Pass, Git::Committed, (Progress, true, T, C::Mark { by_ralph: true }, true, F, "continue")),
        (End::Ok, Said::Done, Gate::Pass, Git::Committed, (Progress, true, T, C::Mark { by_ralph: true }, true, F, "continue")),
        (End::Ok, Said::Marked, Gate::Pass, Git::Uncommitted, (Progress, true, T, C::Work, true, F, "continue")),
        (End::Ok, Said::Nothing, Gate::Pass, Git::Uncommitted, (Progress, true, T, C::Work, true, F, "continue")),
        (End::Ok, Said::Marked, Gate::Pass, Git::BookkeepingOnly, (Progress, true, T, C::Mark { by_ralph: false }, true, F, "continue")),
        // A passing gate alone finishes nothing nobody worked on.
        (End::Ok, Said::Nothing, Gate::Pass, Git::Nothing, (NoProgress, false, F, C::None, false, F, "continue")),
        (End::Ok, Said::Tasks, Gate::Pass, Git::Nothing, (NoProgress, false, F, C::None, false, F, "continue")),
        (End::Ok, Said::Nothing, Gate::Pass, Git::BookkeepingOnly, (NoProgress, false, F, C::None, false, F, "continue")),
        // ... but a claim of an already finished story is checked and kept.
        (End::Ok, Said::Marked, Gate::Pass, Git::Nothing, (Progress, true, T, C::None, true, F, "continue")),
        // A failing gate sets a claim back; work is still progress.
        (End::Ok, Said::Marked, Gate::Fail, Git::Committed, (GateFailed, false, F, C::Unmark, true, F, "continue")),
        (End::Ok, Said::Marked, Gate::Fail, Git::Nothing, (GateFailed, false, F, C::Unmark, false, F, "continue")),
        (End::Ok, Said::Nothing, Gate::Fail, Git::Uncommitted, (GateFailed, false, F, C::None, true, F, "continue")),
        (End::Ok, Said::Tasks, Gate::Fail, Git::Nothing, (GateFailed, false, F, C::None, false, F, "continue")),
        // No gate: the agent's mark stands, and its work gets committed.
        (End::Ok, Said::Marked, Gate::No, Git::Committed, (Progress, true, N, C::None, true, F, "continue")),
        (End::Ok, Said::Marked, Gate::No, Git::Uncommitted, (Progress, true, N, C::Work, true, F, "continue")),
        (End::Ok, Said::Marked, Gate::No, Git::Nothing, (NoProgress, true, N, C::None, false, F, "continue")),
        (End::Ok, Said::Done, Gate::No, Git::Committed, (Progress, false, N, C::None, true, F, "continue")),
        // Claims are not progress: the liar with no gate.
        (End::Ok, Said::Tasks, Gate::No, Git::Nothing, (NoProgress, false, N, C::None, false, F, "continue")),
        (End::Ok, Said::Done, Gate::No, Git::Nothing, (NoProgress, false, N, C::None, false, F, "continue")),
        (End::Ok, Said::Tasks, Gate::No, Git::BookkeepingOnly, (NoProgress, false, N, C::None, false, F, "continue")),
        // A failed or timed-out run is a failed run; the gate still judges its work.
        (End::Fail, Said::Marked, Gate::Pass, Git::Committed, (Failed, true, T, C::None, true, T, "continue")),
        (End::Fail, Said::Marked, Gate::No, Git::Committed, (Failed, false, N, C::Unmark, true, T, "continue")),
        (End::Timeout, Said::Marked, Gate::No, Git::Nothing, (Failed, false, N, C::Unmark, false, T, "continue")),
        (End::Timeout, Said::Nothing, Gate::Fail, Git::Committed, (Failed, false, F, C::None, true, T, "continue")),
        (End::Idle, Said::Nothing, Gate::No, Git::Nothing, (Failed, false, N, C::None, false, T, "continue")),
        (End::Timeout, Said::Done, Gate::Pass, Git::Uncommitted, (Failed, true, T, C::Work, true, T, "continue")),
        // The run's time budget: judged, not a failure, and the run stops.
        (End::Budget, Said::Nothing, Gate::Pass, Git::Committed, (Progress, true, T, C::Mark { by_ralph: true }, true, F, "budget")),
        (End::Budget, Said::Marked, Gate::No, Git::Nothing, (NoProgress, false, N, C::Unmark, false, F, "budget")),
        // Nothing to judge: claims undone, the breaker not told.
        (End::Interrupt, Said::Marked, Gate::Pass, Git::Committed, (Stopped, false, N, C::None, false, N, "interrupted")),
        (End::Ok, Said::Marked, Gate::Interrupt, Git::Committed, (Stopped, false, N, C::None, false, N, "interrupted")),
        (End::Auth, Said::Marked, Gate::Pass, Git::Committed, (Failed, false, N, C::None, false, N, "environment")),
        (End::Billing, Said::Nothing, Gate::No, Git::Nothing, (Failed, false, N, C::None, false, N, "environment")),
        (End::Usage, Said::Marked, Gate::Pass, Git::Committed, (Transient, false, N, C::None, false, N, "usage-limit")),
        (End::Rate, Said::Marked, Gate::Fail, Git::Uncommitted, (Transient, false, N, C::None, false, N, "backoff")),
        (End::Ok, Said::Marked, Gate::Cannot, Git::Committed, (Failed, false, N, C::None, false, N, "environment")),
    ];
    for (end, said, gate, git, want) in rows {
        let name = format!("{end:?} × {said:?} × {gate:?} × {git:?}");
        let j = judge(&facts(*end, *said, *gate, *git));
        let got: Want = (
            j.result,
            j.passes,
            j.verified,
            j.commit,
            j.breaker.as_ref().is_some_and(|s| s.progress),
            j.breaker.as_ref().map(|s| s.failed),
            next_name(&j.next),
        );
        assert_eq!(got, *want, "{name}");
    }
}

/// The oracle is the person's: an iteration that changed a protected path
/// or whose gate passed with tests gone is tampered, whatever else it did.
#[test]
fn the_tampered_rows() {
    use Commit as C;
    use IterationResult::*;
    use Oracle::*;
    const N: Option<bool> = None;
    const T: Option<bool> = Some(true);
    const F: Option<bool> = Some(false);
    #[rustfmt::skip]
    let rows: &[(End, Said, Gate, Git, Oracle, Want)] = &[
        // The gamer: rewrote the gate (set back), marked, committed; the real gate passes or fails.
        (End::Ok, Said::Marked, Gate::Pass, Git::Committed, Protected, (Tampered, false, F, C::Unmark, false, T, "continue")),
        (End::Ok, Said::Marked, Gate::Fail, Git::Committed, Protected, (Tampered, false, F, C::Unmark, false, T, "continue")),
        (End::Ok, Said::Nothing, Gate::Pass, Git::Committed, Protected, (Tampered, false, F, C::None, false, T, "continue")),
        (End::Ok, Said::Marked, Gate::Pass, Git::Uncommitted, Protected, (Tampered, false, F, C::Unmark, false, T, "continue")),
        // Without a gate the mark does not stand either.
        (End::Ok, Said::Marked, Gate::No, Git::Committed, Protected, (Tampered, false, N, C::Unmark, false, T, "continue")),
        // Tests deleted or skipped to make the gate pass.
        (End::Ok, Said::Marked, Gate::Pass, Git::Committed, Vanished, (Tampered, false, F, C::Unmark, false, T, "continue")),
        (End::Ok, Said::Nothing, Gate::Pass, Git::Uncommitted, Vanished, (Tampered, false, F, C::None, false, T, "continue")),
        // A failed run that also tampered is refused all the same.
        (End::Fail, Said::Marked, Gate::Pass, Git::Committed, Protected, (Tampered, false, F, C::Unmark, false, T, "continue")),
        // Nothing to judge: the early endings stand.
        (End::Usage, Said::Marked, Gate::Pass, Git::Committed, Protected, (Transient, false, N, C::None, false, N, "usage-limit")),
        (End::Ok, Said::Marked, Gate::Interrupt, Git::Committed, Protected, (Stopped, false, N, C::None, false, N, "interrupted")),
        // Kept: the ordinary verdict.
        (End::Ok, Said::Marked, Gate::Pass, Git::Committed, Kept, (Progress, true, T, C::None, true, F, "continue")),
    ];
    for (end, said, gate, git, oracle, want) in rows {
        let name = format!("{end:?} × {said:?} × {gate:?} × {git:?} × {oracle:?}");
        let j = judge(&facts_with(*end, *said, *gate, *git, *oracle));
        let got: Want = (
            j.result,
            j.passes,
            j.verified,
            j.commit,
            j.breaker.as_ref().is_some_and(|s| s.progress),
            j.breaker.as_ref().map(|s| s.failed),
            next_name(&j.next),
        );
        assert_eq!(got, *want, "{name}");
    }
    let j = judge(&facts_with(End::Ok, Said::Marked, Gate::Pass, Git::Committed, Protected));
    assert!(
        j.feedback
            .iter()
            .any(|f| f.contains("You changed .ralph/config.toml, which ralph protects")),
        "{:?}",
        j.feedback
    );
    assert_eq!(j.learn[0].category, Category::Tampered);
    assert_eq!(
        j.note.as_deref(),
        Some("tampered: the agent changed the protected path .ralph/config.toml")
    );
    let j = judge(&facts_with(End::Ok, Said::Marked, Gate::Pass, Git::Committed, Vanished));
    assert!(
        j.warnings
            .iter()
            .any(|w| w
                == "US-001 is not verified: 41 tests passed before, 39 now: 2 tests disappeared"),
        "{:?}",
        j.warnings
    );
}

#[test]
fn skip_markers_and_deleted_tests_are_reported_not_judged() {
    use crate::oracle::vanish::Flag;
    let mut f = facts(End::Ok, Said::Marked, Gate::Pass, Git::Committed);
    f.test_flags = vec![Flag::SkipAdded {
        path: "tests/test_calc.py".into(),
        line: 3,
        marker: "@pytest.mark.skip".into(),
    }];
    let j = judge(&f);
    assert_eq!((j.result, j.passes), (IterationResult::Progress, true));
    assert!(j.warnings.iter().any(|w| w.contains("tests/test_calc.py:3: skip marker added")));
    assert!(j.feedback.iter().any(|w| w.contains("- tests/test_calc.py:3: skip marker added")));
}

/// Properties of every combination, listed or not.
#[test]
fn invariants_over_every_combination() {
    for end in ENDS {
        for said in SAID {
            for gate in GATES {
                for git in GITS {
                    for oracle in ORACLES {
                        let f = facts_with(end, said, gate, git, oracle);
                        let j = judge(&f);
                        let name = format!("{end:?} × {said:?} × {gate:?} × {git:?} × {oracle:?}");
                        let tampered = oracle != Oracle::Kept;
                        // Tampering never passes a story.
                        if tampered {
                            assert!(!j.passes, "{name}: a tampered iteration passed its story");
                            assert_ne!(j.verified, Some(true), "{name}");
                        }
                        // Only the gate, or the agent's own mark where there is no
                        // gate, makes a story pass.
                        if j.passes {
                            let by_gate = j.verified == Some(true);
                            let by_mark = matches!(f.gate, GateRun::None) && said == Said::Marked;
                            assert!(by_gate || by_mark, "{name}: passes without a verdict");
                        }
                        // Done means committed.
                        if j.passes && git == Git::Uncommitted {
                            assert_eq!(j.commit, Commit::Work, "{name}");
                        }
                        // Nothing the agent says is progress; only git and the gate are.
                        if let Some(s) = &j.breaker {
                            let newly_verified = j.passes && j.verified == Some(true);
                            let work = matches!(git, Git::Committed | Git::Uncommitted);
                            assert_eq!(s.progress, !tampered && (work || newly_verified), "{name}");
                            assert_eq!(s.iteration, 4, "{name}");
                        }
                        // Iterations that end before a verdict are not judged.
                        if !needs_gate(f.agent.as_ref())
                            || matches!(gate, Gate::Interrupt | Gate::Cannot)
                        {
                            assert!(!j.passes, "{name}: a claim survived an unjudged iteration");
                            assert_eq!(j.breaker, None, "{name}");
                            assert_eq!(j.commit, Commit::None, "{name}");
                        }
                        // Transient and stopped iterations are retried, never counted.
                        let retried = matches!(
                            j.result,
                            IterationResult::Transient | IterationResult::Stopped
                        );
                        assert_eq!(j.counts, !retried, "{name}");
                        // A failed (or tampered) result is a failed run for the
                        // breaker, and the other way round.
                        if let Some(s) = &j.breaker {
                            let failed = matches!(
                                j.result,
                                IterationResult::Failed | IterationResult::Tampered
                            );
                            assert_eq!(s.failed, failed, "{name}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn claims_without_evidence_are_reported_not_counted() {
    for said in [Said::Tasks, Said::Done] {
        let j = judge(&facts(End::Ok, said, Gate::No, Git::Nothing));
        assert!(!j.breaker.unwrap().progress, "{said:?}");
        assert!(j.warnings.iter().any(|w| w.contains("not counted as progress")), "{said:?}");
    }
    let j = judge(&facts(End::Ok, Said::Tasks, Gate::No, Git::Committed));
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
}

#[test]
fn a_timeout_says_so_whatever_the_agent_printed_after() {
    let j = judge(&facts(End::Timeout, Said::Done, Gate::No, Git::Nothing));
    assert_eq!(j.result, IterationResult::Failed);
    assert_eq!(j.note.as_deref(), Some("stopped: iteration timeout"));
    assert!(j.breaker.unwrap().failed);
    assert_eq!(j.learn[0].category, Category::AgentTimeout);
}

#[test]
fn a_missing_handoff_is_its_own_signal_and_never_a_failed_run() {
    let problem = || HandoffFacts::Problem {
        note: "handoff: missing".into(),
        feedback: "write the handoff".into(),
    };
    // Verified work without a handoff stays verified progress.
    let mut f = facts(End::Ok, Said::Marked, Gate::Pass, Git::Committed);
    f.handoff = problem();
    let j = judge(&f);
    assert_eq!((j.result, j.passes), (IterationResult::Progress, true));
    let s = j.breaker.unwrap();
    assert!(s.handoff_problem && !s.failed && s.progress);
    assert_eq!(j.note.as_deref(), Some("handoff: missing"));
    assert!(j.feedback.iter().any(|f| f == "write the handoff"));
    // Nothing done and no handoff: no progress, still not a failure.
    let mut f = facts(End::Ok, Said::Nothing, Gate::No, Git::Nothing);
    f.handoff = problem();
    let j = judge(&f);
    assert_eq!(j.result, IterationResult::NoProgress);
    assert!(!j.breaker.unwrap().failed);
    assert_eq!(j.learn[0].category, Category::HandoffInvalid);
    // A denial explains a missing handoff better.
    let mut f = facts(End::Ok, Said::Nothing, Gate::No, Git::Nothing);
    f.handoff = problem();
    f.permission_denials = vec!["Bash(rm)".into()];
    assert_eq!(judge(&f).note.as_deref(), Some("permission denied: Bash(rm)"));
}

/// What the sandbox denied is the iteration's note, a strike for the
/// breaker's permission wall, and a word to the next agent; it changes
/// no verdict.
#[test]
fn sandbox_denials_are_noted_counted_and_fed_back() {
    for (end, said, gate, git) in [
        (End::Ok, Said::Nothing, Gate::No, Git::Nothing),
        (End::Ok, Said::Marked, Gate::Pass, Git::Committed),
        (End::Fail, Said::Nothing, Gate::Fail, Git::Uncommitted),
    ] {
        let mut f = facts(end, said, gate, git);
        let before = judge(&f);
        f.sandbox_denials = vec!["sandbox denied /etc/x".into(), "sandbox denied ~/x".into()];
        f.permission_denials = vec!["Bash(rm)".into()];
        let j = judge(&f);
        assert_eq!((j.result, j.passes), (before.result, before.passes), "{end:?} {said:?}");
        if before.note.is_none()
            || before.note.as_deref().is_some_and(|n| n.starts_with("permission"))
        {
            assert_eq!(j.note.as_deref(), Some("sandbox denied /etc/x, sandbox denied ~/x"));
        }
        assert_eq!(j.breaker.unwrap().permission_denials, 3);
        let said = j.feedback.iter().find(|t| t.contains("The sandbox denied")).expect("feedback");
        assert!(said.contains("sandbox denied /etc/x") && said.contains("do not retry"), "{said}");
    }
}

#[test]
fn uncommitted_work_does_not_count_when_ralph_may_not_commit_it() {
    for (said, gate, prd_uncommitted, commit) in [
        (Said::Nothing, Gate::Pass, false, Commit::None),
        (Said::Marked, Gate::Pass, false, Commit::Unmark),
        (Said::Marked, Gate::No, false, Commit::Unmark),
        // A mark that was never committed is only undone in the file.
        (Said::Marked, Gate::Pass, true, Commit::None),
    ] {
        let mut f = facts(End::Ok, said, gate, Git::Uncommitted);
        f.commit_leftovers = false;
        f.evidence.prd_uncommitted = prd_uncommitted;
        let j = judge(&f);
        let name = format!("{said:?} × {gate:?} × {prd_uncommitted}");
        assert!(!j.passes && j.uncommitted, "{name}");
        assert_eq!(j.commit, commit, "{name}");
        assert!(j.warnings[0].contains("uncommitted"), "{name}: {:?}", j.warnings);
        assert!(j.feedback.iter().any(|f| f.contains("not committed")), "{name}");
        // It is still work: the breaker sees progress.
        assert!(j.breaker.unwrap().progress, "{name}");
    }
}

#[test]
fn errors_in_failed_tool_calls_reach_the_next_prompt_and_a_lesson_when_nothing_moved() {
    let mut f = facts(End::Ok, Said::Tasks, Gate::No, Git::Nothing);
    f.tool_errors = vec!["error[E0308]: mismatched types".into()];
    f.error_signature = Some("error[e#]: mismatched types".into());
    let j = judge(&f);
    assert!(j.feedback.iter().any(|t| t.contains("error[E0308]")), "{:?}", j.feedback);
    assert_eq!(j.learn[0].category, Category::ToolError);
    assert_eq!(j.breaker.unwrap().error_signature.as_deref(), Some("error[e#]: mismatched types"));
    // With progress they are just what happened on the way: no lesson, no
    // feedback, nothing for "the same error N times".
    let mut f = facts(End::Ok, Said::Marked, Gate::Pass, Git::Committed);
    f.tool_errors = vec!["error[E0308]: mismatched types".into()];
    f.error_signature = Some("error[e#]: mismatched types".into());
    let j = judge(&f);
    assert!(j.learn.is_empty() && !j.feedback.iter().any(|t| t.contains("E0308")));
    assert_eq!(j.breaker.unwrap().error_signature, None);
    // A failed run's own error always counts.
    let mut f = facts(End::Fail, Said::Nothing, Gate::No, Git::Committed);
    f.error_signature = Some("boom".into());
    assert_eq!(judge(&f).breaker.unwrap().error_signature.as_deref(), Some("boom"));
}

#[test]
fn blocked_stops_the_run_with_the_blocker() {
    let mut f = facts(End::Ok, Said::Nothing, Gate::No, Git::Nothing);
    f.handoff = HandoffFacts::Valid {
        blocked: Some(("needs an API key".into(), "stuck".into())),
        lesson: None,
    };
    let j = judge(&f);
    assert_eq!(
        j.next,
        Next::Stop(Stop::Blocked {
            message: "the agent is blocked on US-001: needs an API key".into()
        })
    );
    assert_eq!(j.learn.last().unwrap().category, Category::Blocked);
    let mut f = facts(End::Ok, Said::Nothing, Gate::No, Git::Nothing);
    f.claim.blocked = Some("ask a human".into());
    assert!(matches!(judge(&f).next, Next::Stop(Stop::Blocked { .. })));
}

#[test]
fn the_agents_own_lesson_wins_over_the_excerpt() {
    let mut f = facts(End::Ok, Said::Marked, Gate::Fail, Git::Committed);
    f.handoff = HandoffFacts::Valid { blocked: None, lesson: Some("run the migrations".into()) };
    let j = judge(&f);
    assert_eq!(j.learn[0].lesson, Some(Lesson::Agent("run the migrations".into())));
    let f = facts(End::Ok, Said::Marked, Gate::Fail, Git::Committed);
    assert_eq!(judge(&f).learn[0].lesson, Some(Lesson::Loop("test x failed".into())));
}

#[test]
fn tampering_is_set_back_and_explained_but_not_a_failed_run() {
    let mut f = facts(End::Ok, Said::Marked, Gate::Pass, Git::Committed);
    f.prd.tampered = vec!["US-002's \"passes\"".into()];
    let j = judge(&f);
    assert_eq!((j.result, j.passes), (IterationResult::Progress, true));
    assert!(j.feedback[0].contains("US-002's \"passes\""), "{:?}", j.feedback);
}

#[test]
fn an_agent_that_rewrites_history_or_switches_branches_fails_its_iteration() {
    let mut f = facts(End::Ok, Said::Marked, Gate::Pass, Git::Committed);
    f.git.findings = vec!["the agent left HEAD on branch main".into()];
    let j = judge(&f);
    assert_eq!(j.result, IterationResult::Failed);
    assert!(j.breaker.as_ref().unwrap().failed);
    // Its work was checked on the run branch, where ralph put HEAD back.
    assert!(j.passes);
    assert!(j.feedback.iter().any(|t| t.contains("never rewrite its history")), "{:?}", j.feedback);
    assert_eq!(j.note.as_deref(), Some("the agent left HEAD on branch main"));
    // What ralph cannot put right stops the run and judges nothing.
    let mut f = facts(End::Ok, Said::Marked, Gate::Pass, Git::Committed);
    f.git.fatal = Some("history rewritten".into());
    let j = judge(&f);
    assert!(!j.passes && j.breaker.is_none() && j.commit == Commit::None);
    assert!(matches!(j.next, Next::Stop(Stop::Environment { .. })));
}
