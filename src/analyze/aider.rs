//! aider's text output, for the one thing the text format cannot see by
//! itself: aider exits 0 after an API error it gave up on. Its litellm
//! exception line (`litellm.RateLimitError: …`) is kept until a later
//! request is answered (`Tokens: N sent, M received.`), and a run that ends
//! with one pending is classified as failed, exit code 0 or not. The
//! exception's name gives the HTTP status.

use super::analyzer::StreamFacts;
use super::status_block;

/// One trimmed line of stdout. aider wraps its output at 80 columns when
/// stdout is not a terminal, so the lines after an exception line, up to
/// its advice (`The API provider …`) or `Retrying in …`, are the rest of it.
pub(crate) fn line(facts: &mut StreamFacts, line: &[u8]) {
    if line.starts_with(b"litellm.") && memchr::memmem::find(line, b"Error:").is_some() {
        let text = String::from_utf8_lossy(line);
        facts.pending_api_error = Some(status_block::truncate(&text, 1024).to_string());
        facts.api_status = litellm_status(line);
        facts.api_error_open = true;
    } else if line.starts_with(b"Tokens: ") {
        // A request that got an answer: an earlier error was retried away.
        facts.pending_api_error = None;
        facts.api_error_open = false;
        facts.answered();
    } else if line.starts_with(b"Retrying in ") {
        // aider waits and sends the request again: a run ended now was
        // ended in that wait.
        facts.api_error_open = false;
        if let Some(error) = facts.pending_api_error.clone() {
            facts.retrying(facts.api_status, &error);
        }
    } else if facts.api_error_open {
        let ends = line.is_empty()
            || line.starts_with(b"The API provider")
            || line.starts_with(b"Retrying in ");
        match &mut facts.pending_api_error {
            Some(error) if !ends => {
                let joined = format!("{error} {}", String::from_utf8_lossy(line));
                *error = status_block::truncate(&joined, 1024).to_string();
                facts.api_status = litellm_status(error.as_bytes());
            }
            _ => facts.api_error_open = false,
        }
    }
}

/// The HTTP status behind a litellm exception line (`litellm.RateLimitError:
/// …`), except a connection error, which litellm also calls an internal
/// server error.
fn litellm_status(line: &[u8]) -> Option<u16> {
    if memchr::memmem::find(line, b"Connection error").is_some() {
        return None;
    }
    let name = line.strip_prefix(b"litellm.")?;
    let name = &name[..name.iter().position(|b| *b == b':')?];
    Some(match name {
        b"AuthenticationError" | b"PermissionDeniedError" => 401,
        b"RateLimitError" => 429,
        b"InternalServerError" | b"APIError" => 500,
        b"ServiceUnavailableError" => 503,
        _ => return None,
    })
}
