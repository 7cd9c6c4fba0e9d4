//! `ralph status`: a read-only view of a project's state — the stories,
//! the breaker, the limits, and the last run: why it stopped, where its
//! logs are and which iteration failed last. It never takes the lock, so
//! it works while a loop runs, and in a directory ralph has never run in.

use std::fmt::Write as _;

use chrono::{DateTime, Local, Utc};
use serde::Serialize;

use crate::circuit::Breaker;
use crate::cli::{Global, SettingArgs, StatusArgs};
use crate::error::Error;
use crate::limits::Limits;
use crate::paths::Paths;
use crate::prd::View;
use crate::screenful::{Show, Standing, StatusFacts};
use crate::state::{Phase, RunState};
use crate::store;

use super::common::{color, print_more, project_dir};
use super::flags::layers;

#[derive(Debug, Serialize)]
pub(crate) struct Status {
    /// Bumped when a field changes meaning or disappears.
    pub(crate) version: u32,
    pub(crate) project_dir: String,
    pub(crate) prd: String,
    pub(crate) project: Option<String>,
    /// The checked-out git branch.
    pub(crate) branch: Option<String>,
    /// The branch the PRD names.
    pub(crate) prd_branch: Option<String>,
    pub(crate) prd_error: Option<String>,
    /// What to do about `prd_error`: `ralph init` or `ralph import` for a
    /// missing prd.json.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) prd_hint: Option<String>,
    pub(crate) stories: Vec<StoryLine>,
    pub(crate) passing: usize,
    pub(crate) total: usize,
    pub(crate) circuit: CircuitLine,
    pub(crate) calls_this_hour: usize,
    pub(crate) calls_per_hour: u32,
    pub(crate) usage_limit_until: Option<DateTime<Utc>>,
    /// Each agent's own usage limit still holding (the configured agent's
    /// and its fallbacks'), by name.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) usage_limits: std::collections::BTreeMap<String, DateTime<Utc>>,
    /// The pid of the ralph holding the lock, if one is running.
    pub(crate) running_pid: Option<u32>,
    pub(crate) current_run: Option<RunLine>,
    pub(crate) last_run: Option<serde_json::Value>,
    pub(crate) warnings: Vec<String>,
    /// Settings of the checked-out branch's `.ralph/config.toml` that decide
    /// trust and are read from its base instead (`ralph trust` accepts them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) ignored: Vec<crate::config::Ignored>,
    /// What ralph refused in the current or last run: iterations that
    /// changed a protected path or whose tests vanished, and the agents'
    /// changes of protected paths it set back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) refused: Vec<String>,
    /// A parallel run's workers, merge queue and given-up stories, while
    /// it runs (or when it was stopped mid-run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parallel: Option<crate::driver::Board>,
    /// Why `ralph` would refuse to start here now, when it would: a gate
    /// program that is missing (checked before a run creates anything, so
    /// no run records it).
    pub(crate) cannot_start: Option<String>,
    /// The pull requests ralph opened for the PRD's branch, as it last saw
    /// them (`ralph deliver` asks the forge again).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) pull_requests: Vec<crate::deliver::record::Shown>,
    /// The stories the run takes next, best first (indices into `stories`).
    #[serde(skip)]
    pub(crate) queue: Vec<usize>,
}

#[derive(Debug, Serialize)]
pub(crate) struct StoryLine {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) priority: Option<f64>,
    pub(crate) passes: bool,
    pub(crate) next: bool,
    /// Unfinished stories of its `dependsOn`: it cannot start before they pass.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) waiting_on: Vec<String>,
    /// The worker of a parallel run at work on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) worker: Option<u32>,
    /// A parallel run: the story at work it waits for, and the path both
    /// touch ("waits for US-002: both touch src/routes.rs").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) waits_for: Option<String>,
    /// The checkpoint's run gave it up, and why (where its work is kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) given_up: Option<String>,
    /// Whether it needs attention, for the list of a long PRD.
    #[serde(skip)]
    pub(crate) standing: Standing,
}

