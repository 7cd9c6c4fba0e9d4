//! Red, then green (`gate.require_red`): a story's own check must fail on
//! the run's base before any agent is paid for the story, and pass after
//! its work. A check that already passes there proves nothing: the story is
//! set aside, never worked on, and the run says why; the base's verdict is
//! cached by its tree, so the next run does not run it again.

use crate::harness::*;

/// US-001's check fails until its work exists; US-002's passes before any
/// work (README.md is the base's); US-003 has no check of its own.
const STORIES: &str = r#"{"project":"P","branchName":"ralph/red","userStories":[
  {"id":"US-001","title":"First","priority":1,"passes":false,"verify":"test -f src/us-001.txt"},
  {"id":"US-002","title":"Second","priority":2,"passes":false,"verify":"test -f README.md"},
  {"id":"US-003","title":"Third","priority":3,"passes":false}]}"#;

fn project(require_red: bool) -> Project {
    let p = Project::with_prd(STORIES);
    let config = format!("[gate]\ncommand = \"true\"\nrequire_red = {require_red}\n");
    p.write(".ralph/config.toml", &config);
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "The person's gate"]);
    p.script("[run *]\nimplement\n");
    p
}

/// The logs of the checks ralph ran on the base for `story`, every run.
fn base_runs(p: &Project, story: &str) -> usize {
    let logs = p.path(".git/ralph/logs");
    let Ok(runs) = std::fs::read_dir(&logs) else { return 0 };
    runs.flatten().filter(|d| d.path().join(format!("red-{story}.log")).exists()).count()
}

