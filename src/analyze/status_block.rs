//! The `RALPH_STATUS` block an agent ends its answer with, read line by line.
//!
//! Two shapes are accepted, each opened only by a marker at the start of a
//! line (leading whitespace is fine), so prose that mentions `RALPH_STATUS`
//! mid-sentence never opens a block:
//!
//! ```text
//! ---RALPH_STATUS---                RALPH_STATUS:
//! STATUS: COMPLETE                    STATUS: COMPLETE
//! EXIT_SIGNAL: true                   EXIT_SIGNAL: true
//! ---END_RALPH_STATUS---
//! ```
//!
//! The rules where agents and the reference bash parser disagree:
//!
//! - Keys match whole, case-insensitively (`TESTS_STATUS` is never `STATUS`);
//!   unknown keys are ignored; a repeated key takes its last valid value.
//! - Values are trimmed (so CRLF is harmless). For booleans, numbers and
//!   enums only the first word counts, after dropping a trailing `# comment`,
//!   so `true # done` is true. Booleans are `true|yes|1` / `false|no|0` in
//!   any case. `RECOMMENDATION` keeps the whole line.
//! - Of several blocks, the last complete one decides; a malformed last block
//!   decides too (no block), rather than falling back to an older one.
//! - A `---RALPH_STATUS---` block still open at the end of the text does not
//!   count: the agent was cut off, and a truncated block that says
//!   `STATUS: COMPLETE` before its `EXIT_SIGNAL: false` line must not end the
//!   run. It is reported in [`StatusParse::error`]. A YAML-style block needs
//!   no end marker; it ends at the first line that is neither indented below
//!   the header nor a known key.
//! - A block body over 64 KiB is malformed: that is not a status block.

use serde::Serialize;

/// The `RALPH_STATUS` block an agent ends its answer with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusBlock {
    /// `STATUS:`.
    pub(crate) status: Option<Status>,
    /// `TASKS_COMPLETED_THIS_LOOP:`.
    pub(crate) tasks_completed: Option<u32>,
    /// `FILES_MODIFIED:`.
    pub(crate) files_modified: Option<u32>,
    /// `TESTS_STATUS:` as written (`PASSING`, `FAILING`, `NOT_RUN`, …).
    pub(crate) tests_status: Option<String>,
    /// `WORK_TYPE:` as written (`IMPLEMENTATION`, `TESTING`, …).
    pub(crate) work_type: Option<String>,
    /// `EXIT_SIGNAL:` as written; `None` when the block has no such line.
    pub(crate) exit_signal: Option<bool>,
    /// `RECOMMENDATION:`, the whole line.
    pub recommendation: Option<String>,
}

impl StatusBlock {
    /// Whether the agent asks to end the loop: an explicit `EXIT_SIGNAL`
    /// wins (so `EXIT_SIGNAL: false` beats `STATUS: COMPLETE`); without one,
    /// `STATUS: COMPLETE` implies it. The loop never ends on the agent's
    /// word (only a passing gate makes a story pass), so only the tests
    /// read a block's verdict, through this.
    #[cfg(test)]
    pub(crate) fn wants_exit(&self) -> bool {
        self.exit_signal.unwrap_or(self.status == Some(Status::Complete))
    }
}

/// The `STATUS:` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Status {
    InProgress,
    Complete,
    Blocked,
}

/// What [`parse`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusParse {
    /// The last complete block, when it was readable.
    pub block: Option<StatusBlock>,
    /// What was wrong with the deciding block (bad values, no keys, too
    /// long), or an unterminated block at the end. Set alongside `block`
    /// when only some lines of it were bad.
    pub error: Option<String>,
}

/// Reads the status blocks in `text` (any line endings).
pub fn parse(text: &str) -> StatusParse {
    let mut scanner = Scanner::default();
    for line in text.split('\n') {
        scanner.line(line);
    }
    scanner.finish()
}

const OPEN: &str = "---RALPH_STATUS---";
const END: &str = "---END_RALPH_STATUS---";
const YAML_HEADER: &str = "RALPH_STATUS:";
/// A block body longer than this is not a status block.
const MAX_BLOCK: usize = 64 * 1024;
/// Problems reported per block; more say nothing new.
const MAX_PROBLEMS: usize = 4;
/// `RECOMMENDATION` is one line of advice, not a document.
const MAX_RECOMMENDATION: usize = 1024;

