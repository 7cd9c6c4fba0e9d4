//! `failures.jsonl` (in the state folder): one line per failure the loop saw, appended and
//! never rewritten. It is the record that rule cards are counted from.
//!
//! A row: `{v, ts, run_id, iteration, story, category, signature, detail,
//! evidence?}`. `signature` is what makes two failures "the same" (see
//! [`signature`]); `detail` is the longer text a person reads, bounded to
//! [`MAX_DETAIL_CHARS`] with a marker giving its original length.
//!
//! Reading skips lines that are not JSON, or that claim a `category` but
//! do not have the row's shape, and counts them for a warning. A JSON
//! object with no `category` at all is some other writer's row (the loop's
//! lifecycle events may share the file) and is passed over without a word.

use std::fmt;
use std::io;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

use crate::store::{self, Store};
use crate::text;

/// Format version of a row (`v`).
pub const VERSION: u32 = 1;

/// Longest `detail` kept, in chars.
pub const MAX_DETAIL_CHARS: usize = 4000;

/// Longest `signature` kept, in chars.
pub const MAX_SIGNATURE_CHARS: usize = 300;

/// What kind of failure a row records. Unknown names read from the file
/// are kept as [`Category::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Category {
    /// The verify command ran and failed: the code is wrong.
    GateFailure,
    /// The verify command could not run: the environment is wrong.
    GateNotRun,
    /// The agent exited abnormally.
    AgentExit,
    /// A signal ralph did not send ended the agent (someone's `kill -9`,
    /// the OOM killer, a crash): nothing about the code.
    AgentKilled,
    /// The agent ran out of time.
    AgentTimeout,
    /// The handoff was missing or broke its rules.
    HandoffInvalid,
    /// Commands the agent ran kept failing and nothing else moved.
    ToolError,
    /// The agent reported it cannot go on without a person.
    Blocked,
    /// A lesson was recorded for the story.
    Lesson,
    /// The agent changed what judges its work (a protected path, tests
    /// that vanished): refused.
    Tampered,
    Other(String),
}

impl Category {
    pub fn as_str(&self) -> &str {
        match self {
            Category::GateFailure => "gate-failure",
            Category::GateNotRun => "gate-not-run",
            Category::AgentExit => "agent-exit",
            Category::AgentKilled => "agent-killed",
            Category::AgentTimeout => "agent-timeout",
            Category::HandoffInvalid => "handoff-invalid",
            Category::ToolError => "tool-error",
            Category::Blocked => "blocked",
            Category::Lesson => "lesson",
            Category::Tampered => "tampered",
            Category::Other(name) => name,
        }
    }

    /// Whether rows of this category are merged into rule cards. Not
    /// `gate-not-run`: a broken environment is not a lesson about the code.
    /// Not `agent-killed`: neither is a kill.
    /// Not `blocked`: it needs a person, not a rule. Not `lesson`: it follows
    /// the failure it describes, which is counted already.
    pub fn learns(&self) -> bool {
        matches!(
            self,
            Category::GateFailure
                | Category::AgentExit
                | Category::AgentTimeout
                | Category::HandoffInvalid
                | Category::ToolError
        )
    }
}

impl From<String> for Category {
    fn from(name: String) -> Category {
        match name.as_str() {
            "gate-failure" => Category::GateFailure,
            "gate-not-run" => Category::GateNotRun,
            "tampered" => Category::Tampered,
            "agent-exit" => Category::AgentExit,
            "agent-killed" => Category::AgentKilled,
            "agent-timeout" => Category::AgentTimeout,
            "handoff-invalid" => Category::HandoffInvalid,
            "tool-error" => Category::ToolError,
            "blocked" => Category::Blocked,
            "lesson" => Category::Lesson,
            _ => Category::Other(name),
        }
    }
}

impl From<Category> for String {
    fn from(category: Category) -> String {
        category.as_str().to_string()
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of `failures.jsonl`. Rows written by an older or newer ralph are
/// read as long as they have `category` and `signature`; other fields
/// default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    #[serde(default)]
    pub v: u32,
    #[serde(default = "epoch")]
    pub ts: DateTime<Utc>,
    #[serde(default)]
    pub run_id: String,
    #[serde(default)]
    pub iteration: u32,
    #[serde(default)]
    pub story: String,
    pub category: Category,
    pub signature: String,
    #[serde(default)]
    pub detail: String,
    /// Where to look: a log file, a commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

fn epoch() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH
}

/// What the loop saw, before it becomes a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure<'a> {
    pub run_id: &'a str,
    pub iteration: u32,
    pub story: &'a str,
    pub category: Category,
    /// Raw; [`signature`] normalises it.
    pub signature: &'a str,
    pub detail: &'a str,
    pub evidence: Option<&'a str>,
}

impl Failure<'_> {
    /// The row for this failure: signature normalised, detail bounded.
    pub fn event(&self, now: DateTime<Utc>) -> Event {
        Event {
            v: VERSION,
            ts: now,
            run_id: self.run_id.to_string(),
            iteration: self.iteration,
            story: self.story.to_string(),
            category: self.category.clone(),
            signature: signature(self.signature),
            detail: text::cut(&text::plain(self.detail), MAX_DETAIL_CHARS),
            evidence: self.evidence.map(|e| text::plain(e).trim().to_string()),
        }
    }
}

