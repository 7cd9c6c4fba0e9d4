//! The loop's own cost per iteration: the release ralph runs 100 iterations
//! of a no-op agent (`true`: it exits at once and finishes nothing) in a
//! fresh git project, and the cost of spawning that same program directly
//! 100 times is subtracted. What is left is ralph's work: prd.json reads,
//! git status, state files, the prompt, the log, supervising the child.
//!
//! Beside it, the same measure of ralph.sh (snarktank/ralph at 6c53cb0,
//! `benches/ralph-sh/ralph.sh`, its `sleep 2` between iterations taken
//! out, `claude` on its PATH being the same no-op), run alternately with
//! ralph so both see the same machine: the target is ralph's own
//! work under a third of ralph.sh's.
//!
//! Every project is made before the first measurement and stays on disk
//! until the end. Made first: ralph's `.git` guard re-reads a file changed
//! in the last 2 s (git's racy rule) where it otherwise compares stamps, and
//! a project people run ralph in is older than that; a project made the
//! moment before its run would have every hook re-read twice an iteration.
//! Kept: removing one frees its hundreds of files, and on ext4 without a
//! journal each file made in the next minutes scans the inodes freed
//! recently, so one run's cleanup would be billed to the next run's log and
//! prompt files (ralph.sh makes none, so only ralph's side would pay).
//! For the same reason, run it on a disk that has been quiet for about 5
//! minutes: ext4 without a journal skips inodes freed in the last 60 s
//! (300 s while their buffers are dirty), so right after a test suite (or
//! this bench's own cleanup) the figure climbs by half.
//!
//! Then the processes ralph creates per iteration, counted with strace:
//! every fork, vfork and clone without CLONE_THREAD (threads are not
//! processes), in a run of 20 iterations minus a run of 10, so setup
//! costs cancel out.

mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::{NO_BRAKES, Project, heading, measure, prd_json, program, report, runs, spread};

const ITERATIONS: u32 = 100;

fn main() {
    heading("ralph loop: per-iteration cost with a no-op agent");
    let agent = program("true");
    let runs = runs(5);

    let bash = which::which("bash").ok();
    let new = || Project::new(&prd_json(1), NO_BRAKES);
    let warm_up = new();
    let projects: Vec<(Project, Project)> = (0..runs).map(|_| (new(), new())).collect();
    // Older than the guard's racy window, as a project people work in is.
    std::thread::sleep(std::time::Duration::from_millis(2100));

    // Warm the page cache and the binary.
    run_loop(&warm_up, &agent, 3);

    let mut per_spawn = Vec::new();
    let mut per_iteration = Vec::new();
    let mut per_sh_iteration = Vec::new();
    for (for_ralph, for_sh) in &projects {
        per_spawn.push(spawn_directly(&agent, ITERATIONS) * 1000.0 / f64::from(ITERATIONS));
        let ralph = run_loop(for_ralph, &agent, ITERATIONS);
        per_iteration.push(ralph * 1000.0 / f64::from(ITERATIONS));
        if let Some(bash) = &bash {
            let sh = run_ralph_sh(for_sh, bash, &agent, ITERATIONS);
            per_sh_iteration.push(sh * 1000.0 / f64::from(ITERATIONS));
        }
    }
    let mut overhead: Vec<f64> = per_iteration.iter().zip(&per_spawn).map(|(r, s)| r - s).collect();
    let mut sh_overhead: Vec<f64> =
        per_sh_iteration.iter().zip(&per_spawn).map(|(r, s)| r - s).collect();
    let (spawn, lo, hi) = spread(&mut per_spawn);
    report(
        "spawn_ms",
        &format!("spawn `{}` directly, per spawn", agent.display()),
        spawn,
        "ms",
        &format!("[{lo:.2} – {hi:.2}] over {runs} runs of {ITERATIONS}"),
    );
    let (iter, lo, hi) = spread(&mut per_iteration);
    report(
        "iteration_ms",
        &format!("ralph {ITERATIONS} iterations, per iteration"),
        iter,
        "ms",
        &format!("[{lo:.2} – {hi:.2}]"),
    );
    let (own, lo, hi) = spread(&mut overhead);
    report(
        "overhead_ms",
        "ralph's own work per iteration (the difference)",
        own,
        "ms",
        &format!("[{lo:.2} – {hi:.2}]"),
    );
    if sh_overhead.is_empty() {
        println!("  ralph.sh: bash is not installed");
    } else {
        let (sh, lo, hi) = spread(&mut sh_overhead);
        report(
            "ralph_sh_overhead_ms",
            "ralph.sh's own work per iteration, no sleep",
            sh,
            "ms",
            &format!("[{lo:.2} – {hi:.2}]"),
        );
        report(
            "overhead_vs_ralph_sh",
            "ralph's own work over ralph.sh's (target ≤ 0.33)",
            own / sh,
            "",
            "",
        );
    }

    match (count_spawns(&agent, 10), count_spawns(&agent, 20)) {
        (Some(ten), Some(twenty)) => {
            let processes = (twenty.processes - ten.processes) as f64 / 10.0;
            let threads = (twenty.threads - ten.threads) as f64 / 10.0;
            report(
                "processes_per_iteration",
                "processes created per iteration",
                processes,
                "",
                &format!("(strace; plus {threads:.0} threads, not counted)"),
            );
        }
        _ => {
            println!("  processes per iteration: strace is not installed (apt-get install strace)")
        }
    }
}

