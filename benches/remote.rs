//! Workers on several machines, on one: 12 independent stories, an agent
//! that works 2 s on each, 4 `ralph worker --remote` processes, each in its
//! own clone of a local bare repository. The whole run against the ideal
//! (12 × 2 s over 4 workers), and per delivered story the coordination
//! the remote costs: the claim (from the `worker_start` events) and the
//! delivery (fetch, squash, push, releasing the claim; the `merge`
//! events of a run without a gate).

mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::{NO_BRAKES, Project, heading, mark_story_line, prd_json, report, spread};

const STORIES: usize = 12;
const WORKERS: usize = 4;
const AGENT_S: f64 = 2.0;

fn main() {
    heading("ralph worker --remote: 12 stories, a 2 s agent, 4 workers, a local bare remote");
    let project = Project::new(&prd_json(STORIES), NO_BRAKES);
    let bare = project.tmp.path().join("remote.git");
    let ok = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(project.dir())
        .arg(&bare)
        .status()
        .unwrap();
    assert!(ok.success());
    let agent = project.tmp.path().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncat >/dev/null\nsleep {AGENT_S}\necho done > \"work-$RALPH_STORY_ID.txt\"\n{}\n\
             git add -A && git -c user.name=a -c user.email=a@b commit -qm \"feat: $RALPH_STORY_ID\"\n",
            mark_story_line()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let start = Instant::now();
    let children: Vec<_> = (1..=WORKERS)
        .map(|i| {
            let events = project.tmp.path().join(format!("w{i}.jsonl"));
            project
                .ralph()
                .args(["worker", "--remote"])
                .arg(&bare)
                .arg("--dir")
                .arg(project.tmp.path().join(format!("w{i}")))
                .args(["--id", &format!("w{i}"), "--json", "40", "--agent-cmd"])
                .arg(&agent)
                .env("GIT_AUTHOR_NAME", "Bench")
                .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
                .env("GIT_COMMITTER_NAME", "Bench")
                .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
                .stdout(std::fs::File::create(events).unwrap())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a worker did not finish");
    }
    let wall = start.elapsed().as_secs_f64();
    let ideal = AGENT_S * STORIES as f64 / WORKERS as f64;
    let events: Vec<serde_json::Value> = (1..=WORKERS)
        .flat_map(|i| {
            let text = std::fs::read_to_string(project.tmp.path().join(format!("w{i}.jsonl")))
                .unwrap_or_default();
            text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect::<Vec<_>>()
        })
        .collect();
    let mut merges: Vec<f64> = events
        .iter()
        .filter(|e| e["event"] == "merge" && e["result"] == "merged")
        .filter_map(|e| e["duration_ms"].as_f64())
        .collect();
    let mut claims: Vec<f64> = events
        .iter()
        .filter(|e| e["event"] == "worker_start")
        .filter_map(|e| e["claim_ms"].as_f64())
        .collect();
    assert_eq!(merges.len(), STORIES, "every story delivered once");
    assert_eq!(claims.len(), STORIES, "every story claimed once");
    report("remote.wall_s", "4 workers, whole run", wall, "s", "");
    report("remote.ideal_s", "ideal", ideal, "s", "");
    report("remote.ratio", "whole run / ideal", wall / ideal, "x", "target <= 1.3");
    let (c, clo, chi) = spread(&mut claims);
    report(
        "remote.claim_ms",
        "claim per story (a push, a fetch if the tip moved)",
        c,
        "ms",
        &format!("[{clo:.0} – {chi:.0}]"),
    );
    let (m, lo, hi) = spread(&mut merges);
    report(
        "remote.deliver_ms",
        "delivery per story (fetch, squash, one push)",
        m,
        "ms",
        &format!("[{lo:.0} – {hi:.0}], no gate"),
    );
    report("remote.coordination_ms", "claim + delivery, medians", c + m, "ms", "target <= 150");
}
