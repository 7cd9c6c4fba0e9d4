//! `ralph demo`: the real loop, on a throw-away git project, driven by a
//! built-in scripted agent (ralph itself, `ralph __demo-agent`), so a
//! newcomer sees every part — story selection, fresh agents, commits, the
//! gate catching a false "done", the lesson fed back, completion — without
//! an API key.
//!
//! The scripted agent works like a real one: it reads its prompt on stdin,
//! finds its story and the file paths in it, edits a file, sets `passes`,
//! appends to progress.txt, writes its handoff and commits.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::cli::{DemoArgs, Global, SettingArgs};
use crate::config::Layers;
use crate::config::keys::Setting;
use crate::error::Error;
use crate::git::Repo;
use crate::paths::Paths;

use super::common::{eprint, print, reporter};
use super::flags;

/// The demo stories: id, title, file, content.
const STORIES: &[(&str, &str, &str, &str)] = &[
    ("US-001", "Say hello", "hello.txt", "Hello, world!"),
    ("US-002", "Say goodbye", "goodbye.txt", "Goodbye, world!"),
    ("US-003", "List the greetings", "index.txt", "hello.txt\ngoodbye.txt"),
];

fn prd_json(exe: &str) -> String {
    let stories: Vec<Value> = STORIES
        .iter()
        .enumerate()
        .map(|(i, (id, title, file, content))| {
            serde_json::json!({
                "id": id,
                "title": title,
                "description": format!("As a visitor, I want {file} to greet me."),
                "acceptanceCriteria": [format!("{file} contains exactly: {}", content.replace('\n', " / ")), "The check passes"],
                "priority": i + 1,
                "passes": false,
                "notes": "",
                "verify": format!("{exe} __demo-check {id}"),
            })
        })
        .collect();
    let prd = serde_json::json!({
        "project": "Greeter",
        "branchName": "ralph/greeter",
        "description": "A demo project: three tiny stories, one deliberately botched on the first try.",
        "userStories": stories,
    });
    serde_json::to_string_pretty(&prd).unwrap_or_default() + "\n"
}

