//! The repository's own config and hooks are the person's. ralph's git
//! commands — a push or a fetch, outside the sandbox — read `.git/config`
//! (credential helpers, URL rewrites, SSH commands) and would run
//! `.git/hooks/`; the sandbox lets the agent write the git directory (it
//! commits). So what an iteration changed there is set back before
//! anything of ralph's reads it, and the iteration is judged tampered.
//!
//! [`mark_with`] reads what is there, [`changed`] compares two marks (pure),
//! [`set_back`] writes a mark's files back. A mark reads again only what
//! changed since its [`Cache`] saw it: it is taken twice an iteration, and
//! would read the same dozen files each time otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What is at a guarded path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A file, with its permission bits.
    File { bytes: Vec<u8>, mode: u32 },
    /// A symbolic link, with its target.
    Link(std::path::PathBuf),
    /// Something else (a folder, a FIFO): only its being there counts.
    Other,
}

/// The guarded files of a git directory: `config` and `hooks/*` but the
/// inert `*.sample`, by their path relative to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mark(pub BTreeMap<String, Entry>);

/// The most bytes read of one guarded file: a larger one is `Other`.
const MAX_BYTES: u64 = 1 << 20;

/// What a guarded file's inode says of it. Any change of its content or
/// metadata sets its ctime, which no unprivileged process can set back; a
/// file put in its place is another inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mode: meta.mode(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// The entries marks read, by path and stamp.
#[derive(Debug, Default)]
pub struct Cache(BTreeMap<PathBuf, (Stamp, Entry)>);

/// What `git init` names the hooks it leaves as examples, never run.
const SAMPLE: &str = ".sample";

/// A file changed this recently may change again within the same tick of
/// its clock (git's "racy" files): it is read every time.
const RACY: Duration = Duration::from_secs(2);

/// What is there now (best effort: what cannot be read is not marked),
/// reading only the files whose stamp differs from what `cache` saw (or
/// that changed in the last [`RACY`]).
pub fn mark_with(git_dir: &Path, cache: &mut Cache) -> Mark {
    mark_at(git_dir, cache, SystemTime::now())
}

fn mark_at(git_dir: &Path, cache: &mut Cache, now: SystemTime) -> Mark {
    let mut files = BTreeMap::new();
    let mut add = |rel: String| {
        if let Some(e) = cached_entry(&git_dir.join(&rel), cache, now) {
            files.insert(rel, e);
        }
    };
    add("config".into());
    if let Ok(hooks) = std::fs::read_dir(git_dir.join("hooks")) {
        for h in hooks.flatten() {
            let name = h.file_name();
            let name = name.to_string_lossy();
            // git runs a hook by its exact name, never `<hook>.sample`: the
            // samples `git init` leaves are inert whatever is in them, and
            // one renamed to run is a new name here. Not reading them saves
            // a dozen stats twice an iteration.
            if !name.ends_with(SAMPLE) {
                add(format!("hooks/{name}"));
            }
        }
    }
    Mark(files)
}

fn cached_entry(path: &Path, cache: &mut Cache, now: SystemTime) -> Option<Entry> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        cache.0.remove(path);
        return None;
    };
    let stamp = Stamp::of(&meta);
    if let Some((seen, e)) = cache.0.get(path)
        && *seen == stamp
    {
        return Some(e.clone());
    }
    let e = entry(path, &meta)?;
    let changed = SystemTime::UNIX_EPOCH
        + Duration::new(stamp.ctime.0.max(0) as u64, stamp.ctime.1.clamp(0, 999_999_999) as u32);
    match now.duration_since(changed) {
        Ok(age) if age >= RACY => {
            cache.0.insert(path.to_path_buf(), (stamp, e.clone()));
        }
        _ => {
            cache.0.remove(path);
        }
    }
    Some(e)
}

