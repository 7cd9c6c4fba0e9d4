//! One iteration, up to the verdict: the prompt, a fresh agent, and the
//! facts of what it did — its output, prd.json, git, the gate, the handoff.
//!
//! Nothing here decides: [`Run::iteration`] gathers [`Facts`], `judge`
//! decides, and `verdict` carries the decision out. From the moment the
//! agent exists until the verdict is carried out, a [`ClaimGuard`] holds
//! prd.json's claims: any early exit (an error reading git, a log that
//! cannot be written) sets them back.

use std::path::PathBuf;
use std::time::Instant;

use chrono::Utc;

use super::judge::{
    self, Claim, Evidence, Facts, GateFailure, GateRun, GitCheck, HandoffFacts, PrdCheck,
    StoryFacts, Tamper,
};
use super::records::PrdDamage;
use super::verdict::ClaimGuard;
use super::{End, Run};
use crate::agent::{self, AgentEvent, AgentRun};
use crate::analyze::{Analyzer, Outcome};
use crate::error::Error;
use crate::event::Event;
use crate::gate::Verdict;
use crate::git::{Changes, Snapshot};
use crate::oracle::vanish::Flag;
use crate::prd::{Prd, Story};
use crate::state::{FileMark, Phase};

/// The iteration's starting point: the snapshot, and the protected files
/// a person left uncommitted (which git cannot give back).
#[derive(Clone, Copy)]
pub(super) struct Start<'a> {
    before: &'a Snapshot,
    saved: &'a super::oracle::Saved,
    /// The git directory's config and hooks.
    git_dir: &'a crate::oracle::git_dir::Mark,
}

/// What the iteration gathered, beyond the facts the verdict needs.
pub(super) struct Collected {
    pub n: u32,
    /// The agent that ran it (its name).
    pub agent: &'static str,
    pub story: Story,
    pub facts: Facts,
    /// prd.json as the agent left it, with what it may not change set
    /// back; else what damaged it (the last good copy is restored).
    pub prd: Result<Prd, PrdDamage>,
    /// Other stories the agent marked passing (set back, but reported).
    pub other_claims: Vec<String>,
    pub changes: Changes,
    /// Files the agent changed and left uncommitted (ralph's own excluded).
    pub leftovers: Vec<PathBuf>,
    pub verdict: Option<Verdict>,
    pub handoff: Option<crate::handoff::Handoff>,
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub log: PathBuf,
    pub started: Instant,
    /// Armed rules the prompt carried.
    pub applied: Vec<String>,
}

