//! `ralph init`: scaffolds a project (prd.json, `.ralph/config.toml`, the
//! prompt, AGENTS.md and the agent skills), never overwriting a file.

use std::path::{Path, PathBuf};

use crate::agent::Tool;
use crate::cli::{Global, InitArgs};
use crate::error::Error;

use super::common::{print, print_json, project_dir};

const PRD_EXAMPLE: &str = include_str!("../../prd.json.example");
const AGENTS_TEMPLATE: &str = include_str!("../../templates/AGENTS.md");
const SKILL_PRD: &str = include_str!("../../skills/prd/SKILL.md");
const SKILL_RALPH: &str = include_str!("../../skills/ralph/SKILL.md");

/// What `init` did to one file, with its path relative to the project.
#[derive(serde::Serialize)]
struct Step {
    action: &'static str,
    path: String,
    note: Option<String>,
}

/// What `init` did, file by file.
struct Done {
    project: PathBuf,
    steps: Vec<Step>,
}

impl Done {
    fn push(&mut self, action: &'static str, path: &Path, note: &str) {
        let path = path.strip_prefix(&self.project).unwrap_or(path).display().to_string();
        let note = (!note.is_empty()).then(|| note.to_string());
        self.steps.push(Step { action, path, note });
    }

    /// One line per file: `created  prd.json`, `kept     AGENTS.md (already there)`.
    fn lines(&self) -> String {
        self.steps
            .iter()
            .map(|s| {
                let note = s.note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default();
                format!("{:<8} {}{note}\n", s.action, s.path)
            })
            .collect()
    }
}

const NEXT: &str = "describe your feature in prd.json (or ask your agent to use the prd and ralph skills), \
set gate.command in .ralph/config.toml to your test command, then run `ralph`";
/// [`NEXT`] once `--gate` has set the gate.
const NEXT_WITH_GATE: &str = "describe your feature in prd.json (or ask your agent to use the prd and ralph skills), \
then run `ralph`";

/// Writes `content` to `path` unless something is already there.
fn create(path: &Path, content: &str, done: &mut Done) -> Result<(), Error> {
    if path.exists() {
        done.push("kept", path, "already there");
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    }
    crate::store::write_atomic(path, content.as_bytes())
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    done.push("created", path, "");
    Ok(())
}

/// Makes the project's `.gitignore` ignore `entry` (a file ralph keeps next
/// to prd.json), appending a line only when none ignores it yet.
fn ignore(project: &Path, entry: &str, done: &mut Done) -> Result<(), Error> {
    let path = project.join(".gitignore");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
    };
    let bare = entry.trim_start_matches('/');
    if text.lines().map(str::trim).any(|l| l == entry || l == bare) {
        done.push("kept", &path, &format!("already ignores {bare}"));
        return Ok(());
    }
    let mut new = text.clone();
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(&format!("# ralph's record of the last run's branch\n{entry}\n"));
    crate::store::write_atomic(&path, new.as_bytes())
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    let verb = if text.is_empty() { "created" } else { "updated" };
    done.push(verb, &path, &format!("ignores {bare}"));
    Ok(())
}

/// The `.ralph/prompt.md` init writes: the built-in prompt with a note on top.
pub(crate) fn default_prompt() -> String {
    format!(
        "<!-- ralph's iteration prompt. Edit it to suit this project, or delete this file to use the\n     built-in one. Placeholders like {{{{story_id}}}} are filled in each iteration. -->\n{}",
        crate::prompt::BUILTIN
    )
}

