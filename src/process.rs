//! Processes on this machine, as far as ralph needs to know and move them:
//! signals to a pid or a process group and whether it is alive, ralph's own
//! descendants (from /proc) and reaping them, the parent-death signal of a
//! child, the signal handlers and the child subreaper, and the leftovers of
//! a crashed run. Every libc call and /proc walk of ralph is here, so each
//! `unsafe` sits next to the others with its reason.
//!
//! A crashed run is found by what it stamped on its agents: the run id and
//! the project directory in their environment (`RALPH_RUN_ID`,
//! `RALPH_PROJECT_DIR`). Both must match before ralph touches a process, so
//! a resume in one project never ends another project's agents, even when
//! two runs somehow share an id.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

pub mod spawn;

/// The effective user id (claude refuses its bypass flag as root).
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether a process with this pid exists.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 performs only the permission and existence check.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A signal, by name: those ralph sends (TERM, KILL), handles (INT, TERM,
/// HUP) or ignores (XFSZ), and those it names when one ends an agent. The
/// number crosses no module but this one: [`Signal::as_raw`] for libc,
/// [`Signal::from_raw`] for what the kernel reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Signal {
    Hup,
    Int,
    Quit,
    Ill,
    Trap,
    Abrt,
    Bus,
    Fpe,
    Kill,
    Usr1,
    Segv,
    Usr2,
    Pipe,
    Alrm,
    Term,
    Cont,
    Stop,
    Xcpu,
    Xfsz,
    Sys,
    /// A signal without a name here (a real-time one, SIGPROF, …): only
    /// [`Signal::from_raw`] makes one, so it is never a named one's number.
    Other(Unnamed),
}

/// The number of a [`Signal::Other`]; private, so none names a signal
/// that has a variant of its own.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Unnamed(libc::c_int);

impl Signal {
    const NAMED: [Signal; 20] = [
        Signal::Hup,
        Signal::Int,
        Signal::Quit,
        Signal::Ill,
        Signal::Trap,
        Signal::Abrt,
        Signal::Bus,
        Signal::Fpe,
        Signal::Kill,
        Signal::Usr1,
        Signal::Segv,
        Signal::Usr2,
        Signal::Pipe,
        Signal::Alrm,
        Signal::Term,
        Signal::Cont,
        Signal::Stop,
        Signal::Xcpu,
        Signal::Xfsz,
        Signal::Sys,
    ];

    /// Its number, for libc.
    pub fn as_raw(self) -> libc::c_int {
        match self {
            Signal::Hup => libc::SIGHUP,
            Signal::Int => libc::SIGINT,
            Signal::Quit => libc::SIGQUIT,
            Signal::Ill => libc::SIGILL,
            Signal::Trap => libc::SIGTRAP,
            Signal::Abrt => libc::SIGABRT,
            Signal::Bus => libc::SIGBUS,
            Signal::Fpe => libc::SIGFPE,
            Signal::Kill => libc::SIGKILL,
            Signal::Usr1 => libc::SIGUSR1,
            Signal::Segv => libc::SIGSEGV,
            Signal::Usr2 => libc::SIGUSR2,
            Signal::Pipe => libc::SIGPIPE,
            Signal::Alrm => libc::SIGALRM,
            Signal::Term => libc::SIGTERM,
            Signal::Cont => libc::SIGCONT,
            Signal::Stop => libc::SIGSTOP,
            Signal::Xcpu => libc::SIGXCPU,
            Signal::Xfsz => libc::SIGXFSZ,
            Signal::Sys => libc::SIGSYS,
            Signal::Other(Unnamed(raw)) => raw,
        }
    }

    /// The signal numbered `raw` (as an exit status or a handler reports
    /// it); `None` for 0 and below, which no signal is.
    pub fn from_raw(raw: libc::c_int) -> Option<Signal> {
        if raw <= 0 {
            return None;
        }
        let named = Signal::NAMED.into_iter().find(|s| s.as_raw() == raw);
        Some(named.unwrap_or(Signal::Other(Unnamed(raw))))
    }

