//! Codex `exec --json` events: `thread.started`, `turn.started`,
//! `item.started|updated|completed`, `turn.completed` (usage),
//! `turn.failed`, `error`, `request_user_input`.
//!
//! Items count once, when completed: `agent_message` is the answer,
//! `command_execution` and `file_change` are the tool calls, an `error`
//! item is a non-fatal notice kept in case the run fails. Codex reports no
//! cost and no turn count. A command that failed (`status: failed`, a
//! non-zero `exit_code`) has its `aggregated_output` read for error lines;
//! other commands' output is skipped unread.
//!
//! Only `turn.failed` ends a turn badly. An `error` event is a notice:
//! `Reconnecting... 2/5 (…)` announces a retry, and `Reconnecting... waiting
//! for network (…)` repeats for as long as the API cannot be reached, which
//! codex 0.171 never stops doing ([`is_network_wait`] keeps those lines from
//! counting as activity for the idle timeout). The notices are kept as
//! error texts, for a run that ends without `turn.failed`.

use serde::Deserialize;

use super::analyzer::{StreamFacts, Terminal};
use super::json::{Any, Num, Obj};
use super::outcome::Tokens;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event<'a> {
    #[serde(borrow, rename = "type")]
    kind: Any<'a>,
    #[serde(borrow)]
    thread_id: Any<'a>,
    #[serde(borrow)]
    item: Obj<Item<'a>>,
    usage: Obj<Usage>,
    #[serde(borrow)]
    error: Obj<Message<'a>>,
    #[serde(borrow)]
    message: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Item<'a> {
    #[serde(borrow, rename = "type")]
    kind: Any<'a>,
    /// Early releases named the field `item_type`.
    #[serde(borrow)]
    item_type: Any<'a>,
    #[serde(borrow)]
    text: Any<'a>,
    #[serde(borrow)]
    command: Any<'a>,
    #[serde(borrow)]
    status: Any<'a>,
    exit_code: Any<'a>,
    #[serde(borrow)]
    message: Any<'a>,
}

impl Item<'_> {
    fn failed_command(&self) -> bool {
        let kind = self.kind.str().or_else(|| self.item_type.str());
        kind == Some("command_execution")
            && (self.status.is("failed") || self.exit_code.num().is_some_and(|code| code != 0.0))
    }
}

/// A failed command's event, read a second time for its output.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Failed<'a> {
    #[serde(borrow)]
    item: Obj<FailedItem<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FailedItem<'a> {
    #[serde(borrow)]
    aggregated_output: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Message<'a> {
    #[serde(borrow)]
    message: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Usage {
    input_tokens: Num,
    cached_input_tokens: Num,
    /// Since 0.171; like the cached part, counted inside `input_tokens`.
    cache_write_input_tokens: Num,
    output_tokens: Num,
}

pub(crate) fn line(facts: &mut StreamFacts, bytes: &[u8]) -> bool {
    // In-progress items repeat what `item.completed` will say, often with a
    // command's whole output so far.
    if bytes.starts_with(br#"{"type":"item.started""#)
        || bytes.starts_with(br#"{"type":"item.updated""#)
    {
        return true;
    }
    let Ok(e) = serde_json::from_slice::<Event>(bytes) else {
        return false;
    };
    match e.kind.str() {
        Some("thread.started") => {
            if let Some(id) = e.thread_id.text() {
                facts.session(id);
            }
        }
        Some("item.completed") => {
            facts.answered();
            if let Some(item) = &e.item.0 {
                item_completed(facts, item);
                if item.failed_command()
                    && let Ok(failed) = serde_json::from_slice::<Failed>(bytes)
                    && let Some(output) =
                        failed.item.0.as_ref().and_then(|i| i.aggregated_output.str())
                {
                    facts.tool_errors.failed_output(&[output]);
                }
            }
        }
        Some("turn.completed") => {
            facts.terminal = Terminal::Ok;
            if let Some(usage) = &e.usage.0 {
                let cached = usage.cached_input_tokens.u64();
                let written = usage.cache_write_input_tokens.u64();
                facts.add_tokens(Tokens {
                    input: usage.input_tokens.u64().saturating_sub(cached).saturating_sub(written),
                    output: usage.output_tokens.u64(),
                    cache_read: cached,
                    cache_write: written,
                });
            }
        }
        Some("turn.failed") => {
            facts.terminal = Terminal::Failed;
            facts.is_error = true;
            let message = e.error.0.as_ref().and_then(|m| m.message.text());
            facts.error_text(message.unwrap_or("turn failed"));
        }
        // A notice, not the end: a retry, the network wait, a model
        // warning. `turn.failed` follows when codex gives up.
        Some("error") => {
            let message = e.message.str().unwrap_or("error");
            facts.error_text(message);
            if message.starts_with("Reconnecting... ") {
                facts.retrying(None, message);
            }
        }
        Some("request_user_input") => facts.asked_user = true,
        _ => {}
    }
    true
}

fn item_completed(facts: &mut StreamFacts, item: &Item) {
    let kind = item.kind.str().or_else(|| item.item_type.str());
    match kind {
        Some("agent_message" | "assistant_message") => {
            if let Some(text) = item.text.str() {
                facts.assistant_text(text);
            }
        }
        Some("command_execution") if !item.status.is("declined") => {
            if let Some(command) = item.command.str() {
                facts.tools.shell(unwrap_shell(command));
            }
        }
        Some("file_change") => facts.tools.edits += 1,
        Some("mcp_tool_call") => facts.tools.other += 1,
        Some("error") => {
            if let Some(message) = item.message.text() {
                facts.error_text(message);
            }
        }
        _ => {}
    }
}

/// Codex runs commands as `bash -lc '<command>'`; the inner command is the
/// one to read.
fn unwrap_shell(command: &str) -> &str {
    for prefix in ["bash -lc ", "/bin/bash -lc ", "bash -c ", "sh -c ", "/bin/sh -c ", "zsh -lc "] {
        if let Some(rest) = command.strip_prefix(prefix) {
            return rest.trim().trim_matches(|c| c == '\'' || c == '"');
        }
    }
    command
}

/// A line of codex's `--json` output that only says it is still waiting
/// for the network (`Reconnecting... waiting for network (…)`): codex prints
/// it for ever while the API is unreachable, so it is no sign of life.
pub(crate) fn is_network_wait(line: &[u8]) -> bool {
    let line = line.trim_ascii();
    line.starts_with(br#"{"type":"error""#)
        && memchr::memmem::find(line, b"Reconnecting... waiting for network").is_some()
}
