//! Gemini CLI output: `json` (one pretty-printed `{session_id, response,
//! stats, error}` document) and `stream-json` (`init`, `message`,
//! `tool_use`, `tool_result`, `error`, `result`).
//!
//! Streamed assistant messages come as `delta` pieces; the pieces between
//! two tool calls form one message, and the last such message is the answer.
//! Warnings (`error` events of severity `warning`) are not errors. Gemini
//! reports tokens but no cost.
//!
//! A `tool_result` is read only when the tool failed (`status: error`), for
//! the error lines of its output and message. The shell tool reports a
//! command that exits non-zero as a success, its output carrying no exit
//! code, so a failing build is not told from a passing one here.

use memchr::memmem;
use serde::Deserialize;

use super::analyzer::{StreamFacts, Terminal};
use super::json::{Any, Entries, Num, Obj};
use super::outcome::Tokens;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Event<'a> {
    #[serde(borrow, rename = "type")]
    kind: Any<'a>,
    #[serde(borrow)]
    session_id: Any<'a>,
    // json output
    #[serde(borrow)]
    response: Any<'a>,
    #[serde(borrow)]
    stats: Obj<Stats<'a>>,
    #[serde(borrow)]
    error: Obj<Error<'a>>,
    // stream-json
    #[serde(borrow)]
    role: Any<'a>,
    #[serde(borrow)]
    content: Any<'a>,
    delta: Any<'a>,
    #[serde(borrow)]
    tool_name: Any<'a>,
    #[serde(borrow)]
    parameters: Obj<Parameters<'a>>,
    #[serde(borrow)]
    status: Any<'a>,
    #[serde(borrow)]
    severity: Any<'a>,
    #[serde(borrow)]
    message: Any<'a>,
    /// A `tool_result`'s output.
    #[serde(borrow)]
    output: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Error<'a> {
    #[serde(borrow, rename = "type")]
    kind: Any<'a>,
    #[serde(borrow)]
    message: Any<'a>,
    code: Any<'a>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Parameters<'a> {
    #[serde(borrow)]
    command: Any<'a>,
}

/// `stats` of both outputs: the stream result's flat counts, or the json
/// output's per-model `tokens`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Stats<'a> {
    input_tokens: Num,
    output_tokens: Num,
    cached: Num,
    input: Num,
    #[serde(borrow)]
    models: Entries<'a, Obj<ModelStats>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ModelStats {
    tokens: Obj<ModelTokens>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ModelTokens {
    prompt: Num,
    input: Num,
    candidates: Num,
    cached: Num,
    thoughts: Num,
}

impl Stats<'_> {
    fn tokens(&self) -> Option<Tokens> {
        if self.input_tokens.0.is_some() || self.output_tokens.0.is_some() {
            let cached = self.cached.u64();
            let input = self
                .input
                .0
                .map_or(self.input_tokens.u64().saturating_sub(cached), |_| self.input.u64());
            return Some(Tokens {
                input,
                output: self.output_tokens.u64(),
                cache_read: cached,
                cache_write: 0,
            });
        }
        let mut total: Option<Tokens> = None;
        for (_, Obj(model)) in &self.models.0 {
            let Some(tokens) = model.as_ref().and_then(|m| m.tokens.0.as_ref()) else {
                continue;
            };
            let cached = tokens.cached.u64();
            let input = tokens
                .input
                .0
                .map_or(tokens.prompt.u64().saturating_sub(cached), |_| tokens.input.u64());
            total.get_or_insert_default().add(Tokens {
                input,
                output: tokens.candidates.u64().saturating_add(tokens.thoughts.u64()),
                cache_read: cached,
                cache_write: 0,
            });
        }
        total
    }
}

