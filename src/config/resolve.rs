//! The layers' values turned into the typed [`Config`].

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::Tool;
use crate::analyze::Format;

use super::kind::{format_from, tool_from};
use super::{
    AgentConfig, BudgetConfig, CircuitConfig, Color, Config, CostConfig, GateConfig, HooksConfig,
    Layers, LimitsConfig, LogsConfig, MergeConfig, Progress, RunConfig, WorkerConfig,
    parse_duration,
};

impl Layers {
    /// The typed configuration.
    pub(crate) fn resolve(&self) -> Config {
        let tool = tool_from(&self.str("agent.tool")).unwrap_or(Tool::Claude);
        let nonzero = |d: Duration| (!d.is_zero()).then_some(d);
        Config {
            agent: AgentConfig {
                tool,
                fallback: self.list("agent.fallback").iter().filter_map(|t| tool_from(t)).collect(),
                command: self.agent_command("agent.command"),
                format: format_from(&self.str("agent.format")).unwrap_or(Format::Text),
                model: self.opt_str("agent.model"),
                args: self.list("agent.args"),
                safe: self.bool("agent.safe"),
                allowed_tools: self.list("agent.allowed_tools"),
                timeout: self.duration("agent.timeout"),
                idle_timeout: nonzero(self.duration("agent.idle_timeout")),
                grace: self.duration("agent.grace"),
            },
            sandbox: crate::sandbox::Settings {
                mode: crate::sandbox::Mode::parse(&self.str("agent.sandbox")).unwrap_or_default(),
                read: self.list("sandbox.read"),
                write: self.list("sandbox.write"),
                net: if self.str("sandbox.net") == "any" {
                    crate::sandbox::Net::Any
                } else {
                    crate::sandbox::Net::Ports
                },
                ports: match self.get("sandbox.ports") {
                    toml::Value::Array(a) => a
                        .iter()
                        .filter_map(|v| v.as_integer().and_then(|p| u16::try_from(p).ok()))
                        .collect(),
                    _ => Vec::new(),
                },
            },
            run: RunConfig {
                max_iterations: u32::try_from(self.int("run.max_iterations")).unwrap_or(u32::MAX),
                jobs: u32::try_from(self.int("run.jobs")).unwrap_or(1).max(1),
                pause: self.duration("run.pause"),
                prompt: self.opt_str("run.prompt").map(PathBuf::from),
                context: self.list("run.context"),
                require_handoff: self.bool("run.require_handoff"),
                commit_leftovers: self.bool("run.commit_leftovers"),
                allow_dirty: self.bool("run.allow_dirty"),
            },
            gate: GateConfig {
                command: self.gate_command("gate.command"),
                timeout: self.duration("gate.timeout"),
                tail_bytes: usize::try_from(self.int("gate.tail_bytes")).unwrap_or(4096),
                fatal_signatures: self.list("gate.fatal_signatures"),
                baseline: self.bool("gate.baseline"),
                require_red: self.bool("gate.require_red"),
                protect: self.list("gate.protect"),
                source: self.values["gate.command"].1.to_string(),
            },
            ignored: self.ignored.clone(),
            circuit: CircuitConfig {
                no_progress: self.int("circuit.no_progress") as u32,
                same_error: self.int("circuit.same_error") as u32,
                permission_denials: self.int("circuit.permission_denials") as u32,
                failures: self.int("circuit.failures") as u32,
                cooldown: self.duration("circuit.cooldown"),
                auto_reset: self.bool("circuit.auto_reset"),
            },
            limits: LimitsConfig {
                calls_per_hour: self.int("limits.calls_per_hour") as u32,
                wait: self.bool("limits.wait"),
                max_wait: self.duration("limits.max_wait"),
                usage_limit_wait: self.duration("limits.usage_limit_wait"),
                fallback_after: self.duration("limits.fallback_after"),
            },
            merge: MergeConfig {
                resolve: if self.str("merge.resolve") == "redo" {
                    crate::driver::ResolveMode::Redo
                } else {
                    crate::driver::ResolveMode::Agent
                },
                resolver: tool_from(&self.str("merge.resolver")),
                attempts: u32::try_from(self.int("merge.attempts")).unwrap_or(3).max(1),
                batch: u32::try_from(self.int("merge.batch")).unwrap_or(1).max(1),
            },
            worker: WorkerConfig {
                remote: self.opt_str("worker.remote"),
                lease: self.duration("worker.lease"),
                id: self.opt_str("worker.id"),
            },
            budget: BudgetConfig {
                max_duration: nonzero(self.duration("budget.max_duration")),
                max_cost: Some(self.float("budget.max_cost")).filter(|c| *c > 0.0),
                max_tokens: Some(self.int("budget.max_tokens")).filter(|t| *t > 0),
            },
            patterns: crate::analyze::PatternTexts {
                usage_limit: self.list("patterns.usage_limit"),
                billing: self.list("patterns.billing"),
                auth: self.list("patterns.auth"),
                rate_limit: self.list("patterns.rate_limit"),
                overload: self.list("patterns.overload"),
                unreachable: self.list("patterns.unreachable"),
            },
            hooks: HooksConfig {
                on_iteration_end: self.command("hooks.on_iteration_end"),
                on_complete: self.command("hooks.on_complete"),
                on_halt: self.command("hooks.on_halt"),
            },
            cost: CostConfig { prices: self.list("cost.prices") },
            logs: LogsConfig {
                keep_runs: self.int("logs.keep_runs"),
                keep_bytes: self.int("logs.keep_bytes"),
                max_file_bytes: self.int("logs.max_file_bytes"),
            },
            notify: crate::notify::NotifyConfig {
                webhook: self.opt_str("notify.webhook"),
                slack: self.opt_str("notify.slack"),
                ntfy: self.opt_str("notify.ntfy"),
                desktop: self.bool("notify.desktop"),
                events: self.list("notify.events"),
                webhook_events: self.list("notify.webhook_events"),
                slack_events: self.list("notify.slack_events"),
                ntfy_events: self.list("notify.ntfy_events"),
                desktop_events: self.list("notify.desktop_events"),
                wait_longer_than: self.duration("notify.wait_longer_than"),
                timeout: self.duration("notify.timeout"),
            },
            deliver: crate::deliver::DeliverConfig {
                pr: crate::deliver::PrMode::parse(&self.str("deliver.pr")).unwrap_or_default(),
                forge: match self.str("deliver.forge").as_str() {
                    "github" => crate::deliver::target::ForgeSetting::Is(
                        crate::deliver::target::Forge::GitHub,
                    ),
                    "gitlab" => crate::deliver::target::ForgeSetting::Is(
                        crate::deliver::target::Forge::GitLab,
                    ),
                    _ => crate::deliver::target::ForgeSetting::Auto,
                },
                repo: self.opt_str("deliver.repo"),
                remote: self.opt_str("deliver.remote").unwrap_or_else(|| "origin".into()),
                base: self.opt_str("deliver.base"),
                draft: self.bool("deliver.draft"),
                stack: self.bool("deliver.stack"),
                api: self.opt_str("deliver.api"),
                timeout: self.duration("deliver.timeout"),
                reopen_on_close: self.bool("deliver.reopen_on_close"),
            },
            color: match self.str("ui.color").as_str() {
                "always" => Color::Always,
                "never" => Color::Never,
                _ => Color::Auto,
            },
            progress: match self.str("ui.progress").as_str() {
                "plain" => Progress::Plain,
                "bar" => Progress::Bar,
                _ => Progress::Auto,
            },
        }
    }

