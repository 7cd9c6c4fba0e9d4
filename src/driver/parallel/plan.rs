//! The parallel run's decisions, pure: what a worker's turn came to, which
//! stories start next, how a worker's progress entry joins the run
//! branch's, and when the run is over.

use std::collections::BTreeMap;

use crate::event::RunOutcome;
use crate::exit;
use crate::prd::{Prd, Story};

/// What a worker's turn (one `ralph __worker` process) came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Turn {
    /// The story passes in its worktree: to the merge queue.
    Passed,
    /// One iteration done, the story not yet: another turn.
    Again,
    /// A usage limit: every worker pauses until it resets.
    UsageLimit,
    /// Given up: the agent said it is blocked, or the story's breaker opened.
    GiveUp(GiveUp),
    /// The worker was stopped (a signal ralph sent, or it was killed): the
    /// story stays as it is, for the next turn or the next run.
    Stopped,
    /// Another ralph still holds the worktree (a stopped worker of this
    /// run that has not finished exiting): try again shortly.
    Busy,
    /// Something no turn can fix (the agent cannot start, git fails): the run stops.
    Fatal(RunOutcome),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum GiveUp {
    Blocked,
    Breaker,
}

/// A worker's exit code (`None`: killed by a signal) and whether its
/// story passes in its worktree, as a [`Turn`].
pub(super) fn turn(code: Option<i32>, passes: bool) -> Turn {
    let Some(code) = code.and_then(|c| u8::try_from(c).ok()) else { return Turn::Stopped };
    match code {
        exit::COMPLETE if passes => Turn::Passed,
        exit::COMPLETE | exit::MAX_ITERATIONS => Turn::Again,
        exit::RATE_LIMITED => Turn::UsageLimit,
        exit::BLOCKED => Turn::GiveUp(GiveUp::Blocked),
        exit::CIRCUIT_OPEN => Turn::GiveUp(GiveUp::Breaker),
        exit::LOCKED => Turn::Busy,
        exit::INTERRUPTED | exit::TERMINATED | exit::HANGUP => Turn::Stopped,
        exit::BUDGET => Turn::Fatal(RunOutcome::Budget),
        exit::GATE_DISAGREES => Turn::Again,
        _ => Turn::Fatal(RunOutcome::Environment),
    }
}

/// The stories to start now, best first, for `free` workers: unfinished,
/// their dependencies passing, not in flight, queued or given up.
pub(super) fn to_start<'a>(prd: &'a Prd, busy: &[String], free: usize) -> Vec<&'a Story> {
    crate::prd::runnable(prd.stories(), busy).into_iter().take(free).collect()
}

/// Which of `runnable` stories a remote worker claims first: workers
/// started together (a Kubernetes Job's pods, a CI matrix) would all race
/// for the best story, and each lost race costs a push. A worker whose id
/// ends in a number (`worker-3`, `gha-991-2`, the deploy recipes' ids)
/// starts at that story of the list, counting from 1 (a CI matrix,
/// GitLab's `CI_NODE_INDEX`), and worker 0 (a Kubernetes index) at the
/// last: numbered either way, the best story is in the first wave. Any
/// other id starts by its hash. When that story is taken, and for every
/// later claim, the worker takes the best free story, as on one machine.
pub(super) fn first_pick(worker: &str, runnable: usize) -> usize {
    if runnable == 0 {
        return 0;
    }
    let digits = worker.len() - worker.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let runnable = runnable as u64;
    let n = match worker[worker.len() - digits..].parse::<u64>() {
        Ok(0) => runnable - 1,
        Ok(n) => n - 1,
        // FNV-1a: stable across builds and machines, unlike std's hasher.
        Err(_) => worker.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }),
    };
    (n % runnable) as usize
}

/// What the worker's agent added to progress.txt since the story's branch
/// was cut (`base`): appended to the run branch's copy at merge, in merge
/// order. A worker that rewrote the file rather than appending gives the
/// lines it added.
pub(super) fn progress_suffix(base: &str, worker: &str) -> String {
    if let Some(rest) = worker.strip_prefix(base) {
        return rest.to_string();
    }
    let old: std::collections::HashSet<&str> = base.lines().collect();
    let added: Vec<&str> = worker.lines().filter(|l| !old.contains(l)).collect();
    if added.is_empty() { String::new() } else { format!("\n{}\n", added.join("\n")) }
}

