//! What an agent may change in prd.json, and setting back the rest.
//!
//! prd.json is the person's plan. Of it, the agent's to change are its own
//! story's `passes` (which only ralph's gate makes stick) and any story's
//! `notes`. Everything else it changed — another story's mark, a story
//! added or renamed, a priority, a `verify`, the branch — is set back and
//! named: in the log, in the next prompt, and, except marks, as the
//! agent's proposal in the run's report, for the person to apply or not.
//! Deleting or reordering stories is damage, handled before this
//! ([`Prd::identity_damage`]).

use serde_json::{Map, Value};

use super::Prd;

/// What [`Prd::set_back_tampering`] set back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tampering {
    /// Everything set back, for people: `US-002's "passes"`, `a new story (X)`.
    pub findings: Vec<String>,
    /// Other stories the agent marked passing.
    pub claimed: Vec<String>,
    /// The findings that are edits of the plan rather than marks: what the
    /// agent proposes, for the report.
    pub proposed: Vec<String>,
    /// The agent's prd.json, when it proposed anything: for the person to
    /// look at (ralph's formatting).
    pub theirs: Option<String>,
}

/// The fields an agent may change in any story.
const FREE: &[&str] = &["notes"];

impl Prd {
    /// Sets back what an agent may not change, compared with `before` (the
    /// PRD at the start of its iteration on story `own`): everything but
    /// its own story's `passes` and the stories' `notes`. A PRD with
    /// nothing to set back is left as the agent wrote it.
    pub fn set_back_tampering(&mut self, before: &Prd, own: &str) -> Tampering {
        let mut t = Tampering::default();
        let mut kept = before.clone();
        for key in keys(&before.root, &self.root).filter(|k| *k != "userStories") {
            if before.root.get(key) != self.root.get(key) {
                t.proposed.push(format!("\"{key}\""));
            }
        }
        for s in &self.stories {
            let Some(b) = before.story(&s.id) else {
                t.proposed.push(format!("a new story ({})", s.id));
                continue;
            };
            if s.passes != b.passes {
                if s.id == own {
                    kept.set_passes(own, s.passes);
                } else {
                    if s.passes {
                        t.claimed.push(s.id.clone());
                    }
                    t.findings.push(format!("{}'s \"passes\"", s.id));
                }
            }
            let (now, was) = (self.object(s.index), before.object(b.index));
            for key in keys(was, now).filter(|k| *k != "passes") {
                match (was.get(key), now.get(key)) {
                    (a, n) if a == n => {}
                    (_, n) if FREE.contains(&key) => kept.set_field(b.index, key, n.cloned()),
                    _ => t.proposed.push(format!("{}'s \"{key}\"", s.id)),
                }
            }
        }
        t.findings.extend(t.proposed.iter().cloned());
        if !t.proposed.is_empty() {
            t.theirs = Some(self.to_json());
        }
        if !t.findings.is_empty() {
            *self = kept;
        }
        t
    }

    /// The story at `index` as the file holds it.
    fn object(&self, index: usize) -> &Map<String, Value> {
        static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
        self.root
            .get("userStories")
            .and_then(Value::as_array)
            .and_then(|a| a.get(index))
            .and_then(Value::as_object)
            .unwrap_or(&EMPTY)
    }

    /// Sets (or, with `None`, removes) one field of the story at `index`.
    fn set_field(&mut self, index: usize, key: &str, value: Option<Value>) {
        let Some(Value::Object(obj)) = self
            .root
            .get_mut("userStories")
            .and_then(|v| v.as_array_mut())
            .and_then(|a| a.get_mut(index))
        else {
            return;
        };
        match value {
            Some(v) => obj.insert(key.into(), v),
            None => obj.shift_remove(key),
        };
        if let Ok(stories) = super::read_stories(&self.root) {
            self.stories = stories;
        }
    }
}

/// The keys of `a`, then those only `b` has.
fn keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> impl Iterator<Item = &'a str> {
    a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))).map(String::as_str)
}
