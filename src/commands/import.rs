//! `ralph import`: a project set up for ralph-claude-code or ralph.sh made
//! ralph's in one command, and a markdown PRD turned into prd.json.
//!
//! [`detect`] finds the old tools' files, [`plan`] decides what becomes
//! of each (pure parsers: [`fix_plan`], [`ralphrc`], [`config_file`]), and
//! only then is anything written: nothing of the user's is overwritten
//! without `--force`, `--dry-run` prints the same plan and writes nothing,
//! and a second import finds everything already there. [`markdown`] has
//! the configured agent convert a PRD and checks its work before it lands.
//! [`notice`] is what a run says, once, when it finds these files unimported.

pub(super) mod config_file;
mod detect;
mod fix_plan;
mod markdown;
mod plan;
mod ralphrc;
mod sources;

use std::path::Path;

use crate::agent::Tool;
use crate::cli::{Global, ImportArgs};
use crate::error::Error;
use crate::paths::Paths;

use super::common::{print, print_json, project_dir};
use plan::Action;

/// What the import was asked to do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    pub(crate) force: bool,
    pub(crate) prompt: bool,
    pub(crate) dry_run: bool,
}

pub(crate) fn run(g: &Global, args: &ImportArgs) -> Result<u8, Error> {
    let opts = Options { force: args.force, prompt: args.prompt, dry_run: args.dry_run };
    let dir = project_dir(g)?;
    let (dir, markdown) = match args.path.as_ref().map(|p| (p, dir.join(p))) {
        Some((_, full)) if full.is_dir() => (full, None),
        Some((_, full)) if full.is_file() => (dir, Some(full.canonicalize().unwrap_or(full))),
        Some((p, _)) => {
            return Err(Error::Usage(format!(
                "{} does not exist: give the project folder to import, or a markdown PRD to convert",
                p.display()
            )));
        }
        None => (dir, None),
    };
    let paths = Paths::resolve(&dir, g.prd.as_deref())?;
    if let Some(md) = markdown {
        return markdown::run(g, &paths, &md, &opts);
    }
    let found = detect::detect(&paths.project);
    if found.rcc.is_none() && found.ralph_sh.is_none() {
        return Err(Error::Usage(format!(
            "nothing to import in {}: no ralph-claude-code files (.ralph/PROMPT.md, .ralph/fix_plan.md, .ralph/AGENT.md, .ralphrc, or the older @fix_plan.md and @AGENT.md) and no ralph.sh folder (scripts/ralph/)",
            paths.project.display()
        )));
    }
    let plan = plan::plan(&paths, &found, &opts);
    let writes = plan.writes();
    if !opts.dry_run {
        paths
            .store
            .ensure()
            .map_err(|e| Error::io(format!("create {}", paths.store.work().display()), e))?;
        plan.apply()?;
        let mut handled = plan.sources.clone();
        handled.extend(found.ralph_sh.iter().map(|sh| tool_key(sh.tool)));
        Handled::add(&paths, &handled);
    }
    let refused = plan.steps.iter().any(|s| s.action == Action::Refuse);
    if g.json {
        let v = serde_json::json!({
            "project": paths.project.display().to_string(),
            "dry_run": opts.dry_run,
            "changed": writes && !opts.dry_run,
            "steps": plan.steps,
        });
        print_json(&v)?;
        return Ok(0);
    }
    let mut out: String = plan
        .steps
        .iter()
        .map(|s| {
            let note = if s.note.is_empty() { String::new() } else { format!(" ({})", s.note) };
            format!("{:<12} {}{note}\n", s.action.label(opts.dry_run), s.what)
        })
        .collect();
    out.push('\n');
    out.push_str(match (opts.dry_run, writes) {
        (true, true) => "Dry run: nothing was written. Run `ralph import` to write the above.\n",
        (true, false) => "Dry run: nothing to write; everything is already imported.\n",
        (false, true) => {
            "Imported. `ralph --dry-run` shows the first iteration; `ralph` runs the loop.\n"
        }
        (false, false) => "Nothing to do: everything is already imported; nothing was changed.\n",
    });
    if refused {
        out.push_str("Some files were left alone because yours are there: `ralph import --force` replaces them.\n");
    }
    print(&out)?;
    Ok(0)
}

