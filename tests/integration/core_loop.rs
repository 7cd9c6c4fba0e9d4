//! The core loop, end to end: the real ralph binary, the fake agent, a
//! temporary git repository.

use std::time::{Duration, Instant};

use crate::harness::*;

#[test]
fn three_stories_complete_in_three_iterations_with_three_commits() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(
        p.agent_runs(),
        ["US-001", "US-002", "US-003"],
        "priority order, one story per iteration"
    );
    let log = p.log();
    assert_eq!(
        &log[..3],
        ["feat: US-003 - Third", "feat: US-002 - Second", "feat: US-001 - First"]
    );
    assert!(p.passes("US-001") && p.passes("US-002") && p.passes("US-003"));
    assert!(r.stdout.contains("3/3 stories pass after 3 iterations"), "{r:?}");
    // Each run was a fresh process with the prompt on stdin.
    assert!(p.prompt(1).contains("story US-001") && p.prompt(2).contains("story US-002"));
    // The agent ran on the PRD's branch, which ralph created.
    assert_eq!(p.git(&["branch", "--show-current"]).trim(), "ralph/demo");
    // ralph's bookkeeping stayed out of the agent's `git add -A`.
    assert_eq!(p.git(&["ls-files", ".last-branch", ".ralph"]), ".ralph/.gitignore\n");
    assert!(p.path(".last-branch").exists());
}

#[test]
fn zero_iterations_when_everything_already_passes() {
    let p = Project::with_prd(&THREE_STORIES.replace("\"passes\": false", "\"passes\": true"));
    p.script("[run *]\nimplement\n");
    let r = p.run(&[]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.agent_runs().is_empty());
    assert!(r.stdout.contains("after 0 iterations"), "{r:?}");
}

#[test]
fn a_complete_claim_with_unfinished_stories_does_not_end_the_run() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1]\nimplement\npromise\n[run *]\nimplement\n");
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(p.agent_runs().len(), 3);
    assert!(r.stdout.contains("claimed COMPLETE but 2 stories are unfinished"), "{r:?}");
}

