//! Rate and usage limits: when the next agent call may start.
//!
//! Three brakes, all pure functions of the state and a clock passed in:
//!
//! - **Calls per hour**, over a sliding 60-minute window: the file keeps the
//!   start time of each call in the last hour, so "100 an hour" means no
//!   more than 100 calls in any 60 minutes. A clock-hour counter (what
//!   ralph-claude-code does) allows 200 calls in two minutes around the top
//!   of the hour, and its wait ends at the top of the hour whether or not
//!   that frees anything.
//! - **Usage limit**: the time the agent's subscription quota resets, plus
//!   [`USAGE_GUARD`]. It is persisted, so a ralph started before that time
//!   waits too instead of burning a call to rediscover the limit.
//! - **Transient backoff** after 429, 529, overload or an unreachable API:
//!   exponential in the number of such failures in a row, capped.
//!
//! [`Limits::wait`] combines the first two against the caller's `max_wait`;
//! a wait longer than that means the driver stops with
//! [`crate::exit::RATE_LIMITED`]. State lives in `.ralph/limits.json`.

use std::io;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{self, Loaded, Store};

/// Format version of `limits.json`.
pub const VERSION: u32 = 1;

/// The sliding window the calls-per-hour limit counts over.
pub const WINDOW: Duration = Duration::from_secs(60 * 60);

/// Added to a usage limit's reset time before calling again: the reset time
/// is given to the second (or the minute, in a message), and the service's
/// clock need not match ours. Calling early costs a call and a new wait.
pub const USAGE_GUARD: Duration = Duration::from_secs(2);

/// The first transient backoff; each further one in a row doubles it.
pub const BACKOFF_START: Duration = Duration::from_secs(30);

/// The longest transient backoff.
pub const BACKOFF_CAP: Duration = Duration::from_secs(10 * 60);

/// The longest run of transient failures in a row ralph sits through
/// before it gives up on the API.
pub const MAX_TRANSIENT_RETRIES: u32 = 20;

/// What to do after a transient API error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// Wait this long, then retry.
    Wait(Duration),
    /// The back-off is longer than the caller may wait: stop.
    TooLong(Duration),
    /// The API failed this many times in a row: stop.
    GiveUp(u32),
}

/// What a limit asks of the caller before the next agent call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Call now.
    Ready,
    /// Sleep until `at`, then ask again.
    Until { at: DateTime<Utc>, why: Why },
    /// The wait is longer than `max_wait`: stop with the rate-limited exit code.
    TooLong { at: DateTime<Utc>, why: Why },
}

/// Which limit a [`Wait`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    UsageLimit,
    CallsPerHour,
}

/// The limits' state, exactly as `limits.json` holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    version: u32,
    /// Start times of the calls in the window, oldest first.
    calls: Vec<DateTime<Utc>>,
    /// No call before this time: a usage limit (guard included).
    usage_resume_at: Option<DateTime<Utc>>,
    /// Transient failures in a row.
    transient: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { version: VERSION, calls: Vec::new(), usage_resume_at: None, transient: 0 }
    }
}

impl Limits {
    pub fn new() -> Limits {
        Limits::default()
    }

    /// Whether a call may start at `now` under `max_per_hour` (0: no limit);
    /// if not, when the next one may.
    pub fn check(&self, now: DateTime<Utc>, max_per_hour: u32) -> Result<(), DateTime<Utc>> {
        let max = usize::try_from(max_per_hour).unwrap_or(usize::MAX);
        if max == 0 {
            return Ok(());
        }
        let live: Vec<_> = self.live_calls(now).collect();
        match live.len().checked_sub(max) {
            None => Ok(()),
            // This call and all older ones must leave the window first.
            Some(i) => Err(later(live[i], WINDOW)),
        }
    }

    /// Records that a call starts at `now`. Calls that have left the window
    /// are dropped here, so the file holds at most the calls of one hour.
    pub fn record_call(&mut self, now: DateTime<Utc>) {
        self.calls = self.live_calls(now).collect();
        self.calls.push(now);
    }

    /// Calls started in the 60 minutes up to `now`.
    pub fn calls_in_window(&self, now: DateTime<Utc>) -> usize {
        self.live_calls(now).count()
    }

    /// Calls still in the window at `now`, oldest first. A call stamped in
    /// the future means the clock moved back; it counts as made `now`, so
    /// the skew can hold calls back for at most one window.
    fn live_calls(&self, now: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        self.calls.iter().map(move |&at| at.min(now)).filter(move |&at| now - at < delta(WINDOW))
    }

