//! ralph driving the real gemini CLI (0.61.0, `.ci/install-agent-clis.sh`)
//! against the scripted Gemini API of [`crate::openai_stub`]: a story
//! implemented and committed through `run_shell_command`, in the default
//! mode and in safe mode (whose allow-list must leave gemini its shell for
//! the build and git), a model that only claims the work, and the faults
//! whose HTTP status gemini reports only in its exit code (401 → 145, the
//! daily quota → 173).
//!
//! Each test skips, saying so on stderr, without `RALPH_GEMINI_BIN`;
//! `RALPH_REQUIRE_AGENT_CLIS=1` (set by CI) turns that into a failure.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::harness::{Project, Run, code, to_run};
use crate::openai_stub::{Reply, Stub, gemini_settings, google_error, has_tool_output};

const ONE_STORY: &str = r#"{
  "project": "Gemini loop",
  "branchName": "ralph/gemini-loop",
  "description": "ralph drives the real gemini CLI",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["US-001.txt exists"], "priority": 1, "passes": false, "notes": ""}
  ]
}
"#;

const STATUS: &str = "\n\n---RALPH_STATUS---\nSTATUS: COMPLETE\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 2\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: true\nRECOMMENDATION: done\n---END_RALPH_STATUS---";

/// The model's one command: write the story's file, mark it, commit.
const IMPLEMENT: &str = "python3 impl.py && git add -A && git commit -qm 'feat: US-001 - First'";

const IMPL_PY: &str = "import json\nopen('US-001.txt', 'w').write('US-001 done\\n')\np = json.load(open('prd.json'))\np['userStories'][0]['passes'] = True\njson.dump(p, open('prd.json', 'w'), indent=2)\n";

fn gemini_bin_or_skip(test: &str) -> Option<PathBuf> {
    let bin = std::env::var_os("RALPH_GEMINI_BIN").map(PathBuf::from).filter(|p| p.is_file());
    if bin.is_none() {
        assert!(
            std::env::var_os("RALPH_REQUIRE_AGENT_CLIS").is_none_or(|v| v.is_empty() || v == "0"),
            "{test}: gemini not installed and RALPH_REQUIRE_AGENT_CLIS is set (run .ci/install-agent-clis.sh)"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: gemini CLI not installed (run .ci/install-agent-clis.sh): {test}"
        );
    }
    bin
}

fn project() -> Project {
    let project = Project::with_prd(ONE_STORY);
    project.write("impl.py", IMPL_PY);
    project.git(&["add", "-A"]);
    project.git(&["commit", "-q", "-m", "The story's script"]);
    project
}

/// `ralph <args> --tool gemini --model gemini-2.5-flash` (a named model:
/// no router request), gemini talking to `stub`.
fn ralph(bin: &PathBuf, stub: &Stub, project: &Project, args: &[&str]) -> Run {
    let gemini_home = project.home().join("gemini");
    gemini_settings(&gemini_home);
    let out = project
        .ralph()
        .args(args)
        .args(["--model", "gemini-2.5-flash"])
        .env("RALPH_AGENT_TOOL", "gemini")
        .env("RALPH_AGENT_COMMAND", bin)
        .env("GEMINI_CLI_HOME", &gemini_home)
        .env("GOOGLE_GEMINI_BASE_URL", stub.root_url())
        .env("GEMINI_API_KEY", "test-key")
        .env("TMPDIR", project.home())
        .env("RALPH_AGENT_IDLE_TIMEOUT", "60s")
        .output()
        .expect("run ralph");
    to_run(out)
}

fn implementing_model() -> Stub {
    Stub::start(|_, request| {
        if has_tool_output(request) {
            Reply::Text(format!("Implemented US-001 and committed it.{STATUS}"))
        } else {
            Reply::Shell(IMPLEMENT.into())
        }
    })
}

fn assert_committed(project: &Project, r: &Run) {
    assert_eq!(r.code, code(0), "{r:?}");
    assert!(project.passes("US-001"), "{r:?}");
    assert!(project.log().iter().any(|l| l.contains("feat: US-001")), "{:?}", project.log());
    assert!(project.git(&["status", "--porcelain"]).trim().is_empty(), "left dirty: {r:?}");
}

#[test]
fn gemini_implements_and_commits_a_story() {
    let Some(bin) = gemini_bin_or_skip("gemini_implements_and_commits_a_story") else { return };
    let stub = implementing_model();
    let project = project();
    let r = ralph(&bin, &stub, &project, &["3", "--gate", "grep -qx 'US-001 done' US-001.txt"]);
    assert_committed(&project, &r);
}

#[test]
fn gemini_in_safe_mode_still_runs_the_build_and_git() {
    let Some(bin) = gemini_bin_or_skip("gemini_in_safe_mode") else { return };
    let stub = implementing_model();
    let project = project();
    let r = ralph(
        &bin,
        &stub,
        &project,
        &["3", "--safe", "--gate", "grep -qx 'US-001 done' US-001.txt"],
    );
    assert_committed(&project, &r);
    // The shell tool was offered to the model.
    let first = &stub.requests()[0].body;
    assert!(first.to_string().contains("run_shell_command"), "no shell tool offered");
}

#[test]
fn gemini_claiming_a_story_it_did_not_do_is_not_believed() {
    let Some(bin) = gemini_bin_or_skip("gemini_claiming_a_story") else { return };
    let stub = Stub::start(|_, _| {
        Reply::Text(format!("Implemented US-001. <promise>COMPLETE</promise>{STATUS}"))
    });
    let project = project();
    let r = ralph(&bin, &stub, &project, &["1", "--gate", "test -f US-001.txt"]);
    assert_eq!(r.code, code(1), "{r:?}");
    assert!(!project.passes("US-001"), "{r:?}");
}

#[test]
fn gemini_401_is_an_auth_failure_from_its_exit_code() {
    let Some(bin) = gemini_bin_or_skip("gemini_401") else { return };
    let stub = Stub::start(|_, _| {
        Reply::Error(
            401,
            google_error(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials.",
                json!([]),
            ),
        )
    });
    let project = project();
    let r = ralph(&bin, &stub, &project, &["3"]);
    assert_eq!(r.code, code(7), "{r:?}");
    assert!(r.stdout.contains("could not authenticate"), "{r:?}");
}

#[test]
fn gemini_daily_quota_waits_until_midnight_pacific() {
    let Some(bin) = gemini_bin_or_skip("gemini_daily_quota") else { return };
    let stub = Stub::start(|_, _| {
        let details = json!([{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]);
        Reply::Error(
            429,
            google_error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", details),
        )
    });
    let project = project();
    let r = ralph(&bin, &stub, &project, &["3", "--no-wait"]);
    assert_eq!(r.code, code(4), "{r:?}");
    assert!(r.stdout.contains("exhausted your daily quota"), "{r:?}");
    assert!(r.stdout.contains("calls resume at"), "{r:?}");
}
