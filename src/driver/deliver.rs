//! The end of a run, before its `run_end`: its work delivered as pull
//! requests when `deliver.pr` asks (`deliver`). What happens is said in
//! notices; a failure is a warning with the command that retries it, and
//! never changes how the run ended or its exit code.

use super::Run;
use crate::deliver::{self, PrMode};
use crate::event::{Event, Level, RunOutcome};

impl Run<'_> {
    /// A new run's start: stories whose pull request a reviewer closed
    /// without merging are unfinished again, the closing comment their
    /// lesson (`deliver.reopen_on_close`). A forge that cannot be asked is
    /// a warning; the run goes on.
    pub(super) fn reopen_closed(&mut self) {
        let cfg = &self.cfg.deliver;
        if !cfg.reopen_on_close
            || cfg.pr != PrMode::Story
            || !matches!(self.opts.mode, super::Mode::Single | super::Mode::Parallel)
        {
            return;
        }
        let Some(branch) = self.kit.branch.clone() else { return };
        let env = |k: &str| std::env::var(k).ok();
        let record = self.paths.store.path(deliver::record::FILE);
        let closed = match deliver::closed_unmerged(
            cfg,
            &self.repo.workdir(),
            &record,
            &branch,
            &env,
        ) {
            Ok(c) => c,
            Err(e) => {
                return self.warn(format!(
                    "cannot ask the forge which pull requests were closed (deliver.reopen_on_close): {e}"
                ));
            }
        };
        if closed.is_empty() {
            return;
        }
        let Some(mut prd) = self.reload_prd() else { return };
        for c in closed {
            let lesson = format!(
                "its pull request #{} was closed without merging{}",
                c.number,
                c.comment
                    .as_deref()
                    .map(|t| format!("; the reviewer said: {t}"))
                    .unwrap_or_default()
            );
            let lesson = self.kit.redactor.text(&lesson).into_owned();
            if let Err(e) = crate::learn::lessons::record(
                &self.paths.store,
                &c.story,
                &lesson,
                crate::learn::lessons::Source::Loop,
                chrono::Utc::now(),
            ) {
                self.warn(format!("cannot keep {}'s lesson: {e}", c.story));
            }
            let reopened = prd.set_passes(&c.story, false);
            self.notice(format!(
                "{}'s pull request #{} was closed without merging ({}): {}",
                c.story,
                c.number,
                c.url,
                if reopened {
                    "it is unfinished again, the closing comment its lesson"
                } else {
                    "its lesson is kept"
                }
            ));
        }
        if let Err(e) = self.save_prd(&prd) {
            self.warn(format!("cannot mark the closed stories unfinished: {e}"));
        }
    }

    /// `end` is the run's `run_end`, not yet emitted.
    pub(super) fn deliver_at_end(&mut self, end: &Event) {
        let cfg = &self.cfg.deliver;
        // A worker's turn is not the run; remote workers share the run
        // with other machines, any of which may end it (`ralph deliver`
        // delivers a fleet's run).
        if cfg.pr == PrMode::Off
            || !matches!(self.opts.mode, super::Mode::Single | super::Mode::Parallel)
        {
            return;
        }
        let Event::RunEnd { outcome, .. } = end else { return };
        if *outcome == RunOutcome::Interrupted {
            self.notice(format!(
                "pull requests not delivered: the run was interrupted (`{}` delivers it as it stands)",
                deliver::retry_command(cfg.pr)
            ));
            return;
        }
        let run_id = self.state.run_id.clone();
        let dir = crate::history::RunDir {
            run_id: run_id.clone(),
            dir: self.paths.store.run_log_dir(&run_id),
        };
        let mut events = match dir.read() {
            Ok((events, _)) => events,
            Err(e) => {
                self.warn(format!(
                    "pull requests not delivered: cannot read the run's events: {e}"
                ));
                return;
            }
        };
        events.push(crate::history::Recorded { ts: chrono::Utc::now(), event: end.clone() });
        let report = crate::history::report(&run_id, &events);
        let prd = self.reload_prd();
        let project = self.repo.workdir();
        let job = deliver::Job {
            project: &project,
            record: self.paths.store.path(deliver::record::FILE),
            branch: self.kit.branch.clone().unwrap_or_default(),
            report: &report,
            prd: prd.as_ref(),
            mode: cfg.pr,
        };
        let env = |k: &str| std::env::var(k).ok();
        let mut lines = Vec::new();
        let result = deliver::deliver(cfg, &job, &env, &mut |l| lines.push(l));
        for l in lines {
            self.notice(l);
        }
        match result {
            Ok(done) => self.notice(done.summary()),
            Err(e) => {
                let text = e.explain(cfg.pr);
                self.reporter.emit(&Event::Notice { level: Level::Warn, message: text });
            }
        }
    }
}