    /// "KILL" for SIGKILL: the name without its `SIG`; `None` for
    /// [`Signal::Other`].
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Signal::Hup => "HUP",
            Signal::Int => "INT",
            Signal::Quit => "QUIT",
            Signal::Ill => "ILL",
            Signal::Trap => "TRAP",
            Signal::Abrt => "ABRT",
            Signal::Bus => "BUS",
            Signal::Fpe => "FPE",
            Signal::Kill => "KILL",
            Signal::Usr1 => "USR1",
            Signal::Segv => "SEGV",
            Signal::Usr2 => "USR2",
            Signal::Pipe => "PIPE",
            Signal::Alrm => "ALRM",
            Signal::Term => "TERM",
            Signal::Cont => "CONT",
            Signal::Stop => "STOP",
            Signal::Xcpu => "XCPU",
            Signal::Xfsz => "XFSZ",
            Signal::Sys => "SYS",
            Signal::Other(_) => return None,
        })
    }
}

/// As its number, which is what the JSON of an agent's end has always said.
impl serde::Serialize for Signal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i32(self.as_raw())
    }
}

/// Sends `signal` to one process; a process that is gone is no error.
pub fn signal_pid(pid: i32, signal: Signal) {
    // SAFETY: kill(2) has no memory effects and fails harmlessly (ESRCH)
    // when the process is gone.
    unsafe {
        libc::kill(pid, signal.as_raw());
    }
}

/// Sends `signal` to every process of group `pgid`.
pub fn signal_group(pgid: i32, signal: Signal) {
    // SAFETY: kill(2) with a negative pid signals that process group; it has
    // no memory effects and fails harmlessly (ESRCH) when the group is gone.
    unsafe {
        libc::kill(-pgid, signal.as_raw());
    }
}

/// Whether a process group still has members.
pub fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Whether process group `pgid` is alive and one of its processes works in
/// `dir`: a recorded pgid may have been reused by an unrelated program
/// since the crash, and that one must not be touched.
pub fn group_works_in(pgid: i32, dir: &Path) -> bool {
    if !group_alive(pgid) {
        return false;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else { return false };
    procs.flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
            return false;
        };
        stat(pid).is_some_and(|p| p.pgid == pgid)
            && std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
    })
}

/// A process as /proc/<pid>/stat tells it.
#[derive(Debug, Clone, Copy)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    /// Exited, not yet reaped.
    pub zombie: bool,
}

/// Processes a sweep must leave alone, with all below them: the workers of
/// a parallel run, which end their own agents (and are reaped by the
/// thread that waits for them).
static KEPT: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Keeps `pid` and its descendants out of [`descendants`] until [`release`].
pub fn keep_out_of_sweeps(pid: i32) {
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
}

pub fn release(pid: i32) {
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).retain(|&p| p != pid);
}

/// Every process below `root`, found through /proc, but those kept out of
/// sweeps ([`keep_out_of_sweeps`]) and what runs below them.
pub fn descendants(root: i32) -> Vec<Proc> {
    let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for child in children(pid).into_iter().filter(|c| !kept.contains(c)) {
            if let Some(p) = stat(child) {
                found.push(p);
                queue.push(child);
            }
            if found.len() > 100_000 {
                return found;
            }
        }
    }
    found
}

/// Direct children of `pid`, from /proc/<pid>/task/*/children (cheap: no
/// scan of the whole process table), falling back to a scan of /proc.
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    let mut any = false;
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            any = true;
            out.extend(text.split_ascii_whitespace().filter_map(|s| s.parse::<i32>().ok()));
        }
    }
    if !any && let Ok(all) = std::fs::read_dir("/proc") {
        for e in all.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse().ok()) else { continue };
            if stat(p).is_some_and(|s| s.ppid == pid) {
                out.push(p);
            }
        }
    }
    out
}

fn stat(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// `pid (comm) state ppid pgrp …`; the command name may contain spaces and
/// parentheses, so the fields start after the last `)`.
fn parse_stat(pid: i32, text: &str) -> Option<Proc> {
    let rest = text.get(text.rfind(')')? + 2..)?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Proc { pid, ppid, pgid, zombie: state == "Z" || state == "X" })
}

/// Reaps those of `procs` that are children of this process (`me`) and
/// have exited; never blocks.
pub fn reap(procs: &[Proc], me: i32) {
    for p in procs.iter().filter(|p| p.ppid == me) {
        let mut status = 0;
        // SAFETY: waitpid on a specific pid that is our child, into a live
        // local; WNOHANG never blocks.
        unsafe {
            libc::waitpid(p.pid, &mut status, libc::WNOHANG);
        }
    }
}

