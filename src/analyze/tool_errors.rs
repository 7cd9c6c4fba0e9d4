//! Error lines from the output of tool calls that failed.
//!
//! An agent that meets the same compiler error in every iteration usually
//! exits 0 itself: the error lives only in a failed tool call's output (a
//! Bash `tool_result` with `is_error`, a Codex `command_execution` with
//! `status: failed`). Its error lines, shaped by [`signature::normalize`],
//! are what lets the loop's "same error N times" counter see it.
//!
//! Tool output is not the agent's own words, so nothing here ever counts as
//! an answer, a completion claim or a limit message. It can be megabytes:
//! only its last [`SCAN`] bytes are read.

use super::signature;
use super::status_block::truncate;
use super::tail::suffix;
use super::text;

/// Bytes read from the end of one failed tool call's output.
pub(crate) const SCAN: usize = 64 * 1024;
/// Error lines kept (the newest), and the length of each.
const MAX_LINES: usize = 8;
const LINE_CAP: usize = 300;

/// The error lines of a run's failed tool calls, each shape once, newest last.
#[derive(Debug, Default)]
pub(crate) struct ToolErrors {
    /// (shape, line)
    lines: Vec<(String, String)>,
}

impl ToolErrors {
    /// The output of a tool call that failed, in the pieces the CLI printed
    /// it in (Claude's content blocks, a message after the output). Only
    /// the last [`SCAN`] bytes of all the pieces together are read.
    pub(crate) fn failed_output(&mut self, pieces: &[&str]) {
        let mut left = SCAN;
        let mut kept = Vec::new();
        for piece in pieces.iter().rev() {
            if left == 0 {
                break;
            }
            let end = suffix(piece, left);
            left -= end.len();
            // A line cut at its start is not that line.
            let end = if end.len() < piece.len() {
                end.split_once('\n').map_or("", |(_, rest)| rest)
            } else {
                end
            };
            kept.push(end);
        }
        for piece in kept.into_iter().rev() {
            piece.lines().for_each(|line| self.line(line.trim()));
        }
    }

    fn line(&mut self, line: &str) {
        if !text::is_error_line(line.as_bytes()) {
            return;
        }
        let line = truncate(line, LINE_CAP);
        let shape = signature::normalize(line);
        self.lines.retain(|(seen, _)| *seen != shape);
        if self.lines.len() == MAX_LINES {
            self.lines.remove(0);
        }
        self.lines.push((shape, line.to_string()));
    }

    /// The signature of these errors, for a run that has no other.
    pub(crate) fn signature(&self) -> Option<String> {
        let shapes: Vec<String> = self.lines.iter().map(|(shape, _)| shape.clone()).collect();
        signature::combine(&shapes)
    }

    /// The first of the lines kept: a build's headline error, as printed.
    pub(crate) fn first_line(&self) -> Option<String> {
        self.lines.first().map(|(_, line)| line.clone())
    }

    pub(crate) fn into_lines(self) -> Vec<String> {
        self.lines.into_iter().map(|(_, line)| line).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(outputs: &[&[&str]]) -> Vec<String> {
        let mut errors = ToolErrors::default();
        outputs.iter().for_each(|pieces| errors.failed_output(pieces));
        errors.into_lines()
    }

    #[test]
    fn error_lines_of_failed_outputs() {
        let cargo = "Exit code 101\n   Compiling demo v0.1.0 (/work/demo)\nerror[E0308]: mismatched types\n --> src/main.rs:2:18\n  |\n2 |     let x: i32 = \"a\";\n\nerror: could not compile `demo` (bin \"demo\") due to 1 previous error";
        let long = format!("error: {}", "x".repeat(1000));
        #[rustfmt::skip]
        let cases: &[(&str, &[&[&str]], &[&str])] = &[
            ("cargo", &[&[cargo]], &["error[E0308]: mismatched types", "error: could not compile `demo` (bin \"demo\") due to 1 previous error"]),
            ("no error line", &[&["Exit code 1\nThis command requires approval"]], &[]),
            ("indented and CRLF", &[&["  Error: ENOENT: no such file\r\n"]], &["Error: ENOENT: no such file"]),
            ("pieces in order", &[&["error: first", "error: second"]], &["error: first", "error: second"]),
            ("the same shape again moves to the end", &[&["error[E0308]: at 12\nerror: other\nerror[E0308]: at 40"]], &["error: other", "error[E0308]: at 40"]),
            ("the same error in two runs is kept once", &[&[cargo], &[cargo]], &["error[E0308]: mismatched types", "error: could not compile `demo` (bin \"demo\") due to 1 previous error"]),
            ("clipped", &[&[&long]], &[&long[..300]]),
        ];
        for (name, outputs, want) in cases {
            assert_eq!(errors(outputs), *want, "{name}");
        }
    }

    #[test]
    fn the_newest_eight_are_kept() {
        let output: String = (0..20).map(|i| format!("error: step {}\n", "x".repeat(i))).collect();
        let got = errors(&[&[&output]]);
        let want: Vec<String> =
            (12..20).map(|i| format!("error: step {}", "x".repeat(i))).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn only_the_end_of_a_huge_output_is_read() {
        let filler = "compiling…\n".repeat(2 * SCAN / 10);
        let output = format!("error: early\n{filler}error: late\n");
        assert_eq!(errors(&[&[&output]]), ["error: late"]);
        // Across pieces too, and a line cut at the bound's edge is dropped.
        let cut = format!("error: cut here {}\nerror: whole", "y".repeat(SCAN));
        assert_eq!(errors(&[&["error: in an old piece", &cut]]), ["error: whole"]);
    }

    #[test]
    fn signature_joins_the_shapes() {
        let mut errors = ToolErrors::default();
        assert_eq!(errors.signature(), None);
        errors.failed_output(&[
            "error[E0308]: mismatched types --> src/lib.rs:12:5\nerror: could not compile `demo`",
        ]);
        assert_eq!(
            errors.signature().as_deref(),
            Some("error[e#]: mismatched types --> <path> | error: could not compile `demo`")
        );
    }
}
