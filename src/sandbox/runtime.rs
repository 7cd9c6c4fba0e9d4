//! The sandbox at run time: whether this kernel can confine at all, and
//! for each child the inputs of [`super::policy`] gathered from the disk
//! and the environment, and its private temp dir.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::{Inputs, Mode, Names, Policy, Settings, StateKind};
use crate::agent::Tool;

/// Pretends the kernel offers this Landlock ABI at most (0: none), so the
/// tests can see what `auto` and `strict` do on a kernel without Landlock.
pub const ABI_OVERRIDE: &str = "RALPH_SANDBOX_ABI";

/// Whether children are confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Confined at this Landlock ABI.
    Confined { abi: u32 },
    /// `auto` on a kernel without Landlock: unconfined, and said so.
    Unconfined { why: String },
    /// `agent.sandbox = "off"`.
    Off,
}

/// Why the run's sandbox cannot be had (ralph refuses to start: exit 7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "agent.sandbox is \"strict\" but this kernel has no Landlock (Linux 5.13 or later, \
         with landlock in the lsm= boot list), so the agent cannot be confined"
    )]
    StrictWithoutLandlock,
}

/// The run's sandbox: its settings and what the kernel supports.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub settings: Settings,
    pub support: Support,
    home: Option<PathBuf>,
    /// The folders the policy lists (the home, the toolchains of `PATH`:
    /// `/usr/bin` alone holds thousands of names), kept while unchanged.
    listings: Arc<Listings>,
    /// A private temp dir the last child left, emptied, for the next.
    spare: Arc<Spare>,
    /// The last child's policy, for the next child with the same inputs.
    kept: Arc<Mutex<Option<KeptPolicy>>>,
    /// The last Landlock ruleset built, for the next child with that policy.
    rulesets: Arc<Mutex<Option<KeptRuleset>>>,
}

/// A built ruleset, the policy it enforces and what each of the policy's
/// paths was when it was built (device and inode; `None`: missing). A rule
/// holds the folder it was made for, not its name: a folder removed and
/// made again since needs a new rule, so any change builds the ruleset
/// again. Building it opens every path and adds a rule for each; checking
/// is one `stat` per path.
#[derive(Debug)]
struct KeptRuleset {
    policy: Arc<Policy>,
    abi: u32,
    paths: Vec<Option<(u64, u64)>>,
    fd: Arc<std::os::fd::OwnedFd>,
}

/// Each path of `policy`, as [`KeptRuleset`] compares them.
fn identities(policy: &Policy) -> Vec<Option<(u64, u64)>> {
    use std::os::unix::fs::MetadataExt;
    let paths = policy.read.iter().chain(&policy.write);
    paths.map(|p| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))).collect()
}

/// A child's policy and everything it was computed from: the arguments,
/// what was read from the environment and the disk, and each folder
/// listing it asked for. The next child whose inputs are the same, and
/// whose listings are the same kept ones (unchanged folders), gets the
/// same policy: [`super::policy`] walks the home and every toolchain
/// folder, and an iteration's children ask for the same one each time.
#[derive(Debug)]
struct KeptPolicy {
    key: PolicyKey,
    /// The variables it read, with what they held (the iteration's own
    /// `RALPH_*` change every time and are never read).
    read_env: Vec<(String, Option<String>)>,
    listed: Vec<(PathBuf, Names)>,
    policy: Arc<Policy>,
}

#[derive(Debug, PartialEq)]
struct PolicyKey {
    tool: Option<Tool>,
    tree: Vec<PathBuf>,
    tmp: PathBuf,
    url_texts: Vec<String>,
    programs: Vec<PathBuf>,
    path: Vec<PathBuf>,
}

/// One private temp dir kept between children: making and removing one per
/// child is an inode made and freed every iteration. It is emptied when
/// its child ends (after the sweep of what the child left running), so no
/// child sees another's files; removed with the last [`Sandbox`].
#[derive(Debug, Default)]
struct Spare(std::sync::Mutex<Option<PathBuf>>);

