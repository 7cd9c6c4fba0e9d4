//! A PRD far longer than a screen: `ralph status`, the end of a run and
//! report.md summarise it (counts, what needs attention, what the run
//! touched, the next few); `--all` and `--json` have every story.

use serde_json::Value;

use crate::harness::*;
use crate::history::run_dirs;

/// `n` stories, US-0001 first by priority; the first `passing` pass.
fn prd(n: usize, passing: usize) -> String {
    let stories: Vec<Value> = (1..=n)
        .map(|i| {
            serde_json::json!({
                "id": format!("US-{i:04}"),
                "title": format!("Story {i}"),
                "description": "",
                "acceptanceCriteria": ["works"],
                "priority": i,
                "passes": i <= passing,
                "notes": ""
            })
        })
        .collect();
    let prd = serde_json::json!({
        "project": "Big",
        "branchName": "ralph/big",
        "description": "a long PRD",
        "userStories": stories
    });
    serde_json::to_string_pretty(&prd).unwrap()
}

#[test]
fn a_two_thousand_story_prd_is_summarised_and_listed_whole_on_request() {
    let p = Project::with_prd(&prd(2000, 10));
    // US-0011 is done in the first iteration; US-0012 fails in the second.
    p.script("[story US-0012]\nprint not today\nexit 1\n[run *]\nimplement\n");
    let r = p.run(&["2", "--quiet"]);
    assert_eq!(p.agent_runs(), ["US-0011", "US-0012"], "{r:?}");
    // The end of the run: the two stories it touched, the rest counted.
    assert!(r.stdout.contains("✓ US-0011 Story 11"), "{r:?}");
    assert!(r.stdout.contains("✗ US-0012 Story 12"), "{r:?}");
    assert!(!r.stdout.contains("US-0013"), "{r:?}");
    assert!(
        r.stdout.contains(
            "1998 other stories unchanged: 10 passing, 1988 unfinished — \
             `ralph status --all` lists every story"
        ),
        "{r:?}"
    );
    assert!(r.stdout.lines().count() < 30, "{r:?}");

    // report.md: the same cut, and where the rest is.
    let run = run_dirs(&p).pop().unwrap();
    let md = p.read(&format!(".git/ralph/logs/{run}/report.md"));
    assert!(md.len() < 40_000, "report.md is {} bytes", md.len());
    assert!(md.contains("| US-0011 Story 11 | delivered |"), "{md}");
    assert!(md.contains("| US-0012 Story 12 | not done |"), "{md}");
    assert!(!md.contains("US-0013"), "{md}");
    assert!(
        md.contains(
            "1998 other stories unchanged: 10 passing, 1988 unfinished — `ralph report --all` \
             lists every story, `ralph report --json` has them all."
        ),
        "{md}"
    );
    let all = p.run(&["report", "--all"]);
    assert_eq!(all.code, 0, "{all:?}");
    assert!((1..=2000).all(|i| all.stdout.contains(&format!("| US-{i:04} Story {i} |"))));
    let json: Value = serde_json::from_str(&p.run(&["report", "--json"]).stdout).unwrap();
    assert_eq!(json["stories"].as_array().unwrap().len(), 2000);

    // status: counts, the failing story (next again), the next few, and --all.
    let status = p.run(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    let out = &status.stdout;
    assert!(out.lines().count() < 60, "{} lines:\n{out}", out.lines().count());
    assert!(out.contains("stories: 11/2000 pass · 1989 unfinished\n"), "{out}");
    assert!(out.contains("→ US-0012    p12  Story 12  (next)  (failing)"), "{out}");
    for next in ["US-0013", "US-0017"] {
        assert!(out.contains(&format!("  {next}    p")), "{next}: {out}");
    }
    assert!(!out.contains("US-0018") && !out.contains("US-0001 "), "{out}");
    assert!(out.contains("  … 1994 more: `ralph status --all` lists every story"), "{out}");
    let all = p.run(&["status", "--all"]);
    assert_eq!(all.code, 0, "{all:?}");
    assert!(all.stdout.lines().count() > 2000, "{}", all.stdout);
    assert!((1..=2000).all(|i| all.stdout.contains(&format!("US-{i:04} "))));
    assert!(!all.stdout.contains("(failing)") && !all.stdout.contains("more:"), "{}", all.stdout);
    let json: Value = serde_json::from_str(&p.run(&["status", "--json"]).stdout).unwrap();
    assert_eq!(json["stories"].as_array().unwrap().len(), 2000);
    assert_eq!((json["passing"].as_u64(), json["total"].as_u64()), (Some(11), Some(2000)));
}
