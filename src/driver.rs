//! The loop: the only module that sequences the others. It never prints;
//! everything a person or program sees is an [`Event`].
//!
//! ```text
//! setup.rs      lock → checkpoint (resume?) → prd → branch / archive → breaker → crash recovery
//! dirty.rs      a new run refuses a person's uncommitted edits (--allow-dirty)
//! resume.rs     a run that did not end: its N, an iteration ralph's end cut off, the notice
//! driver.rs     the loop below
//! iteration.rs  one iteration: prompt → agent → prd.json, git, gate, handoff → Facts
//! oracle.rs     protected paths set back, tests counted and flagged (the oracle is the person's)
//! judge.rs      Facts → Judgement (pure: what passes, what is committed, what counts)
//! verdict.rs    carrying the judgement out: prd.json once, commits, state, breaker
//! learning.rs   failures → events, rule cards, lessons
//! context.rs    the prompt's story and what ralph knows from earlier iterations
//! dry_run.rs    --dry-run: the next iteration described, nothing changed
//! wait.rs       limits, back-offs, budgets, sleeping
//! records.rs    prd.json, its last good copy, the checkpoint
//! red.rs        a story's own check run on the base first (gate.require_red)
//! hooks.rs      the user's hook commands
//! report.rs     the end: report, runs.jsonl, hooks, exit code
//! deliver.rs    the end: pull requests, when deliver.pr asks (before run_end)
//! ```

mod context;
mod deliver;
mod dirty;
mod dry_run;
mod hooks;
mod iteration;
mod judge;
mod learning;
mod oracle;
mod parallel;
mod records;
mod red;
mod report;
mod resolve;
mod resume;
mod setup;
mod verdict;
mod wait;

use std::path::PathBuf;
use std::time::Instant;

use crate::agent::Agents;
use crate::circuit::Breaker;
use crate::config::Config;
use crate::error::Error;
use crate::event::{Event, Level, Reporter, RunOutcome};
use crate::gate::Gate;
use crate::git::Repo;
use crate::limits::Limits;
use crate::prd::Prd;
use crate::process::Signal;
use crate::state::RunState;

pub use crate::paths::Paths;
pub use dry_run::dry_run;
pub(crate) use judge::merge::ResolveMode;
pub use parallel::{
    Board, ParallelError, RemoteRun, StoryState, advance_journalled, finish_advance, remote_runs,
    waits,
};
pub use resolve::{OtherStory, ResolveSpec};
pub use verdict::CommitFailed;

/// Everything a run needs beyond the paths.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: Config,
    pub max_iterations: u32,
    /// `--prompt FILE`.
    pub prompt_file: Option<PathBuf>,
    /// `--fresh`: ignore a crashed run's checkpoint, start with a closed breaker.
    pub fresh: bool,
    /// The iteration limit was given on the command line (it then also
    /// applies to a resumed run).
    pub explicit_max: bool,
    /// Pass the agent's output on as events.
    pub agent_output: bool,
    /// The configuration as layers: a parallel run hands it to its workers.
    pub layers: Option<crate::config::Layers>,
    /// How this process takes part in the run.
    pub mode: Mode,
}

/// How a process takes part in a run.
#[derive(Debug, Clone)]
pub enum Mode {
    /// The loop itself: one story at a time, in the project.
    Single,
    /// `--jobs N`: the coordinator of worker processes on this machine.
    Parallel,
    /// `ralph worker --remote`: a coordinator that shares the run with
    /// other machines' through the clone's `origin`.
    Remote(RemoteWorker),
    /// A worker process of a parallel run (`ralph __worker`): one turn of
    /// one story.
    Worker(Worker),
}

impl Mode {
    /// The mode a `ralph` run takes: parallel with more than one job.
    pub fn for_jobs(jobs: u32) -> Mode {
        if jobs > 1 { Mode::Parallel } else { Mode::Single }
    }

    pub fn worker(&self) -> Option<&Worker> {
        match self {
            Mode::Worker(w) => Some(w),
            _ => None,
        }
    }

    pub fn remote(&self) -> Option<&RemoteWorker> {
        match self {
            Mode::Remote(r) => Some(r),
            _ => None,
        }
    }
}

/// Who this machine's worker is, and how long its claims last unrenewed.
#[derive(Debug, Clone)]
pub struct RemoteWorker {
    pub id: String,
    pub lease: std::time::Duration,
}

