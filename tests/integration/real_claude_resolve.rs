//! The resolver run once for real: `ralph 6 --jobs 2 --tool claude` on two
//! stories that rewrite the same line of one file, every agent the real
//! claude CLI talking to the scripted API stand-in ([`crate::claude_stub`]).
//!
//! The scripted model reads ralph's prompts the way a model would. A story's
//! turn (`# Ralph iteration …`) rewrites the shared line with one Bash call,
//! marks its story passing, writes its handoff and commits. The two stories'
//! first model calls wait for each other, so both start from the same tip
//! and the second to reach the merge queue conflicts. The resolver's turn
//! (`# Merge two stories' work …`) reads the conflicted file with claude's
//! `Read` tool, keeps both sides, and writes it back with `Write`: ralph
//! judges what is left, commits the merge and gates it on the merged tree,
//! where the gate demands every passing story's line.
//!
//! Skips (saying so on stderr) when the claude CLI is not installed;
//! `RALPH_REQUIRE_CLAUDE=1` turns that into a failure.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::claude_stub::{Reply, Request, Script, Stub, claude_bin_or_skip};
use crate::harness::{Project, code, eventually, exit, files_under};

/// A hard bound on the run, far above a healthy one (three claude runs, two
/// of them at once, and four gates): a hang fails the test, not the suite.
const RUN_LIMIT: Duration = Duration::from_secs(600);

/// How long a story's first model call waits for the other story's. Both
/// start in the run's first pass; only a starved machine is this slow.
const MEETING_LIMIT: Duration = Duration::from_secs(180);

/// Two independent stories, neither declaring what it touches: they run
/// side by side.
const PRD: &str = r#"{
  "project": "Claude resolve",
  "branchName": "ralph/claude-resolve",
  "description": "a real claude resolves two stories' conflict",
  "userStories": [
    {"id": "US-001", "title": "One", "description": "Put US-001 on the shared line.", "acceptanceCriteria": ["shared.txt has the line from US-001"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Two", "description": "Put US-002 on the shared line.", "acceptanceCriteria": ["shared.txt has the line from US-002"], "priority": 2, "passes": false, "notes": ""}
  ]
}
"#;

/// The line both stories rewrite, between two lines neither touches.
const SHARED: &str = "# shared\nbase line\n# end\n";

/// The gate: no conflict marker, and every story marked passing has its
/// line. On the merged tree both pass, so a resolution that dropped a side
/// fails here.
const GATE: &str = r#"set -e
if grep -nE '^(<<<<<<<|=======|>>>>>>>|\|\|\|\|\|\|\|)' shared.txt; then echo "FAIL: conflict markers"; exit 1; fi
for id in $(python3 -c 'import json; print(" ".join(s["id"] for s in json.load(open("prd.json"))["userStories"] if s["passes"]))'); do
    grep -qx "from $id" shared.txt || { echo "FAIL: $id is marked passing but shared.txt lacks its line"; exit 1; }
done
echo "gate ok"
"#;

/// The heading of ralph's resolver prompt.
const RESOLVE_HEADING: &str = "# Merge two stories' work";

// ---------------------------------------------------------------------------
// The scripted model

/// A story's assignment, read from ralph's iteration prompt: the story from
/// the heading (`# Ralph iteration N of M: story US-00X`), its title from
/// the story's JSON block, and the files named in backticks.
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

    /// Puts the story on the shared line, marks it passing, writes the
    /// handoff and commits, as ralph's prompt asks.
    fn implement_command(&self) -> String {
        let Assignment { story, title, prd, handoff } = self;
        let note = json!({
            "status": "complete",
            "summary": format!("Implemented {story}: its line in shared.txt"),
            "evidence": [format!("grep -x 'from {story}' shared.txt passes")],
            "nextSteps": [],
            "blocker": "",
        });
        // Each step checked: claude's Bash tool runs the command in a way
        // `set -e` does not stop.
        format!(
            "sed -i 's/^base line$/from {story}/' shared.txt || exit 1\n\
             grep -qx 'from {story}' shared.txt || {{ echo 'no base line to rewrite'; exit 1; }}\n\
             python3 - <<'PY' || exit 1\n\
             import json\n\
             path = {prd}\n\
             with open(path) as f:\n    prd = json.load(f)\n\
             for s in prd['userStories']:\n    if s['id'] == {story_json}:\n        s['passes'] = True\n\
             with open(path, 'w') as f:\n    json.dump(prd, f, indent=2)\n    f.write('\\n')\n\
             PY\n\
             cat > {handoff_q} <<'JSON' || exit 1\n{note}\nJSON\n\
             git add -A && git commit -q -m 'feat: {story} - {title}'\n",
            prd = json!(prd),
            story_json = json!(story),
            handoff_q = shell_quote(handoff),
        )
    }

    fn final_text(&self) -> String {
        status_text(&format!("Implemented {} and committed it.", self.story), "COMPLETE")
    }
}

