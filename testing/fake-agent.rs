//! A scriptable stand-in for an agent CLI, for ralph's integration tests.
//!
//! It behaves like a real agent where it matters to ralph: it reads the
//! prompt on stdin, finds its story and the PRD path in it, edits files,
//! sets `passes`, commits with git, and prints what it is told to print.
//!
//! `FAKE_AGENT_SCRIPT` names the script; `FAKE_AGENT_DIR` (default: the
//! script's folder) holds its run counter, a log of every run
//! (`runs.log`), each prompt (`prompt-<n>.txt`) and the pids of processes
//! it spawned (`pids`). A script is made of blocks, one per run:
//!
//! ```text
//! [run 1]          commands for the first run
//! [run 2-3]        for runs 2 and 3
//! [run *]          for every other run
//! [story US-002]   for every run of story US-002 (RALPH_STORY_ID)
//! [story US-002 2] for its second run; story blocks come first
//! [resolve US-002 1] a resolver's first run on story US-002 (ralph's
//! [resolve US-002]   resolver prompt); [resolve *] any resolver run;
//! [resolve *]        with no block, a resolver run does `resolve`
//! ```
//!
//! `{id}` in a command's arguments is the story's id.
//!
//! Commands: `implement` (the happy path: file, passes, progress, handoff,
//! commit), `resolve` (every file the prompt lists with conflict markers:
//! both sides kept, the markers removed), `write PATH TEXT`, `put PATH TEXT` (the whole
//! file; `\n` in TEXT is a newline), `append PATH TEXT`, `mark-pass [ID]`,
//! `commit MESSAGE` ({id} and {title} are replaced), `progress TEXT`,
//! `replace-line PATH MATCH NEW` (the first line equal to MATCH; `\n` in NEW
//! starts a new line),
//! `handoff JSON`, `print TEXT`, `print-env NAME` (`NAME=its value`), `stderr TEXT`,
//! `output BYTES`, `binary`,
//! `echo-prompt`, `status STATUS EXIT_SIGNAL`, `promise`, `sleep SECS`,
//! `ignore-sigterm`, `spawn setsid|group|stubborn-setsid|stubborn-group SECS`
//! (stubborn: it ignores SIGTERM), `close-stdout`,
//! `skip-stdin`, `corrupt-prd invalid|delete|flip`, `cat FILE`,
//! `usage-limit SECS`, `claude-result TEXT`, `claude-error STATUS TEXT`,
//! `die SIGNAL` (it sends itself a signal by number: `die 9`, as `kill -9`
//! from outside would),
//! `touch-shared NAME` (a file in FAKE_AGENT_DIR), `wait-shared NAME SECS`
//! (until that file exists: two agents that wait for each other prove
//! they run at once), `set-all-passing`, `set-verify COMMAND`, `add-story JSON` (appended to
//! the PRD), `set-story ID FIELD JSON` (one field of a story), `stage PATH`, `exit CODE`,
//! `write-story-file` (src/<id>.txt, uncommitted), `run PROGRAM ARGS` (no shell), `fifo handoff|prd` (a FIFO where ralph expects the file),
//! `claude-tool-error TEXT` (a failed tool call's result, as claude
//! streams it; `\n` in TEXT is a newline), `term-succeeds` (from now on SIGTERM makes it print a
//! claude success result and exit 0, as claude does when SIGTERM cancels a
//! running tool), `try COMMAND ARGS` (a failing command says why on stderr,
//! `fake-agent: COMMAND ARGS: <error>`, and the script goes on), `rm DIR`
//! (recursively), `symlink LINK TARGET`, `connect PORT` (TCP on 127.0.0.1),
//! `kill-parent STOP|TERM|KILL|N` (a signal to ralph, its parent).

