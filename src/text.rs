//! Text helpers in one place: cleaning what comes from agents and tools
//! (escapes, control characters), bounding it (clipping by chars, with or
//! without a marker), and plurals for the words people read.

use std::sync::LazyLock;

use regex::Regex;

/// Terminal escape sequences (colours, cursor moves, titles).
static ESCAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]").unwrap()
});

/// `text` without terminal escapes and with other control characters
/// (except newlines and tabs) turned into spaces, so stored text cannot
/// repaint the terminal of a person reading `ralph rules show`.
pub fn plain(text: &str) -> String {
    let text = ESCAPES.replace_all(text, "");
    text.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { ' ' } else { c }).collect()
}

/// At most `max` bytes of `text`, cut at a char boundary (for bounds on
/// memory, where bytes are what count).
pub fn prefix_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last `max` bytes of `text` or fewer, starting at a char boundary.
pub fn suffix_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// `n` and the word for that many: `count(3, "story", "stories")` is
/// "3 stories".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `"s"` unless there is exactly one: `format!("{n} file{}", plural(n))`.
pub fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The candidate `word` is most likely a typo of, for "did you mean …?":
/// the closest by edit distance (a swap of two neighbours counts as one
/// edit), when it is within a third of the word's length. Ties go to the
/// earlier candidate.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (chars(word) / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edits(word, c);
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Edits (insert, delete, replace, swap of neighbours) from `a` to `b`.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows of the optimal-string-alignment table: two back, one back, this one.
    let mut before: Vec<usize> = Vec::new();
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let same = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + same);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

/// Trimmed, with every run of whitespace (newlines included) made one space.
pub fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn chars(text: &str) -> usize {
    text.chars().count()
}

/// At most `max` chars of `text`, ending with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    if chars(text) <= max {
        return text.to_string();
    }
    let keep: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{keep}…")
}

/// The last `max` chars of `text`.
pub fn tail_chars(text: &str, max: usize) -> String {
    let total = chars(text);
    text.chars().skip(total.saturating_sub(max)).collect()
}

/// At most `max` chars of `text`. When cut, the end is a marker that says
/// so and carries the original length, and the marker counts towards `max`.
pub fn cut(text: &str, max: usize) -> String {
    let total = chars(text);
    if total <= max {
        return text.to_string();
    }
    let marker = format!("\n… [cut: originalLength={total}]");
    let keep: String = text.chars().take(max.saturating_sub(chars(&marker))).collect();
    format!("{keep}{marker}")
}

/// A cost as people read it: `$1.23`, `~$1.23` when estimated from tokens,
/// and `n/a` when nothing was reported (agents that report no cost).
pub fn usd(cost: f64, estimated: bool) -> String {
    if cost <= 0.0 && !estimated {
        return "n/a".into();
    }
    format!("{}${cost:.2}", if estimated { "~" } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_read_as_dollars_estimates_or_not_reported() {
        for (cost, est, want) in [
            (1.234, false, "$1.23"),
            (1.234, true, "~$1.23"),
            (0.0, false, "n/a"),
            (0.0, true, "~$0.00"),
        ] {
            assert_eq!(usd(cost, est), want);
        }
    }

    #[test]
    fn plain_drops_escapes_and_controls() {
        #[rustfmt::skip]
        let cases: &[(&str, &str)] = &[
            ("\x1b[31merror\x1b[0m: x", "error: x"),
            ("a\x1b]0;title\x07b", "ab"),
            ("a\rb\x00c", "a b c"),
            ("keep\nlines\tand tabs", "keep\nlines\tand tabs"),
        ];
        for (input, expected) in cases {
            assert_eq!(plain(input), *expected, "{input:?}");
        }
    }

    #[test]
    fn closest_finds_typos_and_nothing_that_is_merely_another_word() {
        let commands = ["run", "status", "reset-circuit", "agents", "doctor", "config"];
        #[rustfmt::skip]
        let cases: &[(&str, Option<&str>)] = &[
            ("stauts", Some("status")),
            ("statuss", Some("status")),
            ("agnets", Some("agents")),
            ("rn", Some("run")),
            ("reset-circut", Some("reset-circuit")),
            ("confg", Some("config")),
            ("deploy", None),
            ("x", None),
            ("", None),
        ];
        for (word, want) in cases {
            assert_eq!(closest(word, commands), *want, "{word:?}");
        }
        assert_eq!(edits("abc", "abc"), 0);
        assert_eq!(edits("ab", "ba"), 1);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("agent.modle", "agent.model"), 1);
    }

    #[test]
    fn cut_and_clip_stay_within_max() {
        let long = "é".repeat(3000);
        let c = cut(&long, 2000);
        assert_eq!(chars(&c), 2000);
        assert!(c.ends_with("[cut: originalLength=3000]"), "{}", &c[c.len() - 40..]);
        assert_eq!(cut("short", 2000), "short");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abcd", 4), "abcd");
        assert_eq!(collapse("  a \n\t b  "), "a b");
    }
}
