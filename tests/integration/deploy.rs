//! The deployment recipes in deploy/ parse, carry the fields ralph relies
//! on, and call `ralph worker` only with flags it has.

use yaml_rust2::{Yaml, YamlLoader};

use crate::harness::RALPH;

fn load(path: &str) -> Yaml {
    let text = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}")).remove(0)
}

/// Every `--flag` of the `ralph worker` command lines in `text` is one
/// `ralph worker --help` lists.
fn flags_exist(text: &str) {
    let help = std::process::Command::new(RALPH).args(["worker", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    // The command (not a name such as "ralph worker 1" in git's config).
    let line = text
        .split("ralph worker ")
        .skip(1)
        .find(|rest| rest.starts_with("--"))
        .expect("a ralph worker command");
    let used: Vec<&str> = line
        .split_whitespace()
        .take_while(|w| !w.starts_with('#'))
        .filter(|w| w.starts_with("--"))
        .collect();
    assert!(used.contains(&"--remote"), "{line}");
    for flag in used {
        assert!(help.contains(&format!("{flag} ")), "ralph worker has no {flag}");
    }
}

#[test]
fn the_kubernetes_job_runs_n_indexed_workers_with_their_secrets() {
    let job = load("deploy/kubernetes/job.yaml");
    assert_eq!(job["apiVersion"].as_str(), Some("batch/v1"));
    assert_eq!(job["kind"].as_str(), Some("Job"));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    assert!(spec["parallelism"].as_i64().is_some_and(|n| n > 1));
    assert_eq!(spec["parallelism"], spec["completions"]);
    assert!(spec["backoffLimit"].as_i64().is_some());
    let pod = &spec["template"]["spec"];
    assert!(matches!(pod["restartPolicy"].as_str(), Some("OnFailure" | "Never")));
    let c = &pod["containers"][0];
    assert!(c["resources"]["requests"]["cpu"].as_str().is_some());
    assert!(c["resources"]["requests"]["memory"].as_str().is_some());
    let secrets: Vec<&str> = c["env"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|e| e["valueFrom"]["secretKeyRef"]["name"].as_str())
        .collect();
    assert!(secrets.contains(&"ralph-git") && secrets.contains(&"ralph-agent"), "{secrets:?}");
    let args = c["args"][0].as_str().unwrap();
    assert!(args.contains("JOB_COMPLETION_INDEX"));
    flags_exist(args);
}

#[test]
fn the_github_workflow_runs_a_matrix_of_workers_one_set_at_a_time() {
    let wf = load("deploy/github-actions/ralph-workers.yml");
    assert!(!wf["concurrency"]["group"].is_badvalue());
    assert_eq!(wf["permissions"]["contents"].as_str(), Some("write"));
    let job = &wf["jobs"]["worker"];
    assert!(job["strategy"]["matrix"]["worker"].as_vec().is_some_and(|v| v.len() > 1));
    let run: Vec<&str> =
        job["steps"].as_vec().unwrap().iter().filter_map(|s| s["run"].as_str()).collect();
    let worker = run.iter().find(|r| r.contains("ralph worker")).expect("a ralph worker step");
    flags_exist(worker);
}

#[test]
fn the_gitlab_job_runs_parallel_workers_one_set_at_a_time_with_a_push_token() {
    let ci = load("deploy/gitlab-ci/ralph-workers.yml");
    let job = &ci["ralph-workers"];
    assert!(job["parallel"].as_i64().is_some_and(|n| n > 1));
    assert!(job["resource_group"].as_str().is_some());
    // A shallow clone would leave the worker without the history it squashes onto.
    assert_eq!(job["variables"]["GIT_DEPTH"].as_str(), Some("0"));
    let script: Vec<&str> =
        job["script"].as_vec().unwrap().iter().filter_map(|s| s.as_str()).collect();
    let worker = script.iter().find(|r| r.contains("ralph worker")).expect("a ralph worker line");
    assert!(worker.contains("RALPH_PUSH_TOKEN") && worker.contains("CI_NODE_INDEX"), "{worker}");
    flags_exist(worker);
}

#[test]
fn the_systemd_unit_restarts_a_failed_worker_and_stops_it_with_sigterm() {
    let unit = std::fs::read_to_string(format!(
        "{}/deploy/systemd/ralph-worker@.service",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let key = |k: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k}"))
    };
    assert_eq!(key("Restart"), "on-failure");
    assert_eq!(key("KillSignal"), "SIGTERM");
    for section in ["[Unit]", "[Service]", "[Install]"] {
        assert!(unit.contains(section), "{section}");
    }
    flags_exist(key("ExecStart"));
}

/// A schema validator from PyPI (`.ci/install-schema-checkers.sh`), named by
/// `var`: `None` (the test says SKIPPED) when it is not installed, a failure
/// under `RALPH_REQUIRE_SCHEMA_CHECKERS=1`, which CI sets.
fn checker(var: &str) -> Option<std::path::PathBuf> {
    if let Some(bin) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        return Some(bin.into());
    }
    let required = std::env::var_os("RALPH_REQUIRE_SCHEMA_CHECKERS").is_some_and(|v| v == "1");
    assert!(!required, "{var} is not set: run .ci/install-schema-checkers.sh");
    eprintln!("SKIPPED: {var} is not set (.ci/install-schema-checkers.sh installs it)");
    None
}

/// Each recipe passes its engine's own schema (GitHub's and GitLab's
/// workflow schemas, the Kubernetes API's, strict), and a copy broken in
/// one field does not: the validators are really checking.
#[test]
fn the_recipes_pass_their_engines_schemas_and_a_broken_copy_does_not() {
    let (Some(check), Some(kube)) =
        (checker("RALPH_CHECK_JSONSCHEMA_BIN"), checker("RALPH_KUBERNETES_VALIDATE_BIN"))
    else {
        return;
    };
    let github = ["--builtin-schema", "vendor.github-workflows"];
    let gitlab = ["--builtin-schema", "vendor.gitlab-ci"];
    let cases: [(&std::path::Path, &[&str], &str, (&str, &str)); 3] = [
        (&check, &github, "deploy/github-actions/ralph-workers.yml", ("runs-on:", "runs_on:")),
        (&check, &gitlab, "deploy/gitlab-ci/ralph-workers.yml", ("parallel: 4", "parallel: many")),
        (
            &kube,
            &["--strict"],
            "deploy/kubernetes/job.yaml",
            ("parallelism: 4", "parallelism: four"),
        ),
    ];
    let tmp = tempfile::tempdir().unwrap();
    for (bin, args, rel, (field, broken)) in cases {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
        let run = |file: &std::path::Path| {
            let out = std::process::Command::new(bin).args(args).arg(file).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            // kubernetes-validate exits 0 on a resource it finds invalid.
            (out.status.success() && !text.contains("ERROR"), text)
        };
        let (ok, said) = run(&path);
        assert!(ok, "{rel} fails its schema: {said}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(field), "{rel} has no {field}");
        let copy = tmp.path().join(path.file_name().unwrap());
        std::fs::write(&copy, text.replacen(field, broken, 1)).unwrap();
        let (ok, said) = run(&copy);
        assert!(!ok, "{rel} with {broken:?} passes its schema: {said}");
    }
}
