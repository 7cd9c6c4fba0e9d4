//! The watchdog: a small process of ralph's own that ends what ralph's
//! children left running when ralph dies without ending it itself
//! (`kill -9`, the OOM killer, a crash).
//!
//! ```text
//!  ralph ──stdin pipe──► ralph __watchdog <instance>   (own process group, cwd /, no environment)
//!    │  "+<pgid>" a child's group starts, "-<pgid>" it was swept
//!    │  every supervised child has RALPH_SUPERVISOR=<instance> in its environment
//!    ▼
//!  ralph dies → the pipe reads EOF → TERM to the groups still alive and to every
//!  process carrying the instance → up to 1 s → KILL → the watchdog exits
//! ```
//!
//! Why a watchdog and not only the subreaper: while ralph lives it is the
//! subreaper of everything its agents start, and its sweep ends all of it.
//! When ralph itself dies, that role dies with it: the agent is killed by
//! its parent-death signal, but that signal is not inherited, so the
//! agent's own children (a test run, a dev server; in its group or in a
//! session of their own) are re-parented to init and run on. Nothing that
//! dies with ralph can end them, so a process that outlives it must: the
//! watchdog learns the process groups of ralph's children as they start,
//! and finds the rest by the instance every child carries in its
//! environment — the instance, not the run id, so it never touches a new
//! ralph that resumed the same run meanwhile. It holds no lock and decides
//! nothing; a resume still ends what a watchdog could not (one killed too,
//! a process that rebuilt its environment and left the group).
//!
//! It gives what is left one second after TERM, not the configured grace:
//! the agent itself got SIGKILL from the kernel, and nothing of its tree
//! should outlive ralph by more than a moment.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::process::{self, Signal};

/// The variable every child of ralph's carries: the [`process::instance`]
/// of the ralph that started it.
pub const ENV: &str = "RALPH_SUPERVISOR";

/// How long what is left gets between TERM and KILL once ralph is gone.
const GRACE: Duration = Duration::from_secs(1);

/// This process's watchdog: its instance and the pipe to it.
struct Watch {
    instance: String,
    pipe: ChildStdin,
}

static WATCH: Mutex<Option<Watch>> = Mutex::new(None);

/// Starts this process's watchdog (once; a second call does nothing).
/// Without one (it could not start: the error is returned), ralph still
/// ends everything itself whenever it lives to do so.
pub fn start() -> std::io::Result<()> {
    let mut watch = WATCH.lock().unwrap_or_else(|p| p.into_inner());
    if watch.is_some() {
        return Ok(());
    }
    let instance = process::instance();
    let mut child = Command::new(std::env::current_exe()?)
        .args(["__watchdog", &instance])
        // It needs nothing of ralph's environment, and carries none of its
        // secrets or its children's markers.
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Out of the terminal's signals and of a kill of ralph's group.
        .process_group(0)
        .spawn()?;
    // It lives as long as ralph: the sweeps after a child must leave it be.
    process::keep_out_of_sweeps(child.id() as i32);
    let pipe = child.stdin.take().ok_or_else(|| std::io::Error::other("no pipe"))?;
    // A watchdog that stopped reading (SIGSTOP) must never stop ralph.
    process::set_nonblocking(&pipe);
    *watch = Some(Watch { instance, pipe });
    Ok(())
}

/// What a supervised child gets in its environment, if a watchdog runs.
pub fn env() -> Option<(&'static str, String)> {
    let watch = WATCH.lock().unwrap_or_else(|p| p.into_inner());
    watch.as_ref().map(|w| (ENV, w.instance.clone()))
}

/// A child's process group started.
pub fn watch_group(pgid: i32) {
    tell(&format!("+{pgid}\n"));
}

/// A child's process group was swept: nothing of it is left to end.
pub fn forget_group(pgid: i32) {
    tell(&format!("-{pgid}\n"));
}

fn tell(line: &str) {
    let mut watch = WATCH.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(w) = watch.as_mut() {
        // A few bytes into a pipe the watchdog drains, without blocking. A
        // watchdog that is gone is no reason to stop the run.
        let _ = w.pipe.write_all(line.as_bytes());
    }
}

/// One line from ralph: a group to watch (`+N`) or to forget (`-N`).
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Watch(i32),
    Forget(i32),
}

fn parse(line: &str) -> Option<Line> {
    let line = line.trim();
    let pgid = |s: &str| s.parse::<i32>().ok().filter(|&p| p > 1);
    match line.split_at_checked(1)? {
        ("+", n) => pgid(n).map(Line::Watch),
        ("-", n) => pgid(n).map(Line::Forget),
        _ => None,
    }
}

/// `ralph __watchdog <instance>`: follows what ralph tells it on stdin
/// until ralph is gone, then ends what its children left running.
pub fn serve(instance: &str) -> u8 {
    let mut groups = BTreeSet::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match parse(&line) {
            Some(Line::Watch(g)) => groups.insert(g),
            Some(Line::Forget(g)) => groups.remove(&g),
            None => false,
        };
    }
    end(instance, &groups);
    0
}

/// TERM to `groups` and to the processes carrying `instance`, up to
/// [`GRACE`] for them to end, then KILL to whatever still does (found
/// again: a process that forked meanwhile is ended too).
fn end(instance: &str, groups: &BTreeSet<i32>) {
    let left = || {
        let live: Vec<i32> = groups.iter().copied().filter(|&g| process::group_alive(g)).collect();
        (live, process::processes_with_env(ENV, instance))
    };
    let signal = |(live, pids): &(Vec<i32>, Vec<i32>), signal| {
        live.iter().for_each(|&g| process::signal_group(g, signal));
        pids.iter().for_each(|&p| process::signal_pid(p, signal));
    };
    let found = left();
    if found.0.is_empty() && found.1.is_empty() {
        return;
    }
    signal(&found, Signal::Term);
    let until = Instant::now() + GRACE;
    let gone = |(live, pids): &(Vec<i32>, Vec<i32>)| live.is_empty() && pids.is_empty();
    while Instant::now() < until && !gone(&left()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..50 {
        let now = left();
        if gone(&now) {
            break;
        }
        signal(&now, Signal::Kill);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ralph_tells_its_watchdog() {
        let cases = [
            ("+123", Some(Line::Watch(123))),
            ("-123\n", Some(Line::Forget(123))),
            // Never the whole process table, nor init's group.
            ("+0", None),
            ("+1", None),
            ("+-5", None),
            ("123", None),
            ("", None),
            ("+x", None),
        ];
        for (line, want) in cases {
            assert_eq!(parse(line), want, "{line:?}");
        }
    }
}