impl Run<'_> {
    /// One iteration. `Ok(Some(end))` stops the run.
    pub(super) fn iteration(&mut self, prd: &Prd, story: &Story) -> Result<Option<End>, Error> {
        let n = self.state.iteration + 1;
        self.state.iteration = n;
        self.state.story = Some(story.id.clone());
        self.state.story_passed_before = story.passes;
        let started = Instant::now();
        let (prompt, applied) = self.prompt(prd, story, n);
        // A retry after a usage limit or an API error keeps its number;
        // its files get a suffix so the earlier attempt's log survives.
        let stem = (1..)
            .map(|k| if k == 1 { format!("iter-{n}") } else { format!("iter-{n}.retry-{k}") })
            .find(|stem| !self.kit.log_dir.join(format!("{stem}.log")).exists())
            .unwrap_or_else(|| format!("iter-{n}"));
        let prompt_path = self.kit.log_dir.join(format!("{stem}.prompt.md"));
        let log = self.kit.log_dir.join(format!("{stem}.log"));
        std::fs::write(&prompt_path, prompt.as_bytes())
            .map_err(|e| Error::io(format!("write {}", prompt_path.display()), e))?;
        // A handoff left by an earlier iteration must never pass for this one's.
        crate::handoff::clear(&self.paths.store.handoff())
            .map_err(|e| Error::io("remove the last iteration's handoff", e))?;
        // `ralph monitor` follows the running iteration's log by this name:
        // a second name of the log file, as a hard link makes no inode of
        // its own, where a symbolic link is one more made and freed per
        // iteration (see `store::write_kept` for why that counts).
        let current = self.paths.store.logs_dir().join("current.log");
        let _ = std::fs::remove_file(&current);
        if std::fs::File::create(&log).is_ok() {
            let _ = std::fs::hard_link(&log, &current);
        }
        self.reporter.emit(&Event::IterationStart {
            iteration: n,
            max_iterations: self.state.max_iterations,
            story_id: story.id.clone(),
            story_title: story.title.clone(),
            agent: self.kit.agents.current_name().into(),
            resolve: false,
        });
        let tally = self.state.stories.entry(story.id.clone()).or_default();
        if !tally.work.agents.iter().any(|a| a == self.kit.agents.current_name()) {
            tally.work.agents.push(self.kit.agents.current_name().into());
        }
        self.clear_stale_git_locks()?;
        let before = match self.kit.reusable_snapshot.take() {
            Some(s) => s,
            None => self.repo.snapshot()?,
        };
        self.state.call_at = None;
        if self.cfg.limits.calls_per_hour > 0 {
            let now = Utc::now();
            self.limits.record_call(now);
            self.state.call_at = Some(now);
            if let Err(e) = self.limits.save(&self.paths.store) {
                return Err(Error::io(format!("write {}", self.paths.store.limits().display()), e));
            }
        }
        let saved = self.save_protected(&before);
        let git_dir =
            crate::oracle::git_dir::mark_with(&self.repo.common_dir(), &mut self.kit.git_dir_cache);
        // Where this iteration runs again from if ralph's end cuts it off.
        self.state.progress_at_start = match crate::store::read_regular(&self.paths.progress) {
            Ok(bytes) => Some(FileMark::of(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(FileMark::of(b"")),
            Err(_) => None,
        };
        let refs = self.repo.refs();
        let agent = self.run_agent(n, story, &prompt, &prompt_path, &log)?;
        // From here prd.json may hold the agent's claims.
        let guard = ClaimGuard::new(&self.paths.prd, prd);
        let git = self.check_git(&refs);
        let start = Start { before: &before, saved: &saved, git_dir: &git_dir };
        let collected = self.collect(n, prd, story, start, agent, git, log, started, applied)?;
        let judgement = judge::judge(&collected.facts);
        self.carry_out(guard, collected, judgement)
    }

    /// Starts a fresh agent and waits for it, streaming its output.
    pub(super) fn run_agent(
        &mut self,
        n: u32,
        story: &Story,
        prompt: &str,
        prompt_path: &std::path::Path,
        log: &std::path::Path,
    ) -> Result<AgentRun, Error> {
        let inherited = crate::agent::backend::InheritedEnv::current();
        let mut invocation =
            self.kit.agents.current().invocation_in(prompt, prompt_path, inherited)?;
        invocation.env_set.extend(agent_env(&self.state.run_id, self.paths, n, &story.id));
        // The checkpoint for this phase is written the moment the agent
        // exists (with its process group): before that there is nothing a
        // crash could leave half-done.
        self.state.phase = Phase::Agent;
        self.state.elapsed_ms = self.elapsed_ms();
        let analyzer = Analyzer::with_patterns(invocation.format, self.kit.patterns.clone());
        let child = self.agent_sandbox(&invocation)?;
        let place = agent::Place {
            cwd: &self.paths.project,
            log,
            limits: self.agent_time_limits(),
            sandbox: child.as_ref(),
            log_cap: self.cfg.logs.max_file_bytes,
        };
        let result = {
            let reporter = &mut *self.reporter;
            let store = self.paths.store.clone();
            let mut on_event = agent_watcher(n, reporter, self.state.clone(), store);
            let watch = agent::Watch { show: self.opts.agent_output, on_event: &mut on_event };
            agent::run(&invocation, place, analyzer, &self.kit.redactor, watch)
        };
        self.state.agent_pgid = None;
        let run = result.map_err(|source| agent::SetupError::Spawn {
            source,
            hint: "check the agent command (--tool / --agent-cmd) and that it is installed",
        })?;
        self.agent_ended(n, log, run)
    }

    /// The agent's time limits: `agent.timeout` (0: none), its idle
    /// timeout and grace, and the run's deadline.
    fn agent_time_limits(&self) -> agent::supervise::TimeLimits {
        agent::supervise::TimeLimits {
            timeout: Some(self.cfg.agent.timeout).filter(|t| !t.is_zero()),
            idle: self.cfg.agent.idle_timeout,
            grace: self.cfg.agent.grace,
            deadline: self.clock.deadline,
            interruptible: true,
        }
    }

    /// The sandbox the agent runs in (`None`: unconfined), its temp dir made.
    fn agent_sandbox(
        &self,
        invocation: &crate::agent::backend::Invocation,
    ) -> Result<Option<crate::sandbox::Child>, Error> {
        let backend = self.kit.agents.current();
        self.kit
            .sandbox
            .child(
                Some(backend.tool),
                &self.paths.project,
                &invocation.program,
                &invocation.env_set,
            )
            .map_err(|e| Error::io("make the agent's sandbox temp dir", e))
    }

    /// What ralph makes of an agent's run once it ended: a log it could
    /// not write is fatal; sandbox denials and leftover processes are told;
    /// its cost (estimated from its tokens when it reported none) is added
    /// to the run's.
    fn agent_ended(
        &mut self,
        n: u32,
        log: &std::path::Path,
        mut run: AgentRun,
    ) -> Result<AgentRun, Error> {
        if let Some(e) = run.log_error.take() {
            return Err(Error::io(format!("write the agent log {}", log.display()), e));
        }
        if !run.sandbox_denials.is_empty() {
            self.reporter.emit(&Event::SandboxDenied {
                iteration: n,
                who: crate::event::Confined::Agent,
                denials: run.sandbox_denials.clone(),
            });
        }
        if run.finished.leftovers > 0 {
            let n = crate::text::count(run.finished.leftovers, "process", "processes");
            self.notice(format!("ended {n} the agent left running"));
        }
        if run.outcome.cost_usd.is_none() {
            self.estimate_cost(&mut run.outcome);
        }
        self.state.cost_usd += run.outcome.cost_usd.unwrap_or(0.0);
        self.state.tokens += run.outcome.tokens.map_or(0, |t| t.total());
        Ok(run)
    }

    /// The cost of an agent's tokens at `cost.prices`, marked estimated,
    /// when a price for its model is known.
    fn estimate_cost(&self, outcome: &mut Outcome) {
        let Some(t) = outcome.tokens else { return };
        let tokens_in = t.input + t.cache_read + t.cache_write;
        let model = self.kit.agents.current().model.as_deref();
        if let Some(p) = crate::history::cost::price(&self.cfg.cost.prices, model) {
            outcome.cost_usd = Some(p.cost(tokens_in, t.output));
            outcome.cost_estimated = true;
        }
    }

    /// HEAD back on the run branch, and its history intact: what the agent
    /// did to either, and what ralph put right (see `git::Repo::check_integrity`).
    fn check_git(&mut self, before: &crate::git::Refs) -> GitCheck {
        let Some(branch) = self.kit.branch.clone().or_else(|| before.branch.clone()) else {
            return GitCheck::default();
        };
        // A worker of a parallel run shares the branch list with the other
        // workers and the run, which move their own branches meanwhile.
        let run = self.opts.mode.worker().and_then(|w| w.branch.rsplit_once("--")).map(|(r, _)| r);
        let others_own = |name: &str| {
            run.is_some_and(|r| {
                name == r || name.strip_prefix(r).is_some_and(|s| s.starts_with("--"))
            })
        };
        let i = self.repo.check_integrity(before, &branch, &others_own);
        if !i.findings.is_empty() || i.fatal.is_some() {
            self.kit.reusable_snapshot = None;
        }
        GitCheck { findings: i.findings, fatal: i.fatal }
    }

    /// What the agent did: prd.json, git, the gate, the handoff.
    #[allow(clippy::too_many_arguments)]
    fn collect(
        &mut self,
        n: u32,
        prd: &Prd,
        story: &Story,
        start: Start<'_>,
        agent: AgentRun,
        git: GitCheck,
        log: PathBuf,
        started: Instant,
        applied: Vec<String>,
    ) -> Result<Collected, Error> {
        let outcome = agent.outcome;
        let history_lost = git.fatal.is_some();
        let (agent_prd, check, tampering) = self.prd_as_left(n, prd, story, history_lost);
        let marked =
            agent_prd.as_ref().ok().and_then(|p| p.story(&story.id)).is_some_and(|s| s.passes)
                && !story.passes;
        let before = start.before;
        let after = self.repo.snapshot()?;
        let mut changes = self.repo.changes(before, &after);
        if self.kit.gate.is_none() && self.cfg.hooks.on_iteration_end.is_empty() {
            self.kit.reusable_snapshot = Some(after.clone());
        }
        let mut tampered = self.set_back_oracle(n, start, &after, &mut changes, history_lost);
        let test_flags = self.test_flags(before, &changes);
        let (evidence, leftovers) = self.evidence(&changes, &after);
        if self.kit.gate.is_some() {
            self.checkpoint(Phase::Gate);
        }
        let (gate, verdict) = if history_lost {
            (GateRun::Skipped, None)
        } else {
            self.gate_run(n, story, outcome.error.as_ref())
        };
        tampered.extend(self.hold_to_tests(story, verdict.as_ref()));
        self.tally_findings(n, &story.id, &tampered, &test_flags);
        let (handoff, handoff_facts) = self.read_handoff();
        let facts = Facts {
            iteration: n,
            story: StoryFacts {
                id: story.id.clone(),
                title: story.title.clone(),
                passed_before: story.passes,
                own_gate: story.verify.is_some(),
            },
            agent: outcome.error.clone(),
            exit_code: agent.finished.exit_code,
            final_text: crate::text::tail_chars(&outcome.final_text, 2000),
            claim: claim(&outcome, marked),
            evidence,
            gate,
            handoff: handoff_facts,
            prd: check,
            git,
            permission_denials: outcome.permission_denials.clone(),
            sandbox_denials: sandbox_denials(&agent.sandbox_denials, verdict.as_ref()),
            asking_questions: outcome.asking_questions,
            error_signature: outcome.error_signature.clone(),
            error_example: outcome.error_example.clone(),
            tool_errors: outcome.tool_errors.clone(),
            commit_leftovers: self.cfg.run.commit_leftovers,
            tampered,
            test_flags,
        };
        Ok(Collected {
            n,
            agent: self.kit.agents.current_name(),
            story: story.clone(),
            facts,
            prd: agent_prd,
            other_claims: tampering.claimed,
            changes,
            leftovers,
            verdict,
            handoff,
            exit_code: agent.finished.exit_code,
            outcome,
            log,
            started,
            applied,
        })
    }

    /// prd.json as the agent left it, with what it may not change set back
    /// (unless history was lost: then it is what the branch says), what it
    /// changed, and its proposal kept for the person.
    fn prd_as_left(
        &mut self,
        n: u32,
        prd: &Prd,
        story: &Story,
        history_lost: bool,
    ) -> (Result<Prd, PrdDamage>, PrdCheck, crate::prd::Tampering) {
        let mut tampering = crate::prd::Tampering::default();
        let (agent_prd, check) = match self.read_prd() {
            Ok(now) if history_lost => (Ok(now), PrdCheck::default()),
            Ok(mut now) => {
                tampering = now.set_back_tampering(prd, &story.id);
                let tampered = tampering.findings.clone();
                (Ok(now), PrdCheck { damaged: false, tampered })
            }
            Err(damage) => (Err(damage), PrdCheck { damaged: true, tampered: Vec::new() }),
        };
        if !check.tampered.is_empty() {
            self.warn(format!(
                "the agent changed {} in prd.json: set back (only its own story's \"passes\" and \
                 the stories' \"notes\" are the agent's to change)",
                check.tampered.join(", ")
            ));
        }
        self.keep_proposal(n, &story.id, &tampering);
        (agent_prd, check, tampering)
    }

    /// The oracle first: the protected paths (unless history was lost) and
    /// the git directory's config and hooks (whatever became of history)
    /// set back, so that what judges the work is the person's again before
    /// the gate runs.
    fn set_back_oracle(
        &mut self,
        n: u32,
        start: Start<'_>,
        after: &Snapshot,
        changes: &mut Changes,
        history_lost: bool,
    ) -> Vec<Tamper> {
        let mut tampered: Vec<Tamper> = if history_lost {
            Vec::new()
        } else {
            self.set_back_protected(n, start.before, after, start.saved, changes)
                .into_iter()
                .map(Tamper::Protected)
                .collect()
        };
        tampered.extend(self.set_back_git_dir(n, start.git_dir).into_iter().map(Tamper::Protected));
        tampered
    }

    /// The gate's test counts held to the branch's record (tests that
    /// vanished are a refusal) and kept for the report. Counts of a story's
    /// own `verify` are not the gate's: they are kept, never held.
    fn hold_to_tests(&mut self, story: &Story, verdict: Option<&Verdict>) -> Option<Tamper> {
        let (Some(v), Some(cmd)) = (verdict, self.gate_command(story)) else { return None };
        let before = story.verify.is_none().then(|| self.tests_before_record(&cmd)).flatten();
        let vanished = story.verify.is_none().then(|| self.tests_vanished(&cmd, v)).flatten();
        let found = &mut self.state.stories.entry(story.id.clone()).or_default().findings;
        found.tests_after = v.counts.or(found.tests_after);
        found.tests_before = before.map(|r| r.counts).or(found.tests_before);
        vanished.map(Tamper::TestsVanished)
    }

    /// The iteration's refusals and flags in the story's findings, for the report.
    fn tally_findings(&mut self, n: u32, story: &str, tampered: &[Tamper], flags: &[Flag]) {
        let found = &mut self.state.stories.entry(story.to_string()).or_default().findings;
        for t in tampered {
            found.refused.push(format!("iteration {n}: {t}"));
        }
        for flag in flags {
            found.test_flags.push(format!("iteration {n}: {flag}"));
        }
    }

    /// Keeps what the agent proposed for prd.json (set back) for the
    /// person: its version in the run's log folder, the changes for the report.
    fn keep_proposal(&mut self, n: u32, story: &str, t: &crate::prd::Tampering) {
        let Some(theirs) = &t.theirs else { return };
        let file = self.kit.log_dir.join(format!("iter-{n}.prd-proposed.json"));
        if let Err(e) = crate::store::write_replace(&file, theirs.as_bytes()) {
            self.warn(format!("cannot keep the agent's prd.json in {}: {e}", file.display()));
            return;
        }
        self.notice(format!(
            "the agent proposes {} for prd.json; its version is in {} (the report lists it for you)",
            t.proposed.join(", "),
            file.display()
        ));
        self.state.prd_proposals.push(crate::event::PrdProposal {
            iteration: n,
            story_id: story.to_string(),
            changes: t.proposed.clone(),
            file: file.display().to_string(),
        });
    }

    /// What git shows: files of the project (not ralph's bookkeeping) that
    /// changed, and which changed files are still uncommitted.
    fn evidence(&self, changes: &Changes, after: &Snapshot) -> (Evidence, Vec<PathBuf>) {
        let workdir = self.repo.workdir();
        let p = self.paths;
        let is = |f: &str, path: &std::path::Path| workdir.join(f) == path;
        let bookkeeping = |f: &str| is(f, &p.prd) || is(f, &p.progress);
        let ralphs = |f: &str| workdir.join(f) == p.last_branch || f.starts_with(".ralph/");
        let work_files = changes.files.iter().filter(|f| !bookkeeping(f) && !ralphs(f)).count();
        let leftovers: Vec<&String> =
            changes.files.iter().filter(|f| !ralphs(f) && after.is_dirty(f)).collect();
        let evidence = Evidence {
            commits: changes.commits.len(),
            work_files,
            uncommitted_work: leftovers.iter().filter(|f| !bookkeeping(f)).count(),
            prd_uncommitted: leftovers.iter().any(|f| is(f, &p.prd)),
            progress_uncommitted: leftovers.iter().any(|f| is(f, &p.progress)),
        };
        (evidence, leftovers.into_iter().map(PathBuf::from).collect())
    }

    /// Runs the story's gate, when the agent's run left anything to judge.
    fn gate_run(
        &mut self,
        n: u32,
        story: &Story,
        agent: Option<&crate::analyze::AgentError>,
    ) -> (GateRun, Option<Verdict>) {
        let (Some(gate), Some(cmd)) = (self.kit.gate.clone(), self.gate_command(story)) else {
            return (GateRun::None, None);
        };
        if !judge::needs_gate(agent) {
            return (GateRun::Skipped, None);
        }
        let log = self.kit.log_dir.join(format!("gate-{n}.log"));
        let v = match gate.run(&cmd, &self.paths.project, Some(&log)) {
            Ok(v) => v,
            Err(e) => return (GateRun::CannotRun { message: e.message, hint: e.hint }, None),
        };
        if v.interrupted {
            return (GateRun::Interrupted, None);
        }
        if !v.sandbox_denials.is_empty() {
            self.reporter.emit(&Event::SandboxDenied {
                iteration: n,
                who: crate::event::Confined::Gate,
                denials: v.sandbox_denials.clone(),
            });
        }
        self.reporter.emit(&Event::Gate {
            iteration: n,
            story_id: story.id.clone(),
            passed: v.passed,
            exit_code: v.exit_code,
            duration_ms: v.duration.as_millis() as u64,
            summary: v.summary(),
        });
        self.kit.last_gate_passed = Some(v.passed);
        let run = if v.passed {
            GateRun::Passed
        } else {
            GateRun::Failed(GateFailure {
                feedback: v.feedback(&cmd),
                signature: v.signature(),
                detail: crate::learn::lessons::excerpt(v.exit_code, &v.stdout_tail, &v.stderr_tail),
            })
        };
        (run, Some(v))
    }

    /// The handoff the agent left for the next iteration.
    fn read_handoff(&self) -> (Option<crate::handoff::Handoff>, HandoffFacts) {
        match crate::handoff::read(&self.paths.store.handoff()) {
            Ok(h) => {
                let blocked = (h.status == crate::handoff::Status::Blocked)
                    .then(|| (h.blocker.clone(), h.summary.clone()));
                let facts = HandoffFacts::Valid { blocked, lesson: h.lesson.clone() };
                (Some(h), facts)
            }
            Err(e) if e.is_missing() && !self.cfg.run.require_handoff => {
                (None, HandoffFacts::NotRequired)
            }
            Err(e) => (
                None,
                HandoffFacts::Problem {
                    note: format!("handoff: {e}"),
                    feedback: crate::handoff::error_section(&e),
                },
            ),
        }
    }
}

/// What a running agent's watcher does with what it hears: the checkpoint
/// (`snapshot`, the state as the agent starts) written with its process
/// group the moment it exists, its output and the notice that it is being
/// stopped reported.
fn agent_watcher<'a>(
    n: u32,
    reporter: &'a mut dyn crate::event::Reporter,
    mut snapshot: crate::state::RunState,
    store: crate::store::Store,
) -> impl FnMut(AgentEvent) + 'a {
    move |e: AgentEvent| match e {
        AgentEvent::Spawned(pid) => {
            snapshot.agent_pgid = Some(pid as i32);
            let _ = snapshot.save_cached(&store);
        }
        AgentEvent::Output(text) => reporter.emit(&Event::AgentOutput { iteration: n, text }),
        AgentEvent::Stopping { reason, grace } => reporter.emit(&Event::Notice {
            level: crate::event::Level::Warn,
            message: stopping_message(reason, grace, "the agent"),
        }),
    }
}

