//! What a person sees of the agent's output: plain text as it is, and the
//! JSON event streams of the agent CLIs turned into readable lines
//! (assistant text, tool calls, the result), with terminal control
//! characters removed so agent output cannot drive the user's terminal.

use serde_json::Value;

use crate::analyze::Format;

/// Longest display text for one output line.
const MAX_DISPLAY: usize = 2000;
/// JSON lines longer than this are not parsed for display.
const MAX_PARSE: usize = 256 * 1024;

/// The readable form of one output line, or `None` for lines not worth
/// showing (tool results, bookkeeping events).
pub fn render(format: Format, line: &[u8]) -> Option<String> {
    let trimmed = line.trim_ascii_start();
    if format != Format::Text && trimmed.first() == Some(&b'{') {
        if line.len() > MAX_PARSE {
            return None;
        }
        return match serde_json::from_slice::<Value>(trimmed) {
            Ok(v) => render_event(format, &v).map(|s| clean(&s)),
            Err(_) => Some(clean(&String::from_utf8_lossy(line))),
        };
    }
    let text = clean(&String::from_utf8_lossy(line));
    Some(text)
}

/// One JSON event as a line, by the shapes of the CLI that wrote it.
fn render_event(format: Format, v: &Value) -> Option<String> {
    match format {
        Format::Codex => codex_event(v),
        Format::Gemini => gemini_event(v),
        Format::Opencode => opencode_event(v),
        // Claude, Amp and Cursor share the Claude event shapes.
        _ => claude_event(v),
    }
}

