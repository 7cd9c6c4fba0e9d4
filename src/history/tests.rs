use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::event::{IterationResult as R, MergeResult, RunOutcome, StoryReport};

fn at(s: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
}

fn start(resumed: Option<u32>) -> Event {
    Event::RunStart {
        run_id: "r1".into(),
        project: None,
        branch: None,
        prd: "prd.json".into(),
        agent: "codex (gpt-5)".into(),
        max_iterations: 10,
        stories: 2,
        passing: 0,
        resumed_from: resumed,
        budget: Default::default(),
        tool: Some("codex".into()),
        model: Some("gpt-5".into()),
    }
}

fn iter_end(n: u32, story: &str, result: R, passes: bool, cost: Option<f64>, est: bool) -> Event {
    Event::IterationEnd {
        iteration: n,
        story_id: story.into(),
        result,
        duration_ms: 10_000,
        exit_code: Some(0),
        commits: 1,
        files_changed: 1,
        story_passes: passes,
        claimed_complete: false,
        cost_usd: cost,
        tokens: Some(150),
        error: None,
        log: "l".into(),
        tokens_in: Some(100),
        tokens_out: Some(50),
        cost_estimated: est,
        commit: passes.then(|| format!("c{n}")),
        lessons: if passes { vec![] } else { vec![format!("lesson {n}")] },
        refused: vec![],
        agent: "codex".into(),
        resolve: false,
    }
}

fn gate(n: u32, story: &str, passed: bool) -> Event {
    Event::Gate {
        iteration: n,
        story_id: story.into(),
        passed,
        exit_code: Some(if passed { 0 } else { 1 }),
        duration_ms: 2_000,
        summary: if passed { String::new() } else { "1 failed".into() },
    }
}

fn story(id: &str, passes: bool) -> StoryReport {
    StoryReport {
        id: id.into(),
        title: format!("title {id}"),
        claimed: passes,
        verified: Some(passes),
        passes,
        ..Default::default()
    }
}

fn end(outcome: RunOutcome) -> Event {
    Event::RunEnd {
        outcome,
        exit_code: 5,
        iterations: 4,
        passing: 1,
        stories: 2,
        cost_usd: 0.0,
        tokens: 0,
        duration_ms: 1,
        message: "the agent is blocked on US-002: key\nhint: more".into(),
        report: vec![story("US-001", true), story("US-002", false)],
        best: None,
        switches: vec![],
        prd_proposals: vec![],
        protected_refused: vec![],
    }
}

/// US-001: fails the gate, then passes (not first pass). US-002: a usage
/// limit (retried, a 10 s wait), then passes first time but… blocked after.
fn overnight() -> Vec<Recorded> {
    let evs = vec![
        start(None),
        Event::IterationStart {
            iteration: 1,
            max_iterations: 10,
            story_id: "US-001".into(),
            story_title: "First".into(),
            agent: "codex".into(),
            resolve: false,
        },
        gate(1, "US-001", false),
        iter_end(1, "US-001", R::GateFailed, false, Some(0.5), false),
        gate(2, "US-001", true),
        iter_end(2, "US-001", R::Progress, true, Some(0.25), false),
        iter_end(3, "US-002", R::Transient, false, None, false),
        Event::Waiting { reason: "usage limit".into(), until: at(70), seconds: 10 },
        iter_end(3, "US-002", R::NoProgress, false, Some(1.0), true),
        end(RunOutcome::Blocked),
    ];
    evs.into_iter()
        .enumerate()
        .map(|(i, event)| Recorded { ts: at(i as i64 * 10), event })
        .collect()
}

