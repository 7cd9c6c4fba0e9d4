//! SIGINT / SIGTERM / SIGHUP: the handler only records the signal; the
//! driver and the supervisor look at [`pending`] between steps and while
//! they wait on a child.
//!
//! The agent runs in its own process group, so the terminal's Ctrl-C never
//! reaches it directly: ralph stops it (TERM, grace, KILL) and then exits
//! 130. A second Ctrl-C skips the grace period.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use crate::process::Signal;

/// The first signal's number; 0 until one arrives.
static FIRST: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicU32 = AtomicU32::new(0);

extern "C" fn record(signal: i32) {
    // Only async-signal-safe work here: two atomic stores.
    let _ = FIRST.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Installs the handlers. Also ignores SIGXFSZ, so that hitting a file-size
/// limit makes the write fail with EFBIG (which ralph reports) instead of
/// killing ralph between a temp-file write and its rename.
pub fn install() {
    crate::process::on_signals(&[Signal::Int, Signal::Term, Signal::Hup], record);
    crate::process::ignore_signal(Signal::Xfsz);
}

/// The first signal received, if any.
pub fn pending() -> Option<Signal> {
    Signal::from_raw(FIRST.load(Ordering::SeqCst))
}

/// How many signals have arrived: the second one means "stop now".
pub fn count() -> u32 {
    COUNT.load(Ordering::SeqCst)
}

/// The exit code for a run stopped by `signal`.
pub fn exit_code(signal: Signal) -> u8 {
    match signal {
        Signal::Int => crate::exit::INTERRUPTED,
        Signal::Hup => crate::exit::HANGUP,
        _ => crate::exit::TERMINATED,
    }
}

/// Makes ralph the reaper of every process its agents leave behind.
///
/// Claude Code runs each tool command in a new session, so killing the
/// agent's process group misses them; when their parent dies they are
/// re-parented to the nearest subreaper — ralph — where the supervisor can
/// find and end them. Linux only; elsewhere the group kill is all we have.
pub fn become_subreaper() {
    crate::process::become_subreaper();
}
