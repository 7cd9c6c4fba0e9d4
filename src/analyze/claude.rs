//! Claude Code events (`--output-format json` and `stream-json`), which Amp
//! and Cursor also print.
//!
//! `json` prints one `result` object (or, with `--verbose`, an array of all
//! events on one line); `stream-json` prints one event per line: `system`
//! (`init`), `assistant`, `user` (tool results), `rate_limit_event`,
//! `stream_event` (partial deltas), `result`; Cursor adds `tool_call`.
//!
//! `user` events echo tool output (file contents, command output, which may
//! quote a limit message or the completion marker): only assistant text and
//! the result count as the agent's own words. A `user` line is skipped
//! without being parsed unless it holds a failed tool result
//! (`"is_error":true`), whose error lines go to [`StreamFacts::tool_errors`].

use std::sync::LazyLock;

use memchr::memmem;
use serde::Deserialize;

use super::analyzer::{Limit, StreamFacts, Terminal};
use super::json::{Any, Entries, List, Num, Obj, Texts};
use super::outcome::Tokens;
use super::reset;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event<'a> {
    #[serde(borrow, rename = "type")]
    kind: Any<'a>,
    #[serde(borrow)]
    subtype: Any<'a>,
    #[serde(borrow)]
    session_id: Any<'a>,
    #[serde(borrow)]
    message: Obj<Message<'a>>,
    /// A subagent's message names the tool call that started it.
    #[serde(borrow)]
    parent_tool_use_id: Any<'a>,
    /// The synthetic assistant message of an API error: `rate_limit`,
    /// `authentication_failed`, `server_error`, …
    #[serde(borrow)]
    error: Any<'a>,
    is_error: Any<'a>,
    #[serde(borrow)]
    result: Any<'a>,
    total_cost_usd: Any<'a>,
    cost_usd: Any<'a>,
    num_turns: Any<'a>,
    api_error_status: Any<'a>,
    usage: Obj<Usage>,
    #[serde(borrow)]
    permission_denials: List<Obj<Denial<'a>>>,
    #[serde(borrow)]
    errors: List<Any<'a>>,
    #[serde(borrow)]
    rate_limit_info: Obj<RateLimitInfo<'a>>,
    #[serde(borrow)]
    tool_call: Entries<'a, Obj<CursorCall<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Message<'a> {
    #[serde(borrow)]
    id: Any<'a>,
    #[serde(borrow)]
    content: List<Obj<Block<'a>>>,
    usage: Obj<Usage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Block<'a> {
    #[serde(borrow, rename = "type")]
    kind: Any<'a>,
    #[serde(borrow)]
    text: Any<'a>,
    #[serde(borrow)]
    name: Any<'a>,
    #[serde(borrow)]
    input: Obj<Input<'a>>,
    /// A `tool_result`'s output and whether the call failed.
    #[serde(borrow)]
    content: Texts<'a>,
    is_error: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Input<'a> {
    #[serde(borrow)]
    command: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Usage {
    input_tokens: Num,
    output_tokens: Num,
    cache_read_input_tokens: Num,
    cache_creation_input_tokens: Num,
}

impl Usage {
    fn tokens(&self) -> Tokens {
        Tokens {
            input: self.input_tokens.u64(),
            output: self.output_tokens.u64(),
            cache_read: self.cache_read_input_tokens.u64(),
            cache_write: self.cache_creation_input_tokens.u64(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Denial<'a> {
    #[serde(borrow)]
    tool_name: Any<'a>,
    #[serde(borrow)]
    tool_input: Obj<Input<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RateLimitInfo<'a> {
    #[serde(borrow)]
    status: Any<'a>,
    #[serde(rename = "resetsAt")]
    resets_at: Any<'a>,
    #[serde(borrow, rename = "rateLimitType")]
    rate_limit_type: Any<'a>,
}

/// Cursor's `{"shellToolCall": {"args": {"command": …}}}`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CursorCall<'a> {
    #[serde(borrow)]
    args: Obj<Input<'a>>,
}

/// One JSON line (or pretty document); false when it is not valid JSON.
pub(crate) fn line(facts: &mut StreamFacts, bytes: &[u8]) -> bool {
    // Tool results and partial deltas are most of the bytes of a stream and,
    // but for a failed tool result, carry nothing the analysis needs; the
    // CLIs print `type` first.
    if (bytes.starts_with(br#"{"type":"user""#) && !has_failed_tool_result(bytes))
        || bytes.starts_with(br#"{"type":"stream_event""#)
    {
        return true;
    }
    if bytes.first() == Some(&b'[') {
        let Ok(List(events)) = serde_json::from_slice::<List<Obj<Event>>>(bytes) else {
            return false;
        };
        events.into_iter().filter_map(|Obj(event)| event).for_each(|e| event(facts, e));
        return true;
    }
    match serde_json::from_slice::<Event>(bytes) {
        Ok(e) => {
            event(facts, e);
            true
        }
        Err(_) => false,
    }
}

/// Whether a `user` line may hold a failed tool result. Inside a JSON string
/// a quote is escaped, so the key with its quotes is a key, not quoted text.
/// (A forward search: memchr's reverse one has no SIMD prefilter.)
fn has_failed_tool_result(bytes: &[u8]) -> bool {
    static FINDER: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(br#""is_error":true"#));
    FINDER.find(bytes).is_some()
}

fn event(facts: &mut StreamFacts, e: Event) {
    if let Some(id) = e.session_id.text() {
        facts.session(id);
    }
    match e.kind.str() {
        Some("user") => tool_results(facts, e),
        Some("assistant") => assistant(facts, e),
        Some("result") => result(facts, e),
        Some("rate_limit_event") => rate_limit(facts, e),
        Some("tool_call") if !e.subtype.is("completed") => {
            for (name, Obj(call)) in &e.tool_call.0 {
                let command =
                    call.as_ref().and_then(|c| c.args.0.as_ref()).and_then(|a| a.command.str());
                facts.tools.tool(name, command);
            }
        }
        _ => {}
    }
}

/// The failed tool results of a `user` event (a subagent's too: its failed
/// builds are the run's). Nothing else of the event is read.
fn tool_results(facts: &mut StreamFacts, e: Event) {
    let Some(message) = e.message.0 else { return };
    for Obj(block) in &message.content.0 {
        if let Some(block) = block
            && block.kind.is("tool_result")
            && block.is_error.bool() == Some(true)
        {
            facts.tool_errors.failed_output(&block.content.pieces());
        }
    }
}

fn assistant(facts: &mut StreamFacts, e: Event) {
    let Some(message) = e.message.0 else { return };
    let own = e.parent_tool_use_id.str().is_none();
    let mut texts = Vec::new();
    for Obj(block) in &message.content.0 {
        let Some(block) = block else { continue };
        match block.kind.str() {
            Some("text") => texts.extend(block.text.text()),
            Some("tool_use") => {
                let command = block.input.0.as_ref().and_then(|i| i.command.str());
                facts.tools.tool(block.name.str().unwrap_or(""), command);
            }
            _ => {}
        }
    }
    if own && !texts.is_empty() {
        facts.assistant_text(&texts.join("\n"));
    }
    if let Some(kind) = e.error.text() {
        facts.assistant_error = Some(kind.to_string());
        texts.iter().for_each(|text| facts.error_text(text));
    }
    if let (Some(id), Some(usage)) = (message.id.text(), &message.usage.0) {
        facts.message_usage(id, usage.tokens());
    }
}

fn result(facts: &mut StreamFacts, e: Event) {
    let is_error = e.is_error.bool().unwrap_or(false);
    let failed = is_error || e.subtype.str().is_some_and(|s| s.starts_with("error"));
    facts.terminal = if failed { Terminal::Failed } else { Terminal::Ok };
    facts.is_error |= is_error;
    // An empty result (some error subtypes) leaves the last assistant text
    // as the answer.
    if let Some(text) = e.result.text() {
        facts.result_text(text);
        if failed {
            facts.error_text(text);
        }
    }
    if failed {
        e.errors.0.iter().filter_map(Any::text).for_each(|t| facts.error_text(t));
        if let Some(error) = e.error.text() {
            facts.error_text(error);
        } else if e.result.text().is_none() && e.errors.0.is_empty() {
            facts.error_text(e.subtype.str().unwrap_or("error result"));
        }
    }
    if let Some(cost) = e.total_cost_usd.num().or_else(|| e.cost_usd.num()) {
        facts.cost_usd = Some(cost);
    }
    if let Some(turns) = e.num_turns.u64() {
        facts.turns = Some(u32::try_from(turns).unwrap_or(u32::MAX));
    }
    if let Some(status) = e.api_error_status.u64() {
        facts.api_status = u16::try_from(status).ok();
    }
    if let Some(usage) = &e.usage.0 {
        facts.tokens = Some(usage.tokens());
    }
    for Obj(denial) in &e.permission_denials.0 {
        let Some(denial) = denial else { continue };
        let name = denial.tool_name.str().unwrap_or("unknown");
        if name == "AskUserQuestion" {
            facts.asked_user = true;
        }
        let command = denial.tool_input.0.as_ref().and_then(|i| i.command.str());
        facts.denial(denial_label(name, command));
    }
}

/// `Bash(first line of the command, ≤ 60 chars)`, or the tool's name.
fn denial_label(name: &str, command: Option<&str>) -> String {
    match command {
        Some(command) if name == "Bash" => {
            let first: String =
                command.trim().lines().next().unwrap_or("").chars().take(60).collect();
            format!("Bash({first})")
        }
        _ => name.to_string(),
    }
}

fn rate_limit(facts: &mut StreamFacts, e: Event) {
    let Some(info) = e.rate_limit_info.0 else {
        return;
    };
    // `allowed` and `allowed_warning` are informational; the newest status
    // decides, so a later `allowed` (overage kicked in) clears a rejection.
    facts.limit = info.status.is("rejected").then(|| Limit {
        resets_at: info.resets_at.num().and_then(reset::from_epoch),
        kind: info.rate_limit_type.text().map(str::to_string),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_labels() {
        let long = "x".repeat(100);
        let cases = [
            (
                "Bash",
                Some("mvn clean compile 2>&1 | tail -40\nsecond line"),
                "Bash(mvn clean compile 2>&1 | tail -40)".to_string(),
            ),
            ("Bash", Some(long.as_str()), format!("Bash({})", "x".repeat(60))),
            ("Bash", Some("  ✨é"), "Bash(✨é)".to_string()),
            ("AskUserQuestion", None, "AskUserQuestion".to_string()),
            ("Write", Some("ignored"), "Write".to_string()),
        ];
        for (name, command, expected) in cases {
            assert_eq!(denial_label(name, command), expected);
        }
    }
}
