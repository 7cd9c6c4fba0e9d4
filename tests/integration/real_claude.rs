//! The real claude CLI against the stub, without ralph: proves the stub
//! speaks enough of the API for claude to run a tool and finish a turn, and
//! pins what each API fault looks like in claude's stream-json output, which
//! is what ralph has to classify.
//!
//! Each test skips, saying so on stderr, when the CLI is not installed
//! (`.ci/install-claude.sh`); `RALPH_REQUIRE_CLAUDE=1` turns that into a
//! failure.

use std::env;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tempfile::TempDir;

use crate::claude_stub::{BashTurn, ClaudeEnv, Reply, Script, Stub, claude_bin_or_skip};

/// How ralph runs claude: prompt on stdin, one JSON event per line.
const CLAUDE_ARGS: &[&str] =
    &["-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"];

/// Generous for a 400 MB binary starting on a busy CI machine; a healthy run
/// takes 1–3 s.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A fault with `CLAUDE_CODE_MAX_RETRIES=0` (or one claude never retries)
/// ends in about a second; claude's default backoff takes about three
/// minutes, so anything under this bound proves the retries were skipped.
const FAULT_BOUND: Duration = Duration::from_secs(30);

/// A temp dir with a git repo for claude to work in, a `HOME` and a
/// `CLAUDE_CONFIG_DIR`, so nothing touches the real ones.
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let sandbox = Sandbox { dir: tempfile::tempdir().expect("temp dir") };
        for dir in [sandbox.repo(), sandbox.home(), sandbox.config_dir()] {
            std::fs::create_dir_all(dir).expect("sandbox dirs");
        }
        sandbox.git(&["init", "-q", "-b", "main"]);
        sandbox.git(&["config", "user.name", "Stub Model"]);
        sandbox.git(&["config", "user.email", "stub@example.invalid"]);
        sandbox.git(&["config", "commit.gpgsign", "false"]);
        sandbox.git(&["commit", "-q", "--allow-empty", "-m", "Initial commit"]);
        sandbox
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn config_dir(&self) -> PathBuf {
        self.dir.path().join("claude-config")
    }

    fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(self.repo())
            .env("HOME", self.home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("run git");
        assert!(output.status.success(), "git {args:?}: {output:?}");
        String::from_utf8(output.stdout).expect("git output is UTF-8")
    }
}

/// A claude process in its own process group, its output read on threads so
/// it never blocks on a full pipe.
struct Claude {
    child: Child,
    started: Instant,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl Claude {
    fn spawn(bin: &Path, env: &ClaudeEnv, sandbox: &Sandbox, prompt: &str) -> Claude {
        let mut command = Command::new(bin);
        command
            .args(CLAUDE_ARGS)
            .current_dir(sandbox.repo())
            .env_clear()
            .env("PATH", env::var_os("PATH").unwrap_or_default())
            .env("HOME", sandbox.home())
            .env("TZ", "UTC")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        env.apply(&mut command);
        let started = Instant::now();
        let mut child = command.spawn().unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let mut stdin = child.stdin.take().expect("stdin is piped");
        stdin.write_all(prompt.as_bytes()).expect("write the prompt");
        drop(stdin);
        let stdout = read_to_end(child.stdout.take().expect("stdout is piped"));
        let stderr = read_to_end(child.stderr.take().expect("stderr is piped"));
        Claude { child, started, stdout, stderr }
    }

    /// Waits up to `timeout` for claude to exit, then kills its process
    /// group, and checks that no member of the group is left behind.
    fn finish(mut self, timeout: Duration) -> Run {
        let pgid = i32::try_from(self.child.id()).expect("pid fits in i32");
        let deadline = Instant::now() + timeout;
        let mut killed = false;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for claude") {
                break status;
            }
            if Instant::now() >= deadline {
                kill_group(pgid);
                killed = true;
                break self.child.wait().expect("wait for killed claude");
            }
            thread::sleep(Duration::from_millis(20));
        };
        let elapsed = self.started.elapsed();
        if killed {
            // Our kill took the whole group; wait for the kernel to finish.
            assert!(group_is_gone(pgid), "claude's process group {pgid} outlived SIGKILL");
        } else {
            // Anything claude left in its group would be an orphan.
            let leftovers = !group_is_gone(pgid);
            kill_group(pgid);
            assert!(!leftovers, "claude exited but left processes in its group {pgid}");
        }
        let stdout = self.stdout.join().expect("stdout reader");
        let stderr = self.stderr.join().expect("stderr reader");
        let events = stdout
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
            })
            .collect();
        Run { status, killed, elapsed, stdout, stderr, events }
    }
}

