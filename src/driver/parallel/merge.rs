//! The merge queue: one story at a time, squashed onto the run branch's
//! tip in memory, with ralph writing prd.json and progress.txt into the
//! result itself, gated on the merged tree in the story's worktree, and
//! only then put on the run branch (a compare-and-swap) and into the main
//! work tree. A conflict or a gate that fails only after merging sends the
//! story back, to be redone from the new tip; the second time it is given
//! up.

use std::path::PathBuf;
use std::time::Instant;

use git2::Oid;

use super::plan::{self, GiveUp};
use super::remote::Delivery;
use super::{Pool, Queued};
use crate::driver::Run;
use crate::error::Error;
use crate::event::{Event, MergeResult};
use crate::git::Repo;
use crate::prd::Prd;

/// What one merge attempt found.
enum Attempt {
    Merged {
        commit: Oid,
        skipped: Vec<String>,
    },
    Conflict(Vec<String>),
    GateFailed(String),
    /// The run branch moved meanwhile (a person committed, another machine
    /// delivered): try again on the new tip.
    Raced,
    /// The remote cannot be reached: the story stays queued, for later.
    Unreachable(String),
    /// The run branch has it passing already (another machine took the
    /// story over and delivered it, or this one's push landed though git
    /// said it failed): nothing to merge twice.
    AlreadyThere,
    /// A signal stopped the gate: the story stays queued.
    Interrupted,
}

