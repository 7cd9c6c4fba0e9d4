//! What `ralph import` does with what it found, decided before anything is
//! written: one [`Step`] per file or setting, each saying what happens to
//! it and why. `--dry-run` prints the plan; otherwise [`Plan::apply`]
//! writes what it says and nothing else.

use std::path::{Path, PathBuf};

use serde::Serialize;
use toml::Value;

use super::Options;
use super::config_file::{self, Want};
use super::detect::Found;
use crate::error::Error;
use crate::paths::Paths;

/// What happens to one file or setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Action {
    /// A new file.
    Write,
    /// A file that is there, changed (settings added, or ralph's own untouched default replaced).
    Update,
    /// A setting of the old tool carried over.
    Map,
    /// Left as it is: ralph uses it where it is, or it is already imported.
    Keep,
    /// Would overwrite something of the user's: needs `--force`.
    Refuse,
    /// A setting with no equivalent in ralph.
    Drop,
    /// Could not be read as what it should be; left alone.
    Skip,
}

impl Action {
    pub(crate) fn label(self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Action::Write, false) => "wrote",
            (Action::Write, true) => "would write",
            (Action::Update, false) => "updated",
            (Action::Update, true) => "would update",
            (Action::Map, false) => "mapped",
            (Action::Map, true) => "would map",
            (Action::Keep, _) => "kept",
            (Action::Refuse, _) => "refused",
            (Action::Drop, _) => "dropped",
            (Action::Skip, _) => "skipped",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Step {
    pub(crate) action: Action,
    /// A path relative to the project, or `.ralphrc KEY`.
    pub(crate) what: String,
    pub(crate) note: String,
    /// What a Write or Update puts where.
    #[serde(skip)]
    pub(crate) content: Option<(PathBuf, String)>,
}

#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) steps: Vec<Step>,
    /// The files of the old tools the plan covers (for the run-start notice).
    pub(crate) sources: Vec<String>,
}

impl Plan {
    pub(super) fn push(
        &mut self,
        action: Action,
        what: impl Into<String>,
        note: impl Into<String>,
    ) {
        self.steps.push(Step { action, what: what.into(), note: note.into(), content: None });
    }

    /// Writes a new file, or keeps the one there when it already says
    /// this, or refuses to overwrite it without `force` (`ours`: a text
    /// ralph itself wrote there, replaced without asking).
    pub(super) fn file(
        &mut self,
        rel: String,
        path: PathBuf,
        content: String,
        ctx: &Ctx,
        note: String,
    ) {
        let (action, note) = match std::fs::read_to_string(&path) {
            Err(_) if !path.exists() => (Action::Write, note),
            Ok(old) if old == content => (Action::Keep, "already imported".to_string()),
            Ok(old) if ctx.ours(&path, &old) => {
                (Action::Update, format!("{note}; replaces ralph init's untouched file"))
            }
            _ if ctx.opts.force => (Action::Update, format!("{note}; --force: replaces yours")),
            _ => (Action::Refuse, format!("{note}, but yours is there: --force replaces it")),
        };
        let content = matches!(action, Action::Write | Action::Update).then_some((path, content));
        self.steps.push(Step { action, what: rel, note, content });
    }

    /// Whether anything would be written.
    pub(crate) fn writes(&self) -> bool {
        self.steps.iter().any(|s| s.content.is_some())
    }

    /// Writes every Write and Update step, each atomically.
    pub(crate) fn apply(&self) -> Result<(), Error> {
        for (path, content) in self.steps.iter().filter_map(|s| s.content.as_ref()) {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
            }
            crate::store::write_atomic(path, content.as_bytes())
                .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
        }
        Ok(())
    }
}

pub(super) struct Ctx<'a> {
    pub(super) project: &'a Path,
    pub(super) paths: &'a Paths,
    pub(super) opts: &'a Options,
}

impl Ctx<'_> {
    pub(super) fn rel(&self, p: &Path) -> String {
        super::rel(self.project, p)
    }

    /// What `ralph init` wrote and nobody changed: ralph's, not the user's.
    fn ours(&self, path: &Path, old: &str) -> bool {
        (path == self.paths.store.prompt() && old == crate::commands::init::default_prompt())
            || (path == self.paths.prd && old == crate::prd::EXAMPLE)
    }
}

