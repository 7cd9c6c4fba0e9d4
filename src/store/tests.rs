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