impl Run<'_> {
    /// Merges the first queued story, or sends it back.
    pub(super) fn merge_next(&mut self, pool: &mut Pool) -> Result<(), Error> {
        let Some(q) = pool.queue.pop_front() else { return Ok(()) };
        let started = Instant::now();
        let mut attempt = Ok(Attempt::Raced);
        let tries = if pool.remote.is_some() { 50 } else { 5 };
        pool.merging = Some(q.story.clone());
        for _ in 0..tries {
            attempt = self.try_merge(pool, &q);
            if !matches!(attempt, Ok(Attempt::Raced)) {
                break;
            }
        }
        pool.merging = None;
        let attempt = attempt?;
        let ms = started.elapsed().as_millis() as u64;
        match attempt {
            Attempt::Merged { commit, skipped } => {
                let sha = commit.to_string();
                pool.board.merged.insert(q.story.clone(), sha.clone());
                self.state.stories.entry(q.story.clone()).or_default().commit = Some(sha.clone());
                pool.board.merging = None;
                pool.board.queue.retain(|s| s != &q.story);
                pool.save_board(&self.paths.store);
                // A remote delivery released the claim in the same push.
                pool.remove_worktree(&self.repo, &q.story, true);
                // The merge's cost includes tidying up after it.
                let ms = started.elapsed().as_millis() as u64;
                if self.gate.is_some() {
                    self.state.note_verified(&q.story, true);
                }
                self.state.note_claimed(&q.story);
                let message = if self.gate.is_some() { "gated on the merged tree" } else { "" };
                self.reporter.emit(&Event::Merge {
                    story_id: q.story.clone(),
                    result: MergeResult::Merged,
                    commit: Some(sha),
                    files: Vec::new(),
                    duration_ms: ms,
                    message: message.into(),
                });
                if !skipped.is_empty() {
                    self.warn(format!(
                        "left alone in the work tree, changed there since: {} (the run branch has the merged version)",
                        skipped.join(", ")
                    ));
                }
                let _ = self.reload_prd();
            }
            Attempt::Conflict(files) => {
                let lesson = format!(
                    "Your earlier work on {} conflicted with stories merged meanwhile, in: {}. \
                     The story starts again from the run branch's new tip; the earlier attempt \
                     is kept as {} (`git show` it to reuse what still applies).",
                    q.story,
                    files.join(", "),
                    pool.keep_attempt(&self.repo, &q),
                );
                self.send_back(pool, &q, MergeResult::Conflict, files, lesson, ms);
            }
            Attempt::GateFailed(feedback) => {
                let lesson = format!(
                    "Your work on {} passed the gate in its own worktree, but failed it once \
                     merged onto the run branch with the stories merged meanwhile (earlier \
                     attempt kept as {}). The story starts again from the new tip.\n\n{feedback}",
                    q.story,
                    pool.keep_attempt(&self.repo, &q),
                );
                self.send_back(pool, &q, MergeResult::GateFailed, Vec::new(), lesson, ms);
            }
            Attempt::Raced => {
                return Err(Error::Environment {
                    message: format!(
                        "the run branch {} kept moving while ralph merged {}",
                        pool.branch, q.story
                    ),
                    hint: Some("do not commit on the run branch during a parallel run".into()),
                });
            }
            Attempt::Interrupted => pool.queue.push_front(q),
            Attempt::AlreadyThere => {
                pool.board.queue.retain(|s| s != &q.story);
                pool.save_board(&self.paths.store);
                pool.remove_worktree(&self.repo, &q.story, true);
                if let Some(r) = pool.remote.as_mut() {
                    let _ = r.release(&q.story, &q.branch);
                }
                self.notice(format!(
                    "{} passes on the run branch already: not merged again",
                    q.story
                ));
            }
            Attempt::Unreachable(why) => {
                self.remote_unreachable(pool, &why);
                pool.queue.push_front(q);
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        }
        Ok(())
    }

    /// The story passes on the run branch's tip (delivered by another worker).
    pub(super) fn passes_on_tip(&self, pool: &Pool, story: &str) -> bool {
        self.repo
            .branch_tip(&pool.branch)
            .and_then(|tip| self.repo.file_at(tip, &pool.prd_rel))
            .and_then(|b| Prd::parse(&b, &self.paths.prd).ok())
            .is_some_and(|p| p.story(story).is_some_and(|s| s.passes))
    }

    fn try_merge(&mut self, pool: &mut Pool, q: &Queued) -> Result<Attempt, Error> {
        if pool.remote.is_some() {
            // Onto the remote's tip as it is now: a merge onto a tip we
            // could not fetch would only lose the race (after its gate).
            if !self.sync_remote(pool, std::time::Duration::ZERO) {
                return Ok(Attempt::Unreachable("fetch failed".into()));
            }
        }
        let repo = &self.repo;
        let tip = repo.branch_tip(&pool.branch).ok_or_else(|| Error::Environment {
            message: format!("the run branch {} is gone", pool.branch),
            hint: None,
        })?;
        let work = repo.branch_tip(&q.branch).ok_or_else(|| Error::Environment {
            message: format!("the story branch {} is gone", q.branch),
            hint: None,
        })?;
        if self.passes_on_tip(pool, &q.story) {
            return Ok(Attempt::AlreadyThere);
        }
        let skip = [pool.prd_rel.clone(), pool.progress_rel.clone()];
        let tree = match repo.squash(tip, work, &skip)? {
            Ok(tree) => tree,
            Err(files) => return Ok(Attempt::Conflict(files)),
        };
        let files = self.bookkeeping(pool, q, tip, work)?;
        let tree = repo.with_files(tree, &files)?;
        let turns = pool.board.turns.get(&q.story).copied().unwrap_or(1);
        let message = format!(
            "feat: {} - {}\n\nWorked in its own worktree on {} ({}), then merged by ralph{}.\n\nMerged-by: ralph",
            q.story,
            q.title,
            q.branch,
            crate::text::count(turns as usize, "iteration", "iterations"),
            if self.gate.is_some() { " after the gate passed on the merged tree" } else { "" },
        );
        let commit = repo.commit_tree(tree, tip, &message)?;
        if let Some(failed) = self.gate_merged(q, commit)? {
            return Ok(failed);
        }
        pool.board.merging = Some(super::board::Merging {
            story: q.story.clone(),
            from: tip.to_string(),
            to: commit.to_string(),
        });
        pool.save_board_durably(&self.paths.store)?;
        if let Some(r) = pool.remote.as_mut() {
            match r.deliver(&self.repo, commit, &q.story, &q.branch) {
                Ok(Delivery::Landed) => {}
                Ok(Delivery::Raced) => {
                    pool.board.merging = None;
                    return Ok(Attempt::Raced);
                }
                Err(e) => {
                    pool.board.merging = None;
                    return Ok(Attempt::Unreachable(e.message));
                }
            }
        }
        if self.repo.move_branch(&pool.branch, tip, commit).is_err() {
            pool.board.merging = None;
            return Ok(Attempt::Raced);
        }
        let skipped = self.repo.advance_work_tree(tip, commit)?;
        Ok(Attempt::Merged { commit, skipped })
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
        let prd_bytes = repo.file_at(tip, &pool.prd_rel).ok_or_else(|| Error::Environment {
            message: format!("the run branch has no {}", pool.prd_rel.display()),
            hint: None,
        })?;
        let mut prd = Prd::parse(&prd_bytes, &self.paths.prd)?;
        prd.set_passes(&q.story, true);
        let base = repo.merge_base(tip, work).and_then(|b| text(b, &pool.progress_rel));
        // The worktree's copy: an agent's entry may be uncommitted.
        let worker = std::fs::read_to_string(q.dir.join(&pool.progress_rel))
            .ok()
            .or_else(|| text(work, &pool.progress_rel))
            .unwrap_or_default();
        let suffix = plan::progress_suffix(base.as_deref().unwrap_or(""), &worker);
        let progress = plan::append(&text(tip, &pool.progress_rel).unwrap_or_default(), &suffix);
        Ok(vec![
            (pool.prd_rel.clone(), prd.to_json().into_bytes()),
            (pool.progress_rel.clone(), progress.into_bytes()),
        ])
    }

    /// The gate, on the merged tree, in the story's worktree: `None` when it
    /// passed (or there is none).
    fn gate_merged(&mut self, q: &Queued, commit: Oid) -> Result<Option<Attempt>, Error> {
        let Some(gate) = self.gate.clone() else { return Ok(None) };
        let story = self.good_prd.story(&q.story).cloned();
        let Some(cmd) = story.as_ref().and_then(|s| self.gate_command(s)) else { return Ok(None) };
        Repo::discover(&q.dir)?.checkout_detached(commit)?;
        let log = self.log_dir.join(format!("gate-merge-{}.log", plan::slug(&q.story)));
        let v = gate
            .run(&cmd, &q.project, Some(&log))
            .map_err(|e| Error::Environment { message: e.message, hint: Some(e.hint) })?;
        if v.interrupted {
            return Ok(Some(Attempt::Interrupted));
        }
        self.last_gate_passed = Some(v.passed);
        Ok((!v.passed).then(|| Attempt::GateFailed(v.feedback(&cmd))))
    }

    fn send_back(
        &mut self,
        pool: &mut Pool,
        q: &Queued,
        result: MergeResult,
        files: Vec<String>,
        lesson: String,
        ms: u64,
    ) {
        let n = pool.board.sent_back.entry(q.story.clone()).or_insert(0);
        *n += 1;
        let again = *n < 2;
        pool.board.queue.retain(|s| s != &q.story);
        pool.remove_worktree(&self.repo, &q.story, true);
        if let Some(r) = pool.remote.as_mut() {
            // Redone from the new tip, not from the pushed attempt.
            let _ = r.delete_branch(&q.branch);
        }
        let what = match result {
            MergeResult::Conflict => {
                format!("conflicts with the run branch in {}", files.join(", "))
            }
            _ => "fails the gate once merged".to_string(),
        };
        let (result, message) = if again {
            pool.board.feedback.insert(q.story.clone(), lesson.clone());
            (result, format!("{what}: sent back, to be redone from the new tip"))
        } else {
            let why = format!("{what}, for the second time");
            if let Some(r) = pool.remote.as_mut() {
                let _ = r.claim(&self.repo, &q.story, Some(why.clone()));
            }
            pool.given_up.insert(q.story.clone(), (GiveUp::Blocked, why.clone()));
            pool.board.given_up.insert(q.story.clone(), why.clone());
            (MergeResult::Blocked, format!("{why}: given up"))
        };
        pool.save_board(&self.paths.store);
        self.record_lesson(&q.story, &lesson, crate::learn::lessons::Source::Loop);
        self.reporter.emit(&Event::Merge {
            story_id: q.story.clone(),
            result,
            commit: None,
            files,
            duration_ms: ms,
            message,
        });
    }
}
