//! The git remote, for workers on several machines: clone, fetch and
//! compare-and-swap pushes, through the `git` program.
//!
//! Why `git` and not git2 here, when everything local is git2: a remote is
//! reached the way the machine's own git reaches it — its credential
//! helpers, SSH config, proxies and certificates — which git2 would
//! otherwise need OpenSSL and libssh2 built in for, and would still not
//! honour. Each call is bounded in time and never prompts.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::GitError;
use crate::agent::supervise::run_brief;

/// How long one fetch or push may take before it counts as the remote
/// being unreachable.
const TIMEOUT: Duration = Duration::from_secs(120);

/// `(ref, oid)`: a push of the ref lands only if the remote has it at that
/// oid (has none, when the oid is empty).
pub type Lease = (String, String);

/// What the remote said of one ref of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub dst: String,
    /// Refused (not a fast-forward, or the remote's hooks said no), and why.
    pub rejected: Option<String>,
}

/// Runs `git` in `dir` with `args`; its stdout, or why it failed.
fn git(dir: &Path, args: &[&str]) -> Result<(String, String, bool), GitError> {
    // The repository's hooks are not run by ralph's pushes and fetches:
    // an agent can write them, and these run outside the sandbox.
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env(
            "GIT_SSH_COMMAND",
            std::env::var("GIT_SSH_COMMAND").unwrap_or_else(|_| "ssh -o BatchMode=yes".into()),
        );
    let done = run_brief(&mut cmd, TIMEOUT).map_err(|e| {
        GitError::io("run git", e).with_hint("a worker needs the git program to reach the remote")
    })?;
    if done.timed_out() {
        return Err(GitError::failed(
            format!("git {} took longer than {}s", args.join(" "), TIMEOUT.as_secs()),
            Some("check that the remote is reachable".into()),
        ));
    }
    let ok = done.success();
    Ok((done.stdout, done.stderr, ok))
}

fn failed(what: &str, stderr: &str) -> GitError {
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    GitError::failed(
        format!("{what}: {last}"),
        Some("check the remote's URL and the credentials for it".into()),
    )
}

/// Clones `url` into `dir` (which must not exist or be empty).
pub fn clone(url: &str, dir: &Path) -> Result<(), GitError> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    let _ = std::fs::create_dir_all(parent);
    let target = dir.to_string_lossy().into_owned();
    let (_, err, ok) = git(parent, &["clone", "--quiet", url, &target])?;
    if ok { Ok(()) } else { Err(failed(&format!("cannot clone {url}"), &err)) }
}

