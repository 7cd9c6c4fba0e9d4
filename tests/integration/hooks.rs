//! Hooks as people configure them: a list written where only text fits
//! (an environment variable) is that list, not one shell word.

use crate::harness::*;

const ONE_STORY: &str = r#"{"project":"P","branchName":"ralph/one","userStories":[
  {"id":"US-001","title":"Make done.txt","priority":1,"passes":false}]}"#;

#[test]
fn a_hook_given_as_a_json_list_in_the_environment_runs_as_that_argv() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint thinking\n");
    let hook = r#"["sh", "-c", "echo \"$RALPH_EVENT $RALPH_EXIT_CODE\" > halted.txt"]"#;
    let r = to_run(p.ralph().args(["1"]).env("RALPH_HOOKS_ON_HALT", hook).output().unwrap());
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(!r.stdout.contains("warning: hook"), "{r:?}");
    assert_eq!(p.read("halted.txt"), "halt 1\n");
    // A missing program is named as itself, not as `[no-such-notifier,x]`.
    let hook = r#"["no-such-notifier","x"]"#;
    let r =
        to_run(p.ralph().args(["1", "--fresh"]).env("RALPH_HOOKS_ON_HALT", hook).output().unwrap());
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let warning = r.stdout.lines().find_map(|l| l.split_once("warning: hook on_halt"));
    let (_, warning) = warning.unwrap_or_else(|| panic!("no warning: {r:?}"));
    assert_eq!(warning, " cannot run: `no-such-notifier` not found", "{r:?}");
}

#[test]
fn a_json_list_with_other_than_strings_is_a_configuration_error() {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint thinking\n");
    let r = to_run(
        p.ralph().args(["1"]).env("RALPH_HOOKS_ON_HALT", r#"["notify", 1]"#).output().unwrap(),
    );
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("RALPH_HOOKS_ON_HALT"), "{r:?}");
    assert!(p.agent_runs().is_empty());
}
