//! GitHub's and GitLab's REST shapes (pure): the request for each thing
//! ralph asks a forge, the pull request read back from its answer, and an
//! answer that is not a success turned into a [`ForgeError`].
//!
//! ```text
//!               GitHub (REST v3, 2022-11-28)               GitLab (REST v4)
//! find open     GET  /repos/O/R/pulls?head=O:B&state=open  GET /projects/ID/merge_requests?source_branch=B&state=opened
//! create        POST /repos/O/R/pulls                      POST /projects/ID/merge_requests
//!                 title, head, base, body, draft             source_branch, target_branch, title, description
//! update        PATCH /repos/O/R/pulls/N                   PUT /projects/ID/merge_requests/IID
//! retarget      PATCH …/pulls/N  base                      PUT …/merge_requests/IID  target_branch
//! ready         GraphQL markPullRequestReadyForReview      the title without "Draft: "
//!                 (answers 200; a failure is in `errors`)
//! get           GET  /repos/O/R/pulls/N                    GET /projects/ID/merge_requests/IID (head_pipeline)
//! CI            GET  /repos/O/R/commits/SHA/status         (the merge request's head_pipeline)
//! comments      GET  /repos/O/R/issues/N/comments          GET /projects/ID/merge_requests/IID/notes
//! already one   422 "A pull request already exists for …"  409 "Another open merge request already exists …"
//! auth          Authorization: Bearer T                    PRIVATE-TOKEN: T
//! ```
//!
//! GitLab marks a draft by its title (`Draft: …`); GitHub has a field at
//! creation and a GraphQL mutation to make it ready (its REST API has none).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::target::{Forge, Target};

/// An HTTP method ralph uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Patch,
    Put,
}

/// One request, before the token and the forge's fixed headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: Method,
    pub url: String,
    pub body: Option<Value>,
}

/// Where a pull request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrState {
    Open,
    Merged,
    Closed,
}

/// The CI's verdict on a pull request's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ci {
    Pending,
    Success,
    Failure,
}

/// A pull request (a merge request on GitLab) as the forge describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pr {
    /// GitHub's number, GitLab's iid.
    pub number: u64,
    pub url: String,
    pub state: PrState,
    pub draft: bool,
    pub head: String,
    pub base: String,
    /// GitHub's node id, for its GraphQL API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// GitLab gives the pipeline with the merge request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<Ci>,
}

/// What ralph asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask<'a> {
    /// The open pull request from `head`, if any.
    FindOpen {
        head: &'a str,
    },
    Create {
        head: &'a str,
        base: &'a str,
        title: &'a str,
        body: &'a str,
        draft: bool,
    },
    /// Title, description and base; on GitLab the title says whether it is a draft.
    Update {
        number: u64,
        base: &'a str,
        title: &'a str,
        body: &'a str,
        draft: bool,
    },
    /// Its base only (a stacked pull request whose place moved).
    Retarget {
        number: u64,
        base: &'a str,
    },
    /// Out of draft (GitHub; on GitLab an [`Ask::Update`] does it).
    Ready {
        node_id: &'a str,
    },
    Get {
        number: u64,
    },
    /// The combined commit status of `sha` (GitHub).
    Status {
        sha: &'a str,
    },
    /// Its comments (GitHub: the issue's, oldest first; GitLab: the notes, newest first).
    Comments {
        number: u64,
    },
}

