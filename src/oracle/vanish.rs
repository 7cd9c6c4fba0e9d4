//! Tests may not vanish: a gate that passes because tests were deleted,
//! ignored or skipped proves nothing.
//!
//! Two signals, both pure. [`vanished`] compares what the runners counted
//! (`gate::TestCounts`) before a story's work with what they count after:
//! fewer tests run or passing, or more set aside, and the story is not
//! verified. [`flags`] reads the iteration's diff for what a person should
//! look at: skip markers added (`#[ignore]`, `@pytest.mark.skip`,
//! `it.skip`/`xit`, `t.Skip`) and test functions deleted, each with its
//! file and line. The flags are reported, not a verdict: renaming or
//! moving a test is not deleting it, and the counts decide.

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::gate::TestCounts;

/// Fewer tests counted after a story's work than before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vanished {
    pub before: TestCounts,
    pub after: TestCounts,
}

/// Whether tests vanished between `before` and `after`: fewer passing,
/// fewer run (passed or failed), or more ignored or skipped.
pub fn vanished(before: TestCounts, after: TestCounts) -> Option<Vanished> {
    let shrank = after.passed < before.passed
        || after.ran() < before.ran()
        || after.set_aside() > before.set_aside();
    shrank.then_some(Vanished { before, after })
}

impl fmt::Display for Vanished {
    /// "41 tests passed before, 39 now: 2 tests disappeared".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::text::count;
        let (b, a) = (self.before, self.after);
        let mut parts = Vec::new();
        if a.passed < b.passed {
            parts.push(format!(
                "{} passed before, {} now: {} disappeared",
                count(b.passed as usize, "test", "tests"),
                a.passed,
                count((b.passed - a.passed) as usize, "test", "tests")
            ));
        } else if a.ran() < b.ran() {
            parts.push(format!(
                "{} ran before, {} now: {} disappeared",
                count(b.ran() as usize, "test", "tests"),
                a.ran(),
                count((b.ran() - a.ran()) as usize, "test", "tests")
            ));
        }
        if a.set_aside() > b.set_aside() {
            parts.push(format!(
                "{} ignored or skipped before, {} now",
                count(b.set_aside() as usize, "test", "tests"),
                a.set_aside()
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// What the diff shows about tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Flag {
    /// A skip marker added, at its line in the new file.
    SkipAdded { path: String, line: usize, marker: String },
    /// A test function gone, at its line in the old file.
    TestDeleted { path: String, line: usize, name: String },
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Flag::SkipAdded { path, line, marker } => {
                write!(f, "{path}:{line}: skip marker added ({marker})")
            }
            Flag::TestDeleted { path, line, name } => {
                write!(f, "{path}:{line}: test {name} deleted")
            }
        }
    }
}

/// One changed file: its text before and after (`None`: absent, or not text).
#[derive(Debug, Clone)]
pub struct FileChange {
    pub path: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// The files whose diff is read for tests: source files of the runners
/// ralph knows.
pub fn is_test_source(path: &str) -> bool {
    let ext = path.rsplit('.').next().unwrap_or("");
    matches!(ext, "rs" | "py" | "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs" | "go")
}

fn skip_markers() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"(#\[ignore\b[^\]]*\]",
            r"|@pytest\.mark\.(?:skip|skipif|xfail)\b",
            r"|@unittest\.(?:skip|skipIf|skipUnless|expectedFailure)\b",
            r"|\bpytest\.skip\(",
            r"|\b(?:it|test|describe)\.skip\(",
            r"|\bx(?:it|test|describe)\(",
            r"|\bt\.Skip(?:f|Now)?\()"
        ))
        .expect("skip marker pattern")
    })
}

fn test_definitions() -> &'static [Regex] {
    static RE: std::sync::OnceLock<Vec<Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        [
            // python
            r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(",
            // go
            r"^func\s+(Test\w+)\s*\(",
            // jest, mocha, vitest
            r#"^\s*x?(?:it|test)(?:\.\w+)?\s*\(\s*['"`]([^'"`]+)['"`]"#,
        ]
        .iter()
        .map(|p| Regex::new(p).expect("test definition pattern"))
        .collect()
    })
}

