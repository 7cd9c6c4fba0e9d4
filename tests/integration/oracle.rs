//! The gate cannot be gamed: ralph owns the oracle, not the agent.
//!
//! Scripted gamers against real runners — a small Rust crate under `cargo
//! test` and a small Python project under `pytest` — that rewrite the
//! committed gate config, edit the script the gate runs, delete the failing
//! test, ignore or skip it, or turn its assertion into `assert True` while
//! deleting another. In the run itself and in the next run no story is
//! verified, `ralph status` names what was refused, and a person's own edit
//! of the config on `main` is honoured.
//!
//! pytest comes from `.ci/run` (pip); without it the Python tests say
//! SKIPPED, unless `RALPH_REQUIRE_PYTEST` is set (CI), where they fail.

use std::process::Command;

use crate::harness::*;

const STORY: &str = r#"{"project":"P","branchName":"ralph/calc","userStories":[
  {"id":"US-001","title":"Division by zero gives None","priority":1,"passes":false}]}"#;

const LIB_RS: &str = "pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub fn div(a: i32, b: i32) -> Option<i32> {
    Some(a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 2), 3);
    }

    #[test]
    fn divides_by_zero() {
        assert_eq!(div(1, 0), None);
    }
}
";

const CALC_PY: &str = "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n";

const TEST_CALC_PY: &str = "from calc import add, div


def test_add():
    assert add(1, 2) == 3


def test_div_by_zero():
    assert div(1, 0) is None
";

const PYTEST: &str = "python3 -m pytest -p no:cacheprovider tests";

/// A fake-agent line that writes `text` as the whole of `path`.
fn put(path: &str, text: &str) -> String {
    format!("put {path} {}\n", text.replace('\n', "\\n"))
}

/// The gamer: its change, then the story marked and committed.
fn gamer(change: &str) -> String {
    format!("[run *]\n{change}mark-pass\ncommit feat: {{id}} - {{title}}\n")
}

/// `ralph` with what cargo needs from the real environment (rustup's
/// toolchains), the crate's build kept out of the repository.
pub(crate) fn run(p: &Project, args: &[&str]) -> Run {
    let home = std::env::var("HOME").unwrap_or_default();
    let var = |k: &str, default: String| std::env::var(k).unwrap_or(default);
    let out = p
        .ralph()
        .env("RUSTUP_HOME", var("RUSTUP_HOME", format!("{home}/.rustup")))
        .env("CARGO_HOME", var("CARGO_HOME", format!("{home}/.cargo")))
        .env("CARGO_TARGET_DIR", p.tmp.path().join("crate-target"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(args)
        .output()
        .expect("run ralph");
    to_run(out)
}

fn committed(p: &Project, files: &[(&str, &str)]) {
    for (path, text) in files {
        p.write(path, text);
    }
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "The person's project"]);
}

fn rust_project(config: &str) -> Project {
    let p = Project::with_prd(STORY);
    committed(
        &p,
        &[
            (".gitignore", "target/\n"),
            ("Cargo.toml", "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
            ("src/lib.rs", LIB_RS),
            (".ralph/config.toml", config),
        ],
    );
    p
}

/// Whether pytest can be had; `false` means the test says SKIPPED.
fn pytest_here(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("RALPH_REQUIRE_PYTEST").is_none(),
            "{test}: pytest is required (RALPH_REQUIRE_PYTEST) but `python3 -m pytest` does not run"
        );
        eprintln!("SKIPPED {test}: pytest is not installed (pip install pytest)");
    }
    ok
}

fn python_project(gate: &str) -> Project {
    let p = Project::with_prd(STORY);
    committed(
        &p,
        &[
            (".gitignore", "__pycache__/\n.pytest_cache/\n"),
            ("calc.py", CALC_PY),
            ("tests/test_calc.py", TEST_CALC_PY),
            ("check.sh", &format!("#!/bin/sh\nexec {PYTEST}\n")),
            (".ralph/config.toml", &format!("[gate]\ncommand = {gate:?}\n")),
        ],
    );
    p
}

