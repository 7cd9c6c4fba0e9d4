//! Going on with a run that did not end: its iteration count, an iteration
//! ralph's own end cut off, and the notice that says where it stands.
//!
//! A run's limits are the run's, not one invocation's: `ralph N` is the
//! run's N however many times it is resumed, and an agent that ralph's own
//! death cut off is neither an iteration nor a call of the calls-per-hour
//! limit (the agent's API may still have counted it: the notice says so).
//!
//! An iteration that runs again — cut off by ralph's death, or stopped by
//! Ctrl-C or SIGTERM before its verdict — starts from progress.txt as it
//! was when the cut-off attempt started: that agent's entry would
//! otherwise be there twice. What is taken out is kept in the log folder.

use super::Run;
use crate::state::{FileMark, Phase, RunState};

/// Where a resumed run stands, for its notice.
#[derive(Debug, Clone, PartialEq)]
struct Resumed<'a> {
    run_id: &'a str,
    /// Iterations the run has used.
    used: u32,
    max: u32,
    cost_usd: f64,
    max_cost: Option<f64>,
    /// The iteration ralph's end cut off, which runs again.
    cut_off: Option<u32>,
    /// Its agent's call was taken back from the calls-per-hour window.
    call_taken_back: bool,
}

impl Run<'_> {
    /// Continues a run that did not end. An iteration cut off by ralph's
    /// own death (a crash, `kill -9`) runs again: it is not counted against
    /// the agent, nor against the run's N, nor (if its agent was at work)
    /// against the calls per hour, and its prompt says to look for partial
    /// work. `max` is the iteration count given on the command line.
    pub(super) fn resume(&mut self, old: &RunState, max: Option<u32>) {
        // An iteration whose verdict was recorded finished; only its last
        // checkpoint was lost (a full disk).
        let judged = old.story.as_ref().is_some_and(|id| old.verified.contains(id));
        let cut_off = matches!(old.phase, Phase::Agent | Phase::Gate) && !judged;
        if cut_off {
            self.state.iteration = old.iteration.saturating_sub(1);
        }
        if let Some(n) = max {
            // A worker's N is its turn's; the run's N is the run's.
            self.state.max_iterations = match self.opts.mode.worker() {
                Some(_) => self.state.iteration.saturating_add(n),
                None => n,
            };
        }
        let call_taken_back = cut_off && old.phase == Phase::Agent && self.take_back_call(old);
        // The mark is cleared once an iteration is judged: one left is an
        // attempt that runs again (cut off here, or stopped before its verdict).
        if !judged && let Some(start) = &old.progress_at_start {
            self.set_progress_back(self.state.iteration + 1, start);
        }
        // A worker resumes its story's run at every turn: nothing to tell.
        if self.opts.mode.worker().is_none() {
            self.notice(notice(&Resumed {
                run_id: &old.run_id,
                used: self.state.iteration,
                max: self.state.max_iterations,
                cost_usd: self.state.cost_usd,
                max_cost: self.cfg.budget.max_cost,
                cut_off: cut_off.then_some(old.iteration),
                call_taken_back,
            }));
        }
        if cut_off && let Some(id) = old.story.clone() {
            self.state.feedback = Some(format!(
                "The previous attempt at {id} was cut off (ralph stopped or crashed) before it \
                 finished. Check the work tree and git log for partial work before going on."
            ));
        }
    }

    /// Takes the cut-off agent's call back from the calls-per-hour window.
    fn take_back_call(&mut self, old: &RunState) -> bool {
        let Some(at) = old.call_at else { return false };
        if !self.limits.forget_call(at) {
            return false;
        }
        if let Err(e) = self.limits.save(&self.paths.store) {
            self.warn(format!("cannot write {}: {e}", self.paths.store.limits().display()));
        }
        true
    }

    /// progress.txt back to how it was when iteration `n`'s cut-off attempt
    /// started, when it was only added to since; what is cut is kept in the
    /// log folder first. A file changed above its end (a person's edit, an
    /// agent that rewrote it) is left as it is.
    fn set_progress_back(&mut self, n: u32, start: &FileMark) {
        let path = self.paths.progress.clone();
        let now = match crate::store::read_regular(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.warn(format!("cannot read {}: {e}", path.display()));
                return;
            }
        };
        let keep = match set_back(&now, start) {
            SetBack::AsItWas => return,
            SetBack::Changed => {
                self.warn(format!(
                    "{} changed since iteration {n} started, not only at its end: left as it is \
                     (what the cut-off attempt added to it stays)",
                    path.display()
                ));
                return;
            }
            SetBack::Cut { keep } => keep,
        };
        let kept = (1..)
            .map(|k| match k {
                1 => format!("iter-{n}.progress-cut.txt"),
                k => format!("iter-{n}.progress-cut-{k}.txt"),
            })
            .map(|name| self.kit.log_dir.join(name))
            .find(|f| !f.exists())
            .unwrap_or_else(|| self.kit.log_dir.join(format!("iter-{n}.progress-cut.txt")));
        // Nothing is taken out of the file before it is kept.
        let written = crate::store::write_atomic(&kept, &now[keep..])
            .map_err(|e| format!("cannot keep it in {}: {e}", kept.display()))
            .and_then(|()| {
                crate::store::write_atomic(&path, &now[..keep])
                    .map_err(|e| format!("cannot write it: {e}"))
            });
        match written {
            Ok(()) => self.notice(format!(
                "{} set back to how it was when iteration {n} started: what the cut-off attempt \
                 added is kept in {}",
                path.display(),
                kept.display()
            )),
            Err(why) => self.warn(format!(
                "{} still holds what iteration {n}'s cut-off attempt added ({why})",
                path.display()
            )),
        }
    }
}

