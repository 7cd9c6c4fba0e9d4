//! Pull requests: the run's work pushed to a real git remote (`git daemon`
//! on 127.0.0.1) and opened on a scripted forge that speaks GitHub's or
//! GitLab's REST shapes (`forge.rs`). A refused token, an "already exists"
//! and a rate limit each leave the branches pushed and the run's result as
//! it was, and `ralph deliver` retries without opening anything twice.

use serde_json::{Value, json};

use crate::forge::{self, Canned, Daemon, Forge, Kind};
use crate::harness::*;

const TOKEN: &str = "test-forge-token-0123456789";

/// Three stories, each with its criteria.
const STORIES: &str = r#"{
  "project": "Demo",
  "branchName": "ralph/demo",
  "description": "test project",
  "userStories": [
    {"id": "US-001", "title": "First", "description": "As a user I see the first thing.", "acceptanceCriteria": ["the first file exists", "typecheck passes"], "priority": 1, "passes": false, "notes": ""},
    {"id": "US-002", "title": "Second", "description": "", "acceptanceCriteria": ["the second file exists"], "priority": 2, "passes": false, "notes": ""},
    {"id": "US-003", "title": "Third", "description": "", "acceptanceCriteria": ["the third file exists"], "priority": 3, "passes": false, "notes": ""}
  ]
}
"#;

/// A project with a remote served by git daemon and a forge of `kind`.
struct Setup {
    p: Project,
    bare: std::path::PathBuf,
    _daemon: Daemon,
    forge: Forge,
}

impl Setup {
    fn new(kind: Kind, extra_config: &str) -> Setup {
        let p = Project::with_prd(STORIES);
        let bare = forge::bare_remote(&p.dir(), p.tmp.path());
        let daemon = Daemon::serve(&bare);
        p.git(&["remote", "add", "origin", &daemon.url]);
        let forge = Forge::start(kind, TOKEN, &bare);
        // The config is ralph's own file, out of the run's commits.
        p.write(".ralph/config.toml", &format!("{}{extra_config}", forge.config()));
        p.git(&["add", "-A"]);
        p.git(&["commit", "-q", "-m", "ralph's settings"]);
        p.git(&["push", "-q", "origin", "main"]);
        p.script("[run *]\nimplement\n");
        Setup { p, bare, _daemon: daemon, forge }
    }

    fn ralph(&self, args: &[&str], token: &str) -> Run {
        let var = match self.forge.kind {
            Kind::GitHub => "GITHUB_TOKEN",
            Kind::GitLab => "GITLAB_TOKEN",
        };
        to_run(self.p.ralph().env(var, token).args(args).output().unwrap())
    }

    fn remote_branch(&self, b: &str) -> Option<String> {
        forge::branch_at(&self.bare, b)
    }

    /// The commit of ralph's `feat:` commit for a story on the local run branch.
    fn story_commit(&self, id: &str) -> String {
        let log = self.p.git(&["log", "--format=%H %s", "ralph/demo"]);
        log.lines()
            .find(|l| l.contains(&format!("feat: {id} ")))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .unwrap_or_else(|| panic!("no commit for {id} in\n{log}"))
    }

