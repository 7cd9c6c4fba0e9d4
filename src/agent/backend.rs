//! The command line for each agent CLI, the way its makers intend it to run
//! unattended: headless mode, prompt channel, structured output, and the
//! permission flags it needs to work without a person to click "allow".
//!
//! Nothing here runs a shell: every invocation is an argv.

use std::path::{Path, PathBuf};

use crate::analyze::Format;

/// The agent CLIs ralph knows.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    /// Anthropic Claude Code (`claude -p`).
    Claude,
    /// Sourcegraph Amp (`amp -x`).
    Amp,
    /// OpenAI Codex CLI (`codex exec`).
    Codex,
    /// Google Gemini CLI (`gemini`, headless).
    Gemini,
    /// opencode (`opencode run`).
    Opencode,
    /// Cursor's agent CLI (`cursor-agent -p`).
    #[value(name = "cursor-agent", alias = "cursor")]
    #[serde(rename = "cursor-agent", alias = "cursor")]
    Cursor,
    /// aider (`aider --message-file`).
    Aider,
    /// Any other command, given with `--agent-cmd`.
    Custom,
}

impl Tool {
    pub const ALL: [Tool; 8] = [
        Tool::Claude,
        Tool::Amp,
        Tool::Codex,
        Tool::Gemini,
        Tool::Opencode,
        Tool::Cursor,
        Tool::Aider,
        Tool::Custom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Claude => "claude",
            Tool::Amp => "amp",
            Tool::Codex => "codex",
            Tool::Gemini => "gemini",
            Tool::Opencode => "opencode",
            Tool::Cursor => "cursor-agent",
            Tool::Aider => "aider",
            Tool::Custom => "custom",
        }
    }

    /// Files the tool writes into the project for itself, kept out of git
    /// (`.git/info/exclude`): not work, never committed.
    pub fn scratch_files(self) -> &'static [&'static str] {
        match self {
            Tool::Aider => {
                &[".aider.chat.history.md", ".aider.input.history", ".aider.tags.cache.v4"]
            }
            _ => &[],
        }
    }

    /// The program a named tool runs by default.
    pub fn default_program(self) -> Option<&'static str> {
        match self {
            Tool::Custom => None,
            t => Some(t.name()),
        }
    }

    /// How the tool's stdout is formatted in the mode ralph runs it in.
    pub fn format(self) -> Format {
        match self {
            Tool::Claude => Format::Claude,
            Tool::Amp => Format::Amp,
            Tool::Codex => Format::Codex,
            Tool::Gemini => Format::Gemini,
            Tool::Opencode => Format::Opencode,
            Tool::Cursor => Format::Cursor,
            Tool::Aider | Tool::Custom => Format::Text,
        }
    }

    /// Where each CLI finds project skills, for `ralph init`.
    pub fn skills_dir(self) -> Option<&'static str> {
        match self {
            Tool::Claude => Some(".claude/skills"),
            Tool::Amp => Some(".agents/skills"),
            Tool::Codex => Some(".agents/skills"),
            Tool::Gemini => Some(".gemini/skills"),
            Tool::Opencode => Some(".opencode/skills"),
            Tool::Cursor => Some(".cursor/skills"),
            Tool::Aider | Tool::Custom => None,
        }
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the prompt reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptChannel {
    /// Written to stdin, which is then closed (an open stdin makes some CLIs wait forever).
    Stdin,
    /// As one argv element. Linux caps a single argument at 128 KiB.
    Argv,
    /// In a file whose path is passed on the command line.
    File,
}

/// Largest prompt Linux accepts as a single argv element (MAX_ARG_STRLEN).
pub const MAX_ARGV_PROMPT: usize = 128 * 1024 - 1;

/// Placeholders in a custom command.
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";
pub const PROMPT_FILE_PLACEHOLDER: &str = "{prompt_file}";