impl Spare {
    /// The kept dir when it is still a private, empty folder; else a new one.
    fn take(&self) -> std::io::Result<PathBuf> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        match kept {
            Some(dir) if is_empty_private_dir(&dir) => Ok(dir),
            Some(dir) => {
                let _ = std::fs::remove_dir_all(&dir);
                private_temp_dir()
            }
            None => private_temp_dir(),
        }
    }

    /// Keeps `dir` for the next child once emptied; removes it otherwise
    /// (it could not be emptied, or another child's dir is kept already).
    fn give_back(&self, dir: &Path) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() && empty(dir).is_ok() {
            *slot = Some(dir.to_path_buf());
        } else {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        if let Some(dir) = self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Removes what is in `dir` (never following a link out of it).
fn empty(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        match std::fs::symlink_metadata(&path)?.is_dir() {
            true => std::fs::remove_dir_all(&path)?,
            false => std::fs::remove_file(&path)?,
        }
    }
    Ok(())
}

fn is_empty_private_dir(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.mode() & 0o077 == 0 && m.uid() == crate::process::euid())
        && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

impl Sandbox {
    /// From the settings and this machine's kernel. `Err`: `strict` on a
    /// kernel that cannot confine (ralph refuses to start).
    pub fn new(
        settings: Settings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Sandbox, SandboxError> {
        let home = env("HOME").filter(|h| h.starts_with('/')).map(PathBuf::from);
        let support = match settings.mode {
            Mode::Off => Support::Off,
            mode => {
                let mut abi = crate::process::landlock_abi();
                if let Some(limit) = env(ABI_OVERRIDE).and_then(|v| v.trim().parse::<u32>().ok()) {
                    abi = abi.min(limit);
                }
                if abi > 0 {
                    Support::Confined { abi }
                } else if mode == Mode::Strict {
                    return Err(SandboxError::StrictWithoutLandlock);
                } else {
                    Support::Unconfined { why: "this kernel has no Landlock".into() }
                }
            }
        };
        Ok(Sandbox {
            settings,
            support,
            home,
            listings: Arc::default(),
            spare: Arc::default(),
            kept: Arc::default(),
            rulesets: Arc::default(),
        })
    }

    /// The Landlock ABI children are confined at; `None`: unconfined.
    pub fn abi(&self) -> Option<u32> {
        match self.support {
            Support::Confined { abi } => Some(abi),
            _ => None,
        }
    }

    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// What the run says at its start: the policy an agent gets, or that
    /// agents run unconfined and why.
    pub fn describe(&self, tool: Option<Tool>, cwd: &Path, program: &str) -> String {
        match &self.support {
            Support::Off => {
                "sandbox off (agent.sandbox = \"off\"): agents, the gate and hooks run unconfined"
                    .into()
            }
            Support::Unconfined { why } => format!(
                "sandbox unavailable: {why}; agents, the gate and hooks run unconfined \
                 (agent.sandbox = \"strict\" refuses to start instead)"
            ),
            Support::Confined { abi } => {
                let Some(policy) = self.preview(tool, cwd, program) else { return String::new() };
                let root = work_tree(cwd).into_iter().next().unwrap_or_else(|| cwd.to_path_buf());
                super::describe(&policy, self.home(), &root, *abi)
            }
        }
    }

    /// The policy a child would get, its temp dir named but not made
    /// (`ralph agents`, `--dry-run`); `None` when children run unconfined.
    pub fn preview(&self, tool: Option<Tool>, cwd: &Path, program: &str) -> Option<Policy> {
        self.abi()?;
        let tmp = std::env::temp_dir().join("ralph-<pid>-<n>");
        Some(Policy::clone(&self.policy(tool, cwd, program, &[], &tmp, false)))
    }

    /// The policy for one child, and its private temp dir (made here,
    /// removed when the [`Child`] is dropped); `None` when children run
    /// unconfined.
    pub fn child(
        &self,
        tool: Option<Tool>,
        cwd: &Path,
        program: &str,
        env_set: &[(String, String)],
    ) -> std::io::Result<Option<Child>> {
        let Some(abi) = self.abi() else { return Ok(None) };
        let tmp = self.spare.take()?;
        let policy = self.policy(tool, cwd, program, env_set, &tmp, true);
        let cwd = Some(cwd.to_path_buf());
        let spare = Some(self.spare.clone());
        let rulesets = Some(self.rulesets.clone());
        Ok(Some(Child { policy, abi, tmp, home: self.home.clone(), cwd, spare, rulesets }))
    }

    /// The inputs of [`super::policy`], gathered. `make` creates the CLI's
    /// state folders (a folder that does not exist cannot be granted).
    fn policy(
        &self,
        tool: Option<Tool>,
        cwd: &Path,
        program: &str,
        env_set: &[(String, String)],
        tmp: &Path,
        make: bool,
    ) -> Arc<Policy> {
        let env = |name: &str| -> Option<String> {
            env_set
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(name).ok())
        };
        let home = self.home.as_deref();
        let list = |dir: &Path| self.listings.names(dir);
        let tree = work_tree(cwd);
        let project = tree.first().map(PathBuf::as_path).unwrap_or(cwd);
        if let (Some(tool), Some(home), true) = (tool, home, make) {
            for (path, kind) in super::state_paths(tool, home, &env, &list(home)) {
                match kind {
                    StateKind::Dir if !path.exists() => {
                        let _ = make_private_dir(&path, true);
                    }
                    StateKind::NewJson if std::fs::symlink_metadata(&path).is_err() => {
                        let _ = make_private_file(&path, b"{}");
                    }
                    _ => {}
                }
            }
        }
        if make {
            for dir in super::build_outputs(&env, home, tree.first()) {
                let _ = std::fs::create_dir_all(dir);
            }
        }
        let mut url_texts: Vec<String> = std::env::vars_os()
            .filter_map(|(_, v)| v.into_string().ok())
            .filter(|v| v.contains("://"))
            .collect();
        url_texts.extend(env_set.iter().map(|(_, v)| v.clone()).filter(|v| v.contains("://")));
        if let (Some(tool), Some(home)) = (tool, home) {
            for file in super::config_files(tool, home, &env, project) {
                if let Some(text) = read_small(&file) {
                    url_texts.push(text);
                }
            }
        }
        let mut programs = Vec::new();
        let path_var = env("PATH").unwrap_or_default();
        if let Ok(found) = which::which_in(program, Some(&path_var), cwd) {
            if let Ok(real) = found.canonicalize() {
                programs.push(real);
            }
            programs.push(found);
        }
        let path: Vec<PathBuf> = std::env::split_paths(&path_var).collect();
        let key = PolicyKey { tool, tree, tmp: tmp.to_path_buf(), url_texts, programs, path };
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = kept.as_ref()
            && k.key == key
            && k.read_env.iter().all(|(name, value)| env(name) == *value)
            && k.listed.iter().all(|(dir, names)| Arc::ptr_eq(&self.listings.names(dir), names))
        {
            return k.policy.clone();
        }
        let (listed, read_env) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
        let list = |dir: &Path| {
            let names = self.listings.names(dir);
            listed.borrow_mut().push((dir.to_path_buf(), names.clone()));
            names
        };
        let recorded_env = |name: &str| {
            let value = env(name);
            read_env.borrow_mut().push((name.to_string(), value.clone()));
            value
        };
        let policy = Arc::new(super::policy(&Inputs {
            home,
            list: &list,
            tool,
            env: &recorded_env,
            url_texts: &key.url_texts,
            work_tree: &key.tree,
            tmp,
            programs: &key.programs,
            path: &key.path,
            settings: &self.settings,
        }));
        let (listed, read_env) = (listed.into_inner(), read_env.into_inner());
        *kept = Some(KeptPolicy { key, read_env, listed, policy: policy.clone() });
        policy
    }
}

