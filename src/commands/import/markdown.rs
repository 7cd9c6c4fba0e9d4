//! `ralph import tasks/prd-foo.md`: the configured agent converts a
//! markdown PRD into prd.json, following the bundled `ralph` skill, into a
//! scratch file in ralph's state folder; ralph checks the result (schema,
//! ids, priorities, dependencies) and only then puts it in place. A failed
//! or invalid conversion changes nothing of the project's.

use std::path::{Path, PathBuf};

use super::Options;
use crate::agent::{self, Backend};
use crate::analyze::Analyzer;
use crate::cli::{Global, SettingArgs};
use crate::config::Config;
use crate::error::Error;
use crate::paths::Paths;

use crate::commands::common::print;

const SKILL_RALPH: &str = include_str!("../../../skills/ralph/SKILL.md");

fn prompt(prd_rel: &str, markdown: &str, out: &Path) -> String {
    format!(
        "# Convert a PRD into prd.json\n\n\
         Convert the product requirements document below into ralph's prd.json, following the \
         `ralph` skill quoted after these instructions: its rules on story size, order, \
         acceptance criteria and the JSON format. Do not implement anything, and change no \
         other file; skip the skill's archiving step (ralph archives runs itself).\n\n\
         Write the JSON, and nothing else, to this file: `{}`\n\n\
         ## The ralph skill\n\n{}\n\n## The PRD ({prd_rel})\n\n{}",
        out.display(),
        SKILL_RALPH.trim_end(),
        crate::prompt::fence(markdown),
    )
}

/// What is wrong with the agent's prd.json beyond what `Prd::parse` checks.
fn problems(prd: &crate::prd::Prd) -> Vec<String> {
    let mut out = Vec::new();
    for s in prd.stories() {
        if s.title.trim().is_empty() {
            out.push(format!("{}: no \"title\"", s.id));
        }
        if s.priority.is_none() {
            out.push(format!("{}: no \"priority\"", s.id));
        }
    }
    out
}

pub(super) fn run(g: &Global, paths: &Paths, md: &Path, opts: &Options) -> Result<u8, Error> {
    let rel = super::rel(&paths.project, md);
    let markdown = read_markdown(md, &rel)?;
    let target = &paths.prd;
    let target_rel = target.strip_prefix(&paths.project).unwrap_or(target).display().to_string();
    let existed = target.exists();
    if existed && !opts.force {
        return Err(Error::Usage(format!(
            "{target_rel} is there already: `ralph import {rel} --force` replaces it with the conversion; nothing was changed"
        )));
    }
    let layers = super::super::flags::layers(g, &paths.project, &SettingArgs::default())?;
    let cfg = layers.resolve();
    let backend = Backend::configured(&cfg.agent)?;
    if opts.dry_run {
        print(&format!(
            "would convert {rel} into {target_rel} with {}, following the ralph skill, then check it (ids, priorities, dependencies)\n\nDry run: nothing was run or written.\n",
            backend.describe()
        ))?;
        return Ok(0);
    }
    let scratch = Scratch::make(paths)?;
    let run = convert(paths, &cfg, &backend, &scratch, &prompt(&rel, &markdown, &scratch.out))?;
    let (bytes, prd) = checked(&run, &scratch, target, &rel)?;
    crate::store::write_atomic(target, &bytes)
        .map_err(|e| Error::io(format!("write {}", target.display()), e))?;
    let _ = std::fs::remove_file(&scratch.out);
    let _ = std::fs::remove_file(&scratch.prompt);
    let n = crate::text::count(prd.stories().len(), "story", "stories");
    print(&format!(
        "{:<12} {target_rel} ({n} from {rel}, converted by {} and checked)\n\nImported. `ralph --dry-run` shows the first iteration; `ralph` runs the loop.\n",
        if existed { "updated" } else { "wrote" },
        backend.describe()
    ))?;
    Ok(0)
}

/// The markdown PRD's text; ralph-claude-code's checklist, an unreadable
/// file or an empty one is refused.
fn read_markdown(md: &Path, rel: &str) -> Result<String, Error> {
    let name = md.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name == "fix_plan.md" || name == "@fix_plan.md" {
        return Err(Error::Usage(format!(
            "{rel} is ralph-claude-code's checklist, not a PRD: run `ralph import` in its project, which turns it into prd.json without an agent"
        )));
    }
    let text =
        std::fs::read(md).map_err(|e| Error::Usage(format!("cannot read {rel}: {e}"))).and_then(
            |b| String::from_utf8(b).map_err(|_| Error::Usage(format!("{rel} is not UTF-8 text"))),
        )?;
    if text.trim().is_empty() {
        return Err(Error::Usage(format!("{rel} is empty: there is no PRD to convert")));
    }
    Ok(text)
}