/// Hex ids: `0x…`, and runs of 7+ hex digits that hold a digit (commit
/// hashes, addresses), but not words like `defaced`.
static HEX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{7,}\b").unwrap());

/// A number standing alone (counts, line:column, durations), not one inside
/// a word: `E0425` and `test_2` are kept.
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h)?\b").unwrap());

/// Temporary paths, which differ on every run.
static TEMP_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?:/private)?/(?:tmp|var/folders)/[^\s:'"`)\]]*"#).unwrap());

/// What varies between two runs of the same code: timings (`0.002s`,
/// `142 ms`, `Time: 1.234 s`, a bare `0.53`) and clock times (`12:03:44`).
/// Counts and line numbers are not here: they can mean the code changed.
static TIMING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b|\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|secs?|seconds?|m|min|h)\b|\b\d+\.\d+\b",
    )
    .unwrap()
});

/// `text` with what differs between two runs of the same code masked:
/// temporary paths → `<tmp>`, hex ids and addresses → `<hex>`, timings
/// and clock times → `<t>`. The rest is kept as it is, so lessons that
/// differ only in those are one lesson ([`super::lessons`]).
pub fn mask_volatile(text: &str) -> String {
    let s = TEMP_PATH.replace_all(text, "<tmp>");
    let s = mask_hex(&s);
    TIMING.replace_all(&s, "<t>").into_owned()
}

fn mask_hex(text: &str) -> std::borrow::Cow<'_, str> {
    HEX.replace_all(text, |c: &Captures| {
        let m = &c[0];
        if m.starts_with("0x") || m.bytes().any(|b| b.is_ascii_digit()) {
            "<hex>".to_string()
        } else {
            m.to_string()
        }
    })
}

/// Makes the same failure read the same every time: terminal escapes and
/// control characters dropped; temporary paths → `<tmp>`; hex ids →
/// `<hex>`; numbers standing alone (counts, line and column, durations) →
/// `<n>`; whitespace trimmed and collapsed; case kept; at most
/// [`MAX_SIGNATURE_CHARS`]. Numbers inside words stay, so `E0425` and
/// `E0433` remain different failures while `3 passed; 1 failed` and
/// `4 passed; 1 failed` are one.
pub fn signature(raw: &str) -> String {
    let s = text::plain(raw);
    let s = TEMP_PATH.replace_all(&s, "<tmp>");
    let s = mask_hex(&s);
    let s = NUMBER.replace_all(&s, "<n>");
    text::clip(&text::collapse(&s), MAX_SIGNATURE_CHARS)
}

/// Appends one row to `failures.jsonl` (in the state folder).
pub fn append(store: &Store, event: &Event) -> io::Result<()> {
    store::append_jsonl(&store.failures(), event)
}

/// The rows of `failures.jsonl`, oldest first, and how many lines were skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg(test)]
pub struct Rows {
    pub events: Vec<Event>,
    pub malformed: usize,
}

#[cfg(test)]
impl Rows {
    /// The warning to show when lines were skipped.
    pub fn warning(&self) -> Option<String> {
        (self.malformed > 0)
            .then(|| format!("failures.jsonl: skipped {} malformed line(s)", self.malformed))
    }
}

