use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;

/// A home as a table of folders and their entries.
struct Tree(BTreeMap<PathBuf, Vec<String>>);

impl Tree {
    fn new(rows: &[(&str, &[&str])]) -> Tree {
        Tree(
            rows.iter()
                .map(|(dir, names)| {
                    (PathBuf::from(dir), names.iter().map(|n| n.to_string()).collect())
                })
                .collect(),
        )
    }

    fn list(&self, dir: &Path) -> Names {
        self.0.get(dir).cloned().unwrap_or_default().into()
    }
}

fn home_tree() -> Tree {
    Tree::new(&[
        (
            "/home/u",
            &[
                ".ssh",
                ".aws",
                ".config",
                ".cargo",
                ".rustup",
                ".npm",
                ".local",
                ".netrc",
                ".bashrc",
                ".claude",
                ".claude.json",
                ".gitconfig",
                ".aider.conf.yml",
                "code",
                "notes.txt",
                "proj2",
                "client-repo",
                "Documents",
            ],
        ),
        ("/home/u/client-repo", &[".git", ".env"]),
        ("/home/u/proj2", &[".git", "src"]),
        ("/home/u/Documents", &["cv.pdf"]),
        ("/home/u/.config", &["gcloud", "gh", "nvim", "git"]),
        ("/home/u/.cargo", &["bin", "registry", "credentials.toml"]),
        ("/home/u/code", &["proj", "other", "secret-client"]),
        ("/home/u/.local", &["bin", "share"]),
        ("/home/u/.local/share", &["keyrings", "fonts"]),
        ("/srv/cargo", &["bin", "registry", "credentials.toml"]),
    ])
}

struct Case {
    tool: Option<Tool>,
    work_tree: Vec<PathBuf>,
    env: Vec<(&'static str, &'static str)>,
    urls: Vec<String>,
    programs: Vec<PathBuf>,
    path: Vec<PathBuf>,
    settings: Settings,
}

impl Default for Case {
    fn default() -> Case {
        Case {
            tool: Some(Tool::Claude),
            work_tree: vec![PathBuf::from("/home/u/code/proj")],
            env: Vec::new(),
            urls: Vec::new(),
            programs: Vec::new(),
            path: Vec::new(),
            settings: Settings::default(),
        }
    }
}

fn run(case: &Case) -> Policy {
    let tree = home_tree();
    let list = |d: &Path| tree.list(d);
    let env = |k: &str| case.env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    policy(&Inputs {
        home: Some(Path::new("/home/u")),
        list: &list,
        tool: case.tool,
        env: &env,
        url_texts: &case.urls,
        work_tree: &case.work_tree,
        tmp: Path::new("/tmp/ralph-1"),
        programs: &case.programs,
        path: &case.path,
        settings: &case.settings,
    })
}

fn has(paths: &[PathBuf], p: &str) -> bool {
    paths.iter().any(|x| x == Path::new(p))
}

/// Whether `p` is readable or writable under the policy (beneath a granted path).
fn reads(policy: &Policy, p: &str) -> bool {
    policy.read.iter().chain(&policy.write).any(|r| Path::new(p).starts_with(r))
}

fn writes(policy: &Policy, p: &str) -> bool {
    policy.write.iter().any(|r| Path::new(p).starts_with(r))
}

