//! Capturing a child's output: every byte goes to the iteration's log file,
//! lines go to the analyser and the display, and only bounded tails stay in
//! memory — a gigabyte of output costs a gigabyte of disk, not of RAM.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// The longest line handed to the analyser; the rest of a longer line is
/// still logged, but not analysed.
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// The last `cap` bytes of a stream.
#[derive(Debug, Clone)]
pub struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    dropped: u64,
}

impl Tail {
    pub fn new(cap: usize) -> Tail {
        Tail { buf: VecDeque::with_capacity(cap.min(64 * 1024)), cap, dropped: 0 }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if self.cap == 0 {
            self.dropped += bytes.len() as u64;
            return;
        }
        let bytes = if bytes.len() > self.cap {
            self.dropped += (bytes.len() - self.cap) as u64;
            &bytes[bytes.len() - self.cap..]
        } else {
            bytes
        };
        let over = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..over);
        self.dropped += over as u64;
        self.buf.extend(bytes);
    }

    /// Bytes cut from the front so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The tail as text; when bytes were cut, starts at the next whole line
    /// and is marked with `…`.
    pub fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if self.dropped > 0 {
            if let Some(nl) = text.find('\n').filter(|&i| i + 1 < text.len()) {
                text.drain(..=nl);
            }
            text.insert_str(0, "…\n");
        }
        text
    }
}

/// Splits a byte stream into lines, passing at most [`MAX_LINE`] bytes of
/// each line on (with a flag when it was cut), without the `\r` of a CRLF.
#[derive(Debug, Default)]
pub struct LineSplitter {
    line: Vec<u8>,
    cut: bool,
    keep_cr: bool,
}

impl LineSplitter {
    /// A splitter that passes lines on with their `\r`, for a consumer that
    /// reads line endings itself: the analyser drops exactly one `\r`, as
    /// `ralph analyze` does on a saved log, and must not see a line that
    /// lost one already.
    pub fn keeping_cr() -> LineSplitter {
        LineSplitter { keep_cr: true, ..LineSplitter::default() }
    }

    pub fn push(&mut self, mut chunk: &[u8], on_line: &mut dyn FnMut(&[u8], bool)) {
        while let Some(nl) = memchr::memchr(b'\n', chunk) {
            self.append(&chunk[..nl]);
            let line = if self.keep_cr { &self.line } else { strip_cr(&self.line) };
            on_line(line, self.cut);
            self.line.clear();
            self.cut = false;
            chunk = &chunk[nl + 1..];
        }
        self.append(chunk);
    }