/// A model's last words with ralph's status block.
fn status_text(summary: &str, status: &str) -> String {
    format!(
        "{summary}\n\n---RALPH_STATUS---\nSTATUS: {status}\nTASKS_COMPLETED_THIS_LOOP: 1\n\
         FILES_MODIFIED: 1\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\n\
         EXIT_SIGNAL: false\nRECOMMENDATION: continue\n---END_RALPH_STATUS---"
    )
}

/// The text between backticks on the line that starts with `label`.
fn backticked(prompt: &str, label: &str) -> Option<String> {
    let line = prompt.lines().find_map(|l| l.strip_prefix(label))?;
    Some(line.split('`').nth(1)?.to_owned())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Where the two stories' first model calls wait for each other, so both
/// worktrees are cut from the same tip before either story does any work.
#[derive(Default)]
struct Meeting {
    arrived: Mutex<BTreeSet<String>>,
    all_here: Condvar,
    /// Set when a story gave up waiting: the run did not test a conflict.
    missed: AtomicBool,
}

impl Meeting {
    fn arrive(&self, story: &str) {
        let mut arrived = self.arrived.lock().unwrap_or_else(|e| e.into_inner());
        arrived.insert(story.to_owned());
        self.all_here.notify_all();
        let (arrived, waited) = self
            .all_here
            .wait_timeout_while(arrived, MEETING_LIMIT, |a| a.len() < 2)
            .unwrap_or_else(|e| e.into_inner());
        drop(arrived);
        if waited.timed_out() {
            self.missed.store(true, Ordering::SeqCst);
        }
    }
}

/// A story's turn: one Bash call (after meeting the other story), then the
/// final text.
fn story_turn(request: &Request, meeting: &Meeting) -> Reply {
    let Some(task) = Assignment::read(&request.prompt()) else {
        return Reply::text("I cannot tell which story to work on.");
    };
    match request.tool_result() {
        None => {
            meeting.arrive(&task.story);
            Reply::bash(&task.implement_command(), &format!("Implement {}", task.story))
        }
        Some(result) if !result.is_error => Reply::text(&task.final_text()),
        Some(result) => Reply::text(&status_text(
            &format!("The command failed: {}", result.content),
            "IN_PROGRESS",
        )),
    }
}

/// The resolver's turn: `Read` the conflicted file, `Write` it back with
/// both sides kept and no marker, then the final text.
fn resolve_turn(request: &Request) -> Reply {
    let prompt = request.prompt();
    let Some(file) = conflicted_files(&prompt).into_iter().next() else {
        return Reply::text("The prompt names no conflicting file.");
    };
    let Some(cwd) = working_directory(request) else {
        return Reply::text("I cannot tell which directory I am in.");
    };
    let path = cwd.join(&file).display().to_string();
    let result = request.tool_result();
    match last_tool_use(request).as_deref() {
        None => Reply::tool("Read", json!({"file_path": path})),
        Some("Read") => {
            let merged = result
                .as_ref()
                .filter(|r| !r.is_error)
                .and_then(|r| keep_both(&numbered_lines(&r.content)));
            match merged {
                Some(content) => {
                    Reply::tool("Write", json!({"file_path": path, "content": content}))
                }
                None => Reply::text(&format!("I could not merge {file}: {result:?}")),
            }
        }
        Some("Write") if result.as_ref().is_some_and(|r| !r.is_error) => {
            Reply::text(&status_text(&format!("Merged both stories' lines in {file}."), "COMPLETE"))
        }
        Some(tool) => Reply::text(&format!("{tool} failed: {result:?}")),
    }
}

/// The conflicting files a resolver prompt lists, as lines "- `path`"
/// after the line that introduces them.
fn conflicted_files(prompt: &str) -> Vec<String> {
    prompt
        .lines()
        .skip_while(|l| !l.contains("git's conflict markers in:"))
        .skip(1)
        .skip_while(|l| l.trim().is_empty())
        .map_while(|l| l.strip_prefix("- `")?.strip_suffix('`'))
        .map(str::to_owned)
        .collect()
}

/// The directory claude runs in, as it tells the model: a line
/// `Working directory: /…` (`- Primary working directory: /…` in claude
/// 2.1.332's environment message).
fn working_directory(request: &Request) -> Option<PathBuf> {
    let json = request.json();
    let mut texts = Vec::new();
    collect_texts(&json["system"], &mut texts);
    for message in json["messages"].as_array().into_iter().flatten() {
        collect_texts(&message["content"], &mut texts);
    }
    texts.iter().flat_map(|t| t.lines()).find_map(|line| {
        let at = line.to_ascii_lowercase().find("working directory: ")?;
        let dir = line[at + "working directory: ".len()..].trim();
        Path::new(dir).is_absolute().then(|| PathBuf::from(dir))
    })
}

/// The texts of a system prompt or message content: a string or blocks.
fn collect_texts<'j>(content: &'j Value, texts: &mut Vec<&'j str>) {
    match content {
        Value::String(s) => texts.push(s),
        Value::Array(blocks) => texts.extend(blocks.iter().filter_map(|b| b["text"].as_str())),
        _ => {}
    }
}

