//! `ralph import`: projects laid out as ralph-claude-code and ralph.sh
//! document it (fixtures written here from their documented layout), turned
//! into ralph's, then run.

use serde_json::Value;

use crate::harness::*;

const FIX_PLAN: &str = "\
# Ralph Fix Plan

## High Priority
- [x] Pick the project layout
- [ ] Parse the config file
  - [ ] reject unknown keys
  - [x] accept comments

## Medium Priority
- [ ] Add a cache

## Low Priority
- [ ] Polish the README

## Completed
- [x] Project initialization

## Notes
- Focus on the MVP first
";

const PROMPT_MD: &str = "\
# Ralph Development Instructions

You are Ralph, working on the config parser. Study .ralph/specs/ first.
Update .ralph/fix_plan.md as you go, and end with a RALPH_STATUS block.
";

/// A `.ralphrc` as ralph-setup writes it.
const RALPHRC: &str = "\
# .ralphrc - Ralph project configuration
PROJECT_NAME=\"config-parser\"
MAX_CALLS_PER_HOUR=50
CLAUDE_TIMEOUT_MINUTES=20
CLAUDE_OUTPUT_FORMAT=json
SESSION_CONTINUITY=true
SESSION_EXPIRY_HOURS=24
";

/// A project set up by ralph-claude-code (v0.10 layout), committed.
fn rcc() -> Project {
    let p = Project::new();
    p.write(".ralph/PROMPT.md", PROMPT_MD);
    p.write(".ralph/fix_plan.md", FIX_PLAN);
    p.write(".ralph/AGENT.md", "# Agent\nBuild with `make`, test with `make test`.\n");
    p.write(".ralph/specs/config.md", "# Config format\nKEY=value lines.\n");
    p.write(".ralphrc", RALPHRC);
    p.write(".ralph/logs/ralph.log", "[2026-01-01 10:00:00] [INFO] Ralph loop started\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "ralph-claude-code setup"]);
    p
}

fn stories(p: &Project) -> Vec<(String, String, u64, bool)> {
    p.prd()["userStories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().into(),
                s["title"].as_str().unwrap().into(),
                s["priority"].as_u64().unwrap(),
                s["passes"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn owned(rows: &[(&str, &str, u64, bool)]) -> Vec<(String, String, u64, bool)> {
    rows.iter().map(|(i, t, p, d)| (i.to_string(), t.to_string(), *p, *d)).collect()
}

#[test]
fn a_ralph_claude_code_project_imports_and_runs_its_first_open_story() {
    let p = rcc();
    // Before the import, a run says what to do instead of "no prd.json".
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("`ralph import` turns its checklist into prd.json"), "{r:?}");

    let r = p.run(&["import"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("wrote        prd.json (5 stories from .ralph/fix_plan.md, 2 done"),
        "{r:?}"
    );
    assert_eq!(p.prd()["project"], "config-parser");
    let config = p.read(".ralph/config.toml");
    for line in [
        "calls_per_hour = 50",
        "timeout = \"20m\"",
        "context = [\".ralph/PROMPT.md\", \".ralph/AGENT.md\", \".ralph/specs/\"]",
    ] {
        assert!(config.contains(line), "{line} missing:\n{config}");
    }
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "ralph import"]);

    p.script("[run *]\nimplement\n");
    let r = p.run(&["1"]);
    assert_eq!(r.code, code(exit::MAX_ITERATIONS), "{r:?}");
    assert_eq!(p.agent_runs(), ["US-002"], "the first story not ticked in fix_plan.md");
    assert!(p.passes("US-002"));
    assert_eq!(p.log()[0], "feat: US-002 - Parse the config file");
    let prompt = p.prompt(1);
    assert!(prompt.contains("## Project notes: read these first"), "{prompt}");
    for f in ["`.ralph/PROMPT.md`", "`.ralph/AGENT.md`", "`.ralph/specs/`"] {
        assert!(prompt.contains(f), "{f} not in the prompt:\n{prompt}");
    }
    // Imported files are not "ignored" any more: no notice.
    assert!(!r.stdout.contains("ralph does not read"), "{r:?}");
    // ralph-claude-code's files are all still there, untouched.
    assert_eq!(p.read(".ralph/fix_plan.md"), FIX_PLAN);
    assert_eq!(p.read(".ralph/PROMPT.md"), PROMPT_MD);
    assert_eq!(p.read(".ralphrc"), RALPHRC);
    assert!(p.path(".ralph/logs/ralph.log").exists(), "ralph moved ralph-claude-code's logs");
}

#[test]
fn a_fix_plan_with_checked_unchecked_and_nested_items_in_priority_sections() {
    let p = rcc();
    let r = p.run(&["import"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        stories(&p),
        owned(&[
            ("US-001", "Pick the project layout", 1, true),
            ("US-002", "Parse the config file", 2, false),
            ("US-003", "Add a cache", 3, false),
            ("US-004", "Project initialization", 4, true),
            ("US-005", "Polish the README", 5, false),
        ]),
        "High first, then Medium and Completed in file order, then Low"
    );
    let prd = p.prd();
    let parse = &prd["userStories"][1];
    assert_eq!(parse["description"], "- [ ] reject unknown keys\n- [x] accept comments");
    assert_eq!(parse["notes"], "imported from .ralph/fix_plan.md (High Priority)");
    assert_eq!(prd["branchName"], "ralph/config-parser");
}

#[test]
fn a_second_import_changes_nothing_and_says_so() {
    let p = rcc();
    assert_eq!(p.run(&["import"]).code, 0);
    let (prd, config) = (p.read("prd.json"), p.read(".ralph/config.toml"));
    let again = p.run(&["import"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("Nothing to do: everything is already imported"), "{again:?}");
    assert!(!again.stdout.contains("wrote") && !again.stdout.contains("updated"), "{again:?}");
    assert_eq!((p.read("prd.json"), p.read(".ralph/config.toml")), (prd, config));
    // Worked on since: the same stories, so still imported, progress kept.
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "ralph import"]);
    p.script("[run *]\nimplement\n");
    assert_eq!(p.run(&["1"]).code, code(exit::MAX_ITERATIONS));
    let third = p.run(&["import"]);
    assert!(third.stdout.contains("kept         prd.json (already imported"), "{third:?}");
    assert!(p.passes("US-002"), "the import set back the run's progress");
}

#[test]
fn a_ralphrc_with_every_documented_key() {
    let p = rcc();
    p.write(
        ".ralphrc",
        "\
PROJECT_NAME=\"every-key\"
PROJECT_TYPE=rust
export MAX_CALLS_PER_HOUR=40
MAX_TOKENS_PER_HOUR=100000
CLAUDE_TIMEOUT_MINUTES=25
CLAUDE_OUTPUT_FORMAT=json
ALLOWED_TOOLS=\"Write,Read,Edit,Bash(git add *),Bash(git commit *),Bash(npm *)\"
SESSION_CONTINUITY=true
SESSION_EXPIRY_HOURS=24
CLAUDE_CODE_CMD=\"npx @anthropic-ai/claude-code\"
CLAUDE_MODEL=claude-sonnet-4-5
CLAUDE_EFFORT=high
CLAUDE_AUTO_UPDATE=false
CLAUDE_MIN_VERSION=2.0.76
RALPH_VERBOSE=true
RALPH_SHELL_INIT_FILE=~/.zshrc
CB_NO_PROGRESS_THRESHOLD=4
CB_SAME_ERROR_THRESHOLD=6
CB_PERMISSION_DENIAL_THRESHOLD=3
CB_OUTPUT_DECLINE_THRESHOLD=70
CB_COOLDOWN_MINUTES=45
CB_AUTO_RESET=true
ENABLE_NOTIFICATIONS=true
ENABLE_BACKUP=false
LIVE_SHOW_TOOL_ARGS=true
OPTIONAL_SECTIONS=\"Optional,Future\"
TASK_SOURCES=\"local\"
GITHUB_TASK_LABEL=ralph-task
BEADS_FILTER=\"\"
GITHUB_ISSUE=42
CREATE_PR=true
SANDBOX_PROVIDER=docker
SYNC_MAX_FILE_SIZE=10485760
",
    );
    let r = p.run(&["import"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("not a setting ralph-claude-code documents"), "{r:?}");
    assert!(!r.stdout.contains("skipped"), "{r:?}");
    for (key, line) in [
        (
            "MAX_CALLS_PER_HOUR",
            "mapped       .ralphrc MAX_CALLS_PER_HOUR (→ limits.calls_per_hour = 40)",
        ),
        (
            "SESSION_CONTINUITY",
            "dropped      .ralphrc SESSION_CONTINUITY (every iteration starts a fresh agent process",
        ),
        (
            "SESSION_EXPIRY_HOURS",
            "dropped      .ralphrc SESSION_EXPIRY_HOURS (every iteration starts a fresh agent process",
        ),
        (
            "MAX_TOKENS_PER_HOUR",
            "dropped      .ralphrc MAX_TOKENS_PER_HOUR (ralph has no hourly token window",
        ),
        (
            "SANDBOX_PROVIDER",
            "dropped      .ralphrc SANDBOX_PROVIDER (ralph runs the agent where ralph runs",
        ),
        (
            "CB_OUTPUT_DECLINE_THRESHOLD",
            "dropped      .ralphrc CB_OUTPUT_DECLINE_THRESHOLD (ralph-claude-code documents it but never reads it)",
        ),
    ] {
        assert!(r.stdout.contains(line), "{key}: {line}\n{r:?}");
    }
    // Every assignment is accounted for, one line each.
    let accounted = r.stdout.lines().filter(|l| l.contains(" .ralphrc ")).count();
    assert_eq!(accounted, 33, "{r:?}");
    let show = p
        .ralph()
        .args(["config", "show", "--json"])
        .env_remove("RALPH_AGENT_TOOL")
        .env_remove("RALPH_AGENT_COMMAND")
        .output()
        .unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&show.stdout).expect("config show --json");
    let value = |key: &str| {
        rows.iter()
            .find(|r| r["key"] == key)
            .map(|r| r["value"].as_str().unwrap_or_default().to_string())
            .unwrap()
    };
    for (key, want) in [
        ("limits.calls_per_hour", "40"),
        ("agent.timeout", "\"25m\""),
        ("agent.safe", "true"),
        (
            "agent.allowed_tools",
            "[\"Write\", \"Read\", \"Edit\", \"Bash(git add *)\", \"Bash(git commit *)\", \"Bash(npm *)\"]",
        ),
        ("agent.command", "[\"npx\", \"@anthropic-ai/claude-code\"]"),
        ("agent.model", "\"claude-sonnet-4-5\""),
        ("agent.args", "[\"--effort\", \"high\"]"),
        ("circuit.no_progress", "4"),
        ("circuit.same_error", "6"),
        ("circuit.permission_denials", "3"),
        ("circuit.cooldown", "\"45m\""),
        ("circuit.auto_reset", "true"),
    ] {
        assert_eq!(value(key), want, "{key}");
    }
    assert_eq!(p.prd()["project"], "every-key");
}

/// A project with ralph.sh copied into scripts/ralph/, as its README says.
fn ralph_sh(prompt: &str) -> Project {
    let p = Project::new();
    p.write(
        "scripts/ralph/ralph.sh",
        "#!/bin/bash\n# Usage: ./ralph.sh [--tool amp|claude] [max_iterations]\nset -e\nTOOL=\"amp\"  # the default\nMAX_ITERATIONS=10\n",
    );
    p.write("scripts/ralph/prompt.md", prompt);
    p.write("scripts/ralph/prd.json", THREE_STORIES);
    p.write("scripts/ralph/progress.txt", "# Ralph Progress Log\nStarted: today\n---\n");
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "ralph.sh setup"]);
    p
}

