//! The limits' tables: the calls window, usage limits (per agent too),
//! back-offs, and the file.

use super::*;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z").unwrap().with_timezone(&Utc)
}

fn min(m: i64) -> DateTime<Utc> {
    t0() + TimeDelta::minutes(m)
}

fn with_calls(minutes: &[i64]) -> Limits {
    Limits { calls: minutes.iter().map(|&m| min(m)).collect(), ..Limits::new() }
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    store.ensure().unwrap();
    (dir, store)
}

/// Times as minutes relative to `t0`.
type Minutes = &'static [i64];

#[test]
fn calls_per_hour_window() {
    // Calls as minutes relative to now (t0); expected next allowed time likewise.
    #[rustfmt::skip]
    let cases: &[(&str, Minutes, u32, Result<(), i64>)] = &[
        ("no calls", &[], 100, Ok(())),
        ("room left", &[-50, -40, -30], 4, Ok(())),
        ("full: wait for the oldest", &[-50, -40, -30], 3, Err(10)),
        ("an old call expired", &[-61, -40, -30], 3, Ok(())),
        ("a call exactly an hour ago expired", &[-60, -40, -30], 3, Ok(())),
        ("limit lowered below the calls made", &[-50, -40, -30], 2, Err(20)),
        ("limit 0 means none", &[-3, -2, -1], 0, Ok(())),
        ("a call from the future counts as now", &[120], 1, Err(60)),
    ];
    for (name, calls, max, expected) in cases {
        let got = with_calls(calls).check(t0(), *max);
        assert_eq!(got, expected.map_err(min), "{name}");
    }
}

#[test]
fn window_fills_and_drains() {
    let mut limits = Limits::new();
    let secs = |s: i64| t0() + TimeDelta::seconds(s);
    for i in 0..100 {
        assert_eq!(limits.check(secs(i * 10), 100), Ok(()), "call {i}");
        limits.record_call(secs(i * 10));
    }
    assert_eq!(limits.check(secs(1000), 100), Err(secs(3600)));
    assert_eq!(limits.check(secs(3599), 100), Err(secs(3600)));
    assert_eq!(limits.check(secs(3600), 100), Ok(()));
    limits.record_call(secs(3600));
    assert_eq!(limits.check(secs(3600), 100), Err(secs(3610)));
    assert_eq!(limits.calls.len(), 100, "the expired call was dropped");
}

#[test]
fn a_call_cut_off_by_ralphs_end_is_taken_back() {
    #[rustfmt::skip]
    let cases: &[(&str, Minutes, i64, bool, Minutes)] = &[
        ("the last call", &[-30, -20, -10], -10, true, &[-30, -20]),
        ("one of two at the same instant", &[-20, -10, -10], -10, true, &[-20, -10]),
        ("an older one", &[-30, -20, -10], -30, true, &[-20, -10]),
        ("one already out of the file", &[-20, -10], -5, false, &[-20, -10]),
        ("no calls", &[], -5, false, &[]),
    ];
    for (name, calls, at, found, left) in cases {
        let mut limits = with_calls(calls);
        assert_eq!(limits.forget_call(min(*at)), *found, "{name}");
        assert_eq!(limits, with_calls(left), "{name}");
    }
}

#[test]
fn recorded_calls_stay_bounded_by_the_window() {
    let mut limits = Limits::new();
    for m in 0..5 * 60 {
        limits.record_call(min(m));
    }
    assert_eq!(limits.calls.len(), 60);
    // Calls at minutes 271..=299 are in the hour up to minute 330; 270 has just left.
    assert_eq!(limits.calls_in_window(min(5 * 60 + 30)), 29);
}

#[test]
fn usage_limit_resume_time() {
    let hour = Duration::from_secs(3600);
    #[rustfmt::skip]
    let cases: &[(&str, Option<i64>, i64)] = &[
        ("reset time given", Some(120), 120),
        ("reset time unknown", None, 60),
        ("reset time minutes past: misread", Some(-5), 60),
        ("reset time now", Some(0), 0),
    ];
    for (name, resets_at, expected) in cases {
        let mut limits = Limits::new();
        let resume = limits.set_usage_limit(resets_at.map(min), t0(), hour);
        let expected = min(*expected) + TimeDelta::seconds(2);
        assert_eq!(resume, expected, "{name}");
        assert_eq!(limits.usage_resume_at(), Some(expected), "{name}");
    }
}

#[test]
fn a_reset_that_passed_while_ralph_read_it_resumes_after_the_guard() {
    let hour = Duration::from_secs(3600);
    let guard = TimeDelta::seconds(2);
    for (ago, resume) in [(1, t0() + guard), (59, t0() + guard), (61, min(60) + guard)] {
        let mut limits = Limits::new();
        let at = t0() - TimeDelta::seconds(ago);
        assert_eq!(limits.set_usage_limit(Some(at), t0(), hour), resume, "{ago} s ago");
        assert_eq!(limits.set_agent_usage_limit("codex", Some(at), t0(), hour), resume);
    }
}

