//! `ralph completions SHELL` and `ralph man`: generated from the clap
//! definition and ralph's own tables (settings, exit codes), never written
//! by hand where a table exists.
//!
//! The man page is one page, ralph(1): clap_mangen renders the name,
//! synopsis, description and options; the commands, examples, files,
//! environment and exit status are added here. clap_mangen's own command
//! list would link to ralph-run(1) and others, which are not shipped, and
//! its "extra" section reflows the examples into one paragraph.

use std::fmt::Write as _;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::Error;

use super::common::print;

pub(crate) fn completions(shell: clap_complete::Shell) -> Result<u8, Error> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    // Into memory first: clap_complete panics when its writer fails, and
    // `ralph completions bash | true` closes the pipe early.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ralph", &mut out);
    print(&String::from_utf8_lossy(&out))?;
    Ok(0)
}

pub(crate) fn man() -> Result<u8, Error> {
    print(&page().map_err(|e| Error::io("render the man page", e))?)?;
    Ok(0)
}

/// The whole page, roff.
fn page() -> std::io::Result<String> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut rendered = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut rendered)?;
    let rendered = String::from_utf8_lossy(&rendered);
    let mut out = String::new();
    for section in sections(&rendered) {
        match section.title {
            // Links to pages that do not exist, and reflowed examples.
            "SUBCOMMANDS" | "EXTRA" => continue,
            "VERSION" => {
                out.push_str(&commands(&cmd));
                out.push_str(&examples());
                out.push_str(&files());
                out.push_str(&environment(&cmd));
                out.push_str(&exit_status());
            }
            _ => {}
        }
        out.push_str(section.text);
    }
    Ok(out)
}

/// A `.SH` section of rendered roff (or the preamble before the first).
struct Section<'a> {
    title: &'a str,
    text: &'a str,
}

fn sections(roff: &str) -> Vec<Section<'_>> {
    let mut starts: Vec<usize> = roff.match_indices("\n.SH ").map(|(i, _)| i + 1).collect();
    starts.insert(0, 0);
    starts.push(roff.len());
    starts
        .windows(2)
        .map(|w| {
            let text = &roff[w[0]..w[1]];
            let title = text
                .strip_prefix(".SH ")
                .and_then(|t| t.lines().next())
                .map_or("", |t| t.trim().trim_matches('"'));
            Section { title, text }
        })
        .collect()
}