#[test]
fn the_home_is_readable_but_its_credential_stores_and_other_projects() {
    let p = run(&Case::default());
    #[rustfmt::skip]
    let table: &[(&str, bool)] = &[
        ("/home/u/.bashrc", true),
        ("/home/u/.gitconfig", true),
        ("/home/u/.rustup/toolchains/x/bin/cargo", true),
        ("/home/u/.cargo/bin/cargo", true),
        ("/home/u/.cargo/registry/index", true),
        ("/home/u/.config/nvim/init.lua", true),
        ("/home/u/.local/bin/tool", true),
        ("/home/u/notes.txt", true),
        ("/home/u/.local/share/fonts/a.ttf", true),
        ("/home/u/code/proj/src/main.rs", true),
        ("/usr/bin/git", true),
        ("/etc/ssl/certs/ca.pem", true),
        ("/proc/self/status", true),
        // Credential stores.
        ("/home/u/.ssh/id_ed25519", false),
        ("/home/u/.aws/credentials", false),
        ("/home/u/.netrc", false),
        ("/home/u/.config/gcloud/credentials.db", false),
        ("/home/u/.config/gh/hosts.yml", false),
        ("/home/u/.cargo/credentials.toml", false),
        ("/home/u/.local/share/keyrings/login.keyring", false),
        // Other projects beside this one.
        ("/home/u/code/other/.env", false),
        ("/home/u/code/secret-client/key", false),
        // Not in the home's listing, nor the system's.
        ("/home/u/.kube/config", false),
        ("/tmp/other-project/x", false),
        ("/root/x", false),
    ];
    for (path, want) in table {
        assert_eq!(reads(&p, path), *want, "{path}");
    }
    assert!(!has(&p.read, "/home/u"), "the home itself is never granted: {:?}", p.read);
    assert!(!has(&p.read, "/home/u/code"));
}

/// A project kept directly in the home: the home's other repositories are
/// other projects, hidden from it like folders beside it anywhere else;
/// the home's other entries stay readable.
#[test]
fn the_home_s_other_repositories_are_other_projects() {
    for project in ["/home/u/proj2", "/home/u/code/proj"] {
        let p = run(&Case { work_tree: vec![PathBuf::from(project)], ..Case::default() });
        #[rustfmt::skip]
        let table: &[(&str, bool)] = &[
            ("/home/u/client-repo/.env", false),
            ("/home/u/Documents/cv.pdf", true),
            ("/home/u/notes.txt", true),
            ("/home/u/.gitconfig", true),
            ("/home/u/.cargo/bin/cargo", true),
        ];
        for (path, want) in table {
            assert_eq!(reads(&p, path), *want, "{project}: {path}");
        }
        // Repositories one folder down (~/code/other) are hidden only from
        // a project beside them: the home's folders are not searched.
        assert_eq!(reads(&p, "/home/u/code/other/.env"), project == "/home/u/proj2", "{project}");
        assert!(reads(&p, &format!("{project}/src/main.rs")), "{project}");
    }
}

#[test]
fn writes_go_to_the_work_tree_the_temp_dir_the_clis_state_and_devices_only() {
    #[rustfmt::skip]
    let table: &[(Option<Tool>, Vec<(&str, &str)>, &str, bool)] = &[
        (Some(Tool::Claude), vec![], "/home/u/code/proj/src/x.rs", true),
        (Some(Tool::Claude), vec![], "/tmp/ralph-1/scratch", true),
        (Some(Tool::Claude), vec![], "/dev/null", true),
        (Some(Tool::Claude), vec![], "/home/u/.claude/projects/x.jsonl", true),
        (Some(Tool::Claude), vec![], "/home/u/.claude.json", true),
        (Some(Tool::Claude), vec![("CLAUDE_CONFIG_DIR", "/cfg/claude")], "/cfg/claude/x", true),
        (Some(Tool::Claude), vec![("CLAUDE_CONFIG_DIR", "/cfg/claude")], "/home/u/.claude/x", false),
        (Some(Tool::Claude), vec![], "/home/u/.codex/x", false),
        (Some(Tool::Codex), vec![], "/home/u/.codex/sessions/x", true),
        (Some(Tool::Codex), vec![("CODEX_HOME", "/t/codex")], "/t/codex/auth.json", true),
        (Some(Tool::Codex), vec![], "/home/u/.claude/x", false),
        (Some(Tool::Gemini), vec![], "/home/u/.gemini/tmp/x", true),
        (Some(Tool::Gemini), vec![("GEMINI_CLI_HOME", "/g")], "/g/.gemini/settings.json", true),
        (Some(Tool::Opencode), vec![], "/home/u/.local/share/opencode/log/x", true),
        (Some(Tool::Opencode), vec![], "/home/u/.config/opencode/x", true),
        (Some(Tool::Opencode), vec![("XDG_DATA_HOME", "/d")], "/d/opencode/x", true),
        (Some(Tool::Opencode), vec![], "/home/u/.local/bin/x", false),
        (Some(Tool::Aider), vec![], "/home/u/.aider/caches/x", true),
        (Some(Tool::Aider), vec![], "/home/u/.aider.conf.yml", true),
        (None, vec![], "/home/u/.claude/x", false),
        (None, vec![], "/home/u/code/proj/target/x", true),
        // Never: other projects, the home, the system.
        (Some(Tool::Claude), vec![], "/home/u/code/other/x", false),
        (Some(Tool::Claude), vec![], "/home/u/x", false),
        (Some(Tool::Claude), vec![], "/etc/x", false),
        (Some(Tool::Claude), vec![], "/home/u/.cargo/registry/x", false),
    ];
    for (tool, env, path, want) in table {
        let p = run(&Case { tool: *tool, env: env.clone(), ..Case::default() });
        assert_eq!(writes(&p, path), *want, "{tool:?} {env:?} {path}");
    }
}

