//! The parallel run's worktrees and branches: made or reused for a story,
//! recovered after a crash, removed when a story merges or the run ends —
//! so none outlive a finished run, and unfinished work stays on its branch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::channel;

use toml::Value;

use super::board::Board;
use super::peers::Peers;
use super::{Pool, Queued, plan, relative_to, worktrees_dir};
use crate::config::keys::Setting;
use crate::driver::ParallelError;
use crate::driver::{End, Run};
use crate::error::Error;
use crate::event::RunOutcome;
use crate::git::Repo;

/// The worktree names a parallel run gives git: `ralph-<story>`.
const PREFIX: &str = "ralph-";

/// The stories given up in an earlier process of this run: they stay given
/// up.
fn given_up_before(board: &Board) -> BTreeMap<String, (plan::GiveUp, String)> {
    let kind = |id: &String| {
        if board.given_up_merging.contains(id) {
            plan::GiveUp::Merge
        } else {
            plan::GiveUp::Blocked
        }
    };
    board.given_up.iter().map(|(id, why)| (id.clone(), (kind(id), why.clone()))).collect()
}

impl Run<'_> {
    pub(super) fn start_pool(&mut self) -> Result<Pool, Error> {
        let branch = self.run_branch()?;
        let top = self.repo.workdir().canonicalize().unwrap_or_else(|_| self.repo.workdir());
        let project_rel = relative_to(&self.paths.project, &top);
        let prd_rel = self.repo.relative(&self.paths.prd).ok_or_else(|| {
            Error::Usage(format!(
                "a parallel run needs prd.json inside the repository; {} is not",
                self.paths.prd.display()
            ))
        })?;
        let progress_rel = prd_rel.with_file_name("progress.txt");
        let settings = self.worker_settings()?;
        let resolver_settings = self.resolver_settings(&settings)?;
        let template = self.worker_template();
        let board = self.board(&branch);
        let (tx, rx) = channel();
        let mut pool = Pool {
            jobs: self.cfg.run.jobs,
            branch: branch.clone(),
            worktrees: worktrees_dir(&self.paths.store),
            project_rel,
            prd_rel,
            progress_rel,
            settings,
            template,
            slots: Vec::new(),
            queue: Default::default(),
            merging: Vec::new(),
            to_resolve: Default::default(),
            resolver_settings,
            given_up: given_up_before(&board),
            not_before: Default::default(),
            tx,
            rx,
            paused: false,
            queue_held: false,
            peers: self.peers(&branch),
            unreachable: false,
            stopped_by: None,
            board,
        };
        // A merge a crash cut short is finished first: before it, the work
        // tree's bookkeeping files are the previous tip's.
        self.recover(&mut pool)?;
        // With a remote, the run branch is the remote's: nothing local to add.
        if pool.peers.owns_branch() {
            self.commit_bookkeeping(&pool.prd_rel, &pool.progress_rel)?;
        }
        pool.save_board(&self.paths.store);
        Ok(pool)
    }

    /// The branch the stories merge into: the one checked out.
    fn run_branch(&self) -> Result<String, Error> {
        self.repo.current_branch().ok_or_else(|| {
            Error::Usage(
                "a parallel run (--jobs) merges into a branch, and HEAD is detached: check out a \
                 branch, or name one in prd.json's branchName"
                    .into(),
            )
        })
    }

    /// parallel.json for this run: this run's as an earlier process left
    /// it, else a new one. What a crash left half-done is finished or
    /// undone whichever run it was: a merge's work tree, a resolution's
    /// story branch.
    fn board(&self, branch: &str) -> Board {
        let old = Board::load(&self.paths.store);
        let mut board = match old.clone() {
            Some(b) if b.run_id == self.state.run_id => b,
            _ => Board::default(),
        };
        board.run_id = self.state.run_id.clone();
        board.branch = branch.to_string();
        board.jobs = self.cfg.run.jobs;
        if let Some(old) = old {
            board.merging = old.merging;
            board.resolving = old.resolving;
        }
        board
    }

    /// Who else works the run: the other machines' workers through the
    /// remote (`ralph worker --remote`), or no one.
    fn peers(&self, branch: &str) -> Box<dyn Peers> {
        match self.opts.mode.remote() {
            Some(w) => Box::new(super::peers::Shared {
                remote: super::remote::Remote::new(
                    w.id.clone(),
                    w.lease,
                    self.repo.workdir(),
                    branch,
                ),
                started: chrono::DateTime::<chrono::Utc>::from(self.clock.started_at),
            }),
            None => Box::new(super::peers::Alone),
        }
    }

    /// Workers start from the run branch's commits: prd.json and
    /// progress.txt as they are now must be among them.
    fn commit_bookkeeping(&mut self, prd_rel: &Path, progress_rel: &Path) -> Result<(), Error> {
        let Some(tip) = self.repo.head() else {
            return Err(Error::Usage(
                "a parallel run needs at least one commit on the run branch".into(),
            ));
        };
        let top = self.repo.workdir();
        let changed: Vec<PathBuf> = [prd_rel, progress_rel]
            .into_iter()
            .filter(|rel| {
                let now = std::fs::read(top.join(rel)).ok();
                now.is_some() && now != self.repo.file_at(tip, rel)
            })
            .map(Path::to_path_buf)
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let refs: Vec<&Path> = changed.iter().map(PathBuf::as_path).collect();
        self.repo
            .commit_paths(&refs, "chore: ralph's bookkeeping, committed for a parallel run")?;
        self.notice(format!(
            "committed {} on the run branch: every worker starts from it",
            changed.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and ")
        ));
        Ok(())
    }

    /// The run's configuration for its workers, as one file: as given, but
    /// for what the run itself keeps for all of them (calls per hour,
    /// budgets, the baseline gate, the end hooks, notifications).
    fn worker_settings(&self) -> Result<PathBuf, Error> {
        let mut layers = self.opts.layers.clone().ok_or(ParallelError::NoLayers)?;
        layers.set(Setting::RunJobs, Value::Integer(1));
        layers.set(Setting::LimitsCallsPerHour, Value::Integer(0));
        layers.set(Setting::GateBaseline, Value::Boolean(false));
        layers.set(Setting::BudgetMaxDuration, Value::String("0".into()));
        layers.set(Setting::BudgetMaxCost, Value::Float(0.0));
        layers.set(Setting::BudgetMaxTokens, Value::Integer(0));
        layers.set(Setting::HooksOnComplete, Value::Array(Vec::new()));
        layers.set(Setting::HooksOnHalt, Value::Array(Vec::new()));
        // The run notifies for its workers; their URLs are secrets, kept
        // out of the file (which would refuse them).
        for &setting in crate::notify::SECRET_KEYS {
            layers.set(setting, Value::String(String::new()));
        }
        layers.set(Setting::NotifyDesktop, Value::Boolean(false));
        let file = self.kit.log_dir.join("worker-settings.toml");
        std::fs::write(&file, layers.document())
            .map_err(|e| Error::io(format!("write {}", file.display()), e))?;
        Ok(file)
    }

    /// The prompt template, by absolute path (workers run elsewhere).
    fn worker_template(&self) -> Option<PathBuf> {
        let cwd = std::env::current_dir().unwrap_or_default();
        let explicit = self.opts.prompt_file.clone().or_else(|| self.cfg.run.prompt.clone());
        match explicit {
            Some(p) => Some(cwd.join(p)),
            None => Some(self.paths.store.prompt()).filter(|p| p.exists()),
        }
    }

    /// After a crash: a merge that moved the run branch is carried into the
    /// work tree; worktrees and branches of stories that pass are removed;
    /// the others are kept, to be reused.
    fn recover(&mut self, pool: &mut Pool) -> Result<(), Error> {
        if let Some(m) = pool.board.merging.take()
            && advance_from_journal(&self.repo, &pool.branch, &m)?
        {
            self.notice(match m.story.as_str() {
                "" => "brought the work tree up to the run branch, as ralph was doing as it died"
                    .to_string(),
                story => format!("finished merging {story}, which ralph merged as it died"),
            });
            // The journal's stories are on the run branch: this run's work.
            for story in &m.stories {
                let sha = if m.stories.len() == 1 { m.to.clone() } else { String::new() };
                pool.board.merged.entry(story.clone()).or_insert(sha);
            }
        }
        self.own_merges(pool);
        // A resolution a crash or a stop cut short: the story's work back
        // on its branch, to be merged (and resolved) again.
        for story in pool.board.resolving.keys().cloned().collect::<Vec<_>>() {
            self.restore_work(pool, &story);
        }
        let prd = self.reload_prd().unwrap_or_else(|| self.good_prd.clone());
        for name in self.repo.worktrees(PREFIX) {
            let slug = &name[PREFIX.len()..];
            let story = prd.stories().iter().find(|s| plan::slug(&s.id) == slug);
            if story.is_none_or(|s| s.passes) {
                self.repo.remove_worktree(&name, &pool.worktrees.join(slug));
                self.repo.delete_branch(&format!("{}--{slug}", pool.branch));
            }
        }
        for s in prd.stories().iter().filter(|s| s.passes) {
            self.repo.delete_branch(&format!("{}--{}", pool.branch, plan::slug(&s.id)));
        }
        remove_strays(&self.repo, &pool.worktrees);
        Ok(())
    }

    /// Stories this run merged before a kill cut it short (the board says
    /// so; the checkpoint may not have yet) are the run's claimed and
    /// verified work, as they were when it merged them.
    fn own_merges(&mut self, pool: &Pool) {
        let gate = self.kit.gate.is_some();
        for (story, sha) in &pool.board.merged {
            if gate && !self.state.verified.contains(story) {
                self.state.note_verified(story, true);
            }
            self.state.note_claimed(story);
            let tally = self.state.stories.entry(story.clone()).or_default();
            if tally.work.commit.is_none() && !sha.is_empty() {
                tally.work.commit = Some(sha.clone());
            }
        }
    }

    /// The story's worktree and branch: the one left by an earlier turn, or
    /// a new one cut from the run branch's tip (on the story's branch, if
    /// an earlier run left one).
    pub(super) fn worktree_for(
        &mut self,
        pool: &Pool,
        id: &str,
    ) -> Result<(PathBuf, String), Error> {
        let slug = plan::slug(id);
        let dir = pool.worktrees.join(&slug);
        let branch = format!("{}--{slug}", pool.branch);
        let reusable = dir.join(".git").exists()
            && Repo::discover(&dir).is_ok_and(|r| {
                r.worktree_ready() && r.current_branch().as_deref() == Some(&branch)
            });
        if !reusable {
            let tip = self
                .repo
                .branch_tip(&pool.branch)
                .ok_or_else(|| ParallelError::RunBranchEmpty { branch: pool.branch.clone() })?;
            // Taking over another machine's story: from what it pushed.
            let pushed = pool.peers.pushed_branch(&self.repo, &branch);
            if let Some(at) = pushed.filter(|_| self.repo.branch_tip(&branch).is_none()) {
                self.repo.set_branch(&branch, at)?;
            }
            self.repo.add_worktree(&format!("{PREFIX}{slug}"), &dir, &branch, tip)?;
        }
        Ok((dir, branch))
    }

    /// At the end: worktrees are kept only for a run that can be resumed;
    /// otherwise unfinished work is committed on its story's branch (kept,
    /// and named) and every worktree is removed.
    pub(super) fn tidy_up(&mut self, pool: &mut Pool, end: &End) {
        if end.outcome == RunOutcome::Interrupted {
            pool.save_board(&self.paths.store);
            return;
        }
        let prd = self.branch_prd(pool);
        for story in pool.board.resolving.keys().cloned().collect::<Vec<_>>() {
            self.restore_work(pool, &story);
        }
        self.put_away_worktrees(&prd, &pool.worktrees, &pool.branch);
        // A work tree that could not follow the last merge: the journal
        // stays for the next ralph to finish it.
        if pool.board.merging.is_some() {
            pool.save_board(&self.paths.store);
        }
    }

    /// A run resumed one story at a time (`--jobs 1`) after a parallel run
    /// of it was cut off: the worktrees and branches that run left are put
    /// away as its end would have (unfinished work kept, named, on its
    /// branch), so none outlives the run.
    pub(in crate::driver) fn put_away_parallel_leftovers(&mut self) {
        let worktrees = worktrees_dir(&self.paths.store);
        let board = Board::load(&self.paths.store);
        if self.repo.worktrees(PREFIX).is_empty() && !worktrees.exists() && board.is_none() {
            return;
        }
        let Some(branch) = board
            .as_ref()
            .map(|b| b.branch.clone())
            .filter(|b| !b.is_empty())
            .or_else(|| self.repo.current_branch())
        else {
            return;
        };
        // A resolution cut short: the story's work back on its branch.
        for (story, kept) in board.iter().flat_map(|b| &b.resolving) {
            let name = format!("{PREFIX}{}", plan::slug(story));
            self.repo.remove_worktree(&name, &worktrees.join(plan::slug(story)));
            if let Some(at) = self.repo.ref_target(kept) {
                let _ = self.repo.set_branch(&format!("{branch}--{}", plan::slug(story)), at);
            }
        }
        let prd = self.reload_prd().unwrap_or_else(|| self.good_prd.clone());
        self.put_away_worktrees(&prd, &worktrees, &branch);
    }

    /// The story branch at `work` changed more than ralph's bookkeeping
    /// (prd.json, progress.txt, `.ralph/`) since it left the run branch.
    fn holds_work(&self, tip: git2::Oid, work: git2::Oid) -> bool {
        let Some(base) = self.repo.merge_base(tip, work) else { return true };
        let own = [&self.paths.prd, &self.paths.progress]
            .map(|p| self.repo.relative(p).unwrap_or_default());
        let ralph = self.repo.relative(&self.paths.project.join(".ralph"));
        let theirs = |p: &Path| {
            !own.iter().any(|o| o == p) && !ralph.as_ref().is_some_and(|r| p.starts_with(r))
        };
        self.repo
            .changed_paths(base, work)
            .map_or(true, |paths| paths.iter().map(Path::new).any(theirs))
    }

    /// Every worktree of the run removed: an unfinished story's work is
    /// committed on its branch, which is kept (and named) when it holds
    /// work the run branch does not; every other story branch goes.
    fn put_away_worktrees(&mut self, prd: &crate::prd::Prd, worktrees: &Path, run_branch: &str) {
        let mut kept = Vec::new();
        for name in self.repo.worktrees(PREFIX) {
            let slug = name[PREFIX.len()..].to_string();
            let dir = worktrees.join(&slug);
            let branch = format!("{run_branch}--{slug}");
            let story = prd.stories().iter().find(|s| plan::slug(&s.id) == slug);
            if let Some(s) = story.filter(|s| !s.passes)
                && let Ok(wt) = Repo::discover(&dir)
                && wt.current_branch().as_deref() == Some(branch.as_str())
            {
                let _ = wt.commit_all(&format!(
                    "wip: {} - unfinished, kept by ralph when the run ended\n\nCommitted-by: ralph",
                    s.id
                ));
            }
            self.repo.remove_worktree(&name, &dir);
            let tip = self.repo.branch_tip(run_branch);
            let work = self.repo.branch_tip(&branch);
            match (tip, work) {
                (Some(t), Some(w))
                    if story.is_some_and(|s| !s.passes)
                        && !self.repo.contains(t, w)
                        && self.holds_work(t, w) =>
                {
                    kept.push(format!("{branch} ({})", story.map(|s| s.id.as_str()).unwrap_or("")));
                }
                _ => self.repo.delete_branch(&branch),
            }
        }
        remove_strays(&self.repo, worktrees);
        let _ = std::fs::remove_dir(worktrees);
        let _ = std::fs::remove_file(Board::path(&self.paths.store));
        if !kept.is_empty() {
            self.notice(format!("unfinished work is kept on {}", kept.join(", ")));
        }
    }
}