/// A new repository in `dir` (made empty) holding only the tips of the
/// remote's branches and ralph's refs, fetched as [`fetch`] names them:
/// enough to read a run, without a clone's history or work tree.
pub fn snapshot(url: &str, dir: &Path) -> Result<(), GitError> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| GitError::io(format!("make {}", dir.display()), e))?;
    let (_, err, ok) = git(dir, &["init", "--quiet"])?;
    if !ok {
        return Err(failed("cannot make a repository to fetch into", &err));
    }
    let (_, err, ok) = git(
        dir,
        &[
            "fetch",
            "--quiet",
            "--depth=1",
            "--no-tags",
            url,
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/ralph/*:refs/remotes/origin-ralph/*",
        ],
    )?;
    if ok { Ok(()) } else { Err(failed(&format!("cannot fetch from {url}"), &err)) }
}

/// Fetches every branch (as `refs/remotes/origin/*`) and ralph's refs (as
/// `refs/remotes/origin-ralph/*`), dropping what the remote no longer has.
pub fn fetch(dir: &Path) -> Result<(), GitError> {
    let (_, err, ok) = git(
        dir,
        &[
            "fetch",
            "--quiet",
            "--prune",
            "--no-tags",
            "origin",
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/ralph/*:refs/remotes/origin-ralph/*",
        ],
    )?;
    if ok { Ok(()) } else { Err(failed("cannot fetch from the remote", &err)) }
}

/// Pushes `specs` (`<oid or ref>:<dst>`; a leading `+` forces, `:dst`
/// deletes) and says, ref by ref, what the remote did. Without `+` a ref
/// moves only by fast-forward and a new ref is made only where none is:
/// the compare-and-swap claims and deliveries rely on. `Err` when the
/// remote could not be reached at all.
pub fn push(dir: &Path, specs: &[String]) -> Result<Vec<Pushed>, GitError> {
    push_leased(dir, specs, &[])
}

/// [`push`], each `(ref, oid)` of `leases` changed only if the remote has
/// it at `oid` still (git's `--force-with-lease=<ref>:<oid>`, which is
/// what lets a delete be a compare-and-swap).
pub fn push_leased(
    dir: &Path,
    specs: &[String],
    leases: &[Lease],
) -> Result<Vec<Pushed>, GitError> {
    let (pushed, err) = push_with(dir, specs, leases, false)?;
    if pushed.is_empty() {
        return Err(failed("cannot push to the remote", &err));
    }
    Ok(pushed)
}

/// [`push_leased`], all or nothing (`--atomic`). `Ok(None)` when the
/// remote cannot push atomically.
pub fn push_atomic(
    dir: &Path,
    specs: &[String],
    leases: &[Lease],
) -> Result<Option<Vec<Pushed>>, GitError> {
    let (pushed, err) = push_with(dir, specs, leases, true)?;
    if pushed.is_empty() {
        if err.contains("does not support --atomic") {
            return Ok(None);
        }
        return Err(failed("cannot push to the remote", &err));
    }
    Ok(Some(pushed))
}

fn push_with(
    dir: &Path,
    specs: &[String],
    leases: &[Lease],
    atomic: bool,
) -> Result<(Vec<Pushed>, String), GitError> {
    push_with_to(dir, "origin", specs, leases, atomic)
}

/// [`push`] to the remote named `remote` (delivering pull requests'
/// branches to `deliver.remote`).
pub fn push_to(dir: &Path, remote: &str, specs: &[String]) -> Result<Vec<Pushed>, GitError> {
    let (pushed, err) = push_with_to(dir, remote, specs, &[], false)?;
    if pushed.is_empty() {
        return Err(failed("cannot push to the remote", &err));
    }
    Ok(pushed)
}

/// The URL of the remote named `remote`; `None` when there is no such remote.
pub fn url_of(dir: &Path, remote: &str) -> Result<Option<String>, GitError> {
    let (out, _, ok) = git(dir, &["remote", "get-url", "--", remote])?;
    Ok(ok.then(|| out.trim().to_string()).filter(|u| !u.is_empty()))
}

/// The branch the remote's HEAD names (its default branch), if it says.
pub fn default_branch(dir: &Path, remote: &str) -> Option<String> {
    let (out, _, ok) = git(dir, &["ls-remote", "--symref", "--", remote, "HEAD"]).ok()?;
    if !ok {
        return None;
    }
    out.lines().find_map(|l| {
        let rest = l.strip_prefix("ref: refs/heads/")?;
        Some(rest.split('\t').next()?.trim().to_string())
    })
}

fn push_with_to(
    dir: &Path,
    remote: &str,
    specs: &[String],
    leases: &[Lease],
    atomic: bool,
) -> Result<(Vec<Pushed>, String), GitError> {
    let leases: Vec<String> =
        leases.iter().map(|(r, oid)| format!("--force-with-lease={r}:{oid}")).collect();
    let mut args = vec!["push", "--porcelain"];
    if atomic {
        args.push("--atomic");
    }
    args.extend(leases.iter().map(String::as_str));
    args.push(remote);
    args.extend(specs.iter().map(String::as_str));
    let (out, err, _) = git(dir, &args)?;
    Ok((parse_porcelain(&out), err))
}

/// Refused only because another ref of an atomic push was: git says so
/// for the rest of the push, in its own words when it refused a ref
/// itself ("atomic push failed") and in the server's when the server did
/// ("atomic push failure"). A server-side race on the ref itself ("atomic
/// transaction failed") is a refusal of its own.
pub fn collateral(why: &str) -> bool {
    why.contains("atomic push failed") || why.contains("atomic push failure")
}

/// `git push --porcelain`: `<flag>\t<src>:<dst>\t<summary>` per ref, `!` rejected.
fn parse_porcelain(out: &str) -> Vec<Pushed> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let flag = f.next()?;
            let refs = f.next()?;
            let summary = f.next().unwrap_or("").trim();
            let dst = refs.rsplit_once(':').map(|(_, d)| d)?.to_string();
            let rejected = (flag == "!").then(|| summary.to_string());
            (flag.len() == 1).then_some(Pushed { dst, rejected })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_says_ref_by_ref_what_the_remote_did() {
        let out = "To /tmp/remote.git\n\
                   *\tabc:refs/ralph/x/claims/US-1\t[new reference]\n\
                   !\tdef:refs/heads/main\t[rejected] (non-fast-forward)\n\
                   -\t:refs/heads/old\t[deleted]\n\
                   Done\n";
        assert_eq!(
            parse_porcelain(out),
            [
                Pushed { dst: "refs/ralph/x/claims/US-1".into(), rejected: None },
                Pushed {
                    dst: "refs/heads/main".into(),
                    rejected: Some("[rejected] (non-fast-forward)".into())
                },
                Pushed { dst: "refs/heads/old".into(), rejected: None },
            ]
        );
        assert!(parse_porcelain("fatal: could not read from remote\n").is_empty());
    }

    /// A delivery that also deletes a claim: all of it lands while the
    /// claim is the one we made; none of it once another worker's replaced it.
    #[test]
    fn an_atomic_push_with_a_lease_is_all_or_nothing() {
        // Its git children are descendants the supervisor tests' sweeps would end.
        let _serial = crate::agent::supervise::serial();
        let dir = tempfile::tempdir().unwrap();
        let sh = |args: &[&str]| {
            let out = Command::new("git").current_dir(dir.path()).args(args).output().unwrap();
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        sh(&["init", "-q", "--bare", "r.git"]);
        sh(&["init", "-q", "c"]);
        let c = dir.path().join("c");
        let commit = |m: &str| {
            git(
                &c,
                &[
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "commit",
                    "-q",
                    "--allow-empty",
                    "-m",
                    m,
                ],
            )
            .unwrap();
            git(&c, &["rev-parse", "HEAD"]).unwrap().0.trim().to_string()
        };
        git(&c, &["remote", "add", "origin", "../r.git"]).unwrap();
        let (base, claim, theirs) = (commit("base"), commit("claim"), commit("theirs"));
        let tip = commit("delivered");
        let (run, claim_ref) =
            ("refs/heads/run".to_string(), "refs/ralph/run/claims/us-1".to_string());
        push(&c, &[format!("{base}:{run}"), format!("{theirs}:{claim_ref}")]).unwrap();
        let specs = [format!("{tip}:{run}"), format!(":{claim_ref}")];

        // Our claim was replaced: nothing moves.
        let stale = [(claim_ref.clone(), claim.clone())];
        let pushed = push_atomic(&c, &specs, &stale).unwrap().unwrap();
        assert!(pushed.iter().all(|p| p.rejected.is_some()), "{pushed:?}");
        let remote =
            |r: &str| sh(&["--git-dir=r.git", "for-each-ref", "--format=%(objectname)", r]);
        assert_eq!((remote(&run), remote(&claim_ref)), (base.clone(), theirs.clone()));

        // It is still ours: the run branch moves and the claim goes, together.
        let ours = [(claim_ref.clone(), theirs.clone())];
        let pushed = push_atomic(&c, &specs, &ours).unwrap().unwrap();
        assert!(pushed.iter().all(|p| p.rejected.is_none()), "{pushed:?}");
        assert_eq!((remote(&run), remote(&claim_ref)), (tip, String::new()));
    }
}
