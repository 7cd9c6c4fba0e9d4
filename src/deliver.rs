//! Work delivered as pull requests (merge requests on GitLab): one for the
//! run branch (`deliver.pr = "run"`), or one per story (`"story"`), each
//! story's commit pushed as `<run branch>-stories/<story>` and opened
//! against `deliver.base` or stacked on the story before it on the run
//! branch, whichever run delivered that one.
//!
//! ```text
//! target.rs  remote URL + settings → forge, repository, API (pure)
//! body.rs    the run's report → titles and descriptions (pure)
//! wants.rs   the report and the run branch → the pull requests wanted
//! plan.rs    wanted vs known pull request → create, update, restack or keep (pure)
//! forge.rs   GitHub's and GitLab's REST shapes: requests, answers, errors (pure)
//! token.rs   GH_TOKEN / GITHUB_TOKEN / GITLAB_TOKEN, else gh / glab
//! client.rs  ureq: headers, bounded time, short rate limits waited out
//! record.rs  .git/ralph/deliver.json: what ralph opened, as it last saw it
//! ```
//!
//! The order is what makes a failure lose nothing: the branches are pushed
//! first (with the machine's own git credentials), then the forge is asked,
//! and each pull request is recorded as soon as it exists. A forge that is
//! down, rate-limits for long or refuses the token ends the delivery with a
//! [`DeliverError`] that names the command to retry with (`ralph deliver`);
//! the run's result and exit code are never touched. Running it again is
//! safe: a recorded pull request is updated, and one ralph does not know of
//! is found through the forge's "already exists" answer and adopted.

mod body;
mod client;
pub mod forge;
pub mod plan;
pub mod record;
pub mod target;
mod token;
mod wants;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::git::remote;
use crate::history::RunReport;
use crate::prd::Prd;
use crate::redact::Redactor;

use forge::{Ask, ForgeError};
use plan::{Known, Piece, Step, Want};
use target::{Forge, ForgeSetting, TargetError};

/// `deliver.pr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrMode {
    #[default]
    Off,
    Run,
    Story,
}

impl PrMode {
    pub fn parse(s: &str) -> Option<PrMode> {
        match s {
            "off" => Some(PrMode::Off),
            "run" => Some(PrMode::Run),
            "story" => Some(PrMode::Story),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PrMode::Off => "off",
            PrMode::Run => "run",
            PrMode::Story => "story",
        }
    }
}

/// `deliver.*` as the configuration resolves it.
#[derive(Debug, Clone)]
pub struct DeliverConfig {
    pub pr: PrMode,
    pub forge: ForgeSetting,
    pub repo: Option<String>,
    pub remote: String,
    pub base: Option<String>,
    pub draft: bool,
    pub stack: bool,
    pub api: Option<String>,
    pub timeout: Duration,
    /// A story whose pull request was closed without merging is unfinished
    /// again at the next run, the closing comment its lesson.
    pub reopen_on_close: bool,
}

impl Default for DeliverConfig {
    fn default() -> DeliverConfig {
        DeliverConfig {
            pr: PrMode::Off,
            forge: ForgeSetting::Auto,
            repo: None,
            remote: "origin".into(),
            base: None,
            draft: true,
            stack: false,
            api: None,
            timeout: Duration::from_secs(30),
            reopen_on_close: false,
        }
    }
}

/// What one delivery is of.
pub struct Job<'a> {
    /// The work tree (its repository has the run branch and the remote).
    pub project: &'a Path,
    /// Where deliver.json is kept.
    pub record: PathBuf,
    /// The run branch (its base is the one `oracle::base` recorded when
    /// ralph cut it).
    pub branch: String,
    pub report: &'a RunReport,
    pub prd: Option<&'a Prd>,
    pub mode: PrMode,
}

