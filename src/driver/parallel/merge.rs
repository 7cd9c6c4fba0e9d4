//! The merge queue: queued stories squashed one after another onto the run
//! branch's tip in memory, ralph writing prd.json and progress.txt into
//! each commit itself, gated once together on the merged tree (bisected
//! when that fails: `batch.rs`), and only then put on the run branch (a
//! compare-and-swap) and into the main work tree. What becomes of each
//! story that did not merge — a resolver, a redo from the new tip, given up
//! — is `judge::merge`'s verdict; this module carries it out.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use git2::Oid;

use super::batch::{self, Fate, Gated, Merger};
use super::plan::{self, GiveUp};
use super::remote::Delivery;
use super::{ParallelError, Pool, Queued};
use crate::driver::Run;
use crate::driver::judge::merge::{
    MergeAction, MergeFacts, MergeGate, MergeJudgement, MergeSignal, Met, judge_merge,
};
use crate::error::Error;
use crate::event::Event;
use crate::git::Repo;
use crate::prd::Prd;

/// What one try at merging a batch came to.
enum Tried {
    /// The batch's fates, on the tip it started from; `advanced`: the work
    /// tree followed the run branch (else the journal stays for the next ralph).
    Done {
        merged: batch::Merged<Oid>,
        commits: BTreeMap<usize, Oid>,
        others: Option<String>,
        advanced: bool,
    },
    /// The run branch moved meanwhile (a person committed, another machine
    /// delivered): try again on the new tip.
    Raced,
    /// The remote cannot be reached: the stories stay queued, for later.
    Unreachable(String),
}

