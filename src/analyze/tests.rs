//! The analyzer end to end, over the transcripts in
//! `tests/fixtures/agents/<cli>/`: one table row per run, with how the
//! process ended and what the outcome must say.

use std::io::BufReader;
use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset, Utc};
use chrono_tz::Tz;

use super::*;
use crate::analyze::patterns::Zone;
use crate::process::Signal;

const CLAUDE_SESSION: &str = "4f1c2d9e-7a0b-4c3e-9d21-0b5e8a6f1c11";
const AMP_SESSION: &str = "T-5f0e2a1c-9b7d-4e3f-a2c1-6d8e0f1b3a55";
const CODEX_SESSION: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";
const GEMINI_SESSION: &str = "c2a1d0e4-3b5f-4a6e-8c7d-9e0f1a2b3c4d";
const OPENCODE_SESSION: &str = "ses_7b3c9a21d4ffe0l2Q8xYzAbCdE";
const CURSOR_SESSION: &str = "b1f0e2d3-c4a5-4b6c-8d7e-9f0a1b2c3d4e";

fn now() -> DateTime<Utc> {
    at("2026-12-02T09:00:00Z")
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents")
}

/// One run: a fixture, how its process ended, and what must come out.
struct Case {
    file: &'static str,
    format: Format,
    exit: Option<i32>,
    stderr: &'static str,
    stopped: Option<StopReason>,
    zone: Zone,
    expect: Expect,
}

#[derive(Default)]
struct Expect {
    error: Option<AgentError>,
    /// The status block's `wants_exit()`; `None` when there must be no block.
    wants_exit: Option<bool>,
    claimed: bool,
    session: Option<&'static str>,
    test_only: bool,
    denials: &'static [&'static str],
    asking: bool,
    is_error: bool,
    api_status: Option<u16>,
    /// A piece of the final text.
    final_has: &'static str,
}

fn case(file: &'static str, format: Format, exit: i32, expect: Expect) -> Case {
    Case {
        file,
        format,
        exit: Some(exit),
        stderr: "",
        stopped: None,
        zone: Zone::default(),
        expect,
    }
}

fn failed(exit: i32, message: &str) -> Option<AgentError> {
    Some(AgentError::Failed { exit_code: Some(exit), message: message.into() })
}

fn usage_limit(resets_at: Option<&str>, message: &str) -> Option<AgentError> {
    Some(AgentError::UsageLimit { resets_at: resets_at.map(at), message: message.into() })
}

