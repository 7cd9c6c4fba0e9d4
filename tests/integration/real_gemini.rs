//! ralph driving the real gemini CLI (0.61.0, `.ci/install-agent-clis.sh`)
//! against the scripted Gemini API of [`crate::openai_stub`]: a story
//! implemented and committed through `run_shell_command`, in the default
//! mode and in safe mode (whose allow-list must leave gemini its shell for
//! the build and git), a model that only claims the work, and the faults
//! whose HTTP status gemini reports only in its exit code (401 → 145, the
//! daily quota → 173, 500 → 244, 503 → 247), and a server that is not
//! there. (A per-minute 429 keeps gemini retrying for over two minutes even
//! with `maxAttempts: 1`; its `Please retry in 20s` is read in
//! `analyze/observed_tests.rs`.)
//!
//! Each test skips, saying so on stderr, without `RALPH_GEMINI_BIN`;
//! `RALPH_REQUIRE_AGENT_CLIS=1` (set by CI) turns that into a failure.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::harness::{Project, RefusedPort, Run, assert_sandbox_on, code, files_under, to_run};
use crate::openai_stub::{Reply, Stub, gemini_settings, google_error, has_tool_output};
use crate::real_cli::{
    BUILD, IMPLEMENT, SAME_ERROR, STATUS, TRESPASS, assert_trespass_denied, bin_or_skip,
    failing_build_project, plant_key, run_the_build, scripted_project,
};

/// `ralph <args> --tool gemini --model gemini-2.5-flash` (a named model:
/// no router request), gemini talking to `stub`.
fn ralph(bin: &PathBuf, stub: &Stub, project: &Project, args: &[&str]) -> Run {
    ralph_at(bin, &stub.root_url(), project, args)
}

/// [`ralph`] with gemini's API at `root_url`, its settings where a user's
/// are (`~/.gemini/settings.json`).
fn ralph_at(bin: &PathBuf, root_url: &str, project: &Project, args: &[&str]) -> Run {
    gemini_settings(&project.home());
    ralph_as(bin, root_url, project, None, &[args, &["--model", "gemini-2.5-flash"]].concat())
}

/// ralph with gemini as it is set up in `<gemini_home>/.gemini`
/// (`GEMINI_CLI_HOME`), or in `~/.gemini` when `None`.
fn ralph_as(
    bin: &PathBuf,
    root_url: &str,
    project: &Project,
    gemini_home: Option<&Path>,
    args: &[&str],
) -> Run {
    let mut ralph = project.ralph();
    if let Some(dir) = gemini_home {
        ralph.env("GEMINI_CLI_HOME", dir);
    }
    let out = ralph
        .args(args)
        .env("RALPH_AGENT_TOOL", "gemini")
        .env("RALPH_AGENT_COMMAND", bin)
        .env("GOOGLE_GEMINI_BASE_URL", root_url)
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

/// The story done and committed, in a run whose sandbox was on, and gemini
/// kept its state in `<gemini_home>/.gemini` (so the sandbox let it write
/// there).
#[track_caller]
fn assert_committed(project: &Project, r: &Run, gemini_home: &Path) {
    assert_eq!(r.code, code(0), "{r:?}");
    assert_sandbox_on(&r.stdout);
    assert!(project.passes("US-001"), "{r:?}");
    assert!(project.log().iter().any(|l| l.contains("feat: US-001")), "{:?}", project.log());
    assert!(project.git(&["status", "--porcelain"]).trim().is_empty(), "left dirty: {r:?}");
    let chats = files_under(&gemini_home.join(".gemini/tmp"), &|f| f.starts_with("session-"));
    assert!(!chats.is_empty(), "no session in {}: {r:?}", gemini_home.display());
}

#[test]
fn gemini_implements_and_commits_a_story() {
    let Some(bin) =
        bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_implements_and_commits_a_story")
    else {
        return;
    };
    let stub = implementing_model();
    let project = scripted_project("Gemini");
    let r = ralph(&bin, &stub, &project, &["3", "--gate", "grep -qx 'US-001 done' US-001.txt"]);
    assert_committed(&project, &r, &project.home());
}

/// `GEMINI_CLI_HOME` outside the home moves gemini's settings and state
/// there: the sandbox lets it write there, and gemini needs nothing under
/// `~/.gemini`.
#[test]
fn gemini_with_its_state_moved_by_gemini_cli_home_implements_a_story() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_with_its_state_moved") else {
        return;
    };
    let stub = implementing_model();
    let project = scripted_project("Gemini");
    let gemini_home = project.tmp.path().join("gemini-home");
    gemini_settings(&gemini_home);
    let args = ["3", "--gate", "grep -qx 'US-001 done' US-001.txt", "--model", "gemini-2.5-flash"];
    let r = ralph_as(&bin, &stub.root_url(), &project, Some(&gemini_home), &args);
    assert_committed(&project, &r, &gemini_home);
    assert!(!project.home().join(".gemini").exists(), "{r:?}");
}

