//! ralph driving the real claude CLI, end to end: `ralph N --tool claude`
//! runs claude (the installed binary, via `RALPH_AGENT_COMMAND`) in a
//! temporary git project, and claude talks to the scripted API stand-in
//! ([`crate::claude_stub`]). The scripted model reads its story from ralph's
//! prompt and implements it with one Bash call, so everything between the
//! prompt and the commit is real: ralph's argv, claude's tool loop and
//! stream-json output, ralph's analysis, gate, breaker and limits.
//!
//! Every run uses `--json`, and the tests assert on ralph's event stream,
//! its exit code, the repository and what the stub received. Each test skips
//! (saying so on stderr) when the claude CLI is not installed.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::claude_stub::{BashTurn, ClaudeEnv, Reply, Request, Script, Stub, claude_bin_or_skip};
use crate::harness::{Project, alive, assert_sandbox_on, files_under};
use crate::harness::{code, exit};

/// A hard bound on one ralph run: far above any healthy run here (a few
/// seconds to ~15 s), so a hang fails the test instead of the whole suite.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Three stories, listed out of priority order.
const PRD: &str = r#"{
  "project": "Claude loop",
  "branchName": "ralph/claude-loop",
  "description": "ralph drives the real claude CLI",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["US-001.txt exists"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-003", "title": "Third", "description": "", "acceptanceCriteria": ["US-003.txt exists"], "priority": 3, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Second", "description": "", "acceptanceCriteria": ["US-002.txt exists"], "priority": 2, "passes": false, "notes": ""}
  ]
}
"#;

/// One story, for the fault cases: the first iteration decides them.
const ONE_STORY: &str = r#"{
  "project": "Claude loop",
  "branchName": "ralph/claude-loop",
  "description": "ralph drives the real claude CLI",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["US-001.txt exists"], "priority": 1, "passes": false, "notes": ""}
  ]
}
"#;

/// `~/.claude.json` as claude leaves it once a person has used it.
const USER_STATE: &str = "{\n  \"hasCompletedOnboarding\": true\n}\n";

/// ralph's gate for the happy path: every story marked passing has its
/// file with the right content.
const GATE: &str = r#"set -e
for id in $(python3 -c 'import json; print(" ".join(s["id"] for s in json.load(open("prd.json"))["userStories"] if s["passes"]))'); do
    grep -qx "$id done" "$id.txt" || { echo "FAIL: $id is marked passing but $id.txt is wrong"; exit 1; }
done
echo "gate ok"
"#;

// ---------------------------------------------------------------------------
// The scripted model

/// What ralph's prompt tells the model, read the way a model would: the
/// story from the heading (`# Ralph iteration N of M: story US-00X`), the
/// story's JSON block, and the file paths named in backticks.
#[derive(Debug, Clone)]
struct Assignment {
    story: String,
    title: String,
    prd: String,
    handoff: String,
}

impl Assignment {
    fn read(prompt: &str) -> Option<Assignment> {
        let heading = prompt.lines().find(|l| l.starts_with("# Ralph iteration "))?;
        let story = heading.rsplit("story ").next()?.trim().to_owned();
        let block = prompt.split("```json\n").nth(1)?.split("\n```").next()?;
        let title = serde_json::from_str::<Value>(block).ok()?["title"].as_str()?.to_owned();
        Some(Assignment {
            story,
            title,
            prd: backticked(prompt, "- PRD (the task list): ")?,
            handoff: backticked(prompt, "- Your handoff file: ")?,
        })
    }

    /// Implements the story, marks it passing, writes the handoff and
    /// commits, as ralph's prompt asks.
    fn implement_command(&self) -> String {
        let Assignment { story, title, prd, handoff } = self;
        let note = json!({
            "status": "complete",
            "summary": format!("Implemented {story}: {story}.txt"),
            "evidence": [format!("test -f {story}.txt passes")],
            "nextSteps": [],
            "blocker": "",
        });
        format!(
            "set -e\n\
             printf '%s\\n' '{story} done' > {story}.txt\n\
             python3 - <<'PY'\n\
             import json\n\
             path = {prd}\n\
             with open(path) as f:\n    prd = json.load(f)\n\
             for s in prd['userStories']:\n    if s['id'] == {story_json}:\n        s['passes'] = True\n\
             with open(path, 'w') as f:\n    json.dump(prd, f, indent=2)\n    f.write('\\n')\n\
             PY\n\
             cat > {handoff_q} <<'JSON'\n{note}\nJSON\n\
             git add -A\n\
             git commit -q -m 'feat: {story} - {title}'\n",
            prd = json!(prd),
            story_json = json!(story),
            handoff_q = shell_quote(handoff),
        )
    }

    /// The model's last words once the tool ran: the status block, and the
    /// completion marker if prd.json (read now, as a model would) says
    /// every story passes.
    fn final_text(&self) -> String {
        let all_pass = std::fs::read_to_string(&self.prd)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|prd| {
                prd["userStories"].as_array().map(|s| s.iter().all(|s| s["passes"] == true))
            })
            .unwrap_or(false);
        format!(
            "Implemented {story} and committed it.{promise}\n\n---RALPH_STATUS---\n\
             STATUS: COMPLETE\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 2\n\
             TESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: {all_pass}\n\
             RECOMMENDATION: {next}\n---END_RALPH_STATUS---",
            story = self.story,
            promise = if all_pass { "\n<promise>COMPLETE</promise>" } else { "" },
            next = if all_pass { "all stories pass" } else { "continue with the next story" },
        )
    }
}