const CUSTOM_PROMPT: &str = "\
# Our agent instructions

Pick the highest priority story with passes: false in prd.json, implement it,
run `make lint` before every commit, and log to progress.txt.
";

#[test]
fn a_customised_ralph_sh_prompt_becomes_the_template_and_amp_the_agent() {
    let p = ralph_sh(CUSTOM_PROMPT);
    let offered = p.run(&["import"]);
    assert_eq!(offered.code, 0, "{offered:?}");
    assert!(offered.stdout.contains("kept         scripts/ralph/prompt.md (customised: --prompt makes it ralph's prompt template"), "{offered:?}");
    assert!(offered.stdout.contains("mapped       ralph.sh --tool amp (→ agent.tool = \"amp\"; only prompt.md, the amp prompt, is there)"), "{offered:?}");
    assert!(!p.path(".ralph/prompt.md").exists());
    let r = p.run(&["import", "--prompt"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(
            "wrote        .ralph/prompt.md (the prompt template, from scripts/ralph/prompt.md"
        ),
        "{r:?}"
    );
    let config = p.read(".ralph/config.toml");
    assert!(
        config.contains("tool = \"amp\"") && config.contains("require_handoff = false"),
        "{config}"
    );
    // prd.json and progress.txt are read where ralph.sh kept them.
    assert!(
        r.stdout.contains("kept         scripts/ralph/prd.json (ralph reads it in place)"),
        "{r:?}"
    );
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "ralph import"]);

    p.script("[run *]\nimplement\n");
    let run = p.run(&["1"]);
    assert_eq!(run.code, code(exit::MAX_ITERATIONS), "{run:?}");
    let prompt = p.prompt(1);
    assert!(
        prompt.starts_with("# Our agent instructions"),
        "the note for people was sent:\n{prompt}"
    );
    assert!(prompt.contains("run `make lint` before every commit"), "{prompt}");
    assert!(prompt.contains("Your story: US-001 (First)"), "{prompt}");
    let prd = p.path("scripts/ralph/prd.json").display().to_string();
    assert!(prompt.contains(&prd), "{prompt}");
    let v: Value = serde_json::from_str(&p.read("scripts/ralph/prd.json")).unwrap();
    assert_eq!(v["userStories"][0]["passes"], true);
}

