//! Where ralph keeps what it owns, the lock, and atomic writes.
//!
//! Two folders. ralph's own state — the checkpoint, the breaker, limits,
//! lessons, rules, events, logs, the lock — lives in the repository's git
//! directory (`.git/ralph/`; a linked worktree has its own), where an
//! agent's `git clean -fdx` or `rm -rf .ralph` cannot reach it. The
//! project's `.ralph/` in the work tree keeps only what is the user's
//! (`config.toml`, `prompt.md`) and the handoff the agent writes.
//!
//! Every write is whole or not at all: a `kill -9` at any instant leaves
//! either the old or the new file, never half of one. The person's files
//! (prd.json, progress.txt) are written as a temp file in the same folder,
//! fsync, rename ([`write_atomic`]); ralph's own files in its state folder,
//! written every iteration, swap with spares beside them ([`kept`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// What ralph writes into the work tree's `.ralph/.gitignore`: its own
/// files there and nothing else, so whatever a person keeps in `.ralph/`
/// stays theirs to commit.
const GITIGNORE: &str = "\
# Written by ralph: only ralph's own files in .ralph/ are ignored here.
# Its state lives in the repository's git directory (.git/ralph/).
/handoff.json
/.handoff.json.*
";

/// What `.ralph/.gitignore` said before ralph's state moved out of the work
/// tree: a file still saying exactly this is ralph's, and is updated.
const OLD_GITIGNORE: &str = "\
# Written by ralph: its runtime state stays out of your commits.
# config.toml and prompt.md are yours to commit.
*
!.gitignore
!config.toml
!prompt.md
";

/// The failure log (`learn::failures`), and its name before it was told
/// apart from each run's `logs/<run>/events.jsonl`.
const FAILURES: &str = "failures.jsonl";
const OLD_FAILURES: &str = "events.jsonl";

/// The state files and folders ralph kept in the work tree's `.ralph/`
/// before they moved to the git directory.
const MOVED: &[&str] = &[
    "state.json",
    "circuit.json",
    "circuit-history.jsonl",
    "limits.json",
    "last-prd.json",
    "prd.broken.json",
    "lessons",
    FAILURES,
    "rules.json",
    "runs.jsonl",
    "logs",
];

/// Paths of ralph's files: its state (`root`) and the work tree's
/// `.ralph/` (`work`).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    work: PathBuf,
    /// The work tree's git directory (or, outside one, `.ralph/`): what its
    /// lock locks, one run per work tree whatever the PRD.
    tree: PathBuf,
    /// The lock file naming who holds the work tree: `.git/ralph/lock`.
    lock_file: PathBuf,
    /// Where `rules.json` and its lock are: the project's rules, shared by
    /// its linked worktrees (a parallel run's workers), which keep the rest
    /// of their state apart.
    shared: PathBuf,
}

impl Store {
    /// Both in `<dir>/.ralph/`: the layout for a folder that is not a git
    /// repository (and for tests).
    pub fn new(project_dir: &Path) -> Store {
        let dir = project_dir.join(".ralph");
        let lock_file = dir.join("lock");
        Store { root: dir.clone(), shared: dir.clone(), tree: dir.clone(), work: dir, lock_file }
    }

    /// The store of the PRD at `prd` in `project`: state in the git
    /// directory of the repository holding the project, under a name that
    /// depends on where the PRD is (two ralphs on one prd.json, started
    /// from different folders, share a store), and the work tree's
    /// `.ralph/` in the project. The lock is the work tree's, whatever the
    /// PRD. Outside a repository, all of it is the project's `.ralph/`.
    pub fn for_project(project: &Path, prd: &Path) -> Store {
        let work = project.join(".ralph");
        let Ok(repo) = git2::Repository::discover(project) else {
            return Store::new(project);
        };
        let workdir = repo.workdir().and_then(|w| w.canonicalize().ok());
        let prd = prd.canonicalize().unwrap_or_else(|_| prd.to_path_buf());
        let rel = workdir.as_deref().and_then(|w| prd.strip_prefix(w).ok());
        let sub = match rel.and_then(Path::to_str) {
            Some("prd.json") | Some("scripts/ralph/prd.json") => PathBuf::new(),
            Some(rel) => Path::new("prds").join(key(rel)),
            None => Path::new("prds").join(key(&prd.display().to_string())),
        };
        let root = repo.path().join("ralph").join(&sub);
        let shared = repo.commondir().join("ralph").join(&sub);
        let lock_file = repo.path().join("ralph/lock");
        Store { root, work, shared, tree: repo.path().to_path_buf(), lock_file }
    }

