//! Reports as people read them: a run's report in Markdown (`ralph report`,
//! `report.md` beside the logs) and `ralph history` as text. An estimated
//! cost is shown as `~$1.23`. A long PRD's stories are cut to the ones the
//! run touched (`screenful`).

use std::collections::BTreeSet;
use std::fmt::Write;

use super::report::StoryLine;
use super::{RunReport, RunSummary};
use crate::screenful::{Show, Touched, report_touched};
use crate::ui::duration;

fn money(usd: f64, estimated: bool) -> String {
    crate::text::usd(usd, estimated)
}

fn tokens(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=9_999_999 => format!("{}k", n / 1000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn percent(rate: Option<f64>) -> String {
    rate.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "–".into())
}

fn outcome(s: &RunSummary) -> String {
    match (&s.outcome, &s.why) {
        (Some(o), Some(why)) if !why.is_empty() => format!("{o} ({why})"),
        (Some(o), _) => o.to_string(),
        (None, _) => "running, or ended without a report".into(),
    }
}

fn agent(s: &RunSummary) -> String {
    s.agent.clone().unwrap_or_else(|| "?".into())
}

/// What passed at the end and what of it the gate verified: a run without
/// a gate verified nothing, whatever passes.
fn at_the_end(s: &RunSummary) -> String {
    if s.gated {
        format!("{} verified at the end", s.verified)
    } else {
        format!("{} passing at the end, none verified (no gate)", s.passing)
    }
}

/// Table cells keep to one line and leave the table's pipes alone.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The run's report in Markdown: every story of a short PRD (or with
/// [`Show::All`]); of a long one, the ones the run touched.
pub fn markdown(r: &RunReport, show: Show) -> String {
    let mut out = String::new();
    header(&mut out, r);
    let listed = crate::screenful::touched(&r.stories, show, report_touched, |s| s.passes);
    stories(&mut out, r, &listed);
    switches(&mut out, r);
    merge_failures(&mut out, r);
    notes(&mut out, r);
    gate_failures(&mut out, r);
    proposals(&mut out, r);
    judged(&mut out, &listed.shown);
    sandbox_denials(&mut out, r);
    lessons(&mut out, r);
    if r.totals.cost_estimated {
        let _ = writeln!(
            out,
            "\n~ an estimate: the agent reported tokens but no cost, priced by `cost.prices`."
        );
    }
    out
}

/// The title and the run in figures.
fn header(out: &mut String, r: &RunReport) {
    let s = &r.summary;
    let t = &r.totals;
    let _ = writeln!(out, "# ralph run {}\n", s.run_id);
    let started = s.started_at.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string());
    let _ = writeln!(out, "- started: {}", started.unwrap_or_else(|| "?".into()));
    let _ = writeln!(out, "- duration: {}", duration(s.duration_ms));
    let _ = writeln!(out, "- outcome: {}", outcome(s));
    let _ = writeln!(out, "- agent: {}", agent(s));
    let _ = writeln!(
        out,
        "- {} iterations · {} of {} stories delivered in this run · {}",
        s.iterations,
        t.delivered,
        s.stories,
        at_the_end(s)
    );
    let _ = writeln!(
        out,
        "- cost {} · tokens in {} / out {}",
        money(t.cost_usd, t.cost_estimated),
        tokens(t.tokens_in),
        tokens(t.tokens_out)
    );
    let per_story = t.cost_per_delivered_story.map(|c| money(c, t.cost_estimated));
    let _ = writeln!(
        out,
        "- cost per delivered story {} · first-pass rate {} ({} of {})",
        per_story.unwrap_or_else(|| "–".into()),
        percent(t.first_pass_rate),
        t.first_pass,
        t.delivered
    );
    let _ = writeln!(
        out,
        "- time lost to limits and back-offs: {} (waiting {}, retried iterations {})",
        duration(t.lost_ms),
        duration(t.waited_ms),
        duration(t.retried_ms)
    );
}

