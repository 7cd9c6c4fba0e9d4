//! Starting a supervised child as `posix_spawn` does — the child shares
//! ralph's memory (`CLONE_VM | CLONE_VFORK`) until it calls `execve` — plus
//! the two steps `posix_spawn` cannot take: the parent-death signal and the
//! Landlock ruleset.
//!
//! Why not `std::process::Command` with `pre_exec`: any `pre_exec` makes
//! std `fork()`, which copies ralph's page tables (its heap, its relocated
//! data) for a child that replaces them a moment later, and leaves every
//! page ralph writes next to fault once. Measured with perf on a loop of
//! no-op agents, that fork was the largest single cost of an iteration
//! (about 0.5 ms of 2.5). Here the parent is suspended for the microseconds
//! until the child's `execve`, and nothing is copied.
//!
//! The child runs on a stack of its own in ralph's memory, so between
//! `clone` and `execve` it makes system calls only: no allocation (another
//! thread may hold the allocator's lock), no locks, no panics. Everything
//! it needs — the program's candidate paths, argv, envp, the cwd — is made
//! before, here in the parent. It reports the `errno` of a failed step
//! through the [`Plan`] it shares with the parent, as glibc does.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

/// What to start.
pub struct Spec<'a> {
    /// A path (with a `/`: taken as it is, from `cwd`) or a name searched in
    /// the child's `PATH`, as `execvp` does.
    pub program: &'a str,
    pub args: &'a [String],
    pub cwd: &'a Path,
    /// The child's whole environment.
    pub env: &'a [(OsString, OsString)],
    /// A pipe to its stdin; otherwise `/dev/null`.
    pub stdin: bool,
    /// Sent by the kernel to the child when the thread that started it
    /// ends (ralph dies).
    pub death_signal: Option<super::Signal>,
    /// A Landlock ruleset the child is confined to before `execve`.
    pub ruleset: Option<&'a OwnedFd>,
}

/// A started child: its pid (also its process group) and ralph's ends of
/// its pipes.
pub struct Spawned {
    pub pid: u32,
    pub stdin: Option<File>,
    pub stdout: File,
    pub stderr: File,
}

/// Everything the child reads, made before it exists.
struct Plan {
    /// Where `execve` is tried, in order.
    candidates: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    /// `/bin/sh <candidate> <args>`, for a script without a `#!` line
    /// (what execvp does on ENOEXEC); the child puts the candidate in.
    sh_argv: Vec<std::cell::Cell<*const libc::c_char>>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    /// What becomes the child's 0, 1 and 2.
    stdio: [RawFd; 3],
    parent: libc::pid_t,
    death_signal: libc::c_int,
    /// -1: unconfined.
    ruleset: RawFd,
    /// The errno of the step that failed; 0 while none has.
    error: AtomicI32,
}

/// The child's stack: it only makes system calls, in one frame of a few
/// hundred bytes. Small enough to come from the allocator's heap, not a
/// fresh mapping whose pages would fault in on every spawn.
const STACK: usize = 64 * 1024;