    /// ralph's state folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The work tree's `.ralph/`.
    pub fn work(&self) -> &Path {
        &self.work
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Creates both folders (and the work tree's `.gitignore`) if missing:
    /// cheap enough to run before every iteration, so an agent that
    /// deleted `.ralph/` gets it back.
    pub fn ensure(&self) -> io::Result<()> {
        fs::create_dir_all(&self.root)?;
        fs::create_dir_all(&self.work)?;
        let ignore = self.work.join(".gitignore");
        let current = fs::read_to_string(&ignore).ok();
        if current.is_none() || current.as_deref() == Some(OLD_GITIGNORE) {
            write_atomic(&ignore, GITIGNORE.as_bytes())?;
        }
        Ok(())
    }

    /// Moves the state an older ralph kept in the work tree's `.ralph/` to
    /// the state folder, where nothing is there yet, and removes the spares
    /// a killed ralph left there ([`write_kept`]). Returns what moved.
    pub fn migrate(&self) -> io::Result<Vec<String>> {
        remove_dead_spares(&self.root);
        let mut moved = Vec::new();
        // The failure log was `events.jsonl`, the name each run's event
        // log has too: renamed, in either folder.
        for dir in [&self.work, &self.root] {
            let (from, to) = (dir.join(OLD_FAILURES), dir.join(FAILURES));
            if fs::symlink_metadata(&from).is_ok() && fs::symlink_metadata(&to).is_err() {
                fs::rename(&from, &to)?;
                moved.push(format!("{OLD_FAILURES} (now {FAILURES})"));
            }
        }
        if self.root == self.work {
            return Ok(moved);
        }
        for name in MOVED {
            let (from, to) = (self.work.join(name), self.root.join(name));
            // ralph-claude-code keeps its own logs in .ralph/logs/ (ralph.log,
            // claude_output_*.log): those are not ralph's to move.
            if *name == "logs" && from.join("ralph.log").exists() {
                continue;
            }
            if fs::symlink_metadata(&from).is_ok() && fs::symlink_metadata(&to).is_err() {
                fs::rename(&from, &to)?;
                moved.push(name.to_string());
            }
        }
        let _ = fs::remove_file(self.work.join("lock"));
        Ok(moved)
    }

    /// The work tree's lock file: the same for every PRD in it
    /// (`.git/ralph/lock`), naming the run that holds the work tree.
    pub fn lock_path(&self) -> PathBuf {
        self.lock_file.clone()
    }

    /// Takes the work tree's lock for a run on `prd` (see [`lock`]).
    pub fn lock(&self, prd: &Path) -> Result<(Lock, PreviousHolder), LockError> {
        if let Some(dir) = self.lock_path().parent() {
            fs::create_dir_all(dir).map_err(LockError::Io)?;
        }
        lock::lock(&self.lock_path(), &self.tree, prd)
    }

    /// Who holds the work tree's lock right now, if anyone.
    pub fn lock_holder(&self) -> Option<Holder> {
        lock_holder(&self.lock_path(), &self.tree)
    }

    /// The project's settings (the user's, in the work tree).
    pub fn config(&self) -> PathBuf {
        self.work.join("config.toml")
    }

    /// The project's prompt template (the user's, in the work tree).
    pub fn prompt(&self) -> PathBuf {
        self.work.join("prompt.md")
    }

    pub fn state(&self) -> PathBuf {
        self.path("state.json")
    }

    pub fn circuit(&self) -> PathBuf {
        self.path("circuit.json")
    }

    pub fn circuit_history(&self) -> PathBuf {
        self.path("circuit-history.jsonl")
    }

    pub fn limits(&self) -> PathBuf {
        self.path("limits.json")
    }

    /// Where the agent writes its handoff (in the work tree, where it may write).
    pub fn handoff(&self) -> PathBuf {
        self.work.join("handoff.json")
    }

    pub fn last_prd(&self) -> PathBuf {
        self.path("last-prd.json")
    }

    pub fn lessons_dir(&self) -> PathBuf {
        self.path("lessons")
    }

    pub fn failures(&self) -> PathBuf {
        self.path(FAILURES)
    }

    pub fn rules(&self) -> PathBuf {
        self.shared.join("rules.json")
    }

    /// The lock a change of `rules.json` holds, beside it.
    pub fn rules_lock(&self) -> PathBuf {
        self.shared.join("rules.lock")
    }

    pub fn runs(&self) -> PathBuf {
        self.path("runs.jsonl")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.path("logs")
    }

    pub fn run_log_dir(&self, run_id: &str) -> PathBuf {
        self.logs_dir().join(run_id)
    }
}

/// A folder name for a PRD's relative path: readable, and unique by a hash.
fn key(rel: &str) -> String {
    use sha2::{Digest, Sha256};
    let readable: String = rel
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' })
        .collect();
    let hash = Sha256::digest(rel.as_bytes());
    format!(
        "{}-{:02x}{:02x}{:02x}{:02x}",
        crate::text::prefix_bytes(&readable, 64),
        hash[0],
        hash[1],
        hash[2],
        hash[3]
    )
}

/// Writes `bytes` to `path` so that readers see the old or the new content,
/// never a mixture: temp file in the same folder, fsync, rename.
///
/// The fsync before the rename is what keeps a power loss from leaving an
/// empty file behind. The folder is not synced after the rename: losing the
/// rename in a power cut leaves the previous version, which is consistent,
/// and syncing the folder would double the cost of every checkpoint.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(&write_target(path), bytes, true)
}

/// [`write_atomic`] for ralph's own files in `.git/ralph/`: never through
/// a link. The agent may write that folder, and a link it put at
/// state.json's name must not aim ralph's write at a file of the person's;
/// the link itself is replaced. (prd.json and progress.txt, which a person
/// may link elsewhere on purpose, keep [`write_atomic`].) Written as
/// [`kept::write_durable`] writes: into a spare swapped in, the folder
/// fsynced as well, no inode made or freed.
pub fn write_own(path: &Path, bytes: &[u8]) -> io::Result<()> {
    kept::write_durable(path, bytes)
}

/// [`write_own`] of pretty JSON.
pub fn write_json_own<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    write_own(path, &json_bytes(value)?)
}

