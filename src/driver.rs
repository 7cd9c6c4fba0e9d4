//! The loop itself: the only module that sequences the others.
//!
//! ```text
//! setup: lock → prd → git branch / archive → checkpoint (resume?) → breaker → baseline gate
//! each iteration:
//!   re-read prd ─ all pass? → done
//!   limits (calls/hour, usage-limit resume time) → wait or stop
//!   pick story → render prompt → spawn a fresh agent (supervised) → analyse
//!   git changes → prd check (restore if damaged) → gate → mark / unmark story
//!   breaker.record → budgets → hooks → checkpoint
//! end: report (claimed vs verified, closest iteration), hooks, exit code
//! ```
//!
//! It never prints: everything a person or program sees is an [`Event`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{Local, Utc};

use crate::agent::{self, Backend, Tool};
use crate::analyze::{AgentError, Analyzer, Outcome, StopReason};
use crate::circuit::{Breaker, Signals, Thresholds};
use crate::config::Config;
use crate::error::Error;
use crate::event::{BestIteration, Event, Level, Reporter, StoryReport};
use crate::exit;
use crate::gate::{Gate, Verdict};
use crate::git::{BranchAction, Repo};
use crate::limits::{Limits, Wait, Why};
use crate::prd::Prd;
use crate::state::{Best, Phase, RunState};
use crate::store;

pub use crate::paths::Paths;

/// Everything a run needs beyond the paths.
#[derive(Debug, Clone)]
pub struct Options {
    pub config: Config,
    pub max_iterations: u32,
    /// `--prompt FILE`.
    pub prompt_file: Option<PathBuf>,
    /// `--fresh`: ignore a crashed run's checkpoint.
    pub fresh: bool,
    /// The iteration limit was given on the command line (it then also
    /// applies to a resumed run).
    pub explicit_max: bool,
    /// Pass the agent's output on as events.
    pub agent_output: bool,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Complete,
    MaxIterations,
    CircuitOpen,
    RateLimited,
    Blocked,
    Budget,
    Environment,
    GateDisagrees,
    Interrupted(i32),
}

impl End {
    fn code(self) -> u8 {
        match self {
            End::Complete => exit::COMPLETE,
            End::MaxIterations => exit::MAX_ITERATIONS,
            End::CircuitOpen => exit::CIRCUIT_OPEN,
            End::RateLimited => exit::RATE_LIMITED,
            End::Blocked => exit::BLOCKED,
            End::Budget => exit::BUDGET,
            End::Environment => exit::ENVIRONMENT,
            End::GateDisagrees => exit::GATE_DISAGREES,
            End::Interrupted(sig) => crate::signals::exit_code(sig),
        }
    }

    fn name(self) -> &'static str {
        match self {
            End::Complete => "complete",
            End::MaxIterations => "max_iterations",
            End::CircuitOpen => "circuit_open",
            End::RateLimited => "rate_limited",
            End::Blocked => "blocked",
            End::Budget => "budget",
            End::Environment => "environment",
            End::GateDisagrees => "gate_disagrees",
            End::Interrupted(_) => "interrupted",
        }
    }
}

/// The longest run of transient failures (rate limits, overloads) ralph
/// sits through before it gives up on the API.
const MAX_TRANSIENT_RETRIES: u32 = 20;

struct Run<'a> {
    paths: &'a Paths,
    opts: &'a Options,
    cfg: &'a Config,
    reporter: &'a mut dyn Reporter,
    repo: Repo,
    backend: Backend,
    gate: Option<Gate>,
    state: RunState,
    breaker: Breaker,
    limits: Limits,
    /// The last PRD that was valid, for restoring what an agent breaks.
    good_prd: Prd,
    started: Instant,
    deadline: Option<Instant>,
    log_dir: PathBuf,
    template: String,
    branch: Option<String>,
    /// Verdict of the most recent gate run (baseline included).
    last_gate_passed: Option<bool>,
    message: String,
    /// Keeps secrets out of logs, events and prompts.
    redactor: crate::redact::Redactor,
    /// Run time spent by earlier processes of this run (from the checkpoint).
    elapsed_before: u64,
    /// The end-of-iteration snapshot, when nothing touched the work tree
    /// since (no gate, no hook, no prd.json write): the next iteration's
    /// starting point without a second scan of the tree.
    reusable_snapshot: Option<crate::git::Snapshot>,
    /// The last agent's exit code, for the iteration's end event.
    last_exit: Option<i32>,
    /// The error texts the analyser classifies by (built in + config).
    patterns: crate::analyze::Patterns,
    /// Shown with the iteration's end when the agent itself did not fail
    /// (a rejected handoff).
    iteration_note: Option<String>,
}

/// Runs the loop. Returns the exit code; `Err` for fatal setup errors.
pub fn run(paths: &Paths, opts: &Options, reporter: &mut dyn Reporter) -> Result<u8, Error> {
    crate::signals::install();
    crate::signals::become_subreaper();
    let cfg = &opts.config;
    paths
        .store
        .ensure()
        .map_err(|e| Error::io(format!("create {}", paths.store.root().display()), e))?;
    let (_lock, previous) = match store::lock(&paths.store.lock_path()) {
        Ok(l) => l,
        Err(store::LockError::Busy(pid)) => {
            return Err(Error::Locked { pid, lock: paths.store.lock_path() });
        }
        Err(store::LockError::Io(e)) => return Err(Error::io("take the lock", e)),
    };
    if let store::PreviousHolder::Dead(pid) = previous {
        reporter.emit(&Event::Notice {
            level: Level::Warn,
            message: format!(
                "the previous ralph (pid {pid}) ended without cleaning up; taking over its lock"
            ),
        });
    }
    let (checkpoint, warning) =
        RunState::load(&paths.store).map_err(|e| Error::io("read .ralph/state.json", e))?;
    warn(reporter, warning);
    let unfinished = checkpoint.filter(|s| s.phase != Phase::Ended);
    let resume = unfinished.clone().filter(|_| !opts.fresh);
    let prd = match Prd::load(&paths.prd) {
        Ok(prd) => prd,
        // The last run died while its agent was at work: a prd.json broken
        // now is most likely the agent's half-finished write. Restore the
        // last good copy (keeping the broken one); otherwise it is the
        // user's file, and ralph changes nothing.
        Err(e)
            if resume.as_ref().is_some_and(|s| matches!(s.phase, Phase::Agent | Phase::Gate)) =>
        {
            let good = Prd::load(&paths.store.last_prd()).map_err(|_| Error::Prd(e))?;
            let kept = paths.store.path("prd.broken.json");
            let _ = std::fs::copy(&paths.prd, &kept);
            good.save(&paths.prd)
                .map_err(|e| Error::io(format!("restore {}", paths.prd.display()), e))?;
            reporter.emit(&Event::Notice {
                level: Level::Warn,
                message: format!(
                    "prd.json was left broken by the interrupted run; restored the last good copy (the broken one is in {})",
                    kept.display()
                ),
            });
            good
        }
        Err(e) => return Err(e.into()),
    };
    let repo = Repo::discover(&paths.project)?;
    let backend = backend(cfg)?;
    let is_root = crate::process::euid() == 0;
    backend
        .preflight(is_root, &|k| std::env::var(k).ok())
        .map_err(|message| Error::Environment { message, hint: None })?;
    let template = load_template(paths, opts)?;

    let now = Utc::now();
    let (limits, warning) =
        Limits::load(&paths.store).map_err(|e| Error::io("read .ralph/limits.json", e))?;
    warn(reporter, warning);
    let (mut breaker, warning) =
        Breaker::load(&paths.store, now).map_err(|e| Error::io("read .ralph/circuit.json", e))?;
    warn(reporter, warning);
    if let Some(t) = breaker.on_start(now, cfg.circuit.auto_reset, cfg.circuit.cooldown) {
        reporter.emit(&Event::Circuit {
            from: state_name(t.from),
            to: t.to.to_string(),
            reason: t.reason,
        });
    }
    breaker.save(&paths.store).map_err(|e| Error::io("write .ralph/circuit.json", e))?;

    let state = match &resume {
        Some(s) => {
            let mut s = s.clone();
            // A number given on the command line now replaces the
            // interrupted run's limit; otherwise that limit stands.
            if opts.explicit_max {
                s.max_iterations = opts.max_iterations;
            }
            s
        }
        None => RunState::new(crate::state::new_run_id(Local::now()), now, opts.max_iterations),
    };
    let log_dir = paths.store.run_log_dir(&state.run_id);
    std::fs::create_dir_all(&log_dir)
        .map_err(|e| Error::io(format!("create {}", log_dir.display()), e))?;

    let redactor = crate::redact::Redactor::from_env();
    let gate = (!cfg.gate.command.is_empty() || prd.stories().iter().any(|s| s.verify.is_some()))
        .then(|| Gate {
            command: cfg.gate.command.clone(),
            timeout: cfg.gate.timeout,
            grace: cfg.agent.grace,
            tail_bytes: cfg.gate.tail_bytes,
            fatal_signatures: cfg.gate.fatal_signatures.clone(),
            redactor: Some(redactor.clone()),
        });
    let deadline = cfg
        .budget
        .max_duration
        .map(|d| Instant::now() + d.saturating_sub(Duration::from_millis(state.elapsed_ms)));
    let mut run = Run {
        paths,
        opts,
        cfg,
        reporter,
        repo,
        backend,
        gate,
        breaker,
        limits,
        good_prd: prd.clone(),
        started: Instant::now(),
        elapsed_before: state.elapsed_ms,
        deadline,
        log_dir,
        template,
        branch: prd.branch_name().map(str::to_string),
        last_gate_passed: None,
        message: String::new(),
        iteration_note: None,
        patterns: patterns(cfg)?,
        last_exit: None,
        reusable_snapshot: None,
        redactor,
        state,
    };
    run.setup_branch(&prd)?;
    run.save_last_prd(&prd);
    if let Some(old) = &unfinished {
        run.clean_up_after(old)?;
    }
    if let Some(old) = &resume {
        run.resume(old);
    }
    let prd = run.reload_prd().unwrap_or(prd);
    if resume.is_none() {
        run.state.passing_at_start =
            prd.stories().iter().filter(|s| s.passes).map(|s| s.id.clone()).collect();
    }
    run.reporter.emit(&Event::RunStart {
        run_id: run.state.run_id.clone(),
        project: prd.project().map(str::to_string),
        branch: run.repo.current_branch(),
        prd: paths.prd.display().to_string(),
        agent: describe_backend(&run.backend),
        max_iterations: run.state.max_iterations,
        stories: prd.stories().len(),
        passing: prd.passing(),
        resumed_from: resume.as_ref().map(|s| s.iteration),
    });
    run.checkpoint(Phase::Idle);
    let end = run.main_loop();
    run.finish(end)
}

