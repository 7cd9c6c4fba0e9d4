//! opencode `run --format json` events: `step_start`, `text`, `tool_use`,
//! `reasoning`, `step_finish` (cost and tokens), `error`, and `done` in
//! newer releases. Every event carries `sessionID`.
//!
//! A `text` event holds a finished text part, not a delta. The answer is the
//! text of the last step that had any; a step that ends for any reason other
//! than `tool-calls` is the end of the run. opencode never echoes the prompt.
//!
//! A tool call that failed (`state.status: error`, or a command whose
//! `state.metadata.exit` is not 0, which opencode still calls `completed`)
//! has its output and error read for error lines; other calls' output is
//! skipped unread.
//!
//! An API error (`APIError`) carries the HTTP status, whether the provider
//! thinks a retry may help (`isRetryable`) and its raw `responseBody`, which
//! is where a usage limit is told from a rate limit: opencode's own message
//! is the body's text verbatim.

use serde::Deserialize;

use super::analyzer::{StreamFacts, Terminal};
use super::json::{Any, Num, Obj};
use super::outcome::Tokens;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event<'a> {
    #[serde(borrow, rename = "type")]
    kind: Any<'a>,
    #[serde(borrow, rename = "sessionID")]
    session_id: Any<'a>,
    #[serde(borrow)]
    part: Obj<Part<'a>>,
    #[serde(borrow)]
    error: Obj<Error<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Part<'a> {
    #[serde(borrow)]
    text: Any<'a>,
    #[serde(borrow)]
    tool: Any<'a>,
    #[serde(borrow)]
    state: Obj<State<'a>>,
    #[serde(borrow)]
    reason: Any<'a>,
    cost: Num,
    tokens: Obj<PartTokens>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct State<'a> {
    #[serde(borrow)]
    input: Obj<Input<'a>>,
    #[serde(borrow)]
    status: Any<'a>,
    metadata: Obj<Metadata>,
}

impl State<'_> {
    fn failed(&self) -> bool {
        let exit = self.metadata.0.as_ref().and_then(|m| m.exit.0);
        self.status.is("error") || exit.is_some_and(|code| code != 0.0)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Metadata {
    exit: Num,
}

/// A failed tool call's event, read a second time for its output.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Failed<'a> {
    #[serde(borrow)]
    part: Obj<FailedPart<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FailedPart<'a> {
    #[serde(borrow)]
    state: Obj<FailedState<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FailedState<'a> {
    #[serde(borrow)]
    output: Any<'a>,
    #[serde(borrow)]
    error: Any<'a>,
    #[serde(borrow)]
    metadata: Obj<FailedMetadata<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FailedMetadata<'a> {
    #[serde(borrow)]
    output: Any<'a>,
}