/// The text between backticks on the line that starts with `label`.
fn backticked(prompt: &str, label: &str) -> Option<String> {
    let line = prompt.lines().find_map(|l| l.strip_prefix(label))?;
    Some(line.split('`').nth(1)?.to_owned())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A model that does whatever story ralph's prompt assigns: one Bash call,
/// then the final text.
fn implement(request: &Request) -> Reply {
    let Some(task) = Assignment::read(&request.prompt()) else {
        return Reply::text("I cannot tell which story to work on.");
    };
    match request.tool_result() {
        None => Reply::bash(&task.implement_command(), &format!("Implement {}", task.story)),
        Some(result) if !result.is_error => Reply::text(&task.final_text()),
        Some(result) => Reply::text(&format!(
            "The command failed: {}\n\n---RALPH_STATUS---\nSTATUS: IN_PROGRESS\n\
             TASKS_COMPLETED_THIS_LOOP: 0\nFILES_MODIFIED: 0\nTESTS_STATUS: NOT_RUN\n\
             WORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: false\n\
             RECOMMENDATION: retry {}\n---END_RALPH_STATUS---",
            result.content, task.story
        )),
    }
}

/// Model calls that start a session: claude's first request of a run
/// carries the prompt and nothing else.
fn first_turns(stub: &Stub) -> Vec<Request> {
    stub.message_requests().into_iter().filter(|r| r.tool_result().is_none()).collect()
}

// ---------------------------------------------------------------------------
// ralph with claude as its agent

/// A temporary project, the stub, and the claude binary ralph runs.
struct ClaudeLoop {
    project: Project,
    stub: Stub,
    claude: PathBuf,
}

impl ClaudeLoop {
    fn new(claude: PathBuf, prd: &str, script: Script) -> ClaudeLoop {
        let project = Project::with_prd(prd);
        // What a person who has used claude has in their home: the sandbox
        // can grant `~/.claude.json` only once it exists.
        std::fs::write(project.home().join(".claude.json"), USER_STATE).unwrap();
        ClaudeLoop { project, stub: Stub::start(script), claude }
    }

    /// The environment claude needs (API key, no retries), to adjust; its
    /// state where a user's is (`CLAUDE_CONFIG_DIR` unset).
    fn env(&self) -> ClaudeEnv {
        self.stub.claude_env_in_home()
    }

    /// `ralph --json --tool claude ARGS` with the harness's hermetic
    /// environment, claude's program replaced by the installed binary, and
    /// `env` pointing claude at the stub (ralph passes it on).
    fn spawn(&self, args: &[&str], env: &ClaudeEnv) -> Ralph {
        let mut command = self.project.ralph();
        command
            .env_remove("FAKE_AGENT_SCRIPT")
            .env_remove("FAKE_AGENT_DIR")
            .env("RALPH_AGENT_TOOL", "claude")
            .env("RALPH_AGENT_COMMAND", &self.claude)
            .args(["--json", "--tool", "claude"])
            .args(args);
        env.apply(&mut command);
        Ralph::spawn(command)
    }

    fn run(&self, args: &[&str], env: &ClaudeEnv) -> Finished {
        self.spawn(args, env).finish()
    }

    /// Processes (claude, or a tool it started) still running with this
    /// test's stub in their environment. Each stub has its own port, so
    /// tests running in parallel do not see each other's processes.
    fn survivors(&self) -> Vec<(i32, String)> {
        let marker = format!("ANTHROPIC_BASE_URL={}", self.stub.base_url());
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
            if environ.split(|&b| b == 0).any(|var| var == marker.as_bytes()) && alive(pid) {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
            }
        }
        found
    }

    #[track_caller]
    fn assert_no_survivors(&self) {
        let survivors = self.survivors();
        assert!(survivors.is_empty(), "processes outlived ralph: {survivors:?}");
    }

    /// claude wrote its state through the sandbox: a transcript per
    /// session under `dir/projects`, and its record of itself in `record`.
    #[track_caller]
    fn assert_state_in(&self, dir: &Path, record: &Path, sessions: usize) {
        let found = files_under(&dir.join("projects"), &|f| f.ends_with(".jsonl"));
        assert_eq!(found.len(), sessions, "claude's transcripts: {found:?}");
        let text = std::fs::read_to_string(record).unwrap_or_default();
        assert!(text.contains("\"firstStartTime\""), "claude could not write {record:?}: {text}");
    }

    fn git_log(&self) -> Vec<String> {
        let mut log = self.project.log();
        log.reverse();
        log
    }

    /// The iteration logs of the (only) run, by file name.
    fn iteration_logs(&self) -> Vec<String> {
        let logs = self.project.path(".git/ralph/logs");
        let runs: Vec<_> = std::fs::read_dir(&logs)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.path())
            .collect();
        assert_eq!(runs.len(), 1, "one run directory in {}", logs.display());
        let mut names: Vec<String> = std::fs::read_dir(&runs[0])
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("iter-") && n.ends_with(".log"))
            .collect();
        names.sort();
        names.into_iter().map(|n| runs[0].join(n).display().to_string()).collect()
    }
}

