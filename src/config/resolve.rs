//! The layers' values turned into the typed [`Config`].

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::Tool;
use crate::analyze::Format;

use super::keys::Setting;
use super::kind::{Kind, format_from, tool_from};
use super::{
    AgentConfig, BudgetConfig, CircuitConfig, Color, Config, CostConfig, GateConfig, HooksConfig,
    Layers, LimitsConfig, LogsConfig, MergeConfig, Progress, RunConfig, WorkerConfig,
    parse_duration,
};

impl Layers {
    /// The typed configuration.
    pub(crate) fn resolve(&self) -> Config {
        use Setting as S;
        let tool = tool_from(&self.str(S::AgentTool)).unwrap_or(Tool::Claude);
        let nonzero = |d: Duration| (!d.is_zero()).then_some(d);
        Config {
            agent: AgentConfig {
                tool,
                fallback: self.list(S::AgentFallback).iter().filter_map(|t| tool_from(t)).collect(),
                command: self.agent_command(S::AgentCommand),
                format: format_from(&self.str(S::AgentFormat)).unwrap_or(Format::Text),
                model: self.opt_str(S::AgentModel),
                args: self.list(S::AgentArgs),
                safe: self.bool(S::AgentSafe),
                allowed_tools: self.list(S::AgentAllowedTools),
                timeout: self.duration(S::AgentTimeout),
                idle_timeout: nonzero(self.duration(S::AgentIdleTimeout)),
                grace: self.duration(S::AgentGrace),
            },
            sandbox: crate::sandbox::Settings {
                mode: crate::sandbox::Mode::parse(&self.str(S::AgentSandbox)).unwrap_or_default(),
                read: self.list(S::SandboxRead),
                write: self.list(S::SandboxWrite),
                net: if self.str(S::SandboxNet) == "any" {
                    crate::sandbox::Net::Any
                } else {
                    crate::sandbox::Net::Ports
                },
                ports: self.ports(S::SandboxPorts),
            },
            run: RunConfig {
                max_iterations: self.u32_or(S::RunMaxIterations, u32::MAX),
                jobs: self.u32_or(S::RunJobs, 1).max(1),
                pause: self.duration(S::RunPause),
                prompt: self.opt_str(S::RunPrompt).map(PathBuf::from),
                context: self.list(S::RunContext),
                require_handoff: self.bool(S::RunRequireHandoff),
                commit_leftovers: self.bool(S::RunCommitLeftovers),
                allow_dirty: self.bool(S::RunAllowDirty),
            },
            gate: GateConfig {
                command: self.gate_command(S::GateCommand),
                timeout: self.duration(S::GateTimeout),
                tail_bytes: usize::try_from(self.int(S::GateTailBytes)).unwrap_or(4096),
                fatal_signatures: self.list(S::GateFatalSignatures),
                baseline: self.bool(S::GateBaseline),
                require_red: self.bool(S::GateRequireRed),
                protect: self.list(S::GateProtect),
                source: self.source(S::GateCommand).to_string(),
            },
            ignored: self.ignored.clone(),
            circuit: CircuitConfig {
                no_progress: self.u32_or(S::CircuitNoProgress, u32::MAX),
                same_error: self.u32_or(S::CircuitSameError, u32::MAX),
                permission_denials: self.u32_or(S::CircuitPermissionDenials, u32::MAX),
                failures: self.u32_or(S::CircuitFailures, u32::MAX),
                cooldown: self.duration(S::CircuitCooldown),
                auto_reset: self.bool(S::CircuitAutoReset),
            },
            limits: LimitsConfig {
                calls_per_hour: self.u32_or(S::LimitsCallsPerHour, u32::MAX),
                wait: self.bool(S::LimitsWait),
                max_wait: self.duration(S::LimitsMaxWait),
                usage_limit_wait: self.duration(S::LimitsUsageLimitWait),
                fallback_after: self.duration(S::LimitsFallbackAfter),
            },
            merge: MergeConfig {
                resolve: if self.str(S::MergeResolve) == "redo" {
                    crate::driver::ResolveMode::Redo
                } else {
                    crate::driver::ResolveMode::Agent
                },
                resolver: tool_from(&self.str(S::MergeResolver)),
                attempts: self.u32_or(S::MergeAttempts, 3).max(1),
                batch: self.u32_or(S::MergeBatch, 1).max(1),
            },
            worker: WorkerConfig {
                remote: self.opt_str(S::WorkerRemote),
                lease: self.duration(S::WorkerLease),
                id: self.opt_str(S::WorkerId),
            },
            budget: BudgetConfig {
                max_duration: nonzero(self.duration(S::BudgetMaxDuration)),
                max_cost: Some(self.float(S::BudgetMaxCost)).filter(|c| *c > 0.0),
                max_tokens: Some(self.int(S::BudgetMaxTokens)).filter(|t| *t > 0),
            },
            patterns: crate::analyze::PatternTexts {
                usage_limit: self.list(S::PatternsUsageLimit),
                billing: self.list(S::PatternsBilling),
                auth: self.list(S::PatternsAuth),
                rate_limit: self.list(S::PatternsRateLimit),
                overload: self.list(S::PatternsOverload),
                unreachable: self.list(S::PatternsUnreachable),
            },
            hooks: HooksConfig {
                on_iteration_end: self.command(S::HooksOnIterationEnd),
                on_complete: self.command(S::HooksOnComplete),
                on_halt: self.command(S::HooksOnHalt),
            },
            cost: CostConfig { prices: self.list(S::CostPrices) },
            logs: LogsConfig {
                keep_runs: self.int(S::LogsKeepRuns),
                keep_bytes: self.int(S::LogsKeepBytes),
                max_file_bytes: self.int(S::LogsMaxFileBytes),
            },
            notify: crate::notify::NotifyConfig {
                webhook: self.opt_str(S::NotifyWebhook),
                slack: self.opt_str(S::NotifySlack),
                ntfy: self.opt_str(S::NotifyNtfy),
                desktop: self.bool(S::NotifyDesktop),
                events: self.list(S::NotifyEvents),
                webhook_events: self.list(S::NotifyWebhookEvents),
                slack_events: self.list(S::NotifySlackEvents),
                ntfy_events: self.list(S::NotifyNtfyEvents),
                desktop_events: self.list(S::NotifyDesktopEvents),
                wait_longer_than: self.duration(S::NotifyWaitLongerThan),
                timeout: self.duration(S::NotifyTimeout),
            },
            deliver: crate::deliver::DeliverConfig {
                pr: crate::deliver::PrMode::parse(&self.str(S::DeliverPr)).unwrap_or_default(),
                forge: match self.str(S::DeliverForge).as_str() {
                    "github" => crate::deliver::target::ForgeSetting::Is(
                        crate::deliver::target::Forge::GitHub,
                    ),
                    "gitlab" => crate::deliver::target::ForgeSetting::Is(
                        crate::deliver::target::Forge::GitLab,
                    ),
                    _ => crate::deliver::target::ForgeSetting::Auto,
                },
                repo: self.opt_str(S::DeliverRepo),
                remote: self.opt_str(S::DeliverRemote).unwrap_or_else(|| "origin".into()),
                base: self.opt_str(S::DeliverBase),
                draft: self.bool(S::DeliverDraft),
                stack: self.bool(S::DeliverStack),
                api: self.opt_str(S::DeliverApi),
                timeout: self.duration(S::DeliverTimeout),
                reopen_on_close: self.bool(S::DeliverReopenOnClose),
            },
            color: match self.str(S::UiColor).as_str() {
                "always" => Color::Always,
                "never" => Color::Never,
                _ => Color::Auto,
            },
            progress: match self.str(S::UiProgress).as_str() {
                "plain" => Progress::Plain,
                "bar" => Progress::Bar,
                _ => Progress::Auto,
            },
        }
    }

