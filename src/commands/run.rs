//! `ralph [run] [N]`: the loop itself, handed to the driver.

use crate::cli::{Global, RunArgs};
use crate::error::Error;
use crate::paths::Paths;

use super::common::{project_dir, reporter};
use super::flags::layers;

pub(crate) fn run(g: &Global, args: &RunArgs) -> Result<u8, Error> {
    let project = project_dir(g)?;
    let paths = Paths::resolve(&project, g.prd.as_deref())?;
    let layers = layers(g, &paths.project, &args.settings)?;
    let config = layers.resolve();
    let (mut reporter, style) = reporter(g, &config);
    let opts = crate::driver::Options {
        max_iterations: config.run.max_iterations.max(1),
        prompt_file: args.settings.prompt.clone(),
        fresh: args.fresh,
        explicit_max: args.settings.max_iterations.is_some(),
        agent_output: style.agent_output || g.json,
        config,
    };
    crate::driver::run(&paths, &opts, reporter.as_mut())
}
