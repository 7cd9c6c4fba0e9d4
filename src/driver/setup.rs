//! Starting a run: the lock, the checkpoint of a run to resume, prd.json,
//! the branch and its archive, the breaker, and what a crashed run left
//! behind.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Local, Utc};

use super::{Options, Paths, Run};
use crate::agent::Agents;
use crate::circuit::Breaker;
use crate::config::Config;
use crate::error::Error;
use crate::event::{Event, Level, Reporter};
use crate::gate::Gate;
use crate::git::{BranchAction, Repo};
use crate::limits::Limits;
use crate::prd::Prd;
use crate::state::{Phase, RunState};
use crate::store;

/// Everything up to the first iteration; the run's start event is emitted.
pub(super) fn start<'a>(
    paths: &'a Paths,
    opts: &'a Options,
    reporter: &'a mut dyn Reporter,
) -> Result<Run<'a>, Error> {
    crate::signals::install();
    crate::signals::become_subreaper();
    preflight(paths, opts)?;
    let env = |k: &str| std::env::var(k).ok();
    let sandbox = Arc::new(crate::sandbox::Sandbox::new(opts.config.sandbox.clone(), &env)?);
    let lock = take_the_work_tree(paths, reporter)?;
    let previous = Previous::read(paths, opts, reporter)?;
    settle_the_tree(paths, opts, previous.resume.is_some(), reporter)?;
    let prd = load_prd(paths, previous.crashed_mid_iteration(), reporter)?;
    let repo = Repo::discover(&paths.project)?;
    let agents = configured_agents(&opts.config, &prd, &repo)?;
    let template = load_template(paths, opts)?;
    let now = Utc::now();
    let (limits, breaker) = load_limits_and_breaker(paths, opts, now, reporter)?;
    let state = run_state(previous.resume.as_ref(), opts, now);
    let log_dir = make_log_dir(paths, opts, &state)?;
    let kit = kit(paths, opts, &prd, agents, template, log_dir, sandbox)?;
    let mut run = Run {
        paths,
        opts,
        cfg: &opts.config,
        reporter,
        lock,
        repo,
        breaker,
        limits,
        good_prd: prd.clone(),
        clock: clock(&opts.config, &state),
        budget_warned: Vec::new(),
        kit,
        state,
    };
    let prd = run.put_right(prd, &previous)?;
    run.take_up(&prd, previous.resume.as_ref());
    run.announce(&prd, previous.resume.as_ref());
    run.save_checkpoint(Phase::Idle)?;
    Ok(run)
}

/// The store made, its lock taken (one run per work tree), the watchdog
/// started, and state an older ralph kept in `.ralph/` moved out of it.
fn take_the_work_tree(paths: &Paths, reporter: &mut dyn Reporter) -> Result<store::Lock, Error> {
    paths
        .store
        .ensure()
        .map_err(|e| Error::io(format!("create {}", paths.store.root().display()), e))?;
    let (lock, previous) = match paths.store.lock(&paths.prd) {
        Ok(l) => l,
        Err(store::LockError::Busy(holder)) => {
            return Err(Error::Locked { holder, lock: paths.store.lock_path() });
        }
        Err(store::LockError::Io(e)) => return Err(Error::io("take the lock", e)),
    };
    // If ralph dies (kill -9), what its children started dies with it.
    if let Err(e) = crate::watchdog::start() {
        warn(
            reporter,
            Some(format!(
                "cannot start ralph's watchdog ({e}): if ralph is killed, what its agent started \
                 runs on until the next ralph"
            )),
        );
    }
    if let store::PreviousHolder::Dead(pid) = previous {
        warn(
            reporter,
            Some(format!(
                "the previous ralph (pid {pid}) ended without cleaning up; taking over its lock"
            )),
        );
    }
    let moved =
        paths.store.migrate().map_err(|e| Error::io("move ralph's state out of .ralph/", e))?;
    if !moved.is_empty() {
        reporter.emit(&Event::Notice {
            level: Level::Info,
            message: format!(
                "moved ralph's state ({}) from {} to {}, out of reach of `git clean`",
                moved.join(", "),
                paths.store.work().display(),
                paths.store.root().display()
            ),
        });
    }
    Ok(lock)
}

