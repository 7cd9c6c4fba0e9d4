//! The settings table: every key ralph has, with its type, default, help,
//! the field of [`Config`] it becomes and the command-line flag that sets
//! it, declared once in [`settings!`]. How a value of each type is checked
//! and parsed is `kind.rs`; how it becomes its field's Rust type is
//! `resolve.rs`.

use std::path::PathBuf;
use std::time::Duration;

use toml::Value;

use super::kind::Kind;
use super::resolve::{
    FromSetting, at_least_one, gate_argv, gate_source, ignored, or_default, sandbox_mode,
};
use super::{Color, Ignored, Layers, Progress};
use crate::agent::Tool;
use crate::agent::words::AgentCommand;
use crate::analyze::Format;
use crate::cli::{FALLBACK_TOOLS, agent_command, command, duration, usd};
use crate::deliver::PrMode;
use crate::deliver::target::ForgeSetting;
use crate::driver::ResolveMode;
use crate::sandbox::Net;

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

/// A setting flag written `flag #N` is the Nth of the setting flags in
/// `--help`: its `display_order` is this plus N. The display options come
/// first (clap's own order, below 100), then the setting flags (100 and up),
/// then the run's other options (200 and up, `cli::RunArgs`).
const FLAG_ORDER: usize = 99;

/// The settings table, one block per section of the configuration file
/// (and field of [`Config`]). A row is
///
/// ```text
/// Name = "section.key", Kind, "default as TOML", "help",
///     field name: RustType;
/// ```
///
/// `field` names the row's field of its section's struct and its Rust type;
/// the value is read into it by the type's [`FromSetting`], or, written
/// `field name: RustType = function`, by `function(&Layers, Setting)` (in
/// `resolve.rs`) where the type alone does not say how. A setting that a
/// flag sets goes on with the flag, as typed, its place in `--help`, its
/// field and the field's clap declaration (its doc comment is its `--help`
/// line):
///
/// ```text
/// Name = "section.key", Kind, "default", "help",
///     field name: RustType,
///     flag #3 "--flag" field: Option<String> { /// help line  #[arg(long, …)] };
/// ```
///
/// A section is `name: struct NameConfig { rows }` when its struct is made
/// here, or `name: use path::To { rows }` when another module owns it (its
/// fields are still set here, and the compiler insists on every one). A
/// field that is not one setting's value is written after the rows as
/// `+ name: Type = function;`, `function(&Layers)` in `resolve.rs`; the
/// fields of [`Config`] itself that are none, after the sections, as
/// `+ Config { name: Type = function; }`. A row without `field` is read
/// by such a function (`agent.sandbox`, the sandbox's `mode`); a test
/// fails for a setting that reaches no field.
///
/// From one row come the key's [`Setting`], its [`KEYS`] row (and with it
/// validation, the environment variable, `config show`, the template and
/// the docs), its field of [`Config`] and how [`Layers::resolve`] fills it,
/// and for a flag the field of [`SettingArgs`] (the run options) — or,
/// written `global flag`, of [`GlobalSettingArgs`] (the global options), or
/// `display flag`, of [`DisplaySettingArgs`] (a run's display options) —
/// and the value it puts on the key ([`given`], by the field's
/// [`FlagValue`]; a `bool` flag sets `true`, or what follows `=` after its
/// type).
///
/// `flag #N` keeps `--help` listing the run options in the order people
/// know, which is not the table's (the table's is the configuration
/// file's): every flag but the positional count has one, 1..N each once
/// (a test in `commands/flags.rs` says so), and a new one takes N+1 or
/// moves those after it.
macro_rules! settings {
    ($(
        $(#[$sattr:meta])*
        $section:ident: $(struct $owned:ident)? $(use $foreign:path)? {
            $(
                $id:ident = $key:literal, $kind:ident, $default:literal, $help:literal
                $(, field $field:ident: $fty:ty $(= $read:path)?)?
                $(, flag $(#$rank:literal)? $flag:literal $ffield:ident: $ffty:ty
                    $(= $when:literal)? { $(#[$fattr:meta])* })?
                $(, global flag $gflag:literal $gfield:ident: $gty:ty { $(#[$gattr:meta])* })?
                $(, display flag $dflag:literal $dfield:ident: $dty:ty { $(#[$dattr:meta])* })?
            ;)*
            $($(#[$xattr:meta])* + $xfield:ident: $xty:ty = $xread:path;)*
        }
    )*
    + Config { $($(#[$cattr:meta])* $cfield:ident: $cty:ty = $cread:path;)* }
    ) => {
        /// One setting: `Setting::X as usize` is its row of [`KEYS`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Setting {
            $($($id,)*)*
        }

        impl Setting {
            /// Every setting, in the table's order.
            pub(crate) const ALL: &[Setting] = &[$($(Setting::$id),*),*];
        }

        /// Every setting ralph has.
        pub(crate) const KEYS: &[Key] = &[$($(
            Key {
                key: $key,
                kind: Kind::$kind,
                default: $default,
                flag: settings!(@flag $($flag)? $($gflag)? $($dflag)?),
                help: $help,
            },
        )*)*];

        /// The typed configuration: one field per section, each holding
        /// its settings' values as [`Layers::resolve`] reads them.
        #[derive(Debug, Clone)]
        pub struct Config {
            $($(#[$sattr])* pub(crate) $section: $($owned)? $($foreign)?,)*
            $($(#[$cattr])* pub(crate) $cfield: $cty,)*
        }

        $(settings!(@struct $section $($owned)? {
            $($(#[doc = concat!("`", $key, "`")] $field: $fty,)?)*
            $($(#[$xattr])* $xfield: $xty,)*
        });)*

        impl Layers {
            /// The typed configuration: each field read by its row.
            // One struct literal the table expands to, a field per row: nothing to split.
            pub(crate) fn resolve(&self) -> Config {
                Config {
                    $($section: {
                        // (A path cannot name a struct in an expression made
                        // by a macro; an alias can.)
                        type Section = $($owned)? $($foreign)?;
                        Section {
                            $($($field: {
                                let read = settings!(@read $fty $(, $read)?);
                                let value: $fty = read(self, Setting::$id);
                                value
                            },)?)*
                            $($xfield: $xread(self),)*
                        }
                    },)*
                    $($cfield: $cread(self),)*
                }
            }
        }

        // Each row's type can be read from its kind of value.
        $($($(const _: () = settings!(@fits $key, $kind, $fty $(, $read)?);)?)*)*

        /// Run options that set a configuration key, each declared in its
        /// row of the table, so `config show` names it as the value's source.
        #[derive(Debug, clap::Args, Clone, Default, PartialEq)]
        #[command(next_help_heading = "Run options")]
        pub(crate) struct SettingArgs {
            $($($(
                $(#[$fattr])*
                $(#[arg(display_order = FLAG_ORDER + $rank)])?
                pub(crate) $ffield: $ffty,
            )?)*)*
        }

        /// The global options that set a configuration key.
        #[derive(Debug, clap::Args, Clone, Default)]
        pub(crate) struct GlobalSettingArgs {
            $($($($(#[$gattr])* pub(crate) $gfield: $gty,)?)*)*
        }

        /// The display options of a run (`cli::Display`) that set a
        /// configuration key.
        #[derive(Debug, clap::Args, Clone, Default, PartialEq)]
        pub(crate) struct DisplaySettingArgs {
            $($($($(#[$dattr])* pub(crate) $dfield: $dty,)?)*)*
        }

        /// Each setting flag that was given, in the table's order: its
        /// setting, the flag as typed and the value it gives the key.
        pub(crate) fn given(
            g: &GlobalSettingArgs,
            d: &DisplaySettingArgs,
            s: &SettingArgs,
        ) -> Vec<(Setting, &'static str, Value)> {
            let mut out = Vec::new();
            $($(
                $(if let Some(v) = settings!(@value s.$ffield $(, $when)?) {
                    out.push((Setting::$id, $flag, v));
                })?
                $(if let Some(v) = FlagValue::given(&g.$gfield) {
                    out.push((Setting::$id, $gflag, v));
                })?
                $(if let Some(v) = FlagValue::given(&d.$dfield) {
                    out.push((Setting::$id, $dflag, v));
                })?
            )*)*
            out
        }
    };
    (@flag) => { None };
    (@flag $flag:literal) => { Some($flag) };
    (@value $field:expr) => { FlagValue::given(&$field) };
    (@value $field:expr, $when:literal) => { $field.then_some(Value::Boolean($when)) };
    (@read $fty:ty) => { <$fty as FromSetting>::read };
    (@read $fty:ty, $read:path) => { $read };
    (@fits $key:literal, $kind:ident, $fty:ty) => {
        assert!(
            Kind::$kind.is_one_of(<$fty as FromSetting>::KINDS),
            concat!($key, "'s field has a type its kind of value is not read as")
        )
    };
    // A field read by a function: the function says which kinds it reads.
    (@fits $key:literal, $kind:ident, $fty:ty, $read:path) => { () };
    (@struct $section:ident { $($t:tt)* }) => {};
    (@struct $section:ident $owned:ident {
        $($(#[$attr:meta])* $field:ident: $fty:ty,)*
    }) => {
        #[doc = concat!("The `[", stringify!($section), "]` settings.")]
        #[derive(Debug, Clone)]
        pub(crate) struct $owned {
            $($(#[$attr])* pub(crate) $field: $fty,)*
        }
    };
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
    agent: struct AgentConfig {
        AgentTool = "agent.tool", Tool, "\"claude\"",
            "Agent CLI to run: claude, amp, codex, gemini, opencode, cursor-agent, aider, custom.",
            field tool: Tool,
            flag #1 "--tool" tool: Option<Tool> {
                /// Agent CLI to drive
                #[arg(long, value_enum, value_name = "TOOL")]
            };
        AgentCommand = "agent.command", AgentCommand, "[]",
            "Command for tool = custom (or to replace a named tool's program), e.g. [\"my-agent\", \"--fast\"]. {prompt} and {prompt_file} place the prompt in argv or a file; otherwise it goes to stdin.",
            field command: AgentCommand,
            flag #3 "--agent-cmd" agent_cmd: Option<String> {
                /// Any other agent command (split like a shell splits words, never run by one);
                /// {prompt} / {prompt_file} put the prompt in argv / a file, else it goes to stdin
                #[arg(long, value_name = "COMMAND", value_parser = agent_command)]
            };
        AgentFallback = "agent.fallback", Tools, "[]",
            "Agents to go on with, in order, when the configured one meets a usage limit that resets later than limits.fallback_after, e.g. [\"codex\"]. Each runs its own program (found on PATH) with its CLI's defaults: agent.model, agent.args and agent.command are the configured agent's only; agent.safe applies to all. ralph returns to the configured agent once its limit resets.",
            field fallback: Vec<Tool>,
            flag #2 "--fallback-tool" fallback_tool: Vec<String> {
                /// Agent to go on with when the configured one meets a usage limit that resets later
                /// than limits.fallback_after (repeat it, or give a comma list, for more than one)
                #[arg(long, value_delimiter = ',', value_name = "TOOL", value_parser = FALLBACK_TOOLS)]
            };
        AgentFormat = "agent.format", Format, "\"text\"",
            "Output format of a custom command: text, claude, amp, codex, gemini, opencode, cursor.",
            field format: Format;
        AgentModel = "agent.model", Str, "\"\"",
            "Model passed to the agent CLI (--model); empty: the CLI's default.",
            field model: Option<String>,
            flag #4 "--model" model: Option<String> {
                /// Model for the agent CLI (passed as --model)
                #[arg(long, value_name = "MODEL")]
            };
        AgentArgs = "agent.args", List, "[]",
            "Extra arguments appended to the agent's command line.",
            field args: Vec<String>;
        AgentSafe = "agent.safe", Bool, "false",
            "Use the CLI's safer permission mode (e.g. claude --permission-mode acceptEdits --allowedTools, codex --sandbox workspace-write) instead of allowing everything.",
            field safe: bool,
            flag #5 "--safe" safe: bool {
                /// Use the agent CLI's safer permission mode instead of "allow everything"
                #[arg(long)]
            };
        AgentAllowedTools = "agent.allowed_tools", List, "[]",
            "Claude tools allowed in safe mode; empty: ralph's default list (edits, git, common build and test tools: cargo, npm, node, python3, pytest, uv, go, make, …). The programs the gate runs are always added.",
            field allowed_tools: Vec<String>;
        AgentTimeout = "agent.timeout", Duration, "\"30m\"",
            "Wall-clock limit of one iteration's agent run (\"0\": none).",
            field timeout: Duration,
            flag #9 "--timeout" timeout: Option<String> {
                /// Wall-clock limit per iteration; 0 = none [default: 30m]
                #[arg(long, value_name = "DURATION", value_parser = duration)]
            };
        AgentIdleTimeout = "agent.idle_timeout", Duration, "\"10m\"",
            "Stop the agent after this long without output (\"0\": never).",
            field idle_timeout: Option<Duration>,
            flag #10 "--idle-timeout" idle_timeout: Option<String> {
                /// Stop the agent after this long without output; 0 = never [default: 10m]
                #[arg(long, value_name = "DURATION", value_parser = duration)]
            };
        AgentGrace = "agent.grace", Duration, "\"10s\"",
            "Time between SIGTERM and SIGKILL when stopping the agent.",
            field grace: Duration;
        AgentSandbox = "agent.sandbox", Sandbox, "\"auto\"",
            "Confine the agent, the gate and hooks with Linux Landlock: writes only to the work tree, a private TMPDIR and the agent CLI's own state dirs; no reads of credential stores (~/.ssh, ~/.aws, …) or other projects; TCP connects only to 80, 443 and the configured API's port; no signals outside its own processes. auto: on where the kernel has Landlock (unconfined elsewhere, said once); strict: refuse to start without it (exit 7); off: as before. Set it in your own config (~/.config/ralph/config.toml), the environment or the flag: a value in the project's .ralph/config.toml is one the agent could have committed.",
            flag #6 "--sandbox" sandbox: Option<String> {
                /// Confine the agent, gate and hooks with Landlock: auto (where the kernel has it),
                /// strict (refuse to start without it) or off [default: auto]
                #[arg(long, value_name = "MODE", value_parser = ["auto", "strict", "off"])]
            };
    }
    run: struct RunConfig {
        RunMaxIterations = "run.max_iterations", Int, "10",
            "Iterations per run when no number is given on the command line.",
            field max_iterations: u32,
            flag "MAX_ITERATIONS" max_iterations: Option<u32> {
                /// Most iterations to run [default: 10, or run.max_iterations]
                #[arg(value_name = "MAX_ITERATIONS")]
                #[arg(value_parser = clap::value_parser!(u32).range(1..))]
            };
        RunJobs = "run.jobs", Int, "1",
            "Stories worked at once, each by its own agent in its own git worktree (1: one at a time, in the project itself).",
            field jobs: u32 = at_least_one,
            flag #11 "--jobs" jobs: Option<u32> {
                /// Stories to work at once, each in its own git worktree [default: 1]
                #[arg(long, short = 'j', value_name = "N")]
                #[arg(value_parser = clap::value_parser!(u32).range(1..=64))]
            };
        RunPause = "run.pause", Duration, "\"0s\"",
            "Pause between iterations.",
            field pause: Duration,
            flag #12 "--pause" pause: Option<String> {
                /// Pause between iterations [default: 0s]
                #[arg(long, value_name = "DURATION", value_parser = duration)]
            };
        RunRequireHandoff = "run.require_handoff", Bool, "true",
            "Expect the agent to write .ralph/handoff.json (false: a missing one is not reported; an invalid one always is).",
            field require_handoff: bool;
        RunCommitLeftovers = "run.commit_leftovers", Bool, "true",
            "When a story passes with the agent's work uncommitted, ralph commits it (as feat: <ID> - <title>); false: the story does not count until the agent commits.",
            field commit_leftovers: bool;
        RunAllowDirty = "run.allow_dirty", Bool, "false",
            "Start a new run on a work tree with uncommitted changes to tracked files (ralph's own prd.json, progress.txt and .ralph/ aside). Off: ralph refuses (exit 2), so the agent's commits never sweep up a person's edit.",
            field allow_dirty: bool,
            flag #21 "--allow-dirty" allow_dirty: bool {
                /// Start a new run even over uncommitted changes to tracked files
                #[arg(long)]
            };
        RunPrompt = "run.prompt", Str, "\"\"",
            "Prompt template file (default: .ralph/prompt.md if present, else the built-in one).",
            field prompt: Option<PathBuf>,
            flag #13 "--prompt" prompt: Option<PathBuf> {
                /// Prompt template (default: .ralph/prompt.md, else the built-in one)
                #[arg(long, value_name = "FILE")]
            };
        RunContext = "run.context", List, "[]",
            "Project files the prompt points the agent to before its story, e.g. [\".ralph/PROMPT.md\", \".ralph/specs/\"]: a project's own instructions, build notes, specs (`ralph import` sets it).",
            field context: Vec<String>;
    }
    gate: struct GateConfig {
        GateCommand = "gate.command", Command, "[]",
            "Verification gate: a story passes only when this passes, e.g. [\"cargo\", \"test\"] or \"cd tests && python3 -m unittest\". An array runs as it is; text runs with `sh -c` when it has shell syntax (&&, ||, ;, |, redirections, $VAR, globs, a leading cd or VAR=…), else it is split into words and run without a shell. A story's \"verify\" is read the same way. Empty: no gate (the agent's word is taken).",
            field command: Vec<String> = gate_argv,
            flag #7 "--gate" gate: Option<String> {
                /// Verification gate: a story passes only when this command passes (shell syntax such as
                /// "cd tests && pytest" runs it with sh -c)
                #[arg(long, value_name = "COMMAND", value_parser = command)]
            };
        GateTimeout = "gate.timeout", Duration, "\"10m\"",
            "Wall-clock limit of one gate run (\"0\": none). A gate that runs out of it on the baseline stops the run.",
            field timeout: Duration,
            flag #8 "--gate-timeout" gate_timeout: Option<String> {
                /// Wall-clock limit of one gate run; 0 = none [default: 10m]
                #[arg(long, value_name = "DURATION", value_parser = duration)]
            };
        GateTailBytes = "gate.tail_bytes", Int, "4096",
            "Bytes of the gate's stdout and of its stderr kept for the next prompt.",
            field tail_bytes: usize;
        GateFatalSignatures = "gate.fatal_signatures", List, "[]",
            "Text in the gate's output that means the environment is broken (not the code), e.g. \"No space left on device\".",
            field fatal_signatures: Vec<String>;
        GateProtect = "gate.protect", List, "[]",
            "Paths the agent may not change, as globs, besides those always protected (.ralph/**, CI files such as .github/workflows/**, and the files the gate command names: its script, Makefile for make, justfile for just, package.json for npm): e.g. [\"tests/fixtures/**\"]. An iteration that changes one is set back and judged tampered: its story is not verified.",
            field protect: Vec<String>;
        GateRequireRed = "gate.require_red", Bool, "false",
            "Red, then green: a story's own \"verify\" must fail on the run's base (its files before any work) before an agent is paid for the story, and pass after. A story whose check already passes there is set aside as \"check proves nothing\". Checked once per base tree (cached).",
            field require_red: bool;
        GateBaseline = "gate.baseline", Bool, "true",
            "Run the gate once before the first iteration (fails fast when it cannot run).",
            field baseline: bool;
        /// Where `gate.command` came from ("default", ".ralph/config.toml at
        /// main", "flag --gate"), for the report.
        + source: String = gate_source;
    }
    /// `agent.sandbox` and `sandbox.*`: what agents, the gate and hooks may touch.
    sandbox: use crate::sandbox::Settings {
        SandboxRead = "sandbox.read", List, "[]",
            "More paths the sandboxed agent, gate and hooks may read (\"~/\" is the home), e.g. [\"~/datasets\"].",
            field read: Vec<String>;
        SandboxWrite = "sandbox.write", List, "[]",
            "More paths the sandboxed agent, gate and hooks may write: the caches builds need, e.g. [\"~/.cargo\", \"~/.npm\", \"~/.cache/pip\"].",
            field write: Vec<String>;
        SandboxNet = "sandbox.net", Net, "\"ports\"",
            "TCP connects from the sandbox: \"ports\" allows 80, 443, the ports of URLs in the agent's environment and its CLI's config, and sandbox.ports; \"any\" lifts the limit (a test suite that serves on local ports needs it).",
            field net: Net;
        SandboxPorts = "sandbox.ports", Ports, "[]",
            "More TCP ports the sandbox may connect to, e.g. [22, 5432].",
            field ports: Vec<u16>;
        /// `agent.sandbox`, set with the agent.
        + mode: crate::sandbox::Mode = sandbox_mode;
    }
    circuit: struct CircuitConfig {
        CircuitNoProgress = "circuit.no_progress", Int, "3",
            "Open the circuit after this many iterations in a row without progress.",
            field no_progress: u32;
        CircuitSameError = "circuit.same_error", Int, "5",
            "Open the circuit after the same error this many iterations in a row.",
            field same_error: u32;
        CircuitPermissionDenials = "circuit.permission_denials", Int, "2",
            "Open the circuit after permission denials in this many iterations in a row.",
            field permission_denials: u32;
        CircuitFailures = "circuit.failures", Int, "3",
            "Open the circuit after this many failed agent runs in a row (non-zero exit, error result, timeout).",
            field failures: u32;
        CircuitCooldown = "circuit.cooldown", Duration, "\"30m\"",
            "An open circuit becomes half-open after this long.",
            field cooldown: Duration;
        CircuitAutoReset = "circuit.auto_reset", Bool, "false",
            "Start every run with a closed circuit.",
            field auto_reset: bool,
            flag #20 "--auto-reset" auto_reset: bool {
                /// Start with a closed circuit breaker, whatever state it was left in
                #[arg(long, alias = "auto-reset-circuit")]
            };
    }
    limits: struct LimitsConfig {
        LimitsCallsPerHour = "limits.calls_per_hour", Int, "100",
            "Agent runs allowed in any 60-minute window (0: no limit).",
            field calls_per_hour: u32,
            flag #17 "--calls-per-hour" calls_per_hour: Option<u32> {
                /// Agent runs allowed per hour; 0 = no limit [default: 100]
                #[arg(long, alias = "calls", value_name = "N")]
            };
        LimitsWait = "limits.wait", Bool, "true",
            "Wait out rate and usage limits (false: stop with exit code 4).",
            field wait: bool,
            flag #18 "--no-wait" no_wait: bool = false {
                /// Stop (exit 4) at a rate or usage limit instead of waiting it out
                #[arg(long)]
            };
        LimitsMaxWait = "limits.max_wait", Duration, "\"6h\"",
            "Longest single wait for a limit; a longer one stops the run with exit code 4.",
            field max_wait: Duration,
            flag #19 "--max-wait" max_wait: Option<String> {
                /// Longest wait for a limit before stopping with exit 4 [default: 6h]
                #[arg(long, value_name = "DURATION", value_parser = duration)]
            };
        LimitsFallbackAfter = "limits.fallback_after", Duration, "\"10m\"",
            "A usage limit that resets sooner than this (and within limits.max_wait; with --no-wait, none) is waited out; a later one hands the story to the next agent of agent.fallback (if any).",
            field fallback_after: Duration;
        LimitsUsageLimitWait = "limits.usage_limit_wait", Duration, "\"60m\"",
            "Wait after a usage limit whose reset time is unknown.",
            field usage_limit_wait: Duration;
    }
    patterns: use crate::analyze::PatternTexts {
        PatternsUsageLimit = "patterns.usage_limit", List, "[]",
            "Extra regular expressions (regex crate syntax; (?i) for any case) that mark a usage-limit message in the agent's error text. Built-in ones cover Claude, Codex, Gemini.",
            field usage_limit: Vec<String>;
        PatternsBilling = "patterns.billing", List, "[]",
            "Extra regexes for out-of-credit messages (stop the run: waiting will not help).",
            field billing: Vec<String>;
        PatternsAuth = "patterns.auth", List, "[]",
            "Extra regexes for authentication failures (stop the run).",
            field auth: Vec<String>;
        PatternsRateLimit = "patterns.rate_limit", List, "[]",
            "Extra regexes for API rate limits (back off and retry).",
            field rate_limit: Vec<String>;
        PatternsOverload = "patterns.overload", List, "[]",
            "Extra regexes for an overloaded API (back off and retry).",
            field overload: Vec<String>;
        PatternsUnreachable = "patterns.unreachable", List, "[]",
            "Extra regexes for an unreachable API (back off and retry).",
            field unreachable: Vec<String>;
    }
    budget: struct BudgetConfig {
        BudgetMaxDuration = "budget.max_duration", Duration, "\"0\"",
            "Wall clock for the whole run (\"0\": none). No agent starts after it; the running one is stopped.",
            field max_duration: Option<Duration>,
            flag #14 "--max-duration" max_duration: Option<String> {
                /// Wall clock for the whole run
                #[arg(long, value_name = "DURATION", value_parser = duration)]
            };
        BudgetMaxCost = "budget.max_cost", Float, "0",
            "USD the agents may report spending in one run (0: no limit).",
            field max_cost: Option<f64>,
            flag #15 "--max-cost" max_cost: Option<f64> {
                /// Stop once the agents report spending this many USD
                #[arg(long, value_name = "USD", value_parser = usd)]
            };
        BudgetMaxTokens = "budget.max_tokens", Int, "0",
            "Tokens the agents may report using in one run (0: no limit).",
            field max_tokens: Option<u64>,
            flag #16 "--max-tokens" max_tokens: Option<u64> {
                /// Stop once the agents report using this many tokens
                #[arg(long, value_name = "TOKENS")]
            };
    }
    /// `ralph worker --remote`'s settings.
    worker: struct WorkerConfig {
        WorkerRemote = "worker.remote", Str, "\"\"",
            "The shared repository `ralph worker` coordinates through (a URL, a path or a remote's name; --remote overrides it).",
            field remote: Option<String>;
        WorkerLease = "worker.lease", Duration, "\"10m\"",
            "How long a `ralph worker` claim holds without being renewed: a dead worker's story is free after it (--lease overrides it).",
            field lease: Duration;
        WorkerId = "worker.id", Str, "\"\"",
            "This worker's name in claims (empty: <host>-<pid>; --id overrides it).",
            field id: Option<String>;
    }
    /// How a parallel run's merge queue treats conflicts.
    merge: struct MergeConfig {
        MergeResolve = "merge.resolve", Resolve, "\"agent\"",
            "What a parallel run does with a story whose work conflicts with the run branch: \"agent\" runs a resolver agent that merges both stories onto the tip, \"redo\" redoes the story from the new tip.",
            field resolve: ResolveMode;
        MergeResolver = "merge.resolver", MaybeTool, "\"\"",
            "The agent that resolves merge conflicts (\"\": the story's own agent).",
            field resolver: Option<Tool>;
        MergeAttempts = "merge.attempts", Int, "3",
            "Merge attempts of a story (resolutions and redos) that may fail before a parallel run gives it up.",
            field attempts: u32 = at_least_one;
        MergeBatch = "merge.batch", Int, "8",
            "Queued stories merged together and gated once (a failing gate is bisected); 1: one at a time.",
            field batch: u32 = at_least_one;
    }
    hooks: struct HooksConfig {
        HooksOnIterationEnd = "hooks.on_iteration_end", Command, "[]",
            "Command run after each iteration (RALPH_* variables describe it). A failing hook is logged, never fatal.",
            field on_iteration_end: Vec<String>;
        HooksOnComplete = "hooks.on_complete", Command, "[]",
            "Command run when every story passes.",
            field on_complete: Vec<String>;
        HooksOnHalt = "hooks.on_halt", Command, "[]",
            "Command run when a run stops for any other reason.",
            field on_halt: Vec<String>;
    }
    cost: struct CostConfig {
        CostPrices = "cost.prices", List, "[]",
            "Prices for agents that report tokens but no cost: \"MODEL=IN/OUT\" in USD per million input and output tokens (\"*\" for any model), e.g. [\"gpt-5=1.25/10\"]. Costs computed from them are marked as estimates.",
            field prices: Vec<String>;
    }
    logs: struct LogsConfig {
        LogsKeepRuns = "logs.keep_runs", Int, "50",
            "Runs whose logs are kept in .git/ralph/logs/ (0: all); the current run's and the last failed run's are always kept.",
            field keep_runs: u64;
        LogsKeepBytes = "logs.keep_bytes", Int, "1073741824",
            "Bytes of run logs kept (0: no limit); the oldest runs' logs go first, never the current or last failed run's.",
            field keep_bytes: u64;
        LogsMaxFileBytes = "logs.max_file_bytes", Int, "33554432",
            "Bytes one agent or gate log may take (0: no cap): past it, the log keeps its first half and the last half of the rest, with a line saying how much was cut between them.",
            field max_file_bytes: u64;
    }
    notify: use crate::notify::NotifyConfig {
        NotifyWebhook = "notify.webhook", Str, "\"\"",
            "A URL that gets each notified event as JSON (the line --json prints). A URL is a secret: set it in the environment (RALPH_NOTIFY_WEBHOOK), or write \"env:VAR\" to name the variable that holds it.",
            field webhook: Option<String>;
        NotifySlack = "notify.slack", Str, "\"\"",
            "A Slack-compatible incoming webhook URL (from the environment, or \"env:VAR\").",
            field slack: Option<String>;
        NotifyNtfy = "notify.ntfy", Str, "\"\"",
            "An ntfy topic URL such as https://ntfy.sh/TOPIC (from the environment, or \"env:VAR\").",
            field ntfy: Option<String>;
        NotifyDesktop = "notify.desktop", Bool, "false",
            "Desktop notifications through notify-send, where it exists.",
            field desktop: bool;
        NotifyEvents = "notify.events", List, "[\"run_end\", \"blocked\", \"circuit_open\", \"usage_limit_wait\", \"budget\", \"worker_lost\"]",
            "What is notified: run_end, blocked, circuit_open, usage_limit_wait (longer than notify.wait_longer_than), budget (80% spent), worker_lost.",
            field events: Vec<String>;
        NotifyWebhookEvents = "notify.webhook_events", List, "[]",
            "What the webhook gets (empty: notify.events).",
            field webhook_events: Vec<String>;
        NotifySlackEvents = "notify.slack_events", List, "[]",
            "What Slack gets (empty: notify.events).",
            field slack_events: Vec<String>;
        NotifyNtfyEvents = "notify.ntfy_events", List, "[]",
            "What ntfy gets (empty: notify.events).",
            field ntfy_events: Vec<String>;
        NotifyDesktopEvents = "notify.desktop_events", List, "[]",
            "What the desktop gets (empty: notify.events).",
            field desktop_events: Vec<String>;
        NotifyWaitLongerThan = "notify.wait_longer_than", Duration, "\"30m\"",
            "A usage-limit or back-off wait is notified when it is longer than this.",
            field wait_longer_than: Duration;
        NotifyTimeout = "notify.timeout", Duration, "\"10s\"",
            "Time for one delivery; failures are retried with back-off, and the end of a run waits at most this long for what is still queued.",
            field timeout: Duration;
    }
    /// `deliver.*`: pull requests for the run's work.
    deliver: use crate::deliver::DeliverConfig {
        DeliverPr = "deliver.pr", Pr, "\"off\"",
            "Pull requests (merge requests on GitLab) for the run's work: off; run (one for the run branch, its description the run's report, opened or updated when the run ends); story (each story that passed pushed as <run branch>-stories/<id> and opened on its own, its description the story's report and acceptance criteria). `ralph deliver` does it for a finished run, and retries a delivery that failed.",
            field pr: PrMode,
            flag #22 "--pr" pr: Option<String> {
                /// Open pull requests when the run ends: one for the run (--pr, --pr=run), one per
                /// story (--pr=story), or none (--pr=off) [default: off]
                #[arg(
                    long,
                    value_name = "MODE",
                    num_args = 0..=1,
                    require_equals = true,
                    default_missing_value = "run",
                    value_parser = ["off", "run", "story"]
                )]
            };
        DeliverForge = "deliver.forge", Forge, "\"auto\"",
            "Where pull requests go: auto (github.com, or a host whose name says gitlab), github (also GitHub Enterprise), gitlab.",
            field forge: ForgeSetting;
        DeliverRepo = "deliver.repo", Str, "\"\"",
            "The repository on the forge: owner/name on GitHub, the project's path on GitLab (\"\": from the remote's URL).",
            field repo: Option<String>;
        DeliverRemote = "deliver.remote", Str, "\"origin\"",
            "The git remote the branches are pushed to.",
            field remote: String = or_default;
        DeliverBase = "deliver.base", Str, "\"\"",
            "The branch pull requests are opened against (\"\": the branch the run branch was cut from, else the remote's default branch).",
            field base: Option<String>;
        DeliverDraft = "deliver.draft", Bool, "true",
            "Open pull requests as drafts until their work is verified: a story's until the gate passed on it, the run's until the run ends complete and verified.",
            field draft: bool;
        DeliverStack = "deliver.stack", Bool, "false",
            "With deliver.pr = \"story\": each story's pull request against the branch of the story merged before it (the first against deliver.base), so each shows only its own change.",
            field stack: bool;
        DeliverApi = "deliver.api", Str, "\"\"",
            "The forge's API for a self-hosted one, e.g. https://ghe.example.com/api/v3 or https://gitlab.example.com/api/v4 (\"\": from the remote's host). The token comes from GH_TOKEN or GITHUB_TOKEN, GITLAB_TOKEN, else `gh auth token` / `glab auth status -t`; it is never written anywhere.",
            field api: Option<String>;
        DeliverTimeout = "deliver.timeout", Duration, "\"30s\"",
            "Time for one request to the forge. A rate limit the forge says ends within a minute is waited out; a longer one, a refused token or a forge that is down leaves the branches pushed and says to run `ralph deliver`.",
            field timeout: Duration;
        DeliverReopenOnClose = "deliver.reopen_on_close", Bool, "false",
            "With deliver.pr = \"story\": a story whose pull request a reviewer closed without merging is unfinished again at the next run, the last comment on it its lesson (ralph asks the forge when the run starts).",
            field reopen_on_close: bool;
    }
    ui: struct UiConfig {
        UiColor = "ui.color", Color, "\"auto\"",
            "Colour: auto, always, never (NO_COLOR is honoured in auto).",
            field color: Color,
            global flag "--color" color: Option<Color> {
                /// When to use colour; auto: when stdout is a terminal and NO_COLOR is unset
                #[arg(long, global = true, value_enum, value_name = "WHEN")]
            };
        UiProgress = "ui.progress", Progress, "\"auto\"",
            "How a run shows its progress: auto (the live display on an interactive terminal, plain lines elsewhere and on CI), plain (timestamped lines, even on a terminal), bar (the live display whenever stdout is a terminal, even on CI or with TERM=dumb).",
            field progress: Progress,
            display flag "--progress" progress: Option<Progress> {
                /// How a run shows progress; plain: timestamped lines even on a terminal [default: auto]
                #[arg(long, value_enum, value_name = "HOW")]
            };
    }
    + Config {
        /// Settings of the run branch's project file that decide trust, read
        /// from its base instead.
        ignored: Vec<Ignored> = ignored;
    }
}

/// `agent.idle_timeout` → `RALPH_AGENT_IDLE_TIMEOUT`.
pub(crate) fn env_name(key: &str) -> String {
    format!("RALPH_{}", key.replace('.', "_").to_uppercase())
}
