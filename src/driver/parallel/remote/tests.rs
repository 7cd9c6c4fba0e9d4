use super::*;

#[test]
fn a_claim_on_the_tip_is_ours_lost_or_the_tip_moved() {
    let p = |dst: &str, why: Option<&str>| Pushed {
        dst: dst.into(),
        rejected: why.map(str::to_string),
    };
    let (claim, run) = ("refs/ralph/run/claims/us-1", "refs/heads/ralph/run");
    let collateral = Some("[rejected] (atomic push failed)");
    let cases: &[(Vec<Pushed>, Claimed)] = &[
        (vec![p(claim, None), p(run, None)], Claimed::Ours),
        (vec![p(claim, Some("[rejected] (fetch first)")), p(run, collateral)], Claimed::Lost),
        (vec![p(claim, collateral), p(run, Some("[rejected] (stale info)"))], Claimed::Moved),
        // Both refused on their own: the claim is someone else's anyway.
        (
            vec![
                p(claim, Some("[rejected] (fetch first)")),
                p(run, Some("[rejected] (stale info)")),
            ],
            Claimed::Lost,
        ),
        (vec![p(run, None)], Claimed::Lost),
        // The server refused the claim (a hook, a rule): the tip, with it.
        (
            vec![
                p(claim, Some("[remote rejected] (hook declined)")),
                p(run, Some("[remote rejected] (atomic push failure)")),
            ],
            Claimed::Lost,
        ),
    ];
    for (pushed, want) in cases {
        assert_eq!(claimed(pushed, claim, run), *want, "{pushed:?}");
    }
}

#[test]
fn an_atomic_delivery_landed_raced_or_was_blocked_by_its_claim() {
    let p = |dst: &str, why: Option<&str>| Pushed {
        dst: dst.into(),
        rejected: why.map(str::to_string),
    };
    let run = "refs/heads/ralph/run";
    let claim = "refs/ralph/run/claims/us-1";
    let cases: &[(Vec<Pushed>, Answer)] = &[
        (vec![p(run, None), p(claim, None)], Answer::Landed),
        (vec![p(run, None)], Answer::Landed),
        (
            vec![
                p(run, Some("[rejected] (atomic push failed)")),
                p(claim, Some("[rejected] (stale info)")),
            ],
            Answer::Blocked,
        ),
        (
            vec![
                p(run, Some("[rejected] (fetch first)")),
                p(claim, Some("[rejected] (atomic push failed)")),
            ],
            Answer::Raced,
        ),
        (vec![p(run, Some("[rejected] (non-fast-forward)"))], Answer::Raced),
        // The server refused to delete the branch: deliver alone.
        (
            vec![
                p(run, Some("[remote rejected] (atomic push failure)")),
                p("refs/heads/ralph/run--us-1", Some("[remote rejected] (deletion prohibited)")),
            ],
            Answer::Blocked,
        ),
        // Another delivery won on the server itself.
        (
            vec![p(run, Some("[remote rejected] (atomic transaction failed)")), p(claim, None)],
            Answer::Raced,
        ),
        (vec![p(claim, None)], Answer::Raced),
    ];
    for (pushed, want) in cases {
        assert_eq!(answer(pushed, run), *want, "{pushed:?}");
    }
}

#[test]
fn a_claim_is_free_mine_theirs_expired_or_given_up() {
    let now = Utc::now();
    let oid = Oid::from_str("0123456789012345678901234567890123456789").unwrap();
    let claim = |worker: &str, secs: i64, given_up: Option<&str>| {
        let c = StoryClaim {
            worker: worker.into(),
            story: "US-1".into(),
            lease_until: now + chrono::TimeDelta::seconds(secs),
            given_up: given_up.map(str::to_string),
        };
        (c, oid)
    };
    let cases: &[(Option<(StoryClaim, Oid)>, Hold)] = &[
        (None, Hold::Free),
        (Some(claim("me", 60, None)), Hold::Mine),
        (Some(claim("me", -60, None)), Hold::Mine),
        (Some(claim("w2", 60, None)), Hold::Theirs("w2".into())),
        (Some(claim("w2", -1, None)), Hold::Expired(oid)),
        (Some(claim("w2", 0, None)), Hold::Expired(oid)),
        (Some(claim("w2", 60, Some("needs a key"))), Hold::GivenUp("needs a key".into())),
        (Some(claim("me", -60, Some("blocked"))), Hold::GivenUp("blocked".into())),
    ];
    for (c, want) in cases {
        assert_eq!(&hold(c.as_ref(), "me", now), want, "{c:?}");
    }
}

#[test]
fn a_stop_is_heeded_by_the_other_workers_that_were_at_work_when_it_came() {
    let t = Utc::now();
    let secs = chrono::TimeDelta::seconds;
    let stop = |by: &str, at| Shared {
        usage_limit_until: None,
        stop: Some(SharedStop {
            by: by.into(),
            outcome: crate::event::RunOutcome::Budget,
            message: "spent".into(),
            at,
        }),
    };
    // (the shared state, me, when I started, heeded)
    let cases = [
        (Shared::default(), "me", t, false),
        (stop("w2", t + secs(5)), "me", t, true),
        (stop("me", t + secs(5)), "me", t, false),
        (stop("w2", t - secs(5)), "me", t, false),
        (stop("w2", t), "me", t, false),
    ];
    for (shared, me, started, heeded) in cases {
        assert_eq!(stop_for(&shared, me, started).is_some(), heeded, "{shared:?} {me}");
    }
    // A state written before stops existed still reads.
    let old: Option<Shared> = parse("ralph: shared state\n\n{\"usage_limit_until\":null}");
    assert_eq!(old, Some(Shared::default()));
}

#[test]
fn a_note_commits_json_is_read_back() {
    let c: Option<Shared> = parse("ralph: shared state\n\n{\"usage_limit_until\":null}\n");
    assert_eq!(c, Some(Shared::default()));
    assert_eq!(parse::<Shared>("no json here"), None);
}
