use super::*;
use crate::history::report::StoryOracle;

#[test]
fn a_list_is_whole_up_to_a_screenful_or_with_all() {
    let table = [
        (0, Show::Screenful, true),
        (3, Show::Screenful, true),
        (SCREENFUL, Show::Screenful, true),
        (SCREENFUL + 1, Show::Screenful, false),
        (5000, Show::Screenful, false),
        (5000, Show::All, true),
    ];
    for (n, show, want) in table {
        assert_eq!(whole(n, show), want, "{n} {show:?}");
    }
    assert_eq!(Show::all_if(true), Show::All);
    assert_eq!(Show::all_if(false), Show::Screenful);
}

#[test]
fn where_a_story_stands() {
    let f = StatusFacts::default();
    let table = [
        ("nothing known", f, Standing::Unfinished),
        (
            "passes, whatever else",
            StatusFacts { passes: true, at_work: true, refused: true, ..f },
            Standing::Passing,
        ),
        (
            "at work beats given up",
            StatusFacts { at_work: true, given_up: true, ..f },
            Standing::InProgress,
        ),
        (
            "given up beats refused",
            StatusFacts { given_up: true, refused: true, tried: true, ..f },
            Standing::GivenUp,
        ),
        ("refused beats tried", StatusFacts { refused: true, tried: true, ..f }, Standing::Refused),
        ("tried and not passing", StatusFacts { tried: true, ..f }, Standing::Failing),
    ];
    for (name, facts, want) in table {
        assert_eq!(Standing::of(facts), want, "{name}");
        let attention = !matches!(want, Standing::Unfinished | Standing::Passing);
        assert_eq!(want.needs_attention(), attention, "{name}");
    }
}

/// `n` stories, unfinished but for `marks`: (index, `p` passing, `f`
/// failing, `r` refused, `g` given up, `w` in progress).
fn prd(n: usize, marks: &[(usize, char)]) -> Vec<Standing> {
    let mut v = vec![Standing::Unfinished; n];
    for &(i, c) in marks {
        v[i] = match c {
            'p' => Standing::Passing,
            'f' => Standing::Failing,
            'r' => Standing::Refused,
            'g' => Standing::GivenUp,
            'w' => Standing::InProgress,
            _ => panic!("mark {c}"),
        };
    }
    v
}

#[test]
fn status_lists_what_needs_attention_then_the_next_few() {
    let first = |n: usize| (0..n).collect::<Vec<_>>();
    // (name, standings, queue, show) → (shown, more, more needing attention)
    let table: Vec<(&str, Vec<Standing>, Vec<usize>, Show, (Vec<usize>, usize, usize))> = vec![
        (
            "a short PRD: every story, in its order",
            prd(3, &[(0, 'p'), (2, 'g')]),
            vec![1],
            Show::Screenful,
            (vec![0, 1, 2], 0, 0),
        ),
        (
            "a screenful exactly: whole",
            prd(SCREENFUL, &[]),
            first(SCREENFUL),
            Show::Screenful,
            (first(SCREENFUL), 0, 0),
        ),
        (
            "one more: the next few, the rest counted",
            prd(SCREENFUL + 1, &[]),
            first(SCREENFUL + 1),
            Show::Screenful,
            (first(NEXT), SCREENFUL + 1 - NEXT, 0),
        ),
        (
            "attention first: in progress, given up, refused, failing; then the queue",
            prd(50, &[(0, 'p'), (10, 'g'), (20, 'r'), (30, 'f'), (45, 'w')]),
            (1..50).filter(|i| *i != 10).collect(),
            Show::Screenful,
            (vec![45, 10, 20, 30, 1, 2, 3, 4, 5], 41, 0),
        ),
        (
            "a failing story at the head of the queue is listed once",
            prd(50, &[(7, 'f')]),
            vec![7, 8, 9, 10, 11, 12, 13],
            Show::Screenful,
            (vec![7, 8, 9, 10, 11, 12], 44, 0),
        ),
        (
            "the queue runs short (stories wait on others): only what it has",
            prd(50, &[(3, 'f')]),
            vec![0],
            Show::Screenful,
            (vec![3, 0], 48, 0),
        ),
        (
            "more needing attention than fit: the first ones, the rest counted",
            prd(60, &(30..55).map(|i| (i, 'f')).collect::<Vec<_>>()),
            first(60),
            Show::Screenful,
            ((30..30 + ATTENTION).chain(0..NEXT).collect(), 60 - ATTENTION - NEXT, 5),
        ),
        (
            "--all: every story, in the PRD's order",
            prd(50, &[(45, 'w'), (10, 'g')]),
            first(50),
            Show::All,
            (first(50), 0, 0),
        ),
        (
            "every story passes: nothing to list but the count",
            vec![Standing::Passing; 50],
            vec![],
            Show::Screenful,
            (vec![], 50, 0),
        ),
    ];
    for (name, standings, queue, show, (shown, more, more_attention)) in table {
        let got = status(&standings, &queue, show);
        assert_eq!(got, Listing { shown, more, more_needing_attention: more_attention }, "{name}");
        assert_eq!(got.shown.len() + got.more, standings.len(), "{name}: all accounted for");
    }
}

