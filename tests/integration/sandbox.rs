//! The sandbox: an agent (and a gate) that tries to leave its project —
//! write the home, read a key, delete a sibling project, write /etc,
//! escape through a link, connect to a local port, stop ralph — fails at
//! every step, changes nothing outside the project, and each denial is
//! named in the iteration's log, on the iteration's line and in the report.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Project, Run, code, exit, landlock_abi, to_run};

const ONE_STORY: &str = r#"{
  "project": "Demo",
  "branchName": "ralph/demo",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["works"], "priority": 1, "passes": false, "notes": ""}
  ]
}
"#;

/// Whether this kernel has Landlock (the sandbox's tests need it).
fn landlock() -> bool {
    let on = landlock_abi() >= 1;
    if !on {
        eprintln!("SKIPPED: this kernel has no Landlock");
    }
    on
}

/// What the hostile child is aimed at, all outside its project.
struct Targets {
    key: PathBuf,
    sibling: PathBuf,
    etc: PathBuf,
    listener: TcpListener,
}

impl Targets {
    fn plant(p: &Project) -> Targets {
        let key = p.home().join(".ssh/id_ed25519");
        std::fs::create_dir_all(key.parent().unwrap()).unwrap();
        std::fs::write(&key, "PRIVATE-KEY-MATERIAL\n").unwrap();
        let sibling = p.tmp.path().join("sibling");
        std::fs::create_dir_all(&sibling).unwrap();
        std::fs::write(sibling.join("keep.txt"), "mine\n").unwrap();
        let etc = PathBuf::from(format!("/etc/ralph-sandbox-test-{}", std::process::id()));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Targets { key, sibling, etc, listener }
    }

    fn port(&self) -> u16 {
        self.listener.local_addr().unwrap().port()
    }

    /// Every attempt, as fake-agent commands that go on after a failure.
    fn attempts(&self, home: &Path, tag: &str) -> String {
        format!(
            "try write {home}/{tag} pwned\n\
             try cat {key}\n\
             try rm {sibling}\n\
             try write {etc}-{tag} pwned\n\
             try symlink escape-{tag} {home}\n\
             try write escape-{tag}/escaped-{tag} pwned\n\
             try connect {port}\n\
             try kill-parent STOP\n",
            home = home.display(),
            key = self.key.display(),
            sibling = self.sibling.display(),
            etc = self.etc.display(),
            port = self.port(),
        )
    }

    /// Nothing outside the project changed, and nobody connected.
    fn untouched(&self, p: &Project, tag: &str) {
        assert!(!p.home().join(tag).exists(), "wrote the home");
        assert!(!p.home().join(format!("escaped-{tag}")).exists(), "escaped through the link");
        assert!(!Path::new(&format!("{}-{tag}", self.etc.display())).exists(), "wrote /etc");
        assert_eq!(std::fs::read_to_string(self.sibling.join("keep.txt")).unwrap(), "mine\n");
        assert_eq!(std::fs::read_to_string(&self.key).unwrap(), "PRIVATE-KEY-MATERIAL\n");
        match self.listener.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("something connected to the port: {other:?}"),
        }
    }

    /// What must be named: each attempt's denial.
    fn expected(&self, home: &Path, tag: &str) -> Vec<String> {
        vec![
            format!("sandbox denied {}/{tag}", home.display()),
            format!("sandbox denied {}", self.key.display()),
            format!("sandbox denied {}", self.sibling.display()),
            format!("sandbox denied {}-{tag}", self.etc.display()),
            format!(
                "sandbox denied escape-{tag}/escaped-{tag} (→ {}/escaped-{tag})",
                home.display()
            ),
            format!("sandbox denied connect to port {}", self.port()),
            "sandbox denied a signal to pid".to_string(),
        ]
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        for tag in ["agent", "gate"] {
            let _ = std::fs::remove_file(format!("{}-{tag}", self.etc.display()));
        }
    }
}

/// Waits for ralph; a ralph that the agent managed to stop is woken, killed
/// and reported (the test must never hang on it).
fn finish(mut child: Child) -> Run {
    let until = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            // SAFETY: signals to our own child.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGCONT);
                libc::kill(child.id() as i32, libc::SIGKILL);
            }
            panic!("ralph did not end: the agent stopped it");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::harness::to_run(child.wait_with_output().unwrap())
}

