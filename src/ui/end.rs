//! The end of a run as a person reads it: the outcome, each story the run
//! touched (claimed, verified, refused, flagged, red → green), agent
//! switches, proposals, what ralph protected, the iteration closest to
//! passing.

use super::{duration, paint, plural, proposal_text, switch_text};
use crate::event::Event;

/// The `run_end` event's text; `None` for any other event.
pub(super) fn run_end(event: &Event, c: bool) -> Option<String> {
    let Event::RunEnd {
        outcome,
        exit_code,
        iterations,
        passing,
        stories,
        cost_usd,
        duration_ms,
        message,
        report,
        best,
        switches,
        prd_proposals,
        protected_refused,
        ..
    } = event
    else {
        return None;
    };
    let mut s = format!(
        "{message}\n{passing}/{stories} stories pass after {iterations} iteration{} in {}",
        plural(*iterations as usize),
        duration(*duration_ms)
    );
    if *cost_usd > 0.0 {
        s.push_str(&format!(" · ${cost_usd:.2} reported by the agent"));
    }
    s.push_str(&format!(" · exit {exit_code} ({outcome})"));
    // A long PRD: the stories this run touched; the rest counted.
    let listed = crate::screenful::touched(
        report,
        crate::screenful::Show::Screenful,
        crate::screenful::run_touched,
        |s| s.passes,
    );
    for story in listed.shown.iter().copied() {
        story_lines(&mut s, story);
    }
    if let Some(rest) = listed.rest {
        s.push_str(&format!(
            "\n  {} — `ralph status --all` lists every story",
            rest.describe(!listed.shown.is_empty())
        ));
    }
    for sw in switches {
        s.push_str("\n  ");
        s.push_str(&switch_text(sw.iteration, &sw.from, &sw.to, sw.reason, sw.until));
    }
    for p in prd_proposals {
        s.push_str("\n  ");
        s.push_str(&proposal_text(p));
    }
    for p in protected_refused {
        s.push_str(&format!(
            "\n  the agent proposes changing {} (iteration {}, {}), which ralph protects{}",
            p.paths.join(", "),
            p.iteration,
            p.story_id,
            p.patch.as_ref().map(|f| format!(": its version is {f}")).unwrap_or_default()
        ));
    }
    if let Some(b) = best {
        s.push_str(&format!(
            "\n  closest to passing: iteration {} ({}){}",
            b.iteration,
            b.score,
            b.commit
                .as_ref()
                .map(|c| format!(", commit {c} — `git checkout {c}` to look at it"))
                .unwrap_or_default()
        ));
    }
    let code = if *exit_code == 0 { "32" } else { "31" };
    Some(paint(c, code, &s))
}

/// A story's line at the end of a run, and the lines under it.
fn story_lines(s: &mut String, story: &crate::event::StoryReport) {
    let mark = if story.passes { "✓" } else { "✗" };
    let verified = match story.verified {
        Some(true) => "verified",
        Some(false) => "not verified",
        None => "no gate",
    };
    s.push_str(&format!(
        "\n  {mark} {} {} (claimed: {}, {verified})",
        story.id,
        story.title,
        if story.claimed { "yes" } else { "no" }
    ));
    if let Some(commit) = &story.work.commit {
        s.push_str(&format!(
            " · {} · merged as {}",
            crate::text::count(story.work.iterations as usize, "iteration", "iterations"),
            &commit[..commit.len().min(7)]
        ));
        if story.work.cost_usd > 0.0 {
            s.push_str(&format!(" · ${:.2}", story.work.cost_usd));
        }
    }
    if story.work.agents.len() > 1 {
        s.push_str(&format!(" · by {}", story.work.agents.join(", ")));
    }
    if let Some(note) = &story.note {
        s.push_str(&format!(": {note}"));
    }
    for why in &story.findings.refused {
        s.push_str(&format!("\n      refused, {why}"));
    }
    for flag in &story.findings.test_flags {
        s.push_str(&format!("\n      flagged, {flag}"));
    }
    // A check that proves nothing is the story's note already.
    if let Some(red) = story.findings.red.as_ref().filter(|r| !r.passed_on_base) {
        s.push_str(&format!("\n      {}", red.describe(story.verified)));
    }
}
