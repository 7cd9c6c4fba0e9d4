//! A scripted stand-in for the OpenAI Responses API on loopback, for the
//! real codex CLI (`codex exec --json`, 0.171). codex is pointed at it by a
//! custom provider in `$CODEX_HOME/config.toml` ([`codex_config`]) and sends
//! only `POST /v1/responses` with `stream: true`; the stub answers each one
//! with the test's [`Reply`]: a streamed message, a streamed function call
//! (`exec_command`, the shell tool codex offers model `gpt-5.5`), or an HTTP
//! error with an OpenAI error body. Every request body is kept.
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
}

/// The request bodies so far, and the number of the next request.
type Script = dyn Fn(usize, &Value) -> Reply + Send + Sync;

pub struct Stub {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Value>>>,
    stopping: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Stub {
    pub fn start(script: impl Fn(usize, &Value) -> Reply + Send + Sync + 'static) -> Stub {
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

    /// `http://127.0.0.1:<port>/v1`
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Value> {
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

/// `$CODEX_HOME/config.toml` for this stub: model `gpt-5.5` on a provider
/// whose key is read from `FAKE_OPENAI_KEY`, and none of codex's own
/// retries (one request per fault).
pub fn codex_config(codex_home: &Path, base_url: &str) {
    std::fs::create_dir_all(codex_home).expect("CODEX_HOME");
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

/// Whether the request carries a tool's output (the turn after a call).
pub fn has_tool_output(body: &Value) -> bool {
    body["input"].as_array().into_iter().flatten().any(|i| i["type"] == "function_call_output")
}

fn serve(stream: TcpStream, requests: &Mutex<Vec<Value>>, script: &Script) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    let mut line = String::new();
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
    let n = {
        let mut log = requests.lock().unwrap_or_else(|e| e.into_inner());
        log.push(body.clone());
        log.len() - 1
    };
    let reply = script(n, &body);
    let mut out = stream;
    match reply {
        Reply::Error(status, body) => {
            let text = body.to_string();
            write!(
                out,
                "HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\nx-request-id: req_fake_{n:06}\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            )?;
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
