//! `ralph __worker`: one turn of one story of a parallel run, started by
//! the run itself in the story's worktree. It is the ordinary loop, held
//! to that story and to one iteration, with the run's configuration as
//! given and its events as JSON lines on stdout for the run to read.

use crate::cli::WorkerArgs;
use crate::config::Layers;
use crate::error::Error;
use crate::paths::Paths;

pub(crate) fn run(args: &WorkerArgs) -> Result<u8, Error> {
    let dir = std::env::current_dir().map_err(|e| Error::io("find the worktree", e))?;
    let paths = Paths::resolve(&dir, Some(&args.prd_file))?;
    // Exactly the run's configuration: no file or variable of the worktree's own.
    let config = Layers::load(None, &args.settings, &|_| None)?.resolve();
    let feedback = match &args.feedback {
        Some(f) => Some(std::fs::read_to_string(f).map_err(|e| Error::io("read the feedback", e))?),
        None => None,
    };
    let opts = crate::driver::Options {
        config,
        max_iterations: 1,
        prompt_file: args.template.clone(),
        fresh: false,
        explicit_max: true,
        agent_output: true,
        layers: None,
        mode: crate::driver::Mode::Worker(crate::driver::Worker {
            story: args.story.clone(),
            branch: args.branch.clone(),
            feedback,
            log_dir: args.log_dir.clone(),
            resolve: match &args.resolve {
                Some(f) => Some(crate::driver::ResolveSpec::load(f)?),
                None => None,
            },
        }),
    };
    let mut reporter = crate::ui::Json::new(std::io::stdout());
    crate::driver::run(&paths, &opts, &mut reporter)
}
