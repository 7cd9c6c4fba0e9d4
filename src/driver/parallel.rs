//! `--jobs N`: N stories at once, each worked by a worker process
//! (`ralph __worker`, the ordinary loop held to one story and one
//! iteration per turn) in its own git worktree on its own branch, cut from
//! the run branch's tip. This module schedules them and owns the run
//! branch: only it writes there, through the merge queue.
//!
//! ```text
//! parallel.rs the loop: start workers and resolvers, end the run
//! plan.rs     pure: a worker's run_end → Turn, what starts next and what waits, waves, stuck
//! turns.rs    the workers' events and what each turn's end comes to
//! workers.rs  a worker process and the thread that reads its events
//! merge.rs    the merge queue: batches, bookkeeping, gate on the merged tree, CAS, verdicts
//! batch.rs    pure: batch, then bisect, over a Merger
//! resolve.rs  resolvers prepared, their turns judged; paths learnt
//! board.rs    parallel.json: workers, queue, given up, learnt paths, journals
//! error.rs    what stops the run that no turn can fix
//! tidy.rs     worktrees: made, reused, recovered after a crash, removed at the end
//! peers.rs    who else works the run: Alone, or Shared through the git remote
//! sync.rs     keeping up with them: looking, following deliveries, claiming
//! remote.rs   `ralph worker --remote`: claims, leases and delivery through the git remote
//! ```

mod batch;
mod board;
mod error;
mod merge;
mod peers;
mod plan;
mod remote;
mod remote_view;
mod resolve;
mod sync;
mod tidy;
mod turns;
mod workers;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use chrono::Utc;

pub use board::Board;
pub use error::ParallelError;
use peers::Peers;
use plan::GiveUp;
pub use plan::{Overlap, waves};
pub use remote_view::{RemoteRun, StoryState, remote_runs};
pub use tidy::{advance_journalled, finish_advance};
use workers::{Job, Msg, Slot};

use super::{End, Run};
use crate::error::Error;
use crate::event::{Event, RunOutcome};
use crate::learn::lessons;
use crate::limits::Wait;
use crate::prd::{Footprint, Prd};
use crate::process::Signal;

/// A story whose worker finished with it passing, waiting to be merged.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    pub story: String,
    pub title: String,
    pub dir: PathBuf,
    pub project: PathBuf,
    pub branch: String,
    /// A resolver merged it onto the tip, against these stories.
    pub resolved_with: Option<Vec<String>>,
    /// progress.txt as its worker left it in the worktree (its entry may be
    /// uncommitted): read once, since a gate on a merged tree checks other
    /// commits out there.
    pub progress: Option<String>,
}

impl Queued {
    /// The story a worker's slot worked, for the merge queue.
    fn of(slot: &Slot) -> Queued {
        Queued {
            story: slot.story.clone(),
            title: slot.title.clone(),
            dir: slot.dir.clone(),
            project: slot.project.clone(),
            branch: slot.branch.clone(),
            resolved_with: None,
            progress: std::fs::read_to_string(slot.prd.with_file_name("progress.txt")).ok(),
        }
    }
}

/// What the parallel run holds between turns.
pub(super) struct Pool {
    jobs: u32,
    /// The run branch.
    branch: String,
    /// Where the worktrees live: `.git/ralph/worktrees/`.
    worktrees: PathBuf,
    /// The project folder, prd.json and progress.txt, relative to the
    /// repository's top (the same in every worktree).
    project_rel: PathBuf,
    prd_rel: PathBuf,
    progress_rel: PathBuf,
    settings: PathBuf,
    template: Option<PathBuf>,
    slots: Vec<Slot>,
    queue: VecDeque<Queued>,
    /// The stories being merged (out of the queue meanwhile).
    merging: Vec<String>,
    /// Stories whose work conflicts with the tip, waiting for a worker to
    /// run their resolver, with the files that conflict.
    to_resolve: VecDeque<(Queued, Vec<String>)>,
    /// The settings resolvers run with, when `merge.resolver` names
    /// another agent than the run's.
    resolver_settings: Option<PathBuf>,
    board: Board,
    given_up: BTreeMap<String, (GiveUp, String)>,
    /// Stories whose worktree another ralph still holds, and when to try again.
    not_before: BTreeMap<String, Instant>,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    /// A limit pauses the workers: said once.
    paused: bool,
    /// Every queued story waits for a resolver at work on its files.
    queue_held: bool,
    /// The other workers of the run: none, or other machines' through the
    /// git remote.
    peers: Box<dyn Peers>,
    /// The remote could not be reached: said once until it can again.
    unreachable: bool,
    /// Another worker stopped the run (the shared state says so): this
    /// one stops too, for the same reason.
    stopped_by: Option<End>,
}