fn cases() -> Vec<Case> {
    use Format::*;
    let c = Some(CLAUDE_SESSION);
    vec![
        // Claude.
        case(
            "claude/success.json",
            Claude,
            0,
            Expect { wants_exit: Some(true), session: c, final_has: "Implemented US-001", ..Expect::default() },
        ),
        case(
            "claude/exit-false.json",
            Claude,
            0,
            Expect { wants_exit: Some(false), session: c, ..Expect::default() },
        ),
        case(
            "claude/success-stream.jsonl",
            Claude,
            0,
            Expect {
                wants_exit: Some(true),
                claimed: true,
                session: c,
                final_has: "Fixed the failing test.",
                ..Expect::default()
            },
        ),
        case(
            "claude/permission-denial.json",
            Claude,
            0,
            Expect {
                wants_exit: Some(false),
                session: c,
                denials: &["Bash(mvn clean compile 2>&1 | tail -40)", "AskUserQuestion", "Write"],
                asking: true,
                ..Expect::default()
            },
        ),
        case(
            "claude/auth-401.json",
            Claude,
            1,
            Expect {
                error: Some(AgentError::Auth { message: "Invalid API key · Fix external API key".into() }),
                session: c,
                is_error: true,
                api_status: Some(401),
                ..Expect::default()
            },
        ),
        case(
            "claude/rate-limit-429.jsonl",
            Claude,
            1,
            Expect {
                error: Some(AgentError::RateLimited {
                    message: "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.".into(),
                }),
                session: c,
                is_error: true,
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        case(
            "claude/overloaded-529.json",
            Claude,
            1,
            Expect {
                error: Some(AgentError::Overloaded {
                    message: "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:38411).".into(),
                }),
                session: c,
                is_error: true,
                api_status: Some(529),
                ..Expect::default()
            },
        ),
        case(
            "claude/connection-refused.json",
            Claude,
            1,
            Expect {
                error: Some(AgentError::Unreachable {
                    message: "API Error: Unable to connect to API (ConnectionRefused)".into(),
                }),
                session: c,
                is_error: true,
                ..Expect::default()
            },
        ),
        // resetsAt (epoch seconds) wins over the text's minute-rounded time.
        case(
            "claude/usage-limit-session.jsonl",
            Claude,
            1,
            Expect {
                error: usage_limit(
                    Some("2026-12-02T11:29:54Z"),
                    "You've hit your session limit · resets 11:29am (UTC)",
                ),
                session: c,
                is_error: true,
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        // resetsAt in milliseconds; the newest rate_limit_event decides.
        case(
            "claude/usage-limit-weekly.jsonl",
            Claude,
            1,
            Expect {
                error: usage_limit(
                    Some("2026-12-04T18:03:00Z"),
                    "You’ve hit your weekly limit · resets Dec 4, 8:03pm (Europe/Vilnius)",
                ),
                session: c,
                is_error: true,
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        // json output has no rate_limit_event: the time comes from the text.
        case(
            "claude/usage-limit-text.json",
            Claude,
            1,
            Expect {
                error: usage_limit(Some("2026-12-02T15:00:00Z"), "You've hit your limit · resets 5pm (Europe/Vilnius)"),
                session: c,
                is_error: true,
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        case(
            "claude/extra-usage.json",
            Claude,
            1,
            Expect {
                error: usage_limit(Some("2026-12-02T21:00:00Z"), "You're out of extra usage · resets 9pm (UTC)"),
                session: c,
                is_error: true,
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        // An old build's limit as a plain, non-error result.
        case(
            "claude/usage-limit-legacy.json",
            Claude,
            1,
            Expect {
                error: usage_limit(Some("2026-12-02T13:00:00Z"), "Claude AI usage limit reached|1796216400"),
                session: c,
                ..Expect::default()
            },
        ),
        case(
            "claude/error-during-execution.json",
            Claude,
            1,
            Expect {
                error: failed(1, "[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"),
                session: c,
                is_error: true,
                ..Expect::default()
            },
        ),
        // is_error with exit 0 is still a failure.
        case(
            "claude/is-error-exit-0.json",
            Claude,
            0,
            Expect {
                error: failed(0, "API Error: 400 due to tool use concurrency issues. Run /rewind to recover the conversation."),
                session: c,
                is_error: true,
                ..Expect::default()
            },
        ),
        // A tool result quoting a limit message and the marker is neither.
        Case {
            stopped: Some(StopReason::Timeout),
            ..case(
                "claude/tool-echo-limit.jsonl",
                Claude,
                143,
                Expect {
                    error: Some(AgentError::Stopped { reason: StopReason::Timeout }),
                    session: c,
                    final_has: "Now updating the handler",
                    ..Expect::default()
                },
            )
        },
        case(
            "claude/tool-echo-limit.jsonl",
            Claude,
            1,
            Expect {
                error: failed(1, "claude ended without a result event"),
                session: c,
                ..Expect::default()
            },
        ),
        case(
            "claude/banner-whitespace.jsonl",
            Claude,
            0,
            Expect { wants_exit: Some(false), session: c, final_has: "Done with US-002.", ..Expect::default() },
        ),
        // claude hung after its result and the idle watchdog killed it.
        Case {
            stopped: Some(StopReason::Idle),
            ..case(
                "claude/idle-after-result.jsonl",
                Claude,
                143,
                Expect { wants_exit: Some(false), session: c, ..Expect::default() },
            )
        },
        Case {
            stopped: Some(StopReason::Interrupted),
            ..case(
                "claude/idle-after-result.jsonl",
                Claude,
                143,
                Expect {
                    error: Some(AgentError::Stopped { reason: StopReason::Interrupted }),
                    wants_exit: Some(false),
                    session: c,
                    ..Expect::default()
                },
            )
        },
        case(
            "claude/no-result.jsonl",
            Claude,
            0,
            Expect {
                error: failed(0, "claude ended without a result event"),
                session: c,
                final_has: "Let me look at the code.",
                ..Expect::default()
            },
        ),
        // An error printed instead of events says more than "no result".
        Case {
            stderr: "Error: When using --print, --output-format=stream-json requires --verbose\n",
            ..case(
                "claude/no-result.jsonl",
                Claude,
                1,
                Expect {
                    error: failed(1, "Error: When using --print, --output-format=stream-json requires --verbose"),
                    session: c,
                    final_has: "Let me look at the code.",
                    ..Expect::default()
                },
            )
        },
        case(
            "claude/verbose-array.json",
            Claude,
            0,
            Expect { wants_exit: Some(true), session: c, final_has: "All done.", ..Expect::default() },
        ),
        case(
            "claude/test-only.jsonl",
            Claude,
            0,
            Expect { wants_exit: Some(false), session: c, test_only: true, ..Expect::default() },
        ),
        // A subagent's text is not the agent's answer or its claim.
        Case {
            stopped: Some(StopReason::Idle),
            ..case(
                "claude/subagent.jsonl",
                Claude,
                143,
                Expect {
                    error: Some(AgentError::Stopped { reason: StopReason::Idle }),
                    session: c,
                    final_has: "The review found two issues",
                    ..Expect::default()
                },
            )
        },
        // Amp.
        case(
            "amp/success.jsonl",
            Amp,
            0,
            Expect { wants_exit: Some(false), session: Some(AMP_SESSION), ..Expect::default() },
        ),
        case(
            "amp/error.jsonl",
            Amp,
            1,
            Expect {
                error: failed(1, "Tool execution failed: spawn bash ENOENT"),
                session: Some(AMP_SESSION),
                is_error: true,
                ..Expect::default()
            },
        ),
        case(
            "amp/rate-limit.jsonl",
            Amp,
            1,
            Expect {
                error: Some(AgentError::RateLimited {
                    message: "Error: 429 Too Many Requests: rate limit exceeded for model claude-sonnet-5".into(),
                }),
                session: Some(AMP_SESSION),
                is_error: true,
                ..Expect::default()
            },
        ),
        case(
            "amp/out-of-credits.jsonl",
            Amp,
            1,
            Expect {
                error: Some(AgentError::Billing {
                    message: "Out of credits. Add credits at https://ampcode.com/settings to continue.".into(),
                }),
                session: Some(AMP_SESSION),
                is_error: true,
                ..Expect::default()
            },
        ),
        // Codex.
        case(
            "codex/success.jsonl",
            Codex,
            0,
            Expect {
                wants_exit: Some(true),
                claimed: true,
                session: Some(CODEX_SESSION),
                final_has: "Implemented US-004",
                ..Expect::default()
            },
        ),
        Case {
            zone: Zone::Named(Tz::Europe__Vilnius),
            ..case(
                "codex/usage-limit.jsonl",
                Codex,
                1,
                Expect {
                    error: usage_limit(
                        Some("2026-12-02T13:39:00Z"),
                        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:39 PM.",
                    ),
                    session: Some(CODEX_SESSION),
                    is_error: true,
                    ..Expect::default()
                },
            )
        },
        case(
            "codex/error.jsonl",
            Codex,
            1,
            Expect {
                error: failed(
                    1,
                    "Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying.",
                ),
                session: Some(CODEX_SESSION),
                is_error: true,
                ..Expect::default()
            },
        ),
        Case {
            stderr: "2026-12-02T08:59:58Z WARN codex_core: retrying\nERROR: exceeded retry limit, last status: 429 Too Many Requests\n",
            ..case(
                "codex/rate-limit-stderr.jsonl",
                Codex,
                1,
                Expect {
                    error: Some(AgentError::RateLimited {
                        message: "ERROR: exceeded retry limit, last status: 429 Too Many Requests".into(),
                    }),
                    session: Some(CODEX_SESSION),
                    ..Expect::default()
                },
            )
        },
        case(
            "codex/test-only.jsonl",
            Codex,
            0,
            Expect {
                wants_exit: Some(false),
                session: Some(CODEX_SESSION),
                test_only: true,
                ..Expect::default()
            },
        ),
        // Gemini.
        case(
            "gemini/success.json",
            Gemini,
            0,
            Expect {
                wants_exit: Some(true),
                session: Some(GEMINI_SESSION),
                final_has: "Implemented US-002 { with braces }",
                ..Expect::default()
            },
        ),
        case(
            "gemini/success-stream.jsonl",
            Gemini,
            0,
            Expect {
                wants_exit: Some(true),
                claimed: true,
                session: Some(GEMINI_SESSION),
                final_has: "All stories pass.\n<promise>COMPLETE</promise>",
                ..Expect::default()
            },
        ),
        case(
            "gemini/error.json",
            Gemini,
            53,
            Expect {
                error: failed(
                    53,
                    "FatalTurnLimitedError: Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.",
                ),
                session: Some(GEMINI_SESSION),
                is_error: true,
                ..Expect::default()
            },
        ),
        case(
            "gemini/rate-limit.json",
            Gemini,
            1,
            Expect {
                error: Some(AgentError::RateLimited {
                    message: "Error: [API Error: Resource has been exhausted (e.g. check quota). (Status: 429)] Please wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method".into(),
                }),
                is_error: true,
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        case(
            "gemini/quota-stream.jsonl",
            Gemini,
            1,
            Expect {
                // A daily quota resets at midnight Pacific: 08:00 UTC in December.
                error: usage_limit(Some("2026-12-03T08:00:00Z"), "Error: [API Error: You have exhausted your daily quota on this model.]"),
                session: Some(GEMINI_SESSION),
                is_error: true,
                ..Expect::default()
            },
        ),
        Case {
            stderr: "Please set an Auth method in your /home/dev/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA\n",
            ..case(
                "gemini/auth-stderr.json",
                Gemini,
                41,
                Expect {
                    error: Some(AgentError::Auth {
                        message: "Please set an Auth method in your /home/dev/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA".into(),
                    }),
                    ..Expect::default()
                },
            )
        },
        // opencode.
        case(
            "opencode/success.jsonl",
            Opencode,
            0,
            Expect {
                wants_exit: Some(false),
                session: Some(OPENCODE_SESSION),
                final_has: "Implemented US-003.",
                ..Expect::default()
            },
        ),
        case(
            "opencode/error.jsonl",
            Opencode,
            1,
            Expect {
                // A 5xx is transient: backed off from, not a failed run.
                error: Some(AgentError::Overloaded {
                    message: "APIError: Internal server error: upstream returned 500".into(),
                }),
                session: Some(OPENCODE_SESSION),
                is_error: true,
                api_status: Some(500),
                ..Expect::default()
            },
        ),
        case(
            "opencode/rate-limit.jsonl",
            Opencode,
            1,
            Expect {
                error: Some(AgentError::RateLimited {
                    message: "APIError: Too Many Requests: rate limit reached for requests".into(),
                }),
                session: Some(OPENCODE_SESSION),
                is_error: true,
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        case(
            "opencode/auth.jsonl",
            Opencode,
            1,
            Expect {
                error: Some(AgentError::Auth {
                    message: "ProviderAuthError: No credentials found for anthropic".into(),
                }),
                session: Some(OPENCODE_SESSION),
                is_error: true,
                ..Expect::default()
            },
        ),
        // Cursor: the prompt echo in its `user` event is not a claim.
        case(
            "cursor/success.jsonl",
            Cursor,
            0,
            Expect {
                wants_exit: Some(false),
                session: Some(CURSOR_SESSION),
                final_has: "US-001 done.",
                ..Expect::default()
            },
        ),
        Case {
            stderr: "Error: ENOSPC: no space left on device, write\n",
            ..case(
                "cursor/error-stderr.jsonl",
                Cursor,
                1,
                Expect { error: failed(1, "Error: ENOSPC: no space left on device, write"), ..Expect::default() },
            )
        },
        Case {
            stderr: "You've hit your usage limit. Get Cursor Pro for more agent usage.\n",
            ..case(
                "cursor/usage-limit-stderr.jsonl",
                Cursor,
                1,
                Expect {
                    error: usage_limit(None, "You've hit your usage limit. Get Cursor Pro for more agent usage."),
                    ..Expect::default()
                },
            )
        },
        // Text.
        case(
            "text/success.txt",
            Text,
            0,
            Expect { wants_exit: Some(true), claimed: true, final_has: "Applied edit to src/parser.py", ..Expect::default() },
        ),
        case(
            "text/prompt-echo.txt",
            Text,
            0,
            Expect { wants_exit: Some(false), final_has: "Working on US-002 now.", ..Expect::default() },
        ),
        case(
            "text/usage-limit.txt",
            Text,
            1,
            Expect {
                error: usage_limit(Some("2026-12-02T11:29:00Z"), "You've hit your session limit · resets 11:29am (UTC)"),
                final_has: "You've hit your session limit",
                ..Expect::default()
            },
        ),
        // Same text, but the run exited 0: text output is the agent's own
        // words and only a failed exit makes them an error.
        case(
            "text/usage-limit.txt",
            Text,
            0,
            Expect { final_has: "You've hit your session limit", ..Expect::default() },
        ),
        case(
            "text/rate-limit.txt",
            Text,
            1,
            Expect {
                error: Some(AgentError::RateLimited {
                    message: "The API provider has rate limited you. Try again later or check your quotas.".into(),
                }),
                // litellm.RateLimitError
                api_status: Some(429),
                ..Expect::default()
            },
        ),
        case(
            "text/error.txt",
            Text,
            101,
            Expect {
                error: failed(101, r#"error: could not compile `demo` (bin "demo") due to 1 previous error"#),
                ..Expect::default()
            },
        ),
        case(
            "text/error-again.txt",
            Text,
            101,
            Expect {
                error: failed(101, r#"error: could not compile `demo` (bin "demo") due to 1 previous error"#),
                ..Expect::default()
            },
        ),
        case("text/test-only.txt", Text, 0, Expect { test_only: true, ..Expect::default() }),
        case("text/crlf-nul.txt", Text, 0, Expect { wants_exit: Some(true), ..Expect::default() }),
        case("text/empty.txt", Text, 0, Expect::default()),
        Case {
            stopped: Some(StopReason::Budget),
            ..case(
                "text/empty.txt",
                Text,
                143,
                Expect { error: Some(AgentError::Stopped { reason: StopReason::Budget }), ..Expect::default() },
            )
        },
    ]
}

fn end_of(case: &Case) -> ProcessEnd {
    ProcessEnd {
        exit_code: case.exit,
        signal: None,
        stopped: case.stopped,
        stderr_tail: case.stderr.into(),
    }
}

fn patterns_of(case: &Case) -> Patterns {
    Patterns::default().with_local_zone(case.zone)
}

/// Feeds the file line by line, as the supervisor does.
fn run_lines(case: &Case, bytes: &[u8]) -> Outcome {
    let mut analyzer = Analyzer::with_patterns(case.format, patterns_of(case));
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if !bytes.is_empty() {
        body.split(|&b| b == b'\n').for_each(|line| analyzer.feed(line));
    }
    analyzer.finish(&end_of(case), now())
}

/// Streams the file through `analyze_reader` in small chunks, so lines
/// straddle the reader's buffer.
fn run_reader(case: &Case, bytes: &[u8]) -> Outcome {
    let reader = BufReader::with_capacity(7, bytes);
    analyze_reader(reader, case.format, patterns_of(case), &end_of(case), now()).unwrap()
}

#[test]
fn fixtures_give_expected_outcomes() {
    let mut failures = Vec::new();
    for case in cases() {
        let bytes = std::fs::read(fixtures().join(case.file)).unwrap();
        let outcome = run_lines(&case, &bytes);
        let e = &case.expect;
        let got = (
            &outcome.error,
            outcome.status_block.as_ref().map(StatusBlock::wants_exit),
            outcome.claimed_complete,
            outcome.session_id.as_deref(),
            outcome.test_only,
            &outcome.permission_denials,
            outcome.asking_questions,
            outcome.is_error,
            outcome.api_error_status,
        );
        let want = (
            &e.error,
            e.wants_exit,
            e.claimed,
            e.session,
            e.test_only,
            &e.denials.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            e.asking,
            e.is_error,
            e.api_status,
        );
        if got != want {
            failures.push(format!(
                "{} (exit {:?}):\n  got  {got:?}\n  want {want:?}",
                case.file, case.exit
            ));
        }
        if !outcome.final_text.contains(e.final_has) {
            failures.push(format!(
                "{}: final text {:?} lacks {:?}",
                case.file, outcome.final_text, e.final_has
            ));
        }
        let streamed = run_reader(&case, &bytes);
        if format!("{streamed:?}") != format!("{outcome:?}") {
            failures.push(format!("{}: reader and line-by-line disagree", case.file));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_fixture_is_in_the_table() {
    let listed: Vec<&str> = cases().iter().map(|c| c.file).collect();
    for cli in std::fs::read_dir(fixtures()).unwrap() {
        let cli = cli.unwrap();
        if !cli.path().is_dir() {
            continue;
        }
        for file in std::fs::read_dir(cli.path()).unwrap() {
            let name = format!(
                "{}/{}",
                cli.file_name().to_string_lossy(),
                file.unwrap().file_name().to_string_lossy()
            );
            assert!(listed.contains(&name.as_str()), "{name} has no row in cases()");
        }
    }
}

#[test]
fn accounting() {
    // (file, format, cost, tokens (input, output, cache read, cache write), turns)
    let cases = [
        (
            "claude/success-stream.jsonl",
            Format::Claude,
            Some(0.0877),
            Some((1200, 450, 4000, 300)),
            Some(5),
        ),
        // Amp has no cost; tokens are summed per message, once per message id.
        ("amp/success.jsonl", Format::Amp, None, Some((20, 100, 2000, 200)), Some(2)),
        ("codex/success.jsonl", Format::Codex, None, Some((315, 122, 24448, 0)), None),
        ("gemini/success.json", Format::Gemini, None, Some((9000, 1350, 4000, 0)), None),
        ("gemini/success-stream.jsonl", Format::Gemini, None, Some((2000, 200, 3000, 0)), None),
        (
            "opencode/success.jsonl",
            Format::Opencode,
            Some(0.02),
            Some((1500, 320, 11000, 200)),
            Some(2),
        ),
        ("cursor/success.jsonl", Format::Cursor, None, None, None),
    ];
    for (file, format, cost, tokens, turns) in cases {
        let case = case(file, format, 0, Expect::default());
        let outcome = run_lines(&case, &std::fs::read(fixtures().join(file)).unwrap());
        let got_tokens = outcome.tokens.map(|t| (t.input, t.output, t.cache_read, t.cache_write));
        assert_eq!(got_tokens, tokens, "{file}");
        assert_eq!(outcome.turns, turns, "{file}");
        match (outcome.cost_usd, cost) {
            (Some(got), Some(want)) => assert!((got - want).abs() < 1e-9, "{file}: cost {got}"),
            (got, want) => assert_eq!(got, want, "{file}"),
        }
    }
}

#[test]
fn the_same_error_gives_the_same_signature() {
    let signature = |file: &'static str, exit| {
        let case = case(file, Format::Text, exit, Expect::default());
        run_lines(&case, &std::fs::read(fixtures().join(file)).unwrap()).error_signature
    };
    let first = signature("text/error.txt", 101);
    assert_eq!(first, signature("text/error-again.txt", 101));
    assert_eq!(
        first.as_deref(),
        Some(
            r#"error[e#]: mismatched types | error: could not compile `demo` (bin "demo") due to # previous error"#
        )
    );
    assert_eq!(signature("text/success.txt", 0), None);
}

#[test]
fn structured_failures_sign_their_error_message() {
    let outcome = |file: &'static str, exit| {
        let case = case(file, Format::Claude, exit, Expect::default());
        run_lines(&case, &std::fs::read(fixtures().join(file)).unwrap())
    };
    assert_eq!(
        outcome("claude/error-during-execution.json", 1).error_signature.as_deref(),
        Some("[ede_diagnostic] result_type=user <path> stop_reason=tool_use")
    );
    assert_eq!(outcome("claude/success.json", 0).error_signature, None);
}

#[test]
fn local_zone_moves_codex_reset() {
    let offset = Zone::Fixed(FixedOffset::west_opt(5 * 3600).unwrap());
    let case = Case {
        zone: offset,
        ..case("codex/usage-limit.jsonl", Format::Codex, 1, Expect::default())
    };
    let outcome = run_lines(&case, &std::fs::read(fixtures().join(case.file)).unwrap());
    match outcome.error {
        Some(AgentError::UsageLimit { resets_at, .. }) => {
            assert_eq!(resets_at, Some(at("2026-12-02T20:39:00Z")))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_line_over_the_cap_is_counted_not_kept() {
    use std::io::Read;
    let huge = 20 * 1024 * 1024;
    let first = br#"{"type":"system","subtype":"init","session_id":"s-1"}"#;
    let last = br#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1"}"#;
    let reader = (&first[..])
        .chain(
            &b"\n{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\""
                [..],
        )
        .chain(std::io::repeat(b'x').take(huge as u64))
        .chain(&b"\"}]}}\n"[..])
        .chain(&last[..]);
    let end = ProcessEnd { exit_code: Some(0), ..ProcessEnd::default() };
    let outcome =
        analyze_reader(BufReader::new(reader), Format::Claude, Patterns::default(), &end, now())
            .unwrap();
    assert_eq!(outcome.output_lines, 3);
    assert!(outcome.output_bytes > huge as u64);
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.final_text, "done");
    assert_eq!(outcome.session_id.as_deref(), Some("s-1"));
}

/// Every format reads every fixture, cut off anywhere, without panicking.
#[test]
fn any_format_survives_any_fixture_cut_anywhere() {
    let formats = <Format as clap::ValueEnum>::value_variants();
    let end = ProcessEnd {
        exit_code: Some(1),
        stderr_tail: "ERROR: boom".into(),
        ..ProcessEnd::default()
    };
    for case in cases() {
        let bytes = std::fs::read(fixtures().join(case.file)).unwrap();
        let step = (bytes.len() / 16).max(1);
        for cut in (0..bytes.len()).step_by(step).chain([bytes.len()]) {
            for &format in formats {
                let mut analyzer = Analyzer::new(format);
                bytes[..cut].split(|&b| b == b'\n').for_each(|line| analyzer.feed(line));
                let outcome = analyzer.finish(&end, now());
                assert_eq!(
                    outcome.output_bytes,
                    cut as u64 + 1,
                    "{} cut at {cut} as {format:?}",
                    case.file
                );
            }
        }
    }
}

/// Lines built to break a parser: deep nesting, huge numbers, bad UTF-8,
/// NUL, lone surrogates, a status block that never ends.
#[test]
fn hostile_lines_do_not_panic() {
    let deep = "[".repeat(200_000);
    let deep_obj = r#"{"type":"assistant","message":"#.to_string() + &"{\"a\":".repeat(100_000);
    let lines: Vec<Vec<u8>> = vec![
        deep.into_bytes(),
        deep_obj.into_bytes(),
        br#"{"type":"result","is_error":true,"api_error_status":1e400,"num_turns":-5,"total_cost_usd":"NaN"}"#.to_vec(),
        br#"{"type":"result","usage":{"input_tokens":1e30,"output_tokens":18446744073709551615,"cache_read_input_tokens":18446744073709551615}}"#.to_vec(),
        br#"{"type":"turn.completed","usage":{"input_tokens":1e30,"cached_input_tokens":1e30,"output_tokens":1e30}}"#.to_vec(),
        br#"{"type":"step_finish","part":{"cost":1e308,"tokens":{"input":1e30,"output":1e30,"reasoning":1e30}}}"#.to_vec(),
        br#"{"type":"step_finish","part":{"cost":1e308,"tokens":{"input":1e30,"output":1e30,"reasoning":1e30}}}"#.to_vec(),
        b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe\"}]}}".to_vec(),
        br#"{"type":"assistant","message":{"content":[{"type":"text","text":"\ud800 <promise>COMPLETE</promise>"}]}}"#.to_vec(),
        b"{\"type\":\"result\",\x00\"result\":\"x\"}".to_vec(),
        br#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1e300}}"#.to_vec(),
        br#"{"type":"result","is_error":true,"result":"resets Dec 31, 9999 11:59pm (Pacific/Apia) try again at Feb 30th, 2026 3:39 AM"}"#.to_vec(),
        b"---RALPH_STATUS---".to_vec(),
        b"\xff\xfe\x00\r".to_vec(),
        b"{".to_vec(),
    ];
    for format in [Format::Text, Format::Claude, Format::Codex, Format::Gemini, Format::Opencode] {
        let mut analyzer = Analyzer::new(format);
        for line in &lines {
            analyzer.feed(line);
        }
        let outcome =
            analyzer.finish(&ProcessEnd { exit_code: Some(1), ..ProcessEnd::default() }, now());
        assert_eq!(outcome.output_lines, lines.len() as u64, "{format:?}");
        let _ = outcome.tokens.map(|t| t.total());
    }
}

#[test]
fn analyzer_can_move_to_a_reader_thread() {
    fn send<T: Send + 'static>() {}
    send::<Analyzer>();
    send::<Patterns>();
}

#[test]
fn an_empty_result_keeps_the_assistant_answer() {
    let lines = [
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Stopping here.\n---RALPH_STATUS---\nSTATUS: BLOCKED\n---END_RALPH_STATUS---"}]}}"#,
        r#"{"type":"result","subtype":"error_max_turns","is_error":false,"result":"","num_turns":30}"#,
    ];
    let mut analyzer = Analyzer::new(Format::Claude);
    lines.iter().for_each(|line| analyzer.feed(line.as_bytes()));
    let outcome =
        analyzer.finish(&ProcessEnd { exit_code: Some(0), ..ProcessEnd::default() }, now());
    assert!(outcome.final_text.starts_with("Stopping here."));
    assert_eq!(outcome.status_block.and_then(|b| b.status), Some(Status::Blocked));
    assert_eq!(
        outcome.error,
        Some(AgentError::Failed { exit_code: Some(0), message: "error_max_turns".into() })
    );
}

/// One run given as lines, fed as the supervisor does.
fn outcome_of(format: Format, lines: &[String], exit: i32) -> Outcome {
    let mut analyzer = Analyzer::new(format);
    lines.iter().for_each(|line| analyzer.feed(line.as_bytes()));
    analyzer.finish(&ProcessEnd { exit_code: Some(exit), ..ProcessEnd::default() }, now())
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

fn claude_tool_result(content: &str, is_error: bool) -> String {
    format!(
        r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_01","type":"tool_result","content":{content},"is_error":{is_error}}}]}},"parent_tool_use_id":null,"session_id":"s-1"}}"#
    )
}

const CARGO_FAILS: &str = "Exit code 101\n   Compiling demo v0.1.0 (/work/demo)\nerror[E0308]: mismatched types\n --> src/main.rs:2:18\n  |\n2 |     let x: i32 = \"a\";\n  |            ---   ^^^ expected `i32`, found `&str`\n\nerror: could not compile `demo` (bin \"demo\") due to 1 previous error";

/// The error lines of failed tool calls, in every format that prints a
/// failed call's output, and only of failed calls.
#[test]
fn failed_tool_calls_give_tool_errors() {
    let cargo_errors = [
        "error[E0308]: mismatched types",
        r#"error: could not compile `demo` (bin "demo") due to 1 previous error"#,
    ];
    let cargo_signature = r#"error[e#]: mismatched types | error: could not compile `demo` (bin "demo") due to # previous error"#;
    let claude_end = [
        r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"I could not fix the build."}]},"parent_tool_use_id":null,"session_id":"s-1"}"#.to_string(),
        r#"{"type":"result","subtype":"success","is_error":false,"result":"I could not fix the build.","session_id":"s-1"}"#.to_string(),
    ];
    let claude = |tool_result: String| {
        let mut lines = vec![tool_result];
        lines.extend(claude_end.iter().cloned());
        lines
    };
    let text_blocks = format!(
        r#"[{{"type":"text","text":{}}},{{"type":"text","text":"error: linking failed"}}]"#,
        json_string(CARGO_FAILS)
    );
    // 3 MB: far over what is read, under the 4 MiB line cap.
    let huge =
        format!("error: at the start\n{}error: at the end", "   Compiling x\n".repeat(200_000));
    let codex_command = |output: &str, exit: i32, status: &str| {
        format!(
            r#"{{"type":"item.completed","item":{{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo build'","aggregated_output":{},"exit_code":{exit},"status":"{status}"}}}}"#,
            json_string(output)
        )
    };
    let codex_end = [
        r#"{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"The build fails."}}"#.to_string(),
        r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5}}"#.to_string(),
    ];
    let gemini_result = |status: &str, extra: &str| {
        format!(
            r#"{{"type":"tool_result","timestamp":"t","tool_id":"run_shell_command-1","status":"{status}","output":{}{extra}}}"#,
            json_string(CARGO_FAILS)
        )
    };
    let gemini_end = [
        r#"{"type":"message","role":"assistant","content":"The build fails.","delta":true}"#
            .to_string(),
        r#"{"type":"result","status":"success","stats":{}}"#.to_string(),
    ];
    let opencode_tool = |state: &str| {
        format!(
            r#"{{"type":"tool_use","sessionID":"ses_1","part":{{"type":"tool","tool":"bash","callID":"call_1","state":{state}}}}}"#
        )
    };
    let opencode_end = [
        r#"{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"The build fails."}}"#.to_string(),
        r#"{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","reason":"stop"}}"#.to_string(),
    ];
    let with = |first: String, end: &[String]| {
        let mut lines = vec![first];
        lines.extend(end.iter().cloned());
        lines
    };
    let output = json_string(CARGO_FAILS);

    #[rustfmt::skip]
    let cases: Vec<(&str, Format, Vec<String>, Vec<&str>)> = vec![
        ("claude, string content", Format::Claude, claude(claude_tool_result(&output, true)), cargo_errors.to_vec()),
        ("claude, text blocks", Format::Claude, claude(claude_tool_result(&text_blocks, true)), [&cargo_errors[..], &["error: linking failed"]].concat()),
        ("claude, a call that worked", Format::Claude, claude(claude_tool_result(&output, false)), vec![]),
        ("claude, a huge result is read at its end", Format::Claude, claude(claude_tool_result(&json_string(&huge), true)), vec!["error: at the end"]),
        ("amp", Format::Amp, claude(claude_tool_result(&text_blocks, true)), [&cargo_errors[..], &["error: linking failed"]].concat()),
        ("cursor", Format::Cursor, claude(claude_tool_result(&output, true)), cargo_errors.to_vec()),
        ("codex, failed command", Format::Codex, with(codex_command(CARGO_FAILS, 101, "failed"), &codex_end), cargo_errors.to_vec()),
        ("codex, non-zero exit", Format::Codex, with(codex_command(CARGO_FAILS, 1, "completed"), &codex_end), cargo_errors.to_vec()),
        ("codex, a command that worked", Format::Codex, with(codex_command(CARGO_FAILS, 0, "completed"), &codex_end), vec![]),
        ("gemini, failed tool", Format::Gemini, with(gemini_result("error", r#","error":{"type":"TOOL_EXECUTION_ERROR","message":"Error: spawn bash ENOENT"}"#), &gemini_end), [&cargo_errors[..], &["Error: spawn bash ENOENT"]].concat()),
        ("gemini, a tool that worked", Format::Gemini, with(gemini_result("success", ""), &gemini_end), vec![]),
        ("opencode, non-zero exit", Format::Opencode, with(opencode_tool(&format!(r#"{{"status":"completed","input":{{"command":"cargo build"}},"output":{output},"metadata":{{"output":"ignored","exit":101}}}}"#)), &opencode_end), cargo_errors.to_vec()),
        ("opencode, output only in metadata", Format::Opencode, with(opencode_tool(&format!(r#"{{"status":"completed","input":{{"command":"cargo build"}},"metadata":{{"output":{output},"exit":101}}}}"#)), &opencode_end), cargo_errors.to_vec()),
        ("opencode, tool error", Format::Opencode, with(opencode_tool(r#"{"status":"error","input":{"command":"x"},"error":"Error: command not found: x"}"#), &opencode_end), vec!["Error: command not found: x"]),
        ("opencode, a command that worked", Format::Opencode, with(opencode_tool(&format!(r#"{{"status":"completed","input":{{"command":"cargo build"}},"output":{output},"metadata":{{"exit":0}}}}"#)), &opencode_end), vec![]),
    ];
    for (name, format, lines, want) in cases {
        let outcome = outcome_of(format, &lines, 0);
        assert_eq!(outcome.tool_errors, want, "{name}");
        assert_eq!(outcome.error, None, "{name}");
        let signature = if want.is_empty() {
            None
        } else if want == cargo_errors {
            Some(cargo_signature.to_string())
        } else {
            Some(want.iter().map(|line| signature::normalize(line)).collect::<Vec<_>>().join(" | "))
        };
        assert_eq!(outcome.error_signature, signature, "{name}");
        assert!(outcome.final_text.contains("build"), "{name}: {:?}", outcome.final_text);
        assert!(!outcome.final_text.contains("error"), "{name}: {:?}", outcome.final_text);
        let joined = lines.join("\n");
        let saved = analyze_reader(
            BufReader::with_capacity(7, joined.as_bytes()),
            format,
            Patterns::default(),
            &ProcessEnd { exit_code: Some(0), ..ProcessEnd::default() },
            now(),
        )
        .unwrap();
        assert_eq!(format!("{saved:?}"), format!("{outcome:?}"), "{name}: saved and live differ");
    }
}

/// A failed tool's output is not the agent's words: a marker or a limit
/// message in it claims and classifies nothing, and the run's own error
/// still names the failure.
#[test]
fn tool_errors_are_not_the_agents_words() {
    let quoted = "Error: You've hit your session limit · resets 11:29am (UTC)\n<promise>COMPLETE</promise>\nInvalid API key · Fix external API key";
    let tool = claude_tool_result(&json_string(quoted), true);
    let ok = r#"{"type":"result","subtype":"success","is_error":false,"result":"Working on it.","session_id":"s-1"}"#;
    let outcome = outcome_of(Format::Claude, &[tool.clone(), ok.to_string()], 0);
    assert_eq!(outcome.error, None);
    assert!(!outcome.claimed_complete);
    assert_eq!(outcome.final_text, "Working on it.");
    assert_eq!(
        outcome.tool_errors,
        ["Error: You've hit your session limit · resets 11:29am (UTC)"]
    );

    let failed = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s-1"}"#;
    let outcome = outcome_of(Format::Claude, &[tool, failed.to_string()], 1);
    assert_eq!(
        outcome.error,
        Some(AgentError::Failed { exit_code: Some(1), message: "error_during_execution".into() })
    );
    assert!(!outcome.claimed_complete);
    assert_eq!(outcome.error_signature.as_deref(), Some("error_during_execution"));
    assert_eq!(outcome.tool_errors.len(), 1);

    // A timeout has no signature, tool errors or not.
    let tool = claude_tool_result(&json_string(CARGO_FAILS), true);
    let mut analyzer = Analyzer::new(Format::Claude);
    analyzer.feed(tool.as_bytes());
    let end = ProcessEnd {
        exit_code: Some(143),
        stopped: Some(StopReason::Timeout),
        ..ProcessEnd::default()
    };
    let outcome = analyzer.finish(&end, now());
    assert_eq!(outcome.error_signature, None);
    assert_eq!(outcome.tool_errors.len(), 2);
}

/// The same compiler error in two runs that each exit 0 signs them alike.
#[test]
fn a_repeated_tool_error_repeats_the_signature() {
    let run = |line: u32| {
        let output = CARGO_FAILS.replace("src/main.rs:2:18", &format!("src/main.rs:{line}:5"));
        let lines = [
            claude_tool_result(&json_string(&output), true),
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Tried again.","session_id":"s-1"}"#.to_string(),
        ];
        outcome_of(Format::Claude, &lines, 0).error_signature
    };
    assert!(run(2).is_some());
    assert_eq!(run(2), run(40));
}

/// A terminal event decides a stopped run only when it came before ralph
/// decided to stop: claude answers SIGTERM with a success of its own.
#[test]
fn a_result_printed_after_the_stop_does_not_undo_it() {
    use StopReason::*;
    let working = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Running the build."}]},"session_id":"s-1"}"#;
    let success = r#"{"type":"result","subtype":"success","is_error":false,"result":"Done.","session_id":"s-1"}"#;
    let failure = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s-1"}"#;
    let stopped = |reason| Some(AgentError::Stopped { reason });
    // (name, lines before the stop, lines after it, why it stopped, error)
    #[rustfmt::skip]
    let cases: &[(&str, &[&str], &[&str], StopReason, Option<AgentError>)] = &[
        ("success, then a timeout (claude hung after its result)", &[working, success], &[], Timeout, None),
        ("success, then idle", &[working, success], &[], Idle, None),
        ("timeout, then claude's success", &[working], &[success], Timeout, stopped(Timeout)),
        ("idle, then claude's success", &[working], &[success], Idle, stopped(Idle)),
        ("timeout, then a failed result", &[working], &[failure], Timeout, stopped(Timeout)),
        ("a failed result, then a timeout", &[working, failure], &[], Timeout, Some(AgentError::Failed { exit_code: Some(0), message: "error_during_execution".into() })),
        ("success, then an interrupt", &[working, success], &[], Interrupted, stopped(Interrupted)),
        ("budget, then claude's success", &[working], &[success], Budget, stopped(Budget)),
    ];
    for (name, before, after, reason, want) in cases {
        let mut analyzer = Analyzer::new(Format::Claude);
        before.iter().for_each(|line| analyzer.feed(line.as_bytes()));
        analyzer.stopping();
        after.iter().for_each(|line| analyzer.feed(line.as_bytes()));
        let end =
            ProcessEnd { exit_code: Some(0), stopped: Some(*reason), ..ProcessEnd::default() };
        assert_eq!(analyzer.finish(&end, now()).error, *want, "{name}");
    }
}

/// A signal ralph did not send is named, with who sent it, instead of the
/// agent's last words; ralph's own stops stay stops.
#[test]
fn a_killed_agent_is_named_as_killed() {
    let kill = |signal: i32| format!("stopped by signal {signal}");
    let sig = |raw: i32| Signal::from_raw(raw).unwrap();
    #[rustfmt::skip]
    let cases: &[(&str, Format, &[&str], &str, Option<i32>, Option<StopReason>, Option<AgentError>)] = &[
        ("SIGKILL from outside, text", Format::Text, &["working on it"], "argv: my-agent --fast\n", Some(libc::SIGKILL), None,
            Some(AgentError::Killed { signal: sig(9), message: format!("{} (KILL), sent by someone other than ralph", kill(9)) })),
        ("SIGKILL from outside, claude without a result", Format::Claude, &[r#"{"type":"system","subtype":"init","session_id":"s"}"#], "", Some(libc::SIGKILL), None,
            Some(AgentError::Killed { signal: sig(9), message: format!("{} (KILL), sent by someone other than ralph", kill(9)) })),
        ("SIGTERM from outside", Format::Text, &[], "Terminated\n", Some(libc::SIGTERM), None,
            Some(AgentError::Killed { signal: sig(15), message: format!("{} (TERM), sent by someone other than ralph", kill(15)) })),
        ("a crash", Format::Text, &["error: boom"], "", Some(libc::SIGSEGV), None,
            Some(AgentError::Killed { signal: sig(11), message: format!("{} (SEGV): the agent crashed", kill(11)) })),
        ("a ulimit", Format::Text, &[], "", Some(libc::SIGXCPU), None,
            Some(AgentError::Killed { signal: sig(24), message: format!("{} (XCPU): it hit a resource limit (ulimit)", kill(24)) })),
        ("an unnamed signal", Format::Text, &[], "", Some(40), None,
            Some(AgentError::Killed { signal: sig(40), message: format!("{}, sent by someone other than ralph", kill(40)) })),
        ("ralph's timeout", Format::Text, &[], "argv: x\n", Some(libc::SIGKILL), Some(StopReason::Timeout),
            Some(AgentError::Stopped { reason: StopReason::Timeout })),
        ("ralph's idle timeout", Format::Claude, &[], "", Some(libc::SIGTERM), Some(StopReason::Idle),
            Some(AgentError::Stopped { reason: StopReason::Idle })),
        ("an exit code is not a kill", Format::Text, &[], "argv: x\n", None, None,
            Some(AgentError::Failed { exit_code: Some(1), message: "argv: x".into() })),
    ];
    for (name, format, lines, stderr, signal, stopped, want) in cases {
        let mut analyzer = Analyzer::new(*format);
        lines.iter().for_each(|l| analyzer.feed(l.as_bytes()));
        let end = ProcessEnd {
            exit_code: signal.is_none().then_some(1),
            signal: signal.and_then(Signal::from_raw),
            stopped: *stopped,
            stderr_tail: stderr.to_string(),
        };
        let outcome = analyzer.finish(&end, now());
        assert_eq!(outcome.error, *want, "{name}");
    }
    // A usage limit the CLI reported still wins: it decides when to retry.
    let mut analyzer = Analyzer::new(Format::Claude);
    analyzer.feed(br#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1764669600,"rateLimitType":"five_hour"}}"#);
    let end = ProcessEnd { signal: Some(Signal::Kill), ..ProcessEnd::default() };
    let outcome = analyzer.finish(&end, now());
    assert!(matches!(outcome.error, Some(AgentError::UsageLimit { .. })), "{:?}", outcome.error);
}
