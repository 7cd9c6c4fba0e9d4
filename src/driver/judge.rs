//! The verdict on one iteration: pure, no I/O, no clock.
//!
//! The iteration gathers [`Facts`] (how the agent ended, what it claimed,
//! what git shows, the gate's verdict, the handoff, what it did to
//! prd.json); [`judge`] turns them into a [`Judgement`]: the story's
//! `passes`, what ralph commits, the typed result, what the breaker is told,
//! feedback for the next prompt, what is learned, and whether the run goes
//! on. The driver only carries the judgement out.
//!
//! The rules, in the order they apply:
//!
//! 1. **How the agent ended** decides whether there is anything to judge.
//!    Ctrl-C, an auth or billing failure, a usage limit or a transient API
//!    error end the iteration before any verdict: a claim is undone, the
//!    gate does not run ([`needs_gate`]).
//! 2. **Only the gate verifies.** A passing gate verifies a story the agent
//!    worked on or claimed (or any story with its own `verify`); a failing
//!    one sets a claim back. Without a gate the agent's mark stands, unless
//!    its run failed.
//! 3. **Done means committed.** A story that ends passing with the agent's
//!    work still uncommitted gets it committed by ralph, or, with
//!    `run.commit_leftovers = false`, does not count.
//! 4. **Only evidence is progress**: files other than ralph's bookkeeping
//!    that changed (committed or not), or a story newly verified. What the
//!    agent says it did is reported, never counted.
//! 5. **A missing handoff is its own signal**, never a failed run.
//! 6. **The oracle is the person's.** An iteration that changed a protected
//!    path (set back before the gate ran) or whose passing gate counted
//!    fewer tests than before is `Tampered`: its story is not verified (a
//!    claim is set back), it is not progress, and the breaker counts it as
//!    a failed run. Skip markers added and tests deleted in its diff are
//!    reported, and the counts decide.

use chrono::{DateTime, Utc};

use crate::analyze::{AgentError, StopReason};
use crate::circuit::Signals;
use crate::event::IterationResult;
use crate::learn::failures::Category;

/// Everything the verdict depends on.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub iteration: u32,
    pub story: StoryFacts,
    /// How the agent's run went wrong, as the analyser classified it; `None`
    /// when it succeeded.
    pub agent: Option<AgentError>,
    /// The agent's exit code and the end of its final text (for lessons).
    pub exit_code: Option<i32>,
    pub final_text: String,
    pub claim: Claim,
    pub evidence: Evidence,
    pub gate: GateRun,
    pub handoff: HandoffFacts,
    pub prd: PrdCheck,
    /// What the agent did to HEAD and the run branch (`git::Integrity`).
    pub git: GitCheck,
    pub permission_denials: Vec<String>,
    /// What the sandbox denied the agent or the gate ("sandbox denied /etc/x").
    pub sandbox_denials: Vec<String>,
    pub asking_questions: bool,
    /// The shape of the run's error lines (its own output or failed tools).
    pub error_signature: Option<String>,
    /// One of those lines as printed, to name the error to a person.
    pub error_example: Option<String>,
    /// Error lines of the agent's tool calls that failed.
    pub tool_errors: Vec<String>,
    /// `run.commit_leftovers`.
    pub commit_leftovers: bool,
    /// What the agent did to ralph's oracle: any of it refuses the story.
    pub tampered: Vec<Tamper>,
    /// Skip markers added and tests deleted in the diff: reported.
    pub test_flags: Vec<crate::oracle::vanish::Flag>,
}

/// Why an iteration's work cannot count: it changed what judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tamper {
    /// A protected path it changed (relative to the project), set back.
    Protected(String),
    /// The gate passed with fewer tests than before.
    TestsVanished(crate::oracle::vanish::Vanished),
}

