//! The test harness: a temporary git project, a fake agent driven by a
//! script, and the real `ralph` binary run against them in a hermetic
//! environment (no user config, no inherited RALPH_* or agent variables).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

pub use ralph::exit;

pub const RALPH: &str = env!("CARGO_BIN_EXE_ralph");

/// An exit code as a process reports it: `code(exit::CIRCUIT_OPEN)`.
pub fn code(c: u8) -> i32 {
    i32::from(c)
}
pub const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-agent");

pub struct Project {
    pub tmp: TempDir,
}

/// Three stories, priorities out of file order on purpose.
pub const THREE_STORIES: &str = r#"{
  "project": "Demo",
  "branchName": "ralph/demo",
  "description": "test project",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["works"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-003", "title": "Third", "description": "", "acceptanceCriteria": ["works"], "priority": 3, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Second", "description": "", "acceptanceCriteria": ["works"], "priority": 2, "passes": false, "notes": ""}
  ]
}
"#;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[exit {}]\n--- stdout\n{}\n--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

impl Project {
    /// A git repository with one commit.
    pub fn new() -> Project {
        let tmp = tempfile::tempdir().expect("temp dir");
        let p = Project { tmp };
        std::fs::create_dir_all(p.home()).unwrap();
        std::fs::create_dir_all(p.agent_dir()).unwrap();
        std::fs::create_dir_all(p.dir()).unwrap();
        p.git(&["init", "-q", "-b", "main"]);
        p.write("README.md", "# test\n");
        p.git(&["add", "-A"]);
        p.git(&["commit", "-q", "-m", "Initial commit"]);
        p
    }

    /// With a prd.json, committed.
    pub fn with_prd(prd: &str) -> Project {
        let p = Project::new();
        p.write("prd.json", prd);
        p.git(&["add", "-A"]);
        p.git(&["commit", "-q", "-m", "Add the PRD"]);
        p
    }

    pub fn dir(&self) -> PathBuf {
        self.tmp.path().join("project")
    }

    pub fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    pub fn agent_dir(&self) -> PathBuf {
        self.tmp.path().join("agent")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir().join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.dir())
            .env("HOME", self.home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Commit subjects, newest first.
    pub fn log(&self) -> Vec<String> {
        self.git(&["log", "--format=%s"]).lines().map(str::to_string).collect()
    }

    pub fn prd(&self) -> Value {
        serde_json::from_str(&self.read("prd.json")).expect("prd.json parses")
    }

    /// Whether a story passes right now, while an agent may be writing
    /// prd.json (as real agents do, not atomically): a half-written file
    /// reads as "not yet".
    pub fn passes_now(&self, id: &str) -> bool {
        let text = std::fs::read_to_string(self.path("prd.json")).unwrap_or_default();
        serde_json::from_str::<Value>(&text).is_ok_and(|v| {
            v["userStories"]
                .as_array()
                .is_some_and(|a| a.iter().any(|s| s["id"] == id && s["passes"] == true))
        })
    }

    pub fn passes(&self, id: &str) -> bool {
        self.prd()["userStories"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == id && s["passes"] == true)
    }

    /// The fake agent's script.
    pub fn script(&self, text: &str) {
        std::fs::write(self.agent_dir().join("script"), text).unwrap();
    }

    /// Story ids of the fake agent's runs, in order.
    pub fn agent_runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.agent_dir().join("runs.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                l.split_whitespace().find_map(|w| w.strip_prefix("story=")).map(str::to_string)
            })
            .collect()
    }

    /// The prompt of the fake agent's run `n` (1-based).
    pub fn prompt(&self, n: usize) -> String {
        std::fs::read_to_string(self.agent_dir().join(format!("prompt-{n}.txt")))
            .unwrap_or_default()
    }

    /// Pids of the fake agent's runs, in order.
    pub fn agent_pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.agent_dir().join("runs.log"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|w| w.strip_prefix("pid=").and_then(|v| v.parse().ok()))
            .collect()
    }

    /// Pids the fake agent spawned.
    pub fn spawned_pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.agent_dir().join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// `ralph` with a clean environment and the fake agent as the agent.
    pub fn ralph(&self) -> Command {
        let mut c = Command::new(RALPH);
        c.current_dir(self.dir())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("TZ", "UTC")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .env("FAKE_AGENT_SCRIPT", self.agent_dir().join("script"))
            .env("FAKE_AGENT_DIR", self.agent_dir())
            .env("RALPH_AGENT_TOOL", "custom")
            .env("RALPH_AGENT_COMMAND", FAKE_AGENT)
            .env("RALPH_AGENT_GRACE", "1s")
            // The fake agent keeps its run log and counters beside its
            // script: the sandbox lets it write there and nowhere else
            // outside the project.
            .env("RALPH_SANDBOX_WRITE", self.agent_dir())
            .env("RALPH_SANDBOX_READ", Path::new(FAKE_AGENT).parent().unwrap())
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let out = self.ralph().args(args).output().expect("run ralph");
        to_run(out)
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.ralph()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ralph")
    }
}

