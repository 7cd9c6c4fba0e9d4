//! Fatal errors: the ones that stop ralph before or between iterations.
//!
//! What goes wrong *inside* an iteration — the agent failed, timed out, hit
//! a limit — is an iteration outcome that the loop weighs, not an error
//! here. Each variant knows its exit code and, where the user can fix it,
//! a hint.

use std::fmt;

use crate::exit;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad flags or arguments.
    #[error("{0}")]
    Usage(String),
    /// prd.json cannot be read or is not a valid PRD.
    #[error("{0}")]
    Prd(#[source] crate::prd::PrdError),
    /// A config file or RALPH_* variable is wrong.
    #[error("{0}")]
    Config(#[source] crate::config::ConfigError),
    /// Not a git repository, or one a person must change (exit 2); or git
    /// failed at what the run asked of it (exit 7).
    #[error("{0}")]
    Git(#[source] crate::git::GitError),
    /// The agents the settings name cannot be made (exit 2), or cannot run
    /// (exit 7).
    #[error("{0}")]
    Agent(#[source] crate::agent::SetupError),
    /// A `[notify]` setting is wrong (exit 2), or its thread cannot start (exit 7).
    #[error("{0}")]
    Notify(#[source] crate::notify::NotifyError),
    /// A `cost.prices` entry is not `MODEL=IN/OUT`.
    #[error("{0}")]
    Prices(#[source] crate::history::cost::PriceError),
    /// The run `ralph report` or `ralph deliver` asks for is not recorded
    /// (exit 2), or the logs cannot be read (exit 7).
    #[error("{0}")]
    Report(#[source] crate::history::FindError),
    /// A `gate.protect` glob ralph cannot read.
    #[error("{0}")]
    Protect(#[source] crate::oracle::protect::ProtectError),
    /// `agent.sandbox = "strict"` on a kernel that cannot confine.
    #[error("{0}")]
    Sandbox(#[source] crate::sandbox::SandboxError),
    /// The gate cannot run: its program is missing, it cannot start, its
    /// output has a fatal signature.
    #[error("{0}")]
    Gate(#[source] crate::gate::NotRun),
    /// `ralph rules`: no such rule, or an ambiguous id (exit 2); the rules
    /// file cannot be read or written (exit 7).
    #[error("{0}")]
    Rules(#[source] crate::learn::rules::RulesError),
    /// `ralph deliver` could not deliver; `mode` is how to run it again.
    #[error("{source}")]
    Deliver { source: crate::deliver::DeliverError, mode: crate::deliver::PrMode },
    /// Another ralph holds the work tree's lock (whatever its PRD).
    #[error("another ralph{} is already running in this work tree", who(holder))]
    Locked { holder: crate::store::Holder, lock: std::path::PathBuf },
    /// A parallel run lost what it relies on: a branch, a file, the run
    /// branch to someone else's commits.
    #[error("{0}")]
    Parallel(#[source] crate::driver::ParallelError),
    /// ralph's commit of a story failed; the story is unfinished again.
    #[error("{0}")]
    Commit(#[source] crate::driver::CommitFailed),
    /// `ralph monitor` has no tmux, or tmux refused a command.
    #[error("{0}")]
    Monitor(#[source] crate::commands::MonitorError),
    /// `ralph serve` cannot listen where it was asked to.
    #[error("{0}")]
    Serve(#[source] crate::serve::BindError),
    /// A file or folder ralph needs cannot be read or written (the disk is
    /// full, a file-size limit, permissions): what it was doing, and why.
    /// The cause is part of the line a person reads; `source()` has it
    /// typed for code that decides by its kind.
    #[error("cannot {what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// Who holds the lock, as the message names them.
fn who(holder: &crate::store::Holder) -> String {
    match (holder.pid, &holder.prd) {
        (Some(pid), Some(prd)) => format!(" (pid {pid}, on {})", prd.display()),
        (Some(pid), None) => format!(" (pid {pid})"),
        (None, Some(prd)) => format!(" (on {})", prd.display()),
        (None, None) => String::new(),
    }
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Prd(_) | Error::Config(_) => exit::USAGE,
            // A repository a person must change (not one, a bad branch
            // name, changes in the way) is refused before anything runs,
            // like a bad prd.json; git failing at its work is the machine's.
            Error::Git(e) => match e.kind {
                crate::git::GitKind::Refused => exit::USAGE,
                crate::git::GitKind::Failed => exit::ENVIRONMENT,
            },
            // A setting a person fixes; an agent that cannot run.
            Error::Agent(crate::agent::SetupError::Configure(_)) => exit::USAGE,
            Error::Agent(
                crate::agent::SetupError::Invocation(_)
                | crate::agent::SetupError::Preflight { .. }
                | crate::agent::SetupError::Spawn { .. },
            ) => exit::ENVIRONMENT,
            Error::Notify(crate::notify::NotifyError::Thread { .. }) => exit::ENVIRONMENT,
            Error::Notify(_) | Error::Prices(_) | Error::Protect(_) => exit::USAGE,
            Error::Report(crate::history::FindError::Read { .. }) => exit::ENVIRONMENT,
            Error::Report(_) => exit::USAGE,
            Error::Sandbox(_) => exit::ENVIRONMENT,
            Error::Gate(_) | Error::Deliver { .. } => exit::ENVIRONMENT,
            Error::Rules(
                crate::learn::rules::RulesError::NotFound { .. }
                | crate::learn::rules::RulesError::Ambiguous { .. }
                | crate::learn::rules::RulesError::EmptyStatement,
            ) => exit::USAGE,
            Error::Rules(
                crate::learn::rules::RulesError::Unreadable { .. }
                | crate::learn::rules::RulesError::Io { .. },
            ) => exit::ENVIRONMENT,
            Error::Locked { .. } => exit::LOCKED,
            Error::Parallel(_) | Error::Commit(_) | Error::Monitor(_) | Error::Serve(_) => {
                exit::ENVIRONMENT
            }
            Error::Io { .. } => exit::ENVIRONMENT,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Git(e) => e.hint.clone(),
            Error::Parallel(e) => e.hint().map(str::to_string),
            Error::Commit(e) => Some(e.hint()),
            Error::Monitor(e) => e.hint().map(str::to_string),
            Error::Serve(e) => Some(e.hint().to_string()),
            Error::Locked { holder, lock } => Some(format!(
                "wait for it to finish{}, or give the other work its own work tree \
                 (`git worktree add`); one run at a time per work tree, whatever its PRD, as \
                 runs would switch branches under each other (lock: {})",
                holder
                    .pid
                    .map(|p| format!(" (`ralph status` shows its progress; pid {p})"))
                    .unwrap_or_default(),
                lock.display()
            )),
            Error::Sandbox(crate::sandbox::SandboxError::StrictWithoutLandlock) => Some(
                "run on a kernel with Landlock, or set agent.sandbox = \"auto\" (runs unconfined \
                 where Landlock is missing) in ~/.config/ralph/config.toml"
                    .into(),
            ),
            Error::Agent(crate::agent::SetupError::Spawn { hint, .. }) => Some(hint.to_string()),
            Error::Gate(e) => Some(e.hint.clone()),
            Error::Deliver { source, mode } => Some(source.hint(*mode)),
            Error::Prd(_) => Some("fix prd.json and run ralph again; nothing was changed".into()),
            Error::Config(e) => e.hint_text().map(str::to_string),
            Error::Io { source, .. } => io_hint(source).map(str::to_string),
            Error::Report(crate::history::FindError::Read { source, .. }) => {
                io_hint(source).map(str::to_string)
            }
            Error::Usage(_)
            | Error::Agent(
                crate::agent::SetupError::Configure(_)
                | crate::agent::SetupError::Invocation(_)
                | crate::agent::SetupError::Preflight { .. },
            )
            | Error::Notify(_)
            | Error::Prices(_)
            | Error::Report(_)
            | Error::Protect(_)
            | Error::Rules(_) => None,
        }
    }

    /// An environment error from an I/O failure on `what`.
    pub fn io(what: impl fmt::Display, e: std::io::Error) -> Error {
        Error::Io { what: what.to_string(), source: e }
    }
}

/// What to do about an I/O error a person can fix.
fn io_hint(e: &std::io::Error) -> Option<&'static str> {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => {
            Some("the disk is full: free some space and run ralph again (it resumes)")
        }
        Some(libc::EFBIG) => {
            Some("a file-size limit (ulimit -f) was hit: raise it and run ralph again")
        }
        Some(libc::EACCES) | Some(libc::EROFS) => {
            Some("check the permissions of the project directory")
        }
        _ => None,
    }
}

/// The causes of `e` a person has not read yet: each source in the chain
/// whose text the messages before it do not already say.
pub fn causes(e: &dyn std::error::Error) -> Vec<String> {
    let mut said = e.to_string();
    let mut out = Vec::new();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !said.contains(&text) {
            said.push_str(&text);
            out.push(text);
        }
        next = cause.source();
    }
    out
}

impl From<crate::prd::PrdError> for Error {
    fn from(e: crate::prd::PrdError) -> Error {
        Error::Prd(e)
    }
}

impl From<crate::config::ConfigError> for Error {
    fn from(e: crate::config::ConfigError) -> Error {
        Error::Config(e)
    }
}

impl From<crate::git::GitError> for Error {
    fn from(e: crate::git::GitError) -> Error {
        Error::Git(e)
    }
}

impl From<crate::driver::ParallelError> for Error {
    fn from(e: crate::driver::ParallelError) -> Error {
        Error::Parallel(e)
    }
}

impl From<crate::driver::CommitFailed> for Error {
    fn from(e: crate::driver::CommitFailed) -> Error {
        Error::Commit(e)
    }
}

impl From<crate::commands::MonitorError> for Error {
    fn from(e: crate::commands::MonitorError) -> Error {
        Error::Monitor(e)
    }
}

impl From<crate::serve::BindError> for Error {
    fn from(e: crate::serve::BindError) -> Error {
        Error::Serve(e)
    }
}

impl From<crate::notify::NotifyError> for Error {
    fn from(e: crate::notify::NotifyError) -> Error {
        Error::Notify(e)
    }
}

impl From<crate::history::cost::PriceError> for Error {
    fn from(e: crate::history::cost::PriceError) -> Error {
        Error::Prices(e)
    }
}

impl From<crate::history::FindError> for Error {
    fn from(e: crate::history::FindError) -> Error {
        Error::Report(e)
    }
}

impl From<crate::oracle::protect::ProtectError> for Error {
    fn from(e: crate::oracle::protect::ProtectError) -> Error {
        Error::Protect(e)
    }
}

impl From<crate::sandbox::SandboxError> for Error {
    fn from(e: crate::sandbox::SandboxError) -> Error {
        Error::Sandbox(e)
    }
}

impl From<crate::agent::SetupError> for Error {
    fn from(e: crate::agent::SetupError) -> Error {
        Error::Agent(e)
    }
}

impl From<crate::agent::ConfigureError> for Error {
    fn from(e: crate::agent::ConfigureError) -> Error {
        Error::Agent(e.into())
    }
}

impl From<crate::agent::InvocationError> for Error {
    fn from(e: crate::agent::InvocationError) -> Error {
        Error::Agent(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of error, with the exit code the README documents for it.
    #[test]
    fn every_kind_of_error_exits_with_its_documented_code() {
        use crate::learn::rules::RulesError;
        let refused = crate::git::GitError::refused("not a git repository", "git init");
        let failed = crate::git::GitError::io("write .git/index", std::io::Error::other("EIO"));
        let prd = crate::prd::PrdError::Invalid { path: "prd.json".into(), problems: vec![] };
        let holder = crate::store::Holder { pid: Some(1), prd: None };
        let table: Vec<(Error, u8)> = vec![
            (Error::Usage("bad flag".into()), exit::USAGE),
            (Error::Prd(prd), exit::USAGE),
            (Error::Config(crate::config::ConfigError::new("bad key")), exit::USAGE),
            (Error::Git(refused), exit::USAGE),
            (Error::Git(failed), exit::ENVIRONMENT),
            (crate::agent::ConfigureError::NoCustomCommand.into(), exit::USAGE),
            (
                crate::agent::InvocationError::PromptTooLong {
                    bytes: 200_000,
                    max: 131_071,
                    tool: crate::agent::Tool::Opencode,
                }
                .into(),
                exit::ENVIRONMENT,
            ),
            (
                crate::agent::SetupError::Preflight {
                    fallback: Some(crate::agent::Tool::Codex),
                    source: crate::agent::PreflightError::ClaudeAsRoot,
                }
                .into(),
                exit::ENVIRONMENT,
            ),
            (
                crate::agent::SetupError::Spawn {
                    source: crate::agent::supervise::SpawnError {
                        program: "my-agent".into(),
                        source: std::io::Error::from_raw_os_error(libc::ENOENT),
                    },
                    hint: "check agent.command",
                }
                .into(),
                exit::ENVIRONMENT,
            ),
            (crate::notify::NotifyError::NotAUrl { value: "x".into() }.into(), exit::USAGE),
            (crate::notify::NotifyError::UnknownEvent { name: "x".into() }.into(), exit::USAGE),
            (
                crate::notify::NotifyError::Thread { source: std::io::Error::other("EAGAIN") }
                    .into(),
                exit::ENVIRONMENT,
            ),
            (crate::history::cost::PriceError { entry: "x".into() }.into(), exit::USAGE),
            (crate::history::FindError::NoRunYet.into(), exit::USAGE),
            (crate::history::FindError::NoSuchRun { id: "x".into() }.into(), exit::USAGE),
            (
                crate::history::FindError::Ambiguous { id: "2026".into(), count: 2 }.into(),
                exit::USAGE,
            ),
            (
                crate::history::FindError::Read {
                    path: "logs".into(),
                    source: std::io::Error::from_raw_os_error(libc::EACCES),
                }
                .into(),
                exit::ENVIRONMENT,
            ),
            (
                crate::oracle::protect::Protected::new(&["a[".into()], &[]).unwrap_err().into(),
                exit::USAGE,
            ),
            (crate::sandbox::SandboxError::StrictWithoutLandlock.into(), exit::ENVIRONMENT),
            (
                Error::Gate(crate::gate::NotRun {
                    message: "the gate command is empty".into(),
                    hint: "set gate.command".into(),
                }),
                exit::ENVIRONMENT,
            ),
            (Error::Rules(RulesError::NotFound { id: "x".into() }), exit::USAGE),
            (Error::Rules(RulesError::Ambiguous { id: "a".into(), matches: vec![] }), exit::USAGE),
            (Error::Rules(RulesError::EmptyStatement), exit::USAGE),
            (
                Error::Rules(RulesError::Unreadable { path: "rules.json".into(), why: "x".into() }),
                exit::ENVIRONMENT,
            ),
            (
                Error::Rules(RulesError::Io {
                    what: "write",
                    path: "rules.json".into(),
                    source: std::io::Error::from_raw_os_error(libc::ENOSPC),
                }),
                exit::ENVIRONMENT,
            ),
            (
                Error::Deliver {
                    source: crate::deliver::DeliverError::NoBranch,
                    mode: crate::deliver::PrMode::Run,
                },
                exit::ENVIRONMENT,
            ),
            (Error::Locked { holder, lock: "lock".into() }, exit::LOCKED),
            (crate::driver::ParallelError::NoLayers.into(), exit::ENVIRONMENT),
            (
                crate::driver::ParallelError::Raced { branch: "ralph/x".into(), queue: vec![] }
                    .into(),
                exit::ENVIRONMENT,
            ),
            (
                crate::driver::CommitFailed {
                    story: "US-001".into(),
                    source: crate::git::GitError::refused("HEAD moved", "check out ralph/x"),
                }
                .into(),
                exit::ENVIRONMENT,
            ),
            (crate::commands::MonitorError::NoTmux.into(), exit::ENVIRONMENT),
            (
                crate::commands::MonitorError::Tmux { args: "new-session".into() }.into(),
                exit::ENVIRONMENT,
            ),
            (
                crate::serve::BindError {
                    addr: "127.0.0.1:1".parse().unwrap(),
                    source: std::io::Error::from_raw_os_error(libc::EADDRINUSE),
                }
                .into(),
                exit::ENVIRONMENT,
            ),
            (
                Error::io("write x", std::io::Error::from_raw_os_error(libc::ENOSPC)),
                exit::ENVIRONMENT,
            ),
        ];
        for (e, code) in table {
            assert_eq!(e.exit_code(), code, "{e:?}");
        }
    }

    /// The errors that were once `Environment { message, hint }` say the
    /// same words and hints, and no cause a second time.
    #[test]
    fn typed_environment_errors_keep_their_words() {
        use crate::driver::{CommitFailed, ParallelError};
        let raced = ParallelError::Raced {
            branch: "ralph/x".into(),
            queue: vec!["US-001".into(), "US-002".into()],
        };
        let git_io = crate::git::GitError::io("write .git/index", std::io::Error::other("EIO"));
        let cases: Vec<(Error, &str, Option<&str>)> = vec![
            (
                raced.into(),
                "the run branch ralph/x kept moving while ralph merged US-001, US-002",
                Some("do not commit on the run branch during a parallel run"),
            ),
            (
                ParallelError::NoPrd { path: "scripts/ralph/prd.json".into() }.into(),
                "the run branch has no scripts/ralph/prd.json",
                None,
            ),
            (
                ParallelError::ResolveBranchGone { branch: "ralph/x--us-1".into() }.into(),
                "the run branch or ralph/x--us-1 is gone",
                None,
            ),
            (
                CommitFailed {
                    story: "US-001".into(),
                    source: crate::git::GitError::refused("HEAD moved", "check out ralph/x"),
                }
                .into(),
                "cannot commit US-001: HEAD moved; it is marked unfinished again",
                Some("check out ralph/x"),
            ),
            (
                CommitFailed { story: "US-001".into(), source: git_io }.into(),
                "cannot commit US-001: cannot write .git/index: EIO; it is marked unfinished again",
                Some("check the repository (`git status`), then run ralph again"),
            ),
            (
                crate::commands::MonitorError::NoTmux.into(),
                "ralph monitor needs tmux, which is not installed",
                Some(
                    "install it (apt install tmux / brew install tmux), or run `ralph` and \
                     `ralph status --watch` in two terminals",
                ),
            ),
            (
                crate::commands::MonitorError::Tmux { args: "select-pane -t x".into() }.into(),
                "tmux select-pane -t x failed",
                None,
            ),
            (
                crate::serve::BindError {
                    addr: "[::1]:8080".parse().unwrap(),
                    source: std::io::Error::other("Address in use"),
                }
                .into(),
                "cannot listen on ::1:8080: Address in use",
                Some("choose another --port (0 takes any free one)"),
            ),
        ];
        for (e, message, hint) in cases {
            assert_eq!((e.to_string().as_str(), e.hint().as_deref()), (message, hint), "{e:?}");
            assert_eq!(causes(&e), Vec::<String>::new(), "{e:?}");
        }
    }

    /// A fallback agent that cannot start is named, and its reason is said
    /// once: in the message, not again as a cause.
    #[test]
    fn a_fallback_that_cannot_start_is_named_once() {
        let e: Error = crate::agent::SetupError::Preflight {
            fallback: Some(crate::agent::Tool::Codex),
            source: crate::agent::PreflightError::NoCommand,
        }
        .into();
        assert_eq!(
            e.to_string(),
            "fallback agent codex: no agent command: pass --tool or --agent-cmd"
        );
        assert_eq!(causes(&e), Vec::<String>::new());
    }

    /// An I/O error keeps its cause, typed: the disk being full is a kind a
    /// caller can match, and the message says it once.
    #[test]
    fn an_io_error_keeps_its_cause_and_says_it_once() {
        let e = Error::io("write the checkpoint", std::io::Error::from_raw_os_error(libc::ENOSPC));
        let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(source.map(std::io::Error::kind), Some(std::io::ErrorKind::StorageFull));
        assert!(e.to_string().starts_with("cannot write the checkpoint: No space left on device"));
        // main's cause chain does not say it again.
        assert_eq!(causes(&e), Vec::<String>::new());
        assert!(e.hint().unwrap().contains("the disk is full"));
        // A wrapped error whose text is the outer one's is not said twice.
        let prd = Error::Prd(crate::prd::PrdError::Read {
            path: "prd.json".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!(causes(&prd), Vec::<String>::new(), "{prd}");
    }
}
