//! Asking the forge, over `ureq`: the token and the forge's fixed headers
//! added, every request bounded by `deliver.timeout`, a rate limit waited
//! out when the forge says when (`Retry-After`, GitHub's
//! `x-ratelimit-reset`) and that is soon, else reported.

use std::time::Duration;

use serde_json::Value;

use super::forge::{self, Ask, ForgeError, Method};
use super::target::{Forge, Target};
use super::token::Token;

/// The longest rate-limit wait ralph sits through; a longer one ends the
/// delivery, with the command that retries it.
pub const MAX_RATE_WAIT: Duration = Duration::from_secs(60);
/// Rate-limit waits per request.
const RATE_TRIES: u32 = 2;

pub struct Client {
    agent: ureq::Agent,
    pub target: Target,
    token: Token,
    timeout: Duration,
}

/// An answer: its status, headers (lower-case names) and JSON body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Client {
    pub fn new(target: Target, token: Token, timeout: Duration) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .user_agent(concat!("ralph/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Client { agent, target, token, timeout }
    }

    fn forge(&self) -> Forge {
        self.target.forge
    }

    /// The JSON the forge answered `ask` with, rate limits waited out when short.
    pub fn ask(&self, ask: &Ask) -> Result<Value, ForgeError> {
        let call = forge::call(&self.target, ask);
        let mut tries = 0;
        loop {
            let a = self.send(&call)?;
            if (200..300).contains(&a.status) {
                return Ok(a.body);
            }
            let header =
                |name: &str| a.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            let now = chrono::Utc::now().timestamp().max(0) as u64;
            let e = forge::error(self.forge(), a.status, &header, &a.body, now);
            match e {
                ForgeError::RateLimited { retry_after: Some(s), .. }
                    if tries < RATE_TRIES && Duration::from_secs(s) <= MAX_RATE_WAIT =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_secs(s.max(1)));
                }
                e => return Err(e),
            }
        }
    }

    fn send(&self, call: &forge::Call) -> Result<Answer, ForgeError> {
        let name = self.forge().name();
        let secret = self.token.secret();
        let auth: (&str, String) = match self.forge() {
            Forge::GitHub => ("Authorization", format!("Bearer {secret}")),
            Forge::GitLab => ("PRIVATE-TOKEN", secret.to_string()),
        };
        let accept = match self.forge() {
            Forge::GitHub => "application/vnd.github+json",
            Forge::GitLab => "application/json",
        };
        let result = match (call.method, &call.body) {
            (Method::Get, _) => {
                let mut r =
                    self.agent.get(&call.url).header(auth.0, &auth.1).header("Accept", accept);
                if self.forge() == Forge::GitHub {
                    r = r.header("X-GitHub-Api-Version", "2022-11-28");
                }
                r.call()
            }
            (method, body) => {
                let mut r = match method {
                    Method::Post => self.agent.post(&call.url),
                    Method::Patch => self.agent.patch(&call.url),
                    _ => self.agent.put(&call.url),
                }
                .header(auth.0, &auth.1)
                .header("Accept", accept)
                .header("Content-Type", "application/json");
                if self.forge() == Forge::GitHub {
                    r = r.header("X-GitHub-Api-Version", "2022-11-28");
                }
                let text = body.as_ref().map(Value::to_string).unwrap_or_default();
                r.send(text.as_str())
            }
        };
        let mut response = result.map_err(|e| ForgeError::Unreachable {
            forge: name,
            why: match e {
                ureq::Error::Timeout(_) => {
                    format!("no answer within {}", humantime::format_duration(self.timeout))
                }
                e => self.token.redactor().text(&e.to_string()).into_owned(),
            },
        })?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_string()))
            })
            .collect();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(_) if !(200..300).contains(&status) => Value::Null,
                Err(e) => {
                    return Err(ForgeError::Unreadable {
                        forge: name,
                        why: format!("not JSON ({e})"),
                    });
                }
            }
        };
        Ok(Answer { status, headers, body })
    }
}
