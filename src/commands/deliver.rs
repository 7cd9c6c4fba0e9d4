//! `ralph deliver [RUN]`: a finished run's work pushed and its pull
//! requests opened or brought up to date (`deliver`); safe to run again.

use crate::cli::{DeliverArgs, Global, SettingArgs};
use crate::deliver::{self, PrMode};
use crate::error::Error;
use crate::event::{Event, Level};
use crate::paths::Paths;

use super::common::{project_dir, reporter};
use super::flags::layers;

pub(crate) fn run(g: &Global, args: &DeliverArgs) -> Result<u8, Error> {
    let project = project_dir(g)?;
    let paths = Paths::resolve(&project, g.prd.as_deref())?;
    let config = layers(g, &paths.project, &SettingArgs::default())?.resolve();
    let cfg = &config.deliver;
    let report = crate::history::find_report(&paths.store, args.run.as_deref())?;
    if report.summary.ended_at.is_none() {
        return Err(Error::Usage(format!(
            "run {} has not ended: its pull requests are opened when it ends, or by `ralph deliver` after",
            report.summary.run_id
        )));
    }
    let prd = std::fs::read(&paths.prd)
        .ok()
        .and_then(|bytes| crate::prd::Prd::parse(&bytes, &paths.prd).ok());
    let repo = crate::git::Repo::discover(&paths.project)?;
    // The branch the run worked on, as it said at its start: prd.json may
    // have moved on to another feature since.
    let branch = report
        .summary
        .branch
        .clone()
        .or_else(|| prd.as_ref().and_then(|p| p.branch_name().map(str::to_string)))
        .or_else(|| repo.current_branch())
        .unwrap_or_default();
    let workdir = repo.workdir();
    let record = paths.store.path(deliver::record::FILE);
    // Without `--pr` or `deliver.pr`: as the branch was delivered before
    // (a run delivered per story is brought up to date per story), else
    // one pull request for the run.
    let mode = match args.pr.as_deref() {
        Some(m) => PrMode::parse(m).unwrap_or(PrMode::Run),
        None if cfg.pr == PrMode::Off => {
            deliver::record::Record::load(&record).mode_of(&branch).unwrap_or(PrMode::Run)
        }
        None => cfg.pr,
    };
    let job = deliver::Job {
        project: &workdir,
        record,
        branch,
        report: &report,
        prd: prd.as_ref(),
        mode,
    };
    let (mut out, _) = reporter(g, &config);
    let env = |k: &str| std::env::var(k).ok();
    let mut say = |message: String| out.emit(&Event::Notice { level: Level::Info, message });
    match deliver::deliver(cfg, &job, &env, &mut say) {
        Ok(done) => {
            let refused = !done.refused.is_empty();
            say(done.summary());
            Ok(if refused { crate::exit::ENVIRONMENT } else { crate::exit::COMPLETE })
        }
        Err(source) => Err(Error::Deliver { source, mode }),
    }
}