/// Keys that continue a YAML-style block even without indentation.
const KEYS: [&str; 8] = [
    "STATUS",
    "TASKS_COMPLETED_THIS_LOOP",
    "TASKS_COMPLETED",
    "FILES_MODIFIED",
    "TESTS_STATUS",
    "WORK_TYPE",
    "EXIT_SIGNAL",
    "RECOMMENDATION",
];

/// Streaming form of [`parse`]: fed one line at a time, it keeps only the
/// block being read and the last finished one, so memory stays bounded
/// however long the text.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    line_no: u64,
    open: Option<Open>,
    last: Option<Finished>,
}

#[derive(Debug)]
struct Open {
    shape: Shape,
    start_line: u64,
    block: StatusBlock,
    keys: u32,
    bytes: usize,
    oversized: bool,
    problems: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Delimited,
    /// YAML-style, with the header's indentation in bytes.
    Yaml(usize),
}

#[derive(Debug)]
struct Finished {
    block: Option<StatusBlock>,
    problems: Vec<String>,
}

impl Scanner {
    /// One line, with or without its `\r`.
    pub(crate) fn line(&mut self, line: &str) {
        self.line_no += 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim();
        let Some(open) = &mut self.open else {
            self.idle_line(line, trimmed);
            return;
        };
        match open.shape {
            Shape::Delimited if trimmed == END => self.close(),
            Shape::Delimited if trimmed == OPEN => {
                let problem = format!("block opened at line {} was never closed", open.start_line);
                self.close_unterminated(problem);
                self.idle_line(line, trimmed);
            }
            Shape::Delimited => open.body_line(trimmed, self.line_no),
            Shape::Yaml(_) if trimmed.is_empty() => {}
            Shape::Yaml(indent) => {
                if indentation(line) > indent || is_key_line(trimmed) {
                    open.body_line(trimmed, self.line_no);
                } else {
                    self.close();
                    self.idle_line(line, trimmed);
                }
            }
        }
    }

    fn idle_line(&mut self, line: &str, trimmed: &str) {
        let shape = if trimmed == OPEN {
            Shape::Delimited
        } else if trimmed == YAML_HEADER {
            Shape::Yaml(indentation(line))
        } else {
            return;
        };
        self.open = Some(Open {
            shape,
            start_line: self.line_no,
            block: StatusBlock::default(),
            keys: 0,
            bytes: 0,
            oversized: false,
            problems: Vec::new(),
        });
    }

    fn close(&mut self) {
        let Some(open) = self.open.take() else { return };
        let mut problems = open.problems;
        let block = if open.oversized {
            problems.insert(0, format!("block at line {} is over 64 KiB", open.start_line));
            None
        } else if open.keys == 0 {
            problems
                .insert(0, format!("block at line {} has no KEY: value lines", open.start_line));
            None
        } else {
            Some(open.block)
        };
        self.last = Some(Finished { block, problems });
    }

    /// Drops the open block; the last finished one still decides.
    fn close_unterminated(&mut self, problem: String) {
        self.open = None;
        let last = self.last.get_or_insert(Finished { block: None, problems: Vec::new() });
        if last.problems.len() < MAX_PROBLEMS {
            last.problems.push(problem);
        }
    }

    pub(crate) fn finish(mut self) -> StatusParse {
        match self.open.as_ref().map(|open| (open.shape, open.start_line)) {
            Some((Shape::Delimited, start)) => {
                self.close_unterminated(format!("block opened at line {start} was never closed"));
            }
            Some((Shape::Yaml(_), _)) => self.close(),
            None => {}
        }
        match self.last {
            None => StatusParse::default(),
            Some(last) => StatusParse {
                block: last.block,
                error: (!last.problems.is_empty()).then(|| last.problems.join("; ")),
            },
        }
    }
}

impl Open {
    fn body_line(&mut self, trimmed: &str, line_no: u64) {
        if self.oversized {
            return;
        }
        self.bytes += trimmed.len() + 1;
        if self.bytes > MAX_BLOCK {
            self.oversized = true;
            return;
        }
        if trimmed.is_empty() {
            return;
        }
        if let Err(problem) = self.key_value(trimmed)
            && self.problems.len() < MAX_PROBLEMS
        {
            self.problems.push(format!("line {line_no}: {problem}"));
        }
    }

