//! The command line, declared with clap and nothing else: the flags that are
//! settings become the top configuration layer (`commands::flags`), and the
//! rest of the program never looks at raw arguments. Those flags are
//! declared with their key, in the settings table (`config/keys.rs`), which
//! makes [`SettingArgs`], [`GlobalSettingArgs`] and [`DisplaySettingArgs`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::agent::Tool;
pub(crate) use crate::config::keys::{DisplaySettingArgs, GlobalSettingArgs, SettingArgs};

pub(crate) const EXAMPLES: &str = "\
Examples:
  ralph init                   scaffold prd.json, .ralph/config.toml and the skills
  ralph                        run up to 10 iterations over ./prd.json with claude
  ralph 25 --tool codex        up to 25 iterations with the Codex CLI
  ralph --gate \"cargo test\"    a story passes only when `cargo test` passes
  ralph --agent-cmd \"my-agent --fast\"
                               any other agent (the prompt goes to its stdin)
  ralph status                 what is done, what is next, why it stopped
  ralph monitor                the loop, its status and its live log side by side in tmux
  ralph --json >> run.jsonl    for cron and scripts: one JSON event per line
  ralph demo                   watch the loop on a built-in scripted agent (no API key)";

fn exit_codes() -> String {
    let mut s = String::from("Exit codes:\n");
    for (code, meaning) in crate::exit::TABLE {
        s.push_str(&format!("  {code:<4} {meaning}\n"));
    }
    s
}

/// Runs a coding agent in a loop over the stories of prd.json, one fresh
/// agent process per story, until every story is verified done.
#[derive(Debug, Parser)]
#[command(
    name = "ralph",
    version,
    about = "Run a coding agent in a loop over prd.json until every story is verified done",
    long_about = "Runs a coding agent (claude, amp, codex, gemini, opencode, cursor-agent, aider or any \
command) in a loop over the user stories of prd.json. Each iteration takes the unfinished story \
with the lowest priority number and hands it to a fresh agent process; memory between iterations \
lives in git, prd.json, progress.txt and a short handoff file. A story counts as done when ralph's \
gate (your test command) passes, not because the agent says so. A circuit breaker stops a loop \
that makes no progress, rate and usage limits are waited out, and a crash loses nothing: run \
ralph again and it resumes.",
    after_help = EXAMPLES,
    after_long_help = format!("{EXAMPLES}\n\n{}", exit_codes()),
    // Global options may come before a subcommand (`ralph -C dir status`);
    // run options given with another subcommand are refused in dispatch.
    subcommand_precedence_over_arg = true,
    override_usage = "ralph [OPTIONS] [MAX_ITERATIONS]\n       ralph [OPTIONS] <COMMAND>",
    subcommand_value_name = "COMMAND"
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(flatten)]
    pub(crate) run: RunArgs,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

#[derive(Debug, Args, Clone, Default)]
pub(crate) struct Global {
    /// Project directory (default: the current directory)
    #[arg(short = 'C', long = "dir", global = true, value_name = "DIR", env = "RALPH_PROJECT_DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Path of prd.json (default: ./prd.json, else ./scripts/ralph/prd.json)
    #[arg(long, global = true, value_name = "PATH", env = "RALPH_PRD_FILE")]
    pub(crate) prd: Option<PathBuf>,
    /// `--color`, declared with its key in `config::keys`.
    #[command(flatten)]
    pub(crate) settings: GlobalSettingArgs,
    /// How a run shows itself: [`Display`], given to the commands that run
    /// the loop or show its events, never parsed here.
    #[arg(skip)]
    pub(crate) display: Display,
    /// Machine-readable output: one JSON object per event of a run (see
    /// docs/events.md), one JSON document for other commands
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Ignore ~/.config/ralph/config.toml and .ralph/config.toml
    #[arg(long, global = true)]
    pub(crate) no_config: bool,
}

impl Global {
    /// These options with `display`, the run's, given after the command.
    pub(crate) fn showing(&self, display: &Display) -> Global {
        Global { display: display.clone(), ..self.clone() }
    }
}

