//! The live display on a terminal: an overall bar (stories passing / total)
//! and a spinner line for the running iteration with its story, elapsed
//! time and the agent's latest line, or a countdown while a limit is waited
//! out. Log lines go above the bars through `MultiProgress::println`, so the
//! two never tear each other.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Style, countdown, describe};
use crate::event::{Event, Reporter};

pub struct Tty {
    multi: MultiProgress,
    /// Drawn from the run's start: before it the story count is unknown,
    /// and an empty bar would read "0/0 stories pass".
    overall: Option<ProgressBar>,
    current: Option<ProgressBar>,
    /// What the current countdown waits for.
    waiting_for: String,
    passing_at_start: usize,
    /// Stories that came to pass during this run.
    passed: BTreeSet<String>,
    max_iterations: u32,
    iteration: u32,
    /// Inside the agent's RALPH_STATUS block, whose lines are for ralph,
    /// not for the spinner.
    in_status_block: bool,
    cost_usd: f64,
    /// A parallel run's workers: one line each, and whether each is inside
    /// a RALPH_STATUS block.
    workers: BTreeMap<u32, (ProgressBar, bool)>,
    style: Style,
}

impl Tty {
    pub fn new(style: Style) -> Tty {
        Tty {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stdout_with_hz(4)),
            overall: None,
            current: None,
            waiting_for: String::new(),
            passing_at_start: 0,
            passed: BTreeSet::new(),
            max_iterations: 0,
            iteration: 0,
            in_status_block: false,
            cost_usd: 0.0,
            workers: BTreeMap::new(),
            style,
        }
    }

    /// A template, with its colour markup dropped when colour is off.
    fn template(&self, coloured: &str, plain: &str) -> ProgressStyle {
        let t = if self.style.color { coloured } else { plain };
        ProgressStyle::with_template(t).unwrap_or_else(|_| ProgressStyle::default_bar())
    }

    fn println(&self, text: &str) {
        for line in text.lines() {
            let _ = self.multi.println(line);
        }
    }

    fn start_overall(&mut self, stories: usize, passing: usize) {
        // Configured before it joins the display, so its first frame is complete.
        let bar = ProgressBar::with_draw_target(Some(stories as u64), ProgressDrawTarget::hidden());
        bar.set_style(
            self.template(
                "{prefix:.bold} [{bar:30.green/dim}] {pos}/{len} stories pass · {msg} · {elapsed_precise:.dim}",
                "{prefix} [{bar:30}] {pos}/{len} stories pass · {msg} · {elapsed_precise}",
            )
            .progress_chars("=> "),
        );
        bar.set_prefix("ralph");
        bar.set_position(passing as u64);
        self.overall = Some(bar);
        self.update_overall();
        if let Some(bar) = &self.overall {
            let bar = self.multi.insert(0, bar.clone());
            // Keeps the run's clock moving while nothing else changes.
            bar.enable_steady_tick(Duration::from_secs(1));
        }
    }

    fn update_overall(&self) {
        let Some(bar) = &self.overall else { return };
        let mut msg = if self.iteration == 0 {
            format!("up to {} iterations", self.max_iterations)
        } else {
            format!("iteration {}/{}", self.iteration, self.max_iterations)
        };
        if self.cost_usd > 0.0 {
            msg.push_str(&format!(" · ${:.2}", self.cost_usd));
        }
        bar.set_message(msg);
        let passing = (self.passing_at_start + self.passed.len()) as u64;
        bar.set_position(passing.min(bar.length().unwrap_or(passing)));
    }

    fn spinner(&mut self, style: ProgressStyle, label: String, msg: String) {
        self.clear_spinner();
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(style);
        bar.set_prefix(label);
        bar.set_message(msg);
        let bar = self.multi.add(bar);
        bar.enable_steady_tick(Duration::from_millis(120));
        self.current = Some(bar);
    }

    fn clear_spinner(&mut self) {
        if let Some(old) = self.current.take() {
            old.finish_and_clear();
        }
    }
}

