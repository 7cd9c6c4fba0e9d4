//! The prompt of one iteration: the template filled in with the story and
//! what ralph knows from earlier iterations (its feedback, the last valid
//! handoff, the story's lessons, armed rules).

use super::Run;
use crate::prd::{Prd, Story};

impl Run<'_> {
    /// The prompt for `story` in iteration `n`, and the ids of the armed
    /// rules it carries.
    pub(super) fn prompt(&mut self, prd: &Prd, story: &Story, n: u32) -> (String, Vec<String>) {
        let story_json = serde_json::to_string_pretty(&story_value(prd, story)).unwrap_or_default();
        let mut context = String::new();
        if let Some(feedback) = &self.state.feedback {
            context.push_str("## What ralph saw after the previous iteration\n");
            context.push_str(feedback);
            context.push('\n');
        }
        if let Some(mut h) = self
            .state
            .handoff
            .clone()
            .and_then(|v| serde_json::from_value::<crate::handoff::Handoff>(v).ok())
        {
            // Its lesson, if any, is in the lessons section already.
            h.lesson = None;
            context.push('\n');
            context.push_str(&crate::handoff::prompt_section(&h));
        }
        self.push_lessons(&mut context, &story.id);
        let applied = self.push_rules(&mut context);
        let gate_hint = match self.gate_command(story) {
            Some(cmd) => format!("; ralph verifies your work with `{}`", cmd.join(" ")),
            None => String::new(),
        };
        let iteration = n.to_string();
        let max = self.state.max_iterations.to_string();
        let prd_path = self.paths.prd.display().to_string();
        let progress = self.paths.progress.display().to_string();
        let handoff = self.paths.store.handoff().display().to_string();
        let branch = self
            .branch
            .clone()
            .or_else(|| self.repo.current_branch())
            .unwrap_or_else(|| "(current)".into());
        let text = crate::prompt::render(
            &self.template,
            &[
                ("iteration", &iteration),
                ("max_iterations", &max),
                ("project", prd.project().unwrap_or("this project")),
                ("branch", &branch),
                ("prd_path", &prd_path),
                ("progress_path", &progress),
                ("handoff_path", &handoff),
                ("story_id", &story.id),
                ("story_title", &story.title),
                ("story", &story_json),
                ("gate_hint", &gate_hint),
                ("context", &context),
            ],
        );
        (text, applied)
    }

    fn push_lessons(&mut self, context: &mut String, story: &str) {
        use crate::learn::lessons;
        match lessons::Lessons::load(&self.paths.store, story) {
            Ok((lessons, warning)) => {
                if let Some(w) = warning {
                    self.warn(w);
                }
                let block = lessons::prompt_block(&lessons, lessons::DEFAULT_PROMPT_CAP);
                if !block.is_empty() {
                    context.push('\n');
                    context.push_str(&block);
                }
            }
            Err(e) => self.warn(format!("cannot read the lessons of {story}: {e}")),
        }
    }

    /// The armed rules' block; returns their ids.
    fn push_rules(&mut self, context: &mut String) -> Vec<String> {
        match crate::learn::rules::Rules::load(&self.paths.store) {
            Ok(rules) => {
                let block = crate::learn::rules::rules_block(&rules);
                if !block.is_empty() {
                    context.push('\n');
                    context.push_str(&block);
                }
                rules.armed_ids()
            }
            Err(e) => {
                self.warn(format!("{e}; no rules in this prompt"));
                Vec::new()
            }
        }
    }

    /// The command that verifies `story`: its own `verify`, else the gate's.
    pub(super) fn gate_command(&self, story: &Story) -> Option<Vec<String>> {
        let gate = self.gate.as_ref()?;
        match &story.verify {
            Some(v) => crate::agent::words::split(v).ok().filter(|w| !w.is_empty()),
            None => Some(gate.command.clone()).filter(|c| !c.is_empty()),
        }
    }
}

/// The story object as it appears in prd.json (unknown fields included).
fn story_value(prd: &Prd, story: &Story) -> serde_json::Value {
    prd.story_json(story.index).unwrap_or_else(|| serde_json::to_value(story).unwrap_or_default())
}
