use super::*;
use chrono::TimeDelta;
use std::fs;

fn t(minutes: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z").unwrap().with_timezone(&Utc)
        + TimeDelta::minutes(minutes)
}

fn fresh() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path());
    store.ensure().unwrap();
    (dir, store)
}

fn failure(category: Category, signature: &str) -> Failure<'_> {
    Failure {
        run_id: "run-1",
        iteration: 1,
        story: "US-001",
        category,
        signature,
        detail: "error[E0425]: cannot find value `x` in this scope",
        evidence: Some("logs/run-1/1.log"),
    }
}

fn gate(store: &Store, times: usize, applied: &[String]) -> Option<Change> {
    let mut last = None;
    for i in 0..times {
        let f = failure(Category::GateFailure, "error[E0425]: cannot find value `x`");
        last = record_failure(store, &f, applied, &Policy::default(), t(i as i64)).unwrap();
    }
    last
}

fn only_card(store: &Store) -> Card {
    let rules = list(store).unwrap();
    assert_eq!(rules.cards().len(), 1, "{rules:?}");
    rules.cards()[0].clone()
}

#[test]
fn three_identical_gate_failures_make_one_ready_candidate() {
    let (_dir, store) = fresh();
    gate(&store, 3, &[]);
    let card = only_card(&store);
    assert_eq!((card.state, card.occurrences, card.ready), (State::Candidate, 3, true));
    assert_eq!(failures::read(&store).unwrap().events.len(), 3);
    let table = render_list(&list(&store).unwrap());
    let row = table.lines().nth(1).unwrap();
    assert!(row.starts_with(&card.id), "{table}");
    assert!(row.contains("candidate") && row.contains(" 3  ready "), "{table}");
    // Two occurrences are not ready yet; a different signature is another card.
    let (_dir2, store2) = fresh();
    gate(&store2, 2, &[]);
    assert!(!only_card(&store2).ready);
    let f = failure(Category::GateFailure, "error[E0433]: failed to resolve");
    record_failure(&store2, &f, &[], &Policy::default(), t(9)).unwrap();
    assert_eq!(list(&store2).unwrap().cards().len(), 2);
}

#[test]
fn a_hundred_failures_never_arm_a_rule() {
    let (_dir, store) = fresh();
    gate(&store, 100, &[]);
    let card = only_card(&store);
    assert_eq!((card.state, card.occurrences), (State::Candidate, 100));
    let rules = list(&store).unwrap();
    assert_eq!(rules_block(&rules), "");
    assert!(rules.armed_ids().is_empty());
}

#[test]
fn arming_puts_the_rule_in_the_prompt() {
    let (_dir, store) = fresh();
    gate(&store, 3, &[]);
    let id = only_card(&store).id;
    let armed = arm(&store, &id[..5], Some("  Declare `x` before use. MARKER-7 "), t(10)).unwrap();
    assert_eq!(armed.state, State::Armed);
    assert_eq!(armed.armed_at, Some(t(10)));
    let rules = list(&store).unwrap();
    let block = rules_block(&rules);
    assert!(block.starts_with("## Rules for this project\n"), "{block}");
    assert!(
            block.contains(&format!("Rule 1 ({id}, armed 2026-03-01; no evidence yet):\n```text\nDeclare `x` before use. MARKER-7\n```\n")),
            "{block}"
        );
    assert_eq!(rules.armed_ids(), std::slice::from_ref(&id));
    assert!(arm(&store, &id, Some(" "), t(11)).unwrap_err().to_string().contains("empty"));
}

#[test]
fn only_armed_rules_reach_the_prompt_in_arming_order() {
    let mut rules = Rules::new();
    let policy = Policy::default();
    let sigs = ["A-sig", "B-sig", "C-sig", "D-sig", "E-sig", "F-sig"];
    for (i, sig) in sigs.iter().enumerate() {
        let event = failure(Category::GateFailure, sig).event(t(i as i64));
        rules.observe(&event, &[], &policy, t(i as i64));
    }
    let id = |n: usize| rules.cards()[n].id.clone();
    let ids: Vec<String> = (0..6).map(id).collect();
    rules.arm(&ids[1], None, t(20)).unwrap();
    rules.arm(&ids[0], None, t(21)).unwrap();
    rules.arm(&ids[2], None, t(22)).unwrap();
    rules.reject(&ids[2], t(23)).unwrap();
    rules.arm(&ids[3], None, t(24)).unwrap();
    rules.demote(&ids[3], t(25)).unwrap();
    rules.arm(&ids[4], None, t(26)).unwrap();
    rules.archive(&ids[4], t(27)).unwrap();
    let block = rules_block(&rules);
    for (sig, shown) in sigs.iter().zip([true, true, false, false, false, false]) {
        assert_eq!(block.contains(sig), shown, "{sig}: {block}");
    }
    assert!(block.find("B-sig").unwrap() < block.find("A-sig").unwrap(), "arming order");
    assert_eq!(rules.armed_ids(), [ids[1].clone(), ids[0].clone()]);
}