#[test]
fn gemini_in_safe_mode_still_runs_the_build_and_git() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_in_safe_mode") else {
        return;
    };
    let stub = implementing_model();
    let project = scripted_project("Gemini");
    let r = ralph(
        &bin,
        &stub,
        &project,
        &["3", "--safe", "--gate", "grep -qx 'US-001 done' US-001.txt"],
    );
    assert_committed(&project, &r, &project.home());
    // The shell tool was offered to the model.
    let first = &stub.requests()[0].body;
    assert!(first.to_string().contains("run_shell_command"), "no shell tool offered");
}

#[test]
fn gemini_claiming_a_story_it_did_not_do_is_not_believed() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_claiming_a_story") else {
        return;
    };
    let stub = Stub::start(|_, _| {
        Reply::Text(format!("Implemented US-001. <promise>COMPLETE</promise>{STATUS}"))
    });
    let project = scripted_project("Gemini");
    let r = ralph(&bin, &stub, &project, &["1", "--gate", "test -f US-001.txt"]);
    assert_eq!(r.code, code(1), "{r:?}");
    assert!(!project.passes("US-001"), "{r:?}");
}

#[test]
fn gemini_401_is_an_auth_failure_from_its_exit_code() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_401") else { return };
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
    let project = scripted_project("Gemini");
    let r = ralph(&bin, &stub, &project, &["3"]);
    assert_eq!(r.code, code(7), "{r:?}");
    assert!(r.stdout.contains("could not authenticate"), "{r:?}");
}

#[test]
fn gemini_daily_quota_waits_until_midnight_pacific() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_daily_quota") else { return };
    let stub = Stub::start(|_, _| {
        let details = json!([{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]);
        Reply::Error(
            429,
            google_error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", details),
        )
    });
    let project = scripted_project("Gemini");
    let r = ralph(&bin, &stub, &project, &["3", "--no-wait"]);
    assert_eq!(r.code, code(4), "{r:?}");
    assert!(r.stdout.contains("exhausted your daily quota"), "{r:?}");
    assert!(r.stdout.contains("calls resume at"), "{r:?}");
}

/// 500 and 503: gemini retries each for about a minute (`maxAttempts: 1`
/// still leaves it 6 requests), so they run side by side. Both back off
/// (`--no-wait`: the run ends saying so, exit 4), read from the exit code.
#[test]
fn gemini_server_errors_back_off_from_their_exit_code() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_server_errors") else {
        return;
    };
    let cases = [
        (500, google_error(500, "INTERNAL", "Internal error encountered.", json!([]))),
        (
            503,
            google_error(
                503,
                "UNAVAILABLE",
                "The model is overloaded. Please try again later.",
                json!([]),
            ),
        ),
    ];
    std::thread::scope(|s| {
        let runs: Vec<_> = cases
            .into_iter()
            .map(|(status, body)| {
                let bin = &bin;
                s.spawn(move || {
                    let stub = Stub::start(move |_, _| Reply::Error(status, body.clone()));
                    let project = scripted_project("Gemini");
                    let r = ralph(bin, &stub, &project, &["3", "--no-wait"]);
                    assert_eq!(r.code, code(4), "{status}: {r:?}");
                    assert!(r.stdout.contains("a transient API error"), "{status}: {r:?}");
                    assert!(!project.passes("US-001"), "{r:?}");
                })
            })
            .collect();
        for run in runs {
            run.join().expect("a server error's run");
        }
    });
}

