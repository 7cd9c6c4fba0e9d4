//! `ralph status --remote URL`: a run of remote workers from the remote
//! alone — no clone of the project, no state of this machine. Each look is
//! a shallow fetch into a scratch repository, removed afterwards.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Local, Utc};

use crate::cli::{Global, StatusArgs};
use crate::driver::{RemoteRun, StoryState, remote_runs};
use crate::error::Error;

use super::common::print_more;

pub(crate) fn run(g: &Global, args: &StatusArgs, url: &str) -> Result<u8, Error> {
    let scratch = std::env::temp_dir().join(format!("ralph-status-{}", std::process::id()));
    crate::signals::install();
    let defaults = [PathBuf::from("prd.json"), PathBuf::from("scripts/ralph/prd.json")];
    let prds: Vec<&Path> = match g.prd.as_deref() {
        Some(p) => vec![p],
        None => defaults.iter().map(PathBuf::as_path).collect(),
    };
    let result = (|| loop {
        let runs = remote_runs(url, &scratch, args.branch.as_deref(), &prds)?;
        let text = match (g.json, args.watch) {
            (true, false) => {
                let doc = serde_json::json!({ "version": 1, "remote": url, "runs": runs });
                serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
            }
            (true, true) => {
                let doc = serde_json::json!({ "version": 1, "remote": url, "runs": runs });
                serde_json::to_string(&doc).unwrap_or_default() + "\n"
            }
            (false, _) => render(url, &runs, Utc::now()),
        };
        if !print_more(&text)? || !args.watch {
            return Ok(0);
        }
        if !super::common::watch_pause(args.interval) {
            return Ok(0);
        }
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn ago(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let s = (now - t).num_seconds();
    match s {
        i64::MIN..=-1 => format!("in {}", span(-s)),
        0..=4 => "just now".into(),
        _ => format!("{} ago", span(s)),
    }
}

fn span(s: i64) -> String {
    match s {
        0..=99 => format!("{s}s"),
        100..=5999 => format!("{}m", s / 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

fn at(t: DateTime<Utc>) -> String {
    t.with_timezone(&Local).format("%H:%M:%S").to_string()
}

fn render(url: &str, runs: &[RemoteRun], now: DateTime<Utc>) -> String {
    let mut o = String::new();
    for r in runs {
        let tip = r.tip.as_deref().map_or("no branch".to_string(), |t| t[..7.min(t.len())].into());
        let _ = writeln!(o, "remote {url} · run {} ({tip})", r.branch);
        match &r.prd_error {
            Some(e) => {
                let _ = writeln!(o, "  stories: cannot be read: {e}");
            }
            None => {
                let _ = writeln!(o, "  stories: {}/{} verified", r.passing, r.total);
            }
        }
        for s in &r.stories {
            let (mark, what) = match (s.state, &s.claim) {
                (StoryState::Verified, _) => ("✓", String::new()),
                (StoryState::Claimed, Some(c)) => (
                    "▶",
                    format!(
                        " · {} holds it until {} ({})",
                        c.worker,
                        at(c.lease_until),
                        ago(c.lease_until, now)
                    ),
                ),
                (StoryState::Expired, Some(c)) => (
                    "!",
                    format!(
                        " · {}'s lease ran out {}: the next free worker takes it over",
                        c.worker,
                        ago(c.lease_until, now)
                    ),
                ),
                (StoryState::GivenUp, Some(c)) => (
                    "✗",
                    format!(
                        " · given up by {}: {}",
                        c.worker,
                        c.given_up.as_deref().unwrap_or("no reason given")
                    ),
                ),
                (StoryState::Waiting, _) => {
                    ("·", format!(" · waits on {}", s.waiting_on.join(", ")))
                }
                _ => ("·", String::new()),
            };
            let _ = writeln!(o, "  {mark} {} {}{what}", s.id, s.title);
        }
        if r.workers.is_empty() {
            let _ = writeln!(o, "  workers: none holds a story");
        }
        for w in &r.workers {
            let beat = w.heartbeat.map_or("never".into(), |t| ago(t, now));
            let lost = if w.lost { " · lost (every lease it holds ran out)" } else { "" };
            let _ = writeln!(
                o,
                "  worker {} · {} · heartbeat {beat}{lost}",
                w.id,
                w.stories.join(", ")
            );
        }
        if let Some(s) = &r.stopped {
            let _ = writeln!(
                o,
                "  stopped by {} at {} ({}): {}; a worker started since goes on",
                s.by,
                at(s.at),
                s.outcome,
                s.message
            );
        }
        if let Some(t) = r.usage_limit_until {
            let _ =
                writeln!(o, "  usage limit: every worker waits until {} ({})", at(t), ago(t, now));
        }
    }
    o
}
