use super::*;

#[test]
fn atomic_write_replaces_content_and_leaves_no_temp() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.json");
    write_atomic(&p, b"one").unwrap();
    write_atomic(&p, b"two").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"two");
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn read_json_tells_missing_from_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.json");
    assert!(matches!(read_json::<serde_json::Value>(&p).unwrap(), Loaded::Missing));
    fs::write(&p, "").unwrap();
    assert!(matches!(read_json::<serde_json::Value>(&p).unwrap(), Loaded::Damaged(_)));
    fs::write(&p, "{garbage").unwrap();
    assert!(matches!(read_json::<serde_json::Value>(&p).unwrap(), Loaded::Damaged(_)));
    fs::write(&p, [0xff, 0xfe]).unwrap();
    assert!(matches!(read_json::<serde_json::Value>(&p).unwrap(), Loaded::Damaged(_)));
    fs::write(&p, "{\"a\":1}").unwrap();
    assert!(matches!(read_json::<serde_json::Value>(&p).unwrap(), Loaded::Ok(_)));
}

#[test]
fn versioned_files_are_missing_damaged_with_a_reason_or_read() {
    #[derive(Debug, serde::Deserialize)]
    struct S {
        #[allow(dead_code)]
        n: u32,
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.json");
    assert!(matches!(read_versioned::<S>(&p, 1).unwrap(), Loaded::Missing));
    #[rustfmt::skip]
        let cases: &[(&str, Option<&str>)] = &[
            ("", Some("empty file")),
            ("{not json", Some("key must be a string")),
            ("{\"n\":1}", Some("no version field")),
            ("{\"version\":2,\"n\":1}", Some("version 2, this ralph reads version 1")),
            ("{\"version\":1,\"n\":-1}", Some("invalid value")),
            ("{\"version\":1}", Some("missing field `n`")),
            ("{\"version\":1,\"n\":3}", None),
        ];
    for (text, damage) in cases {
        fs::write(&p, text).unwrap();
        match (read_versioned::<S>(&p, 1).unwrap(), damage) {
            (Loaded::Damaged(why), Some(want)) => assert!(why.contains(want), "{text}: {why}"),
            (Loaded::Ok(_), None) => {}
            (got, _) => panic!("{text}: {got:?}"),
        }
    }
}

#[test]
fn jsonl_skips_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("e.jsonl");
    append_jsonl(&p, &serde_json::json!({"a": 1})).unwrap();
    fs::OpenOptions::new().append(true).open(&p).unwrap().write_all(b"{broken\n").unwrap();
    append_jsonl(&p, &serde_json::json!({"a": 2})).unwrap();
    let (values, bad) = read_jsonl::<serde_json::Value>(&p).unwrap();
    assert_eq!(values.len(), 2);
    assert_eq!(bad, 1);
}

#[test]
fn the_failure_log_an_older_ralph_called_events_jsonl_is_renamed_wherever_it_is() {
    // In the git directory, and in the work tree's `.ralph/` (moved too).
    for old in [".git/ralph/events.jsonl", ".ralph/events.jsonl"] {
        let dir = tempfile::tempdir().unwrap();
        git2::Repository::init(dir.path()).unwrap();
        let path = dir.path().join(old);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "{\"category\":\"gate-failed\"}\n").unwrap();
        let store = Store::for_project(dir.path(), &dir.path().join("prd.json"));
        store.ensure().unwrap();
        let moved = store.migrate().unwrap();
        assert!(moved.iter().any(|m| m.contains("failures.jsonl")), "{old}: {moved:?}");
        let text = fs::read_to_string(dir.path().join(".git/ralph/failures.jsonl")).unwrap();
        assert!(text.contains("gate-failed"), "{old}");
        assert!(!path.exists(), "{old}");
    }
    // A folder outside a repository keeps both in `.ralph/`.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    store.ensure().unwrap();
    fs::write(dir.path().join(".ralph/events.jsonl"), "x\n").unwrap();
    store.migrate().unwrap();
    assert_eq!(fs::read_to_string(store.failures()).unwrap(), "x\n");
}