use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set by SIGTERM once `term-succeeds` installed its handler.
static TERMINATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() {
    let script_path = PathBuf::from(std::env::var("FAKE_AGENT_SCRIPT").unwrap_or_else(|_| {
        eprintln!("fake-agent: FAKE_AGENT_SCRIPT is not set");
        std::process::exit(90);
    }));
    let dir = std::env::var("FAKE_AGENT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| script_path.parent().unwrap_or(Path::new(".")).to_path_buf());
    let script = fs::read_to_string(&script_path).unwrap_or_else(|e| {
        eprintln!("fake-agent: cannot read {}: {e}", script_path.display());
        std::process::exit(90);
    });
    let story = std::env::var("RALPH_STORY_ID").unwrap_or_default();
    // The prompt first: a resolver's run is told apart by it.
    let mut prompt = String::new();
    let skip_stdin = script.lines().any(|l| l.trim() == "skip-stdin");
    if !skip_stdin {
        let _ = std::io::stdin().read_to_string(&mut prompt);
    }
    let n = next_run(&dir, "count");
    let commands = if prompt.starts_with(RESOLVE_PROMPT) {
        let k = next_run(&dir, &format!("count-resolve-{story}"));
        resolve_block(&script, &story, k).unwrap_or_else(|| vec!["resolve".to_string()])
    } else {
        let k = next_run(&dir, &format!("count-{story}"));
        story_block(&script, &story, k).unwrap_or_else(|| block(&script, n))
    };
    let _ = fs::write(dir.join(format!("prompt-{n}.txt")), &prompt);
    let task = Task::from_prompt(&prompt);
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut log =
        fs::OpenOptions::new().create(true).append(true).open(dir.join("runs.log")).unwrap();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let _ = writeln!(
        log,
        "run={n} pid={} at={} story={} cwd={} args={}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()),
        task.story,
        cwd.display(),
        args.join(" ")
    );
    drop(log);
    for line in &commands {
        let (cmd, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let rest = rest.replace("{id}", &task.story);
        if let Err(e) = run(cmd, &rest, &task, &prompt, &dir) {
            eprintln!("fake-agent: {line}: {e}");
            std::process::exit(91);
        }
    }
}

/// Increments and returns a run counter (`count`: every run; `count-<id>`:
/// one story's), under a lock: a parallel run starts several at once.
fn next_run(dir: &Path, name: &str) -> u32 {
    let lock = fs::OpenOptions::new().create(true).append(true).open(dir.join("count.lock"));
    let _held = lock.as_ref().map(|f| f.lock());
    let path = dir.join(name);
    let n =
        fs::read_to_string(&path).ok().and_then(|s| s.trim().parse::<u32>().ok()).unwrap_or(0) + 1;
    let _ = fs::write(&path, n.to_string());
    n
}

/// The commands of a `[story ID]` block (every run of that story) or a
/// `[story ID K]` / `[story ID K-L]` block (its K-th run), if the script
/// has one for `story`'s run `k`: these come before `[run …]` blocks.
fn story_block(script: &str, story: &str, k: u32) -> Option<Vec<String>> {
    let mut found: Option<(bool, Vec<String>)> = None;
    let mut current: Option<(bool, Vec<String>)> = None;
    let finish = |c: Option<(bool, Vec<String>)>, found: &mut Option<(bool, Vec<String>)>| {
        if let Some((exact, cmds)) = c
            && found.as_ref().is_none_or(|(e, _)| !*e && exact)
        {
            *found = Some((exact, cmds));
        }
    };
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if line.starts_with('[') {
            finish(current.take(), &mut found);
            let Some(head) = line.strip_prefix("[story ").and_then(|h| h.strip_suffix(']')) else {
                continue;
            };
            let mut parts = head.split_whitespace();
            if parts.next() != Some(story) {
                continue;
            }
            current = match parts.next() {
                None => Some((false, Vec::new())),
                Some(range) => {
                    let (a, b) = range.split_once('-').unwrap_or((range, range));
                    let (a, b) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
                    (a <= k && k <= b).then(|| (true, Vec::new()))
                }
            };
        } else if let Some((_, cmds)) = current.as_mut() {
            cmds.push(line.to_string());
        }
    }
    finish(current, &mut found);
    found.map(|(_, c)| c)
}

/// How ralph's resolver prompt begins.
const RESOLVE_PROMPT: &str = "# Merge two stories' work";

/// The commands of a `[resolve ID K]`, `[resolve ID]` or `[resolve *]`
/// block for the `k`-th resolver run of `story`, if the script has one.
fn resolve_block(script: &str, story: &str, k: u32) -> Option<Vec<String>> {
    let mut best: Option<(u8, Vec<String>)> = None;
    let mut current: Option<(u8, Vec<String>)> = None;
    let mut finish = |c: Option<(u8, Vec<String>)>| {
        if let Some((rank, cmds)) = c
            && best.as_ref().is_none_or(|(r, _)| rank > *r)
        {
            best = Some((rank, cmds));
        }
    };
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if line.starts_with('[') {
            finish(current.take());
            let Some(head) = line.strip_prefix("[resolve ").and_then(|h| h.strip_suffix(']'))
            else {
                continue;
            };
            let mut parts = head.split_whitespace();
            current = match (parts.next(), parts.next()) {
                (Some("*"), _) => Some((1, Vec::new())),
                (Some(id), None) if id == story => Some((2, Vec::new())),
                (Some(id), Some(range)) if id == story => {
                    let (a, b) = range.split_once('-').unwrap_or((range, range));
                    let (a, b) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
                    (a <= k && k <= b).then(|| (3, Vec::new()))
                }
                _ => None,
            };
        } else if let Some((_, cmds)) = current.as_mut() {
            cmds.push(line.to_string());
        }
    }
    finish(current);
    best.map(|(_, c)| c)
}

