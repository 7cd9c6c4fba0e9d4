//! The command line as people use it: output piped into `head` or `true`,
//! the spellings of ralph.sh and ralph-claude-code, typos, and the flags
//! every command honours or refuses out loud.

use std::os::fd::FromRawFd;
use std::process::Stdio;

use crate::harness::*;

/// The write end of a pipe whose read end is already closed: what a
/// command's stdout is after `| head` has read its fill, or under `| true`.
/// Every write to it fails with EPIPE, so the test does not race the reader.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: fds[0] was just opened by pipe(2) and is not used again.
    unsafe { libc::close(fds[0]) };
    // SAFETY: fds[1] is an open descriptor that nothing else owns.
    Stdio::from(unsafe { std::fs::File::from_raw_fd(fds[1]) })
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_with_the_commands_own_code() {
    let p = Project::with_prd(THREE_STORIES);
    p.write("agent.log", "some agent output\n");
    let commands: &[&[&str]] = &[
        &["config", "show"],
        &["config", "show", "--json"],
        &["agents"],
        &["agents", "--json"],
        &["rules", "list"],
        &["rules", "list", "--json"],
        &["completions", "bash"],
        &["man"],
        &["status"],
        &["status", "--json"],
        &["analyze", "agent.log"],
        &["analyze", "agent.log", "--json"],
        &["--help"],
        &["--version"],
    ];
    for args in commands {
        let out = p.ralph().args(*args).stdout(closed_pipe()).output().expect("run ralph");
        let r = to_run(out);
        assert!(!r.stderr.contains("panicked"), "{args:?}: {r:?}");
        assert_eq!(r.stderr, "", "{args:?}: {r:?}");
        assert_eq!(r.code, code(exit::COMPLETE), "{args:?}: {r:?}");
    }
}

#[test]
fn an_error_with_stderr_closed_still_exits_with_its_code() {
    let p = Project::with_prd(THREE_STORIES);
    let out = p
        .ralph()
        .args(["analyze", "no-such-file"])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .output()
        .expect("run ralph");
    assert_eq!(out.status.code(), Some(code(exit::USAGE)), "{out:?}");
}