/// A running ralph: its `--json` events arrive on a channel as they are
/// printed, so a test can act on one (SIGTERM after `waiting`). Dropped
/// unfinished (a failed assertion), it is killed.
struct Ralph {
    child: Child,
    started: Instant,
    lines: Receiver<String>,
    events: Vec<Value>,
    stdout: String,
    stderr: Option<JoinHandle<String>>,
}

impl Drop for Ralph {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Ralph {
    fn spawn(mut command: Command) -> Ralph {
        let mut child =
            command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn ralph");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        Ralph {
            child,
            started: Instant::now(),
            lines,
            events: Vec::new(),
            stdout: String::new(),
            stderr: Some(stderr),
        }
    }

    fn take_line(&mut self, line: String) -> Option<&Value> {
        self.stdout.push_str(&line);
        self.stdout.push('\n');
        let event = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("ralph --json printed a non-JSON line ({e}): {line}"));
        self.events.push(event);
        self.events.last()
    }

    /// Waits for the first event matching `want`; panics after `timeout`.
    fn wait_for(&mut self, timeout: Duration, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        if let Some(e) = self.events.iter().find(|e| want(e)) {
            return e.clone();
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(e) = self.take_line(line).filter(|e| want(e)) {
                        return e.clone();
                    }
                }
                Err(_) => {
                    panic!("no such event within {timeout:?}; events so far:\n{}", self.stdout)
                }
            }
        }
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Waits for ralph to exit (killing it after [`RUN_LIMIT`]).
    fn finish(mut self) -> Finished {
        let deadline = self.started + RUN_LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                panic!("ralph ran longer than {RUN_LIMIT:?}; output so far:\n{}", self.stdout);
            }
            thread::sleep(Duration::from_millis(20));
        };
        let elapsed = self.started.elapsed();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.take_line(line);
        }
        Finished {
            code: status.code().unwrap_or(-1),
            elapsed,
            events: std::mem::take(&mut self.events),
            stdout: std::mem::take(&mut self.stdout),
            stderr: self.stderr.take().map(|t| t.join().unwrap()).unwrap_or_default(),
        }
    }
}

/// How a ralph run ended, and everything it printed.
struct Finished {
    code: i32,
    elapsed: Duration,
    events: Vec<Value>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[exit {} after {:.1}s]\n--- stdout\n{}--- stderr\n{}",
            self.code,
            self.elapsed.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }
}

impl Finished {
    fn events(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == kind).collect()
    }

    /// The `run_end` event, which every run prints last.
    #[track_caller]
    fn end(&self) -> &Value {
        let last = self.events.last().unwrap_or_else(|| panic!("no events\n{self:?}"));
        assert_eq!(last["event"], "run_end", "{self:?}");
        last
    }

    fn message(&self) -> &str {
        self.end()["message"].as_str().unwrap_or_default()
    }

    /// `iteration_end` events as (iteration, story, result, error).
    fn iterations(&self) -> Vec<(u64, String, String, Option<String>)> {
        self.events("iteration_end")
            .iter()
            .map(|e| {
                (
                    e["iteration"].as_u64().unwrap(),
                    e["story_id"].as_str().unwrap().to_owned(),
                    e["result"].as_str().unwrap().to_owned(),
                    e["error"].as_str().map(str::to_owned),
                )
            })
            .collect()
    }

    fn report(&self, name: &str) {
        eprintln!(
            "{name}: exit {} in {:.1}s; iterations {:?}; message {:?}",
            self.code,
            self.elapsed.as_secs_f64(),
            self.iterations(),
            self.events.last().and_then(|e| e["message"].as_str()),
        );
    }
}