/// The analyser's patterns: the built-in texts, the configured extras, and
/// this machine's time zone for reset times given in local time.
pub fn patterns(cfg: &Config) -> Result<crate::analyze::Patterns, Error> {
    let patterns = crate::analyze::Patterns::new(&cfg.patterns).map_err(|e| {
        Error::Config(crate::config::ConfigError(format!("patterns.{}: {e}: {}", e.kind, e.source)))
    })?;
    Ok(patterns.with_local_zone(local_zone()))
}

/// `TZ` when it names a zone, else the current local offset.
fn local_zone() -> crate::analyze::Zone {
    let named = std::env::var("TZ")
        .ok()
        .and_then(|tz| tz.trim_start_matches(':').parse::<chrono_tz::Tz>().ok());
    match named {
        Some(tz) => crate::analyze::Zone::Named(tz),
        None => crate::analyze::Zone::Fixed(*Local::now().offset()),
    }
}

fn warn(reporter: &mut dyn Reporter, warning: Option<String>) {
    if let Some(message) = warning {
        reporter.emit(&Event::Notice { level: Level::Warn, message });
    }
}

fn state_name(s: Option<crate::circuit::State>) -> String {
    s.map_or("unreadable".into(), |s| s.to_string())
}

/// Every gate program — `gate.command` and the unfinished stories'
/// `verify` — must exist before the first agent is paid for: a gate that
/// cannot start is an environment error, not something an agent can fix.
fn check_gate_programs(gate: &[String], prd: &Prd) -> Result<(), crate::gate::NotRun> {
    let mut commands: Vec<(Vec<String>, String)> = Vec::new();
    if !gate.is_empty() {
        commands.push((gate.to_vec(), "gate.command".into()));
    }
    for s in prd.stories().iter().filter(|s| !s.passes) {
        if let Some(words) = s.verify.as_deref().and_then(|v| agent::words::split(v).ok()) {
            commands.push((words, format!("the \"verify\" of {}", s.id)));
        }
    }
    for (words, what) in commands {
        let Some(program) = words.first() else { continue };
        let found = if program.contains('/') {
            std::fs::metadata(program).is_ok_and(|m| m.is_file())
        } else {
            which::which(program).is_ok()
        };
        if !found {
            return Err(crate::gate::NotRun {
                message: format!("the gate cannot run: `{program}` ({what}) not found"),
                hint: "install it or fix the command; ralph stops before any agent runs".into(),
            });
        }
    }
    Ok(())
}

/// The configured agent.
pub fn backend(cfg: &Config) -> Result<Backend, Error> {
    let a = &cfg.agent;
    let mut b = if a.tool == Tool::Custom {
        if a.command.is_empty() {
            return Err(Error::Usage(
                "tool custom needs a command: --agent-cmd \"my-agent --flag\" or agent.command in .ralph/config.toml".into(),
            ));
        }
        Backend { command: a.command.clone(), format: a.format, ..Backend::new(Tool::Custom) }
    } else {
        let mut b = Backend::new(a.tool);
        if !a.command.is_empty() {
            // A named tool with its program replaced (a wrapper, a pinned path).
            b.command = a.command.clone();
        }
        b
    };
    b.model = a.model.clone();
    b.extra_args = a.args.clone();
    b.safe = a.safe;
    if !a.allowed_tools.is_empty() {
        b.allowed_tools = a.allowed_tools.clone();
    }
    Ok(b)
}

fn describe_backend(b: &Backend) -> String {
    match b.tool {
        Tool::Custom => format!("custom ({})", b.program()),
        t => match &b.model {
            Some(m) => format!("{t} ({m})"),
            None => t.to_string(),
        },
    }
}

fn load_template(paths: &Paths, opts: &Options) -> Result<String, Error> {
    let explicit = opts.prompt_file.clone().or_else(|| opts.config.run.prompt.clone());
    let file = explicit.clone().or_else(|| Some(paths.store.prompt()).filter(|p| p.exists()));
    match file {
        Some(p) => std::fs::read_to_string(&p).map_err(|e| {
            Error::Usage(format!("cannot read the prompt template {}: {e}", p.display()))
        }),
        None => Ok(crate::prompt::BUILTIN.to_string()),
    }
}