/// A configured agent: which CLI, which program, and the knobs users set.
#[derive(Debug, Clone)]
pub struct Backend {
    pub tool: Tool,
    /// argv[0] and fixed arguments: the tool's program, or the custom command.
    pub command: Vec<String>,
    pub model: Option<String>,
    pub extra_args: Vec<String>,
    /// Use the CLI's safer permission mode instead of "allow everything".
    pub safe: bool,
    /// Tools to allow in safe mode (Claude `--allowedTools`).
    pub allowed_tools: Vec<String>,
    /// The run's gate commands (`gate.command`, the stories' `verify`): in
    /// safe mode claude may also run the programs they run
    /// ([`gate_tools`]), so it can check its work the way ralph will.
    pub gate_commands: Vec<Vec<String>>,
    /// Output format of a custom command.
    pub format: Format,
    /// What the command's leading `NAME=value` words set in the agent's environment.
    pub env: Vec<(String, String)>,
}

/// A ready-to-spawn command.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub program: String,
    pub args: Vec<String>,
    pub stdin: Option<Vec<u8>>,
    pub env_remove: Vec<String>,
    pub env_set: Vec<(String, String)>,
    pub format: Format,
}

/// What of ralph's own environment changes an agent's command: variables
/// ralph sets for the agent unless the person already did. Read once by
/// the caller ([`InheritedEnv::current`]), so that
/// [`Backend::invocation_in`] is a function of its arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InheritedEnv {
    /// `GEMINI_CLI_NO_RELAUNCH` is set: whether gemini relaunches is the person's call.
    pub gemini_no_relaunch: bool,
    /// `CLAUDE_CODE_MAX_RETRIES` is set: how often claude retries is the person's call.
    pub claude_max_retries: bool,
}

impl InheritedEnv {
    /// ralph's environment as it is now.
    pub fn current() -> InheritedEnv {
        InheritedEnv {
            gemini_no_relaunch: std::env::var_os("GEMINI_CLI_NO_RELAUNCH").is_some(),
            claude_max_retries: std::env::var_os("CLAUDE_CODE_MAX_RETRIES").is_some(),
        }
    }
}

/// Why the configured agents cannot be made from the settings: a person
/// fixes the configuration (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigureError {
    #[error(
        "tool custom needs a command: --agent-cmd \"my-agent --flag\" or agent.command in .ralph/config.toml"
    )]
    NoCustomCommand,
    #[error("agent.fallback names {0}, the configured agent (agent.tool): list other agents")]
    FallbackIsTheAgent(Tool),
    #[error("agent.fallback cannot name custom: the custom command is the configured agent's")]
    FallbackIsCustom,
}

/// Why one iteration's command line cannot be made: the agent cannot run
/// with this prompt, which no flag fixes (exit 7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvocationError {
    #[error(
        "the prompt is {bytes} bytes, more than the {max} bytes Linux allows in one argument for {tool}"
    )]
    PromptTooLong { bytes: usize, max: usize, tool: Tool },
}

/// Why the agent cannot start at all, found before the first iteration (exit 7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreflightError {
    #[error("no agent command: pass --tool or --agent-cmd")]
    NoCommand,
    /// `which` has no more to say than "cannot find binary path", which
    /// this says: it is not kept as a cause.
    #[error("agent command `{program}` not found on PATH{install}")]
    NotFound { program: String, install: &'static str },
    #[error(
        "claude refuses --dangerously-skip-permissions when run as root. Either run ralph \
         as a normal user, or, if this machine is a throw-away sandbox or container, set \
         IS_SANDBOX=1, or use safe mode (agent.safe = true in .ralph/config.toml, or --safe)"
    )]
    ClaudeAsRoot,
}

/// claude's own retries of a failed API call when the user set none
/// (`CLAUDE_CODE_MAX_RETRIES`): a few seconds of backoff instead of three minutes.
const CLAUDE_RETRIES: u32 = 3;

/// Variables a parent agent session sets that make a child CLI misbehave
/// (Claude refuses to start "inside another Claude Code session").
const SCRUBBED_ENV: &[&str] = &["CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"];