#[derive(Debug, Serialize)]
pub(crate) struct CircuitLine {
    pub(crate) state: String,
    pub(crate) reason: String,
    pub(crate) iterations_without_progress: u32,
    pub(crate) total_opens: u64,
    pub(crate) opened_at: Option<DateTime<Utc>>,
    /// What a person can do when it is open.
    pub(crate) advice: Vec<String>,
}

/// The run of the checkpoint: the one running, stopped mid-run, or the last.
#[derive(Debug, Serialize)]
pub(crate) struct RunLine {
    pub(crate) run_id: String,
    pub(crate) iteration: u32,
    pub(crate) max_iterations: u32,
    pub(crate) phase: Phase,
    pub(crate) story: Option<String>,
    pub(crate) cost_usd: f64,
    pub(crate) outcome: Option<crate::event::RunOutcome>,
    pub(crate) exit_code: Option<u8>,
    /// Why it ended, as its end message said: the blocker, the breaker's
    /// reason, the limit's reset time, the program that is missing.
    pub(crate) message: Option<String>,
    /// Its logs: the agent's output, prompts and gate output per iteration.
    pub(crate) log_dir: String,
    /// The last iteration that failed or failed its gate.
    pub(crate) last_failure: Option<FailureLine>,
}

#[derive(Debug, Serialize)]
pub(crate) struct FailureLine {
    pub(crate) iteration: u32,
    pub(crate) story: String,
    pub(crate) error: Option<String>,
    /// The agent's log of that iteration.
    pub(crate) log: String,
}

/// Gathers the status of the project at `paths`.
pub(crate) fn gather(
    paths: &Paths,
    calls_per_hour: u32,
    cooldown: std::time::Duration,
    gate: &[String],
    now: DateTime<Utc>,
) -> Status {
    let mut warnings = Vec::new();
    let store = &paths.store;
    let (prd, prd_error, prd_hint) = read_prd(paths);
    let (state, state_warning) = RunState::load(store).unwrap_or((None, None));
    let given_up = state.as_ref().map(|s| s.given_up.clone()).unwrap_or_default();
    let parallel = crate::driver::Board::load(store);
    let queue = queue(prd.as_ref(), &given_up, parallel.as_ref());
    let next = queue.first().and_then(|&i| prd.as_ref().map(|p| p.stories[i].id.clone()));
    let running_pid = store.lock_holder().filter(|h| h.works_on(&paths.prd)).and_then(|h| h.pid);
    let facts = Checkpoint::of(state.as_ref(), running_pid.is_some());
    let stories = prd
        .as_ref()
        .map(|p| story_lines(p, next.as_ref(), &given_up, parallel.as_ref(), &facts))
        .unwrap_or_default();
    let (breaker, w) =
        Breaker::load(store, now).unwrap_or_else(|e| (Breaker::new(now), Some(e.to_string())));
    warnings.extend(w);
    let report = breaker.report(cooldown);
    let (limits, w) = Limits::load(store).unwrap_or_else(|e| (Limits::new(), Some(e.to_string())));
    warnings.extend(w);
    warnings.extend(state_warning);
    let refused_now = state.as_ref().map(refused).unwrap_or_default();
    let last_run = store::read_jsonl::<serde_json::Value>(&store.runs())
        .ok()
        .and_then(|(v, _)| v.into_iter().last());
    let branch = crate::git::Repo::discover(&paths.project).ok().and_then(|r| r.current_branch());
    let pull_requests = prd
        .as_ref()
        .and_then(|p| p.branch_name.as_deref())
        .map(|b| crate::deliver::record::shown(&store.path(crate::deliver::record::FILE), b))
        .unwrap_or_default();
    Status {
        pull_requests,
        version: 1,
        project_dir: paths.project.display().to_string(),
        prd: paths.prd.display().to_string(),
        project: prd.as_ref().and_then(|p| p.project.clone()),
        prd_branch: prd.as_ref().and_then(|p| p.branch_name.clone()),
        branch,
        prd_error,
        prd_hint,
        passing: stories.iter().filter(|s| s.passes).count(),
        total: stories.len(),
        stories,
        circuit: CircuitLine::of(&report),
        calls_this_hour: limits.calls_in_window(now),
        calls_per_hour,
        usage_limit_until: limits.usage_hold(now),
        usage_limits: limits.agent_holds(now),
        running_pid,
        current_run: state.map(|s| RunLine::of(s, store)),
        last_run,
        warnings,
        ignored: Vec::new(),
        refused: refused_now,
        parallel,
        cannot_start: crate::prd::Prd::load(&paths.prd).ok().and_then(|prd| {
            crate::gate::check_programs_in(gate, &prd, &paths.project)
                .err()
                .map(|e| format!("{}\nhint: {}", e.message, e.hint))
        }),
        queue,
    }
}

