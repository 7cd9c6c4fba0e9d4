//! `ralph [run] [N]`: the loop itself, handed to the driver.

use crate::cli::{Global, RunArgs};
use crate::error::Error;
use crate::paths::Paths;

use super::common::{project_dir, reporter};
use super::flags::layers;

pub(crate) fn run(g: &Global, args: &RunArgs) -> Result<u8, Error> {
    let project = project_dir(g)?;
    let paths = Paths::resolve(&project, g.prd.as_deref())?;
    if let Some(e) = super::import::missing_prd(&paths) {
        return Err(e);
    }
    let layers = layers(g, &paths.project, &args.settings)?;
    let config = layers.resolve();
    if args.dry_run {
        let opts = crate::driver::Options {
            max_iterations: config.run.max_iterations.max(1),
            prompt_file: args.settings.prompt.clone(),
            fresh: args.fresh,
            explicit_max: args.settings.max_iterations.is_some(),
            agent_output: false,
            mode: crate::driver::Mode::for_jobs(config.run.jobs),
            config,
            layers: None,
        };
        let plan = crate::driver::dry_run(&paths, &opts)?;
        let text = if g.json {
            serde_json::to_string_pretty(&plan).unwrap_or_default() + "\n"
        } else {
            plan.to_string()
        };
        use std::io::Write;
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
        return Ok(0);
    }
    let (mut reporter, _) = reporter(g, &config);
    if let Some(message) = super::import::notice(&paths, config.agent.tool) {
        reporter.emit(&crate::event::Event::Notice { level: crate::event::Level::Warn, message });
    }
    let opts = crate::driver::Options {
        max_iterations: config.run.max_iterations.max(1),
        prompt_file: args.settings.prompt.clone(),
        fresh: args.fresh,
        explicit_max: args.settings.max_iterations.is_some(),
        // The agent's lines are events whatever the terminal shows: the
        // run's events.jsonl has them (the renderer leaves out what it hides).
        agent_output: true,
        mode: crate::driver::Mode::for_jobs(config.run.jobs),
        config,
        layers: Some(layers),
    };
    crate::driver::run(&paths, &opts, reporter.as_mut())
}
