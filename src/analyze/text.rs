//! Heuristics for plain-text output (aider, custom commands): which lines
//! are errors, whether the run only tested, whether the agent is asking the
//! user something.
//!
//! These run on every stdout line, so they look at bytes: a line-start
//! prefix check for errors, one multi-pattern scan for keywords. Error lines
//! must *start* like an error (`error:`, `Error:`, `TypeError:`, `panicked
//! at`), which is what keeps JSON lines with an `"is_error"` key out (the
//! reference bash filter instead dropped every line with such a key, and with
//! it the whole of a one-line JSON result).

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::Regex;

use super::tools::TEST_COMMANDS;

/// Whether a line (leading whitespace already trimmed) reads as an error.
pub(crate) fn is_error_line(line: &[u8]) -> bool {
    const PREFIXES: [&[u8]; 16] = [
        b"error:",
        b"error[",
        b"Error:",
        b"ERROR:",
        b"ERROR ",
        b"[ERROR]",
        b"fatal:",
        b"Fatal:",
        b"FATAL:",
        b"FATAL ",
        b"panic:",
        b"Traceback (most recent call last)",
        b"npm ERR!",
        b"Uncaught ",
        b"E   ",
        b"FAILED ",
    ];
    let Some(&first) = line.first() else {
        return false;
    };
    if !first.is_ascii_alphabetic() && first != b'[' {
        return false;
    }
    if PREFIXES.iter().any(|p| line.starts_with(p)) {
        return true;
    }
    if line.starts_with(b"thread '") {
        return memchr::memmem::find(line, b"' panicked at").is_some();
    }
    // `TypeError: …`, `java.lang.IllegalStateException: …`: one word ending
    // in Error or Exception, then a colon.
    let head = &line[..line.len().min(120)];
    let Some(colon) = memchr::memchr(b':', head) else {
        return false;
    };
    let word = &head[..colon];
    !word.contains(&b' ') && (word.ends_with(b"Error") || word.ends_with(b"Exception"))
}

/// Lines longer than this are output (minified code, data), not the short
/// status lines the keywords come from.
const MAX_KEYWORD_LINE: usize = 512;

/// Edit markers: aider's own lines, git's commit summary, and the verbs an
/// agent narrates its changes with.
const EDIT_MARKERS: [&str; 14] = [
    "Applied edit to",
    "Wrote ",
    "Created ",
    "Edited ",
    "Modified ",
    "Updated ",
    "create mode ",
    "files changed",
    "file changed",
    "Implement",
    "implement",
    "Creating ",
    "Writing ",
    "Adding ",
];

static KEYWORDS: LazyLock<(AhoCorasick, usize)> = LazyLock::new(|| {
    let tests = TEST_COMMANDS.iter().copied().chain(["Running tests", "running tests"]);
    let all: Vec<&str> = tests.clone().chain(EDIT_MARKERS).collect();
    let automaton = AhoCorasick::new(&all).expect("keyword automaton");
    (automaton, tests.count())
});

/// The keywords in one line: (a test ran, a file changed).
pub(crate) fn keywords(line: &[u8]) -> (bool, bool) {
    if line.len() > MAX_KEYWORD_LINE {
        return (false, false);
    }
    let (automaton, tests) = &*KEYWORDS;
    let (mut test, mut edit) = (false, false);
    for found in automaton.find_iter(line) {
        if found.pattern().as_usize() < *tests {
            test = true;
        } else {
            edit = true;
        }
    }
    (test, edit)
}

static QUESTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:should i|would you(?: like)?|do you want|which (?:approach|option)|how should|what should|shall i|do you prefer|can you clarify|could you|what do you think)\b",
    )
    .expect("question regex")
});

static REQUEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:please confirm|need(?:s)? clarification|awaiting (?:your )?input|waiting for your (?:response|reply|input)|let me know your preference)\b")
        .expect("request regex")
});

/// Whether the end of the agent's answer asks the user something, which a
/// headless run cannot answer. Only the last lines count (not code or quotes
/// earlier in the answer), a question phrase needs a `?` on its line, and
/// the status block's lines are skipped.
pub(crate) fn asks_questions(final_text: &str) -> bool {
    final_text
        .lines()
        .rev()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .filter(|line| !line.starts_with("---") && !line.contains("RALPH_STATUS"))
        .filter(|line| !looks_like_block_line(line))
        .take(12)
        .any(|line| (line.contains('?') && QUESTION.is_match(line)) || REQUEST.is_match(line))
}

fn looks_like_block_line(line: &str) -> bool {
    line.split_once(':').is_some_and(|(key, _)| {
        !key.is_empty() && key.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines() {
        let errors = [
            "error[E0308]: mismatched types",
            "error: could not compile `ralph`",
            "Error: ENOENT: no such file",
            "ERROR: You've hit your usage limit.",
            "TypeError: x is not a function",
            "java.lang.IllegalStateException: closed",
            "thread 'main' panicked at src/main.rs:2:5:",
            "Traceback (most recent call last):",
            "fatal: not a git repository",
        ];
        let not_errors = [
            r#"{"type":"result","is_error":false}"#,
            r#""is_error": true,"#,
            "Error handling is now implemented.",
            "No errors found.",
            "Fixed the TypeError in utils.js",
            "",
            "   ",
        ];
        for line in errors {
            assert!(is_error_line(line.as_bytes()), "{line}");
        }
        for line in not_errors {
            assert!(!is_error_line(line.as_bytes()), "{line}");
        }
    }

    #[test]
    fn keyword_lines() {
        let cases = [
            ("Running tests...", (true, false)),
            ("$ cargo test --lib", (true, false)),
            ("Applied edit to src/lib.rs", (false, true)),
            ("Implementing the parser, then npm test", (true, true)),
            ("All good.", (false, false)),
        ];
        for (line, expected) in cases {
            assert_eq!(keywords(line.as_bytes()), expected, "{line}");
        }
        let long = format!("cargo test {}", "x".repeat(1000));
        assert_eq!(keywords(long.as_bytes()), (false, false));
    }

    #[test]
    fn questions() {
        let cases = [
            ("I implemented X.\nShould I also refactor Y?", true),
            ("Done. Which approach do you prefer: A or B?", true),
            ("Please confirm the schema before I continue.", true),
            ("I wondered whether I should refactor; I did not.", false),
            (
                "Could you be more wrong? No.\n\nline\nline\nline\nline\nline\nline\nline\nline\nline\nline\nline\nline\nend",
                false,
            ),
            (
                "Implemented.\n---RALPH_STATUS---\nRECOMMENDATION: Should I do Y next?\n---END_RALPH_STATUS---",
                false,
            ),
            ("", false),
        ];
        for (text, expected) in cases {
            assert_eq!(asks_questions(text), expected, "{text}");
        }
    }
}
