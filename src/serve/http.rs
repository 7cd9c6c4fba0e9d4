//! What `ralph serve` does with a request, decided with no I/O: whether it
//! may be answered at all (the Host header, the token), whether its method
//! is one a read-only server answers, and which route its path names. Log
//! paths are checked here too: only names ralph itself gives its log files
//! get through, so no path can leave the run's log folder.

/// What a request is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /`: the page.
    Page,
    /// `GET /page/<asset>`: the page's CSS or JavaScript.
    Asset(&'static str),
    /// `GET /api/status`: the document `ralph status --json` prints.
    Status,
    /// `GET /api/run`: the checkpoint's run (elapsed, tokens), the budgets
    /// and the run's log files.
    Run,
    /// `GET /api/history`: the recorded runs, as `ralph history --json`
    /// prints them.
    History,
    /// `GET /api/report[?run=ID]`: one run's report, as `ralph report
    /// [ID] --json` prints it; the latest run's without `run`.
    Report {
        run: Option<String>,
    },
    /// `GET /events`: the server-sent event stream.
    Events,
    /// `GET /logs/<run>/<file>` or `/logs/<run>/<story>/<file>`: a log file,
    /// as text. `rel` is checked by [`safe_log_path`].
    Log {
        run: String,
        rel: String,
    },
    NotFound,
    /// Any method but GET and HEAD: nothing here changes anything.
    MethodNotAllowed,
    /// The token is missing or wrong.
    Unauthorized,
    /// The Host header names another site (DNS rebinding onto loopback).
    BadHost,
}

/// The page's assets, by the name in their path.
pub const ASSETS: &[&str] = &["style.css", "app.js"];

/// Who may ask: the token every request must carry (`?token=`,
/// `Authorization: Bearer` or the cookie the page was answered with), if
/// there is one; without one the server is on loopback and only loopback
/// host names are answered.
#[derive(Debug, Clone)]
pub struct Access {
    pub token: Option<String>,
    /// The cookie's name: one per port, as browsers keep cookies per host.
    pub cookie: String,
}

/// The parts of a request that decide its route.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub host: Option<&'a str>,
    pub authorization: Option<&'a str>,
    pub cookie: Option<&'a str>,
}

/// The route for `req`.
pub fn route(req: &Request, access: &Access) -> Route {
    let (path, query) = req.url.split_once('?').unwrap_or((req.url, ""));
    match &access.token {
        Some(token) => {
            let given = query_value(query, "token")
                .or_else(|| {
                    req.authorization.and_then(|a| a.strip_prefix("Bearer ")).map(str::to_string)
                })
                .or_else(|| req.cookie.and_then(|c| cookie_value(c, &access.cookie)))
                .map(|t| t.trim().to_string());
            if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
                return Route::Unauthorized;
            }
        }
        None if !req.host.is_some_and(loopback_host) => return Route::BadHost,
        None => {}
    }
    if req.method != "GET" && req.method != "HEAD" {
        return Route::MethodNotAllowed;
    }
    match path {
        "/" | "/index.html" => Route::Page,
        "/api/status" => Route::Status,
        "/api/run" => Route::Run,
        "/api/history" => Route::History,
        "/api/report" => match query_value(query, "run").filter(|r| !r.is_empty()) {
            None => Route::Report { run: None },
            // A run id or the start of one (`ralph report 20261203`).
            Some(run) if run_id_prefix(&run) => Route::Report { run: Some(run) },
            Some(_) => Route::NotFound,
        },
        "/events" => Route::Events,
        _ => {
            if let Some(name) = path.strip_prefix("/page/") {
                return ASSETS
                    .iter()
                    .find(|a| **a == name)
                    .map_or(Route::NotFound, |a| Route::Asset(a));
            }
            let Some(rest) = path.strip_prefix("/logs/") else { return Route::NotFound };
            let Some((run, rel)) = rest.split_once('/') else { return Route::NotFound };
            if crate::state::valid_run_id(run) && safe_log_path(rel) {
                Route::Log { run: run.to_string(), rel: rel.to_string() }
            } else {
                Route::NotFound
            }
        }
    }
}