impl Backend {
    /// The agent the configuration names: a tool (its program possibly
    /// replaced by `agent.command`), or a custom command.
    pub(crate) fn configured(a: &crate::config::AgentConfig) -> Result<Backend, ConfigureError> {
        let mut b = if a.tool == Tool::Custom {
            if a.command.argv.is_empty() {
                return Err(ConfigureError::NoCustomCommand);
            }
            Backend {
                command: a.command.argv.clone(),
                format: a.format,
                ..Backend::new(Tool::Custom)
            }
        } else {
            let mut b = Backend::new(a.tool);
            if !a.command.argv.is_empty() {
                // A named tool with its program replaced (a wrapper, a pinned path).
                b.command = a.command.argv.clone();
            }
            b
        };
        b.env = a.command.env.clone();
        b.model = a.model.clone();
        b.extra_args = a.args.clone();
        b.safe = a.safe;
        if !a.allowed_tools.is_empty() {
            b.allowed_tools = a.allowed_tools.clone();
        }
        Ok(b)
    }

    /// How the run's start names it: "claude (opus)", "custom (my-agent)".
    pub(crate) fn describe(&self) -> String {
        match self.tool {
            Tool::Custom => format!("custom ({})", self.program()),
            t => match &self.model {
                Some(m) => format!("{t} ({m})"),
                None => t.to_string(),
            },
        }
    }

    /// A named tool with its defaults.
    pub fn new(tool: Tool) -> Backend {
        Backend {
            tool,
            command: tool.default_program().map(|p| vec![p.to_string()]).unwrap_or_default(),
            model: None,
            extra_args: Vec::new(),
            safe: false,
            allowed_tools: default_allowed_tools(),
            gate_commands: Vec::new(),
            format: tool.format(),
            env: Vec::new(),
        }
    }

    /// A custom command line (split like a shell splits words); `None`
    /// when it names no program or does not split.
    #[cfg(test)]
    pub fn custom(command: &str, format: Format) -> Option<Backend> {
        let words = super::words::split(command).ok().filter(|w| !w.is_empty())?;
        Some(Backend { command: words, format, ..Backend::new(Tool::Custom) })
    }

    pub fn program(&self) -> &str {
        self.command.first().map(String::as_str).unwrap_or("")
    }

    /// The prompt channel this backend uses.
    pub fn channel(&self) -> PromptChannel {
        match self.tool {
            Tool::Opencode | Tool::Cursor => PromptChannel::Argv,
            Tool::Aider => PromptChannel::File,
            Tool::Custom => {
                if self.command.iter().any(|a| a.contains(PROMPT_FILE_PLACEHOLDER)) {
                    PromptChannel::File
                } else if self.command.iter().any(|a| a.contains(PROMPT_PLACEHOLDER)) {
                    PromptChannel::Argv
                } else {
                    PromptChannel::Stdin
                }
            }
            _ => PromptChannel::Stdin,
        }
    }

    /// The exact command for one iteration. `prompt_file` is where the
    /// prompt is written for the file channel; `env` is what of ralph's
    /// own environment the command depends on, read by the caller. Pure.
    pub fn invocation_in(
        &self,
        prompt: &str,
        prompt_file: &Path,
        env: InheritedEnv,
    ) -> Result<Invocation, InvocationError> {
        let channel = self.channel();
        if channel == PromptChannel::Argv && prompt.len() > MAX_ARGV_PROMPT {
            return Err(InvocationError::PromptTooLong {
                bytes: prompt.len(),
                max: MAX_ARGV_PROMPT,
                tool: self.tool,
            });
        }
        let mut args: Vec<String> = self.command.iter().skip(1).cloned().collect();
        match self.tool {
            Tool::Custom => fill_placeholders(&mut args, prompt, prompt_file),
            _ => args.extend(self.tool_flags()),
        }
        args.extend(self.extra_args.iter().cloned());
        args.extend(self.prompt_args(prompt, prompt_file));
        Ok(Invocation {
            program: self.program().to_string(),
            args,
            stdin: (channel == PromptChannel::Stdin).then(|| prompt.as_bytes().to_vec()),
            env_remove: SCRUBBED_ENV.iter().map(|s| s.to_string()).collect(),
            env_set: self.env_set(env),
            format: self.format,
        })
    }

