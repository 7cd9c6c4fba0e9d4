//! Waiting: the calls-per-hour window and usage limits before an
//! iteration, the back-off after a transient API error, the run's budgets,
//! and a sleep that wakes for signals and the deadline.

use std::time::{Duration, Instant};

use chrono::{DateTime, Local, Utc};

use super::{End, Run};
use crate::agent::fallback::Hold;
use crate::event::{Event, RunOutcome};
use crate::limits::{Backoff, Wait, Why};

impl Run<'_> {
    /// The longest wait for a limit: `--max-wait`, or none with `--no-wait`.
    pub(super) fn max_wait(&self) -> Duration {
        if self.cfg.limits.wait { self.cfg.limits.max_wait } else { Duration::ZERO }
    }

    /// How long a usage limit may last and still be waited out rather than
    /// handed to a fallback: `limits.fallback_after`, but never longer than
    /// ralph may wait at all (with `--no-wait`, any limit switches).
    pub(super) fn fallback_after(&self) -> Duration {
        self.cfg.limits.fallback_after.min(self.max_wait())
    }

    /// Chooses the agent for the next iteration (a fallback while the
    /// configured one is limited, the configured one again once it is
    /// free), then waits out the calls-per-hour window and any usage limit
    /// that holds every agent, or stops.
    pub(super) fn wait_for_limits(&mut self) -> Option<End> {
        loop {
            let max_wait = self.max_wait();
            let now = Utc::now();
            let hold = match self.kit.agents.choose(&self.limits, now, self.fallback_after()) {
                Ok(agent) => {
                    self.switch_agent(agent);
                    None
                }
                Err(hold) => Some(hold),
            };
            let free_at = hold.map(|h| h.at);
            let why_text = |why: Why, at| self.why_text(why, hold, at);
            match self.limits.wait(now, free_at, self.cfg.limits.calls_per_hour, max_wait) {
                Wait::Ready => return None,
                Wait::TooLong { at, why } => {
                    let how = if self.cfg.limits.wait {
                        format!(
                            "longer than --max-wait {}; run ralph again after that time",
                            humantime::format_duration(max_wait)
                        )
                    } else {
                        "not waiting (--no-wait); run ralph again after that time".into()
                    };
                    return Some(End::new(
                        RunOutcome::RateLimited,
                        format!(
                            "{} until {} — {how}",
                            why_text(why, at),
                            at.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S"),
                        ),
                    ));
                }
                // A worker does not wait alone: its run pauses every worker.
                Wait::Until { at, why: Why::UsageLimit } if self.opts.mode.worker().is_some() => {
                    return Some(End::new(
                        RunOutcome::RateLimited,
                        format!("{} until {}", why_text(Why::UsageLimit, at), at.to_rfc3339()),
                    ));
                }
                Wait::Until { at, why } => {
                    let reason = why_text(why, at);
                    if let Some(end) = self.wait_until(at, &reason) {
                        return Some(end);
                    }
                }
            }
        }
    }

    /// What holds the next call back until `at`, in words: with fallback
    /// agents, whose limit it is (`hold`, from `agent::fallback`).
    fn why_text(&self, why: Why, hold: Option<Hold>, at: DateTime<Utc>) -> String {
        match (why, hold) {
            (Why::CallsPerHour, _) => "the calls-per-hour limit".into(),
            (Why::UsageLimit, Some(h)) if h.at == at && self.kit.agents.all().len() > 1 => {
                let name = self.kit.agents.name(h.agent);
                if h.every {
                    format!("every agent's usage limit ({name}'s resets first)")
                } else {
                    format!("{name}'s usage limit, which resets sooner than limits.fallback_after")
                }
            }
            (Why::UsageLimit, _) => "the agent's usage limit".into(),
        }
    }

    /// Makes `agent` the one the next iteration runs, saying so when that
    /// is a change.
    fn switch_agent(&mut self, agent: usize) {
        let Some(s) = self.kit.agents.switch_to(agent, &self.limits) else { return };
        let switch = crate::event::SwitchReport {
            iteration: self.state.iteration + 1,
            from: self.kit.agents.name(s.from).into(),
            to: self.kit.agents.name(s.to).into(),
            reason: s.reason,
            until: s.until,
        };
        self.state.switches.push(switch.clone());
        let crate::event::SwitchReport { iteration, from, to, reason, until } = switch;
        self.reporter.emit(&Event::AgentSwitch { iteration, from, to, reason, until });
    }

    /// After a transient API error: back off and retry, or stop.
    pub(super) fn back_off(&mut self, message: &str) -> Option<End> {
        let decision = self.limits.back_off(self.max_wait());
        let _ = self.limits.save(&self.paths.store);
        match decision {
            Backoff::GiveUp(count) => Some(End::new(
                RunOutcome::RateLimited,
                format!("the API kept failing ({count} times in a row): {message}"),
            )),
            Backoff::TooLong(wait) => Some(End::new(
                RunOutcome::RateLimited,
                format!(
                    "a transient API error ({message}) needs a {} back-off — {}",
                    humantime::format_duration(wait),
                    if self.cfg.limits.wait {
                        "longer than --max-wait; run ralph again later"
                    } else {
                        "not waiting (--no-wait); run ralph again later"
                    }
                ),
            )),
            Backoff::Wait(wait) => {
                let at = Utc::now() + chrono::TimeDelta::from_std(wait).unwrap_or_default();
                self.wait_until(at, &format!("backing off after a transient API error: {message}"))
            }
        }
    }

    /// A budget that is spent ends the run.
    pub(super) fn over_budget(&mut self) -> Option<End> {
        let b = &self.cfg.budget;
        let message = if self.clock.deadline.is_some_and(|d| Instant::now() >= d) {
            format!(
                "the run's time budget (--max-duration {}) is spent",
                humantime::format_duration(b.max_duration.unwrap_or_default())
            )
        } else if let Some(max) = b.max_cost.filter(|m| self.state.cost_usd >= *m) {
            format!("the cost budget (${max:.2}) is spent: ${:.2} reported", self.state.cost_usd)
        } else if let Some(max) = b.max_tokens.filter(|m| self.state.tokens >= *m) {
            format!("the token budget ({max}) is spent: {} used", self.state.tokens)
        } else {
            self.warn_budgets();
            return None;
        };
        Some(End::new(RunOutcome::Budget, message))
    }

    /// A budget 80% spent is worth a word (once per budget).
    fn warn_budgets(&mut self) {
        use crate::event::BudgetKind;
        let b = &self.cfg.budget;
        let spent = [
            (BudgetKind::Cost, b.max_cost, self.state.cost_usd),
            (BudgetKind::Tokens, b.max_tokens.map(|t| t as f64), self.state.tokens as f64),
            (
                BudgetKind::Duration,
                b.max_duration.map(|d| d.as_secs_f64()),
                self.elapsed_ms() as f64 / 1000.0,
            ),
        ];
        for (budget, limit, used) in spent {
            let Some(limit) = limit.filter(|l| *l > 0.0) else { continue };
            if used >= 0.8 * limit && !self.budget_warned.contains(&budget) {
                self.budget_warned.push(budget);
                self.reporter.emit(&Event::BudgetWarning { budget, used, limit });
            }
        }
    }

    fn wait_until(&mut self, at: DateTime<Utc>, reason: &str) -> Option<End> {
        // Rounded up, and a little past: waking a hair early would only
        // mean asking again and waiting a few more milliseconds.
        let wait = (at - Utc::now()).to_std().unwrap_or_default() + Duration::from_millis(20);
        if wait >= Duration::from_secs(1) {
            self.reporter.emit(&Event::Waiting {
                reason: reason.into(),
                until: at,
                seconds: wait.as_secs_f64().ceil() as u64,
            });
        }
        self.sleep(wait)
    }

    /// Sleeps, waking for signals and the run's deadline; emits a countdown.
    pub(super) fn sleep(&mut self, d: Duration) -> Option<End> {
        // A person may have edited the tree meanwhile: scan it afresh.
        self.kit.reusable_snapshot = None;
        let until = Instant::now() + d;
        let mut last_tick = Instant::now();
        loop {
            if let Some(signal) = crate::signals::pending() {
                return Some(End::interrupted(signal));
            }
            let now = Instant::now();
            if now >= until {
                return None;
            }
            if self.clock.deadline.is_some_and(|dl| now >= dl) {
                return self.over_budget();
            }
            if now.duration_since(last_tick) >= Duration::from_secs(1) {
                last_tick = now;
                self.reporter.emit(&Event::WaitTick { remaining_s: (until - now).as_secs() });
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
    }
}