fn entry(path: &Path, meta: &std::fs::Metadata) -> Option<Entry> {
    use std::os::unix::fs::PermissionsExt;
    if meta.file_type().is_symlink() {
        return std::fs::read_link(path).ok().map(Entry::Link);
    }
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return Some(Entry::Other);
    }
    let bytes = crate::store::read_regular(path).ok()?;
    Some(Entry::File { bytes, mode: meta.permissions().mode() & 0o7777 })
}

/// The paths (relative to the git directory) whose entry differs between
/// `before` and `after`: changed, added or removed. A config that differs
/// only in its `[user]` sections (the identity aider writes when the home
/// has none) runs nothing and is not a change.
pub fn changed(before: &Mark, after: &Mark) -> Vec<String> {
    let same = |p: &str, a: &Entry, b: Option<&Entry>| match (a, b) {
        (Entry::File { bytes: x, mode: m }, Some(Entry::File { bytes: y, mode: n })) => {
            m == n && (x == y || (p == "config" && without_identity(x) == without_identity(y)))
        }
        (a, b) => Some(a) == b,
    };
    let mut paths: Vec<String> = before
        .0
        .iter()
        .filter(|(p, e)| !same(p, e, after.0.get(*p)))
        .map(|(p, _)| p.clone())
        .collect();
    paths.extend(after.0.keys().filter(|p| !before.0.contains_key(*p)).cloned());
    paths.sort();
    paths
}

/// A git config's text without its `[user]` sections (name, email,
/// signing key: who commits, nothing git runs), lines trimmed.
fn without_identity(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_user = false;
    for line in String::from_utf8_lossy(bytes).lines().map(str::trim) {
        if line.starts_with('[') {
            let section = line.trim_start_matches('[').split([']', ' ', '"']).next().unwrap_or("");
            in_user = section.eq_ignore_ascii_case("user");
        }
        if !in_user && !line.is_empty() {
            out.push(line.to_string());
        }
    }
    out
}