/// How a run shows itself: the options of the commands that run the loop
/// (`ralph`, `run`, `monitor`, `demo`, `worker`) or print its events
/// (`deliver`). Only there are they offered; elsewhere they would do nothing.
#[derive(Debug, Args, Clone, Default, PartialEq)]
pub(crate) struct Display {
    /// `--progress`, declared with its key in `config::keys`.
    #[command(flatten)]
    pub(crate) settings: DisplaySettingArgs,
    /// Only iteration results and the final report; no agent output
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// More detail (agent output on the live display too)
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

/// The options of a run. Those that set a configuration key are in
/// [`SettingArgs`]; the rest act on this run only. `--help` lists the
/// display options, then the settings, then these (`display_order` 200 and
/// up: see `config::keys::settings!`).
#[derive(Debug, Args, Clone, Default, PartialEq)]
#[command(next_help_heading = "Run options")]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) display: Display,
    #[command(flatten)]
    pub(crate) settings: SettingArgs,
    /// Reset the circuit breaker to CLOSED and exit
    #[arg(long, display_order = 200)]
    pub(crate) reset_circuit: bool,
    /// Start a new run, breaker closed, instead of resuming a crashed one
    #[arg(long, display_order = 201)]
    pub(crate) fresh: bool,
    /// Run inside a tmux session with status and log panes
    #[arg(long, display_order = 202)]
    pub(crate) monitor: bool,
    /// Print what the next iteration would do (story, agent command and
    /// environment, prompt, gate) and change nothing
    #[arg(long, display_order = 203)]
    pub(crate) dry_run: bool,
    // The spellings of ralph-claude-code and other drivers, accepted and
    // not advertised: `commands::argv` folds them into ralph's own.
    /// Show the status and exit (ralph-claude-code's spelling of `ralph status`)
    #[arg(long, hide = true)]
    pub(crate) status: bool,
    /// The iteration count as a flag (`--max-iterations 5`, `-n 5`)
    #[arg(
        long = "max-iterations",
        short = 'n',
        value_name = "N",
        hide = true,
        conflicts_with = "max_iterations",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub(crate) iterations: Option<u32>,
}

/// The agents `--fallback-tool` may name: every tool but custom (the custom
/// command is the configured agent's).
pub(crate) const FALLBACK_TOOLS: [&str; 7] =
    ["claude", "amp", "codex", "gemini", "opencode", "cursor-agent", "aider"];

pub(crate) fn duration(s: &str) -> Result<String, crate::config::DurationError> {
    crate::config::parse_duration(s).map(|_| s.to_string())
}

// clap's value parsers take any error that is `Into<Box<dyn Error>>`:
// each keeps the typed error of the module that knows the syntax.
pub(crate) fn command(s: &str) -> Result<String, crate::agent::words::WordsError> {
    crate::agent::words::split(s).map(|_| s.to_string())
}

pub(crate) fn agent_command(s: &str) -> Result<String, crate::agent::words::WordsError> {
    crate::agent::words::command(s).map(|_| s.to_string())
}

/// A cost that is not a non-negative number of dollars.
#[derive(Debug, thiserror::Error)]
#[error("expected a non-negative number")]
pub(crate) struct NotAnAmount;

