//! The sandbox every agent, gate and hook runs in: what the child may read,
//! write, connect to and signal, as an allow-list the kernel enforces
//! (Linux Landlock, set up in the child before `exec`; see
//! [`crate::process::confine`]). ralph itself, its workers and its watchdog
//! are never confined.
//!
//! ```text
//!  Settings (agent.sandbox, sandbox.*) ─┐
//!  $HOME's entries, the CLI's state dirs ├─► policy() (pure) ─► Policy ─► process::confine
//!  work tree + git dirs, private TMPDIR  │                       │
//!  the program, URLs in env and configs ─┘                       └─► describe() (run start,
//!                                                                     `ralph agents`, --dry-run)
//!  child output ─► denial() (pure) ─► "sandbox denied <path>" facts
//! ```
//!
//! Landlock grants by allow-list, so what is *not* readable is everything
//! not listed: the home's entries are listed one by one, minus the
//! credential stores ([`DENIED`]) and the folders beside the project (other
//! projects). Writes go to the work tree (and its git directories), a
//! private per-child `TMPDIR`, the CLI's own state and cache dirs
//! ([`state_paths`]) and a few devices. TCP connects go to 80, 443 and the
//! ports of every URL in the child's environment and the CLI's config
//! files, unless `sandbox.net = "any"`. Signals and abstract unix sockets
//! stay inside the child's own tree (ABI 6).
//!
//! The decisions are pure functions of their inputs ([`policy`],
//! [`denial`]) and table-tested; [`Sandbox`] gathers the inputs (the
//! home's listing, config files, the kernel's ABI) and makes the temp dirs.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::agent::Tool;

/// `agent.sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Confined wherever the kernel has Landlock; unconfined (and said so) elsewhere.
    #[default]
    Auto,
    /// Confined, or ralph refuses to start (exit 7).
    Strict,
    /// Never confined: the behaviour before the sandbox.
    Off,
}

impl Mode {
    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "auto" => Some(Mode::Auto),
            "strict" => Some(Mode::Strict),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }
}

/// `sandbox.net`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Net {
    /// TCP connects only to the ports the agent needs.
    #[default]
    Ports,
    /// No limit on TCP connects.
    Any,
}

/// The person's settings (`agent.sandbox`, `sandbox.*`).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub mode: Mode,
    /// More paths to read (`sandbox.read`; `~/` is the home).
    pub read: Vec<String>,
    /// More paths to write (`sandbox.write`): caches such as `~/.cargo`.
    pub write: Vec<String>,
    pub net: Net,
    /// More TCP ports to connect to (`sandbox.ports`).
    pub ports: Vec<u16>,
}

/// What a confined child may touch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Read and execute, beneath each path.
    pub read: Vec<PathBuf>,
    /// Everything (read, write, create, remove), beneath each path.
    pub write: Vec<PathBuf>,
    /// TCP ports it may connect to; `None`: any.
    pub connect: Option<Vec<u16>>,
    /// The child's private temp dir (`TMPDIR`; one of `write`).
    pub tmp: PathBuf,
}

/// The system: read (and execute) for everyone. Missing ones are skipped.
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/nix/store",
    "/run/systemd/resolve",
    "/dev/urandom",
    "/dev/random",
];

/// Devices every program expects to open for writing.
pub const DEVICES_WRITE: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"];

/// Credential stores under the home, never readable (relative to `$HOME`).
pub const DENIED: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".kube",
    ".docker",
    ".netrc",
    ".gnupg",
    ".git-credentials",
    ".password-store",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d",
    ".local/share/keyrings",
];

/// Variables that name a toolchain's folder wherever it lives (rustup in
/// `/opt/rustup`, a venv outside the project, a `HOME` that is not the
/// toolchains' home): readable, like the folders of `PATH`.
pub const TOOLCHAIN_VARS: &[&str] = &[
    "RUSTUP_HOME",
    "CARGO_HOME",
    "GOROOT",
    "GOPATH",
    "GOMODCACHE",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "NVM_DIR",
    "VOLTA_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "JAVA_HOME",
];

