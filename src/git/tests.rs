use super::*;
use std::fs;

fn repo_with_commit() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path()).unwrap();
    fs::write(dir.path().join("a.txt"), "a").unwrap();
    repo.commit_paths(&[Path::new("a.txt")], "init").unwrap();
    (dir, repo)
}

#[test]
fn ralphs_commits_take_only_their_own_paths() {
    let (dir, repo) = repo_with_commit();
    fs::write(dir.path().join("staged.txt"), "the agent's").unwrap();
    let mut index = repo.repo.index().unwrap();
    index.add_path(Path::new("staged.txt")).unwrap();
    index.write().unwrap();
    fs::write(dir.path().join("a.txt"), "ralph's").unwrap();
    let id = repo.commit_paths(&[Path::new("a.txt")], "chore: x").unwrap();
    let tree = repo.repo.find_commit(id).unwrap().tree().unwrap();
    assert!(tree.get_path(Path::new("a.txt")).is_ok());
    assert!(
        tree.get_path(Path::new("staged.txt")).is_err(),
        "the agent's staged file was committed"
    );
    // Still staged, and a.txt is clean.
    let statuses = repo.repo.statuses(None).unwrap();
    let st = |p: &str| statuses.iter().find(|e| e.path().ok() == Some(p)).map(|e| e.status());
    assert_eq!(st("staged.txt"), Some(git2::Status::INDEX_NEW));
    assert_eq!(st("a.txt"), None);
}

#[test]
fn ralphs_commits_keep_deletions_modes_and_links() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, repo) = repo_with_commit();
    fs::write(dir.path().join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("run.sh", dir.path().join("link")).unwrap();
    fs::remove_file(dir.path().join("a.txt")).unwrap();
    let paths = [Path::new("run.sh"), Path::new("link"), Path::new("a.txt")];
    let id = repo.commit_paths(&paths, "feat: x").unwrap();
    let tree = repo.repo.find_commit(id).unwrap().tree().unwrap();
    let mode = |p: &str| tree.get_path(Path::new(p)).map(|e| e.filemode()).ok();
    assert_eq!(mode("run.sh"), Some(0o100755));
    assert_eq!(mode("link"), Some(0o120000));
    assert_eq!(mode("a.txt"), None, "the deleted file is still committed");
    // The work tree is clean afterwards, and committing it again makes
    // no empty commit.
    let after = repo.snapshot().unwrap();
    assert!(after.dirty.is_empty(), "{:?}", after.dirty);
    assert_eq!(repo.commit_paths(&paths[..2], "again").unwrap(), id);
}

#[test]
fn stale_locks_are_cleared_and_held_ones_named() {
    // A sweep in a parallel test would end the child holding the lock.
    let _serial = crate::agent::supervise::serial();
    let (dir, repo) = repo_with_commit();
    let git = dir.path().join(".git");
    let start = std::time::SystemTime::now();
    std::fs::create_dir_all(git.join("refs/heads/ralph")).unwrap();
    for name in ["index.lock", "refs/heads/ralph/x.lock"] {
        fs::write(git.join(name), "").unwrap();
    }
    // Made before the run started: a dead writer's.
    let cleared =
        repo.clear_stale_locks(start + std::time::Duration::from_secs(1), Default::default());
    assert_eq!(cleared.unwrap().len(), 2);
    assert!(!git.join("index.lock").exists());
    fs::write(dir.path().join("a.txt"), "b").unwrap();
    repo.commit_paths(&[Path::new("a.txt")], "after the crash").unwrap();
    // Held by a live process (here: this one's child holding it open).
    fs::write(git.join("index.lock"), "").unwrap();
    let mut holder = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 3<index.lock; sleep 30")
        .current_dir(&git)
        .spawn()
        .unwrap();
    let held = || crate::process::holder_of(&git.join("index.lock")).is_some();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !held() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let e = repo
        .clear_stale_locks(std::time::SystemTime::now(), std::time::Duration::from_millis(200))
        .unwrap_err();
    assert!(e.message.contains("index.lock is held by a running process"), "{}", e.message);
    assert!(git.join("index.lock").exists(), "a held lock was removed");
    let _ = holder.kill();
    let _ = holder.wait();
}

