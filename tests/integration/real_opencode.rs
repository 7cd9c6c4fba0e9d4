//! ralph driving the real opencode CLI (1.18.33, `.ci/install-agent-clis.sh`)
//! against the scripted Chat Completions API of [`crate::openai_stub`]: a
//! story implemented and committed through opencode's `bash` tool, safe mode
//! denying a command outside the allow-list, and a 401 (opencode's one
//! fault it does not retry for over a minute).
//!
//! Each test skips, saying so on stderr, without `RALPH_OPENCODE_BIN`;
//! `RALPH_REQUIRE_AGENT_CLIS=1` (set by CI) turns that into a failure.

use std::path::PathBuf;

use crate::harness::{Project, Run, code, to_run};
use crate::openai_stub::{Reply, Stub, error_body, has_tool_output, opencode_config};
use crate::real_cli::{IMPLEMENT, STATUS, bin_or_skip, scripted_project};

fn ralph(bin: &PathBuf, stub: &Stub, project: &Project, args: &[&str]) -> Run {
    let config = project.home().join("opencode.json");
    opencode_config(&config, &stub.base_url());
    let out = project
        .ralph()
        .args(args)
        .env("RALPH_AGENT_TOOL", "opencode")
        .env("RALPH_AGENT_COMMAND", bin)
        .env("OPENCODE_CONFIG", &config)
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("XDG_DATA_HOME", project.home().join("data"))
        .env("XDG_CONFIG_HOME", project.home().join("config"))
        .env("XDG_CACHE_HOME", project.home().join("cache"))
        .env("XDG_STATE_HOME", project.home().join("state"))
        .env("RALPH_AGENT_IDLE_TIMEOUT", "60s")
        .output()
        .expect("run ralph");
    to_run(out)
}

fn model(command: &'static str) -> Stub {
    Stub::start(move |_, request| {
        if request.is_title() {
            Reply::Text("Implement the story".into())
        } else if has_tool_output(request) {
            Reply::Text(format!("Implemented US-001 and committed it.{STATUS}"))
        } else {
            Reply::Shell(command.into())
        }
    })
}

#[test]
fn opencode_implements_and_commits_a_story() {
    let Some(bin) =
        bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_implements_and_commits_a_story")
    else {
        return;
    };
    let stub = model(IMPLEMENT);
    let project = scripted_project("opencode");
    let r = ralph(&bin, &stub, &project, &["3", "--gate", "grep -qx 'US-001 done' US-001.txt"]);
    assert_eq!(r.code, code(0), "{r:?}");
    assert!(project.passes("US-001"), "{r:?}");
    assert!(project.log().iter().any(|l| l.contains("feat: US-001")), "{:?}", project.log());
}

#[test]
fn opencode_in_safe_mode_runs_allowed_commands_and_refuses_others() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_in_safe_mode") else {
        return;
    };
    // Allowed (python3, git add, git commit): the story gets done.
    let stub = model(IMPLEMENT);
    let project = scripted_project("opencode");
    let r = ralph(
        &bin,
        &stub,
        &project,
        &["3", "--safe", "--gate", "grep -qx 'US-001 done' US-001.txt"],
    );
    assert_eq!(r.code, code(0), "{r:?}");
    assert!(project.passes("US-001"), "{r:?}");
    // Not allowed: `touch` never runs in safe mode, and does without it
    // (opencode's own default allows bash, `--auto` or not).
    let stub = model("touch escaped.txt");
    let project = scripted_project("opencode");
    let r = ralph(&bin, &stub, &project, &["1", "--safe"]);
    assert!(!project.path("escaped.txt").exists(), "safe mode ran a denied command: {r:?}");
    let r = ralph(&bin, &stub, &project, &["1"]);
    assert!(project.path("escaped.txt").exists(), "the model's command never ran: {r:?}");
}

#[test]
fn opencode_401_stops_the_run_as_an_auth_failure() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_401") else { return };
    let stub = Stub::start(|_, _| {
        Reply::Error(401, error_body("invalid_api_key", "Incorrect API key provided: sk-test."))
    });
    let project = scripted_project("opencode");
    let r = ralph(&bin, &stub, &project, &["3"]);
    assert_eq!(r.code, code(7), "{r:?}");
    assert!(r.stdout.contains("could not authenticate"), "{r:?}");
}
