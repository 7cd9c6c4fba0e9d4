//! Going on with a run that did not end: its iteration count, an iteration
//! ralph's own end cut off, and the notice that says where it stands.
//!
//! A run's limits are the run's, not one invocation's: `ralph N` is the
//! run's N however many times it is resumed, and an agent that ralph's own
//! death cut off is neither an iteration nor a call of the calls-per-hour
//! limit (the agent's API may still have counted it: the notice says so).

use super::Run;
use crate::state::{Phase, RunState};

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