    fn str(&self, key: &str) -> String {
        self.get(key).as_str().unwrap_or_default().to_string()
    }

    fn opt_str(&self, key: &str) -> Option<String> {
        Some(self.str(key)).filter(|s| !s.trim().is_empty())
    }

    fn bool(&self, key: &str) -> bool {
        self.get(key).as_bool().unwrap_or(false)
    }

    fn int(&self, key: &str) -> u64 {
        self.get(key).as_integer().and_then(|i| u64::try_from(i).ok()).unwrap_or(0)
    }

    fn float(&self, key: &str) -> f64 {
        match self.get(key) {
            toml::Value::Float(f) => *f,
            toml::Value::Integer(i) => *i as f64,
            _ => 0.0,
        }
    }

    fn duration(&self, key: &str) -> Duration {
        parse_duration(self.get(key).as_str().unwrap_or("0")).unwrap_or_default()
    }

    fn list(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            toml::Value::Array(a) => {
                a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The agent's command and the environment its text gives it
    /// ([`crate::agent::words::agent_command`]).
    fn agent_command(&self, key: &str) -> crate::agent::words::AgentCommand {
        match self.get(key) {
            toml::Value::String(s) => crate::agent::words::agent_command(s).unwrap_or_default(),
            _ => crate::agent::words::AgentCommand { env: Vec::new(), argv: self.list(key) },
        }
    }

    fn command(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            toml::Value::String(s) => crate::agent::words::split(s).unwrap_or_default(),
            _ => self.list(key),
        }
    }

    /// A gate given as text runs through `sh -c` when it has shell syntax
    /// ([`crate::gate::argv`]); an array is its argv.
    fn gate_command(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            toml::Value::String(s) => crate::gate::argv(s).unwrap_or_default(),
            _ => self.list(key),
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Layers::defaults().resolve()
    }
}
