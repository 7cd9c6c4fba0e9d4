//! What the pull-request tests talk to: a bare repository served by `git
//! daemon` on 127.0.0.1 (git's own protocol, pushes enabled), and a scripted
//! forge that speaks GitHub's or GitLab's REST shapes with the checks a real
//! one makes: the auth header, required fields, the branches existing on the
//! remote, one open pull request per branch (422 / 409), 401, 404, and rate
//! limits with `Retry-After` when the test asks for them.

use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// `git daemon` serving one folder, on a port of its own.
pub struct Daemon {
    child: Child,
    pub url: String,
}

impl Daemon {
    /// Serves `bare` (a bare repository) as `git://127.0.0.1:<port>/<name>`,
    /// pushes allowed. Panics, saying why, when git daemon cannot start:
    /// these tests need it (Debian's git package has it).
    pub fn serve(bare: &Path) -> Daemon {
        let base = bare.parent().unwrap();
        let name = bare.file_name().unwrap().to_str().unwrap();
        let mut last = String::new();
        for _ in 0..20 {
            let port = free_port();
            let mut child = Command::new("git")
                .args([
                    "daemon",
                    "--reuseaddr",
                    "--export-all",
                    "--enable=receive-pack",
                    "--listen=127.0.0.1",
                    &format!("--port={port}"),
                    &format!("--base-path={}", base.display()),
                    "--informative-errors",
                ])
                .arg(base)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start `git daemon` (part of git): {e}"));
            let url = format!("git://127.0.0.1:{port}/{name}");
            // Ready once it answers a listing; gone early means the port
            // was taken between our look and its bind.
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    let mut err = String::new();
                    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                    last = err;
                    break;
                }
                let ok = Command::new("git")
                    .args(["ls-remote", &url])
                    .env("GIT_TERMINAL_PROMPT", "0")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if ok {
                    return Daemon { child, url };
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        panic!("`git daemon` would not serve {}: {last}", bare.display());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Its group: the daemon and the children serving connections.
        // SAFETY: signalling a process group this test started.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A bare clone of `project` beside it (`remote.git`), its HEAD on main.
pub fn bare_remote(project: &Path, tmp: &Path) -> PathBuf {
    let bare = tmp.join("remote.git");
    let out = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(project)
        .arg(&bare)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    bare
}

/// The commit a branch of a bare repository is at (`None`: no such branch).
pub fn branch_at(bare: &Path, branch: &str) -> Option<String> {
    let out = Command::new("git")
        .arg(format!("--git-dir={}", bare.display()))
        .args(["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")])
        .output()
        .unwrap();
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    GitHub,
    GitLab,
}

/// One pull request (merge request) the forge holds.
#[derive(Debug, Clone)]
pub struct Pr {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub head: String,
    pub base: String,
    pub draft: bool,
    pub state: &'static str,
}

/// A request as the forge received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub status: u16,
}

/// A canned answer, for the next request that matches after `skip` others did.
pub struct Canned {
    /// `POST`, `GET`, … or `*`.
    pub method: &'static str,
    pub skip: usize,
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

#[derive(Default)]
pub struct State {
    pub prs: Vec<Pr>,
    pub seen: Vec<Seen>,
    pub canned: VecDeque<Canned>,
    /// Commit statuses by sha (GitHub) / the pipeline status (GitLab).
    pub ci: Option<&'static str>,
    /// Comments by pull request, oldest first.
    pub comments: Vec<(u64, String)>,
}

pub struct Forge {
    pub api: String,
    pub kind: Kind,
    pub state: Arc<Mutex<State>>,
}

pub const OWNER_REPO: &str = "acme/demo";
pub const GITLAB_PROJECT: &str = "acme/tools/demo";

impl Forge {
    /// A forge that accepts `token` and checks branches against `bare`.
    pub fn start(kind: Kind, token: &str, bare: &Path) -> Forge {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let api = match kind {
            Kind::GitHub => format!("http://127.0.0.1:{port}"),
            Kind::GitLab => format!("http://127.0.0.1:{port}/api/v4"),
        };
        let state = Arc::new(Mutex::new(State::default()));
        let (st, token, bare) = (state.clone(), token.to_string(), bare.to_path_buf());
        std::thread::spawn(move || {
            for mut req in server.incoming_requests() {
                let mut body = String::new();
                let _ = req.as_reader().read_to_string(&mut body);
                let method = req.method().to_string().to_uppercase();
                let url = req.url().to_string();
                let headers: Vec<(String, String)> = req
                    .headers()
                    .iter()
                    .map(|h| {
                        (
                            h.field.as_str().as_str().to_ascii_lowercase(),
                            h.value.as_str().to_string(),
                        )
                    })
                    .collect();
                let (status, extra, answer) = {
                    let mut s = st.lock().unwrap();
                    let canned = match s.canned.front_mut() {
                        Some(c) if (c.method == "*" || c.method == method) && c.skip > 0 => {
                            c.skip -= 1;
                            None
                        }
                        Some(c) if c.method == "*" || c.method == method => s.canned.pop_front(),
                        _ => None,
                    };
                    let (status, extra, answer) = match canned {
                        Some(c) => (c.status, c.headers, c.body),
                        None => {
                            let (status, answer) = match kind {
                                Kind::GitHub => {
                                    github(&mut s, &token, &bare, &method, &url, &headers, &body)
                                }
                                Kind::GitLab => {
                                    gitlab(&mut s, &token, &bare, &method, &url, &headers, &body)
                                }
                            };
                            (status, Vec::new(), answer)
                        }
                    };
                    s.seen.push(Seen { method, url, headers, status });
                    (status, extra, answer)
                };
                let mut response = tiny_http::Response::from_string(answer.to_string())
                    .with_status_code(status)
                    .with_header(
                        tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap(),
                    );
                for (k, v) in extra {
                    response = response
                        .with_header(tiny_http::Header::from_bytes(k, v.as_bytes()).unwrap());
                }
                let _ = req.respond(response);
            }
        });
        Forge { api, kind, state }
    }