    /// A setting's value, read as one of `kinds`: reading a setting as
    /// another type than its row's is a mistake every test that resolves
    /// a configuration catches.
    fn value(&self, setting: Setting, kinds: &[Kind]) -> &toml::Value {
        debug_assert!(
            kinds.contains(&setting.key().kind),
            "{} is a {:?}, read as one of {kinds:?}",
            setting.key().key,
            setting.key().kind
        );
        self.get(setting)
    }

    /// A string, or the name of one of a setting's choices.
    fn str(&self, s: Setting) -> String {
        use Kind::*;
        let choices =
            [Str, Tool, Format, Color, Progress, Resolve, MaybeTool, Sandbox, Net, Pr, Forge];
        self.value(s, &choices).as_str().unwrap_or_default().to_string()
    }

    fn opt_str(&self, s: Setting) -> Option<String> {
        Some(self.str(s)).filter(|s| !s.trim().is_empty())
    }

    fn bool(&self, s: Setting) -> bool {
        self.value(s, &[Kind::Bool]).as_bool().unwrap_or(false)
    }

    fn int(&self, s: Setting) -> u64 {
        let v = self.value(s, &[Kind::Int]);
        v.as_integer().and_then(|i| u64::try_from(i).ok()).unwrap_or(0)
    }

    /// An integer setting that must fit a `u32`; `fallback` when it does not.
    fn u32_or(&self, s: Setting, fallback: u32) -> u32 {
        u32::try_from(self.int(s)).unwrap_or(fallback)
    }

