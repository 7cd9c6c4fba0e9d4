//! The gate's definition comes from the person, not from the run branch.
//!
//! The settings that decide trust (`config::decides_trust`: the gate, the
//! breaker, the sandbox) are read from the project's `.ralph/config.toml`
//! **as committed on the run's base** — the branch the run branch was cut
//! from (recorded when ralph creates it; else `main`, else `master`) — and
//! never from what was committed on the run branch, where the agent
//! commits. A person changes them on the base (a commit on `main`), or
//! accepts the branch's copy with `ralph trust`, which records that exact
//! file (its blob id): a later change of it is not accepted.
//!
//! When the base has no committed config, or the run works on the base
//! itself, there is nothing to compare with: the work tree's file is read,
//! and protected paths keep agents from changing it during a run. An
//! uncommitted edit of the file (the branch's copy still the base's) is the
//! person's and is read as it is.
//!
//! `trust.json` holds each run branch's base, the accepted copies, the test
//! counts stories are held to and the red checks' cache. It is the one
//! record of a run branch's base: the pull requests `deliver` opens go to
//! it too ([`recorded_base`]). It is kept **outside the repository**, under
//! `$XDG_STATE_HOME/ralph/repos/<name>-<id>/` (`~/.local/state` by
//! default; one per repository, shared by a parallel run's worktrees):
//! the sandbox lets the agent write all of `.git/`, and a record there
//! would let it accept its own config or lower the counts. The sandbox
//! grants no write there. A `trust.json` an older ralph kept in
//! `.git/ralph/` is not read: the agent may have written it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The base's copy of the project config, when the run branch's differs.
#[derive(Debug, Clone)]
pub struct BaseConfig {
    /// The run branch (checked out).
    pub branch: String,
    /// The branch it was cut from.
    pub base: String,
    /// The config file's path in the repository.
    pub path: PathBuf,
    /// The base's copy.
    pub text: String,
    /// The run branch's committed copy (its blob id), `None` when it has none.
    pub branch_blob: Option<String>,
}

const VERSION: u32 = 1;

/// `trust.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrustFile {
    #[serde(default)]
    pub version: u32,
    /// Run branch → the branch it was cut from.
    #[serde(default)]
    pub bases: BTreeMap<String, String>,
    /// Run branch → the blob id of its `.ralph/config.toml` a person accepted.
    #[serde(default)]
    pub accepted: BTreeMap<String, String>,
    /// Run branch → what its gate's test runners counted last: at a run's
    /// baseline, then after each story the gate verified. A story's gate
    /// may not count fewer.
    #[serde(default)]
    pub tests: BTreeMap<String, TestRecord>,
    /// "<tree id> <check>" → how a story's check ended on that tree (see
    /// `oracle::red`): a base's files do not change, so neither does that.
    #[serde(default)]
    pub red: BTreeMap<String, RedRecord>,
}

/// How a check ended on a tree: passed or not, in a few words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedRecord {
    pub passed: bool,
    pub detail: String,
}

/// The most checks kept in `trust.json`'s cache; a full cache starts again.
const MAX_RED: usize = 256;

/// The tests a gate command counted on a branch, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestRecord {
    /// The gate command, as a person reads it: counts of another command
    /// are not compared.
    pub command: String,
    pub counts: crate::gate::TestCounts,
    /// "the baseline of run <id>", "US-003".
    pub at: String,
}

/// The folder, outside every repository, where ralph keeps what a
/// repository's agents must not write: `<state home>/ralph/repos/<name>-<id>`,
/// `<id>` the first 16 hex digits of the SHA-1 of the repository's git
/// directory's path (`name` only to help a person find it). Pure.
pub fn trust_dir(state_home: &Path, git_dir: &Path) -> PathBuf {
    let text = git_dir.to_string_lossy();
    let id = git2::Oid::hash_object(git2::ObjectType::Blob, text.as_bytes())
        .map(|o| o.to_string())
        .unwrap_or_default();
    let name = git_dir
        .parent()
        .filter(|_| git_dir.file_name().is_some_and(|n| n == ".git"))
        .unwrap_or(git_dir)
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .chars()
                .filter(|c| c.is_alphanumeric() || "-_.".contains(*c))
                .collect::<String>()
        })
        .filter(|n| !n.is_empty() && !n.starts_with('.'))
        .unwrap_or_else(|| "repo".to_string());
    state_home.join("ralph/repos").join(format!("{name}-{}", &id[..id.len().min(16)]))
}

/// `$XDG_STATE_HOME` (absolute), else `$HOME/.local/state`.
pub fn state_home() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).map(PathBuf::from).filter(|p| p.is_absolute());
    var("XDG_STATE_HOME").or_else(|| var("HOME").map(|h| h.join(".local/state")))
}

