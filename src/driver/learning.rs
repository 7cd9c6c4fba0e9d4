//! The glue between the loop and `learn`: failures become events and rule
//! cards, a story's failures become its lessons, and a passing gate counts
//! for the rules its prompt carried. A failure in this code never stops
//! the loop; it is a warning.

use chrono::Utc;

use super::Run;
use crate::learn::failures::{self, Category, Failure};
use crate::learn::{lessons, rules};

impl Run<'_> {
    /// Appends a failure to failures.jsonl and merges it into its rule card.
    pub(super) fn record_failure(
        &mut self,
        story: &str,
        category: Category,
        signature: &str,
        detail: &str,
        evidence: Option<&str>,
        applied: &[String],
    ) {
        let failure = Failure {
            run_id: &self.state.run_id,
            iteration: self.state.iteration,
            story,
            category,
            signature,
            detail,
            evidence,
        };
        let policy = rules::Policy::default();
        match rules::record_failure(&self.paths.store, &failure, applied, &policy, Utc::now()) {
            // A failure seen once or twice is a candidate in `ralph rules`,
            // not news: the run says so when it is ready for review.
            Ok(Some(change)) if change.worth_telling() => self.notice(change.to_string()),
            Ok(Some(_)) => {}
            Ok(None) => {}
            Err(e) => self.warn(format!("cannot record the failure: {e}")),
        }
    }

    /// Records one lesson for `story`, and the event that says so.
    pub(super) fn record_lesson(&mut self, story: &str, text: &str, source: lessons::Source) {
        match lessons::record(&self.paths.store, story, text, source, Utc::now()) {
            Ok((_, warning)) => {
                if let Some(w) = warning {
                    self.warn(w);
                }
                let event = Failure {
                    run_id: &self.state.run_id,
                    iteration: self.state.iteration,
                    story,
                    category: Category::Lesson,
                    signature: text,
                    detail: text,
                    evidence: None,
                }
                .event(Utc::now());
                if let Err(e) = failures::append(&self.paths.store, &event) {
                    let path = self.paths.store.failures();
                    self.warn(format!("cannot append to {}: {e}", path.display()));
                }
            }
            Err(e) => self.warn(format!("cannot record a lesson for {story}: {e}")),
        }
    }

    /// A verified story counts for every armed rule its prompt carried.
    pub(super) fn record_gate_pass(&mut self, applied: &[String]) {
        let policy = rules::Policy::default();
        match rules::record_gate_pass(&self.paths.store, applied, &policy, Utc::now()) {
            Ok(changes) => {
                for c in changes {
                    self.notice(c.to_string());
                }
            }
            Err(e) => self.warn(format!("cannot record the gate pass: {e}")),
        }
    }
}