    fn float(&self, s: Setting) -> f64 {
        match self.value(s, &[Kind::Float]) {
            toml::Value::Float(f) => *f,
            toml::Value::Integer(i) => *i as f64,
            _ => 0.0,
        }
    }

    fn duration(&self, s: Setting) -> Duration {
        let text = self.value(s, &[Kind::Duration]).as_str().unwrap_or("0");
        parse_duration(text).unwrap_or_default()
    }

    fn list(&self, s: Setting) -> Vec<String> {
        strings(self.value(s, &[Kind::List, Kind::Tools]))
    }

    fn ports(&self, s: Setting) -> Vec<u16> {
        match self.value(s, &[Kind::Ports]) {
            toml::Value::Array(a) => a
                .iter()
                .filter_map(|v| v.as_integer().and_then(|p| u16::try_from(p).ok()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The agent's command and the environment its text gives it
    /// ([`crate::agent::words::command`]).
    fn agent_command(&self, s: Setting) -> crate::agent::words::AgentCommand {
        match self.value(s, &[Kind::AgentCommand]) {
            toml::Value::String(s) => crate::agent::words::command(s).unwrap_or_default(),
            v => crate::agent::words::AgentCommand { env: Vec::new(), argv: strings(v) },
        }
    }

    fn command(&self, s: Setting) -> Vec<String> {
        match self.value(s, &[Kind::Command]) {
            toml::Value::String(s) => crate::agent::words::split(s).unwrap_or_default(),
            v => strings(v),
        }
    }

    /// A gate given as text runs through `sh -c` when it has shell syntax
    /// ([`crate::gate::argv`]); an array is its argv.
    fn gate_command(&self, s: Setting) -> Vec<String> {
        match self.value(s, &[Kind::Command]) {
            toml::Value::String(s) => crate::gate::argv(s).unwrap_or_default(),
            v => strings(v),
        }
    }
}

/// The strings of an array value.
fn strings(value: &toml::Value) -> Vec<String> {
    match value {
        toml::Value::Array(a) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

impl Default for Config {
    fn default() -> Config {
        Layers::defaults().resolve()
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "agent.tool is a Tool, read as one of [Duration]")]
    fn reading_a_setting_as_another_type_is_caught() {
        Layers::defaults().duration(Setting::AgentTool);
    }
}