fn set_aside_and_the_rest_verified(p: &Project, r: &Run) {
    assert_eq!(r.code, code(exit::GIVEN_UP), "{r:?}");
    assert!(
        r.stdout.contains(
            "US-002 is set aside: check proves nothing: `test -f README.md` passes on main ("
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("1 story given up and no other story can start"), "{r:?}");
    // No agent was paid for the story whose check proves nothing.
    assert!(p.agent_runs().iter().all(|run| !run.contains("US-002")), "{:?}", p.agent_runs());
    assert!(p.passes("US-001") && p.passes("US-003") && !p.passes("US-002"));
    assert!(r.stdout.contains("US-001 First (claimed: yes, verified)"), "{r:?}");
    assert!(r.stdout.contains("red → green: fails on main ("), "{r:?}");
    assert!(r.stdout.contains("given up: check proves nothing"), "{r:?}");
}

#[test]
fn a_check_that_passes_before_any_work_proves_nothing_and_its_story_is_set_aside() {
    let p = project(true);
    let first = p.run(&["6"]);
    set_aside_and_the_rest_verified(&p, &first);
    assert_eq!(p.agent_runs().len(), 2, "{first:?}");
    assert_eq!(base_runs(&p, "US-002"), 1);
    assert_eq!(base_runs(&p, "US-001"), 1);
    let status = p.run(&["status"]);
    assert!(status.stdout.contains("check proves nothing: `test -f README.md`"), "{status:?}");

    // The next run knows the base's verdict by its tree: not run again.
    let again = p.run(&["6"]);
    assert_eq!(again.code, code(exit::GIVEN_UP), "{again:?}");
    assert!(again.stdout.contains("US-002 is set aside: check proves nothing"), "{again:?}");
    assert_eq!(base_runs(&p, "US-002"), 1, "the base's verdict was not cached");
    assert_eq!(p.agent_runs().len(), 2, "{again:?}");

    // The person makes the check fail until the work exists: it runs on
    // the base again, is red, and the story is done.
    let mut prd: serde_json::Value = p.prd();
    prd["userStories"][1]["verify"] = "test -f src/us-002.txt".into();
    p.write("prd.json", &serde_json::to_string_pretty(&prd).unwrap());
    p.git(&["commit", "-q", "-am", "A check that means something"]);
    let fixed = p.run(&["6"]);
    assert_eq!(fixed.code, code(exit::COMPLETE), "{fixed:?}");
    assert!(p.passes("US-002"), "{fixed:?}");
    assert_eq!(base_runs(&p, "US-002"), 2);
    assert!(
        fixed.stdout.contains("US-002: its check fails before any work, as it should"),
        "{fixed:?}"
    );
}

#[test]
fn a_parallel_run_sets_the_story_aside_too() {
    let p = project(true);
    let r = p.run(&["6", "--jobs", "2"]);
    set_aside_and_the_rest_verified(&p, &r);
}

/// Without `gate.require_red` nothing changes: a check that passes before
/// any work is taken as it is.
#[test]
fn without_require_red_a_check_that_passes_on_the_base_is_taken_as_it_is() {
    let p = project(false);
    let r = p.run(&["6"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("US-002 Second (claimed: yes, verified)"), "{r:?}");
    assert!(!r.stdout.contains("proves nothing") && !r.stdout.contains("red →"), "{r:?}");
    assert_eq!(base_runs(&p, "US-002"), 0);
}

/// A real runner: a story's `cargo test` check fails on the base (the bug
/// is there) and passes after the fix; another story's passes on the base.
/// The `--json` report carries the evidence.
#[test]
fn cargo_test_checks_are_red_then_green_and_the_json_report_says_so() {
    let stories = r#"{"project":"P","branchName":"ralph/calc","userStories":[
      {"id":"US-001","title":"Division by zero gives None","priority":1,"passes":false,
       "verify":"cargo test --offline divides_by_zero"},
      {"id":"US-002","title":"Addition","priority":2,"passes":false,
       "verify":"cargo test --offline adds"}]}"#;
    let p = Project::with_prd(stories);
    let lib = |body: &str| {
        format!(
            "pub fn add(a: i32, b: i32) -> i32 {{\n    a + b\n}}\n\npub fn div(a: i32, b: i32) -> \
             Option<i32> {{\n    {body}\n}}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    \
             #[test]\n    fn adds() {{\n        assert_eq!(add(1, 2), 3);\n    }}\n\n    #[test]\n    \
             fn divides_by_zero() {{\n        assert_eq!(div(1, 0), None);\n    }}\n}}\n"
        )
    };
    p.write(".gitignore", "target/\n");
    p.write("Cargo.toml", "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n");
    p.write("src/lib.rs", &lib("Some(a / b)"));
    p.write(".ralph/config.toml", "[gate]\nrequire_red = true\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "The person's crate"]);
    let fixed = lib("a.checked_div(b)").replace('\n', "\\n");
    p.script(&format!(
        "[run *]\nput src/lib.rs {fixed}\nmark-pass\ncommit feat: {{id}} - {{title}}\n"
    ));
    // cargo from the real environment, the crate's build kept apart.
    let r = crate::oracle::run(&p, &["4", "--json"]);
    assert_eq!(r.code, code(exit::GIVEN_UP), "{r:?}");
    let end: serde_json::Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "run_end")
        .unwrap_or_else(|| panic!("no run_end: {r:?}"));
    let story = |id: &str| {
        end["report"].as_array().unwrap().iter().find(|s| s["id"] == id).cloned().unwrap()
    };
    let (one, two) = (story("US-001"), story("US-002"));
    assert_eq!(one["verified"], true, "{one}");
    assert_eq!(one["red"]["passed_on_base"], false, "{one}");
    assert_eq!(one["red"]["base"], "main", "{one}");
    assert_eq!(one["red"]["detail"], "exit 101", "{one}");
    assert_eq!(one["red"]["check"], "cargo test --offline divides_by_zero", "{one}");
    assert_eq!(two["verified"], false, "{two}");
    assert_eq!(two["red"]["passed_on_base"], true, "{two}");
    assert_eq!(two["iterations"], 0, "{two}");
    assert!(two["note"].as_str().unwrap().contains("check proves nothing"), "{two}");
    assert_eq!(p.agent_runs().len(), 1, "{r:?}");
}
