//! Which files of ralph-claude-code and ralph.sh a project holds, and what
//! ralph.sh ran: looked at, never changed.

use std::path::{Path, PathBuf};

use crate::agent::Tool;

/// ralph-claude-code's files: in `.ralph/` (v0.10 on) or at the top of the
/// project (the older layout, `@fix_plan.md` and `@AGENT.md`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Rcc {
    pub(crate) prompt: Option<PathBuf>,
    pub(crate) fix_plan: Option<PathBuf>,
    pub(crate) agent: Option<PathBuf>,
    pub(crate) specs: Option<PathBuf>,
    pub(crate) ralphrc: Option<PathBuf>,
}

/// A prompt file of ralph.sh and whether it is upstream's text.
#[derive(Debug, Clone)]
pub(crate) struct ShPrompt {
    pub(crate) path: PathBuf,
    pub(crate) customised: bool,
}

/// ralph.sh's `scripts/ralph/`.
#[derive(Debug, Clone)]
pub(crate) struct RalphSh {
    pub(crate) script: Option<PathBuf>,
    pub(crate) prd: Option<PathBuf>,
    pub(crate) progress: Option<PathBuf>,
    pub(crate) archive: Option<PathBuf>,
    /// The prompt of the tool it ran (prompt.md for amp, CLAUDE.md for claude).
    pub(crate) prompt: Option<ShPrompt>,
    /// The other tool's prompt, when both are there.
    pub(crate) other_prompt: Option<ShPrompt>,
    pub(crate) tool: Tool,
    /// How [`RalphSh::tool`] was worked out.
    pub(crate) tool_because: &'static str,
}

/// What a project holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Found {
    pub(crate) rcc: Option<Rcc>,
    pub(crate) ralph_sh: Option<RalphSh>,
}

/// SHA-256 of upstream's `prompt.md` (snarktank/ralph 842e766, unchanged
/// since) and `CLAUDE.md` (cae9350 and ef93603), CRLF read as LF and
/// trailing blanks dropped: a file with one of these is not customised.
const UPSTREAM_PROMPT: &[&str] =
    &["760636c28c090c831fb80aca2c1672afd82c8163ae51207731e408f589d62085"];
const UPSTREAM_CLAUDE: &[&str] = &[
    "ec28376ebba522ce419c1486a55437bca74f94852f0b5d1ce7526baac7d93e1a",
    "f7e30b90b821be2fc5696225b553bf8d05fcd3226d5ac6895ae2311e7f78628f",
];

