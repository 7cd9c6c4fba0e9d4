//! Fatal errors: the ones that stop ralph before or between iterations.
//!
//! What goes wrong *inside* an iteration — the agent failed, timed out, hit
//! a limit — is an iteration outcome that the loop weighs, not an error
//! here. Each variant knows its exit code and, where the user can fix it,
//! a hint.

use std::fmt;

use crate::exit;

#[derive(Debug)]
pub enum Error {
    /// Bad flags or arguments.
    Usage(String),
    /// prd.json cannot be read or is not a valid PRD.
    Prd(crate::prd::PrdError),
    /// A config file or RALPH_* variable is wrong.
    Config(crate::config::ConfigError),
    /// Not a git repository, or git refuses what the run needs.
    Git(crate::git::GitError),
    /// Another ralph holds the work tree's lock (whatever its PRD).
    Locked { holder: crate::store::Holder, lock: std::path::PathBuf },
    /// The agent or the gate cannot run, authentication failed, the disk is full.
    Environment { message: String, hint: Option<String> },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Prd(_) | Error::Config(_) | Error::Git(_) => exit::USAGE,
            Error::Locked { .. } => exit::LOCKED,
            Error::Environment { .. } => exit::ENVIRONMENT,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Git(e) => e.hint.clone(),
            Error::Environment { hint, .. } => hint.clone(),
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
            Error::Prd(_) => Some("fix prd.json and run ralph again; nothing was changed".into()),
            Error::Config(e) => e.hint_text().map(str::to_string),
            _ => None,
        }
    }

    /// An environment error from an I/O failure on `what`.
    pub fn io(what: impl fmt::Display, e: std::io::Error) -> Error {
        let hint = match e.raw_os_error() {
            Some(libc::ENOSPC) => {
                Some("the disk is full: free some space and run ralph again (it resumes)".into())
            }
            Some(libc::EFBIG) => {
                Some("a file-size limit (ulimit -f) was hit: raise it and run ralph again".into())
            }
            Some(libc::EACCES) | Some(libc::EROFS) => {
                Some("check the permissions of the project directory".into())
            }
            _ => None,
        };
        Error::Environment { message: format!("cannot {what}: {e}"), hint }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) => f.write_str(m),
            Error::Prd(e) => write!(f, "{e}"),
            Error::Config(e) => write!(f, "{e}"),
            Error::Git(e) => write!(f, "{e}"),
            Error::Locked { holder, .. } => {
                let who = match (holder.pid, &holder.prd) {
                    (Some(pid), Some(prd)) => format!(" (pid {pid}, on {})", prd.display()),
                    (Some(pid), None) => format!(" (pid {pid})"),
                    (None, Some(prd)) => format!(" (on {})", prd.display()),
                    (None, None) => String::new(),
                };
                write!(f, "another ralph{who} is already running in this work tree")
            }
            Error::Environment { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

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