fn epoch_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// The events of one claude run, from ralph's iteration log.
fn log_events(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {path}: {e}"))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

// ---------------------------------------------------------------------------
// The happy path

#[test]
fn claude_loop_implements_three_stories_with_one_commit_each() {
    let Some(bin) = claude_bin_or_skip("claude_loop_implements_three_stories") else {
        return;
    };
    let l = ClaudeLoop::new(bin, PRD, Script::new(implement));
    l.project.write("check.sh", GATE);
    l.project.git(&["add", "-A"]);
    l.project.git(&["commit", "-q", "-m", "Add the gate"]);

    let r = l.run(&["5", "--gate", "sh check.sh"], &l.env());
    r.report("three stories");
    assert_sandbox_on(&r.stdout);

    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let end = r.end();
    assert_eq!(end["outcome"], "complete", "{r:?}");
    assert_eq!(end["iterations"], 3, "{r:?}");
    assert_eq!(end["passing"], 3, "{r:?}");
    assert_eq!(r.message(), "every story passes");
    let notices: Vec<_> = r.events("notice").iter().filter_map(|n| n["message"].as_str()).collect();
    assert!(notices.contains(&"baseline: the gate passes before any work"), "{notices:?}");
    let report: Vec<_> = end["report"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["verified"].clone(), s["passes"].clone()))
        .collect();
    assert_eq!(
        report,
        [
            ("US-001", json!(true), json!(true)),
            ("US-003", json!(true), json!(true)),
            ("US-002", json!(true), json!(true))
        ],
        "{r:?}"
    );

    // Three iterations, in priority order, each one progress and verified.
    let iterations = r.iterations();
    let expected: Vec<_> = ["US-001", "US-002", "US-003"]
        .iter()
        .enumerate()
        .map(|(i, s)| (i as u64 + 1, (*s).to_owned(), "progress".to_owned(), None))
        .collect();
    assert_eq!(iterations, expected, "{r:?}");
    assert_eq!(r.events("iteration_start").len(), 3, "{r:?}");
    for e in r.events("iteration_end") {
        assert_eq!(e["commits"], 1, "{e}");
        assert_eq!(e["story_passes"], true, "{e}");
        assert!(
            e["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
            "claude's cost reached ralph: {e}"
        );
    }
    let gates: Vec<_> =
        r.events("gate").iter().map(|g| (g["story_id"].clone(), g["passed"].clone())).collect();
    assert_eq!(
        gates,
        [
            (json!("US-001"), json!(true)),
            (json!("US-002"), json!(true)),
            (json!("US-003"), json!(true))
        ]
    );
    // Only the last story's run claims completion, and rightly.
    let claims: Vec<_> =
        r.events("iteration_end").iter().map(|e| e["claimed_complete"].clone()).collect();
    assert_eq!(claims, [json!(false), json!(false), json!(true)]);
    assert!(!r.stdout.contains("claimed COMPLETE but"), "{r:?}");

    // The repository: one feat commit per story, in order, nothing else.
    assert_eq!(
        l.git_log(),
        [
            "Initial commit",
            "Add the PRD",
            "Add the gate",
            "feat: US-001 - First",
            "feat: US-002 - Second",
            "feat: US-003 - Third"
        ]
    );
    for story in ["US-001", "US-002", "US-003"] {
        assert!(l.project.passes(story), "{story}");
        assert_eq!(l.project.read(&format!("{story}.txt")), format!("{story} done\n"));
        // Each commit holds its story's file and its prd.json change.
        let subject = format!("--grep=^feat: {story} ");
        let files = l.project.git(&["log", &subject, "--format=", "--name-only"]);
        assert!(files.lines().any(|f| f == format!("{story}.txt")), "{story}: {files}");
        assert!(files.lines().any(|f| f == "prd.json"), "{story}: {files}");
    }
    assert_eq!(l.project.git(&["branch", "--show-current"]).trim(), "ralph/claude-loop");
    assert_eq!(l.project.git(&["status", "--porcelain"]), "", "the work tree is clean");

    // ralph's logs: three iterations, each a complete, successful claude run.
    let logs = l.iteration_logs();
    assert_eq!(logs.len(), 3, "{logs:?}");
    let mut sessions = Vec::new();
    for log in &logs {
        let events = log_events(log);
        let init = events.iter().find(|e| e["type"] == "system" && e["subtype"] == "init");
        let result = events.iter().find(|e| e["type"] == "result");
        let result = result.unwrap_or_else(|| panic!("{log}: no result event"));
        assert_eq!(result["is_error"], false, "{log}: {result}");
        assert_eq!(result["num_turns"], 2, "{log}: {result}");
        let init = init.unwrap_or_else(|| panic!("{log}: no init event"));
        assert_eq!(init["permissionMode"], "bypassPermissions", "{log}");
        sessions.push(result["session_id"].as_str().unwrap().to_owned());
    }
    let sessions_in_order = sessions.clone();
    sessions.sort();
    sessions.dedup();
    assert_eq!(sessions.len(), 3, "one claude session per iteration: {sessions:?}");

    // The stub: three sessions of two model calls, each starting from the
    // prompt alone (a resumed session would carry earlier messages), each
    // from its own process (its own connection).
    let requests = l.stub.message_requests();
    assert_eq!(requests.len(), 6, "two model calls per story");
    let firsts = first_turns(&l.stub);
    let stories: Vec<_> = firsts
        .iter()
        .map(|r| Assignment::read(&r.prompt()).map(|a| a.story).unwrap_or_default())
        .collect();
    assert_eq!(stories, ["US-001", "US-002", "US-003"]);
    // Each handoff reached the next iteration's prompt.
    assert!(
        firsts[1].prompt().contains("Implemented US-001: US-001.txt"),
        "{}",
        firsts[1].prompt()
    );
    assert!(
        firsts[2].prompt().contains("Implemented US-002: US-002.txt"),
        "{}",
        firsts[2].prompt()
    );
    for first in &firsts {
        // A resumed session would also carry the earlier turns.
        let messages = first.json()["messages"].as_array().cloned().unwrap_or_default();
        let roles: Vec<_> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert!(!roles.contains(&"assistant"), "not a fresh session: {roles:?}");
        assert_eq!(roles.iter().filter(|r| **r == "user").count(), 1, "{roles:?}");
        assert!(first.prompt().starts_with("# Ralph iteration "), "{}", first.prompt());
    }
    let mut connections: Vec<_> = requests.iter().map(|r| r.connection).collect();
    connections.dedup();
    assert_eq!(connections.len(), 3, "one connection per claude process");
    // claude names its session in a header: three, one per story's two calls.
    let session_of = |r: &Request| r.header("x-claude-code-session-id").unwrap_or("").to_owned();
    let mut stub_sessions: Vec<_> = requests.iter().map(session_of).collect();
    assert!(stub_sessions.iter().all(|s| !s.is_empty()), "{stub_sessions:?}");
    stub_sessions.dedup();
    assert_eq!(stub_sessions, sessions_in_order, "the sessions ralph logged");
    l.assert_no_survivors();

    // claude kept its state where a person's is, through the sandbox.
    l.assert_state_in(&l.project.home().join(".claude"), &l.project.home().join(".claude.json"), 3);
}

/// A person who never ran claude has no `~/.claude.json`, and Landlock
/// cannot grant a file that does not exist: ralph makes it (`{}`, private)
/// before claude starts, so claude keeps its state through the sandbox.
#[test]
fn claude_loop_for_a_new_claude_user_keeps_claudes_state() {
    let Some(bin) = claude_bin_or_skip("claude_loop_for_a_new_claude_user") else {
        return;
    };
    let l = ClaudeLoop::new(bin, ONE_STORY, Script::new(implement));
    let record = l.project.home().join(".claude.json");
    std::fs::remove_file(&record).unwrap();
    l.project.write("check.sh", GATE);
    l.project.git(&["add", "-A"]);
    l.project.git(&["commit", "-q", "-m", "Add the gate"]);

    let r = l.run(&["3", "--gate", "sh check.sh"], &l.env());
    r.report("new user");
    assert_sandbox_on(&r.stdout);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    l.assert_state_in(&l.project.home().join(".claude"), &record, 1);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&record).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "private: {mode:o}");
}

