//! ralph-claude-code's `fix_plan.md` checklist read as stories: pure, text
//! in, items out.
//!
//! What counts as an item is what ralph-claude-code counts: a line
//! `- [ ] text` or `- [x] text` (any indent, `X` too); `* [ ]`, `1. [ ]`
//! and checkboxes inside headings do not. A checkbox with no open item at a
//! smaller indent starts a story; anything indented under it (nested
//! checkboxes, bullets, text) goes into that story's description. Headings
//! rank the items: High/Critical first, then Medium and anything unnamed,
//! then Low, then the optional sections (Optional, Future, Nice to Have);
//! within a rank, the order of the file. Priorities are 1..N in that order.

/// One top-level checklist item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    pub(crate) title: String,
    pub(crate) done: bool,
    /// The heading above it, as written.
    pub(crate) section: Option<String>,
    pub(crate) rank: Rank,
    /// The lines indented under it, de-indented, in order.
    pub(crate) details: Vec<String>,
}

/// How a heading orders the items under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    High,
    Normal,
    Low,
    /// ralph-claude-code's OPTIONAL_SECTIONS: not blocking there; last here.
    Optional,
}

impl Rank {
    fn of(heading: &str) -> Rank {
        let h = heading.to_lowercase();
        // Whole words: "Follow-ups" is not a low-priority section.
        let words: Vec<&str> = h.split(|c: char| !c.is_alphanumeric()).collect();
        let has = |want: &[&str]| want.iter().any(|w| words.contains(w));
        if has(&["optional", "future", "someday", "backlog"]) || h.contains("nice to have") {
            Rank::Optional
        } else if has(&["high", "higher", "highest", "critical", "urgent", "p0", "p1"]) {
            Rank::High
        } else if has(&["low", "lower", "lowest", "p3"]) {
            Rank::Low
        } else {
            Rank::Normal
        }
    }
}

/// A checkbox line: its indent, whether it is ticked, its text.
fn checkbox(line: &str) -> Option<(usize, bool, &str)> {
    let indent = line.len() - line.trim_start().len();
    let rest = line.trim_start().strip_prefix("- [")?;
    let (mark, text) = rest.split_at_checked(1)?;
    let text = text.strip_prefix(']')?;
    let done = match mark {
        " " => false,
        "x" | "X" => true,
        _ => return None,
    };
    if !(text.is_empty() || text.starts_with([' ', '\t'])) {
        return None;
    }
    Some((indent, done, text.trim()))
}

fn heading(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let text = t.trim_start_matches('#');
    (t.starts_with('#') && (text.is_empty() || text.starts_with(' '))).then(|| text.trim())
}

/// The items of a fix_plan, in file order.
pub(crate) fn parse(text: &str) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    let mut section: Option<String> = None;
    // The indent of the open item, while lines may still belong to it.
    let mut open: Option<usize> = None;
    // Inside a code block: whose details it is (`Some(indent)`), if anyone's.
    let mut fenced: Option<Option<usize>> = None;
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        let indent = line.len() - line.trim_start().len();
        let fence = line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        // A checklist in a code block is an example, not work; under an
        // item, the block is part of its description.
        if let Some(owner) = fenced {
            if let (Some(base), Some(item)) = (owner, items.last_mut()) {
                item.details.push(dedent(line, base + 2));
            }
            if fence {
                fenced = None;
            }
            continue;
        }
        if fence {
            let owner = open.filter(|base| indent > *base);
            if let (Some(base), Some(item)) = (owner, items.last_mut()) {
                item.details.push(dedent(line, base + 2));
            } else {
                open = None;
            }
            fenced = Some(owner);
            continue;
        }
        if let Some(h) = heading(line) {
            section = Some(h.to_string()).filter(|h| !h.is_empty());
            open = None;
            continue;
        }
        if let Some(base) = open {
            if line.trim().is_empty() {
                continue;
            }
            if indent > base {
                let item = items.last_mut().expect("an open item");
                item.details.push(dedent(line, base + 2));
                continue;
            }
            open = None;
        }
        if let Some((indent, done, title)) = checkbox(line) {
            if title.is_empty() {
                continue;
            }
            let rank = section.as_deref().map_or(Rank::Normal, Rank::of);
            items.push(Item {
                title: title.to_string(),
                done,
                section: section.clone(),
                rank,
                details: Vec::new(),
            });
            open = Some(indent);
        }
    }
    items
}

/// `line` without up to `n` columns of leading blanks.
fn dedent(line: &str, n: usize) -> String {
    let blanks = line.len() - line.trim_start().len();
    line[blanks.min(n)..].to_string()
}

/// The items in the order they should be worked: by rank, then by file order.
pub(crate) fn ordered(mut items: Vec<Item>) -> Vec<Item> {
    items.sort_by_key(|i| i.rank);
    items
}

/// Titles longer than this are clipped; the whole text goes into the description.
const TITLE_CHARS: usize = 100;

