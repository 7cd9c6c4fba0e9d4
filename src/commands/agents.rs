//! `ralph agents` (alias `doctor`): which agent CLIs are installed, their
//! versions, and what each still needs.

use std::path::Path;
use std::time::Duration;

use crate::agent::{Backend, Tool};
use crate::cli::Global;
use crate::error::Error;

use super::common::{print, print_json};

/// One line of `ralph agents`.
#[derive(Debug, serde::Serialize)]
pub(crate) struct AgentInfo {
    pub(crate) tool: String,
    pub(crate) program: String,
    pub(crate) path: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) problems: Vec<String>,
}

/// Every known CLI, found or not.
pub(crate) fn run(g: &Global) -> Result<u8, Error> {
    // SAFETY: geteuid has no preconditions.
    let is_root = crate::process::euid() == 0;
    let env = |k: &str| std::env::var(k).ok();
    let infos: Vec<AgentInfo> = Tool::ALL
        .iter()
        .filter(|t| **t != Tool::Custom)
        .map(|&tool| {
            let backend = Backend::new(tool);
            let program = backend.program().to_string();
            let path = which::which(&program).ok();
            let mut problems = Vec::new();
            let version = path.as_ref().and_then(|p| version(p));
            match backend.preflight(is_root, &env) {
                Ok(_) => {}
                Err(e) => problems.push(e),
            }
            if tool == Tool::Claude && path.is_some() && env("ANTHROPIC_API_KEY").is_none() && env("CLAUDE_CODE_OAUTH_TOKEN").is_none() {
                problems.push("no ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN in the environment (fine if you ran `claude login`)".into());
            }
            AgentInfo {
                tool: tool.to_string(),
                program,
                path: path.map(|p| p.display().to_string()),
                version,
                problems,
            }
        })
        .collect();
    if g.json {
        print_json(&infos)?;
        return Ok(0);
    }
    let mut o = String::new();
    for i in &infos {
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
    print(&o)?;
    Ok(0)
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
        limits: crate::agent::supervise::Limits {
            timeout: Some(Duration::from_secs(10)),
            idle: None,
            grace: Duration::from_secs(1),
            deadline: None,
            interruptible: true,
        },
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