fn read_to_end(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn kill_group(pgid: i32) {
    // SAFETY: kill(2) takes no pointers; a negative pid names the process
    // group we created with process_group(0), which holds only claude and
    // what it started.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

fn group_is_gone(pgid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        // SAFETY: signal 0 only checks whether the group still exists.
        let alive = unsafe { libc::kill(-pgid, 0) } == 0;
        if !alive {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// What one claude process did.
struct Run {
    status: ExitStatus,
    killed: bool,
    elapsed: Duration,
    stdout: String,
    stderr: String,
    events: Vec<Value>,
}

impl Run {
    fn events_of(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == kind).collect()
    }

    /// The final `result` event, which every finished run must have.
    #[track_caller]
    fn result(&self) -> &Value {
        let results = self.events_of("result");
        assert_eq!(results.len(), 1, "expected one result event\n{}", self.dump());
        results[0]
    }

    fn dump(&self) -> String {
        format!(
            "status: {:?}, killed: {}, elapsed: {:?}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.killed, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Prints what the run produced, for the record and for debugging.
    fn report(&self, name: &str) {
        let result = self.events_of("result");
        let summary = result.first().map(|r| {
            serde_json::json!({
                "subtype": r["subtype"], "is_error": r["is_error"],
                "api_error_status": r["api_error_status"], "num_turns": r["num_turns"],
                "result": r["result"],
            })
        });
        eprintln!(
            "{name}: exit {:?}, killed {}, {:.1}s, events {:?}, result {}",
            self.status.code(),
            self.killed,
            self.elapsed.as_secs_f64(),
            self.events.iter().map(|e| e["type"].as_str().unwrap_or("?")).collect::<Vec<_>>(),
            summary.map_or_else(|| "none".to_owned(), |s| s.to_string()),
        );
    }
}

/// The first `US-<digits>` in `text`: how a script tells which story the
/// prompt asks for.
fn story_id(text: &str) -> Option<String> {
    text.match_indices("US-").find_map(|(at, _)| {
        let digits: String = text[at + 3..].chars().take_while(char::is_ascii_digit).collect();
        (!digits.is_empty()).then(|| format!("US-{digits}"))
    })
}

/// What a model that finished a story would say.
fn final_text(story: &str) -> String {
    format!(
        "Implemented {story}.\n\n---RALPH_STATUS---\nSTATUS: COMPLETE\n\
         TASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 1\nTESTS_STATUS: NOT_RUN\n\
         WORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: false\n\
         RECOMMENDATION: continue with the next story\n---END_RALPH_STATUS---"
    )
}

/// A model that implements whichever story the prompt names: one Bash call
/// that writes `<story>.txt` and commits it, then the status report.
fn story_script() -> Script {
    Script::bash_then_text(|request| {
        let story = story_id(&request.prompt()).unwrap_or_else(|| "US-???".to_owned());
        BashTurn {
            command: format!(
                "printf '%s\\n' '{story} done' > {story}.txt && git add {story}.txt \
                 && git commit -q -m 'feat: {story} add {story}.txt'"
            ),
            description: format!("Implement and commit {story}"),
            final_text: final_text(&story),
        }
    })
}

#[track_caller]
fn assert_success(run: &Run, story: &str) {
    let result = run.result();
    assert_eq!(run.status.code(), Some(0), "{}", run.dump());
    assert_eq!(result["subtype"], "success", "{}", run.dump());
    assert_eq!(result["is_error"], false, "{}", run.dump());
    assert_eq!(result["num_turns"], 2, "{}", run.dump());
    assert_eq!(result["result"], final_text(story).as_str(), "{}", run.dump());
    assert!(result["result"].as_str().unwrap().contains("---RALPH_STATUS---"));
}

#[test]
fn real_claude_runs_the_scripted_bash_call_and_reports_the_scripted_text() {
    let Some(bin) = claude_bin_or_skip("real_claude_runs_the_scripted_bash_call") else {
        return;
    };
    let stub = Stub::start(story_script());
    let sandbox = Sandbox::new();
    let env = stub.claude_env(&sandbox.config_dir());

    let run = Claude::spawn(&bin, &env, &sandbox, "Implement US-001 from prd.json.\n")
        .finish(RUN_TIMEOUT);
    run.report("bash call");

    assert_success(&run, "US-001");
    assert_eq!(
        std::fs::read_to_string(sandbox.repo().join("US-001.txt")).unwrap(),
        "US-001 done\n"
    );
    assert_eq!(sandbox.git(&["log", "-1", "--format=%s"]).trim(), "feat: US-001 add US-001.txt");
    assert_eq!(sandbox.git(&["status", "--porcelain"]), "");

    let requests = stub.message_requests();
    assert_eq!(requests.len(), 2, "one request per model turn");
    assert_eq!(stub.requests().len(), 2, "and no other calls (no preflight, telemetry)");
    assert_eq!(requests[0].prompt().trim(), "Implement US-001 from prd.json.");
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-stub-key"));
    assert!(requests.iter().all(|r| r.is_streaming()));
    let tool_result = requests[1].tool_result().expect("second turn carries the tool result");
    assert!(!tool_result.is_error, "{tool_result:?}");
    // The tool's result also shows up in the stream as a `user` event.
    assert!(
        run.events_of("user").iter().any(|e| e["message"]["content"][0]["type"] == "tool_result")
    );
}

#[test]
fn real_claude_scripted_by_story_id_commits_one_story_per_run() {
    let Some(bin) = claude_bin_or_skip("real_claude_scripted_by_story_id") else {
        return;
    };
    let stub = Stub::start(story_script());
    let sandbox = Sandbox::new();
    let env = stub.claude_env(&sandbox.config_dir());

    for story in ["US-001", "US-002"] {
        let prompt = format!("Work on story {story} and commit it.\n");
        let run = Claude::spawn(&bin, &env, &sandbox, &prompt).finish(RUN_TIMEOUT);
        run.report(story);
        assert_success(&run, story);
    }

    assert_eq!(
        sandbox.git(&["log", "--format=%s"]),
        "feat: US-002 add US-002.txt\nfeat: US-001 add US-001.txt\nInitial commit\n"
    );
    assert_eq!(stub.message_requests().len(), 4);
}

/// Runs claude once against a stub that gives every model call `reply`.
fn run_fault(bin: &Path, reply: Reply, env: impl Fn(ClaudeEnv) -> ClaudeEnv) -> (Run, Stub) {
    let stub = Stub::start(Script::always(reply));
    let sandbox = Sandbox::new();
    let env = env(stub.claude_env(&sandbox.config_dir()));
    let run = Claude::spawn(bin, &env, &sandbox, "Implement US-001.\n").finish(RUN_TIMEOUT);
    (run, stub)
}

/// Every API fault ends the same way: exit 1, a `result` that says
/// `subtype: success` but `is_error: true`, the HTTP status, and a synthetic
/// assistant message carrying an error kind.
#[track_caller]
fn assert_api_error(run: &Run, status: u16, assistant_error: &str, text_prefix: &str) {
    let result = run.result();
    assert_eq!(run.status.code(), Some(1), "{}", run.dump());
    assert_eq!(result["subtype"], "success", "{}", run.dump());
    assert_eq!(result["is_error"], true, "{}", run.dump());
    assert_eq!(result["api_error_status"], status, "{}", run.dump());
    let text = result["result"].as_str().unwrap_or_default();
    assert!(text.starts_with(text_prefix), "result text: {text}");
    let assistant = run.events_of("assistant");
    assert!(
        assistant.iter().any(|e| e["error"] == assistant_error),
        "no assistant event with error {assistant_error}\n{}",
        run.dump()
    );
    assert!(run.elapsed < FAULT_BOUND, "took {:?}", run.elapsed);
    assert_eq!(run.stderr, "", "claude reports API faults on stdout only");
}

#[test]
fn real_claude_401_is_an_error_result_with_status_401() {
    let Some(bin) = claude_bin_or_skip("real_claude_401") else {
        return;
    };
    let (run, stub) = run_fault(&bin, Reply::authentication_error(), |env| env);
    run.report("401");
    assert_api_error(&run, 401, "authentication_failed", "Invalid API key");
    assert_eq!(stub.message_requests().len(), 1);
}

#[test]
fn real_claude_429_with_an_api_key_is_an_error_result_with_status_429() {
    let Some(bin) = claude_bin_or_skip("real_claude_429") else {
        return;
    };
    let (run, stub) = run_fault(&bin, Reply::rate_limit_error(), |env| env);
    run.report("429");
    assert_api_error(&run, 429, "rate_limit", "API Error: Request rejected (429)");
    assert!(
        run.result()["result"]
            .as_str()
            .unwrap()
            .contains("This request would exceed your account's rate limit"),
        "the body's message is quoted"
    );
    assert!(run.events_of("rate_limit_event").is_empty());
    assert_eq!(stub.message_requests().len(), 1);
}

#[test]
fn real_claude_529_is_an_error_result_with_status_529() {
    let Some(bin) = claude_bin_or_skip("real_claude_529") else {
        return;
    };
    let (run, stub) = run_fault(&bin, Reply::overloaded(), |env| env);
    run.report("529");
    assert_api_error(&run, 529, "server_error", "API Error: 529 Overloaded");
    assert_eq!(stub.message_requests().len(), 1);
}

#[test]
fn real_claude_usage_limit_with_oauth_is_a_rejected_rate_limit_event() {
    let Some(bin) = claude_bin_or_skip("real_claude_usage_limit") else {
        return;
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let resets_at = now + 2 * 3600;
    // Claude's default retries stay on: a subscriber's 429 must not be
    // retried at all, which the single request and the short run prove.
    let (run, stub) = run_fault(&bin, Reply::usage_limit(resets_at, "five_hour"), |env| {
        env.oauth().max_retries(None)
    });
    run.report("usage limit");

    // claude 2.1.197 said "session limit"; 2.1.332 names the window.
    assert_api_error(&run, 429, "rate_limit", "You've hit your 5-hour limit · resets ");
    assert!(run.result()["result"].as_str().unwrap().ends_with("(UTC)"), "TZ=UTC");
    let limits = run.events_of("rate_limit_event");
    let rejected = limits
        .iter()
        .find(|e| e["rate_limit_info"]["status"] == "rejected")
        .unwrap_or_else(|| panic!("no rejected rate_limit_event\n{}", run.dump()));
    eprintln!("usage limit: {rejected}");
    assert_eq!(rejected["rate_limit_info"]["resetsAt"], resets_at);
    assert_eq!(rejected["rate_limit_info"]["rateLimitType"], "five_hour");
    let requests = stub.message_requests();
    assert_eq!(requests.len(), 1, "a subscriber's usage limit is never retried");
    assert_eq!(requests[0].header("authorization"), Some("Bearer stub-oauth-token"));
}

/// A model call that never completes: claude just waits (its request
/// timeout is 600 s), so a driver needs its own watchdog.
fn assert_waits_forever(bin: &Path, reply: Reply, name: &str) {
    let stub = Stub::start(Script::always(reply));
    let sandbox = Sandbox::new();
    let env = stub.claude_env(&sandbox.config_dir());
    let claude = Claude::spawn(bin, &env, &sandbox, "Implement US-001.\n");
    assert!(stub.wait_for_message_requests(1, RUN_TIMEOUT), "claude never called the model");
    let asked_at = claude.started.elapsed();
    thread::sleep(Duration::from_secs(3));
    let run = claude.finish(Duration::ZERO);
    run.report(name);

    assert!(run.killed, "claude gave up by itself\n{}", run.dump());
    assert!(run.elapsed >= asked_at + Duration::from_secs(3));
    assert!(run.events_of("result").is_empty(), "{}", run.dump());
    assert!(run.events_of("assistant").is_empty(), "{}", run.dump());
    assert_eq!(stub.message_requests().len(), 1);
}

#[test]
fn real_claude_waits_on_a_hung_request_until_killed() {
    let Some(bin) = claude_bin_or_skip("real_claude_hang") else {
        return;
    };
    assert_waits_forever(&bin, Reply::hang(), "hang");
}

#[test]
fn real_claude_waits_on_a_stalled_stream_until_killed() {
    let Some(bin) = claude_bin_or_skip("real_claude_stall") else {
        return;
    };
    assert_waits_forever(&bin, Reply::stall(), "stall");
}

#[test]
fn story_id_finds_the_first_story() {
    assert_eq!(story_id("do US-002 then US-003"), Some("US-002".to_owned()));
    assert_eq!(story_id("US-"), None);
    assert_eq!(story_id("no story"), None);
}