/// Why a delivery stopped. Everything before it stays done.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error("there is no run branch to deliver (prd.json has no branchName)")]
    NoBranch,
    #[error("the remote `{remote}` is not configured in this repository (deliver.remote)")]
    NoRemote { remote: String },
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("cannot push to `{remote}`: {why}")]
    Push { remote: String, why: String },
    #[error("no token for {forge}: set {vars}{cli}")]
    NoToken { forge: &'static str, vars: String, cli: &'static str },
    #[error("{0}")]
    Forge(#[from] ForgeError),
    #[error("cannot read the run branch {branch}: {why}")]
    Branch { branch: String, why: String },
}

/// What a delivery did.
#[derive(Debug, Default)]
pub struct Delivered {
    /// What the forge calls them ("pull request", "merge request").
    pub noun: &'static str,
    pub created: usize,
    pub updated: usize,
    pub kept: usize,
    /// Pull requests the forge refused alone (a bad base, say), and why.
    pub refused: Vec<(Piece, String)>,
}

/// How to run the delivery again, for messages.
pub fn retry_command(mode: PrMode) -> String {
    format!("ralph deliver --pr={}", mode.as_str())
}

impl Delivered {
    /// What it came to, in a line.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if self.created > 0 {
            parts.push(format!("{} opened", self.created));
        }
        if self.updated > 0 {
            parts.push(format!("{} updated", self.updated));
        }
        if self.kept > 0 {
            parts.push(format!("{} already up to date", self.kept));
        }
        if !self.refused.is_empty() {
            parts.push(format!("{} refused", self.refused.len()));
        }
        if parts.is_empty() {
            parts.push("nothing to do".into());
        }
        let noun = if self.noun.is_empty() { "pull request" } else { self.noun };
        format!("{noun}s: {}", parts.join(", "))
    }
}

impl DeliverError {
    /// The error with every secret `r` knows replaced: what a forge or git
    /// said may echo the token.
    pub fn redacted(self, r: &Redactor) -> DeliverError {
        let t = |s: String| r.text(&s).into_owned();
        match self {
            DeliverError::Target(e) => DeliverError::Target(e.redacted(r)),
            DeliverError::Push { remote, why } => DeliverError::Push { remote, why: t(why) },
            DeliverError::Forge(e) => DeliverError::Forge(e.redacted(r)),
            DeliverError::Branch { branch, why } => DeliverError::Branch { branch, why: t(why) },
            e @ (DeliverError::NoBranch
            | DeliverError::NoRemote { .. }
            | DeliverError::NoToken { .. }) => e,
        }
    }

    /// Whether the branches reached the remote before it stopped.
    pub fn after_push(&self) -> bool {
        matches!(self, DeliverError::NoToken { .. } | DeliverError::Forge(_))
    }

    /// The failure in words, with what is safe and how to retry.
    pub fn explain(&self, mode: PrMode) -> String {
        format!("pull requests not delivered: {self}; {}", self.hint(mode))
    }

    /// What is safe, and how to retry.
    pub fn hint(&self, mode: PrMode) -> String {
        let safe = if self.after_push() {
            "the branches are pushed and the run's result stands"
        } else {
            "nothing was pushed; the run's result stands"
        };
        let when = match self {
            DeliverError::Forge(ForgeError::RateLimited { retry_after: Some(s), .. }) => {
                format!(" in {}", humantime::format_duration(Duration::from_secs(*s)))
            }
            _ => String::new(),
        };
        format!("{safe}; run `{}`{when} to retry", retry_command(mode))
    }
}

/// Delivers the run as `job.mode` asks. `say` hears what happened, a line
/// at a time, and the error is returned, both with the token redacted (a
/// forge's words may echo it): callers print them as they are.
pub fn deliver(
    cfg: &DeliverConfig,
    job: &Job,
    env: &dyn Fn(&str) -> Option<String>,
    say: &mut dyn FnMut(String),
) -> Result<Delivered, DeliverError> {
    // The environment's secrets until the token is known, then the token's too.
    let mut redactor = Redactor::from_env();
    deliver_with(cfg, job, env, say, &mut redactor).map_err(|e| e.redacted(&redactor))
}

