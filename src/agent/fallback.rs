//! Fallback agents: which agent runs the next iteration.
//!
//! The configured agent (`agent.tool`) comes first, then `agent.fallback`
//! in order. Each has its own usage limit (`limits::Limits` keeps them by
//! name). [`choose`] walks the list:
//!
//! ```text
//! agent i free                          → run it (0: Primary, else Fallback)
//! agent i limited, resets within
//!   limits.fallback_after               → wait for it: a short wait beats a switch
//! agent i limited for longer            → on to agent i+1
//! every agent limited for longer        → wait for the earliest reset (one wait)
//! ```
//!
//! So ralph goes back to the configured agent as soon as its limit is over,
//! and without fallbacks this is the single agent's wait of before.
//! [`Agents`] holds the backends and which one ran last, and says when a
//! choice is a switch and why ([`Switch`]).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Backend, ConfigureError, Tool};
use crate::limits::Limits;

/// Which agent runs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The configured agent.
    Primary,
    /// Agent `agent` of the list (1 or more): every one before it is
    /// limited beyond `fallback_after`; `why` is the one just before it.
    Fallback { agent: usize, why: Limited },
    /// No agent may run before `at`, when agent `agent` is free again:
    /// its limit resets within `fallback_after`, or it is the earliest
    /// reset of a list all limited for longer.
    WaitUntil { at: DateTime<Utc>, agent: usize },
}

/// An agent held back by its usage limit until `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub agent: usize,
    pub until: DateTime<Utc>,
}

/// Why ralph changed agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchReason {
    /// The agent it left has a usage limit that resets later than
    /// `limits.fallback_after`.
    UsageLimit,
    /// The agent it returns to (earlier in the list) is free again.
    LimitReset,
}

/// A change of agent between two iterations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub from: usize,
    pub to: usize,
    pub reason: SwitchReason,
    /// When the agent left may be called again (for [`SwitchReason::UsageLimit`]).
    pub until: Option<DateTime<Utc>>,
}

/// Chooses the agent for the next iteration. `holds[i]` is when agent `i`
/// may be called again (`None` or a time not after `now`: it is free).
pub fn choose(holds: &[Option<DateTime<Utc>>], now: DateTime<Utc>, after: Duration) -> Choice {
    let mut earliest: Option<(DateTime<Utc>, usize)> = None;
    for (i, hold) in holds.iter().enumerate() {
        let Some(at) = hold.filter(|&at| at > now) else {
            return match i.checked_sub(1) {
                None => Choice::Primary,
                Some(before) => {
                    // Walked past, so it is limited.
                    let until = holds[before].unwrap_or(now);
                    Choice::Fallback { agent: i, why: Limited { agent: before, until } }
                }
            };
        };
        if (at - now).to_std().unwrap_or_default() <= after {
            return Choice::WaitUntil { at, agent: i };
        }
        if earliest.is_none_or(|(e, _)| at < e) {
            earliest = Some((at, i));
        }
    }
    earliest.map_or(Choice::Primary, |(at, agent)| Choice::WaitUntil { at, agent })
}

/// Which agent a wait is for, and whether every agent is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hold {
    pub(crate) at: DateTime<Utc>,
    pub(crate) agent: usize,
    /// Every agent is limited beyond `fallback_after` (else `agent`'s
    /// limit is just short enough to wait out).
    pub(crate) every: bool,
}

/// The agents of a run, the configured one first, and the one in use.
#[derive(Debug, Clone)]
pub(crate) struct Agents {
    list: Vec<Backend>,
    current: usize,
}

impl Agents {
    /// The configured agent and its fallbacks. The fallbacks run their own
    /// programs with their CLIs' defaults; only safe mode and its allowed
    /// tools carry over (model, extra arguments and command are the
    /// configured agent's).
    pub(crate) fn configured(a: &crate::config::AgentConfig) -> Result<Agents, ConfigureError> {
        let primary = Backend::configured(a)?;
        let mut list = vec![primary];
        for &tool in &a.fallback {
            if tool == a.tool {
                return Err(ConfigureError::FallbackIsTheAgent(tool));
            }
            if tool == Tool::Custom {
                return Err(ConfigureError::FallbackIsCustom);
            }
            let mut b = Backend::new(tool);
            b.safe = a.safe;
            if !a.allowed_tools.is_empty() {
                b.allowed_tools = a.allowed_tools.clone();
            }
            list.push(b);
        }
        Ok(Agents { list, current: 0 })
    }