impl std::fmt::Display for Tamper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tamper::Protected(path) => write!(f, "the agent changed the protected path {path}"),
            Tamper::TestsVanished(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct StoryFacts {
    pub id: String,
    pub title: String,
    /// Its `passes` before the iteration.
    pub passed_before: bool,
    /// It has its own `verify` command.
    pub own_gate: bool,
}

/// What the agent said about its work: reported, never counted as progress.
#[derive(Debug, Clone, Default)]
pub(crate) struct Claim {
    /// It set the story's `passes` to true in prd.json.
    pub marked: bool,
    /// It said so in words: `<promise>COMPLETE</promise>` or `STATUS: COMPLETE`.
    pub said_done: bool,
    /// `TASKS_COMPLETED_THIS_LOOP` of its status block.
    pub tasks: u32,
    /// `STATUS: BLOCKED`, with its recommendation.
    pub blocked: Option<String>,
}

/// What git shows the iteration did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Evidence {
    pub commits: usize,
    /// Files other than ralph's bookkeeping whose content differs between
    /// the start and the end of the iteration, committed or not.
    pub work_files: usize,
    /// Of those, how many are still uncommitted.
    pub uncommitted_work: usize,
    /// prd.json changed in the iteration and is uncommitted (so a claim in
    /// it is not in HEAD).
    pub prd_uncommitted: bool,
    /// progress.txt changed in the iteration and is uncommitted.
    pub progress_uncommitted: bool,
}

/// The gate, as far as the verdict goes.
#[derive(Debug, Clone)]
pub(crate) enum GateRun {
    /// No gate applies to this story: the agent's word stands.
    None,
    /// Not run: the agent's run ended before its work could be judged.
    Skipped,
    Passed,
    Failed(GateFailure),
    /// Ctrl-C or SIGTERM stopped it: no verdict.
    Interrupted,
    /// It could not run at all: the environment is broken.
    CannotRun {
        message: String,
        hint: String,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct GateFailure {
    /// The failure as the next prompt shows it (output fenced).
    pub feedback: String,
    /// Its normalised shape, for "the same error N times".
    pub signature: String,
    /// A short excerpt for lessons and events.
    pub detail: String,
}

#[derive(Debug, Clone)]
pub(crate) enum HandoffFacts {
    Valid {
        /// `status: blocked`, with its blocker and summary.
        blocked: Option<(String, String)>,
        /// The agent's own lesson.
        lesson: Option<String>,
    },
    /// None written, and none required (`run.require_handoff = false`).
    NotRequired,
    /// Missing or invalid.
    Problem {
        /// One line: "handoff: missing".
        note: String,
        /// The section the next prompt gets.
        feedback: String,
    },
}

/// What the agent did to the repository itself.
#[derive(Debug, Clone, Default)]
pub(crate) struct GitCheck {
    /// A branch switched, history rewritten, commits elsewhere — and what
    /// ralph put right. Any of it fails the iteration.
    pub findings: Vec<String>,
    /// What ralph could not put right: the run stops.
    pub fatal: Option<String>,
}

/// What the agent did to prd.json beyond its own story's `passes`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PrdCheck {
    /// It was left invalid, or with stories deleted or moved: restored.
    pub damaged: bool,
    /// Fields it may not change, set back: "US-002's \"passes\"".
    pub tampered: Vec<String>,
}

/// What to do about one iteration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Judgement {
    pub result: IterationResult,
    /// The story's `passes` after the iteration.
    pub passes: bool,
    /// The gate's verdict on the story; `None` when no gate judged it.
    pub verified: Option<bool>,
    pub commit: Commit,
    /// The gate passed but the work is uncommitted and ralph may not commit it.
    pub uncommitted: bool,
    /// What the circuit breaker is told; `None`: the iteration does not count.
    pub breaker: Option<Signals>,
    /// Whether the iteration uses up one of the run's N.
    pub counts: bool,
    /// For the next prompt, in order. A transient iteration's is not used:
    /// the retry gets the feedback the attempt got.
    pub feedback: Vec<String>,
    /// Failures to record (events, rule cards) and lessons.
    pub learn: Vec<Learn>,
    pub notices: Vec<String>,
    pub warnings: Vec<String>,
    /// Shown with the iteration's end: the agent's error, else the denials,
    /// the handoff problem or the gate that could not run.
    pub note: Option<String>,
    pub next: Next,
}