#[test]
fn an_echoed_prompt_is_not_a_completion_claim() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\necho-prompt\n");
    let r = p.run(&["2"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(!r.stdout.contains("claimed COMPLETE"), "{r:?}");
}

#[test]
fn max_iterations_has_its_own_exit_code() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nprint working on it\n");
    let r = p.run(&["2", "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(p.agent_runs().len(), 2);
    assert!(r.stdout.contains("reached the iteration limit (2)"), "{r:?}");
}

#[test]
fn zero_iterations_is_a_usage_error() {
    let p = Project::with_prd(THREE_STORIES);
    let r = p.run(&["0"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(p.agent_runs().is_empty());
}

#[test]
fn malformed_prd_names_line_and_column_and_changes_nothing() {
    let bad = "{\n  \"userStories\": [\n    {\"id\": \"US-001\" \"title\": \"x\"}\n  ]\n}\n";
    let p = Project::with_prd(bad);
    p.script("[run *]\nimplement\n");
    let r = p.run(&[]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("prd.json:3:"), "{r:?}");
    assert!(r.stderr.contains("invalid JSON"), "{r:?}");
    assert_eq!(p.read("prd.json"), bad);
    assert!(p.agent_runs().is_empty());
    assert!(!p.path("progress.txt").exists());
}

#[test]
fn invalid_stories_are_each_named() {
    let p =
        Project::with_prd(r#"{"userStories":[{"id":"A","passes":"yes"},{"id":"A"},{"id":""}]}"#);
    let r = p.run(&[]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    for want in [
        "story #1 (A): \"passes\" must be true or false",
        "duplicate id A",
        "story #3: \"id\" is empty",
    ] {
        assert!(r.stderr.contains(want), "{want}: {r:?}");
    }
}

#[test]
fn unknown_fields_survive_ralph_editing_the_prd() {
    let prd = r#"{"project":"P","branchName":"ralph/x","owner":{"team":"core"},"userStories":[
        {"id":"US-001","title":"T","priority":1,"passes":false,"estimate":3,"tags":["a","b"]}]}"#;
    let p = Project::with_prd(prd);
    // The agent does the work but does not mark the story: the gate passes, so ralph marks it.
    p.script("[run *]\nwrite src/x.txt done\ncommit feat: {id} - {title}\n");
    let r = p.run(&["2", "--gate", "true"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let v = p.prd();
    assert_eq!(v["owner"]["team"], "core");
    assert_eq!(v["userStories"][0]["estimate"], 3);
    assert_eq!(v["userStories"][0]["tags"][1], "b");
    assert_eq!(v["userStories"][0]["passes"], true);
}

#[test]
fn progress_txt_is_created_with_the_ralph_sh_header() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nprint hi\n");
    p.run(&["1"]);
    let text = p.read("progress.txt");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# Ralph Progress Log");
    assert!(lines[1].starts_with("Started: "));
    assert_eq!(lines[2], "---");
    assert_eq!(p.read(".last-branch"), "ralph/demo\n");
}

#[test]
fn a_branch_change_archives_the_previous_prd_and_progress() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    assert_eq!(p.run(&["1"]).code, code(exit::MAX_ITERATIONS));
    let old_progress = p.read("progress.txt");
    assert!(old_progress.contains("US-001"));
    // A new feature: a new PRD with another branch.
    let new = THREE_STORIES.replace("ralph/demo", "ralph/next").replace("\"Demo\"", "\"Next\"");
    p.write("prd.json", &new);
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "next feature"]);
    let r = p.run(&["1"]);
    assert!(r.stdout.contains("archived the previous run (ralph/demo)"), "{r:?}");
    let archive: Vec<_> =
        std::fs::read_dir(p.path("archive")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(archive.len(), 1);
    let folder = &archive[0];
    assert!(folder.file_name().unwrap().to_str().unwrap().ends_with("-demo"), "{folder:?}");
    // The archived PRD is the previous feature's, not the new one (ralph.sh's bug).
    let archived: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("prd.json")).unwrap()).unwrap();
    assert_eq!(archived["branchName"], "ralph/demo");
    assert_eq!(archived["userStories"][0]["passes"], true);
    assert_eq!(std::fs::read_to_string(folder.join("progress.txt")).unwrap(), old_progress);
    assert_eq!(p.read(".last-branch"), "ralph/next\n");
    assert!(p.read("progress.txt").starts_with("# Ralph Progress Log"));
    assert_eq!(p.git(&["branch", "--show-current"]).trim(), "ralph/next");
}

#[test]
fn a_branch_name_cannot_escape_the_archive_folder() {
    let p = Project::with_prd(&THREE_STORIES.replace("ralph/demo", "ralph/safe"));
    p.script("[run *]\nprint hi\n");
    p.run(&["1"]);
    p.write(".last-branch", "ralph/../../escape\n");
    p.run(&["1"]);
    let archive: Vec<_> =
        std::fs::read_dir(p.path("archive")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(archive.len(), 1);
    assert!(archive[0].to_str().unwrap().ends_with("-escape"), "{archive:?}");
    assert!(!p.tmp.path().join("escape").exists());
}

#[test]
fn switching_branches_over_uncommitted_changes_is_refused() {
    let p = Project::with_prd(THREE_STORIES);
    p.git(&["checkout", "-q", "-b", "ralph/demo"]);
    p.write("README.md", "changed on demo\n");
    p.git(&["commit", "-qam", "demo change"]);
    p.git(&["checkout", "-q", "main"]);
    p.write("README.md", "uncommitted\n");
    p.script("[run *]\nimplement\n");
    // Even a run allowed to start on a dirty tree does not switch over it.
    let r = p.run(&["1", "--allow-dirty"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("uncommitted changes in README.md"), "{r:?}");
    assert!(r.stderr.contains("hint:"), "{r:?}");
    assert_eq!(p.read("README.md"), "uncommitted\n");
    assert!(p.agent_runs().is_empty());
}

#[test]
fn a_persons_uncommitted_edit_refuses_a_new_run() {
    let p = Project::with_prd(THREE_STORIES);
    p.write("README.md", "my edit, not the agent's\n");
    // ralph's own files may be changed, and untracked files do not count.
    p.write("prd.json", &THREE_STORIES.replace("test project", "the test project"));
    p.write("notes.txt", "untracked\n");
    p.script("[run *]\nimplement\n");
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(
        r.stderr.contains("uncommitted changes to tracked files: README.md; the agent's commits"),
        "{r:?}"
    );
    assert!(r.stderr.contains("`git stash`") && r.stderr.contains("--allow-dirty"), "{r:?}");
    assert!(p.agent_runs().is_empty(), "{r:?}");
    assert!(!p.path(".git/ralph/state.json").exists(), "a run was started: {r:?}");
    // Stashed, the run goes, and the edit comes back in none of its commits.
    p.git(&["stash", "push", "-q", "README.md"]);
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    p.git(&["stash", "pop", "-q"]);
    assert_eq!(p.read("README.md"), "my edit, not the agent's\n");
    assert!(p.git(&["log", "--format=%H", "--", "README.md"]).lines().count() == 1);
}

#[test]
fn outside_a_git_repository_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("prd.json"), THREE_STORIES).unwrap();
    let out = std::process::Command::new(RALPH)
        .current_dir(tmp.path())
        .env("RALPH_AGENT_COMMAND", FAKE_AGENT)
        .env("RALPH_AGENT_TOOL", "custom")
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(
        r.stderr.contains("not inside a git repository") && r.stderr.contains("git init"),
        "{r:?}"
    );
}

#[test]
fn init_outside_a_git_repository_is_the_same_error_and_writes_nothing() {
    let (tmp, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let out = std::process::Command::new(RALPH)
        .current_dir(tmp.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .arg("init")
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(
        r.stderr.contains("not inside a git repository") && r.stderr.contains("git init"),
        "{r:?}"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "init wrote files: {r:?}");
}

#[test]
fn a_missing_agent_binary_is_named() {
    let p = Project::with_prd(THREE_STORIES);
    let r = p.run(&["--agent-cmd", "no-such-agent-binary --flag"]);
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("`no-such-agent-binary` not found"), "{r:?}");
    let r = p.run(&["--tool", "claude"]);
    // Either claude is missing, or (as root) it would refuse to run: both are named.
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(r.stderr.contains("claude"), "{r:?}");
}

#[test]
fn the_agent_command_is_never_run_by_a_shell() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nprint ok\n");
    let marker = p.tmp.path().join("pwned");
    let cmd = format!("{FAKE_AGENT} $(touch {0}) ';' touch {0}", marker.display());
    // Refused with the reason, rather than run with `$(touch` as an argument.
    let r = p.run(&["1", "--agent-cmd", &cmd]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("has shell syntax (expansion)"), "{r:?}");
    assert!(!marker.exists(), "a shell ran the command");
    assert!(p.agent_runs().is_empty(), "{r:?}");
    // Quoted, the same words are plain arguments.
    let cmd = format!("{FAKE_AGENT} '$(touch {0})' ';' touch {0}", marker.display());
    p.run(&["1", "--agent-cmd", &cmd]);
    assert!(!marker.exists(), "a shell ran the command");
    let log = std::fs::read_to_string(p.agent_dir().join("runs.log")).unwrap();
    assert!(log.contains("args=$(touch"), "{log}");
}

#[test]
fn an_agent_commands_variables_are_its_environment_and_a_pipeline_is_explained() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nprint-env FOO\nprint-env BAR\n");
    let cmd = format!("FOO=1 BAR='two words' {FAKE_AGENT} --fast");
    let r = p.run(&["1", "--agent-cmd", &cmd]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(r.stdout.contains("FOO=1") && r.stdout.contains("BAR=two words"), "{r:?}");
    let log = std::fs::read_to_string(p.agent_dir().join("runs.log")).unwrap();
    assert!(log.contains("args=--fast\n"), "{log}");
    // A pipeline, from the command line or the config: refused, saying why
    // the gate may have one and the agent may not.
    let piped = format!("{FAKE_AGENT} | tee agent.out");
    let r = p.run(&["1", "--agent-cmd", &piped]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(
        r.stderr.contains("has shell syntax (|)") && r.stderr.contains("unlike a gate"),
        "{r:?}"
    );
    p.write(".ralph/config.toml", &format!("[agent]\ntool = \"custom\"\ncommand = {piped:?}\n"));
    let r = to_run(p.ralph().env_remove("RALPH_AGENT_COMMAND").arg("1").output().unwrap());
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("has shell syntax (|)"), "{r:?}");
    assert!(!p.path("agent.out").exists());
    assert_eq!(p.agent_runs().len(), 1, "{r:?}");
}

#[test]
fn a_second_ralph_in_the_same_directory_exits_with_the_lock_code() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nsleep 30\n");
    let mut first = p.spawn(&["1"]);
    assert!(
        eventually(Duration::from_secs(20), || p.agent_runs().len() == 1),
        "the first ralph never started its agent"
    );
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::LOCKED), "{r:?}");
    assert!(r.stderr.contains(&format!("pid {}", first.id())), "{r:?}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(143));
}

