//! The settings table: every key ralph has, with its type, default, the
//! flag that sets it and its help. How a value of each type is checked and
//! parsed is `kind.rs`.

use super::kind::Kind;

/// One setting.
#[derive(Debug)]
pub(crate) struct Key {
    pub(crate) key: &'static str,
    pub(crate) kind: Kind,
    /// The default as TOML text.
    pub(crate) default: &'static str,
    /// The command-line flag that sets it, as typed (`--timeout`; the
    /// positional count is `MAX_ITERATIONS`). `commands::flags` reads each
    /// one; its tests check that every flag named here exists, and that
    /// every flag in `cli::SettingArgs` is named here.
    pub(crate) flag: Option<&'static str>,
    pub(crate) help: &'static str,
}

/// `key!(key, Kind, default, help)`, or `key!(key, Kind, default, flag "--x", help)`.
macro_rules! key {
    ($key:literal, $kind:ident, $default:literal, $help:literal) => {
        Key { key: $key, kind: Kind::$kind, default: $default, flag: None, help: $help }
    };
    ($key:literal, $kind:ident, $default:literal, flag $flag:literal, $help:literal) => {
        Key { key: $key, kind: Kind::$kind, default: $default, flag: Some($flag), help: $help }
    };
}

/// Whether a setting decides what counts as verified — the gate, the
/// breaker, the agent's sandbox — and is therefore read from the run's base
/// rather than the run branch (`oracle::base`).
pub(crate) fn decides_trust(key: &str) -> bool {
    key.starts_with("gate.")
        || key.starts_with("circuit.")
        || key.starts_with("sandbox.")
        || matches!(
            key,
            "agent.safe" | "agent.sandbox" | "agent.allowed_tools" | "agent.args" | "agent.command"
        )
}