/// Where one conversion keeps its files, in ralph's state folder: the
/// prompt, the agent's prd.json (none yet) and the agent's log.
struct Scratch {
    prompt: PathBuf,
    out: PathBuf,
    log: PathBuf,
}

impl Scratch {
    fn make(paths: &Paths) -> Result<Scratch, Error> {
        let dir = paths.store.root().join("import");
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let out = dir.join("prd.json");
        let _ = std::fs::remove_file(&out);
        Ok(Scratch { prompt: dir.join("prompt.md"), out, log: dir.join("convert.log") })
    }
}

/// The agent run on `prompt`, in its sandbox, told to write the scratch
/// prd.json.
fn convert(
    paths: &Paths,
    cfg: &Config,
    backend: &Backend,
    scratch: &Scratch,
    prompt: &str,
) -> Result<agent::AgentRun, Error> {
    crate::store::write_replace(&scratch.prompt, prompt.as_bytes())
        .map_err(|e| Error::io(format!("write {}", scratch.prompt.display()), e))?;
    let mut invocation =
        backend.invocation_in(prompt, &scratch.prompt, agent::backend::InheritedEnv::current())?;
    invocation.env_set.extend([
        ("RALPH_PROJECT_DIR".to_string(), paths.project.display().to_string()),
        ("RALPH_PRD".to_string(), scratch.out.display().to_string()),
    ]);
    crate::signals::install();
    let limits = agent::supervise::TimeLimits {
        timeout: Some(cfg.agent.timeout).filter(|t| !t.is_zero()),
        idle: cfg.agent.idle_timeout,
        grace: cfg.agent.grace,
        deadline: None,
        interruptible: true,
    };
    let patterns =
        crate::analyze::Patterns::configured(&cfg.patterns).map_err(|e| Error::Config(e.into()))?;
    let redactor = crate::redact::Redactor::from_env();
    let env = |k: &str| std::env::var(k).ok();
    let sandbox = crate::sandbox::Sandbox::new(cfg.sandbox.clone(), &env)?;
    let child = sandbox
        .child(Some(backend.tool), &paths.project, &invocation.program, &invocation.env_set)
        .map_err(|e| Error::io("make the agent's sandbox temp dir", e))?;
    let run = agent::run(
        &invocation,
        agent::Place {
            cwd: &paths.project,
            log: &scratch.log,
            limits,
            sandbox: child.as_ref(),
            log_cap: cfg.logs.max_file_bytes,
        },
        Analyzer::with_patterns(invocation.format, patterns),
        &redactor,
        agent::Watch { show: false, on_event: &mut |_| {} },
    )
    .map_err(|source| agent::SetupError::Spawn {
        source,
        hint: "check agent.tool / agent.command in .ralph/config.toml",
    })?;
    Ok(run)
}

/// The agent's prd.json (ending with a newline), when it ended well and
/// wrote a valid one; else why the conversion of `rel` failed.
fn checked(
    run: &agent::AgentRun,
    scratch: &Scratch,
    target: &Path,
    rel: &str,
) -> Result<(Vec<u8>, crate::prd::Prd), Error> {
    let failed = |why: String| {
        Error::Usage(format!(
            "the conversion of {rel} failed: {why}; nothing was changed (the agent's output: {})",
            scratch.log.display()
        ))
    };
    if !run.finished.success() {
        let why = match &run.outcome.error {
            Some(e) => e.to_string(),
            None => format!("the agent ended with {:?}", run.finished.exit_code),
        };
        return Err(failed(why));
    }
    let out = &scratch.out;
    let mut bytes =
        std::fs::read(out).map_err(|_| failed(format!("the agent wrote no {}", out.display())))?;
    let prd = crate::prd::Prd::parse(&bytes, target).map_err(|e| failed(e.to_string()))?;
    let wrong = problems(&prd);
    if !wrong.is_empty() {
        return Err(failed(wrong.join("; ")));
    }
    if !bytes.ends_with(b"\n") {
        bytes.push(b'\n');
    }
    Ok((bytes, prd))
}
