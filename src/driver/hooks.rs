//! The user's hook commands (`hooks.on_iteration_end`, `on_complete`,
//! `on_halt`) and the iteration's end event they follow. A failing hook is
//! a warning, never the end of the loop.
//!
//! A hook is an argv (a TOML array, or text split into words; text that is
//! a JSON array, as in `RALPH_HOOKS_ON_HALT='["notify-send", "done"]'`, is
//! that argv: see [`agent::words::split`]). Its `RALPH_*` variables are
//! single values, never lists.

use std::time::Duration;

use super::iteration::Collected;
use super::judge::{Judgement, Lesson};
use super::{End, Run};
use crate::agent;
use crate::event::{Event, RunOutcome};

/// `RALPH_*` variables, as a hook receives them.
type Env = Vec<(String, String)>;

fn var(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_string(), value.into())
}

impl Run<'_> {
    /// The iteration's end: its event, then the `on_iteration_end` hook.
    pub(super) fn end_iteration(&mut self, c: &Collected, j: &Judgement) {
        let passes = j.passes;
        let tokens = c.outcome.tokens;
        let lessons = j
            .learn
            .iter()
            .filter_map(|l| match &l.lesson {
                Some(Lesson::Agent(t) | Lesson::Loop(t)) => Some(t.clone()),
                None => None,
            })
            .collect();
        self.reporter.emit(&Event::IterationEnd {
            iteration: c.n,
            story_id: c.story.id.clone(),
            agent: c.agent.into(),
            result: j.result,
            duration_ms: c.started.elapsed().as_millis() as u64,
            exit_code: c.exit_code,
            commits: c.changes.commits.len(),
            files_changed: c.facts.evidence.work_files,
            story_passes: passes,
            claimed_complete: c.outcome.claimed_complete,
            cost_usd: c.outcome.cost_usd,
            tokens: c.outcome.tokens.map(|t| t.total()),
            error: j.note.clone(),
            log: c.log.display().to_string(),
            tokens_in: tokens.map(|t| t.input + t.cache_read + t.cache_write),
            tokens_out: tokens.map(|t| t.output),
            cost_estimated: c.outcome.cost_estimated,
            commit: passes.then(|| self.repo.head().map(|o| format!("{o:.7}"))).flatten(),
            lessons,
            refused: c.facts.tampered.iter().map(ToString::to_string).collect(),
            resolve: false,
        });
        let env = vec![
            var("RALPH_EVENT", "iteration_end"),
            var("RALPH_ITERATION", c.n.to_string()),
            var("RALPH_STORY_ID", c.story.id.clone()),
            var("RALPH_STORY_TITLE", c.story.title.clone()),
            var("RALPH_OUTCOME", j.result.as_str()),
            var("RALPH_STORY_PASSES", passes.to_string()),
            var("RALPH_COST_USD", format!("{:.4}", c.outcome.cost_usd.unwrap_or(0.0))),
            var("RALPH_LOG", c.log.display().to_string()),
            var("RALPH_AGENT", c.agent),
            var("RALPH_AGENT_EXIT_CODE", c.exit_code.map(|c| c.to_string()).unwrap_or_default()),
            var("RALPH_ERROR", j.note.clone().unwrap_or_default()),
        ];
        let hook = self.cfg.hooks.on_iteration_end.clone();
        self.hook("on_iteration_end", &hook, env);
    }

    /// The `on_complete` or `on_halt` hook at the end of a run.
    pub(super) fn end_hook(&mut self, end: &End, passing: usize, total: usize) {
        let complete = end.outcome == RunOutcome::Complete;
        let env = vec![
            var("RALPH_EVENT", if complete { "complete" } else { "halt" }),
            var("RALPH_OUTCOME", end.outcome.as_str()),
            var("RALPH_EXIT_CODE", end.code.to_string()),
            var("RALPH_EXIT_REASON", end.message.lines().next().unwrap_or("")),
            var("RALPH_ITERATION", self.state.iteration.to_string()),
            var("RALPH_PASSING", passing.to_string()),
            var("RALPH_TOTAL", total.to_string()),
            var("RALPH_STORY_ID", self.state.story.clone().unwrap_or_default()),
            var("RALPH_COST_USD", format!("{:.4}", self.state.cost_usd)),
        ];
        let (name, hook) = if complete {
            ("on_complete", self.cfg.hooks.on_complete.clone())
        } else {
            ("on_halt", self.cfg.hooks.on_halt.clone())
        };
        self.hook(name, &hook, env);
    }

    /// Runs a hook; a failing hook is logged and never stops the loop.
    fn hook(&mut self, name: &str, command: &[String], mut env: Env) {
        let Some((program, args)) = command.split_first() else { return };
        // Output a hook writes changes the tree: scan it afresh next time.
        self.kit.reusable_snapshot = None;
        env.extend([
            var("RALPH_RUN_ID", self.state.run_id.clone()),
            var("RALPH_PROJECT_DIR", self.paths.project.display().to_string()),
            var("RALPH_PRD", self.paths.prd.display().to_string()),
            var("RALPH_TOTAL_COST_USD", format!("{:.4}", self.state.cost_usd)),
        ]);
        // A hook may run a script the agent could change: confined like it.
        let child = match self.kit.sandbox.child(None, &self.paths.project, program, &env) {
            Ok(c) => c,
            Err(e) => {
                self.warn(format!(
                    "hook {name} cannot run: cannot make its sandbox's temp dir: {e}"
                ));
                return;
            }
        };
        let spec = agent::supervise::Spec {
            program,
            args,
            cwd: &self.paths.project,
            env_remove: &[],
            env_set: &env,
            stdin: None,
            sandbox: child.as_ref(),
            limits: agent::supervise::TimeLimits {
                timeout: Some(Duration::from_secs(60)),
                idle: None,
                grace: Duration::from_secs(2),
                deadline: None,
                interruptible: false,
            },
        };
        let tail = || agent::supervise::TailSink(agent::capture::Tail::new(2048));
        let result = agent::supervise::run(&spec, tail(), tail(), &mut || {});
        if let (Ok((_, out, err)), Some(child)) = (&result, &child) {
            let mut denials = child.denials();
            for line in out.0.text().lines().chain(err.0.text().lines()) {
                denials.line(line.as_bytes());
            }
            if !denials.found.is_empty() {
                // Said, and kept in the run's events and report, like the
                // agent's and the gate's.
                self.reporter.emit(&crate::event::Event::SandboxDenied {
                    iteration: self.state.iteration,
                    who: crate::event::Confined::Hook,
                    denials: denials.texts(),
                });
            }
        }
        match result {
            Ok((f, _, err)) if !f.success() => {
                let detail = err.0.text();
                self.warn(format!(
                    "hook {name} ({}) failed{}{}",
                    agent::words::join(command),
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
}
