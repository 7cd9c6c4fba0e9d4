//! ralph driving the real codex CLI (`codex exec --json`, pinned 0.171.0 by
//! `.ci/install-agent-clis.sh`) against the scripted Responses API of
//! [`crate::openai_stub`]: a story implemented and committed through
//! codex's own shell tool, a model that only claims it, and the faults a
//! night run meets (401, 429, 5xx, the ChatGPT-plan usage limit), each
//! with the exit code and the words ralph ends with.
//!
//! Each test skips, saying so on stderr, when codex is not installed
//! (`RALPH_CODEX_BIN`, set by `.ci/run`); `RALPH_REQUIRE_AGENT_CLIS=1`
//! (set by CI) turns that into a failure.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::harness::{Project, RefusedPort, Run, assert_sandbox_on, code, files_under, to_run};
use crate::openai_stub::{Reply, Stub, codex_config, error_body, has_tool_output};
use crate::real_cli::{
    BUILD, SAME_ERROR, STATUS, TRESPASS, assert_trespass_denied, bin_or_skip,
    failing_build_project, one_story, plant_key, run_the_build,
};

/// `ralph <args> --tool codex` in a one-story project, codex talking to
/// `stub`, its state where a user's is (`~/.codex`, `CODEX_HOME` unset).
fn ralph(bin: &PathBuf, stub: &Stub, project: &Project, args: &[&str]) -> Run {
    ralph_at(bin, &stub.base_url(), project, None, args)
}

/// [`ralph`] with codex's API at `base_url`, its state in `codex_home`
/// (`CODEX_HOME`) when given.
fn ralph_at(
    bin: &PathBuf,
    base_url: &str,
    project: &Project,
    codex_home: Option<&Path>,
    args: &[&str],
) -> Run {
    let mut ralph = project.ralph();
    if let Some(dir) = codex_home {
        ralph.env("CODEX_HOME", dir);
    }
    let dir = codex_home.map_or_else(|| project.home().join(".codex"), Path::to_path_buf);
    codex_config(&dir, base_url);
    let out = ralph
        .args(args)
        .env("RALPH_AGENT_TOOL", "codex")
        .env("RALPH_AGENT_COMMAND", bin)
        .env("FAKE_OPENAI_KEY", "sk-test")
        .env("RALPH_AGENT_IDLE_TIMEOUT", "60s")
        .output()
        .expect("run ralph");
    to_run(out)
}

/// The model of the `work` scenario: one shell call that writes the
/// story's file, marks it and commits, then the status block.
fn implementing_model() -> Stub {
    Stub::start(|_, body| {
        if has_tool_output(body) {
            Reply::Text(format!("Implemented US-001 and committed it.{STATUS}"))
        } else {
            Reply::Shell(
                "echo 'US-001 done' > US-001.txt && python3 -c \"import json; p=json.load(open('prd.json')); \
                 p['userStories'][0]['passes']=True; json.dump(p, open('prd.json','w'), indent=2)\" \
                 && git add -A && git commit -qm 'feat: US-001 - First'"
                    .into(),
            )
        }
    })
}

/// The story done and committed, in a run whose sandbox was on, and codex
/// kept a session in `codex_home` (so the sandbox let it write there).
#[track_caller]
fn assert_committed(project: &Project, r: &Run, codex_home: &Path) {
    assert_eq!(r.code, code(0), "{r:?}");
    assert_sandbox_on(&r.stdout);
    assert!(project.passes("US-001"), "{r:?}");
    assert!(project.log().iter().any(|l| l.contains("feat: US-001")), "{:?}", project.log());
    assert!(project.git(&["status", "--porcelain"]).trim().is_empty(), "left dirty: {r:?}");
    let sessions = files_under(&codex_home.join("sessions"), &|f| f.ends_with(".jsonl"));
    assert!(!sessions.is_empty(), "no session in {}: {r:?}", codex_home.display());
}

#[test]
fn codex_implements_and_commits_a_story_through_its_shell_tool() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_implements_and_commits_a_story")
    else {
        return;
    };
    let stub = implementing_model();
    let project = Project::with_prd(&one_story("Codex"));
    let r = ralph(&bin, &stub, &project, &["3", "--gate", "grep -qx 'US-001 done' US-001.txt"]);
    assert_committed(&project, &r, &project.home().join(".codex"));
    // Two model requests: the shell call, then the answer.
    assert_eq!(stub.requests().len(), 2, "{r:?}");
}

/// `CODEX_HOME` outside the home moves codex's state there: the sandbox
/// lets it write there, and codex needs nothing under `~/.codex`.
#[test]
fn codex_with_its_state_moved_by_codex_home_implements_a_story() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_with_its_state_moved") else {
        return;
    };
    let stub = implementing_model();
    let project = Project::with_prd(&one_story("Codex"));
    let codex_home = project.tmp.path().join("codex-home");
    let args = ["3", "--gate", "grep -qx 'US-001 done' US-001.txt"];
    let r = ralph_at(&bin, &stub.base_url(), &project, Some(&codex_home), &args);
    assert_committed(&project, &r, &codex_home);
    assert!(!project.home().join(".codex").exists(), "{r:?}");
}

