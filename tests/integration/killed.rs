//! An agent that a signal ralph did not send ends (someone's `kill -9`, the
//! OOM killer, a crash) is named as killed, and teaches no rule.

use crate::harness::*;

const ONE_STORY: &str = r#"{"project":"P","branchName":"ralph/one","userStories":[
  {"id":"US-001","title":"Make done.txt","priority":1,"passes":false}]}"#;

#[test]
fn an_agent_killed_from_outside_is_named_as_killed_not_by_its_last_words() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nstderr argv: my-agent --fast\ndie 9\n");
    let r = p.run(&["1", "--json"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let end: serde_json::Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "iteration_end")
        .unwrap_or_else(|| panic!("no iteration_end: {r:?}"));
    let error = end["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("stopped by signal 9 (KILL), sent by someone other than ralph"),
        "{end}"
    );
    assert!(!error.contains("argv:"), "{end}");
    assert_eq!(end["result"], "failed", "{end}");
    // The same words on a terminal-less run.
    let r = p.run(&["1", "--fresh"]);
    assert!(r.stdout.contains("stopped by signal 9 (KILL)"), "{r:?}");
}

#[test]

fn kills_never_become_rule_candidates() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\ndie 9\n");
    p.write(".ralph/config.toml", "[circuit]\nno_progress = 0\nsame_error = 0\nfailures = 0\n");
    let r = p.run(&["4"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let events = p.read(".git/ralph/failures.jsonl");
    assert!(events.contains("\"category\":\"agent-killed\""), "{events}");
    let list = p.run(&["rules", "list", "--json"]);
    let rules: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(rules["cards"], serde_json::json!([]), "{rules}");
    // Nor a lesson for the story: a kill says nothing about its code.
    assert!(!p.prompt(4).contains("Lessons — do not repeat"), "{}", p.prompt(4));
}
