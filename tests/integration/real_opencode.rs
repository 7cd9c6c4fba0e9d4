//! ralph driving the real opencode CLI (1.18.33, `.ci/install-agent-clis.sh`)
//! against the scripted Chat Completions API of [`crate::openai_stub`]: a
//! story implemented and committed through opencode's `bash` tool, safe mode
//! denying a command outside the allow-list, a model that only claims the
//! work, a 401 (opencode's one fault it does not retry), the faults it
//! retries for over a minute before giving up (side by side in one test),
//! and a server that is not there.
//!
//! Each test skips, saying so on stderr, without `RALPH_OPENCODE_BIN`;
//! `RALPH_REQUIRE_AGENT_CLIS=1` (set by CI) turns that into a failure.

use std::path::PathBuf;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::harness::{Project, RefusedPort, Run, assert_sandbox_on, code, to_run};
use crate::openai_stub::{Reply, Stub, error_body, has_tool_output, opencode_config};
use crate::real_cli::{
    BUILD, IMPLEMENT, SAME_ERROR, STATUS, TRESPASS, assert_trespass_denied, bin_or_skip,
    failing_build_project, plant_key, run_the_build, scripted_project,
};

/// `ralph <args> --tool opencode`, opencode talking to `stub`, its config
/// and state where a user's are (`~/.config/opencode`,
/// `~/.local/share/opencode`, `~/.cache/opencode`, `~/.local/state/opencode`).
fn ralph(bin: &PathBuf, stub: &Stub, project: &Project, args: &[&str]) -> Run {
    ralph_at(bin, &stub.base_url(), project, args)
}

/// [`ralph`] with opencode's provider at `base_url`.
fn ralph_at(bin: &PathBuf, base_url: &str, project: &Project, args: &[&str]) -> Run {
    let config = project.home().join(".config/opencode");
    std::fs::create_dir_all(&config).expect("~/.config/opencode");
    opencode_config(&config.join("opencode.json"), base_url);
    run(bin, project.ralph().args(args))
}

/// `ralph` as set up, with opencode's offline switches.
fn run(bin: &PathBuf, ralph: &mut Command) -> Run {
    let out = ralph
        .env("RALPH_AGENT_TOOL", "opencode")
        .env("RALPH_AGENT_COMMAND", bin)
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
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

/// The story done and committed, in a run whose sandbox was on, and
/// opencode wrote its state where `dirs` says (the sandbox let it): its
/// database in the data folder, the `.gitignore` it keeps in its config
/// folder.
#[track_caller]
fn assert_committed(project: &Project, r: &Run, dirs: &Xdg) {
    assert_eq!(r.code, code(0), "{r:?}");
    assert_sandbox_on(&r.stdout);
    assert!(project.passes("US-001"), "{r:?}");
    assert!(project.log().iter().any(|l| l.contains("feat: US-001")), "{:?}", project.log());
    let db = dirs.data.join("opencode/opencode.db");
    assert!(db.is_file(), "no database at {}: {r:?}", db.display());
    let ignore = dirs.config.join("opencode/.gitignore");
    assert!(ignore.is_file(), "nothing written in {}: {r:?}", dirs.config.display());
}

/// The folders opencode keeps its config and data in.
struct Xdg {
    config: PathBuf,
    data: PathBuf,
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
    let home = project.home();
    let dirs = Xdg { config: home.join(".config"), data: home.join(".local/share") };
    assert_committed(&project, &r, &dirs);
}

/// The `XDG_*_HOME` variables and `OPENCODE_CONFIG` outside the home move
/// opencode's config and state there: the sandbox lets it write there, and
/// opencode needs nothing under `~/.local` or `~/.cache`.
#[test]
fn opencode_with_its_state_moved_by_xdg_dirs_implements_a_story() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_with_its_state_moved")
    else {
        return;
    };
    let stub = model(IMPLEMENT);
    let project = scripted_project("opencode");
    let xdg = project.tmp.path().join("xdg");
    let config = xdg.join("opencode.json");
    std::fs::create_dir_all(&xdg).unwrap();
    opencode_config(&config, &stub.base_url());
    let mut ralph = project.ralph();
    ralph
        .args(["3", "--no-wait", "--gate", "grep -qx 'US-001 done' US-001.txt"])
        .env("OPENCODE_CONFIG", &config)
        .env("XDG_DATA_HOME", xdg.join("data"))
        .env("XDG_CONFIG_HOME", xdg.join("config"))
        .env("XDG_CACHE_HOME", xdg.join("cache"))
        .env("XDG_STATE_HOME", xdg.join("state"));
    let r = run(&bin, &mut ralph);
    assert_committed(&project, &r, &Xdg { config: xdg.join("config"), data: xdg.join("data") });
    for dir in [".local", ".cache", ".config"] {
        assert!(!project.home().join(dir).exists(), "{dir}: {r:?}");
    }
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

#[test]
fn opencode_claiming_a_story_it_did_not_do_is_not_believed() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_liar") else { return };
    let stub = Stub::start(|_, request| {
        if request.is_title() {
            Reply::Text("Implement the story".into())
        } else {
            Reply::Text(format!("Implemented US-001. <promise>COMPLETE</promise>{STATUS}"))
        }
    });
    let project = scripted_project("opencode");
    let before = project.log();
    let r = ralph(&bin, &stub, &project, &["1", "--gate", "test -f US-001.txt"]);
    assert_eq!(r.code, code(1), "{r:?}");
    assert!(!project.passes("US-001"), "{r:?}");
    assert_eq!(project.log(), before, "a commit for nothing");
}