/// Makes the kernel send `signal` to the child `cmd` starts when ralph
/// dies: SIGTERM lets a worker of a parallel run stop its own agent and
/// keep its story resumable. Linux only.
pub fn signal_on_parent_death(cmd: &mut Command, signal: Signal) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        let signal = signal.as_raw();
        // SAFETY: the closure runs between fork and exec, where only
        // async-signal-safe calls are allowed: prctl, getppid and _exit
        // are, and it touches no memory but its copied argument.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0);
                if libc::getppid() != parent {
                    // ralph died between fork and prctl.
                    libc::_exit(137);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (cmd, signal);
}

/// The Landlock ABI this kernel offers: 0 when it has none (not built
/// in, turned off at boot, or not Linux).
pub fn landlock_abi() -> u32 {
    #[cfg(target_os = "linux")]
    {
        // LANDLOCK_CREATE_RULESET_VERSION: asks for the ABI, creates nothing.
        const VERSION: libc::c_uint = 1;
        // SAFETY: with this flag landlock_create_ruleset reads no memory (a
        // null attribute pointer and size 0 are what it requires) and
        // returns the ABI version or -1.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                VERSION,
            )
        };
        u32::try_from(abi).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// The highest Landlock ABI ralph asks for: its rights are the ones ralph
/// was tested with (ABI 6: file rights, TCP connect, signal and abstract
/// socket scoping); a newer kernel enforces these, an older one the part
/// it knows.
pub const LANDLOCK_ABI: u32 = 6;

/// Why a child cannot be confined (the run's sandbox cannot be set up).
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("cannot set up the sandbox: {0}")]
    Ruleset(#[source] landlock::RulesetError),
    #[error("cannot set up the sandbox: this kernel has no Landlock")]
    NoLandlock,
    #[cfg(not(target_os = "linux"))]
    #[error("cannot set up the sandbox: Landlock is Linux only")]
    NotLinux,
}

/// Confines the child `cmd` starts to `policy`, at Landlock ABI `abi` (at
/// most [`LANDLOCK_ABI`]): the ruleset is built here, in ralph ([`ruleset`]),
/// and the child only enforces it between fork and exec, with two
/// async-signal-safe system calls. The child cannot undo it, nor can
/// anything it starts. (Supervised children are confined by
/// [`spawn::spawn`] instead, which does not fork.)
pub fn confine(
    cmd: &mut Command,
    policy: &crate::sandbox::Policy,
    abi: u32,
) -> Result<(), ConfineError> {
    let fd = ruleset(policy, abi)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs between fork and exec, where only
        // async-signal-safe calls are allowed: prctl and the raw
        // landlock_restrict_self system call are, and it touches no memory
        // but the descriptor it owns (close-on-exec, so the agent never
        // holds it).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let rc = libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32);
                if rc != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    Ok(())
}

/// The Landlock ruleset for `policy` at ABI `abi` (at most
/// [`LANDLOCK_ABI`]), built in ralph: paths opened, rules added; paths that
/// do not exist are skipped. A child enforces it before exec.
pub fn ruleset(
    policy: &crate::sandbox::Policy,
    abi: u32,
) -> Result<std::os::fd::OwnedFd, ConfineError> {
    #[cfg(target_os = "linux")]
    {
        use landlock::{
            ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath,
            PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
        };

        let abi = ABI::from(abi.min(LANDLOCK_ABI) as i32);
        let fail = ConfineError::Ruleset;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .map_err(fail)?;
        let net = policy.connect.is_some() && !AccessNet::from_all(abi).is_empty();
        if net {
            ruleset = ruleset.handle_access(AccessNet::ConnectTcp).map_err(fail)?;
        }
        if !Scope::from_all(abi).is_empty() {
            ruleset = ruleset.scope(Scope::from_all(abi)).map_err(fail)?;
        }
        let mut created = ruleset.create().map_err(fail)?;
        let rules =
            [(&policy.read, AccessFs::from_read(abi)), (&policy.write, AccessFs::from_all(abi))];
        for (paths, access) in rules {
            for path in paths {
                let Ok(fd) = PathFd::new(path) else { continue };
                created = created.add_rule(PathBeneath::new(fd, access)).map_err(fail)?;
            }
        }
        if net {
            for &port in policy.connect.iter().flatten() {
                created =
                    created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)).map_err(fail)?;
            }
        }
        // `None`: the kernel has no Landlock after all, nothing to enforce.
        Option::<std::os::fd::OwnedFd>::from(created).ok_or(ConfineError::NoLandlock)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (policy, abi);
        Err(ConfineError::NotLinux)
    }
}

