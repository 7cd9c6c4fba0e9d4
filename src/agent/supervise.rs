//! Supervising one child process: its own process group, output drained
//! and the child reaped on one thread ([`pumps`]), wall-clock and idle
//! timeouts, SIGTERM → grace → SIGKILL, and an end to every process it
//! leaves behind.
//!
//! ```text
//!  spawn (setpgid 0) ──► prompt written (a thread only if it overflows the pipe)
//!        │
//!        ▼
//!  pump thread: poll(stdout, stderr, pidfd) ─► Sinks
//!               child reaped ──► channel ──► supervise loop
//!                                              (ticks: signals, timeout,
//!                                               idle, deadline)
//!  stop: Sink::stopping ─ killpg TERM ─ grace ─ killpg KILL
//!  after exit: sweep leftovers (group + adopted descendants), reap
//! ```
//!
//! Claude Code runs tool commands in new sessions, so a group kill misses
//! them; ralph is a child subreaper ([`crate::signals::become_subreaper`])
//! and the sweep walks its own descendants to end those too. If ralph dies
//! before it can, its watchdog ([`crate::watchdog`]) ends them: every child
//! carries ralph's instance in its environment, and the watchdog is told
//! each child's process group.

use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::analyze::StopReason;
use crate::process::{self, Signal};

pub mod brief;
mod pumps;
pub use brief::run_brief;
use pumps::Pumps;

/// How often the supervisor looks at signals and timers while it waits.
const TICK: Duration = Duration::from_millis(50);

/// Receives a stream's bytes on a pump thread.
pub trait Sink: Send + 'static {
    fn write(&mut self, chunk: &[u8]);
    /// ralph decided to stop the child (timeout, idle, signal, budget) and
    /// is about to send SIGTERM. Called under the sink's lock, so every
    /// chunk written before it was read before the decision and every
    /// chunk after it is what the child printed on its way out.
    fn stopping(&mut self) {}
    fn finish(&mut self) {}
    /// Whether `chunk` shows the child is getting anywhere, for the idle
    /// timeout. A CLI that repeats "still waiting for the network" for ever
    /// is as idle as a silent one.
    fn is_sign_of_life(&self, _chunk: &[u8]) -> bool {
        true
    }
}

/// Time limits for one child.
#[derive(Debug, Clone, Copy)]
pub struct TimeLimits {
    /// Wall clock for this child. `None`: no limit.
    pub timeout: Option<Duration>,
    /// No output for this long → stop. `None`: no idle limit.
    pub idle: Option<Duration>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// The run's overall deadline (`--max-duration`).
    pub deadline: Option<Instant>,
    /// Stop the child when ralph has a signal pending. Hooks set this to
    /// false: the `on_halt` hook of an interrupted run must get to tell
    /// someone, so only a signal that arrives while it runs stops it.
    pub interruptible: bool,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    pub program: &'a str,
    pub args: &'a [String],
    pub cwd: &'a Path,
    pub env_remove: &'a [String],
    pub env_set: &'a [(String, String)],
    pub stdin: Option<Vec<u8>>,
    pub limits: TimeLimits,
    /// The sandbox the child is confined to, with its private `TMPDIR`;
    /// `None`: unconfined.
    pub sandbox: Option<&'a crate::sandbox::Child>,
}

/// How the child ended.
#[derive(Debug, Clone)]
pub struct Finished {
    pub exit_code: Option<i32>,
    pub signal: Option<Signal>,
    pub stopped: Option<StopReason>,
    pub duration: Duration,
    /// Processes it left behind that ralph had to end.
    pub leftovers: usize,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && self.stopped.is_none()
    }
}

/// The child could not be started at all.
#[derive(Debug)]
pub struct SpawnError {
    pub program: String,
    pub source: io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source.kind() {
            io::ErrorKind::NotFound => write!(f, "`{}` not found", self.program),
            io::ErrorKind::PermissionDenied => {
                write!(f, "`{}` is not executable (permission denied)", self.program)
            }
            _ => write!(f, "cannot start `{}`: {}", self.program, self.source),
        }
    }
}

