//! `GET /events`: the server-sent event stream. Two kinds of message:
//!
//! - the run's events, one `message` each, its data the JSON line `--json`
//!   prints, read by tailing the run's `logs/<run>/events.jsonl` (written by
//!   the loop, in whatever process it runs: `ui::event_log`). The id is
//!   `<run>/<offset>`, so a browser that reconnects (`Last-Event-ID`) goes
//!   on where it stopped. A new client is first sent the run so far: every
//!   event but the agent's output, of which only the latest lines.
//! - `status`: the `ralph status --json` document, whenever it changed.
//!
//! The run followed is the checkpoint's (`state.json`): when a new run
//! starts, the stream moves to its file. A comment every few seconds finds
//! a client that went away. One thread per client: a handful of people
//! look at one project.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Context;
use crate::ui::event_log;

/// How often the file and the status are looked at.
const POLL: Duration = Duration::from_millis(400);
/// How often a comment is sent to a client that gets nothing else.
const KEEPALIVE: Duration = Duration::from_secs(10);
/// The agent's lines a new client is sent of the run so far.
const REPLAY_OUTPUT: usize = 40;
/// Read at most this much of the file at a time.
const CHUNK: usize = 1 << 20;

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

/// The whole lines at the start of `buf`, each with the offset just past
/// it (relative to `buf`), and how many bytes they took. A line still
/// being written (no newline yet) waits for the next read.
pub fn complete_lines(buf: &[u8]) -> (Vec<(&str, usize)>, usize) {
    let mut lines = Vec::new();
    let mut start = 0;
    while let Some(n) = memchr::memchr(b'\n', &buf[start..]) {
        let end = start + n + 1;
        let line = std::str::from_utf8(&buf[start..start + n]).unwrap_or("");
        let line = line.trim_end_matches('\r');
        if !line.trim().is_empty() {
            lines.push((line, end));
        }
        start = end;
    }
    (lines, start)
}

/// Which of a run's lines a new client is sent: every event but the
/// agent's output, and the last `output` lines of that.
pub fn replay<'a>(lines: &[(&'a str, usize)], output: usize) -> Vec<(&'a str, usize)> {
    let is_output = |l: &str| l.contains(r#""event":"agent_output""#);
    let outputs = lines.iter().filter(|(l, _)| is_output(l)).count();
    let mut skip = outputs.saturating_sub(output);
    lines
        .iter()
        .filter(|(l, _)| {
            if is_output(l) && skip > 0 {
                skip -= 1;
                return false;
            }
            true
        })
        .copied()
        .collect()
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

/// Sends the lines of `p`'s file past its offset, and moves the offset
/// on. From the start of the file, only the [`replay`]'s selection.
fn send_new(out: &mut dyn Write, ctx: &Context, p: &mut Position) -> io::Result<bool> {
    let path = ctx.store.run_log_dir(&p.run).join(event_log::FILE);
    let Ok(mut file) = crate::store::open_regular(&path) else { return Ok(false) };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len < p.offset {
        // Replaced by a shorter file: from its start.
        p.offset = 0;
    }
    let mut wrote = false;
    let replaying = p.offset == 0;
    loop {
        if file.seek(SeekFrom::Start(p.offset)).is_err() {
            return Ok(wrote);
        }
        // Replaying reads the whole file, so the selection sees all of it.
        let limit = if replaying { u64::MAX } else { CHUNK as u64 };
        let mut buf = Vec::new();
        if (&mut file).take(limit).read_to_end(&mut buf).is_err() {
            return Ok(wrote);
        }
        let (lines, used) = complete_lines(&buf);
        let chosen = if replaying { replay(&lines, REPLAY_OUTPUT) } else { lines };
        for (line, end) in &chosen {
            let id = format!("{}/{}", p.run, p.offset + *end as u64);
            out.write_all(frame(Some(&id), None, line).as_bytes())?;
            wrote = true;
        }
        p.offset += used as u64;
        if replaying || buf.len() < CHUNK || used == 0 {
            return Ok(wrote);
        }
    }
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
    fn only_whole_lines_are_taken() {
        let (lines, used) = complete_lines(b"one\ntwo\r\n\nthr");
        assert_eq!(lines, [("one", 4), ("two", 9)]);
        assert_eq!(used, 10);
        assert_eq!(complete_lines(b"partial"), (vec![], 0));
    }

    #[test]
    fn a_new_client_gets_every_event_and_the_latest_output() {
        let out = |n: usize| format!(r#"{{"v":1,"event":"agent_output","text":"{n}"}}"#);
        let start = r#"{"v":1,"event":"iteration_start"}"#.to_string();
        let mut owned = vec![start.clone()];
        owned.extend((1..=5).map(out));
        owned.push(r#"{"v":1,"event":"iteration_end"}"#.into());
        let lines: Vec<(&str, usize)> =
            owned.iter().enumerate().map(|(i, l)| (l.as_str(), i)).collect();
        let kept: Vec<usize> = replay(&lines, 2).into_iter().map(|(_, i)| i).collect();
        assert_eq!(kept, [0, 4, 5, 6]);
        assert_eq!(replay(&lines, 10).len(), 7);
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