/// Whether `token` can be one: at least 8 characters that stand as they
/// are in a URL, a header and a cookie (letters, digits, `-`, `_`, `.`, `~`).
pub fn valid_token(token: &str) -> bool {
    token.len() >= 8
        && token.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
}

/// Whether `rel` is a log file's path inside a run's folder as ralph names
/// them: one file, or one story folder and a file (a parallel run), each
/// part letters, digits, `.`, `-` and `_`, none hidden, none `..`. Nothing
/// is decoded: `%2e%2e` is not a name ralph gives, so it is refused as it is.
pub fn safe_log_path(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    (1..=2).contains(&parts.len())
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 128
                && !p.starts_with('.')
                && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        })
}

/// Whether `run` can be a run id or the start of one: letters, digits
/// and `-`, as ralph names its runs.
fn run_id_prefix(run: &str) -> bool {
    run.len() <= 64 && run.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Whether a Host header names this machine's loopback: `localhost`,
/// `127.x.y.z` or `[::1]`, with or without a port.
pub fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => return v6.split(']').next() == Some("::1"),
        None => host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) { h } else { host }
        }),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// The value of cookie `name` in a `Cookie` header.
fn cookie_value(header: &str, name: &str) -> Option<String> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then(|| v.to_string())
    })
}

/// The value of `key` in a query string, percent-decoded.
fn query_value(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| percent_decode(v))
    })
}

/// `+` is a space in a query; a `%` that starts no valid escape stays.
fn percent_decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