/// Each story's line: where it stands, who works on it, what it waits for.
fn story_lines(
    p: &View,
    next: Option<&String>,
    given_up: &std::collections::BTreeMap<String, String>,
    parallel: Option<&crate::driver::Board>,
    facts: &Checkpoint,
) -> Vec<StoryLine> {
    let worker_of = |id: &str| {
        parallel.and_then(|b| b.workers.iter().find(|w| w.story == id).map(|w| w.worker))
    };
    let overlaps = parallel.map(|b| crate::driver::waits(&p.stories, b)).unwrap_or_default();
    let waits_for = |id: &str| overlaps.iter().find(|w| w.story == id).map(ToString::to_string);
    p.stories
        .iter()
        .map(|s| StoryLine {
            id: s.id.clone(),
            title: s.title.clone(),
            priority: s.priority,
            passes: s.passes,
            next: Some(&s.id) == next,
            waiting_on: crate::prd::waiting_on(&p.stories, s)
                .into_iter()
                .map(str::to_string)
                .collect(),
            worker: worker_of(&s.id),
            waits_for: waits_for(&s.id),
            given_up: given_up.get(&s.id).filter(|_| !s.passes).cloned(),
            standing: Standing::of(StatusFacts {
                passes: s.passes,
                at_work: worker_of(&s.id).is_some() || facts.at_work.as_ref() == Some(&s.id),
                given_up: given_up.contains_key(&s.id),
                refused: facts.refused.contains(&s.id),
                tried: facts.tried.contains(&s.id),
            }),
        })
        .collect()
}