fn deliver_with(
    cfg: &DeliverConfig,
    job: &Job,
    env: &dyn Fn(&str) -> Option<String>,
    say: &mut dyn FnMut(String),
    redactor: &mut Redactor,
) -> Result<Delivered, DeliverError> {
    if job.branch.is_empty() {
        return Err(DeliverError::NoBranch);
    }
    let url = remote::url_of(job.project, &cfg.remote)
        .ok()
        .flatten()
        .ok_or_else(|| DeliverError::NoRemote { remote: cfg.remote.clone() })?;
    let target = target::target(&url, cfg.forge, cfg.repo.as_deref(), cfg.api.as_deref())?;
    let repo = git2::Repository::discover(job.project).map_err(|e| DeliverError::Branch {
        branch: job.branch.clone(),
        why: e.message().into(),
    })?;
    let base = cfg
        .base
        .clone()
        .or_else(|| crate::oracle::base::recorded_base(job.project, &job.branch))
        .or_else(|| remote::default_branch(job.project, &cfg.remote))
        .unwrap_or_else(|| "main".into());
    let mut rec = record::Record::load(&job.record);
    let wants = wants::wants(cfg, job, &repo, &base, &rec)?;
    if wants.iter().all(|w| w.earlier) {
        say("nothing to deliver: no story of this run has a commit".into());
        return Ok(Delivered::default());
    }

    // 1. The branches, 2. the pull requests.
    push_branches(cfg, job, &wants, say)?;
    let token = find_token(&target, &url, env)?;
    *redactor = token.redactor();
    let redactor: &Redactor = redactor;
    let client = client::Client::new(target.clone(), token, cfg.timeout);
    let mut say = |line: String| say(redactor.text(&line).into_owned());
    let mut done = Delivered { noun: target.forge.noun(), ..Delivered::default() };
    for want in &wants {
        deliver_want(&client, job, want, &mut rec, &mut done, &mut say, redactor)?;
    }
    rec.set_target(&job.branch, target.forge, &target.repo);
    if let Err(e) = rec.save(&job.record) {
        say(format!("cannot write {}: {e}", job.record.display()));
    }
    Ok(done)
}

/// Step 2 for one pull request: what the forge says of it now (a person
/// may have merged or closed it), then kept, opened, updated or restacked,
/// and recorded. A refusal that does not stop the delivery is noted in
/// `done`.
fn deliver_want(
    client: &client::Client,
    job: &Job,
    want: &Want,
    rec: &mut record::Record,
    done: &mut Delivered,
    say: &mut dyn FnMut(String),
    redactor: &Redactor,
) -> Result<(), DeliverError> {
    let key = want.piece.key();
    // What the forge says of it now (a person may have merged or closed it).
    let known = match rec.get(&job.branch, &key).cloned() {
        Some(k) => Some(refresh(client, k)?),
        // An earlier run's is made from its record: nothing to do without.
        None if want.earlier => return Ok(()),
        None => None,
    };
    let step = plan::step(want, known.as_ref());
    let Some(result) = take_step(client, want, step, known.as_ref()) else {
        done.kept += 1;
        if let Some(k) = known {
            rec.put(&job.branch, &key, k);
        }
        return Ok(());
    };
    match result {
        Ok((pr, adopted)) => {
            if known.is_none() && !adopted {
                done.created += 1;
            } else {
                done.updated += 1;
            }
            let (verb, onto, now) = after_step(step, known, &pr, adopted, want);
            say(format!(
                "{verb} {} #{} for {}{onto}: {}{}",
                client.target.forge.noun(),
                pr.number,
                want.piece.describe(),
                pr.url,
                if pr.draft { " (draft)" } else { "" }
            ));
            rec.put(&job.branch, &key, now);
            if let Err(e) = rec.save(&job.record) {
                say(format!("cannot write {}: {e}", job.record.display()));
            }
        }
        Err(e) if !e.stops_delivery() => {
            say(format!(
                "{} for {} was refused: {e}",
                client.target.forge.noun(),
                want.piece.describe()
            ));
            done.refused.push((want.piece.clone(), redactor.text(&e.to_string()).into()));
        }
        Err(e) => {
            let _ = rec.save(&job.record);
            return Err(e.into());
        }
    }
    Ok(())
}

