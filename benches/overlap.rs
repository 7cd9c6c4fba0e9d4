//! Parallel runs on stories that overlap, as real PRDs' stories do: 8
//! stories, an agent that works 2 s on each (a script: it sleeps, writes
//! its line and commits; given ralph's resolver prompt, it removes the
//! conflict markers keeping both sides, the way a resolver agent merges
//! two intents), a 0.1 s gate.
//!
//! - four pairs, each pair rewriting one file: declared in prd.json's
//!   `touches` (scheduled apart), and not declared (met at the merge
//!   queue and resolved);
//! - all eight appending to one shared file.
//!
//! Each against `--jobs 1`, which never conflicts.

mod common;

use std::process::Stdio;

use common::{NO_BRAKES, Project, heading, measure, report, runs, spread};

const STORIES: usize = 8;
const AGENT_S: f64 = 2.0;
const GATE_S: f64 = 0.1;

/// What each story does to the files they share.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// Story i rewrites the one line of `pair-<(i+1)/2>.txt`; `declared`
    /// says so in `touches`.
    Pairs { declared: bool },
    /// Every story appends its line to `shared.txt`.
    Shared,
}

fn main() {
    heading("ralph --jobs 4 on overlapping stories: 8 stories, a 2 s agent, a 0.1 s gate");
    let n = runs(1);
    for (key, label, shape, target) in [
        (
            "overlap.pairs_declared",
            "four pairs, touches declared",
            Shape::Pairs { declared: true },
            2.0,
        ),
        (
            "overlap.pairs_resolved",
            "four pairs, undeclared (resolved)",
            Shape::Pairs { declared: false },
            2.0,
        ),
        ("overlap.shared", "all eight on one file", Shape::Shared, 1.0 / 1.2),
    ] {
        let (mut one, mut four) = (Vec::new(), Vec::new());
        let mut resolves = 0;
        for _ in 0..n {
            one.push(run(1, shape).0);
            let (s, r) = run(4, shape);
            four.push(s);
            resolves = r;
        }
        let (one, ..) = spread(&mut one);
        let (four, lo, hi) = spread(&mut four);
        report(&format!("{key}.jobs1_s"), &format!("{label}: --jobs 1"), one, "s", "");
        report(
            &format!("{key}.jobs4_s"),
            &format!("{label}: --jobs 4"),
            four,
            "s",
            &format!("[{lo:.2} – {hi:.2}], {resolves} resolver iterations"),
        );
        report(
            &format!("{key}.speedup"),
            &format!("{label}: --jobs 1 / --jobs 4"),
            one / four,
            "x",
            &format!("target >= {target:.2}"),
        );
    }
}

/// A prd.json of 8 stories, with each pair's file in `touches` if asked.
fn prd(shape: Shape) -> String {
    let stories: Vec<String> = (1..=STORIES)
        .map(|i| {
            let touches = match shape {
                Shape::Pairs { declared: true } => format!(", \"touches\": [\"pair-{}.txt\"]", i.div_ceil(2)),
                _ => String::new(),
            };
            format!(
                "    {{\"id\": \"US-{i:05}\", \"title\": \"Story {i}\", \"priority\": {i}, \"passes\": false{touches}}}"
            )
        })
        .collect();
    format!(
        "{{\n  \"project\": \"Bench\",\n  \"branchName\": \"main\",\n  \"userStories\": [\n{}\n  ]\n}}\n",
        stories.join(",\n")
    )
}

/// Seconds for a run of `jobs` workers, and how many resolver iterations it took.
fn run(jobs: u32, shape: Shape) -> (f64, usize) {
    let project = Project::new(&prd(shape), NO_BRAKES);
    let dir = project.dir();
    for p in 1..=STORIES / 2 {
        std::fs::write(dir.join(format!("pair-{p}.txt")), "base\n").unwrap();
    }
    std::fs::write(dir.join("shared.txt"), "# one line per story\n").unwrap();
    let git = |args: &[&str]| {
        let ok = project
            .command("git")
            .args(["-c", "user.name=Bench", "-c", "user.email=bench@example.invalid"])
            .args(args)
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    };
    git(&["add", "-A"]);
    git(&["commit", "-qm", "shared files"]);
    let work = match shape {
        Shape::Pairs { .. } => {
            "n=$(expr \"${RALPH_STORY_ID#US-}\" + 0); echo \"$RALPH_STORY_ID\" > \"pair-$(( (n + 1) / 2 )).txt\""
        }
        Shape::Shared => "echo \"$RALPH_STORY_ID\" >> shared.txt",
    };
    let agent = project.tmp.path().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nprompt=$(cat)\nsleep {AGENT_S}\n\
             case \"$prompt\" in \"# Merge two stories' work\"*)\n\
               for f in $(grep -rl --exclude-dir=.git '^<<<<<<< ' .); do sed -i '/^<<<<<<< /d; /^=======$/d; /^>>>>>>> /d' \"$f\"; done\n\
               exit 0;;\nesac\n\
             {work}\n\
             git add -A && git -c user.name=a -c user.email=a@b commit -qm \"feat: $RALPH_STORY_ID\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let events = project.tmp.path().join("events.jsonl");
    let mut cmd = project.ralph();
    cmd.arg("40")
        .arg("--jobs")
        .arg(jobs.to_string())
        .arg("--agent-cmd")
        .arg(&agent)
        .arg("--gate")
        .arg(format!("sleep {GATE_S}"))
        .arg("--json")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .stdout(std::fs::File::create(&events).unwrap())
        .stderr(Stdio::null());
    let m = measure(&mut cmd);
    let text = std::fs::read_to_string(&events).unwrap_or_default();
    let end = text.lines().find(|l| l.contains("\"run_end\"")).unwrap_or("no run_end");
    assert_eq!(m.exit_code, Some(0), "the run (--jobs {jobs}) did not complete: {end}");
    let ev: Vec<serde_json::Value> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    if jobs > 1 {
        let merged = ev.iter().filter(|e| e["event"] == "merge" && e["result"] == "merged").count();
        assert_eq!(merged, STORIES, "every story merged once:\n{text}");
    }
    // Every story's line is there.
    let shared = std::fs::read_to_string(dir.join(if shape == Shape::Shared {
        "shared.txt"
    } else {
        "pair-1.txt"
    }))
    .unwrap_or_default();
    assert!(!shared.contains("<<<<<<<"), "markers left: {shared}");
    let resolves =
        ev.iter().filter(|e| e["event"] == "iteration_end" && e["resolve"] == true).count();
    (m.wall.as_secs_f64(), resolves)
}