/// Variables that name where builds and tests write their output and
/// caches outside the project (a shared `CARGO_TARGET_DIR`, Go's build
/// cache): writable (made before the child starts when missing).
pub const BUILD_OUTPUT_VARS: &[&str] = &[
    "CARGO_TARGET_DIR",
    "GOCACHE",
    "PIP_CACHE_DIR",
    "UV_CACHE_DIR",
    "npm_config_cache",
    "PYTHONPYCACHEPREFIX",
    "CCACHE_DIR",
    "SCCACHE_DIR",
];

/// Credential files a toolchain's folder may hold (cargo's registry token,
/// gem's API key), left out wherever the folder is.
const TOOLCHAIN_CREDENTIALS: &[&str] = &["credentials", "credentials.toml"];

/// TCP ports every agent may connect to: HTTPS and HTTP.
pub const DEFAULT_PORTS: &[u16] = &[80, 443];

/// What a path is to the agent CLI that keeps its state there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// A folder: made before the child starts, so it can be granted.
    Dir,
    /// A file: granted when it exists (Landlock cannot grant a name).
    File,
    /// A file the CLI makes on its first run (claude's `~/.claude.json`):
    /// made private holding `{}` before the child starts when missing,
    /// so a new user's CLI can keep its state through the sandbox.
    NewJson,
}

/// `$XDG_<kind>_HOME`, else its default under the home.
fn xdg(env: &dyn Fn(&str) -> Option<String>, var: &str, home: &Path, default: &str) -> PathBuf {
    env(var).filter(|v| v.starts_with('/')).map(PathBuf::from).unwrap_or_else(|| home.join(default))
}