#[test]
fn a_linked_worktree_writes_its_git_dirs_and_the_person_adds_paths() {
    let worktree = Case {
        work_tree: vec![
            PathBuf::from("/home/u/code/proj/.git/ralph/worktrees/US-1"),
            PathBuf::from("/home/u/code/proj/.git"),
        ],
        settings: Settings {
            read: vec!["~/code/other".into(), "relative/ignored".into()],
            write: vec!["~/.cargo".into(), "/var/cache/x".into()],
            ..Settings::default()
        },
        ..Case::default()
    };
    let p = run(&worktree);
    assert!(writes(&p, "/home/u/code/proj/.git/objects/ab/cd"));
    assert!(writes(&p, "/home/u/.cargo/registry/x"));
    assert!(writes(&p, "/var/cache/x/y"));
    assert!(reads(&p, "/home/u/code/other/x"));
    assert!(!p.read.iter().any(|r| r.ends_with("relative/ignored")));
}

#[test]
fn connects_go_to_https_http_and_the_configured_apis_ports() {
    let table: &[(Vec<&str>, Net, Vec<u16>, Option<Vec<u16>>)] = &[
        (vec![], Net::Ports, vec![], Some(vec![80, 443])),
        (vec!["http://127.0.0.1:41234/v1"], Net::Ports, vec![], Some(vec![80, 443, 41234])),
        (
            vec![
                "[model_providers.x]\nbase_url = \"http://localhost:9000/v1\"",
                "https://proxy:3128",
            ],
            Net::Ports,
            vec![22],
            Some(vec![22, 80, 443, 3128, 9000]),
        ),
        (vec!["socks5://user:pw@host"], Net::Ports, vec![], Some(vec![80, 443, 1080])),
        (vec!["http://127.0.0.1:41234/v1"], Net::Any, vec![], None),
    ];
    for (urls, net, ports, want) in table {
        let case = Case {
            urls: urls.iter().map(|u| u.to_string()).collect(),
            settings: Settings { net: *net, ports: ports.clone(), ..Settings::default() },
            ..Case::default()
        };
        assert_eq!(&run(&case).connect, want, "{urls:?}");
    }
}

