//! Red, then green, carried out (the decisions are `oracle::red`): before
//! any agent is paid for a story whose own check must be seen failing
//! first, the check runs on the run's base — the base's files written out
//! under ralph's state, sandboxed like the gate — once per base tree.

use std::path::PathBuf;

use super::{End, Run};
use crate::gate::Gate;
use crate::git::GitError;
use crate::oracle::base::{self, RedRecord};
use crate::oracle::red::{self, BaseRun, OnBase, RedEvidence};
use crate::prd::{Prd, Story};
use crate::process::Signal;

/// The base a run's stories are checked on.
struct Base {
    name: String,
    commit: git2::Oid,
    tree: String,
    /// Its files, once written out.
    files: Option<PathBuf>,
}

impl Run<'_> {
    /// Checks every unfinished story that must be red first and was not
    /// yet checked (or whose check changed). Returns the stories whose
    /// check proves nothing, with why: they are set aside. `Err` when a
    /// signal stopped the check.
    pub(super) fn red_checks(&mut self, prd: &Prd) -> Result<Vec<(String, String)>, End> {
        let Some(gate) = self.kit.gate.clone() else { return Ok(Vec::new()) };
        if self.opts.mode.worker().is_some() {
            return Ok(Vec::new());
        }
        let stories: Vec<&Story> = prd
            .stories()
            .iter()
            .filter(|s| !s.passes && red::required(self.cfg.gate.require_red, s.verify.is_some()))
            .collect();
        let mut base: Option<Base> = None;
        let mut set_aside = Vec::new();
        for story in stories {
            let Some(check) = self.gate_command(story) else { continue };
            let shown = crate::gate::display(&check);
            let known = self.state.stories.get(&story.id).and_then(|t| t.findings.red.clone());
            let evidence = match known.filter(|e| e.check == shown) {
                Some(e) => e,
                None => {
                    if base.is_none() {
                        base = self.red_base();
                    }
                    let Some(b) = base.as_mut() else {
                        self.warn(format!(
                            "{}: cannot find the run's base to see its check fail before any \
                             work (gate.require_red); it is checked after its work only",
                            story.id
                        ));
                        continue;
                    };
                    let e = self.red_on_base(&gate, b, story, &check)?;
                    self.state.stories.entry(story.id.clone()).or_default().findings.red =
                        Some(e.clone());
                    e
                }
            };
            match evidence.on_base() {
                OnBase::ProvesNothing => {
                    let why = evidence.proves_nothing(&shown);
                    set_aside.push((story.id.clone(), why));
                }
                OnBase::Red => {}
            }
        }
        if let Some(dir) = base.and_then(|b| b.files) {
            let _ = std::fs::remove_dir_all(dir);
        }
        for (id, why) in &set_aside {
            self.warn(format!("{id} is set aside: {why}"));
        }
        Ok(set_aside)
    }

    /// The run's base: the branch the run branch was cut from, else the
    /// commit the run works on now (a run on the base itself).
    fn red_base(&self) -> Option<Base> {
        let branch = self.tests_branch();
        let named = branch
            .as_deref()
            .and_then(|b| base::base_branch(&self.paths.project, b))
            .and_then(|name| Some((self.repo.branch_tip(&name)?, name)));
        let (commit, name) = match named {
            Some(found) => found,
            None => (self.repo.head()?, branch.unwrap_or_else(|| "HEAD".into())),
        };
        let tree = self.repo.tree_of(commit)?.to_string();
        Some(Base { name, commit, tree, files: None })
    }

    /// Runs `check` on the base's files (or takes its cached result).
    fn red_on_base(
        &mut self,
        gate: &Gate,
        base: &mut Base,
        story: &Story,
        check: &[String],
    ) -> Result<RedEvidence, End> {
        let shown = crate::gate::display(check);
        let (name, commit) = (base.name.clone(), base.commit.to_string());
        let evidence = |r: RedRecord| RedEvidence {
            base: name.clone(),
            commit: commit.clone(),
            check: shown.clone(),
            passed_on_base: r.passed,
            detail: r.detail,
        };
        if let Some(r) = base::red_record(&self.paths.project, &base.tree, &shown) {
            return Ok(evidence(r));
        }
        let record = match self.base_files(base) {
            Ok(dir) => {
                let log = self.kit.log_dir.join(format!("red-{}.log", story.id));
                let cwd = match self.repo.relative(&self.paths.project) {
                    Some(rel) => dir.join(rel),
                    None => dir.clone(),
                };
                let run = gate.run(check, &cwd, Some(&log));
                if let Ok(v) = &run
                    && v.interrupted
                {
                    let signal = crate::signals::pending().unwrap_or(Signal::Term);
                    return Err(End::interrupted(signal));
                }
                let (how, detail) = match run {
                    Ok(v) if v.passed => (BaseRun::Passed, "passes".to_string()),
                    Ok(v) if v.timed_out => (BaseRun::TimedOut, "timed out".to_string()),
                    Ok(v) => (
                        BaseRun::Failed,
                        v.exit_code.map_or("killed".to_string(), |c| format!("exit {c}")),
                    ),
                    Err(e) => (BaseRun::NotRun, format!("cannot run: {}", e.message)),
                };
                RedRecord { passed: red::on_base(how) == OnBase::ProvesNothing, detail }
            }
            Err(why) => {
                self.warn(format!(
                    "{}: cannot write out the base's files to run its check on ({why}); it is \
                     checked after its work only",
                    story.id
                ));
                return Ok(RedEvidence {
                    passed_on_base: false,
                    detail: format!("not run: {why}"),
                    ..evidence(RedRecord { passed: false, detail: String::new() })
                });
            }
        };
        base::set_red_record(&self.paths.project, &base.tree, &shown, record.clone());
        let e = evidence(record);
        if e.on_base() == OnBase::Red {
            self.notice(format!(
                "{}: its check fails before any work, as it should ({e})",
                story.id
            ));
        }
        Ok(e)
    }

    /// The base's files, written out once per check of the run.
    fn base_files(&self, base: &mut Base) -> Result<PathBuf, GitError> {
        if let Some(dir) = &base.files {
            return Ok(dir.clone());
        }
        let dir = self.paths.store.path("red").join(&base.tree[..base.tree.len().min(12)]);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| GitError::io(format!("remove {}", dir.display()), e))?;
        }
        self.repo.export_commit(base.commit, &dir)?;
        base.files = Some(dir.clone());
        Ok(dir)
    }
}