    /// The last line, if the stream did not end with a newline.
    pub fn finish(&mut self, on_line: &mut dyn FnMut(&[u8], bool)) {
        if !self.line.is_empty() || self.cut {
            let line = if self.keep_cr { &self.line } else { strip_cr(&self.line) };
            on_line(line, self.cut);
            self.line.clear();
            self.cut = false;
        }
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = MAX_LINE - self.line.len();
        if bytes.len() > room {
            self.line.extend_from_slice(&bytes[..room]);
            self.cut = true;
        } else {
            self.line.extend_from_slice(bytes);
        }
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The iteration's log file, shared by the stdout and stderr readers.
/// The first write error is kept (a full disk, a file-size limit) and
/// later writes are skipped, so the readers keep draining the pipes and
/// the agent never blocks on a full pipe.
#[derive(Debug)]
pub struct Log {
    file: Option<File>,
    error: Option<io::Error>,
    bytes: u64,
    redactor: Option<crate::redact::Redactor>,
}

pub type SharedLog = Arc<Mutex<Log>>;

impl Log {
    pub fn new(file: Option<File>) -> SharedLog {
        Log::redacted(file, None)
    }

    /// A log that replaces secrets before they reach the disk.
    pub fn redacted(file: Option<File>, redactor: Option<crate::redact::Redactor>) -> SharedLog {
        Arc::new(Mutex::new(Log { file, error: None, bytes: 0, redactor }))
    }

    pub fn write(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let bytes = match &self.redactor {
            Some(r) => r.bytes(bytes),
            None => std::borrow::Cow::Borrowed(bytes),
        };
        if let Some(f) = self.file.as_mut() {
            match f.write_all(&bytes) {
                Ok(()) => self.bytes += bytes.len() as u64,
                Err(e) => self.error = Some(e),
            }
        }
    }

    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Per-stream buffer that hands the log whole lines where it can, so the
/// stdout and stderr lines of one log file do not interleave mid-line.
#[derive(Debug, Default)]
pub struct LogLines {
    pending: Vec<u8>,
}

impl LogLines {
    const FLUSH_AT: usize = 64 * 1024;

    pub fn push(&mut self, chunk: &[u8], log: &SharedLog) {
        match chunk.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                if !self.pending.is_empty() {
                    log.write(&self.pending);
                    self.pending.clear();
                }
                log.write(&chunk[..=last]);
                drop(log);
                self.pending.extend_from_slice(&chunk[last + 1..]);
            }
            None => self.pending.extend_from_slice(chunk),
        }
        if self.pending.len() >= Self::FLUSH_AT {
            self.flush(log);
        }
    }

    pub fn flush(&mut self, log: &SharedLog) {
        if !self.pending.is_empty() {
            log.lock().unwrap_or_else(|p| p.into_inner()).write(&self.pending);
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes_and_marks_the_cut() {
        let mut t = Tail::new(10);
        t.push(b"line one\nline two\nend\n");
        assert!(t.buf.len() <= 10);
        assert_eq!(t.text(), "…\nend\n");
        let mut t = Tail::new(100);
        t.push(b"short\n");
        assert_eq!(t.text(), "short\n");
        let mut t = Tail::new(4);
        t.push(&[b'x'; 1000]);
        assert_eq!(t.dropped(), 996);
    }

    #[test]
    fn splitter_handles_chunk_boundaries_crlf_and_giant_lines() {
        let mut s = LineSplitter::default();
        let mut lines = Vec::new();
        let mut on =
            |l: &[u8], cut: bool| lines.push((String::from_utf8_lossy(l).into_owned(), cut));
        s.push(b"ab", &mut on);
        s.push(b"c\r\nde", &mut on);
        s.push(b"f\n", &mut on);
        s.push(b"tail", &mut on);
        s.finish(&mut on);
        assert_eq!(lines, [("abc".into(), false), ("def".into(), false), ("tail".into(), false)]);

        let mut s = LineSplitter::default();
        let mut got = Vec::new();
        let chunk = vec![b'y'; 1024 * 1024];
        for _ in 0..6 {
            s.push(&chunk, &mut |l, cut| got.push((l.len(), cut)));
        }
        s.push(b"\nnext\n", &mut |l, cut| got.push((l.len(), cut)));
        assert_eq!(got, [(MAX_LINE, true), (4, false)]);
        assert!(s.line.capacity() <= MAX_LINE + chunk.len());
    }

    #[test]
    fn keeping_cr_passes_line_endings_on_whole() {
        let mut s = LineSplitter::keeping_cr();
        let mut lines = Vec::new();
        let mut on = |l: &[u8], _: bool| lines.push(l.to_vec());
        s.push(b"a\r\r\nb\r", &mut on);
        s.finish(&mut on);
        assert_eq!(lines, [b"a\r\r".to_vec(), b"b\r".to_vec()]);
    }

    #[test]
    fn log_lines_write_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let log = Log::new(Some(File::create(&path).unwrap()));
        let (mut out, mut err) = (LogLines::default(), LogLines::default());
        out.push(b"out-par", &log);
        err.push(b"err-line\n", &log);
        out.push(b"tial\n", &log);
        out.flush(&log);
        err.flush(&log);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "err-line\nout-partial\n");
    }
}