/// Folder listings, each kept with the folder's stamp: a folder whose
/// entries change gets a new mtime and ctime, so a listing whose stamp
/// still matches is what `read_dir` would return. A folder changed in the
/// last seconds is listed again every time (its next change may fall in
/// the same timestamp tick, as git's "racy" index entries do).
#[derive(Debug, Default)]
struct Listings(Mutex<HashMap<PathBuf, (Stamp, Names)>>);

/// What changes when a folder's entries do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// How long after its last change a folder's stamp is trusted.
const SETTLED: Duration = Duration::from_secs(2);

impl Listings {
    /// The names in `dir` (through a link); none when it cannot be read.
    fn names(&self, dir: &Path) -> Names {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(dir) else { return Names::default() };
        let stamp = Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        };
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((s, names)) = kept.get(dir)
            && *s == stamp
        {
            return names.clone();
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            kept.remove(dir);
            return Names::default();
        };
        let names: Names =
            entries.flatten().filter_map(|e| e.file_name().into_string().ok()).collect();
        let changed = |(secs, nanos): (i64, i64)| {
            let secs = u64::try_from(secs).unwrap_or(0);
            SystemTime::UNIX_EPOCH + Duration::new(secs, u32::try_from(nanos).unwrap_or(0))
        };
        let settled = |t: SystemTime| t.elapsed().is_ok_and(|age| age >= SETTLED);
        if settled(changed(stamp.mtime)) && settled(changed(stamp.ctime)) {
            kept.insert(dir.to_path_buf(), (stamp, names.clone()));
        } else {
            kept.remove(dir);
        }
        names
    }
}

