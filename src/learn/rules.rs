//! Rule cards: failures that keep recurring, and the rules a person made of
//! them.
//!
//! ```text
//!   failure ─► CANDIDATE ── arm (a person) ──► ARMED ─► in every prompt
//!              │  ▲  occurrences++, `ready` at 3     │ violations vs compliance:
//!       reject │  │ seen 3 more times, or revive     ├─► DEMOTED by ralph
//!              ▼  │                                  └─► or flagged `undeterminable`
//!            REJECTED
//!   A person may also demote, archive, revive or arm a card in any state.
//! ```
//!
//! Identical failures (same category and [`signature`](super::events::signature))
//! merge into one card. **Only a person arms a card**: a machine counts,
//! flags `ready`, revives a rejected card to candidate and demotes an armed
//! rule that is not working, but never promotes. Environment failures
//! (`gate-not-run`) never create or touch a card.
//!
//! An armed rule is judged by what happens in iterations whose prompt held
//! it (the `applied` ids the loop passes in): its failure recurring counts a
//! violation, a passing gate counts compliance. See [`verdict`].
//!
//! The cards live in `.ralph/rules.json` (versioned, with a `revision` that
//! each write raises). Every change is a read-modify-write under
//! `.ralph/rules.lock`, so a person running `ralph rules arm` while the loop
//! records a failure loses neither change. A file that cannot be read is
//! never overwritten: it may be a hand edit waiting to be fixed.

use std::fs::OpenOptions;
use std::io;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::events::{self, Category, Event, Failure};
use crate::store::{self, Loaded, Store};
use crate::text;

/// Format version of `rules.json`.
pub const VERSION: u32 = 1;

/// The note of a card ralph just made. It names why the card is in its
/// state, not how often it was seen: that is `occurrences`.
pub(super) const NEW_NOTE: &str = "new candidate";

/// What older ralphs wrote as a new card's note; it stayed after the count
/// grew ("seen once" next to "occurrences: 16"), so it is shown as
/// [`NEW_NOTE`].
pub(super) const STALE_NEW_NOTE: &str = "new: seen once";

/// Samples of the failure kept on a card, newest last.
const MAX_SAMPLES: usize = 3;

/// Longest sample detail kept on a card, in chars.
const MAX_SAMPLE_CHARS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Seen and counted; waiting for a person.
    Candidate,
    /// Approved by a person: in every prompt.
    Armed,
    /// A person said no. Seen often enough again, it is a candidate again.
    Rejected,
    /// Taken out of the prompts, by a person or because it did not work.
    Demoted,
    /// Put away by a person.
    Archived,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Candidate => "candidate",
            State::Armed => "armed",
            State::Rejected => "rejected",
            State::Demoted => "demoted",
            State::Archived => "archived",
        }
    }
}

/// When a card is ready, revived or demoted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Occurrences at which a candidate is flagged `ready` for a person.
    pub ready_at: u32,
    /// Sightings after a rejection that make it a candidate again.
    pub revive_at: u32,
    /// Violations an armed rule needs before it can be demoted.
    pub demote_violations: u32,
    /// Violations plus compliance needed before it can be demoted.
    pub demote_min_evidence: u32,
    /// Share of violations in that evidence at which it is demoted.
    pub demote_ratio: f64,
}

impl Default for Policy {
    /// `demote_min_evidence` is 4, not the 5 of dsh-lesson-loop: with at
    /// least 3 violations and at least 1 compliance required, 4 is the least
    /// evidence there can be, and a rule its failure beat 3 times out of 4
    /// is not working (the seed's acceptance test demotes at 3 and 1).
    fn default() -> Policy {
        Policy {
            ready_at: 3,
            revive_at: 3,
            demote_violations: 3,
            demote_min_evidence: 4,
            demote_ratio: 0.5,
        }
    }
}

/// How an armed rule has fared since it was armed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    /// Its failure recurred in an iteration whose prompt held it.
    pub violations: u32,
    /// The gate passed in an iteration whose prompt held it.
    pub compliance: u32,
}

/// What the metrics say about an armed rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Enough violations to demote, but no compliance to weigh them against:
    /// a person should look (a rule nobody can follow, or a rule never given
    /// the chance).
    Undeterminable,
    Demote,
}

/// Judges an armed rule's metrics.
pub fn verdict(metrics: Metrics, policy: &Policy) -> Verdict {
    let Metrics { violations, compliance } = metrics;
    if violations < policy.demote_violations {
        return Verdict::Keep;
    }
    if compliance == 0 {
        return Verdict::Undeterminable;
    }
    let evidence = violations.saturating_add(compliance);
    let ratio = f64::from(violations) / f64::from(evidence);
    if evidence >= policy.demote_min_evidence && ratio >= policy.demote_ratio {
        Verdict::Demote
    } else {
        Verdict::Keep
    }
}