#[test]
fn a_timeout_kills_the_agent_and_everything_it_spawned() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nignore-sigterm\nspawn group 120\nspawn setsid 120\nsleep 120\n");
    let started = Instant::now();
    let r = p.run(&["1", "--timeout", "2s", "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    assert!(r.stdout.contains("iteration timeout"), "{r:?}");
    let pids = p.spawned_pids();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(!alive(pid), "process {pid} survived");
    }
}

#[test]
fn an_idle_agent_is_stopped() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nprint started\nsleep 120\n");
    let r = p.run(&["1", "--idle-timeout", "1s"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(r.stdout.contains("no output for the idle timeout"), "{r:?}");
}

#[test]
fn sigint_stops_the_run_with_130_and_leaves_no_process() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nignore-sigterm\nspawn setsid 120\nspawn group 120\nsleep 120\n");
    let child = p.spawn(&["3"]);
    let pid = child.id() as i32;
    assert!(
        eventually(Duration::from_secs(20), || p.spawned_pids().len() == 2),
        "agent did not start"
    );
    let agent_pid: i32 = std::fs::read_to_string(p.agent_dir().join("runs.log"))
        .unwrap()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pid=").and_then(|v| v.parse().ok()))
        .unwrap();
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let (r, _) = wait_with_rusage(child);
    assert_eq!(r.code, code(exit::INTERRUPTED), "{r:?}");
    // Grace (1s) + 3s.
    assert!(started.elapsed() < Duration::from_secs(4), "took {:?}", started.elapsed());
    assert!(!alive(agent_pid), "the agent survived");
    for pid in p.spawned_pids() {
        assert!(!alive(pid), "process {pid} survived");
    }
    assert!(r.stdout.contains("interrupted"), "{r:?}");
}