/// What ralph commits after the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    None,
    /// The agent's uncommitted work with prd.json, as `feat: <ID> - <title>`.
    Work,
    /// prd.json (and progress.txt) with the story passing; `by_ralph` when
    /// ralph set `passes` itself.
    Mark {
        by_ralph: bool,
    },
    /// prd.json with the agent's committed claim set back.
    Unmark,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Learn {
    pub category: Category,
    pub signature: String,
    pub detail: String,
    /// The lesson for the story: the agent's own when it wrote one, else
    /// the detail. `None`: an event only (blocked, a gate that cannot run).
    pub lesson: Option<Lesson>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lesson {
    Agent(String),
    Loop(String),
}

/// Where the run goes after this iteration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    Continue,
    /// A subscription usage limit: wait for the reset, then retry the story.
    UsageLimit {
        resets_at: Option<DateTime<Utc>>,
        message: String,
    },
    /// A transient API error: back off, then retry the story.
    Backoff {
        message: String,
    },
    Stop(Stop),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The run's time budget stopped the agent.
    Budget,
    /// Nothing an agent can fix: auth, billing, a gate that cannot run.
    Environment { message: String },
    /// The agent needs a person.
    Blocked { message: String },
}

/// Whether the agent's work is judged at all (the gate runs): not after
/// Ctrl-C, an auth or billing failure, a usage limit or a transient API
/// error. A run that failed or timed out is judged: its work may pass.
pub(crate) fn needs_gate(agent: Option<&AgentError>) -> bool {
    match agent {
        None | Some(AgentError::Failed { .. } | AgentError::Killed { .. }) => true,
        Some(AgentError::Stopped { reason }) => *reason != StopReason::Interrupted,
        Some(_) => false,
    }
}

/// The verdict.
///
/// Long by design: one pass over the facts in the order the decision is
/// made, each step reading what the ones before decided; the longer steps
/// are functions below, and `judge/tests.rs` is its table.
pub(crate) fn judge(f: &Facts) -> Judgement {
    let mut j = Judgement {
        result: IterationResult::NoProgress,
        passes: f.story.passed_before,
        verified: None,
        commit: Commit::None,
        uncommitted: false,
        breaker: None,
        counts: true,
        feedback: prd_feedback(f),
        learn: Vec::new(),
        notices: Vec::new(),
        warnings: Vec::new(),
        note: f.agent.as_ref().map(ToString::to_string),
        next: Next::Continue,
    };
    if let Some(early) = ended_before_a_verdict(f, &j) {
        return early;
    }
    let misbehaved = !f.git.findings.is_empty();
    let failed = misbehaved
        || matches!(
            f.agent,
            Some(AgentError::Failed { .. } | AgentError::Killed { .. })
                | Some(AgentError::Stopped { reason: StopReason::Timeout | StopReason::Idle })
        );
    if misbehaved {
        j.note = j.note.take().or_else(|| Some(f.git.findings.join("; ")));
        j.warnings.extend(f.git.findings.iter().cloned());
        j.feedback.push(format!(
            "ralph found that {}. Stay on the branch you were given and never rewrite its \
             history: no `git reset` to older commits, no rebase of existing commits, no \
             checkout of other branches.",
            f.git.findings.join("; ")
        ));
    }
    let cut_off = failed || matches!(f.agent, Some(AgentError::Stopped { .. }));
    if let Some(e) = &f.agent {
        j.feedback.push(format!("The agent run failed: {e}"));
    }
    if let HandoffFacts::Problem { feedback, .. } = &f.handoff {
        j.feedback.push(feedback.clone());
    }
    let work = f.evidence.work_files > 0;
    let tampered = !f.tampered.is_empty();
    if tampered {
        refuse(f, &mut j);
    }
    flag_tests(f, &mut j);
    let (gate_signature, gate_example) = gate_verdict(f, &mut j, tampered, cut_off, work);
    let newly_verified = j.passes && !f.story.passed_before && j.verified == Some(true);
    let progress = !tampered && (work || newly_verified);
    j.result = if tampered {
        IterationResult::Tampered
    } else if failed {
        IterationResult::Failed
    } else if matches!(f.gate, GateRun::Failed(_)) {
        IterationResult::GateFailed
    } else if progress {
        IterationResult::Progress
    } else {
        IterationResult::NoProgress
    };
    tell(f, &mut j, progress, gate_signature.is_some());
    let handoff_problem = matches!(f.handoff, HandoffFacts::Problem { .. });
    j.breaker = Some(Signals {
        iteration: u64::from(f.iteration),
        progress,
        failed: failed || tampered,
        transient: false,
        asking_questions: f.asking_questions,
        // A productive agent that hit an error on its way is not repeating
        // itself: a successful run's error lines (failed tool calls) count
        // only when nothing moved.
        error_example: match &gate_signature {
            Some(_) => gate_example.map(str::to_string),
            None => f.error_example.clone(),
        },
        error_signature: gate_signature
            .or_else(|| f.error_signature.clone().filter(|_| f.agent.is_some() || !progress)),
        // A denial by the sandbox is a permission wall like a CLI's own.
        permission_denials: f.permission_denials.len() + f.sandbox_denials.len(),
        handoff_problem,
    });
    j.next = blocked(f, &mut j).unwrap_or(match f.agent {
        Some(AgentError::Stopped { reason: StopReason::Budget }) => Next::Stop(Stop::Budget),
        _ => Next::Continue,
    });
    j
}