/// `CLAUDE_CONFIG_DIR` outside the home moves all of claude's state there,
/// its `.claude.json` too: the sandbox lets it write there, and nothing is
/// made under `~/.claude` for it.
#[test]
fn claude_loop_with_its_state_moved_by_claude_config_dir_implements_a_story() {
    let Some(bin) = claude_bin_or_skip("claude_loop_with_its_state_moved") else {
        return;
    };
    let l = ClaudeLoop::new(bin, ONE_STORY, Script::new(implement));
    l.project.write("check.sh", GATE);
    l.project.git(&["add", "-A"]);
    l.project.git(&["commit", "-q", "-m", "Add the gate"]);
    let config = l.project.tmp.path().join("claude-config");
    std::fs::create_dir_all(&config).unwrap();

    let r = l.run(&["3", "--gate", "sh check.sh"], &l.stub.claude_env(&config));
    r.report("state moved");
    assert_sandbox_on(&r.stdout);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(l.project.passes("US-001"), "{r:?}");
    l.assert_state_in(&config, &config.join(".claude.json"), 1);
    let home = l.project.home();
    assert!(!home.join(".claude").exists(), "{r:?}");
    assert_eq!(std::fs::read_to_string(home.join(".claude.json")).unwrap(), USER_STATE);
}

// ---------------------------------------------------------------------------
// Faults

#[test]
fn claude_loop_auth_failure_stops_with_the_environment_code() {
    let Some(bin) = claude_bin_or_skip("claude_loop_auth_failure") else {
        return;
    };
    let l = ClaudeLoop::new(bin, PRD, Script::always(Reply::authentication_error()));
    let r = l.run(&["5"], &l.env());
    r.report("401");

    assert_eq!(r.code, code(exit::ENVIRONMENT), "{r:?}");
    assert_eq!(r.end()["outcome"], "environment", "{r:?}");
    assert!(r.message().starts_with("the agent could not authenticate: Invalid API key"), "{r:?}");
    let iterations = r.iterations();
    assert_eq!(iterations.len(), 1, "{r:?}");
    let (n, story, result, error) = &iterations[0];
    assert_eq!((*n, story.as_str(), result.as_str()), (1, "US-001", "failed"));
    assert!(
        error.as_deref().is_some_and(|e| e.starts_with("authentication failed: Invalid API key")),
        "{error:?}"
    );
    assert_eq!(l.stub.message_requests().len(), 1, "CLAUDE_CODE_MAX_RETRIES=0: one request");
    assert!(!l.project.passes("US-001"));
    l.assert_no_survivors();
}

/// A story whose build fails with the same compiler error in every
/// iteration stops the run with that error named.
#[test]
fn claude_loop_repeating_one_compiler_error_is_stopped_naming_it() {
    let Some(bin) = claude_bin_or_skip("claude_loop_repeating_one_error") else {
        return;
    };
    let script = Script::bash_then_text(|_| BashTurn {
        command: crate::real_cli::BUILD.into(),
        description: "Build".into(),
        final_text: "The build does not compile yet.".into(),
    });
    let l = ClaudeLoop::new(bin, ONE_STORY, script);
    crate::real_cli::add_failing_build(&l.project);
    let r = l.run(&["5", "--gate", crate::real_cli::BUILD], &l.env());
    r.report("same error");

    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert!(r.message().contains(crate::real_cli::SAME_ERROR), "{r:?}");
    l.assert_no_survivors();
}

/// A model call that never completes: ralph's idle timeout stops claude.
fn assert_idle_stop(name: &str, reply: Reply) {
    let Some(bin) = claude_bin_or_skip(name) else {
        return;
    };
    let l = ClaudeLoop::new(bin, ONE_STORY, Script::always(reply));
    // Long enough that a loaded machine's claude start-up (node, seconds of
    // silence before its first request) is not mistaken for the hang.
    let ralph = l.spawn(&["1", "--idle-timeout", "10s"], &l.env());
    assert!(l.stub.wait_for_message_requests(1, RUN_LIMIT), "claude never called the model");
    // While the call hangs: ralph and claude, both seen by the survivor scan.
    let ralph_pid = ralph.child.id() as i32;
    let during = l.survivors();
    let claude: Vec<i32> = during.iter().map(|(pid, _)| *pid).filter(|p| *p != ralph_pid).collect();
    assert!(during.iter().any(|(pid, _)| *pid == ralph_pid), "{during:?}");
    assert!(!claude.is_empty(), "no claude process found: {during:?}");
    let r = ralph.finish();
    r.report(name);

    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(r.end()["outcome"], "max_iterations", "{r:?}");
    assert!(r.message().starts_with("reached the iteration limit (1)"), "{r:?}");
    let iterations = r.iterations();
    assert_eq!(
        iterations,
        [(
            1,
            "US-001".to_owned(),
            "failed".to_owned(),
            Some("stopped: no output for the idle timeout".to_owned())
        )],
        "{r:?}"
    );
    assert!(r.elapsed >= Duration::from_secs(10), "{r:?}");
    assert_eq!(l.stub.message_requests().len(), 1);
    assert!(!l.project.passes("US-001"));
    assert!(claude.iter().all(|pid| !alive(*pid)), "claude {claude:?} outlived ralph");
    l.assert_no_survivors();
}

