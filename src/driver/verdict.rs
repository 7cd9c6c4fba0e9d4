//! Carrying out a [`Judgement`]: prd.json written once, ralph's commit,
//! the checkpoint, lessons, the breaker, and where the run goes next.

use std::path::{Path, PathBuf};

use chrono::{Local, Utc};

use super::iteration::Collected;
use super::judge::{Commit, GateRun, Judgement, Lesson, Next, Stop};
use super::{End, Run};
use crate::error::Error;
use crate::event::{IterationResult, RunOutcome};
use crate::git::GitError;
use crate::learn::lessons::Source;
use crate::prd::Prd;
use crate::process::Signal;
use crate::state::{Best, Pending, Phase};

/// ralph's commit of a story failed: the story is marked unfinished again
/// and the run stops (exit 7), git's hint or ours said.
#[derive(Debug, thiserror::Error)]
#[error("cannot commit {story}: {source}; it is marked unfinished again")]
pub struct CommitFailed {
    pub story: String,
    #[source]
    pub source: GitError,
}

impl CommitFailed {
    pub fn hint(&self) -> String {
        self.source
            .hint
            .clone()
            .unwrap_or_else(|| "check the repository (`git status`), then run ralph again".into())
    }
}

/// Holds prd.json's claims from the moment an agent runs until its verdict
/// is carried out. Dropped without [`ClaimGuard::settle`] — an error cut
/// the iteration short — it sets every story's `passes` and `verify` back
/// to what they were before the iteration: nothing unverified survives.
pub(super) struct ClaimGuard {
    path: PathBuf,
    before: Option<Prd>,
}

impl ClaimGuard {
    pub(super) fn new(path: &Path, before: &Prd) -> ClaimGuard {
        ClaimGuard { path: path.to_path_buf(), before: Some(before.clone()) }
    }

    /// The verdict has been written: nothing to undo.
    pub(super) fn settle(mut self) {
        self.before = None;
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        let Some(before) = self.before.take() else { return };
        let restored = match Prd::load(&self.path) {
            Ok(mut now) if before.identity_damage(&now).is_none() => {
                if now.restore_claims(&before, &[]).is_empty() {
                    return;
                }
                now
            }
            _ => before,
        };
        // Best effort: the run is ending with an error already.
        let _ = restored.save(&self.path);
    }
}

