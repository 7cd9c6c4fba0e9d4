//! `ralph analyze FILE`: the analysis of a saved agent output (a log from
//! `.ralph/logs/` or any file), streamed, as the loop would see it.

use std::io::BufRead;
use std::path::Path;

use chrono::Utc;

use crate::analyze::{Format, Outcome};
use crate::cli::{AnalyzeArgs, Global, SettingArgs};
use crate::error::Error;
use crate::ui::plural;

use super::common::{print, print_json, project_dir};
use super::flags::layers;

fn guess_format(head: &[u8]) -> Format {
    let text = String::from_utf8_lossy(head);
    for line in text.lines().map(str::trim_start).filter(|l| l.starts_with('{')) {
        let kind = |k: &str| {
            line.contains(&format!("\"type\":\"{k}")) || line.contains(&format!("\"type\": \"{k}"))
        };
        if kind("thread.") || kind("turn.") || kind("item.") {
            return Format::Codex;
        }
        if kind("step_start") || kind("step_finish") || line.contains("\"sessionID\"") {
            return Format::Opencode;
        }
        if kind("init") || (kind("message") && line.contains("\"role\"")) {
            return Format::Gemini;
        }
        if kind("tool_call") {
            return Format::Cursor;
        }
        if kind("system")
            || kind("assistant")
            || kind("result")
            || kind("user")
            || kind("rate_limit_event")
        {
            return Format::Claude;
        }
    }
    Format::Text
}

pub(crate) fn run(g: &Global, args: &AnalyzeArgs) -> Result<u8, Error> {
    let file = std::fs::File::open(&args.file)
        .map_err(|e| Error::Usage(format!("cannot open {}: {e}", args.file.display())))?;
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let format = match args.format {
        Some(f) => f,
        None => {
            let head = reader
                .fill_buf()
                .map_err(|e| Error::io(format!("read {}", args.file.display()), e))?;
            guess_format(&head[..head.len().min(64 * 1024)])
        }
    };
    let config = layers(g, &project_dir(g)?, &SettingArgs::default())?.resolve();
    let patterns = crate::analyze::Patterns::configured(&config.patterns)
        .map_err(|e| Error::Config(e.into()))?;
    let end = crate::analyze::ProcessEnd { exit_code: Some(0), ..Default::default() };
    let outcome = crate::analyze::analyze_reader(reader, format, patterns, &end, Utc::now())
        .map_err(|e| Error::io(format!("read {}", args.file.display()), e))?;
    if g.json {
        let v = serde_json::json!({"file": args.file, "format": format, "outcome": outcome});
        print_json(&v)?;
        return Ok(0);
    }
    print(&render(&args.file, format, &outcome))?;
    Ok(0)
}

/// The human view of an analysis.
fn render(file: &Path, format: Format, outcome: &Outcome) -> String {
    let (lines, bytes) = (outcome.output_lines, outcome.output_bytes);
    let mut o = format!(
        "{} ({lines} line{}, {bytes} byte{}, format {format:?})\n",
        file.display(),
        plural(lines as usize),
        plural(bytes as usize),
    );
    let yes = |b: bool| if b { "yes" } else { "no" };
    o.push_str(&format!("claimed COMPLETE: {}\n", yes(outcome.claimed_complete)));
    match &outcome.status_block {
        Some(b) => o.push_str(&format!(
            "status block: status {:?}, exit signal {:?}, tasks {:?}, files {:?}, tests {:?}\n",
            b.status, b.exit_signal, b.tasks_completed, b.files_modified, b.tests_status
        )),
        None => o.push_str("status block: none\n"),
    }
    if let Some(e) = &outcome.status_block_error {
        o.push_str(&format!("status block problem: {e}\n"));
    }
    if let Some(e) = &outcome.error {
        o.push_str(&format!("error: {}\n", e));
    }
    if let Some(sig) = &outcome.error_signature {
        o.push_str(&format!("error signature: {sig}\n"));
    }
    if !outcome.permission_denials.is_empty() {
        o.push_str(&format!("permission denials: {}\n", outcome.permission_denials.join(", ")));
    }
    if let Some(s) = &outcome.session_id {
        o.push_str(&format!("session: {s}\n"));
    }
    if let Some(c) = outcome.cost_usd {
        o.push_str(&format!("cost: ${c:.4}\n"));
    }
    if let Some(t) = outcome.tokens {
        o.push_str(&format!(
            "tokens: {} in, {} out, {} cache read, {} cache write\n",
            t.input, t.output, t.cache_read, t.cache_write
        ));
    }
    if let Some(t) = outcome.turns {
        o.push_str(&format!("turns: {t}\n"));
    }
    if !outcome.final_text.is_empty() {
        let text: String = outcome
            .final_text
            .chars()
            .rev()
            .take(600)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        o.push_str(&format!("final text (end):\n{}\n", crate::agent::display::clean(&text)));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_counts_in_the_singular_and_the_plural() {
        let cases =
            [(1, 1, "(1 line, 1 byte, format Text)"), (2, 0, "(2 lines, 0 bytes, format Text)")];
        for (lines, bytes, want) in cases {
            let outcome =
                Outcome { output_lines: lines, output_bytes: bytes, ..Default::default() };
            let text = render(Path::new("out.log"), Format::Text, &outcome);
            let first = text.lines().next().unwrap();
            assert_eq!(first, format!("out.log {want}"));
        }
    }

    #[test]
    fn what_the_analysis_found_is_shown_and_what_it_did_not_is_left_out() {
        let outcome = Outcome {
            claimed_complete: true,
            permission_denials: vec!["Bash(rm -rf /)".into()],
            cost_usd: Some(0.12345),
            final_text: "done".into(),
            ..Default::default()
        };
        let text = render(Path::new("out.log"), Format::Claude, &outcome);
        for want in [
            "claimed COMPLETE: yes\n",
            "status block: none\n",
            "permission denials: Bash(rm -rf /)\n",
            "cost: $0.1235\n",
            "final text (end):\ndone\n",
        ] {
            assert!(text.contains(want), "{want:?} missing from:\n{text}");
        }
        for absent in ["session:", "tokens:", "turns:", "error:"] {
            assert!(!text.contains(absent), "{absent:?} in:\n{text}");
        }
    }
}
