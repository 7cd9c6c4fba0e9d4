//! The error texts that tell a usage limit from an auth failure from a
//! transient overload, for every agent CLI, and the zone their times are in.
//!
//! The CLIs change their wording without notice, so the texts are data:
//! [`Patterns::default`] holds the built-in ones and [`Patterns::new`] adds
//! the user's from config. They are only ever matched against the CLI's own
//! error texts (an error result, an error event, stderr of a failed run),
//! never against tool output or a successful answer, so a phrase like "rate
//! limit" in an agent's prose about rate limiting is harmless.

use std::fmt;
use std::sync::{Arc, LazyLock};

use chrono::FixedOffset;
use chrono_tz::Tz;
use regex::Regex;
use serde::{Deserialize, Serialize};

/// What an error text means, in the order the kinds are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKind {
    /// A subscription usage limit that resets later.
    UsageLimit,
    /// Out of credits or quota with no reset: waiting will not help.
    Billing,
    /// Not logged in, bad key, expired token.
    Auth,
    /// An API rate limit: transient.
    RateLimit,
    /// The API is overloaded or down for a while: transient.
    Overload,
    /// The API could not be reached at all.
    Unreachable,
}

impl PatternKind {
    const ALL: [PatternKind; 6] = [
        PatternKind::UsageLimit,
        PatternKind::Billing,
        PatternKind::Auth,
        PatternKind::RateLimit,
        PatternKind::Overload,
        PatternKind::Unreachable,
    ];
}

impl fmt::Display for PatternKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            PatternKind::UsageLimit => "usage_limit",
            PatternKind::Billing => "billing",
            PatternKind::Auth => "auth",
            PatternKind::RateLimit => "rate_limit",
            PatternKind::Overload => "overload",
            PatternKind::Unreachable => "unreachable",
        })
    }
}

/// Extra regexes per kind, as config spells them (`[patterns]` with one
/// list per kind). Each is a `regex` crate pattern; add `(?i)` for case
/// insensitivity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PatternTexts {
    pub usage_limit: Vec<String>,
    pub billing: Vec<String>,
    pub auth: Vec<String>,
    pub rate_limit: Vec<String>,
    pub overload: Vec<String>,
    pub unreachable: Vec<String>,
}

impl PatternTexts {
    fn of(&self, kind: PatternKind) -> &[String] {
        match kind {
            PatternKind::UsageLimit => &self.usage_limit,
            PatternKind::Billing => &self.billing,
            PatternKind::Auth => &self.auth,
            PatternKind::RateLimit => &self.rate_limit,
            PatternKind::Overload => &self.overload,
            PatternKind::Unreachable => &self.unreachable,
        }
    }
}

/// A pattern from config that is not a valid regex.
#[derive(Debug, thiserror::Error)]
#[error("invalid {kind} pattern {pattern:?}")]
pub struct PatternError {
    pub kind: PatternKind,
    pub pattern: String,
    #[source]
    pub source: regex::Error,
}

/// The time zone of the machine the agent runs on. Codex prints `try again
/// at 3:39 AM` and Claude `resets 5pm` (when it names no zone) in local time,
/// and the analyzer never reads the clock or the environment itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    Named(Tz),
    Fixed(FixedOffset),
}

impl Zone {
    /// This machine's zone: `TZ` when it names one, else the current local
    /// offset. Read once when a run's patterns are built; the analysis
    /// itself never looks at the environment or the clock.
    pub(crate) fn local() -> Zone {
        let named =
            std::env::var("TZ").ok().and_then(|tz| tz.trim_start_matches(':').parse::<Tz>().ok());
        match named {
            Some(tz) => Zone::Named(tz),
            None => Zone::Fixed(*chrono::Local::now().offset()),
        }
    }
}

impl Default for Zone {
    fn default() -> Self {
        Zone::Named(Tz::UTC)
    }
}