impl Run<'_> {
    /// Writes what the judgement says and decides where the run goes:
    /// `Ok(Some(end))` stops it.
    pub(super) fn carry_out(
        &mut self,
        guard: ClaimGuard,
        c: Collected,
        j: Judgement,
    ) -> Result<Option<End>, Error> {
        let prd = self.write_verdict(guard, &c, &j)?;
        self.record_iteration(&c, &j, &prd);
        self.end_iteration(&c, &j);
        self.go_on_after(&c, &j)
    }

    /// The verdict on disk: write-ahead in the checkpoint, then prd.json
    /// reconciled and ralph's commit. Returns prd.json as written.
    fn write_verdict(
        &mut self,
        guard: ClaimGuard,
        c: &Collected,
        j: &Judgement,
    ) -> Result<Prd, Error> {
        let id = c.story.id.clone();
        // Judged (unless stopped before a verdict): a resume never takes
        // this iteration's progress entry back. Cleared before the first
        // checkpoint below, the write-ahead one.
        if j.result != IterationResult::Stopped {
            self.state.progress_at_start = None;
        }
        let plan = self.plan_commit(c, j);
        if j.passes && !c.story.passes {
            // Write-ahead: the verdict and ralph's commit are on disk before
            // anything acts on them, so a resume after a crash from here on
            // finishes them instead of undoing or losing them.
            if j.verified == Some(true) {
                self.state.note_verified(&id, true);
            }
            let commit = plan.as_ref().map(|(paths, message)| {
                (paths.iter().map(|p| p.display().to_string()).collect(), message.clone())
            });
            self.state.pending = Some(Pending { story: id.clone(), passes: true, commit });
            self.save_checkpoint(Phase::Gate)?;
        }
        let prd = self.reconcile(c, j)?;
        guard.settle();
        if let Some((paths, message)) = plan {
            self.commit(&id, j.commit, &paths, &message)?;
        }
        self.state.pending = None;
        Ok(prd)
    }

    /// What the iteration leaves in the run's records: claims, verdicts,
    /// feedback and handoff for the next prompt, the gate's counts, the
    /// lessons, the best attempt, what to tell, the story's tally.
    fn record_iteration(&mut self, c: &Collected, j: &Judgement, prd: &Prd) {
        let id = c.story.id.clone();
        if c.facts.claim.marked {
            self.state.note_claimed(&id);
        }
        for other in &c.other_claims {
            self.state.note_claimed(other);
        }
        if let Some(verified) = j.verified {
            self.state.note_verified(&id, verified);
        }
        self.state.note_uncommitted(&id, j.uncommitted);
        if j.result != IterationResult::Transient {
            self.state.feedback = (!j.feedback.is_empty()).then(|| j.feedback.join("\n\n"));
        }
        if let Some(h) = &c.handoff {
            self.state.handoff = serde_json::to_value(h).ok();
        }
        if j.result != IterationResult::Transient && self.limits.holds_anything(c.agent) {
            self.limits.note_success(c.agent);
            let _ = self.limits.save(&self.paths.store);
        }
        if j.verified == Some(true) {
            self.record_gate_pass(&c.applied);
            // What the gate counted is what the next stories are held to.
            if let (Some(counts), Some(cmd)) = (
                c.verdict.as_ref().and_then(|v| v.counts),
                self.gate_command(&c.story).filter(|_| c.story.verify.is_none()),
            ) {
                self.record_tests(&cmd, counts, id.clone());
            }
        }
        self.learn(c, j);
        if c.facts.evidence.work_files > 0
            && j.result != IterationResult::Tampered
            && let Some(v) = &c.verdict
        {
            self.note_best(c, j, v, prd.passing());
        }
        for n in &j.notices {
            self.notice(n.clone());
        }
        for w in &j.warnings {
            self.warn(w.clone());
        }
        if c.outcome.claimed_complete && !prd.all_pass() {
            let left = prd.stories().len() - prd.passing();
            self.warn(format!(
                "the agent claimed COMPLETE but {} unfinished",
                crate::text::count(left, "story is", "stories are")
            ));
        }
        if matches!(j.result, IterationResult::Failed | IterationResult::GateFailed) {
            self.state.last_failure = Some(crate::state::FailureRef {
                iteration: c.n,
                story: id.clone(),
                log: c.log.display().to_string(),
                error: j.note.clone().or_else(|| match &c.facts.gate {
                    GateRun::Failed(g) => Some(gate_failure_line(&g.detail)),
                    _ => None,
                }),
            });
        }
        let tally = self.state.stories.entry(id.clone()).or_default();
        tally.work.cost_usd += c.outcome.cost_usd.unwrap_or(0.0);
        if j.counts {
            tally.work.iterations += 1;
        } else {
            self.state.iteration -= 1;
        }
    }

    /// Where the run goes after the iteration: `Ok(Some(end))` stops it.
    fn go_on_after(&mut self, c: &Collected, j: &Judgement) -> Result<Option<End>, Error> {
        match &j.next {
            Next::Stop(Stop::Interrupted) => {
                let signal = crate::signals::pending().unwrap_or(Signal::Term);
                return Ok(Some(End::interrupted(signal)));
            }
            Next::Stop(Stop::Environment { message }) => {
                return Ok(Some(End::new(RunOutcome::Environment, message.clone())));
            }
            Next::Stop(Stop::Blocked { message }) => {
                self.save_checkpoint(Phase::Idle)?;
                return Ok(Some(End::new(RunOutcome::Blocked, message.clone())));
            }
            Next::UsageLimit { resets_at, message } => {
                let resume = self.limits.set_agent_usage_limit(
                    c.agent,
                    *resets_at,
                    Utc::now(),
                    self.cfg.limits.usage_limit_wait,
                );
                let _ = self.limits.save(&self.paths.store);
                let at = resume.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S");
                self.notice(if self.kit.agents.all().len() > 1 {
                    format!(
                        "usage limit of {}: {message} — it can be called again at {at}",
                        c.agent
                    )
                } else {
                    format!("usage limit: {message} — calls resume at {at}")
                });
                self.save_checkpoint(Phase::Idle)?;
                return Ok(None);
            }
            Next::Backoff { message } => {
                self.save_checkpoint(Phase::Idle)?;
                return Ok(self.back_off(message));
            }
            Next::Continue | Next::Stop(Stop::Budget) => {}
        }
        self.save_iteration_end(Phase::Idle)?;
        if let Some(signals) = &j.breaker {
            // An open breaker stops the loop at its next turn, unless every
            // story is done by then.
            self.record_breaker(signals);
        }
        if j.next == Next::Stop(Stop::Budget) {
            return Ok(self
                .over_budget()
                .or_else(|| Some(End::new(RunOutcome::Budget, "the run's time budget is spent"))));
        }
        Ok(None)
    }

    /// prd.json, written once per iteration: the agent's copy with what it
    /// may not change set back (or the last good copy, if it broke the
    /// file), and the story's `passes` as judged.
    fn reconcile(&mut self, c: &Collected, j: &Judgement) -> Result<Prd, Error> {
        let (mut prd, damage) = match &c.prd {
            Ok(prd) => (prd.clone(), None),
            Err(why) => (self.good_prd.clone(), Some(why.to_string())),
        };
        let agents_mark = c.facts.claim.marked || c.story.passes;
        prd.set_passes(&c.story.id, j.passes);
        if damage.is_some() || !c.facts.prd.tampered.is_empty() || agents_mark != j.passes {
            self.save_prd(&prd)?;
        } else if prd.to_json() != self.good_prd.to_json() {
            // The agent's own edits (its mark, notes): kept as it wrote them.
            self.save_last_prd(&prd);
            self.good_prd = prd.clone();
        }
        if let Some(why) = damage {
            self.warn(format!("prd.json was damaged ({why}); restored the last good copy"));
        }
        // A story that no longer passes (its commits are gone) is no longer verified.
        self.state.verified.retain(|id| prd.story(id).is_some_and(|s| s.passes));
        Ok(prd)
    }

    /// ralph's commit, if the judgement calls for one: the paths (relative
    /// to the work tree) and the message.
    fn plan_commit(&self, c: &Collected, j: &Judgement) -> Option<(Vec<PathBuf>, String)> {
        let id = &c.story.id;
        let prd = self.repo.relative(&self.paths.prd);
        let progress = self.repo.relative(&self.paths.progress);
        let bookkeeping = |p: &PathBuf| Some(p) == prd.as_ref() || Some(p) == progress.as_ref();
        let (mut paths, message): (Vec<PathBuf>, String) = match j.commit {
            Commit::None => return None,
            Commit::Work => {
                let how = if j.verified == Some(true) {
                    "after ralph's gate passed"
                } else {
                    "after the agent marked the story passing"
                };
                (
                    c.leftovers.clone(),
                    format!(
                        "feat: {id} - {}\n\nThe agent left this work uncommitted; ralph committed it {how}.\n\nCommitted-by: ralph",
                        c.story.title
                    ),
                )
            }
            Commit::Mark { by_ralph } => (
                c.leftovers.iter().filter(|p| bookkeeping(p)).cloned().collect(),
                if by_ralph {
                    format!("chore: mark {id} as passing (verified by ralph's gate)")
                } else {
                    format!("chore: record {id} as passing (verified by ralph's gate)")
                },
            ),
            Commit::Unmark => (
                Vec::new(),
                if matches!(c.facts.gate, GateRun::Failed(_)) {
                    format!("chore: {id} does not pass ralph's gate yet")
                } else {
                    format!("chore: set {id} back to unfinished")
                },
            ),
        };
        paths.extend(prd);
        paths.sort();
        paths.dedup();
        Some((paths, message))
    }

    /// Makes ralph's commit, on the run branch only. Done means committed:
    /// a story whose commit fails is set back to unfinished and the run
    /// stops (an unmark that cannot be committed is only a warning: the
    /// file says the truth).
    pub(super) fn commit(
        &mut self,
        id: &str,
        kind: Commit,
        paths: &[PathBuf],
        message: &str,
    ) -> Result<(), Error> {
        self.kit.reusable_snapshot = None;
        if let Err(e) = self.clear_stale_git_locks() {
            return self.commit_failed(id, kind, e);
        }
        let result = match &self.kit.branch {
            Some(branch) if self.repo.current_branch().as_deref() != Some(branch.as_str()) => {
                Err(crate::git::GitError::refused(
                    format!("HEAD is not on the run branch {branch}"),
                    format!("check out {branch}, then run ralph again"),
                ))
            }
            _ => {
                let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
                self.repo.commit_paths(&refs, message).map(|_| ())
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) => self.commit_failed(id, kind, e),
        }
    }

    fn commit_failed(&mut self, id: &str, kind: Commit, e: GitError) -> Result<(), Error> {
        if kind == Commit::Unmark {
            self.warn(format!("cannot commit prd.json: {e}"));
            return Ok(());
        }
        let mut prd = self.good_prd.clone();
        prd.set_passes(id, false);
        self.save_prd(&prd)?;
        self.state.note_verified(id, false);
        self.state.pending = None;
        Err(CommitFailed { story: id.to_string(), source: e }.into())
    }

    /// Events, rule cards and lessons of what the iteration taught.
    fn learn(&mut self, c: &Collected, j: &Judgement) {
        let evidence = c.log.display().to_string();
        for l in &j.learn {
            let learns = l.category.learns();
            let (evidence, applied) = if learns {
                (Some(evidence.as_str()), c.applied.as_slice())
            } else {
                (None, &[][..])
            };
            self.record_failure(
                &c.story.id,
                l.category.clone(),
                &l.signature,
                &l.detail,
                evidence,
                applied,
            );
            match &l.lesson {
                Some(Lesson::Agent(text)) => self.record_lesson(&c.story.id, text, Source::Agent),
                Some(Lesson::Loop(text)) => self.record_lesson(&c.story.id, text, Source::Loop),
                None => {}
            }
        }
    }

    /// Remembers the iteration that came closest to passing, for the report
    /// of a run that ends unfinished. Only iterations that did work count:
    /// never the untouched start, never a story nobody worked on.
    fn note_best(
        &mut self,
        c: &Collected,
        j: &Judgement,
        v: &crate::gate::Verdict,
        passing: usize,
    ) {
        let rank = (v.passed, passing, -i64::from(v.score.failed.unwrap_or(0)));
        if self.state.best.as_ref().is_some_and(|b| rank <= b.rank) {
            return;
        }
        // HEAD holds the iteration's work only when none of it was left
        // uncommitted (or ralph has just committed it).
        let e = c.facts.evidence;
        let committed = (e.commits > 0 && e.uncommitted_work == 0) || j.commit == Commit::Work;
        let head = self.repo.head().filter(|_| committed);
        self.state.best = Some(Best {
            iteration: c.n,
            commit: head.map(|h| format!("{:.7}", h.to_string())),
            rank,
            description: match (v.passed, v.timed_out) {
                (true, _) => "gate passed".to_string(),
                (false, true) => "gate timed out".to_string(),
                (false, false) => format!("gate failed: {}", v.score.describe()),
            },
        });
    }
}

