//! How rule cards read: the block armed rules add to every prompt, and
//! the list and card views of `ralph rules`.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::rules::{Card, NEW_NOTE, Rules, STALE_NEW_NOTE, State};
use crate::prompt;
use crate::text;

/// The armed rules for every iteration's prompt, in arming order, each
/// statement fenced. Empty when none is armed: candidates and rejected,
/// demoted or archived cards never reach a prompt.
pub fn rules_block(rules: &Rules) -> String {
    let armed = rules.armed();
    if armed.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Rules for this project\n\
         A person approved each of these after the same failure kept coming back. Follow \
         them. Each rule's text is quoted below.\n",
    );
    for (n, card) in armed.iter().enumerate() {
        let armed_on = card.armed_at.map(|at| at.format("%Y-%m-%d").to_string());
        let m = card.metrics;
        let record = if m.violations + m.compliance == 0 {
            "no evidence yet".to_string()
        } else {
            format!("since then violated {} times, followed {} times", m.violations, m.compliance)
        };
        let _ = write!(
            out,
            "\nRule {} ({}, armed {}; {record}):\n{}",
            n + 1,
            card.id,
            armed_on.as_deref().unwrap_or("?"),
            prompt::fence(&card.statement)
        );
    }
    out
}

/// `ralph rules list`: one line per card, armed first, then candidates
/// (most seen first), then the rest.
pub fn render_list(rules: &Rules) -> String {
    if rules.cards().is_empty() {
        return "no rules yet: a card appears when a failure is recorded\n".into();
    }
    let mut cards: Vec<&Card> = rules.cards().iter().collect();
    cards.sort_by(|a, b| (a.state, b.occurrences, &a.id).cmp(&(b.state, a.occurrences, &b.id)));
    let rows: Vec<[String; 6]> = cards
        .iter()
        .map(|c| {
            [
                c.id.clone(),
                c.state.as_str().to_string(),
                c.occurrences.to_string(),
                flags(c),
                c.category.to_string(),
                text::clip(&c.signature, 60),
            ]
        })
        .collect();
    let header = ["ID", "STATE", "OCCURRENCES", "FLAGS", "CATEGORY", "SIGNATURE"];
    let width = |col: usize| {
        rows.iter().map(|r| text::chars(&r[col])).chain([header[col].len()]).max().unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let mut out = String::new();
    let header = header.map(String::from);
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (col, cell) in row.iter().enumerate() {
            let w = widths[col];
            let _ = match col {
                2 => write!(line, "{cell:>w$}  "),
                5 => write!(line, "{cell}"),
                _ => write!(line, "{cell:<w$}  "),
            };
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn flags(card: &Card) -> String {
    let mut flags = Vec::new();
    if card.ready && card.state == State::Candidate {
        flags.push("ready");
    }
    if card.undeterminable && card.state == State::Armed {
        flags.push("undeterminable");
    }
    if flags.is_empty() { "-".into() } else { flags.join(",") }
}

/// `ralph rules show <id>`: every field.
pub fn render_card(card: &Card) -> String {
    let time = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    let mut out = String::new();
    let mut field = |name: &str, value: &str| {
        let _ = writeln!(out, "{:<14}{value}", format!("{name}:"));
    };
    field("id", &card.id);
    field("state", card.state.as_str());
    field("note", if card.note == STALE_NEW_NOTE { NEW_NOTE } else { &card.note });
    field("category", card.category.as_str());
    field("signature", &card.signature);
    field("statement", &text::collapse(&card.statement));
    let ready = if card.ready { " (ready)" } else { "" };
    field("occurrences", &format!("{}{ready}", card.occurrences));
    field("recurrences", &card.recurrences.to_string());
    field("first seen", &time(card.first_seen));
    field("last seen", &time(card.last_seen));
    field("changed", &time(card.changed_at));
    field("armed at", &card.armed_at.map(time).unwrap_or_else(|| "-".into()));
    field("violations", &card.metrics.violations.to_string());
    field("compliance", &card.metrics.compliance.to_string());
    let undeterminable = if card.undeterminable {
        "yes: violated, never followed yet; decide by hand"
    } else {
        "no"
    };
    field("undetermined", undeterminable);
    let _ = writeln!(out, "samples:");
    for s in &card.samples {
        let detail = text::clip(&text::collapse(&s.detail), 200);
        let _ =
            writeln!(out, "  {} story {} iteration {}: {detail}", time(s.at), s.story, s.iteration);
    }
    out
}