/// Like [`write_atomic`] without the fsync: still never a half-written file
/// after ralph itself dies (the rename is atomic), but a power cut may lose
/// the write. For files that only record or inform (a prompt copy, the
/// agent's process group, the calls-per-hour window).
pub fn write_replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(&write_target(path), bytes, false)
}

/// Opens a file for reading without ever blocking: an agent can leave a
/// FIFO (or a device) where ralph expects a file, and opening a FIFO waits
/// for a writer forever, deaf to signals. Anything but a regular file (or a
/// link to one) is refused with an error that says what it is.
pub fn open_regular(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let kind = file.metadata()?.file_type();
    let what = if kind.is_file() {
        return Ok(file);
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a device"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is {what}, not a regular file", path.display()),
    ))
}

/// A whole regular file ([`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Where a write to `path` lands: through a symbolic link to its target,
/// so a prd.json that is a link stays one and its target gets the write.
fn write_target(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or_else(|_| {
            // A dangling link: write where it points.
            let target = fs::read_link(path).unwrap_or_else(|_| path.to_path_buf());
            path.parent().map(|d| d.join(&target)).unwrap_or(target)
        }),
        _ => path.to_path_buf(),
    }
}

/// Replaces `path` itself (a link there is replaced, not followed: the
/// callers that follow one resolve it first with [`write_target`]).
fn replace(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // The new file keeps the old one's mode (a 0444 prd.json stays 0444).
    let mode = fs::symlink_metadata(path)
        .ok()
        .filter(fs::Metadata::is_file)
        .map(|m| m.permissions().mode() & 0o7777);
    let tmp = hidden_beside(path, &format!(".tmp{}", std::process::id()))?;
    let result = (|| {
        let mut file = create_temp(&tmp)?;
        if let Some(mode) = mode {
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        if durable {
            file.sync_data()?;
        }
        drop(file);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `.<name><suffix>` in `path`'s folder: a temp file or a spare of it.
fn hidden_beside(path: &Path, suffix: &str) -> io::Result<PathBuf> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("no file name in {}", path.display()))
    })?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(suffix);
    Ok(dir.join(hidden))
}

