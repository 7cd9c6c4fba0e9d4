//! A scripted stand-in for the Anthropic Messages API on loopback, so the
//! tests can drive the real `claude` CLI offline.
//!
//! Point claude at it with [`ClaudeEnv`] (it sets `ANTHROPIC_BASE_URL` to
//! [`Stub::base_url`]). Every request is logged ([`Stub::requests`]); each
//! `POST /v1/messages` is answered by the test's [`Script`].
//!
//! # What the real CLI sends (observed with claude 2.1.332, `-p
//! --output-format stream-json --verbose --dangerously-skip-permissions`,
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`)
//!
//! - Only `POST /v1/messages?beta=true` with `"stream": true`: one request per
//!   model turn, on one keep-alive connection, bodies with `Content-Length`
//!   (about 50 kB: system prompt and tool definitions). A run with one Bash
//!   tool call makes exactly two requests. No `HEAD /` preflight, no
//!   `count_tokens`, no title or summary requests, no telemetry reached the
//!   stub; the stub still answers `HEAD` (200), `count_tokens` and unknown
//!   paths (404 `not_found_error`) in case another version sends them.
//! - API key mode sends `x-api-key`; `CLAUDE_CODE_OAUTH_TOKEN` sends
//!   `Authorization: Bearer …`. The model is `claude-opus-5-5` (API key) or
//!   `claude-sonnet-5-5` (OAuth); the stub echoes it back.
//! - The first user message holds two `<system-reminder>` text blocks (git
//!   status, commit attribution) and then the prompt read from stdin
//!   ([`Request::prompt`] skips the reminders). After a tool call the last
//!   user message holds a `tool_result` ([`Request::tool_result`]).
//!
//! # What the stub answers
//!
//! A streamed [`Reply::text`], [`Reply::bash`] or [`Reply::tool`] (`Read`,
//! `Write`, any other tool) is an SSE stream sent with chunked encoding:
//! `message_start`, `ping`, per block `content_block_start`,
//! `content_block_delta` (`text_delta`, or the tool's input JSON split over
//! several `input_json_delta`s), `content_block_stop`, then `message_delta`
//! (`stop_reason` `tool_use` or `end_turn`; usage is always 100 in, 20 out)
//! and `message_stop`. A request without `"stream": true` gets the same
//! message as one JSON object. Faults are HTTP errors with an Anthropic error
//! body ([`Reply::authentication_error`], [`Reply::rate_limit_error`],
//! [`Reply::overloaded`], [`Reply::usage_limit`]), or a connection that
//! never answers ([`Reply::hang`]) or stops mid-stream ([`Reply::stall`]).
//!
//! claude does not time out a model call that never answers, or a stream
//! that stops: with either it was still waiting, with no `result`, after
//! 150 s. A driver needs its own watchdog ([`Reply::hang`] and
//! [`Reply::stall`] test it).
//!
//! `std` networking only (serde_json for the bodies): a thread per
//! connection, all released when the [`Stub`] drops.

use std::env;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The prefix claude gives the context blocks it adds before the prompt.
const SYSTEM_REMINDER: &str = "<system-reminder>";

/// A running stand-in. Dropping it closes every connection, including hung
/// ones, and joins its threads.
pub struct Stub {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

struct Shared {
    script: Script,
    started: Instant,
    state: Mutex<State>,
    /// Signalled when a request is logged and when the stub stops.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    stopping: bool,
    connections: Vec<(TcpStream, JoinHandle<()>)>,
}

impl Stub {
    /// Listens on `127.0.0.1:0` and answers until dropped.
    pub fn start(script: Script) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stub to loopback");
        let addr = listener.local_addr().expect("stub address");
        let shared = Arc::new(Shared {
            script,
            started: Instant::now(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let accept = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || accept_loop(&listener, &shared))
        };
        Stub { addr, shared, accept: Some(accept) }
    }

    /// `http://127.0.0.1:<port>`, the value for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The environment that points claude at this stub (API key login,
    /// no retries) with its state in `config_dir` (`CLAUDE_CONFIG_DIR`);
    /// adjust it with the [`ClaudeEnv`] builder methods.
    pub fn claude_env(&self, config_dir: &Path) -> ClaudeEnv {
        ClaudeEnv::new(&self.base_url(), Some(config_dir))
    }

    /// [`Stub::claude_env`] with claude's state where a user's is: `~/.claude`
    /// and `~/.claude.json` under the command's `HOME`.
    pub fn claude_env_in_home(&self) -> ClaudeEnv {
        ClaudeEnv::new(&self.base_url(), None)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().requests.clone()
    }

    /// The `POST /v1/messages` requests so far: one per model turn.
    pub fn message_requests(&self) -> Vec<Request> {
        let state = self.shared.lock();
        state.requests.iter().filter(|r| r.is_messages()).cloned().collect()
    }

    /// Waits until at least `n` message requests have arrived; false on
    /// timeout.
    pub fn wait_for_message_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if state.requests.iter().filter(|r| r.is_messages()).count() >= n {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.shared.changed.wait_timeout(state, left).expect("stub state lock").0;
        }
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.changed.notify_all();
        // The accept loop is blocked in accept(); a throwaway connection
        // wakes it so it can see `stopping`.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let connections = std::mem::take(&mut self.shared.lock().connections);
        for (stream, handle) in connections {
            let _ = stream.shutdown(Shutdown::Both);
            let _ = handle.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking script is caught per request, so poisoning can only
        // come from a bug in the stub itself; the log is still worth reading.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        self.lock().stopping
    }

    /// Blocks until the stub is dropped: how a hung reply never answers.
    fn wait_until_stopped(&self) {
        let mut state = self.lock();
        while !state.stopping {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for (id, stream) in listener.incoming().enumerate() {
        if shared.stopping() {
            return;
        }
        let Ok(stream) = stream else { continue };
        let Ok(handle_stream) = stream.try_clone() else {
            continue;
        };
        let handle = {
            let shared = Arc::clone(shared);
            thread::spawn(move || {
                // An I/O error only means claude went away; nothing to report.
                let _ = serve(&shared, handle_stream, id);
            })
        };
        shared.lock().connections.push((stream, handle));
    }
}

/// One HTTP/1.1 connection: requests are answered in turn until the client
/// closes it, asks for `Connection: close`, or a reply hangs.
fn serve(shared: &Shared, stream: TcpStream, connection: usize) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let Some(head) = read_head(&mut reader)? else {
            return Ok(());
        };
        if head.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let body = read_body(&mut reader, &head)?;
        let request = Request {
            connection,
            at: shared.started.elapsed(),
            method: head.method,
            path: head.path,
            headers: head.headers,
            body,
        };
        let keep_alive = request.keep_alive(&head.version);
        // Numbered in arrival order across connections, for unique message
        // and tool-use ids.
        let number = {
            let mut state = shared.lock();
            state.requests.push(request.clone());
            state.requests.len()
        };
        shared.changed.notify_all();
        let reply = route(shared, &request);
        match reply.body {
            Body::Hang => {
                shared.wait_until_stopped();
                return Ok(());
            }
            Body::Stall => {
                write_stall(&mut writer, &request, &reply, number)?;
                shared.wait_until_stopped();
                return Ok(());
            }
            _ => write_reply(&mut writer, &request, &reply, keep_alive, number)?,
        }
        if !keep_alive {
            return Ok(());
        }
    }
}