    fn key_value(&mut self, trimmed: &str) -> Result<(), LineProblem> {
        let item =
            trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")).unwrap_or(trimmed);
        let Some((key, value)) = item.split_once(':') else {
            return Err(LineProblem::NoColon(shorten(trimmed)));
        };
        let key = normalize_key(key);
        let value = unquote(value.trim());
        let block = &mut self.block;
        match key.as_str() {
            "STATUS" => block.status = Some(parse_status(value)?),
            "TASKS_COMPLETED_THIS_LOOP" | "TASKS_COMPLETED" => {
                block.tasks_completed = Some(parse_number(&key, value)?);
            }
            "FILES_MODIFIED" => block.files_modified = Some(parse_number(&key, value)?),
            "TESTS_STATUS" => block.tests_status = Some(word_value(&key, value)?),
            "WORK_TYPE" => block.work_type = Some(word_value(&key, value)?),
            "EXIT_SIGNAL" => block.exit_signal = Some(parse_bool(value)?),
            "RECOMMENDATION" => {
                block.recommendation = Some(truncate(value, MAX_RECOMMENDATION).to_string());
            }
            _ => return Ok(()),
        }
        self.keys += 1;
        Ok(())
    }
}

/// A line of the block that cannot be read, as its problem list says it
/// (values shortened).
#[derive(Debug, thiserror::Error)]
enum LineProblem {
    #[error("no colon in {0:?}")]
    NoColon(String),
    #[error("EXIT_SIGNAL: {0:?} is not true or false")]
    NotBool(String),
    #[error("{key}: {value:?} is not a number")]
    NotNumber { key: String, value: String },
    #[error("STATUS: {0:?} is not IN_PROGRESS, COMPLETE or BLOCKED")]
    NotStatus(String),
    #[error("{0} has no value")]
    NoValue(String),
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_key_line(trimmed: &str) -> bool {
    trimmed.split_once(':').is_some_and(|(key, _)| KEYS.contains(&normalize_key(key).as_str()))
}

/// `**Exit signal**` → `EXIT_SIGNAL`: agents decorate keys in Markdown.
fn normalize_key(key: &str) -> String {
    key.trim()
        .trim_matches(|c| c == '*' || c == '`' || c == '_')
        .trim()
        .chars()
        .map(|c| if c == ' ' || c == '-' { '_' } else { c.to_ascii_uppercase() })
        .collect()
}

fn unquote(value: &str) -> &str {
    value.trim_matches(|c| c == '*' || c == '`' || c == '"' || c == '\'').trim()
}

/// The first word of a value, without a trailing `# comment` or punctuation.
fn first_word(value: &str) -> &str {
    let value = value.split_once('#').map_or(value, |(before, _)| before);
    let word = value.split_whitespace().next().unwrap_or("");
    unquote(word.trim_end_matches(['.', ',', ';', '!']))
}

fn parse_bool(value: &str) -> Result<bool, LineProblem> {
    match first_word(value).to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        _ => Err(LineProblem::NotBool(shorten(value))),
    }
}

fn parse_number(key: &str, value: &str) -> Result<u32, LineProblem> {
    first_word(value)
        .parse()
        .map_err(|_| LineProblem::NotNumber { key: key.to_string(), value: shorten(value) })
}

fn parse_status(value: &str) -> Result<Status, LineProblem> {
    let word: String = first_word(value)
        .chars()
        .map(|c| if c == '-' { '_' } else { c.to_ascii_uppercase() })
        .collect();
    match word.as_str() {
        "IN_PROGRESS" | "INPROGRESS" => Ok(Status::InProgress),
        "COMPLETE" | "COMPLETED" => Ok(Status::Complete),
        "BLOCKED" => Ok(Status::Blocked),
        _ => Err(LineProblem::NotStatus(shorten(value))),
    }
}

fn word_value(key: &str, value: &str) -> Result<String, LineProblem> {
    let word = first_word(value);
    if word.is_empty() {
        return Err(LineProblem::NoValue(key.to_string()));
    }
    Ok(truncate(word, 64).to_string())
}

pub(crate) use crate::text::prefix_bytes as truncate;