#[test]
fn a_rejected_card_seen_three_more_times_is_a_candidate_not_armed() {
    let (_dir, store) = fresh();
    gate(&store, 3, &[]);
    let id = only_card(&store).id;
    reject(&store, &id, t(5)).unwrap();
    let states: Vec<State> = (0..3)
        .map(|_| {
            gate(&store, 1, &[]);
            only_card(&store).state
        })
        .collect();
    assert_eq!(states, [State::Rejected, State::Rejected, State::Candidate]);
    let card = only_card(&store);
    assert_eq!((card.occurrences, card.ready, card.recurrences), (3, true, 0));
    assert_eq!(rules_block(&list(&store).unwrap()), "");
    revive(&store, &id, t(30)).unwrap();
    assert_eq!(only_card(&store).note, "revived by a person");
}

#[test]
fn environment_failures_never_touch_cards() {
    let (_dir, store) = fresh();
    for i in 0..10 {
        let f = failure(Category::GateNotRun, "verify: /nonexistent: not found");
        assert_eq!(record_failure(&store, &f, &[], &Policy::default(), t(i)).unwrap(), None);
    }
    assert!(!store.rules().exists(), "rules.json must not even be written");
    let mut rules = Rules::new();
    for category in [Category::GateNotRun, Category::Blocked, Category::Lesson] {
        let event = failure(category, "x").event(t(0));
        assert_eq!(rules.observe(&event, &[], &Policy::default(), t(0)), None);
    }
    assert!(rules.cards().is_empty());
    assert_eq!(failures::read(&store).unwrap().events.len(), 10);
    // Not even read: a corrupt rules file does not make them fail.
    fs::write(store.rules(), "{corrupt").unwrap();
    let f = failure(Category::GateNotRun, "x");
    assert!(record_failure(&store, &f, &[], &Policy::default(), t(11)).is_ok());
    for category in [Category::Blocked, Category::Lesson] {
        let f = failure(category, "x");
        assert!(record_failure(&store, &f, &[], &Policy::default(), t(12)).is_ok());
    }
}

