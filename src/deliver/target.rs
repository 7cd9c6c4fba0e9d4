//! Where pull requests go, from the remote's URL and the settings (pure):
//! which forge, which repository on it, and the base URL of its REST API.
//!
//! ```text
//! https://github.com/acme/app.git      github  acme/app          https://api.github.com
//! git@github.com:acme/app.git          github  acme/app          https://api.github.com
//! https://gitlab.com/g/sub/app.git     gitlab  g/sub/app         https://gitlab.com/api/v4
//! ssh://git@gitlab.corp:2222/g/app     gitlab  g/app             https://gitlab.corp/api/v4
//! https://ghe.corp/acme/app + github   github  acme/app          https://ghe.corp/api/v3
//! ```
//!
//! A host that names neither forge needs `deliver.forge`; `deliver.repo`
//! and `deliver.api` replace what the URL says (a self-hosted forge behind
//! another name, a test's local server).

use serde::{Deserialize, Serialize};

/// The forges ralph opens pull requests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Forge {
    GitHub,
    GitLab,
}

impl Forge {
    pub fn name(self) -> &'static str {
        match self {
            Forge::GitHub => "GitHub",
            Forge::GitLab => "GitLab",
        }
    }

    /// What the forge calls what ralph opens.
    pub fn noun(self) -> &'static str {
        match self {
            Forge::GitHub => "pull request",
            Forge::GitLab => "merge request",
        }
    }
}

/// `deliver.forge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeSetting {
    Auto,
    Is(Forge),
}

/// The forge, the repository on it and its API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub forge: Forge,
    /// `owner/name` on GitHub; the project's full path on GitLab.
    pub repo: String,
    /// The REST API's base URL, without a trailing `/`.
    pub api: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("cannot tell which forge {host} is: set deliver.forge to github or gitlab")]
    UnknownForge { host: String },
    #[error(
        "cannot read a host and a repository from the remote's URL `{url}`: set deliver.repo (and deliver.api)"
    )]
    NoRepo { url: String },
    #[error("`{repo}` is not a repository on GitHub, which names them owner/name (deliver.repo)")]
    NotOwnerName { repo: String },
    #[error("the remote's URL `{url}` has no host to reach the API on: set deliver.api")]
    NoApi { url: String },
}

impl TargetError {
    /// The error with every secret `r` knows replaced (a remote's URL may
    /// carry credentials).
    pub fn redacted(self, r: &crate::redact::Redactor) -> TargetError {
        let t = |s: String| r.text(&s).into_owned();
        match self {
            TargetError::UnknownForge { host } => TargetError::UnknownForge { host: t(host) },
            TargetError::NoRepo { url } => TargetError::NoRepo { url: t(url) },
            TargetError::NotOwnerName { repo } => TargetError::NotOwnerName { repo: t(repo) },
            TargetError::NoApi { url } => TargetError::NoApi { url: t(url) },
        }
    }
}

/// The parts of a remote URL: scheme (`ssh` for the scp-like form), host,
/// path without `.git`.
fn split(url: &str) -> Option<(&str, &str, &str)> {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (s, r),
        // scp-like: [user@]host:path (not a local path with a colon later on).
        None => {
            let (host, path) = url.split_once(':')?;
            if host.contains('/') || host.is_empty() {
                return None;
            }
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            return Some(("ssh", host, clean(path)));
        }
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // The port is the git server's (ssh, git daemon), never the API's.
    let host = host.split_once(':').map_or(host, |(h, _)| h);
    Some((scheme, host, clean(path)))
}

fn clean(path: &str) -> &str {
    let p = path.trim_matches('/');
    p.strip_suffix(".git").unwrap_or(p).trim_end_matches('/')
}

