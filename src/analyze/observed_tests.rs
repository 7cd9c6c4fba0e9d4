//! Outcomes of the output the real CLIs printed, as recorded in
//! `agent-clis-observed.md` (codex 0.171.0, gemini-cli 0.61.0, opencode
//! 1.18.33, aider 0.86.2, amp): each case is a run's stdout (ids and long
//! texts shortened), how the process ended, and what it must mean to ralph.

use chrono::{DateTime, Utc};

use super::outcome::Tokens;
use super::*;

fn now() -> DateTime<Utc> {
    "2026-12-02T09:00:00Z".parse().unwrap()
}

fn at(text: &str) -> Option<DateTime<Utc>> {
    Some(text.parse().unwrap())
}

struct End {
    exit: Option<i32>,
    stderr: &'static str,
    stopped: Option<StopReason>,
}

const fn exit(code: i32) -> End {
    End { exit: Some(code), stderr: "", stopped: None }
}

fn outcome(format: Format, stdout: &str, end: End) -> Outcome {
    let mut analyzer = Analyzer::new(format);
    for line in stdout.lines() {
        analyzer.feed(line.trim_start().as_bytes());
    }
    if end.stopped.is_some() {
        analyzer.stopping();
    }
    let process = ProcessEnd {
        exit_code: end.exit,
        signal: None,
        stopped: end.stopped,
        stderr_tail: end.stderr.to_string(),
    };
    analyzer.finish(&process, now())
}

fn auth(m: &str) -> Option<AgentError> {
    Some(AgentError::Auth { message: m.into() })
}
fn overloaded(m: &str) -> Option<AgentError> {
    Some(AgentError::Overloaded { message: m.into() })
}
fn usage(resets_at: Option<DateTime<Utc>>, m: &str) -> Option<AgentError> {
    Some(AgentError::UsageLimit { resets_at, message: m.into() })
}