    /// The flags ralph gives a named tool before the user's `agent.args`:
    /// headless, structured output, the permission mode, the model. One
    /// row per tool; a custom command gets none.
    fn tool_flags(&self) -> Vec<String> {
        match self.tool {
            Tool::Claude => self.claude_flags(),
            Tool::Amp => self.amp_flags(),
            Tool::Codex => self.codex_flags(),
            Tool::Gemini => self.gemini_flags(),
            Tool::Opencode => self.opencode_flags(),
            Tool::Cursor => self.cursor_flags(),
            Tool::Aider => self.aider_flags(),
            Tool::Custom => Vec::new(),
        }
    }

    fn claude_flags(&self) -> Vec<String> {
        // stream-json, not json: a json run prints nothing until it ends,
        // which defeats the idle timeout, and only the stream carries the
        // structured `rate_limit_event`. `-p` with stream-json requires
        // `--verbose`.
        let mut args = strings(&["-p", "--output-format", "stream-json", "--verbose"]);
        if self.safe {
            push(&mut args, &["--permission-mode", "acceptEdits"]);
            let allowed = self.safe_tools();
            if !allowed.is_empty() {
                push(&mut args, &["--allowedTools"]);
                args.extend(allowed);
            }
        } else {
            push(&mut args, &["--dangerously-skip-permissions"]);
        }
        args.extend(self.model_flag());
        args
    }

    fn amp_flags(&self) -> Vec<String> {
        let mut args = Vec::new();
        if !self.safe {
            push(&mut args, &["--dangerously-allow-all"]);
        }
        push(&mut args, &["--stream-json"]);
        args.extend(self.model_flag());
        // Execute mode last, with the message on stdin: a flag right after
        // `-x` would be taken for the message.
        push(&mut args, &["-x"]);
        args
    }

    fn codex_flags(&self) -> Vec<String> {
        let mut args = strings(&["exec", "--json", "--skip-git-repo-check"]);
        if self.safe {
            push(&mut args, &["--sandbox", "workspace-write"]);
        } else {
            push(&mut args, &["--dangerously-bypass-approvals-and-sandbox"]);
        }
        args.extend(self.model_flag());
        args
    }

    fn gemini_flags(&self) -> Vec<String> {
        let mut args = strings(&["--output-format", "stream-json", "--skip-trust"]);
        if self.safe {
            // Headless `auto_edit` alone takes the shell tool away (no
            // tests, no commit); an allow-list of command prefixes gives it
            // back for those commands only, and headless gemini denies
            // every other one.
            push(&mut args, &["--approval-mode=auto_edit"]);
            let allowed: Vec<String> = shell_prefixes(&self.safe_tools())
                .iter()
                .map(|p| format!("run_shell_command({p})"))
                .collect();
            if !allowed.is_empty() {
                args.push(format!("--allowed-tools={}", allowed.join(",")));
            }
        } else {
            push(&mut args, &["--approval-mode=yolo"]);
        }
        args.extend(self.model_flag());
        args
    }

    fn opencode_flags(&self) -> Vec<String> {
        // Its log on stderr is the one place it says what it is retrying:
        // on stdout it is silent until it gives up.
        let mut args = strings(&["run", "--format", "json", "--print-logs", "--log-level", "WARN"]);
        if !self.safe {
            push(&mut args, &["--auto"]);
        }
        args.extend(self.model_flag());
        args
    }

    fn cursor_flags(&self) -> Vec<String> {
        let mut args = strings(&["-p", "--output-format", "stream-json"]);
        if !self.safe {
            push(&mut args, &["--force"]);
        }
        args.extend(self.model_flag());
        args
    }

    fn aider_flags(&self) -> Vec<String> {
        // aider has no safer headless mode than `--yes-always` (it cannot
        // run without answering), and that never runs a shell command the
        // model suggests. Safe mode also keeps the model from suggesting
        // them and aider from fetching the URLs it finds in the prompt or
        // the reply.
        let mut args = strings(&["--yes-always"]);
        if self.safe {
            push(&mut args, &["--no-suggest-shell-commands", "--no-detect-urls"]);
        }
        // `--no-gitignore`: aider would otherwise add `.aider*` to the
        // project's .gitignore; ralph keeps its files out of git through
        // .git/info/exclude instead.
        push(&mut args, &["--no-stream", "--no-pretty", "--no-check-update", "--no-gitignore"]);
        push(&mut args, &["--no-show-release-notes", "--no-analytics", "--no-auto-commits"]);
        args.extend(self.model_flag());
        args
    }