impl Run<'_> {
    /// Merges the next batch of queued stories; what does not merge is
    /// judged (`judge_merge`) and resolved, sent back or given up. Whether
    /// there was a batch: every queued story may be waiting for a resolver.
    pub(super) fn merge_next(&mut self, pool: &mut Pool) -> Result<bool, Error> {
        let batch = self.take_batch(pool);
        if batch.is_empty() {
            return Ok(false);
        }
        let started = Instant::now();
        pool.merging = batch.iter().map(|q| q.story.clone()).collect();
        let tries = pool.peers.merge_tries();
        let mut tried = Ok(Tried::Raced);
        for _ in 0..tries {
            tried = self.try_batch(pool, &batch);
            if !matches!(tried, Ok(Tried::Raced)) {
                break;
            }
        }
        pool.merging.clear();
        let tried = match tried {
            Ok(t) => t,
            Err(e) => {
                requeue(pool, batch);
                return Err(e);
            }
        };
        match tried {
            Tried::Done { merged, commits, others, advanced } => {
                let ms = started.elapsed().as_millis() as u64;
                for (i, fate) in merged.fates {
                    let q = batch[i].clone();
                    self.settle(pool, q, fate, commits.get(&i).copied(), others.clone(), ms);
                }
                if advanced {
                    pool.board.merging = None;
                }
                pool.save_board(&self.paths.store);
                let _ = self.branch_prd(pool);
                Ok(true)
            }
            Tried::Raced => {
                requeue(pool, batch);
                let queue = pool.board.queue.clone();
                Err(ParallelError::Raced { branch: pool.branch.clone(), queue }.into())
            }
            Tried::Unreachable(why) => {
                self.remote_unreachable(pool, &why);
                requeue(pool, batch);
                std::thread::sleep(std::time::Duration::from_millis(500));
                Ok(true)
            }
        }
    }

    /// The next batch, out of the queue: up to `merge.batch` stories (one
    /// with a remote, whose delivery is per story) in queue order, but for
    /// stories that touch the files of a story being resolved, which wait
    /// for it; a resolved story is merged alone, so its checks are its own.
    fn take_batch(&self, pool: &mut Pool) -> Vec<Queued> {
        let max = pool.peers.batch_limit(self.cfg.merge.batch as usize);
        let prd = self.good_prd.clone();
        let fp = pool.footprints(&prd);
        let resolving: Vec<crate::prd::Footprint> = pool
            .resolving_files()
            .into_iter()
            .map(|files| crate::prd::Footprint::new(&files, &[]))
            .collect();
        let held = |q: &Queued| {
            let mine = fp.get(&q.story).cloned().unwrap_or_default();
            resolving.iter().any(|r| mine.overlap(r).is_some())
        };
        let mut batch = Vec::new();
        let mut kept = std::collections::VecDeque::new();
        while let Some(q) = pool.queue.pop_front() {
            if held(&q) {
                kept.push_back(q);
                continue;
            }
            let alone = q.resolved_with.is_some();
            if alone && !batch.is_empty() {
                kept.push_back(q);
                break;
            }
            batch.push(q);
            if alone || batch.len() >= max {
                break;
            }
        }
        kept.extend(pool.queue.drain(..));
        pool.queue = kept;
        batch
    }

    /// The story passes on the run branch's tip (delivered by another worker).
    pub(super) fn passes_on_tip(&self, pool: &Pool, story: &str) -> bool {
        self.repo
            .branch_tip(&pool.branch)
            .and_then(|tip| self.repo.file_at(tip, &pool.prd_rel))
            .and_then(|b| Prd::parse(&b, &self.paths.prd).ok())
            .is_some_and(|p| p.story(story).is_some_and(|s| s.passes))
    }

    fn try_batch(&mut self, pool: &mut Pool, batch: &[Queued]) -> Result<Tried, Error> {
        // Onto the shared tip as it is now: a merge onto a tip we could not
        // fetch would only lose the race (after its gate).
        if !self.sync_peers(pool, std::time::Duration::ZERO) {
            return Ok(Tried::Unreachable("fetch failed".into()));
        }
        let tip = self
            .repo
            .branch_tip(&pool.branch)
            .ok_or_else(|| ParallelError::RunBranchGone { branch: pool.branch.clone() })?;
        let (there, todo): (Vec<usize>, Vec<usize>) =
            (0..batch.len()).partition(|&i| self.passes_on_tip(pool, &batch[i].story));
        let mut merger =
            GitMerger { run: self, pool, items: batch, commits: BTreeMap::new(), other: None };
        let mut merged = batch::merge(&mut merger, tip, &todo)?;
        let (commits, others) = (merger.commits, merger.other);
        merged.fates.extend(there.into_iter().map(|i| (i, Fate::Merged)));
        if merged.tip != tip {
            let stories: Vec<String> = merged
                .fates
                .iter()
                .filter(|(i, f)| *f == Fate::Merged && commits.contains_key(i))
                .map(|(i, _)| batch[*i].story.clone())
                .collect();
            pool.board.merging = Some(super::board::Merging {
                story: stories.last().cloned().unwrap_or_default(),
                stories,
                from: tip.to_string(),
                to: merged.tip.to_string(),
            });
            pool.save_board_durably(&self.paths.store)?;
            let q = &batch[0];
            match pool.peers.deliver(&self.repo, merged.tip, &q.story, &q.branch) {
                Ok(Delivery::Landed) => {}
                Ok(Delivery::Raced) => {
                    pool.board.merging = None;
                    return Ok(Tried::Raced);
                }
                Err(e) => {
                    pool.board.merging = None;
                    return Ok(Tried::Unreachable(e.message));
                }
            }
            if self.repo.move_branch(&pool.branch, tip, merged.tip).is_err() {
                pool.board.merging = None;
                return Ok(Tried::Raced);
            }
            // The branch moved: the merge happened. A work tree that could
            // not follow is finished from the journal by the next ralph.
            match self.repo.advance_work_tree(tip, merged.tip) {
                Ok(skipped) if !skipped.is_empty() => self.warn(format!(
                    "left alone in the work tree, changed there since: {} (the run branch has the merged version)",
                    skipped.join(", ")
                )),
                Ok(_) => {}
                Err(e) => {
                    self.warn(format!(
                        "the work tree could not follow the run branch ({}): the next ralph brings it along",
                        e.message
                    ));
                    return Ok(Tried::Done { merged, commits, others, advanced: false });
                }
            }
        }
        Ok(Tried::Done { merged, commits, others, advanced: true })
    }

    /// Carries out what became of one story of a batch.
    fn settle(
        &mut self,
        pool: &mut Pool,
        q: Queued,
        fate: Fate,
        commit: Option<Oid>,
        other: Option<String>,
        ms: u64,
    ) {
        let gated = self.kit.gate.is_some();
        let (met, gate) = match &fate {
            Fate::Merged if commit.is_none() => {
                self.already_there(pool, &q);
                return;
            }
            Fate::Merged => (Met::Clean, if gated { MergeGate::Passed } else { MergeGate::None }),
            Fate::Conflict(files) => {
                pool.board.learn(&q.story, files.iter().cloned());
                (Met::Conflict(files.clone()), MergeGate::NotRun)
            }
            Fate::GateFailed(feedback) => {
                (Met::Clean, MergeGate::Failed { feedback: feedback.clone(), other })
            }
            Fate::Waiting => (Met::Clean, MergeGate::Interrupted),
        };
        let files = match &fate {
            Fate::Conflict(files) => files.clone(),
            _ => Vec::new(),
        };
        let j = judge_merge(&self.merge_facts(pool, &q, met, gate));
        self.carry_out_merge(pool, q, &j, commit, files, ms);
    }

    /// What the merge judge needs beyond the queue's own findings.
    pub(super) fn merge_facts(
        &self,
        pool: &Pool,
        q: &Queued,
        met: Met,
        gate: MergeGate,
    ) -> MergeFacts {
        MergeFacts {
            met,
            resolved_with: q.resolved_with.clone(),
            gate,
            failures: pool.board.sent_back.get(&q.story).copied().unwrap_or(0),
            attempts: self.cfg.merge.attempts,
            resolve: self.cfg.merge.resolve,
        }
    }

    /// Does what the merge judge said.
    pub(super) fn carry_out_merge(
        &mut self,
        pool: &mut Pool,
        q: Queued,
        j: &MergeJudgement,
        commit: Option<Oid>,
        files: Vec<String>,
        ms: u64,
    ) {
        match j.breaker {
            MergeSignal::Progress => self.merge_signal(true),
            MergeSignal::Failure => self.merge_signal(false),
            MergeSignal::Nothing => false,
        };
        let commit_sha = commit.map(|c| c.to_string());
        match &j.action {
            MergeAction::Merge => self.merged(pool, &q, commit_sha.clone().unwrap_or_default()),
            MergeAction::Resolve(files) => {
                pool.to_resolve.push_back((q.clone(), files.clone()));
            }
            MergeAction::Wait => {
                pool.queue.push_front(q.clone());
                return;
            }
            MergeAction::Redo | MergeAction::GiveUp => self.sent_back(pool, &q, j),
        }
        self.reporter.emit(&Event::Merge {
            story_id: q.story.clone(),
            result: j.result,
            commit: commit_sha.filter(|_| j.action == MergeAction::Merge),
            files,
            duration_ms: ms,
            message: j.message.clone(),
        });
    }

    /// Tells the run's breaker how a merge went; true when it is open now.
    fn merge_signal(&mut self, progress: bool) -> bool {
        let signals = crate::circuit::Signals {
            iteration: u64::from(self.state.iteration),
            progress,
            failed: false,
            transient: false,
            asking_questions: false,
            error_signature: None,
            error_example: None,
            permission_denials: 0,
            handoff_problem: false,
        };
        self.record_breaker(&signals)
    }

    /// A story on the run branch: recorded, its worktree and branch gone.
    fn merged(&mut self, pool: &mut Pool, q: &Queued, sha: String) {
        pool.board.merged.insert(q.story.clone(), sha.clone());
        pool.board.resolving.remove(&q.story);
        pool.board.resolved_with.remove(&q.story);
        self.state.stories.entry(q.story.clone()).or_default().work.commit = Some(sha);
        // A remote delivery released the claim in the same push.
        pool.remove_worktree(&self.repo, &q.story, true);
        if self.kit.gate.is_some() {
            self.state.note_verified(&q.story, true);
        }
        self.state.note_claimed(&q.story);
    }

    /// Another worker delivered it already: nothing to merge twice.
    fn already_there(&mut self, pool: &mut Pool, q: &Queued) {
        pool.remove_worktree(&self.repo, &q.story, true);
        pool.peers.release(&q.story, &q.branch);
        self.notice(format!("{} passes on the run branch already: not merged again", q.story));
    }

    /// An attempt that failed: the story is redone from the new tip with
    /// the reason as its lesson, or given up when no attempt is left.
    fn sent_back(&mut self, pool: &mut Pool, q: &Queued, j: &MergeJudgement) {
        let why = j.failure.clone().unwrap_or_else(|| j.message.clone());
        // The work before any resolution was kept when the resolver started.
        let kept = match pool.board.resolving.remove(&q.story) {
            Some(name) => super::tidy::describe_kept(&self.repo, &name),
            None => pool.keep_attempt(&self.repo, q),
        };
        *pool.board.sent_back.entry(q.story.clone()).or_insert(0) += 1;
        pool.board.resolved_with.remove(&q.story);
        pool.board.failures.entry(q.story.clone()).or_default().push(why.clone());
        self.state
            .stories
            .entry(q.story.clone())
            .or_default()
            .work
            .merge_failures
            .push(why.clone());
        pool.remove_worktree(&self.repo, &q.story, true);
        // Redone from the new tip, not from the pushed attempt.
        pool.peers.drop_branch(&q.branch);
        let mut lesson = format!(
            "Your earlier work on {} did not reach the run branch: {why}. The story starts \
             again from the run branch's new tip, with the stories merged meanwhile; the earlier \
             attempt is kept as {kept} (`git show` it to reuse what still applies).",
            q.story
        );
        if let Some(f) = &j.feedback {
            lesson.push_str("\n\n");
            lesson.push_str(f);
        }
        if j.action == MergeAction::GiveUp {
            pool.peers.give_up(&self.repo, &q.story, &j.message);
            let all = pool.board.failures.get(&q.story).cloned().unwrap_or_default();
            let reasons = all
                .iter()
                .enumerate()
                .map(|(n, r)| format!("attempt {}: {r}", n + 1))
                .collect::<Vec<_>>()
                .join("; ");
            let why = format!(
                "{}: given up ({reasons}); its work is kept as {kept}",
                j.message.trim_end_matches(": given up")
            );
            self.state.given_up.insert(q.story.clone(), why.clone());
            pool.given_up.insert(q.story.clone(), (GiveUp::Merge, why.clone()));
            pool.board.given_up_merging.insert(q.story.clone());
            pool.board.given_up.insert(q.story.clone(), why);
        } else {
            pool.board.feedback.insert(q.story.clone(), lesson.clone());
        }
        pool.save_board(&self.paths.store);
        self.record_lesson(&q.story, &lesson, crate::learn::lessons::Source::Loop);
    }

    /// prd.json and progress.txt as the merged tree holds them: the tip's,
    /// with the story marked passing and the worker's progress entry added.
    fn bookkeeping(
        &self,
        pool: &Pool,
        q: &Queued,
        tip: Oid,
        work: Oid,
    ) -> Result<Vec<(PathBuf, Vec<u8>)>, Error> {
        let repo = &self.repo;
        let text = |oid: Oid, rel: &std::path::Path| {
            repo.file_at(oid, rel).map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        let prd_bytes = repo
            .file_at(tip, &pool.prd_rel)
            .ok_or_else(|| ParallelError::NoPrd { path: pool.prd_rel.clone() })?;
        let mut prd = Prd::parse(&prd_bytes, &self.paths.prd)?;
        prd.set_passes(&q.story, true);
        let base = repo.merge_base(tip, work).and_then(|b| text(b, &pool.progress_rel));
        let progress = plan::append(
            &text(tip, &pool.progress_rel).unwrap_or_default(),
            &self.progress_entry(pool, q, base.as_deref().unwrap_or(""), work),
        );
        Ok(vec![
            (pool.prd_rel.clone(), prd.to_json().into_bytes()),
            (pool.progress_rel.clone(), progress.into_bytes()),
        ])
    }

    /// What the story's agent added to progress.txt since `base`: as its
    /// worker left it when the story was queued (an entry may be
    /// uncommitted), else from the worktree while it is on the story's
    /// branch (a gate on a merged tree leaves it detached, holding other
    /// stories' entries too), else from `work`.
    pub(super) fn progress_entry(&self, pool: &Pool, q: &Queued, base: &str, work: Oid) -> String {
        let on_branch = || {
            Repo::discover(&q.dir)
                .is_ok_and(|r| r.current_branch().as_deref() == Some(q.branch.as_str()))
        };
        let worker = q
            .progress
            .clone()
            .or_else(|| {
                on_branch()
                    .then(|| std::fs::read_to_string(q.dir.join(&pool.progress_rel)).ok())
                    .flatten()
            })
            .or_else(|| {
                self.repo
                    .file_at(work, &pool.progress_rel)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            })
            .unwrap_or_default();
        plan::progress_suffix(base, &worker)
    }
}