/// Where pull requests for the remote at `url` go.
pub fn target(
    url: &str,
    forge: ForgeSetting,
    repo: Option<&str>,
    api: Option<&str>,
) -> Result<Target, TargetError> {
    let parts = split(url).filter(|(_, host, _)| !host.is_empty());
    let host = parts.map(|(_, h, _)| h.to_ascii_lowercase());
    let forge = match (forge, host.as_deref()) {
        (ForgeSetting::Is(f), _) => f,
        (ForgeSetting::Auto, Some(h)) if h == "github.com" || h.ends_with(".github.com") => {
            Forge::GitHub
        }
        (ForgeSetting::Auto, Some(h)) if h.split(['.', '-']).any(|w| w == "gitlab") => {
            Forge::GitLab
        }
        (ForgeSetting::Auto, h) => {
            return Err(TargetError::UnknownForge {
                host: h.map_or_else(|| format!("the remote `{url}`"), str::to_string),
            });
        }
    };
    let repo = match repo.map(|r| r.trim().trim_matches('/')).filter(|r| !r.is_empty()) {
        Some(r) => r.to_string(),
        None => match parts {
            Some((_, _, path)) if !path.is_empty() => path.to_string(),
            _ => return Err(TargetError::NoRepo { url: url.into() }),
        },
    };
    if forge == Forge::GitHub && repo.split('/').filter(|s| !s.is_empty()).count() != 2 {
        return Err(TargetError::NotOwnerName { repo });
    }
    let api = match api.map(str::trim).filter(|a| !a.is_empty()) {
        Some(a) => a.trim_end_matches('/').to_string(),
        None => {
            let Some((scheme, _, _)) = parts else {
                return Err(TargetError::NoApi { url: url.into() });
            };
            let host = host.unwrap_or_default();
            // An http remote is a forge served over http; everything else
            // (ssh, git, https) has its API over https.
            let scheme = if scheme == "http" { "http" } else { "https" };
            match forge {
                Forge::GitHub if host == "github.com" => "https://api.github.com".to_string(),
                Forge::GitHub => format!("{scheme}://{host}/api/v3"),
                Forge::GitLab => format!("{scheme}://{host}/api/v4"),
            }
        }
    };
    Ok(Target { forge, repo, api })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_name_the_forge_the_repository_and_the_api() {
        use Forge::*;
        use ForgeSetting::{Auto, Is};
        let ok = |forge: Forge, repo: &str, api: &str| {
            Ok(Target { forge, repo: repo.into(), api: api.into() })
        };
        let cases: Vec<(
            &str,
            ForgeSetting,
            Option<&str>,
            Option<&str>,
            Result<Target, TargetError>,
        )> = vec![
            (
                "https://github.com/acme/app.git",
                Auto,
                None,
                None,
                ok(GitHub, "acme/app", "https://api.github.com"),
            ),
            (
                "https://github.com/acme/app",
                Auto,
                None,
                None,
                ok(GitHub, "acme/app", "https://api.github.com"),
            ),
            (
                "git@github.com:acme/app.git",
                Auto,
                None,
                None,
                ok(GitHub, "acme/app", "https://api.github.com"),
            ),
            (
                "ssh://git@github.com/acme/app.git/",
                Auto,
                None,
                None,
                ok(GitHub, "acme/app", "https://api.github.com"),
            ),
            (
                "https://x-access-token:s3cret@github.com/acme/app.git",
                Auto,
                None,
                None,
                ok(GitHub, "acme/app", "https://api.github.com"),
            ),
            (
                "https://gitlab.com/g/sub/app.git",
                Auto,
                None,
                None,
                ok(GitLab, "g/sub/app", "https://gitlab.com/api/v4"),
            ),
            (
                "ssh://git@gitlab.corp.example:2222/g/app",
                Auto,
                None,
                None,
                ok(GitLab, "g/app", "https://gitlab.corp.example/api/v4"),
            ),
            (
                "git@my-gitlab.example:team/app.git",
                Auto,
                None,
                None,
                ok(GitLab, "team/app", "https://my-gitlab.example/api/v4"),
            ),
            (
                "http://gitlab.local/g/app.git",
                Auto,
                None,
                None,
                ok(GitLab, "g/app", "http://gitlab.local/api/v4"),
            ),
            // GitHub Enterprise: named, its API under /api/v3.
            (
                "https://ghe.corp.example/acme/app.git",
                Is(GitHub),
                None,
                None,
                ok(GitHub, "acme/app", "https://ghe.corp.example/api/v3"),
            ),
            (
                "https://ghe.corp.example/acme/app.git",
                Auto,
                None,
                None,
                Err(TargetError::UnknownForge { host: "ghe.corp.example".into() }),
            ),
            // A test's git daemon and its forge on other ports.
            (
                "git://127.0.0.1:9418/app.git",
                Is(GitHub),
                Some("acme/app"),
                Some("http://127.0.0.1:8080/"),
                ok(GitHub, "acme/app", "http://127.0.0.1:8080"),
            ),
            (
                "git://127.0.0.1:9418/app.git",
                Is(GitLab),
                Some("/g/app/"),
                Some("http://127.0.0.1:8080/api/v4"),
                ok(GitLab, "g/app", "http://127.0.0.1:8080/api/v4"),
            ),
            (
                "/srv/git/app.git",
                Is(GitHub),
                Some("acme/app"),
                None,
                Err(TargetError::NoApi { url: "/srv/git/app.git".into() }),
            ),
            (
                "/srv/git/app.git",
                Is(GitHub),
                None,
                Some("http://h"),
                Err(TargetError::NoRepo { url: "/srv/git/app.git".into() }),
            ),
            (
                "https://github.com/acme",
                Auto,
                None,
                None,
                Err(TargetError::NotOwnerName { repo: "acme".into() }),
            ),
            (
                "https://github.com/",
                Auto,
                None,
                None,
                Err(TargetError::NoRepo { url: "https://github.com/".into() }),
            ),
            (
                "https://github.com/a/b.git",
                Auto,
                Some("c/d"),
                None,
                ok(GitHub, "c/d", "https://api.github.com"),
            ),
        ];
        for (url, forge, repo, api, want) in cases {
            assert_eq!(target(url, forge, repo, api), want, "{url} {forge:?} {repo:?} {api:?}");
        }
    }
}
