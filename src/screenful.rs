//! Long lists of stories cut to a screenful. A PRD of 5,000 stories made
//! `ralph status` print 5,008 lines, the end of every run 5,000 ✗ lines
//! and each report.md 428 KB. Beyond [`SCREENFUL`] stories, `status` lists
//! the stories that need a person and the next few, the end of a run and
//! report.md the stories the run touched, and each counts the rest;
//! `--all` lists every story, and `--json` and the `run_end` event always
//! carry every one. Up to [`SCREENFUL`], lists are shown whole, as before.
//!
//! Pure: where each story stands comes in, which to show goes out.

use crate::event::StoryReport;
use crate::history::report::StoryLine;

/// Lists up to this long are shown whole: with the lines around them, a
/// screen's worth.
pub const SCREENFUL: usize = 40;
/// At most this many stories that need attention are listed by `status`;
/// the rest are counted.
pub const ATTENTION: usize = 20;
/// The next stories the run takes that `status` lists after them.
pub const NEXT: usize = 5;

/// Whether a long list is cut to a screenful or shown whole (`--all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    Screenful,
    All,
}

impl Show {
    pub fn all_if(all: bool) -> Show {
        if all { Show::All } else { Show::Screenful }
    }
}

/// Whether a list of `n` stories is shown whole.
pub fn whole(n: usize, show: Show) -> bool {
    show == Show::All || n <= SCREENFUL
}

/// Where a story stands, for `ralph status`; the ones that need attention
/// come first, in the order they are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// At work now: a worker's story, or the running iteration's.
    InProgress,
    /// The run gave it up.
    GivenUp,
    /// An iteration on it was refused (a protected path changed, tests vanished).
    Refused,
    /// The run tried it, and it does not pass.
    Failing,
    Unfinished,
    Passing,
}

/// What `ralph status` knows of a story, from the PRD and the checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusFacts {
    pub passes: bool,
    /// A worker's story, or the running iteration's.
    pub at_work: bool,
    pub given_up: bool,
    /// The checkpoint's run refused an iteration on it.
    pub refused: bool,
    /// The checkpoint's run spent an iteration on it, or failed on it last.
    pub tried: bool,
}

impl Standing {
    /// A passing story needs nothing; else what is going on now comes
    /// first, then what the run decided about it, then what it tried.
    pub fn of(f: StatusFacts) -> Standing {
        match f {
            StatusFacts { passes: true, .. } => Standing::Passing,
            StatusFacts { at_work: true, .. } => Standing::InProgress,
            StatusFacts { given_up: true, .. } => Standing::GivenUp,
            StatusFacts { refused: true, .. } => Standing::Refused,
            StatusFacts { tried: true, .. } => Standing::Failing,
            _ => Standing::Unfinished,
        }
    }

    pub fn needs_attention(self) -> bool {
        match self {
            Standing::InProgress | Standing::GivenUp | Standing::Refused | Standing::Failing => {
                true
            }
            Standing::Unfinished | Standing::Passing => false,
        }
    }
}

/// The stories `ralph status` lists (indices, in the order shown) and how
/// many it leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub shown: Vec<usize>,
    /// Stories not listed.
    pub more: usize,
    /// Of those, the ones that need attention.
    pub more_needing_attention: usize,
}

/// Which stories `ralph status` lists: every one of a short PRD (or with
/// `--all`), in the PRD's order; else the ones that need attention (at
/// most [`ATTENTION`], in progress first, then given up, refused, failing),
/// then the next [`NEXT`] of `queue` (the stories the run takes next, in
/// its order) not listed already.
pub fn status(standings: &[Standing], queue: &[usize], show: Show) -> Listing {
    let n = standings.len();
    if whole(n, show) {
        return Listing { shown: (0..n).collect(), more: 0, more_needing_attention: 0 };
    }
    let mut attention: Vec<usize> = (0..n).filter(|&i| standings[i].needs_attention()).collect();
    attention.sort_by_key(|&i| (standings[i], i));
    let more_needing_attention = attention.len().saturating_sub(ATTENTION);
    attention.truncate(ATTENTION);
    let next: Vec<usize> = queue
        .iter()
        .copied()
        .filter(|&i| i < n && !attention.contains(&i) && !standings[i].needs_attention())
        .take(NEXT)
        .collect();
    let mut shown = attention;
    shown.extend(next);
    Listing { more: n - shown.len(), more_needing_attention, shown }
}

/// The stories a summary leaves out, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rest {
    pub passing: usize,
    pub unfinished: usize,
}

impl Rest {
    pub fn total(self) -> usize {
        self.passing + self.unfinished
    }

    /// "1990 other stories unchanged: 10 passing, 1980 unfinished"
    /// ("other" when some are listed above it).
    pub fn describe(self, other: bool) -> String {
        let counts: Vec<String> = [(self.passing, "passing"), (self.unfinished, "unfinished")]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        let n = self.total();
        format!(
            "{n} {}{} unchanged: {}",
            if other { "other " } else { "" },
            if n == 1 { "story" } else { "stories" },
            counts.join(", ")
        )
    }
}

/// A list cut to the stories a run touched, and the rest counted.
#[derive(Debug, PartialEq)]
pub struct Touched<'a, T> {
    pub shown: Vec<&'a T>,
    /// `None` when every story is shown.
    pub rest: Option<Rest>,
}

/// Every story of a short list (or with `--all`); else those `touched`
/// says the run touched, and the rest counted as passing or not.
pub fn touched<'a, T>(
    stories: &'a [T],
    show: Show,
    touched: impl Fn(&T) -> bool,
    passes: impl Fn(&T) -> bool,
) -> Touched<'a, T> {
    if whole(stories.len(), show) {
        return Touched { shown: stories.iter().collect(), rest: None };
    }
    let (shown, rest): (Vec<&T>, Vec<&T>) = stories.iter().partition(|s| touched(s));
    let passing = rest.iter().filter(|s| passes(s)).count();
    Touched { shown, rest: Some(Rest { passing, unfinished: rest.len() - passing }) }
}

/// What the end of a run lists of a long PRD: a story it worked on,
/// refused, flagged, gave up, has a word about, verified or merged.
pub fn run_touched(s: &StoryReport) -> bool {
    s.work.iterations > 0
        || s.work.resolves > 0
        || s.findings.refused_or_flagged()
        || !s.work.merge_failures.is_empty()
        || s.note.is_some()
        || s.verified == Some(true)
        || s.work.commit.is_some()
        || s.findings.red.is_some()
}

/// What report.md lists of a long PRD: a story the run attempted (retried,
/// resolved, gated), delivered, or has a note, a lesson or a refusal for.
pub fn report_touched(s: &StoryLine) -> bool {
    s.attempts > 0
        || s.retried > 0
        || s.resolves > 0
        || s.delivered
        || !s.gates.is_empty()
        || !s.merge_failures.is_empty()
        || !s.lessons.is_empty()
        || s.note.is_some()
        || s.commit.is_some()
        || s.oracle.as_ref().is_some_and(|o| o.findings.refused_or_flagged())
}

#[cfg(test)]
mod tests;