#[test]
fn claude_loop_hung_request_is_stopped_by_the_idle_timeout() {
    assert_idle_stop("claude_loop_hang", Reply::hang());
}

#[test]
fn claude_loop_stalled_stream_is_stopped_by_the_idle_timeout() {
    assert_idle_stop("claude_loop_stall", Reply::stall());
}

/// What the usage-limit script saw: the reset time it answered with, and
/// when each claude session made its first call (epoch seconds).
#[derive(Debug, Default)]
struct Limited {
    resets_at: Option<u64>,
    sessions: Vec<u64>,
}

/// The subscriber usage limit on the first call of the run, resetting
/// `reset_in` seconds after that call (counted from the call, so a slow
/// claude start cannot put the reset in the past); the story's
/// implementation on every later call.
fn usage_limit_then_implement(reset_in: u64, seen: Arc<Mutex<Limited>>) -> Script {
    let calls = AtomicUsize::new(0);
    Script::new(move |request| {
        let now = epoch_now();
        let mut seen = seen.lock().unwrap();
        if request.tool_result().is_none() {
            seen.sessions.push(now);
        }
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            let resets_at = now + reset_in;
            seen.resets_at = Some(resets_at);
            Reply::usage_limit(resets_at, "five_hour")
        } else {
            implement(request)
        }
    })
}

#[test]
fn claude_loop_usage_limit_is_waited_out_without_counting_the_iteration() {
    let Some(bin) = claude_bin_or_skip("claude_loop_usage_limit") else {
        return;
    };
    let seen = Arc::new(Mutex::new(Limited::default()));
    let l = ClaudeLoop::new(bin, ONE_STORY, usage_limit_then_implement(3, Arc::clone(&seen)));
    // Default retries: a subscriber's usage limit is never retried anyway.
    // One iteration: the run can only complete if the limited one is not
    // counted.
    let r = l.run(&["1"], &l.env().oauth().max_retries(None));
    r.report("usage limit");

    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(r.end()["outcome"], "complete", "{r:?}");
    assert_eq!(r.end()["iterations"], 1, "{r:?}");
    let iterations = r.iterations();
    assert_eq!(iterations.len(), 2, "{r:?}");
    let (n, _, result, error) = &iterations[0];
    assert_eq!((*n, result.as_str()), (1, "transient"), "{r:?}");
    let error = error.as_deref().unwrap_or_default();
    assert!(error.starts_with("usage limit: You've hit your 5-hour limit"), "{r:?}");
    assert_eq!((iterations[1].0, iterations[1].2.as_str()), (1, "progress"), "{r:?}");

    // ralph waited for the reset time claude reported (plus its guard).
    let waiting = r.events("waiting");
    assert_eq!(waiting.len(), 1, "{r:?}");
    assert_eq!(waiting[0]["reason"], "the agent's usage limit", "{r:?}");
    let until = chrono::DateTime::parse_from_rfc3339(waiting[0]["until"].as_str().unwrap())
        .unwrap()
        .timestamp();
    let seen = seen.lock().unwrap();
    let resets_at = seen.resets_at.expect("the stub sent the usage limit");
    assert_eq!(until, resets_at as i64 + 2, "reset time + 2 s guard: {r:?}");
    assert!(r.events("circuit").is_empty(), "a usage limit is not a failure: {r:?}");

    let requests = l.stub.message_requests();
    assert_eq!(requests.len(), 3, "the limited call, then the story's two");
    assert!(requests.iter().all(|r| r.header("authorization") == Some("Bearer stub-oauth-token")));
    assert_eq!(seen.sessions.len(), 2, "{seen:?}");
    assert!(seen.sessions[1] >= resets_at + 2, "called again before the reset: {seen:?}");
    assert!(l.project.passes("US-001"));
    assert_eq!(l.git_log().last().map(String::as_str), Some("feat: US-001 - First"));
    l.assert_no_survivors();
}

#[test]
fn claude_loop_usage_limit_with_no_wait_stops_with_the_rate_limit_code() {
    let Some(bin) = claude_bin_or_skip("claude_loop_usage_limit_no_wait") else {
        return;
    };
    let seen = Arc::new(Mutex::new(Limited::default()));
    let l = ClaudeLoop::new(bin, ONE_STORY, usage_limit_then_implement(2 * 3600, seen));
    let r = l.run(&["5", "--no-wait"], &l.env().oauth());
    r.report("usage limit, --no-wait");

    assert_eq!(r.code, code(exit::RATE_LIMITED), "{r:?}");
    assert_eq!(r.end()["outcome"], "rate_limited", "{r:?}");
    assert_eq!(r.end()["iterations"], 0, "the limited iteration is not counted: {r:?}");
    assert!(r.message().starts_with("the agent's usage limit until "), "{r:?}");
    assert!(r.message().contains("not waiting (--no-wait)"), "{r:?}");
    let iterations = r.iterations();
    assert_eq!(iterations.len(), 1, "{r:?}");
    assert_eq!(iterations[0].2, "transient", "{r:?}");
    assert!(r.events("waiting").is_empty(), "{r:?}");
    assert_eq!(l.stub.message_requests().len(), 1);
    l.assert_no_survivors();
}