/// Skip markers added and tests deleted in the diff: told to the person
/// and the next agent.
fn flag_tests(f: &Facts, j: &mut Judgement) {
    if !f.test_flags.is_empty() {
        let flags: Vec<String> = f.test_flags.iter().map(ToString::to_string).collect();
        j.warnings.push(format!("in {}'s diff: {}", f.story.id, flags.join("; ")));
        j.feedback.push(format!(
            "ralph saw tests set aside or removed in your changes:\n{}\nA test is the \
             person's check: make it pass instead of skipping, ignoring or deleting it.",
            flags.iter().map(|l| format!("- {l}")).collect::<Vec<_>>().join("\n")
        ));
    }
}

/// What the next prompt, the lessons and the person are told beyond the
/// verdict — a claim with no progress, the errors of commands that failed,
/// what the sandbox denied — and the note that explains the iteration.
fn tell(f: &Facts, j: &mut Judgement, progress: bool, gate_failed: bool) {
    if !progress && (f.claim.tasks > 0 || f.claim.said_done) {
        let what = if f.claim.tasks > 0 {
            format!(
                "it completed {} task{}",
                f.claim.tasks,
                crate::text::plural(f.claim.tasks as usize)
            )
        } else {
            "it is done".to_string()
        };
        j.warnings.push(format!(
            "the agent says {what}, but no file changed and nothing was verified: not counted as progress"
        ));
    }
    if !progress && !gate_failed && !f.tool_errors.is_empty() {
        j.feedback.push(format!(
            "Commands the agent ran failed with these errors:\n{}",
            crate::prompt::fence(&f.tool_errors.join("\n"))
        ));
    }
    if j.learn.is_empty() {
        j.learn.extend(agent_failure(f).or_else(|| other_failure(f, progress)));
    }
    if !f.sandbox_denials.is_empty() {
        j.feedback.push(format!(
            "The sandbox denied these (the lines of the output that say so):\n{}\nYou cannot \
             write outside the project, read credential stores or other projects, connect to \
             ports other than the API's, or signal processes outside your own: do not retry \
             them; do the work inside the project.",
            crate::prompt::fence(&f.sandbox_denials.join("\n"))
        ));
    }
    j.note = j.note.take().or_else(|| {
        if !f.sandbox_denials.is_empty() {
            // What the sandbox stopped explains the rest better than anything.
            Some(f.sandbox_denials.join(", "))
        } else if !f.permission_denials.is_empty() {
            // The denial explains a missing handoff better than the handoff does.
            Some(format!("permission denied: {}", f.permission_denials.join(", ")))
        } else if let HandoffFacts::Problem { note, .. } = &f.handoff {
            Some(note.clone())
        } else {
            None
        }
    });
}

