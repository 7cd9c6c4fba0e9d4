//! `ralph agents` (alias `doctor`): which agent CLIs are installed, their
//! versions and what each still needs; then whether this project's run can
//! start — the configured agent (a named tool, or `agent.command`) and the
//! gate's programs (`gate.command` and the unfinished stories' `verify`).
//! It exits as `ralph` itself would before paying for an agent: with
//! `exit::ENVIRONMENT` when a program is missing or cannot run, with
//! `exit::USAGE` when the configuration names no agent command at all.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::agent::{Backend, Tool};
use crate::cli::{Global, SettingArgs};
use crate::error::Error;
use crate::paths::Paths;
use crate::prd::Prd;

use super::common::{env, print, print_json, project_dir};
use super::flags::layers;

/// One line of `ralph agents`.
#[derive(Debug, Serialize)]
pub(crate) struct AgentInfo {
    pub(crate) tool: String,
    pub(crate) program: String,
    pub(crate) path: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) problems: Vec<String>,
}

/// The agent this project's configuration names.
#[derive(Debug, Serialize)]
struct Configured {
    /// "claude", "custom (my-agent)".
    agent: String,
    command: Vec<String>,
    path: Option<String>,
    problems: Vec<String>,
    /// The configuration names no runnable agent (`tool = "custom"`
    /// without a command): a usage error, as for `ralph` itself.
    #[serde(skip)]
    misconfigured: bool,
}

/// The gate's programs.
#[derive(Debug, Serialize)]
struct GateCheck {
    command: Vec<String>,
    /// How many unfinished stories have their own `verify`.
    story_gates: usize,
    /// What cannot run, with its hint.
    problem: Option<String>,
}

#[derive(Debug, Serialize)]
struct Report {
    version: u32,
    agents: Vec<AgentInfo>,
    configured: Configured,
    /// The fallback agents (`agent.fallback`), checked as a run checks them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fallback: Vec<Configured>,
    gate: GateCheck,
    /// The sandbox the configured agent would run in (`agent.sandbox`, `sandbox.*`).
    sandbox: crate::sandbox::Shown,
    /// Whether `ralph` could start here: the configured agent and the gate can run.
    ready: bool,
}

pub(crate) fn run(g: &Global) -> Result<u8, Error> {
    let is_root = crate::process::euid() == 0;
    let agents: Vec<AgentInfo> = Tool::ALL
        .iter()
        .filter(|t| **t != Tool::Custom)
        .map(|&tool| known(tool, is_root))
        .collect();
    let project = project_dir(g)?;
    let paths = Paths::resolve(&project, g.prd.as_deref())?;
    let config = layers(g, &paths.project, &SettingArgs::default())?.resolve();
    let mut configured = configured(&config.agent, is_root);
    if let Err(e) = crate::agent::Agents::configured(&config.agent)
        && !configured.misconfigured
    {
        configured.problems.push(e.to_string());
        configured.misconfigured = true;
    }
    let fallback: Vec<Configured> = config
        .agent
        .fallback
        .iter()
        .map(|&tool| {
            let backend = Backend { safe: config.agent.safe, ..Backend::new(tool) };
            let preflight = backend.preflight(is_root, &env);
            Configured {
                agent: backend.describe(),
                command: vec![backend.program().to_string()],
                path: preflight.as_ref().ok().map(|p| p.display().to_string()),
                problems: preflight.err().iter().map(ToString::to_string).collect(),
                misconfigured: false,
            }
        })
        .collect();
    let gate = gate(&config.gate.command, &paths.prd);
    let agent = Backend::configured(&config.agent).ok();
    let sandbox = crate::sandbox::show(
        &config.sandbox,
        &env,
        agent.as_ref().map(|a| a.tool),
        &paths.project,
        agent.as_ref().map_or("", |a| a.program()),
    );
    let ready = configured.problems.is_empty()
        && fallback.iter().all(|f| f.problems.is_empty())
        && gate.problem.is_none()
        && sandbox.problem.is_none();
    let code = if configured.misconfigured {
        crate::exit::USAGE
    } else if ready {
        crate::exit::COMPLETE
    } else {
        crate::exit::ENVIRONMENT
    };
    let report = Report { version: 1, agents, configured, fallback, gate, sandbox, ready };
    if g.json {
        print_json(&report)?;
    } else {
        print(&render(&report, code))?;
    }
    Ok(code)
}

/// A known CLI: found or not, its version, and what it still needs.
fn known(tool: Tool, is_root: bool) -> AgentInfo {
    let backend = Backend::new(tool);
    let program = backend.program().to_string();
    let path = which::which(&program).ok();
    let mut problems = Vec::new();
    let version = path.as_ref().and_then(|p| version(p));
    if let Err(e) = backend.preflight(is_root, &env) {
        problems.push(e.to_string());
    }
    if tool == Tool::Claude
        && path.is_some()
        && env("ANTHROPIC_API_KEY").is_none()
        && env("CLAUDE_CODE_OAUTH_TOKEN").is_none()
    {
        problems.push("no ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN in the environment (fine if you ran `claude login`)".into());
    }
    AgentInfo {
        tool: tool.to_string(),
        program,
        path: path.map(|p| p.display().to_string()),
        version,
        problems,
    }
}