/// What a worker process of a parallel run works on: one story, in its own
/// worktree, on that worktree's branch, one iteration per process.
#[derive(Debug, Clone)]
pub struct Worker {
    pub story: String,
    /// The story's branch: the one ralph commits on, and puts HEAD back on.
    pub branch: String,
    /// Why the story was sent back from the merge queue, for the prompt.
    pub feedback: Option<String>,
    /// Where its iteration logs go: beside the run's own, so they outlive
    /// the worktree.
    pub log_dir: PathBuf,
    /// A resolver's turn: merge the story's work onto the run branch where
    /// it conflicted, instead of working on the story.
    pub resolve: Option<ResolveSpec>,
}

/// How a run ended, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct End {
    pub outcome: RunOutcome,
    pub code: u8,
    pub message: String,
}

impl End {
    fn new(outcome: RunOutcome, message: impl Into<String>) -> End {
        use crate::exit;
        let code = match outcome {
            RunOutcome::Complete => exit::COMPLETE,
            RunOutcome::MaxIterations => exit::MAX_ITERATIONS,
            RunOutcome::CircuitOpen => exit::CIRCUIT_OPEN,
            RunOutcome::RateLimited => exit::RATE_LIMITED,
            RunOutcome::Blocked => exit::BLOCKED,
            RunOutcome::Budget => exit::BUDGET,
            RunOutcome::Environment => exit::ENVIRONMENT,
            RunOutcome::GateDisagrees => exit::GATE_DISAGREES,
            RunOutcome::GivenUp => exit::GIVEN_UP,
            RunOutcome::Interrupted => exit::TERMINATED,
        };
        End { outcome, code, message: message.into() }
    }

    fn interrupted(signal: Signal) -> End {
        let message = if signal == Signal::Int {
            "interrupted (Ctrl-C); run ralph again to resume"
        } else {
            "terminated; run ralph again to resume"
        };
        End {
            code: crate::signals::exit_code(signal),
            ..End::new(RunOutcome::Interrupted, message)
        }
    }

    /// A fatal error in the middle of the run: it still gets its report.
    fn error(e: &Error) -> End {
        let message = match e.hint() {
            Some(h) => format!("{e}\nhint: {h}"),
            None => e.to_string(),
        };
        End::new(RunOutcome::Environment, message)
    }
}

/// One run of the loop: what the whole run owns, and (`kit`) what each
/// iteration is built and judged with.
struct Run<'a> {
    paths: &'a Paths,
    opts: &'a Options,
    cfg: &'a Config,
    reporter: &'a mut dyn Reporter,
    /// Held for the whole run; released when the run (this value) ends.
    lock: crate::store::Lock,
    repo: Repo,
    state: RunState,
    breaker: Breaker,
    limits: Limits,
    /// The last PRD that was valid, for restoring what an agent breaks.
    good_prd: Prd,
    clock: Clock,
    /// Budgets this process already warned are 80% spent.
    budget_warned: Vec<crate::event::BudgetKind>,
    kit: Kit,
}

/// The run's time: when this process started it, what earlier processes
/// of the run spent, and when its time budget runs out.
struct Clock {
    started: Instant,
    /// When this process started the run: git locks older than this are a
    /// dead writer's.
    started_at: std::time::SystemTime,
    /// Run time spent by earlier processes of this run (from the checkpoint).
    elapsed_before: u64,
    deadline: Option<Instant>,
}

/// What an iteration is built and judged with: the agents, the prompt's
/// template, the gate, where its logs go, and what it reads the agent's
/// output by.
struct Kit {
    /// The configured agent, its fallbacks, and the one in use.
    agents: Agents,
    gate: Option<Gate>,
    template: String,
    /// The branch the run works on.
    branch: Option<String>,
    log_dir: PathBuf,
    /// Keeps secrets out of logs, events and prompts.
    redactor: crate::redact::Redactor,
    /// The error texts the analyser classifies by (built in + config).
    patterns: crate::analyze::Patterns,
    /// The end-of-iteration snapshot, when nothing touched the work tree
    /// since (no gate, no hook, no prd.json write): the next iteration's
    /// starting point without a second scan of the tree.
    reusable_snapshot: Option<crate::git::Snapshot>,
    /// Verdict of the most recent gate run (baseline included).
    last_gate_passed: Option<bool>,
    /// The paths the agent may not change (`oracle::protect`).
    protected: Option<crate::oracle::protect::Protected>,
    /// What agents, the gate and hooks are confined to.
    sandbox: std::sync::Arc<crate::sandbox::Sandbox>,
    /// The git directory's guarded files as last read (`oracle::git_dir`).
    git_dir_cache: crate::oracle::git_dir::Cache,
}