    /// The stories in the order their latest commits are on the run branch:
    /// the order a stack follows.
    fn stack_order(&self) -> Vec<String> {
        let log = self.p.git(&["log", "--first-parent", "--format=%H", "--reverse", "ralph/demo"]);
        let mut ids: Vec<(usize, String)> = ["US-001", "US-002", "US-003"]
            .iter()
            .map(|id| {
                let at = self.story_commit(id);
                (log.lines().position(|l| l == at).unwrap(), id.to_string())
            })
            .collect();
        ids.sort();
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// A `gh` on PATH that says the token (`gh auth token`): the token is
    /// then in no variable of ralph's environment. Returns that PATH.
    fn gh_on_path(&self) -> String {
        let bin = self.p.tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let gh = bin.join("gh");
        std::fs::write(
            &gh,
            format!("#!/bin/sh\n[ \"$1 $2\" = \"auth token\" ] || exit 1\necho {TOKEN}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
    }

    /// Nothing ralph keeps or printed holds the token.
    fn assert_token_kept_secret(&self, runs: &[&Run]) {
        for r in runs {
            assert!(!r.stdout.contains(TOKEN) && !r.stderr.contains(TOKEN), "{r:?}");
        }
        let out = std::process::Command::new("grep")
            .args(["-rl", TOKEN])
            .arg(self.p.path(".git"))
            .arg(self.p.path(".ralph"))
            .output()
            .unwrap();
        assert!(out.stdout.is_empty(), "the token is in {}", String::from_utf8_lossy(&out.stdout));
    }
}

fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn notices(stdout: &str) -> Vec<String> {
    events(stdout)
        .iter()
        .filter(|e| e["event"] == "notice")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn github_a_parallel_run_opens_a_stacked_pull_request_per_story_and_a_redo_updates_its_own() {
    let s = Setup::new(Kind::GitHub, "stack = true\n");
    // A gate whose test runner counts: the count is in each description.
    let gate = "test -d src && echo 'test result: ok. 4 passed; 0 failed; 0 ignored'";
    let r = s.ralph(&["12", "--jobs", "2", "--gate", gate, "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let prs = s.forge.prs();
    assert_eq!(prs.len(), 3, "{prs:?}\n{r:?}");
    // The stories in the order the queue merged them: each stacked on the one before.
    let first_order = s.stack_order();
    let mut order: Vec<(usize, &forge::Pr)> = prs
        .iter()
        .map(|pr| {
            let id = pr.head.rsplit('/').next().unwrap();
            let log = s.p.git(&["log", "--format=%s", "--reverse", "ralph/demo"]);
            (log.lines().position(|l| l.starts_with(&format!("feat: {id} "))).unwrap(), pr)
        })
        .collect();
    order.sort_by_key(|(i, _)| *i);
    let mut base = "main".to_string();
    for (_, pr) in &order {
        let id = pr.head.strip_prefix("ralph/demo-stories/").expect("a story branch");
        assert_eq!(pr.base, base, "{id}'s base");
        base = pr.head.clone();
        let title = match id {
            "US-001" => "First",
            "US-002" => "Second",
            _ => "Third",
        };
        assert_eq!(pr.title, format!("feat: {id} - {title}"));
        assert!(!pr.draft, "{id} was verified by the gate: {pr:?}");
        assert!(
            pr.body.contains("- verified: the gate passed on its work (4 tests pass)"),
            "{}",
            pr.body
        );
        assert!(pr.body.contains("### Acceptance criteria\n\n- [ ] "), "{}", pr.body);
        assert_eq!(
            s.remote_branch(&pr.head),
            Some(s.story_commit(id)),
            "{id}'s branch on the remote"
        );
    }
    let first = prs.iter().find(|p| p.head.ends_with("US-001")).unwrap();
    assert!(first.body.contains("As a user I see the first thing."), "{}", first.body);
    // The README shows this description: it must be what ralph renders.
    assert_eq!(masked(&first.body), masked(&readme_story_description()), "README.md is stale");
    assert!(
        first.body.contains("- [ ] the first file exists\n- [ ] typecheck passes\n"),
        "{}",
        first.body
    );
    let said = notices(&r.stdout);
    assert!(
        said.iter().any(|n| n.starts_with("opened pull request #")
            && n.contains("for US-002: https://github.example/acme/demo/pull/")),
        "{said:?}"
    );
    assert!(said.iter().any(|n| n == "pull requests: 3 opened"), "{said:?}");
    // run_end stays the run's last event.
    assert_eq!(events(&r.stdout).last().unwrap()["event"], "run_end");
    s.assert_token_kept_secret(&[&r]);

    // US-002 is redone: its branch moves to the new commit, its pull request
    // is brought up to date, nothing new is opened.
    let number = prs.iter().find(|p| p.head.ends_with("US-002")).unwrap().number;
    let mut prd: Value = s.p.prd();
    prd["userStories"][1]["passes"] = json!(false);
    s.p.write("prd.json", &serde_json::to_string_pretty(&prd).unwrap());
    s.p.git(&["commit", "-q", "-am", "redo US-002"]);
    let before = s.forge.writes().len();
    let r = s.ralph(&["5", "--gate", "test -d src", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let prs = s.forge.prs();
    assert_eq!(prs.len(), 3, "a redo opened another: {prs:?}");
    let redone = prs.iter().find(|p| p.number == number).unwrap();
    assert_eq!(s.remote_branch(&redone.head), Some(s.story_commit("US-002")));
    // The redone story's commit is now the run branch's last: the stack
    // follows, every pull request on the story before it, whichever run
    // delivered that one.
    let order = s.stack_order();
    assert_eq!(order.last().map(String::as_str), Some("US-002"), "{order:?}");
    let mut base = "main".to_string();
    for id in &order {
        let pr = prs.iter().find(|p| p.head == format!("ralph/demo-stories/{id}")).unwrap();
        assert_eq!(pr.base, base, "{id}'s base after the redo: {prs:?}");
        base = pr.head.clone();
    }
    // Written: the redone one, and the one that was stacked on it (now on
    // the story before). Nothing opened.
    let number_of = |id: &str| {
        prs.iter().find(|p| p.head == format!("ralph/demo-stories/{id}")).unwrap().number
    };
    let mut moved = vec![number];
    if let Some(next) = first_order.iter().skip_while(|id| *id != "US-002").nth(1) {
        moved.push(number_of(next));
        let onto = match order.iter().position(|id| id == next).unwrap() {
            0 => "main".to_string(),
            i => format!("ralph/demo-stories/{}", order[i - 1]),
        };
        let said = format!("restacked pull request #{} for {next} onto {onto}", number_of(next));
        assert!(notices(&r.stdout).iter().any(|n| n.starts_with(&said)), "{said}\n{r:?}");
    }
    moved.sort();
    let writes: Vec<_> = s.forge.writes().into_iter().skip(before).collect();
    assert!(writes.iter().all(|w| w.method == "PATCH"), "{writes:?}");
    let mut patched: Vec<u64> =
        writes.iter().map(|w| w.url.rsplit('/').next().unwrap().parse().unwrap()).collect();
    patched.sort();
    assert_eq!(patched, moved, "{writes:?}");
    assert!(
        notices(&r.stdout)
            .iter()
            .any(|n| n.starts_with(&format!("updated pull request #{number} for US-002"))),
        "{r:?}"
    );
}

#[test]
fn gitlab_a_run_opens_a_merge_request_per_story_and_adopts_one_a_person_opened() {
    let s = Setup::new(Kind::GitLab, "");
    // Someone already opened US-002's (409 when ralph opens it again).
    s.p.git(&["push", "-q", "origin", "main:refs/heads/ralph/demo-stories/US-002"]);
    let theirs = s.forge.add("ralph/demo-stories/US-002", "main", "WIP second");
    s.forge.state.lock().unwrap().ci = Some("running");
    let r = s.ralph(&["5", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let mrs = s.forge.prs();
    assert_eq!(mrs.len(), 3, "{mrs:?}\n{r:?}");
    for (id, title) in [("US-001", "First"), ("US-002", "Second"), ("US-003", "Third")] {
        let mr = mrs.iter().find(|m| m.head == format!("ralph/demo-stories/{id}")).unwrap();
        assert_eq!(mr.base, "main");
        // No gate: nothing verified it, so it stays a draft.
        assert_eq!(mr.title, format!("Draft: feat: {id} - {title}"), "{mr:?}");
        assert!(mr.body.contains("- passes; no gate ran, so nothing verified it"), "{}", mr.body);
        assert_eq!(s.remote_branch(&mr.head), Some(s.story_commit(id)));
    }
    assert_eq!(mrs.iter().find(|m| m.head.ends_with("US-002")).unwrap().number, theirs);
    let conflict = s.forge.seen().into_iter().find(|x| x.status == 409).expect("a 409");
    assert_eq!(conflict.method, "POST");
    assert!(
        s.forge
            .seen()
            .iter()
            .all(|x| x.headers.iter().any(|(k, v)| k == "private-token" && v == TOKEN))
    );
    let said = notices(&r.stdout);
    assert!(
        said.iter().any(|n| n == "merge requests: 2 opened, 1 updated"
            || n == "pull requests: 2 opened, 1 updated"),
        "{said:?}"
    );
    s.assert_token_kept_secret(&[&r]);

    // What ralph recorded, for status: each with its state and pipeline.
    let st = s.p.run(&["status", "--json"]);
    let v: Value = serde_json::from_str(&st.stdout).unwrap_or_else(|e| panic!("{e}: {st:?}"));
    let shown = v["pull_requests"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(shown.len(), 3, "{v}");
    assert!(
        shown
            .iter()
            .all(|p| p["state"] == "open"
                && p["url"].as_str().unwrap().contains("/-/merge_requests/")),
        "{v}"
    );

    // `ralph deliver` asks the forge again: each pipeline's state is shown.
    s.forge.state.lock().unwrap().ci = Some("failed");
    let d = s.ralph(&["deliver"], TOKEN);
    assert_eq!(d.code, 0, "{d:?}");
    let st = s.p.run(&["status"]);
    let lines: Vec<&str> = st.stdout.lines().filter(|l| l.contains("/-/merge_requests/")).collect();
    assert_eq!(lines.len(), 3, "{st:?}");
    assert!(lines.iter().all(|l| l.contains(" · CI failed · ")), "{lines:?}");
    let v: Value = serde_json::from_str(&s.p.run(&["status", "--json"]).stdout).unwrap();
    assert!(v["pull_requests"].as_array().unwrap().iter().all(|p| p["ci"] == "failure"), "{v}");
}

#[test]
fn a_refused_token_leaves_the_branch_pushed_and_the_exit_code_and_ralph_deliver_opens_it_once() {
    let s = Setup::new(Kind::GitHub, "");
    let r = s.ralph(&["5", "--gate", "test -d src", "--pr", "--json"], "a-wrong-token-0000000000");
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(s.forge.prs().is_empty());
    assert_eq!(s.forge.seen().last().unwrap().status, 401);
    let tip = s.p.git(&["rev-parse", "ralph/demo"]).trim().to_string();
    assert_eq!(s.remote_branch("ralph/demo"), Some(tip), "the run branch is on the remote");
    let warned: Vec<Value> = events(&r.stdout)
        .into_iter()
        .filter(|e| e["event"] == "notice" && e["level"] == "warn")
        .collect();
    assert!(
        warned.iter().any(|e| {
            let m = e["message"].as_str().unwrap();
            m.contains("GitHub refused the token (401: Bad credentials)")
                && m.contains("the branches are pushed and the run's result stands")
                && m.contains("run `ralph deliver --pr=run` to retry")
        }),
        "{r:?}"
    );
    assert!(!r.stdout.contains("a-wrong-token"), "{r:?}");

    // The retry, with the right token: one pull request, ready (the run is
    // complete and verified), its description the run's report.
    let d = s.ralph(&["deliver"], TOKEN);
    assert_eq!(d.code, 0, "{d:?}");
    let prs = s.forge.prs();
    assert_eq!(prs.len(), 1, "{prs:?}");
    let pr = &prs[0];
    assert_eq!((pr.head.as_str(), pr.base.as_str(), pr.draft), ("ralph/demo", "main", false));
    assert_eq!(pr.title, "Demo: 3 of 3 stories done");
    for want in ["## Stories", "| US-001 First | delivered |", "ralph report "] {
        assert!(pr.body.contains(want), "{want:?} not in\n{}", pr.body);
    }
    assert!(d.stdout.contains("opened pull request #1 for the run"), "{d:?}");

    // Again: nothing opened twice, nothing written.
    let writes = s.forge.writes().len();
    let again = s.ralph(&["deliver"], TOKEN);
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(s.forge.prs().len(), 1);
    assert_eq!(s.forge.writes().len(), writes, "{:?}", s.forge.writes());
    assert!(again.stdout.contains("pull requests: 1 already up to date"), "{again:?}");
    s.assert_token_kept_secret(&[&r, &d, &again]);

    // Its record lost (a fresh clone, say), `ralph deliver` finds it through
    // GitHub's 422 and brings it up to date instead of opening another.
    std::fs::remove_file(s.p.path(".git/ralph/deliver.json")).unwrap();
    let lost = s.ralph(&["deliver"], TOKEN);
    assert_eq!(lost.code, 0, "{lost:?}");
    assert_eq!(s.forge.prs().len(), 1);
    let seen = s.forge.seen();
    let exists = seen.iter().rev().find(|x| x.status == 422).expect("a 422");
    assert_eq!((exists.method.as_str(), exists.url.as_str()), ("POST", "/repos/acme/demo/pulls"));
    assert!(lost.stdout.contains("updated pull request #1 for the run"), "{lost:?}");
}

#[test]
fn a_short_rate_limit_is_waited_out_and_a_long_one_is_left_to_ralph_deliver() {
    let s = Setup::new(Kind::GitHub, "");
    // GitHub's secondary limit: 429 with Retry-After. One second: waited out.
    s.forge.can(Canned {
        method: "POST",
        skip: 0,
        status: 429,
        headers: vec![("Retry-After", "1".into())],
        body: json!({"message": "You have exceeded a secondary rate limit."}),
    });
    // An hour, at the next story's: the delivery stops there, the branches
    // already pushed.
    s.forge.can(Canned {
        method: "POST",
        skip: 1,
        status: 429,
        headers: vec![("Retry-After", "3600".into())],
        body: json!({"message": "You have exceeded a secondary rate limit."}),
    });
    let r = s.ralph(&["5", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let statuses: Vec<u16> =
        s.forge.seen().iter().filter(|x| x.method == "POST").map(|x| x.status).collect();
    assert_eq!(statuses, [429, 201, 429], "{:?}", s.forge.seen());
    assert_eq!(s.forge.prs().len(), 1);
    for id in ["US-001", "US-002", "US-003"] {
        assert_eq!(s.remote_branch(&format!("ralph/demo-stories/{id}")), Some(s.story_commit(id)));
    }
    let warn =
        notices(&r.stdout).into_iter().find(|n| n.contains("rate-limiting")).unwrap_or_default();
    assert!(
        warn.contains("GitHub is rate-limiting ralph (retry after 3600s)")
            && warn.contains("run `ralph deliver --pr=story` in 1h to retry"),
        "{r:?}"
    );
    // Later: the rest, and only the rest.
    let d = s.ralph(&["deliver", "--pr=story"], TOKEN);
    assert_eq!(d.code, 0, "{d:?}");
    let prs = s.forge.prs();
    assert_eq!(prs.len(), 3, "{prs:?}");
    assert!(d.stdout.contains("pull requests: 2 opened, 1 already up to date"), "{d:?}");
    let mut heads: Vec<&str> = prs.iter().map(|p| p.head.as_str()).collect();
    heads.sort();
    assert_eq!(
        heads,
        ["ralph/demo-stories/US-001", "ralph/demo-stories/US-002", "ralph/demo-stories/US-003"]
    );
}

#[test]
fn a_pull_request_closed_without_merging_turns_its_story_back_with_the_comment_as_its_lesson() {
    let s = Setup::new(Kind::GitHub, "reopen_on_close = true\n");
    let r = s.ralph(&["5", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let second = s.forge.prs().iter().find(|p| p.head.ends_with("US-002")).unwrap().number;
    s.forge.close(second, "Please reuse the date helper instead of a new one.");
    let runs_before = s.p.agent_runs().len();

    let r = s.ralph(&["5", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    // Only US-002 ran again, told why.
    assert_eq!(s.p.agent_runs()[runs_before..], ["US-002"], "{r:?}");
    let prompt = s.p.prompt(runs_before + 1);
    assert!(prompt.contains("Please reuse the date helper instead of a new one."), "{prompt}");
    assert!(
        notices(&r.stdout).iter().any(|n| n
            .starts_with(&format!("US-002's pull request #{second} was closed without merging"))),
        "{r:?}"
    );
    // Its redo is a new pull request; the closed one stays as the reviewer left it.
    let prs = s.forge.prs();
    assert_eq!(prs.len(), 4, "{prs:?}");
    assert_eq!(prs.iter().find(|p| p.number == second).unwrap().state, "closed");
    let new = prs.iter().find(|p| p.number == 4).unwrap();
    assert_eq!((new.head.as_str(), new.state), ("ralph/demo-stories/US-002", "open"));
    assert_eq!(s.remote_branch(&new.head), Some(s.story_commit("US-002")));

    // Told once: the next run does not reopen it again.
    let r = s.ralph(&["5", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(s.p.agent_runs().len(), runs_before + 1, "{r:?}");
}

#[test]
fn without_a_token_in_the_environment_gh_s_is_used_and_kept_off_the_disk() {
    let s = Setup::new(Kind::GitHub, "");
    // gh as `gh auth token --hostname H` answers: the token on stdout.
    let path = s.gh_on_path();
    let r =
        to_run(s.p.ralph().env("PATH", path).args(["5", "--pr=run", "--json"]).output().unwrap());
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert_eq!(s.forge.prs().len(), 1, "{r:?}");
    assert!(
        s.forge.seen().iter().all(|x| x
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && *v == format!("Bearer {TOKEN}"))),
        "{:?}",
        s.forge.seen()
    );
    s.assert_token_kept_secret(&[&r]);
}

#[test]
fn a_forge_that_is_down_leaves_the_story_branches_pushed_and_the_exit_code() {
    let s = Setup::new(Kind::GitHub, "");
    let down = RefusedPort::new();
    let config = s.forge.config().replace(&s.forge.api, &format!("http://127.0.0.1:{}", down.port));
    s.p.write(".ralph/config.toml", &config);
    s.p.git(&["commit", "-q", "-am", "a forge that is down"]);
    let r = s.ralph(&["5", "--gate", "test -d src", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    for id in ["US-001", "US-002", "US-003"] {
        assert_eq!(s.remote_branch(&format!("ralph/demo-stories/{id}")), Some(s.story_commit(id)));
    }
    let warn =
        notices(&r.stdout).into_iter().find(|n| n.contains("cannot reach")).unwrap_or_default();
    assert!(
        warn.starts_with("pull requests not delivered: cannot reach GitHub's API")
            && warn.ends_with("the branches are pushed and the run's result stands; run `ralph deliver --pr=story` to retry"),
        "{r:?}"
    );
    assert_eq!(events(&r.stdout).last().unwrap()["exit_code"], 0);
}

#[test]
fn a_failed_ready_for_review_is_reported_and_not_recorded_as_done() {
    let s = Setup::new(Kind::GitHub, "");
    // A person opened the run branch's pull request as a draft; the run
    // ends verified, so ralph adopts it and asks GitHub to make it ready.
    s.p.git(&["push", "-q", "origin", "main:refs/heads/ralph/demo"]);
    let theirs = s.forge.add("ralph/demo", "main", "WIP demo");
    s.forge.state.lock().unwrap().prs[0].draft = true;
    // GraphQL says no with a 200 and an `errors` list (the first POST is
    // the create that meets "already exists", the second the mutation).
    s.forge.can(Canned {
        method: "POST",
        skip: 1,
        status: 200,
        headers: Vec::new(),
        body: json!({"data": {"markPullRequestReadyForReview": null},
            "errors": [{"type": "UNPROCESSABLE", "message": "Pull request is in an unmergeable state"}]}),
    });
    let r = s.ralph(&["5", "--gate", "test -d src", "--pr=run", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    let graphql: Vec<_> = s.forge.seen().into_iter().filter(|x| x.url == "/graphql").collect();
    assert_eq!(graphql.len(), 1, "{:?}", s.forge.seen());
    assert!(s.forge.prs()[0].draft, "{:?}", s.forge.prs());
    let said = notices(&r.stdout);
    assert!(
        said.iter().any(|n| n.contains("for the run was refused")
            && n.contains(
                "GitHub did not mark it ready for review: Pull request is in an unmergeable state"
            )),
        "{said:?}"
    );
    assert!(said.iter().any(|n| n == "pull requests: 1 refused"), "{said:?}");
    assert!(!said.iter().any(|n| n.starts_with("updated pull request")), "{said:?}");

    // The retry makes it ready, once.
    let d = s.ralph(&["deliver"], TOKEN);
    assert_eq!(d.code, 0, "{d:?}");
    let prs = s.forge.prs();
    assert_eq!((prs.len(), prs[0].number, prs[0].draft), (1, theirs, false), "{prs:?}");
    assert!(d.stdout.contains(&format!("updated pull request #{theirs} for the run")), "{d:?}");
}

#[test]
fn ralph_deliver_of_an_older_run_uses_the_branch_that_run_worked_on() {
    let s = Setup::new(Kind::GitHub, "");
    let r = s.ralph(&["5", "--gate", "test -d src", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(s.forge.prs().is_empty());
    let run_id = run_id(&r.stdout);
    // prd.json moves on to the next feature before anyone delivers.
    let mut prd: Value = s.p.prd();
    prd["branchName"] = json!("ralph/next");
    s.p.write("prd.json", &serde_json::to_string_pretty(&prd).unwrap());

    let d = s.ralph(&["deliver", &run_id], TOKEN);
    assert_eq!(d.code, 0, "{d:?}");
    let prs = s.forge.prs();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!((prs[0].head.as_str(), prs[0].base.as_str()), ("ralph/demo", "main"));
    let tip = s.p.git(&["rev-parse", "ralph/demo"]).trim().to_string();
    assert_eq!(s.remote_branch("ralph/demo"), Some(tip));
    assert_eq!(s.remote_branch("ralph/next"), None);
}

#[test]
fn a_run_branch_cut_from_develop_opens_its_pull_requests_against_develop() {
    let s = Setup::new(Kind::GitHub, "");
    s.p.git(&["checkout", "-q", "-b", "develop"]);
    s.p.write("DEVELOP.md", "the integration branch\n");
    s.p.git(&["add", "DEVELOP.md"]);
    s.p.git(&["commit", "-q", "-m", "develop"]);
    s.p.git(&["push", "-q", "origin", "develop"]);
    let r = s.ralph(&["5", "--gate", "test -d src", "--pr=story", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(
        notices(&r.stdout).iter().any(|n| n == "created branch ralph/demo from develop"),
        "{r:?}"
    );
    let prs = s.forge.prs();
    assert_eq!(prs.len(), 3, "{prs:?}");
    assert!(prs.iter().all(|p| p.base == "develop"), "{prs:?}");
    let run_id = run_id(&r.stdout);

    // The next feature runs on a branch of its own; the first run's pull
    // requests, delivered again, stay on develop.
    let mut prd: Value = s.p.prd();
    prd["branchName"] = json!("ralph/next");
    s.p.write("prd.json", &serde_json::to_string_pretty(&prd).unwrap());
    s.p.git(&["commit", "-q", "-am", "next feature"]);
    let next = s.ralph(&["5", "--json"], TOKEN);
    assert_eq!(next.code, code(exit::COMPLETE), "{next:?}");
    let writes = s.forge.writes().len();
    let d = s.ralph(&["deliver", &run_id, "--pr=story"], TOKEN);
    assert_eq!(d.code, 0, "{d:?}");
    assert!(d.stdout.contains("pull requests: 3 already up to date"), "{d:?}");
    assert_eq!(s.forge.writes().len(), writes, "{:?}", s.forge.writes());
    assert!(s.forge.prs().iter().all(|p| p.base == "develop"), "{:?}", s.forge.prs());
}

#[test]
fn a_forge_error_that_echoes_the_token_never_shows_it() {
    let s = Setup::new(Kind::GitHub, "");
    let echo = || Canned {
        method: "*",
        skip: 0,
        status: 401,
        headers: Vec::new(),
        body: json!({"message": format!("Bad credentials: {TOKEN} is not a token")}),
    };
    // At the run's end, the token from the environment.
    s.forge.can(echo());
    let r = s.ralph(&["5", "--gate", "test -d src", "--pr", "--json"], TOKEN);
    assert_eq!(r.code, code(exit::COMPLETE), "{r:?}");
    assert!(
        notices(&r.stdout).iter().any(|n| n.contains(
            "GitHub refused the token (401: Bad credentials: [redacted GITHUB_TOKEN] is not a token)"
        )),
        "{r:?}"
    );
    // `ralph deliver`, the token from gh: in no variable ralph could know.
    s.forge.can(echo());
    let path = s.gh_on_path();
    let d = to_run(s.p.ralph().env("PATH", path).args(["deliver"]).output().unwrap());
    assert_eq!(d.code, code(exit::ENVIRONMENT), "{d:?}");
    assert!(d.stderr.contains("Bad credentials: [redacted RALPH_DELIVER_TOKEN]"), "{d:?}");
    s.assert_token_kept_secret(&[&r, &d]);
}

/// The run id of a `--json` run's `run_start`.
fn run_id(stdout: &str) -> String {
    events(stdout)
        .iter()
        .find(|e| e["event"] == "run_start")
        .and_then(|e| e["run_id"].as_str())
        .expect("a run_start")
        .to_string()
}

/// The story description README.md shows (its "as a test run … rendered
/// it" block).
fn readme_story_description() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let at = readme.find("A story's description, as a test run").expect("the README's example");
    let block = &readme[at..];
    let start = block.find("```markdown\n").unwrap() + "```markdown\n".len();
    let end = start + block[start..].find("\n```").unwrap();
    block[start..end].to_string()
}

/// A description with what changes from run to run — times, commit ids,
/// run ids — replaced by placeholders.
fn masked(text: &str) -> String {
    let time = regex::Regex::new(r"agent time [0-9.]+(ms|s)").unwrap();
    let sha = regex::Regex::new(r"\b[0-9a-f]{40}\b").unwrap();
    let run = regex::Regex::new(r"\b\d{8}-\d{6}-[0-9a-f]{4}-[0-9a-f]{6}\b").unwrap();
    let text = time.replace_all(text.trim_end(), "agent time T");
    let text = sha.replace_all(&text, "SHA");
    run.replace_all(&text, "RUN").into_owned()
}
