//! Rendering events: plain timestamped lines (cron, pipes, CI), JSON lines
//! (`--json`, for programs), and a live display on a terminal (`tty`).
//!
//! Which one, and whether to colour, is decided once at startup from facts
//! passed in (is stdout a terminal, NO_COLOR, TERM, --color) — never looked
//! up deep inside — so every combination is testable.

use std::io::Write;

use chrono::{Local, Utc};

use crate::config::{Color, Progress};
use crate::event::{Event, Level, Reporter, SCHEMA_VERSION};

mod end;
pub mod tty;

/// How output should look, decided once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
    /// Show the agent's output as it arrives.
    pub agent_output: bool,
    /// Fewer lines: only iteration ends and the run's end.
    pub quiet: bool,
    pub verbose: bool,
}

/// Which renderer to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Tty,
    Plain,
    Json,
}

/// The facts of the environment the renderer and colour are decided from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Console {
    pub json: bool,
    pub stdout_is_terminal: bool,
    pub no_color: bool,
    pub term_dumb: bool,
    pub ci: bool,
}

/// Decides the renderer and colour from the facts of the environment and
/// the settings (`ui.color`, `ui.progress`). A live display needs a
/// terminal to draw on: `--progress bar` forces it past CI and TERM=dumb,
/// never into a pipe, where it would draw nothing.
pub fn decide(f: Console, color: Color, progress: Progress) -> (Mode, bool) {
    let mode = match progress {
        _ if f.json => Mode::Json,
        Progress::Plain => Mode::Plain,
        Progress::Bar if f.stdout_is_terminal => Mode::Tty,
        Progress::Auto if f.stdout_is_terminal && !f.term_dumb && !f.ci => Mode::Tty,
        _ => Mode::Plain,
    };
    let colour = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => f.stdout_is_terminal && !f.no_color && !f.term_dumb && mode != Mode::Json,
    };
    (mode, colour)
}

/// An agent's edits of prd.json that ralph set back, proposed to the person
/// (the end of a run, `report.md`).
pub fn proposal_text(p: &crate::event::PrdProposal) -> String {
    format!(
        "proposed for prd.json by the agent in iteration {} ({}), set back for you to decide: {} \
         — its version: {}",
        p.iteration,
        p.story_id,
        p.changes.join(", "),
        p.file
    )
}

/// "agent claude → codex from iteration 2: claude's usage limit lasts until 19:00:02".
pub(crate) fn switch_text(
    iteration: u32,
    from: &str,
    to: &str,
    reason: crate::agent::fallback::SwitchReason,
    until: Option<chrono::DateTime<Utc>>,
) -> String {
    switch_text_at(iteration, from, to, reason, until, |t| {
        t.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S").to_string()
    })
}

/// [`switch_text`] with the time written by `at` (a report written in UTC
/// says its times in UTC).
pub(crate) fn switch_text_at(
    iteration: u32,
    from: &str,
    to: &str,
    reason: crate::agent::fallback::SwitchReason,
    until: Option<chrono::DateTime<Utc>>,
    at: impl Fn(chrono::DateTime<Utc>) -> String,
) -> String {
    use crate::agent::fallback::SwitchReason as R;
    let why = match (reason, until) {
        (R::UsageLimit, Some(t)) => format!("{from}'s usage limit lasts until {}", at(t)),
        (R::UsageLimit, None) => format!("{from} is limited"),
        (R::LimitReset, _) => format!("{to}'s usage limit is over"),
    };
    format!("agent {from} → {to} from iteration {iteration}: {why}")
}

/// One line per event with a local timestamp; no escape codes unless `color`.
pub struct Plain<W: Write> {
    out: W,
    style: Style,
}

impl<W: Write> Plain<W> {
    pub fn new(out: W, style: Style) -> Plain<W> {
        Plain { out, style }
    }
}

/// Colours each line on its own, so a multi-line text printed line by line
/// (above a progress bar, or with a timestamp per line) never leaves a colour on.
pub(crate) fn paint(on: bool, code: &str, text: &str) -> String {
    if !on {
        return text.to_string();
    }
    text.split('\n').map(|l| format!("\x1b[{code}m{l}\x1b[0m")).collect::<Vec<_>>().join("\n")
}