/// What the gate's run says of the story: verified or not, done, set
/// back to unfinished; with a failed gate, its error's signature and an
/// example line for the breaker.
fn gate_verdict<'f>(
    f: &'f Facts,
    j: &mut Judgement,
    tampered: bool,
    cut_off: bool,
    work: bool,
) -> (Option<String>, Option<&'f str>) {
    match &f.gate {
        GateRun::Passed | GateRun::None | GateRun::Skipped if tampered => {
            j.verified = matches!(f.gate, GateRun::Passed).then_some(false);
            if f.claim.marked {
                j.commit = unmark(f);
            }
        }
        GateRun::Passed if f.story.own_gate || f.claim.marked || f.claim.said_done || work => {
            j.verified = Some(true);
            done(f, j, true);
        }
        GateRun::Passed => {
            j.verified = Some(false);
            j.feedback.push(format!(
                "The gate passes, but nothing was done for {} in this iteration (no commits, no \
                 changed files): implement the story, commit it, and set its \"passes\" to true.",
                f.story.id
            ));
        }
        GateRun::Failed(g) => {
            j.verified = Some(false);
            if f.claim.marked {
                j.commit = unmark(f);
                j.warnings.push(format!(
                    "{} was claimed but the gate failed: set back to unfinished",
                    f.story.id
                ));
            }
            j.feedback.push(g.feedback.clone());
            j.learn.push(learned(f, Category::GateFailure, &g.signature, &g.detail));
            // The detail's first line is the exit code (`exit=1`), then its error lines.
            let example = g.detail.lines().skip(1).map(str::trim).find(|l| !l.is_empty());
            return (Some(g.signature.clone()), example);
        }
        GateRun::None | GateRun::Skipped if f.claim.marked && cut_off => {
            j.commit = unmark(f);
            j.warnings.push(format!(
                "{} was marked passing by a failed agent run: set back to unfinished",
                f.story.id
            ));
        }
        GateRun::None | GateRun::Skipped if f.claim.marked => done(f, j, false),
        GateRun::None | GateRun::Skipped => {}
        GateRun::Interrupted | GateRun::CannotRun { .. } => {
            unreachable!("handled before the verdict")
        }
    }
    (None, None)
}

/// The story ends passing (the gate verified it, or no gate and the agent
/// marked it): what ralph commits, unless the agent's work is uncommitted
/// and ralph may not commit it.
fn done(f: &Facts, j: &mut Judgement, verified: bool) {
    let e = f.evidence;
    if e.uncommitted_work > 0 && !f.commit_leftovers {
        j.uncommitted = true;
        if verified {
            j.verified = Some(false);
        }
        j.commit = if f.claim.marked { unmark(f) } else { Commit::None };
        j.warnings.push(format!(
            "{} {}, but the agent left its work uncommitted (run.commit_leftovers = false): \
             not counted as passing",
            f.story.id,
            if verified { "passes the gate" } else { "was marked passing" }
        ));
        j.feedback.push(format!(
            "Your work on {} is not committed. Commit it as `feat: {} - {}`, then set its \
             \"passes\" to true: ralph counts only committed work.",
            f.story.id, f.story.id, f.story.title
        ));
        return;
    }
    j.passes = true;
    j.commit = if e.uncommitted_work > 0 {
        Commit::Work
    } else if !f.claim.marked || e.prd_uncommitted || e.progress_uncommitted {
        Commit::Mark { by_ralph: !f.claim.marked }
    } else {
        Commit::None
    };
    if e.uncommitted_work > 0 {
        j.notices.push(format!(
            "the agent left {} file{} of {} uncommitted: ralph committed them",
            e.uncommitted_work,
            crate::text::plural(e.uncommitted_work),
            f.story.id
        ));
    }
    if verified && !f.claim.marked {
        j.notices.push(format!("the gate passes: ralph marked {} as passing", f.story.id));
    }
}