/// The forge asked to open, update or restack the pull request: the pull
/// request it returns, and whether it was one already open for the branch
/// (adopted rather than opened). `None` for one kept as it is: nothing to
/// ask.
fn take_step(
    client: &client::Client,
    want: &Want,
    step: Step,
    known: Option<&Known>,
) -> Option<Result<(forge::Pr, bool), ForgeError>> {
    Some(match step {
        Step::Keep { .. } => return None,
        Step::Create => create(client, want),
        Step::Update { number, ready } => {
            update(client, want, number, ready, known.and_then(|k| k.node_id.clone()))
                .map(|pr| (pr, false))
        }
        Step::Restack { number } => client
            .ask(&Ask::Retarget { number, base: &want.base })
            .and_then(|v| forge::read_pr(client.target.forge, &v))
            .map(|pr| (pr, false)),
    })
}

/// What was done, in a word ("opened", "updated", "restacked"), the new
/// base when that was all, and what the record keeps of the pull request.
fn after_step(
    step: Step,
    known: Option<Known>,
    pr: &forge::Pr,
    adopted: bool,
    want: &Want,
) -> (&'static str, String, Known) {
    match (step, known) {
        // Only its base is this delivery's: the rest stays as recorded.
        (Step::Restack { .. }, Some(k)) => (
            "restacked",
            format!(" onto {}", want.base),
            Known {
                base: want.base.clone(),
                state: pr.state,
                draft: pr.draft,
                url: pr.url.clone(),
                checked_at: chrono::Utc::now(),
                ..k
            },
        ),
        (_, None) if !adopted => ("opened", String::new(), known_from(pr, want)),
        _ => ("updated", String::new(), known_from(pr, want)),
    }
}

/// Step 1 of a delivery: the branches, with git's credentials. Whatever
/// the forge says next, the work is on the remote. (An earlier run's story
/// branch is there already, as that run pushed it.)
fn push_branches(
    cfg: &DeliverConfig,
    job: &Job,
    wants: &[Want],
    say: &mut dyn FnMut(String),
) -> Result<(), DeliverError> {
    let specs: Vec<String> = wants
        .iter()
        .filter(|w| !w.earlier)
        .map(|w| match w.piece {
            // The run branch only moves forward; story branches are ralph's
            // own and follow their story's latest commit.
            Piece::Run => format!("{}:refs/heads/{}", w.sha, w.head),
            Piece::Story(_) => format!("+{}:refs/heads/{}", w.sha, w.head),
        })
        .collect();
    let pushed = remote::push_to(job.project, &cfg.remote, &specs)
        .map_err(|e| DeliverError::Push { remote: cfg.remote.clone(), why: e.message })?;
    let mut refused_push = Vec::new();
    for p in &pushed {
        if let Some(why) = &p.rejected {
            refused_push.push(format!("{} ({why})", p.dst.trim_start_matches("refs/heads/")));
        }
    }
    if !refused_push.is_empty() {
        return Err(DeliverError::Push {
            remote: cfg.remote.clone(),
            why: format!("refused {}", refused_push.join(", ")),
        });
    }
    say(format!(
        "pushed {} to {}",
        crate::text::count(specs.len(), "branch", "branches"),
        cfg.remote
    ));
    Ok(())
}

/// A story's pull request a person closed without merging it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    pub story: String,
    pub number: u64,
    pub url: String,
    /// The last comment on it, as the reviewer's word on why.
    pub comment: Option<String>,
}