/// The faults opencode retries for about 75 s (no option shortens that)
/// before its one `error` event, side by side; each ends the run its own
/// way (`--no-wait`: a wait is not waited out but named, exit 4).
#[test]
fn opencode_retried_faults_end_the_run_each_its_own_way() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_retried_faults") else {
        return;
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let quota = "You exceeded your current quota, please check your plan and billing details.";
    let mut usage = error_body("usage_limit_reached", "The usage limit has been reached");
    usage["error"]["plan_type"] = json!("plus");
    usage["error"]["resets_at"] = json!(now + 3 * 3600);
    let server = "The server had an error while processing your request. Sorry about that!";
    let rate = "Rate limit reached for fake-model on requests per min (RPM): Limit 3. Please try again in 20s.";
    let cases: [(u16, Value, u8, &str); 4] = [
        // Waited out for the 20 s it names (not waiting: exit 4).
        (
            429,
            error_body("rate_limit_exceeded", rate),
            4,
            "usage limit: APIError: Rate limit reached",
        ),
        (
            500,
            error_body("server_error", server),
            4,
            "a transient API error (APIError: The server had an error",
        ),
        (429, usage, 4, "the agent's usage limit until"),
        (429, error_body("insufficient_quota", quota), 7, "out of credits"),
    ];
    std::thread::scope(|s| {
        let runs: Vec<_> = cases
            .into_iter()
            .map(|(status, body, exit, words)| {
                let bin = &bin;
                s.spawn(move || {
                    let stub = Stub::start(move |_, _| Reply::Error(status, body.clone()));
                    let project = scripted_project("opencode");
                    // opencode is silent while it retries: past the 60 s idle timeout.
                    let args = ["3", "--no-wait", "--idle-timeout", "150s"];
                    let r = ralph(bin, &stub, &project, &args);
                    assert_eq!(r.code, code(exit), "{status} {words}: {r:?}");
                    assert!(r.stdout.contains(words), "{status} {words}: {r:?}");
                    assert!(!project.passes("US-001"), "{r:?}");
                })
            })
            .collect();
        for run in runs {
            run.join().expect("a fault's run");
        }
    });
}

#[test]
fn opencode_with_no_server_is_ended_by_the_idle_timeout_as_unreachable() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_with_no_server") else {
        return;
    };
    // A port nothing listens on: opencode then prints nothing, for ever.
    let refused = RefusedPort::new();
    let port = refused.port;
    let project = scripted_project("opencode");
    let url = format!("http://127.0.0.1:{port}/v1");
    let r = ralph_at(&bin, &url, &project, &["3", "--no-wait", "--idle-timeout", "10s"]);
    assert_eq!(r.code, code(4), "{r:?}");
    assert!(r.stdout.contains("cannot reach the API"), "{r:?}");
}

/// ralph's `--timeout` ends opencode in its own retries, during which it
/// prints nothing on stdout: its log on stderr says what it retried. A usage
/// limit is waited for (`--no-wait`: exit 4, saying so); a server that took
/// the request and never answered was reachable, and the run was simply
/// timed out, a failed run like any other.
#[test]
fn opencode_cut_off_in_its_retries_is_judged_by_what_it_retried() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_cut_off") else {
        return;
    };
    std::thread::scope(|s| {
        let limited = s.spawn(|| {
            let stub = Stub::start(|_, _| {
                Reply::Error(
                    429,
                    error_body("usage_limit_reached", "The usage limit has been reached"),
                )
            });
            let project = scripted_project("opencode");
            ralph(&bin, &stub, &project, &["3", "--no-wait", "--timeout", "20s"])
        });
        let slow = s.spawn(|| {
            let stub = Stub::start(|_, _| Reply::Hang);
            let project = scripted_project("opencode");
            ralph(&bin, &stub, &project, &["1", "--timeout", "15s"])
        });
        let r = limited.join().expect("the usage-limit run");
        assert_eq!(r.code, code(4), "{r:?}");
        assert!(r.stdout.contains("the agent's usage limit until"), "{r:?}");
        assert!(!r.stdout.contains("cannot reach the API"), "{r:?}");
        let r = slow.join().expect("the slow server's run");
        assert_eq!(r.code, code(1), "{r:?}");
        assert!(r.stdout.contains("failed in"), "{r:?}");
        assert!(r.stdout.contains("stopped: iteration timeout"), "{r:?}");
        assert!(!r.stdout.contains("cannot reach the API"), "{r:?}");
    });
}

/// A story whose build fails with the same compiler error in every
/// iteration stops the run with that error named.
#[test]
fn opencode_repeating_one_compiler_error_is_stopped_naming_it() {
    let Some(bin) = bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_repeating_one_error")
    else {
        return;
    };
    let stub = Stub::start(|_, request| run_the_build(request));
    let project = failing_build_project("opencode");
    let r = ralph(&bin, &stub, &project, &["5", "--gate", BUILD]);
    assert_eq!(r.code, code(3), "{r:?}");
    assert!(r.stdout.contains(SAME_ERROR), "{r:?}");
}

#[test]
fn opencode_a_denial_by_the_sandbox_is_seen_through_its_output() {
    let Some(bin) =
        bin_or_skip("RALPH_OPENCODE_BIN", "opencode", "opencode_a_denial_by_the_sandbox")
    else {
        return;
    };
    let stub = model(TRESPASS);
    let project = scripted_project("opencode");
    plant_key(&project);
    let r = ralph(&bin, &stub, &project, &["1"]);
    assert_trespass_denied(&project, &r);
}