    /// `--model <model>`, when one is set.
    fn model_flag(&self) -> Vec<String> {
        match self.model.as_deref().filter(|m| !m.is_empty()) {
            Some(m) => vec!["--model".into(), m.into()],
            None => Vec::new(),
        }
    }

    /// The prompt's place at the end of the command line, for the tools
    /// that take it there (as the text, or as the file it is in).
    fn prompt_args(&self, prompt: &str, prompt_file: &Path) -> Vec<String> {
        match self.tool {
            Tool::Opencode | Tool::Cursor => vec![prompt.to_string()],
            Tool::Aider => vec!["--message-file".into(), prompt_file.display().to_string()],
            _ => Vec::new(),
        }
    }

    /// What ralph sets in the agent's environment: its defaults for the
    /// CLI (unless the person set them), then the command's own `NAME=value`.
    fn env_set(&self, env: InheritedEnv) -> Vec<(String, String)> {
        let mut env_set = Vec::new();
        if self.tool == Tool::Gemini && !env.gemini_no_relaunch {
            // gemini's launcher ignores SIGTERM and relaunches node as its
            // child; without the relaunch ralph's stop reaches gemini itself.
            env_set.push(("GEMINI_CLI_NO_RELAUNCH".to_string(), "true".to_string()));
        }
        if self.tool == Tool::Opencode && self.safe {
            // opencode allows `bash` by default, `--auto` or not: deny it but
            // for the allowed command prefixes (the last matching rule wins).
            env_set.push(("OPENCODE_PERMISSION".to_string(), self.opencode_permission()));
        }
        if self.tool == Tool::Claude && !env.claude_max_retries {
            // claude retries API errors for about three minutes by default,
            // a 401 included, before it gives up; ralph backs off and
            // classifies itself, so a short inner retry is enough.
            env_set.push(("CLAUDE_CODE_MAX_RETRIES".to_string(), CLAUDE_RETRIES.to_string()));
        }
        env_set.extend(self.env.iter().cloned());
        env_set
    }

    /// Problems that would make every iteration fail, found before the
    /// first one: the program is missing, or claude would refuse to run.
    pub fn preflight(
        &self,
        is_root: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<PathBuf, PreflightError> {
        let program = self.program();
        if program.is_empty() {
            return Err(PreflightError::NoCommand);
        }
        let path = which::which(program).map_err(|_| {
            let install = match self.tool {
                Tool::Claude => " (install it: npm install -g @anthropic-ai/claude-code)",
                Tool::Amp => " (install it: npm install -g @ampcode/cli)",
                Tool::Codex => " (install it: npm install -g @openai/codex)",
                Tool::Gemini => " (install it: npm install -g @google/gemini-cli)",
                Tool::Opencode => " (install it: npm install -g opencode-ai)",
                Tool::Cursor => " (install it: curl https://cursor.com/install -fsS | bash)",
                Tool::Aider => {
                    " (install it: python -m pip install aider-install && aider-install)"
                }
                Tool::Custom => "",
            };
            PreflightError::NotFound { program: program.to_string(), install }
        })?;
        if self.tool == Tool::Claude
            && !self.safe
            && is_root
            && env("IS_SANDBOX").as_deref() != Some("1")
        {
            return Err(PreflightError::ClaudeAsRoot);
        }
        Ok(path)
    }
}

fn push(args: &mut Vec<String>, items: &[&str]) {
    args.extend(items.iter().map(|s| s.to_string()));
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A custom command's `{prompt_file}` and `{prompt}` filled in.
fn fill_placeholders(args: &mut [String], prompt: &str, prompt_file: &Path) {
    let file = prompt_file.display().to_string();
    for a in args {
        if a.contains(PROMPT_FILE_PLACEHOLDER) {
            *a = a.replace(PROMPT_FILE_PLACEHOLDER, &file);
        }
        if a.contains(PROMPT_PLACEHOLDER) {
            *a = a.replace(PROMPT_PLACEHOLDER, prompt);
        }
    }
}

/// Programs a gate may start that would let any command through a prefix
/// rule (`Bash(env:*)` allows `env rm -rf ~`): never allowed for a gate.
/// A `sh -c` gate is looked into instead.
const WRAPPERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "fish", "env", "sudo", "doas", "su", "xargs", "nohup",
    "nice", "ionice", "timeout", "time", "command", "builtin", "busybox", "ssh", "watch", "strace",
    "script", "unbuffer", "stdbuf", "setsid", "chroot", "flock",
];

/// The command prefixes of claude-style `Bash(git commit:*)` rules, for the
/// CLIs whose allow-lists take plain prefixes (gemini, opencode).
fn shell_prefixes(tools: &[String]) -> Vec<String> {
    let mut prefixes: Vec<String> = Vec::new();
    for tool in tools {
        let Some(inner) = tool.strip_prefix("Bash(").and_then(|t| t.strip_suffix(')')) else {
            continue;
        };
        let prefix = inner.strip_suffix(":*").unwrap_or(inner).trim();
        if !prefix.is_empty() && !prefix.contains(',') && !prefixes.iter().any(|p| p == prefix) {
            prefixes.push(prefix.to_string());
        }
    }
    prefixes
}

impl Backend {
    /// The tools safe mode allows: the configured ones and what the gates run.
    fn safe_tools(&self) -> Vec<String> {
        let mut allowed = self.allowed_tools.clone();
        for tool in gate_tools(&self.gate_commands) {
            if !allowed.contains(&tool) {
                allowed.push(tool);
            }
        }
        allowed
    }