/// What `ralph agents` and `ralph --dry-run` show of the sandbox.
#[derive(Debug, serde::Serialize)]
pub struct Shown {
    /// auto, strict or off.
    pub mode: &'static str,
    /// The Landlock ABI agents are confined at; `None`: unconfined.
    pub abi: Option<u32>,
    /// The run's start line.
    pub summary: String,
    /// What the agent may read, write and connect to.
    pub policy: Option<Policy>,
    /// Why a run would refuse to start (`strict` without Landlock).
    pub problem: Option<String>,
}

/// The sandbox the configured agent would run in.
pub fn show(
    settings: &Settings,
    env: &dyn Fn(&str) -> Option<String>,
    tool: Option<Tool>,
    cwd: &Path,
    program: &str,
) -> Shown {
    let mode = match settings.mode {
        Mode::Auto => "auto",
        Mode::Strict => "strict",
        Mode::Off => "off",
    };
    match Sandbox::new(settings.clone(), env) {
        Ok(s) => Shown {
            mode,
            abi: s.abi(),
            summary: s.describe(tool, cwd, program),
            policy: s.preview(tool, cwd, program),
            problem: None,
        },
        Err(e) => Shown {
            mode,
            abi: None,
            summary: e.to_string(),
            policy: None,
            problem: Some(e.to_string()),
        },
    }
}

/// One confined child's policy and temp dir.
#[derive(Debug)]
pub struct Child {
    pub policy: Arc<Policy>,
    pub abi: u32,
    tmp: PathBuf,
    home: Option<PathBuf>,
    cwd: Option<PathBuf>,
    /// Where its temp dir goes back to when it ends.
    spare: Option<Arc<Spare>>,
    /// The run's last ruleset, to use again when it fits.
    rulesets: Option<Arc<Mutex<Option<KeptRuleset>>>>,
}

impl Child {
    /// A reader of the denials in this child's output.
    pub fn denials(&self) -> super::Denials {
        super::Denials::new(Some(self.policy.clone()), self.home.clone(), self.cwd.clone())
    }

    /// The Landlock ruleset that enforces this child's policy: the last
    /// child's when it had the same policy and none of its paths changed
    /// since, else one built now ([`crate::process::ruleset`]).
    pub fn ruleset(&self) -> Result<Arc<std::os::fd::OwnedFd>, crate::process::ConfineError> {
        let build = || crate::process::ruleset(&self.policy, self.abi).map(Arc::new);
        let Some(rulesets) = &self.rulesets else { return build() };
        let paths = identities(&self.policy);
        let mut kept = rulesets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = kept.as_ref()
            && Arc::ptr_eq(&k.policy, &self.policy)
            && k.abi == self.abi
            && k.paths == paths
        {
            return Ok(k.fd.clone());
        }
        let fd = build()?;
        let policy = self.policy.clone();
        *kept = Some(KeptRuleset { policy, abi: self.abi, paths, fd: fd.clone() });
        Ok(fd)
    }