/// What became of starting a worker on a story.
enum Start {
    Started,
    /// Another machine claimed the story first.
    Lost,
    Unreachable,
}

impl Pool {
    /// Stories not to start now: this machine's and, with a remote, the
    /// ones other workers hold or gave up.
    fn busy(&self) -> Vec<String> {
        let mut busy = self.busy_here();
        busy.extend(self.peers.taken(Utc::now()));
        busy
    }

    /// Stories at work, queued, given up or waiting here.
    fn busy_here(&self) -> Vec<String> {
        let mut busy: Vec<String> = self.slots.iter().map(|s| s.story.clone()).collect();
        busy.extend(self.in_flight());
        busy.extend(self.given_up.keys().cloned());
        let now = Instant::now();
        busy.extend(self.not_before.iter().filter(|(_, t)| **t > now).map(|(s, _)| s.clone()));
        busy
    }

    /// Stories at work in a worker, queued, being merged or resolved: what
    /// a story that touches the same paths waits for.
    fn in_flight(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.queue.iter().map(|q| q.story.clone()).collect();
        ids.extend(self.to_resolve.iter().map(|(q, _)| q.story.clone()));
        ids.extend(self.merging.iter().cloned());
        ids.extend(self.slots.iter().map(|s| s.story.clone()));
        ids.sort();
        ids.dedup();
        ids
    }

    /// Each story's predicted paths: what prd.json declares, what its
    /// earlier attempts changed and where they conflicted.
    fn footprints(&self, prd: &Prd) -> BTreeMap<String, Footprint> {
        footprints(prd.stories(), &self.board)
    }

    fn save_board(&mut self, store: &crate::store::Store) {
        self.sync_board();
        let _ = self.board.save(store);
    }

    /// Before the run branch moves: on disk for certain.
    fn save_board_durably(&mut self, store: &crate::store::Store) -> Result<(), Error> {
        self.sync_board();
        let bytes =
            crate::store::json_bytes(&self.board).map_err(|e| Error::io("record the merge", e))?;
        crate::store::write_atomic(&Board::path(store), &bytes)
            .map_err(|e| Error::io("record the merge", e))
    }

    fn sync_board(&mut self) {
        self.board.workers = self
            .slots
            .iter()
            .map(|s| board::BoardWorker {
                worker: s.no,
                story: s.story.clone(),
                branch: s.branch.clone(),
                worktree: s.dir.display().to_string(),
                pid: s.pid,
                since: s.since,
            })
            .collect();
        self.board.queue = self.queue.iter().map(|q| q.story.clone()).collect();
        self.board.resolving_now =
            self.slots.iter().filter(|s| s.job != Job::Story).map(|s| s.story.clone()).collect();
        self.board.to_resolve = self.to_resolve.iter().map(|(q, _)| q.story.clone()).collect();
    }

    /// The branch a story is worked on: `<run branch>--<story slug>`.
    fn story_branch(&self, id: &str) -> String {
        format!("{}--{}", self.branch, plan::slug(id))
    }

    /// Releases a story just claimed that is not to be worked.
    fn let_go(&mut self, id: &str) {
        let branch = self.story_branch(id);
        self.peers.release(id, &branch);
    }

    /// A path (relative to the repository's top) that is ralph's
    /// bookkeeping, not a story's work: prd.json, progress.txt, `.ralph/`,
    /// `.last-branch`. Every story changes these; none is a sign of overlap.
    fn is_ralphs(&self, path: &str) -> bool {
        let path = Path::new(path);
        let own = self.project_rel.join(".ralph");
        path == self.prd_rel
            || path == self.progress_rel
            || path == self.project_rel.join(".last-branch")
            || path.starts_with(&own)
            || path.starts_with(".ralph")
    }

