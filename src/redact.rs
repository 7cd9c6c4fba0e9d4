//! Keeping secrets out of what ralph writes: the iteration logs, the
//! events it shows and records, gate output, lessons.
//!
//! Two nets: the values of this process's secret environment variables
//! (API keys and tokens an agent CLI might echo), matched exactly, and the
//! shapes of well-known token formats (`sk-ant-…`, `ghp_…`, …) wherever
//! they appear. A prefix scan finds candidates first, so output without
//! either costs one linear pass.

use std::borrow::Cow;

use aho_corasick::AhoCorasick;
use regex::bytes::Regex;

/// Variables that hold secrets whatever their value looks like.
const SECRET_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AMP_API_KEY",
    "CURSOR_API_KEY",
    "OPENROUTER_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// Name endings that mark a secret variable too.
const SECRET_SUFFIXES: &[&str] = &["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_SECRET_KEY"];

/// Shorter values are not treated as secrets: redacting "1" or "true"
/// everywhere would wreck the logs without protecting anything.
const MIN_SECRET_LEN: usize = 8;

/// Prefixes of well-known token formats, and the full shapes.
const TOKEN_PREFIXES: &[&str] =
    &["sk-", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "AKIA", "AIza"];
const TOKEN_SHAPES: &str = r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}|gh[pos]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_\-]{20,}|xox[bp]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}";

/// Replaces secrets in text. Cheap to clone (shares its matchers).
#[derive(Debug, Clone)]
pub struct Redactor {
    inner: std::sync::Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Secret values, then token prefixes.
    matcher: AhoCorasick,
    /// Names of the secret values, in matcher order.
    names: Vec<String>,
    shapes: Regex,
}

impl Redactor {
    /// From environment variables (name, value).
    pub fn new<I: IntoIterator<Item = (String, String)>>(vars: I) -> Redactor {
        let mut names = Vec::new();
        let mut values: Vec<String> = Vec::new();
        for (name, value) in vars {
            let secret = SECRET_VARS.contains(&name.as_str())
                || SECRET_SUFFIXES.iter().any(|s| name.ends_with(s));
            let value = value.trim().to_string();
            if secret && value.len() >= MIN_SECRET_LEN && !values.contains(&value) {
                names.push(name);
                values.push(value);
            }
        }
        let patterns: Vec<&str> =
            values.iter().map(String::as_str).chain(TOKEN_PREFIXES.iter().copied()).collect();
        // Leftmost-longest: a secret value that starts with a token prefix
        // is reported as the secret it is, by name.
        let build = |p: &[&str]| {
            AhoCorasick::builder().match_kind(aho_corasick::MatchKind::LeftmostLongest).build(p)
        };
        let matcher =
            build(&patterns).unwrap_or_else(|_| build(TOKEN_PREFIXES).expect("fixed prefixes"));
        let shapes = Regex::new(TOKEN_SHAPES).expect("fixed token shapes");
        Redactor { inner: std::sync::Arc::new(Inner { matcher, names, shapes }) }
    }

    /// From this process's environment.
    pub fn from_env() -> Redactor {
        Redactor::new(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// `bytes` with every secret replaced by `[redacted NAME]`.
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let inner = &self.inner;
        let mut hits = inner.matcher.find_iter(bytes).peekable();
        if hits.peek().is_none() {
            return Cow::Borrowed(bytes);
        }
        let secrets = inner.names.len();
        let mut out = Vec::with_capacity(bytes.len());
        let mut last = 0;
        let mut shape_candidates = false;
        for m in hits {
            let i = m.pattern().as_usize();
            if i < secrets {
                if m.start() >= last {
                    out.extend_from_slice(&bytes[last..m.start()]);
                    out.extend_from_slice(format!("[redacted {}]", inner.names[i]).as_bytes());
                    last = m.end();
                }
            } else {
                shape_candidates = true;
            }
        }
        out.extend_from_slice(&bytes[last..]);
        if shape_candidates
            && let Cow::Owned(o) = inner.shapes.replace_all(&out, &b"[redacted token]"[..])
        {
            out = o;
        }
        if out == bytes { Cow::Borrowed(bytes) } else { Cow::Owned(out) }
    }

    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Redactor {
        Redactor::new([
            ("ANTHROPIC_API_KEY".to_string(), "secret-value-123456".to_string()),
            ("MY_SERVICE_TOKEN".to_string(), "tok_abcdefghij".to_string()),
            ("SHORT_TOKEN".to_string(), "abc".to_string()),
            ("HOME".to_string(), "/root/home/dir".to_string()),
        ])
    }

    #[test]
    fn secrets_and_token_shapes_are_replaced() {
        let cases = [
            ("key is secret-value-123456.", "key is [redacted ANTHROPIC_API_KEY]."),
            ("x tok_abcdefghij y", "x [redacted MY_SERVICE_TOKEN] y"),
            ("abc stays, /root/home/dir stays", "abc stays, /root/home/dir stays"),
            ("export K=sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA", "export K=[redacted token]"),
            ("ghp_0123456789abcdefghijABCDEFGHIJ0123 leaked", "[redacted token] leaked"),
            ("PRIVATE-TOKEN: glpat-abcdefghij0123456789", "PRIVATE-TOKEN: [redacted token]"),
            ("a sk- prefix alone is fine", "a sk- prefix alone is fine"),
            ("plain text", "plain text"),
        ];
        for (input, want) in cases {
            assert_eq!(r().text(input), want, "{input}");
        }
        assert!(matches!(r().bytes(b"nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn binary_input_is_safe() {
        let bytes = b"\xff\xfe secret-value-123456 \x00";
        assert_eq!(&r().bytes(bytes)[..], b"\xff\xfe [redacted ANTHROPIC_API_KEY] \x00");
    }
}