/// A transient API error (429 with an API key, 529): ralph does not count
/// the iteration and backs off 30 s. The test does not wait that out: it
/// stops ralph with SIGTERM once ralph says it is waiting.
fn assert_backs_off(name: &str, reply: Reply, error: &str) {
    let Some(bin) = claude_bin_or_skip(name) else {
        return;
    };
    let l = ClaudeLoop::new(bin, ONE_STORY, Script::always(reply));
    let mut ralph = l.spawn(&["5"], &l.env());
    let waiting = ralph.wait_for(Duration::from_secs(60), |e| e["event"] == "waiting");
    let reason = waiting["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(&format!("backing off after a transient API error: {error}")),
        "{waiting}"
    );
    assert!((29..=31).contains(&waiting["seconds"].as_u64().unwrap()), "{waiting}");
    // Backing off, ralph has no agent running: only ralph has the stub's URL.
    let pids: Vec<i32> = l.survivors().iter().map(|(pid, _)| *pid).collect();
    assert_eq!(pids, [ralph.child.id() as i32], "{:?}", l.survivors());
    ralph.signal(libc::SIGTERM);
    let r = ralph.finish();
    r.report(name);

    assert_eq!(r.code, code(exit::TERMINATED), "{r:?}");
    assert_eq!(r.end()["outcome"], "interrupted", "{r:?}");
    assert_eq!(r.end()["iterations"], 0, "a transient failure is not counted: {r:?}");
    assert!(r.elapsed < Duration::from_secs(25), "the backoff was not waited out: {r:?}");
    let iterations = r.iterations();
    assert_eq!(iterations.len(), 1, "{r:?}");
    assert_eq!(iterations[0].2, "transient", "{r:?}");
    assert!(r.events("circuit").is_empty(), "not a failure: {r:?}");
    assert_eq!(l.stub.message_requests().len(), 1);
    l.assert_no_survivors();
}

#[test]
fn claude_loop_overloaded_api_backs_off() {
    assert_backs_off("claude_loop_529", Reply::overloaded(), "API Error: 529 Overloaded");
}

#[test]
fn claude_loop_rate_limited_api_key_backs_off() {
    assert_backs_off(
        "claude_loop_429",
        Reply::rate_limit_error(),
        "API Error: Request rejected (429)",
    );
}

#[test]
fn claude_loop_permission_denials_open_the_breaker_in_safe_mode() {
    let Some(bin) = claude_bin_or_skip("claude_loop_permission_denials") else {
        return;
    };
    // The model insists on a command ralph's safe-mode allowlist lacks.
    let script = Script::new(|request| {
        let task = Assignment::read(&request.prompt()).expect("ralph's prompt names the story");
        match request.tool_result() {
            None => Reply::bash(
                &format!(
                    "perl -e 'open(my $f, \">\", \"{0}.txt\"); print $f \"{0} done\\n\"'",
                    task.story
                ),
                &format!("Implement {}", task.story),
            ),
            Some(_) => implement(request),
        }
    });
    let l = ClaudeLoop::new(bin, PRD, script);
    let r = l.run(&["5", "--safe"], &l.env());
    r.report("permission denials");

    assert_eq!(r.code, code(exit::CIRCUIT_OPEN), "{r:?}");
    assert_eq!(r.end()["outcome"], "circuit_open", "{r:?}");
    assert!(r.message().starts_with("the circuit breaker opened"), "{r:?}");
    let circuit = r.events("circuit");
    let last = circuit.last().unwrap_or_else(|| panic!("no circuit event\n{r:?}"));
    assert_eq!(last["to"], "OPEN", "{r:?}");
    assert_eq!(last["reason"], "permission denied in 2 iterations in a row", "{r:?}");
    assert_eq!(r.iterations().len(), 2, "{r:?}");
    assert!(r.iterations().iter().all(|(_, s, _, _)| s == "US-001"), "{r:?}");
    // Each iteration's end names the denial, not the handoff it kept from writing.
    for end in r.events("iteration_end") {
        let error = end["error"].as_str().unwrap_or_default();
        assert!(error.starts_with("permission denied: Bash(perl -e"), "{end}");
    }
    // claude ran without the bypass flag and denied the command.
    for log in l.iteration_logs() {
        let events = log_events(&log);
        let init = events.iter().find(|e| e["type"] == "system").expect("init event");
        assert_eq!(init["permissionMode"], "acceptEdits", "{log}");
        let result = events.iter().find(|e| e["type"] == "result").expect("result event");
        assert_eq!(result["is_error"], false, "{result}");
        let denials = result["permission_denials"].as_array().unwrap();
        assert_eq!(denials.len(), 1, "{result}");
        assert_eq!(denials[0]["tool_name"], "Bash", "{result}");
        let command = denials[0]["tool_input"]["command"].as_str().unwrap_or_default();
        assert!(command.starts_with("perl -e"), "{result}");
    }
    let results: Vec<_> =
        l.stub.message_requests().iter().filter_map(Request::tool_result).collect();
    assert_eq!(results.len(), 2, "{results:?}");
    for result in results {
        assert!(result.is_error, "{result:?}");
        assert_eq!(result.content, "This command requires approval");
    }
    assert!(!l.project.path("US-001.txt").exists());
    assert!(!l.project.passes("US-001"));
    l.assert_no_survivors();
}