#[test]
fn a_kept_write_swaps_in_the_new_content_and_keeps_the_old_as_its_spare() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.json");
    // The first write has nothing to swap with: a plain rename.
    write_kept(&p, b"one, the longer first version").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"one, the longer first version");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    write_kept(&p, b"two").unwrap();
    let spare = kept::spare_of(&p, kept::Slot::Cached).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"two", "cut to length, not written over");
    assert_eq!(fs::read(&spare).unwrap(), b"one, the longer first version");
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600, "mode kept");
    // The third write reuses the spare's inode: no inode made or freed.
    let inodes = [fs::metadata(&p).unwrap().ino(), fs::metadata(&spare).unwrap().ino()];
    write_kept(&p, b"three").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"three");
    assert_eq!(fs::metadata(&p).unwrap().ino(), inodes[1]);
    assert_eq!(fs::metadata(&spare).unwrap().ino(), inodes[0]);
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600, "mode kept");
    kept::drop_spares_in(dir.path());
    assert!(!spare.exists(), "ralph ending removes its spares");
    assert_eq!(fs::read(&p).unwrap(), b"three");
}

#[test]
fn a_read_only_file_is_written_every_time_and_stays_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("limits.json");
    write_kept(&p, b"zero").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
    // After a swap the spare is the 0444 file: it must still take a write.
    for text in ["one", "two", "three", "four"] {
        write_kept(&p, text.as_bytes()).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), text);
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o444);
    }
}

#[test]
fn what_is_put_at_the_spare_is_never_written_through_and_never_stops_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("circuit.json");
    let victim = dir.path().join("victim");
    fs::write(&victim, "the person's file").unwrap();
    write_kept(&p, b"one").unwrap();
    let spare = kept::spare_of(&p, kept::Slot::Cached).unwrap();
    let _ = fs::remove_file(&spare);
    std::os::unix::fs::symlink(&victim, &spare).unwrap();
    write_kept(&p, b"two").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "the person's file");
    assert_eq!(fs::read(&p).unwrap(), b"two");
    fs::remove_file(&spare).unwrap();
    mkfifo(&spare);
    write_kept(&p, b"three").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"three", "written, not blocked on the FIFO");
    // A folder put where the file was is swapped to the spare's name by
    // the next write, and removed by the one after.
    fs::remove_file(&p).unwrap();
    fs::create_dir_all(p.join("inside")).unwrap();
    let _ = write_kept(&p, b"four");
    write_kept(&p, b"five").unwrap();
    write_kept(&p, b"six").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"six");
}

#[test]
fn a_kept_write_replaces_a_link_put_in_the_state_file_s_place_and_leaves_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.json");
    let victim = dir.path().join("bashrc");
    fs::write(&victim, "the person's file").unwrap();
    std::os::unix::fs::symlink(&victim, &p).unwrap();
    write_kept(&p, b"one").unwrap();
    write_kept(&p, b"two").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "the person's file");
    assert!(fs::symlink_metadata(&p).unwrap().is_file());
    assert_eq!(fs::read(&p).unwrap(), b"two");
    kept::drop_spares_in(dir.path());
    assert_eq!(fs::read_to_string(&victim).unwrap(), "the person's file");
}

#[test]
fn ralph_s_own_files_replace_a_link_at_their_name_and_the_person_s_follow_it() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("bashrc");
    fs::write(&victim, "the person's file").unwrap();
    let state = dir.path().join("state.json");
    std::os::unix::fs::symlink(&victim, &state).unwrap();
    write_own(&state, b"{}").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "the person's file");
    assert!(fs::symlink_metadata(&state).unwrap().is_file());
    // A prd.json the person linked elsewhere stays a link, its target written.
    let shared = dir.path().join("shared-prd.json");
    fs::write(&shared, "old").unwrap();
    let prd = dir.path().join("prd.json");
    std::os::unix::fs::symlink(&shared, &prd).unwrap();
    write_atomic(&prd, b"new").unwrap();
    assert!(fs::symlink_metadata(&prd).unwrap().file_type().is_symlink());
    assert_eq!(fs::read_to_string(&shared).unwrap(), "new");
}