/// prd.json's quick view, or what is wrong with it and, when it is
/// missing, how to make one.
fn read_prd(paths: &Paths) -> (Option<View>, Option<String>, Option<String>) {
    match View::load(&paths.prd) {
        Ok(p) => (Some(p), None, None),
        Err(e) => {
            let missing = matches!(&e, crate::prd::PrdError::Read { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound);
            let hint = missing.then(|| {
                super::import::missing_prd(paths).map(|e| e.to_string()).unwrap_or_else(|| {
                    "create one with `ralph init`, or let `ralph import` convert what ralph.sh \
                     or ralph-claude-code left"
                        .to_string()
                })
            });
            (None, Some(e.to_string()), hint)
        }
    }
}

/// The stories the run works next (their indexes), past the ones it gave
/// up and the ones a parallel run's workers are at work on.
fn queue(
    prd: Option<&View>,
    given_up: &std::collections::BTreeMap<String, String>,
    parallel: Option<&crate::driver::Board>,
) -> Vec<usize> {
    prd.as_ref()
        .map(|p| {
            let mut skip: Vec<String> = given_up.keys().cloned().collect();
            skip.extend(parallel.iter().flat_map(|b| b.workers.iter().map(|w| w.story.clone())));
            let at: std::collections::HashMap<&str, usize> =
                p.stories.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
            crate::prd::runnable(&p.stories, &skip)
                .iter()
                .filter_map(|s| at.get(s.id.as_str()).copied())
                .collect()
        })
        .unwrap_or_default()
}

impl CircuitLine {
    fn of(report: &crate::circuit::Report) -> CircuitLine {
        CircuitLine {
            state: report.state.to_string(),
            reason: report.reason.clone(),
            iterations_without_progress: report.iterations_without_progress,
            total_opens: report.total_opens,
            opened_at: report.opened_at,
            advice: report.likely_causes.iter().chain(&report.how_to_go_on).cloned().collect(),
        }
    }
}

impl RunLine {
    fn of(s: RunState, store: &crate::store::Store) -> RunLine {
        RunLine {
            log_dir: store.run_log_dir(&s.run_id).display().to_string(),
            run_id: s.run_id,
            iteration: s.iteration,
            max_iterations: s.max_iterations,
            phase: s.phase,
            story: s.story,
            cost_usd: s.cost_usd,
            outcome: s.outcome,
            exit_code: s.exit_code,
            message: s.message,
            last_failure: s.last_failure.map(|f| FailureLine {
                iteration: f.iteration,
                story: f.story,
                error: f.error,
                log: f.log,
            }),
        }
    }
}

/// What the checkpoint's run says of its stories, for their standing.
#[derive(Default)]
struct Checkpoint {
    /// The running iteration's story.
    at_work: Option<String>,
    refused: std::collections::HashSet<String>,
    tried: std::collections::HashSet<String>,
}

impl Checkpoint {
    fn of(state: Option<&RunState>, running: bool) -> Checkpoint {
        let Some(state) = state else { return Checkpoint::default() };
        let busy = running && matches!(state.phase, Phase::Agent | Phase::Gate);
        let tallies = state.stories.iter();
        Checkpoint {
            at_work: state.story.clone().filter(|_| busy),
            refused: tallies
                .clone()
                .filter(|(_, t)| !t.findings.refused.is_empty())
                .map(|(id, _)| id.clone())
                .chain(state.protected_refused.iter().map(|p| p.story_id.clone()))
                .collect(),
            tried: tallies
                .filter(|(_, t)| t.work.iterations > 0)
                .map(|(id, _)| id.clone())
                .chain(state.last_failure.iter().map(|f| f.story.clone()))
                .collect(),
        }
    }
}

/// The human view; `color` marks what passes green, what is next bold, the
/// breaker and the last run by how they stand. A long PRD's stories are cut
/// to a screenful unless `show` is [`Show::All`].
pub(crate) fn render(s: &Status, show: Show, color: bool) -> String {
    let paint = |code: &str, text: String| crate::ui::paint(color, code, &text);
    let mut o = String::new();
    let project = match (&s.project, &s.prd_error) {
        (Some(p), _) => p.as_str(),
        (None, Some(_)) => "(no usable PRD)",
        (None, None) => "(no project name)",
    };
    o.push_str(&format!("{project} — {}\n", s.prd));
    match (&s.branch, &s.prd_branch) {
        (Some(b), Some(p)) if b != p => o.push_str(&format!("branch: {b} (the PRD wants {p})\n")),
        (Some(b), _) => o.push_str(&format!("branch: {b}\n")),
        (None, _) => o.push_str("branch: (not a git repository)\n"),
    }
    if let Some(e) = &s.prd_error {
        o.push_str(&format!("prd.json: {e}\n"));
    }
    if let Some(hint) = &s.prd_hint {
        o.push_str(&format!("hint: {hint}\n"));
    }
    if s.total > 0 {
        stories(&mut o, s, show, color);
    }
    breaker_and_limits(&mut o, s, color);
    match s.running_pid {
        Some(pid) => o.push_str(&format!("running: yes (pid {pid})\n")),
        None => o.push_str("running: no\n"),
    }
    if let Some(b) = &s.parallel {
        parallel(&mut o, b, s.running_pid.is_some());
    }
    runs(&mut o, s, color);
    if !s.pull_requests.is_empty() {
        let _ = writeln!(o, "pull requests:");
        for pr in &s.pull_requests {
            let _ = writeln!(o, "  {}", crate::deliver::record::line(pr));
        }
    }
    if let Some(why) = &s.cannot_start {
        let mut lines = why.lines();
        let _ =
            writeln!(o, "{}", paint("31", format!("cannot start: {}", lines.next().unwrap_or(""))));
        for line in lines {
            let _ = writeln!(o, "  {line}");
        }
    }
    for r in &s.refused {
        let _ = writeln!(o, "{}", paint("31", format!("refused: {r}")));
    }
    for i in &s.ignored {
        let _ = writeln!(o, "{}", paint("33", format!("config: {i}")));
    }
    for w in &s.warnings {
        let _ = writeln!(o, "{}", paint("33", format!("warning: {w}")));
    }
    o
}

/// The breaker and how close the agents are to their limits.
fn breaker_and_limits(o: &mut String, s: &Status, color: bool) {
    let paint = |code: &str, text: String| crate::ui::paint(color, code, &text);
    // "new" is the reason of a breaker that has never changed state.
    let reason = if s.circuit.reason == "new" { "never tripped" } else { &s.circuit.reason };
    let code = match s.circuit.state.as_str() {
        "CLOSED" => "32",
        "HALF_OPEN" => "33",
        _ => "31",
    };
    let _ = writeln!(o, "\n{}", paint(code, format!("circuit: {} — {reason}", s.circuit.state)));
    if s.circuit.iterations_without_progress > 0 {
        o.push_str(&format!(
            "  iterations without progress: {}\n",
            s.circuit.iterations_without_progress
        ));
    }
    for a in &s.circuit.advice {
        o.push_str(&format!("  - {a}\n"));
    }
    let limit = if s.calls_per_hour == 0 {
        "no limit".to_string()
    } else {
        format!("of {} allowed", s.calls_per_hour)
    };
    o.push_str(&format!("agent calls in the last hour: {} ({limit})\n", s.calls_this_hour));
    let at = |t: &DateTime<Utc>| t.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S").to_string();
    for (agent, t) in &s.usage_limits {
        o.push_str(&format!("usage limit of {agent}: it can be called again at {}\n", at(t)));
    }
    // A limit on every agent (an older ralph's, or a parallel run's pause).
    if let Some(t) = s.usage_limit_until.filter(|t| !s.usage_limits.values().any(|a| a == t)) {
        o.push_str(&format!("usage limit: calls resume at {}\n", at(&t)));
    }
}

/// The checkpoint's run when it is not the last one, then the last run.
fn runs(o: &mut String, s: &Status, color: bool) {
    let paint = |code: &str, text: String| crate::ui::paint(color, code, &text);
    let last_id = s.last_run.as_ref().and_then(|l| l.get("run_id")).and_then(|v| v.as_str());
    // An ended run is the last run: its summary line below says it all.
    let current = s
        .current_run
        .as_ref()
        .filter(|r| !(r.phase == Phase::Ended && last_id == Some(r.run_id.as_str())));
    if let Some(r) = current {
        let state = match (&r.outcome, r.phase) {
            (Some(out), Phase::Ended) => format!("ended: {}", out.as_str().replace('_', " ")),
            (_, Phase::Ended) => "ended".into(),
            _ if s.running_pid.is_none() => "stopped mid-run: `ralph` resumes it".into(),
            // A parallel run's own phase is its coordinator's; its workers
            // are listed above.
            _ if s.parallel.as_ref().is_some_and(|b| !b.workers.is_empty()) => {
                let n = s.parallel.as_ref().map_or(0, |b| b.workers.len());
                format!("{} at work", crate::text::count(n, "worker", "workers"))
            }
            (_, Phase::Agent) => "the agent is working".into(),
            (_, Phase::Gate) => "checking the agent's work".into(),
            (_, Phase::Idle) => "between iterations".into(),
        };
        o.push_str(&format!(
            "run {}: iteration {}/{}{} · cost {} · {state}\n",
            r.run_id,
            r.iteration,
            r.max_iterations,
            r.story.as_ref().map(|st| format!(" ({st})")).unwrap_or_default(),
            crate::text::usd(r.cost_usd, false)
        ));
        details(o, r, &s.project_dir);
    }
    if let Some(last) = &s.last_run {
        let g = |k: &str| {
            last.get(k).map(|v| v.to_string().trim_matches('"').to_string()).unwrap_or_default()
        };
        let iterations = last.get("iterations").and_then(|v| v.as_u64()).unwrap_or(0);
        let cost = last.get("cost_usd").and_then(|v| v.as_f64()).unwrap_or(0.0);
        let line = format!(
            "last run: {} · {} after {iterations} iteration{} · {}/{} stories pass{} · exit {}",
            g("run_id"),
            g("outcome").replace('_', " "),
            crate::ui::plural(iterations as usize),
            g("passing"),
            g("stories"),
            if cost > 0.0 { format!(" · ${cost:.2}") } else { String::new() },
            g("exit_code")
        );
        let code = if g("exit_code") == "0" { "32" } else { "31" };
        let _ = writeln!(o, "{}", paint(code, line));
        // The checkpoint's run, when it is this one, says why and where.
        if current.is_none()
            && let Some(r) = s.current_run.as_ref().filter(|r| last_id == Some(r.run_id.as_str()))
        {
            details(o, r, &s.project_dir);
        }
    }
}

/// The stories: every one of a short PRD (or with `--all`); of a long one,
/// counts, the ones that need attention and the next few
/// (`screenful::status`).
fn stories(o: &mut String, s: &Status, show: Show, color: bool) {
    let standings: Vec<Standing> = s.stories.iter().map(|st| st.standing).collect();
    let listing = crate::screenful::status(&standings, &s.queue, show);
    let whole = crate::screenful::whole(s.total, show);
    let _ = write!(o, "\nstories: {}/{} pass", s.passing, s.total);
    if !whole {
        let count = |f: fn(Standing) -> bool| standings.iter().filter(|st| f(**st)).count();
        let unfinished = count(|st| {
            matches!(st, Standing::InProgress | Standing::Failing | Standing::Unfinished)
        });
        let given_up = count(|st| st == Standing::GivenUp);
        let refused = count(|st| st == Standing::Refused);
        for (n, what) in [(unfinished, "unfinished"), (given_up, "given up"), (refused, "refused")]
        {
            if n > 0 {
                let _ = write!(o, " · {n} {what}");
            }
        }
    }
    o.push('\n');
    for &i in &listing.shown {
        // A long list says why a story is in it when its mark does not.
        let tag = match s.stories[i].standing {
            Standing::Refused if !whole => "  (refused)",
            Standing::Failing if !whole => "  (failing)",
            _ => "",
        };
        story_line(o, &s.stories[i], tag, color);
    }
    if listing.more > 0 {
        let attention = match listing.more_needing_attention {
            0 => String::new(),
            k => format!(" ({k} of them need attention)"),
        };
        let _ = writeln!(
            o,
            "  … {} more{attention}: `ralph status --all` lists every story",
            listing.more
        );
    }
}

/// One story: its mark, id, priority, title and what it waits for.
fn story_line(o: &mut String, st: &StoryLine, tag: &str, color: bool) {
    let mark = if st.passes {
        "✓"
    } else if st.given_up.is_some() {
        "✗"
    } else if st.worker.is_some() {
        "▶"
    } else if st.next {
        "→"
    } else {
        " "
    };
    let prio = match st.priority {
        Some(p) => format!("p{p}"),
        None => "p-".into(),
    };
    let waits = match &st.waits_for {
        _ if st.passes => String::new(),
        _ if st.given_up.is_some() => {
            let why = st.given_up.as_deref().unwrap_or("");
            format!("  (given up: {})", why.lines().next().unwrap_or(""))
        }
        Some(w) => format!("  ({w})"),
        None if st.waiting_on.is_empty() => String::new(),
        None => format!("  (waits on {})", st.waiting_on.join(", ")),
    };
    let line = format!(
        "  {mark} {:<10} {prio:<4} {}{}{waits}{tag}",
        st.id,
        st.title,
        if st.next { "  (next)" } else { "" }
    );
    let code = if st.passes {
        "32"
    } else if st.next {
        "1"
    } else {
        "0"
    };
    let _ =
        writeln!(o, "{}", if code == "0" { line } else { crate::ui::paint(color, code, &line) });
}

/// What a run refused, per story, and the protected changes it set back.
fn refused(state: &RunState) -> Vec<String> {
    let mut out: Vec<String> = state
        .stories
        .iter()
        .flat_map(|(id, t)| t.findings.refused.iter().map(move |r| format!("{id}, {r}")))
        .collect();
    for p in &state.protected_refused {
        out.push(format!(
            "{}, iteration {}: the agent changed {} (set back{})",
            p.story_id,
            p.iteration,
            p.paths.join(", "),
            p.patch.as_ref().map(|f| format!("; its version: {f}")).unwrap_or_default()
        ));
    }
    out
}

/// Why a run ended, its last failure and where its logs are, under its line.
/// Paths inside the project are shown from there (`.git/ralph/logs/…`): the
/// first line names the project, and the view stays short in a tmux pane.
/// A parallel run's workers, its merge queue and what it gave up on.
fn parallel(o: &mut String, b: &crate::driver::Board, running: bool) {
    let now = Utc::now();
    let at_work = if running { "at work" } else { "stopped: `ralph` resumes them" };
    let _ = writeln!(
        o,
        "workers: {} of {} {at_work}, merging into {}",
        b.workers.len(),
        b.jobs,
        b.branch
    );
    for w in &b.workers {
        let secs = (now - w.since).num_seconds().max(0) as u64;
        let resolving = if b.resolving_now.contains(&w.story) { " (resolving)" } else { "" };
        let _ = writeln!(
            o,
            "  w{} {}{resolving} · {} · {}",
            w.worker,
            w.story,
            crate::ui::countdown(secs),
            w.branch
        );
    }
    if !b.queue.is_empty() {
        let _ = writeln!(o, "merge queue: {}", b.queue.join(", "));
    }
    for (id, why) in &b.given_up {
        let first = why.lines().next().unwrap_or("");
        let _ = writeln!(o, "given up: {id} — {first}");
    }
}

fn details(o: &mut String, r: &RunLine, project: &str) {
    let short = |path: &str| -> String {
        std::path::Path::new(path)
            .strip_prefix(project)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.to_string())
    };
    // "every story passes" says what the run's line already does.
    let ended_badly = r.outcome.is_some() && r.exit_code != Some(crate::exit::COMPLETE);
    if let Some(message) = r.message.as_deref().filter(|_| ended_badly) {
        // A breaker's message goes on with the breaker's report, which the
        // circuit lines above already show.
        let shown = if r.outcome == Some(crate::event::RunOutcome::CircuitOpen) {
            message.lines().next().unwrap_or_default()
        } else {
            message
        };
        let shown = shown.replace(&format!("{project}/"), "");
        for (i, line) in shown.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let label = if i == 0 { "why:" } else { "" };
            let _ = writeln!(o, "  {label:<5}{line}");
        }
    }
    if let Some(f) = &r.last_failure {
        // A gate that failed without output leaves "gate: " as its error.
        let error = f.error.as_deref().map(|e| e.trim().trim_end_matches(':').trim_end());
        let error = error.filter(|e| !e.is_empty()).map(|e| format!(": {e}")).unwrap_or_default();
        let _ = writeln!(o, "  last failure: iteration {} ({}){error}", f.iteration, f.story);
        let _ = writeln!(o, "    log: {}", short(&f.log));
    }
    let _ = writeln!(o, "  logs: {}/", short(&r.log_dir));
}