#[test]
fn usage_limit_survives_a_restart() {
    let (_dir, store) = store();
    let mut limits = Limits::new();
    limits.set_usage_limit(Some(min(120)), t0(), Duration::from_secs(3600));
    limits.save(&store).unwrap();

    let (limits, warning) = Limits::load(&store).unwrap();
    assert_eq!(warning, None);
    assert_eq!(limits.usage_wait(min(60)), Some(Duration::from_secs(3600 + 2)));
    assert_eq!(limits.usage_wait(min(121)), None);
}

/// A resume time worked out once (a worker's, another machine's) is passed
/// on as it is: handing it on does not add the guard a second time.
#[test]
fn a_resume_time_handed_on_keeps_one_guard() {
    let mut worker = Limits::new();
    let resume = worker.set_usage_limit(Some(min(120)), t0(), Duration::ZERO);
    assert_eq!(resume, min(120) + TimeDelta::seconds(2));
    let mut driver = Limits::new();
    driver.hold_usage_until(resume);
    assert_eq!(driver.usage_resume_at(), Some(resume));
    assert_eq!(driver.usage_wait(min(60)), Some(Duration::from_secs(3600 + 2)));
}

#[test]
fn wait_is_judged_against_max_wait() {
    let usage_at = min(120) + TimeDelta::seconds(2);
    let mut both = with_calls(&[-50]);
    both.set_usage_limit(Some(min(120)), t0(), Duration::ZERO);
    let mut usage_only = Limits::new();
    usage_only.set_usage_limit(Some(min(120)), t0(), Duration::ZERO);
    let mut expired = Limits::new();
    expired.set_usage_limit(Some(min(-120)), min(-180), Duration::ZERO);
    let hours = |h: u64| Duration::from_secs(h * 3600);
    #[rustfmt::skip]
    let cases: &[(&str, &Limits, u32, Duration, Wait)] = &[
        ("nothing holds it back", &Limits::new(), 100, Duration::ZERO, Wait::Ready),
        ("an expired usage limit", &expired, 100, Duration::ZERO, Wait::Ready),
        ("usage limit within max_wait", &usage_only, 100, hours(3), Wait::Until { at: usage_at, why: Why::UsageLimit }),
        ("usage limit past max_wait", &usage_only, 100, hours(2), Wait::TooLong { at: usage_at, why: Why::UsageLimit }),
        ("--no-wait", &usage_only, 100, Duration::ZERO, Wait::TooLong { at: usage_at, why: Why::UsageLimit }),
        ("window full", &with_calls(&[-50]), 1, hours(1), Wait::Until { at: min(10), why: Why::CallsPerHour }),
        ("window full, no waiting", &with_calls(&[-50]), 1, Duration::ZERO, Wait::TooLong { at: min(10), why: Why::CallsPerHour }),
        ("the later wait wins", &both, 1, hours(3), Wait::Until { at: usage_at, why: Why::UsageLimit }),
    ];
    for (name, limits, max, max_wait, expected) in cases {
        assert_eq!(limits.wait(t0(), None, *max, *max_wait), *expected, "{name}");
    }
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    let secs: Vec<u64> =
        [0, 1, 2, 3, 4, 5, 6, 7, 100, u32::MAX].map(|n| backoff(n).as_secs()).to_vec();
    assert_eq!(secs, [0, 30, 60, 120, 240, 480, 600, 600, 600, 600]);
}

#[test]
fn back_off_waits_then_stops_past_max_wait_or_after_too_many() {
    let mut limits = Limits::new();
    let hour = Duration::from_secs(3600);
    assert_eq!(limits.back_off(hour), Backoff::Wait(BACKOFF_START));
    assert_eq!(limits.back_off(Duration::from_secs(59)), Backoff::TooLong(BACKOFF_START * 2));
    assert_eq!(limits.back_off(Duration::ZERO), Backoff::TooLong(BACKOFF_START * 4));
    let mut limits = Limits::new();
    for n in 1..=MAX_TRANSIENT_RETRIES {
        assert!(matches!(limits.back_off(hour), Backoff::Wait(_)), "{n}");
    }
    assert_eq!(limits.back_off(hour), Backoff::GiveUp(MAX_TRANSIENT_RETRIES + 1));
}

#[test]
fn success_starts_the_backoff_over_and_ends_a_usage_limit() {
    let mut limits = Limits::new();
    limits.set_usage_limit(None, t0(), Duration::from_secs(60));
    let waits: Vec<u64> = (0..3).map(|_| limits.note_transient().as_secs()).collect();
    assert_eq!(waits, [30, 60, 120]);
    limits.note_success("claude");
    assert_eq!(limits.transient_count(), 0);
    assert_eq!(limits.usage_wait(t0()), None);
    assert_eq!(limits.note_transient(), BACKOFF_START);
}