/// Where each agent CLI keeps its own state and caches (honouring the
/// variables that move them: `CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
/// `GEMINI_CLI_HOME`, `XDG_*_HOME`). The real CLIs' tests run with the
/// sandbox on: that is the proof these lists are right.
pub fn state_paths(
    tool: Tool,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    home_entries: &[String],
) -> Vec<(PathBuf, StateKind)> {
    use StateKind::{Dir, File, NewJson};
    let var = |name: &str| env(name).filter(|v| v.starts_with('/')).map(PathBuf::from);
    let config = xdg(env, "XDG_CONFIG_HOME", home, ".config");
    let data = xdg(env, "XDG_DATA_HOME", home, ".local/share");
    let cache = xdg(env, "XDG_CACHE_HOME", home, ".cache");
    let state = xdg(env, "XDG_STATE_HOME", home, ".local/state");
    match tool {
        Tool::Claude => {
            let mut paths = match var("CLAUDE_CONFIG_DIR") {
                Some(dir) => vec![(dir, Dir)],
                None => vec![(home.join(".claude"), Dir), (home.join(".claude.json"), NewJson)],
            };
            paths.push((cache.join("claude-cli-nodejs"), Dir));
            paths.push((cache.join("claude"), Dir));
            paths
        }
        Tool::Codex => vec![(var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")), Dir)],
        Tool::Gemini => {
            let base = var("GEMINI_CLI_HOME").unwrap_or_else(|| home.to_path_buf());
            vec![(base.join(".gemini"), Dir)]
        }
        Tool::Opencode => ["opencode"]
            .iter()
            .flat_map(|n| [config.join(n), data.join(n), cache.join(n), state.join(n)])
            .map(|p| (p, Dir))
            .collect(),
        Tool::Aider => {
            let mut paths = vec![(home.join(".aider"), Dir)];
            for name in home_entries.iter().filter(|n| n.starts_with(".aider") && *n != ".aider") {
                paths.push((home.join(name), File));
            }
            paths
        }
        Tool::Amp => ["amp"]
            .iter()
            .flat_map(|n| [config.join(n), data.join(n), cache.join(n)])
            .map(|p| (p, Dir))
            .collect(),
        Tool::Cursor => vec![(home.join(".cursor"), Dir), (config.join("cursor"), Dir)],
        Tool::Custom => Vec::new(),
    }
}

/// The agent CLI's config files that may name its API's URL (whose port
/// it must reach): `$CODEX_HOME/config.toml`, opencode's JSON, …
pub fn config_files(
    tool: Tool,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    project: &Path,
) -> Vec<PathBuf> {
    let var = |name: &str| env(name).filter(|v| v.starts_with('/')).map(PathBuf::from);
    let config = xdg(env, "XDG_CONFIG_HOME", home, ".config");
    match tool {
        Tool::Claude => {
            let dir = var("CLAUDE_CONFIG_DIR").unwrap_or_else(|| home.join(".claude"));
            vec![dir.join("settings.json"), project.join(".claude/settings.json")]
        }
        Tool::Codex => {
            vec![var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")).join("config.toml")]
        }
        Tool::Gemini => {
            let base = var("GEMINI_CLI_HOME").unwrap_or_else(|| home.to_path_buf());
            vec![base.join(".gemini/settings.json"), project.join(".gemini/settings.json")]
        }
        Tool::Opencode => {
            let mut files: Vec<PathBuf> = var("OPENCODE_CONFIG").into_iter().collect();
            files.extend([
                config.join("opencode/opencode.json"),
                config.join("opencode/opencode.jsonc"),
                project.join("opencode.json"),
                project.join("opencode.jsonc"),
            ]);
            files
        }
        Tool::Aider => vec![home.join(".aider.conf.yml"), project.join(".aider.conf.yml")],
        Tool::Amp => vec![config.join("amp/settings.json")],
        Tool::Cursor => vec![home.join(".cursor/cli-config.json")],
        Tool::Custom => Vec::new(),
    }
}

/// A folder's entry names, shared: `/usr/bin` alone holds thousands, and
/// a kept listing is handed to every child's policy.
pub type Names = std::sync::Arc<[String]>;

/// Everything [`policy`] is computed from.
pub struct Inputs<'a> {
    pub home: Option<&'a Path>,
    /// The entry names of a folder (the home, and folders under it that
    /// hold a denied path or the project).
    pub list: &'a dyn Fn(&Path) -> Names,
    /// The CLI whose state dirs it may write (`None`: a gate or a hook).
    pub tool: Option<Tool>,
    /// The child's environment (for the variables that move state dirs).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Text that may hold URLs the child must reach: its environment's
    /// values, the CLI's config files.
    pub url_texts: &'a [String],
    /// The work tree, then its git directories when they lie outside it.
    pub work_tree: &'a [PathBuf],
    /// The child's private temp dir.
    pub tmp: &'a Path,
    /// The program, as found on PATH and resolved.
    pub programs: &'a [PathBuf],
    /// The folders of the child's `PATH`: the toolchains it runs.
    pub path: &'a [PathBuf],
    pub settings: &'a Settings,
}

/// What a child may touch, from the inputs alone.
pub fn policy(i: &Inputs<'_>) -> Policy {
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    let mut write: Vec<PathBuf> = i.work_tree.to_vec();
    write.push(i.tmp.to_path_buf());
    write.extend(DEVICES_WRITE.iter().map(PathBuf::from));
    if let Some(home) = i.home {
        let project = i.work_tree.first().map(PathBuf::as_path);
        home_read(home, Path::new(""), project, i.list, &mut read, 0);
        if let Some(tool) = i.tool {
            let entries = (i.list)(home);
            write.extend(state_paths(tool, home, i.env, &entries).into_iter().map(|(p, _)| p));
            // A config file a variable puts outside the home, the project
            // and the state dirs (`OPENCODE_CONFIG`) is read too, or the CLI
            // would quietly run without it. One in the home is readable
            // already, or lies in a credential store and stays out.
            let elsewhere =
                |f: &PathBuf| !f.starts_with(home) && !write.iter().any(|w| f.starts_with(w));
            let files = config_files(tool, home, i.env, project.unwrap_or(home));
            read.extend(files.into_iter().filter(elsewhere));
        }
    }
    for program in i.programs {
        if let Some(root) = install_root(program, i.home, i.work_tree.first()) {
            read.push(root);
        }
    }
    for dir in i.path {
        if let Some(root) = path_root(dir, i.home, i.work_tree.first()) {
            toolchain_read(root, i.list, &mut read);
        }
    }
    write.extend(build_outputs(i.env, i.home, i.work_tree.first()));
    for var in TOOLCHAIN_VARS {
        let dir = (i.env)(var).map(PathBuf::from).filter(|d| d.is_absolute());
        if let Some(dir) = dir.filter(|d| !too_wide(d, i.home, i.work_tree.first())) {
            toolchain_read(dir, i.list, &mut read);
        }
    }
    let expand = |p: &String| expand_home(p, i.home);
    read.extend(i.settings.read.iter().filter_map(expand));
    write.extend(i.settings.write.iter().filter_map(expand));
    let connect = match i.settings.net {
        Net::Any => None,
        Net::Ports => {
            let mut ports: Vec<u16> = DEFAULT_PORTS.to_vec();
            ports.extend(i.url_texts.iter().flat_map(|t| url_ports(t)));
            ports.extend(&i.settings.ports);
            ports.sort_unstable();
            ports.dedup();
            Some(ports)
        }
    };
    dedup(&mut read);
    dedup(&mut write);
    Policy { read, write, connect, tmp: i.tmp.to_path_buf() }
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
}

/// `~/x` (or `~`) as a path under the home; an absolute path as it is;
/// anything else (relative, or `~` without a home) is dropped.
pub fn expand_home(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    let text = text.trim();
    if text == "~" {
        return home.map(Path::to_path_buf);
    }
    if let Some(rest) = text.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    text.starts_with('/').then(|| PathBuf::from(text))
}

/// How deep folders under the home are opened up to leave a credential
/// store or another project out.
const MAX_DEPTH: usize = 6;

/// The home's entries beneath `rel`, readable one by one: a denied one is
/// left out; a folder that holds a denied path is opened and its entries
/// granted the same way; a folder that holds the project grants only the
/// way to the project (its other entries are other projects).
fn home_read(
    home: &Path,
    rel: &Path,
    project: Option<&Path>,
    list: &dyn Fn(&Path) -> Names,
    out: &mut Vec<PathBuf>,
    depth: usize,
) {
    let dir = home.join(rel);
    let toward_project = project.is_some_and(|p| p.starts_with(&dir) && p != dir);
    let mut names = list(&dir).to_vec();
    names.sort();
    for name in names {
        let rel = rel.join(&name);
        let path = home.join(&rel);
        if DENIED.iter().any(|d| Path::new(d) == rel) {
            continue;
        }
        let holds_project = project.is_some_and(|p| p.starts_with(&path) && p != path);
        if project == Some(path.as_path()) {
            continue;
        }
        if toward_project && dir != home && !holds_project {
            // Beside the project, below the home's own entries: another project.
            continue;
        }
        if dir == home && !holds_project && is_other_repository(&name, &path, list) {
            // A repository kept in the home is another project too.
            continue;
        }
        let holds_denied =
            DENIED.iter().any(|d| Path::new(d).starts_with(&rel) && Path::new(d) != rel);
        if (holds_denied || holds_project) && depth < MAX_DEPTH {
            home_read(home, &rel, project, list, out, depth + 1);
        } else if !holds_project {
            out.push(path);
        }
    }
}

/// A visible entry of the home that holds a `.git`: another project (a
/// dotfile folder — `~/.oh-my-zsh` — is the person's setup, not a project).
fn is_other_repository(name: &str, path: &Path, list: &dyn Fn(&Path) -> Names) -> bool {
    !name.starts_with('.') && list(path).iter().any(|n| n == ".git")
}

/// The folders [`BUILD_OUTPUT_VARS`] name, when absolute and not too wide.
pub fn build_outputs(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
    project: Option<&PathBuf>,
) -> Vec<PathBuf> {
    BUILD_OUTPUT_VARS
        .iter()
        .filter_map(|var| env(var).map(PathBuf::from))
        .filter(|d| d.is_absolute() && !too_wide(d, home, project))
        .filter(|d| !home.is_some_and(|h| DENIED.iter().any(|x| d.starts_with(h.join(x)))))
        .collect()
}

/// A toolchain's folder, to read: whole, or entry by entry without the
/// credential files it holds (`CARGO_HOME` outside the home).
fn toolchain_read(dir: PathBuf, list: &dyn Fn(&Path) -> Names, out: &mut Vec<PathBuf>) {
    let names = list(&dir);
    if names.iter().any(|n| TOOLCHAIN_CREDENTIALS.contains(&n.as_str())) {
        let kept = names.iter().filter(|n| !TOOLCHAIN_CREDENTIALS.contains(&n.as_str()));
        out.extend(kept.map(|n| dir.join(n)));
    } else {
        out.push(dir);
    }
}

/// Whether granting `dir` would open too much: the root, the home or a
/// folder above it, one that holds the project (and so its siblings) or a
/// credential store.
fn too_wide(dir: &Path, home: Option<&Path>, project: Option<&PathBuf>) -> bool {
    // `dir` holds `home/d` when it holds the home, or lies in the home
    // on the way to `d` (asked without joining: this runs for every
    // toolchain folder of every child).
    let holds_denied = |h: &Path| {
        dir.strip_prefix(h).is_ok_and(|rel| DENIED.iter().any(|d| Path::new(d).starts_with(rel)))
    };
    dir.parent().is_none()
        || home.is_some_and(|h| h.starts_with(dir) || holds_denied(h))
        || project.is_some_and(|p| p.starts_with(dir))
}

/// The folder a program is installed in, to read: the prefix above
/// `node_modules` for an npm package, the prefix above `bin/` for a venv
/// or `~/.local`, else the program's own folder. Never the root, the home
/// or a folder above it, nor one that holds the project or a credential
/// store: then only the program file itself.
pub fn install_root(
    program: &Path,
    home: Option<&Path>,
    project: Option<&PathBuf>,
) -> Option<PathBuf> {
    if !program.is_absolute() {
        return None;
    }
    let components: Vec<_> = program.components().collect();
    let candidate = if let Some(i) = components.iter().position(|c| c.as_os_str() == "node_modules")
    {
        components[..i].iter().collect::<PathBuf>()
    } else {
        let parent = program.parent()?;
        if parent.file_name().is_some_and(|n| n == "bin") {
            parent.parent()?.to_path_buf()
        } else {
            parent.to_path_buf()
        }
    };
    if !too_wide(&candidate, home, project) {
        return Some(candidate);
    }
    Some(program.to_path_buf())
}

/// A folder of `PATH`, to read with what its programs need: the toolchain
/// above a `bin/` or `shims/` folder (`~/.pyenv/shims` → `~/.pyenv`,
/// `~/.cargo/bin` → `~/.cargo`), else the folder itself; nothing when that
/// is too wide (`PATH` holding the home or `/`).
pub fn path_root(dir: &Path, home: Option<&Path>, project: Option<&PathBuf>) -> Option<PathBuf> {
    if !dir.is_absolute() {
        return None;
    }
    let toolchain = dir
        .file_name()
        .filter(|n| *n == "bin" || *n == "sbin" || *n == "shims")
        .and_then(|_| dir.parent())
        .filter(|p| !too_wide(p, home, project));
    toolchain
        .map(Path::to_path_buf)
        .or_else(|| (!too_wide(dir, home, project)).then(|| dir.to_path_buf()))
}

/// The TCP ports of every URL in `text` (`http://127.0.0.1:8080/v1` →
/// 8080; `https://api.example.com` → 443).
pub fn url_ports(text: &str) -> Vec<u16> {
    static URL: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = URL.get_or_init(|| {
        regex::Regex::new(
            r#"(?i)\b(https?|wss?|socks5h?|socks4a?)://(?:[^/\s"'@]*@)?(\[[0-9a-f:.]+\]|[^/\s"':?#\\]+)(?::(\d{1,5}))?"#,
        )
        .expect("valid URL pattern")
    });
    re.captures_iter(text)
        .filter_map(|c| match c.get(3) {
            Some(port) => port.as_str().parse::<u16>().ok().filter(|p| *p != 0),
            None => match c[1].to_ascii_lowercase().as_str() {
                "http" | "ws" => Some(80),
                "https" | "wss" => Some(443),
                _ => Some(1080),
            },
        })
        .collect()
}

/// One line for people: what the policy lets a child do ("writes the work
/// tree, a private TMPDIR, ~/.claude; reads the system and the home but
/// its credential stores; connects to ports 80, 443; signals only its own
/// processes").
pub fn describe(p: &Policy, home: Option<&Path>, work_tree: &Path, abi: u32) -> String {
    let show = |path: &Path| -> String {
        match home.and_then(|h| path.strip_prefix(h).ok()) {
            Some(rest) if rest.as_os_str().is_empty() => "~".into(),
            Some(rest) => format!("~/{}", rest.display()),
            None => path.display().to_string(),
        }
    };
    let mut writes = vec!["the work tree".to_string(), "a private TMPDIR".to_string()];
    writes.extend(
        p.write
            .iter()
            .filter(|w| !w.starts_with(work_tree) && !work_tree.starts_with(w.as_path()))
            .filter(|w| !w.starts_with("/dev") && **w != p.tmp)
            .map(|w| show(w)),
    );
    let net = match &p.connect {
        None => "connects anywhere".to_string(),
        Some(_) if abi < 4 => "connects anywhere (Landlock ABI < 4 has no network rules)".into(),
        Some(ports) => format!(
            "connects only to TCP ports {}",
            ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let scope = if abi >= 6 {
        "signals only its own processes"
    } else {
        "may signal ralph (Landlock ABI < 6 has no scoping)"
    };
    format!(
        "sandbox (Landlock ABI {abi}): writes {}; reads the system, the project and the home but {} credential stores and other projects; {net}; {scope}",
        writes.join(", "),
        DENIED.len()
    )
}

/// The policy in full, for `ralph agents` and `ralph --dry-run`: one
/// `reads`, `writes` and `connects` line each.
pub fn details(p: &Policy) -> Vec<String> {
    let join = |paths: &[PathBuf]| {
        paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    };
    let connects = match &p.connect {
        None => "any port".to_string(),
        Some(ports) => ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", "),
    };
    vec![
        format!("writes   {}", join(&p.write)),
        format!("reads    {}", join(&p.read)),
        format!("connects {connects}"),
    ]
}

/// A denial the sandbox most likely caused, read from a line of a child's
/// output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denial {
    Path(String),
    Port(u16),
    Signal(Option<u32>),
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Denial::Path(p) => write!(f, "sandbox denied {p}"),
            Denial::Port(port) => write!(f, "sandbox denied connect to port {port}"),
            Denial::Signal(Some(pid)) => write!(f, "sandbox denied a signal to pid {pid}"),
            Denial::Signal(None) => write!(f, "sandbox denied a signal"),
        }
    }
}

