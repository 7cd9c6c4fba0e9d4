//! The token a forge is called with: from the environment (`GH_TOKEN`,
//! `GITHUB_TOKEN`; `GITLAB_TOKEN`), else from the forge's own CLI when it
//! is installed and logged in (`gh auth token`, `glab auth status -t`).
//!
//! A token lives in this process's memory only: it is never written to a
//! file, an event or a log, its `Debug` hides it, and the redactor that
//! cleans what ralph reports is given it (a token from a CLI is not in the
//! environment the redactor otherwise reads).

use std::process::Command;
use std::time::Duration;

use super::target::Forge;

/// How long `gh` or `glab` may take to say the token.
const CLI_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Token {
    value: String,
    /// Where it came from, for messages: `GITHUB_TOKEN`, `gh auth token`.
    pub source: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(from {}, hidden)", self.source)
    }
}

impl Token {
    pub(super) fn secret(&self) -> &str {
        &self.value
    }

    /// A redactor for what ralph reports while it uses this token.
    pub fn redactor(&self) -> crate::redact::Redactor {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        crate::redact::Redactor::new(
            env.chain([("RALPH_DELIVER_TOKEN".to_string(), self.value.clone())]),
        )
    }
}

/// The variables each forge's token is read from, in order (gh's own order).
pub fn variables(forge: Forge) -> &'static [&'static str] {
    match forge {
        Forge::GitHub => &["GH_TOKEN", "GITHUB_TOKEN"],
        Forge::GitLab => &["GITLAB_TOKEN"],
    }
}

/// The token for `forge` at `host` (the remote's host, for the CLIs).
pub fn find(
    forge: Forge,
    host: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Token> {
    for var in variables(forge) {
        if let Some(v) = env(var).map(|v| v.trim().to_string()).filter(|v| !v.is_empty()) {
            return Some(Token { value: v, source: (*var).to_string() });
        }
    }
    let host_args: Vec<String> =
        host.map(|h| vec!["--hostname".into(), h.into()]).unwrap_or_default();
    match forge {
        Forge::GitHub => {
            let mut args = vec!["auth".to_string(), "token".into()];
            args.extend(host_args);
            let out = run("gh", &args)?;
            let value = out.lines().map(str::trim).find(|l| !l.is_empty())?.to_string();
            Some(Token { value, source: "gh auth token".into() })
        }
        Forge::GitLab => {
            let mut args = vec!["auth".to_string(), "status".into(), "-t".into()];
            args.extend(host_args);
            let out = run("glab", &args)?;
            let value = glab_token(&out)?;
            Some(Token { value, source: "glab auth status -t".into() })
        }
    }
}

/// `glab auth status -t` says `✓ Token: glpat-…` among its lines (on stderr).
fn glab_token(out: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.split_once("Token:").map(|(_, t)| t.trim().to_string()))
        .filter(|t| !t.is_empty() && !t.contains(' ') && !t.chars().all(|c| c == '*'))
}

/// The program's stdout and stderr, if it ran (found on PATH), succeeded and
/// ended within [`CLI_TIMEOUT`]; never through a shell.
fn run(program: &str, args: &[String]) -> Option<String> {
    let path = which::which(program).ok()?;
    let mut cmd = Command::new(path);
    cmd.args(args).env("GH_PROMPT_DISABLED", "1").env("NO_COLOR", "1");
    let done = crate::agent::supervise::run_brief(&mut cmd, CLI_TIMEOUT).ok()?;
    done.success().then(|| format!("{}\n{}", done.stdout, done.stderr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_comes_first_in_gh_s_order() {
        let env = |k: &str| match k {
            "GH_TOKEN" => Some(" gh-token-value ".to_string()),
            "GITHUB_TOKEN" => Some("github-token-value".to_string()),
            "GITLAB_TOKEN" => Some("glpat-value".to_string()),
            _ => None,
        };
        let t = find(Forge::GitHub, None, &env).unwrap();
        assert_eq!((t.secret(), t.source.as_str()), ("gh-token-value", "GH_TOKEN"));
        assert!(!format!("{t:?}").contains("gh-token-value"));
        let t = find(Forge::GitLab, None, &env).unwrap();
        assert_eq!((t.secret(), t.source.as_str()), ("glpat-value", "GITLAB_TOKEN"));
        let only = |k: &str| (k == "GITHUB_TOKEN").then(|| "github-token-value".to_string());
        assert_eq!(find(Forge::GitHub, None, &only).unwrap().source, "GITHUB_TOKEN");
    }

    #[test]
    fn glab_says_the_token_among_its_lines() {
        let out = "gitlab.com\n  ✓ Logged in to gitlab.com as me\n  ✓ Token: glpat-abcdefghij0123456789\n";
        assert_eq!(glab_token(out).as_deref(), Some("glpat-abcdefghij0123456789"));
        assert_eq!(glab_token("  ✓ Token: **************************\n"), None);
        assert_eq!(glab_token("x Not logged in\n"), None);
    }

    #[test]
    fn the_redactor_hides_a_token_from_a_cli() {
        let t = Token { value: "cli-token-0123456789".into(), source: "gh auth token".into() };
        assert_eq!(
            t.redactor().text("sent cli-token-0123456789"),
            "sent [redacted RALPH_DELIVER_TOKEN]"
        );
    }
}