impl Tty {
    /// A parallel run's events: each worker's line shows its story, how
    /// long it has been at it and its agent's latest line; merges move the
    /// run's bar. `false` when the event is not one of these.
    fn worker_event(&mut self, event: &Event) -> bool {
        match event {
            Event::WorkerStart { worker, story_id, .. } => {
                let style = self.template(
                    "{spinner:.cyan} {prefix:.bold} {elapsed_precise:.dim} {wide_msg}",
                    "{spinner} {prefix} {elapsed_precise} {wide_msg}",
                );
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
                bar.set_style(style);
                bar.set_prefix(format!("w{worker} · {story_id}"));
                bar.set_message("starting the agent");
                let bar = self.multi.add(bar);
                bar.enable_steady_tick(Duration::from_millis(120));
                if let Some((old, _)) = self.workers.insert(*worker, (bar, false)) {
                    old.finish_and_clear();
                }
            }
            Event::Worker { worker, inner, .. } => {
                if let Event::AgentOutput { text, .. } = inner.as_ref() {
                    // The agent's lines are events even under -q (for the
                    // run's events.jsonl); -q shows none of them.
                    if self.style.agent_output
                        && let Some((bar, in_block)) = self.workers.get_mut(worker)
                        && let Some(line) = latest_line(text, in_block)
                    {
                        bar.set_message(line);
                    }
                    if !(self.style.agent_output && self.style.verbose) {
                        return true;
                    }
                }
                if let Event::IterationEnd { cost_usd, result, .. } = inner.as_ref() {
                    use crate::event::IterationResult as R;
                    if !matches!(result, R::Transient | R::Stopped) {
                        self.iteration += 1;
                    }
                    self.cost_usd += cost_usd.unwrap_or(0.0);
                    self.update_overall();
                }
                if let Some(t) = describe(event, self.style) {
                    self.println(&t);
                }
            }
            Event::WorkerEnd { worker, .. } => {
                if let Some((bar, _)) = self.workers.remove(worker) {
                    bar.finish_and_clear();
                }
                if let Some(t) = describe(event, self.style) {
                    self.println(&t);
                }
            }
            Event::Merge { story_id, result, .. } => {
                if *result == crate::event::MergeResult::Merged {
                    self.passed.insert(story_id.clone());
                    self.update_overall();
                }
                if let Some(t) = describe(event, self.style) {
                    self.println(&t);
                }
            }
            _ => return false,
        }
        true
    }
}

impl Reporter for Tty {
    fn emit(&mut self, event: &Event) {
        if self.worker_event(event) {
            return;
        }
        match event {
            Event::RunStart { stories, passing, max_iterations, .. } => {
                self.passing_at_start = *passing;
                self.max_iterations = *max_iterations;
                self.start_overall(*stories, *passing);
            }
            Event::IterationStart { iteration, story_id, .. } => {
                self.iteration_started(*iteration, story_id);
            }
            Event::AgentOutput { text, .. } => return self.agent_output(event, text),
            Event::IterationEnd { story_id, story_passes, cost_usd, .. } => {
                self.clear_spinner();
                if *story_passes {
                    self.passed.insert(story_id.clone());
                }
                self.cost_usd += cost_usd.unwrap_or(0.0);
                self.update_overall();
            }
            Event::Waiting { reason, seconds, .. } => self.waiting(reason, *seconds),
            Event::WaitTick { remaining_s } => return self.wait_tick(*remaining_s),
            Event::RunEnd { passing, .. } => self.run_ended(*passing),
            _ => {}
        }
        if matches!(event, Event::IterationStart { .. } | Event::IterationEnd { .. }) {
            self.waiting_for.clear();
        }
        if let Some(text) = describe(event, self.style) {
            self.println(&text);
        }
    }
}

