//! Processes on this machine, as far as ralph needs to know them: whether a
//! pid or a process group is alive, and the leftovers of a crashed run.
//!
//! A crashed run is found by what it stamped on its agents: the run id and
//! the project directory in their environment (`RALPH_RUN_ID`,
//! `RALPH_PROJECT_DIR`). Both must match before ralph touches a process, so
//! a resume in one project never ends another project's agents, even when
//! two runs somehow share an id.

use std::path::Path;
use std::time::{Duration, Instant};

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

/// Whether process group `pgid` is alive and one of its processes works in
/// `dir`: a recorded pgid may have been reused by an unrelated program
/// since the crash, and that one must not be touched.
pub fn group_works_in(pgid: i32, dir: &Path) -> bool {
    if !crate::agent::supervise::group_alive(pgid) {
        return false;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else { return false };
    procs.flatten().any(|e| {
        let path = e.path();
        let in_group = std::fs::read_to_string(path.join("stat"))
            .ok()
            .and_then(|stat| {
                let rest = stat.get(stat.rfind(')')? + 2..)?.to_string();
                rest.split_whitespace().nth(2)?.parse::<i32>().ok()
            })
            .is_some_and(|g| g == pgid);
        in_group && std::fs::read_link(path.join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
    })
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

/// Ends every process (other than this one) that belongs to run `run_id` of
/// `project` ([`belongs_to_run`]): what a dead run's agents started in
/// sessions of their own. TERM, up to `grace`, then KILL. Returns how many
/// there were.
pub fn end_processes_of_run(run_id: &str, project: &Path, grace: Duration) -> usize {
    let me = std::process::id();
    let find = || -> Vec<libc::pid_t> {
        let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
        procs
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != me)
            .filter(|pid| {
                let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
                    return false;
                };
                let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
                belongs_to_run(&environ, cwd.as_deref(), run_id, project)
            })
            .filter_map(|pid| libc::pid_t::try_from(pid).ok())
            .collect()
    };
    let pids = find();
    let signal = |pids: &[libc::pid_t], sig| {
        for &pid in pids {
            // SAFETY: kill(2) on a pid we just found; fails harmlessly if it is gone.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    };
    signal(&pids, libc::SIGTERM);
    let until = Instant::now() + grace;
    while Instant::now() < until && !find().is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&find(), libc::SIGKILL);
    pids.len()
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

#[cfg(test)]
mod tests {
    use super::*;

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
