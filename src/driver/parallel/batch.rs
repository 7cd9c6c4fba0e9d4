//! Batch, then bisect: the queued stories squashed one after another onto
//! the run branch's tip and gated **once**; only when that gate fails are
//! they split in halves, each half merged the same way, down to single
//! stories. Pure over a [`Merger`], so the property that matters — the
//! result is exactly the one-at-a-time result — is tested on a model.
//!
//! That holds for any gate whose verdict is *downward closed*: a tree that
//! passes still passes with a story's changes taken out of it (a failing
//! test stays failing when more code is added). Every story-level check
//! ralph knows (a test suite, a build, a story's `verify`) is; a gate that
//! passes only when two stories are both in is not, and for such a gate a
//! batch may merge what one at a time would have sent back.

/// What the merge queue does to the repository and the gate: the real one
/// (git and the gate program) or a model (the tests).
pub(super) trait Merger {
    /// A commit of the run branch, or a model's stand-in for one.
    type Tip: Clone;
    type Error;

    /// `story` squashed onto `tip`, its bookkeeping with it: the new tip, or
    /// the files that conflict.
    fn squash(
        &mut self,
        tip: &Self::Tip,
        story: usize,
    ) -> Result<Result<Self::Tip, Vec<String>>, Self::Error>;

    /// The gate on `tip`, which holds `members`' work on top of what was
    /// already merged (their own `verify` commands included).
    fn gate(&mut self, tip: &Self::Tip, members: &[usize]) -> Result<Gated, Self::Error>;
}

/// The gate's verdict on a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Gated {
    Passed,
    /// The feedback for the story's next attempt.
    Failed(String),
    /// A signal stopped it: no verdict.
    Interrupted,
}

/// What became of one queued story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Fate {
    /// On the tip the batch returns.
    Merged,
    /// Its changes conflict with the tip it was squashed onto.
    Conflict(Vec<String>),
    /// Alone on the tip, the gate fails.
    GateFailed(String),
    /// The gate was stopped by a signal: still queued.
    Waiting,
}

/// The batch's result: the new tip and each story's fate, in queue order.
#[derive(Debug, Clone)]
pub(super) struct Merged<T> {
    pub tip: T,
    pub fates: Vec<(usize, Fate)>,
    /// Gate runs it took.
    pub gates: usize,
}

/// Merges `stories` (in queue order) onto `tip`: squashed in order, the
/// conflicting ones set aside, the rest gated once together; a failing
/// gate splits the batch in two halves merged one after the other.
pub(super) fn merge<M: Merger>(
    m: &mut M,
    tip: M::Tip,
    stories: &[usize],
) -> Result<Merged<M::Tip>, M::Error> {
    let mut chain = tip.clone();
    let mut members = Vec::new();
    let mut fates = Vec::new();
    for &s in stories {
        match m.squash(&chain, s)? {
            Ok(next) => {
                chain = next;
                members.push(s);
            }
            Err(files) => fates.push((s, Fate::Conflict(files))),
        }
    }
    if members.is_empty() {
        return Ok(Merged { tip, fates, gates: 0 });
    }
    let verdict = m.gate(&chain, &members)?;
    let fate_of_all = |fate: Fate| stories.iter().map(|&s| (s, fate.clone())).collect();
    match verdict {
        Gated::Passed => {
            let fates = in_order(stories, fates, &members, Fate::Merged);
            Ok(Merged { tip: chain, fates, gates: 1 })
        }
        Gated::Interrupted => Ok(Merged { tip, fates: fate_of_all(Fate::Waiting), gates: 1 }),
        Gated::Failed(feedback) if stories.len() == 1 => {
            let fates = in_order(stories, fates, &members, Fate::GateFailed(feedback));
            Ok(Merged { tip, fates, gates: 1 })
        }
        Gated::Failed(_) => {
            let (left, right) = stories.split_at(stories.len() / 2);
            let first = merge(m, tip, left)?;
            if first.fates.iter().any(|(_, f)| *f == Fate::Waiting) {
                let mut fates = first.fates;
                fates.extend(right.iter().map(|&s| (s, Fate::Waiting)));
                return Ok(Merged { tip: first.tip, fates, gates: first.gates + 1 });
            }
            let second = merge(m, first.tip, right)?;
            let mut fates = first.fates;
            fates.extend(second.fates);
            Ok(Merged { tip: second.tip, fates, gates: 1 + first.gates + second.gates })
        }
    }
}

