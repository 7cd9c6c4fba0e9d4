//! Parallel runs: 8 independent stories, an agent that works 2 s on each
//! (a script: it sleeps, writes its story's file and commits), a 0.1 s
//! gate. `--jobs 1` against `--jobs 4`, and the ideal for 4 workers: the
//! agents' time spread over them plus each story's two gates (in its
//! worktree, then on the merged tree).
//!
//! Then ralph's own cost per merged story — squash, bookkeeping, the
//! compare-and-swap, the work tree following — from the `merge` events of
//! a run without a gate (the agent marks its story itself, with python3),
//! so no gate time is inside the figure.

mod common;

use std::process::Stdio;

use common::{
    NO_BRAKES, Project, heading, mark_story_line, measure, prd_json, report, runs, spread,
};

const STORIES: usize = 8;
const AGENT_S: f64 = 2.0;
const GATE_S: f64 = 0.1;

fn main() {
    heading("ralph --jobs: 8 stories, a 2 s agent, a 0.1 s gate");
    let n = runs(1);
    let mut one = Vec::new();
    let mut four = Vec::new();
    for _ in 0..n {
        one.push(run(1, AGENT_S, true).0);
        four.push(run(4, AGENT_S, true).0);
    }
    let (one, ..) = spread(&mut one);
    let (four, lo, hi) = spread(&mut four);
    let ideal = AGENT_S * STORIES as f64 / 4.0 + 2.0 * GATE_S * STORIES as f64 / 4.0;
    report("parallel.jobs1_s", "--jobs 1, whole run", one, "s", "");
    report("parallel.jobs4_s", "--jobs 4, whole run", four, "s", &format!("[{lo:.2} – {hi:.2}]"));
    report("parallel.ideal4_s", "ideal for 4 workers", ideal, "s", "");
    report("parallel.ratio", "--jobs 4 / ideal", four / ideal, "x", "target <= 1.2");
    report("parallel.speedup", "--jobs 1 / --jobs 4", one / four, "x", "target >= 3.3");

    let (_, mut merges) = run(4, 0.2, false);
    let (merge, lo, hi) = spread(&mut merges);
    report(
        "parallel.merge_ms",
        "ralph's own work per merged story",
        merge,
        "ms",
        &format!("[{lo:.1} – {hi:.1}] over {} merges, no gate", merges.len()),
    );
}

/// Seconds for a run of `jobs` workers with an agent of `agent_s`
/// seconds, and the duration of each of its merges in ms.
fn run(jobs: u32, agent_s: f64, gate: bool) -> (f64, Vec<f64>) {
    let project = Project::new(&prd_json(STORIES), NO_BRAKES);
    let agent = project.tmp.path().join("agent.sh");
    // With a gate, ralph marks the story when it passes; without one the
    // agent marks it in prd.json itself.
    let mark = if gate { String::new() } else { mark_story_line() };
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncat >/dev/null\nsleep {agent_s}\necho done > \"work-$RALPH_STORY_ID.txt\"\n{mark}\n\
             git add -A && git -c user.name=a -c user.email=a@b commit -qm \"feat: $RALPH_STORY_ID\"\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let events = project.tmp.path().join("events.jsonl");
    let mut cmd = project.ralph();
    cmd.arg("30")
        .arg("--jobs")
        .arg(jobs.to_string())
        .arg("--agent-cmd")
        .arg(&agent)
        .arg("--json")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .stdout(std::fs::File::create(&events).unwrap())
        .stderr(Stdio::null());
    if gate {
        cmd.arg("--gate").arg(format!("sleep {GATE_S}"));
    }
    let m = measure(&mut cmd);
    let text = std::fs::read_to_string(&events).unwrap_or_default();
    let end = text.lines().find(|l| l.contains("\"run_end\"")).unwrap_or("no run_end");
    assert_eq!(m.exit_code, Some(0), "the run (--jobs {jobs}) did not complete: {end}");
    let merges: Vec<f64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "merge" && e["result"] == "merged")
        .filter_map(|e| e["duration_ms"].as_f64())
        .collect();
    if jobs > 1 {
        assert_eq!(merges.len(), STORIES, "every story merged once:\n{text}");
    }
    (m.wall.as_secs_f64(), merges)
}