/// Compares in time that depends on the lengths only, not on where the
/// first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(url: &str) -> Request<'_> {
        Request {
            method: "GET",
            url,
            host: Some("127.0.0.1:8080"),
            authorization: None,
            cookie: None,
        }
    }

    #[test]
    fn routes_of_a_loopback_server() {
        let open = Access { token: None, cookie: "c".into() };
        let log = |run: &str, rel: &str| Route::Log { run: run.into(), rel: rel.into() };
        let run = "20261203-101500-3a7f-9c41e2";
        let table: &[(&str, &str, Route)] = &[
            ("GET", "/", Route::Page),
            ("HEAD", "/", Route::Page),
            ("GET", "/?x=1", Route::Page),
            ("GET", "/page/app.js", Route::Asset("app.js")),
            ("GET", "/page/style.css", Route::Asset("style.css")),
            ("GET", "/page/../Cargo.toml", Route::NotFound),
            ("GET", "/api/status", Route::Status),
            ("GET", "/api/run", Route::Run),
            ("GET", "/api/history", Route::History),
            ("GET", "/api/report", Route::Report { run: None }),
            ("GET", "/api/report?run=", Route::Report { run: None }),
            ("GET", "/api/report?run=20261203", Route::Report { run: Some("20261203".into()) }),
            ("GET", &format!("/api/report?run={run}"), Route::Report { run: Some(run.into()) }),
            ("GET", "/api/report?run=../x", Route::NotFound),
            ("GET", "/api/report?run=a%2Fb", Route::NotFound),
            ("GET", "/events", Route::Events),
            ("GET", &format!("/logs/{run}/iter-3.log"), log(run, "iter-3.log")),
            ("GET", &format!("/logs/{run}/US-001/iter-1.log"), log(run, "US-001/iter-1.log")),
            ("GET", &format!("/logs/{run}/../state.json"), Route::NotFound),
            ("GET", &format!("/logs/{run}/%2e%2e/state.json"), Route::NotFound),
            ("GET", &format!("/logs/{run}/a/b/c.log"), Route::NotFound),
            ("GET", &format!("/logs/{run}/.hidden"), Route::NotFound),
            ("GET", &format!("/logs/{run}/"), Route::NotFound),
            ("GET", &format!("/logs/{run}"), Route::NotFound),
            ("GET", "/logs/../iter-1.log", Route::NotFound),
            ("GET", "/logs/a.b/iter-1.log", Route::NotFound),
            ("GET", "//etc/passwd", Route::NotFound),
            ("GET", "/nothing", Route::NotFound),
            ("POST", "/api/status", Route::MethodNotAllowed),
            ("PUT", "/", Route::MethodNotAllowed),
            ("DELETE", "/events", Route::MethodNotAllowed),
            ("POST", "/nothing", Route::MethodNotAllowed),
        ];
        for (method, url, want) in table {
            let req = Request { method, ..get(url) };
            assert_eq!(&route(&req, &open), want, "{method} {url}");
        }
    }

    #[test]
    fn a_token_is_required_on_every_path_and_read_from_query_or_header() {
        let access = Access { token: Some("s3cr-et".into()), cookie: "ralph_token_8080".into() };
        let with = |url: &'static str, auth: Option<&'static str>| Request {
            host: Some("192.0.2.1:8080"),
            authorization: auth,
            ..get(url)
        };
        let table: &[(Request, Route)] = &[
            (with("/", None), Route::Unauthorized),
            (with("/events", None), Route::Unauthorized),
            (with("/nothing", None), Route::Unauthorized),
            (Request { method: "POST", ..with("/", None) }, Route::Unauthorized),
            (with("/?token=wrong", None), Route::Unauthorized),
            (with("/?token=s3cr", None), Route::Unauthorized),
            (with("/?token=", None), Route::Unauthorized),
            (with("/", Some("Bearer nope")), Route::Unauthorized),
            (with("/?token=s3cr%2Det", None), Route::Page),
            (with("/api/status?x=1&token=s3cr-et", None), Route::Status),
            (with("/events", Some("Bearer s3cr-et")), Route::Events),
            (
                Request {
                    cookie: Some("a=b; ralph_token_8080=s3cr-et"),
                    ..with("/page/app.js", None)
                },
                Route::Asset("app.js"),
            ),
            (
                Request { cookie: Some("ralph_token_9090=s3cr-et"), ..with("/", None) },
                Route::Unauthorized,
            ),
            (
                Request { cookie: Some("ralph_token_8080=nope"), ..with("/", None) },
                Route::Unauthorized,
            ),
            (
                Request { method: "POST", ..with("/?token=s3cr%2Det", None) },
                Route::MethodNotAllowed,
            ),
            // With a token, the host name does not matter.
            (Request { host: None, ..with("/?token=s3cr%2Det", None) }, Route::Page),
        ];
        for (req, want) in table {
            assert_eq!(&route(req, &access), want, "{req:?}");
        }
    }

    #[test]
    fn without_a_token_only_loopback_host_names_are_answered() {
        let open = Access { token: None, cookie: "c".into() };
        for (host, ok) in [
            (Some("127.0.0.1:8080"), true),
            (Some("127.0.0.1"), true),
            (Some("127.1.2.3:1"), true),
            (Some("localhost:8080"), true),
            (Some("LOCALHOST"), true),
            (Some("[::1]:8080"), true),
            (Some("[::1]"), true),
            (Some("evil.example:8080"), false),
            (Some("localhost.evil.example"), false),
            (Some("10.0.0.1:8080"), false),
            (Some("[::2]:80"), false),
            (None, false),
        ] {
            let req = Request { host, ..get("/") };
            let want = if ok { Route::Page } else { Route::BadHost };
            assert_eq!(route(&req, &open), want, "{host:?}");
        }
    }

    #[test]
    fn tokens_stand_as_they_are_in_urls_headers_and_cookies() {
        for (token, ok) in [
            ("0123456789abcdef", true),
            ("my-token_v1.0~x", true),
            ("short", false),
            ("with space in it", false),
            ("semi;colon-token", false),
            ("plus+sign-token", false),
            ("ünïcode-token", false),
        ] {
            assert_eq!(valid_token(token), ok, "{token}");
        }
    }

    #[test]
    fn percent_decoding_keeps_what_it_cannot_decode() {
        for (raw, want) in
            [("a%20b", "a b"), ("a+b", "a b"), ("%zz", "%zz"), ("50%", "50%"), ("%4", "%4")]
        {
            assert_eq!(percent_decode(raw), want, "{raw}");
        }
    }
}
