//! `GET /events`: the server-sent event stream. Two kinds of message:
//!
//! - the run's events, one `message` each, its data the JSON line `--json`
//!   prints, read by tailing the run's `logs/<run>/events.jsonl` (written by
//!   the loop, in whatever process it runs: `history::Recorder`). The id is
//!   `<run>/<offset>`, so a browser that reconnects (`Last-Event-ID`) goes
//!   on where it stopped. A new client is first sent the run so far: every
//!   event but the agent's output, of which only the latest lines.
//! - `status`: the `ralph status --json` document, whenever it changed.
//!
//! The run followed is the checkpoint's (`state.json`): when a new run
//! starts, the stream moves to its file. A comment every few seconds finds
//! a client that went away. One thread per client: a handful of people
//! look at one project.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Context;

/// How often the file and the status are looked at.
const POLL: Duration = Duration::from_millis(400);
/// How often a comment is sent to a client that gets nothing else.
const KEEPALIVE: Duration = Duration::from_secs(10);
/// The agent's lines a new client is sent of the run so far.
const REPLAY_OUTPUT: usize = 40;

/// Where the stream stands in a run's event file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub run: String,
    pub offset: u64,
}

/// Reads `Last-Event-ID`: `<run>/<offset>`.
pub fn parse_id(id: &str) -> Option<Position> {
    let (run, offset) = id.rsplit_once('/')?;
    let offset = offset.parse().ok()?;
    crate::state::valid_run_id(run).then(|| Position { run: run.to_string(), offset })
}

/// One message: `id:`, `event:` and one `data:` line per line of `data`.
pub fn frame(id: Option<&str>, event: Option<&str>, data: &str) -> String {
    let mut out = String::new();
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\n"));
    }
    if let Some(event) = event {
        out.push_str(&format!("event: {event}\n"));
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    out
}

/// What a new client is sent of the run so far: every event but the
/// agent's output, and the last `limit` lines of that. Fed line by line,
/// so memory holds the run's few other events, not its output.
pub struct Replay {
    limit: usize,
    kept: Vec<(String, u64)>,
    output: VecDeque<(String, u64)>,
}

impl Replay {
    pub fn new(limit: usize) -> Replay {
        Replay { limit, kept: Vec::new(), output: VecDeque::new() }
    }

    /// A line, and the offset just past it.
    pub fn push(&mut self, line: String, end: u64) {
        if crate::history::is_agent_output(&line) {
            self.output.push_back((line, end));
            if self.output.len() > self.limit {
                self.output.pop_front();
            }
        } else {
            self.kept.push((line, end));
        }
    }

    /// The chosen lines, in the file's order.
    pub fn finish(self) -> Vec<(String, u64)> {
        let mut all = self.kept;
        all.extend(self.output);
        all.sort_by_key(|(_, end)| *end);
        all
    }
}

/// Streams to `out` until the client goes away or the server stops.
pub fn stream(out: &mut dyn Write, ctx: &Arc<Context>, last: Option<Position>) -> io::Result<()> {
    out.write_all(b"retry: 2000\n\n")?;
    out.flush()?;
    let mut at: Option<Position> = last;
    let mut sent_status = String::new();
    let mut last_sent = Instant::now();
    while !ctx.stopping() {
        let mut wrote = false;
        let status = ctx.status_compact();
        if status != sent_status {
            out.write_all(frame(None, Some("status"), &status).as_bytes())?;
            sent_status = status;
            wrote = true;
        }
        if let Some(run) = ctx.current_run_id() {
            if at.as_ref().is_none_or(|p| p.run != run) {
                // A new run, or the first look: from its start.
                at = Some(Position { run, offset: 0 });
            }
            if let Some(p) = at.as_mut() {
                wrote |= send_new(out, ctx, p)?;
            }
        }
        if wrote {
            out.flush()?;
            last_sent = Instant::now();
        } else if last_sent.elapsed() >= KEEPALIVE {
            out.write_all(b": keepalive\n\n")?;
            out.flush()?;
            last_sent = Instant::now();
        }
        std::thread::sleep(POLL);
    }
    Ok(())
}

/// Sends the whole lines of `p`'s file past its offset, and moves the
/// offset on; a line still being written waits for the next look. From
/// the start of the file, only the [`Replay`]'s selection.
fn send_new(out: &mut dyn Write, ctx: &Context, p: &mut Position) -> io::Result<bool> {
    let path = ctx.store.run_log_dir(&p.run).join(crate::history::EVENTS_FILE);
    let Ok(mut file) = crate::store::open_regular(&path) else { return Ok(false) };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < p.offset {
        // Replaced by a shorter file: from its start.
        p.offset = 0;
    }
    if len == p.offset || file.seek(SeekFrom::Start(p.offset)).is_err() {
        return Ok(false);
    }
    let mut replay = (p.offset == 0).then(|| Replay::new(REPLAY_OUTPUT));
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut wrote = false;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(n) if n > 0 && line.ends_with(b"\n") => p.offset += n as u64,
            _ => break,
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        if text.is_empty() {
            continue;
        }
        match &mut replay {
            Some(r) => r.push(text, p.offset),
            None => {
                out.write_all(
                    frame(Some(&format!("{}/{}", p.run, p.offset)), None, &text).as_bytes(),
                )?;
                wrote = true;
            }
        }
    }
    for (text, end) in replay.map(Replay::finish).unwrap_or_default() {
        out.write_all(frame(Some(&format!("{}/{end}", p.run)), None, &text).as_bytes())?;
        wrote = true;
    }
    Ok(wrote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_follow_the_event_stream_format() {
        assert_eq!(frame(None, None, r#"{"a":1}"#), "data: {\"a\":1}\n\n");
        assert_eq!(
            frame(Some("r/10"), Some("status"), "a\nb"),
            "id: r/10\nevent: status\ndata: a\ndata: b\n\n"
        );
    }

    #[test]
    fn a_new_client_gets_every_event_and_the_latest_output() {
        let out = |n: u64| format!(r#"{{"v":1,"event":"agent_output","text":"{n}"}}"#);
        let mut r = Replay::new(2);
        r.push(r#"{"v":1,"event":"iteration_start"}"#.into(), 0);
        for n in 1..=5 {
            r.push(out(n), n);
        }
        r.push(r#"{"v":1,"event":"iteration_end"}"#.into(), 6);
        let kept: Vec<u64> = r.finish().into_iter().map(|(_, end)| end).collect();
        assert_eq!(kept, [0, 4, 5, 6]);
        let mut all = Replay::new(10);
        (1..=3).for_each(|n| all.push(out(n), n));
        assert_eq!(all.finish().len(), 3);
    }

    #[test]
    fn last_event_ids_are_read_back() {
        assert_eq!(
            parse_id("20261203-101500-3a7f-9c41e2/1234"),
            Some(Position { run: "20261203-101500-3a7f-9c41e2".into(), offset: 1234 })
        );
        for bad in ["", "x", "../a/1", "r/-1", "r/x", "a b/1"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }
}