/// The story pull requests recorded open for `branch` that the forge now
/// says were closed without merging. Each is recorded closed, so it is
/// reported once. The comments and the error come with the token redacted.
pub fn closed_unmerged(
    cfg: &DeliverConfig,
    project: &Path,
    record_path: &Path,
    branch: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Closed>, DeliverError> {
    let mut rec = record::Record::load(record_path);
    let open: Vec<(String, Known)> = match rec.branches.get(branch) {
        Some(b) => b
            .prs
            .iter()
            .filter(|(k, known)| k.starts_with("story:") && known.state == forge::PrState::Open)
            .map(|(k, known)| (k.clone(), known.clone()))
            .collect(),
        None => return Ok(Vec::new()),
    };
    if open.is_empty() {
        return Ok(Vec::new());
    }
    let url = remote::url_of(project, &cfg.remote)
        .ok()
        .flatten()
        .ok_or_else(|| DeliverError::NoRemote { remote: cfg.remote.clone() })?;
    let target = target::target(&url, cfg.forge, cfg.repo.as_deref(), cfg.api.as_deref())?;
    let token = find_token(&target, &url, env).map_err(|e| e.redacted(&Redactor::from_env()))?;
    let redactor = token.redactor();
    let client = client::Client::new(target.clone(), token, cfg.timeout);
    let mut out = Vec::new();
    let asked = open.into_iter().try_for_each(|(key, known)| {
        let k = refresh(&client, known)?;
        if k.state == forge::PrState::Closed
            && let Some(Piece::Story(story)) = Piece::from_key(&key)
        {
            let comments = client.ask(&Ask::Comments { number: k.number })?;
            out.push(Closed {
                story,
                number: k.number,
                url: k.url.clone(),
                comment: forge::last_comment(target.forge, &comments)
                    .map(|c| redactor.text(&c).into_owned()),
            });
        }
        rec.put(branch, &key, k);
        Ok::<(), ForgeError>(())
    });
    let _ = rec.save(record_path);
    asked.map_err(|e| e.redacted(&redactor))?;
    Ok(out)
}

fn find_token(
    target: &target::Target,
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<token::Token, DeliverError> {
    let host = url_host(url);
    token::find(target.forge, host.as_deref(), env).ok_or_else(|| DeliverError::NoToken {
        forge: target.forge.name(),
        vars: token::variables(target.forge).join(" or "),
        cli: match target.forge {
            Forge::GitHub => ", or log in with `gh auth login`",
            Forge::GitLab => ", or log in with `glab auth login`",
        },
    })
}

/// A recorded pull request as the forge has it now (and its CI).
fn refresh(client: &client::Client, mut k: Known) -> Result<Known, ForgeError> {
    let v = client.ask(&Ask::Get { number: k.number })?;
    let pr = forge::read_pr(client.target.forge, &v)?;
    k.state = pr.state;
    k.draft = pr.draft;
    k.url = pr.url;
    k.base = pr.base;
    k.ci = match client.target.forge {
        Forge::GitLab => pr.ci,
        Forge::GitHub => forge::read_status(&client.ask(&Ask::Status { sha: &k.sha })?),
    };
    k.checked_at = chrono::Utc::now();
    Ok(k)
}

/// A new pull request; when the forge says one is already open from the
/// branch (opened by a person, or by a run whose record is lost), that one,
/// brought up to date. The flag says it was adopted.
fn create(client: &client::Client, w: &Want) -> Result<(forge::Pr, bool), ForgeError> {
    let ask = Ask::Create {
        head: &w.head,
        base: &w.base,
        title: &w.title,
        body: &w.body,
        draft: w.draft,
    };
    match client.ask(&ask) {
        Ok(v) => Ok((forge::read_pr(client.target.forge, &v)?, false)),
        Err(ForgeError::AlreadyExists { .. }) => {
            let found = client.ask(&Ask::FindOpen { head: &w.head })?;
            let first = found.as_array().and_then(|a| a.first()).cloned().ok_or_else(|| {
                ForgeError::Unreadable {
                    forge: client.target.forge.name(),
                    why: format!(
                        "it says a {} from {} exists, and lists none",
                        client.target.forge.noun(),
                        w.head
                    ),
                }
            })?;
            let existing = forge::read_pr(client.target.forge, &first)?;
            let ready = existing.draft && !w.draft;
            Ok((update(client, w, existing.number, ready, existing.node_id)?, true))
        }
        Err(e) => Err(e),
    }
}

fn update(
    client: &client::Client,
    w: &Want,
    number: u64,
    ready: bool,
    node_id: Option<String>,
) -> Result<forge::Pr, ForgeError> {
    let ask = Ask::Update {
        number,
        base: &w.base,
        title: &w.title,
        body: &w.body,
        draft: w.draft && !ready,
    };
    let mut pr = forge::read_pr(client.target.forge, &client.ask(&ask)?)?;
    if ready && client.target.forge == Forge::GitHub && pr.draft {
        let id = ready_id(&pr, node_id).ok_or_else(|| ForgeError::NotReady {
            forge: client.target.forge.name(),
            message: "there is no node id to ask with".into(),
        })?;
        forge::read_ready(client.target.forge, &client.ask(&Ask::Ready { node_id: &id })?)?;
        pr.draft = false;
    }
    Ok(pr)
}

/// The node id to make `pr` ready with: the one the forge just gave, else
/// the recorded one; never an empty one.
fn ready_id(pr: &forge::Pr, recorded: Option<String>) -> Option<String> {
    pr.node_id.clone().into_iter().chain(recorded).find(|id| !id.is_empty())
}

fn known_from(pr: &forge::Pr, w: &Want) -> Known {
    Known {
        number: pr.number,
        url: pr.url.clone(),
        head: w.head.clone(),
        base: w.base.clone(),
        sha: w.sha.clone(),
        title: w.title.clone(),
        body_digest: plan::digest(&w.body),
        state: pr.state,
        draft: pr.draft,
        ci: pr.ci,
        node_id: pr.node_id.clone(),
        checked_at: chrono::Utc::now(),
    }
}

/// The host of a remote URL, for the forge CLIs' `--hostname`.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = match url.contains("://") {
        true => rest.split('/').next()?,
        false => rest.split(':').next()?,
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next()?;
    (!host.is_empty()).then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_s_error_loses_the_token() {
        let r = Redactor::new([("GITLAB_TOKEN".into(), "glpat-tok-0123456789".into())]);
        let said = || "remote said glpat-tok-0123456789".to_string();
        for e in [
            DeliverError::Push { remote: "origin".into(), why: said() },
            DeliverError::Branch { branch: "ralph/x".into(), why: said() },
            DeliverError::Forge(ForgeError::Invalid {
                forge: "GitLab",
                status: 400,
                message: said(),
            }),
            DeliverError::Target(TargetError::NoRepo { url: said() }),
        ] {
            let text = e.redacted(&r).explain(PrMode::Run);
            assert!(!text.contains("glpat-tok-0123456789"), "{text}");
            assert!(text.contains("[redacted GITLAB_TOKEN]"), "{text}");
        }
    }

    #[test]
    fn ready_for_review_is_never_asked_with_an_empty_node_id() {
        let pr = |id: Option<&str>| forge::Pr {
            number: 1,
            url: String::new(),
            state: forge::PrState::Open,
            draft: true,
            head: String::new(),
            base: String::new(),
            node_id: id.map(String::from),
            ci: None,
        };
        let cases = [
            (Some("PR_new"), Some("PR_old"), Some("PR_new")),
            (None, Some("PR_old"), Some("PR_old")),
            (Some(""), Some("PR_old"), Some("PR_old")),
            (Some(""), Some(""), None),
            (None, None, None),
        ];
        for (fresh, recorded, want) in cases {
            assert_eq!(
                ready_id(&pr(fresh), recorded.map(String::from)).as_deref(),
                want,
                "{fresh:?} {recorded:?}"
            );
        }
    }

    #[test]
    fn the_forge_cli_is_asked_about_the_remote_s_host() {
        for (url, host) in [
            ("https://github.com/a/b.git", Some("github.com")),
            ("git@gitlab.corp:g/b.git", Some("gitlab.corp")),
            ("ssh://git@h.example:22/a/b", Some("h.example")),
            ("https://u:p@ghe.corp/a/b", Some("ghe.corp")),
        ] {
            assert_eq!(url_host(url).as_deref(), host, "{url}");
        }
    }
}