/// The stories' table: those `listed` shows, the rest counted.
fn stories(out: &mut String, r: &RunReport, listed: &Touched<'_, StoryLine>) {
    // Which agent did a story is worth a column once more than one did.
    let by = r.stories.iter().flat_map(|s| &s.agents).collect::<BTreeSet<_>>().len() > 1;
    let _ = writeln!(out, "\n## Stories\n");
    let _ = writeln!(
        out,
        "| story | result | attempts | first pass | wall | agent time |{} tokens in/out | cost | gate | commit |",
        if by { " agents |" } else { "" }
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- |{} --- | --- | --- | --- |",
        if by { " --- |" } else { "" }
    );
    for st in listed.shown.iter().copied() {
        let result = match (st.passes, st.verified, st.delivered) {
            (true, _, true) => "delivered",
            (true, Some(false), _) => "passes, not verified",
            (true, _, false) => "passed before",
            (false, ..) if st.attempts > 0 => "not done",
            (false, ..) => "not started",
        };
        let gates = st.gates.iter().map(|g| if g.passed { "✓" } else { "✗" }).collect::<String>();
        let _ = writeln!(
            out,
            "| {} {} | {result} | {}{} | {} | {} | {} |{} {} / {} | {} | {} | {} |",
            cell(&st.id),
            cell(&st.title),
            st.attempts,
            match (st.retried, st.resolves) {
                (0, 0) => String::new(),
                (r, 0) => format!(" (+{r} retried)"),
                (0, k) => format!(" (+{k} resolving)"),
                (r, k) => format!(" (+{r} retried, +{k} resolving)"),
            },
            if st.first_pass { "yes" } else { "no" },
            duration(st.wall_ms),
            duration(st.agent_ms),
            if by { format!(" {} |", cell(&st.agents.join(", "))) } else { String::new() },
            tokens(st.tokens_in),
            tokens(st.tokens_out),
            money(st.cost_usd, st.cost_estimated),
            if gates.is_empty() { "–".into() } else { gates },
            st.commit.as_deref().map(|c| &c[..c.len().min(7)]).unwrap_or("–"),
        );
    }
    if let Some(rest) = listed.rest {
        let _ = writeln!(
            out,
            "\n{} — `ralph report --all` lists every story, `ralph report --json` has them all.",
            rest.describe(!listed.shown.is_empty())
        );
    }
}

fn switches(out: &mut String, r: &RunReport) {
    if !r.switches.is_empty() {
        let _ = writeln!(out, "\n## Agent switches\n");
        for sw in &r.switches {
            let text = crate::ui::switch_text_at(
                sw.iteration,
                &sw.from,
                &sw.to,
                sw.reason,
                sw.until,
                |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            );
            let _ = writeln!(out, "- {}", cell(&text));
        }
    }
}

fn merge_failures(out: &mut String, r: &RunReport) {
    let merges: Vec<_> = r.stories.iter().filter(|st| !st.merge_failures.is_empty()).collect();
    if !merges.is_empty() {
        let _ = writeln!(out, "\n## Merge attempts that failed\n");
        for st in merges {
            for (n, why) in st.merge_failures.iter().enumerate() {
                let _ = writeln!(out, "- {} attempt {}: {}", st.id, n + 1, cell(why));
            }
        }
    }
}

fn notes(out: &mut String, r: &RunReport) {
    let noted: Vec<_> = r.stories.iter().filter(|st| st.note.is_some()).collect();
    if !noted.is_empty() {
        let _ = writeln!(out, "\n## Notes\n");
        for st in noted {
            let _ = writeln!(out, "- {}: {}", st.id, cell(st.note.as_deref().unwrap_or("")));
        }
    }
}

fn gate_failures(out: &mut String, r: &RunReport) {
    let failed_gates: Vec<_> = r
        .stories
        .iter()
        .flat_map(|st| st.gates.iter().filter(|g| !g.passed).map(move |g| (st, g)))
        .collect();
    if !failed_gates.is_empty() {
        let _ = writeln!(out, "\n## Gate failures\n");
        for (st, g) in failed_gates {
            // No exit code: ralph stopped it (its summary says why: timed out).
            let code = g.exit_code.map(|c| format!("exit {c}")).unwrap_or("stopped".into());
            let _ = writeln!(
                out,
                "- {} iteration {}: {code}{}",
                st.id,
                g.iteration,
                if g.summary.is_empty() {
                    String::new()
                } else {
                    format!(": {}", cell(&g.summary))
                }
            );
        }
    }
}