/// The human text of an event, or `None` for events a person need not see.
///
/// One arm per kind of event, so a new event is one arm here; an arm longer
/// than a few lines is a function of its own (the end of a run in `end.rs`,
/// the others below).
pub fn describe(event: &Event, style: Style) -> Option<String> {
    let c = style.color;
    Some(match event {
        e @ Event::RunStart { .. } => run_start(e)?,
        Event::Notice { level: Level::Warn, message } => {
            paint(c, "33", &format!("warning: {message}"))
        }
        Event::Notice { level: Level::Info, message } => message.clone(),
        Event::IterationStart { iteration, max_iterations, story_id, story_title, .. } => {
            if style.quiet {
                return None;
            }
            paint(
                c,
                "1",
                &format!("iteration {iteration}/{max_iterations} · {story_id} {story_title}"),
            )
        }
        Event::AgentSwitch { iteration, from, to, reason, until } => {
            paint(c, "33", &switch_text(*iteration, from, to, *reason, *until))
        }
        Event::AgentOutput { text, .. } => {
            if !style.agent_output {
                return None;
            }
            agent_output(text, c)
        }
        e @ Event::IterationEnd { .. } => iteration_end(e, c)?,
        Event::SandboxDenied { iteration, who, denials } => {
            let who = match who {
                crate::event::Confined::Agent => "the agent",
                crate::event::Confined::Gate => "the gate",
                crate::event::Confined::Hook => "a hook",
            };
            paint(c, "33", &format!("iteration {iteration}: {who}: {}", denials.join(", ")))
        }
        e @ Event::Gate { .. } => gate(e, c)?,
        Event::Circuit { from, to, reason } => {
            paint(c, "33", &format!("circuit {from} → {to}: {reason}"))
        }
        Event::Waiting { reason, until, seconds } => format!(
            "waiting {} until {} ({reason})",
            countdown(*seconds),
            until.with_timezone(&Local).format("%H:%M:%S")
        ),
        Event::WaitTick { .. } => return None,
        Event::BudgetWarning { budget, used, limit } => budget_warning(*budget, *used, *limit, c),
        Event::WorkerStart { worker, story_id, story_title, branch, attempt, .. } => {
            if style.quiet {
                return None;
            }
            let again = if *attempt > 1 { format!(" · attempt {attempt}") } else { String::new() };
            paint(c, "1", &format!("worker {worker} · {story_id} {story_title} · {branch}{again}"))
        }
        Event::Worker { worker, story_id, inner } => {
            // Its story and title are on the worker's line already; the
            // story's own iteration limit (one per turn) says nothing.
            let text = match inner.as_ref() {
                Event::IterationStart { iteration, .. } if !style.quiet => {
                    format!("iteration {iteration} of {story_id} starts")
                }
                inner => describe(inner, style)?,
            };
            let tag = format!("[w{worker} {story_id}]");
            text.lines().map(|l| format!("{tag} {l}")).collect::<Vec<_>>().join("\n")
        }
        Event::WorkerEnd { worker, story_id, outcome, message } => {
            if style.quiet || message.is_empty() {
                return None;
            }
            format!("[w{worker} {story_id}] {outcome}: {message}")
        }
        e @ Event::Merge { .. } => merge(e, c)?,
        e @ Event::RunEnd { .. } => end::run_end(e, c)?,
    })
}

/// "ralph run 20260101-… · shop on ralph/checkout · agent claude · 1/3 stories pass · up to 10
/// iterations".
fn run_start(e: &Event) -> Option<String> {
    let Event::RunStart {
        run_id,
        project,
        branch,
        agent,
        max_iterations,
        stories,
        passing,
        resumed_from,
        ..
    } = e
    else {
        return None;
    };
    let resumed =
        resumed_from.map(|i| format!(" · resuming after iteration {i}")).unwrap_or_default();
    Some(format!(
        "ralph run {run_id} · {} on {} · agent {agent} · {passing}/{stories} stories pass · up to {max_iterations} iteration{}{resumed}",
        project.as_deref().unwrap_or("project"),
        branch.as_deref().unwrap_or("the current branch"),
        plural(*max_iterations as usize),
    ))
}

/// The agent's lines, dimmed, each behind a bar that sets them apart.
fn agent_output(text: &str, c: bool) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&paint(c, "2", &format!("  │ {line}")));
    }
    out
}

/// "gate failed for US-002 (exit 1) in 12s: 3 failed, 40 passed".
fn gate(e: &Event, c: bool) -> Option<String> {
    let Event::Gate { story_id, passed, exit_code, duration_ms, summary, .. } = e else {
        return None;
    };
    let verdict = if *passed { "passed" } else { "failed" };
    let code = exit_code.map(|c| format!(" (exit {c})")).unwrap_or_default();
    let mut s = format!("gate {verdict} for {story_id}{code} in {}", duration(*duration_ms));
    if !summary.is_empty() {
        s.push_str(&format!(": {summary}"));
    }
    Some(paint(c, if *passed { "32" } else { "31" }, &s))
}

/// "warning: the cost budget is 80% spent ($8.00 of $10.00)".
fn budget_warning(budget: crate::event::BudgetKind, used: f64, limit: f64, c: bool) -> String {
    use crate::event::BudgetKind as B;
    let (what, used, limit) = match budget {
        B::Cost => ("cost", format!("${used:.2}"), format!("${limit:.2}")),
        B::Tokens => ("token", format!("{used:.0}"), format!("{limit:.0}")),
        B::Duration => ("time", countdown(used as u64), countdown(limit as u64)),
    };
    paint(c, "33", &format!("warning: the {what} budget is 80% spent ({used} of {limit})"))
}

