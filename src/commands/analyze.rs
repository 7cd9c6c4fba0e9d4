//! `ralph analyze FILE`: the analysis of a saved agent output (a log from
//! `.ralph/logs/` or any file), streamed, as the loop would see it.

use std::fmt::Write as _;
use std::io::BufRead;
use std::path::Path;

use chrono::Utc;

use crate::analyze::{Format, Outcome, Status};
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

/// A format as `--format` spells it.
fn format_name(format: Format) -> String {
    clap::ValueEnum::to_possible_value(&format)
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// `IN_PROGRESS` → "in progress", as people write it.
fn words(value: &str) -> String {
    value.trim().replace('_', " ").to_lowercase()
}

/// The RALPH_STATUS block, field by field as people write them.
fn status_block(o: &mut String, block: Option<&crate::analyze::StatusBlock>) {
    match block {
        Some(b) => {
            o.push_str("status block:\n");
            let status = match b.status {
                Some(Status::InProgress) => "in progress",
                Some(Status::Complete) => "complete",
                Some(Status::Blocked) => "blocked",
                None => "not given",
            };
            let _ = writeln!(o, "  status: {status}");
            let exit = match b.exit_signal {
                Some(e) => yes(e).to_string(),
                None => "not given".into(),
            };
            let _ = writeln!(o, "  exit signal: {exit}");
            if let Some(n) = b.tasks_completed {
                let _ = writeln!(o, "  tasks completed: {n}");
            }
            if let Some(n) = b.files_modified {
                let _ = writeln!(o, "  files modified: {n}");
            }
            if let Some(t) = &b.tests_status {
                let _ = writeln!(o, "  tests: {}", words(t));
            }
            if let Some(w) = &b.work_type {
                let _ = writeln!(o, "  work type: {}", words(w));
            }
            if let Some(r) = &b.recommendation {
                let _ = writeln!(o, "  recommendation: {}", r.trim());
            }
        }
        None => o.push_str("status block: none\n"),
    }
}

/// The human view of an analysis: what the loop would conclude from this
/// output, in sentences and plain values.
fn render(file: &Path, format: Format, outcome: &Outcome) -> String {
    let (lines, bytes) = (outcome.output_lines, outcome.output_bytes);
    let mut o = format!(
        "{} ({lines} line{}, {bytes} byte{}, format {})\n",
        file.display(),
        plural(lines as usize),
        plural(bytes as usize),
        format_name(format),
    );
    let _ = writeln!(
        o,
        "claimed COMPLETE: {}",
        if outcome.claimed_complete {
            "yes (<promise>COMPLETE</promise> in its own output)"
        } else {
            "no"
        }
    );
    status_block(&mut o, outcome.status_block.as_ref());
    if let Some(e) = &outcome.status_block_error {
        let _ = writeln!(o, "status block problem: {e}");
    }
    if let Some(e) = &outcome.error {
        let _ = writeln!(o, "error: {e}");
        if let crate::analyze::AgentError::UsageLimit { resets_at: Some(t), .. } = e {
            let _ = writeln!(
                o,
                "usage limit resets at: {}",
                t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S %Z")
            );
        }
    } else if outcome.is_error {
        o.push_str("error: the agent's CLI reported an error in its result\n");
    }
    if let Some(status) = outcome.api_error_status {
        let _ = writeln!(o, "API error: HTTP {status}");
    }
    if let Some(sig) = &outcome.error_signature {
        let _ = writeln!(o, "error, as the breaker compares it: {sig}");
    }
    if !outcome.tool_errors.is_empty() {
        o.push_str("errors in failed tool calls:\n");
        for e in &outcome.tool_errors {
            let _ = writeln!(o, "  - {}", crate::agent::display::clean(e));
        }
    }
    if !outcome.permission_denials.is_empty() {
        let _ = writeln!(o, "permission denials: {}", outcome.permission_denials.join(", "));
    }
    if outcome.asking_questions {
        o.push_str("asked a question: yes (no one answers a headless agent)\n");
    }
    if outcome.test_only {
        o.push_str("only ran tests: yes\n");
    }
    if let Some(s) = &outcome.session_id {
        let _ = writeln!(o, "session: {s}");
    }
    if let Some(c) = outcome.cost_usd {
        let _ = writeln!(o, "cost: ${c:.4}");
    }
    if let Some(t) = outcome.tokens {
        let _ = writeln!(
            o,
            "tokens: {} in, {} out, {} cache read, {} cache write",
            t.input, t.output, t.cache_read, t.cache_write
        );
    }
    if let Some(t) = outcome.turns {
        let _ = writeln!(o, "turns: {t}");
    }
    if !outcome.final_text.is_empty() {
        let text = crate::text::tail_chars(&outcome.final_text, 600);
        let _ = writeln!(o, "final text (end):\n{}", crate::agent::display::clean(&text));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_counts_in_the_singular_and_the_plural() {
        let cases =
            [(1, 1, "(1 line, 1 byte, format text)"), (2, 0, "(2 lines, 0 bytes, format text)")];
        for (lines, bytes, want) in cases {
            let outcome =
                Outcome { output_lines: lines, output_bytes: bytes, ..Default::default() };
            let text = render(Path::new("out.log"), Format::Text, &outcome);
            let first = text.lines().next().unwrap();
            assert_eq!(first, format!("out.log {want}"));
        }
    }

    #[test]
    fn a_status_block_and_an_error_read_as_words_not_as_rust() {
        let outcome = Outcome {
            status_block: Some(crate::analyze::StatusBlock {
                status: Some(Status::Complete),
                tasks_completed: Some(2),
                files_modified: Some(3),
                tests_status: Some("PASSING".into()),
                work_type: Some("IMPLEMENTATION".into()),
                exit_signal: Some(true),
                recommendation: Some("move on to US-003".into()),
            }),
            error: Some(crate::analyze::AgentError::Failed {
                exit_code: Some(2),
                message: "boom".into(),
            }),
            tool_errors: vec!["error[E0425]: cannot find value `x`".into()],
            ..Default::default()
        };
        let text = render(Path::new("out.log"), Format::Cursor, &outcome);
        let want = "\
out.log (0 lines, 0 bytes, format cursor)
claimed COMPLETE: no
status block:
  status: complete
  exit signal: yes
  tasks completed: 2
  files modified: 3
  tests: passing
  work type: implementation
  recommendation: move on to US-003
error: exit 2: boom
errors in failed tool calls:
  - error[E0425]: cannot find value `x`
";
        assert_eq!(text, want);
        for debug in ["Some(", "None", "Complete", "Cursor", "true"] {
            assert!(!text.contains(debug), "{debug:?} in:\n{text}");
        }
        let empty = crate::analyze::StatusBlock::default();
        let outcome = Outcome { status_block: Some(empty), ..Default::default() };
        let text = render(Path::new("out.log"), Format::Text, &outcome);
        assert!(text.contains("  status: not given\n  exit signal: not given\n"), "{text}");
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
            "claimed COMPLETE: yes (<promise>COMPLETE</promise> in its own output)\n",
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
