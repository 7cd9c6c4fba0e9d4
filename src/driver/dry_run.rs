//! `--dry-run`: what the next iteration would do — the story, the agent's
//! exact command line and environment, the rendered prompt, the gate — and
//! nothing changed: no lock, no branch, no state, no file written.

use serde::Serialize;

use super::Options;
use super::context::{PromptInputs, gate_command, render};
use crate::agent::Backend;
use crate::agent::backend::{InheritedEnv, PromptChannel};
use crate::error::Error;
use crate::paths::Paths;
use crate::prd::Prd;
use crate::state::{Phase, RunState};

/// What the next iteration would be.
#[derive(Debug, Default, Serialize)]
pub struct DryRun {
    pub project: String,
    pub prd: String,
    /// The branch the iteration would run on.
    pub branch: Option<String>,
    /// The run it would continue, when one did not end.
    pub resumes: Option<String>,
    pub iteration: u32,
    pub max_iterations: u32,
    /// `None`: every story passes, nothing would run.
    pub story: Option<DryStory>,
    pub agent: Option<DryAgent>,
    /// The command that would verify the story.
    pub gate: Option<Vec<String>>,
    /// With `--jobs N`: the stories each wave of workers would take if
    /// every story passed at its first try, and why a story waits for a
    /// later wave (it touches what a story before it touches).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<super::parallel::Overlap>,
    /// Where the prompt would be written.
    pub prompt_file: Option<String>,
    pub prompt: Option<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct DryStory {
    pub id: String,
    pub title: String,
    pub priority: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct DryAgent {
    pub argv: Vec<String>,
    /// stdin | argv | file
    pub prompt_channel: &'static str,
    pub cwd: String,
    /// Variables set for the agent (on top of ralph's own environment).
    pub env_set: Vec<(String, String)>,
    /// Variables removed from it.
    pub env_remove: Vec<String>,
    /// The sandbox it would run in: what it may read, write and connect to.
    pub sandbox: crate::sandbox::Shown,
}

/// The agent the next iteration would run: a fallback while the
/// configured agent's usage limit lasts (as `limits.json` has it).
fn next_agent(paths: &Paths, cfg: &crate::config::Config) -> Result<Backend, Error> {
    let agents = crate::agent::Agents::configured(&cfg.agent)?;
    let (limits, _) = crate::limits::Limits::load(&paths.store).unwrap_or_default();
    let now = chrono::Utc::now();
    let max_wait = if cfg.limits.wait { cfg.limits.max_wait } else { std::time::Duration::ZERO };
    let after = cfg.limits.fallback_after.min(max_wait);
    let i = agents.choose(&limits, now, after).unwrap_or_else(|h| h.agent);
    Ok(agents.all()[i].clone())
}

/// What the next iteration would do, without doing or writing anything.
pub fn dry_run(paths: &Paths, opts: &Options) -> Result<DryRun, Error> {
    let cfg = &opts.config;
    paths.require_prd()?;
    let prd = Prd::load(&paths.prd)?;
    let repo = crate::git::Repo::discover(&paths.project)?;
    let backend = next_agent(paths, cfg)?;
    let template = super::setup::load_template(paths, opts)?;
    let (checkpoint, warning) =
        RunState::load(&paths.store).map_err(|e| Error::io("read the checkpoint", e))?;
    let resume = checkpoint.filter(|s| s.phase != Phase::Ended && !opts.fresh);
    let (n, max) = numbered(resume.as_ref(), opts);
    let run_id = resume.as_ref().map(|s| s.run_id.clone());
    let branch = prd.branch_name().map(str::to_string).or_else(|| repo.current_branch());
    let mut out = DryRun {
        project: paths.project.display().to_string(),
        prd: paths.prd.display().to_string(),
        branch: branch.clone(),
        resumes: run_id.clone(),
        iteration: n,
        max_iterations: max,
        warnings: warning.into_iter().collect(),
        ..DryRun::default()
    };
    if cfg.run.jobs > 1 {
        let board = super::Board::load(&paths.store).unwrap_or_default();
        let fp = super::parallel::footprints(prd.stories(), &board);
        (out.waves, out.waits) = super::parallel::waves(&prd, &fp, cfg.run.jobs as usize);
    }
    let Some(story) = prd.next_story() else { return Ok(out) };
    let has_gate = !cfg.gate.command.is_empty() || story.verify.is_some();
    let gate = has_gate.then(|| gate_command(&cfg.gate.command, story)).flatten();
    let rendered = render(&PromptInputs {
        template: &template,
        paths,
        prd: &prd,
        story,
        iteration: n,
        max_iterations: max,
        branch: branch.unwrap_or_else(|| "(current)".into()),
        feedback: resume.as_ref().and_then(|s| s.feedback.as_deref()),
        handoff: resume.as_ref().and_then(|s| s.handoff.as_ref()),
        gate: gate.as_deref(),
        read_first: &cfg.run.context,
    });
    out.warnings.extend(rendered.warnings);
    let log_dir = paths.store.run_log_dir(run_id.as_deref().unwrap_or("<new run>"));
    let prompt_file = log_dir.join(format!("iter-{n}.prompt.md"));
    let run_id = run_id.unwrap_or_else(|| "(a new run id)".into());
    let ralph_env = super::iteration::agent_env(&run_id, paths, n, &story.id);
    out.agent = Some(agent(paths, cfg, &backend, &rendered.text, &prompt_file, ralph_env)?);
    out.story = Some(DryStory {
        id: story.id.clone(),
        title: story.title.clone(),
        priority: story.priority,
    });
    out.gate = gate;
    out.prompt_file = Some(prompt_file.display().to_string());
    out.prompt = Some(rendered.text);
    Ok(out)
}

/// The next iteration's number and the run's iteration limit: a resumed
/// run goes on from its checkpoint (an iteration cut off runs again), and
/// `ralph N` given now counts N more.
fn numbered(resume: Option<&RunState>, opts: &Options) -> (u32, u32) {
    let Some(s) = resume else { return (1, opts.max_iterations) };
    let cut_off = matches!(s.phase, Phase::Agent | Phase::Gate);
    let done = if cut_off { s.iteration.saturating_sub(1) } else { s.iteration };
    let max = if opts.explicit_max { done + opts.max_iterations } else { s.max_iterations };
    (done + 1, max)
}

/// The agent's command as the iteration would start it: its argv, where the
/// prompt goes, its environment (ralph's `RALPH_*` variables added) and
/// its sandbox.
fn agent(
    paths: &Paths,
    cfg: &crate::config::Config,
    backend: &Backend,
    prompt: &str,
    prompt_file: &std::path::Path,
    ralph_env: impl IntoIterator<Item = (String, String)>,
) -> Result<DryAgent, Error> {
    let invocation = backend.invocation_in(prompt, prompt_file, InheritedEnv::current())?;
    let mut env_set = invocation.env_set.clone();
    env_set.extend(ralph_env);
    let mut argv = vec![invocation.program.clone()];
    argv.extend(invocation.args.iter().cloned());
    Ok(DryAgent {
        argv,
        prompt_channel: match backend.channel() {
            PromptChannel::Stdin => "stdin",
            PromptChannel::Argv => "argv",
            PromptChannel::File => "file",
        },
        cwd: paths.project.display().to_string(),
        env_remove: invocation.env_remove.clone(),
        sandbox: crate::sandbox::show(
            &cfg.sandbox,
            &|k: &str| std::env::var(k).ok(),
            Some(backend.tool),
            &paths.project,
            &invocation.program,
        ),
        env_set,
    })
}

impl std::fmt::Display for DryRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "dry run: what the next iteration would do (nothing is changed)")?;
        writeln!(f, "project:   {}", self.project)?;
        writeln!(f, "prd:       {}", self.prd)?;
        writeln!(f, "branch:    {}", self.branch.as_deref().unwrap_or("(the current one)"))?;
        match &self.resumes {
            Some(id) => writeln!(f, "run:       resumes {id}")?,
            None => writeln!(f, "run:       a new run")?,
        }
        writeln!(f, "iteration: {} of {}", self.iteration, self.max_iterations)?;
        for w in &self.warnings {
            writeln!(f, "warning:   {w}")?;
        }
        let (Some(story), Some(agent)) = (&self.story, &self.agent) else {
            return writeln!(f, "story:     none: every story passes, nothing would run");
        };
        writeln!(f, "story:     {} {}", story.id, story.title)?;
        writeln!(f, "agent:     {}", shell_words(&agent.argv))?;
        writeln!(f, "  in:      {}", agent.cwd)?;
        writeln!(f, "  prompt:  on {}", agent.prompt_channel)?;
        for (k, v) in &agent.env_set {
            writeln!(f, "  env:     {k}={v}")?;
        }
        if !agent.env_remove.is_empty() {
            writeln!(f, "  unset:   {}", agent.env_remove.join(" "))?;
        }
        writeln!(f, "  sandbox: {}", agent.sandbox.summary)?;
        for line in agent.sandbox.policy.iter().flat_map(crate::sandbox::details) {
            writeln!(f, "           {line}")?;
        }
        match &self.gate {
            Some(g) => writeln!(f, "gate:      {}", shell_words(g))?,
            None => writeln!(f, "gate:      none (the agent's mark is taken)")?,
        }
        for (i, wave) in self.waves.iter().enumerate() {
            writeln!(f, "wave {}:    {}", i + 1, wave.join(", "))?;
        }
        for w in &self.waits {
            writeln!(f, "  {}: {w}", w.story)?;
        }
        if let Some(file) = &self.prompt_file {
            writeln!(f, "prompt:    (would be written to {file})")?;
        }
        if let Some(p) = &self.prompt {
            writeln!(f, "{}", "-".repeat(72))?;
            write!(f, "{p}")?;
            if !p.ends_with('\n') {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// An argv as a person would type it: words with spaces or quotes quoted.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