/// Text for roff: backslashes and hyphens escaped, characters beyond ASCII
/// named (`\[u2026]`, which troff reads without a preprocessor), and no
/// line that a roff reader would take for a request.
fn esc(text: &str) -> String {
    text.lines()
        .map(|l| {
            let mut out = String::new();
            for c in l.chars() {
                match c {
                    '\\' => out.push_str("\\e"),
                    '-' => out.push_str("\\-"),
                    c if c.is_ascii() => out.push(c),
                    c => {
                        let _ = write!(out, "\\[u{:04X}]", u32::from(c));
                    }
                }
            }
            if out.starts_with('.') || out.starts_with('\'') { format!("\\&{out}") } else { out }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Lines kept as they are (examples, usage), indented.
fn verbatim(text: &str) -> String {
    format!(".PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n", esc(text.trim_end()))
}

/// A term in bold and its description.
fn item(term: &str, text: &str) -> String {
    format!(".TP\n\\fB{}\\fR\n{}\n", esc(term), esc(text))
}

/// COMMANDS: every command with its usage, what it does, its own options
/// and its examples.
fn commands(cmd: &clap::Command) -> String {
    let mut o = String::from(".SH COMMANDS\n");
    o.push_str(&esc(
        "Without a command, ralph runs the loop (the same as ralph run). Options before a command apply to it; the run options go with ralph run.",
    ));
    o.push('\n');
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let _ = writeln!(o, ".SS \"{}\"", esc(&usage(sub)));
        let about = sub.get_long_about().or_else(|| sub.get_about()).map(|a| a.to_string());
        o.push_str(&esc(&about.unwrap_or_default()));
        o.push('\n');
        if matches!(sub.get_name(), "run" | "monitor") {
            o.push_str(".PP\nTakes the RUN OPTIONS above.\n");
        } else {
            for arg in own_args(sub) {
                o.push_str(&item(&arg_term(arg), &arg_help(arg)));
            }
        }
        for leaf in sub.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let mut text = leaf.get_about().map(|a| a.to_string()).unwrap_or_default();
            for arg in own_args(leaf).filter(|a| a.get_long().is_some()) {
                let _ = write!(text, "; {}: {}", arg_term(arg), arg_help(arg));
            }
            o.push_str(&item(&usage(leaf), &text));
        }
        if let Some(after) = sub.get_after_help() {
            o.push_str(&verbatim(&after.to_string()));
        }
    }
    o
}

/// `ralph status [OPTIONS]`, as clap shows it after `Usage: `.
fn usage(cmd: &clap::Command) -> String {
    let text = cmd.clone().render_usage().to_string();
    let text = text.trim_start_matches("Usage:").trim();
    // Global options are in OPTIONS above.
    text.replace(" [OPTIONS]", "")
}

/// A command's arguments that are its own: not global, not help, not hidden.
fn own_args(cmd: &clap::Command) -> impl Iterator<Item = &clap::Arg> {
    cmd.get_arguments().filter(|a| {
        !a.is_hide_set() && !a.is_global_set() && !matches!(a.get_id().as_str(), "help" | "version")
    })
}

fn arg_term(arg: &clap::Arg) -> String {
    let value = arg.get_value_names().and_then(|v| v.first()).map(|v| v.to_string());
    match (arg.get_long(), value) {
        (Some(long), Some(v)) if arg.get_action().takes_values() => format!("--{long} {v}"),
        (Some(long), _) => format!("--{long}"),
        (None, Some(v)) => v,
        (None, None) => arg.get_id().to_string(),
    }
}

fn arg_help(arg: &clap::Arg) -> String {
    let mut help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    if !values.is_empty() && values.len() <= 12 {
        let _ = write!(help, " (one of {})", values.join(", "));
    }
    let defaults: Vec<String> =
        arg.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect();
    // A switch's default ("false") says nothing.
    if !defaults.is_empty() && arg.get_action().takes_values() {
        let _ = write!(help, " [default: {}]", defaults.join(", "));
    }
    help
}

fn examples() -> String {
    let text = crate::cli::EXAMPLES.trim_start_matches("Examples:\n");
    format!(".SH EXAMPLES\n{}", verbatim(&dedent(text)))
}

/// Lines without the indentation they share.
fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines().map(|l| l.get(indent..).unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// FILES: what ralph keeps where (ARCHITECTURE.md, "Files ralph keeps").
const FILES: &[(&str, &str)] = &[
    (
        "prd.json",
        "The stories (the ralph.sh schema). Looked for in the project directory, else in scripts/ralph/; --prd names another.",
    ),
    (
        "progress.txt, archive/, .last-branch",
        "Next to prd.json, as ralph.sh keeps them: the agents' progress log, earlier runs archived when branchName changes, and the branch of the last run.",
    ),
    (
        ".ralph/config.toml",
        "Project settings (commit it). ralph init writes every key, commented at its default.",
    ),
    (
        ".ralph/prompt.md",
        "The iteration prompt, when the built-in one should be changed; a leading HTML comment is not sent.",
    ),
    (
        ".ralph/handoff.json",
        "Written by the agent at the end of its iteration, read and validated by ralph.",
    ),
    (
        "~/.config/ralph/config.toml",
        "User settings ($XDG_CONFIG_HOME/ralph/config.toml when that is set).",
    ),
    (
        ".git/ralph/",
        "ralph's own state, in the git directory where git clean and rm -rf .ralph cannot reach it (a linked worktree has its own under .git/worktrees/NAME/ralph/).",
    ),
    (".git/ralph/lock", "The pid of the running ralph; a second one in the same project exits 8."),
    (
        ".git/ralph/state.json",
        "The run's checkpoint: a crashed or interrupted run resumes from it.",
    ),
    (".git/ralph/circuit.json, circuit-history.jsonl", "The circuit breaker and its transitions."),
    (".git/ralph/limits.json", "Agent calls of the last hour and a usage limit's reset time."),
    (
        ".git/ralph/lessons/, failures.jsonl, rules.json",
        "What was learned from failures, and the rule cards (ralph rules).",
    ),
    (".git/ralph/runs.jsonl", "One line per finished run."),
    (
        ".git/ralph/logs/RUN-ID/",
        "Each iteration's agent output (iter-N.log), prompt (iter-N.prompt.md) and gate output (gate-N.log); the run's events as --json prints them (events.jsonl, read by ralph history and ralph report) and its Markdown report (report.md); logs/current.log is the running one. The last logs.keep_runs runs are kept.",
    ),
];

fn files() -> String {
    let mut o = String::from(".SH FILES\n");
    for (path, what) in FILES {
        o.push_str(&item(path, what));
    }
    o
}

/// What an agent and the hooks find in their environment.
const AGENT_ENV: &[(&str, &str)] = &[
    ("RALPH_RUN_ID", "the run's id (also given to hooks)"),
    ("RALPH_PROJECT_DIR", "the project directory (also given to hooks)"),
    ("RALPH_ITERATION", "the iteration's number (hooks: the last one)"),
    ("RALPH_STORY_ID", "the story being worked on (hooks: the last one)"),
    ("RALPH_PRD", "the path of prd.json (also given to hooks)"),
    ("RALPH_PROGRESS", "the path of progress.txt"),
    ("RALPH_HANDOFF", "where the agent writes its handoff"),
    (
        "RALPH_SUPERVISOR",
        "the ralph process it belongs to (also given to gates and hooks): what ralph's watchdog ends it by if ralph is killed",
    ),
];

const HOOK_ENV: &[(&str, &str)] = &[
    ("RALPH_EVENT", "iteration_end, complete or halt"),
    ("RALPH_STORY_TITLE", "the story's title (iteration_end)"),
    (
        "RALPH_OUTCOME",
        "how the iteration or the run ended (progress, no_progress, failed, …; complete, max_iterations, …)",
    ),
    ("RALPH_STORY_PASSES", "true when the story passes after the iteration (iteration_end)"),
    (
        "RALPH_COST_USD",
        "what the agent reported spending in the iteration (iteration_end), or in the run",
    ),
    ("RALPH_TOTAL_COST_USD", "what the agents reported spending in the run so far"),
    ("RALPH_LOG", "the iteration's agent log (iteration_end)"),
    ("RALPH_AGENT", "the agent that ran the iteration: claude, codex, …, custom (iteration_end)"),
    ("RALPH_AGENT_EXIT_CODE", "the agent's exit code (iteration_end)"),
    ("RALPH_ERROR", "what went wrong in the iteration, if anything (iteration_end)"),
    ("RALPH_EXIT_CODE", "the run's exit code (complete, halt)"),
    ("RALPH_EXIT_REASON", "the first line of the run's end message (complete, halt)"),
    ("RALPH_PASSING", "stories passing at the end (complete, halt)"),
    ("RALPH_TOTAL", "stories in prd.json (complete, halt)"),
];

fn environment(cmd: &clap::Command) -> String {
    let mut o = String::from(".SH ENVIRONMENT\n");
    o.push_str(".SS \"Read by ralph\"\n");
    for arg in cmd.get_arguments() {
        if let Some(var) = arg.get_env() {
            let flag = arg.get_long().map(|l| format!("--{l}")).unwrap_or_default();
            o.push_str(&item(&var.to_string_lossy(), &format!("the same as {flag}")));
        }
    }
    for key in crate::config::KEYS {
        let setting = match key.flag {
            Some(f) if f.starts_with('-') => format!("{} (also {f})", key.key),
            Some(f) => format!("{} (the default {f})", key.key),
            None => key.key.to_string(),
        };
        let text = format!("{setting}: {}", key.help);
        o.push_str(&item(&crate::config::env_name(key.key), &text));
    }
    for (var, what) in [
        ("NO_COLOR", "when set and not empty, no colour under --color auto"),
        ("TERM", "dumb: no live display and no colour under auto"),
        (
            "CI",
            "when set (and not false or 0): plain lines instead of the live display under --progress auto",
        ),
        ("XDG_CONFIG_HOME, HOME", "where the user's config.toml is"),
        ("IS_SANDBOX", "1 lets claude skip its permission prompts when ralph runs as root"),
    ] {
        o.push_str(&item(var, what));
    }
    o.push_str(".SS \"Given to the agent\"\n");
    o.push_str(&esc("Each agent process also gets these (and variables a parent agent session set, such as CLAUDECODE, are removed):"));
    o.push('\n');
    for (var, what) in AGENT_ENV {
        o.push_str(&item(var, what));
    }
    o.push_str(".SS \"Given to hooks\"\n");
    o.push_str(&esc("hooks.on_iteration_end, hooks.on_complete and hooks.on_halt get RALPH_RUN_ID, RALPH_PROJECT_DIR, RALPH_PRD, RALPH_ITERATION and RALPH_STORY_ID as above, and:"));
    o.push('\n');
    for (var, what) in HOOK_ENV {
        o.push_str(&item(var, what));
    }
    o
}

fn exit_status() -> String {
    let mut o = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in crate::exit::TABLE {
        o.push_str(&item(&code.to_string(), meaning));
    }
    o.push_str(".PP\n");
    o.push_str(&esc(
        "Output into a pipe that closes early (ralph agents | head) ends a command quietly, with the code it would have had.",
    ));
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_links_to_no_page_that_does_not_exist() {
        let page = page().unwrap();
        assert!(!page.contains("ralph-run(1)") && !page.contains("ralph\\-run(1)"), "{page}");
        assert!(!page.contains(".SH SUBCOMMANDS") && !page.contains(".SH EXTRA"), "{page}");
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "COMMANDS",
            "EXAMPLES",
            "FILES",
            "ENVIRONMENT",
            "\"EXIT STATUS\"",
            "VERSION",
        ] {
            assert!(page.contains(&format!("\n.SH {section}\n")), "no {section}");
        }
        // Examples keep their lines.
        let examples = &page[page.find(".SH EXAMPLES").unwrap()..];
        assert!(examples.contains(".nf\nralph init "), "{examples}");
    }

    #[test]
    fn every_exit_code_setting_and_variable_ralph_sets_is_on_the_page() {
        let page = page().unwrap();
        let section = |name: &str| {
            let start = page.find(&format!(".SH {name}")).unwrap();
            let end = page[start + 4..].find("\n.SH ").map_or(page.len(), |e| start + 4 + e);
            page[start..end].to_string()
        };
        let exit = section("\"EXIT STATUS\"");
        for (code, _) in crate::exit::TABLE {
            assert!(exit.contains(&format!(".TP\n\\fB{code}\\fR\n")), "exit {code}");
        }
        let env = section("ENVIRONMENT").replace("\\-", "-");
        for key in crate::config::KEYS {
            assert!(env.contains(&crate::config::env_name(key.key)), "{}", key.key);
        }
        // What the driver puts in an agent's and a hook's environment.
        let sources = [include_str!("../driver/iteration.rs"), include_str!("../driver/hooks.rs")];
        let set = regex::Regex::new(r#""(RALPH_[A-Z_]+)""#).unwrap();
        let mut seen = 0;
        for source in sources {
            for var in set.captures_iter(source).map(|c| c[1].to_string()) {
                assert!(env.contains(&format!("\\fB{var}\\fR")), "{var} is not in ENVIRONMENT");
                seen += 1;
            }
        }
        assert!(seen > 20, "only {seen} variables found in the driver");
        let files = section("FILES");
        for f in [
            "state.json",
            "circuit.json",
            "limits.json",
            "runs.jsonl",
            "lock",
            "config.toml",
            "prompt.md",
            "handoff.json",
            "progress.txt",
        ] {
            assert!(files.contains(f), "{f} not in FILES");
        }
    }

    #[test]
    fn text_cannot_become_a_roff_request() {
        assert_eq!(
            esc(".hidden\n'quoted\nplain - \\ text \u{2026}"),
            "\\&.hidden\n\\&'quoted\nplain \\- \\e text \\[u2026]"
        );
        // troff without preconv warns on anything else.
        assert!(page().unwrap().is_ascii());
    }
}