/// Built-in answers for everything but the model calls, which go to the
/// script.
fn route(shared: &Shared, request: &Request) -> Reply {
    let path = request.path_without_query();
    match (request.method.as_str(), path) {
        ("HEAD", _) => Reply::json(200, String::new()),
        ("POST", "/v1/messages/count_tokens") => {
            Reply::json(200, json!({"input_tokens": 100}).to_string())
        }
        ("POST", "/v1/messages") => {
            match panic::catch_unwind(AssertUnwindSafe(|| (shared.script.0)(request))) {
                Ok(reply) => reply,
                Err(_) => Reply::error(500, "api_error", "the stub's script panicked"),
            }
        }
        (method, _) => Reply::error(
            404,
            "not_found_error",
            &format!("the stub has no route for {method} {}", request.path),
        ),
    }
}

/// One request as the stub received it.
#[derive(Clone, Debug)]
pub struct Request {
    /// Which TCP connection it came on, counting from 0.
    pub connection: usize,
    /// When it arrived, from the start of the stub.
    pub at: Duration,
    pub method: String,
    /// Path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The decoded body (chunked encoding removed).
    pub body: Vec<u8>,
}

impl Request {
    /// The first header with this name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// The body parsed as JSON, or `Value::Null` if it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Whether this is a model call (`POST /v1/messages`, any query).
    pub fn is_messages(&self) -> bool {
        self.method == "POST" && self.path_without_query() == "/v1/messages"
    }

    /// Whether the client asked for an SSE stream.
    pub fn is_streaming(&self) -> bool {
        self.json()["stream"] == Value::Bool(true)
    }