/// The configured agent, checked as a run checks it before its first
/// iteration (its program is never started: a custom command may not know
/// `--version`, and may be the agent itself).
fn configured(agent: &crate::config::AgentConfig, is_root: bool) -> Configured {
    match Backend::configured(agent) {
        Ok(backend) => {
            let preflight = backend.preflight(is_root, &env);
            Configured {
                agent: backend.describe(),
                command: agent_command(&backend, agent),
                path: preflight.as_ref().ok().map(|p| p.display().to_string()),
                problems: preflight.err().iter().map(ToString::to_string).collect(),
                misconfigured: false,
            }
        }
        Err(e) => Configured {
            agent: agent.tool.to_string(),
            command: shown(agent),
            path: None,
            problems: vec![e.to_string()],
            misconfigured: true,
        },
    }
}

/// The configured command as typed: its variables first (`FOO=1 my-agent --fast`).
fn shown(agent: &crate::config::AgentConfig) -> Vec<String> {
    let env = agent.command.env.iter().map(|(k, v)| format!("{k}={v}"));
    env.chain(agent.command.argv.iter().cloned()).collect()
}

/// The program and the configured arguments, for the report.
fn agent_command(backend: &Backend, agent: &crate::config::AgentConfig) -> Vec<String> {
    if agent.command.argv.is_empty() { vec![backend.program().to_string()] } else { shown(agent) }
}

/// A PRD with no unfinished story: with no readable prd.json there are no
/// `verify` programs to check, only `gate.command`.
const NO_STORIES: &str = r#"{"userStories":[{"id":"-","passes":true}]}"#;

fn gate(command: &[String], prd_path: &Path) -> GateCheck {
    let prd = Prd::load(prd_path).ok();
    let story_gates = prd
        .as_ref()
        .map_or(0, |p| p.stories().iter().filter(|s| !s.passes && s.verify.is_some()).count());
    let prd = prd.or_else(|| Prd::parse(NO_STORIES.as_bytes(), prd_path).ok());
    let problem = prd.and_then(|prd| {
        let project = prd_path.parent().unwrap_or(Path::new("."));
        crate::gate::check_programs_in(command, &prd, project)
            .err()
            .map(|e| format!("{} ({})", e.message, e.hint))
    });
    GateCheck { command: command.to_vec(), story_gates, problem }
}

fn render(r: &Report, code: u8) -> String {
    let mut o = String::new();
    for i in &r.agents {
        let found = match (&i.path, &i.version) {
            (Some(p), Some(v)) => format!("{v} ({p})"),
            (Some(p), None) => p.clone(),
            (None, _) => "not installed".into(),
        };
        o.push_str(&format!("{:<13} {found}\n", i.tool));
        for p in &i.problems {
            o.push_str(&format!("{:<13}   - {p}\n", ""));
        }
    }
    o.push_str("\nthis project:\n");
    let c = &r.configured;
    let verdict = match (&c.path, c.problems.is_empty()) {
        // A custom agent is named by its program already.
        (Some(path), true) if !c.agent.contains(path.as_str()) => format!("ready ({path})"),
        (Some(_), true) => "ready".into(),
        _ => "cannot run".into(),
    };
    o.push_str(&format!("  agent   {} · {verdict}\n", c.agent));
    for p in &c.problems {
        o.push_str(&format!("          - {p}\n"));
    }
    for f in &r.fallback {
        let verdict = match &f.path {
            Some(path) if f.problems.is_empty() => format!("ready ({path})"),
            _ => "cannot run".into(),
        };
        o.push_str(&format!("  then    {} · {verdict}\n", f.agent));
        for p in &f.problems {
            o.push_str(&format!("          - {p}\n"));
        }
    }
    let own = (r.gate.story_gates > 0).then(|| {
        let n = r.gate.story_gates;
        format!("{} own verify", crate::text::count(n, "story's", "stories'"))
    });
    let gates = match (r.gate.command.is_empty(), own) {
        (true, None) => "none: a story passes on the agent's word (set gate.command)".to_string(),
        (true, Some(own)) => format!("{own} · {}", ready(&r.gate.problem)),
        (false, None) => format!("{} · {}", r.gate.command.join(" "), ready(&r.gate.problem)),
        (false, Some(own)) => {
            format!("{}, and {own} · {}", r.gate.command.join(" "), ready(&r.gate.problem))
        }
    };
    o.push_str(&format!("  gate    {gates}\n"));
    if let Some(p) = &r.gate.problem {
        o.push_str(&format!("          - {p}\n"));
    }
    o.push_str(&format!("  sandbox {}\n", r.sandbox.summary));
    for line in r.sandbox.policy.iter().flat_map(crate::sandbox::details) {
        o.push_str(&format!("          {line}\n"));
    }
    if !r.ready {
        o.push_str(&format!(
            "\n`ralph` would stop here with exit {code}, before running an agent.\n"
        ));
    }
    o
}

fn ready(problem: &Option<String>) -> &'static str {
    if problem.is_some() { "cannot run" } else { "ready" }
}

/// `<program> --version`, first line, with a timeout.
fn version(program: &Path) -> Option<String> {
    let p = program.display().to_string();
    let args = vec!["--version".to_string()];
    let spec = crate::agent::supervise::Spec {
        program: &p,
        args: &args,
        cwd: Path::new("/"),
        env_remove: &[],
        env_set: &[],
        stdin: None,
        limits: crate::agent::supervise::TimeLimits {
            timeout: Some(Duration::from_secs(10)),
            idle: None,
            grace: Duration::from_secs(1),
            deadline: None,
            interruptible: true,
        },
        sandbox: None,
    };
    let tail = || crate::agent::supervise::TailSink(crate::agent::capture::Tail::new(1024));
    let (f, out, err) = crate::agent::supervise::run(&spec, tail(), tail(), &mut || {}).ok()?;
    if !f.success() {
        return None;
    }
    let text = out.0.text();
    let text = if text.trim().is_empty() { err.0.text() } else { text };
    text.lines().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
}
