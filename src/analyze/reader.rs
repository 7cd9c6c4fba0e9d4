//! Analysing a saved log (`ralph analyze FILE`): the bytes go through the
//! same line splitter as a live agent's output ([`LineSplitter`]), so a huge
//! file, or one with no newline at all, stays in bounded memory and reads
//! exactly as the run did.

use std::io::{self, BufRead};

use chrono::{DateTime, Utc};

use super::analyzer::{Analyzer, Format, ProcessEnd};
use super::outcome::Outcome;
use super::patterns::Patterns;
use crate::agent::capture::LineSplitter;

/// Analyses everything `reader` yields as one run's stdout.
pub fn analyze_reader<R: BufRead>(
    reader: R,
    format: Format,
    patterns: Patterns,
    end: &ProcessEnd,
    now: DateTime<Utc>,
) -> io::Result<Outcome> {
    let mut analyzer = Analyzer::with_patterns(format, patterns);
    read_lines(reader, &mut |line, len| analyzer.feed_part(line, len))?;
    Ok(analyzer.finish(end, now))
}

/// Every line of `reader` as the analyser is fed it live: with its `\r`,
/// cut to [`crate::agent::capture::MAX_LINE`], with its full length.
fn read_lines<R: BufRead>(mut reader: R, on_line: &mut dyn FnMut(&[u8], usize)) -> io::Result<()> {
    let mut lines = LineSplitter::keeping_cr();
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        lines.push(buf, on_line);
        reader.consume(n);
    }
    lines.finish(on_line);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::capture::MAX_LINE;
    use std::io::{BufReader, Read};

    /// The lines `read_lines` makes of `input` read `capacity` bytes at a time.
    fn read(input: impl Read, capacity: usize) -> Vec<(Vec<u8>, usize)> {
        let mut got = Vec::new();
        let reader = BufReader::with_capacity(capacity, input);
        read_lines(reader, &mut |line, len| got.push((line.to_vec(), len))).unwrap();
        got
    }

    /// The lines the live path (the supervisor's pipe reads, in chunks of
    /// `chunk` bytes) hands the analyser.
    fn live(input: &[u8], chunk: usize) -> Vec<(Vec<u8>, usize)> {
        let mut got = Vec::new();
        let mut lines = LineSplitter::keeping_cr();
        let mut on = |line: &[u8], len| got.push((line.to_vec(), len));
        input.chunks(chunk).for_each(|piece| lines.push(piece, &mut on));
        lines.finish(&mut on);
        got
    }

    #[test]
    fn a_saved_log_reads_as_the_live_run_did() {
        let mut input = b"a\n\nbc\r\nd\r\r\n\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        input.extend_from_slice(b"\r\nlast\r");
        let want = [
            (b"a".to_vec(), 1),
            (b"".to_vec(), 0),
            (b"bc\r".to_vec(), 3),
            (b"d\r\r".to_vec(), 3),
            (b"\r".to_vec(), 1),
            (vec![b'x'; MAX_LINE], MAX_LINE + 11),
            (b"last\r".to_vec(), 5),
        ];
        for size in [1, 7, 64 * 1024] {
            assert_eq!(read(&input[..], size), want, "saved, read {size} bytes at a time");
            assert_eq!(live(&input, size), want, "live, {size}-byte chunks");
        }
    }

    #[test]
    fn a_huge_line_is_capped_not_buffered() {
        let huge = 20 * 1024 * 1024;
        let input = io::repeat(b'x').take(huge as u64).chain(&b"\nafter\n"[..]);
        let got = read(input, 64 * 1024);
        let lens: Vec<(usize, usize)> = got.iter().map(|(line, len)| (line.len(), *len)).collect();
        assert_eq!(lens, [(MAX_LINE, huge), (5, 5)]);
    }
}