    /// The user's prompt: the text of the first user message, without the
    /// `<system-reminder>` blocks claude puts in front of it.
    pub fn prompt(&self) -> String {
        let json = self.json();
        let Some(first) = messages(&json).iter().find(|m| m["role"] == "user") else {
            return String::new();
        };
        texts(&first["content"])
            .into_iter()
            .filter(|t| !t.trim_start().starts_with(SYSTEM_REMINDER))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The tool result claude sends back in the last message, if any: its
    /// `is_error` flag and its text.
    pub fn tool_result(&self) -> Option<ToolResult> {
        let json = self.json();
        let last = messages(&json).last()?;
        if last["role"] != "user" {
            return None;
        }
        let block = last["content"].as_array()?.iter().find(|b| b["type"] == "tool_result")?;
        Some(ToolResult {
            is_error: block["is_error"] == Value::Bool(true),
            content: texts(&block["content"]).join("\n"),
        })
    }

    fn path_without_query(&self) -> &str {
        self.path.split('?').next().unwrap_or_default()
    }

    fn keep_alive(&self, version: &str) -> bool {
        match self.header("connection") {
            Some(v) if v.eq_ignore_ascii_case("close") => false,
            Some(v) if v.eq_ignore_ascii_case("keep-alive") => true,
            _ => version != "HTTP/1.0",
        }
    }
}

/// What a Bash tool call returned, as claude reports it to the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub is_error: bool,
    pub content: String,
}

fn messages(json: &Value) -> &[Value] {
    json["messages"].as_array().map_or(&[], Vec::as_slice)
}

/// The texts of message (or tool result) content, which is either a plain
/// string or an array of blocks.
fn texts(content: &Value) -> Vec<&str> {
    match content {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
        _ => Vec::new(),
    }
}

/// Decides the reply to each model call. Runs on the connection's thread;
/// a panic becomes a 500 reply.
pub struct Script(Box<dyn Fn(&Request) -> Reply + Send + Sync>);

impl Script {
    pub fn new(decide: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Script {
        Script(Box::new(decide))
    }

    /// The same reply to every model call: how faults are scripted.
    pub fn always(reply: Reply) -> Script {
        Script::new(move |_| reply.clone())
    }

    /// The shape of one story's iteration: the model runs one Bash command,
    /// and once claude sends back the command's result it ends the turn with
    /// a text. `turn` sees the request (read [`Request::prompt`] to find the
    /// story) and returns both.
    pub fn bash_then_text(turn: impl Fn(&Request) -> BashTurn + Send + Sync + 'static) -> Script {
        Script::new(move |request| {
            let turn = turn(request);
            if request.tool_result().is_some() {
                Reply::text(&turn.final_text)
            } else {
                Reply::bash(&turn.command, &turn.description)
            }
        })
    }
}

/// A Bash command for the model to run, and what it says once it has.
#[derive(Clone, Debug)]
pub struct BashTurn {
    pub command: String,
    pub description: String,
    pub final_text: String,
}

/// The stub's answer to one model call.
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
}

#[derive(Clone, Debug)]
enum Body {
    Message(Vec<Block>),
    Json(String),
    Hang,
    Stall,
}

/// A content block of a scripted assistant message.
#[derive(Clone, Debug)]
pub enum Block {
    Text(String),
    /// A call of claude's `Bash` tool.
    Bash {
        command: String,
        description: String,
    },
    /// A call of any other tool of claude's (`Read`, `Write`, `Edit`, …)
    /// with this input.
    Tool {
        name: String,
        input: Value,
    },
}

impl Reply {
    /// An assistant message with these blocks; `stop_reason` is `tool_use`
    /// if one of them is a tool call, else `end_turn`.
    pub fn message(blocks: Vec<Block>) -> Reply {
        Reply { status: 200, headers: Vec::new(), body: Body::Message(blocks) }
    }

    /// A final answer: one text block, `end_turn`.
    pub fn text(text: &str) -> Reply {
        Reply::message(vec![Block::Text(text.to_owned())])
    }

    /// One call of the Bash tool, `tool_use`.
    pub fn bash(command: &str, description: &str) -> Reply {
        Reply::message(vec![Block::Bash {
            command: command.to_owned(),
            description: description.to_owned(),
        }])
    }

    /// One call of the tool `name` (`Read`, `Write`, `Edit`, …) with this
    /// input, `tool_use`.
    pub fn tool(name: &str, input: Value) -> Reply {
        Reply::message(vec![Block::Tool { name: name.to_owned(), input }])
    }