#[test]
fn a_report_adds_up_its_events() {
    let r = report("r1", &overnight());
    let [one, two] = &r.stories[..] else { panic!("{:?}", r.stories) };
    // (field, got, want)
    let rows: &[(&str, String, String)] = &[
        ("1 attempts", one.attempts.to_string(), "2".into()),
        ("1 first pass", one.first_pass.to_string(), "false".into()),
        ("1 delivered", one.delivered.to_string(), "true".into()),
        ("1 commit", format!("{:?}", one.commit), "Some(\"c2\")".into()),
        ("1 wall", one.wall_ms.to_string(), "20000".into()),
        ("1 agent", one.agent_ms.to_string(), "16000".into()),
        ("1 gates", one.gates.len().to_string(), "2".into()),
        ("1 cost", format!("{:.2}", one.cost_usd), "0.75".into()),
        ("1 estimated", one.cost_estimated.to_string(), "false".into()),
        ("1 lessons", format!("{:?}", one.lessons), "[\"lesson 1\"]".into()),
        ("1 title", one.title.clone(), "title US-001".into()),
        ("2 attempts", two.attempts.to_string(), "1".into()),
        ("2 retried", two.retried.to_string(), "1".into()),
        ("2 delivered", two.delivered.to_string(), "false".into()),
        ("2 estimated", two.cost_estimated.to_string(), "true".into()),
        ("2 tokens in", two.tokens_in.to_string(), "200".into()),
        ("2 tokens out", two.tokens_out.to_string(), "100".into()),
    ];
    for (what, got, want) in rows {
        assert_eq!(got, want, "{what}");
    }
    let t = &r.totals;
    assert_eq!((t.attempts, t.delivered, t.first_pass), (3, 1, 0));
    assert_eq!(t.first_pass_rate, Some(0.0));
    assert!((t.cost_usd - 1.75).abs() < 1e-9 && t.cost_estimated);
    assert_eq!(t.cost_per_delivered_story.map(|c| (c * 100.0).round()), Some(175.0));
    assert_eq!((t.waited_ms, t.retried_ms, t.lost_ms), (10_000, 10_000, 20_000));
}

/// A wait counts for the time it lasted, not for the time it was planned:
/// three runs of 2 s, each stopped in (or resumed into) an hour's wait for
/// `--calls-per-hour 1`, lost 6 s at most to it, not three hours.
#[test]
fn time_lost_to_a_wait_is_the_time_it_lasted() {
    let hour = |ts: i64| Event::Waiting {
        reason: "calls per hour".into(),
        until: at(ts + 3600),
        seconds: 3600,
    };
    let tick = Event::WaitTick { remaining_s: 3599 };
    #[rustfmt::skip]
    let cases: &[(&str, Vec<(i64, Event)>, u64)] = &[
        ("three runs each stopped 2 s into it", vec![
            (0, start(None)), (0, hour(0)), (2, end(RunOutcome::Interrupted)),
            (10, start(Some(0))), (10, hour(10)), (12, end(RunOutcome::Interrupted)),
            (20, start(Some(0))), (20, hour(20)), (22, end(RunOutcome::Interrupted)),
        ], 6_000),
        ("killed in it: as far as its last tick", vec![
            (0, start(None)), (0, hour(0)), (60, tick.clone()), (120, tick.clone()),
        ], 120_000),
        ("killed at once: nothing known", vec![(0, start(None)), (0, hour(0))], 0),
        ("waited out: as long as planned, not longer", vec![
            (0, start(None)), (0, hour(0)), (3600, tick.clone()), (3700, end(RunOutcome::Complete)),
        ], 3_600_000),
    ];
    for (name, events, want) in cases {
        let events: Vec<Recorded> =
            events.iter().map(|(ts, e)| Recorded { ts: at(*ts), event: e.clone() }).collect();
        let t = report("r1", &events).totals;
        assert_eq!(t.waited_ms, *want, "{name}");
        assert_eq!(t.lost_ms, *want, "{name}");
    }
}