#[test]
fn a_corrupt_rules_file_is_never_written() {
    #[rustfmt::skip]
        let cases: &[(&str, &[u8], &str)] = &[
            ("not json", b"{\"version\":1,\"revision\":2,\"cards\":[", "EOF while parsing"),
            ("empty", b"", "empty file"),
            ("cards not an array", br#"{"version":1,"revision":2,"cards":{}}"#, "invalid type"),
            ("future version", br#"{"version":2,"revision":0,"cards":[]}"#, "version 2"),
            ("no version", br#"{"revision":0,"cards":[]}"#, "no version field"),
            ("not UTF-8", b"\xff\xfe", "not UTF-8"),
        ];
    for (name, bytes, why) in cases {
        let (_dir, store) = fresh();
        gate(&store, 1, &[]);
        let id = only_card(&store).id;
        fs::write(store.rules(), bytes).unwrap();
        let error = arm(&store, &id, None, t(5)).unwrap_err();
        let message = error.to_string();
        let expected = format!("rules file unreadable: {}: ", store.rules().display());
        assert!(message.starts_with(&expected), "{name}: {message}");
        assert!(message.contains(why), "{name}: {message}");
        assert!(message.ends_with(" — fix or remove it"), "{name}: {message}");
        assert!(
            record_failure(
                &store,
                &failure(Category::GateFailure, "y"),
                &[],
                &Policy::default(),
                t(6)
            )
            .is_err(),
            "{name}"
        );
        assert!(
            record_gate_pass(&store, std::slice::from_ref(&id), &Policy::default(), t(7)).is_err(),
            "{name}"
        );
        assert!(matches!(show(&store, &id), Err(RulesError::Unreadable { .. })), "{name}");
        assert_eq!(fs::read(store.rules()).unwrap(), *bytes, "{name}: bytes changed");
    }
}

#[test]
fn duplicate_cards_make_the_file_unreadable() {
    let (_dir, store) = fresh();
    gate(&store, 1, &[]);
    let mut value: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(store.rules()).unwrap()).unwrap();
    let card = value["cards"][0].clone();
    value["cards"].as_array_mut().unwrap().push(card);
    fs::write(store.rules(), value.to_string()).unwrap();
    let message = list(&store).unwrap_err().to_string();
    assert!(message.contains("two cards have the id"), "{message}");
}

#[test]
fn demotion_table() {
    let p = Policy::default();
    let strict = Policy { demote_min_evidence: 5, ..Policy::default() };
    #[rustfmt::skip]
        let cases: &[(u32, u32, &Policy, Verdict)] = &[
            (3, 1, &p, Verdict::Demote),
            (3, 0, &p, Verdict::Undeterminable),
            (9, 0, &p, Verdict::Undeterminable),
            (2, 0, &p, Verdict::Keep),
            (2, 2, &p, Verdict::Keep),
            (3, 3, &p, Verdict::Demote),
            (3, 4, &p, Verdict::Keep),
            (0, 10, &p, Verdict::Keep),
            (3, 1, &strict, Verdict::Keep),
            (3, 2, &strict, Verdict::Demote),
        ];
    for &(violations, compliance, policy, expected) in cases {
        let got = verdict(Metrics { violations, compliance }, policy);
        assert_eq!(got, expected, "{violations} violations, {compliance} compliance");
    }
}

#[test]
fn metrics_drive_demotion_through_the_hooks() {
    // violation=3, compliance=1 → demoted.
    let (_dir, store) = fresh();
    gate(&store, 3, &[]);
    let id = only_card(&store).id;
    arm(&store, &id, None, t(10)).unwrap();
    let applied = [id.clone()];
    let p = Policy::default();
    assert_eq!(
        record_gate_pass(&store, &applied, &p, t(11)).unwrap(),
        [Change::Complied { id: id.clone(), metrics: Metrics { violations: 0, compliance: 1 } }]
    );
    gate(&store, 2, &applied);
    assert_eq!(only_card(&store).state, State::Armed);
    let change = gate(&store, 1, &applied).unwrap();
    assert!(matches!(change, Change::Demoted { .. }), "{change:?}");
    let card = only_card(&store);
    assert_eq!(card.state, State::Demoted);
    assert_eq!(card.metrics, Metrics { violations: 3, compliance: 1 });
    assert!(card.note.starts_with("demoted by ralph"), "{}", card.note);
    assert_eq!(rules_block(&list(&store).unwrap()), "");

    // violation=3, compliance=0 → still armed, flagged undeterminable.
    let (_dir, store) = fresh();
    gate(&store, 1, &[]);
    let id = only_card(&store).id;
    arm(&store, &id, None, t(10)).unwrap();
    let applied = [id.clone()];
    gate(&store, 2, &applied);
    assert!(!only_card(&store).undeterminable);
    let change = gate(&store, 1, &applied).unwrap();
    assert!(matches!(change, Change::Undeterminable { .. }), "{change:?}");
    let card = only_card(&store);
    assert_eq!((card.state, card.undeterminable), (State::Armed, true));
    assert!(rules_block(&list(&store).unwrap()).contains("violated 3 times, followed 0"));
    assert!(render_list(&list(&store).unwrap()).contains("undeterminable"));

    // Re-arming resets the metrics and the flag.
    let card = arm(&store, &id, None, t(20)).unwrap();
    assert_eq!((card.metrics, card.undeterminable), (Metrics::default(), false));
}

#[test]
fn violations_count_only_for_rules_that_were_in_the_prompt() {
    let (_dir, store) = fresh();
    gate(&store, 1, &[]);
    let id = only_card(&store).id;
    arm(&store, &id, None, t(10)).unwrap();
    // Armed while that iteration's agent was already running.
    gate(&store, 1, &[]);
    assert_eq!(record_gate_pass(&store, &[], &Policy::default(), t(12)).unwrap(), []);
    let card = only_card(&store);
    assert_eq!((card.occurrences, card.metrics), (2, Metrics::default()));
}

#[test]
fn person_actions_and_lookup() {
    let mut rules = Rules::new();
    let p = Policy::default();
    for sig in ["one", "two"] {
        rules.observe(&failure(Category::AgentExit, sig).event(t(0)), &[], &p, t(0));
    }
    let id = rules.cards()[0].id.clone();
    assert_eq!(id.len(), 8);
    assert!(matches!(rules.get("zzzz"), Err(RulesError::NotFound { .. })));
    assert!(matches!(rules.get(""), Err(RulesError::NotFound { .. })));
    assert_eq!(rules.get(&format!(" {id} ")).unwrap().signature, "one");
    #[rustfmt::skip]
        let steps: &[(&str, State)] = &[
            ("arm", State::Armed), ("demote", State::Demoted), ("revive", State::Candidate),
            ("archive", State::Archived), ("arm", State::Armed), ("reject", State::Rejected),
        ];
    for (i, (action, state)) in steps.iter().enumerate() {
        let now = t(i as i64 + 1);
        let card = match *action {
            "arm" => rules.arm(&id, None, now),
            "demote" => rules.demote(&id, now),
            "revive" => rules.revive(&id, now),
            "archive" => rules.archive(&id, now),
            _ => rules.reject(&id, now),
        }
        .unwrap();
        assert_eq!((card.state, card.changed_at), (*state, now), "{action}");
    }
}

#[test]
fn ids_are_stable_and_lengthen_on_collision() {
    let mut a = Rules::new();
    let mut b = Rules::new();
    let event = failure(Category::GateFailure, "same").event(t(0));
    a.observe(&event, &[], &Policy::default(), t(0));
    b.observe(&event, &[], &Policy::default(), t(5));
    assert_eq!(a.cards()[0].id, b.cards()[0].id);
    let id = a.cards()[0].id.clone();
    // A hand-made card that took this id forces a longer one.
    let mut taken = a.clone();
    taken.cards[0].signature = "other".into();
    taken.observe(&event, &[], &Policy::default(), t(0));
    let new = &taken.cards()[1].id;
    assert_eq!(new.len(), 12);
    assert!(new.starts_with(&id));
}

#[test]
fn revision_rises_only_when_something_changed() {
    let (_dir, store) = fresh();
    gate(&store, 2, &[]);
    assert_eq!(list(&store).unwrap().revision(), 2);
    let id = only_card(&store).id;
    assert!(arm(&store, "nope", None, t(3)).is_err());
    record_gate_pass(&store, std::slice::from_ref(&id), &Policy::default(), t(4)).unwrap();
    assert_eq!(list(&store).unwrap().revision(), 2);
    arm(&store, &id, None, t(5)).unwrap();
    assert_eq!(list(&store).unwrap().revision(), 3);
}

#[test]
fn show_renders_every_field_and_json_round_trips() {
    let (_dir, store) = fresh();
    gate(&store, 3, &[]);
    let card = show(&store, &only_card(&store).id).unwrap();
    let text = render_card(&card);
    #[rustfmt::skip]
        let fields: &[(&str, &str)] = &[
            ("id:", &card.id), ("state:", "candidate"), ("note:", "new candidate"),
            ("category:", "gate-failure"), ("signature:", "error[E0425]: cannot find value `x`"),
            ("statement:", "The verification gate kept failing with \"error[E0425]"),
            ("occurrences:", "3 (ready)"), ("recurrences:", "0"),
            ("first seen:", "2026-03-01 12:00:00 UTC"), ("last seen:", "2026-03-01 12:02:00 UTC"),
            ("changed:", "2026-03-01 12:00:00 UTC"), ("armed at:", "-"), ("violations:", "0"),
            ("compliance:", "0"), ("undetermined:", "no"),
        ];
    for (label, value) in fields {
        let needle = format!("\n{label:<14}{value}");
        assert!(format!("\n{text}").contains(&needle), "{needle:?} not in\n{text}");
    }
    assert!(
        text.contains("samples:\n  2026-03-01 12:00:00 UTC story US-001 iteration 1: error[E0425]"),
        "{text}"
    );
    assert!(!text.contains("once"), "{text}");
    // A card an older ralph wrote says so no longer either.
    let old = Card { note: STALE_NEW_NOTE.into(), occurrences: 16, ..card.clone() };
    let text = render_card(&old);
    assert!(text.contains("\nnote:         new candidate\n"), "{text}");
    assert!(!text.contains("once") && text.contains("occurrences:  16"), "{text}");
    let json = serde_json::to_value(&card).unwrap();
    assert_eq!(json["state"], "candidate");
    assert_eq!(json["category"], "gate-failure");
    assert_eq!(json["metrics"]["violations"], 0);
    assert_eq!(serde_json::from_value::<Card>(json).unwrap(), card);
    assert_eq!(card.samples.len(), MAX_SAMPLES);
}

#[test]
fn a_run_tells_of_a_rule_only_once_it_is_ready_or_its_fate_changes() {
    let id = || "r1".to_string();
    let m = Metrics::default();
    let table = [
        (Change::Created { id: id() }, false),
        (Change::Counted { id: id(), occurrences: 2, ready: false }, false),
        (Change::Counted { id: id(), occurrences: 3, ready: true }, true),
        (Change::Revived { id: id() }, true),
        (Change::Violated { id: id(), metrics: m }, true),
        (Change::Demoted { id: id(), metrics: m }, true),
    ];
    for (change, want) in table {
        assert_eq!(change.worth_telling(), want, "{change}");
    }
}
