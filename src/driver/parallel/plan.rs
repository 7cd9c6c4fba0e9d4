//! The parallel run's decisions, pure: what a worker's turn came to, which
//! stories start next, how a worker's progress entry joins the run
//! branch's, and when the run is over.

use std::collections::BTreeMap;

use crate::event::RunOutcome;
use crate::exit;
use crate::prd::{Footprint, Prd, Story};

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
    /// The agent said it is blocked.
    Blocked,
    /// The story's own breaker opened.
    Breaker,
    /// Its merges failed `merge.attempts` times.
    Merge,
    /// Its own check passes on the base before any work (`gate.require_red`).
    ProvesNothing,
}

/// What a worker's turn came to, from its typed `run_end` event (`None`:
/// it never sent one: it failed to start, or a signal killed it) and, for
/// a worker that sent none, its exit code (`None`: killed by a signal).
pub(super) fn turn(end: Option<RunOutcome>, code: Option<i32>) -> Turn {
    match end {
        Some(RunOutcome::Complete) => Turn::Passed,
        Some(RunOutcome::MaxIterations | RunOutcome::GateDisagrees) => Turn::Again,
        Some(RunOutcome::RateLimited) => Turn::UsageLimit,
        Some(RunOutcome::Blocked) => Turn::GiveUp(GiveUp::Blocked),
        Some(RunOutcome::CircuitOpen) => Turn::GiveUp(GiveUp::Breaker),
        Some(RunOutcome::Interrupted) => Turn::Stopped,
        Some(RunOutcome::Budget) => Turn::Fatal(RunOutcome::Budget),
        Some(RunOutcome::Environment) => Turn::Fatal(RunOutcome::Environment),
        // Only a coordinator gives stories up at its merge queue.
        Some(RunOutcome::GivenUp) => Turn::Fatal(RunOutcome::Environment),
        None => match code.and_then(|c| u8::try_from(c).ok()) {
            None => Turn::Stopped,
            Some(exit::LOCKED) => Turn::Busy,
            Some(exit::INTERRUPTED | exit::TERMINATED | exit::HANGUP) => Turn::Stopped,
            Some(_) => Turn::Fatal(RunOutcome::Environment),
        },
    }
}

/// Why a story that could start waits: a story at work touches a path it
/// is predicted to touch too.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Overlap {
    pub story: String,
    /// The story it waits for.
    pub on: String,
    /// What both touch.
    pub path: String,
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "waits for {}: both touch {}", self.on, self.path)
    }
}

/// The stories to start now, best first, for up to `free` workers:
/// unfinished, their dependencies passing, not `busy`, and touching no
/// path a story `at_work` (or one picked before it) touches; and why each
/// story that could otherwise start waits.
pub(super) fn schedule<'a>(
    stories: &'a [Story],
    busy: &[String],
    at_work: &[String],
    footprints: &BTreeMap<String, Footprint>,
    free: usize,
) -> (Vec<&'a Story>, Vec<Overlap>) {
    let none = Footprint::default();
    let fp = |id: &str| footprints.get(id).unwrap_or(&none);
    let mut taken: Vec<&str> = at_work.iter().map(String::as_str).collect();
    let mut picked = Vec::new();
    let mut waits = Vec::new();
    for s in crate::prd::runnable(stories, busy) {
        let clash = taken.iter().find_map(|t| fp(&s.id).overlap(fp(t)).map(|p| (*t, p)));
        if let Some((on, path)) = clash {
            waits.push(Overlap { story: s.id.clone(), on: on.to_string(), path });
            continue;
        }
        if picked.len() < free {
            picked.push(s);
            taken.push(&s.id);
        }
    }
    (picked, waits)
}