    /// Records a usage limit; returns the time calls may resume. That is
    /// `resets_at` plus [`USAGE_GUARD`], or `now + fallback_wait` plus the
    /// guard when the reset time is unknown or not in the future (a reset
    /// time already past means it was misread; trusting it would call again
    /// at once, hit the limit and loop).
    pub fn set_usage_limit(
        &mut self,
        resets_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        fallback_wait: Duration,
    ) -> DateTime<Utc> {
        let reset = resets_at.filter(|&at| at > now).unwrap_or_else(|| later(now, fallback_wait));
        let resume = later(reset, USAGE_GUARD);
        self.usage_resume_at = Some(resume);
        resume
    }

    pub fn usage_resume_at(&self) -> Option<DateTime<Utc>> {
        self.usage_resume_at
    }

    /// How long a usage limit still holds calls back at `now`.
    #[cfg(test)]
    pub fn usage_wait(&self, now: DateTime<Utc>) -> Option<Duration> {
        self.usage_resume_at.filter(|&at| at > now).map(|at| until(now, at))
    }

    /// What to do before the next call: the later of the usage-limit and
    /// calls-per-hour waits, judged against `max_wait`.
    pub fn wait(&self, now: DateTime<Utc>, max_per_hour: u32, max_wait: Duration) -> Wait {
        let usage = self.usage_resume_at.filter(|&at| at > now).map(|at| (at, Why::UsageLimit));
        let calls = self.check(now, max_per_hour).err().map(|at| (at, Why::CallsPerHour));
        match usage.into_iter().chain(calls).max_by_key(|&(at, _)| at) {
            None => Wait::Ready,
            Some((at, why)) if until(now, at) > max_wait => Wait::TooLong { at, why },
            Some((at, why)) => Wait::Until { at, why },
        }
    }

    /// Records a transient failure; returns how long to back off.
    pub fn note_transient(&mut self) -> Duration {
        self.transient = self.transient.saturating_add(1);
        backoff(self.transient)
    }

    /// Records a transient failure and says what to do about it, given the
    /// longest wait the caller accepts.
    pub fn back_off(&mut self, max_wait: Duration) -> Backoff {
        let wait = self.note_transient();
        if self.transient > MAX_TRANSIENT_RETRIES {
            Backoff::GiveUp(self.transient)
        } else if wait > max_wait {
            Backoff::TooLong(wait)
        } else {
            Backoff::Wait(wait)
        }
    }

    /// Records a call that got through: the backoff starts over and any
    /// usage limit is over.
    pub fn note_success(&mut self) {
        self.transient = 0;
        self.usage_resume_at = None;
    }

    /// Transient failures in a row.
    pub fn transient_count(&self) -> u32 {
        self.transient
    }

    /// Reads `limits.json`. Missing → empty. Damaged (empty, not JSON, wrong
    /// shape, other version) → empty, with a warning for the caller; the
    /// file is rewritten on the next [`Limits::save`]. Losing the state
    /// costs at worst one call that meets the limit again.
    pub fn load(store: &Store) -> io::Result<(Limits, Option<String>)> {
        let path = store.limits();
        let problem = match store::read_versioned::<Limits>(&path, VERSION)? {
            Loaded::Missing => return Ok((Limits::new(), None)),
            Loaded::Ok(mut limits) => {
                limits.calls.sort_unstable();
                return Ok((limits, None));
            }
            Loaded::Damaged(problem) => problem,
        };
        let warning = format!("rate limits reset: {} was damaged ({problem})", path.display());
        Ok((Limits::new(), Some(warning)))
    }

    /// Writes `limits.json` atomically.
    pub fn save(&self, store: &Store) -> io::Result<()> {
        // Not fsynced: it is written before every agent call, and a power
        // cut that loses it costs at most a call that meets the limit again.
        store::write_replace(&store.limits(), &store::json_bytes(self)?)
    }
}

/// The backoff after `consecutive` transient failures in a row: none for 0,
/// then [`BACKOFF_START`] doubling up to [`BACKOFF_CAP`].
pub fn backoff(consecutive: u32) -> Duration {
    if consecutive == 0 {
        return Duration::ZERO;
    }
    // Past 2^5 the cap has long been reached; the bound keeps the shift sane.
    let doublings = (consecutive - 1).min(16);
    BACKOFF_START.saturating_mul(1 << doublings).min(BACKOFF_CAP)
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

fn later(at: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    at.checked_add_signed(delta(d)).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn until(now: DateTime<Utc>, at: DateTime<Utc>) -> Duration {
    (at - now).to_std().unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
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
            ("reset time already past", Some(-5), 60),
            ("reset time now", Some(0), 60),
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
            assert_eq!(limits.wait(t0(), *max, *max_wait), *expected, "{name}");
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
        limits.note_success();
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
}