pub(crate) fn run(g: &Global, args: &StatusArgs) -> Result<u8, Error> {
    if let Some(url) = &args.remote {
        return super::status_remote::run(g, args, url);
    }
    let project = project_dir(g)?;
    let paths = Paths::resolve(&project, g.prd.as_deref())?;
    let config = layers(g, &paths.project, &SettingArgs::default())?.resolve();
    let color = color(g, &config);
    crate::signals::install();
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let show = Show::all_if(args.all);
    loop {
        let mut s = gather(
            &paths,
            config.limits.calls_per_hour,
            config.circuit.cooldown,
            &config.gate.command,
            Utc::now(),
        );
        s.ignored = config.ignored.clone();
        // One agent: its limit is the run's, said as before.
        if config.agent.fallback.is_empty() {
            s.usage_limits.clear();
        }
        let text = match (g.json, args.watch) {
            // One document; watching, one compact document per line (JSON lines).
            (true, false) => serde_json::to_string_pretty(&s).unwrap_or_default() + "\n",
            (true, true) => serde_json::to_string(&s).unwrap_or_default() + "\n",
            (false, false) => render(&s, show, color),
            (false, true) => {
                let clear = if tty { "\x1b[H\x1b[2J" } else { "" };
                format!("{clear}[{}]\n{}", Local::now().format("%H:%M:%S"), render(&s, show, color))
            }
        };
        // A PRD ralph cannot use is an error to a script, as it is to `ralph run`.
        let code = if s.prd_error.is_some() { crate::exit::USAGE } else { crate::exit::COMPLETE };
        if !print_more(&text)? || !args.watch {
            return Ok(code);
        }
        if !super::common::watch_pause(args.interval) {
            return Ok(0);
        }
    }
}