    /// The agent in use.
    pub(crate) fn current(&self) -> &Backend {
        &self.list[self.current]
    }

    pub(crate) fn all(&self) -> &[Backend] {
        &self.list
    }

    pub(crate) fn all_mut(&mut self) -> &mut [Backend] {
        &mut self.list
    }

    /// The name limits and events know agent `i` by.
    pub(crate) fn name(&self, i: usize) -> &'static str {
        self.list[i].tool.name()
    }

    /// The name of the agent in use.
    pub(crate) fn current_name(&self) -> &'static str {
        self.name(self.current)
    }

    /// When each agent may be called again, in list order.
    pub(crate) fn holds(&self, limits: &Limits) -> Vec<Option<DateTime<Utc>>> {
        (0..self.list.len()).map(|i| limits.agent_resume_at(self.name(i))).collect()
    }

    /// What the next iteration needs: the agent (`Ok`), or the wait for
    /// the first agent that may run (`Err`).
    pub(crate) fn choose(
        &self,
        limits: &Limits,
        now: DateTime<Utc>,
        after: Duration,
    ) -> Result<usize, Hold> {
        match choose(&self.holds(limits), now, after) {
            Choice::Primary => Ok(0),
            Choice::Fallback { agent, .. } => Ok(agent),
            Choice::WaitUntil { at, agent } => {
                let every = (at - now).to_std().unwrap_or_default() > after;
                Err(Hold { at, agent, every })
            }
        }
    }

    /// Makes agent `to` the one in use; says why when that is a change.
    pub(crate) fn switch_to(&mut self, to: usize, limits: &Limits) -> Option<Switch> {
        let from = std::mem::replace(&mut self.current, to);
        switch(from, to, &self.holds(limits))
    }
}

