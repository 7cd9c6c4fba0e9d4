//! Resolving a conflict at the merge queue: the story's worktree made into
//! the resolver's starting point (its branch at the run branch's tip, the
//! story's work on top with git's markers, its earlier work kept under
//! `refs/ralph/attempts/`), a resolver worker started on it, and what its
//! turn came to handed to the merge judge. Also what a story's turns teach
//! the scheduler: the paths they changed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::plan::{self, Turn};
use super::workers::{Job, Slot};
use super::{ParallelError, Pool, Queued};
use crate::config::keys::Setting;
use crate::driver::judge::merge::{MergeGate, Met, judge_merge};
use crate::driver::{End, OtherStory, ResolveSpec, Run};
use crate::error::Error;
use crate::event::Event;
use crate::git::Repo;
use crate::prd::Prd;

/// The two sides of a conflict as its markers name them: the run branch
/// (the stories merged into it since the story's base) and the story.
fn conflict_labels(with: &[String], q: &Queued) -> (String, String) {
    let merged = if with.is_empty() { "its tip".into() } else { with.join(", ") };
    (format!("run branch ({merged})"), format!("{} ({})", q.story, q.title))
}

impl Run<'_> {
    /// Starts a resolver on `q`, whose work conflicts with the tip in
    /// `files`. A story that merges cleanly by now goes back to the queue.
    pub(super) fn start_resolver(
        &mut self,
        pool: &mut Pool,
        q: Queued,
        files: Vec<String>,
    ) -> Result<(), Error> {
        let (dir, branch) = self.worktree_for(pool, &q.story)?;
        let (Some(tip), Some(work)) =
            (self.repo.branch_tip(&pool.branch), self.repo.branch_tip(&branch))
        else {
            return Err(ParallelError::ResolveBranchGone { branch }.into());
        };
        let base = self.repo.merge_base(tip, work).unwrap_or(tip);
        let with = self.stories_merged_since(pool, base, tip, &files);
        let labels = conflict_labels(&with, &q);
        let skip = [pool.prd_rel.clone(), pool.progress_rel.clone()];
        let Some(conflict) =
            self.repo.squash_with_markers(tip, work, &skip, (&labels.0, &labels.1))?
        else {
            pool.queue.push_front(q);
            return Ok(());
        };
        // The work as it was, before the worktree is reset: a failed
        // resolution, a crash or a stop puts the branch back there.
        let kept = pool
            .keep_attempt_ref(&self.repo, &q)
            .ok_or_else(|| ParallelError::NothingToKeep { branch: branch.clone() })?;
        let progress_rel = pool.progress_rel.clone();
        let text = |oid| {
            self.repo.file_at(oid, &progress_rel).map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        let entry = self.progress_entry(pool, &q, text(base).as_deref().unwrap_or(""), work);
        pool.board.resolving.insert(q.story.clone(), kept);
        pool.save_board_durably(&self.paths.store)?;
        Repo::discover(&dir)?.start_resolution(&branch, tip, conflict.tree)?;
        // The resolution is committed with the story's mark and progress
        // entry, as its turn left them, so the merge writes them as for any
        // story. A crash before the run took the resolver's end undoes the
        // resolution (`recover` puts the kept work back): it is made again.
        let progress = plan::append(&text(tip).unwrap_or_default(), &entry);
        self.mark_resolution(pool, &q.story, &dir, tip, progress)?;
        let spec = ResolveSpec {
            story: q.story.clone(),
            branch: pool.branch.clone(),
            others: with.iter().filter_map(|id| self.other_story(id)).collect(),
            files: conflict.files.clone(),
            hunks: conflict.hunks,
        };
        let file = self.write_resolver_task(pool, &spec)?;
        let story = self
            .good_prd
            .story(&q.story)
            .cloned()
            .ok_or_else(|| ParallelError::NotAStory { story: q.story.clone() })?;
        let job = Job::Resolve { with, files: conflict.files, spec: file };
        let slot = pool.slot(&story, dir, branch, job);
        self.launch(pool, slot, None, None)
    }

    /// The worktree's progress.txt (`progress`: the tip's with the story's
    /// entry) and prd.json (the tip's, the story marked passing), written
    /// as the story's turn left them.
    fn mark_resolution(
        &self,
        pool: &Pool,
        story: &str,
        dir: &std::path::Path,
        tip: git2::Oid,
        progress: String,
    ) -> Result<(), Error> {
        std::fs::write(dir.join(&pool.progress_rel), progress)
            .map_err(|e| Error::io("write the worktree's progress.txt", e))?;
        let mut prd = match self.repo.file_at(tip, &pool.prd_rel) {
            Some(b) => Prd::parse(&b, &self.paths.prd)?,
            None => self.good_prd.clone(),
        };
        prd.set_passes(story, true);
        prd.save(&dir.join(&pool.prd_rel))
            .map_err(|e| Error::io("write the worktree's prd.json", e))
    }

    /// The resolver's task, written in the run's log folder as
    /// `resolve-<story>-<n>.json` (`n`: the story's how-manieth time back).
    fn write_resolver_task(&self, pool: &Pool, spec: &ResolveSpec) -> Result<PathBuf, Error> {
        let n = pool.board.sent_back.get(&spec.story).copied().unwrap_or(0) + 1;
        let file = self.kit.log_dir.join(format!("resolve-{}-{n}.json", plan::slug(&spec.story)));
        let json = serde_json::to_vec_pretty(spec)
            .map_err(|e| Error::io("write a resolver's task", std::io::Error::other(e)))?;
        std::fs::write(&file, json).map_err(|e| Error::io("write a resolver's task", e))?;
        Ok(file)
    }

    /// A resolver's turn ended: resolved, the story is merged next (gated on
    /// the merged tree with every story's `verify`); not resolved, the merge
    /// judge decides between a redo and giving up; stopped or limited, the
    /// story's work goes back on its branch, to be resolved again.
    pub(super) fn resolver_exited(
        &mut self,
        pool: &mut Pool,
        slot: Slot,
        turn: Turn,
        message: String,
    ) -> Option<End> {
        let Job::Resolve { with, files, .. } = slot.job.clone() else { return None };
        use crate::event::WorkerOutcome as W;
        let outcome = match &turn {
            Turn::Passed => W::Resolved,
            Turn::GiveUp(_) => W::NotResolved,
            Turn::UsageLimit => W::UsageLimit,
            Turn::Again | Turn::Busy => W::ResolveAgain,
            Turn::Stopped => W::Stopped,
            Turn::Fatal(_) => W::Failed,
        };
        self.reporter.emit(&Event::WorkerEnd {
            worker: slot.no,
            story_id: slot.story.clone(),
            outcome,
            message: message.clone(),
        });
        let q = Queued::of(&slot);
        let end = match turn {
            Turn::Passed => {
                pool.board.resolving.remove(&q.story);
                pool.board.resolve_retries.remove(&q.story);
                pool.board.resolved_with.insert(q.story.clone(), with.clone());
                pool.queue.push_front(Queued { resolved_with: Some(with), ..q });
                None
            }
            Turn::GiveUp(_) => {
                let why = message.lines().next().unwrap_or("").to_string();
                let facts = self.merge_facts(pool, &q, Met::ResolveFailed(why), MergeGate::NotRun);
                let j = judge_merge(&facts);
                self.carry_out_merge(pool, q, &j, None, files, 0);
                None
            }
            Turn::UsageLimit | Turn::Again | Turn::Busy => {
                let wait = self.resolve_later(pool, &slot, &turn);
                self.restore_work(pool, &q.story);
                pool.not_before.insert(q.story.clone(), Instant::now() + wait);
                pool.to_resolve.push_back((q, files));
                None
            }
            Turn::Stopped => {
                self.restore_work(pool, &q.story);
                None
            }
            Turn::Fatal(outcome) => {
                self.restore_work(pool, &q.story);
                Some(End::new(outcome, format!("worker {} ({}): {message}", slot.no, slot.story)))
            }
        };
        pool.save_board(&self.paths.store);
        end
    }

    /// How long a resolution that could not be made now waits: a usage
    /// limit of the run's own agent pauses every worker (and the resolution
    /// with them); one of a separate `merge.resolver` holds only the
    /// resolutions, until it resets; an API error backs off, longer each
    /// time, so a story never cycles its resolver at once.
    fn resolve_later(&mut self, pool: &mut Pool, slot: &Slot, turn: &Turn) -> Duration {
        let own = self.cfg.merge.resolver.is_none_or(|t| t == self.cfg.agent.tool);
        if *turn == Turn::UsageLimit && own {
            self.share_usage_limit(pool, slot, slot.no);
            return Duration::ZERO;
        }
        if *turn == Turn::UsageLimit {
            let store = crate::store::Store::for_project(&slot.project, &slot.prd);
            let now = chrono::Utc::now();
            let until =
                crate::limits::Limits::load(&store).ok().and_then(|(l, _)| l.usage_hold(now));
            let wait = until.and_then(|t| (t - now).to_std().ok());
            let wait = wait.unwrap_or(self.cfg.limits.usage_limit_wait);
            self.notice(format!(
                "usage limit of the resolver agent: {}'s resolution waits {}",
                slot.story,
                crate::ui::countdown(wait.as_secs())
            ));
            return wait;
        }
        let tries = pool.board.resolve_retries.entry(slot.story.clone()).or_insert(0);
        *tries += 1;
        Duration::from_secs(10)
            .saturating_mul(1 << (*tries - 1).min(5))
            .min(Duration::from_secs(300))
    }

    /// A story's branch back at the work kept before its resolution
    /// started, its worktree removed (made again from the branch).
    pub(super) fn restore_work(&mut self, pool: &mut Pool, story: &str) {
        let Some(name) = pool.board.resolving.remove(story) else { return };
        let Some(at) = self.repo.ref_target(&name) else { return };
        pool.remove_worktree(&self.repo, story, false);
        let branch = format!("{}--{}", pool.branch, plan::slug(story));
        if let Err(e) = self.repo.set_branch(&branch, at) {
            self.warn(format!("cannot put {story}'s work back on {branch}: {}", e.message));
        }
    }

    /// The paths a story's branch changed since it forked from the run
    /// branch: it touches them (ralph's own files aside).
    pub(super) fn learn_paths(&mut self, pool: &mut Pool, slot: &Slot) {
        let (Some(tip), Some(work)) =
            (self.repo.branch_tip(&pool.branch), self.repo.branch_tip(&slot.branch))
        else {
            return;
        };
        let Some(base) = self.repo.merge_base(tip, work) else { return };
        if let Ok(paths) = self.repo.changed_paths(base, work) {
            let theirs: Vec<String> = paths.into_iter().filter(|p| !pool.is_ralphs(p)).collect();
            pool.board.learn(&slot.story, theirs);
        }
    }

    /// The stories merged onto the run branch after `base` whose commits
    /// changed any of `files`: the ones a conflict is with.
    fn stories_merged_since(
        &self,
        pool: &Pool,
        base: git2::Oid,
        tip: git2::Oid,
        files: &[String],
    ) -> Vec<String> {
        let mut with: Vec<String> = pool
            .board
            .merged
            .iter()
            .filter_map(|(story, sha)| {
                let commit: git2::Oid = sha.parse().ok()?;
                let new = self.repo.contains(tip, commit) && !self.repo.contains(base, commit);
                let parent = self.repo.first_parent(commit)?;
                let changed = self.repo.changed_paths(parent, commit).ok()?;
                (new && changed.iter().any(|c| files.contains(c))).then(|| story.clone())
            })
            .collect();
        with.sort();
        with
    }

    /// A story on the branch, as a resolver is told of it.
    fn other_story(&self, id: &str) -> Option<OtherStory> {
        let s = self.good_prd.story(id)?;
        Some(OtherStory {
            id: s.id.clone(),
            title: s.title.clone(),
            criteria: s.acceptance_criteria.clone(),
        })
    }

    /// The settings resolvers run with when `merge.resolver` names another
    /// agent than the run's: the workers' settings with that agent.
    pub(super) fn resolver_settings(
        &self,
        workers: &std::path::Path,
    ) -> Result<Option<PathBuf>, Error> {
        let Some(tool) = self.cfg.merge.resolver.filter(|t| *t != self.cfg.agent.tool) else {
            return Ok(None);
        };
        let mut layers = crate::config::Layers::load(None, workers, &|_| None)?;
        layers.set(Setting::AgentTool, toml::Value::String(tool.to_string()));
        layers.set(Setting::AgentCommand, toml::Value::Array(Vec::new()));
        layers.set(Setting::AgentArgs, toml::Value::Array(Vec::new()));
        layers.set(Setting::AgentModel, toml::Value::String(String::new()));
        layers.set(Setting::AgentFallback, toml::Value::Array(Vec::new()));
        let file = self.kit.log_dir.join("resolver-settings.toml");
        std::fs::write(&file, layers.document())
            .map_err(|e| Error::io(format!("write {}", file.display()), e))?;
        Ok(Some(file))
    }
}