/// Most denials kept from one child.
pub const MAX_DENIALS: usize = 20;

/// Where a child's output is read from: its home (for `~/`), its working
/// folder (for relative paths) and how a path's symbolic links resolve
/// (the one piece of I/O; tests pass their own).
pub struct Where<'a> {
    pub home: Option<&'a Path>,
    pub cwd: Option<&'a Path>,
    pub resolve: &'a dyn Fn(&Path) -> Option<PathBuf>,
}

const DENIED_WORDS: [&str; 4] = ["permission denied", "operation not permitted", "eacces", "eperm"];

/// The denials a line of output names: `EACCES` / `EPERM` / "Permission
/// denied" / "Operation not permitted" with a path outside what the policy
/// lets the child write (inside, the sandbox was not the cause; a path
/// inside whose links lead outside is named with where it leads), a TCP
/// port it may not connect to, or a signal (`kill`). JSON output carries a
/// tool's text with `\n` escapes: each part is read on its own.
pub fn denial(line: &str, policy: &Policy, at: &Where<'_>) -> Vec<Denial> {
    let says_denied = |text: &str| {
        let lower = text.to_ascii_lowercase();
        DENIED_WORDS.iter().any(|k| lower.contains(k))
    };
    if !says_denied(line) {
        return Vec::new();
    }
    let outside = |path: &Path| !policy.write.iter().any(|w| path.starts_with(w));
    let mut found = Vec::new();
    for part in line.split("\\n").flat_map(|p| p.split("\\r")) {
        if !says_denied(part) {
            continue;
        }
        let lower = part.to_ascii_lowercase();
        // The path an error names is the last one before its "Permission
        // denied" (`sh: /x/script: exec: /y: Permission denied` is about
        // /y), else the first after it.
        let at_phrase = DENIED_WORDS.iter().filter_map(|k| lower.find(k)).min().unwrap_or(0);
        let paths = |text: &str| -> Vec<(String, PathBuf)> {
            text.split(|c: char| c.is_whitespace() || c == '=' || c == ',')
                .filter_map(|word| {
                    let word = word.trim_start_matches(['\'', '"', '`', '(', '[', '{', '\\', '<']);
                    let word = word.trim_end_matches([
                        '\'', '"', '`', ')', ']', '}', ':', ';', ',', '.', '\\', '>',
                    ]);
                    let path = match expand_home(word, at.home) {
                        Some(p) if word.len() > 1 => p,
                        _ if word.contains('/') && !word.contains("://") && word.len() > 2 => {
                            normalize(&at.cwd?.join(word))
                        }
                        _ => return None,
                    };
                    Some((word.to_string(), path))
                })
                .collect()
        };
        let named = paths(&part[..at_phrase])
            .pop()
            .or_else(|| paths(&part[at_phrase..]).into_iter().next());
        let named_path = named.is_some();
        if let Some((word, path)) = named {
            let text = if outside(&path) {
                Some(word)
            } else {
                (at.resolve)(&path)
                    .filter(|real| outside(real))
                    .map(|real| format!("{word} (→ {})", real.display()))
            };
            if let Some(text) = text.filter(|t| !found.contains(&Denial::Path(t.clone()))) {
                found.push(Denial::Path(text));
            }
        }
        if named_path {
            continue;
        }
        if let Some(port) = port_in(&lower)
            && policy.connect.as_ref().is_some_and(|ports| !ports.contains(&port))
        {
            found.push(Denial::Port(port));
        } else if lower.contains("kill") || lower.contains("signal") {
            found.push(Denial::Signal(pid_in(&lower)));
        }
    }
    found
}