/// `base` with `suffix` after it, a newline between them when needed.
pub(super) fn append(base: &str, suffix: &str) -> String {
    if suffix.is_empty() {
        return base.to_string();
    }
    let sep = if base.is_empty() || base.ends_with('\n') { "" } else { "\n" };
    format!("{base}{sep}{suffix}")
}

/// Why the run cannot go on when no worker runs and nothing is queued:
/// `None` while a story can still start.
pub(super) fn stuck(
    prd: &Prd,
    given_up: &BTreeMap<String, (GiveUp, String)>,
) -> Option<(RunOutcome, String)> {
    if prd.all_pass() {
        return None;
    }
    let busy: Vec<String> = given_up.keys().cloned().collect();
    if !crate::prd::runnable(prd.stories(), &busy).is_empty() {
        return None;
    }
    let breaker = given_up.values().any(|(why, _)| *why == GiveUp::Breaker);
    let blocked = given_up.values().all(|(why, _)| *why == GiveUp::Blocked);
    let outcome = if breaker && !blocked { RunOutcome::CircuitOpen } else { RunOutcome::Blocked };
    let mut lines: Vec<String> =
        given_up.iter().map(|(id, (_, why))| format!("{id}: {why}")).collect();
    let waiting: Vec<String> = prd
        .stories()
        .iter()
        .filter(|s| !s.passes && !given_up.contains_key(&s.id))
        .map(|s| {
            let on = crate::prd::waiting_on(prd.stories(), s);
            format!(
                "{} waits on {}",
                s.id,
                if on.is_empty() { "nothing".into() } else { on.join(", ") }
            )
        })
        .collect();
    lines.extend(waiting);
    let head = if given_up.is_empty() {
        "no story can start: each waits on a story that does not pass".to_string()
    } else {
        format!(
            "{} given up and no other story can start",
            crate::text::count(given_up.len(), "story", "stories")
        )
    };
    Some((outcome, format!("{head}\n{}", lines.join("\n"))))
}

