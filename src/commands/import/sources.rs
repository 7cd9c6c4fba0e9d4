//! Each old tool's files as plan steps: ralph-claude-code's (`.ralphrc`
//! settings, the fix_plan checklist as prd.json, the files the prompt
//! points to) and ralph.sh's (what ralph reads in place, the tool, the
//! prompt it may take as its template).

use std::path::{Path, PathBuf};

use toml::Value;

use super::config_file::Want;
use super::detect::{RalphSh, Rcc};
use super::fix_plan;
use super::plan::{Action, Ctx, Plan};
use super::ralphrc::{self, Mapping};

pub(super) fn from_rcc(
    ctx: &Ctx<'_>,
    rcc: &Rcc,
    plan: &mut Plan,
    wants: &mut Vec<Want>,
    context: &mut Vec<String>,
    template: &mut Option<(PathBuf, String)>,
) {
    let mut project_name = None;
    if let Some(rc) = &rcc.ralphrc {
        plan.sources.push(ctx.rel(rc));
        match std::fs::read_to_string(rc) {
            Ok(text) => {
                for e in ralphrc::parse(&text) {
                    let what = format!(".ralphrc {}", e.name);
                    match e.mapping {
                        Mapping::Set(pairs, note) => {
                            let set: Vec<String> =
                                pairs.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                            let note = note.map(|n| format!("; {n}")).unwrap_or_default();
                            plan.push(Action::Map, what, format!("→ {}{note}", set.join(", ")));
                            for (key, value) in pairs {
                                let from = format!(".ralphrc {} (line {})", e.name, e.line);
                                wants.retain(|w| w.key != key);
                                wants.push(Want { key, value, from });
                            }
                        }
                        Mapping::Project(name) => {
                            plan.push(
                                Action::Map,
                                what,
                                format!("→ prd.json \"project\": {name:?}"),
                            );
                            project_name = Some(name);
                        }
                        Mapping::Same => plan.push(Action::Keep, what, "ralph does this already"),
                        Mapping::Dropped(why) => plan.push(Action::Drop, what, why),
                        Mapping::Invalid(why) => {
                            plan.push(Action::Skip, what, format!("line {}: {why}", e.line))
                        }
                        Mapping::Unknown => plan.push(
                            Action::Skip,
                            what,
                            "not a setting ralph-claude-code documents; left alone",
                        ),
                    }
                }
            }
            Err(e) => plan.push(Action::Skip, ctx.rel(rc), format!("cannot read it: {e}")),
        }
    }
    if let Some(fp) = &rcc.fix_plan {
        plan.sources.push(ctx.rel(fp));
        prd_from_fix_plan(ctx, fp, project_name, plan);
    }
    if let Some(p) = &rcc.prompt {
        plan.sources.push(ctx.rel(p));
        if ctx.opts.prompt {
            match std::fs::read_to_string(p) {
                Ok(text) => *template = Some((p.clone(), text)),
                Err(e) => plan.push(Action::Skip, ctx.rel(p), format!("cannot read it: {e}")),
            }
        } else {
            plan.push(
                Action::Keep,
                ctx.rel(p),
                "ralph's prompt points the agent to it (run.context); --prompt makes it the template instead",
            );
            context.push(ctx.rel(p));
        }
    }
    for (file, what) in [(&rcc.agent, "build instructions"), (&rcc.specs, "specs")] {
        if let Some(f) = file {
            plan.sources.push(ctx.rel(f));
            let note = format!("{what}: stays where it is, and ralph's prompt points to it");
            plan.push(Action::Keep, ctx.rel(f), note);
            context.push(ctx.rel(f));
        }
    }
}