/// The change from agent `from` to agent `to`, if it is one. Moving down
/// the list means the agent left is limited; moving up, that the one
/// returned to is free again.
pub fn switch(from: usize, to: usize, holds: &[Option<DateTime<Utc>>]) -> Option<Switch> {
    let reason = match to.cmp(&from) {
        std::cmp::Ordering::Equal => return None,
        std::cmp::Ordering::Greater => SwitchReason::UsageLimit,
        std::cmp::Ordering::Less => SwitchReason::LimitReset,
    };
    let until = match reason {
        SwitchReason::UsageLimit => holds.get(from).copied().flatten(),
        SwitchReason::LimitReset => None,
    };
    Some(Switch { from, to, reason, until })
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn min(m: i64) -> DateTime<Utc> {
        t0() + TimeDelta::minutes(m)
    }

    #[test]
    fn who_runs_next() {
        use Choice::*;
        let ten = Duration::from_secs(600);
        let lim = |agent, m| Limited { agent, until: min(m) };
        // Holds as minutes from now (t0); None: never limited.
        #[rustfmt::skip]
        let cases: &[(&str, &[Option<i64>], Duration, Choice)] = &[
            ("nobody limited", &[None, None], ten, Primary),
            ("no fallback, free", &[None], ten, Primary),
            ("no fallback, limited: wait as before", &[Some(120)], ten, WaitUntil { at: min(120), agent: 0 }),
            ("primary limited for 2h: fallback", &[Some(120), None], ten, Fallback { agent: 1, why: lim(0, 120) }),
            ("primary's reset soon: waited out", &[Some(5), None], ten, WaitUntil { at: min(5), agent: 0 }),
            ("exactly fallback_after: waited out", &[Some(10), None], ten, WaitUntil { at: min(10), agent: 0 }),
            ("primary's reset passed: back to it", &[Some(-1), None], ten, Primary),
            ("primary free again, fallback limited", &[Some(0), Some(90)], ten, Primary),
            ("both limited long: the earliest reset", &[Some(120), Some(60)], ten, WaitUntil { at: min(60), agent: 1 }),
            ("fallback's reset soon: wait for it", &[Some(120), Some(3)], ten, WaitUntil { at: min(3), agent: 1 }),
            ("all limited, the primary first to reset", &[Some(60), Some(120), Some(90)], ten, WaitUntil { at: min(60), agent: 0 }),
            ("the second fallback", &[Some(120), Some(60), None], ten, Fallback { agent: 2, why: lim(1, 60) }),
            ("fallback_after 0: any limit switches", &[Some(1), None], Duration::ZERO, Fallback { agent: 1, why: lim(0, 1) }),
            ("no agents at all", &[], ten, Primary),
        ];
        for (name, holds, after, expected) in cases {
            let holds: Vec<_> = holds.iter().map(|h| h.map(min)).collect();
            assert_eq!(choose(&holds, t0(), *after), *expected, "{name}");
        }
    }

    #[test]
    fn a_switch_says_why() {
        let holds = [Some(min(120)), None, None];
        #[rustfmt::skip]
        let cases: &[(usize, usize, Option<(SwitchReason, Option<i64>)>)] = &[
            (0, 0, None),
            (0, 1, Some((SwitchReason::UsageLimit, Some(120)))),
            (1, 2, Some((SwitchReason::UsageLimit, None))),
            (1, 0, Some((SwitchReason::LimitReset, None))),
            (2, 0, Some((SwitchReason::LimitReset, None))),
        ];
        for (from, to, expected) in cases {
            let got = switch(*from, *to, &holds).map(|s| (s.reason, s.until));
            let expected = expected.map(|(r, m)| (r, m.map(min)));
            assert_eq!(got, expected, "{from} → {to}");
        }
    }

    #[test]
    fn agents_limited_one_by_one_take_turns_and_come_back() {
        let cfg = |fallback: Vec<Tool>| crate::config::AgentConfig {
            fallback,
            ..crate::config::Config::default().agent
        };
        let mut agents = Agents::configured(&cfg(vec![Tool::Codex])).unwrap();
        let ten = Duration::from_secs(600);
        let mut limits = Limits::new();
        assert_eq!(agents.choose(&limits, t0(), ten), Ok(0));
        limits.set_agent_usage_limit("claude", Some(min(120)), t0(), ten);
        assert_eq!(agents.choose(&limits, t0(), ten), Ok(1));
        let s = agents.switch_to(1, &limits).unwrap();
        assert_eq!((s.reason, agents.current_name()), (SwitchReason::UsageLimit, "codex"));
        // codex is limited for a while too: wait for claude, the earlier reset.
        limits.set_agent_usage_limit("codex", Some(min(180)), t0(), ten);
        let claude_at = min(120) + TimeDelta::seconds(2);
        let hold = Hold { at: claude_at, agent: 0, every: true };
        assert_eq!(agents.choose(&limits, t0(), ten), Err(hold));
        assert_eq!(agents.choose(&limits, min(121), ten), Ok(0));
        let s = agents.switch_to(0, &limits).unwrap();
        assert_eq!((s.from, s.to, s.reason), (1, 0, SwitchReason::LimitReset));
        assert_eq!(agents.switch_to(0, &limits), None);
    }

    #[test]
    fn the_list_must_name_other_agents() {
        let cfg = |tool, fallback| crate::config::AgentConfig {
            tool,
            fallback,
            command: crate::agent::words::AgentCommand {
                env: Vec::new(),
                argv: vec!["my-agent".into()],
            },
            ..crate::config::Config::default().agent
        };
        let e = Agents::configured(&cfg(Tool::Claude, vec![Tool::Claude])).unwrap_err();
        assert_eq!(e, ConfigureError::FallbackIsTheAgent(Tool::Claude));
        assert!(e.to_string().contains("names claude, the configured agent"), "{e}");
        let e = Agents::configured(&cfg(Tool::Claude, vec![Tool::Custom])).unwrap_err();
        assert_eq!(e, ConfigureError::FallbackIsCustom);
        assert!(e.to_string().contains("cannot name custom"), "{e}");
        let a = Agents::configured(&cfg(Tool::Custom, vec![Tool::Codex, Tool::Gemini])).unwrap();
        let names: Vec<_> = (0..a.all().len()).map(|i| a.name(i)).collect();
        assert_eq!(names, ["custom", "codex", "gemini"]);
        assert_eq!(a.all()[1].program(), "codex", "a fallback runs its own program");
    }
}