#[test]
fn outside_a_repository_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = Repo::discover(dir.path()).err().unwrap();
    assert!(e.message.contains("not inside a git repository"), "{}", e.message);
    assert!(e.hint.unwrap().contains("git init"));
}

#[test]
fn changes_count_commits_and_untracked_files() {
    let (dir, repo) = repo_with_commit();
    fs::write(dir.path().join("dirty.txt"), "old").unwrap();
    let before = repo.snapshot().unwrap();
    // Unchanged dirty file is not a change; a new untracked one is.
    fs::write(dir.path().join("new.txt"), "n").unwrap();
    let mid = repo.snapshot().unwrap();
    assert_eq!(repo.changes(&before, &mid).files, ["new.txt"]);
    // A commit of a tracked change counts too.
    fs::write(dir.path().join("a.txt"), "a2").unwrap();
    repo.commit_paths(&[Path::new("a.txt")], "feat: x").unwrap();
    let after = repo.snapshot().unwrap();
    let changes = repo.changes(&before, &after);
    assert_eq!(changes.commits.len(), 1);
    assert_eq!(changes.files, ["a.txt", "new.txt"]);
    // Nothing happened → nothing reported.
    let again = repo.snapshot().unwrap();
    assert_eq!(repo.changes(&after, &again), Changes::default());
}

#[test]
fn branch_is_created_from_head_then_reused() {
    let (_dir, repo) = repo_with_commit();
    let start = repo.current_branch().unwrap();
    assert_eq!(
        repo.ensure_branch("ralph/feature").unwrap(),
        BranchAction::Created { from: start.clone() }
    );
    assert_eq!(repo.current_branch().as_deref(), Some("ralph/feature"));
    assert_eq!(repo.ensure_branch("ralph/feature").unwrap(), BranchAction::AlreadyOn);
    assert_eq!(repo.ensure_branch(&start).unwrap(), BranchAction::SwitchedTo);
    assert!(repo.ensure_branch("bad..name").is_err());
}

#[test]
fn switching_over_uncommitted_changes_is_refused() {
    let (dir, repo) = repo_with_commit();
    let main = repo.current_branch().unwrap();
    repo.ensure_branch("other").unwrap();
    fs::write(dir.path().join("a.txt"), "other").unwrap();
    repo.commit_paths(&[Path::new("a.txt")], "other").unwrap();
    fs::write(dir.path().join("a.txt"), "uncommitted").unwrap();
    let e = repo.ensure_branch(&main).unwrap_err();
    assert!(e.message.contains("uncommitted changes in a.txt"), "{}", e.message);
    assert!(e.hint.unwrap().contains("stash"));
    assert_eq!(fs::read_to_string(dir.path().join("a.txt")).unwrap(), "uncommitted");
}

#[test]
fn edits_to_prd_json_are_carried_across_a_switch() {
    let (dir, repo) = repo_with_commit();
    let main = repo.current_branch().unwrap();
    fs::write(dir.path().join("prd.json"), "old").unwrap();
    repo.commit_paths(&[Path::new("prd.json")], "prd").unwrap();
    repo.ensure_branch("feature").unwrap();
    fs::write(dir.path().join("a.txt"), "feature work").unwrap();
    repo.commit_paths(&[Path::new("a.txt")], "work").unwrap();
    repo.ensure_branch(&main).unwrap();
    // On main, prd.json is edited to name the existing branch.
    fs::write(dir.path().join("prd.json"), "points at feature").unwrap();
    let carry = [PathBuf::from("prd.json")];
    assert_eq!(repo.ensure_branch_carrying("feature", &carry).unwrap(), BranchAction::SwitchedTo);
    assert_eq!(fs::read_to_string(dir.path().join("prd.json")).unwrap(), "points at feature");
    assert_eq!(fs::read_to_string(dir.path().join("a.txt")).unwrap(), "feature work");
    // Other uncommitted changes are still refused.
    repo.ensure_branch_carrying(&main, &carry).unwrap();
    fs::write(dir.path().join("a.txt"), "uncommitted").unwrap();
    assert!(repo.ensure_branch_carrying("feature", &carry).is_err());
}

#[test]
fn unborn_repository_gets_the_branch_on_first_commit() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path()).unwrap();
    assert!(matches!(repo.ensure_branch("ralph/x").unwrap(), BranchAction::Created { .. }));
    assert_eq!(repo.current_branch().as_deref(), Some("ralph/x"));
}
