//! One run per work tree, whatever its PRD, held by a lock no agent can
//! delete; and nothing of the agent's outlives ralph.

use std::time::Duration;

use crate::harness::*;

const OTHER: &str = r#"{"project":"Other","branchName":"ralph/other","userStories":[
  {"id":"OT-001","title":"Other work","priority":1,"passes":false}]}"#;

/// Ends `child` (our own ralph) with SIGTERM and waits for it.
fn stop(mut child: std::process::Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

#[test]
fn a_second_run_in_the_work_tree_is_refused_whatever_its_prd() {
    let p = Project::with_prd(THREE_STORIES);
    p.write("other/prd.json", OTHER);
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "Another PRD"]);
    p.script("[run *]\nsleep 60\n");
    let first = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    // Two runs would switch HEAD under each other and commit each other's stories.
    let second = p.run(&["1", "--prd", "other/prd.json", "--timeout", "2s"]);
    let pid = first.id();
    stop(first);
    assert_eq!(second.code, code(exit::LOCKED), "{second:?}");
    assert!(second.stderr.contains(&format!("pid {pid}, on ")), "{second:?}");
    assert!(second.stderr.contains("prd.json) is already running in this work tree"), "{second:?}");
    assert_eq!(p.agent_runs().len(), 1, "the second ralph ran an agent");
}

#[test]
fn an_agent_that_deletes_the_lock_file_lets_no_second_ralph_take_over() {
    let p = Project::with_prd(THREE_STORIES);
    p.script(
        "[run 1]\nrun rm -f .git/ralph/lock\ntouch-shared deleted\nsleep 60\n[run *]\nsleep 60\n",
    );
    let first = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_dir().join("deleted").exists()));
    assert!(!p.path(".git/ralph/lock").exists());
    let second = p.run(&["1", "--timeout", "2s"]);
    let agent = p.agent_pids()[0];
    let agent_alive = alive(agent);
    let pid = first.id();
    stop(first);
    assert_eq!(second.code, code(exit::LOCKED), "{second:?}");
    // The kernel still knows who holds the lock.
    assert!(second.stderr.contains(&format!("pid {pid}")), "{second:?}");
    assert!(agent_alive, "the second ralph ended the live run's agent as if it were left over");
    assert_eq!(p.agent_runs().len(), 1, "the second ralph ran an agent");
}

#[test]
fn nothing_of_the_agents_tree_outlives_a_killed_ralph() {
    let p = Project::with_prd(THREE_STORIES);
    // A test run in the agent's group and a dev server in a session of its
    // own, both deaf to SIGTERM.
    p.script("[run *]\nspawn stubborn-group 300\nspawn stubborn-setsid 300\nsleep 60\n");
    let mut child = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.spawned_pids().len() == 2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let dir = p.dir().canonicalize().unwrap();
    let gone = eventually(Duration::from_secs(20), || processes_in(&dir).is_empty());
    assert!(gone, "{:?} outlived ralph (spawned: {:?})", processes_in(&dir), p.spawned_pids());
    for pid in p.spawned_pids().into_iter().chain(p.agent_pids()) {
        assert!(!alive(pid), "{pid} outlived ralph");
    }
    // The resume has nothing left to end.
    p.script("[run *]\nimplement\n");
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(!r.stdout.contains("left running by the interrupted run"), "{r:?}");
}

#[test]
fn a_run_whose_process_lives_is_never_resumed_as_an_interrupted_one() {
    let p = Project::with_prd(THREE_STORIES);
    p.script("[run 1]\nsleep 60\n[run *]\nimplement\n");
    let mut child = p.spawn(&["5"]);
    assert!(eventually(Duration::from_secs(20), || p.agent_runs().len() == 1));
    kill_9_with_its_watchdog(&mut child);
    // Its checkpoint says a live process (this test's) works the run, mid-agent.
    let mut state: serde_json::Value =
        serde_json::from_str(&p.read(".git/ralph/state.json")).unwrap();
    let me = std::process::id();
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let start = stat.rsplit(')').next().unwrap().split_whitespace().nth(19).unwrap().to_string();
    state["owner"] = format!("{me}.{start}").into();
    p.write(".git/ralph/state.json", &state.to_string());
    let r = p.run(&["5"]);
    assert_eq!(r.code, code(exit::LOCKED), "{r:?}");
    assert!(r.stderr.contains(&format!("pid {me}")), "{r:?}");
    assert_eq!(p.agent_runs().len(), 1, "it resumed the live run");
}