#[test]
fn a_summary_is_one_run_in_numbers() {
    let s = summarize("r1", &overnight());
    assert_eq!(s.started_at, Some(at(0)));
    assert_eq!(s.ended_at, Some(at(90)));
    assert_eq!(s.duration_ms, 90_000);
    assert_eq!(s.outcome, Some(RunOutcome::Blocked));
    assert_eq!(s.why.as_deref(), Some("the agent is blocked on US-002: key"));
    assert_eq!((s.iterations, s.stories, s.verified, s.delivered), (3, 2, 1, 1));
    assert_eq!((s.tokens_in, s.tokens_out), (400, 200));
    assert!(s.cost_estimated);
    assert_eq!((s.tool.as_deref(), s.model.as_deref()), (Some("codex"), Some("gpt-5")));
    assert_eq!(s.branch, None);
}

#[test]
fn a_run_s_branch_is_its_own_start_s_not_a_worker_s() {
    let named = |name: &str| {
        let mut e = start(None);
        if let Event::RunStart { branch, .. } = &mut e {
            *branch = Some(name.into());
        }
        e
    };
    let worker = Event::Worker {
        worker: 1,
        story_id: "US-001".into(),
        inner: Box::new(named("ralph/x--US-001")),
    };
    let cases: Vec<(Vec<Event>, Option<&str>)> = vec![
        (vec![start(None)], None),
        (vec![named("ralph/x")], Some("ralph/x")),
        (vec![named("ralph/x"), worker.clone()], Some("ralph/x")),
        (vec![worker, named("ralph/x")], Some("ralph/x")),
    ];
    for (evs, want) in cases {
        let evs: Vec<Recorded> =
            evs.into_iter().map(|event| Recorded { ts: at(0), event }).collect();
        assert_eq!(summarize("r1", &evs).branch.as_deref(), want, "{evs:?}");
    }
}

#[test]
fn a_resumed_run_without_its_end_is_not_over() {
    let mut evs = overnight();
    evs.push(Recorded { ts: at(200), event: start(Some(3)) });
    let s = summarize("r1", &evs);
    assert_eq!((s.outcome, s.ended_at), (None, None));
    assert_eq!(s.duration_ms, 200_000);
}

#[test]
fn a_parallel_story_is_delivered_when_merged() {
    let worker =
        |e: Event| Event::Worker { worker: 1, story_id: "US-001".into(), inner: Box::new(e) };
    let merge = |result| Event::Merge {
        story_id: "US-001".into(),
        result,
        commit: Some("m1".into()),
        files: vec![],
        duration_ms: 1,
        message: String::new(),
    };
    let cases: &[(&[MergeResult], bool, bool)] = &[
        (&[], false, false),
        (&[MergeResult::Merged], true, true),
        (&[MergeResult::Conflict, MergeResult::Merged], true, false),
    ];
    for (merges, delivered, first_pass) in cases {
        let mut evs =
            vec![start(None), worker(iter_end(1, "US-001", R::Progress, true, None, false))];
        evs.extend(merges.iter().map(|m| merge(*m)));
        let evs: Vec<Recorded> =
            evs.into_iter().map(|event| Recorded { ts: at(0), event }).collect();
        let r = report("r1", &evs);
        assert_eq!(
            (r.stories[0].delivered, r.stories[0].first_pass),
            (*delivered, *first_pass),
            "{merges:?}"
        );
        assert_eq!(r.summary.delivered, usize::from(*delivered), "{merges:?}");
        if *delivered {
            assert_eq!(r.stories[0].commit.as_deref(), Some("m1"));
        }
    }
}

