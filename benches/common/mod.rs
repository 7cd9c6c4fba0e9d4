//! What the benches share: the release `ralph` binary, a child's wall time
//! and peak RSS from wait4(2), a throw-away git project, and the report
//! (a table on stdout, plus tab-separated rows for `bench/compare.sh`).
//!
//! Every figure is the median of several runs, with the spread printed
//! next to it: one slow run on a shared machine should not decide.

#![allow(dead_code)] // Each bench uses its own part of this module.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The ralph under test: cargo builds it with the bench profile (release);
/// `$RALPH_BENCH_BIN` names another build to measure instead (to compare
/// a change against this one).
pub fn ralph_bin() -> PathBuf {
    std::env::var_os("RALPH_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ralph")), PathBuf::from)
}

/// One finished child.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub wall: Duration,
    /// Peak resident set of the child and of its reaped children. Linux
    /// also counts what the spawning process had resident when the child
    /// exec'd (the bench: a few MiB, less than ralph), so it is an upper
    /// bound.
    pub max_rss_kb: u64,
    pub exit_code: Option<i32>,
}

/// Runs `cmd` to its end and measures it. Its stdio is whatever `cmd`
/// says; pipes would need readers, so benches send output to files.
pub fn measure(cmd: &mut Command) -> Measured {
    let start = Instant::now();
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our unreaped child; both out-pointers point at
        // live locals of the right types.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "wait4: {e}");
    }
    let wall = start.elapsed();
    // The child is reaped; std's handle must not wait for it again.
    std::mem::forget(child);
    let exit_code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Measured { wall, max_rss_kb: usage.ru_maxrss as u64, exit_code }
}

/// Median, minimum and maximum of `samples` (sorted in place).
pub fn spread(samples: &mut [f64]) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let median =
        if n % 2 == 1 { samples[n / 2] } else { (samples[n / 2 - 1] + samples[n / 2]) / 2.0 };
    (median, samples[0], samples[n - 1])
}

/// The 1-minute load average: a figure taken on a busy machine says so.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|l| l.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// Prints the bench's heading with the machine's load.
pub fn heading(title: &str) {
    let load = load_average();
    println!("\n{title}  (load average {load:.2}, {} cpus)", available_cpus());
    // The previous bench keeps one core busy in the 1-minute average.
    if load > 1.5 {
        println!("  warning: the machine is busy; figures may be high");
    }
}

fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One result: printed as a table row, and appended as `key\tvalue\tunit`
/// to `$RALPH_BENCH_OUT` when set (bench/compare.sh collects those).
pub fn report(key: &str, label: &str, value: f64, unit: &str, detail: &str) {
    println!("  {label:<46} {value:>10.2} {unit:<6} {detail}");
    if let Some(path) = std::env::var_os("RALPH_BENCH_OUT") {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {}: {e}", Path::new(&path).display()));
        writeln!(f, "{key}\t{value:.3}\t{unit}").expect("write the bench output");
    }
}

/// How many times to repeat a measurement: `$RALPH_BENCH_RUNS`, else `default`.
pub fn runs(default: usize) -> usize {
    std::env::var("RALPH_BENCH_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(default).max(1)
}

/// A git repository with `prd.json` committed, in a fresh temporary folder.
pub struct Project {
    pub tmp: tempfile::TempDir,
}

impl Project {
    pub fn new(prd: &str, config: &str) -> Project {
        let tmp = tempfile::tempdir().expect("temp dir");
        let p = Project { tmp };
        std::fs::create_dir_all(p.dir().join(".ralph")).unwrap();
        std::fs::create_dir_all(p.home()).unwrap();
        std::fs::write(p.dir().join("prd.json"), prd).unwrap();
        std::fs::write(p.dir().join(".ralph/config.toml"), config).unwrap();
        p.git(&["init", "-q", "-b", "main"]);
        p.git(&["add", "-A"]);
        p.git(&["commit", "-q", "-m", "Add the PRD"]);
        p
    }

    pub fn dir(&self) -> PathBuf {
        self.tmp.path().join("project")
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    fn git(&self, args: &[&str]) {
        let status = self
            .command("git")
            .args(args)
            .env("GIT_AUTHOR_NAME", "Bench")
            .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
            .env("GIT_COMMITTER_NAME", "Bench")
            .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
            .stdout(Stdio::null())
            .status()
            .expect("run git");
        assert!(status.success(), "git {args:?}");
    }

    /// `ralph` in this project, with no user config and no inherited
    /// RALPH_* variables.
    pub fn ralph(&self) -> Command {
        self.command(ralph_bin())
    }

    /// `program` in this project's hermetic environment.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        for (k, _) in std::env::vars_os() {
            if k.to_str().is_some_and(|k| k.starts_with("RALPH_")) {
                cmd.env_remove(k);
            }
        }
        cmd.current_dir(self.dir())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        cmd
    }
}

/// A prd.json of `n` unfinished stories.
pub fn prd_json(n: usize) -> String {
    let mut s = String::from(
        "{\n  \"project\": \"Bench\",\n  \"branchName\": \"main\",\n  \"description\": \"bench\",\n  \"userStories\": [\n",
    );
    for i in 1..=n {
        s.push_str(&format!(
            "    {{\"id\": \"US-{i:05}\", \"title\": \"Story {i}\", \"description\": \"As a user I want feature {i}\", \"acceptanceCriteria\": [\"it works\", \"tests pass\"], \"priority\": {i}, \"passes\": false, \"notes\": \"\"}}{}\n",
            if i == n { "" } else { "," }
        ));
    }
    s.push_str("  ]\n}\n");
    s
}

/// Configuration that lets a no-op agent run every iteration: no circuit
/// breaker, no calls-per-hour limit, no handoff required, no pause.
pub const NO_BRAKES: &str = "\
[run]
require_handoff = false
pause = \"0s\"

[circuit]
no_progress = 0
same_error = 0
permission_denials = 0
failures = 0

[limits]
calls_per_hour = 0
";

/// A shell line with which a scripted agent marks its story passing in
/// prd.json. It names the interpreter itself, not `python3` on PATH: a
/// pyenv or asdf shim is a shell script that costs ~0.1 s per call, which
/// would be counted as ralph's.
pub fn mark_story_line() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is on PATH");
    let python = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!python.is_empty(), "python3 names no interpreter");
    format!(
        r#"'{python}' -c 'import json, os
p = os.environ["RALPH_PRD"]; d = json.load(open(p))
for s in d["userStories"]:
    if s["id"] == os.environ["RALPH_STORY_ID"]: s["passes"] = True
json.dump(d, open(p, "w"), indent=2)'"#
    )
}

/// A program on PATH, as an absolute path.
pub fn program(name: &str) -> PathBuf {
    which::which(name).unwrap_or_else(|e| panic!("{name} is not on PATH: {e}"))
}