/// Swaps two paths in one step (`renameat2` with `RENAME_EXCHANGE`): each
/// name then holds what the other did, and a reader of either sees one
/// whole file or the other. `Unsupported` where the kernel or the file
/// system cannot (not Linux, NFS, an old kernel): the caller renames.
pub fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let a = std::ffi::CString::new(a.as_os_str().as_bytes())?;
        let b = std::ffi::CString::new(b.as_os_str().as_bytes())?;
        // SAFETY: both are NUL-terminated strings that outlive the call;
        // renameat2 reads them and touches no other memory.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                Err(std::io::Error::new(std::io::ErrorKind::Unsupported, e))
            }
            _ => Err(e),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (a, b);
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

/// How many bytes `pipe` takes before a writer blocks. Usually 64 KiB, but
/// Linux shrinks new pipes to one page for a user over their pipe quota,
/// so it is asked, not assumed; 0 when unknown.
pub fn pipe_capacity(pipe: &impl AsRawFd) -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: F_GETPIPE_SZ only reads the size of a pipe the caller holds.
        let size = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_GETPIPE_SZ) };
        usize::try_from(size).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pipe.as_raw_fd();
        0
    }
}

/// Makes writes to `fd` fail with `WouldBlock` instead of waiting when its
/// pipe is full.
pub fn set_nonblocking(fd: &impl AsRawFd) {
    // SAFETY: F_GETFL / F_SETFL on a descriptor the caller holds; no memory is involved.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// Runs `handler` on each of `signals` (with SA_RESTART, so interrupted
/// reads and writes resume). The handler must be async-signal-safe; it is
/// given the signal's number, which [`Signal::from_raw`] reads.
pub fn on_signals(signals: &[Signal], handler: extern "C" fn(libc::c_int)) {
    for &signal in signals {
        // SAFETY: a zeroed sigaction is a valid starting value, and the
        // caller's handler is async-signal-safe (its contract above).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal.as_raw(), &action, std::ptr::null_mut());
        }
    }
}

/// Ignores `signal` from now on.
pub fn ignore_signal(signal: Signal) {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(signal.as_raw(), libc::SIG_IGN);
    }
}

/// Makes this process the reaper of its orphaned descendants (Linux only).
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and has no memory effects.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Whether a process's environment (`/proc/<pid>/environ`, NUL-separated)
/// and working directory say it belongs to run `run_id` of `project`. The
/// project is named by `RALPH_PROJECT_DIR`; a process whose environment
/// lacks it (a program that rebuilt its environment but kept the run id)
/// counts when it works inside the project.
pub fn belongs_to_run(environ: &[u8], cwd: Option<&Path>, run_id: &str, project: &Path) -> bool {
    let var = |name: &str| {
        let prefix = format!("{name}=");
        environ
            .split(|&b| b == 0)
            .find_map(|v| v.strip_prefix(prefix.as_bytes()))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    if var("RALPH_RUN_ID").as_deref() != Some(run_id) {
        return false;
    }
    match var("RALPH_PROJECT_DIR") {
        Some(dir) => Path::new(&dir) == project,
        None => cwd.is_some_and(|c| c.starts_with(project)),
    }
}

/// Every process (other than this one) that belongs to run `run_id` of
/// `project` ([`belongs_to_run`]): what a dead run's agents started in
/// sessions of their own.
pub fn processes_of_run(run_id: &str, project: &Path) -> Vec<i32> {
    others_where(|pid, environ| {
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        belongs_to_run(environ, cwd.as_deref(), run_id, project)
    })
}

/// Every process (other than this one) whose environment has `name=value`.
pub fn processes_with_env(name: &str, value: &str) -> Vec<i32> {
    let var = format!("{name}={value}");
    others_where(|_, environ| environ.split(|&b| b == 0).any(|v| v == var.as_bytes()))
}

/// The processes other than this one whose environment (and pid) pass `keep`.
fn others_where(keep: impl Fn(u32, &[u8]) -> bool) -> Vec<i32> {
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| keep(pid, &env))
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}

/// This process, as no other process on this machine since its boot can
/// be: `<pid>.<start time>` (a pid alone may be reused). What the
/// checkpoint names its run's process by, and what the watchdog finds the
/// processes it must end by.
pub fn instance() -> String {
    let pid = std::process::id();
    format!("{pid}.{}", start_time(pid).unwrap_or(0))
}

