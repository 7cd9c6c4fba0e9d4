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
//! - **Usage limit**: the time an agent's subscription quota resets, plus
//!   [`USAGE_GUARD`], kept per agent (claude's limit does not stop codex;
//!   `agent::fallback` decides who runs next). It is persisted, so a ralph
//!   started before that time waits too instead of burning a call to
//!   rediscover the limit. A limit that holds every agent back (a file an
//!   older ralph wrote, a parallel run's shared pause) is kept apart.
//! - **Transient backoff** after 429, 529, overload or an unreachable API:
//!   exponential in the number of such failures in a row, capped.
//!
//! [`Limits::wait`] combines the first two against the caller's `max_wait`;
//! a wait longer than that means the driver stops with
//! [`crate::exit::RATE_LIMITED`]. State lives in `.ralph/limits.json`.

use std::collections::BTreeMap;
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
    /// No call to any agent before this time: a usage limit (guard
    /// included) that holds them all — from a file written before ralph
    /// kept limits per agent, or a parallel run's pause for every worker.
    usage_resume_at: Option<DateTime<Utc>>,
    /// Transient failures in a row.
    transient: u32,
    /// No call to the agent of this name (`Tool::name`) before this time.
    /// Absent from older files, which still load (the version is the same:
    /// an older ralph reading this file ignores the field, which costs it at
    /// most a call that meets the limit again).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    agents: BTreeMap<String, DateTime<Utc>>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            version: VERSION,
            calls: Vec::new(),
            usage_resume_at: None,
            transient: 0,
            agents: BTreeMap::new(),
        }
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

    /// Takes back the call recorded at `at` (one, if several share the
    /// instant): an agent ralph's own death cut off was not one of the run's
    /// calls. Returns whether there was one.
    pub fn forget_call(&mut self, at: DateTime<Utc>) -> bool {
        let Some(i) = self.calls.iter().position(|&c| c == at) else { return false };
        self.calls.remove(i);
        true
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
    /// guard when the reset time is unknown or long past (a reset time
    /// minutes past means it was misread; trusting it would call again at
    /// once, hit the limit and loop). One that passed moments ago
    /// ([`JUST_RESET`]) passed while ralph read it: calls resume after the
    /// guard.
    pub fn set_usage_limit(
        &mut self,
        resets_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        fallback_wait: Duration,
    ) -> DateTime<Utc> {
        let resume = resume_after(resets_at, now, fallback_wait);
        self.usage_resume_at = Some(resume);
        resume
    }

    /// Holds every agent until `resume`, a time [`Limits::set_usage_limit`]
    /// already worked out (by a worker, or a worker on another machine):
    /// the guard is in it already, and is not added twice.
    pub fn hold_usage_until(&mut self, resume: DateTime<Utc>) {
        self.usage_resume_at = Some(resume);
    }

    pub fn usage_resume_at(&self) -> Option<DateTime<Utc>> {
        self.usage_resume_at
    }

    /// Records a usage limit the agent `agent` met (as [`Limits::set_usage_limit`]
    /// does for all of them); returns the time it may be called again.
    pub fn set_agent_usage_limit(
        &mut self,
        agent: &str,
        resets_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        fallback_wait: Duration,
    ) -> DateTime<Utc> {
        let resume = resume_after(resets_at, now, fallback_wait);
        self.agents.insert(agent.to_string(), resume);
        resume
    }

    /// When `agent` may be called again: the later of its own usage limit
    /// and one that holds every agent (`None`: no limit was recorded).
    pub fn agent_resume_at(&self, agent: &str) -> Option<DateTime<Utc>> {
        self.usage_resume_at.max(self.agents.get(agent).copied())
    }

    /// The agents' own usage limits still holding at `now`, by name.
    pub fn agent_holds(&self, now: DateTime<Utc>) -> BTreeMap<String, DateTime<Utc>> {
        self.agents.iter().filter(|(_, t)| **t > now).map(|(a, t)| (a.clone(), *t)).collect()
    }

    /// The latest usage limit of any kind still holding at `now`, for
    /// `ralph status`.
    pub fn usage_hold(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.agents.values().copied().chain(self.usage_resume_at).filter(|&t| t > now).max()
    }

    /// How long a usage limit still holds calls back at `now`.
    #[cfg(test)]
    pub fn usage_wait(&self, now: DateTime<Utc>) -> Option<Duration> {
        self.usage_resume_at.filter(|&at| at > now).map(|at| until(now, at))
    }

    /// What to do before the next call: the later of the usage-limit and
    /// calls-per-hour waits, judged against `max_wait`. `agents_free_at` is
    /// when the next agent may be called (`agent::fallback::choose`), if
    /// every agent is held back; the limit that holds them all counts too.
    pub fn wait(
        &self,
        now: DateTime<Utc>,
        agents_free_at: Option<DateTime<Utc>>,
        max_per_hour: u32,
        max_wait: Duration,
    ) -> Wait {
        let usage = self.usage_resume_at.max(agents_free_at);
        let usage = usage.filter(|&at| at > now).map(|at| (at, Why::UsageLimit));
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

    /// Records a call to `agent` that got through: the backoff starts over,
    /// and its usage limit (and one that held every agent) is over.
    pub fn note_success(&mut self, agent: &str) {
        self.transient = 0;
        self.usage_resume_at = None;
        self.agents.remove(agent);
    }

    /// Whether a success would change anything ([`Limits::note_success`]).
    pub fn holds_anything(&self, agent: &str) -> bool {
        self.transient > 0 || self.usage_resume_at.is_some() || self.agents.contains_key(agent)
    }

    /// Transient failures in a row.
    #[cfg(test)]
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
        store::write_kept(&store.limits(), &store::json_bytes(self)?)
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

/// When a usage limit that resets at `resets_at` lets the agent be called
/// again: see [`Limits::set_usage_limit`].
/// How long ago a reset time may be and still be read as the limit having
/// just reset: the CLI's words (often to the second or the minute) took
/// that long to reach the verdict, a loaded machine included. One further
/// back was misread.
const JUST_RESET: Duration = Duration::from_secs(60);

fn resume_after(
    resets_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    fallback_wait: Duration,
) -> DateTime<Utc> {
    let reset = match resets_at {
        Some(at) if at > now => at,
        Some(at) if until(at, now) <= JUST_RESET => now,
        _ => later(now, fallback_wait),
    };
    later(reset, USAGE_GUARD)
}

fn later(at: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    at.checked_add_signed(delta(d)).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn until(now: DateTime<Utc>, at: DateTime<Utc>) -> Duration {
    (at - now).to_std().unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests;