/// A gate failure in a line, as `ralph status` shows it: the lines of its
/// excerpt that name the error, numbers as they were (`assert 1 == 22`),
/// else its exit code.
fn gate_failure_line(detail: &str) -> String {
    let mut lines = detail.lines();
    let exit = lines.next().unwrap_or_default();
    let said: Vec<&str> = lines.map(str::trim).filter(|l| !l.is_empty()).collect();
    if said.is_empty() {
        let code = exit.strip_prefix("exit=").filter(|c| *c != "none");
        return match code {
            Some(c) => format!("the gate failed (exit {c})"),
            None => "the gate was killed".into(),
        };
    }
    crate::text::clip(&said.join(" · "), 200)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_gate_failure_reads_as_what_it_said_or_its_exit_code() {
        for (detail, want) in [
            ("exit=1", "the gate failed (exit 1)"),
            ("exit=none", "the gate was killed"),
            ("exit=1\nAssertionError: assert 1 == 22\n  x", "AssertionError: assert 1 == 22 · x"),
        ] {
            assert_eq!(super::gate_failure_line(detail), want);
        }
    }

    use super::*;

    #[test]
    fn the_guard_sets_claims_back_unless_the_verdict_settled_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prd.json");
        let text = |passes: bool| {
            format!(
                r#"{{"userStories":[{{"id":"A","passes":{passes}}},{{"id":"B","passes":false}}]}}"#
            )
        };
        let before = Prd::parse(text(false).as_bytes(), &path).unwrap();
        let passes = || Prd::load(&path).unwrap().story("A").unwrap().passes;
        // Dropped: an early exit undoes the claim.
        std::fs::write(&path, text(true)).unwrap();
        drop(ClaimGuard::new(&path, &before));
        assert!(!passes());
        // A file the agent broke is replaced by the copy from before.
        std::fs::write(&path, "{broken").unwrap();
        drop(ClaimGuard::new(&path, &before));
        assert!(!passes());
        // Settled: the verdict stands.
        std::fs::write(&path, text(true)).unwrap();
        ClaimGuard::new(&path, &before).settle();
        assert!(passes());
    }
}