#[test]
fn a_program_is_readable_from_where_it_is_installed_never_wider() {
    let home = Some(Path::new("/home/u"));
    let project = PathBuf::from("/home/u/code/proj");
    #[rustfmt::skip]
    let table: &[(&str, &str)] = &[
        ("/opt/cache/claude/node_modules/@anthropic-ai/claude-code/cli.js", "/opt/cache/claude"),
        ("/opt/cache/claude/node_modules/.bin/claude", "/opt/cache/claude"),
        ("/root/.cache/ralph-test/aider-venv/bin/aider", "/root/.cache/ralph-test/aider-venv"),
        ("/work/target/debug/fake-agent", "/work/target/debug"),
        // The home's own bin/ would open the whole home: the file alone.
        ("/home/u/bin/agent", "/home/u/bin/agent"),
        // A folder above the project: the file alone.
        ("/home/u/code/agent", "/home/u/code/agent"),
        ("/agent", "/agent"),
    ];
    for (program, want) in table {
        assert_eq!(
            install_root(Path::new(program), home, Some(&project)),
            Some(PathBuf::from(want)),
            "{program}"
        );
    }
    assert_eq!(install_root(Path::new("relative"), home, None), None);
}

#[test]
fn the_toolchains_on_path_are_readable_never_wider() {
    let home = Some(Path::new("/home/u"));
    let project = PathBuf::from("/home/u/code/proj");
    #[rustfmt::skip]
    let table: &[(&str, Option<&str>)] = &[
        ("/root/.pyenv/shims", Some("/root/.pyenv")),
        // ~/.cargo holds credentials.toml: its bin/ alone (the home's
        // listing grants its other entries).
        ("/home/u/.cargo/bin", Some("/home/u/.cargo/bin")),
        ("/opt/node/v20/bin", Some("/opt/node/v20")),
        ("/usr/local/go/bin", Some("/usr/local/go")),
        ("/snap/bin", Some("/snap")),
        // bin/ right under the home or the root: the folder alone.
        ("/home/u/bin", Some("/home/u/bin")),
        ("/bin", Some("/bin")),
        // The home itself, or a folder above the project: never.
        ("/home/u", None),
        ("/home/u/code", None),
        ("/", None),
        ("relative/bin", None),
    ];
    for (dir, want) in table {
        assert_eq!(
            path_root(Path::new(dir), home, Some(&project)),
            want.map(PathBuf::from),
            "{dir}"
        );
    }
    let p = run(&Case {
        path: vec![PathBuf::from("/root/.pyenv/shims"), PathBuf::from("/home/u")],
        ..Case::default()
    });
    assert!(reads(&p, "/root/.pyenv/versions/3.12/bin/python3"));
    assert!(!reads(&p, "/home/u/.ssh/id_ed25519"));
}