#[test]
fn fifty_megabytes_of_output_keep_ralph_small() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\noutput 52428800\n");
    let child = p.spawn(&["1", "--quiet"]);
    let (r, max_rss_kib) = wait_with_rusage(child);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(max_rss_kib < 64 * 1024, "peak RSS {max_rss_kib} KiB");
    // The output is in the log, not in memory: as much of it as
    // logs.max_file_bytes (32 MiB) takes, its start and its end.
    let logs = p.path(".git/ralph/logs");
    let run_dir =
        std::fs::read_dir(&logs).unwrap().flatten().find(|e| e.path().is_dir()).unwrap().path();
    let len = std::fs::metadata(run_dir.join("iter-1.log")).unwrap().len();
    assert!((32 << 20) - (1 << 20) < len && len < (32 << 20) + 200, "{len}");
}

#[test]
fn non_utf8_and_control_bytes_are_handled() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nbinary\nimplement\n");
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(p.passes("US-001"));
    assert!(!r.stdout.contains('\x1b'), "escape codes from the agent reached the terminal");
}

#[test]
fn an_agent_that_exits_before_reading_its_prompt_is_just_a_failed_iteration() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nskip-stdin\nexit 3\n");
    let big = "x".repeat(300_000);
    p.write(".ralph/prompt.md", &format!("story {{{{story_id}}}}\n{big}\n"));
    let r = p.run(&["2", "--auto-reset"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(p.agent_runs().len(), 2);
}

#[test]
fn an_agent_that_closes_stdout_but_keeps_running_is_stopped() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nclose-stdout\nsleep 120\n");
    let started = Instant::now();
    let r = p.run(&["1", "--idle-timeout", "1s"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn the_demo_runs_the_whole_loop() {
    let tmp = tempfile::tempdir().unwrap();
    let into = tmp.path().join("demo");
    let out = std::process::Command::new(RALPH)
        .args(["demo", "--pace", "0", "--into"])
        .arg(&into)
        .env("HOME", tmp.path())
        .env_remove("RALPH_AGENT_TOOL")
        .output()
        .unwrap();
    let r = to_run(out);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("was claimed but the gate failed"), "{r:?}");
    assert!(r.stdout.contains("3/3 stories pass after 4 iterations"), "{r:?}");
    let prd: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(into.join("prd.json")).unwrap()).unwrap();
    assert!(prd["userStories"].as_array().unwrap().iter().all(|s| s["passes"] == true));
}

#[test]
fn switching_to_an_existing_branch_with_a_tracked_progress_log_works() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run *]\nimplement\n");
    assert_eq!(p.run(&["1"]).code, code(exit::MAX_ITERATIONS));
    // The agent commits progress.txt; a later feature lives on a branch that exists already.
    p.git(&["checkout", "-q", "-b", "ralph/next"]);
    p.git(&["checkout", "-q", "ralph/demo"]);
    let next = THREE_STORIES.replace("ralph/demo", "ralph/next");
    p.write("prd.json", &next);
    p.git(&["commit", "-qam", "next prd"]);
    let r = p.run(&["1"]);
    assert!(r.stdout.contains("switched to branch ralph/next"), "{r:?}");
    assert!(r.stdout.contains("archived the previous run (ralph/demo)"), "{r:?}");
    assert_eq!(p.git(&["branch", "--show-current"]).trim(), "ralph/next");
    assert_eq!(p.read(".last-branch"), "ralph/next\n");
}