/// Starts `spec` in a new process group of its own.
pub fn spawn(spec: &Spec<'_>) -> std::io::Result<Spawned> {
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let (child_in, stdin) = if spec.stdin {
        let (r, w) = pipe()?;
        (r, Some(File::from(w)))
    } else {
        (OwnedFd::from(File::open("/dev/null")?), None)
    };
    let c = |bytes: &[u8]| {
        CString::new(bytes).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in an argument")
        })
    };
    let argv_owned = std::iter::once(spec.program)
        .chain(spec.args.iter().map(String::as_str))
        .map(|a| c(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let envp_owned = spec
        .env
        .iter()
        .map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
        .collect::<Result<Vec<_>, _>>()?;
    let path = spec.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_os_str());
    let candidates = candidates(spec.program, path)
        .iter()
        .map(|p| c(p.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let with_null = |v: &[CString]| {
        v.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
    };
    let sh = CString::from(c"/bin/sh");
    let sh_argv = std::iter::once(sh.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .chain(argv_owned[1..].iter().map(|a| a.as_ptr()))
        .chain(std::iter::once(std::ptr::null()))
        .map(std::cell::Cell::new)
        .collect();
    let plan = Plan {
        candidates,
        argv: with_null(&argv_owned),
        sh_argv,
        envp: with_null(&envp_owned),
        cwd: c(spec.cwd.as_os_str().as_bytes())?,
        stdio: [child_in.as_raw_fd(), out_write.as_raw_fd(), err_write.as_raw_fd()],
        // SAFETY: getpid has no preconditions and cannot fail.
        parent: unsafe { libc::getpid() },
        death_signal: spec.death_signal.map_or(0, super::Signal::as_raw),
        ruleset: spec.ruleset.map_or(-1, AsRawFd::as_raw_fd),
        error: AtomicI32::new(0),
    };
    // Uninitialised: the child writes its frame before reading it.
    let mut stack: Vec<u8> = Vec::with_capacity(STACK);
    // The stack grows down from its end, which must be 16-byte aligned.
    let top = (stack.as_mut_ptr() as usize + STACK) & !15;
    // SAFETY: every signal is blocked around clone so no handler of
    // ralph's runs on the child's stack before the child resets them; the
    // old mask is restored whatever clone did. clone runs `child` on the
    // stack above, in ralph's memory, with `plan`, which outlives it: with
    // CLONE_VFORK this thread is suspended until the child has called
    // execve or exited, and `child` touches nothing else.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &plan as *const Plan as *mut libc::c_void,
        );
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(stack);
    let error = plan.error.load(Ordering::SeqCst);
    if error != 0 {
        // The child exited without becoming the program: reap it.
        let _ = wait(pid as u32);
        return Err(std::io::Error::from_raw_os_error(error));
    }
    Ok(Spawned { pid: pid as u32, stdin, stdout: out_read.into(), stderr: err_read.into() })
}

/// Waits for the child `pid` to end, as `Child::wait` does.
pub fn wait(pid: u32) -> std::io::Result<ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let pid = libc::pid_t::try_from(pid).map_err(std::io::Error::other)?;
    loop {
        let mut status = 0;
        // SAFETY: waitpid on a pid into a live local.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(ExitStatus::from_raw(status));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Where `execve` is tried for `program`: itself when it names a path,
/// else each folder of `path` in order (an empty entry is the cwd), or the
/// default search path of glibc's `execvp` without one.
fn candidates(program: &str, path: Option<&OsStr>) -> Vec<OsString> {
    if program.contains('/') {
        return vec![program.into()];
    }
    let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            let dir = if dir.is_empty() { b".".as_slice() } else { dir };
            let mut full = OsString::from(OsStr::from_bytes(dir));
            full.push("/");
            full.push(program);
            full
        })
        .collect()
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array on success; they
    // are then owned here and nowhere else.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// The child, between clone and execve: system calls only (see the module
/// doc). Returns only by `_exit`.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Plan`, alive while this runs (the
    // parent is suspended); every call below is a system call on data the
    // plan owns, or on this stack.
    unsafe {
        let plan = &*(arg as *const Plan);
        let fail = |errno: libc::c_int| -> ! {
            plan.error.store(errno.max(1), Ordering::SeqCst);
            libc::_exit(127)
        };
        let errno = || *libc::__errno_location();
        // ralph's handlers would run ralph's code in ralph's memory: back to
        // the default. std's own SIGPIPE ignore is undone too, as std does;
        // other ignored signals stay ignored (inherited, as with fork).
        for sig in 1..=libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            if handled || (sig == libc::SIGPIPE && old.sa_sigaction == libc::SIG_IGN) {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
        if libc::setpgid(0, 0) != 0 {
            fail(errno());
        }
        if plan.death_signal != 0 {
            libc::prctl(libc::PR_SET_PDEATHSIG, plan.death_signal as libc::c_ulong, 0, 0, 0);
            if libc::getppid() != plan.parent {
                // ralph died between clone and prctl.
                libc::_exit(137);
            }
        }
        for (target, &fd) in plan.stdio.iter().enumerate() {
            let target = target as libc::c_int;
            // dup2 leaves the new descriptor without close-on-exec; onto
            // itself it changes nothing, so the flag is cleared by hand.
            let rc = if fd == target {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if rc < 0 {
                fail(errno());
            }
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            fail(errno());
        }
        if plan.ruleset >= 0 {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
                fail(errno());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, plan.ruleset, 0u32) != 0 {
                fail(errno());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // As execvp: a folder the program is not in, or cannot be looked
        // in, is passed over; permission denied anywhere is what is told
        // when no folder has it; any other failure is told at once.
        let mut denied = false;
        for candidate in &plan.candidates {
            libc::execve(candidate.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            match errno() {
                libc::ENOEXEC => {
                    // A script without a `#!` line: the shell runs it.
                    plan.sh_argv[1].set(candidate.as_ptr());
                    let argv = plan.sh_argv.as_ptr() as *const *const libc::c_char;
                    libc::execve(plan.sh_argv[0].get(), argv, plan.envp.as_ptr());
                    fail(errno())
                }
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                other => fail(other),
            }
        }
        fail(if denied { libc::EACCES } else { libc::ENOENT })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Signal;
    use std::io::{Read, Write};

    fn env() -> Vec<(OsString, OsString)> {
        std::env::vars_os().collect()
    }

    /// `program` with no arguments, no stdin, no death signal, unconfined.
    fn plain<'a>(program: &'a str, cwd: &'a Path, env: &'a [(OsString, OsString)]) -> Spec<'a> {
        Spec { program, args: &[], cwd, env, stdin: false, death_signal: None, ruleset: None }
    }

    fn run(spec: &Spec<'_>) -> (ExitStatus, String, String) {
        let mut child = spawn(spec).unwrap();
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(b"from stdin\n").unwrap();
        }
        let (mut out, mut err) = (String::new(), String::new());
        child.stdout.read_to_string(&mut out).unwrap();
        child.stderr.read_to_string(&mut err).unwrap();
        (wait(child.pid).unwrap(), out, err)
    }

    #[test]
    fn a_child_gets_its_args_env_cwd_stdin_and_own_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = env();
        env.push(("RALPH_SPAWN_TEST".into(), "yes".into()));
        let args = ["-c".to_string(), "read l; echo \"$l|$RALPH_SPAWN_TEST|$(pwd)|$1\"; ps -o pgid= -p $$; echo oops >&2; exit 3".into(), "sh".into(), "one arg".into()];
        let spec = Spec {
            program: "sh",
            args: &args,
            cwd: dir.path(),
            env: &env,
            stdin: true,
            death_signal: Some(Signal::Kill),
            ruleset: None,
        };
        let (status, out, err) = run(&spec);
        assert_eq!(status.code(), Some(3));
        let mut lines = out.lines();
        let cwd = dir.path().canonicalize().unwrap();
        assert_eq!(lines.next().unwrap(), format!("from stdin|yes|{}|one arg", cwd.display()));
        let pgid: u32 = lines.next().unwrap().trim().parse().unwrap();
        assert_ne!(pgid, std::process::id(), "a process group of its own");
        assert_eq!(err, "oops\n");
    }

    #[test]
    fn a_missing_or_unrunnable_program_is_told_as_execvp_tells_it() {
        let dir = tempfile::tempdir().unwrap();
        let env = env();
        let spec = |program| plain(program, dir.path(), &env);
        let missing = spawn(&spec("ralph-no-such-program")).err().unwrap();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        std::fs::write(dir.path().join("plain"), "#!/bin/sh\n").unwrap();
        let denied = spawn(&spec("./plain")).err().unwrap();
        assert_eq!(denied.kind(), std::io::ErrorKind::PermissionDenied);
        let gone = Spec { cwd: &dir.path().join("gone"), ..spec("sh") };
        assert_eq!(spawn(&gone).err().unwrap().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_script_without_a_shebang_line_is_run_by_the_shell_as_execvp_does() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("agent");
        std::fs::write(&script, "echo \"no shebang: $0 $1\"\n").unwrap();
        let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
        std::fs::set_permissions(&script, mode).unwrap();
        let env = env();
        let args = ["one".to_string()];
        let spec = Spec { args: &args, ..plain("./agent", dir.path(), &env) };
        let (status, out, err) = run(&spec);
        assert!(status.success(), "{out}{err}");
        assert_eq!(out, "no shebang: ./agent one\n");
    }

    #[test]
    fn the_search_path_is_the_child_s_and_ralph_s_handlers_are_not_inherited() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let script = bin.join("only-here");
        std::fs::write(&script, "#!/bin/sh\nexec cat /proc/self/status\n").unwrap();
        let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
        std::fs::set_permissions(&script, mode).unwrap();
        let mut env: Vec<_> = env().into_iter().filter(|(k, _)| k != "PATH").collect();
        env.push(("PATH".into(), format!("/nowhere:{}:/usr/bin:/bin", bin.display()).into()));
        let (status, out, _) = run(&plain("only-here", dir.path(), &env));
        assert!(status.success(), "{out}");
        // Nothing blocked, nothing caught; SIGPIPE (bit 13) not ignored.
        let mask = |name: &str| {
            let line = out.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{out}");
        assert_eq!(mask("SigCgt:"), 0, "{out}");
        assert_eq!(mask("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "{out}");
    }
}