    /// Any status with a raw JSON body.
    pub fn json(status: u16, body: String) -> Reply {
        Reply { status, headers: Vec::new(), body: Body::Json(body) }
    }

    /// An HTTP error with the API's error body,
    /// `{"type":"error","error":{"type":…,"message":…}}`.
    pub fn error(status: u16, error_type: &str, message: &str) -> Reply {
        let body = json!({
            "type": "error",
            "error": {"type": error_type, "message": message},
        });
        Reply::json(status, body.to_string())
    }

    /// 401, as for a wrong API key.
    pub fn authentication_error() -> Reply {
        Reply::error(401, "authentication_error", "invalid x-api-key")
    }

    /// 429, the API's per-account rate limit.
    pub fn rate_limit_error() -> Reply {
        Reply::error(
            429,
            "rate_limit_error",
            "This request would exceed your account's rate limit. Please try again later.",
        )
    }

    /// 529, the API is overloaded.
    pub fn overloaded() -> Reply {
        Reply::error(529, "overloaded_error", "Overloaded")
    }

    /// A subscriber's usage limit: a 429 with the `anthropic-ratelimit-unified-*`
    /// headers. claude reads them only with an OAuth login (see
    /// [`ClaudeEnv::oauth`]). `claim` is `five_hour`, `seven_day`,
    /// `seven_day_opus`, `seven_day_sonnet` or `overage`.
    pub fn usage_limit(resets_at_epoch_s: u64, claim: &str) -> Reply {
        Reply::error(429, "rate_limit_error", "Rate limited")
            .header("anthropic-ratelimit-unified-status", "rejected")
            .header("anthropic-ratelimit-unified-reset", &resets_at_epoch_s.to_string())
            .header("anthropic-ratelimit-unified-representative-claim", claim)
    }

    /// Read the request and never answer; the connection stays open until
    /// the stub drops.
    pub fn hang() -> Reply {
        Reply { status: 200, headers: Vec::new(), body: Body::Hang }
    }

    /// Start a 200 SSE stream (`message_start`, `ping` and the first text
    /// delta), then send nothing more until the stub drops.
    pub fn stall() -> Reply {
        Reply { status: 200, headers: Vec::new(), body: Body::Stall }
    }

    /// Adds a response header, e.g. `retry-after` or `x-should-retry`.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// How claude logs in; only [`Auth::OAuth`] makes it read the
/// usage-limit headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `ANTHROPIC_API_KEY`, sent as `x-api-key`.
    ApiKey,
    /// `CLAUDE_CODE_OAUTH_TOKEN`, sent as `Authorization: Bearer`: a
    /// subscriber login.
    OAuth,
}

/// The environment claude needs to talk to a stub: what to set and what to
/// remove so nothing points it elsewhere.
#[derive(Clone, Debug)]
pub struct ClaudeEnv {
    base_url: String,
    /// `CLAUDE_CONFIG_DIR`; `None`: claude's default, under `HOME`.
    config_dir: Option<PathBuf>,
    auth: Auth,
    max_retries: Option<u32>,
}

impl ClaudeEnv {
    /// Variables that would send claude elsewhere, change its login or its
    /// model, or mark it as nested in another claude session.
    pub const UNSET: &[&str] = &[
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_CUSTOM_HEADERS",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_BEDROCK_BASE_URL",
        "ANTHROPIC_VERTEX_BASE_URL",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_SSE_PORT",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_USE_FOUNDRY",
        "CLAUDE_CONFIG_DIR",
        "API_TIMEOUT_MS",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "NODE_OPTIONS",
        "NODE_EXTRA_CA_CERTS",
    ];

    /// API key login and `CLAUDE_CODE_MAX_RETRIES=0`, so a fault costs one
    /// request instead of claude's ~3 minutes of backoff.
    pub fn new(base_url: &str, config_dir: Option<&Path>) -> ClaudeEnv {
        ClaudeEnv {
            base_url: base_url.to_owned(),
            config_dir: config_dir.map(Path::to_path_buf),
            auth: Auth::ApiKey,
            max_retries: Some(0),
        }
    }

    #[must_use]
    pub fn auth(mut self, auth: Auth) -> ClaudeEnv {
        self.auth = auth;
        self
    }

    /// Log in as a subscriber (`CLAUDE_CODE_OAUTH_TOKEN`).
    #[must_use]
    pub fn oauth(self) -> ClaudeEnv {
        self.auth(Auth::OAuth)
    }

