//! ralph driving the real aider CLI (aider-chat 0.86.2 from PyPI,
//! `.ci/install-agent-clis.sh`) against the scripted Chat Completions API of
//! [`crate::openai_stub`] (litellm's `openai/` provider, `--no-stream`).
//!
//! aider has no tools and runs no shell commands: the model edits files by
//! writing them whole, and with `--no-auto-commits` nobody but ralph commits
//! them, once the story passes. aider exits 0 on every API error, so each
//! fault here is read from its output: a 401 stops the run, a 429 naming a
//! usage limit is waited for, and a 500 aider gave up on is backed off as an
//! overload (with `--no-wait`, both end the run with exit 4 and say which). The 429 and the 500 each take aider
//! about 80 s of its own retries (no option shortens them), so they run side
//! by side in one test.
//!
//! Each test skips, saying so on stderr, without `RALPH_AIDER_BIN`;
//! `RALPH_REQUIRE_AGENT_CLIS=1` (set by CI) turns that into a failure.

use std::path::{Path, PathBuf};

use crate::harness::{Project, RefusedPort, Run, assert_sandbox_on, code, to_run};
use crate::openai_stub::{Reply, Stub, error_body};
use crate::real_cli::{BUILD, SAME_ERROR, STATUS, bin_or_skip, failing_build_project, one_story};

/// `ralph <args> --tool aider --model openai/fake-model`, aider talking to `stub`.
fn ralph(bin: &Path, stub: &Stub, project: &Project, args: &[&str]) -> Run {
    ralph_at(bin, &stub.base_url(), project, args)
}

/// [`ralph`] with aider's API at `base_url`, its state where a user's is
/// (`~/.aider`, `~/.aider*`), and a git identity in `~/.gitconfig` as a
/// person has (without one aider writes its own into `.git/config`, which
/// ralph sets back as tampering).
fn ralph_at(bin: &Path, base_url: &str, project: &Project, args: &[&str]) -> Run {
    std::fs::write(
        project.home().join(".gitconfig"),
        "[user]\n\tname = Test\n\temail = test@example.invalid\n",
    )
    .expect("~/.gitconfig");
    let out = project
        .ralph()
        .args(args)
        .args(["--model", "openai/fake-model"])
        .env("RALPH_AGENT_TOOL", "aider")
        .env("RALPH_AGENT_COMMAND", bin)
        .env("OPENAI_API_BASE", base_url)
        .env("OPENAI_API_KEY", "sk-test")
        // litellm would fetch its price list from the internet at start.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("RALPH_AGENT_IDLE_TIMEOUT", "120s")
        .output()
        .expect("run ralph");
    to_run(out)
}

fn bin(test: &str) -> Option<PathBuf> {
    bin_or_skip("RALPH_AIDER_BIN", "aider", test)
}

/// The answer of a model that does the story in aider's whole-file edit
/// format, from the project as it is when asked: the story's file, prd.json
/// with the story marked, and progress.txt with a line added.
fn implementing_answer(project: &Path) -> String {
    let read = |f: &str| std::fs::read_to_string(project.join(f)).unwrap_or_default();
    let marked = read("prd.json").replacen("\"passes\": false", "\"passes\": true", 1);
    let progress = read("progress.txt") + "US-001: wrote US-001.txt\n";
    format!(
        "I'll implement US-001.\n\nUS-001.txt\n```\nUS-001 done\n```\n\nprd.json\n```\n{}\n```\n\n\
         progress.txt\n```\n{}\n```\n{STATUS}\n",
        marked.trim_end(),
        progress.trim_end()
    )
}