#[test]
fn an_atomic_write_never_writes_through_a_link_at_its_temp_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prd.json");
    let victim = dir.path().join("bashrc");
    fs::write(&victim, "the person's file").unwrap();
    let tmp = hidden_beside(&p, &format!(".tmp{}", std::process::id())).unwrap();
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    write_atomic(&p, b"{}").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "the person's file");
    assert_eq!(fs::read(&p).unwrap(), b"{}");
    assert!(fs::symlink_metadata(&tmp).is_err(), "the link is gone, the temp renamed");
}

/// A FIFO at `path`, made by the `mkfifo` program: the tests keep no `unsafe`.
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

#[test]
fn spares_of_a_killed_ralph_are_removed_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    // A pid that cannot be running: above the kernel's pid limit.
    let dead = dir.path().join(".state.json.4194305.spare");
    let dead_durable = dir.path().join(".state.json.durable.4194305.spare");
    let mine = dir.path().join(format!(".state.json.{}.spare", std::process::id()));
    let alive =
        dir.path().join(format!(".rules.json.{}.spare", std::os::unix::process::parent_id()));
    let other = dir.path().join(".notes.spare.txt");
    for f in [&dead, &dead_durable, &mine, &alive, &other] {
        fs::write(f, "x").unwrap();
    }
    remove_dead_spares(dir.path());
    assert!(!dead.exists() && !dead_durable.exists());
    assert!(mine.exists() && alive.exists() && other.exists());
}

#[test]
fn durable_writes_reuse_their_inodes_and_cached_ones_never_fill_the_committed_one() {
    use std::collections::BTreeSet;
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.json");
    let inodes = || -> BTreeSet<u64> {
        fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().ino()).collect()
    };
    // The committed version must be whole in whichever file holds its inode.
    let committed_holds = |ino: u64, text: &str| {
        let holder = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|f| fs::metadata(f).unwrap().ino() == ino)
            .expect("the committed inode is kept");
        assert_eq!(fs::read_to_string(holder).unwrap(), text);
    };
    write_own(&p, b"d0").unwrap();
    write_kept(&p, b"c0").unwrap();
    write_own(&p, b"d1").unwrap();
    write_kept(&p, b"c1").unwrap();
    let steady = inodes();
    for round in 2..6 {
        let durable = format!("d{round}");
        write_own(&p, durable.as_bytes()).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), durable);
        let committed = fs::metadata(&p).unwrap().ino();
        // Two cached writes in a row, as a gate phase makes: the second
        // finds the committed inode in its spare and leaves it alone.
        for cached in ["a", "b"] {
            write_kept(&p, cached.as_bytes()).unwrap();
            assert_eq!(fs::read_to_string(&p).unwrap(), cached);
            committed_holds(committed, &durable);
        }
        // Cached writes in a row go on swapping the same inodes.
        let rotating = inodes();
        for cached in ["c", "d", "e"] {
            write_kept(&p, cached.as_bytes()).unwrap();
            committed_holds(committed, &durable);
        }
        assert_eq!(inodes(), rotating, "round {round}");
        if round == 2 {
            continue;
        }
        // One cached write between durable ones (the loop's rhythm) makes
        // and frees no inode.
        write_own(&p, b"x").unwrap();
        let before = inodes();
        write_kept(&p, b"y").unwrap();
        write_own(&p, b"z").unwrap();
        write_kept(&p, b"w").unwrap();
        assert_eq!(inodes(), before, "round {round}");
    }
    assert_eq!(steady.len(), 3, "the file and its two spares: {steady:?}");
    assert!(inodes().len() <= 4, "and the parked one");
    kept::drop_spares_in(dir.path());
    let left: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["state.json"], "ralph ending removes the spares");
}

#[test]
fn a_durable_write_is_never_made_through_a_link_at_its_spare() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("circuit.json");
    let victim = dir.path().join("victim");
    fs::write(&victim, "the person's file").unwrap();
    write_own(&p, b"one").unwrap();
    let spare = kept::spare_of(&p, kept::Slot::Durable).unwrap();
    let _ = fs::remove_file(&spare);
    std::os::unix::fs::symlink(&victim, &spare).unwrap();
    write_own(&p, b"two").unwrap();
    write_own(&p, b"three").unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "the person's file");
    assert_eq!(fs::read(&p).unwrap(), b"three");
}