#[test]
fn denials_are_read_from_output_lines() {
    let policy = run(&Case::default());
    // A link in the project that leads to the home.
    let resolve = |p: &Path| {
        p.strip_prefix("/home/u/code/proj/escape").ok().map(|rest| Path::new("/home/u").join(rest))
    };
    let at = Where {
        home: Some(Path::new("/home/u")),
        cwd: Some(Path::new("/home/u/code/proj")),
        resolve: &resolve,
    };
    #[rustfmt::skip]
    let table: &[(&str, Vec<Denial>)] = &[
        ("touch: cannot touch '/home/u/x': Permission denied", vec![Denial::Path("/home/u/x".into())]),
        ("cat: /home/u/.ssh/id_ed25519: Permission denied", vec![Denial::Path("/home/u/.ssh/id_ed25519".into())]),
        ("rm: cannot remove '/home/u/code/other/a': Operation not permitted", vec![Denial::Path("/home/u/code/other/a".into())]),
        ("write ~/x: EACCES", vec![Denial::Path("~/x".into())]),
        (r#"{"type":"tool_result","content":"ok\nsh: 1: cannot create /etc/x: Permission denied\n","cwd":"/home/u/code/proj"}"#, vec![Denial::Path("/etc/x".into())]),
        ("connect 127.0.0.1:5555: Permission denied (os error 13)", vec![Denial::Port(5555)]),
        ("curl: (7) Failed to connect to localhost port 8081: Permission denied", vec![Denial::Port(8081)]),
        ("kill 4242: Operation not permitted (os error 1)", vec![Denial::Signal(Some(4242))]),
        ("sh: 1: kill: Operation not permitted", vec![Denial::Signal(None)]),
        // Relative paths are the working folder's; a link out is named with its end.
        ("rm: cannot remove '../other/a': Permission denied", vec![Denial::Path("../other/a".into())]),
        ("sh: 1: cannot create escape/x: Permission denied", vec![Denial::Path("escape/x (→ /home/u/x)".into())]),
        ("open src/ro.txt: Permission denied", vec![]),
        // The path denied is the last before the words, else the first after.
        ("/tmp/bin/claude: 2: exec: /opt/agent: Permission denied", vec![Denial::Path("/opt/agent".into())]),
        ("EACCES: permission denied, open '/etc/x' (cwd /home/u/code/proj)", vec![Denial::Path("/etc/x".into())]),
        // Inside the policy: not the sandbox's doing.
        ("touch: cannot touch '/home/u/code/proj/ro.txt': Permission denied", vec![]),
        ("connect 127.0.0.1:443: Permission denied", vec![]),
        // No denial at all.
        ("wrote /etc/hosts.bak", vec![]),
        ("Permission denied", vec![]),
    ];
    for (line, want) in table {
        assert_eq!(&denial(line, &policy, &at), want, "{line}");
    }
    assert_eq!(Denial::Path("/etc/x".into()).to_string(), "sandbox denied /etc/x");
    assert_eq!(Denial::Port(5555).to_string(), "sandbox denied connect to port 5555");
}

#[test]
fn denials_are_bounded_and_counted_once() {
    let policy = std::sync::Arc::new(run(&Case::default()));
    let mut d = Denials::new(Some(policy), Some(PathBuf::from("/home/u")), None);
    for i in 0..100 {
        d.line(b"cat: /etc/shadow: Permission denied");
        d.line(format!("touch: /home/u/x{i}: Permission denied").as_bytes());
    }
    assert_eq!(d.found.len(), MAX_DENIALS);
    assert_eq!(d.texts()[0], "sandbox denied /etc/shadow");
    let mut off = Denials::new(None, None, None);
    off.line(b"cat: /etc/shadow: Permission denied");
    assert!(off.found.is_empty());
}

#[test]
fn the_run_start_line_says_what_is_allowed() {
    let p = run(&Case { urls: vec!["http://127.0.0.1:4000".into()], ..Case::default() });
    let line = describe(&p, Some(Path::new("/home/u")), Path::new("/home/u/code/proj"), 7);
    assert!(line.starts_with("sandbox (Landlock ABI 7): writes the work tree, a private TMPDIR, ~/.claude, ~/.claude.json"), "{line}");
    assert!(line.contains("connects only to TCP ports 80, 443, 4000"), "{line}");
    assert!(line.contains("signals only its own processes"), "{line}");
    let any = Policy { connect: None, ..p.clone() };
    assert!(
        describe(&any, None, Path::new("/x"), 3).contains("connects anywhere; may signal ralph")
    );
}

#[test]
fn modes_parse() {
    assert_eq!(Mode::parse("auto"), Some(Mode::Auto));
    assert_eq!(Mode::parse("strict"), Some(Mode::Strict));
    assert_eq!(Mode::parse("off"), Some(Mode::Off));
    assert_eq!(Mode::parse("on"), None);
}

/// Toolchains the environment names outside the home (rustup in `/opt`, a
/// `HOME` that is not the toolchains' home) are readable, but not a
/// credential file in them, and never a folder that is too wide.
#[test]
fn the_toolchains_the_environment_names_are_readable_but_not_their_credentials() {
    let p = run(&Case {
        env: vec![
            ("RUSTUP_HOME", "/root/.rustup"),
            ("CARGO_HOME", "/srv/cargo"),
            ("VIRTUAL_ENV", "/home/u/code"),
            ("GOPATH", "/"),
            ("JAVA_HOME", "relative/jdk"),
        ],
        ..Case::default()
    });
    assert!(reads(&p, "/root/.rustup/settings.toml"));
    assert!(reads(&p, "/srv/cargo/registry/index"));
    assert!(!reads(&p, "/srv/cargo/credentials.toml"));
    // Too wide: the folder above the project, the root.
    assert!(!reads(&p, "/home/u/code/other/x"));
    assert!(!reads(&p, "/etc-not-system/x") && !has(&p.read, "/"));
    assert!(!p.read.iter().any(|r| r.is_relative()));
}

/// Where builds write outside the project (a shared target dir, a cache the
/// environment names) is writable; a credential store or the home never.
#[test]
fn the_build_outputs_the_environment_names_are_writable_never_wider() {
    let p = run(&Case {
        env: vec![
            ("CARGO_TARGET_DIR", "/srv/target"),
            ("GOCACHE", "/home/u/.ssh/cache"),
            ("PIP_CACHE_DIR", "/home/u"),
            ("UV_CACHE_DIR", "rel"),
        ],
        ..Case::default()
    });
    assert!(writes(&p, "/srv/target/debug/x"));
    assert!(!reads(&p, "/home/u/.ssh/cache/x"));
    assert!(!writes(&p, "/home/u/notes.txt"));
    assert!(!p.write.iter().any(|w| w.is_relative()));
}

/// A CLI's config file that a variable puts outside the home
/// (`OPENCODE_CONFIG`) is readable, not writable; one in a credential store
/// stays out, and files already readable or writable are not listed again.
#[test]
fn a_config_file_a_variable_puts_outside_the_home_is_readable() {
    let team = ("OPENCODE_CONFIG", "/srv/team/opencode.json");
    #[rustfmt::skip]
    let table: &[(Tool, Vec<(&str, &str)>, &str, bool)] = &[
        (Tool::Opencode, vec![team], "/srv/team/opencode.json", true),
        (Tool::Opencode, vec![team], "/srv/team/other.json", false),
        (Tool::Opencode, vec![], "/srv/team/opencode.json", false),
        (Tool::Claude, vec![team], "/srv/team/opencode.json", false),
        (Tool::Opencode, vec![("OPENCODE_CONFIG", "/home/u/.ssh/o.json")], "/home/u/.ssh/o.json", false),
    ];
    for (tool, env, path, want) in table {
        let p = run(&Case { tool: Some(*tool), env: env.clone(), ..Case::default() });
        assert_eq!(reads(&p, path), *want, "{tool:?} {env:?} {path}");
        assert!(!writes(&p, path), "{tool:?} {env:?} {path}");
    }
    let moved = vec![("CLAUDE_CONFIG_DIR", "/cfg/claude")];
    let p = run(&Case { env: moved, ..Case::default() });
    for file in ["/cfg/claude/settings.json", "/home/u/code/proj/.claude/settings.json"] {
        assert!(!has(&p.read, file), "{file}");
    }
}

#[test]
fn too_wide_is_the_root_the_home_above_a_store_or_the_project() {
    let home = Path::new("/home/u");
    let project = PathBuf::from("/home/u/src/p");
    let table = [
        ("/", true),
        ("/home", true),
        ("/home/u", true),
        ("/home/u/.config", true), // holds .config/gh
        ("/home/u/.ssh", true),
        ("/home/u/.config/nvim", false),
        ("/home/u/.ssh/keys", false), // inside a store: left out elsewhere
        ("/home/u/src", true),        // holds the project and its siblings
        ("/home/u/src/p", true),
        ("/home/u/src/p/target", false),
        ("/home/u/.cargo", true), // holds .cargo/credentials
        ("/home/u/.cargo/bin", false),
        ("/home/uu", false),
        ("/opt/cargo", false),
    ];
    for (dir, wide) in table {
        assert_eq!(too_wide(Path::new(dir), Some(home), Some(&project)), wide, "{dir}");
        // The same as joining each store to the home and asking.
        let joined = Path::new(dir).parent().is_none()
            || home.starts_with(dir)
            || DENIED.iter().any(|d| home.join(d).starts_with(dir))
            || project.starts_with(dir);
        assert_eq!(joined, wide, "{dir}");
    }
}
