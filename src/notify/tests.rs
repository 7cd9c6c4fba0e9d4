use std::time::Duration;

use super::*;
use crate::event::MergeResult;

fn end(outcome: RunOutcome) -> Event {
    Event::RunEnd {
        outcome,
        exit_code: 0,
        iterations: 1,
        passing: 1,
        stories: 1,
        cost_usd: 0.0,
        tokens: 0,
        duration_ms: 1,
        message: "m".into(),
        report: vec![],
        best: None,
        switches: vec![],
        prd_proposals: vec![],
        protected_refused: vec![],
    }
}

#[test]
fn events_are_notified_as_their_kinds() {
    use crate::circuit::State;
    let wait = |seconds| Event::Waiting { reason: "r".into(), until: chrono::Utc::now(), seconds };
    let worker_end = |outcome: crate::event::WorkerOutcome| Event::WorkerEnd {
        worker: 1,
        story_id: "US-001".into(),
        outcome,
        message: String::new(),
    };
    let circuit = |to| Event::Circuit { from: State::Closed, to, reason: "r".into() };
    let merge = |result| Event::Merge {
        story_id: "US-001".into(),
        result,
        commit: None,
        files: vec![],
        duration_ms: 1,
        message: String::new(),
    };
    let cases: Vec<(Event, Vec<Kind>)> = vec![
        (end(RunOutcome::Complete), vec![Kind::RunEnd]),
        (end(RunOutcome::Blocked), vec![Kind::RunEnd, Kind::Blocked]),
        (circuit(State::Open), vec![Kind::CircuitOpen]),
        (circuit(State::HalfOpen), vec![]),
        (
            Event::Worker {
                worker: 1,
                story_id: "x".into(),
                inner: Box::new(circuit(State::Open)),
            },
            vec![Kind::CircuitOpen],
        ),
        (wait(1801), vec![Kind::UsageLimitWait]),
        (wait(1800), vec![]),
        (
            Event::BudgetWarning { budget: crate::event::BudgetKind::Cost, used: 8.0, limit: 10.0 },
            vec![Kind::Budget],
        ),
        (merge(MergeResult::Blocked), vec![Kind::Blocked]),
        (merge(MergeResult::Conflict), vec![]),
        (worker_end(crate::event::WorkerOutcome::GivenUp), vec![Kind::Blocked]),
        (worker_end(crate::event::WorkerOutcome::Failed), vec![Kind::WorkerLost]),
        (worker_end(crate::event::WorkerOutcome::TurnOver), vec![]),
        (worker_end(crate::event::WorkerOutcome::NotResolved), vec![]),
        (Event::Notice { level: crate::event::Level::Warn, message: "m".into() }, vec![]),
    ];
    for (event, want) in cases {
        assert_eq!(kinds(&event, Duration::from_secs(1800)), want, "{event:?}");
    }
}

fn cfg() -> NotifyConfig {
    NotifyConfig {
        events: vec!["run_end".into(), "blocked".into()],
        timeout: Duration::from_secs(1),
        ..NotifyConfig::default()
    }
}

#[test]
fn urls_come_from_the_environment_and_each_channel_has_its_events() {
    let env = |k: &str| (k == "HOOK").then(|| "https://hooks.example/T/B/X".to_string());
    let c = NotifyConfig {
        webhook: Some("http://127.0.0.1:9/x".into()),
        slack: Some("env:HOOK".into()),
        ntfy: Some("env:UNSET".into()),
        desktop: true,
        slack_events: vec!["circuit_open".into()],
        ..cfg()
    };
    let t = targets(&c, &env, Some("/usr/bin/notify-send".into())).unwrap();
    assert_eq!(
        t,
        vec![
            Target {
                channel: Channel::Webhook("http://127.0.0.1:9/x".into()),
                wants: vec![Kind::RunEnd, Kind::Blocked]
            },
            Target {
                channel: Channel::Slack("https://hooks.example/T/B/X".into()),
                wants: vec![Kind::CircuitOpen]
            },
            Target {
                channel: Channel::Desktop("/usr/bin/notify-send".into()),
                wants: vec![Kind::RunEnd, Kind::Blocked]
            },
        ]
    );
    // Without notify-send there is no desktop channel.
    assert_eq!(targets(&NotifyConfig { desktop: true, ..cfg() }, &env, None).unwrap(), vec![]);
    let bad = NotifyConfig { events: vec!["run_ends".into()], ..c.clone() };
    let e = targets(&bad, &env, None).unwrap_err();
    assert!(matches!(&e, NotifyError::UnknownEvent { name } if name == "run_ends"), "{e}");
    assert!(e.to_string().contains("unknown event `run_ends` (one of run_end, "), "{e}");
    let bad = NotifyConfig { webhook: Some("hooks.example".into()), ..cfg() };
    let e = targets(&bad, &env, None).unwrap_err();
    assert!(e.to_string().contains("neither a URL nor env:"), "{e}");
}

#[test]
fn a_url_in_a_config_file_is_refused_and_env_names_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    let no_env = |_: &str| None;
    std::fs::write(&file, "[notify]\nslack = \"https://hooks.slack.com/services/T/B/SECRET\"\n")
        .unwrap();
    let e = crate::config::Layers::load(None, &file, &no_env).unwrap_err().to_string();
    assert!(e.contains("notify.slack") && e.contains("stays out of files"), "{e}");
    assert!(!e.contains("SECRET"), "{e}");
    std::fs::write(&file, "[notify]\nslack = \"env:MY_SLACK\"\n").unwrap();
    assert!(crate::config::Layers::load(None, &file, &no_env).is_ok());
    // From the environment a URL is what it should be.
    let env = |k: &str| (k == "RALPH_NOTIFY_WEBHOOK").then(|| "http://127.0.0.1:1/h".to_string());
    let c = crate::config::Layers::load(None, &file, &env).unwrap().resolve();
    assert_eq!(c.notify.webhook.as_deref(), Some("http://127.0.0.1:1/h"));
}

#[test]
fn each_channel_gets_its_own_shape() {
    let e = end(RunOutcome::Blocked);
    let line = crate::ui::json_line(&e).unwrap();
    let hook = deliver::request(&Channel::Webhook("u".into()), Kind::RunEnd, &e, &line).unwrap();
    assert_eq!(hook.body, line);
    let v: serde_json::Value = serde_json::from_str(&hook.body).unwrap();
    assert_eq!((v["event"].as_str(), v["outcome"].as_str()), (Some("run_end"), Some("blocked")));
    let slack = deliver::request(&Channel::Slack("u".into()), Kind::Blocked, &e, &line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&slack.body).unwrap();
    assert!(v["text"].as_str().unwrap().starts_with("*ralph: a story is blocked*\nm"), "{v}");
    let ntfy = deliver::request(&Channel::Ntfy("u".into()), Kind::Blocked, &e, &line).unwrap();
    assert!(ntfy.headers.contains(&("Priority", "high".into())), "{:?}", ntfy.headers);
    assert!(ntfy.body.starts_with('m') && !ntfy.body.contains('\x1b'), "{}", ntfy.body);
}