#[test]
fn aider_implements_a_story_and_ralph_commits_it() {
    let Some(bin) = bin("aider_implements_a_story_and_ralph_commits_it") else { return };
    let project = Project::with_prd(&one_story("aider"));
    let dir = project.path("");
    let stub = Stub::start(move |_, _| Reply::Text(implementing_answer(&dir)));
    let r = ralph(&bin, &stub, &project, &["3", "--gate", "grep -qx 'US-001 done' US-001.txt"]);
    assert_eq!(r.code, code(0), "{r:?}");
    assert_sandbox_on(&r.stdout);
    assert!(project.passes("US-001"), "{r:?}");
    // aider kept its state where a person's is, through the sandbox.
    assert!(project.home().join(".aider/installs.json").is_file(), "{r:?}");
    // aider made the edits; ralph committed them, and nothing else is left.
    let log = project.log();
    assert!(log.iter().any(|l| l.contains("feat: US-001")), "{log:?}");
    let tracked = project.git(&["ls-files"]);
    assert!(tracked.lines().any(|f| f == "US-001.txt"), "{tracked}");
    assert!(!tracked.contains(".aider"), "aider's scratch files were committed: {tracked}");
    let ignore = std::fs::read_to_string(project.path(".gitignore")).unwrap_or_default();
    assert!(!ignore.contains(".aider"), "aider edited .gitignore: {ignore}");
    // Only ralph's own .ralph/.gitignore is left for the user to commit.
    let status = project.git(&["status", "--porcelain", "-uall"]);
    assert_eq!(status.trim(), "?? .ralph/.gitignore", "left dirty: {r:?}");
    assert!(project.read("progress.txt").contains("US-001: wrote"), "{r:?}");
    // aider really talked to the stub, without streaming.
    let requests = stub.requests();
    assert!(!requests.is_empty() && requests.iter().all(|q| q.body["stream"] != true));
}

#[test]
fn aider_claiming_a_story_it_did_not_do_is_not_believed() {
    let Some(bin) = bin("aider_claiming_a_story_it_did_not_do_is_not_believed") else { return };
    let stub = Stub::start(|_, _| {
        Reply::Text(format!("Implemented US-001. <promise>COMPLETE</promise>{STATUS}"))
    });
    let project = Project::with_prd(&one_story("aider"));
    let before = project.log();
    let r = ralph(&bin, &stub, &project, &["1", "--gate", "test -f US-001.txt"]);
    assert_eq!(r.code, code(1), "{r:?}");
    assert!(!project.passes("US-001"), "{r:?}");
    assert_eq!(project.log(), before, "a commit for nothing");
}

#[test]
fn aider_401_stops_the_run_though_aider_exits_0() {
    let Some(bin) = bin("aider_401_stops_the_run_though_aider_exits_0") else { return };
    let stub = Stub::start(|_, _| {
        Reply::Error(401, error_body("invalid_api_key", "Incorrect API key provided: sk-test."))
    });
    let project = Project::with_prd(&one_story("aider"));
    let r = ralph(&bin, &stub, &project, &["3"]);
    assert_eq!(r.code, code(7), "{r:?}");
    assert!(r.stdout.contains("could not authenticate"), "{r:?}");
    assert_eq!(stub.requests().len(), 1, "a 401 retried");
}

/// aider's slow give-ups, side by side: a usage limit (429 whose message
/// names it), a 500, and no server at all.
#[test]
fn aider_usage_limit_and_500_after_its_own_retries() {
    let Some(bin) = bin("aider_usage_limit_and_500_after_its_own_retries") else { return };
    std::thread::scope(|s| {
        let limit = s.spawn(|| {
            let stub = Stub::start(|_, _| {
                Reply::Error(
                    429,
                    error_body("usage_limit_reached", "The usage limit has been reached"),
                )
            });
            let project = Project::with_prd(&one_story("aider"));
            (ralph(&bin, &stub, &project, &["3", "--no-wait"]), project)
        });
        let down = s.spawn(|| {
            let stub = Stub::start(|_, _| {
                Reply::Error(
                    500,
                    error_body(
                        "server_error",
                        "The server had an error while processing your request. Sorry about that!",
                    ),
                )
            });
            let project = Project::with_prd(&one_story("aider"));
            (ralph(&bin, &stub, &project, &["1", "--no-wait"]), project)
        });
        let nowhere = s.spawn(|| {
            // A port nothing listens on: aider retries its connection error
            // like any other fault, then gives up and exits 0.
            let refused = RefusedPort::new();
            let project = Project::with_prd(&one_story("aider"));
            let url = format!("http://127.0.0.1:{}/v1", refused.port);
            ralph_at(&bin, &url, &project, &["3", "--no-wait"])
        });
        // aider wraps the exception line at 80 columns; read whole, it names
        // a usage limit, not the plain rate limit of the advice after it.
        let (r, _limited) = limit.join().expect("the usage-limit run");
        assert_eq!(r.code, code(4), "{r:?}");
        assert!(r.stdout.contains("the agent's usage limit until"), "{r:?}");
        assert!(!r.stdout.contains("a transient API error"), "{r:?}");
        let (r, project) = down.join().expect("the 500 run");
        assert_eq!(r.code, code(4), "{r:?}");
        let backs_off =
            "a transient API error (The API provider's servers are down or overloaded.)";
        assert!(r.stdout.contains(backs_off), "{r:?}");
        assert!(!project.passes("US-001"), "{r:?}");
        let r = nowhere.join().expect("the run with no server");
        assert_eq!(r.code, code(4), "{r:?}");
        assert!(r.stdout.contains("cannot reach the API"), "{r:?}");
    });
}

