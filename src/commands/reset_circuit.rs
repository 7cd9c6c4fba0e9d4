//! `ralph reset-circuit` (also `ralph --reset-circuit`): closes the circuit
//! breaker by hand, and records that in its history.

use chrono::Utc;

use crate::circuit::Breaker;
use crate::cli::Global;
use crate::error::Error;

use super::common::{eprint, print, print_json, project_dir};

pub(crate) fn run(g: &Global) -> Result<u8, Error> {
    let paths = crate::paths::Paths::resolve(&project_dir(g)?, g.prd.as_deref())?;
    let store = paths.store;
    // A loop running on this PRD holds its own copy of the breaker and
    // would overwrite the reset at its next save.
    if let Some(holder) = store.lock_holder().filter(|h| h.works_on(&paths.prd)) {
        return Err(Error::Locked { holder, lock: store.lock_path() });
    }
    store.ensure().map_err(|e| Error::io(format!("create {}", store.root().display()), e))?;
    let now = Utc::now();
    let (mut breaker, warning) =
        Breaker::load(&store, now).map_err(|e| Error::io("read the circuit breaker", e))?;
    if let Some(w) = warning {
        eprint(&format!("warning: {w}\n"));
    }
    let before = breaker.state();
    breaker.reset(now, "reset by hand (ralph reset-circuit)");
    breaker.save(&store).map_err(|e| Error::io("write the circuit breaker", e))?;
    let history = store.circuit_history().display().to_string();
    if g.json {
        let v = serde_json::json!({"from": before.to_string(), "to": "CLOSED", "history": history});
        print_json(&v)?;
    } else {
        print(&format!("circuit breaker reset: {before} → CLOSED (recorded in {history})\n"))?;
    }
    Ok(0)
}