#[test]
fn gemini_with_no_server_is_ended_by_the_idle_timeout_as_unreachable() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_with_no_server") else {
        return;
    };
    let refused = RefusedPort::new();
    let port = refused.port;
    let project = scripted_project("Gemini");
    let url = format!("http://127.0.0.1:{port}");
    let r = ralph_at(&bin, &url, &project, &["3", "--no-wait", "--idle-timeout", "10s"]);
    assert_eq!(r.code, code(4), "{r:?}");
    assert!(r.stdout.contains("cannot reach the API"), "{r:?}");
}

/// gemini's own settings (`~/.gemini/settings.json`) for a run cut off in
/// its retries: API-key auth and its default retries (ten attempts, backing
/// off for minutes).
fn retrying_gemini(project: &Project) {
    let dir = project.home().join(".gemini");
    std::fs::create_dir_all(&dir).expect("~/.gemini");
    let settings = json!({"security": {"auth": {"selectedType": "gemini-api-key"}}});
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("gemini settings");
}

/// ralph's `--timeout` ends gemini in its own retries, with what it was
/// retrying on its stderr: a per-minute quota (`Please retry in 20s`) is a
/// limit to wait out, not a failed run; no server at all (gemini's model
/// router retrying `fetch failed`) is "cannot reach the API". With
/// `--no-wait` each run ends at once saying so (exit 4), and no breaker.
#[test]
fn gemini_cut_off_in_its_retries_is_judged_by_what_it_retried() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_cut_off_in_its_retries")
    else {
        return;
    };
    std::thread::scope(|s| {
        let quota = s.spawn(|| {
            let stub = Stub::start(|_, _| {
                let details = json!([
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}]);
                let message = "You exceeded your current quota, please check your plan and billing \
                               details. Please retry in 20s.";
                Reply::Error(429, google_error(429, "RESOURCE_EXHAUSTED", message, details))
            });
            let project = scripted_project("Gemini");
            retrying_gemini(&project);
            let args = ["3", "--no-wait", "--timeout", "20s", "--model", "gemini-2.5-flash"];
            (ralph_as(&bin, &stub.root_url(), &project, None, &args), project)
        });
        let nowhere = s.spawn(|| {
            let refused = RefusedPort::new();
            let project = scripted_project("Gemini");
            retrying_gemini(&project);
            let url = format!("http://127.0.0.1:{}", refused.port);
            // No model named: gemini's router asks first, and retries.
            (ralph_as(&bin, &url, &project, None, &["3", "--no-wait", "--timeout", "20s"]), project)
        });
        for (name, run, words) in [
            ("per-minute quota", quota, "the agent's usage limit until"),
            ("no server", nowhere, "cannot reach the API"),
        ] {
            let (r, project) = run.join().expect(name);
            assert_eq!(r.code, code(4), "{name}: {r:?}");
            assert!(r.stdout.contains(words), "{name}: {r:?}");
            assert!(!r.stdout.contains("stopped: iteration timeout"), "{name}: {r:?}");
            assert!(!project.passes("US-001"), "{name}: {r:?}");
        }
    });
}

/// A story whose build fails with the same compiler error in every
/// iteration stops the run with that error named.
#[test]
fn gemini_repeating_one_compiler_error_is_stopped_naming_it() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_repeating_one_error") else {
        return;
    };
    let stub = Stub::start(|_, request| run_the_build(request));
    let project = failing_build_project("Gemini");
    let r = ralph(&bin, &stub, &project, &["5", "--gate", BUILD]);
    assert_eq!(r.code, code(3), "{r:?}");
    assert!(r.stdout.contains(SAME_ERROR), "{r:?}");
}

#[test]
fn gemini_a_denial_by_the_sandbox_is_seen_through_its_output() {
    let Some(bin) = bin_or_skip("RALPH_GEMINI_BIN", "gemini", "gemini_a_denial_by_the_sandbox")
    else {
        return;
    };
    let stub = Stub::start(|_, request| {
        if has_tool_output(request) {
            Reply::Text(format!("Looked around.{STATUS}"))
        } else {
            Reply::Shell(TRESPASS.into())
        }
    });
    let project = scripted_project("gemini");
    plant_key(&project);
    let r = ralph(&bin, &stub, &project, &["1"]);
    assert_trespass_denied(&project, &r);
}
