//! Commands a person runs by hand, end to end with the release binary:
//! `ralph --version` (process start-up and argument parsing) and
//! `ralph status` on a prd.json of 10,000 stories, in a git project.

mod common;

use std::process::{Command, Stdio};

use common::{NO_BRAKES, Project, heading, measure, prd_json, program, report, runs, spread};

const STORIES: usize = 10_000;

fn main() {
    heading("commands: start-up and status");
    let n = runs(50);

    let version = time(n, || {
        let mut cmd = Command::new(common::ralph_bin());
        cmd.arg("--version").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        cmd
    });
    let baseline = time(n, || {
        let mut cmd = Command::new(program("true"));
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        cmd
    });
    report("version_ms", "ralph --version", version.0, "ms", &range(version, n));
    report("true_ms", "  for scale: spawn `true`", baseline.0, "ms", &range(baseline, n));

    let project = Project::new(&prd_json(STORIES), NO_BRAKES);
    let status = time(n, || {
        let mut cmd = project.ralph();
        cmd.arg("status").stdout(Stdio::null()).stderr(Stdio::null());
        cmd
    });
    report("status_10k_ms", "ralph status, 10,000 stories", status.0, "ms", &range(status, n));
}

/// Median, min and max milliseconds of `n` runs of the command `make` builds.
fn time(n: usize, make: impl Fn() -> Command) -> (f64, f64, f64) {
    let mut ms: Vec<f64> = (0..n)
        .map(|_| {
            let m = measure(&mut make());
            assert_eq!(m.exit_code, Some(0), "{:?} failed", make());
            m.wall.as_secs_f64() * 1000.0
        })
        .collect();
    spread(&mut ms)
}

fn range((_, lo, hi): (f64, f64, f64), n: usize) -> String {
    format!("[{lo:.2} – {hi:.2}] ×{n}")
}
