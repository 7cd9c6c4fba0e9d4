//! `ralph worker --remote URL`: one machine's share of a run whose only
//! shared state is the git remote. The clone is made or brought up to the
//! remote, put on the run branch, and handed to the parallel loop with the
//! remote as its coordinator (`driver::parallel::remote`).

use std::path::Path;
use std::time::Duration;

use crate::cli::{Global, RemoteWorkerArgs};
use crate::error::Error;
use crate::git::{Repo, remote};
use crate::paths::Paths;

use super::common::reporter;
use super::flags::layers;

pub(crate) fn run(g: &Global, args: &RemoteWorkerArgs) -> Result<u8, Error> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().map_err(|e| Error::io("find the current directory", e))?,
    };
    // Before the clone exists: the user's config, the environment (and an
    // existing clone's own config) name the remote.
    let before = layers(g, &dir, &args.settings)?.resolve().worker;
    let Some(url) = args.remote.clone().or(before.remote) else {
        return Err(Error::Usage(
            "ralph worker needs the shared repository: --remote URL, or worker.remote in the \
             config (RALPH_WORKER_REMOTE in the environment)"
                .into(),
        ));
    };
    prepare(&url, &dir, g.prd.as_deref())?;
    let paths = Paths::resolve(&dir, g.prd.as_deref())?;
    let layers = layers(g, &paths.project, &args.settings)?;
    let config = layers.resolve();
    let (mut reporter, _) = reporter(g, &config);
    let id = args.id.clone().or(config.worker.id.clone()).unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "worker".into());
        format!("{host}-{}", std::process::id())
    });
    let lease = match &args.lease {
        Some(l) => crate::config::parse_duration(l).map_err(|e| Error::Usage(e.to_string()))?,
        None => config.worker.lease,
    };
    if lease < std::time::Duration::from_secs(1) {
        return Err(Error::Usage("--lease must be at least 1s".into()));
    }
    let opts = crate::driver::Options {
        max_iterations: config.run.max_iterations.max(1),
        prompt_file: args.settings.prompt.clone(),
        fresh: false,
        explicit_max: args.settings.max_iterations.is_some(),
        // The agent's lines are events whatever the terminal shows: the
        // run's events.jsonl has them (the renderer leaves out what it hides).
        agent_output: true,
        layers: Some(layers),
        mode: crate::driver::Mode::Remote(crate::driver::RemoteWorker { id, lease }),
        config,
    };
    crate::driver::run(&paths, &opts, reporter.as_mut())
}

/// The clone in `dir`, made from `url` if there is none, fetched, and on
/// the run branch (the PRD's `branchName`) at the remote's tip; a run
/// branch the remote does not have yet is made from HEAD and pushed.
/// A clone of `url` that never finished: no index yet (its checkout
/// writes that last), and a config that names `url` or none at all yet.
fn half_made_clone(url: &str, dir: &Path) -> bool {
    let git = dir.join(".git");
    let config = std::fs::read_to_string(git.join("config"));
    git.is_dir()
        && !git.join("index").exists()
        && match config {
            Ok(c) => c.contains(url),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
}

fn prepare(url: &str, dir: &Path, prd_file: Option<&Path>) -> Result<(), Error> {
    if half_made_clone(url, dir) {
        // A worker killed in the middle of its clone: what is there came
        // from that clone (the folder was empty), so it is made again.
        for e in std::fs::read_dir(dir).map_err(|e| Error::io("read the worker's folder", e))? {
            let path = e.map_err(|e| Error::io("read the worker's folder", e))?.path();
            let gone = match std::fs::symlink_metadata(&path).map(|m| m.is_dir()) {
                Ok(true) => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
            gone.map_err(|e| Error::io("remove a half-made clone", e))?;
        }
    }
    let clone_here = !dir.join(".git").exists();
    if clone_here {
        let empty = std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none());
        if !empty {
            return Err(Error::Usage(format!(
                "{} is not a git clone and not empty: give ralph worker an empty --dir, or a clone",
                dir.display()
            )));
        }
        remote::clone(url, dir)?;
    }
    let repo = Repo::discover(dir)?;
    // A worker killed in the middle of a ref update or a commit left git's
    // lock files; one killed while bringing the work tree along left it
    // half-advanced. Both are put right before anything moves again.
    repo.clear_stale_locks(std::time::SystemTime::now(), Duration::from_secs(5))?;
    let paths = Paths::resolve(dir, prd_file)?;
    crate::driver::finish_advance(&repo, &paths)?;
    remote::fetch(dir)?;
    paths.require_prd()?;
    let prd = crate::prd::Prd::load(&paths.prd)?;
    let Some(branch) = prd.branch_name().map(str::to_string).or_else(|| repo.current_branch())
    else {
        return Err(Error::Usage(
            "the clone's HEAD is detached and prd.json names no branchName: ralph worker needs a run branch".into(),
        ));
    };
    let theirs = repo.ref_target(&format!("refs/remotes/origin/{branch}"));
    let head = repo.head().ok_or_else(|| Error::Usage("the remote has no commit".into()))?;
    match theirs {
        Some(tip) if repo.current_branch().as_deref() == Some(branch.as_str()) => {
            let local = repo.branch_tip(&branch).unwrap_or(head);
            if local != tip && repo.contains(tip, local) {
                crate::driver::advance_journalled(&repo, &paths, &branch, local, tip)?;
            }
        }
        Some(tip) => {
            repo.set_branch(&branch, tip)?;
            repo.ensure_branch(&branch)?;
        }
        None => {
            if repo.branch_tip(&branch).is_none() {
                repo.set_branch(&branch, head)?;
            }
            repo.ensure_branch(&branch)?;
            // Another worker may make it at the same moment: theirs wins.
            let spec = format!("refs/heads/{branch}:refs/heads/{branch}");
            let pushed = remote::push(dir, &[spec])?;
            if pushed.iter().any(|p| p.rejected.is_some()) {
                // With the same --prd: the run branch is that PRD's.
                return prepare(url, dir, prd_file);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_clone_of_this_remote_that_never_checked_out_is_half_made() {
        let url = "git://127.0.0.1:9418/run.git";
        let cases: &[(&[(&str, &str)], bool)] = &[
            (
                &[(".git/config", "[remote \"origin\"]\n\turl = git://127.0.0.1:9418/run.git\n")],
                true,
            ),
            (&[(".git/HEAD", "ref: refs/heads/main\n")], true),
            (
                &[
                    (".git/config", "[remote \"origin\"]\n\turl = git://127.0.0.1:9418/run.git\n"),
                    (".git/index", ""),
                ],
                false,
            ),
            (&[(".git/config", "[core]\n"), ("notes.txt", "a person's")], false),
            (&[("notes.txt", "a person's")], false),
        ];
        for (files, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            for (path, text) in *files {
                let path = dir.path().join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            assert_eq!(half_made_clone(url, dir.path()), *want, "{files:?}");
        }
    }
}
