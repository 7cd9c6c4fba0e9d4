//! The settings table: every key ralph has, with its type, default, help
//! and the command-line flag that sets it, declared once in [`settings!`].
//! How a value of each type is checked and parsed is `kind.rs`.

use std::path::PathBuf;

use toml::Value;

use super::kind::Kind;
use super::{Color, Progress};
use crate::agent::Tool;
use crate::cli::{FALLBACK_TOOLS, agent_command, command, duration, usd};

/// One setting.
#[derive(Debug)]
pub(crate) struct Key {
    pub(crate) key: &'static str,
    pub(crate) kind: Kind,
    /// The default as TOML text.
    pub(crate) default: &'static str,
    /// The command-line flag that sets it, as typed (`--timeout`; the
    /// positional count is `MAX_ITERATIONS`): the flag declared in its row,
    /// which a test checks against what clap made of it.
    pub(crate) flag: Option<&'static str>,
    pub(crate) help: &'static str,
}

/// The settings table. A row is
///
/// ```text
/// Name = "section.key", Kind, "default as TOML", "help";
/// ```
///
/// and a setting that a flag sets goes on with the flag, as typed, its
/// field and the field's clap declaration (its doc comment is its `--help`
/// line):
///
/// ```text
/// Name = "section.key", Kind, "default", "help",
///     flag "--flag" field: Option<String> { /// help line  #[arg(long, …)] };
/// ```
///
/// From one row come the key's [`Setting`], its [`KEYS`] row (and with it
/// validation, the environment variable, `config show`, the template and
/// the docs), and for a flag the field of [`SettingArgs`] (the run
/// options) — or, written `global flag`, of [`GlobalSettingArgs`] (the
/// global options), or `display flag`, of [`DisplaySettingArgs`] (a run's
/// display options) — and the value it puts on the key ([`given`], by the
/// field's [`FlagValue`]; a `bool` flag sets `true`, or what follows `=`
/// after its type).
///
/// `display_order` keeps `--help` listing the run options in the order
/// people know, which is not the table's: the display options come first
/// (clap's own order, below 100), then the setting flags (100 and up, a new
/// one takes the next number), then the run's other options (200 and up,
/// `cli::RunArgs`).
macro_rules! settings {
    ($(
        $id:ident = $key:literal, $kind:ident, $default:literal, $help:literal
        $(, flag $flag:literal $field:ident: $fty:ty $(= $when:literal)? { $(#[$fattr:meta])* })?
        $(, global flag $gflag:literal $gfield:ident: $gty:ty { $(#[$gattr:meta])* })?
        $(, display flag $dflag:literal $dfield:ident: $dty:ty { $(#[$dattr:meta])* })?
    ;)*) => {
        /// One setting: `Setting::X as usize` is its row of [`KEYS`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Setting {
            $($id,)*
        }

        impl Setting {
            /// Every setting, in the table's order.
            pub(crate) const ALL: &[Setting] = &[$(Setting::$id),*];
        }

        /// Every setting ralph has.
        pub(crate) const KEYS: &[Key] = &[$(
            Key {
                key: $key,
                kind: Kind::$kind,
                default: $default,
                flag: settings!(@flag $($flag)? $($gflag)? $($dflag)?),
                help: $help,
            },
        )*];

        /// Run options that set a configuration key, each declared in its
        /// row of the table, so `config show` names it as the value's source.
        #[derive(Debug, clap::Args, Clone, Default, PartialEq)]
        #[command(next_help_heading = "Run options")]
        pub(crate) struct SettingArgs {
            $($($(#[$fattr])* pub(crate) $field: $fty,)?)*
        }

        /// The global options that set a configuration key.
        #[derive(Debug, clap::Args, Clone, Default)]
        pub(crate) struct GlobalSettingArgs {
            $($($(#[$gattr])* pub(crate) $gfield: $gty,)?)*
        }

        /// The display options of a run (`cli::Display`) that set a
        /// configuration key.
        #[derive(Debug, clap::Args, Clone, Default, PartialEq)]
        pub(crate) struct DisplaySettingArgs {
            $($($(#[$dattr])* pub(crate) $dfield: $dty,)?)*
        }

        /// Each setting flag that was given, in the table's order: its
        /// setting, the flag as typed and the value it gives the key.
        pub(crate) fn given(
            g: &GlobalSettingArgs,
            d: &DisplaySettingArgs,
            s: &SettingArgs,
        ) -> Vec<(Setting, &'static str, Value)> {
            let mut out = Vec::new();
            $(
                $(if let Some(v) = settings!(@value s.$field $(, $when)?) {
                    out.push((Setting::$id, $flag, v));
                })?
                $(if let Some(v) = FlagValue::given(&g.$gfield) {
                    out.push((Setting::$id, $gflag, v));
                })?
                $(if let Some(v) = FlagValue::given(&d.$dfield) {
                    out.push((Setting::$id, $dflag, v));
                })?
            )*
            out
        }
    };
    (@flag) => { None };
    (@flag $flag:literal) => { Some($flag) };
    (@value $field:expr) => { FlagValue::given(&$field) };
    (@value $field:expr, $when:literal) => { $field.then_some(Value::Boolean($when)) };
}

impl Setting {
    /// Its row of the table.
    pub(crate) fn key(self) -> &'static Key {
        &KEYS[self as usize]
    }

    /// The setting of a key as written (`agent.timeout`).
    pub(crate) fn find(key: &str) -> Option<Setting> {
        Setting::ALL.iter().copied().find(|s| s.key().key == key)
    }
}

/// What a setting flag's field says, as a value of its key; `None` when the
/// flag was not given. Values are already checked by clap; `Layers::flag`
/// checks them against the key's type once more.
pub(crate) trait FlagValue {
    fn given(&self) -> Option<Value>;
}

impl FlagValue for bool {
    fn given(&self) -> Option<Value> {
        self.then_some(Value::Boolean(true))
    }
}

impl FlagValue for Option<String> {
    fn given(&self) -> Option<Value> {
        self.as_deref().map(|t| Value::String(t.into()))
    }
}

impl FlagValue for Option<PathBuf> {
    fn given(&self) -> Option<Value> {
        self.as_ref().map(|p| Value::String(p.display().to_string()))
    }
}

impl FlagValue for Option<u32> {
    fn given(&self) -> Option<Value> {
        self.map(|n| Value::Integer(n.into()))
    }
}

impl FlagValue for Option<u64> {
    fn given(&self) -> Option<Value> {
        self.map(|n| Value::Integer(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}

impl FlagValue for Option<f64> {
    fn given(&self) -> Option<Value> {
        self.map(Value::Float)
    }
}

/// A list flag, given once or more.
impl FlagValue for Vec<String> {
    fn given(&self) -> Option<Value> {
        (!self.is_empty()).then(|| Value::Array(self.iter().cloned().map(Value::String).collect()))
    }
}

impl FlagValue for Option<Tool> {
    fn given(&self) -> Option<Value> {
        self.map(|t| Value::String(t.name().into()))
    }
}

impl FlagValue for Option<Color> {
    fn given(&self) -> Option<Value> {
        self.map(|c| Value::String(c.name().into()))
    }
}

impl FlagValue for Option<Progress> {
    fn given(&self) -> Option<Value> {
        self.map(|p| Value::String(p.name().into()))
    }
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

settings! {
    AgentTool = "agent.tool", Tool, "\"claude\"",
        "Agent CLI to run: claude, amp, codex, gemini, opencode, cursor-agent, aider, custom.",
        flag "--tool" tool: Option<Tool> {
            /// Agent CLI to drive
            #[arg(long, value_enum, value_name = "TOOL", display_order = 100)]
        };
    AgentCommand = "agent.command", AgentCommand, "[]",
        "Command for tool = custom (or to replace a named tool's program), e.g. [\"my-agent\", \"--fast\"]. {prompt} and {prompt_file} place the prompt in argv or a file; otherwise it goes to stdin.",
        flag "--agent-cmd" agent_cmd: Option<String> {
            /// Any other agent command (split like a shell splits words, never run by one);
            /// {prompt} / {prompt_file} put the prompt in argv / a file, else it goes to stdin
            #[arg(long, value_name = "COMMAND", value_parser = agent_command, display_order = 102)]
        };
    AgentFallback = "agent.fallback", Tools, "[]",
        "Agents to go on with, in order, when the configured one meets a usage limit that resets later than limits.fallback_after, e.g. [\"codex\"]. Each runs its own program (found on PATH) with its CLI's defaults: agent.model, agent.args and agent.command are the configured agent's only; agent.safe applies to all. ralph returns to the configured agent once its limit resets.",
        flag "--fallback-tool" fallback_tool: Vec<String> {
            /// Agent to go on with when the configured one meets a usage limit that resets later
            /// than limits.fallback_after (repeat it, or give a comma list, for more than one)
            #[arg(long, value_delimiter = ',', value_name = "TOOL", value_parser = FALLBACK_TOOLS)]
            #[arg(display_order = 101)]
        };
    AgentFormat = "agent.format", Format, "\"text\"",
        "Output format of a custom command: text, claude, amp, codex, gemini, opencode, cursor.";
    AgentModel = "agent.model", Str, "\"\"",
        "Model passed to the agent CLI (--model); empty: the CLI's default.",
        flag "--model" model: Option<String> {
            /// Model for the agent CLI (passed as --model)
            #[arg(long, value_name = "MODEL", display_order = 103)]
        };
    AgentArgs = "agent.args", List, "[]",
        "Extra arguments appended to the agent's command line.";
    AgentSafe = "agent.safe", Bool, "false",
        "Use the CLI's safer permission mode (e.g. claude --permission-mode acceptEdits --allowedTools, codex --sandbox workspace-write) instead of allowing everything.",
        flag "--safe" safe: bool {
            /// Use the agent CLI's safer permission mode instead of "allow everything"
            #[arg(long, display_order = 104)]
        };
    AgentAllowedTools = "agent.allowed_tools", List, "[]",
        "Claude tools allowed in safe mode; empty: ralph's default list (edits, git, common build and test tools: cargo, npm, node, python3, pytest, uv, go, make, …). The programs the gate runs are always added.";
    AgentTimeout = "agent.timeout", Duration, "\"30m\"",
        "Wall-clock limit of one iteration's agent run (\"0\": none).",
        flag "--timeout" timeout: Option<String> {
            /// Wall-clock limit per iteration; 0 = none [default: 30m]
            #[arg(long, value_name = "DURATION", value_parser = duration, display_order = 108)]
        };
    AgentIdleTimeout = "agent.idle_timeout", Duration, "\"10m\"",
        "Stop the agent after this long without output (\"0\": never).",
        flag "--idle-timeout" idle_timeout: Option<String> {
            /// Stop the agent after this long without output; 0 = never [default: 10m]
            #[arg(long, value_name = "DURATION", value_parser = duration, display_order = 109)]
        };
    AgentGrace = "agent.grace", Duration, "\"10s\"",
        "Time between SIGTERM and SIGKILL when stopping the agent.";
    AgentSandbox = "agent.sandbox", Sandbox, "\"auto\"",
        "Confine the agent, the gate and hooks with Linux Landlock: writes only to the work tree, a private TMPDIR and the agent CLI's own state dirs; no reads of credential stores (~/.ssh, ~/.aws, …) or other projects; TCP connects only to 80, 443 and the configured API's port; no signals outside its own processes. auto: on where the kernel has Landlock (unconfined elsewhere, said once); strict: refuse to start without it (exit 7); off: as before. Set it in your own config (~/.config/ralph/config.toml), the environment or the flag: a value in the project's .ralph/config.toml is one the agent could have committed.",
        flag "--sandbox" sandbox: Option<String> {
            /// Confine the agent, gate and hooks with Landlock: auto (where the kernel has it),
            /// strict (refuse to start without it) or off [default: auto]
            #[arg(long, value_name = "MODE", value_parser = ["auto", "strict", "off"])]
            #[arg(display_order = 105)]
        };
    RunMaxIterations = "run.max_iterations", Int, "10",
        "Iterations per run when no number is given on the command line.",
        flag "MAX_ITERATIONS" max_iterations: Option<u32> {
            /// Most iterations to run [default: 10, or run.max_iterations]
            #[arg(value_name = "MAX_ITERATIONS")]
            #[arg(value_parser = clap::value_parser!(u32).range(1..))]
        };
    RunJobs = "run.jobs", Int, "1",
        "Stories worked at once, each by its own agent in its own git worktree (1: one at a time, in the project itself).",
        flag "--jobs" jobs: Option<u32> {
            /// Stories to work at once, each in its own git worktree [default: 1]
            #[arg(long, short = 'j', value_name = "N", display_order = 110)]
            #[arg(value_parser = clap::value_parser!(u32).range(1..=64))]
        };
    RunPause = "run.pause", Duration, "\"0s\"",
        "Pause between iterations.",
        flag "--pause" pause: Option<String> {
            /// Pause between iterations [default: 0s]
            #[arg(long, value_name = "DURATION", value_parser = duration, display_order = 111)]
        };
    RunRequireHandoff = "run.require_handoff", Bool, "true",
        "Expect the agent to write .ralph/handoff.json (false: a missing one is not reported; an invalid one always is).";
    RunCommitLeftovers = "run.commit_leftovers", Bool, "true",
        "When a story passes with the agent's work uncommitted, ralph commits it (as feat: <ID> - <title>); false: the story does not count until the agent commits.";
    RunAllowDirty = "run.allow_dirty", Bool, "false",
        "Start a new run on a work tree with uncommitted changes to tracked files (ralph's own prd.json, progress.txt and .ralph/ aside). Off: ralph refuses (exit 2), so the agent's commits never sweep up a person's edit.",
        flag "--allow-dirty" allow_dirty: bool {
            /// Start a new run even over uncommitted changes to tracked files
            #[arg(long, display_order = 120)]
        };
    RunPrompt = "run.prompt", Str, "\"\"",
        "Prompt template file (default: .ralph/prompt.md if present, else the built-in one).",
        flag "--prompt" prompt: Option<PathBuf> {
            /// Prompt template (default: .ralph/prompt.md, else the built-in one)
            #[arg(long, value_name = "FILE", display_order = 112)]
        };
    RunContext = "run.context", List, "[]",
        "Project files the prompt points the agent to before its story, e.g. [\".ralph/PROMPT.md\", \".ralph/specs/\"]: a project's own instructions, build notes, specs (`ralph import` sets it).";
    GateCommand = "gate.command", Command, "[]",
        "Verification gate: a story passes only when this passes, e.g. [\"cargo\", \"test\"] or \"cd tests && python3 -m unittest\". An array runs as it is; text runs with `sh -c` when it has shell syntax (&&, ||, ;, |, redirections, $VAR, globs, a leading cd or VAR=…), else it is split into words and run without a shell. A story's \"verify\" is read the same way. Empty: no gate (the agent's word is taken).",
        flag "--gate" gate: Option<String> {
            /// Verification gate: a story passes only when this command passes (shell syntax such as
            /// "cd tests && pytest" runs it with sh -c)
            #[arg(long, value_name = "COMMAND", value_parser = command, display_order = 106)]
        };
    GateTimeout = "gate.timeout", Duration, "\"10m\"",
        "Wall-clock limit of one gate run (\"0\": none). A gate that runs out of it on the baseline stops the run.",
        flag "--gate-timeout" gate_timeout: Option<String> {
            /// Wall-clock limit of one gate run; 0 = none [default: 10m]
            #[arg(long, value_name = "DURATION", value_parser = duration, display_order = 107)]
        };
    GateTailBytes = "gate.tail_bytes", Int, "4096",
        "Bytes of the gate's stdout and of its stderr kept for the next prompt.";
    GateFatalSignatures = "gate.fatal_signatures", List, "[]",
        "Text in the gate's output that means the environment is broken (not the code), e.g. \"No space left on device\".";
    GateProtect = "gate.protect", List, "[]",
        "Paths the agent may not change, as globs, besides those always protected (.ralph/**, CI files such as .github/workflows/**, and the files the gate command names: its script, Makefile for make, justfile for just, package.json for npm): e.g. [\"tests/fixtures/**\"]. An iteration that changes one is set back and judged tampered: its story is not verified.";
    GateRequireRed = "gate.require_red", Bool, "false",
        "Red, then green: a story's own \"verify\" must fail on the run's base (its files before any work) before an agent is paid for the story, and pass after. A story whose check already passes there is set aside as \"check proves nothing\". Checked once per base tree (cached).";
    GateBaseline = "gate.baseline", Bool, "true",
        "Run the gate once before the first iteration (fails fast when it cannot run).";
    SandboxRead = "sandbox.read", List, "[]",
        "More paths the sandboxed agent, gate and hooks may read (\"~/\" is the home), e.g. [\"~/datasets\"].";
    SandboxWrite = "sandbox.write", List, "[]",
        "More paths the sandboxed agent, gate and hooks may write: the caches builds need, e.g. [\"~/.cargo\", \"~/.npm\", \"~/.cache/pip\"].";
    SandboxNet = "sandbox.net", Net, "\"ports\"",
        "TCP connects from the sandbox: \"ports\" allows 80, 443, the ports of URLs in the agent's environment and its CLI's config, and sandbox.ports; \"any\" lifts the limit (a test suite that serves on local ports needs it).";
    SandboxPorts = "sandbox.ports", Ports, "[]",
        "More TCP ports the sandbox may connect to, e.g. [22, 5432].";
    CircuitNoProgress = "circuit.no_progress", Int, "3",
        "Open the circuit after this many iterations in a row without progress.";
    CircuitSameError = "circuit.same_error", Int, "5",
        "Open the circuit after the same error this many iterations in a row.";
    CircuitPermissionDenials = "circuit.permission_denials", Int, "2",
        "Open the circuit after permission denials in this many iterations in a row.";
    CircuitFailures = "circuit.failures", Int, "3",
        "Open the circuit after this many failed agent runs in a row (non-zero exit, error result, timeout).";
    CircuitCooldown = "circuit.cooldown", Duration, "\"30m\"",
        "An open circuit becomes half-open after this long.";
    CircuitAutoReset = "circuit.auto_reset", Bool, "false",
        "Start every run with a closed circuit.",
        flag "--auto-reset" auto_reset: bool {
            /// Start with a closed circuit breaker, whatever state it was left in
            #[arg(long, alias = "auto-reset-circuit", display_order = 119)]
        };
    LimitsCallsPerHour = "limits.calls_per_hour", Int, "100",
        "Agent runs allowed in any 60-minute window (0: no limit).",
        flag "--calls-per-hour" calls_per_hour: Option<u32> {
            /// Agent runs allowed per hour; 0 = no limit [default: 100]
            #[arg(long, alias = "calls", value_name = "N", display_order = 116)]
        };
    LimitsWait = "limits.wait", Bool, "true",
        "Wait out rate and usage limits (false: stop with exit code 4).",
        flag "--no-wait" no_wait: bool = false {
            /// Stop (exit 4) at a rate or usage limit instead of waiting it out
            #[arg(long, display_order = 117)]
        };
    LimitsMaxWait = "limits.max_wait", Duration, "\"6h\"",
        "Longest single wait for a limit; a longer one stops the run with exit code 4.",
        flag "--max-wait" max_wait: Option<String> {
            /// Longest wait for a limit before stopping with exit 4 [default: 6h]
            #[arg(long, value_name = "DURATION", value_parser = duration, display_order = 118)]
        };
    LimitsFallbackAfter = "limits.fallback_after", Duration, "\"10m\"",
        "A usage limit that resets sooner than this (and within limits.max_wait; with --no-wait, none) is waited out; a later one hands the story to the next agent of agent.fallback (if any).";
    LimitsUsageLimitWait = "limits.usage_limit_wait", Duration, "\"60m\"",
        "Wait after a usage limit whose reset time is unknown.";
    PatternsUsageLimit = "patterns.usage_limit", List, "[]",
        "Extra regular expressions (regex crate syntax; (?i) for any case) that mark a usage-limit message in the agent's error text. Built-in ones cover Claude, Codex, Gemini.";
    PatternsBilling = "patterns.billing", List, "[]",
        "Extra regexes for out-of-credit messages (stop the run: waiting will not help).";
    PatternsAuth = "patterns.auth", List, "[]",
        "Extra regexes for authentication failures (stop the run).";
    PatternsRateLimit = "patterns.rate_limit", List, "[]",
        "Extra regexes for API rate limits (back off and retry).";
    PatternsOverload = "patterns.overload", List, "[]",
        "Extra regexes for an overloaded API (back off and retry).";
    PatternsUnreachable = "patterns.unreachable", List, "[]",
        "Extra regexes for an unreachable API (back off and retry).";
    BudgetMaxDuration = "budget.max_duration", Duration, "\"0\"",
        "Wall clock for the whole run (\"0\": none). No agent starts after it; the running one is stopped.",
        flag "--max-duration" max_duration: Option<String> {
            /// Wall clock for the whole run
            #[arg(long, value_name = "DURATION", value_parser = duration, display_order = 113)]
        };
    BudgetMaxCost = "budget.max_cost", Float, "0",
        "USD the agents may report spending in one run (0: no limit).",
        flag "--max-cost" max_cost: Option<f64> {
            /// Stop once the agents report spending this many USD
            #[arg(long, value_name = "USD", value_parser = usd, display_order = 114)]
        };
    BudgetMaxTokens = "budget.max_tokens", Int, "0",
        "Tokens the agents may report using in one run (0: no limit).",
        flag "--max-tokens" max_tokens: Option<u64> {
            /// Stop once the agents report using this many tokens
            #[arg(long, value_name = "TOKENS", display_order = 115)]
        };
    WorkerRemote = "worker.remote", Str, "\"\"",
        "The shared repository `ralph worker` coordinates through (a URL, a path or a remote's name; --remote overrides it).";
    WorkerLease = "worker.lease", Duration, "\"10m\"",
        "How long a `ralph worker` claim holds without being renewed: a dead worker's story is free after it (--lease overrides it).";
    WorkerId = "worker.id", Str, "\"\"",
        "This worker's name in claims (empty: <host>-<pid>; --id overrides it).";
    MergeResolve = "merge.resolve", Resolve, "\"agent\"",
        "What a parallel run does with a story whose work conflicts with the run branch: \"agent\" runs a resolver agent that merges both stories onto the tip, \"redo\" redoes the story from the new tip.";
    MergeResolver = "merge.resolver", MaybeTool, "\"\"",
        "The agent that resolves merge conflicts (\"\": the story's own agent).";
    MergeAttempts = "merge.attempts", Int, "3",
        "Merge attempts of a story (resolutions and redos) that may fail before a parallel run gives it up.";
    MergeBatch = "merge.batch", Int, "8",
        "Queued stories merged together and gated once (a failing gate is bisected); 1: one at a time.";
    HooksOnIterationEnd = "hooks.on_iteration_end", Command, "[]",
        "Command run after each iteration (RALPH_* variables describe it). A failing hook is logged, never fatal.";
    HooksOnComplete = "hooks.on_complete", Command, "[]",
        "Command run when every story passes.";
    HooksOnHalt = "hooks.on_halt", Command, "[]",
        "Command run when a run stops for any other reason.";
    CostPrices = "cost.prices", List, "[]",
        "Prices for agents that report tokens but no cost: \"MODEL=IN/OUT\" in USD per million input and output tokens (\"*\" for any model), e.g. [\"gpt-5=1.25/10\"]. Costs computed from them are marked as estimates.";
    LogsKeepRuns = "logs.keep_runs", Int, "50",
        "Runs whose logs are kept in .git/ralph/logs/ (0: all); the current run's and the last failed run's are always kept.";
    LogsKeepBytes = "logs.keep_bytes", Int, "1073741824",
        "Bytes of run logs kept (0: no limit); the oldest runs' logs go first, never the current or last failed run's.";
    LogsMaxFileBytes = "logs.max_file_bytes", Int, "33554432",
        "Bytes one agent or gate log may take (0: no cap): past it, the log keeps its first half and the last half of the rest, with a line saying how much was cut between them.";
    NotifyWebhook = "notify.webhook", Str, "\"\"",
        "A URL that gets each notified event as JSON (the line --json prints). A URL is a secret: set it in the environment (RALPH_NOTIFY_WEBHOOK), or write \"env:VAR\" to name the variable that holds it.";
    NotifySlack = "notify.slack", Str, "\"\"",
        "A Slack-compatible incoming webhook URL (from the environment, or \"env:VAR\").";
    NotifyNtfy = "notify.ntfy", Str, "\"\"",
        "An ntfy topic URL such as https://ntfy.sh/TOPIC (from the environment, or \"env:VAR\").";
    NotifyDesktop = "notify.desktop", Bool, "false",
        "Desktop notifications through notify-send, where it exists.";
    NotifyEvents = "notify.events", List, "[\"run_end\", \"blocked\", \"circuit_open\", \"usage_limit_wait\", \"budget\", \"worker_lost\"]",
        "What is notified: run_end, blocked, circuit_open, usage_limit_wait (longer than notify.wait_longer_than), budget (80% spent), worker_lost.";
    NotifyWebhookEvents = "notify.webhook_events", List, "[]",
        "What the webhook gets (empty: notify.events).";
    NotifySlackEvents = "notify.slack_events", List, "[]",
        "What Slack gets (empty: notify.events).";
    NotifyNtfyEvents = "notify.ntfy_events", List, "[]",
        "What ntfy gets (empty: notify.events).";
    NotifyDesktopEvents = "notify.desktop_events", List, "[]",
        "What the desktop gets (empty: notify.events).";
    NotifyWaitLongerThan = "notify.wait_longer_than", Duration, "\"30m\"",
        "A usage-limit or back-off wait is notified when it is longer than this.";
    NotifyTimeout = "notify.timeout", Duration, "\"10s\"",
        "Time for one delivery; failures are retried with back-off, and the end of a run waits at most this long for what is still queued.";
    DeliverPr = "deliver.pr", Pr, "\"off\"",
        "Pull requests (merge requests on GitLab) for the run's work: off; run (one for the run branch, its description the run's report, opened or updated when the run ends); story (each story that passed pushed as <run branch>-stories/<id> and opened on its own, its description the story's report and acceptance criteria). `ralph deliver` does it for a finished run, and retries a delivery that failed.",
        flag "--pr" pr: Option<String> {
            /// Open pull requests when the run ends: one for the run (--pr, --pr=run), one per
            /// story (--pr=story), or none (--pr=off) [default: off]
            #[arg(
                long,
                value_name = "MODE",
                num_args = 0..=1,
                require_equals = true,
                default_missing_value = "run",
                value_parser = ["off", "run", "story"],
                display_order = 121
            )]
        };
    DeliverForge = "deliver.forge", Forge, "\"auto\"",
        "Where pull requests go: auto (github.com, or a host whose name says gitlab), github (also GitHub Enterprise), gitlab.";
    DeliverRepo = "deliver.repo", Str, "\"\"",
        "The repository on the forge: owner/name on GitHub, the project's path on GitLab (\"\": from the remote's URL).";
    DeliverRemote = "deliver.remote", Str, "\"origin\"",
        "The git remote the branches are pushed to.";
    DeliverBase = "deliver.base", Str, "\"\"",
        "The branch pull requests are opened against (\"\": the branch the run branch was cut from, else the remote's default branch).";
    DeliverDraft = "deliver.draft", Bool, "true",
        "Open pull requests as drafts until their work is verified: a story's until the gate passed on it, the run's until the run ends complete and verified.";
    DeliverStack = "deliver.stack", Bool, "false",
        "With deliver.pr = \"story\": each story's pull request against the branch of the story merged before it (the first against deliver.base), so each shows only its own change.";
    DeliverApi = "deliver.api", Str, "\"\"",
        "The forge's API for a self-hosted one, e.g. https://ghe.example.com/api/v3 or https://gitlab.example.com/api/v4 (\"\": from the remote's host). The token comes from GH_TOKEN or GITHUB_TOKEN, GITLAB_TOKEN, else `gh auth token` / `glab auth status -t`; it is never written anywhere.";
    DeliverTimeout = "deliver.timeout", Duration, "\"30s\"",
        "Time for one request to the forge. A rate limit the forge says ends within a minute is waited out; a longer one, a refused token or a forge that is down leaves the branches pushed and says to run `ralph deliver`.";
    DeliverReopenOnClose = "deliver.reopen_on_close", Bool, "false",
        "With deliver.pr = \"story\": a story whose pull request a reviewer closed without merging is unfinished again at the next run, the last comment on it its lesson (ralph asks the forge when the run starts).";
    UiColor = "ui.color", Color, "\"auto\"",
        "Colour: auto, always, never (NO_COLOR is honoured in auto).",
        global flag "--color" color: Option<Color> {
            /// When to use colour; auto: when stdout is a terminal and NO_COLOR is unset
            #[arg(long, global = true, value_enum, value_name = "WHEN")]
        };
    UiProgress = "ui.progress", Progress, "\"auto\"",
        "How a run shows its progress: auto (the live display on an interactive terminal, plain lines elsewhere and on CI), plain (timestamped lines, even on a terminal), bar (the live display whenever stdout is a terminal, even on CI or with TERM=dumb).",
        display flag "--progress" progress: Option<Progress> {
            /// How a run shows progress; plain: timestamped lines even on a terminal [default: auto]
            #[arg(long, value_enum, value_name = "HOW")]
        };
}

/// `agent.idle_timeout` → `RALPH_AGENT_IDLE_TIMEOUT`.
pub(crate) fn env_name(key: &str) -> String {
    format!("RALPH_{}", key.replace('.', "_").to_uppercase())
}