/// The gamer: a model that makes the gate pass by deleting the test that
/// fails (and says it is done). ralph's gate is Python's own unittest, whose
/// summary counts the tests: one vanished, so ralph refuses the story.
fn delete_the_failing_test(request: &Request) -> Reply {
    let Some(task) = Assignment::read(&request.prompt()) else {
        return Reply::text("I cannot tell which story to work on.");
    };
    let Assignment { story, prd, .. } = &task;
    let command = format!(
        "set -e\n\
         printf 'import unittest\\nfrom calc import add\\n\\n\\nclass TestCalc(unittest.TestCase):\\n    def test_add(self):\\n        self.assertEqual(add(1, 2), 3)\\n' > tests/test_calc.py\n\
         python3 - <<'PY'\n\
         import json\n\
         path = {prd}\n\
         prd = json.load(open(path))\n\
         for s in prd['userStories']:\n    s['passes'] = s['passes'] or s['id'] == {story_json}\n\
         json.dump(prd, open(path, 'w'), indent=2)\n\
         PY\n\
         git add -A\n\
         git commit -q -m 'feat: {story} - tests pass'\n",
        prd = json!(prd),
        story_json = json!(story),
    );
    match request.tool_result() {
        None => Reply::bash(&command, "Make the tests pass"),
        Some(_) => Reply::text(&task.final_text()),
    }
}

#[test]
fn claude_loop_a_gamer_that_deletes_the_failing_test_is_refused() {
    let Some(bin) = claude_bin_or_skip("claude_loop_a_gamer_that_deletes_the_failing_test") else {
        return;
    };
    let l = ClaudeLoop::new(bin, ONE_STORY, Script::new(delete_the_failing_test));
    let p = &l.project;
    p.write("calc.py", "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n");
    p.write(
        "tests/test_calc.py",
        "import unittest\nfrom calc import add, div\n\n\nclass TestCalc(unittest.TestCase):\n    \
         def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n    \
         def test_div_by_zero(self):\n        self.assertIsNone(div(1, 0))\n",
    );
    p.write("tests/__init__.py", "");
    p.write(".gitignore", "__pycache__/\n");
    p.write(
        ".ralph/config.toml",
        "[gate]\ncommand = \"python3 -m unittest discover -s tests -t .\"\n",
    );
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "calc, its tests, and the gate"]);
    let r = l.run(&["1"], &l.env());
    r.report("gamer");

    let iterations = r.iterations();
    assert_eq!(iterations.len(), 1, "{r:?}");
    assert_eq!(iterations[0].2, "tampered", "{r:?}");
    let end = r.end();
    let story = &end["report"][0];
    assert_eq!(
        (story["claimed"].as_bool(), story["verified"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(story["tests_before"]["passed"], 1, "{story}");
    assert_eq!(story["tests_before"]["failed"], 1, "{story}");
    assert_eq!(story["tests_after"]["passed"], 1, "{story}");
    assert!(
        story["refused"][0].as_str().is_some_and(|s| s.contains("2 tests ran before, 1 now")),
        "{story}"
    );
    assert!(
        story["test_flags"][0]
            .as_str()
            .is_some_and(|s| s.contains("tests/test_calc.py:9: test test_div_by_zero deleted")),
        "{story}"
    );
    assert!(!p.passes("US-001"));
    l.assert_no_survivors();
}

/// With the sandbox on (the default), a Bash call of claude's that reads a
/// key and writes the home is denied; claude's own output carries the
/// denial, and ralph names it on the iteration and in a `sandbox_denied`
/// event.
#[test]
fn claude_loop_a_denial_by_the_sandbox_is_seen_through_claudes_output() {
    let Some(bin) = claude_bin_or_skip("claude_loop_a_denial_by_the_sandbox") else {
        return;
    };
    let l = ClaudeLoop::new(
        bin,
        PRD,
        Script::bash_then_text(|_| BashTurn {
            command: "cat ~/.ssh/id_ed25519; touch ~/escaped; true".into(),
            description: "Look around".into(),
            final_text: "Looked around.".into(),
        }),
    );
    let home = l.project.home();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY-MATERIAL\n").unwrap();
    let r = l.run(&["1"], &l.env());
    r.report("sandbox denial");
    assert!(!home.join("escaped").exists(), "{r:?}");
    let denied: Vec<String> = r
        .events("sandbox_denied")
        .iter()
        .flat_map(|e| e["denials"].as_array().cloned().unwrap_or_default())
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect();
    let key = format!("sandbox denied {}/.ssh/id_ed25519", home.display());
    assert!(denied.contains(&key), "{denied:?} {r:?}");
    let iteration = &r.events("iteration_end")[0];
    assert!(iteration["error"].as_str().unwrap_or("").contains(&key), "{r:?}");
    assert!(!format!("{r:?}").contains("PRIVATE-KEY-MATERIAL"));
}