    /// `OPENCODE_PERMISSION` for safe mode: `bash` denied except the allowed
    /// prefixes, no web fetches.
    fn opencode_permission(&self) -> String {
        let mut bash = serde_json::Map::new();
        bash.insert("*".into(), "deny".into());
        for prefix in shell_prefixes(&self.safe_tools()) {
            bash.insert(prefix.clone(), "allow".into());
            bash.insert(format!("{prefix} *"), "allow".into());
        }
        serde_json::json!({ "bash": bash, "webfetch": "deny" }).to_string()
    }
}

/// The claude rules that let it run what the gates run: `Bash(python3:*)`
/// for `python3 -m unittest`, each command of a `sh -c` script
/// (`cd tests && uv run pytest` → `Bash(cd:*)`, `Bash(uv:*)`), never a
/// shell or another wrapper that runs whatever follows it ([`WRAPPERS`]).
pub fn gate_tools(gates: &[Vec<String>]) -> Vec<String> {
    let mut tools: Vec<String> = Vec::new();
    for gate in gates {
        let programs = match crate::gate::shell_script(gate) {
            Some(script) => super::words::command_words(script),
            None => gate.first().cloned().into_iter().collect(),
        };
        for program in programs {
            let name = program.rsplit('/').next().unwrap_or(&program);
            let allowed = program == "cd"
                || (super::words::is_plain_program(&program)
                    && !WRAPPERS.contains(&name)
                    && !program.contains(|c: char| c.is_whitespace() || c == '(' || c == ')'));
            let tool = format!("Bash({program}:*)");
            if allowed && !tools.contains(&tool) {
                tools.push(tool);
            }
        }
    }
    tools
}

/// Claude tools allowed in safe mode: edits plus the usual build and VCS
/// commands (Rust, Node, Python, Go, make), and nothing that can reach
/// outside the project by default. The programs the gate runs are added
/// ([`gate_tools`]).
pub fn default_allowed_tools() -> Vec<String> {
    [
        "Read",
        "Write",
        "Edit",
        "MultiEdit",
        "Glob",
        "Grep",
        "TodoWrite",
        "Bash(git add:*)",
        "Bash(git commit:*)",
        "Bash(git status:*)",
        "Bash(git diff:*)",
        "Bash(git log:*)",
        "Bash(cargo:*)",
        "Bash(npm:*)",
        "Bash(npx:*)",
        "Bash(pnpm:*)",
        "Bash(yarn:*)",
        "Bash(node:*)",
        "Bash(pytest:*)",
        "Bash(python:*)",
        "Bash(python3:*)",
        "Bash(uv:*)",
        "Bash(go:*)",
        "Bash(make:*)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[cfg(test)]
mod tests;
