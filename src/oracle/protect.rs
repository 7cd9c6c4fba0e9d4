//! Protected paths: the files that decide whether an agent's work counts,
//! which the agent may therefore not change. ralph's own `.ralph/` (its
//! configuration and prompt), the CI files, the files the gate command
//! names (a script, `Makefile` for `make`, `justfile` for `just`,
//! `package.json` for npm and its kin: the scripts section counts as the
//! file), and the globs of `gate.protect` (a person's test fixtures).
//!
//! Pure: what exists in the project is asked through a function.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// Protected whatever `gate.protect` says.
pub const BUILT_IN: &[&str] = &[
    ".ralph/**",
    ".github/workflows/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    ".travis.yml",
    ".buildkite/**",
    "azure-pipelines.yml",
    "Jenkinsfile",
];

/// Inside `.ralph/` but the agent's to write: its handoff.
/// Nor is `.gitignore`, which ralph writes there itself before every
/// iteration.
const AGENTS: &[&str] = &[".ralph/handoff.json", ".ralph/.handoff.json.*", ".ralph/.gitignore"];

/// The protected paths of a project.
/// A `gate.protect` glob ralph cannot read (a setting: exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ProtectError {
    #[error("gate.protect: {pattern:?} is not a glob: {source}")]
    NotAGlob { pattern: String, source: globset::Error },
    #[error("gate.protect: {source}")]
    Set { source: globset::Error },
}

#[derive(Debug, Clone)]
pub struct Protected {
    set: GlobSet,
    agents: GlobSet,
}

impl Protected {
    /// The built-in globs, `extra` (`gate.protect`) and the files the gate
    /// names. A bad glob is an error naming it.
    pub fn new(extra: &[String], gate_files: &[String]) -> Result<Protected, ProtectError> {
        let mut patterns: Vec<String> = BUILT_IN.iter().map(|s| s.to_string()).collect();
        for p in extra.iter().chain(gate_files) {
            let p = p.trim_start_matches("./").to_string();
            if !p.is_empty() && !patterns.contains(&p) {
                patterns.push(p);
            }
        }
        let set = build(&patterns)?;
        let agents = build(&AGENTS.iter().map(|s| s.to_string()).collect::<Vec<_>>())?;
        Ok(Protected { set, agents })
    }

    /// Whether `path` (relative to the project) is protected.
    pub fn covers(&self, path: &str) -> bool {
        let path = path.trim_start_matches("./");
        self.set.is_match(path) && !self.agents.is_match(path)
    }
}

fn build(patterns: &[String]) -> Result<GlobSet, ProtectError> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let glob =
            Glob::new(p).map_err(|source| ProtectError::NotAGlob { pattern: p.clone(), source })?;
        b.add(glob);
    }
    b.build().map_err(|source| ProtectError::Set { source })
}

/// The files a gate command runs that exist in the project (`exists` is
/// asked with paths relative to it): a script it executes (`./check.sh`,
/// any `*.sh`), a file it hands an interpreter (`sh check.sh`, `python3
/// tools/check.py`), and the file that holds a runner's own script:
/// `Makefile` for make, `justfile` for just, `package.json` for npm, yarn,
/// pnpm and bun. A shell command's script is read word by word. Other files
/// it names (`test -f done.txt`, `grep x src/a.txt`) are the work it checks,
/// not its definition.
pub fn gate_files(command: &[String], exists: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut words: Vec<String> = command.to_vec();
    if let Some(script) = crate::gate::shell_script(command) {
        words.truncate(2);
        let script_words = crate::agent::words::split(script).unwrap_or_default();
        words.extend(script_words.into_iter().flat_map(|w| {
            // `a&&b`, `x;y`: the pieces between operators.
            w.split(['&', '|', ';', '(', ')', '<', '>'])
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        }));
    }
    let mut files: Vec<String> = Vec::new();
    let mut add = |f: &str| {
        if !files.iter().any(|x| x == f) {
            files.push(f.to_string());
        }
    };
    let mut after_interpreter = false;
    for word in &words {
        let program = word.rsplit('/').next().unwrap_or(word);
        let runner_files: &[&str] = match program {
            "make" | "gmake" => &["Makefile", "makefile", "GNUmakefile"],
            "just" => &["justfile", "Justfile", ".justfile"],
            "npm" | "yarn" | "pnpm" | "bun" | "npx" => &["package.json"],
            _ => &[],
        };
        for f in runner_files.iter().filter(|f| exists(f)) {
            add(f);
        }
        let path = word.trim_start_matches("./");
        let plausible = !path.is_empty()
            && !path.starts_with('-')
            && !path.starts_with('/')
            && !path.contains('=')
            && !path.contains("..");
        let runs = word.starts_with("./")
            || path.ends_with(".sh")
            || path.ends_with(".bash")
            || (after_interpreter && !word.starts_with('-'));
        if plausible && runs && exists(path) {
            add(path);
        }
        if !word.starts_with('-') {
            let interpreter = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
            after_interpreter = matches!(
                interpreter,
                "sh" | "bash"
                    | "dash"
                    | "zsh"
                    | "ksh"
                    | "python"
                    | "node"
                    | "ruby"
                    | "perl"
                    | "php"
                    | "deno"
                    | "tsx"
                    | "ts-node"
            ) && word != "-c";
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(text: &str) -> Vec<String> {
        crate::gate::argv(text).unwrap()
    }

    #[test]
    fn the_files_a_gate_names() {
        let present = [
            "check.sh",
            "Makefile",
            "package.json",
            "tests/test_calc.py",
            "src",
            "src/check.py",
            "src/US-001.txt",
        ];
        let exists = |p: &str| present.contains(&p);
        let cases: &[(&str, &[&str])] = &[
            ("./check.sh", &["check.sh"]),
            ("sh check.sh", &["check.sh"]),
            ("bash -c 'cd . && ./check.sh --fast'", &["check.sh"]),
            ("make test", &["Makefile"]),
            ("npm test", &["package.json"]),
            ("pytest -q tests/test_calc.py", &[]),
            ("python3 -u src/check.py", &["src/check.py"]),
            ("python3 -m pytest", &[]),
            ("cargo test", &[]),
            ("test -f src/US-001.txt", &[]),
            ("grep -q x src/US-001.txt", &[]),
            ("sh -c 'test -f check.sh&&make'", &["check.sh", "Makefile"]),
            ("pytest --rootdir=. /etc/passwd ../x", &[]),
        ];
        for (gate, want) in cases {
            assert_eq!(gate_files(&argv(gate), &exists), *want, "{gate}");
        }
    }

    #[test]
    fn protected_paths() {
        let p = Protected::new(&["tests/fixtures/**".into()], &["check.sh".into()]).unwrap();
        for (path, want) in [
            (".ralph/config.toml", true),
            (".ralph/prompt.md", true),
            (".ralph/handoff.json", false),
            (".ralph/.gitignore", false),
            (".github/workflows/ci.yml", true),
            (".gitlab-ci.yml", true),
            ("check.sh", true),
            ("./check.sh", true),
            ("tests/fixtures/a/b.json", true),
            ("tests/test_calc.py", false),
            ("src/lib.rs", false),
            ("prd.json", false),
        ] {
            assert_eq!(p.covers(path), want, "{path}");
        }
        let e = Protected::new(&["a[".into()], &[]).unwrap_err();
        assert!(matches!(&e, ProtectError::NotAGlob { pattern, .. } if pattern == "a["), "{e}");
        assert!(e.to_string().contains("\"a[\" is not a glob"), "{e}");
    }
}