/// Why the forge did not do what ralph asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    #[error("{forge} refused the token (401{})", detail(.message))]
    Unauthorized { forge: &'static str, message: String },
    #[error("{forge} forbade it (403{}): the token may lack the scope to open pull requests", detail(.message))]
    Forbidden { forge: &'static str, message: String },
    #[error("{forge} is rate-limiting ralph{}", match .retry_after { Some(s) => format!(" (retry after {s}s)"), None => String::new() })]
    RateLimited { forge: &'static str, retry_after: Option<u64> },
    #[error("{forge} already has an open {noun} from this branch")]
    AlreadyExists { forge: &'static str, noun: &'static str },
    #[error("{forge} refused the request ({status}{})", detail(.message))]
    Invalid { forge: &'static str, status: u16, message: String },
    #[error("{forge} does not know the repository, or the token cannot see it (404)")]
    NotFound { forge: &'static str },
    #[error("{forge} failed (HTTP {status})")]
    Server { forge: &'static str, status: u16 },
    #[error("cannot reach {forge}'s API: {why}")]
    Unreachable { forge: &'static str, why: String },
    #[error("{forge} answered something ralph cannot read: {why}")]
    Unreadable { forge: &'static str, why: String },
    /// GitHub's GraphQL said no to "ready for review" (its answer is a 200
    /// with `errors`), or there was no node id to ask it with.
    #[error("{forge} did not mark it ready for review{}", detail(.message))]
    NotReady { forge: &'static str, message: String },
}

fn detail(message: &str) -> String {
    if message.is_empty() { String::new() } else { format!(": {message}") }
}

impl ForgeError {
    /// The error with every secret `r` knows replaced in the forge's words.
    pub fn redacted(self, r: &crate::redact::Redactor) -> ForgeError {
        use ForgeError::*;
        let t = |s: String| r.text(&s).into_owned();
        match self {
            Unauthorized { forge, message } => Unauthorized { forge, message: t(message) },
            Forbidden { forge, message } => Forbidden { forge, message: t(message) },
            Invalid { forge, status, message } => Invalid { forge, status, message: t(message) },
            Unreachable { forge, why } => Unreachable { forge, why: t(why) },
            Unreadable { forge, why } => Unreadable { forge, why: t(why) },
            NotReady { forge, message } => NotReady { forge, message: t(message) },
            e @ (RateLimited { .. } | AlreadyExists { .. } | NotFound { .. } | Server { .. }) => e,
        }
    }

    /// Whether later requests would meet the same refusal: delivery stops
    /// instead of failing request after request.
    pub fn stops_delivery(&self) -> bool {
        !matches!(
            self,
            ForgeError::AlreadyExists { .. }
                | ForgeError::Invalid { .. }
                | ForgeError::NotReady { .. }
        )
    }
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// GitLab's draft marker, at the start of the title.
const DRAFT: &str = "Draft: ";

/// GitHub's GraphQL endpoint beside its REST API.
fn graphql(api: &str) -> String {
    match api.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api/graphql"),
        None => format!("{api}/graphql"),
    }
}

/// The request for `ask` on `t`'s forge.
pub fn call(t: &Target, ask: &Ask) -> Call {
    match t.forge {
        Forge::GitHub => github_call(t, ask),
        Forge::GitLab => gitlab_call(t, ask),
    }
}

fn get(url: String) -> Call {
    Call { method: Method::Get, url, body: None }
}

/// GitHub's REST API (and its GraphQL one for taking a draft out of draft).
/// One arm per ask.
fn github_call(t: &Target, ask: &Ask) -> Call {
    let repo = format!("{}/repos/{}", t.api, t.repo);
    let owner = t.repo.split('/').next().unwrap_or_default();
    match *ask {
        Ask::FindOpen { head } => {
            get(format!("{repo}/pulls?head={}&state=open", enc(&format!("{owner}:{head}"))))
        }
        Ask::Create { head, base, title, body, draft } => Call {
            method: Method::Post,
            url: format!("{repo}/pulls"),
            body: Some(json!({
                "title": title, "head": head, "base": base, "body": body, "draft": draft,
                "maintainer_can_modify": true,
            })),
        },
        Ask::Update { number, base, title, body, .. } => Call {
            method: Method::Patch,
            url: format!("{repo}/pulls/{number}"),
            body: Some(json!({ "title": title, "body": body, "base": base })),
        },
        Ask::Retarget { number, base } => Call {
            method: Method::Patch,
            url: format!("{repo}/pulls/{number}"),
            body: Some(json!({ "base": base })),
        },
        Ask::Ready { node_id } => Call {
            method: Method::Post,
            url: graphql(&t.api),
            body: Some(json!({
                "query": "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft } } }",
                "variables": { "id": node_id },
            })),
        },
        Ask::Get { number } => get(format!("{repo}/pulls/{number}")),
        Ask::Status { sha } => get(format!("{repo}/commits/{sha}/status")),
        Ask::Comments { number } => get(format!("{repo}/issues/{number}/comments?per_page=100")),
    }
}

/// GitLab's merge requests API; a draft is a title prefix. One arm per ask.
fn gitlab_call(t: &Target, ask: &Ask) -> Call {
    let mrs = format!("{}/projects/{}/merge_requests", t.api, enc(&t.repo));
    let title = |title: &str, draft: bool| {
        if draft { format!("{DRAFT}{title}") } else { title.to_string() }
    };
    match *ask {
        Ask::FindOpen { head } => get(format!("{mrs}?source_branch={}&state=opened", enc(head))),
        Ask::Create { head, base, title: t, body, draft } => Call {
            method: Method::Post,
            url: mrs,
            body: Some(json!({
                "source_branch": head, "target_branch": base,
                "title": title(t, draft), "description": body,
            })),
        },
        Ask::Update { number, base, title: t, body, draft } => Call {
            method: Method::Put,
            url: format!("{mrs}/{number}"),
            body: Some(json!({
                "title": title(t, draft), "description": body, "target_branch": base,
            })),
        },
        Ask::Retarget { number, base } => Call {
            method: Method::Put,
            url: format!("{mrs}/{number}"),
            body: Some(json!({ "target_branch": base })),
        },
        // Never asked of GitLab: its Update carries the draft.
        Ask::Ready { .. } => get(mrs),
        Ask::Get { number } => get(format!("{mrs}/{number}")),
        Ask::Status { .. } => get(mrs),
        Ask::Comments { number } => {
            get(format!("{mrs}/{number}/notes?sort=desc&order_by=created_at"))
        }
    }
}

fn unreadable(forge: Forge, why: impl Into<String>) -> ForgeError {
    ForgeError::Unreadable { forge: forge.name(), why: why.into() }
}

/// A pull request from the forge's JSON for one.
pub fn read_pr(forge: Forge, v: &Value) -> Result<Pr, ForgeError> {
    let s = |v: &Value| v.as_str().map(str::to_string);
    match forge {
        Forge::GitHub => {
            let number = v["number"].as_u64().ok_or_else(|| unreadable(forge, "no number"))?;
            let merged = v["merged"].as_bool() == Some(true) || v["merged_at"].is_string();
            let state = match (v["state"].as_str(), merged) {
                (_, true) => PrState::Merged,
                (Some("open"), _) => PrState::Open,
                (Some("closed"), _) => PrState::Closed,
                (other, _) => return Err(unreadable(forge, format!("state {other:?}"))),
            };
            Ok(Pr {
                number,
                url: s(&v["html_url"]).unwrap_or_default(),
                state,
                draft: v["draft"].as_bool().unwrap_or(false),
                head: s(&v["head"]["ref"]).unwrap_or_default(),
                base: s(&v["base"]["ref"]).unwrap_or_default(),
                node_id: s(&v["node_id"]),
                ci: None,
            })
        }
        Forge::GitLab => {
            let number = v["iid"].as_u64().ok_or_else(|| unreadable(forge, "no iid"))?;
            let state = match v["state"].as_str() {
                Some("opened") | Some("locked") => PrState::Open,
                Some("merged") => PrState::Merged,
                Some("closed") => PrState::Closed,
                other => return Err(unreadable(forge, format!("state {other:?}"))),
            };
            let title = v["title"].as_str().unwrap_or_default();
            let draft = v["draft"].as_bool().or(v["work_in_progress"].as_bool()).unwrap_or(false)
                || title.starts_with(DRAFT);
            Ok(Pr {
                number,
                url: s(&v["web_url"]).unwrap_or_default(),
                state,
                draft,
                head: s(&v["source_branch"]).unwrap_or_default(),
                base: s(&v["target_branch"]).unwrap_or_default(),
                node_id: None,
                ci: v["head_pipeline"]["status"].as_str().and_then(gitlab_ci),
            })
        }
    }
}

/// A GitLab pipeline's status as a verdict (`None`: nothing to say, such
/// as a skipped or manual pipeline).
fn gitlab_ci(status: &str) -> Option<Ci> {
    match status {
        "success" => Some(Ci::Success),
        "failed" | "canceled" => Some(Ci::Failure),
        "created" | "waiting_for_resource" | "preparing" | "pending" | "running" | "scheduled" => {
            Some(Ci::Pending)
        }
        _ => None,
    }
}

/// The last comment a person wrote (GitLab's system notes, such as "closed",
/// are not one), from [`Ask::Comments`]'s answer.
pub fn last_comment(forge: Forge, v: &Value) -> Option<String> {
    let list = v.as_array()?;
    let person = |c: &&Value| c["system"].as_bool() != Some(true);
    let c = match forge {
        Forge::GitHub => list.iter().rev().find(person),
        Forge::GitLab => list.iter().find(person),
    }?;
    c["body"].as_str().map(str::trim).filter(|b| !b.is_empty()).map(str::to_string)
}

/// GitHub's answer to [`Ask::Ready`]. GraphQL answers 200 whatever
/// happened: a refusal is in its `errors` (a rate limit among them), and
/// only a pull request said to be out of draft is one.
pub fn read_ready(forge: Forge, v: &Value) -> Result<(), ForgeError> {
    let name = forge.name();
    if let Some(errors) = v["errors"].as_array().filter(|e| !e.is_empty()) {
        if errors.iter().any(|e| e["type"] == "RATE_LIMITED") {
            return Err(ForgeError::RateLimited { forge: name, retry_after: None });
        }
        return Err(ForgeError::NotReady { forge: name, message: message(v) });
    }
    match v["data"]["markPullRequestReadyForReview"]["pullRequest"]["isDraft"].as_bool() {
        Some(false) => Ok(()),
        Some(true) => {
            Err(ForgeError::NotReady { forge: name, message: "it is still a draft".into() })
        }
        None => Err(unreadable(forge, "no pull request in the answer to \"ready for review\"")),
    }
}

/// GitHub's combined status (`None`: no status was ever set).
pub fn read_status(v: &Value) -> Option<Ci> {
    if v["total_count"].as_u64() == Some(0) {
        return None;
    }
    match v["state"].as_str()? {
        "success" => Some(Ci::Success),
        "failure" | "error" => Some(Ci::Failure),
        "pending" => Some(Ci::Pending),
        _ => None,
    }
}

/// An answer that is not a success, as an error. `header` reads one of the
/// answer's headers; `now` is the Unix time (GitHub's rate limit resets at
/// an instant, `x-ratelimit-reset`).
pub fn error(
    forge: Forge,
    status: u16,
    header: &dyn Fn(&str) -> Option<String>,
    body: &Value,
    now: u64,
) -> ForgeError {
    let name = forge.name();
    let message = message(body);
    let retry_after = header("retry-after").and_then(|v| v.trim().parse::<u64>().ok());
    let exhausted = header("x-ratelimit-remaining").is_some_and(|v| v.trim() == "0");
    let reset = header("x-ratelimit-reset")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|at| at.saturating_sub(now));
    match status {
        401 => ForgeError::Unauthorized { forge: name, message },
        // GitHub answers its limits, primary and secondary, with 403 or 429.
        403 | 429 if retry_after.is_some() || exhausted || status == 429 => {
            ForgeError::RateLimited { forge: name, retry_after: retry_after.or(reset) }
        }
        403 => ForgeError::Forbidden { forge: name, message },
        404 => ForgeError::NotFound { forge: name },
        409 if forge == Forge::GitLab && message.contains("already exists") => {
            ForgeError::AlreadyExists { forge: name, noun: forge.noun() }
        }
        422 if forge == Forge::GitHub && message.contains("already exists") => {
            ForgeError::AlreadyExists { forge: name, noun: forge.noun() }
        }
        500..=599 => ForgeError::Server { forge: name, status },
        _ => ForgeError::Invalid { forge: name, status, message },
    }
}

/// The forge's words for an error: GitHub's `message` and each of its
/// `errors`' `message`; GitLab's `message` (a string, a list, or a map of
/// field → list) or `error`.
fn message(body: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    let take = |parts: &mut Vec<String>, v: &Value| match v {
        Value::String(s) => parts.push(s.clone()),
        Value::Array(a) => parts.extend(a.iter().filter_map(|x| x.as_str().map(str::to_string))),
        Value::Object(m) => {
            for (k, v) in m {
                let words: Vec<&str> = match v {
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    Value::String(s) => vec![s.as_str()],
                    _ => Vec::new(),
                };
                parts.push(format!("{k} {}", words.join(", ")));
            }
        }
        _ => {}
    };
    take(&mut parts, &body["message"]);
    take(&mut parts, &body["error"]);
    if let Some(errors) = body["errors"].as_array() {
        for e in errors {
            match e {
                Value::String(s) => parts.push(s.clone()),
                e => take(&mut parts, &e["message"]),
            }
        }
    }
    let text = parts.join("; ");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gh() -> Target {
        Target {
            forge: Forge::GitHub,
            repo: "acme/app".into(),
            api: "https://api.github.com".into(),
        }
    }

    fn gl() -> Target {
        Target {
            forge: Forge::GitLab,
            repo: "g/sub/app".into(),
            api: "https://gitlab.com/api/v4".into(),
        }
    }

    #[test]
    fn each_ask_is_the_request_the_forges_document() {
        let create =
            Ask::Create { head: "ralph/x", base: "main", title: "T", body: "B", draft: true };
        let update = Ask::Update { number: 7, base: "main", title: "T", body: "B", draft: false };
        let cases: Vec<(Target, Ask, Method, &str, Option<Value>)> = vec![
            (
                gh(),
                Ask::FindOpen { head: "ralph/x" },
                Method::Get,
                "https://api.github.com/repos/acme/app/pulls?head=acme%3Aralph%2Fx&state=open",
                None,
            ),
            (
                gh(),
                create.clone(),
                Method::Post,
                "https://api.github.com/repos/acme/app/pulls",
                Some(
                    json!({"title": "T", "head": "ralph/x", "base": "main", "body": "B", "draft": true, "maintainer_can_modify": true}),
                ),
            ),
            (
                gh(),
                update.clone(),
                Method::Patch,
                "https://api.github.com/repos/acme/app/pulls/7",
                Some(json!({"title": "T", "body": "B", "base": "main"})),
            ),
            (
                gh(),
                Ask::Retarget { number: 7, base: "ralph/x-stories/US-1" },
                Method::Patch,
                "https://api.github.com/repos/acme/app/pulls/7",
                Some(json!({"base": "ralph/x-stories/US-1"})),
            ),
            (
                gl(),
                Ask::Retarget { number: 7, base: "ralph/x-stories/US-1" },
                Method::Put,
                "https://gitlab.com/api/v4/projects/g%2Fsub%2Fapp/merge_requests/7",
                Some(json!({"target_branch": "ralph/x-stories/US-1"})),
            ),
            (
                gh(),
                Ask::Get { number: 7 },
                Method::Get,
                "https://api.github.com/repos/acme/app/pulls/7",
                None,
            ),
            (
                gh(),
                Ask::Status { sha: "abc" },
                Method::Get,
                "https://api.github.com/repos/acme/app/commits/abc/status",
                None,
            ),
            (
                gl(),
                Ask::FindOpen { head: "ralph/x" },
                Method::Get,
                "https://gitlab.com/api/v4/projects/g%2Fsub%2Fapp/merge_requests?source_branch=ralph%2Fx&state=opened",
                None,
            ),
            (
                gl(),
                create,
                Method::Post,
                "https://gitlab.com/api/v4/projects/g%2Fsub%2Fapp/merge_requests",
                Some(
                    json!({"source_branch": "ralph/x", "target_branch": "main", "title": "Draft: T", "description": "B"}),
                ),
            ),
            (
                gl(),
                update,
                Method::Put,
                "https://gitlab.com/api/v4/projects/g%2Fsub%2Fapp/merge_requests/7",
                Some(json!({"title": "T", "description": "B", "target_branch": "main"})),
            ),
            (
                gl(),
                Ask::Get { number: 7 },
                Method::Get,
                "https://gitlab.com/api/v4/projects/g%2Fsub%2Fapp/merge_requests/7",
                None,
            ),
        ];
        for (t, ask, method, url, body) in cases {
            let c = call(&t, &ask);
            assert_eq!((c.method, c.url.as_str(), c.body), (method, url, body), "{ask:?}");
        }
        let ready = call(&gh(), &Ask::Ready { node_id: "PR_1" });
        assert_eq!(ready.url, "https://api.github.com/graphql");
        assert_eq!(ready.body.unwrap()["variables"]["id"], "PR_1");
        let ghe = Target { api: "https://ghe.corp/api/v3".into(), ..gh() };
        assert_eq!(call(&ghe, &Ask::Ready { node_id: "x" }).url, "https://ghe.corp/api/graphql");
    }

    #[test]
    fn pull_requests_are_read_from_either_forge() {
        let github = json!({"number": 3, "html_url": "https://github.com/acme/app/pull/3", "state": "open",
            "draft": true, "node_id": "PR_3", "head": {"ref": "h", "sha": "s"}, "base": {"ref": "main"}, "merged_at": null});
        let pr = read_pr(Forge::GitHub, &github).unwrap();
        assert_eq!(
            (pr.number, pr.state, pr.draft, pr.head.as_str(), pr.base.as_str()),
            (3, PrState::Open, true, "h", "main")
        );
        assert_eq!(pr.node_id.as_deref(), Some("PR_3"));
        let merged = json!({"number": 3, "state": "closed", "merged_at": "2026-01-01T00:00:00Z"});
        assert_eq!(read_pr(Forge::GitHub, &merged).unwrap().state, PrState::Merged);
        let closed = json!({"number": 3, "state": "closed", "merged_at": null});
        assert_eq!(read_pr(Forge::GitHub, &closed).unwrap().state, PrState::Closed);
        let gitlab = json!({"iid": 5, "web_url": "u", "state": "opened", "title": "Draft: T",
            "source_branch": "h", "target_branch": "main", "head_pipeline": {"status": "running"}});
        let mr = read_pr(Forge::GitLab, &gitlab).unwrap();
        assert_eq!(
            (mr.number, mr.state, mr.draft, mr.ci),
            (5, PrState::Open, true, Some(Ci::Pending))
        );
        for (state, want) in
            [("merged", PrState::Merged), ("closed", PrState::Closed), ("locked", PrState::Open)]
        {
            assert_eq!(
                read_pr(Forge::GitLab, &json!({"iid": 1, "state": state})).unwrap().state,
                want
            );
        }
        assert!(read_pr(Forge::GitHub, &json!({"message": "x"})).is_err());
        let gh_comments = json!([{"body": "first", "user": {"login": "a"}}, {"body": " use the helper ", "user": {"login": "b"}}]);
        assert_eq!(last_comment(Forge::GitHub, &gh_comments).as_deref(), Some("use the helper"));
        let gl_notes = json!([{"body": "closed", "system": true}, {"body": "use the helper", "system": false}, {"body": "old", "system": false}]);
        assert_eq!(last_comment(Forge::GitLab, &gl_notes).as_deref(), Some("use the helper"));
        assert_eq!(last_comment(Forge::GitHub, &json!([])), None);
        assert_eq!(read_status(&json!({"state": "success", "total_count": 2})), Some(Ci::Success));
        assert_eq!(read_status(&json!({"state": "pending", "total_count": 0})), None);
        assert_eq!(read_status(&json!({"state": "error", "total_count": 1})), Some(Ci::Failure));
    }

    #[test]
    fn refusals_become_typed_errors() {
        use ForgeError::*;
        let none = |_: &str| None;
        let h = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let exists_gh = json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:ralph/x."}]});
        let exists_gl = json!({"message": ["Another open merge request already exists for this source branch: !1"]});
        let cases: Vec<(Forge, u16, Box<dyn Fn(&str) -> Option<String>>, Value, ForgeError)> = vec![
            (
                Forge::GitHub,
                401,
                Box::new(none),
                json!({"message": "Bad credentials"}),
                Unauthorized { forge: "GitHub", message: "Bad credentials".into() },
            ),
            (
                Forge::GitLab,
                401,
                Box::new(none),
                json!({"message": "401 Unauthorized"}),
                Unauthorized { forge: "GitLab", message: "401 Unauthorized".into() },
            ),
            (
                Forge::GitHub,
                403,
                Box::new(none),
                json!({"message": "Resource not accessible by integration"}),
                Forbidden {
                    forge: "GitHub",
                    message: "Resource not accessible by integration".into(),
                },
            ),
            (
                Forge::GitHub,
                403,
                Box::new(h(&[("retry-after", "30")])),
                json!({"message": "You have exceeded a secondary rate limit"}),
                RateLimited { forge: "GitHub", retry_after: Some(30) },
            ),
            (
                Forge::GitHub,
                403,
                Box::new(h(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1060")])),
                json!({}),
                RateLimited { forge: "GitHub", retry_after: Some(60) },
            ),
            (
                Forge::GitHub,
                429,
                Box::new(none),
                json!({}),
                RateLimited { forge: "GitHub", retry_after: None },
            ),
            (
                Forge::GitLab,
                429,
                Box::new(h(&[("retry-after", "2")])),
                json!({"message": "Retry later"}),
                RateLimited { forge: "GitLab", retry_after: Some(2) },
            ),
            (
                Forge::GitHub,
                422,
                Box::new(none),
                exists_gh,
                AlreadyExists { forge: "GitHub", noun: "pull request" },
            ),
            (
                Forge::GitLab,
                409,
                Box::new(none),
                exists_gl,
                AlreadyExists { forge: "GitLab", noun: "merge request" },
            ),
            (
                Forge::GitHub,
                422,
                Box::new(none),
                json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": "base", "code": "invalid"}]}),
                Invalid { forge: "GitHub", status: 422, message: "Validation Failed".into() },
            ),
            (
                Forge::GitLab,
                400,
                Box::new(none),
                json!({"message": {"target_branch": ["is invalid"]}}),
                Invalid {
                    forge: "GitLab",
                    status: 400,
                    message: "target_branch is invalid".into(),
                },
            ),
            (
                Forge::GitHub,
                404,
                Box::new(none),
                json!({"message": "Not Found"}),
                NotFound { forge: "GitHub" },
            ),
            (
                Forge::GitLab,
                502,
                Box::new(none),
                json!({}),
                Server { forge: "GitLab", status: 502 },
            ),
        ];
        for (forge, status, header, body, want) in cases {
            assert_eq!(
                error(forge, status, &*header, &body, 1000),
                want,
                "{forge:?} {status} {body}"
            );
        }
        assert!(Unauthorized { forge: "GitHub", message: String::new() }.stops_delivery());
        assert!(!NotReady { forge: "GitHub", message: String::new() }.stops_delivery());
        assert!(!AlreadyExists { forge: "GitHub", noun: "pull request" }.stops_delivery());
    }

    #[test]
    fn ready_for_review_is_done_only_when_graphql_says_so() {
        use ForgeError::*;
        let not_ready = |m: &str| Err(NotReady { forge: "GitHub", message: m.into() });
        let done =
            json!({"data": {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": false}}}});
        let cases: Vec<(&str, Value, Result<(), ForgeError>)> = vec![
            ("done", done, Ok(())),
            (
                "refused",
                json!({"data": {"markPullRequestReadyForReview": null}, "errors": [
                    {"type": "UNPROCESSABLE", "message": "Pull request is in an unmergeable state"}]}),
                not_ready("Pull request is in an unmergeable state"),
            ),
            (
                "an unknown node",
                json!({"errors": [{"type": "NOT_FOUND", "message": "Could not resolve to a node with the global id of ''"}]}),
                not_ready("Could not resolve to a node with the global id of ''"),
            ),
            (
                "rate-limited",
                json!({"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded"}]}),
                Err(RateLimited { forge: "GitHub", retry_after: None }),
            ),
            (
                "still a draft",
                json!({"data": {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": true}}}}),
                not_ready("it is still a draft"),
            ),
            (
                "nothing said",
                json!({"data": null}),
                Err(Unreadable {
                    forge: "GitHub",
                    why: "no pull request in the answer to \"ready for review\"".into(),
                }),
            ),
        ];
        for (name, answer, want) in cases {
            assert_eq!(read_ready(Forge::GitHub, &answer), want, "{name}");
        }
    }

    #[test]
    fn the_forge_s_words_lose_the_token() {
        use ForgeError::*;
        let r = crate::redact::Redactor::new([("GH_TOKEN".into(), "tok-0123456789".into())]);
        let said = "no such token tok-0123456789".to_string();
        let (gh, m) = ("GitHub", || said.clone());
        for e in [
            Unauthorized { forge: gh, message: m() },
            Forbidden { forge: gh, message: m() },
            Invalid { forge: gh, status: 422, message: m() },
            Unreachable { forge: gh, why: m() },
            Unreadable { forge: gh, why: m() },
            NotReady { forge: gh, message: m() },
        ] {
            let text = e.clone().redacted(&r).to_string();
            assert!(
                !text.contains("tok-0123456789") && text.contains("[redacted GH_TOKEN]"),
                "{e:?}"
            );
        }
        let limited = RateLimited { forge: gh, retry_after: Some(3) };
        assert_eq!(limited.clone().redacted(&r), limited);
    }
}
