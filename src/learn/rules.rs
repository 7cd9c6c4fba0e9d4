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
//! Identical failures (same category and [`signature`](super::failures::signature))
//! merge into one card. **Only a person arms a card**: a machine counts,
//! flags `ready`, revives a rejected card to candidate and demotes an armed
//! rule that is not working, but never promotes. Environment failures
//! (`gate-not-run`) never create or touch a card.
//!
//! An armed rule is judged by what happens in iterations whose prompt held
//! it (the `applied` ids the loop passes in): its failure recurring counts a
//! violation, a passing gate counts compliance. See [`verdict`].
//!
//! The cards live in the store's `rules.json` (versioned, with a `revision`
//! that each write raises), one file for the project: a linked worktree (a
//! parallel run's worker) reads and writes the main repository's
//! ([`Store::rules`]). Every change is a read-modify-write under
//! `rules.lock` beside it, so a person running `ralph rules arm` while
//! workers record failures loses no change. A file that cannot be read is
//! never overwritten: it may be a hand edit waiting to be fixed.

use std::fs::OpenOptions;
use std::io;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::failures::{self, Category, Event, Failure};
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

impl Change {
    /// Whether a run says so as it happens: not a new candidate, nor one
    /// counted short of being ready for review.
    pub fn worth_telling(&self) -> bool {
        !matches!(self, Change::Created { .. } | Change::Counted { ready: false, .. })
    }
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
            self.cards.push(first_seen(id.clone(), event, sample, policy, now));
            return Some(Change::Created { id });
        };
        Some(seen_again(&mut self.cards[i], sample, applied, policy, now))
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

/// A new candidate card for a failure seen for the first time.
fn first_seen(
    id: String,
    event: &Event,
    sample: Sample,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Card {
    Card {
        id,
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
    }
}

/// A failure its card has seen before: counted and sampled, then by the
/// card's state — a candidate may become ready, an armed rule that was in
/// the prompt was violated, a rejected one comes back after enough
/// recurrences.
fn seen_again(
    card: &mut Card,
    sample: Sample,
    applied: &[String],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Change {
    card.occurrences = card.occurrences.saturating_add(1);
    card.last_seen = now;
    card.samples.push(sample);
    let excess = card.samples.len().saturating_sub(MAX_SAMPLES);
    card.samples.drain(..excess);
    let id = card.id.clone();
    match card.state {
        State::Candidate => {
            card.ready = card.occurrences >= policy.ready_at;
            Change::Counted { id, occurrences: card.occurrences, ready: card.ready }
        }
        State::Armed if applied.contains(&card.id) => {
            card.metrics.violations = card.metrics.violations.saturating_add(1);
            judge(card, policy, now).unwrap_or(Change::Violated { id, metrics: card.metrics })
        }
        State::Rejected => {
            card.recurrences = card.recurrences.saturating_add(1);
            if card.recurrences < policy.revive_at {
                return Change::Counted { id, occurrences: card.occurrences, ready: false };
            }
            let note = format!("seen {} times since it was rejected", card.recurrences);
            card.occurrences = card.recurrences;
            card.recurrences = 0;
            card.ready = card.occurrences >= policy.ready_at;
            set_state(card, State::Candidate, note, now);
            Change::Revived { id }
        }
        // Armed but not in that prompt (armed while the agent ran), or put away.
        State::Armed | State::Demoted | State::Archived => {
            Change::Counted { id, occurrences: card.occurrences, ready: card.ready }
        }
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
    let lock_path = store.rules_lock();
    if let Some(dir) = lock_path.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir.to_path_buf()))?;
    }
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
        store::write_json_own(&store.rules(), &rules).map_err(io("write", store.rules()))?;
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
/// appends the row to `failures.jsonl`, then merges it into its card when the
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
    let appended = failures::append(store, &event).map_err(|source| RulesError::Io {
        what: "append to",
        path: store.failures(),
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
mod tests;