    /// A worker's slot for `story` in `dir`, on `branch`, not yet started.
    fn slot(&self, story: &crate::prd::Story, dir: PathBuf, branch: String, job: Job) -> Slot {
        Slot {
            no: self.free_worker_no(),
            story: story.id.clone(),
            title: story.title.clone(),
            prd: dir.join(&self.prd_rel),
            project: dir.join(&self.project_rel),
            dir,
            branch,
            pid: 0,
            since: Utc::now(),
            end: None,
            job,
        }
    }

    /// The first story waiting for its resolver whose files no running
    /// resolver has and no story in the merge queue touches: resolutions
    /// of one file run one after the other, each on the tip the stories
    /// before it merged.
    fn next_to_resolve(&self, prd: &Prd) -> Option<usize> {
        let fp = self.footprints(prd);
        let mut busy: Vec<Footprint> =
            self.resolving_files().into_iter().map(|f| Footprint::new(&f, &[])).collect();
        let queued = self.queue.iter().map(|q| &q.story).chain(&self.merging);
        busy.extend(queued.filter_map(|id| fp.get(id).cloned()));
        let now = Instant::now();
        self.to_resolve.iter().position(|(q, files)| {
            let mine = Footprint::new(files, &[]);
            let later = self.not_before.get(&q.story).is_some_and(|t| *t > now);
            !later && busy.iter().all(|b| mine.overlap(b).is_none())
        })
    }

    /// The files of each resolver at work: a queued story that touches
    /// them waits for its resolution to merge first.
    fn resolving_files(&self) -> Vec<Vec<String>> {
        self.slots
            .iter()
            .filter_map(|s| match &s.job {
                Job::Resolve { files, .. } => Some(files.clone()),
                Job::Story => None,
            })
            .collect()
    }

    fn free_worker_no(&self) -> u32 {
        (1..).find(|n| !self.slots.iter().any(|s| s.no == *n)).unwrap_or(1)
    }
}