pub(crate) fn line(facts: &mut StreamFacts, bytes: &[u8]) -> bool {
    // Tool output: file contents and command output, never the agent's
    // words, and unread unless the tool failed.
    if bytes.starts_with(br#"{"type":"tool_result""#)
        && memmem::rfind(bytes, br#""status":"error""#).is_none()
    {
        facts.text_open = false;
        return true;
    }
    let Ok(e) = serde_json::from_slice::<Event>(bytes) else {
        return false;
    };
    if let Some(id) = e.session_id.text() {
        facts.session(id);
    }
    match e.kind.str() {
        None => output(facts, &e),
        Some("message") if e.role.is("assistant") => {
            facts.answered();
            let text = e.content.str().unwrap_or("");
            if e.delta.bool() == Some(true) {
                facts.assistant_delta(text);
            } else {
                facts.text_open = false;
                facts.assistant_delta(text);
            }
        }
        Some("message") => facts.text_open = false,
        Some("tool_result") => {
            facts.text_open = false;
            if e.status.is("error") {
                let message = e.error.0.as_ref().and_then(|error| error.message.str());
                let pieces: Vec<&str> = [e.output.str(), message].into_iter().flatten().collect();
                facts.tool_errors.failed_output(&pieces);
            }
        }
        Some("tool_use") => {
            facts.answered();
            facts.text_open = false;
            let command = e.parameters.0.as_ref().and_then(|p| p.command.str());
            facts.tools.tool(e.tool_name.str().unwrap_or(""), command);
        }
        Some("error") if !e.severity.is("warning") => {
            facts.error_text(e.message.str().unwrap_or("error"));
        }
        Some("result") => {
            let ok = e.status.is("success") && e.error.0.is_none();
            facts.terminal = if ok { Terminal::Ok } else { Terminal::Failed };
            if !ok {
                facts.is_error = true;
                error(facts, e.error.0.as_ref());
            }
            if let Some(tokens) = e.stats.0.as_ref().and_then(Stats::tokens) {
                facts.tokens = Some(tokens);
            }
        }
        _ => {}
    }
    true
}

/// One line of gemini's stderr, where it announces each retry of a failed
/// request: `Attempt 1 failed: <the API's message>. Retrying after 22966ms...`,
/// `Attempt 2 failed with status 503. Retrying with backoff... <error>`, or,
/// with no server, `Attempt 3 failed. Retrying with backoff... Error:
/// exception TypeError: fetch failed sending request`.
pub(crate) fn stderr_line(facts: &mut StreamFacts, line: &[u8]) {
    let Some(rest) = line.trim_ascii().strip_prefix(b"Attempt ") else { return };
    let text = String::from_utf8_lossy(rest);
    let Some((_, after)) = text.split_once(" failed") else { return };
    let status = after
        .strip_prefix(" with status ")
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse::<u16>().ok());
    let message = match after.strip_prefix(':') {
        Some(message) => message,
        None => after.split_once("Retrying with backoff...").map_or(after, |(_, m)| m),
    };
    let message = message.trim().trim_start_matches("Error:").trim();
    facts.retrying(status, if message.is_empty() { after.trim() } else { message });
}

/// The json output document.
fn output(facts: &mut StreamFacts, e: &Event) {
    if e.response.str().is_none() && e.error.0.is_none() {
        return;
    }
    if let Some(text) = e.response.text() {
        facts.result_text(text);
    }
    if let Some(tokens) = e.stats.0.as_ref().and_then(Stats::tokens) {
        facts.tokens = Some(tokens);
    }
    if e.error.0.is_some() {
        facts.terminal = Terminal::Failed;
        facts.is_error = true;
        error(facts, e.error.0.as_ref());
    } else {
        facts.terminal = Terminal::Ok;
    }
}

fn error(facts: &mut StreamFacts, error: Option<&Error>) {
    let Some(error) = error else {
        facts.error_text("error result");
        return;
    };
    if let Some(code) = error.code.u64().filter(|c| (400..600).contains(c)) {
        facts.api_status = u16::try_from(code).ok();
    }
    match (error.kind.text(), error.message.text()) {
        (Some(kind), Some(message)) => facts.error_text(&format!("{kind}: {message}")),
        (kind, message) => facts.error_text(message.or(kind).unwrap_or("error")),
    }
}
