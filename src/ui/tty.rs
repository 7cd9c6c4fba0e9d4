//! The live display on a terminal: an overall bar (stories passing / total)
//! and a spinner line for the running iteration with its story, elapsed
//! time and the agent's latest line. Log lines go above the bars through
//! `ProgressBar::println`, so the two never tear each other.

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Style, describe};
use crate::event::{Event, Reporter};

pub struct Tty {
    multi: MultiProgress,
    overall: ProgressBar,
    current: Option<ProgressBar>,
    style: Style,
}

impl Tty {
    pub fn new(style: Style) -> Tty {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout_with_hz(4));
        let overall = multi.add(ProgressBar::new(0));
        overall.set_style(
            ProgressStyle::with_template(
                "{prefix:.bold} [{bar:30.green/dim}] {pos}/{len} stories pass  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        overall.set_prefix("ralph");
        Tty { multi, overall, current: None, style }
    }

    fn println(&self, text: &str) {
        for line in text.lines() {
            let _ = self.multi.println(line);
        }
    }

    fn spinner(&mut self, label: String) -> &ProgressBar {
        if let Some(old) = self.current.take() {
            old.finish_and_clear();
        }
        let bar = self.multi.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner:.cyan} {prefix} [{elapsed}] {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(label);
        bar.enable_steady_tick(Duration::from_millis(120));
        self.current.insert(bar)
    }
}

impl Reporter for Tty {
    fn emit(&mut self, event: &Event) {
        match event {
            Event::RunStart { stories, passing, max_iterations, .. } => {
                self.overall.set_length(*stories as u64);
                self.overall.set_position(*passing as u64);
                self.overall.set_message(format!("0/{max_iterations} iterations"));
            }
            Event::IterationStart { iteration, max_iterations, story_id, .. } => {
                self.overall.set_message(format!("{iteration}/{max_iterations} iterations"));
                let bar = self.spinner(format!("iteration {iteration} · {story_id}"));
                bar.set_message("starting the agent");
            }
            Event::AgentOutput { text, .. } => {
                if let Some(bar) = &self.current
                    && let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty())
                {
                    bar.set_message(last.to_string());
                }
                if self.style.agent_output
                    && self.style.verbose
                    && let Some(t) = describe(event, self.style)
                {
                    self.println(&t);
                }
                return;
            }
            Event::Waiting { seconds, .. } => {
                let bar = self.spinner("waiting".into());
                bar.set_length(*seconds);
            }
            Event::WaitTick { remaining_s } => {
                if let Some(bar) = &self.current {
                    bar.set_message(format!("{} left", super::duration(remaining_s * 1000)));
                }
                return;
            }
            Event::IterationEnd { .. } | Event::RunEnd { .. } => {
                if let Some(bar) = self.current.take() {
                    bar.finish_and_clear();
                }
            }
            _ => {}
        }
        if let Event::IterationEnd { .. } | Event::Gate { .. } = event {
            // Stories passing is re-read by the driver; the end event carries the total.
        }
        if let Event::RunEnd { passing, .. } = event {
            self.overall.set_position(*passing as u64);
            self.overall.finish_and_clear();
        }
        if let Some(text) = describe(event, self.style) {
            self.println(&text);
        }
    }
}

impl Tty {
    /// Updates the overall bar's count of passing stories.
    pub fn set_passing(&self, passing: usize) {
        self.overall.set_position(passing as u64);
    }
}