/// Whether the process an [`instance`] names still runs.
pub fn instance_running(instance: &str) -> bool {
    let Some((pid, start)) = instance.split_once('.') else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    running(pid as i32) && start_time(pid) == Some(start)
}

/// When a process started, in clock ticks after boot (`/proc/<pid>/stat`, field 22).
fn start_time(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&text)
}

fn parse_start_time(text: &str) -> Option<u64> {
    // After `pid (comm) `, the state is field 3: the start time is 19 further on.
    let rest = text.get(text.rfind(')')? + 2..)?;
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Whether a process exists and is not a zombie.
pub fn running(pid: i32) -> bool {
    stat(pid).is_some_and(|p| !p.zombie)
}

/// A process (other than this one) that has `path` open, if one this user
/// may look at does: git holds its `.lock` files open while it writes them.
pub fn holder_of(path: &Path) -> Option<u32> {
    let me = std::process::id();
    let target = path.canonicalize().ok()?;
    let procs = std::fs::read_dir("/proc").ok()?;
    procs.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()).find(|&pid| {
        pid != me
            && std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == target))
            })
    })
}

/// The process that holds a `flock` on `path`, as the kernel tells it in
/// `/proc/locks` (what names a run whose lock file an agent deleted).
pub fn flock_holder(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let dev = meta.dev();
    // glibc's gnu_dev_major / gnu_dev_minor.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    flock_holder_in(&text, (major, minor, meta.ino()))
}