/// The compiled error texts, plus the local zone for reset times. Cloning
/// shares the compiled regexes (and their match caches).
///
/// The built-in texts are compiled the first time a text is classified, not
/// when a run starts: they are ~60 case-insensitive Unicode regexes, about
/// as much CPU as the rest of a run's setup, and a run whose agents print no
/// error never needs them. The person's extras are compiled at once, so an
/// invalid one stops the run before the first agent.
#[derive(Debug, Clone)]
pub struct Patterns {
    extra: Arc<[Vec<Regex>; 6]>,
    zone: Zone,
}

/// Built-in texts, from each CLI's documented or observed messages. The
/// first group of each kind is Claude's, then Codex, Gemini, aider, others.
const BUILTIN: [(PatternKind, &[&str]); 6] = [
    (
        PatternKind::UsageLimit,
        &[
            // Claude 2026: "You've hit your session limit · resets 11:29am (UTC)",
            // also weekly/Opus/Sonnet/usage/org's monthly…; Codex: "You've hit
            // your usage limit. … try again at 3:39 AM."
            r"(?i)you(?:'|’|‘)ve hit your\b[^.\n]{0,40}?\blimit",
            r"(?i)you(?:'|’|‘)re out of extra usage",
            // Claude ≤ 1.x: "Claude AI usage limit reached|1749924000" and its
            // rendering "Claude usage limit reached. Your limit will reset at…".
            r"(?i)usage limit reached",
            r"(?i)\busage_limit_reached\b",
            // OpenAI-compatible providers' body text, as opencode and aider show it.
            r"(?i)usage limit has been reached",
            // Gemini daily quotas.
            r"(?i)exhausted your daily quota",
            r"(?i)quota exceeded for quota metric[^\n]*per ?day",
        ],
    ),
    (
        PatternKind::Billing,
        &[
            r"(?i)credit balance is too low",
            r"(?i)usage allocation has been disabled",
            r"(?i)quota exceeded\. check your plan and billing",
            r"(?i)upgrade to plus",
            r"(?i)workspace out of credits",
            r"(?i)\bout of credits\b",
            r"(?i)insufficient (?:credits|funds|balance|quota)",
            r"(?i)\binsufficient_quota\b",
            // OpenAI's insufficient_quota text (Google words its per-minute
            // limit the same way, but says when to retry, which is read first).
            r"(?i)exceeded your current quota, please check your plan and billing",
        ],
    ),
    (
        PatternKind::Auth,
        &[
            r"(?i)invalid api key",
            r"(?i)\bnot logged in\b",
            r"(?i)failed to authenticate",
            r"(?i)invalid (?:authentication|auth) credentials",
            r"(?i)\bauthentication_(?:failed|error)\b",
            r"(?i)please run /login",
            r"(?i)oauth token (?:has )?expired",
            r"(?i)refresh token has expired",
            r"(?i)\b401\b[^\n]{0,20}unauthori[sz]ed",
            r"(?i)please set an auth method",
            r"(?i)api key not valid",
            r"(?i)\bUNAUTHENTICATED\b",
            r"(?i)not able to authenticate you",
            r"(?i)authentication required|login required|please (?:log|sign) ?in\b",
            r"\bProviderAuthError\b",
            // codex without its provider's key variable: "Missing environment
            // variable: `FAKE_OPENAI_KEY`."
            r"(?i)missing environment variable: `",
            // aider and litellm.
            r"\blitellm\.AuthenticationError\b",
            // amp with no key: its browser login flow, headless.
            r"(?i)no api key found\. starting login flow|\blogin failed: ",
        ],
    ),
    (
        PatternKind::RateLimit,
        &[
            r"(?i)request rejected \(429\)",
            r"(?i)would exceed your account's rate limit",
            r"(?i)\brate[ _]limit(?:ed)?\b[^\n]{0,20}(?:reached|exceeded|error)|\brate limited\b",
            r"(?i)\b429 too many requests\b|too many requests",
            r"(?i)\bRATE_LIMIT_EXCEEDED\b|\bRESOURCE_EXHAUSTED\b",
            r"(?i)\(status: 429\)",
            r"(?i)possible quota limitations in place",
            r"(?i)has rate limited you",
        ],
    ),
    (
        PatternKind::Overload,
        &[
            r"(?i)\b529\b[^\n]{0,20}overloaded|\boverloaded_error\b",
            r"(?i)\boverloaded\b",
            r"(?i)api error: 50[234]\b",
            r"(?i)\b503 service unavailable\b|\(status: 503\)",
            r"(?i)experiencing high demand",
            r"(?i)\bMODEL_CAPACITY_EXHAUSTED\b",
            r"(?i)servers are down",
            // codex on a 503 `server_is_overloaded`.
            r"(?i)selected model is at capacity",
        ],
    ),
    (
        PatternKind::Unreachable,
        &[
            r"(?i)unable to connect to api",
            // opencode (the AI SDK): "Cannot connect to API: Unable to connect."
            r"(?i)cannot connect to api",
            r"(?i)connection ?refused|\bECONNREFUSED\b|\bECONNRESET\b",
            r"(?i)\bENOTFOUND\b|\bEAI_AGAIN\b|\bETIMEDOUT\b|getaddrinfo",
            r"(?i)network is unreachable|could not resolve host",
            r"(?i)error sending request|failed to connect|fetch failed",
            r"(?i)stream disconnected before completion",
            r"(?i)reconnecting\.\.\. waiting for network",
            // litellm: "OpenAIException - Connection error."
            r"(?i)\bconnection error\b|\bAPIConnectionError\b",
        ],
    ),
];

