//! `ralph trust`: a person accepts what the run branch changed in what
//! decides trust — its committed `.ralph/config.toml` (which ralph reads
//! from the base branch otherwise) and the tests its gate counts now.

use crate::cli::Global;
use crate::error::Error;
use crate::oracle::base;
use crate::store::Store;

use super::common::{print, print_json, project_dir};

pub(crate) fn run(g: &Global) -> Result<u8, Error> {
    let paths = crate::paths::Paths::resolve(&project_dir(g)?, g.prd.as_deref())?;
    let config = Store::new(&paths.project).config();
    let accepted = base::accept(&paths.project, &config)
        .map_err(|e| Error::io("record the accepted config in trust.json", e))?;
    let branch = crate::git::Repo::discover(&paths.project).ok().and_then(|r| r.current_branch());
    let forgot = branch.as_deref().and_then(|b| {
        let record = base::test_record(&paths.project, b);
        if record.is_some() {
            base::set_test_record(&paths.project, b, None);
        }
        record
    });
    if g.json {
        let v = serde_json::json!({
            "branch": branch,
            "accepted": accepted.as_ref().map(|a| serde_json::json!({
                "path": a.path, "base": a.base, "blob": a.branch_blob,
            })),
            "tests_forgotten": forgot,
        });
        print_json(&v)?;
        return Ok(0);
    }
    let mut out = String::new();
    match &accepted {
        Some(a) => out.push_str(&format!(
            "accepted {} as committed on {} (instead of {}'s): its gate and trust settings apply from the next run\n",
            a.path.display(),
            a.branch,
            a.base
        )),
        None => out.push_str(&format!(
            "nothing to accept in {}: the branch's copy is its base's, or already accepted\n",
            config.display()
        )),
    }
    if let Some(r) = forgot {
        out.push_str(&format!(
            "forgot the test counts {} was held to ({}, since {}): the next run's baseline sets them\n",
            branch.unwrap_or_default(),
            r.counts.describe(),
            r.at
        ));
    }
    print(&out)?;
    Ok(0)
}
