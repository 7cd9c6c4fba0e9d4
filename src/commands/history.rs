//! `ralph history` and `ralph report`: what the recorded runs did, read
//! from their events (`history`). Read-only, without the lock: they work
//! while a loop runs.

use chrono::Utc;

use crate::cli::{Global, HistoryArgs, ReportArgs};
use crate::error::Error;
use crate::paths::Paths;
use crate::screenful::Show;

use super::common::{print, print_json, project_dir};

fn store(g: &Global) -> Result<crate::store::Store, Error> {
    Ok(Paths::resolve(&project_dir(g)?, g.prd.as_deref())?.store)
}

pub(crate) fn history(g: &Global, args: &HistoryArgs) -> Result<u8, Error> {
    let store = store(g)?;
    let since = args
        .since
        .map(|d| Utc::now() - chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX));
    let rows = crate::history::history(&store, since)
        .map_err(|e| Error::io(format!("read {}", store.logs_dir().display()), e))?;
    if g.json {
        print_json(&rows)?;
    } else {
        print(&crate::history::history_text(&rows))?;
    }
    Ok(0)
}

pub(crate) fn report(g: &Global, args: &ReportArgs) -> Result<u8, Error> {
    if g.json && args.markdown {
        return Err(Error::Usage("--json and --markdown: choose one".into()));
    }
    let store = store(g)?;
    let report = crate::history::find_report(&store, args.run.as_deref())?;
    if g.json {
        print_json(&report)?;
    } else {
        print(&crate::history::markdown(&report, Show::all_if(args.all)))?;
    }
    Ok(0)
}
