//! The renderers' tables: which reporter, durations, colours, the report.

use super::*;

#[test]
fn renderer_choice_table() {
    use Color::{Always, Auto as A, Never};
    use Progress::{Auto, Bar, Plain};
    // (json, tty, color, NO_COLOR, dumb, ci, progress) → (mode, colour)
    #[rustfmt::skip]
    let cases = [
        ((false, true, A, false, false, false, Auto), (Mode::Tty, true)),
        ((false, true, A, true, false, false, Auto), (Mode::Tty, false)),
        ((false, false, A, false, false, false, Auto), (Mode::Plain, false)),
        ((false, false, Always, false, false, false, Auto), (Mode::Plain, true)),
        ((false, true, Never, false, false, false, Auto), (Mode::Tty, false)),
        ((false, true, A, false, true, false, Auto), (Mode::Plain, false)),
        ((false, true, A, false, false, true, Auto), (Mode::Plain, true)),
        ((true, true, A, false, false, false, Auto), (Mode::Json, false)),
        // --progress plain: lines on a terminal, still coloured there.
        ((false, true, A, false, false, false, Plain), (Mode::Plain, true)),
        // --progress bar: the live display on CI and a dumb terminal, never in a pipe.
        ((false, true, A, false, false, true, Bar), (Mode::Tty, true)),
        ((false, true, A, false, true, false, Bar), (Mode::Tty, false)),
        ((false, false, A, false, false, false, Bar), (Mode::Plain, false)),
        ((true, true, A, false, false, false, Bar), (Mode::Json, false)),
        ((true, true, A, false, false, false, Plain), (Mode::Json, false)),
    ];
    for ((json, tty, color, no_color, dumb, ci, progress), want) in cases {
        let facts = Console { json, stdout_is_terminal: tty, no_color, term_dumb: dumb, ci };
        assert_eq!(decide(facts, color, progress), want, "{facts:?} {color:?} {progress:?}");
    }
}

#[test]
fn durations_read_naturally() {
    assert_eq!(duration(850), "850ms");
    assert_eq!(duration(12_300), "12.3s");
    assert_eq!(duration(185_000), "3m 05s");
    assert_eq!(duration(3_720_000), "1h 02m");
    assert_eq!(countdown(6), "6s");
    assert_eq!(countdown(185), "3m 05s");
    assert_eq!(countdown(3720), "1h 02m");
}

#[test]
fn colour_is_closed_on_every_line() {
    let style = Style { color: true, agent_output: true, quiet: false, verbose: false };
    let end = Event::RunEnd {
        outcome: crate::event::RunOutcome::Complete,
        exit_code: 0,
        iterations: 1,
        passing: 1,
        stories: 1,
        cost_usd: 0.0,
        tokens: 0,
        duration_ms: 10,
        message: "every story passes".into(),
        report: vec![crate::event::StoryReport {
            id: "US-001".into(),
            title: "First".into(),
            claimed: true,
            passes: true,
            work: crate::state::StoryWork {
                agents: vec!["claude".into(), "codex".into()],
                ..Default::default()
            },
            ..Default::default()
        }],
        best: None,
        switches: vec![crate::event::SwitchReport {
            iteration: 2,
            from: "claude".into(),
            to: "codex".into(),
            reason: crate::agent::fallback::SwitchReason::UsageLimit,
            until: None,
        }],
        prd_proposals: vec![],
        protected_refused: vec![],
    };
    let text = describe(&end, style).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.contains("✓ US-001 First (claimed: yes, no gate) · by claude, codex"), "{text}");
    assert!(text.contains("agent claude → codex from iteration 2: claude is limited"), "{text}");
    for line in text.lines() {
        assert!(line.starts_with("\x1b[32m") && line.ends_with("\x1b[0m"), "{line:?}");
    }
}

#[test]
fn plain_output_has_no_escape_codes_without_colour() {
    let mut buf = Vec::new();
    let style = Style { color: false, agent_output: true, quiet: false, verbose: false };
    let mut plain = Plain::new(&mut buf, style);
    plain.emit(&Event::Notice { level: Level::Warn, message: "careful".into() });
    plain.emit(&Event::AgentOutput { iteration: 1, text: "a\nb".into() });
    let text = String::from_utf8(buf).unwrap();
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(text.contains("warning: careful") && text.contains("  │ a\n  │ b\n"), "{text}");
}

#[test]
fn the_end_of_a_long_run_lists_the_stories_it_touched() {
    let style = Style { color: false, agent_output: false, quiet: true, verbose: false };
    let story = |i: usize| crate::event::StoryReport {
        id: format!("US-{i:04}"),
        title: format!("Story {i}"),
        claimed: i <= 10,
        passes: i <= 10,
        ..Default::default()
    };
    let mut report: Vec<_> = (1..=5000).map(story).collect();
    report[10].work.iterations = 2;
    report[4000].note = Some("given up: conflicts".into());
    let end = |report| Event::RunEnd {
        outcome: crate::event::RunOutcome::MaxIterations,
        exit_code: 1,
        iterations: 2,
        passing: 10,
        stories: 5000,
        cost_usd: 0.0,
        tokens: 0,
        duration_ms: 10,
        message: "reached the iteration limit".into(),
        report,
        best: None,
        switches: vec![],
        prd_proposals: vec![],
        protected_refused: vec![],
    };
    let text = describe(&end(report), style).unwrap();
    assert_eq!(
        text.lines().skip(2).collect::<Vec<_>>(),
        [
            "  ✗ US-0011 Story 11 (claimed: no, no gate)",
            "  ✗ US-4001 Story 4001 (claimed: no, no gate): given up: conflicts",
            "  4998 other stories unchanged: 10 passing, 4988 unfinished — `ralph status --all` \
             lists every story",
        ],
        "{text}"
    );
    // Nothing touched: the count alone, without "other".
    let text = describe(&end((1..=50).map(story).collect()), style).unwrap();
    assert!(text.ends_with("\n  50 stories unchanged: 10 passing, 40 unfinished — `ralph status --all` lists every story"), "{text}");
}