    /// `None` leaves `CLAUDE_CODE_MAX_RETRIES` unset: claude's default of
    /// 10 retries.
    #[must_use]
    pub fn max_retries(mut self, retries: Option<u32>) -> ClaudeEnv {
        self.max_retries = retries;
        self
    }

    /// The variables to set, in a stable order.
    pub fn vars(&self) -> Vec<(&'static str, OsString)> {
        let mut vars = vec![
            ("ANTHROPIC_BASE_URL", OsString::from(&self.base_url)),
            // As root claude refuses --dangerously-skip-permissions without it.
            ("IS_SANDBOX", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
        ];
        if let Some(dir) = &self.config_dir {
            vars.push(("CLAUDE_CONFIG_DIR", dir.clone().into_os_string()));
        }
        vars.push(match self.auth {
            Auth::ApiKey => ("ANTHROPIC_API_KEY", "sk-ant-stub-key".into()),
            Auth::OAuth => ("CLAUDE_CODE_OAUTH_TOKEN", "stub-oauth-token".into()),
        });
        if let Some(retries) = self.max_retries {
            vars.push(("CLAUDE_CODE_MAX_RETRIES", retries.to_string().into()));
        }
        vars
    }

    /// Removes [`ClaudeEnv::UNSET`] from `command`'s environment and sets
    /// [`ClaudeEnv::vars`]. Works for claude itself and for a driver (ralph)
    /// whose children inherit its environment.
    pub fn apply<'c>(&self, command: &'c mut Command) -> &'c mut Command {
        for name in Self::UNSET {
            command.env_remove(name);
        }
        command.envs(self.vars())
    }
}

/// Where the real claude CLI is: `RALPH_CLAUDE_BIN`, else the cache that
/// `.ci/install-claude.sh` installs into, else `claude` on `PATH`.
pub fn claude_bin() -> Option<PathBuf> {
    if let Some(bin) = env::var_os("RALPH_CLAUDE_BIN") {
        // An explicit path that is wrong should fail loudly, not skip.
        return Some(bin.into());
    }
    let cache = env::var_os("RALPH_TEST_CACHE")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| Path::new(&home).join(".cache/ralph-test")));
    let cached = cache.map(|c| c.join("claude/node_modules/.bin/claude"));
    if let Some(cached) = cached.filter(|c| c.is_file()) {
        return Some(cached);
    }
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join("claude"))
        .find(|candidate| candidate.is_file())
}

/// [`claude_bin`], or `None` after telling the person running the tests
/// that the test did not really run. With `RALPH_REQUIRE_CLAUDE=1` (for CI)
/// a missing CLI panics instead.
pub fn claude_bin_or_skip(test: &str) -> Option<PathBuf> {
    let bin = claude_bin();
    if bin.is_none() {
        assert!(
            env::var_os("RALPH_REQUIRE_CLAUDE").is_none_or(|v| v.is_empty() || v == "0"),
            "{test}: real claude CLI not installed and RALPH_REQUIRE_CLAUDE is set \
             (run .ci/install-claude.sh)"
        );
        // Straight to the stderr handle: the test harness captures
        // eprintln! of passing tests, and a skip must never look like a pass.
        let _ = writeln!(
            io::stderr(),
            "SKIPPED: real claude CLI not installed (run .ci/install-claude.sh): {test}"
        );
    }
    bin
}

struct Head {
    method: String,
    path: String,
    version: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }
}

fn find_header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Reads a request line and headers; `None` when the client closed the
/// connection between requests.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut line = String::new();
    // Tolerate stray empty lines between requests (RFC 9112 §2.2).
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid("bad request line"));
    };
    let mut head = Head {
        method: method.to_owned(),
        path: path.to_owned(),
        version: version.to_owned(),
        headers: Vec::new(),
    };
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(invalid("connection closed inside the headers"));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return Ok(Some(head));
        }
        let (name, value) = line.split_once(':').ok_or_else(|| invalid("bad header"))?;
        head.headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
}