impl TrustFile {
    /// `None` without a home to keep it in: nothing is accepted, recorded
    /// or cached then.
    pub fn path(repo: &git2::Repository) -> Option<PathBuf> {
        let common = repo.commondir();
        let git_dir = common.canonicalize().unwrap_or_else(|_| common.to_path_buf());
        Some(trust_dir(&state_home()?, &git_dir).join("trust.json"))
    }

    pub fn load(repo: &git2::Repository) -> TrustFile {
        let Some(path) = TrustFile::path(repo) else { return TrustFile::default() };
        let bytes = crate::store::read_regular(&path).unwrap_or_default();
        serde_json::from_slice(&bytes).unwrap_or_default()
    }

    pub fn save(&mut self, repo: &git2::Repository) -> std::io::Result<()> {
        self.version = VERSION;
        let path = TrustFile::path(repo).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "neither XDG_STATE_HOME nor HOME is set: no place for trust.json",
            )
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::store::write_json(&path, self)
    }
}

/// Records that ralph cut `branch` from `base` (best effort: without it
/// the base is `main` or `master`).
pub fn record_base(project: &Path, branch: &str, base: &str) {
    let Ok(repo) = git2::Repository::discover(project) else { return };
    let mut t = TrustFile::load(&repo);
    if t.bases.get(branch).map(String::as_str) != Some(base) {
        t.bases.insert(branch.to_string(), base.to_string());
        let _ = t.save(&repo);
    }
}

/// The branch ralph recorded cutting `branch` from, and only that: no
/// `main`/`master` guess. It is where the branch's pull requests go
/// (`deliver`), so a branch ralph did not cut leaves the choice to the
/// forge's default branch rather than to a guess.
pub fn recorded_base(project: &Path, branch: &str) -> Option<String> {
    let repo = git2::Repository::discover(project).ok()?;
    TrustFile::load(&repo).bases.get(branch).cloned()
}

/// The branch `branch` was cut from (see [`base_of`]).
pub fn base_branch(project: &Path, branch: &str) -> Option<String> {
    let repo = git2::Repository::discover(project).ok()?;
    base_of(&repo, &TrustFile::load(&repo), branch)
}

fn red_key(tree: &str, check: &str) -> String {
    format!("{tree} {check}")
}

/// How `check` ended on the tree `tree`, when ralph ran it there before.
pub fn red_record(project: &Path, tree: &str, check: &str) -> Option<RedRecord> {
    let repo = git2::Repository::discover(project).ok()?;
    TrustFile::load(&repo).red.get(&red_key(tree, check)).cloned()
}

/// Records how `check` ended on `tree` (best effort).
pub fn set_red_record(project: &Path, tree: &str, check: &str, record: RedRecord) {
    let Ok(repo) = git2::Repository::discover(project) else { return };
    let mut t = TrustFile::load(&repo);
    if t.red.len() >= MAX_RED {
        t.red.clear();
    }
    t.red.insert(red_key(tree, check), record);
    let _ = t.save(&repo);
}

/// The base of `branch`: the recorded one, else `main`, else `master`
/// (never the branch itself).
fn base_of(repo: &git2::Repository, t: &TrustFile, branch: &str) -> Option<String> {
    let exists = |b: &str| repo.find_branch(b, git2::BranchType::Local).is_ok();
    t.bases
        .get(branch)
        .cloned()
        .into_iter()
        .chain(["main".to_string(), "master".to_string()])
        .find(|b| b != branch && exists(b))
}

fn blob_at(repo: &git2::Repository, refname: &str, path: &Path) -> Option<(git2::Oid, Vec<u8>)> {
    let commit = repo.revparse_single(refname).ok()?.peel_to_commit().ok()?;
    let entry = commit.tree().ok()?.get_path(path).ok()?;
    let blob = repo.find_blob(entry.id()).ok()?;
    Some((entry.id(), blob.content().to_vec()))
}