fn prd_from_fix_plan(ctx: &Ctx<'_>, fp: &Path, project: Option<String>, plan: &mut Plan) {
    let rel = ctx.rel(fp);
    let text = match std::fs::read_to_string(fp) {
        Ok(t) => t,
        Err(e) => return plan.push(Action::Skip, rel, format!("cannot read it: {e}")),
    };
    let items = fix_plan::ordered(fix_plan::parse(&text));
    if items.is_empty() {
        return plan.push(Action::Skip, rel, "no `- [ ]` checklist items to turn into stories");
    }
    let done = items.iter().filter(|i| i.done).count();
    let stories = fix_plan::stories(&items, &rel);
    let name = project.unwrap_or_else(|| {
        let dir = ctx.project.file_name().map(|n| n.to_string_lossy().into_owned());
        dir.unwrap_or_else(|| "project".into())
    });
    let slug: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let prd = serde_json::json!({
        "project": name,
        "branchName": format!("ralph/{}", if slug.is_empty() { "import" } else { &slug }),
        "description": format!("Imported from {rel} by ralph import"),
        "userStories": stories,
    });
    let content = serde_json::to_string_pretty(&prd).unwrap_or_default() + "\n";
    let target = ctx.paths.prd.clone();
    let note = format!(
        "{} from {rel}, {done} done; {rel} stays, ralph does not read it again",
        crate::text::count(items.len(), "story", "stories")
    );
    // Already imported, and worked on since: the same stories are there.
    if let Ok(old) = crate::prd::Prd::load(&target) {
        let same = old.stories().len() == items.len()
            && old
                .stories()
                .iter()
                .zip(&stories)
                .all(|(s, n)| s.id == n["id"] && s.title == n["title"]);
        if same {
            let note = format!("already imported from {rel} (its stories' progress is kept)");
            return plan.push(Action::Keep, ctx.rel(&target), note);
        }
    }
    plan.file(ctx.rel(&target), target, content, ctx, note);
}

pub(super) fn from_ralph_sh(
    ctx: &Ctx<'_>,
    sh: &RalphSh,
    plan: &mut Plan,
    wants: &mut Vec<Want>,
    template: &mut Option<(PathBuf, String)>,
) {
    let in_place = "ralph reads it in place";
    for f in [&sh.prd, &sh.progress, &sh.archive].into_iter().flatten() {
        let note = if ctx.paths.prd == *f || Some(f) != sh.prd.as_ref() {
            in_place.to_string()
        } else {
            format!("ralph uses {} instead, which is there too", ctx.rel(&ctx.paths.prd))
        };
        plan.push(Action::Keep, ctx.rel(f), note);
    }
    let tool = sh.tool.name();
    match sh.tool {
        crate::agent::Tool::Claude => plan.push(
            Action::Keep,
            "ralph.sh --tool claude",
            format!("ralph runs claude by default; {}", sh.tool_because),
        ),
        _ => {
            plan.push(
                Action::Map,
                format!("ralph.sh --tool {tool}"),
                format!("→ agent.tool = \"{tool}\"; {}", sh.tool_because),
            );
            wants.push(Want {
                key: "agent.tool",
                value: Value::String(tool.into()),
                from: format!("ralph.sh ({})", sh.tool_because),
            });
        }
    }
    if let Some(p) = &sh.prompt {
        let rel = ctx.rel(&p.path);
        plan.sources.push(rel.clone());
        if !p.customised {
            plan.push(
                Action::Keep,
                rel,
                "upstream's text, unchanged: ralph's built-in prompt does its job",
            );
        } else if !ctx.opts.prompt {
            plan.push(Action::Keep, rel, "customised: --prompt makes it ralph's prompt template (until then ralph uses its built-in one)");
        } else if template.is_some() {
            plan.push(
                Action::Keep,
                rel,
                "customised, but PROMPT.md is the template: one project, one template",
            );
        } else {
            match std::fs::read_to_string(&p.path) {
                Ok(text) => *template = Some((p.path.clone(), text)),
                Err(e) => plan.push(Action::Skip, rel, format!("cannot read it: {e}")),
            }
        }
    }
    if let Some(p) = &sh.other_prompt {
        plan.push(
            Action::Keep,
            ctx.rel(&p.path),
            format!("the prompt of the tool ralph.sh did not run: it ran {tool}"),
        );
    }
    if let Some(s) = &sh.script {
        plan.push(Action::Keep, ctx.rel(s), format!("`ralph` replaces it: `./ralph.sh --tool {tool} 10` is `ralph 10` with agent.tool = \"{tool}\""));
    }
}