/// A story id (or a run branch) as a branch, ref and folder name: what git
/// allows in one. An id that had to change gets a hash of itself too, so
/// two ids never share a name (`ralph/x` and `ralph-x`, `US.1` and `US-1`).
pub(super) fn slug(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .collect();
    let s = s.trim_matches('-');
    let s = if s.is_empty() { "story" } else { s };
    if s == id {
        return s.to_string();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(id.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{s}-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_started_together_first_claim_different_stories() {
        let cases: &[(&str, usize, usize)] = &[
            ("worker-1", 12, 0),
            ("worker-3", 12, 2),
            ("w4", 12, 3),
            ("gha-991-13", 12, 0),
            ("worker-0", 12, 11),
            ("host-2", 1, 0),
            ("worker-5", 0, 0),
        ];
        for (id, runnable, want) in cases {
            assert_eq!(first_pick(id, *runnable), *want, "{id} of {runnable}");
        }
        // Any other id: somewhere in the list, the same on every machine.
        let by_hash = first_pick("build-box", 12);
        assert!(by_hash < 12);
        assert_eq!(by_hash, first_pick("build-box", 12));
        assert!(first_pick("99999999999999999999999", 7) < 7, "too long for a number: hashed");
        let spread: std::collections::BTreeSet<usize> =
            (0..4).map(|i| first_pick(&format!("worker-{i}"), 12)).collect();
        assert_eq!(spread.len(), 4, "four indexed workers, four stories");
        // Counted from 0 or from 1, the best story is among them.
        for from in [0, 1] {
            let wave: Vec<usize> =
                (from..from + 4).map(|i| first_pick(&format!("worker-{i}"), 12)).collect();
            assert!(wave.contains(&0), "from {from}: {wave:?}");
        }
    }

    #[test]
    fn a_workers_exit_says_what_its_turn_came_to() {
        let cases: &[(Option<i32>, bool, Turn)] = &[
            (Some(0), true, Turn::Passed),
            (Some(0), false, Turn::Again),
            (Some(1), false, Turn::Again),
            (Some(1), true, Turn::Again),
            (Some(4), false, Turn::UsageLimit),
            (Some(5), false, Turn::GiveUp(GiveUp::Blocked)),
            (Some(3), false, Turn::GiveUp(GiveUp::Breaker)),
            (Some(8), false, Turn::Busy),
            (Some(130), false, Turn::Stopped),
            (Some(143), true, Turn::Stopped),
            (None, false, Turn::Stopped),
            (Some(6), false, Turn::Fatal(RunOutcome::Budget)),
            (Some(7), false, Turn::Fatal(RunOutcome::Environment)),
            (Some(2), false, Turn::Fatal(RunOutcome::Environment)),
            (Some(-1), false, Turn::Stopped),
        ];
        for (code, passes, want) in cases {
            assert_eq!(&turn(*code, *passes), want, "{code:?} {passes}");
        }
    }

    #[test]
    fn progress_joins_in_merge_order_without_losing_a_line() {
        let cases: &[(&str, &str, &str)] = &[
            ("# log\n", "# log\n## A\n- did a\n", "## A\n- did a\n"),
            ("# log\n", "# log\n", ""),
            // Rewritten instead of appended: the new lines.
            ("# log\nold\n", "old\n## B\n", "\n## B\n"),
        ];
        for (base, worker, want) in cases {
            assert_eq!(progress_suffix(base, worker), *want, "{base:?} {worker:?}");
        }
        assert_eq!(append("a", "b\n"), "a\nb\n");
        assert_eq!(append("a\n", "b\n"), "a\nb\n");
        assert_eq!(append("a\n", ""), "a\n");
    }

    fn prd(json: &str) -> Prd {
        Prd::parse(json.as_bytes(), std::path::Path::new("prd.json")).unwrap()
    }

    #[test]
    fn stories_start_by_priority_once_what_they_depend_on_passes() {
        let p = prd(r#"{"userStories":[
            {"id":"A","priority":2,"passes":false},
            {"id":"B","priority":1,"passes":false},
            {"id":"C","priority":0,"passes":false,"dependsOn":["A"]},
            {"id":"D","priority":3,"passes":true}]}"#);
        let ids = |v: Vec<&Story>| v.into_iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(to_start(&p, &[], 4)), ["B", "A"]);
        assert_eq!(ids(to_start(&p, &[], 1)), ["B"]);
        assert_eq!(ids(to_start(&p, &["B".into()], 4)), ["A"]);
        assert!(to_start(&p, &["A".into(), "B".into()], 4).is_empty());
    }

    #[test]
    fn a_run_is_stuck_only_when_nothing_can_start() {
        let p = prd(r#"{"userStories":[
            {"id":"A","priority":1,"passes":false},
            {"id":"B","priority":2,"passes":false,"dependsOn":["A"]}]}"#);
        let mut given_up = BTreeMap::new();
        assert_eq!(stuck(&p, &given_up), None);
        given_up.insert("A".to_string(), (GiveUp::Blocked, "needs a key".to_string()));
        let (outcome, why) = stuck(&p, &given_up).unwrap();
        assert_eq!(outcome, RunOutcome::Blocked);
        assert!(why.contains("A: needs a key") && why.contains("B waits on A"), "{why}");
        given_up.insert("A".to_string(), (GiveUp::Breaker, "no progress".to_string()));
        assert_eq!(stuck(&p, &given_up).unwrap().0, RunOutcome::CircuitOpen);
        let done = prd(r#"{"userStories":[{"id":"A","passes":true}]}"#);
        assert_eq!(stuck(&done, &BTreeMap::new()), None);
    }

    #[test]
    fn story_ids_become_names_git_accepts() {
        for (id, want) in [
            ("US-001", "US-001".to_string()),
            ("a/b c", "a-b-c-0af99a60".to_string()),
            ("..", "story-5ec1f7e7".to_string()),
            ("x.y", "x-y-b24ca9b7".to_string()),
        ] {
            assert_eq!(slug(id), want, "{id}");
        }
        // Ids that read alike stay apart.
        let names: std::collections::BTreeSet<String> =
            ["ralph/x", "ralph-x", "ralph.x", "ralph x"].iter().map(|id| slug(id)).collect();
        assert_eq!(names.len(), 4, "{names:?}");
    }
}