static BUILTIN_REGEXES: LazyLock<[Vec<Regex>; 6]> = LazyLock::new(|| {
    let mut kinds: [Vec<Regex>; 6] = Default::default();
    for (kind, texts) in BUILTIN {
        for text in texts {
            let regex = Regex::new(text).unwrap_or_else(|e| panic!("built-in {kind} pattern: {e}"));
            kinds[kind as usize].push(regex);
        }
    }
    kinds
});

static NO_EXTRA: LazyLock<Arc<[Vec<Regex>; 6]>> = LazyLock::new(Arc::default);

impl Default for Patterns {
    /// The built-in texts, local zone UTC.
    fn default() -> Self {
        Patterns { extra: NO_EXTRA.clone(), zone: Zone::default() }
    }
}

impl Patterns {
    /// The built-in texts, the configured extras, and this machine's time
    /// zone for reset times given in local time: what a run classifies by.
    pub(crate) fn configured(extra: &PatternTexts) -> Result<Patterns, PatternError> {
        Ok(Patterns::new(extra)?.with_local_zone(Zone::local()))
    }

    /// The built-in texts plus `extra`; an invalid regex is an error naming
    /// its kind and text.
    pub(crate) fn new(extra: &PatternTexts) -> Result<Patterns, PatternError> {
        if PatternKind::ALL.iter().all(|&kind| extra.of(kind).is_empty()) {
            return Ok(Patterns::default());
        }
        let mut kinds: [Vec<Regex>; 6] = Default::default();
        for kind in PatternKind::ALL {
            for text in extra.of(kind) {
                let regex = Regex::new(text).map_err(|source| PatternError {
                    kind,
                    pattern: text.clone(),
                    source,
                })?;
                kinds[kind as usize].push(regex);
            }
        }
        Ok(Patterns { extra: Arc::new(kinds), zone: Zone::default() })
    }

    /// The zone that times without one (Codex, Claude's `resets 5pm`) are in.
    pub(crate) fn with_local_zone(mut self, zone: Zone) -> Patterns {
        self.zone = zone;
        self
    }

    pub(crate) fn local_zone(&self) -> Zone {
        self.zone
    }

    /// The first kind whose pattern matches `text`, and the line it matched.
    pub(crate) fn classify<'t>(&self, text: &'t str) -> Option<(PatternKind, &'t str)> {
        PatternKind::ALL
            .into_iter()
            .find_map(|kind| self.matches(kind, text).map(|line| (kind, line)))
    }

    /// The line of `text` where a pattern of `kind` matches.
    pub(crate) fn matches<'t>(&self, kind: PatternKind, text: &'t str) -> Option<&'t str> {
        BUILTIN_REGEXES[kind as usize]
            .iter()
            .chain(&self.extra[kind as usize])
            .find_map(|regex| regex.find(text).map(|found| line_around(text, found.start())))
    }
}