/// One occurrence of the failure, for a person deciding about the card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub at: DateTime<Utc>,
    pub story: String,
    pub iteration: u32,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Card {
    /// The first 8 hex digits of sha256(category, signature); longer only
    /// in the unlikely case that those collide.
    pub id: String,
    pub category: Category,
    pub signature: String,
    /// What the prompt says. Drafted from the failure; a person can replace
    /// it when arming.
    pub statement: String,
    pub state: State,
    /// Every sighting of the failure, whatever the state.
    pub occurrences: u32,
    /// Sightings since it was rejected.
    pub recurrences: u32,
    /// A candidate seen often enough for a person to consider.
    pub ready: bool,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub armed_at: Option<DateTime<Utc>>,
    /// When the state last changed, and why.
    pub changed_at: DateTime<Utc>,
    pub note: String,
    /// Since it was last armed.
    pub metrics: Metrics,
    /// Armed, with [`Verdict::Undeterminable`] metrics.
    pub undeterminable: bool,
    pub samples: Vec<Sample>,
}

/// What one call did to a card, for the loop's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Created {
        id: String,
    },
    Counted {
        id: String,
        occurrences: u32,
        ready: bool,
    },
    /// A rejected card seen often enough again.
    Revived {
        id: String,
    },
    Violated {
        id: String,
        metrics: Metrics,
    },
    Complied {
        id: String,
        metrics: Metrics,
    },
    /// Armed, violated, and judged not to work.
    Demoted {
        id: String,
        metrics: Metrics,
    },
    /// Newly flagged for a person.
    Undeterminable {
        id: String,
        metrics: Metrics,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = |m: &Metrics| format!("{} violations, {} compliance", m.violations, m.compliance);
        match self {
            Change::Created { id } => write!(f, "rule {id}: new candidate"),
            Change::Counted { id, occurrences, ready } => {
                let ready = if *ready { ", ready for review" } else { "" };
                write!(f, "rule {id}: seen {occurrences} times{ready}")
            }
            Change::Revived { id } => write!(f, "rule {id}: rejected, seen again: candidate again"),
            Change::Violated { id, metrics } => write!(f, "rule {id}: violated ({})", m(metrics)),
            Change::Complied { id, metrics } => write!(f, "rule {id}: complied ({})", m(metrics)),
            Change::Demoted { id, metrics } => {
                write!(f, "rule {id}: demoted, it is not working ({})", m(metrics))
            }
            Change::Undeterminable { id, metrics } => {
                write!(f, "rule {id}: cannot tell whether it works ({}); review it", m(metrics))
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The file exists but is not a rules file this ralph can read. It is
    /// left as it is: a person must fix or remove it.
    #[error("rules file unreadable: {}: {why} — fix or remove it", path.display())]
    Unreadable { path: PathBuf, why: String },
    #[error("no rule {id:?} (`ralph rules list` shows the ids)")]
    NotFound { id: String },
    #[error("rule id {id:?} is ambiguous: it could be {}", matches.join(", "))]
    Ambiguous { id: String, matches: Vec<String> },
    #[error("a rule's statement must not be empty")]
    EmptyStatement,
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// All the cards, exactly as `rules.json` holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    version: u32,
    revision: u64,
    cards: Vec<Card>,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules { version: VERSION, revision: 0, cards: Vec::new() }
    }
}

impl Rules {
    pub fn new() -> Rules {
        Rules::default()
    }

    /// Raised by every write of the file.
    #[cfg(test)]
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// In the order they were first seen.
    pub fn cards(&self) -> &[Card] {
        &self.cards
    }

    /// The card with this id, or the only one whose id starts with it.
    pub fn get(&self, id: &str) -> Result<&Card, RulesError> {
        let i = self.find(id)?;
        Ok(&self.cards[i])
    }

    fn find(&self, id: &str) -> Result<usize, RulesError> {
        let id = id.trim();
        if let Some(i) = self.cards.iter().position(|c| c.id == id) {
            return Ok(i);
        }
        let matches: Vec<usize> = (0..self.cards.len())
            .filter(|&i| !id.is_empty() && self.cards[i].id.starts_with(id))
            .collect();
        match matches[..] {
            [i] => Ok(i),
            [] => Err(RulesError::NotFound { id: id.to_string() }),
            _ => Err(RulesError::Ambiguous {
                id: id.to_string(),
                matches: matches.iter().map(|&i| self.cards[i].id.clone()).collect(),
            }),
        }
    }

    /// Armed rules, in the order they were armed.
    pub fn armed(&self) -> Vec<&Card> {
        let mut armed: Vec<&Card> = self.cards.iter().filter(|c| c.state == State::Armed).collect();
        armed.sort_by(|a, b| a.armed_at.cmp(&b.armed_at).then_with(|| a.id.cmp(&b.id)));
        armed
    }

    /// The ids of the armed rules: what the loop keeps as `applied` for the
    /// iteration whose prompt it builds from these rules.
    pub fn armed_ids(&self) -> Vec<String> {
        self.armed().into_iter().map(|c| c.id.clone()).collect()
    }

    /// Merges one failure into its card. `applied` holds the ids of the
    /// armed rules that were in the prompt of the iteration that failed.
    /// Returns `None` for a category that does not learn (see
    /// [`Category::learns`]), without touching any card.
    pub fn observe(
        &mut self,
        event: &Event,
        applied: &[String],
        policy: &Policy,
        now: DateTime<Utc>,
    ) -> Option<Change> {
        if !event.category.learns() {
            return None;
        }
        let sample = Sample {
            at: event.ts,
            story: event.story.clone(),
            iteration: event.iteration,
            detail: text::cut(&event.detail, MAX_SAMPLE_CHARS),
        };
        let Some(i) = self
            .cards
            .iter()
            .position(|c| c.category == event.category && c.signature == event.signature)
        else {
            let id = self.new_id(&event.category, &event.signature);
            self.cards.push(Card {
                id: id.clone(),
                category: event.category.clone(),
                signature: event.signature.clone(),
                statement: draft(&event.category, &event.signature),
                state: State::Candidate,
                occurrences: 1,
                recurrences: 0,
                ready: policy.ready_at <= 1,
                first_seen: now,
                last_seen: now,
                armed_at: None,
                changed_at: now,
                note: NEW_NOTE.into(),
                metrics: Metrics::default(),
                undeterminable: false,
                samples: vec![sample],
            });
            return Some(Change::Created { id });
        };
        let card = &mut self.cards[i];
        card.occurrences = card.occurrences.saturating_add(1);
        card.last_seen = now;
        card.samples.push(sample);
        let excess = card.samples.len().saturating_sub(MAX_SAMPLES);
        card.samples.drain(..excess);
        let id = card.id.clone();
        match card.state {
            State::Candidate => {
                card.ready = card.occurrences >= policy.ready_at;
                Some(Change::Counted { id, occurrences: card.occurrences, ready: card.ready })
            }
            State::Armed if applied.contains(&card.id) => {
                card.metrics.violations = card.metrics.violations.saturating_add(1);
                Some(
                    judge(card, policy, now)
                        .unwrap_or(Change::Violated { id, metrics: card.metrics }),
                )
            }
            State::Rejected => {
                card.recurrences = card.recurrences.saturating_add(1);
                if card.recurrences < policy.revive_at {
                    return Some(Change::Counted {
                        id,
                        occurrences: card.occurrences,
                        ready: false,
                    });
                }
                let note = format!("seen {} times since it was rejected", card.recurrences);
                card.occurrences = card.recurrences;
                card.recurrences = 0;
                card.ready = card.occurrences >= policy.ready_at;
                set_state(card, State::Candidate, note, now);
                Some(Change::Revived { id })
            }
            // Armed but not in that prompt (armed while the agent ran), or put away.
            State::Armed | State::Demoted | State::Archived => {
                Some(Change::Counted { id, occurrences: card.occurrences, ready: card.ready })
            }
        }
    }

    /// A passing gate: compliance for each armed rule in `applied`.
    pub fn gate_pass(
        &mut self,
        applied: &[String],
        policy: &Policy,
        now: DateTime<Utc>,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        for card in &mut self.cards {
            if card.state != State::Armed || !applied.contains(&card.id) {
                continue;
            }
            card.metrics.compliance = card.metrics.compliance.saturating_add(1);
            let metrics = card.metrics;
            let id = card.id.clone();
            changes.push(judge(card, policy, now).unwrap_or(Change::Complied { id, metrics }));
        }
        changes
    }

    /// A person arms a card, whatever its state: it goes into every prompt
    /// from the next iteration on, with fresh metrics. `statement` replaces
    /// the drafted text.
    pub fn arm(
        &mut self,
        id: &str,
        statement: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<&Card, RulesError> {
        let i = self.find(id)?;
        let card = &mut self.cards[i];
        if let Some(statement) = statement {
            let statement = statement.trim();
            if statement.is_empty() {
                return Err(RulesError::EmptyStatement);
            }
            card.statement = statement.to_string();
        }
        card.armed_at = Some(now);
        card.metrics = Metrics::default();
        card.undeterminable = false;
        card.recurrences = 0;
        set_state(card, State::Armed, "armed by a person".into(), now);
        Ok(card)
    }

    /// A person rejects a card. Seen [`Policy::revive_at`] more times, it is
    /// a candidate again (never armed).
    pub fn reject(&mut self, id: &str, now: DateTime<Utc>) -> Result<&Card, RulesError> {
        self.person_sets(id, State::Rejected, "rejected by a person", now)
    }

    pub fn demote(&mut self, id: &str, now: DateTime<Utc>) -> Result<&Card, RulesError> {
        self.person_sets(id, State::Demoted, "demoted by a person", now)
    }

    pub fn archive(&mut self, id: &str, now: DateTime<Utc>) -> Result<&Card, RulesError> {
        self.person_sets(id, State::Archived, "archived by a person", now)
    }

    /// Back to candidate, from any state.
    pub fn revive(&mut self, id: &str, now: DateTime<Utc>) -> Result<&Card, RulesError> {
        self.person_sets(id, State::Candidate, "revived by a person", now)
    }

    fn person_sets(
        &mut self,
        id: &str,
        state: State,
        note: &str,
        now: DateTime<Utc>,
    ) -> Result<&Card, RulesError> {
        let i = self.find(id)?;
        let card = &mut self.cards[i];
        card.recurrences = 0;
        card.undeterminable = false;
        set_state(card, state, note.into(), now);
        Ok(card)
    }

    /// A new card's id: 8 hex digits, more if another card has them.
    fn new_id(&self, category: &Category, signature: &str) -> String {
        let mut hasher = Sha256::new();
        hasher.update(category.as_str().as_bytes());
        hasher.update([0]);
        hasher.update(signature.as_bytes());
        let hex: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
        (8..hex.len())
            .step_by(4)
            .map(|n| &hex[..n])
            .find(|id| !self.cards.iter().any(|c| c.id == *id))
            .unwrap_or(&hex)
            .to_string()
    }

    /// Reads `rules.json`. Missing → no cards. Anything else that is not a
    /// valid rules file → [`RulesError::Unreadable`].
    pub fn load(store: &Store) -> Result<Rules, RulesError> {
        let path = store.rules();
        let unreadable = |why: String| RulesError::Unreadable { path: path.clone(), why };
        let rules: Rules = match store::read_versioned(&path, VERSION) {
            Ok(Loaded::Missing) => return Ok(Rules::new()),
            Ok(Loaded::Damaged(why)) => return Err(unreadable(why)),
            Ok(Loaded::Ok(rules)) => rules,
            Err(source) => return Err(RulesError::Io { what: "read", path, source }),
        };
        for (i, card) in rules.cards.iter().enumerate() {
            if card.id.is_empty() {
                return Err(unreadable(format!("card {i} has an empty id")));
            }
            let later = &rules.cards[i + 1..];
            if later.iter().any(|c| c.id == card.id) {
                return Err(unreadable(format!("two cards have the id {}", card.id)));
            }
            if later.iter().any(|c| c.category == card.category && c.signature == card.signature) {
                return Err(unreadable(format!("two cards have the failure of {}", card.id)));
            }
        }
        Ok(rules)
    }
}

fn set_state(card: &mut Card, state: State, note: String, now: DateTime<Utc>) {
    card.state = state;
    card.note = note;
    card.changed_at = now;
}

/// Applies the verdict to an armed card just measured; returns the change
/// when the verdict did something.
fn judge(card: &mut Card, policy: &Policy, now: DateTime<Utc>) -> Option<Change> {
    let (id, metrics) = (card.id.clone(), card.metrics);
    match verdict(metrics, policy) {
        Verdict::Keep => {
            card.undeterminable = false;
            None
        }
        Verdict::Undeterminable if card.undeterminable => None,
        Verdict::Undeterminable => {
            card.undeterminable = true;
            Some(Change::Undeterminable { id, metrics })
        }
        Verdict::Demote => {
            card.undeterminable = false;
            let note = format!(
                "demoted by ralph: {} violations against {} compliance",
                metrics.violations, metrics.compliance
            );
            set_state(card, State::Demoted, note, now);
            Some(Change::Demoted { id, metrics })
        }
    }
}

/// The statement a new card starts with. It quotes the failure; a person
/// arming it can write a better one.
fn draft(category: &Category, signature: &str) -> String {
    match category {
        Category::GateFailure => format!(
            "The verification gate kept failing with \"{signature}\". Run the project's checks \
             yourself and fix this before you end the iteration."
        ),
        Category::AgentExit => format!(
            "The agent kept exiting abnormally with \"{signature}\". Avoid what leads to it."
        ),
        Category::AgentTimeout => format!(
            "Iterations kept running out of time (\"{signature}\"). Keep each iteration's work \
             small and write the handoff before time runs out."
        ),
        Category::HandoffInvalid => format!(
            "The handoff kept being rejected: \"{signature}\". Write it exactly as the prompt \
             describes."
        ),
        _ => format!("Do not repeat: \"{signature}\"."),
    }
}

/// Read-modify-write of `rules.json` under `.ralph/rules.lock`. `change`
/// runs on the current cards; the file is written (revision raised) only if
/// they changed. An unreadable file is never written.
pub fn update<T>(
    store: &Store,
    change: impl FnOnce(&mut Rules) -> Result<T, RulesError>,
) -> Result<T, RulesError> {
    let io = |what, path: PathBuf| move |source| RulesError::Io { what, path, source };
    store.ensure().map_err(io("create", store.root().to_path_buf()))?;
    let lock_path = store.path("rules.lock");
    let lock = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io("open", lock_path.clone()))?;
    lock.lock().map_err(io("lock", lock_path))?;
    let mut rules = Rules::load(store)?;
    let before = rules.clone();
    let result = change(&mut rules)?;
    if rules != before {
        rules.revision = rules.revision.saturating_add(1);
        store::write_json(&store.rules(), &rules).map_err(io("write", store.rules()))?;
    }
    // Dropping `lock` releases it.
    Ok(result)
}

/// `ralph rules list`.
pub fn list(store: &Store) -> Result<Rules, RulesError> {
    Rules::load(store)
}

/// `ralph rules show <id>`.
pub fn show(store: &Store, id: &str) -> Result<Card, RulesError> {
    Rules::load(store)?.get(id).cloned()
}

/// `ralph rules arm <id> [--statement TEXT]`.
pub fn arm(
    store: &Store,
    id: &str,
    statement: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Card, RulesError> {
    update(store, |rules| rules.arm(id, statement, now).cloned())
}

/// `ralph rules reject <id>`.
pub fn reject(store: &Store, id: &str, now: DateTime<Utc>) -> Result<Card, RulesError> {
    update(store, |rules| rules.reject(id, now).cloned())
}

/// `ralph rules demote <id>`.
pub fn demote(store: &Store, id: &str, now: DateTime<Utc>) -> Result<Card, RulesError> {
    update(store, |rules| rules.demote(id, now).cloned())
}

/// `ralph rules archive <id>`.
pub fn archive(store: &Store, id: &str, now: DateTime<Utc>) -> Result<Card, RulesError> {
    update(store, |rules| rules.archive(id, now).cloned())
}

/// `ralph rules revive <id>`.
pub fn revive(store: &Store, id: &str, now: DateTime<Utc>) -> Result<Card, RulesError> {
    update(store, |rules| rules.revive(id, now).cloned())
}

/// The loop's hook for any failure (and any other row it wants recorded):
/// appends the row to `events.jsonl`, then merges it into its card when the
/// category learns. `applied`: the armed rule ids that were in the failed
/// iteration's prompt.
///
/// The merge runs even when the append fails. If only the append failed,
/// that error is returned and the card was still updated; if the merge
/// failed, its error is returned. Either way the caller logs and goes on.
pub fn record_failure(
    store: &Store,
    failure: &Failure,
    applied: &[String],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<Option<Change>, RulesError> {
    let event = failure.event(now);
    let appended = events::append(store, &event).map_err(|source| RulesError::Io {
        what: "append to",
        path: store.events(),
        source,
    });
    if !event.category.learns() {
        return appended.map(|()| None);
    }
    let change = update(store, |rules| Ok(rules.observe(&event, applied, policy, now)))?;
    appended.map(|()| change)
}

/// The loop's hook for a passing gate: compliance for each armed rule that
/// was in that iteration's prompt (`applied`). Does nothing, and reads
/// nothing, when none was.
pub fn record_gate_pass(
    store: &Store,
    applied: &[String],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<Vec<Change>, RulesError> {
    if applied.is_empty() {
        return Ok(Vec::new());
    }
    update(store, |rules| Ok(rules.gate_pass(applied, policy, now)))
}

pub use super::render::{render_card, render_list, rules_block};

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;
    use std::fs;

    fn t(minutes: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z").unwrap().with_timezone(&Utc)
            + TimeDelta::minutes(minutes)
    }

    fn fresh() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.ensure().unwrap();
        (dir, store)
    }

    fn failure(category: Category, signature: &str) -> Failure<'_> {
        Failure {
            run_id: "run-1",
            iteration: 1,
            story: "US-001",
            category,
            signature,
            detail: "error[E0425]: cannot find value `x` in this scope",
            evidence: Some("logs/run-1/1.log"),
        }
    }

    fn gate(store: &Store, times: usize, applied: &[String]) -> Option<Change> {
        let mut last = None;
        for i in 0..times {
            let f = failure(Category::GateFailure, "error[E0425]: cannot find value `x`");
            last = record_failure(store, &f, applied, &Policy::default(), t(i as i64)).unwrap();
        }
        last
    }

    fn only_card(store: &Store) -> Card {
        let rules = list(store).unwrap();
        assert_eq!(rules.cards().len(), 1, "{rules:?}");
        rules.cards()[0].clone()
    }

    #[test]
    fn three_identical_gate_failures_make_one_ready_candidate() {
        let (_dir, store) = fresh();
        gate(&store, 3, &[]);
        let card = only_card(&store);
        assert_eq!((card.state, card.occurrences, card.ready), (State::Candidate, 3, true));
        assert_eq!(events::read(&store).unwrap().events.len(), 3);
        let table = render_list(&list(&store).unwrap());
        let row = table.lines().nth(1).unwrap();
        assert!(row.starts_with(&card.id), "{table}");
        assert!(row.contains("candidate") && row.contains(" 3  ready "), "{table}");
        // Two occurrences are not ready yet; a different signature is another card.
        let (_dir2, store2) = fresh();
        gate(&store2, 2, &[]);
        assert!(!only_card(&store2).ready);
        let f = failure(Category::GateFailure, "error[E0433]: failed to resolve");
        record_failure(&store2, &f, &[], &Policy::default(), t(9)).unwrap();
        assert_eq!(list(&store2).unwrap().cards().len(), 2);
    }

    #[test]
    fn a_hundred_failures_never_arm_a_rule() {
        let (_dir, store) = fresh();
        gate(&store, 100, &[]);
        let card = only_card(&store);
        assert_eq!((card.state, card.occurrences), (State::Candidate, 100));
        let rules = list(&store).unwrap();
        assert_eq!(rules_block(&rules), "");
        assert!(rules.armed_ids().is_empty());
    }

    #[test]
    fn arming_puts_the_rule_in_the_prompt() {
        let (_dir, store) = fresh();
        gate(&store, 3, &[]);
        let id = only_card(&store).id;
        let armed =
            arm(&store, &id[..5], Some("  Declare `x` before use. MARKER-7 "), t(10)).unwrap();
        assert_eq!(armed.state, State::Armed);
        assert_eq!(armed.armed_at, Some(t(10)));
        let rules = list(&store).unwrap();
        let block = rules_block(&rules);
        assert!(block.starts_with("## Rules for this project\n"), "{block}");
        assert!(
            block.contains(&format!("Rule 1 ({id}, armed 2026-03-01; no evidence yet):\n```text\nDeclare `x` before use. MARKER-7\n```\n")),
            "{block}"
        );
        assert_eq!(rules.armed_ids(), std::slice::from_ref(&id));
        assert!(arm(&store, &id, Some(" "), t(11)).unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn only_armed_rules_reach_the_prompt_in_arming_order() {
        let mut rules = Rules::new();
        let policy = Policy::default();
        let sigs = ["A-sig", "B-sig", "C-sig", "D-sig", "E-sig", "F-sig"];
        for (i, sig) in sigs.iter().enumerate() {
            let event = failure(Category::GateFailure, sig).event(t(i as i64));
            rules.observe(&event, &[], &policy, t(i as i64));
        }
        let id = |n: usize| rules.cards()[n].id.clone();
        let ids: Vec<String> = (0..6).map(id).collect();
        rules.arm(&ids[1], None, t(20)).unwrap();
        rules.arm(&ids[0], None, t(21)).unwrap();
        rules.arm(&ids[2], None, t(22)).unwrap();
        rules.reject(&ids[2], t(23)).unwrap();
        rules.arm(&ids[3], None, t(24)).unwrap();
        rules.demote(&ids[3], t(25)).unwrap();
        rules.arm(&ids[4], None, t(26)).unwrap();
        rules.archive(&ids[4], t(27)).unwrap();
        let block = rules_block(&rules);
        for (sig, shown) in sigs.iter().zip([true, true, false, false, false, false]) {
            assert_eq!(block.contains(sig), shown, "{sig}: {block}");
        }
        assert!(block.find("B-sig").unwrap() < block.find("A-sig").unwrap(), "arming order");
        assert_eq!(rules.armed_ids(), [ids[1].clone(), ids[0].clone()]);
    }

    #[test]
    fn a_rejected_card_seen_three_more_times_is_a_candidate_not_armed() {
        let (_dir, store) = fresh();
        gate(&store, 3, &[]);
        let id = only_card(&store).id;
        reject(&store, &id, t(5)).unwrap();
        let states: Vec<State> = (0..3)
            .map(|_| {
                gate(&store, 1, &[]);
                only_card(&store).state
            })
            .collect();
        assert_eq!(states, [State::Rejected, State::Rejected, State::Candidate]);
        let card = only_card(&store);
        assert_eq!((card.occurrences, card.ready, card.recurrences), (3, true, 0));
        assert_eq!(rules_block(&list(&store).unwrap()), "");
        revive(&store, &id, t(30)).unwrap();
        assert_eq!(only_card(&store).note, "revived by a person");
    }

    #[test]
    fn environment_failures_never_touch_cards() {
        let (_dir, store) = fresh();
        for i in 0..10 {
            let f = failure(Category::GateNotRun, "verify: /nonexistent: not found");
            assert_eq!(record_failure(&store, &f, &[], &Policy::default(), t(i)).unwrap(), None);
        }
        assert!(!store.rules().exists(), "rules.json must not even be written");
        let mut rules = Rules::new();
        for category in [Category::GateNotRun, Category::Blocked, Category::Lesson] {
            let event = failure(category, "x").event(t(0));
            assert_eq!(rules.observe(&event, &[], &Policy::default(), t(0)), None);
        }
        assert!(rules.cards().is_empty());
        assert_eq!(events::read(&store).unwrap().events.len(), 10);
        // Not even read: a corrupt rules file does not make them fail.
        fs::write(store.rules(), "{corrupt").unwrap();
        let f = failure(Category::GateNotRun, "x");
        assert!(record_failure(&store, &f, &[], &Policy::default(), t(11)).is_ok());
        for category in [Category::Blocked, Category::Lesson] {
            let f = failure(category, "x");
            assert!(record_failure(&store, &f, &[], &Policy::default(), t(12)).is_ok());
        }
    }

    #[test]
    fn a_corrupt_rules_file_is_never_written() {
        #[rustfmt::skip]
        let cases: &[(&str, &[u8], &str)] = &[
            ("not json", b"{\"version\":1,\"revision\":2,\"cards\":[", "EOF while parsing"),
            ("empty", b"", "empty file"),
            ("cards not an array", br#"{"version":1,"revision":2,"cards":{}}"#, "invalid type"),
            ("future version", br#"{"version":2,"revision":0,"cards":[]}"#, "version 2"),
            ("no version", br#"{"revision":0,"cards":[]}"#, "no version field"),
            ("not UTF-8", b"\xff\xfe", "not UTF-8"),
        ];
        for (name, bytes, why) in cases {
            let (_dir, store) = fresh();
            gate(&store, 1, &[]);
            let id = only_card(&store).id;
            fs::write(store.rules(), bytes).unwrap();
            let error = arm(&store, &id, None, t(5)).unwrap_err();
            let message = error.to_string();
            let expected = format!("rules file unreadable: {}: ", store.rules().display());
            assert!(message.starts_with(&expected), "{name}: {message}");
            assert!(message.contains(why), "{name}: {message}");
            assert!(message.ends_with(" — fix or remove it"), "{name}: {message}");
            assert!(
                record_failure(
                    &store,
                    &failure(Category::GateFailure, "y"),
                    &[],
                    &Policy::default(),
                    t(6)
                )
                .is_err(),
                "{name}"
            );
            assert!(
                record_gate_pass(&store, std::slice::from_ref(&id), &Policy::default(), t(7))
                    .is_err(),
                "{name}"
            );
            assert!(matches!(show(&store, &id), Err(RulesError::Unreadable { .. })), "{name}");
            assert_eq!(fs::read(store.rules()).unwrap(), *bytes, "{name}: bytes changed");
        }
    }

    #[test]
    fn duplicate_cards_make_the_file_unreadable() {
        let (_dir, store) = fresh();
        gate(&store, 1, &[]);
        let mut value: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(store.rules()).unwrap()).unwrap();
        let card = value["cards"][0].clone();
        value["cards"].as_array_mut().unwrap().push(card);
        fs::write(store.rules(), value.to_string()).unwrap();
        let message = list(&store).unwrap_err().to_string();
        assert!(message.contains("two cards have the id"), "{message}");
    }

    #[test]
    fn demotion_table() {
        let p = Policy::default();
        let strict = Policy { demote_min_evidence: 5, ..Policy::default() };
        #[rustfmt::skip]
        let cases: &[(u32, u32, &Policy, Verdict)] = &[
            (3, 1, &p, Verdict::Demote),
            (3, 0, &p, Verdict::Undeterminable),
            (9, 0, &p, Verdict::Undeterminable),
            (2, 0, &p, Verdict::Keep),
            (2, 2, &p, Verdict::Keep),
            (3, 3, &p, Verdict::Demote),
            (3, 4, &p, Verdict::Keep),
            (0, 10, &p, Verdict::Keep),
            (3, 1, &strict, Verdict::Keep),
            (3, 2, &strict, Verdict::Demote),
        ];
        for &(violations, compliance, policy, expected) in cases {
            let got = verdict(Metrics { violations, compliance }, policy);
            assert_eq!(got, expected, "{violations} violations, {compliance} compliance");
        }
    }

    #[test]
    fn metrics_drive_demotion_through_the_hooks() {
        // violation=3, compliance=1 → demoted.
        let (_dir, store) = fresh();
        gate(&store, 3, &[]);
        let id = only_card(&store).id;
        arm(&store, &id, None, t(10)).unwrap();
        let applied = [id.clone()];
        let p = Policy::default();
        assert_eq!(
            record_gate_pass(&store, &applied, &p, t(11)).unwrap(),
            [Change::Complied {
                id: id.clone(),
                metrics: Metrics { violations: 0, compliance: 1 }
            }]
        );
        gate(&store, 2, &applied);
        assert_eq!(only_card(&store).state, State::Armed);
        let change = gate(&store, 1, &applied).unwrap();
        assert!(matches!(change, Change::Demoted { .. }), "{change:?}");
        let card = only_card(&store);
        assert_eq!(card.state, State::Demoted);
        assert_eq!(card.metrics, Metrics { violations: 3, compliance: 1 });
        assert!(card.note.starts_with("demoted by ralph"), "{}", card.note);
        assert_eq!(rules_block(&list(&store).unwrap()), "");

        // violation=3, compliance=0 → still armed, flagged undeterminable.
        let (_dir, store) = fresh();
        gate(&store, 1, &[]);
        let id = only_card(&store).id;
        arm(&store, &id, None, t(10)).unwrap();
        let applied = [id.clone()];
        gate(&store, 2, &applied);
        assert!(!only_card(&store).undeterminable);
        let change = gate(&store, 1, &applied).unwrap();
        assert!(matches!(change, Change::Undeterminable { .. }), "{change:?}");
        let card = only_card(&store);
        assert_eq!((card.state, card.undeterminable), (State::Armed, true));
        assert!(rules_block(&list(&store).unwrap()).contains("violated 3 times, followed 0"));
        assert!(render_list(&list(&store).unwrap()).contains("undeterminable"));

        // Re-arming resets the metrics and the flag.
        let card = arm(&store, &id, None, t(20)).unwrap();
        assert_eq!((card.metrics, card.undeterminable), (Metrics::default(), false));
    }

    #[test]
    fn violations_count_only_for_rules_that_were_in_the_prompt() {
        let (_dir, store) = fresh();
        gate(&store, 1, &[]);
        let id = only_card(&store).id;
        arm(&store, &id, None, t(10)).unwrap();
        // Armed while that iteration's agent was already running.
        gate(&store, 1, &[]);
        assert_eq!(record_gate_pass(&store, &[], &Policy::default(), t(12)).unwrap(), []);
        let card = only_card(&store);
        assert_eq!((card.occurrences, card.metrics), (2, Metrics::default()));
    }

    #[test]
    fn person_actions_and_lookup() {
        let mut rules = Rules::new();
        let p = Policy::default();
        for sig in ["one", "two"] {
            rules.observe(&failure(Category::AgentExit, sig).event(t(0)), &[], &p, t(0));
        }
        let id = rules.cards()[0].id.clone();
        assert_eq!(id.len(), 8);
        assert!(matches!(rules.get("zzzz"), Err(RulesError::NotFound { .. })));
        assert!(matches!(rules.get(""), Err(RulesError::NotFound { .. })));
        assert_eq!(rules.get(&format!(" {id} ")).unwrap().signature, "one");
        #[rustfmt::skip]
        let steps: &[(&str, State)] = &[
            ("arm", State::Armed), ("demote", State::Demoted), ("revive", State::Candidate),
            ("archive", State::Archived), ("arm", State::Armed), ("reject", State::Rejected),
        ];
        for (i, (action, state)) in steps.iter().enumerate() {
            let now = t(i as i64 + 1);
            let card = match *action {
                "arm" => rules.arm(&id, None, now),
                "demote" => rules.demote(&id, now),
                "revive" => rules.revive(&id, now),
                "archive" => rules.archive(&id, now),
                _ => rules.reject(&id, now),
            }
            .unwrap();
            assert_eq!((card.state, card.changed_at), (*state, now), "{action}");
        }
    }

    #[test]
    fn ids_are_stable_and_lengthen_on_collision() {
        let mut a = Rules::new();
        let mut b = Rules::new();
        let event = failure(Category::GateFailure, "same").event(t(0));
        a.observe(&event, &[], &Policy::default(), t(0));
        b.observe(&event, &[], &Policy::default(), t(5));
        assert_eq!(a.cards()[0].id, b.cards()[0].id);
        let id = a.cards()[0].id.clone();
        // A hand-made card that took this id forces a longer one.
        let mut taken = a.clone();
        taken.cards[0].signature = "other".into();
        taken.observe(&event, &[], &Policy::default(), t(0));
        let new = &taken.cards()[1].id;
        assert_eq!(new.len(), 12);
        assert!(new.starts_with(&id));
    }

    #[test]
    fn revision_rises_only_when_something_changed() {
        let (_dir, store) = fresh();
        gate(&store, 2, &[]);
        assert_eq!(list(&store).unwrap().revision(), 2);
        let id = only_card(&store).id;
        assert!(arm(&store, "nope", None, t(3)).is_err());
        record_gate_pass(&store, std::slice::from_ref(&id), &Policy::default(), t(4)).unwrap();
        assert_eq!(list(&store).unwrap().revision(), 2);
        arm(&store, &id, None, t(5)).unwrap();
        assert_eq!(list(&store).unwrap().revision(), 3);
    }

    #[test]
    fn show_renders_every_field_and_json_round_trips() {
        let (_dir, store) = fresh();
        gate(&store, 3, &[]);
        let card = show(&store, &only_card(&store).id).unwrap();
        let text = render_card(&card);
        #[rustfmt::skip]
        let fields: &[(&str, &str)] = &[
            ("id:", &card.id), ("state:", "candidate"), ("note:", "new candidate"),
            ("category:", "gate-failure"), ("signature:", "error[E0425]: cannot find value `x`"),
            ("statement:", "The verification gate kept failing with \"error[E0425]"),
            ("occurrences:", "3 (ready)"), ("recurrences:", "0"),
            ("first seen:", "2026-03-01 12:00:00 UTC"), ("last seen:", "2026-03-01 12:02:00 UTC"),
            ("changed:", "2026-03-01 12:00:00 UTC"), ("armed at:", "-"), ("violations:", "0"),
            ("compliance:", "0"), ("undetermined:", "no"),
        ];
        for (label, value) in fields {
            let needle = format!("\n{label:<14}{value}");
            assert!(format!("\n{text}").contains(&needle), "{needle:?} not in\n{text}");
        }
        assert!(
            text.contains(
                "samples:\n  2026-03-01 12:00:00 UTC story US-001 iteration 1: error[E0425]"
            ),
            "{text}"
        );
        assert!(!text.contains("once"), "{text}");
        // A card an older ralph wrote says so no longer either.
        let old = Card { note: STALE_NEW_NOTE.into(), occurrences: 16, ..card.clone() };
        let text = render_card(&old);
        assert!(text.contains("\nnote:         new candidate\n"), "{text}");
        assert!(!text.contains("once") && text.contains("occurrences:  16"), "{text}");
        let json = serde_json::to_value(&card).unwrap();
        assert_eq!(json["state"], "candidate");
        assert_eq!(json["category"], "gate-failure");
        assert_eq!(json["metrics"]["violations"], 0);
        assert_eq!(serde_json::from_value::<Card>(json).unwrap(), card);
        assert_eq!(card.samples.len(), MAX_SAMPLES);
    }
}