/// `p` as the summary names it: relative to the project, a folder with a `/`.
fn rel(project: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(project).unwrap_or(p).display().to_string();
    if p.is_dir() { format!("{rel}/") } else { rel }
}

fn tool_key(tool: Tool) -> String {
    format!("ralph.sh --tool {}", tool.name())
}

/// The old tools' files a run has already spoken of, or an import covered:
/// `import.json` in ralph's state folder.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Handled {
    version: u32,
    handled: Vec<String>,
}

impl Handled {
    fn path(paths: &Paths) -> std::path::PathBuf {
        paths.store.path("import.json")
    }

    fn load(paths: &Paths) -> Handled {
        std::fs::read(Self::path(paths))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Records `more`; it only informs, so a failure to write is no error.
    fn add(paths: &Paths, more: &[String]) {
        let mut h = Handled::load(paths);
        h.version = 1;
        for m in more {
            if !h.handled.contains(m) {
                h.handled.push(m.clone());
            }
        }
        if std::fs::create_dir_all(paths.store.root()).is_ok()
            && let Ok(bytes) = crate::store::json_bytes(&h)
        {
            let _ = crate::store::write_replace(&Self::path(paths), &bytes);
        }
    }
}

/// What a run says, once, about the old tools' files it ignores: `None`
/// when there are none, or it has said so before (or they were imported).
pub(crate) fn notice(paths: &Paths, tool: Tool) -> Option<String> {
    let found = detect::detect(&paths.project);
    let rel = |p: &Path| rel(&paths.project, p);
    let mut ignored: Vec<(String, String)> = Vec::new();
    if let Some(rcc) = &found.rcc {
        for p in
            [&rcc.ralphrc, &rcc.fix_plan, &rcc.prompt, &rcc.agent, &rcc.specs].into_iter().flatten()
        {
            ignored.push((rel(p), rel(p)));
        }
    }
    if let Some(sh) = &found.ralph_sh {
        if let Some(p) = sh.prompt.as_ref().filter(|p| p.customised) {
            ignored.push((rel(&p.path), format!("{} (customised)", rel(&p.path))));
        }
        if sh.tool != tool {
            ignored.push((
                tool_key(sh.tool),
                format!("ralph.sh's --tool {} (ralph runs {})", sh.tool.name(), tool.name()),
            ));
        }
    }
    let seen = Handled::load(paths).handled;
    ignored.retain(|(key, _)| !seen.contains(key));
    if ignored.is_empty() {
        return None;
    }
    let keys: Vec<String> = ignored.iter().map(|(k, _)| k.clone()).collect();
    Handled::add(paths, &keys);
    let list: Vec<&str> = ignored.iter().map(|(_, text)| text.as_str()).collect();
    Some(format!(
        "ralph does not read {}; `ralph import --dry-run` shows what it would make of them, `ralph import` converts them (said once)",
        list.join(", ")
    ))
}

/// Why there is no prd.json, when ralph-claude-code's task list is there.
pub(crate) fn missing_prd(paths: &Paths) -> Option<Error> {
    if std::fs::symlink_metadata(&paths.prd).is_ok() {
        return None;
    }
    let fix_plan = detect::detect(&paths.project).rcc?.fix_plan?;
    let rel = fix_plan.strip_prefix(&paths.project).unwrap_or(&fix_plan).display().to_string();
    Some(Error::Usage(format!(
        "no prd.json in {}, but ralph-claude-code's {rel} is there: `ralph import` turns its checklist into prd.json (`ralph import --dry-run` shows how first)",
        paths.project.display()
    )))
}