/// Neither this run nor the next verifies the story, each names why, and
/// `ralph status` names what was refused.
fn refused_twice(p: &Project, why: &str) -> (Run, Run) {
    let first = run(p, &["1"]);
    let second = run(p, &["1"]);
    for (n, r) in [(1, &first), (2, &second)] {
        assert_eq!(r.code, code(exit::MAX_ITERATIONS), "run {n}: {r:?}");
        assert!(
            r.stdout.contains("US-001 Division by zero gives None (claimed: yes, not verified)"),
            "run {n}: {r:?}"
        );
        assert!(r.stdout.contains(why), "run {n}: no {why:?} in {r:?}");
    }
    assert!(!p.passes("US-001"), "{second:?}");
    let status = run(p, &["status"]);
    assert!(status.stdout.contains("refused: US-001, iteration"), "{status:?}");
    assert!(status.stdout.contains(why), "status does not name {why:?}: {status:?}");
    (first, second)
}

#[test]
fn a_gamer_that_rewrites_the_committed_gate_config_is_set_back_in_this_run_and_the_next() {
    let config = "[gate]\ncommand = \"cargo test --offline\"\n";
    let p = rust_project(config);
    p.script(&gamer(&put(".ralph/config.toml", "[gate]\ncommand = \"true\"\n")));
    let (first, _) = refused_twice(&p, "changed the protected path .ralph/config.toml");
    assert!(
        first
            .stdout
            .contains("the agent changed .ralph/config.toml, which ralph protects: set back"),
        "{first:?}"
    );
    // The branch holds the person's config again, by ralph's commit.
    assert_eq!(p.read(".ralph/config.toml"), config);
    assert_eq!(p.git(&["show", "HEAD:.ralph/config.toml"]), config);
    assert!(
        p.log().iter().any(|s| s == "chore: set back .ralph/config.toml the agent changed"),
        "{:?}",
        p.log()
    );
    // The agent's version is kept for the person, and the report lists it.
    assert!(first.stdout.contains("the agent proposes changing .ralph/config.toml"), "{first:?}");
    let patch = first.stdout.split("its version is ").nth(1).unwrap().lines().next().unwrap();
    let patch = std::fs::read_to_string(patch).unwrap();
    assert!(patch.contains("+command = \"true\""), "{patch}");
}

#[test]
fn a_gamer_that_ignores_the_failing_rust_test_is_not_verified() {
    let p = rust_project("[gate]\ncommand = \"cargo test --offline\"\n");
    let ignored =
        LIB_RS.replace("    #[test]\n    fn divides", "    #[test]\n    #[ignore]\n    fn divides");
    p.script(&gamer(&put("src/lib.rs", &ignored)));
    let (first, second) = refused_twice(&p, "0 tests ignored or skipped before, 1 now");
    // The diff is flagged with the marker's line.
    assert!(first.stdout.contains("src/lib.rs:19: skip marker added (#[ignore])"), "{first:?}");
    // The next run's baseline names what vanished since.
    assert!(second.stdout.contains("tests vanished since the baseline of run"), "{second:?}");
}

#[test]
fn a_gamer_that_edits_the_script_the_gate_runs_is_set_back() {
    if !pytest_here("a_gamer_that_edits_the_script_the_gate_runs_is_set_back") {
        return;
    }
    let p = python_project("sh check.sh");
    p.script(&gamer(&put("check.sh", "#!/bin/sh\nexit 0\n")));
    refused_twice(&p, "changed the protected path check.sh");
    assert!(p.read("check.sh").contains("pytest"), "the script was not set back");
}

#[test]
fn a_gamer_that_deletes_the_failing_python_test_is_not_verified() {
    if !pytest_here("a_gamer_that_deletes_the_failing_python_test_is_not_verified") {
        return;
    }
    let p = python_project(PYTEST);
    let without = "from calc import add, div\n\n\ndef test_add():\n    assert add(1, 2) == 3\n";
    p.script(&gamer(&put("tests/test_calc.py", without)));
    let (first, _) = refused_twice(&p, "2 tests ran before, 1 now: 1 test disappeared");
    assert!(
        first.stdout.contains("tests/test_calc.py:8: test test_div_by_zero deleted"),
        "{first:?}"
    );
}

