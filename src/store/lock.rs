//! The work tree's lock: one run per work tree, whatever its PRD.
//!
//! Two locks, both released by the OS when ralph dies, however it dies:
//!
//! - **The work tree's git directory** (`.git/`, or `.git/worktrees/<name>/`
//!   for a linked worktree), locked with `flock`. It is what keeps a second
//!   run out: an agent can delete any file of ralph's, but not the git
//!   directory it works in without losing the repository. Two runs with
//!   different PRDs in one checkout would switch HEAD under each other, so
//!   the lock is the work tree's, not the PRD's.
//! - **The lock file** (`.git/ralph/lock`), also locked: what an older ralph
//!   locks, so the two never run at once, and what says who holds the work
//!   tree — the pid and the PRD, for the message a second run gets and for
//!   `ralph status`. An agent may delete it: the run writes it again at its
//!   next iteration ([`Lock::hold`]), and meanwhile the holder's pid is read
//!   from `/proc/locks`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock, held for the whole run. Dropping it empties the file (so the
/// next run does not mistake a clean exit for a crash) and releases both
/// locks.
#[derive(Debug)]
pub struct Lock {
    /// The git directory, locked: held from start to end, whatever happens to files.
    _dir: File,
    file: File,
    path: PathBuf,
    prd: PathBuf,
}

/// Who holds a work tree's lock, as far as can be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    /// The PRD its run works on.
    pub prd: Option<PathBuf>,
}

impl Holder {
    /// Whether the holder's run is on `prd` (a holder of unknown PRD may be).
    pub fn works_on(&self, prd: &Path) -> bool {
        self.prd.as_deref().is_none_or(|p| same_file(p, prd))
    }
}

/// Why the lock could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it.
    Busy(Holder),
    Io(io::Error),
}

/// What taking the lock found about the previous holder.
#[derive(Debug, PartialEq, Eq)]
pub enum PreviousHolder {
    None,
    /// The file names a pid that no longer runs: that run crashed or was killed.
    Dead(u32),
}

/// Takes the work tree's lock for this process's run on `prd`: the git
/// directory `dir`, then the lock file at `path`.
pub fn lock(path: &Path, dir: &Path, prd: &Path) -> Result<(Lock, PreviousHolder), LockError> {
    let dir_file = File::open(dir).map_err(LockError::Io)?;
    // A look by `ralph status` (or the page, every few tenths of a second)
    // holds a shared lock for an instant: that is not a run.
    for tries_left in (0..10).rev() {
        match dir_file.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) if tries_left > 0 => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(fs::TryLockError::WouldBlock) => return Err(LockError::Busy(holder(path, dir))),
            Err(fs::TryLockError::Error(e)) => return Err(LockError::Io(e)),
        }
    }
    let (file, previous) = acquire(path, prd)?;
    let holder = match previous.pid {
        Some(pid) if pid != std::process::id() && !crate::process::pid_alive(pid) => {
            PreviousHolder::Dead(pid)
        }
        _ => PreviousHolder::None,
    };
    let lock = Lock { _dir: dir_file, file, path: path.to_path_buf(), prd: prd.to_path_buf() };
    Ok((lock, holder))
}

impl Lock {
    /// Makes sure the lock file at its path is still the one this run
    /// holds. An agent may delete or replace it (`rm -rf`, `git clean`):
    /// the git directory's lock still keeps other runs out, and the file is
    /// made again here, so it goes on naming this run. If another ralph
    /// holds the new file (one too old to lock the git directory), the run
    /// must stop (`Busy`).
    pub fn hold(&mut self) -> Result<(), LockError> {
        use std::os::unix::fs::MetadataExt;
        let held = self.file.metadata().map_err(LockError::Io)?;
        if fs::metadata(&self.path).is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino()) {
            return Ok(());
        }
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir).map_err(LockError::Io)?;
        }
        // The old file's lock goes with it when it is replaced here.
        self.file = acquire(&self.path, &self.prd)?.0;
        Ok(())
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// Opens (creating) and locks the lock file, writing this process's pid
/// and PRD; returns what it said before.
fn acquire(path: &Path, prd: &Path) -> Result<(File, Holder), LockError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(LockError::Io)?;
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let previous = parse(&text);
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Err(LockError::Busy(previous)),
        Err(fs::TryLockError::Error(e)) => return Err(LockError::Io(e)),
    }
    file.set_len(0).map_err(LockError::Io)?;
    file.seek(io::SeekFrom::Start(0)).map_err(LockError::Io)?;
    write!(file, "{}\n{}\n", std::process::id(), prd.display()).map_err(LockError::Io)?;
    let _ = file.sync_data();
    Ok((file, previous))
}