/// A resolver's work: each file the prompt lists (`- \`path\``) that
/// holds git's conflict markers, with both sides kept, ours first.
fn resolve_both(prompt: &str) -> Result<Vec<String>, String> {
    let mut done = Vec::new();
    for line in prompt.lines() {
        let Some(path) = line.strip_prefix("- `").and_then(|l| l.strip_suffix('`')) else {
            continue;
        };
        let Ok(text) = fs::read_to_string(path) else { continue };
        if !text.contains("<<<<<<< ") {
            continue;
        }
        let kept: String = text
            .lines()
            .filter(|l| {
                !(l.starts_with("<<<<<<< ")
                    || l.starts_with(">>>>>>> ")
                    || l.starts_with("||||||| ")
                    || *l == "=======")
            })
            .map(|l| format!("{l}\n"))
            .collect();
        fs::write(path, kept).map_err(|e| e.to_string())?;
        done.push(path.to_string());
    }
    Ok(done)
}

/// The commands of the block for run `n`.
fn block(script: &str, n: u32) -> Vec<String> {
    let mut blocks: Vec<(String, Vec<String>)> = Vec::new();
    for line in script.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(head) = t.strip_prefix("[run ").and_then(|h| h.strip_suffix(']')) {
            blocks.push((head.trim().to_string(), Vec::new()));
        } else if t.starts_with("[story ") {
            // A story's block (see `story_block`): no run's.
            blocks.push(("story".into(), Vec::new()));
        } else if let Some(last) = blocks.last_mut() {
            last.1.push(t.to_string());
        } else {
            blocks.push(("*".into(), vec![t.to_string()]));
        }
    }
    let matches = |head: &str| match head.split_once('-') {
        Some((a, b)) => {
            a.parse::<u32>().is_ok_and(|a| a <= n) && b.parse::<u32>().is_ok_and(|b| n <= b)
        }
        None => head.parse::<u32>().is_ok_and(|x| x == n),
    };
    blocks
        .iter()
        .find(|(h, _)| matches(h))
        .or_else(|| blocks.iter().find(|(h, _)| h == "*"))
        .map(|(_, c)| c.clone())
        .unwrap_or_default()
}

struct Task {
    story: String,
    prd: Option<PathBuf>,
    progress: Option<PathBuf>,
    handoff: Option<PathBuf>,
}

fn backticked(prompt: &str, label: &str) -> Option<PathBuf> {
    let line = prompt.lines().find(|l| l.contains(label))?;
    let start = line.find('`')? + 1;
    let end = start + line[start..].find('`')?;
    Some(PathBuf::from(&line[start..end]))
}

impl Task {
    fn from_prompt(prompt: &str) -> Task {
        let env = |k: &str| std::env::var(k).ok().map(PathBuf::from);
        let story = prompt
            .lines()
            .next()
            .and_then(|l| l.rsplit_once("story ").map(|(_, s)| s.trim().to_string()))
            .filter(|s| !s.is_empty())
            .or_else(|| std::env::var("RALPH_STORY_ID").ok())
            .unwrap_or_default();
        Task {
            story,
            prd: backticked(prompt, "PRD (the task list)").or_else(|| env("RALPH_PRD")),
            progress: backticked(prompt, "Progress log").or_else(|| env("RALPH_PROGRESS")),
            handoff: backticked(prompt, "Your handoff file").or_else(|| env("RALPH_HANDOFF")),
        }
    }