#[test]
fn save_and_load_roundtrip() {
    let (_dir, store) = store();
    let mut limits = with_calls(&[-30, -20]);
    limits.set_usage_limit(Some(min(90)), t0(), Duration::ZERO);
    limits.note_transient();
    limits.save(&store).unwrap();
    let (loaded, warning) = Limits::load(&store).unwrap();
    assert_eq!(warning, None);
    assert_eq!(loaded, limits);
    let text = std::fs::read_to_string(store.limits()).unwrap();
    assert!(text.contains("\"version\": 1"), "{text}");
}

#[test]
fn missing_file_is_a_fresh_start() {
    let (_dir, store) = store();
    assert_eq!(Limits::load(&store).unwrap(), (Limits::new(), None));
}

#[test]
fn damaged_file_is_rebuilt_empty_with_a_warning() {
    #[rustfmt::skip]
    let cases: &[(&str, &str, &str)] = &[
        ("empty", "", "empty file"),
        ("empty object", "{}", "no version field"),
        ("garbage", "\u{0}\u{1}garbage", "expected"),
        ("future version", r#"{"version":2,"calls":[],"usage_resume_at":null,"transient":0}"#, "version 2"),
        ("bad timestamp", r#"{"version":1,"calls":["yesterday"],"usage_resume_at":null,"transient":0}"#, "input"),
        ("missing field", r#"{"version":1,"calls":[]}"#, "missing field"),
    ];
    for (name, content, problem) in cases {
        let (_dir, store) = store();
        std::fs::write(store.limits(), content).unwrap();
        let (limits, warning) = Limits::load(&store).unwrap();
        assert_eq!(limits, Limits::new(), "{name}");
        let warning = warning.unwrap_or_else(|| panic!("{name}: no warning"));
        assert!(warning.contains(problem), "{name}: {warning}");
        limits.save(&store).unwrap();
        assert_eq!(Limits::load(&store).unwrap().1, None, "{name}");
    }
}

#[test]
fn loaded_calls_are_put_in_order() {
    let (_dir, store) = store();
    with_calls(&[-10, -50, -30]).save(&store).unwrap();
    let (limits, _) = Limits::load(&store).unwrap();
    assert_eq!(limits.check(t0(), 3), Err(min(10)));
}

#[test]
fn usage_limits_are_kept_per_agent() {
    let hour = Duration::from_secs(3600);
    let mut limits = Limits::new();
    let claude = limits.set_agent_usage_limit("claude", Some(min(120)), t0(), hour);
    assert_eq!(claude, min(120) + TimeDelta::seconds(2));
    assert_eq!(limits.agent_resume_at("claude"), Some(claude));
    assert_eq!(limits.agent_resume_at("codex"), None, "claude's limit does not hold codex");
    // A limit on every agent holds each of them, the later time winning.
    limits.set_usage_limit(Some(min(60)), t0(), hour);
    assert_eq!(limits.agent_resume_at("codex"), Some(min(60) + TimeDelta::seconds(2)));
    assert_eq!(limits.agent_resume_at("claude"), Some(claude));
    assert_eq!(limits.usage_hold(t0()), Some(claude));
    // The wait counts the time the caller says the next agent is free.
    let wait = limits.wait(t0(), Some(claude), 0, hour * 3);
    assert_eq!(wait, Wait::Until { at: claude, why: Why::UsageLimit });
    // A call to codex that got through ends its limit, not claude's.
    assert!(limits.holds_anything("codex"));
    limits.note_success("codex");
    assert_eq!(limits.agent_resume_at("codex"), None);
    assert_eq!(limits.agent_resume_at("claude"), Some(claude));
    assert!(!limits.holds_anything("codex"));
}

#[test]
fn per_agent_limits_survive_a_restart_and_an_older_file_still_loads() {
    let (_dir, store) = store();
    let mut limits = Limits::new();
    limits.set_agent_usage_limit("claude", Some(min(120)), t0(), Duration::ZERO);
    limits.save(&store).unwrap();
    let (loaded, warning) = Limits::load(&store).unwrap();
    assert_eq!((warning, &loaded), (None, &limits));
    // A file an older ralph wrote: one usage limit, for every agent.
    let old = r#"{"version":1,"calls":[],"usage_resume_at":"2026-03-01T14:00:02Z","transient":0}"#;
    std::fs::write(store.limits(), old).unwrap();
    let (loaded, warning) = Limits::load(&store).unwrap();
    assert_eq!(warning, None);
    let at = min(120) + TimeDelta::seconds(2);
    assert_eq!(loaded.agent_resume_at("claude"), Some(at));
    assert_eq!(loaded.agent_resume_at("codex"), Some(at));
    // Without per-agent limits the file reads as an older ralph wrote it.
    Limits::new().save(&store).unwrap();
    assert!(!std::fs::read_to_string(store.limits()).unwrap().contains("agents"));
}