/// The story is refused: what the agent touched goes into the warnings,
/// the next prompt and a lesson.
fn refuse(f: &Facts, j: &mut Judgement) {
    let what: Vec<String> = f.tampered.iter().map(ToString::to_string).collect();
    j.note = j.note.take().or_else(|| Some(format!("tampered: {}", what.join("; "))));
    j.warnings.push(format!("{} is not verified: {}", f.story.id, what.join("; ")));
    let protected: Vec<&str> = f
        .tampered
        .iter()
        .filter_map(|t| match t {
            Tamper::Protected(p) => Some(p.as_str()),
            Tamper::TestsVanished(_) => None,
        })
        .collect();
    if !protected.is_empty() {
        j.feedback.push(format!(
            "You changed {}, which ralph protects: the gate and what it runs are the person's. \
             ralph set it back and did not count this iteration for {}. If the change is \
             needed, propose it in your handoff (summary and nextSteps): ralph shows it to the \
             person.",
            protected.join(", "),
            f.story.id
        ));
    }
    for t in &f.tampered {
        if let Tamper::TestsVanished(v) = t {
            j.feedback.push(format!(
                "{}: {v}. ralph does not verify a story whose gate passes because tests were \
                 deleted, ignored or skipped: bring them back and make them pass.",
                f.story.id
            ));
        }
    }
    let detail = format!("{}: {}", f.story.id, what.join("; "));
    j.learn.push(learned(f, Category::Tampered, &what.join("; "), &detail));
}

/// Setting a claim back is committed when the claim itself was: a mark
/// the agent left uncommitted is only undone in the file.
fn unmark(f: &Facts) -> Commit {
    if f.evidence.prd_uncommitted { Commit::None } else { Commit::Unmark }
}

/// Feedback about what the agent did to prd.json.
fn prd_feedback(f: &Facts) -> Vec<String> {
    let mut feedback = Vec::new();
    if !f.prd.tampered.is_empty() {
        feedback.push(format!(
            "You changed {} in prd.json; ralph set it back. Only the \"passes\" field of your own \
             story ({}) is yours to change, and only ralph's gate makes it stick; the stories' \
             \"notes\" are yours too. The plan is the person's: if it needs a story added, split or \
             renamed, say so in your handoff and notes, and ralph shows your version to them.",
            f.prd.tampered.join(", "),
            f.story.id
        ));
    }
    if f.prd.damaged {
        feedback.push(
            "prd.json was left invalid or with stories deleted or renumbered; ralph restored the \
             last good copy. Only change the \"passes\" field of your story."
                .to_string(),
        );
    }
    feedback
}

/// The iterations with nothing to judge: the claim is undone, the breaker
/// is not told, and the run stops, waits or retries.
fn ended_before_a_verdict(f: &Facts, j: &Judgement) -> Option<Judgement> {
    let early = |result, next| {
        let mut e = j.clone();
        e.result = result;
        e.next = next;
        e.counts = result != IterationResult::Transient && result != IterationResult::Stopped;
        Some(e)
    };
    let interrupted = || {
        let mut e = early(IterationResult::Stopped, Next::Stop(Stop::Interrupted))?;
        e.feedback = vec![format!(
            "The previous attempt at {} was interrupted (Ctrl-C or SIGTERM) before ralph judged \
             it. Check the work tree and git log for partial work before going on.",
            f.story.id
        )];
        Some(e)
    };
    if matches!(f.gate, GateRun::Interrupted) {
        return interrupted();
    }
    if let Some(message) = &f.git.fatal {
        let mut e = early(
            IterationResult::Failed,
            Next::Stop(Stop::Environment { message: message.clone() }),
        )?;
        e.note = Some(message.clone());
        return Some(e);
    }
    if let GateRun::CannotRun { message, hint } = &f.gate {
        let full = format!("{message}\nhint: {hint}");
        let mut e =
            early(IterationResult::Failed, Next::Stop(Stop::Environment { message: full }))?;
        e.note = Some(message.clone());
        e.learn.push(Learn {
            category: Category::GateNotRun,
            signature: message.clone(),
            detail: message.clone(),
            lesson: None,
        });
        return Some(e);
    }
    match f.agent.as_ref()? {
        AgentError::Stopped { reason: StopReason::Interrupted } => interrupted(),
        AgentError::Auth { message } => {
            let message = format!(
                "the agent could not authenticate: {message}\nhint: log the agent CLI in again \
                 (or fix its API key), then run ralph again"
            );
            early(IterationResult::Failed, Next::Stop(Stop::Environment { message }))
        }
        AgentError::Billing { message } => {
            let message = format!(
                "the agent's account is out of credits or quota: {message}\nhint: add credits or \
                 raise the quota, then run ralph again (it resumes)"
            );
            early(IterationResult::Failed, Next::Stop(Stop::Environment { message }))
        }
        AgentError::UsageLimit { resets_at, message } => early(
            IterationResult::Transient,
            Next::UsageLimit { resets_at: *resets_at, message: message.clone() },
        ),
        AgentError::RateLimited { message } | AgentError::Overloaded { message } => {
            early(IterationResult::Transient, Next::Backoff { message: message.clone() })
        }
        // "cannot reach the API: …", in the wait and in the run's last words.
        e @ AgentError::Unreachable { .. } => {
            early(IterationResult::Transient, Next::Backoff { message: e.to_string() })
        }
        AgentError::Failed { .. } | AgentError::Killed { .. } | AgentError::Stopped { .. } => None,
    }
}