/// A run killed while it brought the work tree from one tip of the run
/// branch to the next (after a merge, or after another machine's delivery)
/// left it half-advanced: finished from the journal in parallel.json, before
/// anything moves the branch again (`ralph worker --remote` fast-forwards
/// its clone before the run's setup).
pub fn finish_advance(repo: &Repo, paths: &crate::paths::Paths) -> Result<(), Error> {
    let Some(board) = Board::load(&paths.store) else { return Ok(()) };
    match &board.merging {
        Some(m) => advance_from_journal(repo, &board.branch, m).map(|_| ()),
        None => Ok(()),
    }
}

/// Moves `branch` and the work tree from `from` to `to` (a fast-forward),
/// journalled in parallel.json like every advance of a parallel run, so a
/// kill halfway is finished by [`finish_advance`].
pub fn advance_journalled(
    repo: &Repo,
    paths: &crate::paths::Paths,
    branch: &str,
    from: git2::Oid,
    to: git2::Oid,
) -> Result<(), Error> {
    let mut board = Board::load(&paths.store).unwrap_or_default();
    board.branch = branch.to_string();
    board.merging = Some(super::board::Merging {
        story: String::new(),
        stories: Vec::new(),
        from: from.to_string(),
        to: to.to_string(),
    });
    let write = |b: &Board| {
        crate::store::json_bytes(b)
            .and_then(|bytes| crate::store::write_atomic(&Board::path(&paths.store), &bytes))
            .map_err(|e| Error::io("record the work tree's advance", e))
    };
    paths.store.ensure().map_err(|e| Error::io("create ralph's store", e))?;
    write(&board)?;
    repo.move_branch(branch, from, to)?;
    repo.advance_work_tree(from, to)?;
    board.merging = None;
    write(&board)
}

