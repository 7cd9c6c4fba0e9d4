//! `--safe` as the agent CLI sees it: the command line ralph starts it
//! with (the fake agent stands in for the CLI and logs its arguments).

use crate::harness::*;

const ONE_STORY: &str = r#"{"project":"P","branchName":"ralph/one","userStories":[
  {"id":"US-001","title":"Make done.txt","priority":1,"passes":false}]}"#;

/// The arguments the agent got in its first run.
fn args_of(p: &Project) -> String {
    let log = std::fs::read_to_string(p.agent_dir().join("runs.log")).unwrap_or_default();
    let line = log.lines().next().unwrap_or_else(|| panic!("the agent never ran"));
    line.split_once(" args=").map(|(_, a)| a.to_string()).unwrap_or_default()
}

fn run_as(tool: &str, extra: &[&str]) -> (Run, String) {
    let p = Project::with_prd(ONE_STORY);
    p.script("[run *]\nprint thinking\n");
    let mut args = vec!["1", "--tool", tool];
    args.extend_from_slice(extra);
    let r = p.run(&args);
    let a = args_of(&p);
    (r, a)
}

#[test]
fn safe_aider_neither_suggests_shell_commands_nor_fetches_urls() {
    let (r, default) = run_as("aider", &[]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let (r, safe) = run_as("aider", &["--safe"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_ne!(default, safe);
    assert!(
        safe.starts_with("--yes-always --no-suggest-shell-commands --no-detect-urls "),
        "{safe}"
    );
    assert!(!default.contains("--no-suggest-shell-commands"), "{default}");
}

#[test]
fn safe_claude_may_run_what_python_and_node_projects_run() {
    let (_, args) = run_as("claude", &["--safe"]);
    assert!(args.contains("--permission-mode acceptEdits --allowedTools "), "{args}");
    assert!(!args.contains("--dangerously-skip-permissions"), "{args}");
    for tool in [
        "Bash(python3:*)",
        "Bash(pytest:*)",
        "Bash(npm:*)",
        "Bash(node:*)",
        "Bash(uv:*)",
        "Bash(make:*)",
    ] {
        assert!(args.split(' ').any(|a| a == tool), "{tool} missing: {args}");
    }
}

#[test]

fn safe_claude_may_run_the_programs_the_gate_runs() {
    let (_, args) = run_as("claude", &["--safe", "--gate", "sh -c 'cd . && test -f done.txt'"]);
    assert!(args.split(' ').any(|a| a == "Bash(test:*)"), "{args}");
    assert!(args.split(' ').any(|a| a == "Bash(cd:*)"), "{args}");
    assert!(!args.split(' ').any(|a| a == "Bash(sh:*)"), "{args}");
}