/// The string at `v[k]`.
fn text_at(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

fn codex_event(v: &Value) -> Option<String> {
    let item = v.get("item");
    match v.get("type")?.as_str()? {
        "item.completed" => match item?.get("type")?.as_str()? {
            "agent_message" => text_at(item?, "text"),
            "command_execution" => text_at(item?, "command").map(|c| format!("$ {c}")),
            "file_change" => Some("⏺ file change".into()),
            _ => None,
        },
        "turn.failed" => {
            v.pointer("/error/message").and_then(Value::as_str).map(|m| format!("error: {m}"))
        }
        "error" => text_at(v, "message").map(|m| format!("error: {m}")),
        _ => None,
    }
}

fn gemini_event(v: &Value) -> Option<String> {
    match v.get("type")?.as_str()? {
        "message" if v.get("role").and_then(Value::as_str) != Some("user") => text_at(v, "content"),
        "tool_use" => text_at(v, "tool_name").map(|t| format!("⏺ {t}")),
        "result" => Some(format!("result: {}", text_at(v, "status").unwrap_or_default())),
        "error" => text_at(v, "message").map(|m| format!("error: {m}")),
        _ => None,
    }
}

fn opencode_event(v: &Value) -> Option<String> {
    let part = v.get("part");
    match v.get("type")?.as_str()? {
        "text" => text_at(part?, "text"),
        "tool_use" => text_at(part?, "tool").map(|t| format!("⏺ {t}")),
        "error" => {
            v.pointer("/error/data/message").and_then(Value::as_str).map(|m| format!("error: {m}"))
        }
        _ => None,
    }
}

fn claude_event(v: &Value) -> Option<String> {
    match v.get("type")?.as_str()? {
        "assistant" => {
            let content = v.pointer("/message/content")?.as_array()?;
            let parts: Vec<String> = content.iter().filter_map(claude_block).collect();
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        "result" => {
            let mut out =
                format!("result: {}", text_at(v, "subtype").unwrap_or_else(|| "done".into()));
            if v.get("is_error").and_then(Value::as_bool) == Some(true) {
                out.push_str(" (error)");
            }
            if let Some(cost) = v.get("total_cost_usd").and_then(Value::as_f64) {
                out.push_str(&format!(", ${cost:.4}"));
            }
            Some(out)
        }
        "rate_limit_event" => {
            let info = v.get("rate_limit_info")?;
            let status = text_at(info, "status")?;
            (status != "allowed").then(|| format!("rate limit: {status}"))
        }
        "system" if v.get("subtype").and_then(Value::as_str) == Some("init") => {
            Some(format!("session {}", text_at(v, "session_id").unwrap_or_default()))
        }
        _ => None,
    }
}

/// One block of an assistant message: its text, or a tool call with the
/// first line of what it works on.
fn claude_block(block: &Value) -> Option<String> {
    match block.get("type")?.as_str()? {
        "text" => text_at(block, "text"),
        "tool_use" => {
            let name = text_at(block, "name").unwrap_or_default();
            let detail = block
                .get("input")
                .and_then(|i| {
                    ["command", "file_path", "path", "pattern", "description"]
                        .iter()
                        .find_map(|k| i.get(*k).and_then(Value::as_str))
                })
                .map(|d| format!(": {}", d.lines().next().unwrap_or("")))
                .unwrap_or_default();
            Some(format!("⏺ {name}{detail}"))
        }
        _ => None,
    }
}

/// Removes control characters (escape sequences, bells, carriage returns)
/// and caps the length.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_DISPLAY));
    for c in text.chars() {
        if out.len() >= MAX_DISPLAY {
            out.push('…');
            break;
        }
        if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out.trim_end().to_string()
}

/// The most lines a `RALPH_STATUS` block is folded from: a longer one is
/// shown as it is.
const MAX_FOLDED: usize = 20;

/// Folds the `RALPH_STATUS` block an agent ends its answer with into one
/// line (`RALPH_STATUS: STATUS: COMPLETE · TASKS_COMPLETED_THIS_LOOP: 1 ·
/// …`): its ten lines under every iteration said little a person reads.
/// The block may come whole in one rendered text (a JSON event) or a line
/// at a time (plain text); the log keeps it as the agent wrote it.
#[derive(Debug, Default)]
pub struct Fold {
    block: Option<Vec<String>>,
}

impl Fold {
    /// What to show of `text`: nothing while a block is open.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        let mut shown = Vec::new();
        let mut plain: Vec<&str> = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            match self.block.as_mut() {
                None if t == "---RALPH_STATUS---" => {
                    if !plain.is_empty() {
                        shown.push(plain.join("\n"));
                        plain.clear();
                    }
                    self.block = Some(Vec::new());
                }
                None => plain.push(line),
                Some(block) if t == "---END_RALPH_STATUS---" => {
                    shown.push(format!("RALPH_STATUS: {}", block.join(" · ")));
                    self.block = None;
                }
                Some(block) if block.len() >= MAX_FOLDED => {
                    // Not a block after all: show what was held back.
                    let held = std::mem::take(block);
                    self.block = None;
                    shown.push(format!("---RALPH_STATUS---\n{}", held.join("\n")));
                    plain.push(line);
                }
                Some(block) => {
                    if !t.is_empty() {
                        block.push(t.to_string());
                    }
                }
            }
        }
        if !plain.is_empty() {
            shown.push(plain.join("\n"));
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ralph_status_block_is_folded_into_one_line() {
        let block =
            "---RALPH_STATUS---\nSTATUS: COMPLETE\nEXIT_SIGNAL: true\n---END_RALPH_STATUS---";
        let mut f = Fold::default();
        assert_eq!(
            f.push(&format!("Done with US-001.\n\n{block}")),
            ["Done with US-001.\n", "RALPH_STATUS: STATUS: COMPLETE · EXIT_SIGNAL: true"]
        );
        // A line at a time: nothing until the block ends.
        let mut f = Fold::default();
        let shown: Vec<String> = block.lines().flat_map(|l| f.push(l)).collect();
        assert_eq!(shown, ["RALPH_STATUS: STATUS: COMPLETE · EXIT_SIGNAL: true"]);
        // Prose that only mentions it is shown as it is.
        let mut f = Fold::default();
        assert_eq!(
            f.push("I will end with a RALPH_STATUS block."),
            ["I will end with a RALPH_STATUS block."]
        );
        // A start without an end is not held back for ever, nor lost.
        let mut f = Fold::default();
        let mut shown: Vec<String> = f.push("---RALPH_STATUS---");
        for n in 0..25 {
            shown.extend(f.push(&format!("line {n}")));
        }
        assert_eq!(shown.concat().matches("line ").count(), 25, "{shown:?}");
    }

    #[test]
    fn renders_event_streams_readably() {
        let cases: &[(Format, &str, Option<&str>)] = &[
            (Format::Text, "plain \x1b[31mred\x1b[0m\r", Some("plain [31mred[0m")),
            (
                Format::Claude,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hello"},{"type":"tool_use","name":"Bash","input":{"command":"cargo test\nmore"}}]}}"#,
                Some("Hello\n⏺ Bash: cargo test"),
            ),
            (
                Format::Claude,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"secret file"}]}}"#,
                None,
            ),
            (
                Format::Claude,
                r#"{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25}"#,
                Some("result: success, $0.2500"),
            ),
            (Format::Claude, "  not json {", Some("  not json {")),
            (Format::Claude, "{broken", Some("{broken")),
            (
                Format::Codex,
                r#"{"type":"item.completed","item":{"type":"command_execution","command":"ls"}}"#,
                Some("$ ls"),
            ),
            (Format::Opencode, r#"{"type":"text","part":{"text":"hi"}}"#, Some("hi")),
            (Format::Gemini, r#"{"type":"message","role":"assistant","content":"yo"}"#, Some("yo")),
        ];
        for (format, line, want) in cases {
            assert_eq!(render(*format, line.as_bytes()).as_deref(), *want, "{line}");
        }
    }

    #[test]
    fn display_is_capped() {
        let long = "x".repeat(10_000);
        assert!(render(Format::Text, long.as_bytes()).unwrap().len() <= MAX_DISPLAY + 4);
    }
}