    fn prd(&self) -> Result<&Path, String> {
        self.prd.as_deref().ok_or_else(|| "the prompt names no PRD".into())
    }

    fn title(&self) -> String {
        self.prd
            .as_deref()
            .and_then(|p| fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| {
                v["userStories"]
                    .as_array()?
                    .iter()
                    .find(|s| s["id"] == self.story.as_str())
                    .and_then(|s| s["title"].as_str().map(str::to_string))
            })
            .unwrap_or_default()
    }
}

fn edit_prd(path: &Path, f: impl FnOnce(&mut serde_json::Value)) -> Result<(), String> {
    let text = fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    f(&mut v);
    fs::write(path, serde_json::to_string_pretty(&v).unwrap() + "\n").map_err(|e| e.to_string())
}

fn commit_all(message: &str) -> Result<(), String> {
    let e = |e: git2::Error| e.to_string();
    let repo = git2::Repository::discover(".").map_err(e)?;
    let mut index = repo.index().map_err(e)?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).map_err(e)?;
    index.write().map_err(e)?;
    let tree = repo.find_tree(index.write_tree().map_err(e)?).map_err(e)?;
    let sig = git2::Signature::now("fake agent", "fake@example.invalid").map_err(e)?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).map_err(e)?;
    Ok(())
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    let mut f =
        fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| e.to_string())?;
    f.write_all(text.as_bytes()).map_err(|e| e.to_string())
}