impl std::error::Error for SpawnError {}

/// What the supervisor tells its watcher, on the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervised {
    /// The child exists: its pid, which is its process group (a
    /// checkpoint names it, so a resume can end it after a crash).
    Spawned(u32),
    /// About every 50 ms while it runs (to show output).
    Tick,
    /// ralph is stopping it and waits up to `grace` before SIGKILL; a
    /// further Ctrl-C or SIGTERM to ralph kills it at once.
    Stopping { reason: StopReason, grace: Duration },
}

/// Runs `spec` to its end and returns how it ended plus both sinks.
/// `tick` runs on the calling thread about every 50 ms.
pub fn run<O: Sink, E: Sink>(
    spec: &Spec<'_>,
    out: O,
    err: E,
    tick: &mut dyn FnMut(),
) -> Result<(Finished, O, E), SpawnError> {
    run_watched(spec, out, err, &mut |s| {
        if s == Supervised::Tick {
            tick()
        }
    })
}

/// [`run`], telling `watch` what happens as it happens.
///
/// Its steps keep their order: the environment, then the ruleset (both
/// ready before the child exists), the spawn, the watchdog told of the
/// group, `Spawned` reported (the caller's checkpoint names the group), the
/// prompt written, the pumps and the waiter started; then the wait, the
/// sweep, the pipes drained.
pub fn run_watched<O: Sink, E: Sink>(
    spec: &Spec<'_>,
    out: O,
    err: E,
    watch: &mut dyn FnMut(Supervised),
) -> Result<(Finished, O, E), SpawnError> {
    let (child, start) = start_child(spec, watch)?;
    let pid = child.pid;
    let pgid = pid as i32;
    if let (Some(bytes), Some(stdin)) = (spec.stdin.clone(), child.stdin) {
        write_stdin(bytes, stdin);
    }
    let (pumps, done_rx) = Pumps::start(pid, (child.stdout, child.stderr), (out, err), start);
    let limits = spec.limits;
    let ending = wait_or_stop(pgid, &limits, start, &pumps, &done_rx, watch);
    // One grace for everything: a child that was stopped has had its
    // share; what is left of the grace is all its leftovers get.
    let sweep_grace = match ending.stop_until {
        Some(until) => until.saturating_duration_since(Instant::now()),
        None => limits.grace,
    };
    let leftovers = sweep(pgid, sweep_grace);
    crate::watchdog::forget_group(pgid);
    let (out, err) = pumps.drain(&mut || watch(Supervised::Tick));
    let status = ending.status;
    let finished = Finished {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()).and_then(Signal::from_raw),
        stopped: ending.stopped,
        duration: start.elapsed(),
        leftovers,
    };
    Ok((finished, out, err))
}

/// The child started, in a process group of its own and confined to its
/// sandbox, the watchdog told of its group and `watch` of its pid; with
/// the instant it started.
fn start_child(
    spec: &Spec<'_>,
    watch: &mut dyn FnMut(Supervised),
) -> Result<(process::spawn::Spawned, Instant), SpawnError> {
    let env = child_env(spec);
    let spawn_error = |source| SpawnError { program: spec.program.to_string(), source };
    let ruleset = match spec.sandbox {
        Some(sandbox) => Some(sandbox.ruleset().map_err(|e| spawn_error(io::Error::other(e)))?),
        None => None,
    };
    let start = Instant::now();
    let child = process::spawn::spawn(&process::spawn::Spec {
        program: spec.program,
        args: spec.args,
        cwd: spec.cwd,
        env: &env,
        stdin: spec.stdin.is_some(),
        // If ralph is killed with SIGKILL it can stop nothing: the kernel
        // ends the child for it.
        death_signal: Some(process::Signal::Kill),
        ruleset: ruleset.as_deref(),
    })
    .map_err(spawn_error)?;
    drop(ruleset);
    crate::watchdog::watch_group(child.pid as i32);
    watch(Supervised::Spawned(child.pid));
    Ok((child, start))
}