/// The run's log folder (`.git/ralph/logs/<run>/`).
fn log_dir(p: &Project) -> PathBuf {
    let logs = p.path(".git/ralph/logs");
    std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|d| d.is_dir() && d.join("events.jsonl").exists())
        .expect("a run's log folder")
}

#[test]
fn an_agent_that_tries_to_leave_its_project_is_denied_each_time_and_told() {
    if !landlock() {
        return;
    }
    let p = Project::with_prd(ONE_STORY);
    let t = Targets::plant(&p);
    p.script(&format!(
        "[run 1]\n{}print done\n[run *]\nprint done\n",
        t.attempts(&p.home(), "agent")
    ));
    let r = finish(p.spawn(&["2"]));
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(r.stdout.contains("sandbox (Landlock ABI"), "the start line: {r:?}");
    t.untouched(&p, "agent");
    let dir = log_dir(&p);
    let log = std::fs::read_to_string(dir.join("iter-1.log")).unwrap();
    assert!(!log.contains("PRIVATE-KEY-MATERIAL"), "{log}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let iteration_line =
        r.stdout.lines().find(|l| l.contains("iteration 1 ") && l.contains("·")).unwrap_or("");
    for want in t.expected(&p.home(), "agent") {
        assert!(log.contains(&format!("[ralph] {want}")), "iteration log lacks {want:?}:\n{log}");
        assert!(report.contains(&want), "report lacks {want:?}:\n{report}");
        assert!(iteration_line.contains(&want), "iteration line lacks {want:?}: {iteration_line}");
    }
    // The next agent is told not to retry.
    assert!(p.prompt(2).contains("The sandbox denied"), "{}", p.prompt(2));
    assert!(p.prompt(2).contains("do not retry"));
}

#[test]
fn a_gate_that_tries_to_leave_the_project_is_denied_too() {
    if !landlock() {
        return;
    }
    let p = Project::with_prd(ONE_STORY);
    let t = Targets::plant(&p);
    // The gate is the fake agent with a script of its own.
    let gate_dir = p.agent_dir().join("gate");
    std::fs::create_dir_all(&gate_dir).unwrap();
    std::fs::write(
        gate_dir.join("script"),
        format!("[run *]\nskip-stdin\n{}exit 1\n", t.attempts(&p.home(), "gate")),
    )
    .unwrap();
    // The gate's program lives outside the project: the person lets it be read.
    let fake_dir = Path::new(crate::harness::FAKE_AGENT).parent().unwrap().display().to_string();
    let gate = format!(
        "[\"env\", \"FAKE_AGENT_SCRIPT={}\", \"FAKE_AGENT_DIR={}\", \"{}\"]",
        gate_dir.join("script").display(),
        gate_dir.display(),
        crate::harness::FAKE_AGENT
    );
    p.write(".ralph/config.toml", &format!("[gate]\ncommand = {gate}\nbaseline = false\n"));
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "gate"]);
    p.script("[run *]\nimplement\n");
    let mut ralph = p.ralph();
    ralph.args(["1"]).env("RALPH_SANDBOX_READ", &fake_dir);
    let r = finish(ralph.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    t.untouched(&p, "gate");
    let dir = log_dir(&p);
    let log = std::fs::read_to_string(dir.join("gate-1.log")).unwrap();
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for want in t.expected(&p.home(), "gate") {
        assert!(log.contains(&format!("[ralph] {want}")), "gate log lacks {want:?}:\n{log}");
        assert!(report.contains(&want), "report lacks {want:?}:\n{report}");
    }
    assert!(report.contains("the gate:"), "{report}");
}