fn run(cmd: &str, rest: &str, task: &Task, prompt: &str, dir: &Path) -> Result<(), String> {
    let mut out = std::io::stdout();
    match cmd {
        "touch-shared" => {
            fs::write(dir.join(rest.trim()), b"").map_err(|e| e.to_string())?;
        }
        "wait-shared" => {
            let (name, secs) = rest.split_once(' ').unwrap_or((rest, "60"));
            let until = std::time::Instant::now()
                + std::time::Duration::from_secs(secs.trim().parse().unwrap_or(60));
            while !dir.join(name.trim()).exists() {
                if std::time::Instant::now() > until {
                    return Err(format!("{name} did not appear in {secs}s"));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        "resolve" => {
            let files = resolve_both(prompt)?;
            println!("resolved {}", files.join(", "));
        }
        "implement" => {
            let file = format!("src/{}.txt", task.story.to_lowercase());
            fs::create_dir_all("src").map_err(|e| e.to_string())?;
            fs::write(&file, format!("implementation of {}\n", task.story))
                .map_err(|e| e.to_string())?;
            let id = task.story.clone();
            edit_prd(task.prd()?, |v| {
                for s in v["userStories"].as_array_mut().into_iter().flatten() {
                    if s["id"] == id.as_str() {
                        s["passes"] = serde_json::Value::Bool(true);
                    }
                }
            })?;
            if let Some(p) = &task.progress {
                append(p, &format!("\n## now - {id}\n- implemented {file}\n---\n"))?;
            }
            if let Some(h) = &task.handoff {
                let handoff = serde_json::json!({"status": "complete", "summary": format!("implemented {id}"),
                    "evidence": [format!("{file} exists")], "nextSteps": [], "blocker": ""});
                fs::write(h, handoff.to_string()).map_err(|e| e.to_string())?;
            }
            commit_all(&format!("feat: {id} - {}", task.title()))?;
            println!("implemented {id}");
        }
        "write" => {
            let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(d) = Path::new(path).parent() {
                fs::create_dir_all(d).map_err(|e| e.to_string())?;
            }
            fs::write(path, format!("{text}\n")).map_err(|e| e.to_string())?;
        }
        "put" => {
            // put PATH TEXT: the whole file, `\n` in TEXT a newline.
            let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(d) = Path::new(path).parent() {
                fs::create_dir_all(d).map_err(|e| e.to_string())?;
            }
            fs::write(path, text.replace("\\n", "\n")).map_err(|e| e.to_string())?;
        }
        "replace-line" => {
            // replace-line PATH MATCH NEW: the first line equal to MATCH
            // becomes NEW (`\n` in NEW starts another line).
            let mut words = rest.splitn(3, ' ');
            let (path, want, new) = (
                words.next().unwrap_or(""),
                words.next().unwrap_or(""),
                words.next().unwrap_or(""),
            );
            let text = fs::read_to_string(path).map_err(|e| e.to_string())?;
            let mut done = false;
            let out: String = text
                .lines()
                .map(|l| {
                    if !done && l == want {
                        done = true;
                        format!("{}\n", new.replace("\\n", "\n"))
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            if !done {
                return Err(format!("no line {want:?} in {path}"));
            }
            fs::write(path, out).map_err(|e| e.to_string())?;
        }
        "append" => {
            let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
            append(Path::new(path), &format!("{text}\n"))?;
        }
        "mark-pass" => {
            let id = if rest.is_empty() { task.story.clone() } else { rest.to_string() };
            edit_prd(task.prd()?, |v| {
                for s in v["userStories"].as_array_mut().into_iter().flatten() {
                    if s["id"] == id.as_str() {
                        s["passes"] = serde_json::Value::Bool(true);
                    }
                }
            })?;
        }
        "commit" => {
            let msg = rest.replace("{id}", &task.story).replace("{title}", &task.title());
            commit_all(&msg)?;
        }
        "progress" => {
            append(task.progress.as_deref().ok_or("no progress path")?, &format!("{rest}\n"))?
        }
        "handoff" => fs::write(task.handoff.as_deref().ok_or("no handoff path")?, rest)
            .map_err(|e| e.to_string())?,
        "print" => println!("{rest}"),
        "print-env" => {
            let name = rest.trim();
            println!("{name}={}", std::env::var(name).unwrap_or_else(|_| "(unset)".into()));
        }
        "stderr" => eprintln!("{rest}"),
        "die" => {
            let signal: i32 = rest.trim().parse().map_err(|_| "die SIGNAL (a number)")?;
            let _ = std::io::stdout().flush();
            // SAFETY: kill(2) on our own pid; no memory is involved.
            unsafe { libc::kill(libc::getpid(), signal) };
            std::thread::sleep(std::time::Duration::from_secs(5));
            return Err(format!("signal {signal} did not end it"));
        }
        "output" => {
            let total: usize = rest.trim().parse().map_err(|_| "output BYTES")?;
            let line = "x".repeat(99) + "\n";
            let mut left = total;
            let chunk = line.repeat(1000);
            while left > 0 {
                let n = left.min(chunk.len());
                out.write_all(&chunk.as_bytes()[..n]).map_err(|e| e.to_string())?;
                left -= n;
            }
        }
        "binary" => {
            out.write_all(b"bytes \xff\xfe\x00\x01 not utf-8\n\x1b[31mred\x1b[0m\n")
                .map_err(|e| e.to_string())?;
        }
        "echo-prompt" => print!("{prompt}"),
        "status" => {
            let mut parts = rest.split_whitespace();
            let status = parts.next().unwrap_or("IN_PROGRESS");
            let exit = parts.next().unwrap_or("false");
            println!(
                "---RALPH_STATUS---\nSTATUS: {status}\nTASKS_COMPLETED_THIS_LOOP: 0\nFILES_MODIFIED: 0\nTESTS_STATUS: NOT_RUN\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: {exit}\nRECOMMENDATION: {}\n---END_RALPH_STATUS---",
                parts.collect::<Vec<_>>().join(" ")
            );
        }
        "promise" => println!("<promise>COMPLETE</promise>"),
        "sleep" => {
            let secs: f64 = rest.trim().parse().map_err(|_| "sleep SECS")?;
            let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
            while std::time::Instant::now() < until {
                if TERMINATED.load(std::sync::atomic::Ordering::SeqCst) {
                    // What claude prints when SIGTERM only cancelled its tool.
                    println!(
                        r#"{{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"The command was cancelled; the story is done.","session_id":"s-1","total_cost_usd":0.01}}"#
                    );
                    let _ = out.flush();
                    std::process::exit(0);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        "term-succeeds" => {
            extern "C" fn note(_: libc::c_int) {
                TERMINATED.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
            unsafe {
                libc::signal(libc::SIGTERM, note as *const () as libc::sighandler_t);
            }
        }
        "fifo" => {
            // `fifo handoff` / `fifo prd`: a FIFO where ralph expects a file.
            let path = match rest.trim() {
                "handoff" => task.handoff.clone().ok_or("no handoff path")?,
                _ => task.prd()?.to_path_buf(),
            };
            let _ = fs::remove_file(&path);
            let c = std::ffi::CString::new(path.to_string_lossy().as_bytes())
                .map_err(|e| e.to_string())?;
            // SAFETY: mkfifo with a valid NUL-terminated path.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } != 0 {
                return Err(std::io::Error::last_os_error().to_string());
            }
        }
        "write-story-file" => {
            // The story's work: src/<id>.txt, as `implement` writes it, and nothing else.
            let file = format!("src/{}.txt", task.story.to_lowercase());
            fs::create_dir_all("src").map_err(|e| e.to_string())?;
            fs::write(&file, format!("implementation of {}\n", task.story))
                .map_err(|e| e.to_string())?;
        }
        "claude-tool-error" => {
            let event = serde_json::json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                 "content": rest.replace("\\n", "\n")}]},
                "session_id": "s-1"});
            println!("{event}");
        }
        "ignore-sigterm" => {
            // SAFETY: setting a disposition to SIG_IGN has no preconditions.
            unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                libc::signal(libc::SIGINT, libc::SIG_IGN);
            }
        }
        "spawn" => {
            let (mode, secs) = rest.split_once(' ').unwrap_or((rest, "60"));
            // `stubborn-setsid`: one that also ignores SIGTERM.
            let mut c = if mode.starts_with("stubborn") {
                let mut c = Command::new("sh");
                c.args(["-c", &format!("trap '' TERM; sleep {}", secs.trim())]);
                c
            } else {
                let mut c = Command::new("sleep");
                c.arg(secs.trim());
                c
            };
            c.stdin(std::process::Stdio::null());
            if mode.ends_with("setsid") {
                // SAFETY: setsid is async-signal-safe and called in the child before exec.
                unsafe {
                    c.pre_exec(|| {
                        libc::setsid();
                        Ok(())
                    });
                }
            }
            let child = c.spawn().map_err(|e| e.to_string())?;
            append(&dir.join("pids"), &format!("{}\n", child.id()))?;
            std::mem::forget(child);
        }
        "close-stdout" => {
            let _ = out.flush();
            // SAFETY: closing our own stdout descriptor; nothing uses it afterwards.
            unsafe {
                libc::close(1);
            }
        }
        "skip-stdin" => {}
        "corrupt-prd" => {
            let path = task.prd()?;
            match rest.trim() {
                "invalid" => fs::write(path, "{ this is not json").map_err(|e| e.to_string())?,
                "delete" => edit_prd(path, |v| {
                    if let Some(a) = v["userStories"].as_array_mut() {
                        a.pop();
                    }
                })?,
                "flip" => edit_prd(path, |v| {
                    if let Some(a) = v["userStories"].as_array_mut()
                        && a.len() >= 2
                    {
                        let first = a[0]["id"].clone();
                        a[0]["id"] = a[1]["id"].clone();
                        a[1]["id"] = first;
                    }
                })?,
                other => return Err(format!("corrupt-prd {other}?")),
            }
        }
        "try" => {
            // try COMMAND ARGS: on failure it says so on stderr (as a
            // tool's error would read) and goes on with the script.
            let (inner, args) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Err(e) = run(inner, args, task, prompt, dir) {
                eprintln!("fake-agent: {inner} {args}: {e}");
            }
        }
        "rm" => fs::remove_dir_all(rest.trim()).map_err(|e| e.to_string())?,
        "symlink" => {
            let (link, target) = rest.split_once(' ').ok_or("symlink LINK TARGET")?;
            std::os::unix::fs::symlink(target.trim(), link).map_err(|e| e.to_string())?;
        }
        "connect" => {
            let port: u16 = rest.trim().parse().map_err(|_| "connect PORT")?;
            std::net::TcpStream::connect(("127.0.0.1", port))
                .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
            println!("connected to 127.0.0.1:{port}");
        }
        "kill-parent" => {
            let signal = match rest.trim() {
                "STOP" => libc::SIGSTOP,
                "TERM" => libc::SIGTERM,
                "KILL" => libc::SIGKILL,
                other => other.parse().map_err(|_| "kill-parent STOP|TERM|KILL|N")?,
            };
            // SAFETY: getppid and kill(2) have no memory effects.
            let (parent, rc) = unsafe {
                let parent = libc::getppid();
                (parent, libc::kill(parent, signal))
            };
            if rc != 0 {
                return Err(format!("kill {parent}: {}", std::io::Error::last_os_error()));
            }
        }
        "cat" => {
            let bytes = fs::read(rest.trim()).map_err(|e| e.to_string())?;
            out.write_all(&bytes).map_err(|e| e.to_string())?;
        }
        "usage-limit" => {
            let secs: i64 = rest.trim().parse().map_err(|_| "usage-limit SECS")?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            println!(r#"{{"type":"system","subtype":"init","session_id":"s-1"}}"#);
            println!(
                r#"{{"type":"rate_limit_event","rate_limit_info":{{"status":"rejected","resetsAt":{},"rateLimitType":"five_hour","isUsingOverage":false}},"session_id":"s-1"}}"#,
                now + secs
            );
            println!(
                r#"{{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"num_turns":1,"result":"You've hit your session limit · resets soon (UTC)","session_id":"s-1","total_cost_usd":0}}"#
            );
            let _ = out.flush();
            std::process::exit(1);
        }
        "claude-error" => {
            // An API error result, as claude prints it: `claude-error 429 text`.
            let (status, text) = rest.split_once(' ').unwrap_or((rest, "API Error"));
            let status: u16 = status.parse().map_err(|_| "claude-error STATUS TEXT")?;
            let result = serde_json::json!({"type": "result", "subtype": "success", "is_error": true,
                "api_error_status": status, "num_turns": 1, "result": text, "session_id": "s-1"});
            println!("{result}");
            let _ = out.flush();
            std::process::exit(1);
        }
        "set-all-passing" => edit_prd(task.prd()?, |v| {
            for s in v["userStories"].as_array_mut().into_iter().flatten() {
                s["passes"] = serde_json::Value::Bool(true);
            }
        })?,
        "add-story" => {
            let story: serde_json::Value =
                serde_json::from_str(rest).map_err(|e| format!("add-story JSON: {e}"))?;
            edit_prd(task.prd()?, |v| {
                if let Some(a) = v["userStories"].as_array_mut() {
                    a.push(story);
                }
            })?
        }
        "set-story" => {
            let mut parts = rest.splitn(3, ' ');
            let (Some(id), Some(field), Some(value)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err("set-story ID FIELD JSON".into());
            };
            let value: serde_json::Value =
                serde_json::from_str(value).map_err(|e| format!("set-story JSON: {e}"))?;
            edit_prd(task.prd()?, |v| {
                for s in v["userStories"].as_array_mut().into_iter().flatten() {
                    if s["id"] == id {
                        s[field] = value.clone();
                    }
                }
            })?
        }
        "set-verify" => edit_prd(task.prd()?, |v| {
            for s in v["userStories"].as_array_mut().into_iter().flatten() {
                s["verify"] = serde_json::Value::String(rest.to_string());
            }
        })?,
        "run" => {
            // `run git reset --hard HEAD~2`: a program with arguments, no shell.
            let words: Vec<&str> = rest.split_whitespace().collect();
            let (program, args) = words.split_first().ok_or("run PROGRAM ARGS")?;
            let status = Command::new(program).args(args).status().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(format!("{rest}: {status}"));
            }
        }
        "stage" => {
            let e = |e: git2::Error| e.to_string();
            let repo = git2::Repository::discover(".").map_err(e)?;
            let mut index = repo.index().map_err(e)?;
            index.add_path(Path::new(rest.trim())).map_err(e)?;
            index.write().map_err(e)?;
        }
        "claude-result" => {
            let result = serde_json::json!({"type": "result", "subtype": "success", "is_error": false,
                "num_turns": 1, "result": rest, "session_id": "s-1", "total_cost_usd": 0.01});
            println!("{result}");
        }
        "exit" => {
            let _ = out.flush();
            std::process::exit(rest.trim().parse().map_err(|_| "exit CODE")?);
        }
        other => return Err(format!("unknown command {other}")),
    }
    let _ = out.flush();
    Ok(())
}
