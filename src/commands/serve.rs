//! `ralph serve`: the project's read-only web page (`crate::serve`), for
//! this project's status, its configuration's budgets and its run's files.

use std::net::SocketAddr;

use chrono::Utc;
use serde_json::json;

use crate::cli::{Global, ServeArgs, SettingArgs};
use crate::error::Error;
use crate::paths::Paths;
use crate::serve::{Server, Settings};

use super::common::{print, project_dir};
use super::flags::layers;
use super::status::gather;

pub(crate) fn run(g: &Global, args: &ServeArgs) -> Result<u8, Error> {
    let project = project_dir(g)?;
    let paths = Paths::resolve(&project, g.prd.as_deref())?;
    let config = layers(g, &paths.project, &SettingArgs::default())?.resolve();
    let token = match &args.token {
        Some(t) if !crate::serve::http::valid_token(t) => {
            return Err(Error::Usage(
                "--token: at least 8 letters, digits, `-`, `_`, `.` or `~` (it goes in URLs and cookies)"
                    .into(),
            ));
        }
        Some(t) => Some(t.clone()),
        None if args.bind.is_loopback() => None,
        None => Some(crate::serve::new_token().map_err(|e| Error::io("make a random token", e))?),
    };
    let budget = json!({
        "max_iterations": config.run.max_iterations,
        "max_cost_usd": config.budget.max_cost,
        "max_duration_s": config.budget.max_duration.map(|d| d.as_secs()),
        "max_tokens": config.budget.max_tokens,
        "calls_per_hour": config.limits.calls_per_hour,
    });
    let (calls, cooldown, gate) =
        (config.limits.calls_per_hour, config.circuit.cooldown, config.gate.command.clone());
    let at = paths.clone();
    let settings = Settings {
        store: paths.store.clone(),
        token: token.clone(),
        status: Box::new(move || {
            serde_json::to_value(gather(&at, calls, cooldown, &gate, Utc::now()))
                .unwrap_or_default()
        }),
        budget,
    };
    let server = Server::bind(SocketAddr::new(args.bind, args.port), settings)?;
    let addr = server.addr();
    let query = token.as_ref().map(|t| format!("?token={t}")).unwrap_or_default();
    let url = format!("http://{addr}/{query}");
    let line = if g.json {
        json!({"url": url, "addr": addr.to_string(), "token": token}).to_string() + "\n"
    } else {
        let note = match (&args.token, &token) {
            (None, Some(_)) => "\n  (a token was generated: requests without it are refused)",
            _ => "",
        };
        format!(
            "ralph serve: {url}{note}\n  read-only: the page of {}; Ctrl-C stops it\n",
            paths.project.display()
        )
    };
    print(&line)?;
    crate::signals::install();
    server.run(|| crate::signals::pending().is_some());
    Ok(0)
}
