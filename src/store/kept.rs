//! Writes to ralph's own state files that reuse their inodes.
//!
//! A temp file and a rename make one inode and free another on every
//! write, and on ext4 without a journal each inode made scans the ones
//! freed in the last minute: writing the checkpoint that way every
//! iteration was the loop's largest cost of its own. So the new content
//! goes into a spare file kept beside the target, and the two are swapped
//! in one step ([`crate::process::exchange`]): the old version becomes the
//! spare the next write fills.
//!
//! A spare is written over in place, so which inode may be filled is the
//! whole design. A file has up to three spares: `.<name>.<pid>.spare` for
//! writes a power cut may lose ([`write_kept`]), `.<name>.durable.<pid>.spare`
//! for the ones it must not ([`write_durable`]), and
//! `.<name>.parked.<pid>.spare`:
//!
//! - A durable write fills its spare, fsyncs it, swaps it in and fsyncs
//!   the folder, so the name leads to the new inode on disk too; that inode
//!   is then *committed*. Its own spare only ever holds what a durable swap
//!   took from the name, which the folder's fsync took off the name on disk:
//!   filling it never touches what the disk's name leads to.
//! - A cached write never fills the committed inode: when its spare holds
//!   it (the second cached write after a durable one), the committed inode
//!   is parked at `.<name>.parked.<pid>.spare` and what was parked there (a
//!   version older than the committed one) or a new file is filled, so a
//!   power cut leaves the committed version whole whatever else was lost.
//!   A cached version itself can be torn by a power cut, as one written any
//!   other way can be lost; the files written this way are read as damaged
//!   then, and rebuilt.
//!
//! Never for a file in the work tree: the spares stay until ralph ends
//! ([`drop_spares`]), where a person would see them. Those of a killed
//! ralph are removed by the next run ([`remove_dead_spares`]).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::hidden_beside;

/// What ralph knows of one file it writes this way.
#[derive(Debug, Default)]
struct Kept {
    /// The inode the last durable write left at the name, on disk as well.
    committed: Option<(u64, u64)>,
}

/// Which of a file's spares a write fills, or where one waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    Cached,
    Durable,
    /// Where the committed inode waits, out of the cached spare's way,
    /// for the next durable write to commit another.
    Parked,
}

/// Like [`super::write_replace`] (no fsync), for ralph's own files in its
/// state folder written every iteration: the agent-phase checkpoint, a
/// circuit counter's tick, the calls window. See the module's note.
pub fn write_kept(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write(path, bytes, Slot::Cached)
}

/// Like [`super::write_atomic`] (the content is on disk before the call
/// returns, and a power cut leaves this version or the previous one whole),
/// for ralph's own files in its state folder: the checkpoint a resume
/// relies on, the breaker's state, the rules. See the module's note.
pub fn write_durable(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write(path, bytes, Slot::Durable)
}

fn write(path: &Path, bytes: &[u8], slot: Slot) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // Never through a link: ralph's own state files are never one, and
    // `.git/ralph/` is the agent's to write, so a link there would have
    // the swap carry a file of the person's in here. The link itself is
    // swapped out and removed as the spare.
    let mode = fs::symlink_metadata(path)
        .ok()
        .filter(fs::Metadata::is_file)
        .map(|m| m.permissions().mode() & 0o7777);
    let spare = spare_of(path, slot)?;
    // One writer at a time in this process: the spares' names are the
    // process's, and two threads must not fill one at once.
    let mut registry = registry();
    let kept = registry.entry(path.to_path_buf()).or_default();
    let durable = slot == Slot::Durable;
    let result = (|| {
        let mut file = open_spare(&spare)?;
        let mut meta = file.metadata()?;
        if !durable && kept.committed == Some((meta.dev(), meta.ino())) {
            // The spare holds the version a power cut must leave whole: it
            // is parked, and what was parked (or a new file) is filled.
            drop(file);
            swap_or_move(&spare, &spare_of(path, Slot::Parked)?)?;
            file = open_spare(&spare)?;
            meta = file.metadata()?;
        }
        let inode = (meta.dev(), meta.ino());
        if let Some(mode) = mode.filter(|m| meta.permissions().mode() & 0o7777 != *m) {
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        // Written over, then cut to length: no blocks freed and taken again.
        file.write_all(bytes)?;
        file.set_len(bytes.len() as u64)?;
        if durable {
            file.sync_data()?;
        }
        drop(file);
        swap_or_move(&spare, path)?;
        if durable {
            sync_folder(path)?;
            kept.committed = Some(inode);
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&spare);
    }
    result
}

/// Swaps `from` and `to`, or moves `from` to `to` where there is nothing
/// to swap with yet or the file system cannot swap.
fn swap_or_move(from: &Path, to: &Path) -> io::Result<()> {
    match crate::process::exchange(from, to) {
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::Unsupported) => {
            fs::rename(from, to)
        }
        other => other,
    }
}

/// Commits the names in `path`'s folder to disk.
fn sync_folder(path: &Path) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

/// The spare, open for writing, never through a link or into a FIFO. What
/// is in its way — a link, a FIFO, a folder (an agent can put one where
/// state.json was, and the swap brings it here), a spare left read-only by
/// a swap with a 0444 file — is removed and the spare made anew, once.
fn open_spare(spare: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = || {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(spare)
    };
    match open() {
        Ok(file) if file.metadata()?.is_file() => return Ok(file),
        _ => {}
    }
    match fs::symlink_metadata(spare) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(spare)?,
        Ok(_) => fs::remove_file(spare)?,
        Err(_) => {}
    }
    let file = open()?;
    if file.metadata()?.is_file() {
        Ok(file)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", spare.display()),
        ))
    }
}

const SPARE: &str = ".spare";

/// `.<name>.<pid>.spare`, `.<name>.durable.<pid>.spare` or
/// `.<name>.parked.<pid>.spare` beside `path`.
pub(super) fn spare_of(path: &Path, slot: Slot) -> io::Result<PathBuf> {
    let kind = match slot {
        Slot::Cached => "",
        Slot::Durable => ".durable",
        Slot::Parked => ".parked",
    };
    hidden_beside(path, &format!("{kind}.{}{SPARE}", std::process::id()))
}

/// The files this process writes this way.
fn registry() -> MutexGuard<'static, BTreeMap<PathBuf, Kept>> {
    static KEPT: Mutex<BTreeMap<PathBuf, Kept>> = Mutex::new(BTreeMap::new());
    KEPT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes the spares this process kept: ralph is ending.
pub fn drop_spares() {
    drop_where(|_| true);
}

/// [`drop_spares`] for the files in `dir` only: tests share one process.
#[cfg(test)]
pub(super) fn drop_spares_in(dir: &Path) {
    drop_where(|path| path.starts_with(dir));
}

fn drop_where(pick: impl Fn(&Path) -> bool) {
    let mut registry = registry();
    let picked: Vec<PathBuf> = registry.keys().filter(|p| pick(p)).cloned().collect();
    for path in picked {
        registry.remove(&path);
        for slot in [Slot::Cached, Slot::Durable, Slot::Parked] {
            if let Ok(spare) = spare_of(&path, slot) {
                let _ = fs::remove_file(spare);
            }
        }
    }
}

/// Removes the spares in `dir` that a ralph no longer running left (it was
/// killed): `.<name>.<pid>.spare` whose pid is gone.
pub fn remove_dead_spares(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.starts_with('.'))
            .and_then(|n| n.strip_suffix(SPARE))
            .and_then(|n| n.rsplit_once('.'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !crate::process::pid_alive(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}
