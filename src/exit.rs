//! Exit codes: the one place that gives each way a run can end its number.
//!
//! Cron jobs, CI and wrapper scripts branch on these, so every code is
//! distinct, documented here and in the README, and never reused.

/// Every story passes (verified by the gate when one is configured).
pub const COMPLETE: u8 = 0;
/// The iteration limit was reached with stories still unfinished.
pub const MAX_ITERATIONS: u8 = 1;
/// Bad flags, a bad prd.json, a bad config file, no git repository, a
/// person's uncommitted changes: nothing was run.
pub const USAGE: u8 = 2;
/// The circuit breaker is open: the loop stopped making progress.
pub const CIRCUIT_OPEN: u8 = 3;
/// A rate or usage limit, and ralph was told not to wait (or the wait is too long).
pub const RATE_LIMITED: u8 = 4;
/// The agent reported that it is blocked and needs a person.
pub const BLOCKED: u8 = 5;
/// A budget (wall clock, cost, tokens) was spent.
pub const BUDGET: u8 = 6;
/// The environment is broken: the agent or gate cannot run, authentication
/// failed, the disk is full, git fails at what ralph asks of it (a repository
/// a person must change is [`USAGE`]). Not the agent's fault, not a lack
/// of progress.
pub const ENVIRONMENT: u8 = 7;
/// Another ralph holds this work tree (one run per work tree, whatever its PRD).
pub const LOCKED: u8 = 8;
/// Every story is marked passing but the gate fails: there is no story
/// left to work on, and the project is not done. A person must look.
pub const GATE_DISAGREES: u8 = 9;
/// A parallel run gave stories up — their merges kept failing
/// (`merge.attempts`) — and no other story can start: their work is kept
/// under `refs/ralph/attempts/` for a person to look at.
pub const GIVEN_UP: u8 = 10;
/// Stopped by SIGHUP (the terminal went away): 128 + 1.
pub const HANGUP: u8 = 129;
/// Stopped by SIGINT (Ctrl-C): 128 + 2, as shells report it.
pub const INTERRUPTED: u8 = 130;
/// Stopped by SIGTERM: 128 + 15.
pub const TERMINATED: u8 = 143;

/// The table the README and `ralph --help` show.
pub const TABLE: &[(u8, &str)] = &[
    (COMPLETE, "every story passes (verified by the gate when one is configured)"),
    (MAX_ITERATIONS, "iteration limit reached, stories remain"),
    (USAGE, "usage error: flags, prd.json, config, no git repository, uncommitted changes"),
    (CIRCUIT_OPEN, "circuit breaker open: no progress"),
    (RATE_LIMITED, "rate or usage limit and not waiting (--no-wait or past --max-wait)"),
    (BLOCKED, "the agent reported BLOCKED"),
    (BUDGET, "budget spent (--max-duration, --max-cost, --max-tokens)"),
    (ENVIRONMENT, "environment error: agent, gate or sandbox cannot run, auth failure, disk"),
    (LOCKED, "another ralph holds this work tree (whatever its PRD)"),
    (GATE_DISAGREES, "every story is marked passing but the gate fails"),
    (GIVEN_UP, "a parallel run gave stories up (merges kept failing); nothing else can start"),
    (HANGUP, "interrupted by SIGHUP"),
    (INTERRUPTED, "interrupted by SIGINT"),
    (TERMINATED, "terminated by SIGTERM"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct() {
        let mut codes: Vec<u8> = TABLE.iter().map(|(c, _)| *c).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), TABLE.len());
    }
}