impl Tty {
    /// The iteration's spinner, started.
    fn iteration_started(&mut self, iteration: u32, story_id: &str) {
        self.iteration = iteration;
        self.in_status_block = false;
        self.update_overall();
        let style = self.template(
            "{spinner:.cyan} {prefix:.bold} {elapsed_precise:.dim} {wide_msg}",
            "{spinner} {prefix} {elapsed_precise} {wide_msg}",
        );
        let label = format!("iteration {iteration} · {story_id}");
        self.spinner(style, label, "starting the agent".into());
    }

    /// The agent's latest line on the spinner; every line above the bars
    /// only when verbose.
    fn agent_output(&mut self, event: &Event, text: &str) {
        let latest = latest_line(text, &mut self.in_status_block);
        if let (true, Some(bar), Some(line)) = (self.style.agent_output, &self.current, latest) {
            bar.set_message(line);
        }
        if self.style.agent_output
            && self.style.verbose
            && let Some(t) = describe(event, self.style)
        {
            self.println(&t);
        }
    }

    /// A wait's spinner, counting down.
    fn waiting(&mut self, reason: &str, seconds: u64) {
        self.waiting_for = reason.to_string();
        let style = self.template(
            "{spinner:.yellow} {prefix:.bold} {wide_msg}",
            "{spinner} {prefix} {wide_msg}",
        );
        let msg = format!("{} left · {reason}", countdown(seconds));
        self.spinner(style, "waiting".into(), msg);
    }

    /// The wait's countdown moved on.
    fn wait_tick(&mut self, remaining_s: u64) {
        // A tick rounds down; the wait ends within the next second.
        if let Some(bar) = &self.current
            && !self.waiting_for.is_empty()
        {
            bar.set_message(format!("{} left · {}", countdown(remaining_s + 1), self.waiting_for));
        }
    }

    /// Every bar cleared, the overall one at the run's final count.
    fn run_ended(&mut self, passing: usize) {
        self.clear_spinner();
        for (_, (bar, _)) in std::mem::take(&mut self.workers) {
            bar.finish_and_clear();
        }
        if let Some(bar) = self.overall.take() {
            bar.set_position(passing as u64);
            bar.finish_and_clear();
        }
    }
}

/// The line of agent output worth showing on the spinner: the last one
/// that is neither blank nor part of a RALPH_STATUS block (which may span
/// several outputs, hence the flag).
fn latest_line(text: &str, in_status_block: &mut bool) -> Option<String> {
    let mut latest = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line {
            "---RALPH_STATUS---" => *in_status_block = true,
            "---END_RALPH_STATUS---" => *in_status_block = false,
            _ if !*in_status_block => latest = Some(line),
            _ => {}
        }
    }
    latest.map(|l| l.replace('\t', " "))
}

impl Drop for Tty {
    /// A run that ends in a fatal error emits no `RunEnd`: clear the bars
    /// anyway, so the error printed next starts on a clean line.
    fn drop(&mut self) {
        self.clear_spinner();
        for (_, (bar, _)) in std::mem::take(&mut self.workers) {
            bar.finish_and_clear();
        }
        if let Some(bar) = self.overall.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::latest_line;

    #[test]
    fn the_spinner_shows_the_last_line_meant_for_people() {
        let mut block = false;
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("Reading the PRD.\nWriting\tcode\n\n", Some("Writing code"), false),
            ("Committed\n---RALPH_STATUS---\nSTATUS: IN_PROGRESS", Some("Committed"), true),
            ("EXIT_SIGNAL: false", None, true),
            ("---END_RALPH_STATUS---", None, false),
            ("   ", None, false),
            ("next step", Some("next step"), false),
        ];
        for (text, want, in_block) in cases {
            assert_eq!(latest_line(text, &mut block).as_deref(), *want, "{text:?}");
            assert_eq!(block, *in_block, "{text:?}");
        }
    }
}