/// Seconds for `ralph N` with the no-op agent in `project`, unused so far.
fn run_loop(project: &Project, agent: &std::path::Path, n: u32) -> f64 {
    let mut cmd = project.ralph();
    cmd.arg(n.to_string())
        .arg("--agent-cmd")
        .arg(agent)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let m = measure(&mut cmd);
    // Exit 1: the iteration limit, with the story still unfinished.
    assert_eq!(m.exit_code, Some(1), "ralph did not run all {n} iterations");
    // One agent log (`iter-N.log`) per iteration, in the run's log folder.
    let is_agent_log = |name: &str| {
        name.strip_prefix("iter-")
            .and_then(|r| r.strip_suffix(".log"))
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    };
    let iterations = std::fs::read_dir(project.dir().join(".git/ralph/logs"))
        .expect("the run's logs")
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .filter(|f| is_agent_log(&f.file_name().to_string_lossy()))
        .count();
    assert_eq!(iterations, n as usize, "ralph ran fewer iterations than asked");
    m.wall.as_secs_f64()
}

/// Seconds for ralph.sh's loop of `n` iterations, with `claude` on its
/// PATH being `agent` and no sleep between iterations.
fn run_ralph_sh(project: &Project, bash: &std::path::Path, agent: &std::path::Path, n: u32) -> f64 {
    let script_dir = project.dir().join("scripts/ralph");
    let bin = project.tmp.path().join("bin");
    std::fs::create_dir_all(&script_dir).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let script = include_str!("ralph-sh/ralph.sh");
    assert!(script.contains("  sleep 2\n"), "ralph.sh's sleep moved");
    std::fs::write(script_dir.join("ralph.sh"), script.replace("  sleep 2\n", "  :\n")).unwrap();
    std::fs::write(script_dir.join("CLAUDE.md"), "Work on the next story.\n").unwrap();
    std::fs::write(script_dir.join("prd.json"), prd_json(1)).unwrap();
    std::os::unix::fs::symlink(agent, bin.join("claude")).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin];
    dirs.extend(std::env::split_paths(&path));
    let mut cmd = project.command(bash);
    cmd.arg(script_dir.join("ralph.sh"))
        .args(["--tool", "claude"])
        .arg(n.to_string())
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let m = measure(&mut cmd);
    // Exit 1: the iterations ran out without the completion marker.
    assert_eq!(m.exit_code, Some(1), "ralph.sh did not run its {n} iterations");
    m.wall.as_secs_f64()
}

/// Seconds to spawn `agent` `n` times, as ralph does: its output piped and
/// read to the end, then reaped.
fn spawn_directly(agent: &std::path::Path, n: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        let out = Command::new(agent)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("spawn the no-op agent");
        assert!(out.status.success());
    }
    start.elapsed().as_secs_f64()
}

struct Spawns {
    processes: usize,
    threads: usize,
}

/// Processes and threads created by ralph during `n` iterations, from an
/// strace of every fork, vfork and clone (None without strace).
fn count_spawns(agent: &std::path::Path, n: u32) -> Option<Spawns> {
    let strace = which::which("strace").ok()?;
    let project = Project::new(&prd_json(1), NO_BRAKES);
    let trace = project.tmp.path().join("trace");
    let status = project
        .command(strace)
        .args(["-f", "-qq", "-e", "trace=fork,vfork,clone,clone3", "-e", "signal=none", "-o"])
        .arg(&trace)
        .arg(common::ralph_bin())
        .arg(n.to_string())
        .arg("--agent-cmd")
        .arg(agent)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if status.code() != Some(1) {
        return None;
    }
    let text = std::fs::read_to_string(&trace).ok()?;
    let mut spawns = Spawns { processes: 0, threads: 0 };
    // `pid clone3({flags=…}, …) = child` or `… <unfinished ...>`; the
    // `<... clone3 resumed>` half of a split line carries no flags.
    for line in text.lines().filter(|l| !l.contains("resumed>")) {
        let call = line.split_whitespace().nth(1).unwrap_or("");
        let call = call.split('(').next().unwrap_or("");
        match call {
            "fork" | "vfork" => spawns.processes += 1,
            "clone" | "clone3" if line.contains("CLONE_THREAD") => spawns.threads += 1,
            "clone" | "clone3" => spawns.processes += 1,
            _ => {}
        }
    }
    Some(spawns)
}