#[test]
fn resolver_iterations_and_failed_merges_are_counted_as_such() {
    let worker =
        |e: Event| Event::Worker { worker: 1, story_id: "US-001".into(), inner: Box::new(e) };
    let merge = |result, message: &str| Event::Merge {
        story_id: "US-001".into(),
        result,
        commit: (result == MergeResult::Merged).then(|| "m1".into()),
        files: vec![],
        duration_ms: 1,
        message: message.into(),
    };
    let mut resolver = iter_end(2, "US-001", R::Failed, false, Some(0.2), false);
    if let Event::IterationEnd { resolve, .. } = &mut resolver {
        *resolve = true;
    }
    let evs: Vec<Recorded> = vec![
        start(None),
        worker(iter_end(1, "US-001", R::Progress, true, Some(0.1), false)),
        merge(MergeResult::Resolving, "conflicts: a resolver merges both"),
        worker(resolver),
        merge(MergeResult::ResolveFailed, "the resolver could not merge it: markers"),
        worker(iter_end(3, "US-001", R::Progress, true, Some(0.1), false)),
        merge(MergeResult::Merged, ""),
    ]
    .into_iter()
    .map(|event| Recorded { ts: at(0), event })
    .collect();
    let r = report("r1", &evs);
    let s = &r.stories[0];
    assert_eq!((s.attempts, s.resolves), (2, 1));
    assert_eq!(s.merge_failures, ["the resolver could not merge it: markers"]);
    assert!(s.delivered && !s.first_pass);
    // The resolver's cost is the story's.
    assert!((s.cost_usd - 0.4).abs() < 1e-9, "{}", s.cost_usd);
    let md = crate::history::markdown(&r, crate::screenful::Show::Screenful);
    assert!(md.contains("| 2 (+1 resolving) |"), "{md}");
    assert!(md.contains("- US-001 attempt 1: the resolver could not merge it: markers"), "{md}");
}

