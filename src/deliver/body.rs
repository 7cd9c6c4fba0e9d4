//! What a pull request says, rendered from the run's report (pure): the run's
//! is the report itself (`history::markdown`: stories, verified or not and
//! why, gates and the tests they counted, cost, agent switches, lessons); a
//! story's is its line of the report and its acceptance criteria as a
//! checklist for the reviewer.
//!
//! The criteria are left unticked: the gate verifies a story as a whole,
//! not each criterion, and ticking them is the reviewer's call. What ralph
//! checked is said beside them, in its own words.

use std::fmt::Write;

use crate::history::RunReport;
use crate::history::report::StoryLine;
use crate::prd::Story;

/// A forge's description limit is larger (GitHub 65 536 characters,
/// GitLab 1 000 000); a report longer than this is cut, with a pointer.
pub const MAX_BODY: usize = 60_000;

/// The footer, which also tells ralph's descriptions from a person's.
fn footer(run_id: &str) -> String {
    format!(
        "\n---\n<sub>Opened by ralph from run `{run_id}`: `ralph report {run_id}` has it all; \
         `ralph deliver` brings this description up to date.</sub>\n"
    )
}

fn cut(mut body: String, run_id: &str) -> String {
    let foot = footer(run_id);
    if body.len() + foot.len() > MAX_BODY {
        let mut end = MAX_BODY - foot.len() - 40;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push_str("\n\n… (cut: see the full report)\n");
    }
    body + &foot
}

/// The run's pull request: its title and description.
pub fn run(report: &RunReport, branch: &str, project: Option<&str>) -> (String, String) {
    let s = &report.summary;
    let done = report.stories.iter().filter(|st| st.passes).count();
    let title = format!(
        "{}: {done} of {} {} done",
        project.filter(|p| !p.trim().is_empty()).unwrap_or(branch),
        report.stories.len(),
        if report.stories.len() == 1 { "story" } else { "stories" },
    );
    let mut body = String::new();
    let _ = writeln!(
        body,
        "The work of ralph's run `{}` on `{branch}`. What ralph verified is below; the agents' \
         claims are not counted.\n",
        s.run_id
    );
    // The report's own title is the PR's.
    let md = crate::history::markdown(report, crate::screenful::Show::Screenful);
    let md = md.split_once('\n').map_or(md.as_str(), |(_, rest)| rest).trim_start();
    body.push_str(md);
    (title, cut(body, &s.run_id))
}

/// How a story came out, in words, with what the gate counted.
fn verdict(st: &StoryLine) -> String {
    let last_gate = st.gates.iter().rev().find(|g| g.passed);
    let tests = last_gate
        .map(|g| g.summary.trim())
        .filter(|t| !t.is_empty())
        .map(|t| format!(" ({t})"))
        .unwrap_or_default();
    match (st.passes, st.verified) {
        (true, Some(true)) => format!("verified: the gate passed on its work{tests}"),
        (true, None) => "passes; no gate ran, so nothing verified it".into(),
        (true, Some(false)) => "marked passing, but the gate did not verify it".into(),
        (false, _) => "not done".into(),
    }
}