pub fn to_run(out: Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Processes whose working directory is inside `dir` (agents and workers).
pub fn processes_in(dir: &std::path::Path) -> Vec<i32> {
    let Ok(all) = std::fs::read_dir("/proc") else { return Vec::new() };
    all.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|pid| alive(*pid))
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
        })
        .collect()
}

/// The watchdog `ralph` started (`ralph __watchdog`), if it runs: a test
/// that kills it with ralph sees what only a resume ends.
pub fn watchdog_of(ralph: u32) -> Option<i32> {
    let all = std::fs::read_dir("/proc").ok()?;
    all.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())).find(
        |pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(&ralph.to_string())
                && cmdline.split(|&b| b == 0).any(|a| a == b"__watchdog")
        },
    )
}

/// kill -9 of a ralph and of its watchdog: what is left only a resume ends.
pub fn kill_9_with_its_watchdog(child: &mut Child) {
    if let Some(w) = watchdog_of(child.id()) {
        // SAFETY: signalling the watchdog of our own child.
        unsafe { libc::kill(w, libc::SIGKILL) };
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
}

/// kill -9 of a ralph, then the wait until nothing of it is left at work
/// in `dir` (its workers stop their agents; its watchdog ends the rest).
pub fn kill_9_and_settle(child: &mut Child, dir: &std::path::Path) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let gone = eventually(Duration::from_secs(30), || processes_in(&dir).is_empty());
    assert!(gone, "{:?} outlived a kill -9 of ralph", processes_in(&dir));
}

/// Whether a process exists (zombies count as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state =
                stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// The Landlock ABI this kernel offers (0: none).
pub fn landlock_abi() -> i64 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION reads no memory; it returns
    // the ABI or -1.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    abi.max(0)
}

/// Asserts that ralph's output (`stdout`, plain or `--json`) has the start
/// line of a run whose children are confined, whenever this kernel has
/// Landlock. A real CLI's run that `auto` left unconfined would pass
/// whatever the sandbox's list of its state dirs says.
#[track_caller]
pub fn assert_sandbox_on(stdout: &str) {
    if landlock_abi() >= 1 {
        assert!(stdout.contains("sandbox (Landlock ABI"), "the sandbox was not on:\n{stdout}");
    }
}

/// Every file under `dir` whose name matches `want`.
pub fn files_under(dir: &Path, want: &dyn Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path, want));
        } else if entry.file_name().to_str().is_some_and(want) {
            found.push(path);
        }
    }
    found
}

/// Waits until `f` holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    f()
}

/// Waits for `child` and returns its output and its peak resident memory
/// in KiB. The peak is ralph's own `VmHWM`, sampled from /proc while it
/// runs: wait4's `ru_maxrss` would also count the forked copy of this
/// (large) test binary before the exec.
pub fn wait_with_rusage(mut child: Child) -> (Run, i64) {
    use std::io::Read;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0i64;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok());
            peak_kib = peak_kib.max(hwm.unwrap_or(0));
        }
        match child.try_wait().expect("wait for ralph") {
            Some(status) => break status,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out_t.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err_t.join().unwrap()).into_owned(),
    };
    (run, peak_kib)
}

/// A local port that refuses connections, and stays that way while this
/// lives: a socket bound to it but never listening. (Binding a listener to
/// port 0 and dropping it frees the port for the next test's server to be
/// given, and the "unreachable" agent then reaches that server.)
pub struct RefusedPort {
    fd: i32,
    pub port: u16,
}

impl RefusedPort {
    pub fn new() -> RefusedPort {
        // SAFETY: plain socket calls on a socket this owns; the address
        // structs are initialised before use and sized as passed.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let rc = libc::bind(fd, (&raw const addr).cast(), len);
            assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
            let mut got: libc::sockaddr_in = std::mem::zeroed();
            let mut got_len = len;
            let rc = libc::getsockname(fd, (&raw mut got).cast(), &mut got_len);
            assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
            RefusedPort { fd, port: u16::from_be(got.sin_port) }
        }
    }
}

impl Drop for RefusedPort {
    fn drop(&mut self) {
        // SAFETY: closing the socket this owns, once.
        unsafe { libc::close(self.fd) };
    }
}

/// The fault tests' random numbers: the same from one seed on every machine.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// `var` from the environment, parsed, else `default` (a soak's kill count
/// and seed).
pub fn env_or<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