/// Runs the loop. Returns the exit code; `Err` for fatal setup errors.
pub fn run(paths: &Paths, opts: &Options, reporter: &mut dyn Reporter) -> Result<u8, Error> {
    // A worker's events go to its run, which records them.
    if opts.mode.worker().is_some() {
        return run_loop(paths, opts, reporter);
    }
    let cfg = &opts.config;
    crate::history::cost::check(&cfg.cost.prices)?;
    let env = |k: &str| std::env::var(k).ok();
    let notifier = crate::notify::Notifier::start(&cfg.notify, &env)?;
    let keep = crate::history::Retention {
        keep_runs: cfg.logs.keep_runs,
        keep_bytes: cfg.logs.keep_bytes,
    };
    let mut recorder = crate::history::Recorder::new(reporter, &paths.store, keep, notifier);
    run_loop(paths, opts, &mut recorder)
}

fn run_loop(paths: &Paths, opts: &Options, reporter: &mut dyn Reporter) -> Result<u8, Error> {
    let mut run = setup::start(paths, opts, reporter)?;
    let end = match &opts.mode {
        Mode::Worker(Worker { resolve: Some(spec), .. }) => run.resolve_once(spec),
        Mode::Parallel | Mode::Remote(_) => run.parallel_loop(),
        Mode::Single | Mode::Worker(_) => run.main_loop(),
    };
    run.finish(end)
}