/// The batch back at the head of the queue, in its order.
fn requeue(pool: &mut Pool, batch: Vec<Queued>) {
    for q in batch.into_iter().rev() {
        pool.queue.push_front(q);
    }
}

/// The repository and the gate, for `batch::merge`.
struct GitMerger<'r, 'a> {
    run: &'r mut Run<'a>,
    pool: &'r Pool,
    items: &'r [Queued],
    /// The commit each story was squashed as.
    commits: BTreeMap<usize, Oid>,
    /// The story whose `verify` failed, when it is not the member's own.
    other: Option<String>,
}

impl Merger for GitMerger<'_, '_> {
    type Tip = Oid;
    type Error = Error;

    fn squash(&mut self, tip: &Oid, i: usize) -> Result<Result<Oid, Vec<String>>, Error> {
        let (run, pool, q) = (&*self.run, self.pool, &self.items[i]);
        let work = run
            .repo
            .branch_tip(&q.branch)
            .ok_or_else(|| ParallelError::StoryBranchGone { branch: q.branch.clone() })?;
        let skip = [pool.prd_rel.clone(), pool.progress_rel.clone()];
        let tree = match run.repo.squash(*tip, work, &skip)? {
            Ok(tree) => tree,
            Err(files) => return Ok(Err(files)),
        };
        let files = run.bookkeeping(pool, q, *tip, work)?;
        let tree = run.repo.with_files(tree, &files)?;
        let turns = pool.board.turns.get(&q.story).copied().unwrap_or(1);
        let how = match &q.resolved_with {
            Some(with) => format!(", resolved onto {} by a resolver agent", with.join(", ")),
            None => String::new(),
        };
        let message = format!(
            "feat: {} - {}\n\nWorked in its own worktree on {} ({}{how}), then merged by ralph{}.\n\nMerged-by: ralph",
            q.story,
            q.title,
            q.branch,
            crate::text::count(turns as usize, "iteration", "iterations"),
            if run.kit.gate.is_some() { " after the gate passed on the merged tree" } else { "" },
        );
        let commit = run.repo.commit_tree(tree, *tip, &message)?;
        self.commits.insert(i, commit);
        Ok(Ok(commit))
    }