#[test]
fn a_run_says_once_what_it_ignores() {
    let p = ralph_sh(CUSTOM_PROMPT);
    p.script("[run *]\nimplement\n");
    let first = p.run(&["1"]);
    let all = format!("{}{}", first.stdout, first.stderr);
    assert!(all.contains("ralph does not read scripts/ralph/prompt.md (customised), ralph.sh's --tool amp (ralph runs custom)"), "{first:?}");
    assert!(all.contains("`ralph import --dry-run`"), "{first:?}");
    let second = p.run(&["1"]);
    assert!(
        !format!("{}{}", second.stdout, second.stderr).contains("ralph does not read"),
        "{second:?}"
    );
}

#[test]
fn dry_run_writes_nothing() {
    let p = rcc();
    let before = p.git(&["status", "--porcelain", "--untracked-files=all", "--ignored"]);
    let r = p.run(&["import", "--dry-run", "--prompt"]);
    assert_eq!(r.code, 0, "{r:?}");
    for line in [
        "would write  prd.json",
        "would write  .ralph/prompt.md",
        "would write  .ralph/config.toml",
        "would map    .ralphrc MAX_CALLS_PER_HOUR",
    ] {
        assert!(r.stdout.contains(line), "{line}\n{r:?}");
    }
    assert!(r.stdout.contains("Dry run: nothing was written"), "{r:?}");
    assert_eq!(p.git(&["status", "--porcelain", "--untracked-files=all", "--ignored"]), before);
    assert!(!p.path(".git/ralph").exists());
}