/// The tests a file defines: name → the lines (1-based) defining it.
fn tests_in(path: &str, text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let rust = path.ends_with(".rs");
    let rust_attr = Regex::new(r"^\s*#\[(?:\w+::)*test\b").ok();
    let rust_fn = Regex::new(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+(\w+)").ok();
    for (i, line) in lines.iter().enumerate() {
        if rust {
            let (Some(attr), Some(func)) = (&rust_attr, &rust_fn) else { continue };
            if !attr.is_match(line) {
                continue;
            }
            // The function the attribute stands on: within the next lines.
            if let Some((j, name)) = lines
                .iter()
                .enumerate()
                .skip(i + 1)
                .take(4)
                .find_map(|(j, l)| func.captures(l).map(|c| (j, c[1].to_string())))
            {
                out.push((name, j + 1));
            }
            continue;
        }
        if let Some(c) = test_definitions().iter().find_map(|re| re.captures(line)) {
            out.push((c[1].to_string(), i + 1));
        }
    }
    out
}

/// The skip markers added and the test functions deleted by `changes`,
/// in file order. A test deleted in one file and defined anew in another
/// (moved), or still defined elsewhere, is not deleted.
pub fn flags(changes: &[FileChange]) -> Vec<Flag> {
    let mut out = Vec::new();
    let mut before: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    let mut after: BTreeMap<String, usize> = BTreeMap::new();
    for c in changes.iter().filter(|c| is_test_source(&c.path)) {
        let old = c.old.as_deref().unwrap_or("");
        let new = c.new.as_deref().unwrap_or("");
        // Added marker lines: those the new text has more of than the old.
        let mut old_lines: BTreeMap<&str, usize> = BTreeMap::new();
        for l in old.lines().filter(|l| skip_markers().is_match(l)) {
            *old_lines.entry(l.trim()).or_default() += 1;
        }
        for (i, l) in new.lines().enumerate() {
            let Some(m) = skip_markers().find(l) else { continue };
            match old_lines.get_mut(l.trim()) {
                Some(n) if *n > 0 => *n -= 1,
                _ => out.push(Flag::SkipAdded {
                    path: c.path.clone(),
                    line: i + 1,
                    marker: m.as_str().trim_end_matches('(').to_string(),
                }),
            }
        }
        for (name, line) in tests_in(&c.path, old) {
            before.entry(name).or_default().push((c.path.clone(), line));
        }
        for (name, _) in tests_in(&c.path, new) {
            *after.entry(name).or_default() += 1;
        }
    }
    for (name, places) in before {
        let kept = after.get(&name).copied().unwrap_or(0);
        for (path, line) in places.into_iter().skip(kept) {
            out.push(Flag::TestDeleted { path, line, name: name.clone() });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(passed: u32, failed: u32, ignored: u32, skipped: u32) -> TestCounts {
        TestCounts { passed, failed, ignored, skipped }
    }

    #[test]
    fn when_tests_vanished() {
        #[rustfmt::skip]
        let rows: &[(TestCounts, TestCounts, Option<&str>)] = &[
            // More tests, or the same: fine.
            (c(41, 0, 0, 0), c(41, 0, 0, 0), None),
            (c(41, 0, 0, 0), c(43, 0, 0, 0), None),
            // The failing test fixed.
            (c(3, 1, 0, 0), c(4, 0, 0, 0), None),
            // Two deleted.
            (c(41, 0, 0, 0), c(39, 0, 0, 0), Some("41 tests passed before, 39 now: 2 tests disappeared")),
            // The failing test deleted.
            (c(3, 1, 0, 0), c(3, 0, 0, 0), Some("4 tests ran before, 3 now: 1 test disappeared")),
            // Ignored, skipped.
            (c(3, 1, 0, 0), c(3, 0, 1, 0), Some("4 tests ran before, 3 now: 1 test disappeared; 0 tests ignored or skipped before, 1 now")),
            (c(4, 0, 0, 1), c(4, 0, 0, 2), Some("1 test ignored or skipped before, 2 now")),
            // unittest counts a skipped test as run.
            (c(4, 0, 0, 0), c(4, 0, 0, 1), Some("0 tests ignored or skipped before, 1 now")),
        ];
        for (before, after, want) in rows {
            let got = vanished(*before, *after).map(|v| v.to_string());
            assert_eq!(got.as_deref(), *want, "{before:?} → {after:?}");
        }
    }

    fn change(path: &str, old: &str, new: &str) -> FileChange {
        FileChange { path: path.into(), old: Some(old.into()), new: Some(new.into()) }
    }

    #[test]
    fn skip_markers_added_and_tests_deleted_with_their_lines() {
        let rust_old = "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {}\n    #[test]\n    fn divides() {}\n}\n";
        let rust_new =
            "#[cfg(test)]\nmod tests {\n    #[test]\n    #[ignore]\n    fn adds() {}\n}\n";
        let py_old = "import pytest\n\ndef test_add():\n    assert add(1, 2) == 3\n\ndef test_zero():\n    assert div(1, 0) is None\n";
        let py_new = "import pytest\n\n@pytest.mark.skip(reason='later')\ndef test_add():\n    assert True\n";
        let js = change(
            "a.test.js",
            "it('adds', () => {});\n",
            "it.skip('adds', () => {});\nxit('b', () => {});\n",
        );
        let go = change(
            "a_test.go",
            "func TestA(t *testing.T) {\n}\n",
            "func TestA(t *testing.T) {\n\tt.Skip()\n}\n",
        );
        let got: Vec<String> = flags(&[
            change("src/lib.rs", rust_old, rust_new),
            change("tests/test_calc.py", py_old, py_new),
            js,
            go,
        ])
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            got,
            [
                "src/lib.rs:4: skip marker added (#[ignore])",
                "tests/test_calc.py:3: skip marker added (@pytest.mark.skip)",
                "a.test.js:1: skip marker added (it.skip)",
                "a.test.js:2: skip marker added (xit)",
                "a_test.go:2: skip marker added (t.Skip)",
                "src/lib.rs:6: test divides deleted",
                "tests/test_calc.py:6: test test_zero deleted",
            ]
        );
    }

    #[test]
    fn a_moved_or_kept_test_and_an_old_marker_are_not_flagged() {
        let got = flags(&[
            change("tests/a.py", "def test_x():\n    pass\n", ""),
            change("tests/b.py", "", "def test_x():\n    pass\n"),
            change("src/m.rs", "#[ignore]\nfn a() {}\n", "// moved\n#[ignore]\nfn a() {}\n"),
            change("README.md", "def test_y():\n", ""),
        ]);
        assert!(got.is_empty(), "{got:?}");
    }
}