/// A failure recorded for the story, with the agent's own lesson if its
/// handoff has one.
fn learned(f: &Facts, category: Category, signature: &str, detail: &str) -> Learn {
    let lesson = match &f.handoff {
        HandoffFacts::Valid { lesson: Some(l), .. } => Lesson::Agent(l.clone()),
        _ => Lesson::Loop(detail.to_string()),
    };
    Learn {
        category,
        signature: signature.to_string(),
        detail: detail.to_string(),
        lesson: Some(lesson),
    }
}

/// What a failed or timed-out agent run teaches.
fn agent_failure(f: &Facts) -> Option<Learn> {
    let e = f.agent.as_ref()?;
    let category = match e {
        AgentError::Stopped { reason: StopReason::Timeout | StopReason::Idle } => {
            Category::AgentTimeout
        }
        AgentError::Failed { .. } => Category::AgentExit,
        // A kill says nothing about the code: an event, no lesson, no rule.
        AgentError::Killed { message, .. } => {
            return Some(Learn {
                category: Category::AgentKilled,
                signature: message.clone(),
                detail: message.clone(),
                lesson: None,
            });
        }
        _ => return None,
    };
    let text = e.to_string();
    let signature = f.error_signature.clone().unwrap_or_else(|| text.clone());
    let tail = crate::text::tail_chars(&f.final_text, 2000);
    let detail = format!("{text}\n{}", crate::learn::lessons::excerpt(f.exit_code, &tail, ""));
    Some(learned(f, category, &signature, &detail))
}

/// A run that went through but left no valid handoff, or whose tool calls
/// kept failing without any progress.
fn other_failure(f: &Facts, progress: bool) -> Option<Learn> {
    if let HandoffFacts::Problem { note, .. } = &f.handoff {
        let text = note.trim_start_matches("handoff: ").to_string();
        return Some(learned(f, Category::HandoffInvalid, &text, &text));
    }
    if progress || f.tool_errors.is_empty() {
        return None;
    }
    let detail = f.tool_errors.join("\n");
    let signature = f.error_signature.clone().unwrap_or_else(|| f.tool_errors[0].clone());
    Some(learned(f, Category::ToolError, &signature, &detail))
}

/// The agent says it cannot go on without a person.
fn blocked(f: &Facts, j: &mut Judgement) -> Option<Next> {
    if let HandoffFacts::Valid { blocked: Some((blocker, summary)), .. } = &f.handoff {
        j.learn.push(Learn {
            category: Category::Blocked,
            signature: blocker.clone(),
            detail: summary.clone(),
            lesson: None,
        });
        let message = format!("the agent is blocked on {}: {blocker}", f.story.id);
        return Some(Next::Stop(Stop::Blocked { message }));
    }
    let why = f.claim.blocked.as_ref()?;
    let message = format!("the agent reported BLOCKED on {}: {why}", f.story.id);
    Some(Next::Stop(Stop::Blocked { message }))
}

pub(crate) mod merge;

#[cfg(test)]
mod tests;