    /// `TMPDIR`, pointing at the child's private temp dir.
    pub fn env(&self) -> (String, String) {
        ("TMPDIR".to_string(), self.tmp.display().to_string())
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        match &self.spare {
            Some(spare) => spare.give_back(&self.tmp),
            None => {
                let _ = std::fs::remove_dir_all(&self.tmp);
            }
        }
    }
}

/// A config file's text, when it is a small regular file.
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    (meta.is_file() && meta.len() <= 256 * 1024)
        .then(|| std::fs::read_to_string(path).ok())
        .flatten()
}

/// The work tree `cwd` is in (its top, where `.git` is), then its git
/// directory and the common one of a linked worktree, where they lie
/// outside it: git writes objects and refs there.
pub fn work_tree(cwd: &Path) -> Vec<PathBuf> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let Some(top) = cwd.ancestors().find(|d| d.join(".git").exists()) else {
        return vec![cwd];
    };
    let mut tree = vec![top.to_path_buf()];
    let dot_git = top.join(".git");
    if dot_git.is_file()
        && let Some(text) = read_small(&dot_git)
        && let Some(dir) = text.trim().strip_prefix("gitdir:")
    {
        let git_dir = top.join(dir.trim());
        let git_dir = git_dir.canonicalize().unwrap_or(git_dir);
        if let Some(common) = read_small(&git_dir.join("commondir")) {
            let common = git_dir.join(common.trim());
            tree.push(common.canonicalize().unwrap_or(common));
        }
        tree.push(git_dir);
    }
    let root = tree[0].clone();
    let mut out = vec![root.clone()];
    out.extend(tree.into_iter().skip(1).filter(|d| !d.starts_with(&root)));
    out
}