/// What the checkpoint says of the run before this one.
struct Previous {
    /// A run that did not end: crashed, killed or interrupted.
    unfinished: Option<RunState>,
    /// The run this one goes on with: the unfinished one, unless `--fresh`.
    resume: Option<RunState>,
}

impl Previous {
    /// Reads the checkpoint. A run whose process still lives is busy, never
    /// taken for an unfinished one.
    fn read(paths: &Paths, opts: &Options, reporter: &mut dyn Reporter) -> Result<Self, Error> {
        let (checkpoint, warning) =
            RunState::load(&paths.store).map_err(|e| Error::io("read the checkpoint", e))?;
        warn(reporter, warning);
        if let Some(previous) = &checkpoint {
            warn(reporter, dropped_gate(previous, opts));
        }
        let unfinished = checkpoint.filter(|s| s.phase != Phase::Ended);
        if let Some(owner) = unfinished.as_ref().and_then(|s| s.owner.as_deref()) {
            still_running(owner, paths)?;
        }
        let resume = unfinished.clone().filter(|_| !opts.fresh);
        Ok(Previous { unfinished, resume })
    }

    /// Whether the run died with an agent or the gate at work, when
    /// prd.json may be half-written.
    fn crashed_mid_iteration(&self) -> bool {
        self.unfinished.as_ref().is_some_and(|s| matches!(s.phase, Phase::Agent | Phase::Gate))
    }
}

/// The warning for a run without the gate the previous run had. The gate is
/// a setting, not remembered: a run started without the one the last run
/// had would take the agent's word for every story.
fn dropped_gate(previous: &RunState, opts: &Options) -> Option<String> {
    if previous.gate.is_empty()
        || !opts.config.gate.command.is_empty()
        || opts.mode.worker().is_some()
    {
        return None;
    }
    Some(format!(
        "the previous run ({}) checked stories with the gate `{}`; this one has no gate, so a \
         story the agent marks counts as passing unverified. Set gate.command in \
         .ralph/config.toml (or pass --gate) to keep it",
        previous.run_id,
        previous.gate.join(" ")
    ))
}

/// The work tree made ready before anything reads it: a parallel run's
/// interrupted advance finished, and a person's uncommitted edits refused.
fn settle_the_tree(
    paths: &Paths,
    opts: &Options,
    resuming: bool,
    reporter: &mut dyn Reporter,
) -> Result<(), Error> {
    // A parallel run killed between moving its branch and bringing the work
    // tree along left it half-way: finished before anything reads the tree
    // (or takes the merged stories' files for a person's edits).
    if opts.mode.worker().is_none() {
        finish_interrupted_advance(paths, reporter);
    }
    // A worker's worktree is ralph's; a resumed run's changes are its own.
    if !resuming && opts.mode.worker().is_none() && !opts.config.run.allow_dirty {
        super::dirty::refuse_a_dirty_tree(paths)?;
    }
    Ok(())
}

/// The configured agents, each told what the gate runs and with its
/// scratch files kept out of git.
fn configured_agents(cfg: &Config, prd: &Prd, repo: &Repo) -> Result<Agents, Error> {
    let mut agents = Agents::configured(&cfg.agent)?;
    let gate_commands: Vec<Vec<String>> =
        crate::gate::commands(&cfg.gate.command, prd).into_iter().map(|(c, _)| c).collect();
    for backend in agents.all_mut() {
        // The agent's own scratch files (aider's chat history, its tag
        // cache) are neither work nor anything to commit.
        for file in backend.tool.scratch_files() {
            repo.exclude_locally(std::path::Path::new(file));
        }
        // Safe mode lets the agent run what the gate runs.
        backend.gate_commands = gate_commands.clone();
    }
    Ok(agents)
}