/// What the agent proposed and ralph set back: prd.json edits and
/// protected paths.
fn proposals(out: &mut String, r: &RunReport) {
    if !r.prd_proposals.is_empty() {
        let _ = writeln!(out, "\n## Changes the agent proposed to prd.json\n");
        let _ = writeln!(
            out,
            "Set back by ralph (only a story's `passes` and `notes` are the agent's to change); \
             yours to make or not.\n"
        );
        for p in &r.prd_proposals {
            let _ = writeln!(
                out,
                "- iteration {} ({}): {} — the agent's version: `{}`",
                p.iteration,
                p.story_id,
                cell(&p.changes.join(", ")),
                p.file
            );
        }
    }
    if !r.protected_refused.is_empty() {
        let _ = writeln!(out, "\n## Changes the agent proposed to protected paths\n");
        let _ = writeln!(
            out,
            "Set back by ralph (what judges the work is yours: gate.protect); yours to make or not.\n"
        );
        for p in &r.protected_refused {
            let _ = writeln!(
                out,
                "- iteration {} ({}): {}{}",
                p.iteration,
                p.story_id,
                cell(&p.paths.join(", ")),
                p.patch
                    .as_ref()
                    .map(|f| format!(" — the agent's version: `{f}`"))
                    .unwrap_or_default()
            );
        }
    }
}

/// What judged each story shown: its gate, tests, refusals and flags.
fn judged(out: &mut String, shown: &[&StoryLine]) {
    let judged: Vec<_> = shown.iter().filter_map(|s| s.oracle.as_ref().map(|o| (*s, o))).collect();
    if !judged.is_empty() {
        let _ = writeln!(out, "\n## What judged each story\n");
        for (st, o) in judged {
            let gate = match (&o.gate, &o.gate_source) {
                (Some(g), Some(src)) => format!("`{}` ({})", cell(g), cell(src)),
                (Some(g), None) => format!("`{}`", cell(g)),
                _ => "no gate".into(),
            };
            let tests = match (o.findings.tests_before, o.findings.tests_after) {
                (Some(b), Some(a)) => {
                    format!("; tests before: {}, after: {}", b.describe(), a.describe())
                }
                (None, Some(a)) => format!("; tests: {}", a.describe()),
                _ => String::new(),
            };
            let _ = writeln!(out, "- {}: {gate}{tests}", st.id);
            for why in &o.findings.refused {
                let _ = writeln!(out, "  - refused, {}", cell(why));
            }
            for flag in &o.findings.test_flags {
                let _ = writeln!(out, "  - flagged, {}", cell(flag));
            }
            if let Some(red) = &o.findings.red {
                let _ = writeln!(out, "  - {}", cell(&red.describe(st.verified)));
            }
        }
    }
}

fn sandbox_denials(out: &mut String, r: &RunReport) {
    if !r.sandbox_denials.is_empty() {
        let _ = writeln!(out, "\n## Sandbox denials\n");
        for d in &r.sandbox_denials {
            let who = match d.who {
                crate::event::Confined::Agent => "the agent",
                crate::event::Confined::Gate => "the gate",
                crate::event::Confined::Hook => "a hook",
            };
            let story = d.story_id.as_deref().map(|s| format!(" ({s})")).unwrap_or_default();
            let _ = writeln!(
                out,
                "- iteration {}{story}, {who}: {}",
                d.iteration,
                cell(&d.denials.join(", "))
            );
        }
    }
}

fn lessons(out: &mut String, r: &RunReport) {
    if r.stories.iter().any(|s| !s.lessons.is_empty()) {
        let _ = writeln!(out, "\n## Lessons\n");
        for st in r.stories.iter().filter(|s| !s.lessons.is_empty()) {
            for l in &st.lessons {
                let _ = writeln!(out, "- {}: {}", st.id, cell(l));
            }
        }
    }
}

/// `ralph history` as text: one line per run, newest last.
pub fn history_text(rows: &[RunSummary]) -> String {
    if rows.is_empty() {
        return "no recorded runs\n".into();
    }
    let mut out = String::new();
    for s in rows {
        let started = s
            .started_at
            .map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_else(|| "?".into());
        let _ = writeln!(
            out,
            "{}  {started}  {}  {}\n    {} iterations · {} ({} delivered) · {} · tokens in {} / out {} · {}",
            s.run_id,
            duration(s.duration_ms),
            outcome(s),
            s.iterations,
            if s.gated {
                format!("{}/{} verified", s.verified, s.stories)
            } else {
                format!("{}/{} pass, none verified (no gate)", s.passing, s.stories)
            },
            s.delivered,
            money(s.cost_usd, s.cost_estimated),
            tokens(s.tokens_in),
            tokens(s.tokens_out),
            agent(s),
        );
    }
    if rows.iter().any(|s| s.cost_estimated) {
        out.push_str("~ an estimate from `cost.prices`: the agent reported tokens but no cost\n");
    }
    out
}