/// What the agent claimed: its mark in prd.json, `COMPLETE` or a status
/// block saying so, the tasks it counted, and the blocker it named.
fn claim(outcome: &Outcome, marked: bool) -> Claim {
    let status = outcome.status_block.as_ref();
    let said_done = outcome.claimed_complete
        || status.is_some_and(|b| b.status == Some(crate::analyze::Status::Complete));
    let blocked = status
        .filter(|b| b.status == Some(crate::analyze::Status::Blocked))
        .map(|b| b.recommendation.clone().unwrap_or_default());
    Claim { marked, said_done, tasks: status.and_then(|b| b.tasks_completed).unwrap_or(0), blocked }
}

/// What the sandbox denied the agent, then what it denied the gate that
/// the agent was not denied already.
fn sandbox_denials(agent: &[String], verdict: Option<&Verdict>) -> Vec<String> {
    let mut all = agent.to_vec();
    for d in verdict.iter().flat_map(|v| &v.sandbox_denials) {
        if !all.contains(d) {
            all.push(d.clone());
        }
    }
    all
}

/// "stopping the agent (iteration timeout): waiting up to 10s for it to end
/// (Ctrl-C again to kill it now)": said the moment ralph starts to wait.
pub(super) fn stopping_message(
    reason: crate::analyze::StopReason,
    grace: std::time::Duration,
    what: &str,
) -> String {
    use crate::analyze::StopReason as R;
    let why = match reason {
        R::Timeout => "iteration timeout",
        R::Idle => "no output for the idle timeout",
        R::Interrupted => "interrupted",
        R::Budget => "the run's time budget is spent",
    };
    format!(
        "stopping {what} ({why}): waiting up to {} for it to end (Ctrl-C again to kill it now)",
        humantime::format_duration(grace)
    )
}

/// What ralph tells every agent of where it is, in its environment (the
/// iteration's and `--dry-run`'s: one list).
pub(super) fn agent_env(
    run_id: &str,
    paths: &super::Paths,
    n: u32,
    story: &str,
) -> [(String, String); 7] {
    let shown = |p: &std::path::Path| p.display().to_string();
    [
        ("RALPH_RUN_ID".to_string(), run_id.to_string()),
        ("RALPH_PROJECT_DIR".to_string(), shown(&paths.project)),
        ("RALPH_ITERATION".to_string(), n.to_string()),
        ("RALPH_STORY_ID".to_string(), story.to_string()),
        ("RALPH_PRD".to_string(), shown(&paths.prd)),
        ("RALPH_PROGRESS".to_string(), shown(&paths.progress)),
        ("RALPH_HANDOFF".to_string(), shown(&paths.store.handoff())),
    ]
}