/// A story's pull request: its title and description.
pub fn story(report: &RunReport, st: &StoryLine, prd: Option<&Story>) -> (String, String) {
    let title = format!("feat: {} - {}", st.id, st.title);
    let mut b = String::new();
    let _ = writeln!(b, "## {}: {}\n", st.id, st.title);
    if let Some(desc) = prd.map(|s| s.description.trim()).filter(|d| !d.is_empty()) {
        let _ = writeln!(b, "{desc}\n");
    }
    if let Some(criteria) = prd.map(|s| &s.acceptance_criteria).filter(|c| !c.is_empty()) {
        let _ = writeln!(b, "### Acceptance criteria\n");
        for c in criteria {
            let _ = writeln!(b, "- [ ] {}", c.replace('\n', " "));
        }
        b.push('\n');
    }
    let _ = writeln!(b, "### What ralph saw\n");
    let _ = writeln!(b, "- {}", verdict(st));
    let retried = match st.retried {
        0 => String::new(),
        n => format!(" (+{n} retried after an API limit)"),
    };
    let _ = writeln!(
        b,
        "- {} {}{retried}, {} · agent time {}",
        st.attempts,
        if st.attempts == 1 { "attempt" } else { "attempts" },
        if st.first_pass { "passed at the first" } else { "not at the first" },
        crate::ui::duration(st.agent_ms),
    );
    if !st.agents.is_empty() {
        let _ = writeln!(b, "- agents: {}", st.agents.join(", "));
    }
    let _ = writeln!(
        b,
        "- cost {} · tokens in {} / out {}",
        crate::text::usd(st.cost_usd, st.cost_estimated),
        st.tokens_in,
        st.tokens_out
    );
    if let Some(c) = &st.commit {
        let _ = writeln!(b, "- commit: {c}");
    }
    for g in &st.gates {
        let mark = if g.passed { "passed" } else { "failed" };
        let summary = g.summary.trim();
        let _ = writeln!(
            b,
            "- gate, iteration {}: {mark}{}",
            g.iteration,
            if summary.is_empty() { String::new() } else { format!(": {}", one_line(summary)) }
        );
    }
    for (n, why) in st.merge_failures.iter().enumerate() {
        let _ = writeln!(b, "- merge attempt {} failed: {}", n + 1, one_line(why));
    }
    if let Some(note) = &st.note {
        let _ = writeln!(b, "- note: {}", one_line(note));
    }
    if !st.lessons.is_empty() {
        let _ = writeln!(b, "\n### Lessons\n");
        for l in &st.lessons {
            let _ = writeln!(b, "- {}", one_line(l));
        }
    }
    (title, cut(b, &report.summary.run_id))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::report::GateResult;

    fn report(stories: Vec<StoryLine>) -> RunReport {
        let mut r = crate::history::report("20261202-101500-3a7f-9c41e2", &[]);
        r.stories = stories;
        r
    }

    fn line(id: &str, passes: bool, verified: Option<bool>) -> StoryLine {
        serde_json::from_value(serde_json::json!({
            "id": id, "title": "Add the login page", "attempts": 2, "retried": 0,
            "passes": passes, "verified": verified, "delivered": passes, "first_pass": false,
            "wall_ms": 1000, "agent_ms": 900, "tokens_in": 1200, "tokens_out": 300,
            "cost_usd": 0.25, "cost_estimated": false,
            "gates": [], "commit": "abc1234", "lessons": [], "note": null
        }))
        .unwrap()
    }

    fn prd_story() -> Story {
        Story {
            index: 0,
            id: "US-001".into(),
            title: "Add the login page".into(),
            description: "As a user I can log in.".into(),
            acceptance_criteria: vec!["a form with two fields".into(), "typecheck passes".into()],
            priority: Some(1.0),
            passes: true,
            notes: String::new(),
            verify: None,
            depends_on: vec![],
            touches: vec![],
        }
    }

    #[test]
    fn a_story_says_what_the_gate_verified_and_lists_its_criteria_unticked() {
        let mut st = line("US-001", true, Some(true));
        st.gates = vec![
            GateResult {
                iteration: 1,
                passed: false,
                exit_code: Some(1),
                duration_ms: 5,
                summary: "1 test failing: login".into(),
            },
            GateResult {
                iteration: 2,
                passed: true,
                exit_code: Some(0),
                duration_ms: 5,
                summary: "12 tests pass".into(),
            },
        ];
        st.lessons = vec!["the form needs\na csrf token".into()];
        let (title, body) = story(&report(vec![st.clone()]), &st, Some(&prd_story()));
        assert_eq!(title, "feat: US-001 - Add the login page");
        for want in [
            "## US-001: Add the login page\n\nAs a user I can log in.\n",
            "- [ ] a form with two fields\n- [ ] typecheck passes\n",
            "- verified: the gate passed on its work (12 tests pass)\n",
            "- 2 attempts, not at the first",
            "- cost $0.25 · tokens in 1200 / out 300\n",
            "- commit: abc1234\n",
            "- gate, iteration 1: failed: 1 test failing: login\n",
            "- gate, iteration 2: passed: 12 tests pass\n",
            "### Lessons\n\n- the form needs a csrf token\n",
            "ralph report 20261202-101500-3a7f-9c41e2",
        ] {
            assert!(body.contains(want), "{want:?} not in\n{body}");
        }
        assert!(!body.contains("[x]"), "{body}");
    }

    #[test]
    fn how_a_story_came_out_is_said_as_ralph_knows_it() {
        let cases = [
            (true, Some(true), "verified: the gate passed on its work"),
            (true, None, "passes; no gate ran, so nothing verified it"),
            (true, Some(false), "marked passing, but the gate did not verify it"),
            (false, Some(false), "not done"),
        ];
        for (passes, verified, want) in cases {
            assert_eq!(verdict(&line("A", passes, verified)), want);
        }
    }

    #[test]
    fn the_run_is_its_report_under_a_title_counting_what_is_done() {
        let r = report(vec![line("US-001", true, Some(true)), line("US-002", false, Some(false))]);
        let (title, body) = run(&r, "ralph/login", Some("Shop"));
        assert_eq!(title, "Shop: 1 of 2 stories done");
        assert!(
            body.starts_with(
                "The work of ralph's run `20261202-101500-3a7f-9c41e2` on `ralph/login`"
            ),
            "{body}"
        );
        assert!(body.contains("## Stories"), "{body}");
        assert!(!body.contains("# ralph run"), "{body}");
        let (title, _) = run(&report(vec![line("US-001", true, None)]), "ralph/login", None);
        assert_eq!(title, "ralph/login: 1 of 1 story done");
    }

    #[test]
    fn a_huge_report_is_cut_to_what_a_forge_takes() {
        let mut st = line("US-001", true, None);
        st.lessons = vec!["é".repeat(40_000)];
        let (_, body) = story(&report(vec![st.clone()]), &st, None);
        assert!(body.len() <= MAX_BODY, "{}", body.len());
        assert!(body.contains("(cut: see the full report)") && body.contains("ralph deliver"));
    }
}