impl Run<'_> {
    fn notice(&mut self, message: impl Into<String>) {
        self.reporter.emit(&Event::Notice { level: Level::Info, message: message.into() });
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.reporter.emit(&Event::Notice { level: Level::Warn, message: message.into() });
    }

    /// Archive on branch change, `.last-branch`, progress.txt, and the branch checkout.
    fn setup_branch(&mut self, prd: &Prd) -> Result<(), Error> {
        let p = self.paths;
        let last = std::fs::read_to_string(&p.last_branch)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let changed = match (prd.branch_name(), last.as_deref()) {
            (Some(current), Some(last)) if current != last => Some(last.to_string()),
            _ => None,
        };
        // What the previous run leaves behind is read first: switching
        // branches may replace progress.txt with the other branch's copy.
        let previous = changed.as_ref().map(|last| {
            let prd = std::fs::read(p.store.last_prd()).ok().filter(|bytes| {
                Prd::parse(bytes, &p.store.last_prd())
                    .ok()
                    .and_then(|old| old.branch_name().map(str::to_string))
                    .as_deref()
                    == Some(last.as_str())
            });
            (prd, std::fs::read(&p.progress).ok())
        });
        // The branch comes before any change of ralph's own: it may refuse
        // (uncommitted changes), and then nothing must have been touched.
        if let Some(branch) = prd.branch_name() {
            match self.repo.ensure_branch(branch)? {
                BranchAction::AlreadyOn => {}
                BranchAction::SwitchedTo => self.notice(format!("switched to branch {branch}")),
                BranchAction::Created { from } => {
                    self.notice(format!("created branch {branch} from {from}"))
                }
            }
        }
        if let (Some(last), Some((old_prd, old_progress))) = (&changed, &previous) {
            let archived = crate::archive::archive_previous(
                &p.prd_dir,
                last,
                old_prd.as_deref(),
                old_progress.as_deref(),
                &p.progress,
                Local::now(),
            )
            .map_err(|e| Error::io("archive the previous run", e))?;
            self.notice(format!(
                "archived the previous run ({last}) to {}",
                archived.dir.display()
            ));
            if let Some(why) = archived.missing_prd {
                self.warn(format!("the previous prd.json was not archived: {why}"));
            }
        }
        if let Some(branch) = prd.branch_name() {
            store::write_atomic(&p.last_branch, format!("{branch}\n").as_bytes())
                .map_err(|e| Error::io(format!("write {}", p.last_branch.display()), e))?;
            // ralph's bookkeeping file, not the project's: keep it out of
            // the agent's `git add -A` without touching a tracked .gitignore.
            if let Some(rel) = self.repo.relative(&p.last_branch) {
                self.repo.exclude_locally(&rel);
            }
        }
        if crate::archive::ensure_progress(&p.progress, Local::now())
            .map_err(|e| Error::io(format!("create {}", p.progress.display()), e))?
        {
            self.notice(format!("created {}", p.progress.display()));
        }
        Ok(())
    }

    fn save_last_prd(&mut self, prd: &Prd) {
        // A copy for restores and archives; prd.json itself is the durable one.
        if let Err(e) = store::write_replace(&self.paths.store.last_prd(), prd.to_json().as_bytes())
        {
            self.warn(format!("cannot keep a copy of prd.json in .ralph/: {e}"));
        }
    }

    /// Picks up a run that crashed: the iteration it died in counts as
    /// failed, and the story goes back to what it was before that iteration.
    /// After a crash (or a run that was interrupted mid-iteration): ends
    /// what the dead run left running and undoes the claim of the story it
    /// was working on, unless that was verified. Runs for `--fresh` too:
    /// starting over must not inherit an unverified "passes".
    fn clean_up_after(&mut self, old: &RunState) -> Result<(), Error> {
        self.state.agent_pgid = None;
        if let Some(pgid) = old
            .agent_pgid
            .filter(|&p| p > 1 && crate::process::group_works_in(p, &self.paths.project))
        {
            crate::process::signal_group(pgid, libc::SIGTERM);
            let until = Instant::now() + self.cfg.agent.grace;
            while crate::process::group_alive(pgid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            crate::process::signal_group(pgid, libc::SIGKILL);
            self.warn(format!("ended process group {pgid}, left running by the interrupted run"));
        }
        // Processes that left the group (a new session) still carry the
        // dead run's id in their environment.
        let strays = crate::process::end_processes_of_run(
            &old.run_id,
            &self.paths.project,
            self.cfg.agent.grace,
        );
        if strays > 0 {
            self.warn(format!(
                "ended {strays} process{} of the interrupted run that had left its process group",
                if strays == 1 { "" } else { "es" }
            ));
        }
        if matches!(old.phase, Phase::Agent | Phase::Gate)
            && let Some(id) = old.story.clone()
        {
            let mut prd = self.reload_prd().unwrap_or_else(|| self.good_prd.clone());
            let verified = old.verified.iter().any(|v| v == &id);
            if prd.story(&id).is_some_and(|s| s.passes) && !old.story_passed_before && !verified {
                prd.set_passes(&id, false);
                self.save_prd(&prd)?;
                self.warn(format!(
                    "iteration {} died before {id} was verified: {id} is marked unfinished again",
                    old.iteration
                ));
            }
        }
        Ok(())
    }

    /// Continues a run that did not end: the iteration it died in counts as
    /// a failed one, and the next prompt says so.
    fn resume(&mut self, old: &RunState) {
        self.notice(format!(
            "resuming run {} after iteration {} (it ended without finishing; --fresh starts over)",
            old.run_id, old.iteration
        ));
        if matches!(old.phase, Phase::Agent | Phase::Gate)
            && let Some(id) = old.story.clone()
        {
            let signals =
                Signals { iteration: u64::from(old.iteration), failed: true, ..Signals::default() };
            self.record_breaker(&signals);
            self.state.feedback = Some(format!(
                "The previous iteration ({}) on {id} was cut off (ralph stopped or crashed) before it \
                 finished. Check the work tree and git log for partial work before going on.",
                old.iteration
            ));
        }
    }

    /// Reads prd.json; a damaged file is restored from the last good copy.
    fn reload_prd(&mut self) -> Option<Prd> {
        match Prd::load(&self.paths.prd) {
            Ok(prd) => match self.good_prd.identity_damage(&prd) {
                None => {
                    if prd.to_json() != self.good_prd.to_json() {
                        // The archive of a finished run needs its last state.
                        self.save_last_prd(&prd);
                    }
                    self.good_prd = prd.clone();
                    Some(prd)
                }
                Some(damage) => {
                    self.restore_prd(&damage);
                    None
                }
            },
            Err(e) => {
                self.restore_prd(&e.to_string());
                None
            }
        }
    }

    fn restore_prd(&mut self, why: &str) {
        self.reusable_snapshot = None;
        let good = self.good_prd.clone();
        match good.save(&self.paths.prd) {
            Ok(()) => {
                self.warn(format!("prd.json was damaged ({why}); restored the last good copy"))
            }
            Err(e) => {
                self.warn(format!("prd.json was damaged ({why}) and could not be restored: {e}"))
            }
        }
    }

    fn save_prd(&mut self, prd: &Prd) -> Result<(), Error> {
        self.reusable_snapshot = None;
        prd.save(&self.paths.prd)
            .map_err(|e| Error::io(format!("write {}", self.paths.prd.display()), e))?;
        self.good_prd = prd.clone();
        self.save_last_prd(prd);
        Ok(())
    }

    /// Writes the checkpoint. Entering and leaving an iteration is durable
    /// (fsync): those are what a resume after a crash or power cut relies
    /// on. The mid-iteration phase only informs `ralph status`.
    fn checkpoint(&mut self, phase: Phase) {
        self.state.phase = phase;
        self.state.elapsed_ms = self.elapsed_ms();
        let result = if phase == Phase::Gate {
            store::json_bytes(&self.state)
                .and_then(|b| store::write_replace(&self.paths.store.state(), &b))
        } else {
            self.state.save(&self.paths.store)
        };
        if let Err(e) = result {
            self.warn(format!("cannot write .ralph/state.json: {e}"));
        }
    }

    /// Run time so far: what earlier processes of this run spent, plus
    /// this process's time.
    fn elapsed_ms(&self) -> u64 {
        self.elapsed_before + self.started.elapsed().as_millis() as u64
    }

    fn interrupted(&self) -> Option<End> {
        crate::signals::pending().map(End::Interrupted)
    }

    fn main_loop(&mut self) -> End {
        if self.breaker.is_open() {
            self.message = format!(
                "the circuit breaker is open: {}\n{}",
                self.breaker.reason(),
                self.breaker.report(self.cfg.circuit.cooldown)
            );
            return End::CircuitOpen;
        }
        let Some(prd) = self.reload_prd() else {
            return End::Environment;
        };
        if let Err(e) = check_gate_programs(&self.cfg.gate.command, &prd) {
            return self.gate_not_run("", &e);
        }
        if let Some(end) = self.baseline() {
            return end;
        }
        loop {
            if let Some(end) = self.interrupted() {
                return end;
            }
            let prd = match self.reload_prd() {
                Some(p) => p,
                None => self.good_prd.clone(),
            };
            if prd.all_pass() {
                if self.last_gate_passed == Some(false) {
                    self.message = "every story is marked passing, but the gate fails: fix what \
                                    the gate reports, or set the story it concerns back to \
                                    \"passes\": false"
                        .into();
                    return End::GateDisagrees;
                }
                self.message = "every story passes".into();
                return End::Complete;
            }
            if self.state.iteration >= self.state.max_iterations {
                self.message = format!(
                    "reached the iteration limit ({}) with {} stor{} unfinished; see {}",
                    self.state.max_iterations,
                    prd.stories().len() - prd.passing(),
                    if prd.stories().len() - prd.passing() == 1 { "y" } else { "ies" },
                    self.paths.progress.display()
                );
                return End::MaxIterations;
            }
            if let Some(end) = self.over_budget() {
                return end;
            }
            if let Some(end) = self.wait_for_limits() {
                return end;
            }
            let Some(story) = prd.next_story().cloned() else {
                return End::Complete;
            };
            match self.iteration(&prd, &story) {
                Ok(None) => {}
                Ok(Some(end)) => return end,
                Err(e) => {
                    self.message = match e.hint() {
                        Some(h) => format!("{e}\nhint: {h}"),
                        None => e.to_string(),
                    };
                    return End::Environment;
                }
            }
            if !self.cfg.run.pause.is_zero()
                && let Some(end) = self.sleep(self.cfg.run.pause)
            {
                return end;
            }
        }
    }

    /// Runs the gate once before the first iteration: it must be able to
    /// run at all, and its verdict is the baseline.
    fn baseline(&mut self) -> Option<End> {
        let gate = self.gate.clone()?;
        if !self.cfg.gate.baseline || gate.command.is_empty() {
            return None;
        }
        let log = self.log_dir.join("gate-baseline.log");
        match gate.run(&gate.command, &self.paths.project, Some(&log)) {
            Ok(v) => {
                self.last_gate_passed = Some(v.passed);
                self.notice(format!(
                    "baseline: the gate {} before any work{}",
                    if v.passed { "passes" } else { "fails" },
                    if v.passed || v.summary().is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", v.summary())
                    }
                ));
                None
            }
            Err(e) => Some(self.gate_not_run("", &e)),
        }
    }

    fn over_budget(&mut self) -> Option<End> {
        let b = &self.cfg.budget;
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.message = format!(
                "the run's time budget (--max-duration {}) is spent",
                humantime::format_duration(b.max_duration.unwrap_or_default())
            );
            return Some(End::Budget);
        }
        if let Some(max) = b.max_cost.filter(|m| self.state.cost_usd >= *m) {
            self.message = format!(
                "the cost budget (${max:.2}) is spent: ${:.2} reported",
                self.state.cost_usd
            );
            return Some(End::Budget);
        }
        if let Some(max) = b.max_tokens.filter(|m| self.state.tokens >= *m) {
            self.message = format!("the token budget ({max}) is spent: {} used", self.state.tokens);
            return Some(End::Budget);
        }
        None
    }

    /// Waits out the calls-per-hour window and any usage limit, or stops.
    fn wait_for_limits(&mut self) -> Option<End> {
        loop {
            let max_wait =
                if self.cfg.limits.wait { self.cfg.limits.max_wait } else { Duration::ZERO };
            let now = Utc::now();
            match self.limits.wait(now, self.cfg.limits.calls_per_hour, max_wait) {
                Wait::Ready => return None,
                Wait::TooLong { at, why } => {
                    self.message = format!(
                        "{} until {} — {}",
                        why_text(why),
                        at.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S"),
                        if self.cfg.limits.wait {
                            format!(
                                "longer than --max-wait {}; run ralph again after that time",
                                humantime::format_duration(max_wait)
                            )
                        } else {
                            "not waiting (--no-wait); run ralph again after that time".into()
                        }
                    );
                    return Some(End::RateLimited);
                }
                Wait::Until { at, why } => {
                    if let Some(end) = self.wait_until(at, why_text(why)) {
                        return Some(end);
                    }
                }
            }
        }
    }

    fn wait_until(&mut self, at: chrono::DateTime<Utc>, reason: &str) -> Option<End> {
        let now = Utc::now();
        // Rounded up, and a little past: waking a hair early would only
        // mean asking again and waiting a few more milliseconds.
        let wait = (at - now).to_std().unwrap_or_default() + Duration::from_millis(20);
        if wait >= Duration::from_secs(1) {
            self.reporter.emit(&Event::Waiting {
                reason: reason.into(),
                until: at,
                seconds: wait.as_secs_f64().ceil() as u64,
            });
        }
        self.sleep(wait)
    }

    /// Sleeps, waking for signals and the run's deadline; emits a countdown.
    fn sleep(&mut self, d: Duration) -> Option<End> {
        // A person may have edited the tree meanwhile: scan it afresh.
        self.reusable_snapshot = None;
        let until = Instant::now() + d;
        let mut last_tick = Instant::now();
        loop {
            if let Some(end) = self.interrupted() {
                return Some(end);
            }
            let now = Instant::now();
            if now >= until {
                return None;
            }
            if self.deadline.is_some_and(|dl| now >= dl) {
                return self.over_budget();
            }
            if now.duration_since(last_tick) >= Duration::from_secs(1) {
                last_tick = now;
                self.reporter.emit(&Event::WaitTick { remaining_s: (until - now).as_secs() });
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    }

    fn record_breaker(&mut self, signals: &Signals) -> bool {
        let c = &self.cfg.circuit;
        let thresholds = Thresholds {
            no_progress: c.no_progress,
            half_open_after: c.no_progress.saturating_sub(1).max(1).min(c.no_progress),
            same_error: c.same_error,
            permission_denials: c.permission_denials,
            failures: c.failures,
        };
        let before = (
            self.breaker.state(),
            self.breaker.counters(),
            self.breaker.last_error().map(str::to_string),
        );
        let t = self.breaker.record(signals, &thresholds, Utc::now());
        let after = (
            self.breaker.state(),
            self.breaker.counters(),
            self.breaker.last_error().map(str::to_string),
        );
        // An iteration that changed nothing the breaker decides by (the
        // usual case: progress, counters at zero) is not worth a write.
        if (t.is_some() || before != after)
            && let Err(e) = self.breaker.save(&self.paths.store)
        {
            self.warn(format!("cannot write .ralph/circuit.json: {e}"));
        }
        if let Some(t) = t {
            self.reporter.emit(&Event::Circuit {
                from: state_name(t.from),
                to: t.to.to_string(),
                reason: t.reason,
            });
        }
        self.breaker.is_open()
    }

    /// The prompt for `story`, with what ralph knows from earlier
    /// iterations, and the ids of the armed rules it carries.
    fn prompt(&mut self, prd: &Prd, story: &crate::prd::Story) -> (String, Vec<String>) {
        let story_json = serde_json::to_string_pretty(&story_value(prd, story)).unwrap_or_default();
        let mut context = String::new();
        if let Some(feedback) = &self.state.feedback {
            context.push_str("## What ralph saw after the previous iteration\n");
            context.push_str(feedback);
            context.push('\n');
        }
        if let Some(mut h) = self
            .state
            .handoff
            .clone()
            .and_then(|v| serde_json::from_value::<crate::handoff::Handoff>(v).ok())
        {
            // Its lesson, if any, is in the lessons section already.
            h.lesson = None;
            context.push('\n');
            context.push_str(&crate::handoff::prompt_section(&h));
        }
        match crate::learn::lessons::Lessons::load(&self.paths.store, &story.id) {
            Ok((lessons, warning)) => {
                if let Some(w) = warning {
                    self.warn(w);
                }
                let block = crate::learn::lessons::prompt_block(
                    &lessons,
                    crate::learn::lessons::DEFAULT_PROMPT_CAP,
                );
                if !block.is_empty() {
                    context.push('\n');
                    context.push_str(&block);
                }
            }
            Err(e) => self.warn(format!("cannot read the lessons of {}: {e}", story.id)),
        }
        let mut applied = Vec::new();
        match crate::learn::rules::Rules::load(&self.paths.store) {
            Ok(rules) => {
                let block = crate::learn::rules::rules_block(&rules);
                if !block.is_empty() {
                    context.push('\n');
                    context.push_str(&block);
                }
                applied = rules.armed_ids();
            }
            Err(e) => self.warn(format!("{e}; no rules in this prompt")),
        }
        let gate_hint = match self.gate_command(story) {
            Some(cmd) => format!("; ralph verifies your work with `{}`", cmd.join(" ")),
            None => String::new(),
        };
        let iteration = (self.state.iteration + 1).to_string();
        let max = self.state.max_iterations.to_string();
        let prd_path = self.paths.prd.display().to_string();
        let progress = self.paths.progress.display().to_string();
        let handoff = self.paths.store.handoff().display().to_string();
        let branch = self
            .branch
            .clone()
            .or_else(|| self.repo.current_branch())
            .unwrap_or_else(|| "(current)".into());
        let text = crate::prompt::render(
            &self.template,
            &[
                ("iteration", &iteration),
                ("max_iterations", &max),
                ("project", prd.project().unwrap_or("this project")),
                ("branch", &branch),
                ("prd_path", &prd_path),
                ("progress_path", &progress),
                ("handoff_path", &handoff),
                ("story_id", &story.id),
                ("story_title", &story.title),
                ("story", &story_json),
                ("gate_hint", &gate_hint),
                ("context", &context),
            ],
        );
        (text, applied)
    }

    /// Reads what the agent left in prd.json. A damaged file is restored
    /// (`damaged`); changes the agent may not make — another story's
    /// `passes`, any story's `verify`, a new story marked passing — are
    /// set back and named (`tampered`): one story per iteration, and only
    /// ralph's gate decides.
    fn agent_prd(
        &mut self,
        before: &Prd,
        story: &crate::prd::Story,
    ) -> Result<(Prd, bool, Vec<String>), Error> {
        let Some(mut now) = self.reload_prd() else {
            return Ok((self.good_prd.clone(), true, Vec::new()));
        };
        let mut tampered = Vec::new();
        for s in now.stories().to_vec() {
            match before.story(&s.id) {
                Some(b) => {
                    if s.id != story.id && s.passes != b.passes {
                        if s.passes {
                            self.state.note_claimed(&s.id);
                        }
                        now.set_passes(&s.id, b.passes);
                        tampered.push(format!("{}'s \"passes\"", s.id));
                    }
                    if s.verify != b.verify {
                        now.set_verify(&s.id, b.verify.as_deref());
                        tampered.push(format!("{}'s \"verify\"", s.id));
                    }
                }
                None if s.passes => {
                    now.set_passes(&s.id, false);
                    tampered.push(format!("the new story {}'s \"passes\"", s.id));
                }
                None => {}
            }
        }
        if !tampered.is_empty() {
            self.save_prd(&now)?;
            self.warn(format!("the agent changed {} in prd.json: set back", tampered.join(", ")));
        }
        Ok((now, false, tampered))
    }

    /// Sets the story back to what it was before the iteration when the
    /// agent marked it and nothing verified it.
    fn undo_claim(&mut self, prd: &mut Prd, story: &crate::prd::Story) -> Result<(), Error> {
        if prd.story(&story.id).is_some_and(|s| s.passes) && !story.passes {
            prd.set_passes(&story.id, false);
            self.save_prd(prd)?;
            self.warn(format!(
                "{} was marked passing but never verified: set back to unfinished",
                story.id
            ));
        }
        Ok(())
    }

    /// A gate that cannot run: not the agent's fault, so it is recorded but
    /// never learned from, and the run stops.
    fn gate_not_run(&mut self, story: &str, e: &crate::gate::NotRun) -> End {
        let category = crate::learn::events::Category::GateNotRun;
        self.record_failure(story, category, &e.message, &e.message, None, &[]);
        self.message = format!("{}\nhint: {}", e.message, e.hint);
        End::Environment
    }

    /// Appends a failure to events.jsonl and merges it into its rule card.
    fn record_failure(
        &mut self,
        story: &str,
        category: crate::learn::events::Category,
        signature: &str,
        detail: &str,
        evidence: Option<&str>,
        applied: &[String],
    ) {
        let failure = crate::learn::events::Failure {
            run_id: &self.state.run_id,
            iteration: self.state.iteration,
            story,
            category,
            signature,
            detail,
            evidence,
        };
        let policy = crate::learn::rules::Policy::default();
        match crate::learn::rules::record_failure(
            &self.paths.store,
            &failure,
            applied,
            &policy,
            Utc::now(),
        ) {
            Ok(Some(change)) => self.notice(change.to_string()),
            Ok(None) => {}
            Err(e) => self.warn(format!("cannot record the failure: {e}")),
        }
    }

    /// Records one lesson for `story` (a failure in this code never stops the loop).
    fn record_lesson(&mut self, story: &str, text: &str, source: crate::learn::lessons::Source) {
        match crate::learn::lessons::record(&self.paths.store, story, text, source, Utc::now()) {
            Ok((_, warning)) => {
                if let Some(w) = warning {
                    self.warn(w);
                }
                let event = crate::learn::events::Failure {
                    run_id: &self.state.run_id,
                    iteration: self.state.iteration,
                    story,
                    category: crate::learn::events::Category::Lesson,
                    signature: text,
                    detail: text,
                    evidence: None,
                }
                .event(Utc::now());
                if let Err(e) = crate::learn::events::append(&self.paths.store, &event) {
                    self.warn(format!("cannot append to .ralph/events.jsonl: {e}"));
                }
            }
            Err(e) => self.warn(format!("cannot record a lesson for {story}: {e}")),
        }
    }

    fn gate_command(&self, story: &crate::prd::Story) -> Option<Vec<String>> {
        let gate = self.gate.as_ref()?;
        match &story.verify {
            Some(v) => crate::agent::words::split(v).ok().filter(|w| !w.is_empty()),
            None => Some(gate.command.clone()).filter(|c| !c.is_empty()),
        }
    }

    /// One iteration. `Ok(Some(end))` stops the run.
    fn iteration(&mut self, prd: &Prd, story: &crate::prd::Story) -> Result<Option<End>, Error> {
        let n = self.state.iteration + 1;
        self.state.iteration = n;
        self.state.story = Some(story.id.clone());
        self.state.story_passed_before = story.passes;
        let (prompt, applied) = self.prompt(prd, story);
        // A retry after a usage limit or an API error keeps its number;
        // its files get a suffix so the earlier attempt's log survives.
        let stem = (1..)
            .map(|k| if k == 1 { format!("iter-{n}") } else { format!("iter-{n}.retry-{k}") })
            .find(|stem| !self.log_dir.join(format!("{stem}.log")).exists())
            .unwrap_or_else(|| format!("iter-{n}"));
        let prompt_path = self.log_dir.join(format!("{stem}.prompt.md"));
        let log_path = self.log_dir.join(format!("{stem}.log"));
        std::fs::write(&prompt_path, prompt.as_bytes())
            .map_err(|e| Error::io(format!("write {}", prompt_path.display()), e))?;
        let mut invocation =
            self.backend.invocation(&prompt, &prompt_path).map_err(Error::Usage)?;
        invocation.env_set.extend([
            ("RALPH_RUN_ID".to_string(), self.state.run_id.clone()),
            ("RALPH_PROJECT_DIR".to_string(), self.paths.project.display().to_string()),
            ("RALPH_ITERATION".to_string(), n.to_string()),
            ("RALPH_STORY_ID".to_string(), story.id.clone()),
            ("RALPH_PRD".to_string(), self.paths.prd.display().to_string()),
            ("RALPH_PROGRESS".to_string(), self.paths.progress.display().to_string()),
            ("RALPH_HANDOFF".to_string(), self.paths.store.handoff().display().to_string()),
        ]);
        let _ = std::fs::remove_file(self.paths.store.handoff());
        // `ralph monitor` follows the running iteration's log through this link.
        let current = self.paths.store.logs_dir().join("current.log");
        let _ = std::fs::remove_file(&current);
        let _ = std::os::unix::fs::symlink(&log_path, &current);
        self.reporter.emit(&Event::IterationStart {
            iteration: n,
            max_iterations: self.state.max_iterations,
            story_id: story.id.clone(),
            story_title: story.title.clone(),
        });
        let before = match self.reusable_snapshot.take() {
            Some(s) => s,
            None => self.repo.snapshot()?,
        };
        if self.cfg.limits.calls_per_hour > 0 {
            self.limits.record_call(Utc::now());
            if let Err(e) = self.limits.save(&self.paths.store) {
                return Err(Error::io("write .ralph/limits.json", e));
            }
        }
        // The checkpoint for this phase is written the moment the agent
        // exists (below, with its process group): before that there is
        // nothing a crash could leave half-done.
        self.state.phase = Phase::Agent;
        self.state.elapsed_ms = self.elapsed_ms();

        let limits = agent::supervise::Limits {
            timeout: Some(self.cfg.agent.timeout).filter(|t| !t.is_zero()),
            idle: self.cfg.agent.idle_timeout,
            grace: self.cfg.agent.grace,
            deadline: self.deadline,
            interruptible: true,
        };
        let analyzer = Analyzer::with_patterns(invocation.format, self.patterns.clone());
        let show = self.opts.agent_output;
        let reporter = &mut *self.reporter;
        let mut on_output =
            |text: String| reporter.emit(&Event::AgentOutput { iteration: n, text });
        let started = Instant::now();
        let mut snapshot = self.state.clone();
        let store = self.paths.store.clone();
        let mut on_spawn = |pid: u32| {
            snapshot.agent_pgid = Some(pid as i32);
            let _ =
                store::json_bytes(&snapshot).and_then(|b| store::write_replace(&store.state(), &b));
        };
        let result = agent::run(
            &invocation,
            &self.paths.project,
            &log_path,
            limits,
            analyzer,
            &self.redactor,
            agent::Watch {
                on_spawn: &mut on_spawn,
                on_output: if show { Some(&mut on_output) } else { None },
            },
        );
        self.state.agent_pgid = None;
        let run = match result {
            Ok(r) => r,
            Err(e) => {
                return Err(Error::Environment {
                    message: format!("the agent cannot start: {e}"),
                    hint: Some(
                        "check the agent command (--tool / --agent-cmd) and that it is installed"
                            .into(),
                    ),
                });
            }
        };
        self.last_exit = run.finished.exit_code;
        if let Some(e) = run.log_error {
            return Err(Error::io(format!("write the agent log {}", log_path.display()), e));
        }
        if run.finished.leftovers > 0 {
            self.notice(format!(
                "ended {} process{} the agent left running",
                run.finished.leftovers,
                if run.finished.leftovers == 1 { "" } else { "es" }
            ));
        }
        let outcome = run.outcome;
        self.state.cost_usd += outcome.cost_usd.unwrap_or(0.0);
        self.state.tokens += outcome.tokens.map_or(0, |t| t.total());
        // What the agent left in prd.json, read before anything below can
        // fail, so that every early exit can undo a claim nobody verified.
        let (mut prd_now, prd_damaged, tampered) = self.agent_prd(prd, story)?;
        let claimed = prd_now.story(&story.id).is_some_and(|s| s.passes) && !story.passes;
        if claimed {
            self.state.note_claimed(&story.id);
        }
        let after = match self.repo.snapshot() {
            Ok(a) => a,
            Err(e) => {
                self.undo_claim(&mut prd_now, story)?;
                return Err(e.into());
            }
        };
        let changes = self.repo.changes(&before, &after);
        if self.gate.is_none() && self.cfg.hooks.on_iteration_end.is_empty() {
            self.reusable_snapshot = Some(after.clone());
        }
        let bookkeeping = |f: &str| {
            let p = self.repo.workdir().join(f);
            p == self.paths.prd
                || p == self.paths.progress
                || p == self.paths.last_branch
                || f.starts_with(".ralph/")
        };
        let work_files = changes.files.iter().filter(|f| !bookkeeping(f)).count();
        let attempt = Attempt {
            n,
            story,
            outcome: &outcome,
            changes: &changes,
            work_files,
            log: &log_path,
            started,
        };
        if self.gate.is_some() {
            self.checkpoint(Phase::Gate);
        }
        let stopped_by = match &outcome.error {
            Some(AgentError::Stopped { reason }) => Some(*reason),
            _ => None,
        };
        if let Some(StopReason::Interrupted) = stopped_by {
            // The iteration was cut off: it never counts as passed.
            self.undo_claim(&mut prd_now, story)?;
            self.end_iteration(&attempt, false, "stopped");
            return Ok(self.interrupted());
        }
        // Failures that are not the agent's work at all: nothing of this
        // iteration is judged, so its claim (if any) is undone.
        if outcome.error.as_ref().is_some_and(|e| {
            e.is_transient() || matches!(e, AgentError::Auth { .. } | AgentError::Billing { .. })
        }) {
            self.undo_claim(&mut prd_now, story)?;
        }
        // Failures that are not the agent's work at all.
        match &outcome.error {
            Some(AgentError::Billing { message }) => {
                self.end_iteration(&attempt, false, "failed");
                self.message = format!(
                    "the agent's account is out of credits or quota: {message}\nhint: add credits or raise the quota, then run ralph again (it resumes)"
                );
                return Ok(Some(End::Environment));
            }
            Some(AgentError::Auth { message }) => {
                self.end_iteration(&attempt, false, "failed");
                self.message = format!(
                    "the agent could not authenticate: {message}\nhint: log the agent CLI in again (or fix its API key), then run ralph again"
                );
                return Ok(Some(End::Environment));
            }
            Some(AgentError::UsageLimit { resets_at, message }) => {
                let resume = self.limits.set_usage_limit(
                    *resets_at,
                    Utc::now(),
                    self.cfg.limits.usage_limit_wait,
                );
                let _ = self.limits.save(&self.paths.store);
                self.state.iteration -= 1;
                self.end_iteration(&attempt, false, "transient");
                self.notice(format!(
                    "usage limit: {message} — calls resume at {}",
                    resume.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S")
                ));
                self.checkpoint(Phase::Idle);
                return Ok(None);
            }
            Some(AgentError::RateLimited { message })
            | Some(AgentError::Overloaded { message })
            | Some(AgentError::Unreachable { message }) => {
                let backoff = self.limits.note_transient();
                let count = self.limits.transient_count();
                let _ = self.limits.save(&self.paths.store);
                self.state.iteration -= 1;
                self.end_iteration(&attempt, false, "transient");
                if count > MAX_TRANSIENT_RETRIES {
                    self.message =
                        format!("the API kept failing ({count} times in a row): {message}");
                    return Ok(Some(End::RateLimited));
                }
                let max_wait =
                    if self.cfg.limits.wait { self.cfg.limits.max_wait } else { Duration::ZERO };
                if backoff > max_wait {
                    self.message = format!(
                        "a transient API error ({message}) needs a {} back-off — {}",
                        humantime::format_duration(backoff),
                        if self.cfg.limits.wait {
                            "longer than --max-wait; run ralph again later"
                        } else {
                            "not waiting (--no-wait); run ralph again later"
                        }
                    );
                    self.checkpoint(Phase::Idle);
                    return Ok(Some(End::RateLimited));
                }
                self.checkpoint(Phase::Idle);
                let at = Utc::now() + chrono::TimeDelta::from_std(backoff).unwrap_or_default();
                return Ok(self.wait_until(
                    at,
                    &format!("backing off after a transient API error: {message}"),
                ));
            }
            _ => {}
        }
        if self.limits.transient_count() > 0 || self.limits.usage_resume_at().is_some() {
            self.limits.note_success();
            let _ = self.limits.save(&self.paths.store);
        }

        // The handoff the agent left for the next iteration.
        let (handoff, handoff_problem) = match crate::handoff::read(&self.paths.store.handoff()) {
            Ok(h) => (Some(h), None),
            Err(e) if e.is_missing() && !self.cfg.run.require_handoff => (None, None),
            Err(e) => (None, Some(e)),
        };
        if let Some(h) = &handoff {
            self.state.handoff = serde_json::to_value(h).ok();
        }

        // The verdict.
        let agent_failed = outcome.error.is_some() || prd_damaged || !tampered.is_empty();
        let gate_cmd = self.gate_command(story);
        let mut verified = None;
        let mut gate_signature = None;
        let mut feedback = Vec::new();
        if !tampered.is_empty() {
            feedback.push(format!(
                "You changed {} in prd.json; ralph set it back. Only the \"passes\" field of your \
                 own story ({}) is yours to change, and only ralph's gate makes it stick.",
                tampered.join(", "),
                story.id
            ));
        }
        if prd_damaged {
            feedback.push(
                "prd.json was left invalid or with stories deleted or renumbered; ralph restored \
                 the last good copy. Only change the \"passes\" field of your story."
                    .to_string(),
            );
        }
        if let Some(e) = &outcome.error {
            feedback.push(format!("The agent run failed: {e}"));
        }
        if let Some(e) = &handoff_problem {
            feedback.push(crate::handoff::error_section(e));
        }
        let mut gate_failure = None;
        if let (Some(gate), Some(cmd)) = (self.gate.clone(), gate_cmd.clone()) {
            let log = self.log_dir.join(format!("gate-{n}.log"));
            let v: Verdict = match gate.run(&cmd, &self.paths.project, Some(&log)) {
                Ok(v) => v,
                Err(e) => {
                    self.undo_claim(&mut prd_now, story)?;
                    return Ok(Some(self.gate_not_run(&story.id, &e)));
                }
            };
            if v.interrupted {
                // Ctrl-C / SIGTERM stopped the gate: no verdict, no lesson.
                self.undo_claim(&mut prd_now, story)?;
                self.end_iteration(&attempt, false, "stopped");
                return Ok(self.interrupted());
            }
            self.reporter.emit(&Event::Gate {
                iteration: n,
                story_id: story.id.clone(),
                passed: v.passed,
                exit_code: v.exit_code,
                duration_ms: v.duration.as_millis() as u64,
                summary: v.summary(),
            });
            self.last_gate_passed = Some(v.passed);
            let story_specific = story.verify.is_some();
            let agent_says_done = claimed
                || outcome.claimed_complete
                || outcome
                    .status_block
                    .as_ref()
                    .is_some_and(|b| b.status == Some(crate::analyze::Status::Complete));
            // Commits that touch only ralph's bookkeeping (or nothing, with
            // --allow-empty) are not work on the story.
            let did_work = work_files > 0;
            if v.passed && (story_specific || agent_says_done || did_work) {
                verified = Some(true);
            } else {
                verified = Some(false);
                if !v.passed {
                    feedback.push(v.feedback(&cmd));
                    gate_signature = Some(v.signature());
                    gate_failure = Some(v.clone());
                } else {
                    feedback.push(format!(
                        "The gate passes, but nothing was done for {} in this iteration (no commits, no \
                         changed files): implement the story, commit it, and set its \"passes\" to true.",
                        story.id
                    ));
                }
            }
            self.note_best(n, &v, prd_now.passing(), &after.head);
        }
        if verified == Some(true) {
            let policy = crate::learn::rules::Policy::default();
            match crate::learn::rules::record_gate_pass(
                &self.paths.store,
                &applied,
                &policy,
                Utc::now(),
            ) {
                Ok(changes) => {
                    for c in changes {
                        self.notice(c.to_string());
                    }
                }
                Err(e) => self.warn(format!("cannot record the gate pass: {e}")),
            }
        }
        let passes_now = prd_now.story(&story.id).is_some_and(|s| s.passes);
        match verified {
            Some(true) => {
                self.state.note_verified(&story.id, true);
                if !passes_now {
                    prd_now.set_passes(&story.id, true);
                    self.save_prd(&prd_now)?;
                    self.commit_prd(&format!(
                        "chore: mark {} as passing (verified by ralph's gate)",
                        story.id
                    ));
                    self.notice(format!("the gate passes: ralph marked {} as passing", story.id));
                }
            }
            Some(false) => {
                self.state.note_verified(&story.id, false);
                if passes_now {
                    prd_now.set_passes(&story.id, false);
                    self.save_prd(&prd_now)?;
                    self.commit_prd(&format!("chore: {} does not pass ralph's gate yet", story.id));
                    self.warn(format!(
                        "{} was claimed but the gate failed: set back to unfinished",
                        story.id
                    ));
                }
            }
            None => {
                // No gate: the agent's word, unless its run failed.
                if passes_now && agent_failed && !story.passes {
                    prd_now.set_passes(&story.id, false);
                    self.save_prd(&prd_now)?;
                    self.warn(format!(
                        "{} was marked passing by a failed agent run: set back to unfinished",
                        story.id
                    ));
                }
            }
        }
        let story_passes = prd_now.story(&story.id).is_some_and(|s| s.passes);
        let newly_passing = story_passes && !story.passes;
        if outcome.claimed_complete && !prd_now.all_pass() {
            let left = prd_now.stories().len() - prd_now.passing();
            self.warn(format!(
                "the agent claimed COMPLETE but {left} stor{} unfinished",
                if left == 1 { "y is" } else { "ies are" }
            ));
        }
        let tasks = outcome.status_block.as_ref().and_then(|b| b.tasks_completed).unwrap_or(0);
        let progress = work_files > 0 || newly_passing || tasks > 0;
        let result = if agent_failed || handoff_problem.is_some() {
            "failed"
        } else if verified == Some(false) {
            "gate_failed"
        } else if progress {
            "progress"
        } else {
            "no_progress"
        };
        self.state.feedback = (!feedback.is_empty()).then(|| feedback.join("\n\n"));
        let handoff_failed = handoff_problem.is_some();
        // The denial explains a missing handoff better than the handoff does.
        self.iteration_note = if outcome.permission_denials.is_empty() {
            handoff_problem.as_ref().map(|e| format!("handoff: {e}"))
        } else {
            Some(format!("permission denied: {}", outcome.permission_denials.join(", ")))
        };
        self.learn_from(
            &attempt,
            gate_failure.as_ref(),
            handoff.as_ref(),
            handoff_problem.as_ref(),
            &applied,
        );
        self.end_iteration(&attempt, story_passes, result);

        // Blocked: the agent says it cannot go on without a person.
        if let Some(h) = handoff.as_ref().filter(|h| h.status == crate::handoff::Status::Blocked) {
            self.record_failure(
                &story.id,
                crate::learn::events::Category::Blocked,
                &h.blocker,
                &h.summary,
                None,
                &[],
            );
            self.message = format!("the agent is blocked on {}: {}", story.id, h.blocker);
            self.checkpoint(Phase::Idle);
            return Ok(Some(End::Blocked));
        }
        if outcome
            .status_block
            .as_ref()
            .is_some_and(|b| b.status == Some(crate::analyze::Status::Blocked))
        {
            self.message = format!(
                "the agent reported BLOCKED on {}: {}",
                story.id,
                outcome
                    .status_block
                    .as_ref()
                    .and_then(|b| b.recommendation.clone())
                    .unwrap_or_default()
            );
            self.checkpoint(Phase::Idle);
            return Ok(Some(End::Blocked));
        }

        let signals = Signals {
            iteration: u64::from(n),
            progress,
            // A missing handoff from an agent that made progress is a
            // protocol slip, not a stuck loop.
            failed: agent_failed || (handoff_failed && !progress),
            transient: false,
            asking_questions: outcome.asking_questions,
            error_signature: gate_signature.or_else(|| outcome.error_signature.clone()),
            permission_denials: outcome.permission_denials.len(),
        };
        self.checkpoint(Phase::Idle);
        if self.record_breaker(&signals) {
            self.message = format!(
                "the circuit breaker opened\n{}",
                self.breaker.report(self.cfg.circuit.cooldown)
            );
            return Ok(Some(End::CircuitOpen));
        }
        if let Some(StopReason::Budget) = stopped_by {
            return Ok(self.over_budget().or(Some(End::Budget)));
        }
        if prd_now.all_pass() {
            return Ok(None);
        }
        Ok(self.over_budget())
    }

    /// After a failed iteration: one event (merged into a rule card when it
    /// recurs) and one lesson for the story — the agent's own lesson when
    /// its handoff has one, else a deterministic excerpt of the failure.
    fn learn_from(
        &mut self,
        attempt: &Attempt<'_>,
        gate: Option<&Verdict>,
        handoff: Option<&crate::handoff::Handoff>,
        handoff_problem: Option<&crate::handoff::HandoffError>,
        applied: &[String],
    ) {
        let Attempt { story, outcome, log, .. } = *attempt;
        use crate::learn::events::Category;
        use crate::learn::lessons::{Source, excerpt};
        let evidence = log.display().to_string();
        let (category, signature, detail) = if let Some(v) = gate {
            let detail = excerpt(v.exit_code, &v.stdout_tail, &v.stderr_tail);
            (Category::GateFailure, v.signature(), detail)
        } else if let Some(e) = &outcome.error {
            let category = match e {
                AgentError::Stopped { reason: StopReason::Timeout | StopReason::Idle } => {
                    Category::AgentTimeout
                }
                AgentError::Stopped { .. } => return,
                _ => Category::AgentExit,
            };
            let text = e.to_string();
            let signature = outcome.error_signature.clone().unwrap_or_else(|| text.clone());
            let tail: String = outcome
                .final_text
                .chars()
                .rev()
                .take(2000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let exit = match e {
                AgentError::Failed { exit_code, .. } => *exit_code,
                _ => None,
            };
            let detail = format!("{text}\n{}", excerpt(exit, &tail, ""));
            (category, signature, detail)
        } else if let Some(p) = handoff_problem {
            let text = p.to_string();
            (Category::HandoffInvalid, text.clone(), text)
        } else {
            return;
        };
        self.record_failure(&story.id, category, &signature, &detail, Some(&evidence), applied);
        match handoff.and_then(|h| h.lesson.clone()) {
            Some(lesson) => self.record_lesson(&story.id, &lesson, Source::Agent),
            None => self.record_lesson(&story.id, &detail, Source::Loop),
        }
    }

    fn commit_prd(&mut self, message: &str) {
        let Some(rel) = self.repo.relative(&self.paths.prd) else { return };
        if let Err(e) = self.repo.commit_paths(&[rel.as_path()], message) {
            self.warn(format!("cannot commit prd.json: {e}"));
        }
    }

    fn note_best(&mut self, n: u32, v: &Verdict, passing: usize, head: &Option<git2::Oid>) {
        let rank = (v.passed, passing, -i64::from(v.score.failed.unwrap_or(0)));
        if self.state.best.as_ref().is_none_or(|b| rank > b.rank) {
            self.state.best = Some(Best {
                iteration: n,
                commit: head.map(|h| format!("{:.7}", h.to_string())),
                rank,
                description: format!(
                    "gate {}{}",
                    if v.passed { "passed" } else { "failed" },
                    if v.passed { String::new() } else { format!(": {}", v.score.describe()) }
                ),
            });
        }
    }

    fn end_iteration(&mut self, attempt: &Attempt<'_>, story_passes: bool, result: &str) {
        let Attempt { n, story, outcome, changes, work_files, log, started } = *attempt;
        let error =
            outcome.error.as_ref().map(ToString::to_string).or_else(|| self.iteration_note.take());
        let duration_ms = started.elapsed().as_millis() as u64;
        self.reporter.emit(&Event::IterationEnd {
            iteration: n,
            story_id: story.id.clone(),
            result: result.into(),
            duration_ms,
            exit_code: self.last_exit,
            commits: changes.commits.len(),
            files_changed: work_files,
            story_passes,
            claimed_complete: outcome.claimed_complete,
            cost_usd: outcome.cost_usd,
            tokens: outcome.tokens.map(|t| t.total()),
            error: error.clone(),
            log: log.display().to_string(),
        });
        let env = vec![
            ("RALPH_EVENT".to_string(), "iteration_end".to_string()),
            ("RALPH_ITERATION".to_string(), n.to_string()),
            ("RALPH_STORY_ID".to_string(), story.id.clone()),
            ("RALPH_STORY_TITLE".to_string(), story.title.clone()),
            ("RALPH_OUTCOME".to_string(), result.to_string()),
            ("RALPH_STORY_PASSES".to_string(), story_passes.to_string()),
            ("RALPH_COST_USD".to_string(), format!("{:.4}", outcome.cost_usd.unwrap_or(0.0))),
            ("RALPH_LOG".to_string(), log.display().to_string()),
            (
                "RALPH_AGENT_EXIT_CODE".to_string(),
                self.last_exit.map(|c| c.to_string()).unwrap_or_default(),
            ),
            ("RALPH_ERROR".to_string(), error.unwrap_or_default()),
        ];
        let hook = self.cfg.hooks.on_iteration_end.clone();
        self.hook("on_iteration_end", &hook, env);
    }

    /// Runs a hook; a failing hook is logged and never stops the loop.
    fn hook(&mut self, name: &str, command: &[String], mut env: Vec<(String, String)>) {
        let Some((program, args)) = command.split_first() else { return };
        env.extend([
            ("RALPH_RUN_ID".to_string(), self.state.run_id.clone()),
            ("RALPH_PROJECT_DIR".to_string(), self.paths.project.display().to_string()),
            ("RALPH_PRD".to_string(), self.paths.prd.display().to_string()),
            ("RALPH_TOTAL_COST_USD".to_string(), format!("{:.4}", self.state.cost_usd)),
        ]);
        let spec = agent::supervise::Spec {
            program,
            args,
            cwd: &self.paths.project,
            env_remove: &[],
            env_set: &env,
            stdin: None,
            limits: agent::supervise::Limits {
                timeout: Some(Duration::from_secs(60)),
                idle: None,
                grace: Duration::from_secs(2),
                deadline: None,
                interruptible: false,
            },
        };
        let tail = || agent::supervise::TailSink(agent::capture::Tail::new(2048));
        match agent::supervise::run(&spec, tail(), tail(), &mut || {}) {
            Ok((f, _, err)) if !f.success() => {
                let detail = err.0.text();
                self.warn(format!(
                    "hook {name} ({}) failed{}{}",
                    command.join(" "),
                    f.exit_code
                        .map(|c| format!(" with exit {c}"))
                        .unwrap_or_else(|| " (timed out or killed)".into()),
                    if detail.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", detail.trim())
                    }
                ));
            }
            Ok(_) => {}
            Err(e) => self.warn(format!("hook {name} cannot run: {e}")),
        }
    }

    fn finish(mut self, end: End) -> Result<u8, Error> {
        let prd = self.reload_prd().unwrap_or_else(|| self.good_prd.clone());
        let code = end.code();
        if self.message.is_empty() {
            self.message = match end {
                End::Interrupted(sig) if sig == libc::SIGINT => {
                    "interrupted (Ctrl-C); run ralph again to resume".into()
                }
                End::Interrupted(_) => "terminated; run ralph again to resume".into(),
                _ => end.name().replace('_', " "),
            };
        }
        let report: Vec<StoryReport> = prd
            .stories()
            .iter()
            .map(|s| StoryReport {
                id: s.id.clone(),
                title: s.title.clone(),
                claimed: self
                    .state
                    .claimed
                    .iter()
                    .chain(&self.state.passing_at_start)
                    .any(|c| c == &s.id),
                verified: self
                    .gate
                    .as_ref()
                    .map(|_| self.state.verified.iter().any(|v| v == &s.id)),
                passes: s.passes,
            })
            .collect();
        let best = (end != End::Complete).then(|| self.state.best.clone()).flatten().map(|b| {
            BestIteration { iteration: b.iteration, commit: b.commit, score: b.description }
        });
        // An interrupted run stays resumable; every other end closes the run.
        let resumable = matches!(end, End::Interrupted(_));
        self.state.outcome = Some(end.name().into());
        self.state.exit_code = Some(code);
        self.checkpoint(if resumable { Phase::Idle } else { Phase::Ended });
        let _ = store::append_jsonl(
            &self.paths.store.runs(),
            &serde_json::json!({
                "run_id": self.state.run_id,
                "ended_at": Utc::now(),
                "outcome": end.name(),
                "exit_code": code,
                "iterations": self.state.iteration,
                "passing": prd.passing(),
                "stories": prd.stories().len(),
                "cost_usd": self.state.cost_usd,
                "tokens": self.state.tokens,
            }),
        );
        let env = vec![
            (
                "RALPH_EVENT".to_string(),
                if end == End::Complete { "complete" } else { "halt" }.to_string(),
            ),
            ("RALPH_OUTCOME".to_string(), end.name().to_string()),
            ("RALPH_EXIT_CODE".to_string(), code.to_string()),
            (
                "RALPH_EXIT_REASON".to_string(),
                self.message.lines().next().unwrap_or("").to_string(),
            ),
            ("RALPH_ITERATION".to_string(), self.state.iteration.to_string()),
            ("RALPH_PASSING".to_string(), prd.passing().to_string()),
            ("RALPH_TOTAL".to_string(), prd.stories().len().to_string()),
            ("RALPH_STORY_ID".to_string(), self.state.story.clone().unwrap_or_default()),
            ("RALPH_COST_USD".to_string(), format!("{:.4}", self.state.cost_usd)),
        ];
        let hook = if end == End::Complete {
            self.cfg.hooks.on_complete.clone()
        } else {
            self.cfg.hooks.on_halt.clone()
        };
        self.hook(if end == End::Complete { "on_complete" } else { "on_halt" }, &hook, env);
        self.reporter.emit(&Event::RunEnd {
            outcome: end.name().into(),
            exit_code: code,
            iterations: self.state.iteration,
            passing: prd.passing(),
            stories: prd.stories().len(),
            cost_usd: self.state.cost_usd,
            tokens: self.state.tokens,
            duration_ms: self.started.elapsed().as_millis() as u64,
            message: self.message.clone(),
            report,
            best,
        });
        Ok(code)
    }
}

/// One agent run and what it changed: what an iteration's end reports.
#[derive(Clone, Copy)]
struct Attempt<'a> {
    n: u32,
    story: &'a crate::prd::Story,
    outcome: &'a Outcome,
    changes: &'a crate::git::Changes,
    work_files: usize,
    log: &'a Path,
    started: Instant,
}

fn why_text(why: Why) -> &'static str {
    match why {
        Why::UsageLimit => "the agent's usage limit",
        Why::CallsPerHour => "the calls-per-hour limit",
    }
}

/// The story object as it appears in prd.json (unknown fields included).
fn story_value(prd: &Prd, story: &crate::prd::Story) -> serde_json::Value {
    prd.story_json(story.index).unwrap_or_else(|| serde_json::to_value(story).unwrap_or_default())
}