/// The hash [`UPSTREAM_PROMPT`] and [`UPSTREAM_CLAUDE`] hold.
pub(crate) fn fingerprint(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let normal = text.replace("\r\n", "\n");
    let hash = Sha256::digest(normal.trim_end().as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

fn file(p: PathBuf) -> Option<PathBuf> {
    p.is_file().then_some(p)
}

fn dir(p: PathBuf) -> Option<PathBuf> {
    p.is_dir().then_some(p)
}

/// Looks at `project`.
pub(crate) fn detect(project: &Path) -> Found {
    Found { rcc: rcc(project), ralph_sh: ralph_sh(project) }
}

fn rcc(project: &Path) -> Option<Rcc> {
    let work = project.join(".ralph");
    let ralphrc = file(project.join(".ralphrc"));
    let new = Rcc {
        prompt: file(work.join("PROMPT.md")),
        fix_plan: file(work.join("fix_plan.md")),
        agent: file(work.join("AGENT.md")),
        specs: dir(work.join("specs")),
        ralphrc: ralphrc.clone(),
    };
    if new.prompt.is_some() || new.fix_plan.is_some() || new.agent.is_some() {
        return Some(new);
    }
    // The layout before v0.10: a root PROMPT.md alone is too common to
    // count, the @-files are not.
    let old_plan = file(project.join("@fix_plan.md")).or_else(|| file(project.join("fix_plan.md")));
    let old_agent = file(project.join("@AGENT.md"));
    if old_plan.is_some() || old_agent.is_some() {
        return Some(Rcc {
            prompt: file(project.join("PROMPT.md")),
            fix_plan: old_plan,
            agent: old_agent,
            specs: dir(project.join("specs")),
            ralphrc,
        });
    }
    ralphrc.is_some().then_some(new)
}

fn sh_prompt(path: PathBuf, upstream: &[&str]) -> Option<ShPrompt> {
    let text = std::fs::read_to_string(&path).ok()?;
    let customised = !upstream.contains(&fingerprint(&text).as_str());
    Some(ShPrompt { path, customised })
}

fn ralph_sh(project: &Path) -> Option<RalphSh> {
    let d = project.join("scripts/ralph");
    let script = file(d.join("ralph.sh"));
    let prd = file(d.join("prd.json"));
    let amp = sh_prompt(d.join("prompt.md"), UPSTREAM_PROMPT);
    let claude = sh_prompt(d.join("CLAUDE.md"), UPSTREAM_CLAUDE);
    if script.is_none() && prd.is_none() && amp.is_none() && claude.is_none() {
        return None;
    }
    let default = script.as_deref().and_then(|s| std::fs::read_to_string(s).ok());
    let (tool, tool_because) = guess_tool(
        amp.as_ref().map(|p| p.customised),
        claude.as_ref().map(|p| p.customised),
        default.as_deref().and_then(default_tool),
    );
    let (prompt, other_prompt) = match tool {
        Tool::Claude => (claude, amp),
        _ => (amp, claude),
    };
    Some(RalphSh {
        script,
        prd,
        progress: file(d.join("progress.txt")),
        archive: dir(d.join("archive")),
        prompt,
        other_prompt,
        tool,
        tool_because,
    })
}

/// The value of ralph.sh's `TOOL="…"` default line; ralph.sh before
/// `--tool` (amp only) has none.
fn default_tool(script: &str) -> Option<Tool> {
    let line = script.lines().map(str::trim).find(|l| l.starts_with("TOOL="))?;
    let value = line["TOOL=".len()..].split(['#', ' ', '\t']).next()?.trim_matches(['"', '\'']);
    match value {
        "amp" => Some(Tool::Amp),
        "claude" => Some(Tool::Claude),
        _ => None,
    }
}

/// Which tool ralph.sh ran, from its prompt files (`Some(customised)` when
/// there) and the script's default: one prompt file alone names its tool,
/// else the one customised, else the script's default, else amp (ralph.sh's
/// own default).
fn guess_tool(
    amp: Option<bool>,
    claude: Option<bool>,
    default: Option<Tool>,
) -> (Tool, &'static str) {
    match (amp, claude) {
        (Some(_), None) => (Tool::Amp, "only prompt.md, the amp prompt, is there"),
        (None, Some(_)) => (Tool::Claude, "only CLAUDE.md, the claude prompt, is there"),
        (Some(true), Some(false)) => {
            (Tool::Amp, "prompt.md, the amp prompt, is the customised one")
        }
        (Some(false), Some(true)) => {
            (Tool::Claude, "CLAUDE.md, the claude prompt, is the customised one")
        }
        _ => match default {
            Some(Tool::Claude) => (Tool::Claude, "ralph.sh's default tool is claude"),
            Some(_) => (Tool::Amp, "ralph.sh's default tool is amp"),
            None => (Tool::Amp, "amp is ralph.sh's default tool"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_ralph_sh_ran() {
        #[rustfmt::skip]
        let cases: &[(Option<bool>, Option<bool>, Option<Tool>, Tool)] = &[
            (Some(false), None, Some(Tool::Claude), Tool::Amp),
            (None, Some(false), None, Tool::Claude),
            (Some(true), Some(false), Some(Tool::Claude), Tool::Amp),
            (Some(false), Some(true), None, Tool::Claude),
            (Some(true), Some(true), Some(Tool::Claude), Tool::Claude),
            (Some(false), Some(false), None, Tool::Amp),
            (None, None, None, Tool::Amp),
        ];
        for (amp, claude, default, want) in cases {
            assert_eq!(
                guess_tool(*amp, *claude, *default).0,
                *want,
                "{amp:?} {claude:?} {default:?}"
            );
        }
        #[rustfmt::skip]
        let scripts: &[(&str, Option<Tool>)] = &[
            ("#!/bin/bash\nTOOL=\"amp\"  # Default to amp\n", Some(Tool::Amp)),
            ("  TOOL=claude\n", Some(Tool::Claude)),
            ("TOOL='codex'\n", None),
            ("MAX_ITERATIONS=${1:-10}\n", None),
        ];
        for (script, want) in scripts {
            assert_eq!(default_tool(script), *want, "{script}");
        }
    }

    #[test]
    fn line_endings_and_trailing_blanks_do_not_make_a_prompt_customised() {
        assert_eq!(fingerprint("a\r\nb\n\n  \n"), fingerprint("a\nb"));
        assert_ne!(fingerprint("a\nb"), fingerprint("a\nc"));
    }
}