#[test]
fn a_gamer_that_skips_the_failing_python_test_is_not_verified() {
    if !pytest_here("a_gamer_that_skips_the_failing_python_test_is_not_verified") {
        return;
    }
    let p = python_project(PYTEST);
    let skipped = TEST_CALC_PY
        .replace("from calc", "import pytest\nfrom calc")
        .replace("def test_div", "@pytest.mark.skip(reason=\"later\")\ndef test_div");
    p.script(&gamer(&put("tests/test_calc.py", &skipped)));
    let (first, _) = refused_twice(&p, "0 tests ignored or skipped before, 1 now");
    assert!(
        first.stdout.contains("tests/test_calc.py:9: skip marker added (@pytest.mark.skip)"),
        "{first:?}"
    );
}

#[test]
fn a_gamer_that_asserts_true_and_deletes_another_test_is_not_verified() {
    if !pytest_here("a_gamer_that_asserts_true_and_deletes_another_test_is_not_verified") {
        return;
    }
    let p = python_project(PYTEST);
    let hollow = "from calc import add, div\n\n\ndef test_div_by_zero():\n    assert True\n";
    p.script(&gamer(&put("tests/test_calc.py", hollow)));
    let (first, _) = refused_twice(&p, "2 tests ran before, 1 now: 1 test disappeared");
    assert!(first.stdout.contains("tests/test_calc.py:4: test test_add deleted"), "{first:?}");
}