/// Every setting ralph has.
pub(crate) const KEYS: &[Key] = &[
    key!(
        "agent.tool",
        Tool,
        "\"claude\"",
        flag "--tool",
        "Agent CLI to run: claude, amp, codex, gemini, opencode, cursor-agent, aider, custom."
    ),
    key!(
        "agent.command",
        AgentCommand,
        "[]",
        flag "--agent-cmd",
        "Command for tool = custom (or to replace a named tool's program), e.g. [\"my-agent\", \"--fast\"]. {prompt} and {prompt_file} place the prompt in argv or a file; otherwise it goes to stdin."
    ),
    key!(
        "agent.fallback",
        Tools,
        "[]",
        flag "--fallback-tool",
        "Agents to go on with, in order, when the configured one meets a usage limit that resets later than limits.fallback_after, e.g. [\"codex\"]. Each runs its own program (found on PATH) with its CLI's defaults: agent.model, agent.args and agent.command are the configured agent's only; agent.safe applies to all. ralph returns to the configured agent once its limit resets."
    ),
    key!(
        "agent.format",
        Format,
        "\"text\"",
        "Output format of a custom command: text, claude, amp, codex, gemini, opencode, cursor."
    ),
    key!(
        "agent.model",
        Str,
        "\"\"",
        flag "--model",
        "Model passed to the agent CLI (--model); empty: the CLI's default."
    ),
    key!("agent.args", List, "[]", "Extra arguments appended to the agent's command line."),
    key!(
        "agent.safe",
        Bool,
        "false",
        flag "--safe",
        "Use the CLI's safer permission mode (e.g. claude --permission-mode acceptEdits --allowedTools, codex --sandbox workspace-write) instead of allowing everything."
    ),
    key!(
        "agent.allowed_tools",
        List,
        "[]",
        "Claude tools allowed in safe mode; empty: ralph's default list (edits, git, common build and test tools: cargo, npm, node, python3, pytest, uv, go, make, …). The programs the gate runs are always added."
    ),
    key!(
        "agent.timeout",
        Duration,
        "\"30m\"",
        flag "--timeout",
        "Wall-clock limit of one iteration's agent run (\"0\": none)."
    ),
    key!(
        "agent.idle_timeout",
        Duration,
        "\"10m\"",
        flag "--idle-timeout",
        "Stop the agent after this long without output (\"0\": never)."
    ),
    key!(
        "agent.grace",
        Duration,
        "\"10s\"",
        "Time between SIGTERM and SIGKILL when stopping the agent."
    ),
    key!(
        "agent.sandbox",
        Sandbox,
        "\"auto\"",
        flag "--sandbox",
        "Confine the agent, the gate and hooks with Linux Landlock: writes only to the work tree, a private TMPDIR and the agent CLI's own state dirs; no reads of credential stores (~/.ssh, ~/.aws, …) or other projects; TCP connects only to 80, 443 and the configured API's port; no signals outside its own processes. auto: on where the kernel has Landlock (unconfined elsewhere, said once); strict: refuse to start without it (exit 7); off: as before. Set it in your own config (~/.config/ralph/config.toml), the environment or the flag: a value in the project's .ralph/config.toml is one the agent could have committed."
    ),
    key!(
        "run.max_iterations",
        Int,
        "10",
        flag "MAX_ITERATIONS",
        "Iterations per run when no number is given on the command line."
    ),
    key!(
        "run.jobs",
        Int,
        "1",
        flag "--jobs",
        "Stories worked at once, each by its own agent in its own git worktree (1: one at a time, in the project itself)."
    ),
    key!("run.pause", Duration, "\"0s\"", flag "--pause", "Pause between iterations."),
    key!(
        "run.require_handoff",
        Bool,
        "true",
        "Expect the agent to write .ralph/handoff.json (false: a missing one is not reported; an invalid one always is)."
    ),
    key!(
        "run.commit_leftovers",
        Bool,
        "true",
        "When a story passes with the agent's work uncommitted, ralph commits it (as feat: <ID> - <title>); false: the story does not count until the agent commits."
    ),
    key!(
        "run.allow_dirty",
        Bool,
        "false",
        flag "--allow-dirty",
        "Start a new run on a work tree with uncommitted changes to tracked files (ralph's own prd.json, progress.txt and .ralph/ aside). Off: ralph refuses (exit 2), so the agent's commits never sweep up a person's edit."
    ),
    key!(
        "run.prompt",
        Str,
        "\"\"",
        flag "--prompt",
        "Prompt template file (default: .ralph/prompt.md if present, else the built-in one)."
    ),
    key!(
        "run.context",
        List,
        "[]",
        "Project files the prompt points the agent to before its story, e.g. [\".ralph/PROMPT.md\", \".ralph/specs/\"]: a project's own instructions, build notes, specs (`ralph import` sets it)."
    ),
    key!(
        "gate.command",
        Command,
        "[]",
        flag "--gate",
        "Verification gate: a story passes only when this passes, e.g. [\"cargo\", \"test\"] or \"cd tests && python3 -m unittest\". An array runs as it is; text runs with `sh -c` when it has shell syntax (&&, ||, ;, |, redirections, $VAR, globs, a leading cd or VAR=…), else it is split into words and run without a shell. A story's \"verify\" is read the same way. Empty: no gate (the agent's word is taken)."
    ),
    key!(
        "gate.timeout",
        Duration,
        "\"10m\"",
        flag "--gate-timeout",
        "Wall-clock limit of one gate run (\"0\": none). A gate that runs out of it on the baseline stops the run."
    ),
    key!(
        "gate.tail_bytes",
        Int,
        "4096",
        "Bytes of the gate's stdout and of its stderr kept for the next prompt."
    ),
    key!(
        "gate.fatal_signatures",
        List,
        "[]",
        "Text in the gate's output that means the environment is broken (not the code), e.g. \"No space left on device\"."
    ),
    key!(
        "gate.protect",
        List,
        "[]",
        "Paths the agent may not change, as globs, besides those always protected (.ralph/**, CI files such as .github/workflows/**, and the files the gate command names: its script, Makefile for make, justfile for just, package.json for npm): e.g. [\"tests/fixtures/**\"]. An iteration that changes one is set back and judged tampered: its story is not verified."
    ),
    key!(
        "gate.require_red",
        Bool,
        "false",
        "Red, then green: a story's own \"verify\" must fail on the run's base (its files before any work) before an agent is paid for the story, and pass after. A story whose check already passes there is set aside as \"check proves nothing\". Checked once per base tree (cached)."
    ),
    key!(
        "gate.baseline",
        Bool,
        "true",
        "Run the gate once before the first iteration (fails fast when it cannot run)."
    ),
    key!(
        "sandbox.read",
        List,
        "[]",
        "More paths the sandboxed agent, gate and hooks may read (\"~/\" is the home), e.g. [\"~/datasets\"]."
    ),
    key!(
        "sandbox.write",
        List,
        "[]",
        "More paths the sandboxed agent, gate and hooks may write: the caches builds need, e.g. [\"~/.cargo\", \"~/.npm\", \"~/.cache/pip\"]."
    ),
    key!(
        "sandbox.net",
        Net,
        "\"ports\"",
        "TCP connects from the sandbox: \"ports\" allows 80, 443, the ports of URLs in the agent's environment and its CLI's config, and sandbox.ports; \"any\" lifts the limit (a test suite that serves on local ports needs it)."
    ),
    key!(
        "sandbox.ports",
        Ports,
        "[]",
        "More TCP ports the sandbox may connect to, e.g. [22, 5432]."
    ),
    key!(
        "circuit.no_progress",
        Int,
        "3",
        "Open the circuit after this many iterations in a row without progress."
    ),
    key!(
        "circuit.same_error",
        Int,
        "5",
        "Open the circuit after the same error this many iterations in a row."
    ),
    key!(
        "circuit.permission_denials",
        Int,
        "2",
        "Open the circuit after permission denials in this many iterations in a row."
    ),
    key!(
        "circuit.failures",
        Int,
        "3",
        "Open the circuit after this many failed agent runs in a row (non-zero exit, error result, timeout)."
    ),
    key!(
        "circuit.cooldown",
        Duration,
        "\"30m\"",
        "An open circuit becomes half-open after this long."
    ),
    key!(
        "circuit.auto_reset",
        Bool,
        "false",
        flag "--auto-reset",
        "Start every run with a closed circuit."
    ),
    key!(
        "limits.calls_per_hour",
        Int,
        "100",
        flag "--calls-per-hour",
        "Agent runs allowed in any 60-minute window (0: no limit)."
    ),
    key!(
        "limits.wait",
        Bool,
        "true",
        flag "--no-wait",
        "Wait out rate and usage limits (false: stop with exit code 4)."
    ),
    key!(
        "limits.max_wait",
        Duration,
        "\"6h\"",
        flag "--max-wait",
        "Longest single wait for a limit; a longer one stops the run with exit code 4."
    ),
    key!(
        "limits.fallback_after",
        Duration,
        "\"10m\"",
        "A usage limit that resets sooner than this (and within limits.max_wait; with --no-wait, none) is waited out; a later one hands the story to the next agent of agent.fallback (if any)."
    ),
    key!(
        "limits.usage_limit_wait",
        Duration,
        "\"60m\"",
        "Wait after a usage limit whose reset time is unknown."
    ),
    key!(
        "patterns.usage_limit",
        List,
        "[]",
        "Extra regular expressions (regex crate syntax; (?i) for any case) that mark a usage-limit message in the agent's error text. Built-in ones cover Claude, Codex, Gemini."
    ),
    key!(
        "patterns.billing",
        List,
        "[]",
        "Extra regexes for out-of-credit messages (stop the run: waiting will not help)."
    ),
    key!("patterns.auth", List, "[]", "Extra regexes for authentication failures (stop the run)."),
    key!(
        "patterns.rate_limit",
        List,
        "[]",
        "Extra regexes for API rate limits (back off and retry)."
    ),
    key!(
        "patterns.overload",
        List,
        "[]",
        "Extra regexes for an overloaded API (back off and retry)."
    ),
    key!(
        "patterns.unreachable",
        List,
        "[]",
        "Extra regexes for an unreachable API (back off and retry)."
    ),
    key!(
        "budget.max_duration",
        Duration,
        "\"0\"",
        flag "--max-duration",
        "Wall clock for the whole run (\"0\": none). No agent starts after it; the running one is stopped."
    ),
    key!(
        "budget.max_cost",
        Float,
        "0",
        flag "--max-cost",
        "USD the agents may report spending in one run (0: no limit)."
    ),
    key!(
        "budget.max_tokens",
        Int,
        "0",
        flag "--max-tokens",
        "Tokens the agents may report using in one run (0: no limit)."
    ),
    key!(
        "worker.remote",
        Str,
        "\"\"",
        "The shared repository `ralph worker` coordinates through (a URL, a path or a remote's name; --remote overrides it)."
    ),
    key!(
        "worker.lease",
        Duration,
        "\"10m\"",
        "How long a `ralph worker` claim holds without being renewed: a dead worker's story is free after it (--lease overrides it)."
    ),
    key!(
        "worker.id",
        Str,
        "\"\"",
        "This worker's name in claims (empty: <host>-<pid>; --id overrides it)."
    ),
    key!(
        "merge.resolve",
        Resolve,
        "\"agent\"",
        "What a parallel run does with a story whose work conflicts with the run branch: \"agent\" runs a resolver agent that merges both stories onto the tip, \"redo\" redoes the story from the new tip."
    ),
    key!(
        "merge.resolver",
        MaybeTool,
        "\"\"",
        "The agent that resolves merge conflicts (\"\": the story's own agent)."
    ),
    key!(
        "merge.attempts",
        Int,
        "3",
        "Merge attempts of a story (resolutions and redos) that may fail before a parallel run gives it up."
    ),
    key!(
        "merge.batch",
        Int,
        "8",
        "Queued stories merged together and gated once (a failing gate is bisected); 1: one at a time."
    ),
    key!(
        "hooks.on_iteration_end",
        Command,
        "[]",
        "Command run after each iteration (RALPH_* variables describe it). A failing hook is logged, never fatal."
    ),
    key!("hooks.on_complete", Command, "[]", "Command run when every story passes."),
    key!("hooks.on_halt", Command, "[]", "Command run when a run stops for any other reason."),
    key!(
        "cost.prices",
        List,
        "[]",
        "Prices for agents that report tokens but no cost: \"MODEL=IN/OUT\" in USD per million input and output tokens (\"*\" for any model), e.g. [\"gpt-5=1.25/10\"]. Costs computed from them are marked as estimates."
    ),
    key!(
        "logs.keep_runs",
        Int,
        "50",
        "Runs whose logs are kept in .git/ralph/logs/ (0: all); the current run's and the last failed run's are always kept."
    ),
    key!(
        "logs.keep_bytes",
        Int,
        "1073741824",
        "Bytes of run logs kept (0: no limit); the oldest runs' logs go first, never the current or last failed run's."
    ),
    key!(
        "logs.max_file_bytes",
        Int,
        "33554432",
        "Bytes one agent or gate log may take (0: no cap): past it, the log keeps its first half and the last half of the rest, with a line saying how much was cut between them."
    ),
    key!(
        "notify.webhook",
        Str,
        "\"\"",
        "A URL that gets each notified event as JSON (the line --json prints). A URL is a secret: set it in the environment (RALPH_NOTIFY_WEBHOOK), or write \"env:VAR\" to name the variable that holds it."
    ),
    key!(
        "notify.slack",
        Str,
        "\"\"",
        "A Slack-compatible incoming webhook URL (from the environment, or \"env:VAR\")."
    ),
    key!(
        "notify.ntfy",
        Str,
        "\"\"",
        "An ntfy topic URL such as https://ntfy.sh/TOPIC (from the environment, or \"env:VAR\")."
    ),
    key!(
        "notify.desktop",
        Bool,
        "false",
        "Desktop notifications through notify-send, where it exists."
    ),
    key!(
        "notify.events",
        List,
        "[\"run_end\", \"blocked\", \"circuit_open\", \"usage_limit_wait\", \"budget\", \"worker_lost\"]",
        "What is notified: run_end, blocked, circuit_open, usage_limit_wait (longer than notify.wait_longer_than), budget (80% spent), worker_lost."
    ),
    key!("notify.webhook_events", List, "[]", "What the webhook gets (empty: notify.events)."),
    key!("notify.slack_events", List, "[]", "What Slack gets (empty: notify.events)."),
    key!("notify.ntfy_events", List, "[]", "What ntfy gets (empty: notify.events)."),
    key!("notify.desktop_events", List, "[]", "What the desktop gets (empty: notify.events)."),
    key!(
        "notify.wait_longer_than",
        Duration,
        "\"30m\"",
        "A usage-limit or back-off wait is notified when it is longer than this."
    ),
    key!(
        "notify.timeout",
        Duration,
        "\"10s\"",
        "Time for one delivery; failures are retried with back-off, and the end of a run waits at most this long for what is still queued."
    ),
    key!(
        "deliver.pr",
        Pr,
        "\"off\"",
        flag "--pr",
        "Pull requests (merge requests on GitLab) for the run's work: off; run (one for the run branch, its description the run's report, opened or updated when the run ends); story (each story that passed pushed as <run branch>-stories/<id> and opened on its own, its description the story's report and acceptance criteria). `ralph deliver` does it for a finished run, and retries a delivery that failed."
    ),
    key!(
        "deliver.forge",
        Forge,
        "\"auto\"",
        "Where pull requests go: auto (github.com, or a host whose name says gitlab), github (also GitHub Enterprise), gitlab."
    ),
    key!(
        "deliver.repo",
        Str,
        "\"\"",
        "The repository on the forge: owner/name on GitHub, the project's path on GitLab (\"\": from the remote's URL)."
    ),
    key!("deliver.remote", Str, "\"origin\"", "The git remote the branches are pushed to."),
    key!(
        "deliver.base",
        Str,
        "\"\"",
        "The branch pull requests are opened against (\"\": the branch the run branch was cut from, else the remote's default branch)."
    ),
    key!(
        "deliver.draft",
        Bool,
        "true",
        "Open pull requests as drafts until their work is verified: a story's until the gate passed on it, the run's until the run ends complete and verified."
    ),
    key!(
        "deliver.stack",
        Bool,
        "false",
        "With deliver.pr = \"story\": each story's pull request against the branch of the story merged before it (the first against deliver.base), so each shows only its own change."
    ),
    key!(
        "deliver.api",
        Str,
        "\"\"",
        "The forge's API for a self-hosted one, e.g. https://ghe.example.com/api/v3 or https://gitlab.example.com/api/v4 (\"\": from the remote's host). The token comes from GH_TOKEN or GITHUB_TOKEN, GITLAB_TOKEN, else `gh auth token` / `glab auth status -t`; it is never written anywhere."
    ),
    key!(
        "deliver.timeout",
        Duration,
        "\"30s\"",
        "Time for one request to the forge. A rate limit the forge says ends within a minute is waited out; a longer one, a refused token or a forge that is down leaves the branches pushed and says to run `ralph deliver`."
    ),
    key!(
        "deliver.reopen_on_close",
        Bool,
        "false",
        "With deliver.pr = \"story\": a story whose pull request a reviewer closed without merging is unfinished again at the next run, the last comment on it its lesson (ralph asks the forge when the run starts)."
    ),
    key!(
        "ui.color",
        Color,
        "\"auto\"",
        flag "--color",
        "Colour: auto, always, never (NO_COLOR is honoured in auto)."
    ),
    key!(
        "ui.progress",
        Progress,
        "\"auto\"",
        flag "--progress",
        "How a run shows its progress: auto (the live display on an interactive terminal, plain lines elsewhere and on CI), plain (timestamped lines, even on a terminal), bar (the live display whenever stdout is a terminal, even on CI or with TERM=dumb)."
    ),
];

/// `agent.idle_timeout` → `RALPH_AGENT_IDLE_TIMEOUT`.
pub(crate) fn env_name(key: &str) -> String {
    format!("RALPH_{}", key.replace('.', "_").to_uppercase())
}

pub(super) fn find(key: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.key == key)
}