#[test]
fn ralphs_own_commits_take_the_agents_leftovers_and_leave_the_users_staging_alone() {
    let p = Project::with_prd(THREE_STORIES);
    // The person staged a file of their own before the run.
    p.write("user.c", "mine");
    p.git(&["add", "user.c"]);
    // The agent does the story's work, stages part of it, and commits nothing.
    p.script("[run *]\nwrite src/us-001.txt done\nwrite wip.c wip\nstage wip.c\n");
    // A staged file is an uncommitted change: the person lets the run start over it.
    let r = p.run(&["1", "--gate", "test -f src/us-001.txt", "--allow-dirty"]);
    assert!(p.passes("US-001"), "{r:?}");
    let files = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    let files: Vec<&str> = files.split_whitespace().collect();
    assert_eq!(files, ["prd.json", "src/us-001.txt", "wip.c"], "{r:?}");
    let message = p.git(&["log", "-1", "--format=%B"]);
    assert!(message.starts_with("feat: US-001 - First\n"), "{message}");
    assert!(message.contains("Committed-by: ralph"), "{message}");
    assert!(r.stdout.contains("ralph committed them"), "{r:?}");
    let staged = p.git(&["diff", "--cached", "--name-only"]);
    assert_eq!(staged.trim(), "user.c", "the person's staged file was touched: {staged}");
}

#[test]
fn pointing_prd_json_at_an_existing_branch_carries_the_edit_across() {
    let p = Project::with_prd(&THREE_STORIES.replace("ralph/demo", "ralph/old"));
    p.git(&["checkout", "-q", "-b", "ralph/demo"]);
    p.write("README.md", "changed on demo\n");
    p.git(&["commit", "-qam", "demo change"]);
    p.git(&["checkout", "-q", "main"]);
    // The edit that names the branch is itself uncommitted.
    p.write("prd.json", THREE_STORIES);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["3"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(r.stdout.contains("switched to branch ralph/demo"), "{r:?}");
    assert_eq!(p.git(&["branch", "--show-current"]).trim(), "ralph/demo");
    assert_eq!(p.read("README.md"), "changed on demo\n");
}

#[test]
fn depends_on_orders_the_work_and_status_shows_the_waits() {
    let p = Project::with_prd(
        r#"{"project":"P","branchName":"ralph/deps","userStories":[
      {"id":"US-001","title":"Report","priority":1,"passes":false,"dependsOn":["US-002"]},
      {"id":"US-002","title":"Model","priority":2,"passes":false}]}"#,
    );
    let status = p.run(&["status"]);
    assert!(status.stdout.contains("(waits on US-002)"), "{status:?}");
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    // The dependency first, though its priority number is higher.
    assert_eq!(p.agent_runs(), ["US-002", "US-001"]);
    let bad = Project::with_prd(
        r#"{"userStories":[{"id":"A","dependsOn":["B"]},{"id":"B","dependsOn":["A"]}]}"#,
    );
    let r = bad.run(&["1"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("goes round in a circle"), "{r:?}");
}