/// `$TMPDIR/ralph-<pid>-<n>-<nanos>`, mode 0700.
fn private_temp_dir() -> std::io::Result<PathBuf> {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name =
        format!("ralph-{}-{}-{nanos:08x}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let dir = std::env::temp_dir().join(name);
    make_private_dir(&dir, false)?;
    Ok(dir)
}

/// `path`, new, readable by its owner only, holding `text` (never through
/// a link, never over an existing file).
fn make_private_file(path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(text)
}

fn make_private_dir(path: &Path, recursive: bool) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(recursive).mode(0o700).create(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(names: Names) -> Vec<String> {
        let mut v = names.to_vec();
        v.sort();
        v
    }

    #[test]
    fn a_folder_changed_just_now_is_listed_again() {
        let dir = tempfile::tempdir().unwrap();
        let listings = Listings::default();
        std::fs::write(dir.path().join("a"), "").unwrap();
        assert_eq!(*listings.names(dir.path()), ["a"]);
        // Within the same timestamp tick as the listing: still seen.
        std::fs::write(dir.path().join("b"), "").unwrap();
        assert_eq!(sorted(listings.names(dir.path())), ["a", "b"]);
        assert!(listings.0.lock().unwrap().is_empty(), "a recent folder is never kept");
    }

    #[test]
    fn a_kept_listing_serves_until_the_folder_changes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "").unwrap();
        let listings = Listings::default();
        let meta = std::fs::metadata(dir.path()).unwrap();
        let stamp = Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        };
        let kept: Names = vec!["kept".to_string()].into();
        listings.0.lock().unwrap().insert(dir.path().to_path_buf(), (stamp, kept));
        assert_eq!(*listings.names(dir.path()), ["kept"], "the same stamp: the kept listing");
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(dir.path().join("b"), "").unwrap();
        assert_eq!(sorted(listings.names(dir.path())), ["a", "b"], "a new entry: listed again");
        assert!(listings.names(&dir.path().join("missing")).is_empty());
    }

    /// A sandbox whose home is an old folder: a listing is kept only for a
    /// folder that has not changed in the last seconds.
    fn old_home_sandbox() -> Sandbox {
        let settings = Settings {
            mode: Mode::Auto,
            read: Vec::new(),
            write: Vec::new(),
            net: super::super::Net::Ports,
            ports: Vec::new(),
        };
        let home = |k: &str| (k == "HOME").then(|| "/usr/lib".to_string());
        Sandbox::new(settings, &home).unwrap()
    }

    #[test]
    fn the_same_inputs_get_the_kept_policy_and_a_changed_one_a_new_policy() {
        let sandbox = old_home_sandbox();
        let project = tempfile::tempdir().unwrap();
        let tmp = project.path().join("tmp");
        let policy = |env_set: &[(String, String)]| {
            sandbox.policy(None, project.path(), "sh", env_set, &tmp, false)
        };
        let iteration = |n: u32| vec![("RALPH_ITERATION".to_string(), n.to_string())];
        let first = policy(&iteration(1));
        let second = policy(&iteration(2));
        assert!(Arc::ptr_eq(&first, &second), "the iteration's own variables are not inputs");
        let mut toolchain = iteration(3);
        toolchain.push(("CARGO_HOME".into(), "/usr/share".into()));
        let other = policy(&toolchain);
        assert!(!Arc::ptr_eq(&first, &other), "a variable the policy reads changed");
        assert!(other.read.iter().any(|p| p.starts_with("/usr/share")), "{other:?}");
        assert!(!first.read.iter().any(|p| p == Path::new("/usr/share")), "{first:?}");
        let moved =
            sandbox.policy(None, project.path(), "sh", &iteration(4), &tmp.join("x"), false);
        assert!(!Arc::ptr_eq(&other, &moved) && moved.tmp == tmp.join("x"), "a new temp dir");
    }

    #[test]
    fn a_ruleset_is_built_again_only_when_its_policy_or_a_path_of_it_changed() {
        let sandbox = old_home_sandbox();
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let child = || sandbox.child(None, &project, "sh", &[]).unwrap();
        let Some(first) = child() else {
            eprintln!("SKIPPED: this kernel has no Landlock");
            return;
        };
        let built = first.ruleset().unwrap();
        drop(first);
        let second = child().unwrap();
        assert!(Arc::ptr_eq(&built, &second.ruleset().unwrap()), "the same policy, unchanged");
        drop(second);
        // The project made again: the old rule holds the removed folder.
        std::fs::remove_dir(&project).unwrap();
        std::fs::create_dir(&project).unwrap();
        let third = child().unwrap();
        assert!(!Arc::ptr_eq(&built, &third.ruleset().unwrap()), "a path is a new folder");
    }

    #[test]
    fn a_child_s_temp_dir_is_emptied_and_kept_for_the_next_one_alone() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "mine").unwrap();
        let spare = Spare::default();
        let first = spare.take().unwrap();
        std::fs::create_dir_all(first.join("a/b")).unwrap();
        std::fs::write(first.join("a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), first.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path(), first.join("a/out")).unwrap();
        // Two children at once: the second gets a dir of its own.
        let second = spare.take().unwrap();
        assert_ne!(first, second);
        spare.give_back(&first);
        spare.give_back(&second);
        assert!(!second.exists(), "only one dir is kept");
        let again = spare.take().unwrap();
        assert_eq!(again, first, "the kept dir is reused");
        assert_eq!(std::fs::read_dir(&again).unwrap().count(), 0, "and empty");
        assert_eq!(std::fs::read_to_string(outside.path().join("keep")).unwrap(), "mine");
        // A kept dir that is no longer private is not reused.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&again, std::fs::Permissions::from_mode(0o755)).unwrap();
        spare.give_back(&again);
        let fresh = spare.take().unwrap();
        assert_ne!(fresh, again);
        assert!(!again.exists());
        spare.give_back(&fresh);
        drop(spare);
        assert!(!fresh.exists(), "removed with the sandbox");
    }
}