/// The work tree brought from the journal's `from` to its `to`, if the run
/// branch got there (the move happened before the crash): whether it did.
fn advance_from_journal(
    repo: &Repo,
    branch: &str,
    m: &super::board::Merging,
) -> Result<bool, Error> {
    let (Ok(from), Ok(to)) = (m.from.parse(), m.to.parse()) else { return Ok(false) };
    if !repo.branch_tip(branch).is_some_and(|tip| repo.contains(tip, to)) {
        return Ok(false);
    }
    repo.advance_work_tree(from, to)?;
    Ok(true)
}

/// A kept attempt as a lesson names it: its short id and its ref.
pub(super) fn describe_kept(repo: &Repo, name: &str) -> String {
    match repo.ref_target(name) {
        Some(at) => format!("{at:.7} ({name})"),
        None => name.to_string(),
    }
}

/// Folders in the worktrees' folder that git no longer lists as a
/// worktree: what a crash in the middle of making or removing one left.
fn remove_strays(repo: &Repo, dir: &Path) {
    let known = repo.worktrees(PREFIX);
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = format!("{PREFIX}{}", e.file_name().to_string_lossy());
        if !known.contains(&name) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Pool {
    /// Removes a story's worktree, and its branch with it if `branch`.
    pub(super) fn remove_worktree(&self, repo: &Repo, id: &str, branch: bool) {
        let slug = plan::slug(id);
        repo.remove_worktree(&format!("{PREFIX}{slug}"), &self.worktrees.join(&slug));
        if branch {
            repo.delete_branch(&format!("{}--{slug}", self.branch));
        }
    }

    /// Keeps a sent-back attempt's commit reachable, under refs/ralph/:
    /// its short id, for the lesson.
    pub(super) fn keep_attempt(&self, repo: &Repo, q: &Queued) -> String {
        match self.keep_attempt_ref(repo, q) {
            Some(name) => describe_kept(repo, &name),
            None => "nothing".into(),
        }
    }

    /// Keeps the story branch's tip under `refs/ralph/attempts/<story>/<n>`:
    /// the ref's name.
    pub(super) fn keep_attempt_ref(&self, repo: &Repo, q: &Queued) -> Option<String> {
        let tip = repo.branch_tip(&q.branch)?;
        let n = self.board.sent_back.get(&q.story).copied().unwrap_or(0) + 1;
        let slug = plan::slug(&q.story);
        // Never over another kept attempt: a resolution that failed later is
        // kept beside the work it was made from.
        let name = (0..)
            .map(|k| match k {
                0 => format!("refs/ralph/attempts/{slug}/{n}"),
                k => format!("refs/ralph/attempts/{slug}/{n}.{k}"),
            })
            .find(|name| repo.ref_target(name).is_none_or(|at| at == tip))?;
        repo.keep_ref(&name, tip, "ralph: a sent-back attempt").ok()?;
        Some(name)
    }
}