    pub fn prs(&self) -> Vec<Pr> {
        self.state.lock().unwrap().prs.clone()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Requests that changed something (not GETs).
    pub fn writes(&self) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.method != "GET").collect()
    }

    pub fn can(&self, c: Canned) {
        self.state.lock().unwrap().canned.push_back(c);
    }

    /// A pull request a person opened.
    pub fn add(&self, head: &str, base: &str, title: &str) -> u64 {
        let mut s = self.state.lock().unwrap();
        let number = s.prs.len() as u64 + 1;
        s.prs.push(Pr {
            number,
            title: title.into(),
            body: "opened by hand".into(),
            head: head.into(),
            base: base.into(),
            draft: false,
            state: if self.kind == Kind::GitHub { "open" } else { "opened" },
        });
        number
    }

    /// A reviewer closes a pull request without merging it, saying why.
    pub fn close(&self, number: u64, comment: &str) {
        let mut s = self.state.lock().unwrap();
        let pr = s.prs.iter_mut().find(|p| p.number == number).unwrap();
        pr.state = "closed";
        s.comments.push((number, "Thanks!".into()));
        s.comments.push((number, comment.into()));
    }

    /// The `.ralph/config.toml` lines that point ralph at this forge.
    pub fn config(&self) -> String {
        let (forge, repo) = match self.kind {
            Kind::GitHub => ("github", OWNER_REPO),
            Kind::GitLab => ("gitlab", GITLAB_PROJECT),
        };
        format!(
            "[deliver]\nforge = \"{forge}\"\nrepo = \"{repo}\"\napi = \"{}\"\ntimeout = \"20s\"\n",
            self.api
        )
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn query(url: &str, key: &str) -> Option<String> {
    let q = url.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| decode(v))
    })
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn github_pr(p: &Pr, bare: &Path) -> Value {
    let sha = branch_at(bare, &p.head).unwrap_or_default();
    json!({
        "url": format!("https://api.github.example/repos/{OWNER_REPO}/pulls/{}", p.number),
        "id": 1000 + p.number,
        "node_id": format!("PR_node{}", p.number),
        "html_url": format!("https://github.example/{OWNER_REPO}/pull/{}", p.number),
        "number": p.number,
        "state": if p.state == "merged" { "closed" } else { p.state },
        "title": p.title,
        "body": p.body,
        "draft": p.draft,
        "merged": p.state == "merged",
        "merged_at": if p.state == "merged" { json!("2026-12-02T10:00:00Z") } else { Value::Null },
        "head": {"ref": p.head, "sha": sha, "label": format!("acme:{}", p.head)},
        "base": {"ref": p.base, "label": format!("acme:{}", p.base)},
    })
}

/// GitHub's REST API, as far as ralph uses it.
fn github(
    s: &mut State,
    token: &str,
    bare: &Path,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &str,
) -> (u16, Value) {
    let doc = json!({"documentation_url": "https://docs.github.com/rest"});
    // GitHub refuses requests without a User-Agent.
    if header(headers, "user-agent").is_none() {
        return (
            403,
            json!({"message": "Request forbidden by administrative rules. Please make sure your request has a User-Agent header"}),
        );
    }
    let auth = header(headers, "authorization").unwrap_or_default();
    if auth != format!("Bearer {token}") && auth != format!("token {token}") {
        return (
            401,
            json!({"message": "Bad credentials", "documentation_url": doc["documentation_url"]}),
        );
    }
    let path = url.split('?').next().unwrap_or_default();
    let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if path == "/graphql" && method == "POST" {
        let id = body["variables"]["id"].as_str().unwrap_or_default();
        let q = body["query"].as_str().unwrap_or_default();
        let Some(pr) = s.prs.iter_mut().find(|p| format!("PR_node{}", p.number) == id) else {
            return (
                200,
                json!({"errors": [{"type": "NOT_FOUND", "message": format!("Could not resolve to a node with the global id of '{id}'")}]}),
            );
        };
        if !q.contains("markPullRequestReadyForReview") {
            return (200, json!({"errors": [{"message": "unknown mutation"}]}));
        }
        pr.draft = false;
        return (
            200,
            json!({"data": {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": false}}}}),
        );
    }
    let prefix = format!("/repos/{OWNER_REPO}/");
    let Some(rest) = path.strip_prefix(&prefix) else {
        return (404, json!({"message": "Not Found"}));
    };
    let missing = |field: &str| {
        (
            422,
            json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": field, "code": "missing_field"}]}),
        )
    };
    let invalid = |field: &str| {
        (
            422,
            json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": field, "code": "invalid"}]}),
        )
    };
    match (method, rest.split('/').collect::<Vec<_>>().as_slice()) {
        ("POST", ["pulls"]) => {
            for f in ["title", "head", "base"] {
                if body[f].as_str().is_none_or(str::is_empty) {
                    return missing(f);
                }
            }
            let head = body["head"].as_str().unwrap().trim_start_matches("acme:").to_string();
            let base = body["base"].as_str().unwrap().to_string();
            if branch_at(bare, &head).is_none() {
                return invalid("head");
            }
            if branch_at(bare, &base).is_none() {
                return invalid("base");
            }
            if s.prs.iter().any(|p| p.head == head && p.state == "open") {
                return (
                    422,
                    json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for acme:{head}.")}]}),
                );
            }
            let pr = Pr {
                number: s.prs.len() as u64 + 1,
                title: body["title"].as_str().unwrap().into(),
                body: body["body"].as_str().unwrap_or_default().into(),
                head,
                base,
                draft: body["draft"].as_bool().unwrap_or(false),
                state: "open",
            };
            s.prs.push(pr.clone());
            (201, github_pr(&pr, bare))
        }
        ("GET", ["pulls"]) => {
            let head = query(url, "head").unwrap_or_default();
            let state = query(url, "state").unwrap_or_else(|| "open".into());
            let list: Vec<Value> = s
                .prs
                .iter()
                .filter(|p| head.is_empty() || format!("acme:{}", p.head) == head)
                .filter(|p| state == "all" || (state == "open") == (p.state == "open"))
                .map(|p| github_pr(p, bare))
                .collect();
            (200, Value::Array(list))
        }
        ("GET", ["pulls", n]) => match s.prs.iter().find(|p| p.number.to_string() == *n) {
            Some(p) => (200, github_pr(p, bare)),
            None => (404, json!({"message": "Not Found"})),
        },
        ("PATCH", ["pulls", n]) => {
            let Some(i) = s.prs.iter().position(|p| p.number.to_string() == *n) else {
                return (404, json!({"message": "Not Found"}));
            };
            if let Some(base) = body["base"].as_str() {
                if branch_at(bare, base).is_none() {
                    return invalid("base");
                }
                s.prs[i].base = base.into();
            }
            if let Some(t) = body["title"].as_str() {
                s.prs[i].title = t.into();
            }
            if let Some(b) = body["body"].as_str() {
                s.prs[i].body = b.into();
            }
            (200, github_pr(&s.prs[i], bare))
        }
        ("GET", ["issues", n, "comments"]) => {
            let list: Vec<Value> = s
                .comments
                .iter()
                .filter(|(k, _)| k.to_string() == *n)
                .map(|(_, b)| json!({"body": b, "user": {"login": "reviewer"}}))
                .collect();
            (200, Value::Array(list))
        }
        ("GET", ["commits", sha, "status"]) => {
            let statuses: Vec<Value> =
                s.ci.iter()
                    .map(|st| json!({"state": st, "context": "ci/test", "sha": sha}))
                    .collect();
            (
                200,
                json!({"state": s.ci.unwrap_or("pending"), "total_count": statuses.len(), "statuses": statuses, "sha": sha}),
            )
        }
        _ => (404, json!({"message": "Not Found"})),
    }
}

fn gitlab_mr(p: &Pr, bare: &Path, ci: Option<&str>) -> Value {
    let title = if p.draft && !p.title.starts_with("Draft: ") {
        format!("Draft: {}", p.title)
    } else {
        p.title.clone()
    };
    json!({
        "id": 5000 + p.number,
        "iid": p.number,
        "project_id": 42,
        "title": title,
        "description": p.body,
        "state": p.state,
        "draft": title.starts_with("Draft: "),
        "work_in_progress": title.starts_with("Draft: "),
        "source_branch": p.head,
        "target_branch": p.base,
        "sha": branch_at(bare, &p.head).unwrap_or_default(),
        "web_url": format!("https://gitlab.example/{GITLAB_PROJECT}/-/merge_requests/{}", p.number),
        "head_pipeline": ci.map(|c| json!({"id": 1, "status": c})).unwrap_or(Value::Null),
    })
}

/// GitLab's REST API (v4), as far as ralph uses it.
fn gitlab(
    s: &mut State,
    token: &str,
    bare: &Path,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &str,
) -> (u16, Value) {
    if header(headers, "private-token") != Some(token) {
        return (401, json!({"message": "401 Unauthorized"}));
    }
    let path = url.split('?').next().unwrap_or_default();
    let prefix = format!("/api/v4/projects/{}/", GITLAB_PROJECT.replace('/', "%2F"));
    let Some(rest) = path.strip_prefix(&prefix) else {
        return (404, json!({"message": "404 Project Not Found"}));
    };
    let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let ci = s.ci;
    match (method, rest.split('/').collect::<Vec<_>>().as_slice()) {
        ("POST", ["merge_requests"]) => {
            for f in ["source_branch", "target_branch", "title"] {
                if body[f].as_str().is_none_or(str::is_empty) {
                    return (400, json!({"error": format!("{f} is missing")}));
                }
            }
            let head = body["source_branch"].as_str().unwrap().to_string();
            let base = body["target_branch"].as_str().unwrap().to_string();
            if branch_at(bare, &head).is_none() || branch_at(bare, &base).is_none() {
                return (400, json!({"message": {"source_branch": ["does not exist"]}}));
            }
            if let Some(p) =
                s.prs.iter().find(|p| p.head == head && p.base == base && p.state == "opened")
            {
                return (
                    409,
                    json!({"message": [format!("Another open merge request already exists for this source branch: !{}", p.number)]}),
                );
            }
            let title = body["title"].as_str().unwrap().to_string();
            let pr = Pr {
                number: s.prs.len() as u64 + 1,
                draft: title.starts_with("Draft: "),
                title,
                body: body["description"].as_str().unwrap_or_default().into(),
                head,
                base,
                state: "opened",
            };
            s.prs.push(pr.clone());
            (201, gitlab_mr(&pr, bare, ci))
        }
        ("GET", ["merge_requests"]) => {
            let head = query(url, "source_branch");
            let state = query(url, "state").unwrap_or_else(|| "all".into());
            let list: Vec<Value> = s
                .prs
                .iter()
                .filter(|p| head.as_ref().is_none_or(|h| *h == p.head))
                .filter(|p| state == "all" || state == p.state)
                .map(|p| gitlab_mr(p, bare, ci))
                .collect();
            (200, Value::Array(list))
        }
        ("GET", ["merge_requests", n]) => match s.prs.iter().find(|p| p.number.to_string() == *n) {
            Some(p) => (200, gitlab_mr(p, bare, ci)),
            None => (404, json!({"message": "404 Not found"})),
        },
        ("PUT", ["merge_requests", n]) => {
            let Some(i) = s.prs.iter().position(|p| p.number.to_string() == *n) else {
                return (404, json!({"message": "404 Not found"}));
            };
            if let Some(t) = body["target_branch"].as_str() {
                s.prs[i].base = t.into();
            }
            if let Some(t) = body["title"].as_str() {
                s.prs[i].draft = t.starts_with("Draft: ");
                s.prs[i].title = t.into();
            }
            if let Some(d) = body["description"].as_str() {
                s.prs[i].body = d.into();
            }
            (200, gitlab_mr(&s.prs[i], bare, ci))
        }
        _ => (404, json!({"message": "404 Not found"})),
    }
}