/// What a run with `jobs` workers would do, wave by wave, if every story
/// passed at its first try: the stories of each wave, and why a story
/// waits for a later one (for `--dry-run`).
pub fn waves(
    prd: &Prd,
    footprints: &BTreeMap<String, Footprint>,
    jobs: usize,
) -> (Vec<Vec<String>>, Vec<Overlap>) {
    let mut stories: Vec<Story> = prd.stories().to_vec();
    let mut waves = Vec::new();
    let mut waits: Vec<Overlap> = Vec::new();
    loop {
        let (picked, w) = schedule(&stories, &[], &[], footprints, jobs.max(1));
        for wait in w {
            if !waits.iter().any(|x| x.story == wait.story) {
                waits.push(wait);
            }
        }
        if picked.is_empty() {
            break;
        }
        let ids: Vec<String> = picked.iter().map(|s| s.id.clone()).collect();
        drop(picked);
        for s in stories.iter_mut().filter(|s| ids.contains(&s.id)) {
            s.passes = true;
        }
        waves.push(ids);
    }
    (waves, waits)
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
    // The agent asking for a person comes first, then a story that stopped
    // making progress, then merges that kept failing.
    let any = |kind: GiveUp| given_up.values().any(|(why, _)| *why == kind);
    let outcome = if any(GiveUp::Blocked) || given_up.is_empty() {
        RunOutcome::Blocked
    } else if any(GiveUp::Breaker) {
        RunOutcome::CircuitOpen
    } else {
        RunOutcome::GivenUp
    };
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
    fn a_workers_run_end_says_what_its_turn_came_to() {
        use RunOutcome as O;
        let cases: &[(Option<RunOutcome>, Option<i32>, Turn)] = &[
            (Some(O::Complete), Some(0), Turn::Passed),
            (Some(O::MaxIterations), Some(1), Turn::Again),
            (Some(O::GateDisagrees), Some(9), Turn::Again),
            (Some(O::RateLimited), Some(4), Turn::UsageLimit),
            (Some(O::Blocked), Some(5), Turn::GiveUp(GiveUp::Blocked)),
            (Some(O::CircuitOpen), Some(3), Turn::GiveUp(GiveUp::Breaker)),
            (Some(O::Interrupted), Some(143), Turn::Stopped),
            (Some(O::Budget), Some(6), Turn::Fatal(O::Budget)),
            (Some(O::Environment), Some(7), Turn::Fatal(O::Environment)),
            // The event decides, whatever the exit code says.
            (Some(O::Complete), Some(1), Turn::Passed),
            // No run_end: it never started its run, or was killed.
            (None, Some(8), Turn::Busy),
            (None, Some(130), Turn::Stopped),
            (None, None, Turn::Stopped),
            (None, Some(-1), Turn::Stopped),
            (None, Some(2), Turn::Fatal(O::Environment)),
            (None, Some(0), Turn::Fatal(O::Environment)),
        ];
        for (end, code, want) in cases {
            assert_eq!(&turn(*end, *code), want, "{end:?} {code:?}");
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

    fn ids(v: &[&Story]) -> Vec<String> {
        v.iter().map(|s| s.id.clone()).collect()
    }

    fn footprints(p: &Prd, learnt: &[(&str, &str)]) -> BTreeMap<String, Footprint> {
        p.stories()
            .iter()
            .map(|s| {
                let l: Vec<String> = learnt
                    .iter()
                    .filter(|(id, _)| *id == s.id)
                    .map(|(_, p)| p.to_string())
                    .collect();
                (s.id.clone(), Footprint::new(&s.touches, &l))
            })
            .collect()
    }

    #[test]
    fn stories_start_by_priority_once_what_they_depend_on_passes() {
        let p = prd(r#"{"userStories":[
            {"id":"A","priority":2,"passes":false},
            {"id":"B","priority":1,"passes":false},
            {"id":"C","priority":0,"passes":false,"dependsOn":["A"]},
            {"id":"D","priority":3,"passes":true}]}"#);
        let fp = footprints(&p, &[]);
        let start = |busy: &[String], free| ids(&schedule(p.stories(), busy, &[], &fp, free).0);
        assert_eq!(start(&[], 4), ["B", "A"]);
        assert_eq!(start(&[], 1), ["B"]);
        assert_eq!(start(&["B".into()], 4), ["A"]);
        assert!(start(&["A".into(), "B".into()], 4).is_empty());
    }

    #[test]
    fn stories_that_touch_the_same_path_never_run_at_once() {
        let p = prd(r#"{"userStories":[
            {"id":"A","priority":1,"touches":["src/routes/**"]},
            {"id":"B","priority":2,"touches":["src/routes/users.rs"]},
            {"id":"C","priority":3,"touches":["db/schema.sql"]},
            {"id":"D","priority":4},
            {"id":"E","priority":5}]}"#);
        // E's earlier attempt changed what C touches.
        let fp = footprints(&p, &[("E", "db/schema.sql")]);
        let (picked, waits) = schedule(p.stories(), &[], &[], &fp, 4);
        assert_eq!(ids(&picked), ["A", "C", "D"]);
        let said: Vec<String> = waits.iter().map(|w| format!("{}: {w}", w.story)).collect();
        assert_eq!(
            said,
            [
                "B: waits for A: both touch src/routes/users.rs (src/routes/**)",
                "E: waits for C: both touch db/schema.sql"
            ]
        );
        // With A at work (in a worker, queued or merging), B still waits; the rest start.
        let (picked, waits) = schedule(p.stories(), &["A".into()], &["A".into()], &fp, 4);
        assert_eq!(ids(&picked), ["C", "D"]);
        assert_eq!(waits.len(), 2);
        // Nothing at work: B starts (from A's merged tip, once A passes).
        let (picked, _) = schedule(p.stories(), &["A".into()], &[], &fp, 1);
        assert_eq!(ids(&picked), ["B"]);
    }

    #[test]
    fn waves_put_overlapping_stories_in_different_waves() {
        let p = prd(r#"{"userStories":[
            {"id":"A","priority":1,"touches":["shared.txt"]},
            {"id":"B","priority":2,"touches":["shared.txt"]},
            {"id":"C","priority":3},
            {"id":"D","priority":4,"dependsOn":["C"]}]}"#);
        let (waves, waits) = waves(&p, &footprints(&p, &[]), 4);
        assert_eq!(waves, [vec!["A", "C"], vec!["B", "D"]]);
        assert_eq!(waits[0].to_string(), "waits for A: both touch shared.txt");
        let (one, _) = super::waves(&p, &footprints(&p, &[]), 1);
        assert_eq!(one.len(), 4, "{one:?}");
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
        given_up.insert("A".to_string(), (GiveUp::Merge, "3 attempts failed".to_string()));
        assert_eq!(stuck(&p, &given_up).unwrap().0, RunOutcome::GivenUp);
        // Which way a run stops when stories were given up for several reasons.
        let q = prd(r#"{"userStories":[{"id":"A"},{"id":"B"},{"id":"C"}]}"#);
        let kinds = |ks: &[GiveUp]| -> BTreeMap<String, (GiveUp, String)> {
            ks.iter()
                .zip(["A", "B", "C"])
                .map(|(k, id)| (id.to_string(), (*k, String::new())))
                .collect()
        };
        use GiveUp::{Blocked as Bl, Breaker as Br, Merge as Me, ProvesNothing as Pn};
        for (ks, want) in [
            (&[Bl, Br, Me][..], RunOutcome::Blocked),
            (&[Br, Me, Me][..], RunOutcome::CircuitOpen),
            (&[Me, Me, Me][..], RunOutcome::GivenUp),
            (&[Bl, Bl, Bl][..], RunOutcome::Blocked),
            (&[Pn, Me, Pn][..], RunOutcome::GivenUp),
            (&[Pn, Br, Pn][..], RunOutcome::CircuitOpen),
            (&[Pn, Pn, Bl][..], RunOutcome::Blocked),
        ] {
            assert_eq!(stuck(&q, &kinds(ks)).unwrap().0, want, "{ks:?}");
        }
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