/// The name of the last tool the model called in this conversation.
fn last_tool_use(request: &Request) -> Option<String> {
    let json = request.json();
    let messages = json["messages"].as_array()?;
    messages
        .iter()
        .rev()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_array())
        .find_map(|blocks| {
            blocks.iter().rev().find(|b| b["type"] == "tool_use")?["name"].as_str().map(Into::into)
        })
}

/// A file's text from claude's `Read` result: its lines numbered
/// (`1\t# shared`, or `     1→# shared` in other versions), the last one
/// empty when the file ends with a newline. A line without a number (a
/// reminder claude may append) is not the file's.
fn numbered_lines(result: &str) -> String {
    let mut lines = Vec::new();
    for line in result.split('\n') {
        let rest = line.trim_start();
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let rest = &rest[digits..];
        let content = rest.strip_prefix('\t').or_else(|| rest.strip_prefix('→'));
        if let Some(content) = content.filter(|_| digits > 0) {
            lines.push(content);
        }
    }
    lines.join("\n")
}

/// `text` with every conflict resolved by keeping both sides, ours first:
/// the marker lines (and a diff3 base section) dropped. `None` when it has
/// no conflict, which is not what the resolver was told.
fn keep_both(text: &str) -> Option<String> {
    let mut kept = Vec::new();
    let mut in_base = false;
    let mut conflicts = 0;
    for line in text.split('\n') {
        if line.starts_with("<<<<<<<") {
            conflicts += 1;
        } else if line.starts_with("|||||||") {
            in_base = true;
        } else if line.trim_end() == "=======" {
            in_base = false;
        } else if !in_base && !line.starts_with(">>>>>>>") {
            kept.push(line);
        }
    }
    (conflicts > 0).then(|| kept.join("\n"))
}

/// The model: the resolver for ralph's resolver prompt, a story's work for
/// its iteration prompt.
fn model(meeting: Arc<Meeting>) -> Script {
    Script::new(move |request| {
        let prompt = request.prompt();
        if prompt.trim_start().starts_with(RESOLVE_HEADING) {
            resolve_turn(request)
        } else if prompt.trim_start().starts_with("# Ralph iteration ") {
            story_turn(request, &meeting)
        } else {
            Reply::text("I was not given a task I know.")
        }
    })
}

// ---------------------------------------------------------------------------
// ralph with claude as its agent

/// How a ralph run ended, and everything it printed.
struct Finished {
    code: i32,
    events: Vec<Value>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[exit {}]\n--- stdout\n{}--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

impl Finished {
    fn events(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == kind).collect()
    }
}