/// What a lock file says: the pid on its first line, the PRD on its second
/// (a file an older ralph wrote has the pid only).
fn parse(text: &str) -> Holder {
    let mut lines = text.lines();
    let pid = lines.next().and_then(|l| l.trim().parse().ok());
    let prd = lines.next().map(str::trim).filter(|l| !l.is_empty()).map(PathBuf::from);
    Holder { pid, prd }
}

/// Who holds the lock: the file's word, and when the file says no pid (an
/// agent deleted it), the kernel's, from `/proc/locks`.
fn holder(path: &Path, dir: &Path) -> Holder {
    let mut h =
        fs::read_to_string(path).map(|t| parse(&t)).unwrap_or(Holder { pid: None, prd: None });
    if h.pid.is_none() {
        h.pid = crate::process::flock_holder(dir);
    }
    h
}

/// Who holds the work tree's lock right now, without taking it (for
/// `ralph status` and `ralph reset-circuit`); `None` when nobody does.
pub fn lock_holder(path: &Path, dir: &Path) -> Option<Holder> {
    let busy = |f: &File| match f.try_lock_shared() {
        Ok(()) => {
            let _ = f.unlock();
            false
        }
        Err(_) => true,
    };
    let dir_busy = File::open(dir).is_ok_and(|f| busy(&f));
    let file_busy = File::open(path).is_ok_and(|f| busy(&f));
    (dir_busy || file_busy).then(|| holder(path, dir))
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || a.canonicalize().ok().zip(b.canonicalize().ok()).is_some_and(|(a, b)| a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("git");
        fs::create_dir_all(dir.join("ralph")).unwrap();
        let file = dir.join("ralph/lock");
        (tmp, dir, file)
    }

    #[test]
    fn one_holder_per_work_tree_whatever_the_prd() {
        let (_tmp, dir, file) = setup();
        let (held, prev) = lock(&file, &dir, Path::new("/p/prd.json")).unwrap();
        assert_eq!(prev, PreviousHolder::None);
        // Another PRD in the same work tree: the same lock, and who holds it.
        match lock(&file, &dir, Path::new("/p/other/prd.json")) {
            Err(LockError::Busy(h)) => assert_eq!(
                h,
                Holder { pid: Some(std::process::id()), prd: Some("/p/prd.json".into()) }
            ),
            other => panic!("expected busy, got {other:?}"),
        }
        let h = lock_holder(&file, &dir).unwrap();
        assert!(h.works_on(Path::new("/p/prd.json")) && !h.works_on(Path::new("/p/x.json")));
        drop(held);
        assert_eq!(lock_holder(&file, &dir), None);
    }

    #[test]
    fn the_lock_outlives_its_file() {
        let (_tmp, dir, file) = setup();
        let (mut held, _) = lock(&file, &dir, Path::new("/p/prd.json")).unwrap();
        fs::remove_file(&file).unwrap();
        // The git directory's lock keeps a second run out; the kernel names its pid.
        match lock(&file, &dir, Path::new("/p/prd.json")) {
            Err(LockError::Busy(h)) => assert_eq!(h.pid, Some(std::process::id())),
            other => panic!("expected busy, got {other:?}"),
        }
        // The run writes its file again.
        held.hold().unwrap();
        assert_eq!(parse(&fs::read_to_string(&file).unwrap()).pid, Some(std::process::id()));
    }

    #[test]
    fn a_dead_previous_holder_is_reported() {
        let (_tmp, dir, file) = setup();
        // Pid numbers this high are beyond Linux's pid_max, so never alive.
        fs::write(&file, "99999999\n").unwrap();
        let (_held, prev) = lock(&file, &dir, Path::new("/p/prd.json")).unwrap();
        assert_eq!(prev, PreviousHolder::Dead(99_999_999));
    }

    #[test]
    fn lock_files_old_and_new_are_read() {
        let cases: &[(&str, Option<u32>, Option<&str>)] = &[
            ("123\n/p/prd.json\n", Some(123), Some("/p/prd.json")),
            ("123\n", Some(123), None),
            ("", None, None),
            ("garbage not a pid", None, None),
            ("\n/p/prd.json\n", None, Some("/p/prd.json")),
        ];
        for (text, pid, prd) in cases {
            assert_eq!(parse(text), Holder { pid: *pid, prd: prd.map(PathBuf::from) }, "{text:?}");
        }
    }
}