/// What the checked-out branch and its base hold of the project config at
/// `config` (an absolute path): `(base config, accepted)` when the base
/// has one and the branch's committed copy differs from it — `accepted`
/// when a person accepted the branch's copy with `ralph trust`.
pub fn compare(project: &Path, config: &Path) -> Option<(BaseConfig, bool)> {
    let repo = git2::Repository::discover(project).ok()?;
    let workdir = repo.workdir()?.canonicalize().ok()?;
    let config = config.parent()?.canonicalize().ok()?.join(config.file_name()?);
    let path = config.strip_prefix(&workdir).ok()?.to_path_buf();
    let head = repo.head().ok()?;
    if !head.is_branch() {
        return None;
    }
    let branch = head.shorthand().ok()?.to_string();
    let t = TrustFile::load(&repo);
    let base = base_of(&repo, &t, &branch)?;
    let (base_blob, text) = blob_at(&repo, &format!("refs/heads/{base}"), &path)?;
    let branch_blob = blob_at(&repo, "HEAD", &path).map(|(id, _)| id);
    if branch_blob == Some(base_blob) {
        return None;
    }
    let branch_blob = branch_blob.map(|b| b.to_string());
    let accepted = t.accepted.get(&branch).map(String::as_str) == Some(accept_key(&branch_blob));
    let text = String::from_utf8_lossy(&text).into_owned();
    Some((BaseConfig { branch, base, path, text, branch_blob }, accepted))
}

/// What `accepted` holds for a branch's copy: its blob id, or "deleted".
fn accept_key(blob: &Option<String>) -> &str {
    blob.as_deref().unwrap_or("deleted")
}

/// The base's copy to read the trusted settings from, unless the branch's
/// copy is the base's or a person accepted it.
pub fn trusted(project: &Path, config: &Path) -> Option<BaseConfig> {
    compare(project, config).filter(|(_, accepted)| !accepted).map(|(b, _)| b)
}

/// `ralph trust`: accepts the run branch's committed config as the
/// person's. Returns what was accepted, `None` when there was nothing to.
pub fn accept(project: &Path, config: &Path) -> std::io::Result<Option<BaseConfig>> {
    let Some((base, accepted)) = compare(project, config) else { return Ok(None) };
    if accepted {
        return Ok(None);
    }
    let repo = git2::Repository::discover(project).map_err(std::io::Error::other)?;
    let mut t = TrustFile::load(&repo);
    t.accepted.insert(base.branch.clone(), accept_key(&base.branch_blob).to_string());
    t.save(&repo)?;
    Ok(Some(base))
}

/// What a gate command counted last on `branch` (see [`TrustFile::tests`]).
pub fn test_record(project: &Path, branch: &str) -> Option<TestRecord> {
    let repo = git2::Repository::discover(project).ok()?;
    TrustFile::load(&repo).tests.get(branch).cloned()
}

/// Records what the gate counted on `branch` (best effort).
pub fn set_test_record(project: &Path, branch: &str, record: Option<TestRecord>) {
    let Ok(repo) = git2::Repository::discover(project) else { return };
    let mut t = TrustFile::load(&repo);
    match record {
        Some(r) => t.tests.insert(branch.to_string(), r),
        None => t.tests.remove(branch),
    };
    let _ = t.save(&repo);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_base_is_only_what_was_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let tree = repo.find_tree(repo.index().unwrap().write_tree().unwrap()).unwrap();
        let c = repo.commit(None, &sig, &sig, "first", &tree, &[]).unwrap();
        let c = repo.find_commit(c).unwrap();
        for b in ["main", "develop", "ralph/x", "ralph/y"] {
            repo.branch(b, &c, false).unwrap();
        }
        let mut t = TrustFile::default();
        t.bases.insert("ralph/x".into(), "develop".into());
        assert_eq!(base_of(&repo, &t, "ralph/x").as_deref(), Some("develop"));
        // Not recorded: the oracle guesses main (never the branch itself).
        assert_eq!(base_of(&repo, &t, "ralph/y").as_deref(), Some("main"));
        assert_eq!(base_of(&repo, &t, "main"), None);
    }

    #[test]
    fn trust_is_kept_outside_the_repository_one_folder_per_git_directory() {
        let home = Path::new("/home/u/.local/state");
        let a = trust_dir(home, Path::new("/home/u/proj/.git"));
        let b = trust_dir(home, Path::new("/home/u/other/proj/.git"));
        let bare = trust_dir(home, Path::new("/srv/git/proj.git"));
        let starts = |p: &Path, s: &str| p.to_str().unwrap().starts_with(s);
        assert!(starts(&a, "/home/u/.local/state/ralph/repos/proj-"), "{a:?}");
        assert!(starts(&bare, "/home/u/.local/state/ralph/repos/proj.git-"), "{bare:?}");
        assert_ne!(a, b, "two repositories of one name share nothing");
        assert_eq!(a, trust_dir(home, Path::new("/home/u/proj/.git")), "stable");
        let odd = trust_dir(home, Path::new("/x/../.git"));
        assert!(starts(&odd, "/home/u/.local/state/ralph/repos/repo-"), "{odd:?}");
        assert_eq!(a.file_name().unwrap().len(), "proj-".len() + 16);
    }
}