/// A new temp file at `tmp`, made here (never opened through a link or
/// over a file someone put at its name: prd.json's temp file is in the
/// work tree, where the agent could plant a link to the person's
/// `~/.bashrc` under it). What is at the name is removed (a link itself,
/// not its target) and the file made again, once; a folder there stays
/// and the write fails.
fn create_temp(tmp: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let create =
        || OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).open(tmp);
    match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(tmp)?;
            create()
        }
        other => other,
    }
}

/// Serialises `value` as pretty JSON (with a trailing newline) and writes it atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    write_atomic(path, &json_bytes(value)?)
}

/// The bytes [`write_json`] writes.
pub fn json_bytes<T: Serialize>(value: &T) -> io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// What reading a JSON state file found.
#[derive(Debug)]
pub enum Loaded<T> {
    /// No file: a fresh start.
    Missing,
    Ok(T),
    /// The file exists but is empty, not JSON, or not the expected shape.
    /// Carries a description for the warning.
    Damaged(String),
}

/// Reads a JSON state file, telling "missing" apart from "damaged" so the
/// caller can warn instead of silently starting over.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<Loaded<T>> {
    let mut text = String::new();
    match open_regular(path) {
        Ok(mut f) => {
            if let Err(e) = f.read_to_string(&mut text) {
                if e.kind() == io::ErrorKind::InvalidData {
                    return Ok(Loaded::Damaged("not UTF-8".into()));
                }
                return Err(e);
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(e) => return Err(e),
    }
    if text.trim().is_empty() {
        return Ok(Loaded::Damaged("empty file".into()));
    }
    match serde_json::from_str(&text) {
        Ok(v) => Ok(Loaded::Ok(v)),
        Err(e) => Ok(Loaded::Damaged(e.to_string())),
    }
}

/// Reads one of ralph's versioned state files (`state.json`,
/// `circuit.json`, `limits.json`, lessons, `rules.json`): missing, or
/// damaged with a reason (empty, not UTF-8, not JSON, no or another
/// `version`, the wrong shape), or the value. What a damaged file means —
/// rebuilt with a warning, or refused — is the caller's policy.
pub fn read_versioned<T: DeserializeOwned>(path: &Path, version: u32) -> io::Result<Loaded<T>> {
    let value = match read_json::<serde_json::Value>(path)? {
        Loaded::Ok(value) => value,
        Loaded::Missing => return Ok(Loaded::Missing),
        Loaded::Damaged(why) => return Ok(Loaded::Damaged(why)),
    };
    if let Err(why) = check_version(&value, version) {
        return Ok(Loaded::Damaged(why.to_string()));
    }
    Ok(match serde_json::from_value(value) {
        Ok(v) => Loaded::Ok(v),
        Err(e) => Loaded::Damaged(e.to_string()),
    })
}

/// Why a state file's `version` is not the one this ralph reads.
#[derive(Debug, thiserror::Error)]
enum VersionError {
    #[error("version {found}, this ralph reads version {reads}")]
    Other { found: u64, reads: u32 },
    #[error("no version field")]
    Missing,
}

/// Checks a state file's `version` field before its shape, so a file from
/// a newer ralph is reported as such rather than as a confusing parse error.
fn check_version(value: &serde_json::Value, version: u32) -> Result<(), VersionError> {
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(version) => Ok(()),
        Some(found) => Err(VersionError::Other { found, reads: version }),
        None => Err(VersionError::Missing),
    }
}

/// Appends one line to a JSON-lines file. Lines are written with a single
/// `write` so a crash can truncate at most the last line, which readers skip.
pub fn append_jsonl<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(&line)
}

/// Reads a JSON-lines file, skipping lines that do not parse. Returns the
/// values and how many lines were skipped (for a warning).
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> io::Result<(Vec<T>, usize)> {
    let text = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut values = Vec::new();
    let mut bad = 0;
    for line in text.split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(v) => values.push(v),
            Err(_) => bad += 1,
        }
    }
    Ok((values, bad))
}

mod kept;
mod lock;

pub use kept::{drop_spares, remove_dead_spares, write_kept};
pub use lock::{Holder, Lock, LockError, PreviousHolder, lock_holder};

#[cfg(test)]
mod tests;
