//! `ralph rules`: a person's review of the rule candidates ralph learned
//! from repeated failures. Only a person arms a rule; armed rules go into
//! every prompt of the project.

use chrono::Utc;

use crate::cli::{Global, RulesCommand};
use crate::error::Error;
use crate::learn::rules::{self, Card};

use super::common::{print, print_json, project_dir};

fn print_card(g: &Global, card: &Card, verb: &str) -> Result<(), Error> {
    if g.json {
        print_json(card)
    } else if verb.is_empty() {
        print(&rules::render_card(card))
    } else {
        print(&format!("rule {} {verb}\n", card.id))
    }
}

pub(crate) fn run(g: &Global, cmd: RulesCommand) -> Result<u8, Error> {
    let store = crate::paths::Paths::resolve(&project_dir(g)?, g.prd.as_deref())?.store;
    let now = Utc::now();
    match cmd {
        RulesCommand::List => {
            let rules = rules::list(&store).map_err(Error::Rules)?;
            if g.json {
                print_json(&rules)?;
            } else {
                print(&rules::render_list(&rules))?;
            }
        }
        RulesCommand::Show { id } => {
            print_card(g, &rules::show(&store, &id).map_err(Error::Rules)?, "")?
        }
        RulesCommand::Arm { id, statement } => {
            let card = rules::arm(&store, &id, statement.as_deref(), now).map_err(Error::Rules)?;
            print_card(g, &card, "armed: it goes into every prompt from the next iteration on")?;
        }
        RulesCommand::Reject { id } => {
            print_card(g, &rules::reject(&store, &id, now).map_err(Error::Rules)?, "rejected")?
        }
        RulesCommand::Demote { id } => {
            print_card(g, &rules::demote(&store, &id, now).map_err(Error::Rules)?, "demoted")?
        }
        RulesCommand::Archive { id } => {
            print_card(g, &rules::archive(&store, &id, now).map_err(Error::Rules)?, "archived")?
        }
        RulesCommand::Revive { id } => print_card(
            g,
            &rules::revive(&store, &id, now).map_err(Error::Rules)?,
            "is a candidate again",
        )?,
    }
    Ok(0)
}
