//! Red, then green: a story's own check must fail before the story's work
//! and pass after it. A check that already passes on the run's base proves
//! nothing about the story — the agent could do nothing and be "verified".
//!
//! Opt-in (`gate.require_red = true`), for stories with their own
//! `"verify"`: the project's gate passes before any work by design (the
//! baseline), a story's check is written to fail until the story is done.
//! ralph runs the check once on the base's files (cached in `trust.json`
//! by the base's tree id and the command), before any agent is paid for
//! the story; a story whose check passes there is set aside, not worked
//! on. The decisions here are pure; `driver::red` carries them out.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a story's check did on the run's base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedEvidence {
    /// The base, as a person names it: "main".
    pub base: String,
    /// The base's commit the check ran on (full id).
    pub commit: String,
    /// The check, as a person reads it: a changed check is run again.
    pub check: String,
    /// The check passed there: it proves nothing about the story.
    pub passed_on_base: bool,
    /// How it ended there, in a few words ("exit 1", "1 failed, 3 passed",
    /// "cannot run: no such file").
    pub detail: String,
}

/// What the check's run on the base means for the story.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnBase {
    /// It fails before the work: passing after it will mean something.
    Red,
    /// It passes before any work: the story is set aside.
    ProvesNothing,
}

/// Whether `story`'s check must be seen failing on the base first.
pub fn required(require_red: bool, has_own_check: bool) -> bool {
    require_red && has_own_check
}

/// How a check that ran on the base ended. A check that could not run
/// there (its script is part of the work), or did not finish, did not pass:
/// it is red.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseRun {
    Passed,
    Failed,
    TimedOut,
    NotRun,
}

pub fn on_base(run: BaseRun) -> OnBase {
    match run {
        BaseRun::Passed => OnBase::ProvesNothing,
        BaseRun::Failed | BaseRun::TimedOut | BaseRun::NotRun => OnBase::Red,
    }
}

impl RedEvidence {
    pub fn on_base(&self) -> OnBase {
        if self.passed_on_base { OnBase::ProvesNothing } else { OnBase::Red }
    }

    /// Why a story is set aside: "check proves nothing: `…` passes on main
    /// (abc1234) before any work".
    pub fn proves_nothing(&self, check: &str) -> String {
        format!(
            "check proves nothing: `{check}` passes on {} ({}) before any work; make it fail \
             until the story is done, then run ralph again",
            self.base,
            short(&self.commit)
        )
    }

    /// The evidence with the story's verdict after its work, for reports.
    pub fn describe(&self, verified: Option<bool>) -> String {
        match (self.on_base(), verified) {
            (OnBase::ProvesNothing, _) => format!(
                "check proves nothing: passes on {} ({}) before any work",
                self.base,
                short(&self.commit)
            ),
            (OnBase::Red, Some(true)) => format!(
                "red → green: fails on {} ({}, {}), passes after its work",
                self.base,
                short(&self.commit),
                self.detail
            ),
            (OnBase::Red, _) => format!(
                "red: fails on {} ({}, {}); not green yet",
                self.base,
                short(&self.commit),
                self.detail
            ),
        }
    }
}

impl fmt::Display for RedEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(None))
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(7)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(passed: bool) -> RedEvidence {
        RedEvidence {
            base: "main".into(),
            commit: "0123456789abcdef".into(),
            check: "./check.sh".into(),
            passed_on_base: passed,
            detail: "exit 1".into(),
        }
    }

    #[test]
    fn only_a_story_with_its_own_check_under_require_red_is_held_to_red_first() {
        let table =
            [(true, true, true), (true, false, false), (false, true, false), (false, false, false)];
        for (require, own, expected) in table {
            assert_eq!(required(require, own), expected, "require_red={require} own={own}");
        }
    }

    #[test]
    fn only_a_check_that_passes_on_the_base_proves_nothing() {
        let table = [
            (BaseRun::Passed, OnBase::ProvesNothing),
            (BaseRun::Failed, OnBase::Red),
            (BaseRun::TimedOut, OnBase::Red),
            (BaseRun::NotRun, OnBase::Red),
        ];
        for (run, expected) in table {
            assert_eq!(on_base(run), expected, "{run:?}");
        }
    }

    #[test]
    fn the_evidence_reads_as_red_green_red_or_proves_nothing() {
        let table = [
            (
                false,
                Some(true),
                "red → green: fails on main (0123456, exit 1), passes after its work",
            ),
            (false, Some(false), "red: fails on main (0123456, exit 1); not green yet"),
            (false, None, "red: fails on main (0123456, exit 1); not green yet"),
            (true, Some(true), "check proves nothing: passes on main (0123456) before any work"),
            (true, None, "check proves nothing: passes on main (0123456) before any work"),
        ];
        for (passed, verified, expected) in table {
            assert_eq!(evidence(passed).describe(verified), expected);
        }
        assert!(evidence(true).proves_nothing("./check.sh").starts_with(
            "check proves nothing: `./check.sh` passes on main (0123456) before any work"
        ));
    }
}
