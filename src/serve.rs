//! `ralph serve`: a read-only web page for one project, and the API it
//! reads — the status document, the run's event stream, its log files,
//! the history of runs and a run's report.
//!
//! A small synchronous server (`tiny_http`), one thread per request: the
//! page is looked at by a handful of people, and the only long request is
//! the event stream, which mostly sleeps between looks at a file. What a
//! request may get is decided in [`http`] (pure); the stream is [`sse`];
//! the page is static, embedded from `page/`. Nothing here writes to the
//! project: the server only reads what the loop, in whatever process it
//! runs, keeps on disk.

pub mod http;
mod logs;
pub mod sse;

use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::state::RunState;
use crate::store::Store;
use http::Route;

/// Requests answered at once; more get 503 (each event stream holds one).
const MAX_ACTIVE: usize = 64;
/// How long a status document is reused for the event streams.
const STATUS_FRESH: Duration = Duration::from_millis(300);

const PAGE: &str = include_str!("serve/page/index.html");
const STYLE: &str = include_str!("serve/page/style.css");
const APP: &str = include_str!("serve/page/app.js");

/// What the server is given.
pub struct Settings {
    pub store: Store,
    /// Required on every request when set.
    pub token: Option<String>,
    /// The `ralph status --json` document, gathered now.
    pub status: Box<dyn Fn() -> Value + Send + Sync>,
    /// The budgets and limits the configuration sets, for the page.
    pub budget: Value,
}

/// What every request's thread shares.
pub struct Context {
    store: Store,
    access: http::Access,
    status: Box<dyn Fn() -> Value + Send + Sync>,
    budget: Value,
    cache: Mutex<Option<(Instant, String)>>,
    stop: AtomicBool,
    active: AtomicUsize,
}

impl Context {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The status document on one line, gathered at most every
    /// [`STATUS_FRESH`] however many streams ask.
    fn status_compact(&self) -> String {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        match &*cache {
            Some((at, text)) if at.elapsed() < STATUS_FRESH => text.clone(),
            _ => {
                let text = (self.status)().to_string();
                *cache = Some((Instant::now(), text.clone()));
                text
            }
        }
    }

    /// The run of the checkpoint: the one running, or the last.
    fn current_run_id(&self) -> Option<String> {
        RunState::load(&self.store).ok().and_then(|(s, _)| s).map(|s| s.run_id)
    }

    /// `GET /api/run`: the checkpoint's run, the budgets, the run's logs.
    fn run_doc(&self) -> Value {
        let state = RunState::load(&self.store).ok().and_then(|(s, _)| s);
        let logs = state.as_ref().map(|s| logs::list(&self.store, &s.run_id)).unwrap_or_default();
        json!({
            "version": 1,
            "run": state.map(|s| json!({
                "run_id": s.run_id,
                "started_at": s.started_at,
                "iteration": s.iteration,
                "max_iterations": s.max_iterations,
                "phase": s.phase,
                "story": s.story,
                "cost_usd": s.cost_usd,
                "tokens": s.tokens,
                "elapsed_ms_before": s.elapsed_ms,
            })),
            "budget": self.budget,
            "logs": logs,
        })
    }
}

/// A bound server, not yet answering.
pub struct Server {
    http: tiny_http::Server,
    addr: SocketAddr,
    ctx: Arc<Context>,
}

/// The page cannot listen where it was asked to (exit 7).
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {}:{}: {source}", addr.ip(), addr.port())]
pub struct BindError {
    pub addr: SocketAddr,
    pub source: io::Error,
}

impl BindError {
    pub fn hint(&self) -> &'static str {
        "choose another --port (0 takes any free one)"
    }
}

impl Server {
    pub fn bind(addr: SocketAddr, settings: Settings) -> Result<Server, BindError> {
        let http = tiny_http::Server::http(addr)
            .map_err(|e| BindError { addr, source: io::Error::other(e) })?;
        let addr = http.server_addr().to_ip().unwrap_or(addr);
        let ctx = Arc::new(Context {
            store: settings.store,
            access: http::Access {
                token: settings.token,
                cookie: format!("ralph_token_{}", addr.port()),
            },
            status: settings.status,
            budget: settings.budget,
            cache: Mutex::new(None),
            stop: AtomicBool::new(false),
            active: AtomicUsize::new(0),
        });
        Ok(Server { http, addr, ctx })
    }

    /// Where it listens (the port chosen, for `--port 0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers requests until `stopping` says so; the event streams end
    /// within a poll.
    pub fn run(&self, stopping: impl Fn() -> bool) {
        while !stopping() {
            let Ok(Some(req)) = self.http.recv_timeout(Duration::from_millis(200)) else {
                continue;
            };
            let ctx = self.ctx.clone();
            if ctx.active.fetch_add(1, Ordering::SeqCst) >= MAX_ACTIVE {
                ctx.active.fetch_sub(1, Ordering::SeqCst);
                let _ = req.respond(text(503, "too many requests at once\n"));
                continue;
            }
            std::thread::spawn(move || {
                answer(req, &ctx);
                ctx.active.fetch_sub(1, Ordering::SeqCst);
            });
        }
        self.ctx.stop.store(true, Ordering::SeqCst);
    }
}

