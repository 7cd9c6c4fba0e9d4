//! Short helper commands — git against a remote, `gh auth token`,
//! notify-send — supervised like agents but lighter: their own process
//! group (not ended with ralph: a git killed mid-fetch leaves its locks),
//! both outputs read whole,
//! and after `timeout` their whole group ends (SIGTERM, a short grace,
//! SIGKILL). Unlike [`super::run`] they never sweep ralph's other
//! children: they run beside agents and workers, which a sweep would end.
//! What they leave in their own group (an `ssh` git started) is ended when
//! they exit, so a pipe it holds cannot keep ralph reading forever.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{self, Signal};

/// Between SIGTERM and SIGKILL for a helper that ran out of time.
const GRACE: Duration = Duration::from_millis(500);

/// For the first this long, look every millisecond (most helper calls,
/// a push to a near remote, end within tens of milliseconds); then every
/// 5 ms.
const POLL_FAST: Duration = Duration::from_millis(200);

/// How a helper command ended.
#[derive(Debug)]
pub struct Brief {
    /// `None`: it ran out of time and was ended.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Brief {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    pub fn timed_out(&self) -> bool {
        self.status.is_none()
    }
}

/// Runs `cmd` (its program, arguments and environment as the caller set
/// them; stdin, stdout and stderr are set here) for at most `timeout`.
/// Errs only when it cannot be started.
pub fn run_brief(cmd: &mut Command, timeout: Duration) -> std::io::Result<Brief> {
    // Not ended with ralph (no parent-death signal): git killed in the
    // middle of a fetch or push leaves its lock files behind, and the next
    // call fails on them; a helper is bounded by `timeout` and short.
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn()?;
    let pgid = child.id() as i32;
    // The sweep after an agent (running on another thread) must not end it.
    process::keep_out_of_sweeps(pgid);
    let out = read_all(child.stdout.take());
    let err = read_all(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() < timeout => {
                let fast = started.elapsed() < POLL_FAST;
                thread::sleep(Duration::from_millis(if fast { 1 } else { 5 }));
            }
            // Out of time, or it cannot be waited for.
            _ => {
                process::signal_group(pgid, Signal::Term);
                let until = Instant::now() + GRACE;
                while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
                    thread::sleep(Duration::from_millis(5));
                }
                process::signal_group(pgid, Signal::Kill);
                let _ = child.wait();
                break None;
            }
        }
    };
    // Whatever it left in its group would hold the pipes open.
    if process::group_alive(pgid) {
        process::signal_group(pgid, Signal::Kill);
    }
    process::release(pgid);
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(Brief { status, stdout, stderr })
}

/// A thread that reads `pipe` to its end (lossily as UTF-8).
fn read_all<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `super::run`'s sweep in another test would end these children.
    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_helper_s_output_and_status_are_read_whole() {
        let _serial = crate::agent::supervise::serial();
        let b =
            run_brief(&mut sh("echo out; echo err >&2; exit 3"), Duration::from_secs(30)).unwrap();
        assert_eq!((b.stdout.as_str(), b.stderr.as_str()), ("out\n", "err\n"));
        assert_eq!(b.status.and_then(|s| s.code()), Some(3));
        assert!(!b.success() && !b.timed_out());
    }

    #[test]
    fn a_helper_out_of_time_is_ended_with_its_group() {
        let _serial = crate::agent::supervise::serial();
        // A child of the helper holds the pipes: ended with it, so the
        // read does not wait for the child's 60 s.
        let b = run_brief(&mut sh("sleep 60 & echo started; wait"), Duration::from_millis(300))
            .unwrap();
        assert!(b.timed_out(), "{b:?}");
        assert_eq!(b.stdout, "started\n");
    }

    #[test]
    fn what_a_helper_leaves_in_its_group_does_not_hold_ralph() {
        let _serial = crate::agent::supervise::serial();
        let b = run_brief(&mut sh("sleep 60 & echo done"), Duration::from_secs(30)).unwrap();
        assert!(b.success(), "{b:?}");
        assert_eq!(b.stdout, "done\n");
    }

    #[test]
    fn the_sweep_after_an_agent_leaves_a_helper_running_beside_it_alone() {
        let _serial = crate::agent::supervise::serial();
        let dir = tempfile::tempdir().unwrap();
        let started = dir.path().join("started");
        let script = format!("touch '{}'; sleep 0.5; echo ok", started.display());
        let helper =
            thread::spawn(move || run_brief(&mut sh(&script), Duration::from_secs(30)).unwrap());
        // The helper is under way when an agent's sweep ends ralph's strays.
        let until = Instant::now() + Duration::from_secs(30);
        while !started.exists() && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
        assert!(started.exists(), "the helper never started");
        crate::agent::supervise::sweep(i32::MAX, Duration::from_millis(200));
        let b = helper.join().unwrap();
        assert!(b.success() && b.stdout == "ok\n", "{b:?}");
    }

    #[test]
    fn a_program_that_does_not_exist_is_an_error() {
        let _serial = crate::agent::supervise::serial();
        let e = run_brief(&mut Command::new("/nonexistent/x"), Duration::from_secs(1));
        assert_eq!(e.unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }
}