    fn gate(&mut self, tip: &Oid, members: &[usize]) -> Result<Gated, Error> {
        let Some(gate) = self.run.kit.gate.clone() else { return Ok(Gated::Passed) };
        let prd = self.run.good_prd.clone();
        // Each member's own check, and the `verify` of the stories a
        // resolved member was merged against.
        let mut checks: Vec<(Vec<String>, Option<String>)> = Vec::new();
        for &m in members {
            let q = &self.items[m];
            let own = prd.story(&q.story).and_then(|s| self.run.gate_command(s));
            let others = q.resolved_with.iter().flatten().filter_map(|o| {
                let s = prd.story(o)?;
                s.verify.as_ref()?;
                Some((self.run.gate_command(s)?, Some(o.clone())))
            });
            for check in own.map(|c| (c, None)).into_iter().chain(others) {
                if !checks.iter().any(|(c, _)| *c == check.0) {
                    checks.push(check);
                }
            }
        }
        let last = &self.items[*members.last().expect("a member")];
        Repo::discover(&last.dir)?.checkout_detached(*tip)?;
        let name = match members {
            [_] => plan::slug(&last.story),
            _ => format!("batch-{}-{}", plan::slug(&self.items[members[0]].story), members.len()),
        };
        let log = self.run.kit.log_dir.join(format!("gate-merge-{name}.log"));
        for (cmd, other) in checks {
            let v = gate.run(&cmd, &last.project, Some(&log)).map_err(Error::Gate)?;
            if v.interrupted {
                return Ok(Gated::Interrupted);
            }
            self.run.kit.last_gate_passed = Some(v.passed);
            if !v.passed {
                self.other = other;
                return Ok(Gated::Failed(v.feedback(&cmd)));
            }
        }
        Ok(Gated::Passed)
    }
}