fn read_to_end(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs `command` (ralph) to its end, killing it after [`RUN_LIMIT`].
fn finish(mut command: Command) -> Finished {
    let mut child: Child =
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn ralph");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stdout = thread::spawn(move || {
        BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<_>>().join("\n")
    });
    let stderr = read_to_end(child.stderr.take().expect("stderr is piped"));
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for ralph") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = stdout.join().unwrap_or_default();
            panic!("ralph ran longer than {RUN_LIMIT:?}; it printed:\n{stdout}");
        }
        thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = stdout.join().expect("stdout reader");
    stdout.push('\n');
    let events = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("ralph --json printed a non-JSON line ({e}): {l}"))
        })
        .collect();
    Finished {
        code: status.code().unwrap_or(-1),
        events,
        stdout,
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Processes still running with this test's stub in their environment
/// (claude, or a tool it started): each stub has its own port.
fn survivors(stub: &Stub) -> Vec<(i32, String)> {
    let marker = format!("ANTHROPIC_BASE_URL={}", stub.base_url());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|&b| b == 0).any(|var| var == marker.as_bytes())
            && crate::harness::alive(pid)
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// The events of one claude run, from ralph's iteration log.
fn log_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn real_claude_resolves_two_stories_conflict_keeping_both_lines() {
    let Some(claude) = claude_bin_or_skip("real_claude_resolves_two_stories_conflict") else {
        return;
    };
    let p = Project::with_prd(PRD);
    p.write("shared.txt", SHARED);
    p.write("check.sh", GATE);
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "The shared file and the gate"]);
    let config_dir = p.tmp.path().join("claude-config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let meeting = Arc::new(Meeting::default());
    let stub = Stub::start(model(Arc::clone(&meeting)));

    let mut ralph = p.ralph();
    ralph
        .env_remove("FAKE_AGENT_SCRIPT")
        .env_remove("FAKE_AGENT_DIR")
        .env("RALPH_AGENT_TOOL", "claude")
        .env("RALPH_AGENT_COMMAND", &claude)
        .args(["--json", "--tool", "claude", "6", "--jobs", "2", "--gate", "sh check.sh"]);
    stub.claude_env(&config_dir).apply(&mut ralph);
    let r = finish(ralph);
    eprintln!(
        "real claude resolve: exit {}; iterations {:?}",
        r.code,
        r.events("iteration_end")
            .iter()
            .map(|e| (e["story_id"].clone(), e["result"].clone(), e["resolve"].clone()))
            .collect::<Vec<_>>()
    );

    assert!(
        !meeting.missed.load(Ordering::SeqCst),
        "the two stories did not run at once, so nothing conflicted: {r:?}"
    );
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(p.passes("US-001") && p.passes("US-002"), "{r:?}");

    // The run branch holds both stories' lines, and no marker.
    let shared = p.read("shared.txt");
    for id in ["US-001", "US-002"] {
        assert_eq!(shared.matches(&format!("from {id}\n")).count(), 1, "{id}: {shared}");
    }
    assert!(shared.starts_with("# shared\n") && shared.ends_with("# end\n"), "{shared}");
    assert!(!shared.contains("base line"), "{shared}");
    for marker in ["<<<<<<<", "=======", ">>>>>>>", "|||||||"] {
        assert!(!shared.contains(marker), "{marker} left in {shared}");
    }

    // One story merged as it was; the other was resolved, then merged,
    // gated on the merged tree.
    let merges = r.events("merge");
    let resolving = merges
        .iter()
        .position(|e| e["result"] == "resolving")
        .unwrap_or_else(|| panic!("no merge went to a resolver: {r:?}"));
    let story = merges[resolving]["story_id"].as_str().unwrap().to_owned();
    let other = if story == "US-001" { "US-002" } else { "US-001" };
    assert_eq!(merges[resolving]["files"], json!(["shared.txt"]), "{r:?}");
    let merged_first =
        merges[..resolving].iter().any(|e| e["story_id"] == other && e["result"] == "merged");
    assert!(merged_first, "{other} was not merged before {story} conflicted: {r:?}");
    let resolved = merges[resolving + 1..]
        .iter()
        .find(|e| e["story_id"] == story.as_str())
        .unwrap_or_else(|| panic!("{story} was not merged after resolving: {r:?}"));
    assert_eq!(resolved["result"], "merged", "{r:?}");
    assert_eq!(
        resolved["message"],
        format!("resolved onto {other}, gated on the merged tree"),
        "{r:?}"
    );
    assert_eq!(merges.iter().filter(|e| e["result"] == "merged").count(), 2, "{r:?}");

    // The resolver was an iteration of claude's, and it made progress.
    let starts: Vec<_> =
        r.events("iteration_start").into_iter().filter(|e| e["resolve"] == true).collect();
    assert_eq!(starts.len(), 1, "{r:?}");
    assert_eq!(starts[0]["story_id"], story.as_str(), "{r:?}");
    assert_eq!(starts[0]["agent"], "claude", "{r:?}");
    let ends: Vec<_> =
        r.events("iteration_end").into_iter().filter(|e| e["resolve"] == true).collect();
    assert_eq!(ends.len(), 1, "{r:?}");
    let end = ends[0];
    assert_eq!(end["story_id"], story.as_str(), "{end}");
    assert_eq!(end["result"], "progress", "{end}");
    assert_eq!(end["agent"], "claude", "{end}");
    assert_eq!(end["commits"], 1, "{end}");
    // ralph committed the resolution on the story's branch, marked as its.
    let commit = end["commit"].as_str().unwrap_or_else(|| panic!("no commit: {end}"));
    let message = p.git(&["log", "-1", "--format=%B", commit]);
    let title = if story == "US-001" { "One" } else { "Two" };
    assert!(message.starts_with(&format!("fix: {story} - {title}\n")), "{message}");
    assert!(message.lines().any(|l| l == "Resolved-by: ralph"), "{message}");
    // Each story reached the run branch once, as its own commit.
    let mut feats: Vec<String> = p.log().into_iter().filter(|s| s.starts_with("feat: ")).collect();
    feats.sort();
    assert_eq!(feats, ["feat: US-001 - One", "feat: US-002 - Two"], "{:?}", p.log());
    // The stories' own iterations: one each, both progress.
    let story_ends: Vec<_> =
        r.events("iteration_end").into_iter().filter(|e| e["resolve"] != true).collect();
    assert_eq!(story_ends.len(), 2, "{r:?}");
    assert!(story_ends.iter().all(|e| e["result"] == "progress" && e["agent"] == "claude"));

    // The resolver's log: a complete claude run that read and wrote the file.
    let log = PathBuf::from(end["log"].as_str().unwrap_or_default());
    let name = log.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    assert!(name.starts_with("iter-") && name.ends_with(".resolve.log"), "{}", log.display());
    let logs = files_under(&p.path(".git/ralph/logs"), &|n: &str| {
        n.starts_with("iter-") && n.ends_with(".resolve.log")
    });
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0].canonicalize().ok(), log.canonicalize().ok(), "{logs:?}");
    let events = log_events(&log);
    let result = events.iter().find(|e| e["type"] == "result");
    let result = result.unwrap_or_else(|| panic!("{}: no result event", log.display()));
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["num_turns"], 3, "{result}");
    let tools: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "assistant")
        .filter_map(|e| e["message"]["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .filter_map(|b| b["name"].as_str())
        .collect();
    assert_eq!(tools, ["Read", "Write"], "{}", log.display());

    // What the stub saw: three claude sessions, the resolver's told of the
    // conflicting file and the story already on the branch.
    let firsts: Vec<Request> =
        stub.message_requests().into_iter().filter(|r| r.tool_result().is_none()).collect();
    assert_eq!(firsts.len(), 3, "two stories and one resolver");
    let resolver: Vec<String> = firsts
        .iter()
        .map(Request::prompt)
        .filter(|p| p.trim_start().starts_with(RESOLVE_HEADING))
        .collect();
    assert_eq!(resolver.len(), 1);
    assert_eq!(conflicted_files(&resolver[0]), ["shared.txt"], "{}", resolver[0]);
    assert!(resolver[0].contains(&format!("**{other}** already reached")), "{}", resolver[0]);

    // Nothing of the run's or claude's is left behind.
    let worktrees = p.git(&["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "worktrees left: {worktrees}");
    let status = p.git(&["status", "--porcelain", "--untracked-files=no"]);
    assert!(status.trim().is_empty(), "{status}");
    assert!(
        eventually(Duration::from_secs(10), || survivors(&stub).is_empty()),
        "processes outlived ralph: {:?}",
        survivors(&stub)
    );
}

#[test]
fn a_read_result_is_resolved_keeping_both_sides() {
    // As claude 2.1.332 returns it: a tab after each number, and an empty
    // last line for the file's final newline.
    let read = "1\t# shared\n2\t<<<<<<< run branch (US-001)\n3\tfrom US-001\n4\t=======\n\
                5\tfrom US-002\n6\t>>>>>>> US-002 (Two)\n7\t# end\n8\t";
    let text = numbered_lines(read);
    assert_eq!(text.lines().count(), 7, "{text}");
    assert!(text.ends_with(">>>>>>> US-002 (Two)\n# end\n"), "{text}");
    let merged = "# shared\nfrom US-001\nfrom US-002\n# end\n";
    assert_eq!(keep_both(&text).as_deref(), Some(merged));
    // Arrows instead of tabs, padded numbers, a reminder after the file.
    let arrows = concat!(
        "     1→a\n     2→<<<<<<< ours\n     3→x\n     4→||||||| base\n     5→old\n",
        "     6→=======\n     7→y\n     8→>>>>>>> theirs\n\n<system-reminder>\n",
    );
    assert_eq!(keep_both(&numbered_lines(arrows)).as_deref(), Some("a\nx\ny"));
    assert_eq!(keep_both("no conflict\n"), None);
    let prompt = "git's conflict markers in:\n\n- `shared.txt`\n- `src/a b.rs`\n\nYour only task";
    assert_eq!(conflicted_files(prompt), ["shared.txt", "src/a b.rs"]);
}
