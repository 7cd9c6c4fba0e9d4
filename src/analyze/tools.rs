//! What the agent's tool calls did, for "this iteration only ran tests".
//!
//! Each CLI names its tools differently (`Bash`, `run_shell_command`,
//! `shellToolCall`, `bash`; `Edit`, `write_file`, `replace`, `editToolCall`),
//! so calls are sorted by name: shell commands are read for test runners,
//! edit-like names count as edits, the rest (reads, searches, todo lists)
//! count for nothing. A shell command that is neither a test nor a known
//! read-only or build command (`sed -i`, `git commit`, `npm install`) counts
//! as other work, since it may change files.

use aho_corasick::AhoCorasick;
use std::sync::LazyLock;

/// Tallies of one run's tool calls.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ToolTally {
    pub(crate) tests: u32,
    pub(crate) edits: u32,
    pub(crate) other: u32,
}

impl ToolTally {
    /// Only tests ran: at least one test command and nothing that changes files.
    pub(crate) fn test_only(&self) -> bool {
        self.tests > 0 && self.edits == 0 && self.other == 0
    }

    /// A tool call by name, with its shell command when it has one.
    pub(crate) fn tool(&mut self, name: &str, command: Option<&str>) {
        let name = name.to_ascii_lowercase();
        if name.contains("todo") {
            return;
        }
        if ["bash", "shell", "command", "terminal", "exec"].iter().any(|s| name.contains(s)) {
            if let Some(command) = command {
                self.shell(command);
            } else {
                self.other += 1;
            }
        } else if EDIT_WORDS.iter().any(|s| name.contains(s)) {
            self.edits += 1;
        } else if name == "task" || name.contains("agent") {
            self.other += 1;
        }
    }

    /// A shell command line, possibly compound (`cd x && cargo test`).
    pub(crate) fn shell(&mut self, command: &str) {
        let mut test = false;
        let mut other = false;
        for part in split_commands(command) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            if TESTS.is_match(part) {
                test = true;
            } else if !is_neutral(part) {
                other = true;
            }
        }
        self.tests += u32::from(test);
        self.other += u32::from(other);
    }
}

/// The simple commands of a command line, split at `&&`, `||`, `|`, `;`,
/// `&` and newlines, but not at the `&` of a `2>&1` redirection.
fn split_commands(command: &str) -> impl Iterator<Item = &str> {
    let bytes = command.as_bytes();
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        let split = match b {
            b';' | b'|' | b'\n' => true,
            b'&' => {
                i.checked_sub(1).is_none_or(|p| bytes[p] != b'>') && bytes.get(i + 1) != Some(&b'>')
            }
            _ => false,
        };
        if split {
            parts.push(&command[start..i]);
            start = i + 1;
        }
    }
    parts.push(&command[start..]);
    parts.into_iter()
}

/// Whether a simple command redirects output into a file (`> f`, `>> f`),
/// as opposed to `2>&1` or `> /dev/null`.
fn writes_file(part: &str) -> bool {
    part.match_indices('>').any(|(i, _)| {
        let target = part[i..].trim_start_matches('>').trim_start();
        !(target.starts_with('&') || target.starts_with("/dev/null"))
    })
}

const EDIT_WORDS: [&str; 11] = [
    "edit", "write", "patch", "replace", "create", "delete", "remove", "rename", "move", "insert",
    "apply",
];

/// Test runners, matched anywhere in a command or a line of text.
pub(crate) const TEST_COMMANDS: [&str; 34] = [
    "cargo test",
    "cargo nextest",
    "npm test",
    "npm run test",
    "pnpm test",
    "pnpm run test",
    "yarn test",
    "bun test",
    "deno test",
    "npx jest",
    "npx vitest",
    "pytest",
    "python -m unittest",
    "go test",
    "jest ",
    "vitest",
    "mocha",
    "rspec",
    "phpunit",
    "mvn test",
    "mvn verify",
    "gradle test",
    "gradlew test",
    "make test",
    "make check",
    "ctest",
    "bats ",
    "tox",
    "mix test",
    "dotnet test",
    "swift test",
    "zig build test",
    "playwright test",
    "cypress run",
];

pub(crate) static TESTS: LazyLock<AhoCorasick> =
    LazyLock::new(|| AhoCorasick::new(TEST_COMMANDS).expect("test command automaton"));

/// Commands that read, build or check without changing the project.
fn is_neutral(part: &str) -> bool {
    const NEUTRAL: [&str; 32] = [
        "ls", "cat", "head", "tail", "grep", "rg", "find", "pwd", "echo", "wc", "tree", "which",
        "stat", "file", "du", "df", "cd", "sort", "uniq", "diff", "less", "true", "sleep", "date",
        "env", "printenv", "jq", "awk", "nl", "realpath", "basename", "dirname",
    ];
    const NEUTRAL_PREFIXES: [&str; 22] = [
        "git status",
        "git diff",
        "git log",
        "git show",
        "git branch",
        "git rev-parse",
        "git ls-files",
        "cargo build",
        "cargo check",
        "cargo clippy",
        "cargo fmt --check",
        "cargo fmt -- --check",
        "cargo metadata",
        "cargo tree",
        "npm run build",
        "npm run lint",
        "npx tsc",
        "tsc",
        "go build",
        "go vet",
        "sed -n",
        "ruff check",
    ];
    let program = part.split_whitespace().next().unwrap_or("");
    let program = program.rsplit('/').next().unwrap_or(program);
    !writes_file(part)
        && (NEUTRAL.contains(&program) || NEUTRAL_PREFIXES.iter().any(|p| part.starts_with(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_commands() {
        // (command, tests, other)
        let cases = [
            ("cargo test --lib", 1, 0),
            ("cd crates/x && cargo test 2>&1 | tail -40", 1, 0),
            ("npm test", 1, 0),
            ("git status && git diff", 0, 0),
            ("cargo build --release", 0, 0),
            ("sed -i 's/a/b/' src/lib.rs", 0, 1),
            ("cat > src/new.rs", 0, 1),
            ("echo hi > notes.md", 0, 1),
            ("sed -i s/x/y/ f && cargo test", 1, 1),
            ("git commit -am wip", 0, 1),
            ("python -m pytest -q", 1, 0),
            ("cargo build 2>&1 >/dev/null", 0, 0),
            ("cargo run &", 0, 1),
        ];
        for (command, tests, other) in cases {
            let mut tally = ToolTally::default();
            tally.shell(command);
            assert_eq!((tally.tests, tally.other), (tests, other), "{command}");
        }
    }

    #[test]
    fn tool_names_across_clis() {
        type Calls = &'static [(&'static str, Option<&'static str>)];
        // (tool calls, test_only)
        let cases: &[(Calls, bool)] = &[
            (&[("Bash", Some("cargo test")), ("Read", None), ("TodoWrite", None)], true),
            (&[("Bash", Some("cargo test")), ("Edit", None)], false),
            (&[("run_shell_command", Some("npm test")), ("read_file", None)], true),
            (&[("run_shell_command", Some("npm test")), ("replace", None)], false),
            (&[("shellToolCall", Some("pytest")), ("writeToolCall", None)], false),
            (&[("bash", Some("go test ./...")), ("grep", None), ("todowrite", None)], true),
            (&[("Read", None), ("Grep", None)], false),
            (&[("Bash", Some("cargo test")), ("Task", None)], false),
            (&[], false),
        ];
        for (calls, test_only) in cases {
            let mut tally = ToolTally::default();
            for (name, command) in *calls {
                tally.tool(name, *command);
            }
            assert_eq!(tally.test_only(), *test_only, "{calls:?}");
        }
    }
}
