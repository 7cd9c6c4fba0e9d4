//! What ralph owns so that "verified" means something: the oracle is the
//! person's, not the agent's.
//!
//! - `base`: the settings that decide trust (the gate, the breaker, the
//!   sandbox) come from the project config as committed on the run's base,
//!   never from what the run branch committed; `ralph trust` accepts the
//!   branch's copy. Where ralph keeps the run branch's base, accepted
//!   copies and test counts (`trust.json`).
//! - `protect`: paths the agent may not change (pure).
//! - `vanish`: tests may not vanish — counts before and after, skip
//!   markers and deleted tests in the diff (pure).
//! - `git_dir`: the repository's config and hooks, which ralph's own git
//!   commands read and run, are set back when an iteration changed them.
//! - `red`: red, then green — a story's own check must fail on the base
//!   before its work (pure).
//!
//! `Findings` is what the oracle found about one story over a run: the
//! checkpoint's tally, the run end's report and `ralph report` all carry it.

pub(crate) mod base;
pub(crate) mod git_dir;
pub(crate) mod protect;
pub(crate) mod red;
pub(crate) mod vanish;

use serde::{Deserialize, Serialize, Serializer, ser::SerializeMap};

/// What the oracle found about one story: its test counts, the iterations
/// it refused, the tests it flagged, its check on the base. One owner for
/// state.json's tally, the run end's report (both flatten it, last, so
/// their keys keep their order) and `ralph report`'s story.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    /// What its gate's test runners counted before its work (the record it
    /// was held to) and at its last gate run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_before: Option<crate::gate::TestCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_after: Option<crate::gate::TestCounts>,
    /// Why its iterations were refused (protected paths changed, tests
    /// that vanished), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// Skip markers added and tests deleted in its diffs (file:line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_flags: Vec<String>,
    /// Its own check on the run's base, before its work (`gate.require_red`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red: Option<red::RedEvidence>,
}

impl Findings {
    /// Refusals or flags: something a person should look at.
    pub fn refused_or_flagged(&self) -> bool {
        !self.refused.is_empty() || !self.test_flags.is_empty()
    }

    /// Written with every key but `red`, `null` and `[]` included, for a
    /// flattened field (`#[serde(flatten, serialize_with = …)]`): `ralph
    /// report --json` has always printed them so.
    pub fn serialize_in_full<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("tests_before", &self.tests_before)?;
        map.serialize_entry("tests_after", &self.tests_after)?;
        map.serialize_entry("refused", &self.refused)?;
        map.serialize_entry("test_flags", &self.test_flags)?;
        if let Some(red) = &self.red {
            map.serialize_entry("red", red)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::{Findings, red};
    use crate::event::StoryReport;
    use crate::history::report::StoryOracle;
    use crate::state::StoryTally;

    fn found() -> Findings {
        let counts = crate::gate::TestCounts { passed: 3, failed: 1, ignored: 0, skipped: 2 };
        Findings {
            tests_before: Some(counts),
            tests_after: Some(counts),
            refused: vec!["iteration 2: tests vanished".into()],
            test_flags: vec!["iteration 3: src/a.rs:3 #[ignore]".into()],
            red: Some(red::RedEvidence {
                base: "main".into(),
                commit: "c0ffee".into(),
                check: "make check".into(),
                passed_on_base: false,
                detail: "exit 1".into(),
            }),
        }
    }

    const COUNTS: &str = r#"{"passed":3,"failed":1,"ignored":0,"skipped":2}"#;
    const RED: &str = r#"{"base":"main","commit":"c0ffee","check":"make check","passed_on_base":false,"detail":"exit 1"}"#;

    fn all_found() -> String {
        format!(
            r#""tests_before":{COUNTS},"tests_after":{COUNTS},"refused":["iteration 2: tests vanished"],"test_flags":["iteration 3: src/a.rs:3 #[ignore]"],"red":{RED}"#
        )
    }

    /// Round trip: `json` is what `value` writes, and reads back as it.
    fn writes<T>(value: &T, json: &str)
    where
        T: serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        assert_eq!(serde_json::to_string(value).unwrap(), json);
        let back: T = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }

    #[test]
    fn state_json_s_tally_keeps_its_keys_and_leaves_out_what_is_empty() {
        writes(&StoryTally::default(), r#"{"iterations":0,"cost_usd":0.0}"#);
        let work = crate::state::StoryWork {
            iterations: 2,
            cost_usd: 0.5,
            commit: Some("abc1234".into()),
            agents: vec!["claude".into()],
            resolves: 1,
            merge_failures: vec!["conflict".into()],
        };
        let tally = StoryTally { work, findings: found() };
        let json = format!(
            r#"{{"iterations":2,"cost_usd":0.5,"commit":"abc1234","agents":["claude"],"resolves":1,"merge_failures":["conflict"],{}}}"#,
            all_found()
        );
        writes(&tally, &json);
    }

    #[test]
    fn the_run_end_s_story_keeps_its_keys_and_leaves_out_what_is_empty() {
        let bare = StoryReport { id: "US-001".into(), title: "t".into(), ..Default::default() };
        writes(
            &bare,
            r#"{"id":"US-001","title":"t","claimed":false,"verified":null,"passes":false,"iterations":0,"cost_usd":0.0}"#,
        );
        let full = StoryReport {
            gate: Some("cargo test".into()),
            gate_source: Some("default".into()),
            findings: found(),
            ..bare
        };
        let json = format!(
            r#"{{"id":"US-001","title":"t","claimed":false,"verified":null,"passes":false,"iterations":0,"cost_usd":0.0,"gate":"cargo test","gate_source":"default",{}}}"#,
            all_found()
        );
        writes(&full, &json);
    }

    #[test]
    fn ralph_report_s_story_writes_every_finding_but_red_even_when_empty() {
        writes(
            &StoryOracle::default(),
            r#"{"gate":null,"gate_source":null,"tests_before":null,"tests_after":null,"refused":[],"test_flags":[]}"#,
        );
        let full = StoryOracle {
            gate: Some("cargo test".into()),
            gate_source: Some("default".into()),
            findings: found(),
        };
        let json = format!(r#"{{"gate":"cargo test","gate_source":"default",{}}}"#, all_found());
        writes(&full, &json);
    }
}