impl Run<'_> {
    /// The parallel run, from its first worker to its end; every worker has
    /// ended when it returns.
    pub(super) fn parallel_loop(&mut self) -> End {
        let mut pool = match self.start_pool() {
            Ok(pool) => pool,
            Err(e) => return End::error(&e),
        };
        let end = self.drive(&mut pool);
        // A stop that is the whole run's is the other machines' too.
        let whole_run = matches!(end.outcome, RunOutcome::Budget | RunOutcome::CircuitOpen);
        if whole_run
            && pool.stopped_by.is_none()
            && let Err(e) = pool.peers.share_stop(&self.repo, end.outcome, &end.message)
        {
            self.notice(format!(
                "cannot tell the other workers why this one stopped: {}",
                e.message
            ));
        }
        let end = self.stop_workers(&mut pool, end);
        self.tidy_up(&mut pool, &end);
        end
    }

    fn drive(&mut self, pool: &mut Pool) -> End {
        match self.before_the_first_turn() {
            Ok(set_aside) => {
                for (id, why) in set_aside {
                    pool.given_up.insert(id, (GiveUp::ProvesNothing, why));
                }
            }
            Err(end) => return end,
        }
        loop {
            if let Some(signal) = crate::signals::pending() {
                return End::interrupted(signal);
            }
            if let Some(end) = self.still_ours() {
                return end;
            }
            // A worker with nothing to do waits on the others' deliveries:
            // it looks more often, to start (or end) as soon as they land.
            let waiting_on_others = pool.slots.is_empty() && pool.queue.is_empty();
            let every = if waiting_on_others { 250 } else { 1000 };
            self.sync_peers(pool, Duration::from_millis(every));
            if let Some(end) = pool.stopped_by.clone() {
                return end;
            }
            // Nothing to merge (or only stories waiting for a resolver):
            // wait for the workers rather than spin.
            let idle = (pool.queue.is_empty() || pool.queue_held) && !pool.slots.is_empty();
            let wait = if idle { Duration::from_millis(200) } else { Duration::ZERO };
            if let Some(end) = self.pump(pool, wait) {
                return end;
            }
            let prd = self.branch_prd(pool);
            // Free workers start before the queue is merged: a merge (and
            // its gate) must not keep an agent waiting.
            if let Some(end) = self.over_budget() {
                return end;
            }
            match self.start_workers(pool, &prd) {
                Ok(Some(end)) => return end,
                Ok(None) => {}
                Err(e) => return End::error(&e),
            }
            if !pool.queue.is_empty() {
                match self.merge_next(pool) {
                    Ok(merged) => pool.queue_held = !merged,
                    Err(e) => return End::error(&e),
                }
                // Merges that keep failing stop the run like any stuck one.
                if self.breaker.is_open() {
                    return self.breaker_open();
                }
                if !pool.queue_held {
                    continue;
                }
            }
            if pool.slots.is_empty() {
                if let Some(end) = self.done(&prd) {
                    return end;
                }
                // Other machines' stories may yet pass (or be given up, or
                // be left to take over): a remote worker waits for them.
                let others = pool.peers.others_at_work(Utc::now());
                if let Some((outcome, message)) = plan::stuck(&prd, &pool.given_up)
                    && !others
                {
                    return End::new(outcome, message);
                }
                if let Some(end) = self.iterations_used(&prd) {
                    return end;
                }
            }
            let waiting = !pool.not_before.is_empty() || pool.peers.expects_deliveries();
            if pool.slots.is_empty() && pool.queue.is_empty() && waiting {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// prd.json as the run branch's tip has it: in a parallel run only
    /// ralph writes the branch, so that is where the stories stand (the
    /// work tree's copy may lag behind, or hold a person's edit that no
    /// merge carries). The work tree's copy when the tip has none.
    fn branch_prd(&mut self, pool: &Pool) -> Prd {
        let tip = self.repo.branch_tip(&pool.branch);
        let bytes = tip.and_then(|t| self.repo.file_at(t, &pool.prd_rel));
        match bytes.and_then(|b| Prd::parse(&b, &self.paths.prd).ok()) {
            Some(prd) => {
                self.good_prd = prd.clone();
                prd
            }
            None => self.reload_prd().unwrap_or_else(|| self.good_prd.clone()),
        }
    }

    /// Starts workers while there is room, iterations and calls are left,
    /// no limit pauses them, and a story can start.
    fn start_workers(&mut self, pool: &mut Pool, prd: &Prd) -> Result<Option<End>, Error> {
        while (pool.slots.len() as u32) < pool.jobs {
            if self.state.iteration + pool.slots.len() as u32 >= self.state.max_iterations {
                return Ok(None);
            }
            // A story waiting for its resolver goes first: stories that
            // touch its files wait on it.
            let resolve = pool.next_to_resolve(prd);
            let story = match resolve {
                Some(_) => None,
                None => match self.next_story(pool, prd) {
                    Some(story) => Some(story),
                    None => return Ok(None),
                },
            };
            let max_wait =
                if self.cfg.limits.wait { self.cfg.limits.max_wait } else { Duration::ZERO };
            match self.limits.wait(Utc::now(), None, self.cfg.limits.calls_per_hour, max_wait) {
                Wait::Ready => pool.paused = false,
                // With nobody at work the run waits here, with a countdown
                // (or stops, for a wait too long).
                _ if pool.slots.is_empty() => {
                    if let Some(end) = self.wait_for_limits() {
                        return Ok(Some(end));
                    }
                    continue;
                }
                _ => {
                    if !pool.paused {
                        pool.paused = true;
                        self.notice("a limit pauses the workers: no agent starts until it resets");
                    }
                    return Ok(None);
                }
            }
            let Some(story) = story else {
                let (q, files) = pool.to_resolve.remove(resolve.unwrap_or(0)).expect("a story");
                self.start_resolver(pool, q, files)?;
                continue;
            };
            match self.start_worker(pool, &story)? {
                Start::Started => {}
                // Another machine claimed it first: the next story, at once
                // (the workers that lost the race must not wait a fetch each).
                Start::Lost => continue,
                Start::Unreachable => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The story the next worker starts on: the best one that can start
    /// and touches nothing a story in flight touches.
    fn next_story(&self, pool: &mut Pool, prd: &Prd) -> Option<crate::prd::Story> {
        let busy = pool.busy();
        let at_work = pool.in_flight();
        let fp = pool.footprints(prd);
        let (runnable, _) = plan::schedule(prd.stories(), &busy, &at_work, &fp, usize::MAX);
        // Workers started together spread their first claims over the
        // stories as the PRD lists them, claims aside: the same list on
        // every worker.
        let here = pool.busy_here();
        let (all, _) = plan::schedule(prd.stories(), &here, &at_work, &fp, usize::MAX);
        let pick = match pool.peers.first_pick(all.len()) {
            Some(i) => {
                let want = all.get(i);
                want.and_then(|w| runnable.iter().position(|s| s.id == w.id)).unwrap_or(0)
            }
            None => 0,
        };
        runnable.get(pick).map(|s| (*s).clone())
    }

    /// Starts a worker on `story`, unless another machine claimed it first
    /// or the remote cannot be reached.
    fn start_worker(&mut self, pool: &mut Pool, story: &crate::prd::Story) -> Result<Start, Error> {
        let started = Instant::now();
        match self.claim_to_start(pool, &story.id) {
            Ok(true) => {}
            Ok(false) => {
                pool.not_before.insert(story.id.clone(), Instant::now() + Duration::from_secs(2));
                return Ok(Start::Lost);
            }
            Err(e) => {
                self.remote_unreachable(pool, &e.message);
                return Ok(Start::Unreachable);
            }
        }
        // What claiming cost, where it costs a push.
        let claim_ms = (!pool.peers.owns_branch()).then(|| started.elapsed().as_millis() as u64);
        let (dir, branch) = self.worktree_for(pool, &story.id)?;
        let turns = pool.board.turns.entry(story.id.clone()).or_insert(0);
        *turns += 1;
        let slug = plan::slug(&story.id);
        let feedback = match pool.board.feedback.get(&story.id) {
            Some(text) => {
                let f = self.kit.log_dir.join(format!("feedback-{slug}.md"));
                std::fs::write(&f, text).map_err(|e| Error::io("write a worker's feedback", e))?;
                Some(f)
            }
            None => None,
        };
        let slot = pool.slot(story, dir, branch, Job::Story);
        // Each turn starts with what earlier turns of the story learned,
        // in this worktree or one removed since (but the feedback, which
        // the worker is given as it is). Carrying twice changes nothing.
        let worktree = crate::store::Store::for_project(&slot.project, &slot.prd);
        let except = pool.board.feedback.get(&story.id).map(String::as_str);
        if let Err(e) = lessons::carry(&self.paths.store, &worktree, &story.id, except) {
            self.warn(format!("cannot hand {} its lessons: {e}", story.id));
        }
        // An agent killed while writing its copy of prd.json (kill -9 of the
        // run) leaves it half-written: ralph's own copy stands in for it.
        if crate::prd::Prd::load(&slot.prd).is_err() {
            self.good_prd
                .save(&slot.prd)
                .map_err(|e| Error::io("restore a worktree's prd.json", e))?;
            self.notice(format!(
                "{}: the worktree's prd.json was damaged; ralph's copy restored",
                story.id
            ));
        }
        self.launch(pool, slot, feedback.as_deref(), claim_ms)?;
        Ok(Start::Started)
    }

    /// Starts a worker process for `slot` and puts it to work.
    fn launch(
        &mut self,
        pool: &mut Pool,
        mut slot: Slot,
        feedback: Option<&Path>,
        claim_ms: Option<u64>,
    ) -> Result<(), Error> {
        let slug = plan::slug(&slot.story);
        let stderr = self.kit.log_dir.join(format!("worker-{slug}.stderr"));
        let spec = workers::Spawn {
            settings: &pool.settings,
            log_dir: &self.kit.log_dir,
            template: pool.template.as_deref(),
            resolver_settings: pool.resolver_settings.as_deref(),
        };
        slot.pid = workers::spawn(&slot, &spec, feedback, &stderr, pool.tx.clone())
            .map_err(|e| Error::io("start a worker", e))?;
        crate::process::keep_out_of_sweeps(slot.pid);
        if self.cfg.limits.calls_per_hour > 0 {
            self.limits.record_call(Utc::now());
            let _ = self.limits.save(&self.paths.store);
        }
        self.reporter.emit(&Event::WorkerStart {
            worker: slot.no,
            story_id: slot.story.clone(),
            story_title: slot.title.clone(),
            branch: slot.branch.clone(),
            worktree: slot.dir.display().to_string(),
            attempt: pool.board.sent_back.get(&slot.story).copied().unwrap_or(0) + 1,
            claim_ms,
        });
        pool.slots.push(slot);
        pool.save_board(&self.paths.store);
        Ok(())
    }

    /// Hands on what the workers report, for up to `wait`.
    fn pump(&mut self, pool: &mut Pool, wait: Duration) -> Option<End> {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let msg = if left.is_zero() {
                pool.rx.try_recv().ok()
            } else {
                pool.rx.recv_timeout(left).ok()
            };
            let msg = msg?;
            match msg {
                Msg::Event(no, event) => self.worker_event(pool, no, *event),
                Msg::Exited(no, code) => {
                    if let Some(end) = self.worker_exited(pool, no, code) {
                        return Some(end);
                    }
                    // One ended: let the loop start the next before reading on.
                    return None;
                }
            }
        }
    }

    /// Ends every worker: the signal that stopped the run (or SIGTERM)
    /// first, so each stops its agent and keeps its story resumable; KILL
    /// for one that does not end within twice the grace period.
    fn stop_workers(&mut self, pool: &mut Pool, end: End) -> End {
        if pool.slots.is_empty() {
            return end;
        }
        let signal = crate::signals::pending().unwrap_or(Signal::Term);
        for s in &pool.slots {
            workers::signal(s, signal);
        }
        let until = Instant::now() + self.cfg.agent.grace * 2 + Duration::from_secs(5);
        let mut seen = crate::signals::count();
        while !pool.slots.is_empty() && Instant::now() < until {
            if crate::signals::count() != seen {
                // Ctrl-C again: on to the workers, which then kill their agents at once.
                seen = crate::signals::count();
                pool.slots.iter().for_each(|s| workers::signal(s, signal));
            }
            match pool.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Msg::Event(no, e)) => self.worker_event(pool, no, *e),
                Ok(Msg::Exited(no, code)) => {
                    let _ = self.worker_exited(pool, no, code);
                }
                Err(_) => {}
            }
        }
        for s in &pool.slots {
            workers::signal(s, Signal::Kill);
            self.warn(format!("worker {} ({}) did not stop: killed", s.no, s.story));
        }
        pool.slots.clear();
        pool.save_board(&self.paths.store);
        end
    }
}

/// Each story's predicted paths: declared in prd.json, learnt by the run.
pub fn footprints(stories: &[crate::prd::Story], board: &Board) -> BTreeMap<String, Footprint> {
    let none = std::collections::BTreeSet::new();
    stories
        .iter()
        .map(|s| {
            let learnt = board.learnt.get(&s.id).unwrap_or(&none);
            (s.id.clone(), Footprint::new(&s.touches, learnt))
        })
        .collect()
}

/// Why each unfinished story not at work waits for one that is, as
/// `ralph status` shows it while a parallel run goes on.
pub fn waits(stories: &[crate::prd::Story], board: &Board) -> Vec<Overlap> {
    let mut at_work: Vec<String> = board.workers.iter().map(|w| w.story.clone()).collect();
    at_work.extend(board.queue.iter().cloned());
    at_work.extend(board.to_resolve.iter().cloned());
    let mut busy = at_work.clone();
    busy.extend(board.given_up.keys().cloned());
    plan::schedule(stories, &busy, &at_work, &footprints(stories, board), 0).1
}

/// The worktrees' folder for a store.
fn worktrees_dir(store: &crate::store::Store) -> PathBuf {
    store.path("worktrees")
}

/// `path` relative to the repository's work dir (both absolute).
fn relative_to(path: &Path, top: &Path) -> PathBuf {
    path.strip_prefix(top).map(Path::to_path_buf).unwrap_or_default()
}