fn check(cases: Vec<(&str, Format, String, End, Option<AgentError>)>) {
    let mut wrong = Vec::new();
    for (name, format, stdout, end, expected) in cases {
        let got = outcome(format, &stdout, end).error;
        if got != expected {
            wrong.push(format!("{name}:\n  got  {got:?}\n  want {expected:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const CODEX_START: &str = r#"{"type":"thread.started","thread_id":"01a237dd-8c5e-7d20-af0d-491889d5d646"}
{"type":"turn.started"}"#;

/// codex's last two lines for a fault: the `error` event and `turn.failed`.
fn codex_failed(retries: &[&str], message: &str) -> String {
    let m = serde_json::to_string(message).unwrap();
    let mut out = CODEX_START.to_string();
    for retry in retries {
        let r = serde_json::to_string(retry).unwrap();
        out.push_str(&format!("\n{{\"type\":\"error\",\"message\":{r}}}"));
    }
    out + &format!(
        "\n{{\"type\":\"error\",\"message\":{m}}}\n{{\"type\":\"turn.failed\",\"error\":{{\"message\":{m}}}}}"
    )
}

const CODEX_SUCCESS: &str = r#"{"type":"thread.started","thread_id":"01a237dd-8c5e-7d20-af0d-491889d5d646"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"I'll implement the highest-priority unfinished story."}}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc \"python3 impl.py\"","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc \"python3 impl.py\"","aggregated_output":"Implemented US-001 (Story number 1); 2 stories remain.\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Implemented US-001 and committed it. 2 stories remain.\n\n---RALPH_STATUS---\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---"}}
{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":40,"reasoning_output_tokens":0}}"#;

#[test]
fn codex_errors_are_notices_until_turn_failed() {
    let network = "Reconnecting... waiting for network (Connection failed: error sending request)";
    let retried = format!(
        "{CODEX_START}\n{{\"type\":\"error\",\"message\":\"Reconnecting... 1/5 (We’re currently experiencing high demand, which may cause temporary errors.)\"}}\n{}",
        CODEX_SUCCESS.lines().skip(2).collect::<Vec<_>>().join("\n")
    );
    let waiting = format!(
        "{CODEX_START}\n{}",
        format!("{{\"type\":\"error\",\"message\":\"{network}\"}}\n").repeat(5)
    );
    let key_401 = "unexpected status 401 Unauthorized: Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys., url: http://127.0.0.1:40000/v1/responses, request id: req_1";
    let retries_401: Vec<String> =
        (1..=5).map(|n| format!("Reconnecting... {n}/5 ({key_401})")).collect();
    let retries_401: Vec<&str> = retries_401.iter().map(String::as_str).collect();
    let limit = "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 6:51 PM.";
    use Format::Codex;
    check(vec![
        ("success", Codex, CODEX_SUCCESS.into(), exit(0), None),
        ("a retry, then success", Codex, retried, exit(0), None),
        ("401 after its retries", Codex, codex_failed(&retries_401, key_401), exit(1), auth(key_401)),
        (
            "429",
            Codex,
            codex_failed(&[], "exceeded retry limit, last status: 429 Too Many Requests, request id: req_fake_000001"),
            exit(1),
            Some(AgentError::RateLimited {
                message: "exceeded retry limit, last status: 429 Too Many Requests, request id: req_fake_000001".into(),
            }),
        ),
        (
            "500",
            Codex,
            codex_failed(&[], "We’re currently experiencing high demand, which may cause temporary errors."),
            exit(1),
            overloaded("We’re currently experiencing high demand, which may cause temporary errors."),
        ),
        (
            "503 server_is_overloaded",
            Codex,
            codex_failed(&[], "Selected model is at capacity. Please try a different model."),
            exit(1),
            overloaded("Selected model is at capacity. Please try a different model."),
        ),
        ("ChatGPT-plan usage limit", Codex, codex_failed(&[], limit), exit(1), usage(at("2026-12-02T18:51:00Z"), limit)),
        (
            "insufficient_quota",
            Codex,
            codex_failed(&[], "Quota exceeded. Check your plan and billing details."),
            exit(1),
            Some(AgentError::Billing { message: "Quota exceeded. Check your plan and billing details.".into() }),
        ),
        (
            "no key variable",
            Codex,
            codex_failed(&[], "Missing environment variable: `FAKE_OPENAI_KEY`."),
            exit(1),
            auth("Missing environment variable: `FAKE_OPENAI_KEY`."),
        ),
        (
            "no server: stopped at the idle timeout",
            Codex,
            waiting,
            End { exit: None, stderr: "Reading prompt from stdin...", stopped: Some(StopReason::Idle) },
            Some(AgentError::Unreachable { message: network.into() }),
        ),
    ]);
}

#[test]
fn codex_network_wait_is_no_sign_of_life_but_its_retries_are() {
    let wait = br#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#;
    assert!(Format::Codex.is_waiting_notice(wait));
    assert!(!Format::Claude.is_waiting_notice(wait));
    assert!(
        !Format::Codex
            .is_waiting_notice(br#"{"type":"error","message":"Reconnecting... 1/5 (x)"}"#)
    );
    assert!(!Format::Codex.is_waiting_notice(br#"{"type":"turn.started"}"#));
}

#[test]
fn codex_tokens_include_cache_writes() {
    let out = outcome(Format::Codex, CODEX_SUCCESS, exit(0));
    assert_eq!(out.tokens, Some(Tokens { input: 200, output: 40, cache_read: 0, cache_write: 0 }));
    let cached = r#"{"type":"turn.completed","usage":{"input_tokens":200,"cached_input_tokens":50,"cache_write_input_tokens":30,"output_tokens":40,"reasoning_output_tokens":0}}"#;
    let out = outcome(Format::Codex, cached, exit(0));
    assert_eq!(
        out.tokens,
        Some(Tokens { input: 120, output: 40, cache_read: 50, cache_write: 30 })
    );
    assert_eq!(out.tokens.unwrap().total(), 240);
}

/// gemini's stream-json for a fault: `init`, the echoed prompt, the error result.
fn gemini_failed(text: &str) -> String {
    let t = serde_json::to_string(text).unwrap();
    format!(
        r#"{{"type":"init","timestamp":"2026-12-02T08:59:59Z","session_id":"a67641fe-0000","model":"auto"}}
{{"type":"message","timestamp":"2026-12-02T08:59:59Z","role":"user","content":"Implement the next story\n"}}
{{"type":"result","timestamp":"2026-12-02T09:00:00Z","status":"error","error":{{"type":"unknown","message":{t}}},"stats":{{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0}}}}"#
    )
}

#[test]
fn gemini_errors_are_classified_by_the_exit_code() {
    let e401 = r#"[API Error: {"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.","status":"UNAUTHENTICATED"}}]"#;
    let e400 = r#"[API Error: {"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]"#;
    let daily = "[API Error: You have exhausted your daily quota on this model.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method";
    let minute = "[API Error: You exceeded your current quota, please check your plan and billing details. Please retry in 20s.\nSuggested retry after 20s.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method";
    let e500 = r#"[API Error: {"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}]"#;
    let e503 = "[API Error: The model is overloaded. Please try again later.]";
    use Format::Gemini;
    check(vec![
        (
            "401 (exit 145)",
            Gemini,
            gemini_failed(e401),
            exit(145),
            auth(&format!("unknown: {e401}")),
        ),
        (
            "400 bad key (exit 144)",
            Gemini,
            gemini_failed(e400),
            exit(144),
            auth(&format!("unknown: {e400}")),
        ),
        (
            "daily quota (exit 173): midnight Pacific",
            Gemini,
            gemini_failed(daily),
            exit(173),
            usage(
                at("2026-12-03T08:00:00Z"),
                "unknown: [API Error: You have exhausted your daily quota on this model.]",
            ),
        ),
        (
            "per-minute quota (exit 173): the 20 s it names",
            Gemini,
            gemini_failed(minute),
            exit(173),
            usage(
                at("2026-12-02T09:00:20Z"),
                "unknown: [API Error: You exceeded your current quota, please check your plan and billing details. Please retry in 20s.",
            ),
        ),
        (
            "500 (exit 244)",
            Gemini,
            gemini_failed(e500),
            exit(244),
            overloaded(&format!("unknown: {e500}")),
        ),
        (
            "503 (exit 247)",
            Gemini,
            gemini_failed(e503),
            exit(247),
            overloaded(&format!("unknown: {e503}")),
        ),
        (
            "no key (exit 41)",
            Gemini,
            String::new(),
            End {
                exit: Some(41),
                stderr: "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.",
                stopped: None,
            },
            auth(
                "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.",
            ),
        ),
    ]);
    let out = outcome(Gemini, &gemini_failed(e500), exit(244));
    assert_eq!(out.api_error_status, Some(500));
}

/// opencode's one `error` event for an API fault.
fn opencode_error(status: u16, message: &str, retryable: bool, body: &str) -> String {
    let data = serde_json::json!({
        "message": message,
        "statusCode": status,
        "isRetryable": retryable,
        "responseHeaders": {"content-type": "application/json"},
        "responseBody": body,
        "metadata": {"url": "http://127.0.0.1:40000/v1/chat/completions"},
    });
    serde_json::json!({
        "type": "error",
        "timestamp": 1796233677105u64,
        "sessionID": "ses_dc82",
        "error": {"name": "APIError", "data": data},
    })
    .to_string()
}

#[test]
fn opencode_errors_use_the_status_retryable_and_body() {
    let body = |kind: &str, message: &str, extra: &str| {
        format!(
            r#"{{"error":{{"message":"{message}","type":"{kind}","param":null,"code":"{kind}"{extra}}}}}"#
        )
    };
    let rate = "Rate limit reached for fake-model in organization org-fake on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.";
    let quota = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.";
    use Format::Opencode;
    check(vec![
        (
            "401",
            Opencode,
            opencode_error(
                401,
                "Incorrect API key provided: sk-test.",
                false,
                &body("invalid_api_key", "Incorrect API key provided: sk-test.", ""),
            ),
            exit(1),
            auth("APIError: Incorrect API key provided: sk-test."),
        ),
        (
            "429 rate limit: the 20 s it names",
            Opencode,
            opencode_error(429, rate, true, &body("rate_limit_exceeded", rate, "")),
            exit(1),
            usage(at("2026-12-02T09:00:20Z"), &format!("APIError: {rate}")),
        ),
        (
            "500",
            Opencode,
            opencode_error(
                500,
                "The server had an error while processing your request. Sorry about that!",
                true,
                "{}",
            ),
            exit(1),
            overloaded(
                "APIError: The server had an error while processing your request. Sorry about that!",
            ),
        ),
        (
            "429 usage_limit_reached: until resets_at",
            Opencode,
            opencode_error(
                429,
                "The usage limit has been reached",
                true,
                &body(
                    "usage_limit_reached",
                    "The usage limit has been reached",
                    r#","plan_type":"plus","resets_at":1796240000"#,
                ),
            ),
            exit(1),
            usage(at("2026-12-02T19:33:20Z"), "APIError: The usage limit has been reached"),
        ),
        (
            "429 insufficient_quota: out of credit",
            Opencode,
            opencode_error(429, quota, true, &body("insufficient_quota", quota, "")),
            exit(1),
            Some(AgentError::Billing { message: format!("APIError: {quota}") }),
        ),
        (
            "an unknown retryable error is backed off from",
            Opencode,
            opencode_error(418, "teapot", true, "teapot"),
            exit(1),
            overloaded("APIError: teapot"),
        ),
        (
            // Its log says when it cannot connect (see
            // `a_run_stopped_mid_retry_is_judged_by_what_the_cli_retried`):
            // silence on both streams is a server that never answered.
            "nothing printed before the idle timeout",
            Opencode,
            String::new(),
            End { exit: None, stderr: "", stopped: Some(StopReason::Idle) },
            Some(AgentError::Stopped { reason: StopReason::Idle }),
        ),
    ]);
}

const AIDER_HEAD: &str = "Aider v0.86.2\nModel: openai/fake-model with whole edit format\nGit repo: .git with 3 files\nRepo-map: using 4096 tokens, auto refresh\n";

/// aider's stdout when it gives up: each retry repeats the two lines.
fn aider_gave_up(first: &str, advice: &str) -> String {
    let mut out = AIDER_HEAD.to_string();
    for delay in ["0.2", "0.5", "1.0"] {
        out.push_str(&format!("{first}\n{advice}\nRetrying in {delay} seconds...\n"));
    }
    out + &format!("{first}\n{advice}\n")
}

#[test]
fn aider_errors_are_read_from_a_clean_exit() {
    let success = format!(
        "{AIDER_HEAD}\nTokens: 100 sent, 20 received. Cost: $0.00060 message, $0.00060 session.\nprd.json\nApplied edit to prd.json\n"
    );
    let recovered = format!(
        "{AIDER_HEAD}litellm.InternalServerError: InternalServerError: OpenAIException - The server had an error while processing your request. Sorry about that!\nThe API provider's servers are down or overloaded.\nRetrying in 0.2 seconds...\nTokens: 100 sent, 20 received.\nApplied edit to prd.json\n"
    );
    let auth_line = "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.";
    let no_key = "litellm.AuthenticationError: AuthenticationError: OpenAIException - The api_key client option must be set either by passing api_key to the client or by setting the OPENAI_API_KEY environment variable";
    let not_you = "The API provider is not able to authenticate you. Check your API key.";
    let limited = "The API provider has rate limited you. Try again later or check your quotas.";
    let down = "The API provider's servers are down or overloaded.";
    let e500 = "litellm.InternalServerError: InternalServerError: OpenAIException - The server had an error while processing your request. Sorry about that!";
    let e503 = "litellm.ServiceUnavailableError: ServiceUnavailableError: OpenAIException - The server is overloaded or not ready yet.";
    let refused =
        "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.";
    let usage_line = "litellm.RateLimitError: RateLimitError: OpenAIException - The usage limit has been reached";
    let rate_line = "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for fake-model on requests per min (RPM): Limit 3. Please try again in 20s.";
    use Format::Text;
    check(vec![
        ("success", Text, success, exit(0), None),
        ("an error it retried away", Text, recovered, exit(0), None),
        ("401, exit 0", Text, aider_gave_up(auth_line, not_you), exit(0), auth(auth_line)),
        (
            "no key, exit 0",
            Text,
            format!("{AIDER_HEAD}{no_key}\n{not_you}\n"),
            exit(0),
            auth(no_key),
        ),
        (
            "429 naming a retry time, exit 0",
            Text,
            aider_gave_up(rate_line, limited),
            exit(0),
            usage(at("2026-12-02T09:00:20Z"), rate_line),
        ),
        (
            "usage limit, exit 0",
            Text,
            aider_gave_up(usage_line, limited),
            exit(0),
            usage(None, usage_line),
        ),
        (
            // As aider really prints it with stdout not a terminal: wrapped at 80 columns.
            "usage limit wrapped, exit 0",
            Text,
            aider_gave_up(
                "litellm.RateLimitError: RateLimitError: OpenAIException - The usage limit has \nbeen reached",
                limited,
            ),
            exit(0),
            usage(None, usage_line),
        ),
        (
            "429 naming a retry time, wrapped twice",
            Text,
            aider_gave_up(
                "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for \nfake-model on requests per min (RPM): Limit 3. Please try again in \n20s.",
                limited,
            ),
            exit(0),
            usage(at("2026-12-02T09:00:20Z"), rate_line),
        ),
        ("500, exit 0", Text, aider_gave_up(e500, down), exit(0), overloaded(down)),
        (
            "no server, wrapped at 80 columns",
            Text,
            aider_gave_up(
                "litellm.InternalServerError: InternalServerError: OpenAIException - Connection \nerror.",
                down,
            ),
            exit(0),
            Some(AgentError::Unreachable { message: refused.into() }),
        ),
        ("503, exit 0", Text, aider_gave_up(e503, down), exit(0), overloaded(e503)),
        (
            "no server, exit 0",
            Text,
            aider_gave_up(refused, down),
            exit(0),
            Some(AgentError::Unreachable { message: refused.into() }),
        ),
    ]);
}

#[test]
fn amp_login_flow_is_an_auth_error() {
    let stdout = "No API key found. Starting login flow...\nhttps://ampcode.com/auth/cli-login?code=x\nLogin failed: That code looks incomplete. Copy the full code from the browser and try again.\n";
    check(vec![(
        "no key, headless",
        Format::Amp,
        stdout.into(),
        exit(1),
        auth("No API key found. Starting login flow..."),
    )]);
}

/// A line of one of the agent's streams, in the order they arrived.
enum Line<'a> {
    Out(&'a str),
    Err(&'a str),
}

/// What the CLIs print while they retry a request by themselves, cut off by
/// ralph's timeout: the error they were retrying decides, and a response
/// that arrived after it (or silence throughout) leaves a plain timeout.
#[test]
fn a_run_stopped_mid_retry_is_judged_by_what_the_cli_retried() {
    use Format::{Codex, Gemini, Opencode, Text};
    use Line::{Err, Out};
    let gemini_start = || {
        [
            Out(
                r#"{"type":"init","timestamp":"2026-12-02T09:00:00Z","session_id":"s","model":"auto"}"#,
            ),
            Out(r#"{"type":"message","role":"user","content":"Implement the next story"}"#),
            Err("YOLO mode is enabled. All tool calls will be automatically approved."),
        ]
    };
    let quota = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. Please retry in 20s.";
    let attempt = format!("Attempt 1 failed: {quota}");
    let no_server = "Attempt 2 failed. Retrying with backoff... Error: exception TypeError: fetch failed sending request";
    let overloaded_503 = "Attempt 1 failed with status 503. Retrying with backoff... ApiError: {\"error\":{\"code\":503,\"message\":\"The model is overloaded. Please try again later.\"}}";
    let internal = "Attempt 1 failed with status 500. Retrying with backoff... ApiError: {\"error\":{\"code\":500,\"message\":\"Internal error encountered.\",\"status\":\"INTERNAL\"}}";
    let gemini_answer =
        Out(r#"{"type":"message","role":"assistant","content":"Working on it.","delta":true}"#);
    let oc_log = |error: &str| {
        format!(
            r#"timestamp=2026-12-02T09:00:01.000Z level=ERROR run=fb67c20b message="stream error" providerID=fake modelID=fake-model session.id=ses_1 small=false agent=build mode=primary error.error="{error}""#
        )
    };
    let oc_rate = oc_log(
        "AI_APICallError: Rate limit reached for fake-model on requests per min (RPM): Limit 3. Please try again in 20s.",
    );
    let oc_usage = oc_log("AI_APICallError: The usage limit has been reached");
    let oc_refused = oc_log(
        "AI_APICallError: Cannot connect to API: Unable to connect. Is the computer able to access the url?",
    );
    let oc_server = oc_log(
        "AI_APICallError: The server had an error while processing your request. Sorry about that!",
    );
    let oc_step = Out(
        r#"{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}"#,
    );
    let aider_429 = "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for fake-model on requests per min (RPM): Limit 3. Please try again in 20s.";
    let aider_usage = "litellm.RateLimitError: RateLimitError: OpenAIException - The usage limit has been reached";
    let aider_refused =
        "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.";
    let codex_retry = r#"{"type":"error","message":"Reconnecting... 2/5 (We’re currently experiencing high demand, which may cause temporary errors.)"}"#;
    let in_20s = at("2026-12-02T09:00:20Z");
    let timeout = StopReason::Timeout;
    let cases: Vec<(&str, Format, Vec<Line>, Option<AgentError>)> = vec![
        (
            "gemini, a per-minute quota it waits 22 s for: waited out until it says",
            Gemini,
            gemini_start().into_iter().chain([Err(&attempt), Err("Suggested retry after 20s.. Retrying after 22966ms...")]).collect(),
            usage(in_20s, quota),
        ),
        (
            "gemini, no server: cannot reach the API",
            Gemini,
            gemini_start().into_iter().chain([Err(no_server)]).collect(),
            Some(AgentError::Unreachable { message: "exception TypeError: fetch failed sending request".into() }),
        ),
        (
            "gemini, an overloaded model: backed off from",
            Gemini,
            gemini_start().into_iter().chain([Err(overloaded_503)]).collect(),
            overloaded(r#"ApiError: {"error":{"code":503,"message":"The model is overloaded. Please try again later."}}"#),
        ),
        (
            "gemini, a 500 no text names: a server error, backed off from",
            Gemini,
            gemini_start().into_iter().chain([Err(internal)]).collect(),
            overloaded(r#"ApiError: {"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}"#),
        ),
        (
            "gemini, a retry that went through, then the work timed out",
            Gemini,
            gemini_start().into_iter().chain([Err(no_server), gemini_answer]).collect(),
            Some(AgentError::Stopped { reason: timeout }),
        ),
        (
            "gemini, silence: a timeout",
            Gemini,
            gemini_start().into_iter().collect(),
            Some(AgentError::Stopped { reason: timeout }),
        ),
        (
            "opencode, a 429 that names its wait",
            Opencode,
            vec![Err(&oc_rate), Err(&oc_rate)],
            usage(in_20s, "Rate limit reached for fake-model on requests per min (RPM): Limit 3. Please try again in 20s."),
        ),
        (
            "opencode, a usage limit with no reset: the configured wait",
            Opencode,
            vec![Err(&oc_usage)],
            usage(None, "The usage limit has been reached"),
        ),
        (
            "opencode, no server: cannot reach the API",
            Opencode,
            vec![Err(&oc_refused)],
            Some(AgentError::Unreachable { message: "Cannot connect to API: Unable to connect. Is the computer able to access the url?".into() }),
        ),
        (
            "opencode, a server error: backed off from",
            Opencode,
            vec![Err(&oc_server)],
            overloaded("The server had an error while processing your request. Sorry about that!"),
        ),
        (
            "opencode, a slow server whose answer had begun: a timeout",
            Opencode,
            vec![Err(&oc_server), oc_step],
            Some(AgentError::Stopped { reason: timeout }),
        ),
        (
            "aider, a 429 that names its wait",
            Text,
            vec![Out(AIDER_HEAD), Out(aider_429), Out("The API provider has rate limited you. Try again later or check your quotas."), Out("Retrying in 2.0 seconds...")],
            usage(in_20s, aider_429),
        ),
        (
            "aider, the usage-limit shape",
            Text,
            vec![Out(AIDER_HEAD), Out(aider_usage), Out("Retrying in 0.2 seconds...")],
            usage(None, aider_usage),
        ),
        (
            "aider, no server",
            Text,
            vec![Out(AIDER_HEAD), Out(aider_refused), Out("Retrying in 0.2 seconds...")],
            Some(AgentError::Unreachable { message: aider_refused.into() }),
        ),
        (
            "aider, a retry that went through, then the work timed out",
            Text,
            vec![Out(aider_429), Out("Retrying in 0.2 seconds..."), Out("Tokens: 100 sent, 20 received.")],
            Some(AgentError::Stopped { reason: timeout }),
        ),
        (
            "codex, a 500 it was retrying: backed off from",
            Codex,
            vec![Out(CODEX_START), Out(codex_retry)],
            overloaded("Reconnecting... 2/5 (We’re currently experiencing high demand, which may cause temporary errors.)"),
        ),
    ];
    let mut wrong = Vec::new();
    for (name, format, lines, expected) in cases {
        for stopped in [StopReason::Timeout, StopReason::Idle] {
            let mut analyzer = Analyzer::new(format);
            for line in &lines {
                match line {
                    Out(text) => text.lines().for_each(|l| analyzer.feed(l.as_bytes())),
                    Err(text) => analyzer.stderr_line(text.as_bytes()),
                }
            }
            analyzer.stopping();
            let end = ProcessEnd {
                exit_code: None,
                signal: Some(crate::process::Signal::Term),
                stopped: Some(stopped),
                stderr_tail: String::new(),
            };
            let got = analyzer.finish(&end, now()).error;
            let expected = match &expected {
                Some(AgentError::Stopped { .. }) => Some(AgentError::Stopped { reason: stopped }),
                other => other.clone(),
            };
            if got != expected {
                wrong.push(format!("{name} ({stopped:?}):\n  got  {got:?}\n  want {expected:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