fn shorten(text: &str) -> String {
    truncate(text, 40).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(status: Option<Status>, exit_signal: Option<bool>) -> StatusBlock {
        StatusBlock { status, exit_signal, ..StatusBlock::default() }
    }

    /// (name, input, wants_exit, exit_signal as written, has an error).
    /// `wants_exit` is `None` when no block may be found at all.
    type Case = (&'static str, &'static str, Option<bool>, Option<bool>, bool);

    #[test]
    fn exit_decisions() {
        let cases: &[Case] = &[
            (
                "canonical",
                "done\n---RALPH_STATUS---\nSTATUS: COMPLETE\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---\n",
                Some(true),
                Some(true),
                false,
            ),
            (
                "uppercase TRUE",
                "---RALPH_STATUS---\nEXIT_SIGNAL: TRUE\n---END_RALPH_STATUS---",
                Some(true),
                Some(true),
                false,
            ),
            (
                "yes is true",
                "---RALPH_STATUS---\nEXIT_SIGNAL: Yes\n---END_RALPH_STATUS---",
                Some(true),
                Some(true),
                false,
            ),
            (
                "CRLF",
                "---RALPH_STATUS---\r\nSTATUS: COMPLETE\r\nEXIT_SIGNAL: true\r\n---END_RALPH_STATUS---\r\n",
                Some(true),
                Some(true),
                false,
            ),
            (
                "trailing comment",
                "---RALPH_STATUS---\nEXIT_SIGNAL: true # all done\n---END_RALPH_STATUS---",
                Some(true),
                Some(true),
                false,
            ),
            (
                "implied by COMPLETE",
                "---RALPH_STATUS---\nSTATUS: COMPLETE\n---END_RALPH_STATUS---",
                Some(true),
                None,
                false,
            ),
            (
                "TESTS_STATUS does not poison STATUS",
                "---RALPH_STATUS---\nSTATUS: COMPLETE\nTESTS_STATUS: PASSING\n---END_RALPH_STATUS---",
                Some(true),
                None,
                false,
            ),
            (
                "explicit false beats COMPLETE",
                "All done and complete!\n---RALPH_STATUS---\nSTATUS: COMPLETE\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---",
                Some(false),
                Some(false),
                false,
            ),
            (
                "two blocks, false then true",
                "---RALPH_STATUS---\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---\nmore work\n---RALPH_STATUS---\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---",
                Some(true),
                Some(true),
                false,
            ),
            (
                "two blocks, true then false",
                "---RALPH_STATUS---\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---\n---RALPH_STATUS---\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---",
                Some(false),
                Some(false),
                false,
            ),
            (
                "duplicated key, last wins",
                "---RALPH_STATUS---\nEXIT_SIGNAL: true\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---",
                Some(true),
                Some(true),
                false,
            ),
            (
                "duplicated key false then true",
                "---RALPH_STATUS---\nEXIT_SIGNAL: false\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---",
                Some(true),
                Some(true),
                false,
            ),
            (
                "prose mention",
                "I will print RALPH_STATUS: EXIT_SIGNAL: true when done.\n",
                None,
                None,
                false,
            ),
            (
                "prose mention of the delimiter",
                "Then I end with ---RALPH_STATUS--- and EXIT_SIGNAL: true.\n",
                None,
                None,
                false,
            ),
            (
                "EXIT_SIGNAL without a block",
                "EXIT_SIGNAL: true\nSTATUS: COMPLETE\n",
                None,
                None,
                false,
            ),
            (
                "YAML style, indented",
                "Summary.\n  RALPH_STATUS:\n    STATUS: COMPLETE\n    EXIT_SIGNAL: true\n  Bye\n",
                Some(true),
                Some(true),
                false,
            ),
            (
                "YAML style, keys not indented",
                "RALPH_STATUS:\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\nThanks.\n",
                Some(false),
                Some(false),
                false,
            ),
            (
                "YAML style ends at a plain line",
                "RALPH_STATUS:\n  STATUS: IN_PROGRESS\nNotes:\nEXIT_SIGNAL: true\n",
                Some(false),
                None,
                false,
            ),
            (
                "malformed, no colons",
                "---RALPH_STATUS---\nSTATUS COMPLETE\nEXIT_SIGNAL true\n---END_RALPH_STATUS---",
                None,
                None,
                true,
            ),
            (
                "bad number keeps the rest",
                "---RALPH_STATUS---\nFILES_MODIFIED: many\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---",
                Some(true),
                Some(true),
                true,
            ),
            (
                "bad boolean",
                "---RALPH_STATUS---\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: maybe\n---END_RALPH_STATUS---",
                Some(false),
                None,
                true,
            ),
            (
                "unterminated at the end does not count",
                "---RALPH_STATUS---\nSTATUS: COMPLETE\n",
                None,
                None,
                true,
            ),
            (
                "unterminated after a complete block",
                "---RALPH_STATUS---\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---\n---RALPH_STATUS---\nSTATUS: COMPLETE\n",
                Some(false),
                Some(false),
                true,
            ),
            (
                "reopened block drops the open one",
                "---RALPH_STATUS---\nEXIT_SIGNAL: true\n---RALPH_STATUS---\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---",
                Some(false),
                Some(false),
                false,
            ),
            (
                "malformed last block decides",
                "---RALPH_STATUS---\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---\n---RALPH_STATUS---\nnothing here\n---END_RALPH_STATUS---",
                None,
                None,
                true,
            ),
            ("empty", "", None, None, false),
            (
                "NUL and control bytes",
                "\0\x01\x1b[31m---RALPH_STATUS---\n---RALPH_STATUS---\nEXIT_SIGNAL:\0true\n\x07\n---END_RALPH_STATUS---",
                None,
                None,
                true,
            ),
            (
                "unicode around the block",
                "Status: Done ✨ — complete ✅\n---RALPH_STATUS---\nSTATUS: IN_PROGRESS ✨\nRECOMMENDATION: Nächster Schritt ✨\n---END_RALPH_STATUS---",
                Some(false),
                None,
                false,
            ),
            (
                "markdown decorations and bullets",
                "  ---RALPH_STATUS---\n- **STATUS**: `COMPLETE`\n- **Exit signal**: **true**\n  ---END_RALPH_STATUS---  ",
                Some(true),
                Some(true),
                false,
            ),
        ];
        for (name, input, wants_exit, exit_signal, has_error) in cases {
            let parsed = parse(input);
            assert_eq!(
                parsed.block.as_ref().map(StatusBlock::wants_exit),
                *wants_exit,
                "{name}: {parsed:?}"
            );
            assert_eq!(parsed.block.as_ref().and_then(|b| b.exit_signal), *exit_signal, "{name}");
            assert_eq!(parsed.error.is_some(), *has_error, "{name}: {parsed:?}");
        }
    }

    #[test]
    fn reads_every_key() {
        let parsed = parse(
            "---RALPH_STATUS---\nSTATUS: BLOCKED\nTASKS_COMPLETED_THIS_LOOP: 2 (US-001, US-002)\nFILES_MODIFIED: 7\nTESTS_STATUS: FAILING\nWORK_TYPE: TESTING\nEXIT_SIGNAL: no\nRECOMMENDATION: Fix issue #12 first: the build fails\nEXTRA_KEY: ignored\n---END_RALPH_STATUS---",
        );
        assert_eq!(parsed.error, None);
        assert_eq!(
            parsed.block,
            Some(StatusBlock {
                status: Some(Status::Blocked),
                tasks_completed: Some(2),
                files_modified: Some(7),
                tests_status: Some("FAILING".into()),
                work_type: Some("TESTING".into()),
                exit_signal: Some(false),
                recommendation: Some("Fix issue #12 first: the build fails".into()),
            })
        );
    }

    #[test]
    fn wants_exit_rule() {
        let cases = [
            (block(Some(Status::Complete), None), true),
            (block(Some(Status::Complete), Some(false)), false),
            (block(Some(Status::InProgress), Some(true)), true),
            (block(Some(Status::InProgress), None), false),
            (block(None, None), false),
        ];
        for (block, expected) in cases {
            assert_eq!(block.wants_exit(), expected, "{block:?}");
        }
    }

    #[test]
    fn oversized_block_is_malformed() {
        let mut text = String::from("---RALPH_STATUS---\nEXIT_SIGNAL: true\n");
        let filler = "RECOMMENDATION: keep going\n".repeat(3000);
        text.push_str(&filler);
        text.push_str("---END_RALPH_STATUS---\n");
        let parsed = parse(&text);
        assert_eq!(parsed.block, None);
        assert!(parsed.error.unwrap().contains("64 KiB"));
    }

    #[test]
    fn streaming_matches_whole_text() {
        let text = "intro\n---RALPH_STATUS---\nSTATUS: COMPLETE\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---\n";
        let mut scanner = Scanner::default();
        for line in text.lines() {
            scanner.line(line);
        }
        assert_eq!(scanner.finish(), parse(text));
    }
}