/// The prd.json stories of the items: ids `US-001`… and priorities 1… in
/// working order, ticked items passing, nested lines in the description.
pub(crate) fn stories(items: &[Item], source: &str) -> Vec<serde_json::Value> {
    items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            let title = crate::text::clip(&item.title, TITLE_CHARS);
            let mut description = String::new();
            if title != item.title {
                description.push_str(&item.title);
            }
            if !item.details.is_empty() {
                if !description.is_empty() {
                    description.push_str("\n\n");
                }
                description.push_str(&item.details.join("\n"));
            }
            let notes = match &item.section {
                Some(s) => format!("imported from {source} ({s})"),
                None => format!("imported from {source}"),
            };
            serde_json::json!({
                "id": format!("US-{:03}", n + 1),
                "title": title,
                "description": description,
                "acceptanceCriteria": [],
                "priority": n + 1,
                "passes": item.done,
                "notes": notes,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "\
# Ralph Fix Plan

## Low Priority
- [ ] Polish the README

## High Priority
- [x] Set up the project
- [ ] Parse the config file
  - [ ] reject unknown keys
  - [x] accept comments
    keep this note
* [ ] not an item (a star bullet)
1. [ ] not an item (numbered)

## Medium Priority
- [ ] Add a cache
- [X] Log requests

### - [ ] a checkbox in a heading is not an item
## Completed
- [x] Write the first test
- [2026-01-29] a date, not a checkbox
- [ ]
## Future Enhancements
- [ ] Plugins

## Notes
- Focus on the MVP
";

    #[test]
    fn checked_unchecked_and_nested_items_in_their_sections() {
        let items = parse(PLAN);
        #[rustfmt::skip]
        let want: &[(&str, bool, Option<&str>, Rank, &[&str])] = &[
            ("Polish the README", false, Some("Low Priority"), Rank::Low, &[]),
            ("Set up the project", true, Some("High Priority"), Rank::High, &[]),
            ("Parse the config file", false, Some("High Priority"), Rank::High,
                &["- [ ] reject unknown keys", "- [x] accept comments", "  keep this note"]),
            ("Add a cache", false, Some("Medium Priority"), Rank::Normal, &[]),
            ("Log requests", true, Some("Medium Priority"), Rank::Normal, &[]),
            ("Write the first test", true, Some("Completed"), Rank::Normal, &[]),
            ("Plugins", false, Some("Future Enhancements"), Rank::Optional, &[]),
        ];
        let got: Vec<_> = items
            .iter()
            .map(|i| {
                let d: Vec<&str> = i.details.iter().map(String::as_str).collect();
                (i.title.as_str(), i.done, i.section.as_deref(), i.rank, d)
            })
            .collect();
        let want: Vec<_> =
            want.iter().map(|(t, d, s, r, n)| (*t, *d, *s, *r, n.to_vec())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn order_is_rank_then_file_order_and_becomes_priority() {
        let stories = stories(&ordered(parse(PLAN)), ".ralph/fix_plan.md");
        let got: Vec<(String, String, u64, bool)> = stories
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_string(),
                    s["title"].as_str().unwrap().to_string(),
                    s["priority"].as_u64().unwrap(),
                    s["passes"].as_bool().unwrap(),
                )
            })
            .collect();
        let want = [
            ("US-001", "Set up the project", 1, true),
            ("US-002", "Parse the config file", 2, false),
            ("US-003", "Add a cache", 3, false),
            ("US-004", "Log requests", 4, true),
            ("US-005", "Write the first test", 5, true),
            ("US-006", "Polish the README", 6, false),
            ("US-007", "Plugins", 7, false),
        ];
        let want: Vec<_> =
            want.iter().map(|(i, t, p, d)| (i.to_string(), t.to_string(), *p, *d)).collect();
        assert_eq!(got, want);
        assert_eq!(
            stories[1]["description"],
            "- [ ] reject unknown keys\n- [x] accept comments\n  keep this note"
        );
        assert_eq!(stories[1]["notes"], "imported from .ralph/fix_plan.md (High Priority)");
    }

    #[test]
    fn headings_rank_by_whole_words() {
        #[rustfmt::skip]
        let cases: &[(&str, Rank)] = &[
            ("High Priority", Rank::High), ("🔥 Critical", Rank::High), ("P0", Rank::High),
            ("Medium Priority", Rank::Normal), ("Follow-ups", Rank::Normal), ("Slowness", Rank::Normal),
            ("Completed", Rank::Normal), ("Low priority (later)", Rank::Low),
            ("Future Enhancements", Rank::Optional), ("Nice to Have", Rank::Optional),
        ];
        for (heading, want) in cases {
            assert_eq!(Rank::of(heading), *want, "{heading}");
        }
    }

    #[test]
    fn edge_cases() {
        #[rustfmt::skip]
        let cases: &[(&str, &[(&str, bool)])] = &[
            ("", &[]),
            ("- [ ] a\r\n- [x] b\r\n", &[("a", false), ("b", true)]),
            ("- [ ]no space is not a box\n", &[]),
            ("- [y] other marks are not boxes\n", &[]),
            // A nested box under a plain bullet is still an item.
            ("- notes\n  - [ ] inner\n", &[("inner", false)]),
            // A blank line does not end an item; an unindented line does.
            ("- [ ] a\n\n  more of a\ntext\n  - [ ] b\n", &[("a", false), ("b", false)]),
            ("- [ ] a\n```\n- [ ] an example\n```\n- [x] b\n", &[("a", false), ("b", true)]),
            ("- [ ] a\n  ```\n  - [ ] in a's block\n  ```\n- [ ] b\n", &[("a", false), ("b", false)]),
        ];
        for (text, want) in cases {
            let items = parse(text);
            let got: Vec<(&str, bool)> = items.iter().map(|i| (i.title.as_str(), i.done)).collect();
            assert_eq!(got, want.to_vec(), "{text:?}");
        }
        let a = &parse("- [ ] a\n\n  more of a\n")[0];
        assert_eq!(a.details, ["more of a"]);
        let a = &parse("- [ ] a\n  ```sh\n  make\n\n  ```\n")[0];
        assert_eq!(a.details, ["```sh", "make", "", "```"]);
    }

    #[test]
    fn a_long_item_keeps_its_whole_text_in_the_description() {
        let long = "word ".repeat(40);
        let s = &stories(&parse(&format!("- [ ] {long}\n")), "fix_plan.md")[0];
        assert!(s["title"].as_str().unwrap().chars().count() <= TITLE_CHARS);
        assert_eq!(s["description"], long.trim());
    }
}