/// limits.json and circuit.json; the breaker given its start (a cooldown
/// over, or a reset asked for) and saved.
fn load_limits_and_breaker(
    paths: &Paths,
    opts: &Options,
    now: DateTime<Utc>,
    reporter: &mut dyn Reporter,
) -> Result<(Limits, Breaker), Error> {
    let cfg = &opts.config;
    let (limits, warning) =
        Limits::load(&paths.store).map_err(|e| Error::io("read the limits", e))?;
    warn(reporter, warning);
    let (mut breaker, warning) =
        Breaker::load(&paths.store, now).map_err(|e| Error::io("read the circuit breaker", e))?;
    warn(reporter, warning);
    let reset = cfg.circuit.auto_reset || opts.fresh;
    if let Some(t) = breaker.on_start(now, reset, cfg.circuit.cooldown)
        && let Some(from) = t.from
    {
        reporter.emit(&Event::Circuit { from, to: t.to, reason: t.reason });
    }
    breaker.save(&paths.store).map_err(|e| Error::io("write the circuit breaker", e))?;
    Ok((limits, breaker))
}

/// The checkpoint this run keeps: the resumed run's, or a new run's.
fn run_state(resume: Option<&RunState>, opts: &Options, now: DateTime<Utc>) -> RunState {
    let mut state = match resume {
        Some(s) => s.clone(),
        None => RunState::new(crate::state::new_run_id(Local::now()), now, opts.max_iterations),
    };
    state.owner = Some(crate::process::instance());
    state.gate = opts.config.gate.command.clone();
    state
}

/// The run's log folder (a worker's is the one its run gave it), made.
fn make_log_dir(paths: &Paths, opts: &Options, state: &RunState) -> Result<PathBuf, Error> {
    let log_dir = match opts.mode.worker() {
        Some(w) => w.log_dir.clone(),
        None => paths.store.run_log_dir(&state.run_id),
    };
    std::fs::create_dir_all(&log_dir)
        .map_err(|e| Error::io(format!("create {}", log_dir.display()), e))?;
    Ok(log_dir)
}

/// What every iteration is built and judged with.
fn kit(
    paths: &Paths,
    opts: &Options,
    prd: &Prd,
    agents: Agents,
    template: String,
    log_dir: PathBuf,
    sandbox: Arc<crate::sandbox::Sandbox>,
) -> Result<super::Kit, Error> {
    let cfg = &opts.config;
    let redactor = crate::redact::Redactor::from_env();
    Ok(super::Kit {
        agents,
        gate: gate(cfg, prd, &redactor, &sandbox),
        template,
        branch: match opts.mode.worker() {
            Some(w) => Some(w.branch.clone()),
            None => prd.branch_name().map(str::to_string),
        },
        log_dir,
        redactor,
        patterns: crate::analyze::Patterns::configured(&cfg.patterns)
            .map_err(|e| Error::Config(e.into()))?,
        reusable_snapshot: None,
        last_gate_passed: None,
        protected: Some(protected(paths, cfg)?),
        sandbox,
        git_dir_cache: Default::default(),
    })
}

/// The gate, when there is one: `gate.command`, or a story's own `verify`.
fn gate(
    cfg: &Config,
    prd: &Prd,
    redactor: &crate::redact::Redactor,
    sandbox: &Arc<crate::sandbox::Sandbox>,
) -> Option<Gate> {
    let has_gate = !cfg.gate.command.is_empty() || prd.stories().iter().any(|s| s.verify.is_some());
    has_gate.then(|| Gate {
        command: cfg.gate.command.clone(),
        timeout: cfg.gate.timeout,
        grace: cfg.agent.grace,
        tail_bytes: cfg.gate.tail_bytes,
        fatal_signatures: cfg.gate.fatal_signatures.clone(),
        redactor: Some(redactor.clone()),
        sandbox: Some(sandbox.clone()),
        log_cap: cfg.logs.max_file_bytes,
    })
}

/// The run's clock, started now; a resumed run's time budget counts what
/// its earlier processes spent.
fn clock(cfg: &Config, state: &RunState) -> super::Clock {
    let deadline = cfg
        .budget
        .max_duration
        .map(|d| Instant::now() + d.saturating_sub(Duration::from_millis(state.elapsed_ms)));
    super::Clock {
        started: Instant::now(),
        started_at: std::time::SystemTime::now(),
        elapsed_before: state.elapsed_ms,
        deadline,
    }
}