type Response = tiny_http::Response<Box<dyn Read + Send>>;

fn header_value(req: &tiny_http::Request, name: &'static str) -> Option<String> {
    req.headers().iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str().to_string())
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
        .unwrap_or_else(|_| tiny_http::Header::from_bytes(&b"X-Invalid"[..], &b"1"[..]).unwrap())
}

/// A response with the headers every answer carries.
fn response(
    code: u16,
    content_type: &str,
    body: Box<dyn Read + Send>,
    len: Option<usize>,
) -> Response {
    tiny_http::Response::new(code.into(), Vec::new(), body, len, None)
        .with_header(header("Content-Type", content_type))
        .with_header(header("Cache-Control", "no-store"))
        .with_header(header("X-Content-Type-Options", "nosniff"))
        .with_header(header("Referrer-Policy", "no-referrer"))
        .with_header(header(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ))
}

fn bytes(code: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
    let body = body.into();
    let len = body.len();
    response(code, content_type, Box::new(io::Cursor::new(body)), Some(len))
}

fn text(code: u16, body: &str) -> Response {
    bytes(code, "text/plain; charset=utf-8", body)
}

fn json_response(code: u16, value: &Value) -> Response {
    let body = serde_json::to_string_pretty(value).unwrap_or_default() + "\n";
    bytes(code, "application/json", body)
}

fn answer(req: tiny_http::Request, ctx: &Arc<Context>) {
    let method = req.method().as_str().to_string();
    let (host, auth) = (header_value(&req, "Host"), header_value(&req, "Authorization"));
    let cookie = header_value(&req, "Cookie");
    let r = http::Request {
        method: &method,
        url: req.url(),
        host: host.as_deref(),
        authorization: auth.as_deref(),
        cookie: cookie.as_deref(),
    };
    let route = http::route(&r, &ctx.access);
    let reply = match route {
        // With a token, the page sets it as a cookie: its assets, its API
        // calls, its event stream and its log links then carry it.
        Route::Page => match &ctx.access.token {
            Some(t) => bytes(200, "text/html; charset=utf-8", PAGE).with_header(header(
                "Set-Cookie",
                &format!("{}={t}; Path=/; HttpOnly; SameSite=Strict", ctx.access.cookie),
            )),
            None => bytes(200, "text/html; charset=utf-8", PAGE),
        },
        Route::Asset("style.css") => bytes(200, "text/css; charset=utf-8", STYLE),
        Route::Asset(_) => bytes(200, "text/javascript; charset=utf-8", APP),
        Route::Status => {
            let doc = serde_json::to_string_pretty(&(ctx.status)()).unwrap_or_default() + "\n";
            bytes(200, "application/json", doc)
        }
        Route::Run => json_response(200, &ctx.run_doc()),
        Route::History => match crate::history::history(&ctx.store, None) {
            Ok(rows) => json_response(200, &serde_json::to_value(rows).unwrap_or_default()),
            Err(e) => {
                json_response(500, &json!({"error": format!("cannot read the run logs: {e}")}))
            }
        },
        Route::Report { run } => match crate::history::find_report(&ctx.store, run.as_deref()) {
            Ok(report) => json_response(200, &serde_json::to_value(report).unwrap_or_default()),
            Err(e @ crate::history::FindError::Read { .. }) => {
                json_response(500, &json!({"error": e.to_string()}))
            }
            Err(e) => json_response(404, &json!({"error": e.to_string()})),
        },
        Route::Events if method == "HEAD" => bytes(200, "text/event-stream", ""),
        Route::Events => {
            let last = header_value(&req, "Last-Event-ID").and_then(|id| sse::parse_id(&id));
            return events(req, ctx, last);
        }
        Route::Log { run, rel } => match logs::open(&ctx.store, &run, &rel) {
            Some(file) => {
                let len = file.metadata().ok().map(|m| m.len() as usize);
                response(200, "text/plain; charset=utf-8", Box::new(file), len)
            }
            None => text(404, "no such log\n"),
        },
        Route::NotFound => text(404, "not found\n"),
        Route::MethodNotAllowed => text(405, "ralph serve is read-only: GET and HEAD only\n")
            .with_header(header("Allow", "GET, HEAD")),
        Route::Unauthorized => {
            text(401, "a token is required: open the address ralph serve printed (…/?token=…)\n")
                .with_header(header("WWW-Authenticate", "Bearer"))
        }
        Route::BadHost => text(403, "this server answers to localhost only\n"),
    };
    let _ = req.respond(reply);
}

/// The event stream, written straight to the connection: a response with
/// no length that stays open, flushed after each message.
fn events(req: tiny_http::Request, ctx: &Arc<Context>, last: Option<sse::Position>) {
    let mut out = req.into_writer();
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\
                X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n";
    if io::Write::write_all(&mut out, head.as_bytes()).is_ok() {
        let _ = sse::stream(&mut out, ctx, last);
    }
}

/// A token for a server that is not on loopback and was given none: 128
/// random bits, in hex.
pub fn new_token() -> io::Result<String> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits).map_err(io::Error::other)?;
    Ok(bits.iter().map(|b| format!("{b:02x}")).collect())
}