/// What setting a file back to its mark at an iteration's start does.
#[derive(Debug, Clone, PartialEq)]
enum SetBack {
    /// It is as it was.
    AsItWas,
    /// Only added to since: its first `keep` bytes are as they were.
    Cut { keep: usize },
    /// Changed above its end (edited, rewritten, shortened): left alone.
    Changed,
}

fn set_back(now: &[u8], start: &FileMark) -> SetBack {
    let Ok(keep) = usize::try_from(start.len) else { return SetBack::Changed };
    if now.len() < keep || FileMark::of(&now[..keep]) != *start {
        return SetBack::Changed;
    }
    if now.len() == keep { SetBack::AsItWas } else { SetBack::Cut { keep } }
}

/// "run 20260101-…: iteration 38 of 200, resumed ($1.20 of $5.00 spent);
/// iteration 38 was cut off and runs again; --fresh starts over".
fn notice(r: &Resumed) -> String {
    let mut text = if r.used < r.max {
        format!("run {}: iteration {} of {}, resumed", r.run_id, r.used + 1, r.max)
    } else {
        format!("run {}: resumed with no iteration left ({} used, N = {})", r.run_id, r.used, r.max)
    };
    if r.cost_usd > 0.0 {
        let of = r.max_cost.map(|m| format!(" of ${m:.2}")).unwrap_or_default();
        text.push_str(&format!(" (${:.2}{of} spent)", r.cost_usd));
    }
    if let Some(n) = r.cut_off {
        text.push_str(&format!("; iteration {n} was cut off and runs again"));
        if r.call_taken_back {
            text.push_str(
                ", its agent call not counted against limits.calls_per_hour (the agent's API \
                 may have counted it)",
            );
        }
    }
    text.push_str("; --fresh starts over");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_set_back_only_when_it_was_only_added_to() {
        let start = "# Ralph Progress Log\n\n## US-001\n- done\n---\n";
        let mark = FileMark::of(start.as_bytes());
        let entry = "\n## US-002\n- half done\n---\n";
        #[rustfmt::skip]
        let cases: &[(&str, String, SetBack)] = &[
            ("untouched", start.to_string(), SetBack::AsItWas),
            ("an entry appended", format!("{start}{entry}"), SetBack::Cut { keep: start.len() }),
            ("a line without its newline", format!("{start}## US-0"), SetBack::Cut { keep: start.len() }),
            ("an earlier entry edited", start.replace("done", "finished") + entry, SetBack::Changed),
            ("shortened", start[..10].to_string(), SetBack::Changed),
            ("emptied", String::new(), SetBack::Changed),
            ("rewritten, the entry first", format!("{entry}{start}"), SetBack::Changed),
        ];
        for (name, now, want) in cases {
            assert_eq!(set_back(now.as_bytes(), &mark), *want, "{name}");
        }
        // A file that did not exist at the start is cut back to nothing.
        assert_eq!(set_back(b"x", &FileMark::of(b"")), SetBack::Cut { keep: 0 });
    }

    #[test]
    fn what_a_resume_says() {
        let base = Resumed {
            run_id: "r1",
            used: 37,
            max: 200,
            cost_usd: 0.0,
            max_cost: None,
            cut_off: None,
            call_taken_back: false,
        };
        #[rustfmt::skip]
        let cases: &[(&str, Resumed, &str)] = &[
            ("between iterations", base.clone(),
             "run r1: iteration 38 of 200, resumed; --fresh starts over"),
            ("cut off, its call taken back", Resumed { cut_off: Some(38), call_taken_back: true, ..base.clone() },
             "run r1: iteration 38 of 200, resumed; iteration 38 was cut off and runs again, its agent \
              call not counted against limits.calls_per_hour (the agent's API may have counted it); \
              --fresh starts over"),
            ("cut off in the gate", Resumed { cut_off: Some(38), ..base.clone() },
             "run r1: iteration 38 of 200, resumed; iteration 38 was cut off and runs again; --fresh starts over"),
            ("money spent, a budget", Resumed { cost_usd: 1.2, max_cost: Some(5.0), ..base.clone() },
             "run r1: iteration 38 of 200, resumed ($1.20 of $5.00 spent); --fresh starts over"),
            ("money spent, no budget", Resumed { cost_usd: 1.2, ..base.clone() },
             "run r1: iteration 38 of 200, resumed ($1.20 spent); --fresh starts over"),
            ("N is less than what the run used", Resumed { max: 30, ..base.clone() },
             "run r1: resumed with no iteration left (37 used, N = 30); --fresh starts over"),
        ];
        for (name, r, want) in cases {
            assert_eq!(notice(r), *want, "{name}");
        }
    }
}