/// ralph's `--timeout` ends aider in its own retries, with the litellm error
/// it is retrying on screen: a 429 naming its wait and the usage-limit shape
/// are both limits to wait for (`--no-wait`: exit 4, saying so), not failed
/// runs that open the breaker.
#[test]
fn aider_cut_off_in_its_retries_is_judged_by_what_it_retried() {
    let Some(bin) = bin("aider_cut_off_in_its_retries") else { return };
    let rate = "Rate limit reached for fake-model on requests per min (RPM): Limit 3. Please try again in 20s.";
    let cases = [
        ("rate limit", error_body("rate_limit_exceeded", rate)),
        ("usage limit", error_body("usage_limit_reached", "The usage limit has been reached")),
    ];
    std::thread::scope(|s| {
        let runs: Vec<_> = cases
            .into_iter()
            .map(|(name, body)| {
                let bin = &bin;
                s.spawn(move || {
                    let stub = Stub::start(move |_, _| Reply::Error(429, body.clone()));
                    let project = Project::with_prd(&one_story("aider"));
                    let r = ralph(bin, &stub, &project, &["3", "--no-wait", "--timeout", "20s"]);
                    assert_eq!(r.code, code(4), "{name}: {r:?}");
                    assert!(r.stdout.contains("the agent's usage limit until"), "{name}: {r:?}");
                    assert!(!r.stdout.contains("stopped: iteration timeout"), "{name}: {r:?}");
                })
            })
            .collect();
        for run in runs {
            run.join().expect("a limit's run");
        }
    });
}

/// A story whose build fails with the same compiler error in every
/// iteration stops the run with that error named.
#[test]
fn aider_repeating_one_compiler_error_is_stopped_naming_it() {
    let Some(bin) = bin("aider_repeating_one_compiler_error") else { return };
    let stub = Stub::start(|_, _| {
        Reply::Text(
            "The build fails:\nerror[E0308]: mismatched types\n --> src/lib.rs:2:18\n".into(),
        )
    });
    let project = failing_build_project("aider");
    let r = ralph(&bin, &stub, &project, &["5", "--gate", BUILD]);
    assert_eq!(r.code, code(3), "{r:?}");
    assert!(r.stdout.contains(SAME_ERROR), "{r:?}");
}

/// aider runs no commands and edits only inside its repository: the way
/// out is a link in a hostile checkout that leads to the home. aider reads
/// what the repository tracks, so it follows the link, is denied the home
/// and says so ("unable to read: [Errno 13] Permission denied: '<home>'");
/// its edit through the link is skipped, and the home stays untouched.
#[test]
fn aider_a_denial_by_the_sandbox_is_seen_through_its_output() {
    let Some(bin) = bin("aider_a_denial_by_the_sandbox") else { return };
    let project = Project::with_prd(&one_story("aider"));
    std::os::unix::fs::symlink(project.home(), project.path("notes")).unwrap();
    project.git(&["add", "-A"]);
    project.git(&["commit", "-q", "-m", "notes"]);
    let answer = format!("I'll write it.\n\nnotes/escaped\n```\npwned\n```\n{STATUS}\n");
    let stub = Stub::start(move |_, _| Reply::Text(answer.clone()));
    let r = ralph(&bin, &stub, &project, &["1"]);
    assert!(!project.home().join("escaped").exists(), "wrote the home: {r:?}");
    let want = format!("sandbox denied {}", project.home().display());
    let line = r.stdout.lines().find(|l| l.contains("iteration 1 ") && l.contains(" · "));
    assert!(line.is_some_and(|l| l.contains(&want)), "the iteration line lacks {want:?}: {r:?}");
}