/// Puts `paths` back as `before` has them (removing what it has not).
/// Returns what could not be set back, with why.
pub fn set_back(git_dir: &Path, before: &Mark, paths: &[String]) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut failed = Vec::new();
    for rel in paths {
        let path = git_dir.join(rel);
        let removed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        let put = removed.and_then(|()| match before.0.get(rel) {
            Some(Entry::File { bytes, mode }) => {
                crate::store::write_replace(&path, bytes)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
            }
            Some(Entry::Link(target)) => std::os::unix::fs::symlink(target, &path),
            Some(Entry::Other) | None => Ok(()),
        });
        if let Err(e) = put {
            failed.push(format!("{rel}: {e}"));
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(git_dir: &Path) -> Mark {
        mark_with(git_dir, &mut Cache::default())
    }

    fn file(text: &str) -> Entry {
        Entry::File { bytes: text.as_bytes().to_vec(), mode: 0o644 }
    }

    fn marked(entries: &[(&str, Entry)]) -> Mark {
        Mark(entries.iter().map(|(p, e)| (p.to_string(), e.clone())).collect())
    }

    #[test]
    fn what_changed_added_or_went_is_named() {
        let config = ("config", file("[core]\n"));
        let hook = ("hooks/pre-push.sample", file("#!/bin/sh\n"));
        let base = marked(&[config.clone(), hook.clone()]);
        let exec = Entry::File { bytes: b"[core]\n".to_vec(), mode: 0o755 };
        let table: Vec<(Mark, Vec<&str>)> = vec![
            (base.clone(), vec![]),
            (
                marked(&[("config", file("[credential]\nhelper = !x\n")), hook.clone()]),
                vec!["config"],
            ),
            (
                marked(&[config.clone(), hook.clone(), ("hooks/pre-push", file("x"))]),
                vec!["hooks/pre-push"],
            ),
            (marked(std::slice::from_ref(&hook)), vec!["config"]),
            (marked(&[("config", exec), hook.clone()]), vec!["config"]),
            (marked(&[("config", Entry::Link("/tmp/x".into())), hook]), vec!["config"]),
        ];
        for (after, want) in table {
            assert_eq!(changed(&base, &after), want, "{after:?}");
        }
        // An identity added (aider, with no global git identity) is not a
        // change; anything else beside it is.
        let ident = "[core]\n[user]\n\tname = aider\n\temail = a@b\n";
        let with =
            marked(&[("config", file(ident)), ("hooks/pre-push.sample", file("#!/bin/sh\n"))]);
        assert_eq!(changed(&base, &with), Vec::<String>::new());
        let more = format!("{ident}[credential]\n\thelper = !evil\n");
        let with =
            marked(&[("config", file(&more)), ("hooks/pre-push.sample", file("#!/bin/sh\n"))]);
        assert_eq!(changed(&base, &with), ["config"]);
    }

    #[test]
    fn what_an_agent_did_to_config_and_hooks_is_set_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path();
        std::fs::create_dir(git.join("hooks")).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(
            git.join("hooks/pre-commit"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let before = mark(git);
        std::fs::write(git.join("config"), "[credential]\nhelper = !evil\n").unwrap();
        std::fs::write(git.join("hooks/pre-push"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::remove_file(git.join("hooks/pre-commit")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", git.join("hooks/post-checkout")).unwrap();
        let paths = changed(&before, &mark(git));
        assert_eq!(paths, ["config", "hooks/post-checkout", "hooks/pre-commit", "hooks/pre-push"]);
        assert!(set_back(git, &before, &paths).is_empty());
        assert_eq!(mark(git), before);
        let mode = std::fs::metadata(git.join("hooks/pre-commit")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn the_inert_samples_are_not_guarded_and_one_renamed_to_run_is() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path();
        std::fs::create_dir(git.join("hooks")).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\nexit 0\n").unwrap();
        let before = mark(git);
        assert_eq!(before.0.keys().collect::<Vec<_>>(), ["config"]);
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\nevil\n").unwrap();
        assert!(changed(&before, &mark(git)).is_empty(), "git never runs a sample");
        std::fs::rename(git.join("hooks/pre-commit.sample"), git.join("hooks/pre-commit")).unwrap();
        let paths = changed(&before, &mark(git));
        assert_eq!(paths, ["hooks/pre-commit"]);
        assert!(set_back(git, &before, &paths).is_empty());
        assert!(!git.join("hooks/pre-commit").exists(), "the hook made to run is removed");
    }

    #[test]
    fn a_cached_mark_sees_every_change_a_stamp_cannot_hide() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path();
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        std::fs::write(git.join("hooks/pre-push"), "#!/bin/sh\nexit 0\n").unwrap();
        // As if the files were old: cached.
        let later = SystemTime::now() + Duration::from_secs(60);
        let mut cache = Cache::default();
        let first = mark_at(git, &mut cache, later);
        assert_eq!(cache.0.len(), 2);
        assert_eq!(mark_at(git, &mut cache, later), first, "nothing changed");
        // Same length, same mtime: the ctime still tells.
        let hook = git.join("hooks/pre-push");
        let mtime = std::fs::metadata(&hook).unwrap().modified().unwrap();
        std::fs::write(&hook, "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::File::options().write(true).open(&hook).unwrap().set_modified(mtime).unwrap();
        let second = mark_at(git, &mut cache, later);
        assert_eq!(changed(&first, &second), ["hooks/pre-push"]);
        // Another file put in its place.
        std::fs::write(git.join("other"), "[core]\n\thooksPath = /tmp\n").unwrap();
        std::fs::rename(git.join("other"), git.join("config")).unwrap();
        let third = mark_at(git, &mut cache, later);
        assert_eq!(changed(&second, &third), ["config"]);
        // Removed.
        std::fs::remove_file(&hook).unwrap();
        assert_eq!(changed(&third, &mark_at(git, &mut cache, later)), ["hooks/pre-push"]);
        // A file changed just now is read every time, never cached.
        let mut fresh = Cache::default();
        let _ = mark_at(git, &mut fresh, SystemTime::now());
        assert!(fresh.0.is_empty(), "{fresh:?}");
    }
}
