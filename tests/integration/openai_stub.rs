//! A scripted stand-in for the model APIs of the other agent CLIs, on
//! loopback.
//!
//! - OpenAI Responses, for the real codex CLI (`codex exec --json`, 0.171).
//!   codex is pointed at it by a custom provider in `~/.codex/config.toml`
//!   ([`codex_config`]) and sends only `POST /v1/responses` with `stream:
//!   true`; a [`Reply::Text`] or [`Reply::Shell`] (codex's `exec_command`,
//!   the shell tool it offers model `gpt-5.5`) is streamed as
//!   `response.created`, `response.output_item.done`, `response.completed`.
//! - Gemini v1beta, for the real gemini CLI (0.61): with a named model it
//!   sends `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, and a
//!   reply is one SSE `data:` chunk of `candidates` (a text part or a
//!   `run_shell_command` function call). [`gemini_settings`] points it here.
//!
//! - OpenAI Chat Completions, for opencode (1.18.33, `@ai-sdk/openai-compatible`
//!   provider, [`opencode_config`]): `POST /v1/chat/completions` with `stream:
//!   true`, answered with `chat.completion.chunk`s (content or a `bash` tool
//!   call), a usage chunk and `[DONE]`. opencode's title request gets a text.
//!
//! - The same Chat Completions without streaming, for aider (0.86.2,
//!   `--no-stream`, litellm's `openai/` provider): a [`Reply::Text`] is one
//!   `chat.completion`.
//!
//! A [`Reply::Error`] is an HTTP error with the API's JSON error body. Every
//! request (path and body) is kept; the script sees which API asked.
//!
//! `std` networking only: one thread per connection, `Connection: close`
//! after every answer, everything released when the [`Stub`] drops.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use serde_json::{Value, json};

/// What the model answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A final assistant message.
    Text(String),
    /// One shell command through codex's `exec_command` tool.
    Shell(String),
    /// An HTTP error with this status and JSON body.
    Error(u16, Value),
    /// No answer at all: the request is held until the client goes away
    /// (a server that accepted it and is slow beyond any timeout).
    Hang,
}

/// A request: its path (with the query) and JSON body.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub body: Value,
}

impl Request {
    fn is_gemini(&self) -> bool {
        self.path.starts_with("/v1beta/")
    }

    fn is_chat(&self) -> bool {
        self.path.starts_with("/v1/chat/completions")
    }

    /// opencode's session-title request (no tools, a title-generator prompt).
    pub fn is_title(&self) -> bool {
        self.is_chat() && self.body.to_string().contains("title generator")
    }
}

/// The script: the request's number and the request, to the reply.
type Script = dyn Fn(usize, &Request) -> Reply + Send + Sync;

pub struct Stub {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    stopping: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Stub {
    pub fn start(script: impl Fn(usize, &Request) -> Reply + Send + Sync + 'static) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stub");
        let addr = listener.local_addr().expect("stub address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let accept = {
            let (requests, stopping) = (requests.clone(), stopping.clone());
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let (requests, script) = (requests.clone(), script.clone());
                    thread::spawn(move || {
                        let _ = serve(stream, &requests, &*script);
                    });
                }
            })
        };
        Stub { addr, requests, stopping, accept: Some(accept) }
    }

    /// `http://127.0.0.1:<port>/v1`, codex's provider `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:<port>`, gemini's `GOOGLE_GEMINI_BASE_URL`.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// `<codex_home>/config.toml` (`~/.codex`, or `CODEX_HOME`) for this stub:
/// model `gpt-5.5` on a provider whose key is read from `FAKE_OPENAI_KEY`,
/// and none of codex's own retries (one request per fault).
pub fn codex_config(codex_home: &Path, base_url: &str) {
    std::fs::create_dir_all(codex_home).expect("codex's folder");
    let config = format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\n\
         base_url = \"{base_url}\"\nenv_key = \"FAKE_OPENAI_KEY\"\nwire_api = \"responses\"\n\
         request_max_retries = 0\nstream_max_retries = 0\n"
    );
    std::fs::write(codex_home.join("config.toml"), config).expect("write codex config");
}

/// An OpenAI error body.
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": kind}})
}

/// An opencode config file for this stub: provider `fake` (Chat
/// Completions), model `fake/fake-model`, key `sk-test`.
pub fn opencode_config(path: &Path, base_url: &str) {
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "fake",
            "options": {"baseURL": base_url, "apiKey": "sk-test"},
            "models": {"fake-model": {"name": "fake-model"}}}},
        "model": "fake/fake-model",
        "autoupdate": false,
        "share": "disabled",
    });
    std::fs::write(path, config.to_string()).expect("write opencode config");
}

