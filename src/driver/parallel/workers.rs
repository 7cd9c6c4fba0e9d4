//! Worker processes: `ralph __worker` started in a story's worktree, its
//! JSON events read on a thread of their own and handed to the run over a
//! channel, its end reported the same way.

use crate::event::Event;
use crate::process::Signal;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::Sender;

/// A worker at work.
#[derive(Debug)]
pub(super) struct Slot {
    /// 1..=jobs: the line it has on the screen.
    pub no: u32,
    pub story: String,
    pub title: String,
    /// The worktree, and the project and prd.json in it.
    pub dir: PathBuf,
    pub project: PathBuf,
    pub prd: PathBuf,
    pub branch: String,
    /// Its process, which leads a process group of its own.
    pub pid: i32,
    pub since: chrono::DateTime<chrono::Utc>,
    /// How its run ended, as its `run_end` event said: the outcome, in words.
    pub end: Option<(crate::event::RunOutcome, String)>,
    /// What it is doing: its story, or resolving it onto the run branch.
    pub job: Job,
}

/// What a worker process does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Job {
    /// An iteration of its story.
    Story,
    /// A resolver iteration: the story's work merged onto the tip, where
    /// it conflicts with these stories in these files.
    Resolve { with: Vec<String>, files: Vec<String>, spec: PathBuf },
}

pub(super) enum Msg {
    Event(u32, Box<Event>),
    /// The worker's exit code; `None` when a signal killed it.
    Exited(u32, Option<i32>),
}

/// What every worker is started with.
pub(super) struct Spawn<'a> {
    pub settings: &'a Path,
    /// The run's log folder: each story's logs go in a folder of it.
    pub log_dir: &'a Path,
    pub template: Option<&'a Path>,
    /// The settings a resolver runs with when `merge.resolver` names
    /// another agent than the story's.
    pub resolver_settings: Option<&'a Path>,
}

/// Starts the worker for `slot`; its events and its end arrive on `tx`.
pub(super) fn spawn(
    slot: &Slot,
    spec: &Spawn,
    feedback: Option<&Path>,
    stderr: &Path,
    tx: Sender<Msg>,
) -> std::io::Result<i32> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("__worker")
        .arg("--settings")
        .arg(match (&slot.job, spec.resolver_settings) {
            (Job::Resolve { .. }, Some(resolver)) => resolver,
            _ => spec.settings,
        })
        .arg("--story")
        .arg(&slot.story)
        .arg("--branch")
        .arg(&slot.branch)
        .arg("--prd-file")
        .arg(&slot.prd)
        .arg("--log-dir")
        .arg(spec.log_dir.join(crate::driver::parallel::plan::slug(&slot.story)));
    if let Some(t) = spec.template {
        cmd.arg("--template").arg(t);
    }
    if let Some(f) = feedback {
        cmd.arg("--feedback").arg(f);
    }
    if let Job::Resolve { spec: file, .. } = &slot.job {
        cmd.arg("--resolve").arg(file);
    }
    cmd.current_dir(&slot.project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr)?)
        .process_group(0);
    // ralph killed: each worker stops its agent and keeps its story resumable.
    crate::process::signal_on_parent_death(&mut cmd, Signal::Term);
    let mut child = cmd.spawn()?;
    let pid = child.id() as i32;
    let stdout = child.stdout.take();
    let no = slot.no;
    std::thread::spawn(move || {
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // A line that is not an event (it should not happen) is dropped.
                if let Ok(e) = serde_json::from_str::<Event>(&line)
                    && tx.send(Msg::Event(no, Box::new(e))).is_err()
                {
                    break;
                }
            }
        }
        let code = child.wait().ok().and_then(|s| s.code());
        let _ = tx.send(Msg::Exited(no, code));
    });
    Ok(pid)
}

/// Sends `signal` to a worker's process group (the worker alone: its agent
/// has a group of its own, which the worker ends itself).
pub(super) fn signal(slot: &Slot, signal: Signal) {
    crate::process::signal_group(slot.pid, signal);
}