/// Scaffolds the project. Idempotent: never overwrites a file.
pub(crate) fn run(g: &Global, args: &InitArgs) -> Result<u8, Error> {
    let dir = project_dir(g)?;
    let dir: PathBuf = dir.canonicalize().map_err(|e| {
        Error::Usage(format!("cannot use {} as the project directory: {e}", dir.display()))
    })?;
    // ralph runs only in a git repository: say so now, not at the first run.
    crate::git::Repo::discover(&dir)?;
    // Where `ralph` will look: an existing project above, else the top of
    // the git repository (from tests/, init does not scaffold tests/).
    let paths = crate::paths::Paths::resolve(&dir, None)?;
    let project = if paths.prd.exists() {
        paths.project
    } else {
        git2::Repository::discover(&dir)
            .ok()
            .and_then(|r| r.workdir().and_then(|w| w.canonicalize().ok()))
            .unwrap_or(dir)
    };
    let store = crate::store::Store::for_project(&project, &project.join("prd.json"));
    store.ensure().map_err(|e| Error::io(format!("create {}", store.work().display()), e))?;
    let mut done = Done { project: project.clone(), steps: Vec::new() };
    done.push(
        "ready",
        store.work(),
        "yours: config and prompt; ralph ignores only its handoff file there",
    );
    let legacy = project.join("scripts/ralph/prd.json");
    if legacy.exists() {
        done.push("kept", &legacy, "ralph.sh layout; ralph uses it");
        ignore(&project, "/scripts/ralph/.last-branch", &mut done)?;
    } else {
        create(&project.join("prd.json"), PRD_EXAMPLE, &mut done)?;
        ignore(&project, "/.last-branch", &mut done)?;
    }
    // Straight from the settings table; templates/config.toml is the same
    // text, kept in the repository for people to read.
    create(&store.config(), &config_text(args)?, &mut done)?;
    create(&store.prompt(), &default_prompt(), &mut done)?;
    create(&project.join("AGENTS.md"), AGENTS_TEMPLATE, &mut done)?;
    match args.tool.skills_dir() {
        Some(dir) => {
            create(&project.join(dir).join("prd/SKILL.md"), SKILL_PRD, &mut done)?;
            create(&project.join(dir).join("ralph/SKILL.md"), SKILL_RALPH, &mut done)?;
        }
        None => done.steps.push(Step {
            action: "skipped",
            path: "skills".into(),
            note: Some(format!(
                "{} has no skills folder; the prd and ralph skills are in ralph's repository under skills/",
                args.tool
            )),
        }),
    }
    let next = if args.gate.is_some() { NEXT_WITH_GATE } else { NEXT };
    if g.json {
        let v = serde_json::json!({
            "project": project.display().to_string(),
            "files": done.steps,
            "next": next,
        });
        print_json(&v)?;
        return Ok(0);
    }
    let next = next.replace("skills), ", "skills),\n");
    print(&format!("{}\nNext: {next}.\n", done.lines()))?;
    Ok(0)
}

/// The settings table's template with what `init` was told set in it: the
/// agent (`--tool`), the gate (`--gate`).
fn config_text(args: &InitArgs) -> Result<String, Error> {
    use super::import::config_file::{Want, edit_noted};
    let template = crate::config::template();
    let mut wants = Vec::new();
    if args.tool != Tool::Claude {
        let value = toml::Value::String(args.tool.name().into());
        wants.push(Want { key: "agent.tool", value, from: format!("--tool {}", args.tool) });
    }
    if let Some(gate) = &args.gate {
        let value = toml::Value::String(gate.clone());
        wants.push(Want { key: "gate.command", value, from: "--gate".into() });
    }
    if wants.is_empty() {
        return Ok(template);
    }
    let note = |w: &Want| format!("# set by `ralph init {}`", w.from);
    let edit = edit_noted(Some(&template), &wants, false, &note)
        .map_err(|e| Error::Usage(format!("cannot write the settings of `ralph init`: {e}")))?;
    Ok(edit.text.unwrap_or(template))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_config_template_file_matches_the_settings_table() {
        // templates/config.toml shows what `ralph init` writes, which is
        // generated from the settings table; the two can never drift apart.
        // `RALPH_BLESS=1 cargo test` rewrites it.
        const FILE: &str = include_str!("../../templates/config.toml");
        let want = crate::config::template();
        if std::env::var_os("RALPH_BLESS").is_some() {
            std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/templates/config.toml"), &want)
                .unwrap();
            return;
        }
        assert_eq!(FILE, want, "templates/config.toml is stale: run RALPH_BLESS=1 cargo test");
    }

    #[test]
    fn the_example_prd_is_valid() {
        let prd = crate::prd::Prd::parse(
            super::PRD_EXAMPLE.as_bytes(),
            std::path::Path::new("prd.json.example"),
        )
        .unwrap();
        assert_eq!(prd.next_story().unwrap().id, "US-001");
    }
}
