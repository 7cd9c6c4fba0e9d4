//! What the tests of the real codex, gemini and opencode CLIs share: the
//! one-story project, the status block the scripted model ends with, the
//! one command that implements the story, and the rule for skipping when
//! the CLI is not installed (a failure under `RALPH_REQUIRE_AGENT_CLIS=1`).
//!
//! Every real CLI (claude's in `claude_loop.rs` too) runs with the sandbox
//! on and its config and state where a person's are, under the test's
//! `HOME` with no variable moving them (`~/.codex`, `~/.gemini`,
//! `~/.config/opencode`, …): what CI proves is the sandbox's list of the
//! default state dirs (`sandbox::state_paths`). The work scenario also runs
//! once with the state moved outside the home by the CLI's variable
//! (`CODEX_HOME`, `GEMINI_CLI_HOME`, `XDG_*_HOME`, `CLAUDE_CONFIG_DIR`;
//! aider has none).

use std::io::Write;
use std::path::PathBuf;

use crate::harness::Project;

/// A one-story prd.json for the loop of `cli` ("Codex", "Gemini", …).
pub fn one_story(cli: &str) -> String {
    let lower = cli.to_lowercase();
    format!(
        r#"{{
  "project": "{cli} loop",
  "branchName": "ralph/{lower}-loop",
  "description": "ralph drives the real {lower} CLI",
  "userStories": [
    {{"id": "US-001", "title": "First", "description": "", "acceptanceCriteria": ["US-001.txt exists"], "priority": 1, "passes": false, "notes": ""}}
  ]
}}
"#
    )
}

/// The status block the scripted model ends its last answer with.
pub const STATUS: &str = "\n\n---RALPH_STATUS---\nSTATUS: COMPLETE\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 2\nTESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: true\nRECOMMENDATION: done\n---END_RALPH_STATUS---";

/// The model's one command in a [`scripted_project`]: write the story's
/// file, mark it, commit.
pub const IMPLEMENT: &str =
    "python3 impl.py && git add -A && git commit -qm 'feat: US-001 - First'";

const IMPL_PY: &str = "import json\nopen('US-001.txt', 'w').write('US-001 done\\n')\np = json.load(open('prd.json'))\np['userStories'][0]['passes'] = True\njson.dump(p, open('prd.json', 'w'), indent=2)\n";

/// The one-story project of `cli` with the script [`IMPLEMENT`] runs, committed.
pub fn scripted_project(cli: &str) -> Project {
    let project = Project::with_prd(&one_story(cli));
    project.write("impl.py", IMPL_PY);
    project.git(&["add", "-A"]);
    project.git(&["commit", "-q", "-m", "The story's script"]);
    project
}

/// The pinned install named by `env` (`RALPH_CODEX_BIN`, …), or `None` and a
/// SKIPPED line; only that install, since another on PATH may print otherwise.
pub fn bin_or_skip(env: &str, cli: &str, test: &str) -> Option<PathBuf> {
    let bin = std::env::var_os(env).map(PathBuf::from).filter(|p| p.is_file());
    if bin.is_none() {
        assert!(
            std::env::var_os("RALPH_REQUIRE_AGENT_CLIS").is_none_or(|v| v.is_empty() || v == "0"),
            "{test}: {cli} not installed and RALPH_REQUIRE_AGENT_CLIS is set (run .ci/install-agent-clis.sh)"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: {cli} CLI not installed (run .ci/install-agent-clis.sh): {test}"
        );
    }
    bin
}

/// The build of a [`failing_build_project`]: it fails with the same
/// compiler error every time.
pub const BUILD: &str = "sh build.sh";

const BUILD_SH: &str = "printf '   Compiling demo v0.1.0\\nerror[E0308]: mismatched types\\n --> src/lib.rs:2:18\\nerror: could not compile `demo` due to 1 previous error\\n' >&2\nexit 101\n";

/// How a run stopped by a build that never compiles ends: its reason names
/// the error that repeated.
pub const SAME_ERROR: &str = "each with the same error: error[E0308]: mismatched types";

/// The one-story project of `cli` whose [`BUILD`] (also its gate) fails the
/// same way every time, committed.
/// The scripted model of a [`failing_build_project`]: it runs [`BUILD`], and
/// once it has seen the output says the build does not compile yet (a title
/// request, opencode's, gets a title).
pub fn run_the_build(request: &crate::openai_stub::Request) -> crate::openai_stub::Reply {
    use crate::openai_stub::{Reply, has_tool_output};
    if request.is_title() {
        Reply::Text("Build the story".into())
    } else if has_tool_output(request) {
        Reply::Text("The build does not compile yet.".into())
    } else {
        Reply::Shell(BUILD.into())
    }
}

pub fn failing_build_project(cli: &str) -> Project {
    let project = Project::with_prd(&one_story(cli));
    add_failing_build(&project);
    project
}

/// The [`BUILD`] script in `project`, committed.
pub fn add_failing_build(project: &Project) {
    project.write("build.sh", BUILD_SH);
    project.git(&["add", "-A"]);
    project.git(&["commit", "-q", "-m", "The story's build"]);
}

/// The model's one command in a denial test: read a planted key, write the
/// home. The sandbox denies both; the CLI reports the failures in its own
/// output, and ralph reads the denials from there.
pub const TRESPASS: &str = "cat ~/.ssh/id_ed25519; touch ~/escaped; true";

/// Plants the key [`TRESPASS`] reads in `project`'s home.
pub fn plant_key(project: &Project) {
    let ssh = project.home().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE-KEY-MATERIAL\n").unwrap();
}

/// The run named what the sandbox denied [`TRESPASS`] (the key, at least),
/// nothing was written to the home, and the key is nowhere in ralph's output.
#[track_caller]
pub fn assert_trespass_denied(project: &Project, r: &crate::harness::Run) {
    let home = project.home();
    assert!(!home.join("escaped").exists(), "wrote the home: {r:?}");
    let key = format!("sandbox denied {}/.ssh/id_ed25519", home.display());
    let line = r.stdout.lines().find(|l| l.contains("iteration 1 ") && l.contains(" · "));
    assert!(line.is_some_and(|l| l.contains(&key)), "the iteration line lacks {key:?}: {r:?}");
    assert!(!r.stdout.contains("PRIVATE-KEY-MATERIAL"), "{r:?}");
}