/// The issue's own report: the agent's commit of `command = "true"` is on
/// the run branch already (a ralph before this one let it through). The
/// next `ralph` reads the gate from `main`, says so, and `ralph status`
/// too; a person's commit on `main` is honoured, and `ralph trust` accepts
/// the branch's copy.
#[test]
fn the_gate_comes_from_the_base_not_from_what_the_run_branch_committed() {
    let p = Project::with_prd(STORY);
    committed(&p, &[(".ralph/config.toml", "[gate]\ncommand = \"test -f src/US-001.txt\"\n")]);
    p.git(&["checkout", "-q", "-b", "ralph/calc"]);
    committed(&p, &[(".ralph/config.toml", "[gate]\ncommand = \"true\"\n")]);
    p.script(&gamer(""));
    let r = run(&p, &["1"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert!(
        r.stdout.contains(
            "ralph/calc changes gate.command to \"true\" (main has \"test -f src/US-001.txt\"): ignored; run `ralph trust` to accept it"
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("(claimed: yes, not verified)"), "{r:?}");
    assert!(!p.passes("US-001"));
    let status = run(&p, &["status"]);
    assert!(
        status.stdout.contains("config: ralph/calc changes gate.command to \"true\""),
        "{status:?}"
    );
    let shown = run(&p, &["config", "show"]);
    assert!(shown.stdout.contains(".ralph/config.toml at main"), "{shown:?}");

    // A person's own edit, committed on main by hand, is honoured.
    p.git(&["checkout", "-q", "main"]);
    committed(&p, &[(".ralph/config.toml", "[gate]\ncommand = \"test -f README.md\"\n")]);
    p.git(&["checkout", "-q", "ralph/calc"]);
    let r = run(&p, &["1"]);
    assert!(r.stdout.contains("main has \"test -f README.md\""), "{r:?}");
    assert!(r.stdout.contains("(claimed: yes, verified)"), "{r:?}");
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");

    // `ralph trust` accepts the branch's copy as the person's.
    let p2 = Project::with_prd(STORY);
    committed(&p2, &[(".ralph/config.toml", "[gate]\ncommand = \"false\"\n")]);
    p2.git(&["checkout", "-q", "-b", "ralph/calc"]);
    committed(&p2, &[(".ralph/config.toml", "[gate]\ncommand = \"test -f README.md\"\n")]);
    let t = run(&p2, &["trust"]);
    assert_eq!(t.code, 0, "{t:?}");
    assert!(t.stdout.contains("accepted .ralph/config.toml as committed on ralph/calc"), "{t:?}");
    p2.script(&gamer(""));
    let r = run(&p2, &["1"]);
    assert!(!r.stdout.contains("ignored; run `ralph trust`"), "{r:?}");
    assert!(r.stdout.contains("(claimed: yes, verified)"), "{r:?}");
    // A later change of the accepted file is not accepted.
    committed(&p2, &[(".ralph/config.toml", "[gate]\ncommand = \"true\"\n")]);
    let status = run(&p2, &["status"]);
    assert!(
        status.stdout.contains("changes gate.command to \"true\" (main has \"false\")"),
        "{status:?}"
    );
}

/// What decides trust across runs — the configs a person accepted, the test
/// counts, the base — is kept outside the repository: an agent that writes
/// an "accepted" record for its own config into `.git/ralph/trust.json`
/// (where an older ralph kept it) changes nothing, and the sandbox denies
/// it the real file.
#[test]
fn an_agent_cannot_accept_its_own_config_by_writing_trust_json() {
    let p = Project::with_prd(STORY);
    committed(&p, &[(".ralph/config.toml", "[gate]\ncommand = \"test -f src/US-001.txt\"\n")]);
    // ralph cuts the run branch, and records its base.
    p.script(&gamer(""));
    let r = run(&p, &["1"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    let repos = p.home().join(".local/state/ralph/repos");
    let trust: Vec<_> = std::fs::read_dir(&repos).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(trust.len(), 1, "{trust:?}");
    let trust = trust[0].join("trust.json");
    assert!(std::fs::read_to_string(&trust).unwrap().contains("\"ralph/calc\": \"main\""));
    // An agent's change of the gate is on the branch (a ralph before this
    // one let it through).
    committed(&p, &[(".ralph/config.toml", "[gate]\ncommand = \"true\"\n")]);
    let plant = r#"blob=$(git rev-parse HEAD:.ralph/config.toml)
forged="{\"version\":1,\"accepted\":{\"ralph/calc\":\"$blob\"}}"
mkdir -p .git/ralph && printf %s "$forged" > .git/ralph/trust.json && echo planted-old
for f in "$HOME"/.local/state/ralph/repos/*/trust.json; do printf %s "$forged" > "$f" && echo planted-real; done
"#;
    let script = format!(
        "[run *]\n{}try run sh .git/plant.sh\nmark-pass\ncommit feat: {{id}}\n",
        put(".git/plant.sh", plant)
    );
    p.script(&script);
    let before = std::fs::read(&trust).unwrap();
    for _ in 0..2 {
        let r = run(&p, &["1"]);
        assert!(r.stdout.contains("ignored; run `ralph trust` to accept it"), "{r:?}");
        assert!(r.stdout.contains("(claimed: yes, not verified)"), "{r:?}");
    }
    assert!(p.dir().join(".git/ralph/trust.json").exists(), "the agent wrote the old place");
    assert_eq!(std::fs::read(&trust).unwrap(), before, "the agent could not write the real one");
    assert!(!p.passes("US-001"));
}

/// The sandbox decides what the agent may reach, so it is the person's too:
/// an agent's commit that switches it off or opens the home to it is
/// ignored, and the agent still cannot read outside its project.
#[test]
fn the_sandbox_comes_from_the_base_not_from_what_the_run_branch_committed() {
    let p = Project::with_prd(STORY);
    committed(&p, &[(".ralph/config.toml", "[gate]\ncommand = \"test -f README.md\"\n")]);
    p.git(&["checkout", "-q", "-b", "ralph/calc"]);
    let opened = "[gate]\ncommand = \"test -f README.md\"\n[agent]\nsandbox = \"off\"\n";
    committed(&p, &[(".ralph/config.toml", opened)]);
    p.script(&gamer(""));
    let r = run(&p, &["1"]);
    assert!(r.stdout.contains("ralph/calc changes agent.sandbox to \"off\""), "{r:?}");
    assert!(r.stdout.contains("ignored; run `ralph trust` to accept it"), "{r:?}");
    let status = run(&p, &["status"]);
    assert!(status.stdout.contains("config: ralph/calc changes agent.sandbox"), "{status:?}");
    let shown = run(&p, &["config", "show"]);
    assert!(
        shown.stdout.lines().any(|l| l.contains("agent.sandbox") && !l.contains("\"off\"")),
        "{shown:?}"
    );
}
