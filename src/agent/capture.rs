//! Capturing a child's output: its bytes go to the iteration's log file (up
//! to `logs.max_file_bytes`: then its head and its tail), lines go to the
//! analyser and the display, and only bounded tails stay in memory — a
//! gigabyte of output costs neither a gigabyte of RAM nor of disk.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// The longest line handed to the analyser; the rest of a longer line is
/// still logged, but not analysed.
pub(crate) const MAX_LINE: usize = 4 * 1024 * 1024;

/// The most a capped log keeps of its end, in memory until it is written:
/// the rest of the cap is its head.
const MAX_LOG_TAIL: u64 = 1 << 20;

/// The last `cap` bytes of a stream.
#[derive(Debug, Clone)]
pub(crate) struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    dropped: u64,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Tail {
        Tail { buf: VecDeque::with_capacity(cap.min(64 * 1024)), cap, dropped: 0 }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
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

    /// The bytes kept and how many were dropped before them; empties it.
    pub(crate) fn take(&mut self) -> (Vec<u8>, u64) {
        let bytes: Vec<u8> = self.buf.drain(..).collect();
        (bytes, std::mem::take(&mut self.dropped))
    }

    /// The tail as text; when bytes were cut, starts at the next whole line
    /// and is marked with `…`.
    pub(crate) fn text(&self) -> String {
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

/// Splits a byte stream into lines, without their `\n`: each line is passed
/// on cut to at most [`MAX_LINE`] bytes, with the length it really had (the
/// rest is never kept). The one splitter of agent output, live from a pipe
/// and from a saved log (`analyze::analyze_reader`), so both read the same
/// lines.
///
/// A plain splitter also drops the `\r` of a CRLF; one made with
/// [`keeping_cr`](LineSplitter::keeping_cr) passes it on.
#[derive(Debug, Default)]
pub struct LineSplitter {
    line: Vec<u8>,
    /// The length of the current line so far, cut or not.
    len: usize,
    keep_cr: bool,
}

impl LineSplitter {
    /// A splitter that passes lines on with their `\r`, for a consumer that
    /// reads line endings itself: the analyser drops exactly one `\r`, and
    /// must not see a line that lost one already.
    pub fn keeping_cr() -> LineSplitter {
        LineSplitter { keep_cr: true, ..LineSplitter::default() }
    }

    /// Passes on every line `chunk` completes, as `(line, full length)`.
    pub fn push(&mut self, mut chunk: &[u8], on_line: &mut dyn FnMut(&[u8], usize)) {
        while let Some(nl) = memchr::memchr(b'\n', chunk) {
            self.append(&chunk[..nl]);
            self.emit(on_line);
            chunk = &chunk[nl + 1..];
        }
        self.append(chunk);
    }

    /// The last line, if the stream did not end with a newline.
    pub fn finish(&mut self, on_line: &mut dyn FnMut(&[u8], usize)) {
        if self.len > 0 {
            self.emit(on_line);
        }
    }

    fn append(&mut self, bytes: &[u8]) {
        let room = MAX_LINE - self.line.len();
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.len = self.len.saturating_add(bytes.len());
    }

    fn emit(&mut self, on_line: &mut dyn FnMut(&[u8], usize)) {
        let whole = self.len == self.line.len();
        match self.line.strip_suffix(b"\r") {
            Some(line) if whole && !self.keep_cr => on_line(line, self.len - 1),
            _ => on_line(&self.line, self.len),
        }
        self.line.clear();
        self.len = 0;
    }
}

/// The iteration's log file, shared by the stdout and stderr readers.
/// The first write error is kept (a full disk, a file-size limit) and
/// later writes are skipped, so the readers keep draining the pipes and
/// the agent never blocks on a full pipe.
///
/// A log with a cap (`logs.max_file_bytes`) keeps its start as written and
/// only the end of the rest (half the cap, at most [`MAX_LOG_TAIL`]), in
/// memory, until [`Log::finish`] writes it after a line saying how much
/// was cut: the start says what ran, the end how it ended.
#[derive(Debug)]
pub(crate) struct Log {
    file: Option<File>,
    error: Option<io::Error>,
    redactor: Option<crate::redact::Redactor>,
    /// Bytes the head may still take (`u64::MAX`: no cap).
    head_left: u64,
    /// The last bytes past the head, when there is a cap.
    tail: Option<Tail>,
}

pub(crate) type SharedLog = Arc<Mutex<Log>>;

impl Log {
    /// A log that replaces secrets (when given a redactor) before they
    /// reach the disk, keeping at most about `cap` bytes (0: no cap).
    pub(crate) fn capped(
        file: Option<File>,
        redactor: Option<crate::redact::Redactor>,
        cap: u64,
    ) -> SharedLog {
        let (head_left, tail) = match cap {
            0 => (u64::MAX, None),
            cap => {
                let tail = (cap / 2).min(MAX_LOG_TAIL);
                (cap - tail, Some(Tail::new(usize::try_from(tail).unwrap_or(usize::MAX))))
            }
        };
        Arc::new(Mutex::new(Log { file, error: None, redactor, head_left, tail }))
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let bytes = match &self.redactor {
            Some(r) => r.bytes(bytes),
            None => std::borrow::Cow::Borrowed(bytes),
        };
        let head = bytes.len().min(usize::try_from(self.head_left).unwrap_or(usize::MAX));
        self.head_left -= head as u64;
        if head < bytes.len()
            && let Some(tail) = self.tail.as_mut()
        {
            tail.push(&bytes[head..]);
        }
        if let Some(f) = self.file.as_mut()
            && let Err(e) = f.write_all(&bytes[..head])
        {
            self.error = Some(e);
        }
    }

    /// Writes what a capped log kept of its end, after a line saying how
    /// much was cut. Later writes go to the tail again.
    pub(crate) fn finish(&mut self) {
        let Some(tail) = self.tail.as_mut() else { return };
        let (mut bytes, mut cut) = tail.take();
        if cut > 0
            && let Some(nl) =
                bytes.iter().position(|&b| b == b'\n').filter(|&i| i + 1 < bytes.len())
        {
            // The end starts at a whole line.
            bytes.drain(..=nl);
            cut += nl as u64 + 1;
        }
        if bytes.is_empty() || self.error.is_some() {
            return;
        }
        let mut out = Vec::with_capacity(bytes.len() + 100);
        if cut > 0 {
            out.extend_from_slice(
                format!(
                    "\n[ralph] … {cut} bytes of output cut here (logs.max_file_bytes); the end \
                     follows …\n"
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(&bytes);
        if let Some(f) = self.file.as_mut()
            && let Err(e) = f.write_all(&out)
        {
            self.error = Some(e);
        }
    }

    pub(crate) fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }
}

/// Per-stream buffer that hands the log whole lines where it can, so the
/// stdout and stderr lines of one log file do not interleave mid-line.
#[derive(Debug, Default)]
pub(crate) struct LogLines {
    pending: Vec<u8>,
}

impl LogLines {
    const FLUSH_AT: usize = 64 * 1024;

    pub(crate) fn push(&mut self, chunk: &[u8], log: &SharedLog) {
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

    pub(crate) fn flush(&mut self, log: &SharedLog) {
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
        assert_eq!(t.dropped, 996);
    }

    /// Every line `splitter` makes of `chunks`, with its full length.
    fn split(mut splitter: LineSplitter, chunks: &[&[u8]]) -> Vec<(String, usize)> {
        let mut lines = Vec::new();
        let mut on = |l: &[u8], len| lines.push((String::from_utf8_lossy(l).into_owned(), len));
        chunks.iter().for_each(|chunk| splitter.push(chunk, &mut on));
        splitter.finish(&mut on);
        lines
    }

    #[test]
    fn splitter_handles_chunk_boundaries_and_line_ends() {
        let line = |text: &str, len| (text.to_string(), len);
        #[rustfmt::skip]
        let cases: &[(&str, bool, &[&[u8]], Vec<(String, usize)>)] = &[
            ("chunks", false, &[b"ab", b"c\r\nde", b"f\n", b"tail"], vec![line("abc", 3), line("def", 3), line("tail", 4)]),
            ("empty lines, no last line", false, &[b"a\n\n", b"\n"], vec![line("a", 1), line("", 0), line("", 0)]),
            ("one \\r dropped", false, &[b"a\r\r\nb\r"], vec![line("a\r", 2), line("b", 1)]),
            ("keeping \\r", true, &[b"a\r\r\nb\r"], vec![line("a\r\r", 3), line("b\r", 2)]),
            ("a \\r split from its \\n", true, &[b"a\r", b"\nb"], vec![line("a\r", 2), line("b", 1)]),
            ("nothing", true, &[b""], vec![]),
        ];
        for (name, keep_cr, chunks, want) in cases {
            let splitter =
                if *keep_cr { LineSplitter::keeping_cr() } else { LineSplitter::default() };
            assert_eq!(split(splitter, chunks), *want, "{name}");
        }
    }

    #[test]
    fn a_giant_line_is_cut_and_measured() {
        let mut s = LineSplitter::default();
        let mut got = Vec::new();
        let chunk = vec![b'y'; 1024 * 1024];
        for _ in 0..6 {
            s.push(&chunk, &mut |l, len| got.push((l.len(), len)));
        }
        s.push(b"\r\nnext\n", &mut |l, len| got.push((l.len(), len)));
        assert_eq!(got, [(MAX_LINE, 6 * 1024 * 1024 + 1), (4, 4)]);
        assert!(s.line.capacity() <= MAX_LINE + chunk.len());
    }

    #[test]
    fn a_capped_log_keeps_its_head_and_its_tail_and_says_what_it_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let log = Log::capped(Some(File::create(&path).unwrap()), None, 200);
        let lines: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
        for chunk in lines.as_bytes().chunks(7) {
            log.lock().unwrap().write(chunk);
        }
        log.lock().unwrap().finish();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("line 000\nline 001\n"), "{text}");
        assert!(text.ends_with("line 098\nline 099\n"), "{text}");
        let (head, tail) = text.split_once("[ralph] … ").expect("the cut is named");
        assert_eq!(head.len(), 101, "the head is half the cap, then a newline: {head:?}");
        let (marker, end) = tail.split_once('\n').unwrap();
        assert!(
            marker.ends_with("bytes of output cut here (logs.max_file_bytes); the end follows …")
        );
        assert!(end.len() <= 100 && end.starts_with("line "), "{end:?}");
        // Every byte is in the file or counted as cut.
        let cut: usize = marker.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(100 + cut + end.len(), lines.len(), "{marker}");
        // Without a cap nothing is cut.
        let whole = dir.path().join("whole");
        let log = Log::capped(Some(File::create(&whole).unwrap()), None, 0);
        log.lock().unwrap().write(lines.as_bytes());
        log.lock().unwrap().finish();
        assert_eq!(std::fs::read_to_string(&whole).unwrap(), lines);
    }

    #[test]
    fn log_lines_write_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let log = Log::capped(Some(File::create(&path).unwrap()), None, 0);
        let (mut out, mut err) = (LogLines::default(), LogLines::default());
        out.push(b"out-par", &log);
        err.push(b"err-line\n", &log);
        out.push(b"tial\n", &log);
        out.flush(&log);
        err.flush(&log);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "err-line\nout-partial\n");
    }
}