/// `a/b/../c` as `a/c`, without looking at the disk.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The port a connect error names: `port 8080`, `127.0.0.1:8080`, `[::1]:8080`.
fn port_in(lower: &str) -> Option<u16> {
    static PORT: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = PORT.get_or_init(|| {
        regex::Regex::new(r"(?:\bport\s+|(?:\d+\.\d+\.\d+\.\d+|localhost|\]):)(\d{1,5})\b")
            .expect("valid port pattern")
    });
    if !lower.contains("connect") {
        return None;
    }
    re.captures(lower)?.get(1)?.as_str().parse().ok()
}

/// The pid a `kill` error names: `kill 1234: …`, `kill: (1234) - …`.
fn pid_in(lower: &str) -> Option<u32> {
    static PID: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = PID.get_or_init(|| {
        regex::Regex::new(r"kill\D{0,24}?(\d{1,10})\b").expect("valid pid pattern")
    });
    re.captures(lower)?.get(1)?.as_str().parse().ok()
}

/// Gathers denials from a child's output, line by line (bounded).
#[derive(Debug, Clone, Default)]
pub struct Denials {
    policy: Option<std::sync::Arc<Policy>>,
    home: Option<PathBuf>,
    cwd: Option<PathBuf>,
    pub found: Vec<Denial>,
}

