//! The prompt of one iteration: the template filled in with the story and
//! what ralph knows from earlier iterations (its feedback, the last valid
//! handoff, the story's lessons, armed rules). Rendering reads the store
//! but writes nothing, so `--dry-run` shows exactly what a run would send.

use super::Run;
use crate::paths::Paths;
use crate::prd::{Prd, Story};

/// What a prompt is made of.
pub(super) struct PromptInputs<'a> {
    pub template: &'a str,
    pub paths: &'a Paths,
    pub prd: &'a Prd,
    pub story: &'a Story,
    pub iteration: u32,
    pub max_iterations: u32,
    pub branch: String,
    /// What ralph saw after the previous iteration.
    pub feedback: Option<&'a str>,
    /// The last valid handoff, as the agent wrote it.
    pub handoff: Option<&'a serde_json::Value>,
    /// The command that will verify the story.
    pub gate: Option<&'a [String]>,
    /// Project files to read first (`run.context`).
    pub read_first: &'a [String],
}

/// A rendered prompt, the armed rules it carries, and what went wrong
/// reading lessons or rules (said, never fatal).
pub(super) struct Rendered {
    pub text: String,
    pub applied: Vec<String>,
    pub warnings: Vec<String>,
}

pub(super) fn render(i: &PromptInputs<'_>) -> Rendered {
    let mut warnings = Vec::new();
    let story_json = serde_json::to_string_pretty(&story_value(i.prd, i.story)).unwrap_or_default();
    let mut context = read_first(i.read_first);
    if let Some(feedback) = i.feedback {
        context.push_str("## What ralph saw after the previous iteration\n");
        context.push_str(feedback);
        context.push('\n');
    }
    if let Some(mut h) =
        i.handoff.cloned().and_then(|v| serde_json::from_value::<crate::handoff::Handoff>(v).ok())
    {
        // Its lesson, if any, is in the lessons section already.
        h.lesson = None;
        context.push('\n');
        context.push_str(&crate::handoff::prompt_section(&h));
    }
    push_lessons(&mut context, i.paths, &i.story.id, &mut warnings);
    let applied = push_rules(&mut context, i.paths, &mut warnings);
    let gate_hint = match i.gate {
        Some(cmd) => format!("; ralph verifies your work with `{}`", crate::gate::display(cmd)),
        None => String::new(),
    };
    let iteration = i.iteration.to_string();
    let max = i.max_iterations.to_string();
    let prd_path = i.paths.prd.display().to_string();
    let progress = i.paths.progress.display().to_string();
    let handoff = i.paths.store.handoff().display().to_string();
    let text = crate::prompt::render(
        i.template,
        &[
            ("iteration", &iteration),
            ("max_iterations", &max),
            ("project", i.prd.project().unwrap_or("this project")),
            ("branch", &i.branch),
            ("prd_path", &prd_path),
            ("progress_path", &progress),
            ("handoff_path", &handoff),
            ("story_id", &i.story.id),
            ("story_title", &i.story.title),
            ("story", &story_json),
            ("gate_hint", &gate_hint),
            ("context", &context),
        ],
    );
    Rendered { text, applied, warnings }
}

/// The section that points the agent to the project's own notes.
fn read_first(files: &[String]) -> String {
    if files.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "## Project notes: read these first\n\
         These files hold this project's own instructions (build notes, specs, the prompt of the \
         loop it used before ralph). Read them before you start; where they disagree with the \
         steps above (which task list to use, what to commit, when to stop), the steps above win.\n",
    );
    for f in files {
        s.push_str(&format!("- `{f}`\n"));
    }
    s.push('\n');
    s
}

fn push_lessons(context: &mut String, paths: &Paths, story: &str, warnings: &mut Vec<String>) {
    use crate::learn::lessons;
    match lessons::Lessons::load(&paths.store, story) {
        Ok((lessons, warning)) => {
            warnings.extend(warning);
            let block = lessons::prompt_block(&lessons, lessons::DEFAULT_PROMPT_CAP);
            if !block.is_empty() {
                context.push('\n');
                context.push_str(&block);
            }
        }
        Err(e) => warnings.push(format!("cannot read the lessons of {story}: {e}")),
    }
}

/// The armed rules' block; returns their ids.
fn push_rules(context: &mut String, paths: &Paths, warnings: &mut Vec<String>) -> Vec<String> {
    match crate::learn::rules::Rules::load(&paths.store) {
        Ok(rules) => {
            let block = crate::learn::rules::rules_block(&rules);
            if !block.is_empty() {
                context.push('\n');
                context.push_str(&block);
            }
            rules.armed_ids()
        }
        Err(e) => {
            warnings.push(format!("{e}; no rules in this prompt"));
            Vec::new()
        }
    }
}

/// The command that verifies `story`: its own `verify`, else the gate's
/// (`None` without a gate).
pub(super) fn gate_command(gate: &[String], story: &Story) -> Option<Vec<String>> {
    match &story.verify {
        Some(v) => crate::gate::argv(v).ok().filter(|w| !w.is_empty()),
        None => Some(gate.to_vec()).filter(|c| !c.is_empty()),
    }
}

impl Run<'_> {
    /// The prompt for `story` in iteration `n`, and the ids of the armed
    /// rules it carries.
    pub(super) fn prompt(&mut self, prd: &Prd, story: &Story, n: u32) -> (String, Vec<String>) {
        let gate = self.gate_command(story);
        let branch = self
            .kit
            .branch
            .clone()
            .or_else(|| self.repo.current_branch())
            .unwrap_or_else(|| "(current)".into());
        let rendered = render(&PromptInputs {
            template: &self.kit.template,
            paths: self.paths,
            prd,
            story,
            iteration: n,
            max_iterations: self.state.max_iterations,
            branch,
            feedback: self.state.feedback.as_deref(),
            handoff: self.state.handoff.as_ref(),
            gate: gate.as_deref(),
            read_first: &self.cfg.run.context,
        });
        for w in rendered.warnings {
            self.warn(w);
        }
        (rendered.text, rendered.applied)
    }

    /// The command that verifies `story`, when there is a gate.
    pub(super) fn gate_command(&self, story: &Story) -> Option<Vec<String>> {
        gate_command(&self.kit.gate.as_ref()?.command, story)
    }
}

/// The story object as it appears in prd.json (unknown fields included).
fn story_value(prd: &Prd, story: &Story) -> serde_json::Value {
    prd.story_json(story.index).unwrap_or_else(|| serde_json::to_value(story).unwrap_or_default())
}