fn failed_output(facts: &mut StreamFacts, bytes: &[u8]) {
    let Ok(failed) = serde_json::from_slice::<Failed>(bytes) else { return };
    let Some(state) = failed.part.0.and_then(|p| p.state.0) else { return };
    let metadata = state.metadata.0.as_ref().and_then(|m| m.output.str());
    let output = state.output.str().or(metadata);
    let pieces: Vec<&str> = [output, state.error.str()].into_iter().flatten().collect();
    facts.tool_errors.failed_output(&pieces);
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Input<'a> {
    #[serde(borrow)]
    command: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PartTokens {
    input: Num,
    output: Num,
    reasoning: Num,
    cache: Obj<Cache>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Cache {
    read: Num,
    write: Num,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Error<'a> {
    #[serde(borrow)]
    name: Any<'a>,
    #[serde(borrow)]
    message: Any<'a>,
    #[serde(borrow)]
    data: Obj<ErrorData<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorData<'a> {
    #[serde(borrow)]
    message: Any<'a>,
    #[serde(rename = "statusCode")]
    status_code: Num,
    #[serde(rename = "isRetryable")]
    is_retryable: Any<'a>,
    /// The provider's raw body: the only place a usage limit
    /// (`usage_limit_reached`, `resets_at`) or `insufficient_quota` shows.
    #[serde(borrow, rename = "responseBody")]
    response_body: Any<'a>,
}

pub(crate) fn line(facts: &mut StreamFacts, bytes: &[u8]) -> bool {
    let Ok(e) = serde_json::from_slice::<Event>(bytes) else {
        return false;
    };
    if let Some(id) = e.session_id.text() {
        facts.session(id);
    }
    let part = e.part.0.as_ref();
    match e.kind.str() {
        Some("step_start") => {
            facts.answered();
            facts.text_open = false;
        }
        Some("text") => {
            if let Some(text) = part.and_then(|p| p.text.text()) {
                if facts.text_open {
                    facts.assistant_delta("\n");
                }
                facts.assistant_delta(text);
            }
        }
        Some("tool_use") => {
            facts.answered();
            let tool = part.and_then(|p| p.tool.str()).unwrap_or("");
            let state = part.and_then(|p| p.state.0.as_ref());
            let command = state.and_then(|s| s.input.0.as_ref()).and_then(|i| i.command.str());
            facts.tools.tool(tool, command);
            if state.is_some_and(State::failed) {
                failed_output(facts, bytes);
            }
        }
        Some("step_finish") => {
            let Some(part) = part else { return true };
            if let Some(cost) = part.cost.0 {
                *facts.cost_usd.get_or_insert(0.0) += cost;
            }
            if let Some(tokens) = &part.tokens.0 {
                let cache = tokens.cache.0.as_ref();
                facts.add_tokens(Tokens {
                    input: tokens.input.u64(),
                    output: tokens.output.u64().saturating_add(tokens.reasoning.u64()),
                    cache_read: cache.map_or(0, |c| c.read.u64()),
                    cache_write: cache.map_or(0, |c| c.write.u64()),
                });
            }
            let turns = facts.turns.get_or_insert(0);
            *turns = turns.saturating_add(1);
            if !part.reason.is("tool-calls") {
                facts.terminal = Terminal::Ok;
            }
        }
        Some("error") => {
            facts.terminal = Terminal::Failed;
            facts.is_error = true;
            let error = e.error.0.as_ref();
            let data = error.and_then(|e| e.data.0.as_ref());
            if let Some(status) =
                data.and_then(|d| d.status_code.0).filter(|s| (400.0..600.0).contains(s))
            {
                facts.api_status = Some(status as u16);
            }
            facts.retryable = data.and_then(|d| d.is_retryable.bool());
            if let Some(body) = data.and_then(|d| d.response_body.text()) {
                facts.error_text(body);
            }
            let name = error.and_then(|e| e.name.text());
            let message = data
                .and_then(|d| d.message.text())
                .or_else(|| error.and_then(|e| e.message.text()));
            match (name, message) {
                (Some(name), Some(message)) => facts.error_text(&format!("{name}: {message}")),
                (name, message) => facts.error_text(message.or(name).unwrap_or("error")),
            }
        }
        Some("done") if facts.terminal != Terminal::Failed => facts.terminal = Terminal::Ok,
        _ => {}
    }
    true
}

/// One line of opencode's log on stderr (ralph runs it with `--print-logs
/// --log-level WARN`): while it retries a request it prints nothing else,
/// and each failed try is logged as `level=ERROR … message="stream error" …
/// error.error="AI_APICallError: <the provider's message>"`.
pub(crate) fn stderr_line(facts: &mut StreamFacts, line: &[u8]) {
    let line = line.trim_ascii();
    if memchr::memmem::find(line, br#"message="stream error""#).is_none() {
        return;
    }
    let Some(at) = memchr::memmem::find(line, br#" error.error=""#) else { return };
    let value = &line[at + br#" error.error=""#.len()..];
    let mut text = Vec::with_capacity(value.len());
    let mut escaped = false;
    for &b in value {
        match (escaped, b) {
            (false, b'\\') => escaped = true,
            (false, b'"') => break,
            _ => {
                text.push(b);
                escaped = false;
            }
        }
    }
    let text = String::from_utf8_lossy(&text);
    let text = text
        .split_once(": ")
        .filter(|(name, _)| name.starts_with("AI_"))
        .map_or(&*text, |(_, m)| m);
    facts.retrying(None, text);
}