pub(crate) fn usd(s: &str) -> Result<f64, NotAnAmount> {
    match s.trim().parse::<f64>() {
        Ok(c) if c >= 0.0 && c.is_finite() => Ok(c),
        _ => Err(NotAnAmount),
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the loop (the default command)
    #[command(
        after_help = "Examples:\n  ralph run 20 --tool amp --gate \"npm test\"\n  ralph run --max-cost 5 --max-duration 2h --json >> ralph.jsonl"
    )]
    Run(RunArgs),
    /// Show stories, the circuit breaker, limits and the running loop
    #[command(
        after_help = "Examples:\n  ralph status\n  ralph status --all | less\n  ralph status --json | jq .stories\n  ralph status --watch"
    )]
    Status(StatusArgs),
    /// The runs in this project: when, how long, how each ended and what it cost
    #[command(
        after_help = "Examples:\n  ralph history\n  ralph history --since 7d --json | jq '.[] | .cost_usd'"
    )]
    History(HistoryArgs),
    /// One run story by story: attempts, time, tokens, cost, gates, commits, lessons
    #[command(
        long_about = "One run story by story: attempts, first pass or not, wall and agent time, \
tokens, cost, gate results, the commit that delivered it and the lessons it produced; then the \
totals: cost per delivered story, first-pass rate, time lost to limits and back-offs. Costs \
marked ~ are estimates from cost.prices. Every run writes this report as report.md beside its logs. \
Beyond 40 stories, it lists the ones the run touched and counts the rest; --all lists every one, and \
--json has them all.",
        after_help = "Examples:\n  ralph report                  the latest run, as Markdown\n  ralph report --all            every story, however many\n  ralph report 20261203 --json"
    )]
    Report(ReportArgs),
    /// Reset the circuit breaker to CLOSED
    #[command(after_help = "Example:\n  ralph reset-circuit && ralph")]
    ResetCircuit,
    /// Accept the run branch's .ralph/config.toml, and the tests its gate counts now
    #[command(
        long_about = "The settings that decide trust (gate.*, circuit.*, sandbox.*, agent.sandbox, agent.safe, \
agent.allowed_tools, agent.args, agent.command) are read from .ralph/config.toml as committed on \
the run's base branch \
(the branch ralph cut the run branch from, else main), never from what was committed on the run \
branch. `ralph trust` accepts the checked-out branch's committed copy as yours (that exact file: \
a later change of it is not accepted), and forgets the test counts ralph holds the branch's \
stories to (the next run's baseline sets them again).",
        after_help = "Example:\n  ralph status        # config: ralph/x changes gate.command …: ignored\n  ralph trust && ralph"
    )]
    Trust,
    /// Push a finished run's work and open or update its pull requests
    #[command(
        long_about = "Push a finished run's work and open or update its pull requests (merge \
requests on GitLab), as deliver.pr asks (run when it is off): one for the run branch, or one per \
story that passed (--pr=story). What is already open is updated, never opened twice, so this is \
also how a delivery that failed at the end of a run (a forge down, a rate limit, a refused \
token) is retried. The token comes from GH_TOKEN / GITHUB_TOKEN or GITLAB_TOKEN, else from \
`gh auth token` or `glab auth status -t`.",
        after_help = "Examples:\n  ralph deliver                 the latest run, one pull request\n  ralph deliver --pr=story      one per story\n  ralph deliver 20261203 --json"
    )]
    Deliver(DeliverArgs),
    /// Analyse a saved agent output (a log from .git/ralph/logs/ or any file)
    #[command(
        after_help = "Examples:\n  ralph analyze .git/ralph/logs/20261202-101500-3a7f-9c41e2/iter-3.log\n  ralph analyze out.jsonl --format claude --json"
    )]
    Analyze(AnalyzeArgs),
    /// Watch the loop on a built-in scripted agent in a throw-away project
    #[command(after_help = "Example:\n  ralph demo            (no API key needed)")]
    Demo(DemoArgs),
    /// Scaffold prd.json, .ralph/config.toml, the prompt and the agent skills
    #[command(
        long_about = "Scaffold prd.json, .ralph/config.toml (every setting commented at its default), \
.ralph/prompt.md (the iteration prompt, to customise), AGENTS.md and the prd and ralph skills \
where the chosen agent finds them. A file that already exists is kept as it is, so running \
init again is safe.",
        after_help = "Examples:\n  ralph init                 skills in .claude/skills/\n  ralph init --tool codex    skills in .agents/skills/"
    )]
    Init(InitArgs),
    /// Switch from ralph-claude-code or ralph.sh, or turn a markdown PRD into prd.json
    #[command(
        long_about = "Switch a project from ralph-claude-code (.ralph/PROMPT.md, fix_plan.md, AGENT.md, \
specs/, .ralphrc, or the older @fix_plan.md layout) or ralph.sh (scripts/ralph/) to ralph: the \
fix_plan checklist becomes prd.json, .ralphrc settings go to .ralph/config.toml (those with no \
meaning for fresh agent processes are reported as dropped, with why), ralph.sh's tool becomes \
agent.tool, and the old prompt is pointed to, or with --prompt becomes the template. It prints \
what it wrote and what it left alone; nothing of yours is overwritten without --force, and \
running it again changes nothing. Given a markdown PRD instead, the configured agent converts \
it following the ralph skill, and ralph checks the result before writing prd.json.",
        after_help = "Examples:\n  ralph import --dry-run        what it would write, writing nothing\n  ralph import --prompt         also make PROMPT.md (or ralph.sh's prompt) the template\n  ralph import tasks/prd-foo.md the agent converts a markdown PRD into prd.json"
    )]
    Import(ImportArgs),
    /// Which agent CLIs are installed, their versions, and what is missing
    #[command(alias = "doctor", after_help = "Example:\n  ralph agents")]
    Agents,
    /// Review rule candidates learned from repeated failures; arm the good ones
    #[command(
        subcommand,
        after_help = "Examples:\n  ralph rules list\n  ralph rules arm 3f2a9c1b --statement \"Run cargo fmt before committing\""
    )]
    Rules(RulesCommand),
    /// Show the effective configuration and where each value came from
    #[command(
        subcommand,
        after_help = "Examples:\n  ralph config show\n  RALPH_AGENT_TIMEOUT=45m ralph config show --json | jq '.[] | select(.key == \"agent.timeout\")'"
    )]
    Config(ConfigCommand),
    /// Start a tmux session: the loop, `ralph status --watch` and the live log
    #[command(
        after_help = "Example:\n  ralph monitor 20      (needs tmux; detach with Ctrl-b d and the loop keeps running)"
    )]
    Monitor(RunArgs),
    /// Serve a read-only web page of the project: stories, the live iteration, logs
    #[command(
        long_about = "Serve a read-only web page of the project: the stories board, the live \
iteration (the agent's latest lines, elapsed time, cost), the breaker, limits and budgets, and \
links to each iteration's log. It follows a loop running in another process (and shows the last \
one after it ended) through the files ralph keeps. `GET /api/status` is `ralph status --json`, \
`GET /events` the run's events as server-sent events. Binds 127.0.0.1; any other address needs \
a token on every request (one is generated and printed when --token is not given).",
        after_help = "Examples:\n  ralph serve                       http://127.0.0.1:8765/\n  ralph serve --port 9000 --bind 0.0.0.0 --token \"$(openssl rand -hex 16)\""
    )]
    Serve(ServeArgs),
    /// Print shell completions
    #[command(
        after_help = "Example:\n  ralph completions bash > ~/.local/share/bash-completion/completions/ralph"
    )]
    Completions {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff)
    #[command(after_help = "Example:\n  ralph man | man -l -")]
    Man,
    /// The scripted agent `ralph demo` runs (reads the prompt on stdin)
    #[command(name = "__demo-agent", hide = true)]
    DemoAgent {
        #[arg(long, default_value_t = 0.3)]
        pace: f64,
    },
    /// The gate `ralph demo` runs
    #[command(name = "__demo-check", hide = true)]
    DemoCheck { story: String },
    /// Work a run's stories together with other machines, through a git remote
    #[command(
        name = "worker",
        long_about = "Work a run's stories together with other machines (Kubernetes pods, a CI \
matrix, VMs), with the git remote as the only shared state: claim a story (a ref on the remote, \
with a lease this worker renews), work it with the usual iterations, deliver it to the run \
branch after the gate passed on the merged tree, and go on until no story is left.",
        after_help = "Examples:\n  ralph worker --remote git@github.com:me/app.git --dir /work/app\n  ralph worker --remote https://github.com/me/app.git --lease 5m --jobs 2"
    )]
    RemoteWorker(RemoteWorkerArgs),
    /// One turn of one story of a parallel run, in its worktree (started by ralph)
    #[command(name = "__worker", hide = true)]
    Worker(WorkerArgs),
    /// Ends what a run's children left running once that run is gone (started by ralph)
    #[command(name = "__watchdog", hide = true)]
    Watchdog {
        /// The ralph process it watches (`<pid>.<start time>`)
        instance: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct RemoteWorkerArgs {
    /// The shared repository (a URL or a path), cloned into --dir if it is not a clone yet
    /// [config: worker.remote]
    #[arg(long, value_name = "URL")]
    pub(crate) remote: Option<String>,
    /// The clone to work in [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// How long a claim holds without being renewed: a dead worker's story is free after it
    /// [config: worker.lease, default 10m]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub(crate) lease: Option<String>,
    /// This worker's name in claims [config: worker.id; default: <host>-<pid>]
    #[arg(long, value_name = "NAME")]
    pub(crate) id: Option<String>,
    #[command(flatten)]
    pub(crate) display: Display,
    #[command(flatten)]
    pub(crate) settings: SettingArgs,
}

/// What a parallel run tells each worker process it starts.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// The run's whole configuration, as one TOML document
    #[arg(long)]
    pub(crate) settings: PathBuf,
    #[arg(long)]
    pub(crate) story: String,
    /// The story's branch, checked out in the worktree
    #[arg(long)]
    pub(crate) branch: String,
    /// prd.json in the worktree
    #[arg(long)]
    pub(crate) prd_file: PathBuf,
    /// The prompt template
    #[arg(long)]
    pub(crate) template: Option<PathBuf>,
    /// Why the story was sent back from the merge queue
    #[arg(long)]
    pub(crate) feedback: Option<PathBuf>,
    /// Where its logs go
    #[arg(long)]
    pub(crate) log_dir: PathBuf,
    /// A resolver's task (JSON): merge the story onto the run branch instead of working on it
    #[arg(long)]
    pub(crate) resolve: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Redraw every few seconds until interrupted
    #[arg(long)]
    pub(crate) watch: bool,
    /// Seconds between redraws with --watch
    #[arg(long, default_value_t = 2, value_name = "SECONDS")]
    pub(crate) interval: u64,
    /// A run of `ralph worker --remote` workers, from the remote alone:
    /// stories, claims, workers and their last heartbeat
    #[arg(long, value_name = "URL")]
    pub(crate) remote: Option<String>,
    /// With --remote: only the run on this branch (default: every run there)
    #[arg(long, value_name = "BRANCH", requires = "remote")]
    pub(crate) branch: Option<String>,
    /// Every story, however many (beyond 40: counts, the ones that need
    /// attention and the next few; --json has every story)
    #[arg(long)]
    pub(crate) all: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The port to listen on (0: any free port)
    #[arg(long, default_value_t = 8765, value_name = "PORT")]
    pub(crate) port: u16,
    /// The address to listen on; any but loopback needs a token
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub(crate) bind: std::net::IpAddr,
    /// Required on every request, as ?token= or `Authorization: Bearer`
    /// (default: none on loopback, a generated one on any other address)
    #[arg(long, env = "RALPH_SERVE_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub(crate) token: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Only runs started this long ago or later ("7d", "12h", "30m")
    #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
    pub(crate) since: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub(crate) struct DeliverArgs {
    /// The run: its id or the start of it (default: the latest run)
    pub(crate) run: Option<String>,
    /// One pull request for the run, or one per story [default: deliver.pr, else run]
    #[arg(long, value_name = "MODE", value_parser = ["run", "story"])]
    pub(crate) pr: Option<String>,
    #[command(flatten)]
    pub(crate) display: Display,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The run: its id or the start of it (default: the latest run)
    pub(crate) run: Option<String>,
    /// Markdown, as written to report.md (the default; --json for the data)
    #[arg(long)]
    pub(crate) markdown: bool,
    /// Every story, however many (beyond 40: the ones the run touched, the
    /// rest counted)
    #[arg(long)]
    pub(crate) all: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AnalyzeArgs {
    /// The file to analyse
    pub(crate) file: PathBuf,
    /// How the agent formatted it (default: guessed from the content)
    #[arg(long, value_enum)]
    pub(crate) format: Option<crate::analyze::Format>,
}

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Where to create the demo project (default: a new temporary folder)
    #[arg(long, value_name = "DIR")]
    pub(crate) into: Option<PathBuf>,
    /// Seconds the scripted agent pauses between steps
    #[arg(long, default_value = "0.3", value_name = "SECONDS")]
    pub(crate) pace: f64,
    #[command(flatten)]
    pub(crate) display: Display,
}

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The project to import [default: the current directory], or a markdown PRD to convert
    #[arg(value_name = "PATH")]
    pub(crate) path: Option<PathBuf>,
    /// Show what would be written, and write nothing
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Replace files and settings of yours that the import would change
    #[arg(long)]
    pub(crate) force: bool,
    /// Make the old prompt (PROMPT.md, or ralph.sh's customised prompt) ralph's prompt template
    #[arg(long)]
    pub(crate) prompt: bool,
}

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// The agent to run (written as agent.tool); its skills folder receives the prd and ralph
    /// skills
    #[arg(long, value_enum, default_value = "claude")]
    pub(crate) tool: Tool,
    /// The verification gate, written as gate.command: a story passes only when this passes
    #[arg(long, value_name = "COMMAND", value_parser = command)]
    pub(crate) gate: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RulesCommand {
    /// All rule cards, candidates first
    List,
    /// One card in full
    Show {
        /// The rule's id, as `ralph rules list` shows it (a unique prefix is enough)
        id: String,
    },
    /// Put a rule into every prompt of this project
    Arm {
        /// The rule's id, as `ralph rules list` shows it (a unique prefix is enough)
        id: String,
        /// Your wording of the rule (default: the learned one)
        #[arg(long)]
        statement: Option<String>,
    },
    /// Never arm this rule
    Reject {
        /// The rule's id, as `ralph rules list` shows it (a unique prefix is enough)
        id: String,
    },
    /// Take an armed rule out of the prompts
    Demote {
        /// The rule's id, as `ralph rules list` shows it (a unique prefix is enough)
        id: String,
    },
    /// Put a rule away
    Archive {
        /// The rule's id, as `ralph rules list` shows it (a unique prefix is enough)
        id: String,
    },
    /// Make a rejected, demoted or archived rule a candidate again
    Revive {
        /// The rule's id, as `ralph rules list` shows it (a unique prefix is enough)
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Every setting with its value and where it came from
    #[command(
        after_help = "Sources, lowest first: default, ~/.config/ralph/config.toml, .ralph/config.toml, RALPH_* environment, flags.\n\nExample:\n  ralph config show"
    )]
    Show,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_definition_is_consistent() {
        // clap's own checks (duplicate flags, bad defaults, conflicting
        // settings), which otherwise run only when a debug build parses.
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