#[test]
fn the_rest_is_counted_in_words() {
    let table = [
        (10, 4980, true, "4990 other stories unchanged: 10 passing, 4980 unfinished"),
        (0, 50, true, "50 other stories unchanged: 50 unfinished"),
        (50, 0, false, "50 stories unchanged: 50 passing"),
        (1, 0, true, "1 other story unchanged: 1 passing"),
    ];
    for (passing, unfinished, other, want) in table {
        assert_eq!(Rest { passing, unfinished }.describe(other), want);
    }
}

#[test]
fn a_long_list_keeps_what_was_touched_and_counts_the_rest() {
    // (passes, touched)
    let short = [(true, false), (false, true), (false, false)];
    let t = touched(&short, Show::Screenful, |s| s.1, |s| s.0);
    assert_eq!((t.shown.len(), t.rest), (3, None), "a short list is whole");

    let mut long = vec![(false, false); 100];
    long[3] = (true, true);
    long[50] = (false, true);
    long[60..70].fill((true, false));
    let t = touched(&long, Show::Screenful, |s| s.1, |s| s.0);
    assert_eq!(t.shown, [&(true, true), &(false, true)]);
    assert_eq!(t.rest, Some(Rest { passing: 10, unfinished: 88 }));
    let all = touched(&long, Show::All, |s| s.1, |s| s.0);
    assert_eq!((all.shown.len(), all.rest), (100, None));
}

fn untouched_report() -> StoryReport {
    StoryReport {
        id: "US-001".into(),
        title: "First".into(),
        claimed: true,
        verified: Some(false),
        passes: true,
        gate: Some("cargo test".into()),
        gate_source: Some("default".into()),
        ..Default::default()
    }
}

#[test]
fn what_the_end_of_a_run_calls_touched() {
    let red = crate::oracle::red::RedEvidence {
        base: "main".into(),
        commit: "c".into(),
        check: "make check".into(),
        passed_on_base: true,
        detail: "exit 0".into(),
    };
    let table: Vec<(&str, fn(&mut StoryReport, &crate::oracle::red::RedEvidence), bool)> = vec![
        ("passing before, a gate, claimed: unchanged", |_, _| {}, false),
        ("no gate at all: unchanged", |s, _| s.verified = None, false),
        ("worked on", |s, _| s.work.iterations = 1, true),
        ("resolved", |s, _| s.work.resolves = 1, true),
        ("refused", |s, _| s.findings.refused = vec!["iteration 2: tests vanished".into()], true),
        ("flagged", |s, _| s.findings.test_flags = vec!["src/a.rs:3 #[ignore]".into()], true),
        ("given up", |s, _| s.note = Some("given up: conflicts".into()), true),
        ("verified in this run", |s, _| s.verified = Some(true), true),
        ("merged", |s, _| s.work.commit = Some("abc1234".into()), true),
        ("a merge attempt failed", |s, _| s.work.merge_failures = vec!["conflict".into()], true),
        ("its check passed on the base", |s, r| s.findings.red = Some(r.clone()), true),
    ];
    for (name, change, want) in table {
        let mut s = untouched_report();
        change(&mut s, &red);
        assert_eq!(run_touched(&s), want, "{name}");
    }
}

fn untouched_line() -> StoryLine {
    StoryLine {
        id: "US-001".into(),
        title: "First".into(),
        attempts: 0,
        retried: 0,
        resolves: 0,
        merge_failures: vec![],
        passes: true,
        verified: Some(false),
        delivered: false,
        first_pass: false,
        wall_ms: 0,
        agent_ms: 0,
        tokens_in: 0,
        tokens_out: 0,
        cost_usd: 0.0,
        cost_estimated: false,
        gates: vec![],
        commit: None,
        agents: vec![],
        lessons: vec![],
        note: None,
        oracle: Some(StoryOracle {
            gate: Some("cargo test".into()),
            gate_source: Some("default".into()),
            ..Default::default()
        }),
    }
}

#[test]
fn what_report_md_calls_touched() {
    let gate = crate::history::report::GateResult {
        iteration: 1,
        passed: false,
        exit_code: Some(1),
        duration_ms: 5,
        summary: String::new(),
    };
    let table: Vec<(&str, fn(&mut StoryLine, &crate::history::report::GateResult), bool)> = vec![
        ("passed before, judged by the gate it has: unchanged", |_, _| {}, false),
        ("not started, no gate", |s, _| (s.passes, s.oracle) = (false, None), false),
        ("attempted", |s, _| s.attempts = 1, true),
        ("retried after a limit", |s, _| s.retried = 1, true),
        ("resolved", |s, _| s.resolves = 1, true),
        ("delivered", |s, _| s.delivered = true, true),
        ("gated", |s, g| s.gates = vec![g.clone()], true),
        ("a merge attempt failed", |s, _| s.merge_failures = vec!["conflict".into()], true),
        ("a lesson", |s, _| s.lessons = vec!["run the formatter".into()], true),
        ("a note", |s, _| s.note = Some("given up: conflicts".into()), true),
        ("merged", |s, _| s.commit = Some("abc1234".into()), true),
        (
            "refused",
            |s, _| s.oracle.as_mut().unwrap().findings.refused = vec!["tests vanished".into()],
            true,
        ),
        (
            "flagged",
            |s, _| s.oracle.as_mut().unwrap().findings.test_flags = vec!["#[ignore]".into()],
            true,
        ),
    ];
    for (name, change, want) in table {
        let mut s = untouched_line();
        change(&mut s, &gate);
        assert_eq!(report_touched(&s), want, "{name}");
    }
}
