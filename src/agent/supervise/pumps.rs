//! The child's output on its way to the sinks, and its exit status on its
//! way to the supervisor.
//!
//! One thread does both: it polls the two pipes and a pidfd of the child,
//! hands each read to its sink and reaps the child the moment it exits,
//! whether or not what it left running still holds the pipes. A thread
//! per pipe and one blocked in `waitpid` did the same with three threads
//! made and ended per iteration; that is still the way on a kernel without
//! pidfds (before Linux 5.3).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::Sink;
use crate::process;

/// The child's exit status, once reaped.
pub(super) type Done = mpsc::Receiver<io::Result<ExitStatus>>;

/// The sinks as the pumps fill them, and what the supervisor reads of them.
pub(super) struct Pumps<O, E> {
    out: Arc<Mutex<Option<O>>>,
    err: Arc<Mutex<Option<E>>>,
    /// When either last showed a sign of life, in ms since the start.
    activity: Arc<AtomicU64>,
    /// One message as each pipe reaches its end.
    ended: mpsc::Receiver<()>,
}

/// One pipe's reading: its sink, and where its signs of life and its end go.
struct Pipe<S> {
    sink: Arc<Mutex<Option<S>>>,
    activity: Arc<AtomicU64>,
    start: Instant,
    ended: mpsc::Sender<()>,
}

impl<S: Sink> Pipe<S> {
    /// Hands `chunk` to the sink, noting a sign of life.
    fn deliver(&self, chunk: &[u8]) {
        let mut sink = self.sink.lock().unwrap_or_else(|p| p.into_inner());
        if sink.as_ref().is_none_or(|s| s.is_sign_of_life(chunk)) {
            self.activity.store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        if let Some(s) = sink.as_mut() {
            s.write(chunk);
        }
    }

    /// One read of `reader` delivered; false at its end (or a read error).
    fn pump_once(&self, reader: &mut File, buf: &mut [u8]) -> bool {
        loop {
            match reader.read(buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.deliver(&buf[..n]);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = self.ended.send(());
        false
    }
}

impl<O: Sink, E: Sink> Pumps<O, E> {
    /// Starts reading `stdout` and `stderr` of the child `pid` into `out`
    /// and `err`, and waiting for it: its status arrives on the receiver.
    pub(super) fn start(
        pid: u32,
        (stdout, stderr): (File, File),
        (out, err): (O, E),
        start: Instant,
    ) -> (Self, Done) {
        let activity = Arc::new(AtomicU64::new(0));
        let (ended_tx, ended) = mpsc::channel::<()>();
        let (done_tx, done) = mpsc::channel();
        let out = Arc::new(Mutex::new(Some(out)));
        let err = Arc::new(Mutex::new(Some(err)));
        let out_pipe =
            Pipe { sink: out.clone(), activity: activity.clone(), start, ended: ended_tx.clone() };
        let err_pipe =
            Pipe { sink: err.clone(), activity: activity.clone(), start, ended: ended_tx };
        match pidfd_open(pid) {
            Ok(pidfd) => {
                thread::spawn(move || {
                    poll_all(pid, pidfd, [stdout, stderr], (out_pipe, err_pipe), done_tx);
                });
            }
            Err(_) => {
                spawn_pump(stdout, out_pipe);
                spawn_pump(stderr, err_pipe);
                thread::spawn(move || {
                    let _ = done_tx.send(process::spawn::wait(pid));
                });
            }
        }
        (Pumps { out, err, activity, ended }, done)
    }

    /// Since the start, when the child last showed a sign of life.
    pub(super) fn last_activity(&self) -> Duration {
        Duration::from_millis(self.activity.load(Ordering::Relaxed))
    }

    pub(super) fn tell_stopping(&self) {
        tell_stopping(&self.out);
        tell_stopping(&self.err);
    }

    /// The sinks, finished, once the pipes are read to their end. They
    /// close once every process holding them is gone; a process outside
    /// our reach could hold them forever, so the wait is bounded.
    pub(super) fn drain(self, tick: &mut dyn FnMut()) -> (O, E) {
        let until = Instant::now() + Duration::from_secs(2);
        for _ in 0..2 {
            let left = until.saturating_duration_since(Instant::now());
            if self.ended.recv_timeout(left).is_err() {
                break;
            }
        }
        tick();
        let (Some(mut out), Some(mut err)) = (take(&self.out), take(&self.err)) else {
            unreachable!("sinks are only taken here");
        };
        out.finish();
        err.finish();
        (out, err)
    }
}

/// Reads both pipes to their end and reaps `pid` when `pidfd` says it
/// exited, all on this thread.
fn poll_all<O: Sink, E: Sink>(
    pid: u32,
    pidfd: OwnedFd,
    mut pipes: [File; 2],
    (out, err): (Pipe<O>, Pipe<E>),
    done: mpsc::Sender<io::Result<ExitStatus>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut open = [true, true];
    let mut reaped = false;
    while open[0] || open[1] || !reaped {
        // A negative fd is one poll leaves out.
        let fd = |on: bool, raw: i32| if on { raw } else { -1 };
        let mut fds = [
            poll_fd(fd(open[0], pipes[0].as_raw_fd())),
            poll_fd(fd(open[1], pipes[1].as_raw_fd())),
            poll_fd(fd(!reaped, pidfd.as_raw_fd())),
        ];
        // SAFETY: `fds` is a live array of three pollfd structs, as the
        // count says; poll writes only their `revents`.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if rc < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if open[0] && fds[0].revents != 0 {
            open[0] = out.pump_once(&mut pipes[0], &mut buf);
        }
        if open[1] && fds[1].revents != 0 {
            open[1] = err.pump_once(&mut pipes[1], &mut buf);
        }
        if !reaped && fds[2].revents != 0 {
            reaped = true;
            let _ = done.send(process::spawn::wait(pid));
        }
    }
    if !reaped {
        let _ = done.send(process::spawn::wait(pid));
    }
}

fn poll_fd(fd: i32) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// A pidfd of the child `pid`: readable once it has exited.
fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1;
    // it touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(io::Error::other)?;
    // SAFETY: the fd was just made by the kernel for us and nothing else
    // owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A thread reading `reader` to its end: the way without pidfds.
fn spawn_pump<S: Sink>(mut reader: File, pipe: Pipe<S>) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while pipe.pump_once(&mut reader, &mut buf) {}
    });
}

fn tell_stopping<S: Sink>(sink: &Mutex<Option<S>>) {
    if let Some(s) = sink.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        s.stopping();
    }
}

fn take<S>(sink: &Mutex<Option<S>>) -> Option<S> {
    sink.lock().unwrap_or_else(|p| p.into_inner()).take()
}