impl Run<'_> {
    /// What every run does before its first turn, one story at a time or
    /// in parallel: prd.json must read, an open breaker stops the run
    /// before anything is paid for (unless nothing is left to do), the
    /// gate's baseline, the red checks. Returns the stories the red checks
    /// set aside (already given up in the checkpoint), or the run's end.
    fn before_the_first_turn(&mut self) -> Result<Vec<(String, String)>, End> {
        let Some(prd) = self.reload_prd() else {
            return Err(End::new(
                RunOutcome::Environment,
                "prd.json is damaged; see the warning above",
            ));
        };
        if self.breaker.is_open() && !prd.all_pass() {
            return Err(self.breaker_open());
        }
        if let Some(end) = self.baseline() {
            return Err(end);
        }
        let set_aside = self.red_checks(&prd)?;
        self.state.given_up.extend(set_aside.iter().cloned());
        Ok(set_aside)
    }

    fn main_loop(&mut self) -> End {
        if let Err(end) = self.before_the_first_turn() {
            return end;
        }
        loop {
            if let Some(signal) = crate::signals::pending() {
                return End::interrupted(signal);
            }
            if let Some(end) = self.still_ours() {
                return end;
            }
            let prd = self.reload_prd().unwrap_or_else(|| self.good_prd.clone());
            // Completion beats the breaker: every story verified is done.
            if let Some(end) = self.done(&prd) {
                return end;
            }
            if self.breaker.is_open() {
                return self.breaker_open();
            }
            if let Some(end) = self.iterations_used(&prd) {
                return end;
            }
            if let Some(end) = self.over_budget().or_else(|| self.wait_for_limits()) {
                return end;
            }
            // Stories set aside (their check proves nothing) are not worked on.
            let aside: Vec<String> = self.state.given_up.keys().cloned().collect();
            let next = match &self.opts.mode.worker() {
                Some(w) => prd.story(&w.story).filter(|s| !s.passes),
                None => crate::prd::runnable(prd.stories(), &aside).first().copied(),
            };
            let Some(story) = next.cloned() else {
                return self.nothing_to_start(&prd);
            };
            match self.iteration(&prd, &story) {
                Ok(None) => {}
                Ok(Some(end)) => return end,
                Err(e) => return End::error(&e),
            }
            if !self.cfg.run.pause.is_zero()
                && let Some(end) = self.sleep(self.cfg.run.pause)
            {
                return end;
            }
        }
    }

    /// The project is still this run's: its lock still held (an agent may
    /// have deleted the file) and the work tree's `.ralph/` still there.
    fn still_ours(&mut self) -> Option<End> {
        match self.lock.hold() {
            Ok(()) => {}
            Err(crate::store::LockError::Busy(holder)) => {
                let e = Error::Locked { holder, lock: self.paths.store.lock_path() };
                return Some(End { code: e.exit_code(), ..End::error(&e) });
            }
            Err(crate::store::LockError::Io(e)) => {
                return Some(End::error(&Error::io("hold the lock", e)));
            }
        }
        if let Err(e) = self.paths.store.ensure() {
            return Some(End::error(&Error::io("recreate .ralph/", e)));
        }
        None
    }

    /// Every story passes: complete, unless the gate disagrees.
    fn done(&self, prd: &Prd) -> Option<End> {
        if let Some(w) = &self.opts.mode.worker() {
            let passes = prd.story(&w.story).is_some_and(|s| s.passes);
            return passes.then(|| End::new(RunOutcome::Complete, format!("{} passes", w.story)));
        }
        if !prd.all_pass() {
            return None;
        }
        if self.kit.last_gate_passed == Some(false) {
            return Some(End::new(
                RunOutcome::GateDisagrees,
                "every story is marked passing, but the gate fails: fix what the gate reports, \
                 or set the story it concerns back to \"passes\": false",
            ));
        }
        Some(End::new(RunOutcome::Complete, "every story passes"))
    }

    /// No story can start: every one passes, or those left are set aside
    /// (or wait on one that is).
    fn nothing_to_start(&self, prd: &Prd) -> End {
        if self.state.given_up.is_empty() || prd.all_pass() {
            return End::new(RunOutcome::Complete, "every story passes");
        }
        let lines: Vec<String> =
            self.state.given_up.iter().map(|(id, why)| format!("{id}: {why}")).collect();
        End::new(
            RunOutcome::GivenUp,
            format!(
                "{} given up and no other story can start\n{}",
                crate::text::count(lines.len(), "story", "stories"),
                lines.join("\n")
            ),
        )
    }

    fn breaker_open(&self) -> End {
        let opened_now = self.breaker.opened_at().is_some_and(|at| at >= self.state.started_at);
        let report = self.breaker.report(self.cfg.circuit.cooldown);
        let message = if opened_now {
            format!("the circuit breaker opened: {}\n{report}", self.breaker.reason())
        } else {
            format!("the circuit breaker is open: {}\n{report}", self.breaker.reason())
        };
        End::new(RunOutcome::CircuitOpen, message)
    }

    fn iterations_used(&self, prd: &Prd) -> Option<End> {
        if self.state.iteration < self.state.max_iterations {
            return None;
        }
        let left = prd.stories().len() - prd.passing();
        Some(End::new(
            RunOutcome::MaxIterations,
            format!(
                "reached the iteration limit ({}) with {} unfinished; see {}",
                self.state.max_iterations,
                crate::text::count(left, "story", "stories"),
                self.paths.progress.display()
            ),
        ))
    }

    /// Runs the gate once before the first iteration: it must be able to
    /// run at all, and its verdict is the baseline.
    fn baseline(&mut self) -> Option<End> {
        let gate = self.kit.gate.clone()?;
        if !self.cfg.gate.baseline || gate.command.is_empty() || self.opts.mode.worker().is_some() {
            return None;
        }
        let log = self.kit.log_dir.join("gate-baseline.log");
        match gate.run(&gate.command, &self.paths.project, Some(&log)) {
            // A gate that cannot finish before any work cannot judge any:
            // each iteration would wait it out and learn nothing.
            Ok(v) if v.timed_out && !v.interrupted => Some(End::new(
                RunOutcome::Environment,
                format!(
                    "the gate timed out on the baseline: it did not finish within {} \
                     (gate.timeout); see {}\nhint: make the gate faster, or give it longer with \
                     --gate-timeout (gate.timeout in .ralph/config.toml)",
                    humantime::format_duration(gate.timeout),
                    log.display()
                ),
            )),
            Ok(v) => {
                self.kit.last_gate_passed = Some(v.passed);
                self.baseline_tests(&gate.command, &v);
                let detail = if v.passed || v.summary().is_empty() {
                    String::new()
                } else {
                    format!(" ({})", v.summary())
                };
                self.notice(format!(
                    "baseline: the gate {} before any work{detail}",
                    if v.passed { "passes" } else { "fails" },
                ));
                None
            }
            Err(e) => Some(self.gate_not_run(&e)),
        }
    }

    /// A gate that cannot run: not the agent's fault, so it is recorded but
    /// never learned from, and the run stops.
    fn gate_not_run(&mut self, e: &crate::gate::NotRun) -> End {
        let category = crate::learn::failures::Category::GateNotRun;
        self.record_failure("", category, &e.message, &e.message, None, &[]);
        End::new(RunOutcome::Environment, format!("{}\nhint: {}", e.message, e.hint))
    }

    /// Removes git lock files a writer killed mid-write left behind (and
    /// says so), before ralph or an agent writes to the repository.
    fn clear_stale_git_locks(&mut self) -> Result<(), crate::git::GitError> {
        let wait = std::time::Duration::from_secs(5);
        // Another git command at work is the machine's state: a failure
        // (exit 7), not a refusal.
        let cleared = self.repo.clear_stale_locks(self.clock.started_at, wait)?;
        for lock in cleared {
            self.warn(format!(
                "removed {}: a git lock left by a process that died mid-write",
                lock.display()
            ));
        }
        Ok(())
    }

    fn notice(&mut self, message: impl Into<String>) {
        self.reporter.emit(&Event::Notice { level: Level::Info, message: message.into() });
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.reporter.emit(&Event::Notice { level: Level::Warn, message: message.into() });
    }
}