/// `--sandbox off` is the behaviour before the sandbox: no start line, and
/// the agent writes where the user can.
#[test]
fn sandbox_off_confines_nothing() {
    let p = Project::with_prd(ONE_STORY);
    let outside = p.home().join("outside.txt");
    p.script(&format!("[run *]\nwrite {} written\nprint done\n", outside.display()));
    let r = p.run(&["1", "--sandbox", "off"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "written\n");
    assert!(!r.stdout.contains("sandbox"), "{r:?}");
}

/// On a kernel without Landlock (pretended), `auto` runs unconfined and
/// says so once; `strict` refuses to start, with the environment's code.
#[test]
fn without_landlock_auto_runs_unconfined_and_strict_refuses() {
    let p = Project::with_prd(ONE_STORY);
    let outside = p.home().join("outside.txt");
    p.script(&format!("[run *]\nwrite {} written\nprint done\n", outside.display()));
    let r = to_run(p.ralph().args(["1"]).env("RALPH_SANDBOX_ABI", "0").output().unwrap());
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(
        r.stdout.matches("sandbox unavailable: this kernel has no Landlock").count(),
        1,
        "{r:?}"
    );
    assert!(outside.exists());
    let r = to_run(
        p.ralph()
            .args(["1", "--sandbox", "strict"])
            .env("RALPH_SANDBOX_ABI", "0")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert!(
        r.stderr.contains("agent.sandbox is \"strict\" but this kernel has no Landlock"),
        "{r:?}"
    );
    assert_eq!(p.agent_runs().len(), 1, "strict ran no agent");
}

/// `ralph agents` and `ralph --dry-run` print the policy the next agent
/// gets: what it writes, reads and connects to, and what it may not.
#[test]
fn the_policy_is_printed_by_agents_and_dry_run() {
    if !landlock() {
        return;
    }
    let p = Project::with_prd(ONE_STORY);
    std::fs::create_dir_all(p.home().join(".ssh")).unwrap();
    std::fs::create_dir_all(p.home().join(".cargo")).unwrap();
    let env = [("RALPH_SANDBOX_PORTS", "5432"), ("RALPH_SANDBOX_WRITE", "~/.cargo")];
    for args in [&["agents"][..], &["--dry-run"][..]] {
        let r = to_run(p.ralph().args(args).envs(env).output().unwrap());
        assert_eq!(r.code, 0, "{r:?}");
        assert!(r.stdout.contains("sandbox (Landlock ABI"), "{args:?}: {r:?}");
        let line = |word: &str| {
            r.stdout.lines().find(|l| l.trim_start().starts_with(word)).unwrap_or("").to_string()
        };
        let (writes, reads, connects) = (line("writes "), line("reads "), line("connects "));
        assert!(writes.contains(&p.dir().display().to_string()), "{writes}");
        assert!(writes.contains(&format!("{}/.cargo", p.home().display())), "{writes}");
        assert!(reads.contains("/usr") && !reads.contains(".ssh"), "{reads}");
        assert_eq!(connects.trim(), "connects 80, 443, 5432", "{args:?}");
    }
    let json = to_run(p.ralph().args(["--dry-run", "--json"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["agent"]["sandbox"]["mode"], "auto", "{v}");
    assert_eq!(v["agent"]["sandbox"]["policy"]["connect"], serde_json::json!([80, 443]), "{v}");
    let off = to_run(p.ralph().arg("agents").env("RALPH_AGENT_SANDBOX", "off").output().unwrap());
    assert!(off.stdout.contains("sandbox off"), "{off:?}");
}

/// A hook runs what the person configured, but in the project the agent
/// wrote: confined like the agent, and what it was denied is said.
#[test]
fn a_hook_that_tries_to_leave_the_project_is_denied() {
    if !landlock() {
        return;
    }
    let p = Project::with_prd(ONE_STORY);
    let outside = p.home().join("hook-was-here");
    let hook = format!(
        "[hooks]\non_iteration_end = [\"sh\", \"-c\", \"echo x > {}\"]\n",
        outside.display()
    );
    p.write(".ralph/config.toml", &hook);
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "hook"]);
    p.script("[run *]\nimplement\n");
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(!outside.exists(), "the hook wrote outside the project");
    assert!(r.stdout.contains("iteration 1: a hook: sandbox denied"), "{r:?}");
    assert!(r.stdout.contains("hook on_iteration_end (sh -c"), "{r:?}");
    let report = std::fs::read_to_string(log_dir(&p).join("report.md")).unwrap();
    assert!(report.contains("a hook:"), "{report}");
}
