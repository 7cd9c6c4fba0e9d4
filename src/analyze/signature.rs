//! Error signatures: error lines with their variable parts blanked out, so
//! the circuit breaker can tell "the same error again" across iterations.
//!
//! Numbers, hex ids, UUIDs and timestamps become `#`, paths `<path>`, URLs
//! `<url>`; case and spacing are folded. What is left is the error's shape:
//! `error[E0308]: mismatched types --> src/lib.rs:12:5` and the same error at
//! line 40 both read `error[e#]: mismatched types --> <path>`.

/// A normalised line is at most this long: the shape is in its start.
const MAX_LEN: usize = 160;

/// The shape of one error line.
pub(crate) fn normalize(line: &str) -> String {
    let mut out = String::with_capacity(line.len().min(MAX_LEN));
    for token in line.split_whitespace() {
        if out.len() >= MAX_LEN {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        push_token(&mut out, token);
    }
    super::status_block::truncate(&out, MAX_LEN).to_string()
}

fn push_token(out: &mut String, token: &str) {
    if token.contains("://") {
        out.push_str("<url>");
        return;
    }
    if token.contains('/') || token.contains('\\') {
        out.push_str("<path>");
        return;
    }
    if is_number_like(token) {
        out.push('#');
        return;
    }
    let mut in_number = false;
    for c in token.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.extend(c.to_lowercase());
        }
    }
}

/// Hex ids, UUIDs, timestamps, durations: digits with separators, or a long
/// run of hex that contains a digit.
fn is_number_like(token: &str) -> bool {
    let core = token.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if core.is_empty() || !core.bytes().any(|b| b.is_ascii_digit()) {
        return false;
    }
    let hex_run = core.len() >= 7 && core.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let stamp = core.bytes().all(|b| b.is_ascii_digit() || b":.-+TZ".contains(&b));
    hex_run || stamp
}

/// Joins the shapes of a run's error lines into one signature (the last few,
/// each once, oldest first).
pub(crate) fn combine(lines: &[String]) -> Option<String> {
    (!lines.is_empty()).then(|| lines.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_error_same_shape() {
        let pairs = [
            (
                "error[E0308]: mismatched types --> src/lib.rs:12:5",
                "error[E0308]: mismatched types --> src/main.rs:40:1",
            ),
            (
                "Error: request 7f3a9c21e0 failed after 3 retries",
                "Error: request 0b12cc9d44 failed after 5 retries",
            ),
            (
                "2026-03-10T09:00:00Z ERROR connection reset (id 123e4567-e89b-12d3-a456-426614174000)",
                "2026-03-11T17:42:13Z ERROR connection reset (id 9f0e4567-e89b-12d3-a456-426614174999)",
            ),
            ("FAILED: see https://ci.example/run/1", "failed:   see https://ci.example/run/2"),
            ("thread 'main' panicked at src/x.rs:3:9:", "thread 'main' panicked at src/y.rs:77:1:"),
        ];
        for (a, b) in pairs {
            assert_eq!(normalize(a), normalize(b), "{a} vs {b}");
        }
    }

    #[test]
    fn different_errors_differ() {
        let pairs = [
            ("error[E0308]: mismatched types", "error[E0425]: cannot find value"),
            ("Error: permission denied", "Error: file not found"),
        ];
        for (a, b) in pairs {
            assert_ne!(normalize(a), normalize(b), "{a} vs {b}");
        }
    }

    #[test]
    fn shape_is_readable_and_bounded() {
        assert_eq!(
            normalize("error[E0308]: mismatched types --> src/lib.rs:12:5"),
            "error[e#]: mismatched types --> <path>"
        );
        assert!(normalize(&"word ".repeat(1000)).len() <= MAX_LEN);
        assert_eq!(normalize(""), "");
    }
}