/// Creates the demo project and runs the loop on it.
pub(crate) fn run(g: &Global, args: &DemoArgs) -> Result<u8, Error> {
    let dir = match &args.into {
        Some(d) => d.clone(),
        None => std::env::temp_dir()
            .join(format!("ralph-demo-{}", chrono::Local::now().format("%Y%m%d-%H%M%S"))),
    };
    if dir.join("prd.json").exists() {
        return Err(Error::Usage(format!(
            "{} already holds a prd.json; pick another --into folder",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let exe = std::env::current_exe().map_err(|e| Error::io("find ralph's own executable", e))?;
    let exe_s = exe.display().to_string();
    let repo = Repo::init(&dir)?;
    std::fs::write(dir.join("README.md"), "# Greeter\n\nA demo project for ralph.\n")
        .map_err(|e| Error::io("write the demo README", e))?;
    repo.commit_paths(&[Path::new("README.md")], "Initial commit")?;
    std::fs::write(dir.join("prd.json"), prd_json(&exe_s))
        .map_err(|e| Error::io("write the demo prd.json", e))?;
    repo.commit_paths(&[Path::new("prd.json")], "Add the PRD")?;

    let mut layers = Layers::defaults();
    let s = |v: &str| toml::Value::String(v.into());
    let command = toml::Value::Array(vec![
        s(&exe_s),
        s("__demo-agent"),
        s("--pace"),
        s(&format!("{}", args.pace.clamp(0.0, 5.0))),
    ]);
    layers.flag(Setting::AgentTool, s("custom"), "ralph demo")?;
    layers.flag(Setting::AgentCommand, command, "ralph demo")?;
    layers.flag(Setting::AgentTimeout, s("2m"), "ralph demo")?;
    layers.flag(Setting::AgentIdleTimeout, s("1m"), "ralph demo")?;
    layers.flag(Setting::LimitsCallsPerHour, toml::Value::Integer(0), "ralph demo")?;
    // The global setting flags (--color); the demo takes no run options.
    flags::apply(&mut layers, g, &SettingArgs::default())?;
    let config = layers.resolve();
    let (mut reporter, style) = reporter(g, &config);
    let paths = Paths::resolve(&dir, None)?;
    let opts = crate::driver::Options {
        mode: crate::driver::Mode::for_jobs(config.run.jobs),
        config,
        max_iterations: 8,
        prompt_file: None,
        fresh: true,
        explicit_max: true,
        agent_output: style.agent_output || g.json,
        layers: Some(layers),
    };
    if !g.json {
        print(&format!("ralph demo: a throw-away project in {}\n\n", paths.project.display()))?;
    }
    let code = crate::driver::run(&paths, &opts, reporter.as_mut())?;
    if !g.json {
        let d = paths.project.display();
        print(&format!(
            "\nThe demo project stays in {d}. Look around:\n  git -C {d} log --oneline\n  ralph -C {d} status\n  ls {d}/.git/ralph/logs/*/\n"
        ))?;
    }
    Ok(code)
}

/// The paths and story the prompt names (the built-in template's lines).
struct Task {
    story: String,
    prd: PathBuf,
    progress: PathBuf,
    handoff: PathBuf,
}

fn backticked(prompt: &str, label: &str) -> Option<PathBuf> {
    let line = prompt.lines().find(|l| l.contains(label))?;
    let start = line.find('`')? + 1;
    let end = start + line[start..].find('`')?;
    Some(PathBuf::from(&line[start..end]))
}

fn read_task(prompt: &str) -> Option<Task> {
    let first = prompt.lines().next()?;
    let story = first.rsplit("story ").next()?.trim().to_string();
    Some(Task {
        story,
        prd: backticked(prompt, "PRD (the task list)")?,
        progress: backticked(prompt, "Progress log")?,
        handoff: backticked(prompt, "Your handoff file")?,
    })
}

/// `ralph __demo-agent`: one iteration of the scripted agent.
pub(crate) fn agent(pace: f64) -> u8 {
    let pause = || std::thread::sleep(Duration::from_secs_f64(pace.clamp(0.0, 5.0)));
    let say = |line: &str| {
        let _ = print(&format!("{line}\n"));
        pause();
    };
    let mut prompt = String::new();
    if std::io::stdin().read_to_string(&mut prompt).is_err() {
        eprint("demo agent: cannot read the prompt from stdin\n");
        return 1;
    }
    let Some(task) = read_task(&prompt) else {
        eprint("demo agent: the prompt does not name a story and its files\n");
        return 1;
    };
    let Some(&(id, title, file, content)) = STORIES.iter().find(|s| s.0 == task.story) else {
        eprint(&format!("demo agent: unknown story {}\n", task.story));
        return 1;
    };
    let project = task.prd.parent().map(Path::to_path_buf).unwrap_or_default();
    say(&format!("Reading {} and the PRD.", task.progress.display()));
    say(&format!("Working on {id}: {title}."));
    // The second story goes wrong the first time, as agents' work sometimes
    // does: ralph's gate catches it, and the next prompt carries the failure.
    let told = prompt.contains(&format!("{file}: expected"));
    let text = if id == "US-002" && !told {
        say("Writing goodbye.txt (quickly, without running the check).");
        "Goodby, world!"
    } else {
        if told {
            say(&format!("The last check said {file} was wrong; fixing it."));
        }
        say(&format!("Writing {file}."));
        content
    };
    if let Err(e) = std::fs::write(project.join(file), format!("{text}\n")) {
        eprint(&format!("demo agent: cannot write {file}: {e}\n"));
        return 1;
    }
    if let Err(e) = mark_passing(&task.prd, id) {
        eprint(&format!("demo agent: cannot update the PRD: {e}\n"));
        return 1;
    }
    leave_notes(&task, id, file);
    match commit_all(&project, &format!("feat: {id} - {title}")) {
        Ok(()) => say(&format!("Committed: feat: {id} - {title}")),
        Err(e) => {
            eprint(&format!("demo agent: commit failed: {e}\n"));
            return 1;
        }
    }
    let _ = print(&status_block(&task.prd));
    0
}

/// What an agent leaves for the next iteration: an entry in progress.txt
/// and its handoff. Best effort, as a real agent's would be.
fn leave_notes(task: &Task, id: &str, file: &str) {
    let entry = format!(
        "\n## {} - {id}\n- Wrote {file}\n- Files changed: {file}, prd.json\n- **Learnings for future iterations:**\n  - Each greeting lives in its own text file; the check compares the exact content.\n---\n",
        chrono::Local::now().format("%Y-%m-%d %H:%M")
    );
    let _ = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&task.progress)
        .and_then(|mut f| std::io::Write::write_all(&mut f, entry.as_bytes()));
    let handoff = serde_json::json!({
        "status": "complete",
        "summary": format!("Wrote {file} for {id}."),
        "evidence": [format!("{file} written")],
        "nextSteps": [],
        "blocker": "",
    });
    let _ =
        std::fs::write(&task.handoff, serde_json::to_string_pretty(&handoff).unwrap_or_default());
}

/// The RALPH_STATUS block the agent ends with, and `COMPLETE` once every
/// story in `prd` passes.
fn status_block(prd: &Path) -> String {
    let all_pass = std::fs::read_to_string(prd)
        .ok()
        .and_then(|t| crate::prd::Prd::parse(t.as_bytes(), prd).ok())
        .is_some_and(|p| p.all_pass());
    let mut block = format!(
        "---RALPH_STATUS---\nSTATUS: {}\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 3\nTESTS_STATUS: NOT_RUN\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: {all_pass}\nRECOMMENDATION: {}\n---END_RALPH_STATUS---\n",
        if all_pass { "COMPLETE" } else { "IN_PROGRESS" },
        if all_pass { "all stories are done" } else { "continue with the next story" }
    );
    if all_pass {
        block.push_str(&format!("{}\n", crate::analyze::PROMISE_COMPLETE));
    }
    block
}

/// Why the demo agent cannot mark its story.
#[derive(Debug, thiserror::Error)]
enum MarkError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Prd(#[from] crate::prd::PrdError),
}

fn mark_passing(prd: &Path, id: &str) -> Result<(), MarkError> {
    let text = std::fs::read_to_string(prd)?;
    let mut p = crate::prd::Prd::parse(text.as_bytes(), prd)?;
    p.set_passes(id, true);
    Ok(p.save(prd)?)
}

fn commit_all(dir: &Path, message: &str) -> Result<(), git2::Error> {
    let repo = git2::Repository::discover(dir)?;
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = repo
        .signature()
        .or_else(|_| git2::Signature::now("demo agent", "agent@example.invalid"))?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)?;
    Ok(())
}

/// `ralph __demo-check STORY`: the demo's per-story gate.
pub(crate) fn check(story: &str) -> u8 {
    let Some(&(_, _, file, content)) = STORIES.iter().find(|s| s.0 == story) else {
        eprint(&format!("unknown story {story}\n"));
        return 2;
    };
    let (code, text) = match std::fs::read_to_string(file) {
        Ok(found) if found.trim_end() == content => (0, format!("ok: {file} is right\n")),
        Ok(found) => (
            1,
            format!(
                "FAIL {file}: expected {content:?}, found {:?}\n{file}: expected {content:?}\n",
                found.trim_end()
            ),
        ),
        Err(e) => (1, format!("FAIL {file}: {e}\n{file}: expected {content:?}\n")),
    };
    let _ = print(&text);
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_agent_reads_its_task_from_the_built_in_prompt() {
        let prompt = crate::prompt::render(
            crate::prompt::BUILTIN,
            &[
                ("iteration", "1"),
                ("story_id", "US-002"),
                ("prd_path", "/p/prd.json"),
                ("progress_path", "/p/progress.txt"),
                ("handoff_path", "/p/.ralph/handoff.json"),
            ],
        );
        let task = read_task(&prompt).unwrap();
        assert_eq!(task.story, "US-002");
        assert_eq!(task.prd, PathBuf::from("/p/prd.json"));
        assert_eq!(task.progress, PathBuf::from("/p/progress.txt"));
        assert_eq!(task.handoff, PathBuf::from("/p/.ralph/handoff.json"));
        let prd =
            crate::prd::Prd::parse(prd_json("ralph").as_bytes(), Path::new("prd.json")).unwrap();
        assert_eq!(prd.stories().len(), STORIES.len());
        assert!(prd.stories().iter().all(|s| s.verify.is_some()));
    }
}