/// The trimmed line of `text` that contains byte `at`.
fn line_around(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    text[start..end].trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_texts_classify() {
        use PatternKind::*;
        let cases = [
            ("You've hit your session limit · resets 11:29am (UTC)", Some(UsageLimit)),
            ("You’ve hit your weekly limit · resets Oct 12, 4am", Some(UsageLimit)),
            ("You've hit your org's monthly spend limit", Some(UsageLimit)),
            ("You're out of extra usage · resets 2:30pm (Asia/Tokyo)", Some(UsageLimit)),
            ("Claude AI usage limit reached|1749924000", Some(UsageLimit)),
            (
                "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again at 3:39 AM.",
                Some(UsageLimit),
            ),
            ("[API Error: You have exhausted your daily quota on this model.]", Some(UsageLimit)),
            ("Your credit balance is too low to access the Anthropic API.", Some(Billing)),
            ("Quota exceeded. Check your plan and billing details.", Some(Billing)),
            ("Invalid API key · Fix external API key", Some(Auth)),
            (
                "Failed to authenticate. API Error: 401 Invalid authentication credentials",
                Some(Auth),
            ),
            ("Not logged in · Please run /login", Some(Auth)),
            ("unexpected status 401 Unauthorized: token expired", Some(Auth)),
            (
                "API Error: Request rejected (429) · This request would exceed your account's rate limit.",
                Some(RateLimit),
            ),
            ("exceeded retry limit, last status: 429 Too Many Requests", Some(RateLimit)),
            ("litellm.RateLimitError: The API provider has rate limited you.", Some(RateLimit)),
            ("API Error: 529 Overloaded. This is a server-side issue", Some(Overload)),
            (
                "We're currently experiencing high demand, which may cause temporary errors.",
                Some(Overload),
            ),
            ("API Error: Unable to connect to API (ConnectionRefused)", Some(Unreachable)),
            // Observed (agent-clis-observed.md).
            ("Selected model is at capacity. Please try a different model.", Some(Overload)),
            ("Missing environment variable: `FAKE_OPENAI_KEY`.", Some(Auth)),
            (
                "Reconnecting... waiting for network (Connection failed: error sending request)",
                Some(Unreachable),
            ),
            ("No API key found. Starting login flow...", Some(Auth)),
            (
                "Login failed: That code looks incomplete. Copy the full code from the browser and try again.",
                Some(Auth),
            ),
            (
                "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.",
                Some(Unreachable),
            ),
            ("The usage limit has been reached", Some(UsageLimit)),
            ("error[E0308]: mismatched types", None),
            ("I added a rate limiter and documented the usage limits.", None),
        ];
        let patterns = Patterns::default();
        for (text, expected) in cases {
            assert_eq!(patterns.classify(text).map(|(kind, _)| kind), expected, "{text}");
        }
    }

    #[test]
    fn extra_patterns_from_config() {
        let extra = PatternTexts {
            usage_limit: vec![r"(?i)monthly cap hit".into()],
            ..PatternTexts::default()
        };
        let patterns = Patterns::new(&extra).unwrap();
        assert_eq!(
            patterns.classify("warn: x\nERROR: Monthly cap hit, come back later\n"),
            Some((PatternKind::UsageLimit, "ERROR: Monthly cap hit, come back later"))
        );
        assert_eq!(Patterns::default().classify("Monthly cap hit"), None);
    }

    #[test]
    fn invalid_pattern_names_kind_and_text() {
        let extra = PatternTexts { auth: vec!["(unclosed".into()], ..PatternTexts::default() };
        let err = Patterns::new(&extra).unwrap_err();
        assert_eq!(err.kind, PatternKind::Auth);
        assert_eq!(err.to_string(), r#"invalid auth pattern "(unclosed""#);
    }

    #[test]
    fn config_spelling() {
        let texts: PatternTexts = toml::from_str("usage_limit = ['a']\nauth = ['b']").unwrap();
        assert_eq!(texts.usage_limit, ["a"]);
        assert!(toml::from_str::<PatternTexts>("usage_limits = ['a']").is_err());
    }
}