/// The plan for `found` in `project`.
pub(crate) fn plan(paths: &Paths, found: &Found, opts: &Options) -> Plan {
    let ctx = Ctx { project: &paths.project, paths, opts };
    let mut plan = Plan::default();
    let mut wants: Vec<Want> = Vec::new();
    let mut context: Vec<String> = Vec::new();
    let mut template: Option<(PathBuf, String)> = None;
    if let Some(rcc) = &found.rcc {
        super::sources::from_rcc(&ctx, rcc, &mut plan, &mut wants, &mut context, &mut template);
    }
    if let Some(sh) = &found.ralph_sh {
        super::sources::from_ralph_sh(&ctx, sh, &mut plan, &mut wants, &mut template);
    }
    let had_prompt = found.rcc.as_ref().is_some_and(|r| r.prompt.is_some())
        || found.ralph_sh.as_ref().and_then(|s| s.prompt.as_ref()).is_some_and(|p| p.customised);
    if opts.prompt && !had_prompt {
        plan.push(
            Action::Skip,
            "--prompt",
            "there is no PROMPT.md and no customised ralph.sh prompt to make the template",
        );
    }
    if let Some((source, text)) = template {
        let rel = ctx.rel(&source);
        plan.file(
            ctx.rel(&paths.store.prompt()),
            paths.store.prompt(),
            adapt(&text, &rel),
            &ctx,
            format!("the prompt template, from {rel}, as --prompt asks"),
        );
        wants.push(Want {
            key: "run.require_handoff",
            value: Value::Boolean(false),
            from: format!("{rel}, which asks for no handoff file"),
        });
    }
    if !context.is_empty() {
        let value = Value::Array(context.iter().cloned().map(Value::String).collect());
        wants.push(Want { key: "run.context", value, from: "ralph-claude-code's files".into() });
    }
    config(&ctx, &wants, &mut plan);
    plan
}

/// The settings, written into `.ralph/config.toml`.
fn config(ctx: &Ctx<'_>, wants: &[Want], plan: &mut Plan) {
    if wants.is_empty() {
        return;
    }
    let path = ctx.paths.store.config();
    let rel = ctx.rel(&path);
    let existing = std::fs::read_to_string(&path).ok();
    let by_hand = || {
        let lines: Vec<String> = wants.iter().map(|w| format!("{} = {}", w.key, w.value)).collect();
        lines.join("; ")
    };
    let edit = match config_file::edit(existing.as_deref(), wants, ctx.opts.force) {
        Ok(e) => e,
        Err(why) => {
            let note =
                format!("cannot add the settings safely ({why}); set them by hand: {}", by_hand());
            return plan.push(Action::Skip, rel, note);
        }
    };
    for (key, theirs) in &edit.conflicts {
        let ours =
            wants.iter().find(|w| w.key == *key).map(|w| w.value.to_string()).unwrap_or_default();
        let note = if ctx.opts.force {
            format!("--force: {key} = {ours} replaces your {theirs}")
        } else {
            format!("{key} is {theirs} there, the import says {ours}: --force replaces it")
        };
        plan.push(if ctx.opts.force { Action::Update } else { Action::Refuse }, rel.clone(), note);
    }
    let Some(text) = edit.text else {
        if edit.conflicts.is_empty() {
            plan.push(Action::Keep, rel, "already has the imported settings");
        }
        return;
    };
    if let Err(e) = crate::config::Layers::check_project_text(&path, &text) {
        return plan.push(
            Action::Skip,
            rel,
            format!("the edit would not load ({e}); set by hand: {}", by_hand()),
        );
    }
    let added: Vec<&str> =
        wants.iter().map(|w| w.key).filter(|k| !edit.already.contains(k)).collect();
    let action = if existing.is_some() { Action::Update } else { Action::Write };
    plan.steps.push(Step {
        action,
        what: rel,
        note: format!("sets {}", added.join(", ")),
        content: Some((path, text)),
    });
}

/// A prompt of the old tool as ralph's template: the text as it is, a
/// note for the person at the top (never sent), and ralph's part at the
/// end: the story, the files, and what ralph knows from earlier iterations.
pub(crate) fn adapt(text: &str, source: &str) -> String {
    format!(
        "<!-- Imported by `ralph import` from {source}. ralph sends this file as the prompt of every\n     iteration with {{{{placeholders}}}} filled in; the section at the end is ralph's. -->\n{}\n\n## From ralph: this iteration\n- Your story: {{{{story_id}}}} ({{{{story_title}}}}) in the PRD `{{{{prd_path}}}}`. Work on this story only, and set its `\"passes\"` to true there once it is done{{{{gate_hint}}}}.\n- Progress log: `{{{{progress_path}}}}`\n\n{{{{context}}}}\n",
        text.trim_end()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_adapted_prompt_keeps_the_text_and_uses_only_placeholders_ralph_fills() {
        let t = super::adapt("# Mine\nrun make lint\n\n", "scripts/ralph/prompt.md");
        let sent = crate::prompt::without_leading_comments(&t);
        assert!(sent.starts_with("# Mine\nrun make lint\n\n## From ralph"), "{sent}");
        let vars = ["story_id", "story_title", "prd_path", "progress_path", "gate_hint", "context"];
        let filled: Vec<(&str, &str)> = vars.iter().map(|v| (*v, "X")).collect();
        let out = crate::prompt::render(sent, &filled);
        assert!(!out.contains("{{"), "{out}");
        assert!(out.contains("Your story: X (X) in the PRD `X`"), "{out}");
    }
}