#[test]
fn lines_read_back_as_the_events_they_were() {
    let worker = Event::Worker {
        worker: 2,
        story_id: "US-002".into(),
        inner: Box::new(iter_end(1, "US-002", R::Progress, true, Some(0.1), false)),
    };
    let start_worker = Event::WorkerStart {
        worker: 1,
        story_id: "US-001".into(),
        story_title: "t".into(),
        branch: "b".into(),
        worktree: "w".into(),
        attempt: 1,
        claim_ms: None,
    };
    for event in [start(None), worker, start_worker, end(RunOutcome::Complete)] {
        let line = crate::ui::json_line(&event).unwrap();
        let back = parse_line(&line).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(
            crate::ui::json_line(&back.event)
                .map(|l| l[l.find("\"event\"").unwrap()..].to_string()),
            Some(line[line.find("\"event\"").unwrap()..].to_string())
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir { run_id: "r1".into(), dir: tmp.path().into() };
    let good = crate::ui::json_line(&start(None)).unwrap();
    let output = crate::ui::json_line(&Event::AgentOutput { iteration: 1, text: "x".into() });
    let text = format!("not json\n{{\"v\":1,\"ts\":\"x\"}}\n\n{good}\n{}\n", output.unwrap());
    std::fs::write(dir.events(), text).unwrap();
    let (events, skipped) = dir.read().unwrap();
    assert_eq!((events.len(), skipped), (1, 2), "the agent's output is left out, not skipped");
}

#[test]
fn the_markdown_says_what_is_estimated() {
    let md = markdown(&report("r1", &overnight()), crate::screenful::Show::Screenful);
    for want in [
        "# ralph run r1",
        "outcome: blocked (the agent is blocked on US-002: key)",
        "| US-001 title US-001 | delivered | 2 | no |",
        "~$1.75",
        "first-pass rate 0% (0 of 1)",
        "time lost to limits and back-offs: 20.0s",
        "US-001 iteration 1: exit 1: 1 failed",
        "- US-002: lesson 3",
        "~ an estimate",
    ] {
        assert!(md.contains(want), "{want:?} not in\n{md}");
    }
    let text = history_text(&[summarize("r1", &overnight())]);
    assert!(text.contains("3 iterations · 1/2 verified (1 delivered) · ~$1.75"), "{text}");
    assert!(text.contains("codex (gpt-5)"), "{text}");
}

#[test]
fn agent_output_lines_are_told_without_parsing_and_nothing_else_is() {
    let output = crate::ui::json_line(&Event::AgentOutput { iteration: 1, text: "hi".into() });
    let worker = crate::ui::json_line(&Event::Worker {
        worker: 2,
        story_id: "US-001".into(),
        inner: Box::new(Event::AgentOutput { iteration: 1, text: "hi".into() }),
    });
    // Another event whose text quotes an agent_output line.
    let quoting = crate::ui::json_line(&Event::Notice {
        level: crate::event::Level::Info,
        message: r#"{"event":"agent_output"}"#.into(),
    });
    let table = [(output, true), (worker, true), (quoting, false)];
    for (line, want) in table {
        let line = line.unwrap();
        assert_eq!(super::is_agent_output(&line), want, "{line}");
    }
}

#[test]
fn the_report_says_which_agent_did_what_and_why_it_switched() {
    let begin = |n: u32, story: &str, agent: &str| Event::IterationStart {
        iteration: n,
        max_iterations: 10,
        story_id: story.into(),
        story_title: format!("title {story}"),
        agent: agent.into(),
        resolve: false,
    };
    let evs = vec![
        start(None),
        begin(1, "US-001", "codex"),
        iter_end(1, "US-001", R::Transient, false, None, false),
        Event::AgentSwitch {
            iteration: 2,
            from: "codex".into(),
            to: "claude".into(),
            reason: crate::agent::fallback::SwitchReason::UsageLimit,
            until: Some(at(7200)),
        },
        begin(2, "US-001", "claude"),
        iter_end(2, "US-001", R::Progress, true, None, false),
        begin(3, "US-002", "claude"),
        iter_end(3, "US-002", R::Progress, true, None, false),
    ];
    let events: Vec<Recorded> = evs
        .into_iter()
        .enumerate()
        .map(|(i, event)| Recorded { ts: at(i as i64), event })
        .collect();
    let r = report("r1", &events);
    let agents: Vec<_> = r.stories.iter().map(|s| (s.id.as_str(), s.agents.join(","))).collect();
    assert_eq!(agents, [("US-001", "codex,claude".into()), ("US-002", "claude".into())]);
    assert_eq!(r.switches.len(), 1);
    assert_eq!((r.switches[0].iteration, r.switches[0].to.as_str()), (2, "claude"));
    let md = markdown(&r, crate::screenful::Show::Screenful);
    for want in [
        "| agents |",
        "| codex, claude |",
        "## Agent switches",
        // In UTC, as the report's other times are.
        "- agent codex → claude from iteration 2: codex's usage limit lasts until 2027-01-15 10:00:00 UTC",
    ] {
        assert!(md.contains(want), "{want:?} not in\n{md}");
    }
    // One agent throughout: no column for it, no switches.
    let md = markdown(&report("r1", &overnight()), crate::screenful::Show::Screenful);
    assert!(!md.contains("| agents |") && !md.contains("## Agent switches"), "{md}");
}

#[test]
fn a_long_prd_reports_the_stories_its_run_touched() {
    // 500 stories, each with a gate; the run worked on US-001 and US-002.
    let mut overnight = overnight();
    let Some(Recorded { event: Event::RunEnd { report: stories, .. }, .. }) = overnight.last_mut()
    else {
        panic!("the run's end")
    };
    *stories = (1..=500)
        .map(|i| StoryReport {
            gate: Some("cargo test".into()),
            gate_source: Some("default".into()),
            ..story(&format!("US-{i:03}"), i <= 1 || i > 490)
        })
        .collect();
    let r = report("r1", &overnight);
    let md = markdown(&r, crate::screenful::Show::Screenful);
    for want in [
        "| US-001 title US-001 | delivered |",
        "| US-002 title US-002 | not done |",
        "498 other stories unchanged: 10 passing, 488 unfinished — `ralph report --all` lists \
         every story, `ralph report --json` has them all.",
        "- US-002: `cargo test` (default)",
    ] {
        assert!(md.contains(want), "{want:?} not in\n{md}");
    }
    assert!(!md.contains("US-003") && !md.contains("US-500"), "{md}");
    assert!(md.len() < 4000, "{} bytes", md.len());
    let all = markdown(&r, crate::screenful::Show::All);
    assert!(all.contains("| US-500 title US-500 | passed before |"), "{all}");
    assert!(all.contains("- US-500: `cargo test` (default)") && !all.contains("other stories"));
}