/// The child's whole environment: ralph's, less `env_remove`, plus
/// `env_set`, ralph's instance (what the watchdog finds the child's
/// leftovers by, if ralph dies) and its sandbox's `TMPDIR`.
fn child_env(spec: &Spec<'_>) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString> =
        std::env::vars_os().collect();
    for k in spec.env_remove {
        env.remove(std::ffi::OsStr::new(k));
    }
    for (k, v) in spec.env_set {
        env.insert(k.into(), v.into());
    }
    if let Some((k, v)) = crate::watchdog::env() {
        env.insert(k.into(), v.into());
    }
    if let Some(sandbox) = spec.sandbox {
        let (k, v) = sandbox.env();
        env.insert(k.into(), v.into());
    }
    env.into_iter().collect()
}

/// A prompt that fits in the pipe's buffer cannot block: it is written
/// here. A larger one gets its own thread, so it cannot deadlock against
/// an agent that writes before it reads. An agent that exits without
/// reading gives EPIPE, which is not our problem. (An unknown capacity is
/// 0: a thread, too.)
fn write_stdin(bytes: Vec<u8>, mut stdin: std::fs::File) {
    if bytes.len() <= process::pipe_capacity(&stdin) {
        let _ = stdin.write_all(&bytes);
    } else {
        thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
}

/// How the wait ended: the child's status, why ralph stopped it, and when
/// the grace it was given runs out.
struct Ending {
    status: Option<ExitStatus>,
    stopped: Option<StopReason>,
    stop_until: Option<Instant>,
}

/// Waits for the child, ticking `watch`, and stops it (TERM → grace →
/// KILL) once a signal, the deadline, its timeout or its idleness says so.
fn wait_or_stop<O: Sink, E: Sink>(
    pgid: i32,
    limits: &TimeLimits,
    start: Instant,
    pumps: &Pumps<O, E>,
    done: &mpsc::Receiver<io::Result<ExitStatus>>,
    watch: &mut dyn FnMut(Supervised),
) -> Ending {
    let signals_at_start = crate::signals::count();
    let ended = |status| Ending { status, stopped: None, stop_until: None };
    loop {
        match done.recv_timeout(TICK) {
            Ok(status) => return ended(status.ok()),
            Err(mpsc::RecvTimeoutError::Disconnected) => return ended(None),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        watch(Supervised::Tick);
        let now = Instant::now();
        let signalled = if limits.interruptible {
            crate::signals::pending().is_some()
        } else {
            crate::signals::count() > signals_at_start
        };
        let running = now.duration_since(start);
        let idle_for = running.saturating_sub(pumps.last_activity());
        if let Some(reason) = stop_reason(limits, signalled, now, running, idle_for) {
            pumps.tell_stopping();
            watch(Supervised::Stopping { reason, grace: limits.grace });
            let until = Instant::now() + limits.grace;
            let status = terminate(pgid, until, done, watch);
            return Ending { status, stopped: Some(reason), stop_until: Some(until) };
        }
    }
}

/// Why the child must stop now, if it must: ralph was signalled, the run's
/// deadline passed, the child ran out its time (`running`), or it showed
/// no sign of life for too long (`idle_for`).
fn stop_reason(
    limits: &TimeLimits,
    signalled: bool,
    now: Instant,
    running: Duration,
    idle_for: Duration,
) -> Option<StopReason> {
    if signalled {
        Some(StopReason::Interrupted)
    } else if limits.deadline.is_some_and(|d| now >= d) {
        Some(StopReason::Budget)
    } else if limits.timeout.is_some_and(|t| running >= t) {
        Some(StopReason::Timeout)
    } else if let Some(idle) = limits.idle {
        (idle_for >= idle).then_some(StopReason::Idle)
    } else {
        None
    }
}

/// SIGTERM to the group, wait out the grace period (a second Ctrl-C cuts
/// it short), then SIGKILL. Returns the exit status once reaped.
fn terminate(
    pgid: i32,
    until: Instant,
    done: &mpsc::Receiver<io::Result<ExitStatus>>,
    watch: &mut dyn FnMut(Supervised),
) -> Option<ExitStatus> {
    process::signal_group(pgid, Signal::Term);
    // Processes that left the group (new sessions) hear it now too, so
    // the one grace period covers them as well.
    let me = std::process::id() as i32;
    for p in process::descendants(me).iter().filter(|p| !p.zombie && p.pgid != pgid) {
        process::signal_pid(p.pid, Signal::Term);
    }
    let signals_before = crate::signals::count();
    loop {
        let now = Instant::now();
        if now >= until || crate::signals::count() > signals_before.max(1) {
            break;
        }
        match done.recv_timeout(TICK.min(until - now)) {
            Ok(status) => return status.ok(),
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            Err(mpsc::RecvTimeoutError::Timeout) => watch(Supervised::Tick),
        }
    }
    process::signal_group(pgid, Signal::Kill);
    // SIGKILL cannot be ignored; only a process stuck in the kernel survives it.
    done.recv_timeout(Duration::from_secs(10)).ok().and_then(Result::ok)
}

/// Ends what the child left behind: the rest of its process group, and
/// every descendant of ralph (orphans re-parented to ralph, the
/// subreaper). TERM, a grace period, then KILL; zombies are reaped.
/// Returns how many processes had to be ended.
pub fn sweep(pgid: i32, grace: Duration) -> usize {
    use process::{Proc, descendants, group_alive, reap, signal_group, signal_pid};
    let signals_at_start = crate::signals::count();
    let me = std::process::id() as i32;
    let live = |list: &[Proc]| list.iter().filter(|p| !p.zombie).count();
    let mut procs = descendants(me);
    reap(&procs, me);
    let in_group = group_alive(pgid);
    let count = live(&procs).max(usize::from(in_group));
    if count == 0 {
        return 0;
    }
    signal_group(pgid, Signal::Term);
    for p in procs.iter().filter(|p| !p.zombie) {
        signal_pid(p.pid, Signal::Term);
    }
    let until = Instant::now() + grace;
    loop {
        procs = descendants(me);
        reap(&procs, me);
        let remaining = live(&descendants(me)) > 0 || group_alive(pgid);
        // A further Ctrl-C or SIGTERM means: now.
        let hurry = crate::signals::count() > signals_at_start;
        if !remaining || hurry || Instant::now() >= until {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..100 {
        signal_group(pgid, Signal::Kill);
        let procs = descendants(me);
        for p in procs.iter().filter(|p| !p.zombie) {
            signal_pid(p.pid, Signal::Kill);
        }
        reap(&procs, me);
        if descendants(me).is_empty() && !group_alive(pgid) {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    count
}

/// The sweep ends every descendant of this process, so unit tests that
/// supervise children must not run at the same time as each other.
#[cfg(test)]
pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A sink that keeps a bounded tail (for gates and hooks).
#[derive(Debug)]
pub struct TailSink(pub super::capture::Tail);

impl Sink for TailSink {
    fn write(&mut self, chunk: &[u8]) {
        self.0.push(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::capture::Tail;

    use super::serial;

    fn spec<'a>(args: &'a [String], limits: TimeLimits) -> Spec<'a> {
        Spec {
            program: "sh",
            args,
            cwd: Path::new("/"),
            env_remove: &[],
            env_set: &[],
            stdin: None,
            limits,
            sandbox: None,
        }
    }

    fn limits(timeout_ms: u64) -> TimeLimits {
        TimeLimits {
            timeout: Some(Duration::from_millis(timeout_ms)),
            idle: None,
            grace: Duration::from_millis(300),
            deadline: None,
            interruptible: true,
        }
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["-c".into(), script.into()]
    }

    #[test]
    fn captures_both_streams_and_the_exit_code() {
        let _serial = serial();
        let args = sh("echo out; echo err >&2; exit 3");
        let (f, out, err) = run(
            &spec(&args, limits(10_000)),
            TailSink(Tail::new(100)),
            TailSink(Tail::new(100)),
            &mut || {},
        )
        .unwrap();
        assert_eq!(f.exit_code, Some(3));
        assert_eq!(f.stopped, None);
        assert_eq!(out.0.text(), "out\n");
        assert_eq!(err.0.text(), "err\n");
    }

    #[test]
    fn the_child_is_reaped_while_what_it_left_still_holds_its_pipes() {
        let _serial = serial();
        // The background sleep keeps stdout open after the shell exits: the
        // exit is seen at once, and the sweep ends the sleep. Were the exit
        // seen only once the pipes closed, the sleep would have ended on its
        // own first and nothing would be left to end.
        let args = sh("sleep 30 & echo started; exit 4");
        let (f, out, _) = run(
            &spec(&args, limits(60_000)),
            TailSink(Tail::new(100)),
            TailSink(Tail::new(100)),
            &mut || {},
        )
        .unwrap();
        assert_eq!((f.exit_code, f.stopped, f.leftovers), (Some(4), None, 1));
        assert_eq!(out.0.text(), "started\n");
    }

    #[test]
    fn timeout_kills_a_child_that_ignores_sigterm() {
        let _serial = serial();
        let args = sh("trap '' TERM; sleep 30");
        let (f, _, _) = run(
            &spec(&args, limits(200)),
            TailSink(Tail::new(10)),
            TailSink(Tail::new(10)),
            &mut || {},
        )
        .unwrap();
        assert_eq!(f.stopped, Some(StopReason::Timeout));
        assert_eq!(f.signal, Some(Signal::Kill));
        assert!(f.duration < Duration::from_secs(20), "{:?}", f.duration);
    }

    #[test]
    fn idle_timeout_fires_on_silence_only() {
        let _serial = serial();
        let args = sh("echo hi; sleep 30");
        let mut l = limits(60_000);
        l.idle = Some(Duration::from_millis(300));
        let (f, out, _) =
            run(&spec(&args, l), TailSink(Tail::new(10)), TailSink(Tail::new(10)), &mut || {})
                .unwrap();
        assert_eq!(f.stopped, Some(StopReason::Idle));
        assert_eq!(out.0.text(), "hi\n");
    }

    /// Records what a stream wrote, and where the stop came.
    struct Recording(Vec<u8>);

    impl Sink for Recording {
        fn write(&mut self, chunk: &[u8]) {
            self.0.extend_from_slice(chunk);
        }
        fn stopping(&mut self) {
            self.0.extend_from_slice(b"<stopping>");
        }
    }

    #[test]
    fn sinks_hear_of_the_stop_between_what_came_before_and_after() {
        let _serial = serial();
        let args = sh("echo before; trap 'echo after; exit 0' TERM; sleep 30 & wait");
        let (f, out, err) = run(
            &spec(&args, limits(300)),
            Recording(Vec::new()),
            Recording(Vec::new()),
            &mut || {},
        )
        .unwrap();
        assert_eq!(f.stopped, Some(StopReason::Timeout));
        assert_eq!(f.exit_code, Some(0));
        assert_eq!(String::from_utf8_lossy(&out.0), "before\n<stopping>after\n");
        assert_eq!(String::from_utf8_lossy(&err.0), "<stopping>");
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let _serial = serial();
        let s = Spec { program: "/nonexistent/agent", ..spec(&[], limits(1000)) };
        let e = run(&s, TailSink(Tail::new(1)), TailSink(Tail::new(1)), &mut || {}).unwrap_err();
        assert_eq!(e.to_string(), "`/nonexistent/agent` not found");
    }

    #[test]
    fn stdin_is_written_then_closed() {
        let _serial = serial();
        let args = sh("cat");
        let mut s = spec(&args, limits(10_000));
        s.stdin = Some(b"the prompt".to_vec());
        let (f, out, _) =
            run(&s, TailSink(Tail::new(100)), TailSink(Tail::new(10)), &mut || {}).unwrap();
        assert_eq!(f.exit_code, Some(0));
        assert_eq!(out.0.text(), "the prompt");
    }
}