#[test]
fn nothing_of_yours_is_overwritten_without_force() {
    let p = rcc();
    let mine = "{\"userStories\": [{\"id\": \"MINE-1\", \"title\": \"Mine\", \"priority\": 1}]}\n";
    p.write("prd.json", mine);
    p.write(
        ".ralph/config.toml",
        "[limits]\ncalls_per_hour = 10 # mine\n\n[agent]\nmodel = \"x\"\n",
    );
    let r = p.run(&["import"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("refused      prd.json"), "{r:?}");
    assert!(r.stdout.contains("refused      .ralph/config.toml (limits.calls_per_hour is 10 there, the import says 50: --force replaces it)"), "{r:?}");
    assert!(r.stdout.contains("`ralph import --force` replaces them"), "{r:?}");
    assert_eq!(p.read("prd.json"), mine);
    // What does not conflict is still added, around the user's lines.
    let config = p.read(".ralph/config.toml");
    assert!(config.starts_with("[limits]\ncalls_per_hour = 10 # mine\n"), "{config}");
    assert!(config.contains("timeout = \"20m\""), "{config}");

    let forced = p.run(&["import", "--force"]);
    assert_eq!(forced.code, 0, "{forced:?}");
    assert_eq!(stories(&p).len(), 5);
    let config = p.read(".ralph/config.toml");
    assert!(config.contains("calls_per_hour = 50") && config.contains("model = \"x\""), "{config}");
}

#[test]
fn the_older_root_layout_is_found_too() {
    let p = Project::new();
    p.write("PROMPT.md", PROMPT_MD);
    p.write("@fix_plan.md", "- [ ] One\n- [ ] Two\n");
    p.write("@AGENT.md", "build: make\n");
    p.write("specs/a.md", "spec\n");
    let r = p.run(&["import"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(stories(&p), owned(&[("US-001", "One", 1, false), ("US-002", "Two", 2, false)]));
    // --prompt with no prompt to take says so.
    let p2 = Project::new();
    p2.write("@fix_plan.md", "- [ ] One\n");
    let r = p2.run(&["import", "--prompt", "--dry-run"]);
    assert!(r.stdout.contains("skipped      --prompt (there is no PROMPT.md"), "{r:?}");
    let config = p.read(".ralph/config.toml");
    assert!(config.contains("context = [\"PROMPT.md\", \"@AGENT.md\", \"specs/\"]"), "{config}");
}

const MARKDOWN_PRD: &str = "\
# PRD: Task priority

## User Stories
### US-001: Add a priority field
- [ ] A priority column with a migration
- [ ] Typecheck passes
";

#[test]
fn a_markdown_prd_is_converted_by_the_agent_and_checked() {
    let p = Project::new();
    p.write("tasks/prd-priority.md", MARKDOWN_PRD);
    let good = r#"{"project": "App", "branchName": "ralph/task-priority", "description": "Task priority", "userStories": [{"id": "US-001", "title": "Add a priority field", "description": "As a user…", "acceptanceCriteria": ["Typecheck passes"], "priority": 1, "passes": false, "notes": ""}]}"#;
    p.script(&format!("[run 1]\nwrite .git/ralph/import/prd.json {good}\n"));
    let r = p.run(&["import", "tasks/prd-priority.md"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("wrote        prd.json (1 story from"), "{r:?}");
    assert_eq!(stories(&p), owned(&[("US-001", "Add a priority field", 1, false)]));
    let prompt = p.prompt(1);
    assert!(prompt.contains("## The ralph skill") && prompt.contains("name: ralph"), "{prompt}");
    assert!(prompt.contains("A priority column with a migration"), "{prompt}");
    // prd.json is there now: a second conversion needs --force.
    let again = p.run(&["import", "tasks/prd-priority.md"]);
    assert_eq!(again.code, code(exit::USAGE), "{again:?}");
    assert!(again.stderr.contains("--force"), "{again:?}");
}

#[test]
fn a_failed_markdown_conversion_changes_nothing() {
    let p = Project::new();
    p.write("tasks/prd-priority.md", MARKDOWN_PRD);
    p.git(&["add", "-A"]);
    p.git(&["commit", "-q", "-m", "the PRD"]);
    p.script(
        "[run 1]\nwrite .git/ralph/import/prd.json {\"userStories\": [{\"id\": \"US-001\", \"title\": \"A\", \"priority\": 1, \"dependsOn\": [\"US-009\"]}]}\n\
         [run 2]\nwrite .git/ralph/import/prd.json {\"userStories\": [{\"id\": \"US-001\", \"title\": \"A\"}]}\n\
         [run 3]\nexit 3\n\
         [run 4]\nprint I could not do it\n",
    );
    for want in [
        "names US-009, which is no story",
        "US-001: no \"priority\"",
        "exit 3",
        "the agent wrote no",
    ] {
        let r = p.run(&["import", "tasks/prd-priority.md"]);
        assert_eq!(r.code, code(exit::USAGE), "{want}: {r:?}");
        assert!(
            r.stderr.contains(want) && r.stderr.contains("nothing was changed"),
            "{want}: {r:?}"
        );
        assert!(!p.path("prd.json").exists(), "{want}");
        assert_eq!(p.git(&["status", "--porcelain", "--untracked-files=all"]), "", "{want}");
    }
}

#[test]
fn bad_input_is_a_usage_error_that_changes_nothing() {
    let p = Project::new();
    let r = p.run(&["import"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("nothing to import in"), "{r:?}");
    let r = p.run(&["import", "tasks/missing.md"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains("tasks/missing.md does not exist"), "{r:?}");
    assert_eq!(p.git(&["status", "--porcelain", "--untracked-files=all"]), "");
}

#[test]
fn init_never_ignores_files_of_yours_in_ralph_dir() {
    let p = Project::new();
    assert_eq!(p.run(&["init"]).code, 0);
    p.write(".ralph/specs/new.md", "a spec of mine\n");
    let status = p.git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(status.contains(".ralph/specs/new.md"), "{status}");
    assert!(
        status.contains(".ralph/config.toml") && status.contains(".ralph/prompt.md"),
        "{status}"
    );
    assert!(!p.read(".ralph/.gitignore").lines().any(|l| l.trim() == "*"));
}

#[test]
fn after_ralph_init_the_import_replaces_only_inits_untouched_files() {
    let p = rcc();
    assert_eq!(p.run(&["init"]).code, 0);
    let r = p.run(&["import", "--prompt"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("updated      prd.json (5 stories"), "{r:?}");
    assert!(r.stdout.contains("replaces ralph init's untouched file"), "{r:?}");
    assert!(!r.stdout.contains("refused"), "{r:?}");
    assert_eq!(stories(&p).len(), 5);
    assert!(p.read(".ralph/prompt.md").contains("You are Ralph, working on the config parser"));
    // init's commented template got the settings under its own headers.
    let config = p.read(".ralph/config.toml");
    assert_eq!(config.matches("[limits]").count(), 1, "{config}");
    assert!(config.contains("calls_per_hour = 50"), "{config}");
    assert!(p.run(&["config", "show"]).code == 0);
}

#[test]
fn a_fix_plan_given_as_a_markdown_prd_is_pointed_to_the_project_import() {
    let p = rcc();
    let r = p.run(&["import", ".ralph/fix_plan.md"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stderr.contains(".ralph/fix_plan.md is ralph-claude-code's checklist"), "{r:?}");
    assert!(p.agent_runs().is_empty() && !p.path("prd.json").exists());
}
