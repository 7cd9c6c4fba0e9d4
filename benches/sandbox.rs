//! What the sandbox costs per spawn, measured in-process on the release
//! build (end-to-end runs differ by less than their noise on a shared
//! 2-core machine): a child's set-up as a run does it — the kernel asked,
//! the policy computed (the home listed, the CLI's config read, the program
//! found), the private temp dir made and removed, the Landlock ruleset
//! built — and, separately, what starting the no-op `true` confined costs
//! over starting it unconfined (the set-up plus the child's
//! `landlock_restrict_self` before exec). The target is at most 1 ms.
//!
//! On a kernel without Landlock there is nothing to measure: it says so.

mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::{NO_BRAKES, Project, heading, prd_json, program, report, runs, spread};

const SPAWNS: u32 = 200;

fn main() {
    heading("sandbox: set-up per spawn (Landlock)");
    // A project and a home as a run has them.
    let project = Project::new(&prd_json(1), NO_BRAKES);
    let home = project.tmp.path().join("home");
    for dir in [".cargo/bin", ".config/nvim", ".ssh", ".local/share", ".npm", ".claude"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    // SAFETY: set before any thread of this bench starts; nothing reads
    // the environment concurrently.
    unsafe { std::env::set_var("HOME", &home) };
    let cwd = project.dir();
    let agent = program("true");
    let agent = agent.to_str().unwrap();
    if let Err(e) = ralph::sandbox_setup(&cwd, agent, false) {
        println!("  nothing to measure: {e}");
        return;
    }
    let runs = runs(5);
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..SPAWNS {
            f();
        }
        start.elapsed().as_secs_f64() * 1000.0 / f64::from(SPAWNS)
    };
    let setup_only = || ralph::sandbox_setup(&cwd, agent, false).unwrap();
    let confined = || ralph::sandbox_setup(&cwd, agent, true).unwrap();
    let plain = || {
        let status = Command::new(agent).current_dir(&cwd).stdin(Stdio::null()).status().unwrap();
        assert!(status.success());
    };
    let (mut setup, mut spawn_cost) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        setup.push(time(&setup_only));
        let unconfined = time(&plain);
        spawn_cost.push(time(&confined) - unconfined);
    }
    let (s, lo, hi) = spread(&mut setup);
    report(
        "setup_ms",
        "sandbox set-up per spawn (policy, temp dir, ruleset)",
        s,
        "ms",
        &format!("[{lo:.3} – {hi:.3}] over {runs} runs of {SPAWNS}; target ≤ 1 ms"),
    );
    let (c, lo, hi) = spread(&mut spawn_cost);
    report(
        "spawn_extra_ms",
        "a confined spawn of `true` over an unconfined one",
        c,
        "ms",
        &format!("[{lo:.3} – {hi:.3}]"),
    );
}