/// "merged US-002 as 1a2b3c4 in 3s", or why it was not.
fn merge(e: &Event, c: bool) -> Option<String> {
    use crate::event::MergeResult as M;
    let Event::Merge { story_id, result, commit, duration_ms, message, .. } = e else {
        return None;
    };
    Some(match result {
        M::Merged => paint(
            c,
            "32",
            &format!(
                "merged {story_id} as {} in {}{}",
                commit.as_deref().map(|c| &c[..c.len().min(7)]).unwrap_or("?"),
                duration(*duration_ms),
                if message.is_empty() { String::new() } else { format!(" · {message}") }
            ),
        ),
        M::Conflict | M::GateFailed | M::Resolving | M::ResolveFailed => {
            paint(c, "33", &format!("{story_id}: {message}"))
        }
        M::Blocked => paint(c, "31", &format!("{story_id}: {message}")),
    })
}

/// "iteration 3 progress in 1m 2s · 1 commit · 4 files changed · US-002 passes".
fn iteration_end(e: &Event, c: bool) -> Option<String> {
    let Event::IterationEnd {
        iteration,
        story_id,
        result,
        duration_ms,
        commits,
        files_changed,
        story_passes,
        cost_usd,
        error,
        ..
    } = e
    else {
        return None;
    };
    let mut s = format!(
        "iteration {iteration} {} in {} · {commits} commit{} · {files_changed} file{} changed",
        result.phrase(),
        duration(*duration_ms),
        plural(*commits),
        plural(*files_changed)
    );
    if let Some(cost) = cost_usd {
        s.push_str(&format!(" · ${cost:.2}"));
    }
    if *story_passes {
        s.push_str(&format!(" · {story_id} passes"));
    }
    if let Some(e) = error {
        s.push_str(&format!(" · {e}"));
    }
    use crate::event::IterationResult as R;
    let code = match result {
        R::Progress => "32",
        R::Failed | R::Stopped | R::GateFailed | R::Tampered => "31",
        R::NoProgress | R::Transient => "33",
    };
    Some(paint(c, code, &s))
}

impl<W: Write> Reporter for Plain<W> {
    fn emit(&mut self, event: &Event) {
        let Some(text) = describe(event, self.style) else { return };
        let stamp = Local::now().format("%H:%M:%S");
        // Agent output continues the iteration's block; everything else is stamped.
        let result = if matches!(event, Event::AgentOutput { .. }) {
            writeln!(self.out, "{text}")
        } else {
            let mut lines = text.lines();
            let first = lines.next().unwrap_or("");
            let mut r = writeln!(self.out, "[{stamp}] {first}");
            for line in lines {
                r = r.and_then(|_| writeln!(self.out, "           {line}"));
            }
            r
        };
        // A closed pipe (`ralph | head`) must not stop the loop; output is best effort.
        let _ = result.and_then(|_| self.out.flush());
    }
}

/// One JSON object per line: `{"v":1,"ts":…,"event":…,…}`.
pub struct Json<W: Write> {
    out: W,
    last_tick: Option<std::time::Instant>,
}

impl<W: Write> Json<W> {
    pub fn new(out: W) -> Json<W> {
        Json { out, last_tick: None }
    }
}

#[derive(serde::Serialize)]
struct Envelope<'a> {
    v: u32,
    ts: chrono::DateTime<Utc>,
    #[serde(flatten)]
    event: &'a Event,
}

impl<W: Write> Reporter for Json<W> {
    fn emit(&mut self, event: &Event) {
        if let Event::WaitTick { .. } = event {
            let now = std::time::Instant::now();
            if self.last_tick.is_some_and(|t| now.duration_since(t).as_secs() < 60) {
                return;
            }
            self.last_tick = Some(now);
        }
        if let Some(line) = json_line(event) {
            let _ = writeln!(self.out, "{line}").and_then(|_| self.out.flush());
        }
    }
}

/// An event as `--json` prints it: one line, without its newline. The
/// run's `events.jsonl` and the notification webhook carry the same text.
pub fn json_line(event: &Event) -> Option<String> {
    let envelope = Envelope { v: SCHEMA_VERSION, ts: Utc::now(), event };
    let line = match event {
        // A worker's event is written as itself, with its worker and story.
        Event::Worker { worker, story_id, inner } => {
            let inner = Envelope { v: SCHEMA_VERSION, ts: Utc::now(), event: inner };
            serde_json::to_value(&inner).map(|mut v| {
                v["worker"] = (*worker).into();
                v["story"] = story_id.as_str().into();
                v.to_string()
            })
        }
        _ => serde_json::to_string(&envelope),
    };
    line.ok()
}

/// "1h 02m", "3m 05s", "12.3s", "850ms".
pub fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h {:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// Whole seconds, for waits and countdowns: "45s", "3m 05s", "1h 02m".
pub fn countdown(seconds: u64) -> String {
    match seconds {
        0..=59 => format!("{seconds}s"),
        60..=3599 => format!("{}m {:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h {:02}m", seconds / 3600, (seconds / 60) % 60),
    }
}

pub use crate::text::plural;

#[cfg(test)]
mod tests;