/// A run whose process still lives is never taken for an interrupted one,
/// whatever happened to the lock: it is busy. A process that has let go of
/// the lock and is on its way out is given a moment to finish.
fn still_running(owner: &str, paths: &Paths) -> Result<(), Error> {
    let until = Instant::now() + Duration::from_secs(3);
    while crate::process::instance_running(owner) {
        if Instant::now() >= until {
            let pid = owner.split_once('.').and_then(|(pid, _)| pid.parse().ok());
            let holder = store::Holder { pid, prd: Some(paths.prd.clone()) };
            return Err(Error::Locked { holder, lock: paths.store.lock_path() });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// [`super::finish_advance`], with git's stale locks cleared first; a
/// failure is a warning (the parallel run's own start tries again).
fn finish_interrupted_advance(paths: &Paths, reporter: &mut dyn Reporter) {
    // Nothing journalled: nothing to do (and git's locks are the run's to
    // clear, with a word for each).
    if super::Board::load(&paths.store).is_none_or(|b| b.merging.is_none()) {
        return;
    }
    let Ok(repo) = Repo::discover(&paths.project) else { return };
    if let Ok(cleared) =
        repo.clear_stale_locks(std::time::SystemTime::now(), Duration::from_secs(5))
    {
        for lock in cleared {
            warn(
                reporter,
                Some(format!(
                    "removed {}: a git lock left by a process that died mid-write",
                    lock.display()
                )),
            );
        }
    }
    if let Err(e) = super::finish_advance(&repo, paths) {
        warn(reporter, Some(format!("cannot bring the work tree up to the run branch: {e}")));
    }
}

/// How the run's start names its agents: "claude (opus), then codex".
fn describe(agents: &Agents) -> String {
    let mut names = agents.all().iter().map(|b| b.describe());
    let first = names.next().unwrap_or_default();
    let rest: Vec<String> = names.collect();
    if rest.is_empty() { first } else { format!("{first}, then {}", rest.join(", ")) }
}

/// Everything that can be wrong before a run starts and that no run can
/// fix, checked before anything is created or changed: the PRD is there
/// (and not `ralph init`'s untouched example), the project is in a git
/// repository, the agent can start, and every gate program exists. A
/// broken prd.json is refused here only when ralph has never run in the
/// project; otherwise a crashed run may have left it half-written, which
/// the start repairs.
fn preflight(paths: &Paths, opts: &Options) -> Result<(), Error> {
    let cfg = &opts.config;
    paths.require_prd()?;
    let bytes = store::read_regular(&paths.prd).map_err(|source| {
        Error::Prd(crate::prd::PrdError::Read { path: paths.prd.clone(), source })
    })?;
    if bytes == crate::prd::EXAMPLE.as_bytes() {
        return Err(Error::Usage(format!(
            "{} is still the example `ralph init` wrote (the TaskBoard stories): describe your \
             own work in it first, or ask your agent to \"use the prd skill, then the ralph skill\"",
            paths.prd.display()
        )));
    }
    let prd = match Prd::parse(&bytes, &paths.prd) {
        Ok(prd) => Some(prd),
        Err(e) if !paths.store.root().exists() => return Err(e.into()),
        Err(_) => None,
    };
    Repo::discover(&paths.project)?;
    let agents = Agents::configured(&cfg.agent)?;
    for (i, backend) in agents.all().iter().enumerate() {
        backend.preflight(crate::process::euid() == 0, &|k| std::env::var(k).ok()).map_err(
            |source| crate::agent::SetupError::Preflight {
                fallback: (i > 0).then_some(backend.tool),
                source,
            },
        )?;
    }
    if let Some(prd) = &prd {
        crate::gate::check_programs_in(&cfg.gate.command, prd, &paths.project)
            .map_err(Error::Gate)?;
    }
    Ok(())
}

/// prd.json. A file broken while a crashed run's agent was at work is most
/// likely the agent's half-finished write: the last good copy is restored
/// (the broken one kept). Otherwise it is the user's file, and a broken
/// one is an error that changes nothing.
fn load_prd(
    paths: &Paths,
    crashed_mid_iteration: bool,
    reporter: &mut dyn Reporter,
) -> Result<Prd, Error> {
    match Prd::load(&paths.prd) {
        Ok(prd) => Ok(prd),
        Err(e) if crashed_mid_iteration => {
            let good = Prd::load(&paths.store.last_prd()).map_err(|_| Error::Prd(e))?;
            let kept = paths.store.path("prd.broken.json");
            let _ = std::fs::copy(&paths.prd, &kept);
            good.save(&paths.prd)
                .map_err(|e| Error::io(format!("restore {}", paths.prd.display()), e))?;
            warn(
                reporter,
                Some(format!(
                    "prd.json was left broken by the interrupted run; restored the last good copy (the broken one is in {})",
                    kept.display()
                )),
            );
            Ok(good)
        }
        Err(e) => Err(e.into()),
    }
}

/// The prompt template: `--prompt`, `run.prompt`, `.ralph/prompt.md`, or
/// the built-in one. A leading HTML comment is a note to the person who
/// edits the file (`ralph init` writes one): the agent never sees it.
pub(super) fn load_template(paths: &Paths, opts: &Options) -> Result<String, Error> {
    let explicit = opts.prompt_file.clone().or_else(|| opts.config.run.prompt.clone());
    let file = explicit.or_else(|| Some(paths.store.prompt()).filter(|p| p.exists()));
    match file {
        Some(p) => store::read_regular(&p)
            .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
            .map(|text| crate::prompt::without_leading_comments(&text).to_string())
            .map_err(|e| {
                Error::Usage(format!("cannot read the prompt template {}: {e}", p.display()))
            }),
        None => Ok(crate::prompt::BUILTIN.to_string()),
    }
}

/// The paths the agent may not change: the built-in ones, `gate.protect`,
/// and the files the gate command names that exist now.
fn protected(
    paths: &Paths,
    cfg: &crate::config::Config,
) -> Result<crate::oracle::protect::Protected, Error> {
    let exists = |rel: &str| paths.project.join(rel).is_file();
    let files = crate::oracle::protect::gate_files(&cfg.gate.command, &exists);
    Ok(crate::oracle::protect::Protected::new(&cfg.gate.protect, &files)?)
}

fn warn(reporter: &mut dyn Reporter, warning: Option<String>) {
    if let Some(message) = warning {
        reporter.emit(&Event::Notice { level: Level::Warn, message });
    }
}

impl Run<'_> {
    /// What earlier runs left, put right: git's stale locks, the branch
    /// (with its archive and progress.txt), pull requests closed unmerged,
    /// a crashed run's processes and claims, a parallel run's worktrees.
    /// Returns prd.json as it now is.
    fn put_right(&mut self, prd: Prd, previous: &Previous) -> Result<Prd, Error> {
        self.clear_stale_git_locks()?;
        // A worker's worktree is already on its story's branch.
        if self.opts.mode.worker().is_none() {
            self.setup_branch(&prd)?;
            if previous.resume.is_none() {
                self.reopen_closed();
            }
        }
        if let Some(old) = &previous.unfinished {
            self.clean_up_after(old)?;
        }
        // One story at a time now: a parallel run's worktrees have no owner.
        if matches!(self.opts.mode, super::Mode::Single) {
            self.put_away_parallel_leftovers();
        }
        let prd = self.reload_prd().unwrap_or(prd);
        self.save_last_prd(&prd);
        Ok(prd)
    }

    /// Where the run starts counting from: the resumed run's iteration, a
    /// worker's feedback, the stories passing before it began.
    fn take_up(&mut self, prd: &Prd, resume: Option<&RunState>) {
        if let Some(old) = resume {
            self.resume(old, self.opts.explicit_max.then_some(self.opts.max_iterations));
        }
        if let Some(feedback) = self.opts.mode.worker().and_then(|w| w.feedback.clone()) {
            self.state.feedback = Some(feedback);
        }
        if resume.is_none() {
            self.state.passing_at_start =
                prd.stories().iter().filter(|s| s.passes).map(|s| s.id.clone()).collect();
        }
    }

    /// The run's start event, the settings it ignored, and what the agent
    /// may touch (said once per run: a worker's run said it).
    fn announce(&mut self, prd: &Prd, resume: Option<&RunState>) {
        let cfg = self.cfg;
        self.reporter.emit(&Event::RunStart {
            run_id: self.state.run_id.clone(),
            project: prd.project().map(str::to_string),
            branch: self.repo.current_branch(),
            prd: self.paths.prd.display().to_string(),
            agent: describe(&self.kit.agents),
            max_iterations: self.state.max_iterations,
            stories: prd.stories().len(),
            passing: prd.passing(),
            resumed_from: resume.map(|s| s.iteration),
            budget: crate::event::Budget {
                max_cost_usd: cfg.budget.max_cost,
                max_duration_s: cfg.budget.max_duration.map(|d| d.as_secs()),
                max_tokens: cfg.budget.max_tokens,
            },
            tool: Some(self.kit.agents.current().tool.to_string()),
            model: self.kit.agents.current().model.clone(),
        });
        for ignored in &cfg.ignored {
            self.warn(ignored.to_string());
        }
        let sandbox = &self.kit.sandbox;
        if self.opts.mode.worker().is_none() && sandbox.support != crate::sandbox::Support::Off {
            let agent = self.kit.agents.current();
            let line = sandbox.describe(Some(agent.tool), &self.paths.project, agent.program());
            let level = if sandbox.abi().is_some() { Level::Info } else { Level::Warn };
            self.reporter.emit(&Event::Notice { level, message: line });
        }
    }
    /// Archive on branch change, `.last-branch`, progress.txt, and the branch checkout.
    fn setup_branch(&mut self, prd: &Prd) -> Result<(), Error> {
        let p = self.paths;
        let last = store::read_regular(&p.last_branch)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let changed = match (prd.branch_name(), last.as_deref()) {
            (Some(current), Some(last)) if current != last => Some(last.to_string()),
            _ => None,
        };
        // What the previous run leaves behind is read first: switching
        // branches may replace progress.txt with the other branch's copy.
        let previous = changed.as_ref().map(|last| {
            let prd = store::read_regular(&p.store.last_prd()).ok().filter(|bytes| {
                Prd::parse(bytes, &p.store.last_prd())
                    .ok()
                    .and_then(|old| old.branch_name().map(str::to_string))
                    .as_deref()
                    == Some(last.as_str())
            });
            (prd, store::read_regular(&p.progress).ok())
        });
        // The branch comes before any change of ralph's own: it may refuse
        // (uncommitted changes), and then nothing must have been touched.
        if let Some(branch) = prd.branch_name() {
            self.check_out(branch)?;
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
        // A remote worker's clone only follows the run branch: its stories'
        // worktrees make progress.txt, and the first delivery brings it in
        // (one made here would stand in its way on every delivery).
        if self.opts.mode.remote().is_none()
            && crate::archive::ensure_progress(&p.progress, Local::now())
                .map_err(|e| Error::io(format!("create {}", p.progress.display()), e))?
        {
            self.notice(format!("created {}", p.progress.display()));
        }
        Ok(())
    }

    /// The run's branch checked out (made when there is none), carrying
    /// prd.json and progress.txt along.
    fn check_out(&mut self, branch: &str) -> Result<(), Error> {
        let p = self.paths;
        let carry: Vec<_> =
            [&p.prd, &p.progress].into_iter().filter_map(|f| self.repo.relative(f)).collect();
        match self.repo.ensure_branch_carrying(branch, &carry)? {
            BranchAction::AlreadyOn => {}
            BranchAction::SwitchedTo => self.notice(format!("switched to branch {branch}")),
            BranchAction::Created { from } => {
                // The run's base (a branch, not a detached commit or an
                // empty repository): where its trusted settings are read
                // from, and what its pull requests are opened against.
                if self.repo.branch_tip(&from).is_some() {
                    crate::oracle::base::record_base(&p.project, branch, &from);
                }
                self.notice(format!("created branch {branch} from {from}"));
            }
        }
        Ok(())
    }

    /// After a crash (or a run interrupted mid-iteration): ends what the
    /// dead run left running, and sets prd.json's `passes` and `verify`
    /// back to what they were before the iteration it died in (the last
    /// good copy), except for stories that iteration verified. Runs for
    /// `--fresh` too: starting over must not inherit an unverified "passes".
    fn clean_up_after(&mut self, old: &RunState) -> Result<(), Error> {
        self.state.agent_pgid = None;
        self.end_what_the_dead_run_left(old);
        if !matches!(old.phase, Phase::Agent | Phase::Gate) {
            return Ok(());
        }
        let mut keep = old.verified.clone();
        if let Some(p) = old.pending.as_ref().filter(|_| old.phase == Phase::Gate) {
            self.finish_verdict(old.iteration, p)?;
            keep.push(p.story.clone());
        }
        let Some(mut prd) = self.reload_prd() else { return Ok(()) };
        let before = Prd::load(&self.paths.store.last_prd()).unwrap_or_else(|_| prd.clone());
        let restored = prd.restore_claims(&before, &keep);
        if restored.is_empty() {
            return Ok(());
        }
        self.save_prd(&prd)?;
        for id in restored {
            if old.story.as_deref() == Some(id.as_str()) {
                self.warn(format!(
                    "iteration {} died before {id} was verified: {id} is marked unfinished again",
                    old.iteration
                ));
            } else {
                self.warn(format!(
                    "iteration {} changed {id} in prd.json and died before ralph checked it: set back",
                    old.iteration
                ));
            }
        }
        Ok(())
    }

    /// Finishes a verdict the dead run recorded but did not get to carry
    /// out: the story's `passes` in prd.json, and ralph's commit.
    fn finish_verdict(&mut self, iteration: u32, p: &crate::state::Pending) -> Result<(), Error> {
        let mut prd = self.reload_prd().unwrap_or_else(|| self.good_prd.clone());
        if prd.set_passes(&p.story, p.passes) {
            self.save_prd(&prd)?;
        }
        if let Some((paths, message)) = &p.commit {
            let paths: Vec<std::path::PathBuf> = paths.iter().map(Into::into).collect();
            self.commit(&p.story, super::judge::Commit::Work, &paths, message)?;
        }
        self.notice(format!(
            "iteration {iteration} verified {} before ralph died: finished recording it",
            p.story
        ));
        Ok(())
    }

    /// Ends the dead run's agent process group and every process carrying
    /// its run id and project (those that left the group for a session of
    /// their own): TERM, one grace period for all of them, KILL. A Ctrl-C
    /// while it waits kills them at once.
    fn end_what_the_dead_run_left(&mut self, old: &RunState) {
        use crate::process::{
            Signal, group_alive, processes_of_run, running, signal_group, signal_pid,
        };
        let project = &self.paths.project;
        let group = old.agent_pgid.filter(|&p| p > 1 && crate::process::group_works_in(p, project));
        let strays = processes_of_run(&old.run_id, project);
        if group.is_none() && strays.is_empty() {
            return;
        }
        let grace = self.cfg.agent.grace;
        self.warn(super::iteration::stopping_message(
            crate::analyze::StopReason::Interrupted,
            grace,
            "what the interrupted run left running",
        ));
        if let Some(pgid) = group {
            signal_group(pgid, Signal::Term);
        }
        strays.iter().for_each(|&pid| signal_pid(pid, Signal::Term));
        let until = Instant::now() + grace;
        let signals = crate::signals::count();
        while Instant::now() < until
            && crate::signals::count() == signals
            && (group.is_some_and(group_alive) || strays.iter().any(|&p| running(p)))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(pgid) = group {
            signal_group(pgid, Signal::Kill);
            self.warn(format!("ended process group {pgid}, left running by the interrupted run"));
        }
        let left = processes_of_run(&old.run_id, project);
        left.iter().for_each(|&pid| signal_pid(pid, Signal::Kill));
        if !strays.is_empty() {
            let n = crate::text::count(strays.len(), "process", "processes");
            self.warn(format!("ended {n} of the interrupted run that had left its process group"));
        }
    }
}