#[test]
fn codex_claiming_a_story_it_did_not_do_is_not_believed() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_claiming_a_story") else {
        return;
    };
    let stub = Stub::start(|_, _| {
        Reply::Text(format!(
            "Implemented US-001 and committed it. <promise>COMPLETE</promise>{STATUS}"
        ))
    });
    let project = Project::with_prd(&one_story("Codex"));
    let r = ralph(&bin, &stub, &project, &["1", "--gate", "test -f US-001.txt"]);
    assert_eq!(r.code, code(1), "{r:?}");
    assert!(!project.passes("US-001"), "{r:?}");
}

#[test]
fn codex_401_stops_the_run_as_an_auth_failure() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_401") else { return };
    let stub = Stub::start(|_, _| {
        Reply::Error(401, error_body("invalid_api_key", "Incorrect API key provided: sk-test."))
    });
    let project = Project::with_prd(&one_story("Codex"));
    let r = ralph(&bin, &stub, &project, &["3"]);
    assert_eq!(r.code, code(7), "{r:?}");
    assert!(r.stdout.contains("could not authenticate"), "{r:?}");
    assert!(r.stdout.contains("401 Unauthorized"), "{r:?}");
}

#[test]
fn codex_transient_faults_back_off_and_say_so() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_transient_faults") else {
        return;
    };
    let cases = [
        (
            429,
            error_body("rate_limit_exceeded", "Rate limit reached for gpt-5.5."),
            "429 Too Many Requests",
        ),
        (500, error_body("server_error", "The server had an error."), "high demand"),
        (503, error_body("server_is_overloaded", "Overloaded."), "at capacity"),
    ];
    for (status, body, words) in cases {
        let stub = Stub::start(move |_, _| Reply::Error(status, body.clone()));
        let project = Project::with_prd(&one_story("Codex"));
        // --no-wait: a back-off ends the run with the limit code at once.
        let r = ralph(&bin, &stub, &project, &["3", "--no-wait"]);
        assert_eq!(r.code, code(4), "{status}: {r:?}");
        assert!(
            r.stdout.contains("transient API error") && r.stdout.contains(words),
            "{status}: {r:?}"
        );
        assert!(!project.passes("US-001"));
    }
}

#[test]
fn codex_usage_limit_waits_for_its_reset_and_no_wait_ends_the_run() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_usage_limit") else { return };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let stub = Stub::start(move |_, _| {
        Reply::Error(
            429,
            json!({"error": {"type": "usage_limit_reached", "plan_type": "plus",
                "resets_at": now + 3 * 3600, "resets_in_seconds": 3 * 3600}}),
        )
    });
    let project = Project::with_prd(&one_story("Codex"));
    let r = ralph(&bin, &stub, &project, &["3", "--no-wait"]);
    assert_eq!(r.code, code(4), "{r:?}");
    assert!(r.stdout.contains("usage limit"), "{r:?}");
    assert!(r.stdout.contains("hit your usage limit"), "{r:?}");
    // The reset codex printed (its local time, TZ=UTC) is when ralph resumes.
    assert!(r.stdout.contains("calls resume at"), "{r:?}");
}

#[test]
fn codex_with_no_server_is_ended_by_the_idle_timeout_as_unreachable() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_with_no_server") else { return };
    // A port nothing listens on: codex then waits for the network for ever,
    // printing the same notice, which must not count as activity.
    let refused = RefusedPort::new();
    let port = refused.port;
    let project = Project::with_prd(&one_story("Codex"));
    let url = format!("http://127.0.0.1:{port}/v1");
    let r = ralph_at(&bin, &url, &project, None, &["3", "--no-wait", "--idle-timeout", "10s"]);
    assert_eq!(r.code, code(4), "{r:?}");
    assert!(r.stdout.contains("cannot reach the API"), "{r:?}");
}

/// A story whose build fails with the same compiler error in every
/// iteration stops the run with that error named.
#[test]
fn codex_repeating_one_compiler_error_is_stopped_naming_it() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_repeating_one_error") else {
        return;
    };
    let stub = Stub::start(|_, request| run_the_build(request));
    let project = failing_build_project("Codex");
    let r = ralph(&bin, &stub, &project, &["5", "--gate", BUILD]);
    assert_eq!(r.code, code(3), "{r:?}");
    assert!(r.stdout.contains(SAME_ERROR), "{r:?}");
}

#[test]
fn codex_a_denial_by_the_sandbox_is_seen_through_its_output() {
    let Some(bin) = bin_or_skip("RALPH_CODEX_BIN", "codex", "codex_a_denial_by_the_sandbox") else {
        return;
    };
    let stub = Stub::start(|_, body| {
        if has_tool_output(body) {
            Reply::Text(format!("Looked around.{STATUS}"))
        } else {
            Reply::Shell(TRESPASS.into())
        }
    });
    let project = Project::with_prd(&one_story("Codex"));
    plant_key(&project);
    let r = ralph(&bin, &stub, &project, &["1"]);
    assert_trespass_denied(&project, &r);
}