/// `<gemini_home>/.gemini/settings.json` (the home, or `GEMINI_CLI_HOME`):
/// API-key auth (which keeps `GOOGLE_GEMINI_BASE_URL`) and one try per
/// request.
pub fn gemini_settings(gemini_home: &Path) {
    let dir = gemini_home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("gemini's folder");
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"maxAttempts": 1},
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("write gemini settings");
}

/// A Google error body: `{"error": {"code", "message", "status", "details"}}`.
pub fn google_error(code: u16, status: &str, message: &str, details: Value) -> Value {
    json!({"error": {"code": code, "message": message, "status": status, "details": details}})
}

/// Whether the request carries a tool's output (the turn after a call):
/// a Responses `function_call_output`, or a Gemini `functionResponse`.
pub fn has_tool_output(request: &Request) -> bool {
    let body = &request.body;
    let responses = body["input"].as_array().into_iter().flatten();
    let contents = body["contents"].as_array().into_iter().flatten();
    let messages = body["messages"].as_array().into_iter().flatten();
    responses.clone().any(|i| i["type"] == "function_call_output")
        || messages.clone().any(|m| m["role"] == "tool")
        || contents
            .flat_map(|c| c["parts"].as_array().into_iter().flatten())
            .any(|p| p.get("functionResponse").is_some())
}

fn serve(
    stream: TcpStream,
    requests: &Mutex<Vec<Request>>,
    script: &Script,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = Request { path, body };
    let n = {
        let mut log = requests.lock().unwrap_or_else(|e| e.into_inner());
        log.push(request.clone());
        log.len() - 1
    };
    let reply = script(n, &request);
    let gemini = request.is_gemini();
    let chat = request.is_chat();
    let whole = chat && request.body["stream"] != json!(true);
    let mut out = stream;
    if let Reply::Hang = reply {
        // Read until the client closes its end: then there is no one to answer.
        let mut rest = Vec::new();
        let _ = reader.read_to_end(&mut rest);
        return Ok(());
    }
    match reply {
        Reply::Hang => unreachable!("answered above"),
        Reply::Error(status, body) => {
            let text = body.to_string();
            write!(
                out,
                "HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\nx-request-id: req_fake_{n:06}\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            )?;
        }
        Reply::Text(text) if gemini => gemini_chunk(&mut out, json!({"text": text}))?,
        Reply::Shell(command) if gemini => gemini_chunk(
            &mut out,
            json!({"functionCall": {"name": "run_shell_command",
                "args": {"command": command, "description": "Implement the story"}}}),
        )?,
        Reply::Text(text) if whole => chat_completion(&mut out, &text)?,
        Reply::Text(text) if chat => {
            chat_chunks(&mut out, json!({"role": "assistant", "content": text}), "stop")?
        }
        Reply::Shell(command) if chat => {
            let arguments =
                json!({"command": command, "description": "Implement the story"}).to_string();
            let call = json!({"index": 0, "id": format!("call_{n}"), "type": "function",
                "function": {"name": "bash", "arguments": arguments}});
            chat_chunks(&mut out, json!({"role": "assistant", "tool_calls": [call]}), "tool_calls")?
        }
        Reply::Text(text) => stream_items(&mut out, n, &[message_item(&text)])?,
        Reply::Shell(command) => {
            let arguments = json!({"cmd": command}).to_string();
            let item = json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                "name": "exec_command", "arguments": arguments, "status": "completed"});
            stream_items(&mut out, n, &[item])?
        }
    }
    out.flush()
}

fn message_item(text: &str) -> Value {
    json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn stream_items(out: &mut TcpStream, n: usize, items: &[Value]) -> std::io::Result<()> {
    let id = format!("resp_{n}");
    let mut events = vec![json!({"type": "response.created", "response": {"id": id}})];
    for (i, item) in items.iter().enumerate() {
        events.push(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    events.push(json!({"type": "response.completed", "response": {"id": id, "usage": {
        "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120}}}));
    let mut body = String::new();
    for event in events {
        body.push_str(&format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or("")
        ));
    }
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One `streamGenerateContent?alt=sse` answer: a single chunk with `part`.
fn gemini_chunk(out: &mut TcpStream, part: Value) -> std::io::Result<()> {
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
        "modelVersion": "gemini-2.5-flash",
    });
    let body = format!("data: {chunk}\r\n\r\n");
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One Chat Completions answer to a request without `stream: true`
/// (aider's `--no-stream`).
fn chat_completion(out: &mut TcpStream, text: &str) -> std::io::Result<()> {
    let body = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
    .to_string();
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One Chat Completions stream: the delta, the finish, usage, `[DONE]`.
fn chat_chunks(out: &mut TcpStream, delta: Value, finish: &str) -> std::io::Result<()> {
    let chunk = |choices: Value, usage: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
            "model": "fake-model", "choices": choices, "usage": usage})
    };
    let chunks = [
        chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]), Value::Null),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}]), Value::Null),
        chunk(
            json!([]),
            json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}),
        ),
    ];
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}