/// The set-aside fates and `members`' shared fate, in `stories`' order.
fn in_order(
    stories: &[usize],
    mut aside: Vec<(usize, Fate)>,
    members: &[usize],
    fate: Fate,
) -> Vec<(usize, Fate)> {
    aside.extend(members.iter().map(|&s| (s, fate.clone())));
    aside.sort_by_key(|(s, _)| stories.iter().position(|x| x == s));
    aside
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Stories, which pairs of them conflict, and a gate that fails on a
    /// bad story or a bad pair being in the tree (downward closed).
    struct Model {
        conflicts: BTreeSet<(usize, usize)>,
        bad: BTreeSet<usize>,
        bad_pairs: BTreeSet<(usize, usize)>,
        gates: usize,
    }

    fn pair(a: usize, b: usize) -> (usize, usize) {
        (a.min(b), a.max(b))
    }

    impl Merger for Model {
        type Tip = Vec<usize>;
        type Error = ();
        fn squash(
            &mut self,
            tip: &Vec<usize>,
            s: usize,
        ) -> Result<Result<Vec<usize>, Vec<String>>, ()> {
            let hit: Vec<String> = tip
                .iter()
                .filter(|&&t| self.conflicts.contains(&pair(t, s)))
                .map(|t| format!("file-{}", pair(*t, s).0))
                .collect();
            if !hit.is_empty() {
                return Ok(Err(hit));
            }
            let mut next = tip.clone();
            next.push(s);
            Ok(Ok(next))
        }
        fn gate(&mut self, tip: &Vec<usize>, _members: &[usize]) -> Result<Gated, ()> {
            self.gates += 1;
            let fails = tip.iter().any(|s| self.bad.contains(s))
                || tip.iter().any(|a| tip.iter().any(|b| self.bad_pairs.contains(&pair(*a, *b))));
            Ok(if fails { Gated::Failed(format!("{tip:?}")) } else { Gated::Passed })
        }
    }

    /// One story at a time: the result batches must give.
    fn one_at_a_time(m: &mut Model, tip: Vec<usize>, stories: &[usize]) -> (Vec<usize>, Vec<Fate>) {
        let mut tip = tip;
        let mut fates = Vec::new();
        for &s in stories {
            let r = merge(m, tip.clone(), &[s]).unwrap();
            tip = r.tip;
            fates.push(r.fates[0].1.clone());
        }
        (tip, fates)
    }

    /// A small xorshift: the same patterns on every machine.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn chance(&mut self, in_100: u64) -> bool {
            self.next() % 100 < in_100
        }
    }

    #[test]
    fn batch_then_bisect_gives_exactly_the_one_at_a_time_result() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..3000 {
            let n = 1 + (rng.next() % 9) as usize;
            let (p_bad, p_conflict, p_pair) = (rng.next() % 40, rng.next() % 30, rng.next() % 15);
            let mut model = Model {
                conflicts: BTreeSet::new(),
                bad: BTreeSet::new(),
                bad_pairs: BTreeSet::new(),
                gates: 0,
            };
            // Story 100 is what the run branch already has.
            let all: Vec<usize> = (0..n).chain([100]).collect();
            for &a in &all {
                if a != 100 && rng.chance(p_bad) {
                    model.bad.insert(a);
                }
                for &b in &all {
                    if a < b && rng.chance(p_conflict) {
                        model.conflicts.insert((a, b));
                    }
                    if a < b && b != 100 && rng.chance(p_pair) {
                        model.bad_pairs.insert((a, b));
                    }
                }
            }
            let stories: Vec<usize> = (0..n).collect();
            let batched = merge(&mut model, vec![100], &stories).unwrap();
            let batch_gates = model.gates;
            model.gates = 0;
            let (tip, fates) = one_at_a_time(&mut model, vec![100], &stories);
            let got: Vec<Fate> = batched.fates.iter().map(|(_, f)| f.clone()).collect();
            let order: Vec<usize> = batched.fates.iter().map(|(s, _)| *s).collect();
            assert_eq!(order, stories, "case {case}: fates out of queue order");
            assert_eq!(batched.tip, tip, "case {case}: a different tip");
            assert_eq!(got.len(), fates.len());
            for (i, (g, w)) in got.iter().zip(&fates).enumerate() {
                // The feedback names the tree it failed on, which differs;
                // the fate must not.
                let same = match (g, w) {
                    (Fate::GateFailed(_), Fate::GateFailed(_)) => true,
                    (a, b) => a == b,
                };
                assert!(same, "case {case}, story {i}: batched {g:?}, one at a time {w:?}");
            }
            assert_eq!(batched.gates, batch_gates, "case {case}: gates counted");
        }
    }

    #[test]
    fn a_batch_that_passes_is_gated_once() {
        let mut model = Model {
            conflicts: BTreeSet::new(),
            bad: BTreeSet::new(),
            bad_pairs: BTreeSet::new(),
            gates: 0,
        };
        let r = merge(&mut model, vec![], &[0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        assert_eq!(r.gates, 1);
        assert_eq!(r.tip, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert!(r.fates.iter().all(|(_, f)| *f == Fate::Merged));
        // One bad story of eight: found in a few halvings, not eight gates.
        model.bad.insert(5);
        let r = merge(&mut model, vec![], &[0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        assert_eq!(r.tip, [0, 1, 2, 3, 4, 6, 7]);
        assert!(matches!(r.fates[5].1, Fate::GateFailed(_)));
        assert!(r.gates <= 7, "{} gates", r.gates);
        // A conflict is set aside and the rest still merge together.
        model.bad.clear();
        model.conflicts.insert((1, 2));
        let r = merge(&mut model, vec![], &[0, 1, 2, 3]).unwrap();
        assert_eq!(r.tip, [0, 1, 3]);
        assert_eq!(r.fates[2].1, Fate::Conflict(vec!["file-1".into()]));
        assert_eq!(r.gates, 1);
    }

    #[test]
    fn an_interrupted_gate_leaves_every_story_queued_and_the_tip_where_it_was() {
        struct Stop;
        impl Merger for Stop {
            type Tip = Vec<usize>;
            type Error = ();
            fn squash(
                &mut self,
                tip: &Vec<usize>,
                s: usize,
            ) -> Result<Result<Vec<usize>, Vec<String>>, ()> {
                Ok(Ok([tip.as_slice(), &[s]].concat()))
            }
            fn gate(&mut self, _: &Vec<usize>, _: &[usize]) -> Result<Gated, ()> {
                Ok(Gated::Interrupted)
            }
        }
        let r = merge(&mut Stop, vec![9], &[0, 1, 2]).unwrap();
        assert_eq!(r.tip, [9]);
        assert!(r.fates.iter().all(|(_, f)| *f == Fate::Waiting));
    }
}
