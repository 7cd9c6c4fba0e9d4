//! Analysing a saved log (`ralph analyze FILE`): split lines with a cap so a
//! huge file, or one with no newline at all, stays in bounded memory.

use std::io::{self, BufRead};

use chrono::{DateTime, Utc};

use super::analyzer::{Analyzer, Format, ProcessEnd};
use super::outcome::Outcome;
use super::patterns::Patterns;

/// Lines are kept up to this many bytes; the rest of a longer line is
/// counted and dropped (no event the analysis needs is that long).
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// Analyses everything `reader` yields as one run's stdout.
pub fn analyze_reader<R: BufRead>(
    reader: R,
    format: Format,
    patterns: Patterns,
    end: &ProcessEnd,
    now: DateTime<Utc>,
) -> io::Result<Outcome> {
    let mut analyzer = Analyzer::with_patterns(format, patterns);
    let mut lines = LineSplitter::new(reader, MAX_LINE);
    while let Some((line, full_len)) = lines.next_line()? {
        analyzer.feed_part(line, full_len);
    }
    Ok(analyzer.finish(end, now))
}

/// Splits a reader into lines of at most `cap` bytes, without holding more
/// than one capped line at a time.
pub(crate) struct LineSplitter<R> {
    reader: R,
    cap: usize,
    line: Vec<u8>,
}

impl<R: BufRead> LineSplitter<R> {
    pub(crate) fn new(reader: R, cap: usize) -> Self {
        LineSplitter { reader, cap, line: Vec::new() }
    }

    /// The next line without its `\n`, cut to `cap` bytes, and its full length.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<(&[u8], usize)>> {
        self.line.clear();
        let mut full_len = 0;
        let mut seen_any = false;
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(seen_any.then_some((self.line.as_slice(), full_len)));
            }
            seen_any = true;
            let (chunk, consumed, done) = match memchr::memchr(b'\n', buf) {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            let room = self.cap.saturating_sub(self.line.len());
            self.line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            full_len += chunk.len();
            self.reader.consume(consumed);
            if done {
                return Ok(Some((self.line.as_slice(), full_len)));
            }
        }
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.line.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Read};

    #[test]
    fn splits_lines_and_keeps_the_last_unterminated_one() {
        let mut lines = LineSplitter::new(&b"a\n\nbc\r\nlast"[..], 16);
        let mut got = Vec::new();
        while let Some((line, len)) = lines.next_line().unwrap() {
            got.push((String::from_utf8_lossy(line).into_owned(), len));
        }
        assert_eq!(got, [("a".into(), 1), ("".into(), 0), ("bc\r".into(), 3), ("last".into(), 4)]);
    }

    #[test]
    fn a_huge_line_is_capped_not_buffered() {
        let huge = 20 * 1024 * 1024;
        let input = io::repeat(b'x').take(huge as u64).chain(&b"\nafter\n"[..]);
        let mut lines = LineSplitter::new(BufReader::with_capacity(64 * 1024, input), 1024);
        let (line, len) = lines.next_line().unwrap().unwrap();
        assert_eq!((line.len(), len), (1024, huge));
        assert!(lines.capacity() < 64 * 1024, "buffered {} bytes", lines.capacity());
        let (line, len) = lines.next_line().unwrap().unwrap();
        assert_eq!((line, len), (&b"after"[..], 5));
        assert!(lines.next_line().unwrap().is_none());
    }
}