fn read_body(reader: &mut impl BufRead, head: &Head) -> io::Result<Vec<u8>> {
    let chunked = head
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        return read_chunked(reader);
    }
    let length = match head.header("content-length") {
        Some(v) => v.parse().map_err(|_| invalid("bad content-length"))?,
        None => 0,
    };
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(body)
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| invalid("bad chunk size"))?;
        if size == 0 {
            // Skip any trailers up to the closing empty line.
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        line.clear();
        reader.read_line(&mut line)?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn write_head(
    writer: &mut impl Write,
    reply: &Reply,
    content_type: &str,
    framing: &str,
    keep_alive: bool,
    request_number: usize,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {content_type}\r\n{framing}\r\n\
         request-id: req_stub_{request_number:04}\r\nconnection: {}\r\n",
        reply.status,
        reason(reply.status),
        if keep_alive { "keep-alive" } else { "close" },
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    writer.write_all(head.as_bytes())
}

fn write_reply(
    writer: &mut impl Write,
    request: &Request,
    reply: &Reply,
    keep_alive: bool,
    request_number: usize,
) -> io::Result<()> {
    let body = match &reply.body {
        Body::Message(blocks) if request.is_streaming() => {
            write_head(
                writer,
                reply,
                "text/event-stream; charset=utf-8",
                "transfer-encoding: chunked",
                keep_alive,
                request_number,
            )?;
            for event in message_events(request, blocks, request_number) {
                write_chunk(writer, event.as_bytes())?;
            }
            writer.write_all(b"0\r\n\r\n")?;
            return writer.flush();
        }
        Body::Message(blocks) => message_json(request, blocks, request_number).to_string(),
        Body::Json(body) => body.clone(),
        Body::Hang | Body::Stall => unreachable!("handled by the connection loop"),
    };
    let framing = format!("content-length: {}", body.len());
    write_head(writer, reply, "application/json", &framing, keep_alive, request_number)?;
    if request.method != "HEAD" {
        writer.write_all(body.as_bytes())?;
    }
    writer.flush()
}

fn write_stall(
    writer: &mut impl Write,
    request: &Request,
    reply: &Reply,
    request_number: usize,
) -> io::Result<()> {
    write_head(
        writer,
        reply,
        "text/event-stream; charset=utf-8",
        "transfer-encoding: chunked",
        true,
        request_number,
    )?;
    let text = [Block::Text("Working on it".to_owned())];
    let events = message_events(request, &text, request_number);
    // message_start, ping, content_block_start, the first text_delta.
    for event in events.iter().take(4) {
        write_chunk(writer, event.as_bytes())?;
    }
    writer.flush()
}

fn write_chunk(writer: &mut impl Write, data: &[u8]) -> io::Result<()> {
    write!(writer, "{:x}\r\n", data.len())?;
    writer.write_all(data)?;
    writer.write_all(b"\r\n")?;
    writer.flush()
}

fn sse(data: &Value) -> String {
    let event = data["type"].as_str().unwrap_or("message");
    format!("event: {event}\ndata: {data}\n\n")
}

fn tool_use_id(request_number: usize, index: usize) -> String {
    format!("toolu_stub_{request_number:04}_{index}")
}

fn bash_input(command: &str, description: &str) -> Value {
    json!({"command": command, "description": description})
}

fn stop_reason(blocks: &[Block]) -> &'static str {
    let tool = |b: &Block| matches!(b, Block::Bash { .. } | Block::Tool { .. });
    if blocks.iter().any(tool) { "tool_use" } else { "end_turn" }
}

fn model(request: &Request) -> Value {
    match request.json()["model"].clone() {
        Value::Null => json!("claude-stub"),
        model => model,
    }
}

/// Splits `s` into pieces of about `size` bytes on char boundaries, as the
/// API streams text and tool input in several deltas.
fn pieces(s: &str, size: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        pieces.push(piece);
        rest = tail;
    }
    if pieces.is_empty() {
        pieces.push("");
    }
    pieces
}

fn message_events(request: &Request, blocks: &[Block], request_number: usize) -> Vec<String> {
    let mut events = vec![
        sse(&json!({
            "type": "message_start",
            "message": {
                "id": format!("msg_stub_{request_number:04}"),
                "type": "message",
                "role": "assistant",
                "model": model(request),
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 1,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            },
        })),
        sse(&json!({"type": "ping"})),
    ];
    for (index, block) in blocks.iter().enumerate() {
        let (start, deltas) = match block {
            Block::Text(text) => (
                json!({"type": "text", "text": ""}),
                pieces(text, 40)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect::<Vec<_>>(),
            ),
            Block::Bash { command, description } => (
                json!({"type": "tool_use", "id": tool_use_id(request_number, index),
                       "name": "Bash", "input": {}}),
                pieces(&bash_input(command, description).to_string(), 24)
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
            Block::Tool { name, input } => (
                json!({"type": "tool_use", "id": tool_use_id(request_number, index),
                       "name": name, "input": {}}),
                pieces(&input.to_string(), 24)
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
        };
        events.push(sse(&json!({
            "type": "content_block_start", "index": index, "content_block": start,
        })));
        for delta in deltas {
            events.push(sse(&json!({
                "type": "content_block_delta", "index": index, "delta": delta,
            })));
        }
        events.push(sse(&json!({"type": "content_block_stop", "index": index})));
    }
    events.push(sse(&json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(blocks), "stop_sequence": null},
        "usage": {"input_tokens": 100, "output_tokens": 20},
    })));
    events.push(sse(&json!({"type": "message_stop"})));
    events
}