/// The holder of a granted `flock` on the file `(major, minor, inode)` in
/// `/proc/locks` text: `1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`
/// (device numbers in hex; a waiting request has `->` after the number).
fn flock_holder_in(text: &str, file: (u64, u64, u64)) -> Option<u32> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, kind, _, _, pid, id, ..] = fields.as_slice() else { return None };
        let mut parts = id.split(':');
        let major = u64::from_str_radix(parts.next()?, 16).ok()?;
        let minor = u64::from_str_radix(parts.next()?, 16).ok()?;
        let inode = parts.next()?.parse::<u64>().ok()?;
        (*kind == "FLOCK" && (major, minor, inode) == file).then(|| pid.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_signal_is_its_number_and_back() {
        let cases = [
            (libc::SIGHUP, Some(Signal::Hup), Some("HUP")),
            (libc::SIGINT, Some(Signal::Int), Some("INT")),
            (libc::SIGKILL, Some(Signal::Kill), Some("KILL")),
            (libc::SIGTERM, Some(Signal::Term), Some("TERM")),
            (libc::SIGSEGV, Some(Signal::Segv), Some("SEGV")),
            (libc::SIGXFSZ, Some(Signal::Xfsz), Some("XFSZ")),
            (libc::SIGSTOP, Some(Signal::Stop), Some("STOP")),
            (libc::SIGPROF, None, None),
            (libc::SIGRTMIN() + 3, None, None),
        ];
        for (raw, named, name) in cases {
            let s = Signal::from_raw(raw).unwrap();
            assert_eq!((s.as_raw(), s.name()), (raw, name), "{raw}");
            if let Some(named) = named {
                assert_eq!(s, named, "{raw}");
            } else {
                assert!(matches!(s, Signal::Other(_)), "{raw}: {s:?}");
            }
        }
        for s in Signal::NAMED {
            assert_eq!(Signal::from_raw(s.as_raw()), Some(s), "{s:?}");
            assert_eq!(serde_json::to_string(&s).unwrap(), s.as_raw().to_string());
        }
        assert_eq!((Signal::from_raw(0), Signal::from_raw(-9)), (None, None));
        // Every variant is in NAMED: the classic signals without a name here are these.
        let unnamed: Vec<i32> =
            (1..32).filter(|&r| matches!(Signal::from_raw(r), Some(Signal::Other(_)))).collect();
        let want = [
            libc::SIGSTKFLT,
            libc::SIGCHLD,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGURG,
            libc::SIGVTALRM,
            libc::SIGPROF,
            libc::SIGWINCH,
            libc::SIGIO,
            libc::SIGPWR,
        ];
        assert_eq!(unnamed, want);
    }

    #[test]
    fn stat_lines() {
        let cases = [
            ("1234 (sh) S 1 1234 1234 0 -1", Some((1, 1234, false))),
            ("77 (a (weird) name) Z 5 6 6 0", Some((5, 6, true))),
            ("78 (x) X 5 6 6", Some((5, 6, true))),
            ("79 (no fields)", None),
            ("80 (x) R nope 6", None),
            ("", None),
        ];
        for (text, want) in cases {
            let got = parse_stat(9, text).map(|p| (p.ppid, p.pgid, p.zombie));
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn a_child_is_a_descendant_until_it_is_ended_and_reaped() {
        let _serial = crate::agent::supervise::serial();
        let me = std::process::id() as i32;
        let mut child = Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pid = child.id() as i32;
        assert!(pid_alive(child.id()) && group_alive(pid));
        let found = descendants(me).into_iter().find(|p| p.pid == pid).expect("the child");
        assert_eq!((found.ppid, found.pgid, found.zombie), (me, pid, false));
        signal_group(pid, Signal::Kill);
        let until = Instant::now() + Duration::from_secs(10);
        while descendants(me).iter().any(|p| p.pid == pid) && Instant::now() < until {
            reap(&descendants(me), me);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!descendants(me).iter().any(|p| p.pid == pid), "still there");
        assert!(!group_alive(pid));
        // Reaped already: std's wait finds no child.
        assert!(child.try_wait().is_err());
    }

    #[test]
    fn start_times_and_instances() {
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 50";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("42 (short) S 1 2"), None);
        let me = instance();
        assert!(me.starts_with(&format!("{}.", std::process::id())) && !me.ends_with(".0"));
        assert!(instance_running(&me));
        let (pid, start) = me.split_once('.').unwrap();
        let reused = format!("{pid}.{}", start.parse::<u64>().unwrap() + 1);
        for gone in [reused.as_str(), "99999999.1", "garbage", ""] {
            assert!(!instance_running(gone), "{gone}");
        }
    }

    #[test]
    fn flock_holders_are_read_from_proc_locks() {
        let text = "1: POSIX  ADVISORY  WRITE 11 fd:01:77 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 22 fd:01:77 0 EOF\n\
                    2: -> FLOCK  ADVISORY  WRITE 33 fd:01:77 0 EOF\n\
                    3: FLOCK  ADVISORY  READ 44 00:2d:9 0 EOF\n\
                    4: OFDLCK ADVISORY  READ -1 00:06:9 0 EOF\n";
        let cases = [
            ((0xfd, 1, 77), Some(22)),
            ((0, 0x2d, 9), Some(44)),
            ((0, 6, 9), None),
            ((0xfd, 1, 78), None),
        ];
        for (file, want) in cases {
            assert_eq!(flock_holder_in(text, file), want, "{file:?}");
        }
    }

    #[test]
    fn a_process_belongs_to_a_run_only_by_its_id_and_its_project() {
        let project = Path::new("/work/a");
        let env = |vars: &[&str]| vars.join("\0").into_bytes();
        #[rustfmt::skip]
        let cases: &[(&str, Vec<u8>, Option<&str>, bool)] = &[
            ("id and project match", env(&["X=1", "RALPH_RUN_ID=r1", "RALPH_PROJECT_DIR=/work/a"]), Some("/tmp"), true),
            ("another project, same id", env(&["RALPH_RUN_ID=r1", "RALPH_PROJECT_DIR=/work/b"]), Some("/work/a"), false),
            ("a project whose name extends ours", env(&["RALPH_RUN_ID=r1", "RALPH_PROJECT_DIR=/work/a2"]), None, false),
            ("another run", env(&["RALPH_RUN_ID=r2", "RALPH_PROJECT_DIR=/work/a"]), None, false),
            ("an id that extends ours", env(&["RALPH_RUN_ID=r1x", "RALPH_PROJECT_DIR=/work/a"]), None, false),
            ("no project variable, works inside", env(&["RALPH_RUN_ID=r1"]), Some("/work/a/src"), true),
            ("no project variable, works elsewhere", env(&["RALPH_RUN_ID=r1"]), Some("/work/b"), false),
            ("no project variable, cwd unknown", env(&["RALPH_RUN_ID=r1"]), None, false),
            ("no run id", env(&["RALPH_PROJECT_DIR=/work/a"]), Some("/work/a"), false),
            ("empty environment", Vec::new(), Some("/work/a"), false),
        ];
        for (name, environ, cwd, want) in cases {
            let got = belongs_to_run(environ, cwd.map(Path::new), "r1", project);
            assert_eq!(got, *want, "{name}");
        }
    }
}