/// Reads `failures.jsonl` (in the state folder); a missing file has no rows.
#[cfg(test)]
pub fn read(store: &Store) -> io::Result<Rows> {
    let (values, mut malformed) = store::read_jsonl::<serde_json::Value>(&store.failures())?;
    let mut events = Vec::new();
    for value in values {
        if value.get("category").is_none() {
            // Not a learning row; see the module doc. A non-object is junk.
            malformed += usize::from(!value.is_object());
            continue;
        }
        match serde_json::from_value::<Event>(value) {
            Ok(event) => events.push(event),
            Err(_) => malformed += 1,
        }
    }
    Ok(Rows { events, malformed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn failure<'a>(category: Category, signature: &'a str) -> Failure<'a> {
        Failure {
            run_id: "run-1",
            iteration: 1,
            story: "US-001",
            category,
            signature,
            detail: "detail",
            evidence: None,
        }
    }

    #[test]
    fn signatures_fold_what_varies_and_keep_what_matters() {
        #[rustfmt::skip]
        let cases: &[(&str, &str)] = &[
            ("  error:   cannot\n find value\t`x` ", "error: cannot find value `x`"),
            ("Error: X", "Error: X"),
            ("error[E0425]: cannot find value", "error[E0425]: cannot find value"),
            ("test result: FAILED. 12 passed; 1 failed; finished in 0.53s", "test result: FAILED. <n> passed; <n> failed; finished in <n>"),
            ("panicked at src/lib.rs:42:9", "panicked at src/lib.rs:<n>:<n>"),
            ("HEAD is 3fa9c2e1b7 now", "HEAD is <hex> now"),
            ("segfault at 0x7ffd5e8c", "segfault at <hex>"),
            ("the file was defaced", "the file was defaced"),
            ("cannot open /tmp/.tmpAb3xYz/prd.json: denied", "cannot open <tmp>: denied"),
            ("\x1b[1m\x1b[31merror\x1b[0m: red", "error: red"),
            ("test_2 failed", "test_2 failed"),
        ];
        for (raw, expected) in cases {
            assert_eq!(signature(raw), *expected, "{raw:?}");
        }
        assert_eq!(signature("E0425"), signature("  E0425 "));
        assert_ne!(signature("error[E0425]"), signature("error[E0433]"));
        assert_eq!(text::chars(&signature(&"word ".repeat(500))), MAX_SIGNATURE_CHARS);
    }

    #[test]
    fn volatile_parts_are_masked_and_the_rest_kept() {
        #[rustfmt::skip]
        let cases: &[(&str, &str)] = &[
            ("Ran 3 tests in 0.002s", "Ran 3 tests in <t>"),
            ("Time:        1.234 s", "Time:        <t>"),
            ("took 142ms, then 3 seconds", "took <t>, then <t>"),
            ("at 12:03:44.512 it failed", "at <t> it failed"),
            ("<Calc object at 0x7ffd5e8c1a20>", "<Calc object at <hex>>"),
            ("HEAD is 3fa9c2e1b7", "HEAD is <hex>"),
            ("cannot open /tmp/.tmpAb3xYz/prd.json", "cannot open <tmp>"),
            ("2 failed, 1 passed; src/lib.rs:42:9; E0425; test_2", "2 failed, 1 passed; src/lib.rs:42:9; E0425; test_2"),
            ("the file was defaced", "the file was defaced"),
        ];
        for (raw, expected) in cases {
            assert_eq!(mask_volatile(raw), *expected, "{raw:?}");
        }
    }

    #[test]
    fn categories_round_trip_and_only_code_failures_learn() {
        #[rustfmt::skip]
        let cases: &[(Category, &str, bool)] = &[
            (Category::GateFailure, "gate-failure", true),
            (Category::GateNotRun, "gate-not-run", false),
            (Category::AgentExit, "agent-exit", true),
            (Category::AgentKilled, "agent-killed", false),
            (Category::AgentTimeout, "agent-timeout", true),
            (Category::HandoffInvalid, "handoff-invalid", true),
            (Category::Blocked, "blocked", false),
            (Category::Lesson, "lesson", false),
            (Category::Other("custom".into()), "custom", false),
        ];
        for (category, name, learns) in cases {
            assert_eq!(serde_json::to_value(category).unwrap(), *name);
            assert_eq!(Category::from(name.to_string()), *category);
            assert_eq!(category.learns(), *learns, "{name}");
        }
    }

    #[test]
    fn rows_are_appended_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure().unwrap();
        for i in 0..3 {
            let mut f = failure(Category::GateFailure, "error: x  y");
            f.iteration = i;
            append(&store, &f.event(t0())).unwrap();
        }
        let rows = read(&store).unwrap();
        assert_eq!(rows.malformed, 0);
        assert_eq!(rows.warning(), None);
        assert_eq!(rows.events.len(), 3);
        assert_eq!(rows.events[2].iteration, 2);
        assert_eq!(rows.events[0].signature, "error: x y");
        let line = std::fs::read_to_string(store.failures()).unwrap();
        let first: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        let keys: Vec<_> = first.as_object().unwrap().keys().cloned().collect();
        #[rustfmt::skip]
        assert_eq!(keys, ["v", "ts", "run_id", "iteration", "story", "category", "signature", "detail"]);
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure().unwrap();
        append(&store, &failure(Category::GateFailure, "a").event(t0())).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(store.failures()).unwrap();
        f.write_all(b"{\"category\":\"gate-fail\n").unwrap();
        f.write_all(b"{\"event\":\"run_start\",\"run_id\":\"r\"}\n").unwrap();
        f.write_all(b"{\"category\":\"gate-failure\"}\n").unwrap();
        f.write_all(b"[1,2]\n").unwrap();
        f.write_all(b"{\"category\":\"agent-exit\",\"signature\":\"old row\"}\n").unwrap();
        append(&store, &failure(Category::GateNotRun, "b").event(t0())).unwrap();
        let rows = read(&store).unwrap();
        let sigs: Vec<_> = rows.events.iter().map(|e| e.signature.as_str()).collect();
        assert_eq!(sigs, ["a", "old row", "b"]);
        // Broken JSON, a row without a signature, and a non-object.
        assert_eq!(rows.malformed, 3);
        assert_eq!(rows.warning().unwrap(), "failures.jsonl: skipped 3 malformed line(s)");
        assert_eq!(rows.events[1].ts, DateTime::<Utc>::UNIX_EPOCH);
    }

    #[test]
    fn detail_is_bounded_with_its_length() {
        let detail = "d".repeat(10_000);
        let mut f = failure(Category::GateFailure, "s");
        f.detail = &detail;
        let event = f.event(t0());
        assert_eq!(text::chars(&event.detail), MAX_DETAIL_CHARS);
        assert!(event.detail.ends_with("[cut: originalLength=10000]"));
    }
}