fn message_json(request: &Request, blocks: &[Block], request_number: usize) -> Value {
    let content: Vec<Value> = blocks
        .iter()
        .enumerate()
        .map(|(index, block)| match block {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Bash { command, description } => json!({
                "type": "tool_use", "id": tool_use_id(request_number, index),
                "name": "Bash", "input": bash_input(command, description),
            }),
            Block::Tool { name, input } => json!({
                "type": "tool_use", "id": tool_use_id(request_number, index),
                "name": name, "input": input,
            }),
        })
        .collect();
    json!({
        "id": format!("msg_stub_{request_number:04}"),
        "type": "message",
        "role": "assistant",
        "model": model(request),
        "content": content,
        "stop_reason": stop_reason(blocks),
        "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    })
}

/// The stub on its own, with a raw HTTP client: these run even where the
/// real CLI is not installed.
#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal HTTP/1.1 response reader: status, headers, de-chunked body.
    fn read_response(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>, String) {
        let head = read_head_of_response(reader);
        let status = head.0;
        let chunked = find_header(&head.1, "transfer-encoding").is_some();
        let body = if chunked {
            read_chunked(reader).unwrap()
        } else {
            let length = find_header(&head.1, "content-length").map_or(0, |v| v.parse().unwrap());
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            body
        };
        (status, head.1, String::from_utf8(body).unwrap())
    }

    fn read_head_of_response(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                return (status, headers);
            }
            let (n, v) = line.split_once(':').unwrap();
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
    }

    /// `data:` payloads of an SSE body.
    fn sse_data(body: &str) -> Vec<Value> {
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    fn post(stream: &mut TcpStream, body: &Value, chunked: bool) {
        let body = body.to_string();
        let framing = if chunked {
            "transfer-encoding: chunked".to_owned()
        } else {
            format!("content-length: {}", body.len())
        };
        write!(stream, "POST /v1/messages?beta=true HTTP/1.1\r\nhost: x\r\n{framing}\r\n\r\n")
            .unwrap();
        if chunked {
            let (a, b) = body.split_at(body.len() / 2);
            write!(stream, "{:x};ext=1\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len())
                .unwrap();
        } else {
            stream.write_all(body.as_bytes()).unwrap();
        }
    }

    fn story_script() -> Script {
        Script::bash_then_text(|request| {
            let story = if request.prompt().contains("US-002") { "US-002" } else { "US-001" };
            BashTurn {
                command: format!("touch {story}"),
                description: format!("Implement {story}"),
                final_text: format!("Done with {story}"),
            }
        })
    }

    fn first_turn(prompt: &str) -> Value {
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nUS-002 is mentioned here\n</system-reminder>"},
            {"type": "text", "text": prompt},
        ]}]})
    }

    #[test]
    fn stub_streams_a_bash_call_then_the_final_text_on_one_keep_alive_connection() {
        let stub = Stub::start(story_script());
        let mut stream = TcpStream::connect(stub.addr).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());

        post(&mut stream, &first_turn("Implement US-001"), true);
        let (status, headers, body) = read_response(&mut reader);
        assert_eq!(status, 200);
        assert_eq!(find_header(&headers, "content-type"), Some("text/event-stream; charset=utf-8"));
        let events = sse_data(&body);
        let types: Vec<_> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types.first(), Some(&"message_start"));
        assert_eq!(types.last(), Some(&"message_stop"));
        let input: String =
            events.iter().filter_map(|e| e["delta"]["partial_json"].as_str()).collect();
        assert!(events.iter().filter(|e| e["delta"]["partial_json"].is_string()).count() > 1);
        assert_eq!(
            serde_json::from_str::<Value>(&input).unwrap(),
            json!({"command": "touch US-001", "description": "Implement US-001"})
        );
        let stop = events.iter().find(|e| e["type"] == "message_delta").unwrap();
        assert_eq!(stop["delta"]["stop_reason"], "tool_use");

        let mut second = first_turn("Implement US-001");
        second["messages"].as_array_mut().unwrap().extend([
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                    "content": "ok", "is_error": false}]}),
        ]);
        post(&mut stream, &second, false);
        let (status, _, body) = read_response(&mut reader);
        assert_eq!(status, 200);
        let text: String =
            sse_data(&body).iter().filter_map(|e| e["delta"]["text"].as_str()).collect();
        assert_eq!(text, "Done with US-001");

        let requests = stub.message_requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].connection, requests[1].connection);
        assert!(requests[0].at <= requests[1].at);
        assert_eq!(requests[0].prompt(), "Implement US-001");
        assert_eq!(requests[0].tool_result(), None);
        assert_eq!(
            requests[1].tool_result(),
            Some(ToolResult { is_error: false, content: "ok".to_owned() })
        );
    }

    #[test]
    fn stub_streams_any_tool_call_with_its_input() {
        let input = json!({"file_path": "/w/shared.txt", "content": "a\nb\n"});
        let stub = Stub::start(Script::always(Reply::tool("Write", input.clone())));
        let mut stream = TcpStream::connect(stub.addr).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        post(&mut stream, &first_turn("Merge"), false);
        let (status, _, body) = read_response(&mut reader);
        assert_eq!(status, 200);
        let events = sse_data(&body);
        let start = events.iter().find(|e| e["type"] == "content_block_start").unwrap();
        assert_eq!(start["content_block"]["type"], "tool_use");
        assert_eq!(start["content_block"]["name"], "Write");
        let streamed: String =
            events.iter().filter_map(|e| e["delta"]["partial_json"].as_str()).collect();
        assert_eq!(serde_json::from_str::<Value>(&streamed).unwrap(), input);
        let stop = events.iter().find(|e| e["type"] == "message_delta").unwrap();
        assert_eq!(stop["delta"]["stop_reason"], "tool_use");

        post(&mut stream, &json!({"model": "m", "messages": []}), false);
        let (_, _, body) = read_response(&mut reader);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["content"][0]["name"], "Write");
        assert_eq!(body["content"][0]["input"], input);
        assert_eq!(body["stop_reason"], "tool_use");
    }

    #[test]
    fn stub_answers_faults_with_status_headers_and_error_body() {
        let stub = Stub::start(Script::always(Reply::usage_limit(1_800_000_000, "five_hour")));
        let mut stream = TcpStream::connect(stub.addr).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        post(&mut stream, &first_turn("hi"), false);
        let (status, headers, body) = read_response(&mut reader);
        assert_eq!(status, 429);
        assert_eq!(find_header(&headers, "anthropic-ratelimit-unified-reset"), Some("1800000000"));
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["type"], "rate_limit_error");

        write!(stream, "HEAD / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let (status, _) = read_head_of_response(&mut reader);
        assert_eq!(status, 200);
        write!(stream, "GET /nowhere HTTP/1.1\r\nconnection: close\r\n\r\n").unwrap();
        let (status, headers, _) = read_response(&mut reader);
        assert_eq!(status, 404);
        assert_eq!(find_header(&headers, "connection"), Some("close"));
        assert_eq!(stub.requests().len(), 3);
    }

    #[test]
    fn stub_non_streaming_request_gets_one_json_message() {
        let stub = Stub::start(Script::always(Reply::text("a title")));
        let mut stream = TcpStream::connect(stub.addr).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        post(&mut stream, &json!({"model": "m", "messages": []}), false);
        let (status, _, body) = read_response(&mut reader);
        assert_eq!(status, 200);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["content"][0]["text"], "a title");
        assert_eq!(body["stop_reason"], "end_turn");
    }

    #[test]
    fn stub_drop_releases_hung_and_stalled_connections() {
        for reply in [Reply::hang(), Reply::stall()] {
            let stub = Stub::start(Script::always(reply));
            let mut stream = TcpStream::connect(stub.addr).unwrap();
            post(&mut stream, &first_turn("hi"), false);
            assert!(stub.wait_for_message_requests(1, Duration::from_secs(5)));
            let started = Instant::now();
            drop(stub);
            assert!(started.elapsed() < Duration::from_secs(5));
            let mut rest = String::new();
            // The connection is closed, not left open: read reaches EOF.
            stream.read_to_string(&mut rest).unwrap();
        }
    }

    #[test]
    fn stub_script_panic_becomes_a_500() {
        let stub = Stub::start(Script::new(|_| panic!("scripted panic")));
        let mut stream = TcpStream::connect(stub.addr).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        post(&mut stream, &first_turn("hi"), false);
        let (status, _, _) = read_response(&mut reader);
        assert_eq!(status, 500);
    }
}
