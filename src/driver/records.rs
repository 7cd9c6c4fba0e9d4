//! What the run writes between its steps: prd.json and its last good copy,
//! the checkpoint, and the breaker.

use chrono::Utc;

use super::Run;
use crate::circuit::{Signals, Thresholds};
use crate::error::Error;
use crate::event::Event;
use crate::prd::Prd;
use crate::state::Phase;
use crate::store;

/// What is wrong with prd.json as the agent left it; the last good copy
/// is restored over it.
#[derive(Debug, thiserror::Error)]
pub(super) enum PrdDamage {
    /// It cannot be read, or is no valid PRD.
    #[error("{0}")]
    Invalid(#[source] crate::prd::PrdError),
    /// Stories were deleted or moved (`Prd::identity_damage`'s words).
    #[error("{0}")]
    Identity(String),
}

impl Run<'_> {
    /// Reads prd.json; a damaged file is restored from the last good copy.
    pub(super) fn reload_prd(&mut self) -> Option<Prd> {
        match self.read_prd() {
            Ok(prd) => {
                if prd.to_json() != self.good_prd.to_json() {
                    // The archive of a finished run needs its last state.
                    self.save_last_prd(&prd);
                }
                self.good_prd = prd.clone();
                Some(prd)
            }
            Err(damage) => {
                self.restore_prd(&damage.to_string());
                None
            }
        }
    }

    /// prd.json as it is now, or what is wrong with it: invalid, or stories
    /// deleted or moved compared with the last good copy. Changes nothing.
    pub(super) fn read_prd(&self) -> Result<Prd, PrdDamage> {
        let prd = Prd::load(&self.paths.prd).map_err(PrdDamage::Invalid)?;
        match self.good_prd.identity_damage(&prd) {
            None => Ok(prd),
            Some(damage) => Err(PrdDamage::Identity(damage)),
        }
    }

    fn restore_prd(&mut self, why: &str) {
        self.kit.reusable_snapshot = None;
        let good = self.good_prd.clone();
        match good.save(&self.paths.prd) {
            Ok(()) => {
                self.warn(format!("prd.json was damaged ({why}); restored the last good copy"))
            }
            Err(e) => {
                self.warn(format!("prd.json was damaged ({why}) and could not be restored: {e}"))
            }
        }
    }

    pub(super) fn save_prd(&mut self, prd: &Prd) -> Result<(), Error> {
        self.kit.reusable_snapshot = None;
        prd.save(&self.paths.prd)
            .map_err(|e| Error::io(format!("write {}", self.paths.prd.display()), e))?;
        self.good_prd = prd.clone();
        self.save_last_prd(prd);
        Ok(())
    }

    pub(super) fn save_last_prd(&mut self, prd: &Prd) {
        // A copy for restores and archives; prd.json itself is the durable one.
        if let Err(e) = store::write_replace(&self.paths.store.last_prd(), prd.to_json().as_bytes())
        {
            self.warn(format!(
                "cannot keep a copy of prd.json in {}: {e}",
                self.paths.store.root().display()
            ));
        }
    }

    /// Writes the checkpoint durably (fsync): entering an iteration and
    /// the write-ahead of a story's verdict and ralph's commit, the run's
    /// start and its stops, are what a resume after a crash or a power cut
    /// relies on. It failing (a full disk) is the end of the run: going on
    /// would make the next resume undo work.
    pub(super) fn save_checkpoint(&mut self, phase: Phase) -> Result<(), Error> {
        self.write_checkpoint(phase, true).map_err(|e| self.checkpoint_error(e))
    }

    /// Writes the checkpoint at an iteration's end, where the page cache is
    /// enough: it survives ralph being killed, and only a power cut can
    /// lose it. What a power cut must not lose was written durably before
    /// ([`Self::save_checkpoint`]: the write-ahead of a story's verdict and
    /// ralph's commit); losing the rest leaves the checkpoint of the
    /// iteration's start, and the resume runs that iteration again. An
    /// fsync here was a third of the loop's own time per iteration. Failing
    /// (a full disk) is the end of the run, as for a durable write.
    pub(super) fn save_iteration_end(&mut self, phase: Phase) -> Result<(), Error> {
        self.write_checkpoint(phase, false).map_err(|e| self.checkpoint_error(e))
    }

    /// Writes the checkpoint where it only informs (`ralph status`, the
    /// end of a run): not fsynced for the gate phase, a failure a warning.
    pub(super) fn checkpoint(&mut self, phase: Phase) {
        if let Err(e) = self.write_checkpoint(phase, phase != Phase::Gate) {
            self.warn(format!("cannot write {}: {e}", self.paths.store.state().display()));
        }
    }

    fn write_checkpoint(&mut self, phase: Phase, durable: bool) -> std::io::Result<()> {
        self.state.phase = phase;
        self.state.elapsed_ms = self.elapsed_ms();
        if durable {
            self.state.save(&self.paths.store)
        } else {
            self.state.save_cached(&self.paths.store)
        }
    }

    fn checkpoint_error(&self, e: std::io::Error) -> Error {
        Error::io(format!("write the checkpoint {}", self.paths.store.state().display()), e)
    }

    /// Run time so far: what earlier processes of this run spent, plus
    /// this process's time.
    pub(super) fn elapsed_ms(&self) -> u64 {
        self.clock.elapsed_before + self.clock.started.elapsed().as_millis() as u64
    }

    /// Tells the breaker about an iteration; true when it is open now.
    pub(super) fn record_breaker(&mut self, signals: &Signals) -> bool {
        let c = &self.cfg.circuit;
        let thresholds = Thresholds {
            no_progress: c.no_progress,
            half_open_after: c.no_progress.saturating_sub(1).max(1).min(c.no_progress),
            same_error: c.same_error,
            permission_denials: c.permission_denials,
            failures: c.failures,
        };
        let before = (
            self.breaker.state(),
            self.breaker.counters(),
            self.breaker.last_error().map(str::to_string),
        );
        let t = self.breaker.record(signals, &thresholds, Utc::now());
        let after = (
            self.breaker.state(),
            self.breaker.counters(),
            self.breaker.last_error().map(str::to_string),
        );
        // An iteration that changed nothing the breaker decides by (the
        // usual case: progress, counters at zero) is not worth a write.
        if (t.is_some() || before != after)
            && let Err(e) = self.breaker.save(&self.paths.store)
        {
            self.warn(format!("cannot write {}: {e}", self.paths.store.circuit().display()));
        }
        if let Some(t) = t
            && let Some(from) = t.from
        {
            self.reporter.emit(&Event::Circuit { from, to: t.to, reason: t.reason });
        }
        self.breaker.is_open()
    }
}
