//! The typed configuration that [`super::Layers::resolve`] builds, one
//! struct per section, and the enums of the `ui` settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::Tool;
use crate::analyze::Format;

use super::Ignored;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    Auto,
    Always,
    Never,
}

impl Color {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Color::Auto => "auto",
            Color::Always => "always",
            Color::Never => "never",
        }
    }
}

/// How a run shows its progress (`ui.progress`, `--progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Progress {
    // Plain comments, not doc comments: clap would turn those into a long
    // "Possible values" list in every command's help.
    // The live display on an interactive terminal, plain lines elsewhere.
    Auto,
    // Timestamped lines, even on a terminal.
    Plain,
    // The live display whenever stdout is a terminal, even on CI.
    Bar,
}

impl Progress {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Progress::Auto => "auto",
            Progress::Plain => "plain",
            Progress::Bar => "bar",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) agent: AgentConfig,
    /// `agent.sandbox` and `sandbox.*`: what agents, the gate and hooks may touch.
    pub(crate) sandbox: crate::sandbox::Settings,
    pub(crate) run: RunConfig,
    pub(crate) gate: GateConfig,
    pub(crate) circuit: CircuitConfig,
    pub(crate) limits: LimitsConfig,
    pub(crate) budget: BudgetConfig,
    /// How a parallel run's merge queue treats conflicts.
    pub(crate) merge: MergeConfig,
    /// `ralph worker --remote`'s settings.
    pub(crate) worker: WorkerConfig,
    pub(crate) patterns: crate::analyze::PatternTexts,
    pub(crate) hooks: HooksConfig,
    pub(crate) cost: CostConfig,
    pub(crate) logs: LogsConfig,
    pub(crate) notify: crate::notify::NotifyConfig,
    /// `deliver.*`: pull requests for the run's work.
    pub(crate) deliver: crate::deliver::DeliverConfig,
    pub(crate) color: Color,
    pub(crate) progress: Progress,
    /// Settings of the run branch's project file read from its base instead.
    pub(crate) ignored: Vec<Ignored>,
}

#[derive(Debug, Clone)]
pub(crate) struct AgentConfig {
    pub(crate) tool: Tool,
    /// Agents to go on with when `tool` meets a long usage limit, in order.
    pub(crate) fallback: Vec<Tool>,
    /// `agent.command`: the program and its arguments, and the environment
    /// its leading `NAME=value` words give the agent.
    pub(crate) command: crate::agent::words::AgentCommand,
    pub(crate) format: Format,
    pub(crate) model: Option<String>,
    pub(crate) args: Vec<String>,
    pub(crate) safe: bool,
    pub(crate) allowed_tools: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) grace: Duration,
}

#[derive(Debug, Clone)]
pub(crate) struct RunConfig {
    pub(crate) max_iterations: u32,
    /// Stories worked at once (1: the single loop).
    pub(crate) jobs: u32,
    pub(crate) pause: Duration,
    pub(crate) prompt: Option<PathBuf>,
    /// Files the prompt points the agent to (relative to the project).
    pub(crate) context: Vec<String>,
    pub(crate) require_handoff: bool,
    pub(crate) commit_leftovers: bool,
    /// A new run may start with tracked files changed (`--allow-dirty`).
    pub(crate) allow_dirty: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct GateConfig {
    pub(crate) command: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) tail_bytes: usize,
    pub(crate) fatal_signatures: Vec<String>,
    pub(crate) baseline: bool,
    /// `gate.require_red`: a story's own check must fail on the base first.
    pub(crate) require_red: bool,
    /// `gate.protect`: globs the agent may not change, besides the built-in ones.
    pub(crate) protect: Vec<String>,
    /// Where `gate.command` came from ("default", ".ralph/config.toml at
    /// main", "flag --gate"), for the report.
    pub(crate) source: String,
}

#[derive(Debug, Clone)]
pub(crate) struct CircuitConfig {
    pub(crate) no_progress: u32,
    pub(crate) same_error: u32,
    pub(crate) permission_denials: u32,
    pub(crate) failures: u32,
    pub(crate) cooldown: Duration,
    pub(crate) auto_reset: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct LimitsConfig {
    pub(crate) calls_per_hour: u32,
    pub(crate) wait: bool,
    pub(crate) max_wait: Duration,
    pub(crate) usage_limit_wait: Duration,
    /// A usage limit resetting sooner than this is waited out, not handed
    /// to a fallback agent.
    pub(crate) fallback_after: Duration,
}

#[derive(Debug, Clone)]
pub(crate) struct BudgetConfig {
    pub(crate) max_duration: Option<Duration>,
    pub(crate) max_cost: Option<f64>,
    pub(crate) max_tokens: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct MergeConfig {
    /// `merge.resolve`: a conflict of fresh work gets a resolver agent, or a redo.
    pub(crate) resolve: crate::driver::ResolveMode,
    /// `merge.resolver`: the agent that resolves (`None`: the story's).
    pub(crate) resolver: Option<Tool>,
    /// Failed merge attempts before a story is given up.
    pub(crate) attempts: u32,
    /// Stories merged together and gated once.
    pub(crate) batch: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct WorkerConfig {
    pub(crate) remote: Option<String>,
    pub(crate) lease: Duration,
    pub(crate) id: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct HooksConfig {
    pub(crate) on_iteration_end: Vec<String>,
    pub(crate) on_complete: Vec<String>,
    pub(crate) on_halt: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct CostConfig {
    /// `MODEL=IN/OUT` entries (see `history::cost`).
    pub(crate) prices: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct LogsConfig {
    /// 0: no limit.
    pub(crate) keep_runs: u64,
    /// 0: no limit.
    pub(crate) keep_bytes: u64,
    /// `logs.max_file_bytes`: one agent or gate log's cap (0: none).
    pub(crate) max_file_bytes: u64,
}