impl Denials {
    /// Reads nothing when the child is not confined.
    pub fn new(
        policy: Option<std::sync::Arc<Policy>>,
        home: Option<PathBuf>,
        cwd: Option<PathBuf>,
    ) -> Denials {
        Denials { policy, home, cwd, found: Vec::new() }
    }

    pub fn line(&mut self, line: &[u8]) {
        let Some(policy) = &self.policy else { return };
        if self.found.len() >= MAX_DENIALS || line.len() > 64 * 1024 {
            return;
        }
        let text = String::from_utf8_lossy(line);
        // A path's folder as the file system resolves it (links followed).
        let resolve = |p: &Path| -> Option<PathBuf> {
            let real = p.parent()?.canonicalize().ok()?;
            Some(real.join(p.file_name()?))
        };
        let at = Where { home: self.home.as_deref(), cwd: self.cwd.as_deref(), resolve: &resolve };
        for d in denial(&text, policy, &at) {
            if self.found.len() < MAX_DENIALS && !self.found.contains(&d) {
                self.found.push(d);
            }
        }
    }

    /// "sandbox denied /etc/x", one per denial.
    pub fn texts(&self) -> Vec<String> {
        self.found.iter().map(Denial::to_string).collect()
    }
}

mod runtime;
pub use runtime::{Child, Sandbox, SandboxError, Shown, Support, show};

#[cfg(test)]
mod tests;
