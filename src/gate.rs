//! The verification gate: ralph's own check that a story is done, so the
//! agent's "done" is a claim and the gate's exit code is the verdict.
//!
//! The gate runs in its own process group with its own timeout. Its stdout
//! and stderr are kept as separate bounded tails (test runners print their
//! summary last) for the next prompt, and test-runner summaries are read
//! as they stream by to score how close an iteration came to passing and
//! to name the tests that failed ([`Verdict::summary`]).
//!
//! A gate that cannot run at all — missing program, permission denied, a
//! configured fatal signature in its output — is an environment error: not
//! the agent's fault, not a lesson, not a strike against the breaker.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::agent::capture::{LineSplitter, Tail};
use crate::agent::supervise::{self, Limits, Sink, Spec};
use crate::agent::words;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Gate {
    pub command: Vec<String>,
    pub timeout: Duration,
    pub grace: Duration,
    pub tail_bytes: usize,
    pub fatal_signatures: Vec<String>,
    /// Secrets never reach the gate's log or the next prompt.
    pub redactor: Option<crate::redact::Redactor>,
}

/// A gate run that happened.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Stopped by Ctrl-C / SIGTERM to ralph: no verdict at all.
    pub interrupted: bool,
    pub duration: Duration,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub score: Score,
    /// Tests the runner named as failing, in the order it named them (at
    /// most [`MAX_NAMES`]).
    pub failing: Vec<String>,
    /// Where the whole output is, when it was written to a log.
    pub log: Option<PathBuf>,
}

/// How close a gate run came to passing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Score {
    pub exit_code: Option<i32>,
    /// Failing tests counted from the runner's summaries, when found.
    pub failed: Option<u32>,
    pub passed_tests: Option<u32>,
}

impl Score {
    /// "3 tests failing, exit 101".
    pub fn describe(&self) -> String {
        let exit = match self.exit_code {
            Some(c) => format!("exit {c}"),
            None => "killed".into(),
        };
        match self.failed {
            Some(n) => format!("{n} test{} failing, {exit}", crate::text::plural(n as usize)),
            None => exit,
        }
    }
}

/// The gate could not run: an environment problem.
#[derive(Debug, Clone)]
pub struct NotRun {
    pub message: String,
    pub hint: String,
}

/// Failing test names kept from one gate run, and the longest kept.
const MAX_NAMES: usize = 20;
const MAX_NAME_CHARS: usize = 120;

/// The longest "what failed" of [`Verdict::summary`], in chars.
pub const SUMMARY_CHARS: usize = 200;

/// Reads test-runner summaries, and the names of failing tests, line by line.
#[derive(Debug, Default)]
struct Summaries {
    failed: Option<u32>,
    passed: Option<u32>,
    /// unittest's "Ran N tests", until its "OK" or "FAILED (…)" line.
    ran: Option<u32>,
    names: Vec<String>,
}

fn summary_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: std::sync::OnceLock<Vec<(Regex, &'static str)>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            // cargo test: "test result: FAILED. 3 passed; 2 failed; 0 ignored"
            (r"^test result: \w+\. (\d+) passed; (\d+) failed", "cargo"),
            // jest: "Tests:       2 failed, 5 passed, 7 total"
            (r"^Tests:\s+(?:(\d+) failed, )?(?:\d+ \w+, )*?(\d+) passed", "jest"),
            // pytest: "==== 2 failed, 5 passed in 0.12s ====" (either part may be missing)
            (r"^=+ (?:(\d+) failed)?(?:, )?(?:(\d+) passed)?.* in [\d.]+s", "pytest"),
            // go test: "--- FAIL: TestX" / "--- PASS: TestY"
            (r"^\s*--- (FAIL|PASS):", "go"),
            // unittest: "Ran 3 tests in 0.001s", then "OK" or "FAILED (failures=1, errors=2)"
            (r"^Ran (\d+) tests? in ", "unittest-ran"),
            (r"^OK(?: \(.*\))?$", "unittest-ok"),
            (r"^FAILED \((.*)\)$", "unittest-failed"),
        ]
        .iter()
        .filter_map(|(p, k)| Regex::new(p).ok().map(|r| (r, *k)))
        .collect()
    })
}

/// How runners name a failing test, on a line of its own (trimmed).
fn name_patterns() -> &'static [Regex] {
    static PATTERNS: std::sync::OnceLock<Vec<Regex>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            // cargo test: "test parse::tests::empty ... FAILED"
            r"^test (.+?) \.\.\. FAILED$",
            // pytest's short summary: "FAILED tests/test_x.py::test_zero - ZeroDivisionError"
            r"^(?:FAILED|ERROR) (\S+?\.py(?:::\S+)?)(?: - .*)?$",
            // unittest: "ERROR: test_zero (tests.test_calc.TestCalc.test_zero)"
            r"^(?:FAIL|ERROR): (\S+) \(",
            // jest: "✕ adds 1 + 2 (5 ms)"
            r"^✕ (.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?$",
            // go test: "--- FAIL: TestX (0.00s)", subtests indented
            r"^--- FAIL: (\S+)",
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
    })
}

impl Summaries {
    fn line(&mut self, line: &[u8]) {
        let first = line.iter().position(|b| !b.is_ascii_whitespace()).map(|i| line[i]);
        // The first bytes the patterns can start with (0xE2: jest's ✕).
        if !matches!(first, Some(b't' | b'T' | b'=' | b'-' | b'F' | b'E' | b'R' | b'O' | 0xE2))
            || line.len() > 4096
        {
            return;
        }
        let Ok(text) = std::str::from_utf8(line) else { return };
        self.name(text.trim());
        let num =
            |m: Option<regex::Match>| m.and_then(|m| m.as_str().parse::<u32>().ok()).unwrap_or(0);
        for (re, kind) in summary_patterns() {
            let Some(c) = re.captures(text) else { continue };
            match *kind {
                "unittest-ran" => self.ran = Some(num(c.get(1))),
                "unittest-ok" => {
                    let Some(ran) = self.ran.take() else { continue };
                    *self.passed.get_or_insert(0) += ran;
                    self.failed.get_or_insert(0);
                }
                "unittest-failed" => {
                    let Some(ran) = self.ran.take() else { continue };
                    let counts = &c[1];
                    let count = |key: &str| {
                        counts
                            .split(", ")
                            .find_map(|part| part.strip_prefix(key)?.parse::<u32>().ok())
                            .unwrap_or(0)
                    };
                    let failed = count("failures=") + count("errors=");
                    *self.failed.get_or_insert(0) += failed;
                    *self.passed.get_or_insert(0) += ran.saturating_sub(failed);
                }
                "cargo" => {
                    *self.passed.get_or_insert(0) += num(c.get(1));
                    *self.failed.get_or_insert(0) += num(c.get(2));
                }
                "jest" | "pytest" => {
                    let (f, p) = (c.get(1), c.get(2));
                    if f.is_none() && p.is_none() {
                        continue;
                    }
                    *self.failed.get_or_insert(0) += num(f);
                    *self.passed.get_or_insert(0) += num(p);
                }
                _ => {
                    if &c[1] == "FAIL" {
                        *self.failed.get_or_insert(0) += 1;
                    } else {
                        *self.passed.get_or_insert(0) += 1;
                    }
                }
            }
            return;
        }
    }

    /// A failing test's name, when the line names one.
    fn name(&mut self, text: &str) {
        if self.names.len() == MAX_NAMES {
            return;
        }
        let Some(name) = name_patterns().iter().find_map(|re| re.captures(text)?.get(1)) else {
            return;
        };
        let name = crate::text::clip(crate::text::plain(name.as_str()).trim(), MAX_NAME_CHARS);
        if !name.is_empty() && !self.names.contains(&name) {
            self.names.push(name);
        }
    }
}

struct GateSink {
    tail: Tail,
    splitter: LineSplitter,
    summaries: Summaries,
    log: Option<std::fs::File>,
    redactor: Option<crate::redact::Redactor>,
}

impl Sink for GateSink {
    fn write(&mut self, chunk: &[u8]) {
        self.tail.push(chunk);
        if let Some(f) = self.log.as_mut() {
            use std::io::Write;
            let chunk = match &self.redactor {
                Some(r) => r.bytes(chunk),
                None => std::borrow::Cow::Borrowed(chunk),
            };
            if f.write_all(&chunk).is_err() {
                self.log = None;
            }
        }
        let s = &mut self.summaries;
        self.splitter.push(chunk, &mut |line, _| s.line(line));
    }

    fn finish(&mut self) {
        let s = &mut self.summaries;
        self.splitter.finish(&mut |line, _| s.line(line));
    }
}

/// A gate command written as text (`--gate`, `gate.command = "…"`, a
/// story's `verify`), as the argv ralph runs. A gate is the user's own
/// command, so text with shell syntax (`cd tests && python3 -m unittest`,
/// `pytest | tee log`, `$VAR`, globs; see [`words::shell_syntax`]) runs as
/// `sh -c TEXT`, as the bash drivers run it; other text is split into words
/// and run without a shell. An argv written as an array is never given to
/// a shell, nor is one written as JSON text (`["pytest", "-q"]`). Agents'
/// commands never come here: only the user's gate.
pub fn argv(text: &str) -> Result<Vec<String>, String> {
    if let Some(argv) = words::json_argv(text) {
        return argv;
    }
    let words = words::split(text)?;
    if words.is_empty() || words::shell_syntax(text).is_none() {
        return Ok(words);
    }
    Ok(vec!["sh".into(), "-c".into(), text.trim().to_string()])
}

/// The gate command as a person would type it, for messages and prompts.
pub fn display(command: &[String]) -> String {
    words::join(command)
}

/// The script of a `sh -c SCRIPT` command (any POSIX-like shell).
pub(crate) fn shell_script(command: &[String]) -> Option<&str> {
    let [shell, flag, script, ..] = command else { return None };
    let name = shell.rsplit('/').next().unwrap_or(shell);
    (matches!(name, "sh" | "bash" | "dash" | "zsh" | "ksh") && flag == "-c")
        .then_some(script.as_str())
}

/// The programs a gate command needs before it can run: its program, and
/// for a shell command also the first word of its script when that is a
/// plain program (`sh -c "pytest | tee log"` needs `sh` and `pytest`; `cd
/// tests && …` needs only `sh`).
pub fn programs(command: &[String]) -> Vec<String> {
    let mut programs: Vec<String> = command.first().cloned().into_iter().collect();
    if let Some(first) = shell_script(command).and_then(words::first_program) {
        programs.push(first);
    }
    programs
}

/// The gate commands a run may use, each with what it is: `gate.command`
/// and the unfinished stories' `verify` (`the "verify" of US-002`).
pub fn commands(gate: &[String], prd: &crate::prd::Prd) -> Vec<(Vec<String>, String)> {
    let mut commands: Vec<(Vec<String>, String)> = Vec::new();
    if !gate.is_empty() {
        commands.push((gate.to_vec(), "gate.command".into()));
    }
    for s in prd.stories().iter().filter(|s| !s.passes) {
        if let Some(words) = s.verify.as_deref().and_then(|v| argv(v).ok()) {
            commands.push((words, format!("the \"verify\" of {}", s.id)));
        }
    }
    commands
}

/// Every gate program — `gate.command` and the unfinished stories'
/// `verify` — must exist before the first agent is paid for: a gate that
/// cannot start is an environment error, not something an agent can fix.
/// A program given by its path (`./run-tests.sh`) is looked for in
/// `project`, where the gate runs.
pub fn check_programs_in(
    gate: &[String],
    prd: &crate::prd::Prd,
    project: &Path,
) -> Result<(), NotRun> {
    for (words, what) in commands(gate, prd) {
        for program in programs(&words) {
            let found = if program.contains('/') {
                std::fs::metadata(project.join(&program)).is_ok_and(|m| m.is_file())
            } else {
                which::which(&program).is_ok()
            };
            if !found {
                return Err(NotRun {
                    message: format!("the gate cannot run: `{program}` ({what}) not found"),
                    hint: "install it or fix the command; ralph stops before any agent runs".into(),
                });
            }
        }
    }
    Ok(())
}

impl Gate {
    /// Runs `command` (the gate's, or a story's own) in `cwd`; output also
    /// goes to `log` when given.
    pub fn run(
        &self,
        command: &[String],
        cwd: &Path,
        log: Option<&Path>,
    ) -> Result<Verdict, NotRun> {
        let Some((program, args)) = command.split_first() else {
            return Err(NotRun {
                message: "the gate command is empty".into(),
                hint: "set gate.command".into(),
            });
        };
        let sink = |log: Option<std::fs::File>| GateSink {
            tail: Tail::new(self.tail_bytes),
            splitter: LineSplitter::default(),
            summaries: Summaries::default(),
            log,
            redactor: self.redactor.clone(),
        };
        let log_file = log.and_then(|p| std::fs::File::create(p).ok());
        let log_written = log_file.is_some();
        let err_log = log_file.as_ref().and_then(|f| f.try_clone().ok());
        let spec = Spec {
            program,
            args,
            cwd,
            env_remove: &[],
            env_set: &[],
            stdin: None,
            limits: Limits {
                timeout: Some(self.timeout).filter(|t| !t.is_zero()),
                idle: None,
                grace: self.grace,
                deadline: None,
                interruptible: true,
            },
        };
        let (finished, out, err) = supervise::run(&spec, sink(log_file), sink(err_log), &mut || {})
            .map_err(|e| NotRun {
                message: format!("the gate cannot run: {e}"),
                hint: format!(
                    "check gate.command ({}) — ralph stops here because no agent can fix a gate that does not start",
                    display(command)
                ),
            })?;
        let clean = |t: String| match &self.redactor {
            Some(r) => r.text(&t).into_owned(),
            None => t,
        };
        let stdout_tail = clean(out.tail.text());
        let stderr_tail = clean(err.tail.text());
        if let Some(sig) = self.fatal_signature(&stdout_tail, &stderr_tail) {
            return Err(NotRun {
                message: format!("the gate's output contains the fatal signature {sig:?}"),
                hint: "the environment is broken (see gate.fatal_signatures): fix it and run ralph again".into(),
            });
        }
        let interrupted = finished.stopped == Some(crate::analyze::StopReason::Interrupted);
        let timed_out = finished.stopped.is_some() && !interrupted;
        let failed = match (out.summaries.failed, err.summaries.failed) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        let passed_tests = match (out.summaries.passed, err.summaries.passed) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        let mut failing = out.summaries.names;
        for name in err.summaries.names {
            if failing.len() < MAX_NAMES && !failing.contains(&name) {
                failing.push(name);
            }
        }
        let log =
            log.filter(|_| log_written).map(|p| p.strip_prefix(cwd).unwrap_or(p).to_path_buf());
        Ok(Verdict {
            passed: finished.success(),
            exit_code: finished.exit_code,
            timed_out,
            interrupted,
            duration: finished.duration,
            score: Score { exit_code: finished.exit_code, failed, passed_tests },
            stdout_tail,
            stderr_tail,
            failing,
            log,
        })
    }

    fn fatal_signature(&self, out: &str, err: &str) -> Option<String> {
        let (out, err) = (out.to_lowercase(), err.to_lowercase());
        self.fatal_signatures
            .iter()
            .find(|s| {
                let s = s.to_lowercase();
                !s.is_empty() && (out.contains(&s) || err.contains(&s))
            })
            .cloned()
    }
}

impl Verdict {
    /// One line for the event stream: for a pass, how many tests passed;
    /// for a failure, what failed (the tests the runner named, else its
    /// last error lines, at most [`SUMMARY_CHARS`]) and where the gate's
    /// log is (relative to the project when it is inside it).
    pub fn summary(&self) -> String {
        if self.passed {
            return match self.score.passed_tests {
                Some(n) => format!("{} pass", crate::text::count(n as usize, "test", "tests")),
                None => String::new(),
            };
        }
        let what = self.what_failed();
        match &self.log {
            Some(log) if what.is_empty() => format!("log: {}", log.display()),
            Some(log) => format!("{what} · log: {}", log.display()),
            None => what,
        }
    }

    /// "2 tests failing: test_a, test_b", "timed out", or the last error
    /// lines of the output; at most [`SUMMARY_CHARS`].
    fn what_failed(&self) -> String {
        if self.timed_out {
            return "timed out".into();
        }
        let count = self.score.failed.filter(|&n| n > 0).map(|n| n as usize);
        let head = count
            .or((!self.failing.is_empty()).then_some(self.failing.len()))
            .map(|n| format!("{} failing", crate::text::count(n, "test", "tests")));
        let detail = if self.failing.is_empty() {
            last_error_lines(&self.stdout_tail, &self.stderr_tail)
        } else {
            let room = SUMMARY_CHARS.saturating_sub(head.as_deref().map_or(0, str::len) + 2);
            name_list(&self.failing, count.unwrap_or(0).max(self.failing.len()), room)
        };
        let what = match (head, detail.is_empty()) {
            (Some(head), true) => head,
            (Some(head), false) => format!("{head}: {detail}"),
            (None, _) => detail,
        };
        crate::text::clip(&what, SUMMARY_CHARS)
    }

    /// A signature of this failure that compares equal across iterations
    /// when the same thing fails the same way (numbers and paths masked).
    pub fn signature(&self) -> String {
        let text = format!("{}\n{}", self.stdout_tail, self.stderr_tail);
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let key_lines: Vec<&str> = lines
            .iter()
            .filter(|l| {
                let lower = l.to_lowercase();
                ["error", "fail", "panic", "assert", "expected"].iter().any(|k| lower.contains(k))
            })
            .take(3)
            .copied()
            .collect();
        let chosen = if key_lines.is_empty() {
            lines.iter().rev().take(3).rev().copied().collect()
        } else {
            key_lines
        };
        let masked: String =
            chosen.join(" | ").chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
        format!("gate: {}", masked.chars().take(300).collect::<String>())
    }

    /// The gate's output for the next prompt: exit code and both tails.
    pub fn feedback(&self, command: &[String]) -> String {
        let mut s = format!(
            "ralph ran the gate `{}`: {}{}\n",
            display(command),
            if self.passed { "passed" } else { "FAILED" },
            match self.exit_code {
                Some(c) => format!(" (exit {c})"),
                None => " (killed: timeout)".into(),
            }
        );
        if !self.stdout_tail.trim().is_empty() {
            s.push_str("\nstdout (last part):\n");
            s.push_str(&crate::prompt::fence(&self.stdout_tail));
        }
        if !self.stderr_tail.trim().is_empty() {
            s.push_str("\nstderr (last part):\n");
            s.push_str(&crate::prompt::fence(&self.stderr_tail));
        }
        s
    }
}

/// "a, b and 3 more" within `room` chars: the names that fit, then how many
/// of `total` were left out.
fn name_list(names: &[String], total: usize, room: usize) -> String {
    use crate::text::{chars, clip};
    let more = |shown: usize| match total.saturating_sub(shown) {
        0 => String::new(),
        k => format!(" and {k} more"),
    };
    let mut out = String::new();
    let mut shown = 0;
    for name in names {
        let next = if out.is_empty() { name.clone() } else { format!("{out}, {name}") };
        if chars(&next) + chars(&more(shown + 1)) > room {
            break;
        }
        out = next;
        shown += 1;
    }
    match names.first() {
        Some(first) if shown == 0 => clip(&format!("{first}{}", more(1)), room),
        _ => format!("{out}{}", more(shown)),
    }
}

/// The last two distinct lines of the output that name an error (stderr's
/// when it has any), else its last line, joined with " · ".
fn last_error_lines(stdout: &str, stderr: &str) -> String {
    let lines = |tail: &str| -> Vec<String> {
        crate::text::plain(tail)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| crate::text::clip(l, SUMMARY_CHARS))
            .collect()
    };
    let (out, err) = (lines(stdout), lines(stderr));
    let errors = |v: &[String]| -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for line in v.iter().rev().filter(|l| crate::learn::lessons::names_an_error(l)) {
            if !found.contains(line) {
                found.insert(0, line.clone());
            }
            if found.len() == 2 {
                break;
            }
        }
        found
    };
    let chosen = [errors(&err), errors(&out)]
        .into_iter()
        .find(|v| !v.is_empty())
        .or_else(|| err.last().or(out.last()).map(|l| vec![l.clone()]))
        .unwrap_or_default();
    chosen.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Summaries {
        let mut s = Summaries::default();
        for line in text.lines() {
            s.line(line.as_bytes());
        }
        s
    }

    fn summaries(text: &str) -> (Option<u32>, Option<u32>) {
        let s = read(text);
        (s.failed, s.passed)
    }

    #[test]
    fn reads_test_runner_summaries() {
        let cases: &[(&str, (Option<u32>, Option<u32>))] = &[
            ("test result: ok. 5 passed; 0 failed; 0 ignored", (Some(0), Some(5))),
            (
                "test result: FAILED. 3 passed; 2 failed; 0 ignored\ntest result: ok. 4 passed; 0 failed;",
                (Some(2), Some(7)),
            ),
            ("Tests:       2 failed, 5 passed, 7 total", (Some(2), Some(5))),
            ("Tests:       5 passed, 5 total", (Some(0), Some(5))),
            ("======= 2 failed, 5 passed in 0.12s =======", (Some(2), Some(5))),
            ("============ 3 passed in 1.50s ============", (Some(0), Some(3))),
            (
                "--- FAIL: TestA (0.00s)\n--- PASS: TestB (0.00s)\n    --- FAIL: TestA/sub",
                (Some(2), Some(1)),
            ),
            ("nothing to see here", (None, None)),
            ("Ran 3 tests in 0.001s\n\nFAILED (failures=1, errors=1)", (Some(2), Some(1))),
            ("Ran 4 tests in 0.001s\n\nOK", (Some(0), Some(4))),
            ("Ran 4 tests in 0.001s\nOK (skipped=1)", (Some(0), Some(4))),
            ("FAILED (errors=1)", (None, None)),
        ];
        for (text, want) in cases {
            assert_eq!(summaries(text), *want, "{text}");
        }
    }

    #[test]
    fn failing_test_names_as_each_runner_prints_them() {
        #[rustfmt::skip]
        let cases: &[(&str, &str, &[&str])] = &[
            ("cargo", "running 3 tests\ntest calc::tests::adds ... ok\ntest calc::tests::divides_by_zero ... FAILED\ntest src/lib.rs - doc (line 3) ... FAILED\n\nfailures:\n    calc::tests::divides_by_zero\n",
                &["calc::tests::divides_by_zero", "src/lib.rs - doc (line 3)"]),
            ("pytest", "tests/test_calc.py .F.E\n=== short test summary info ===\nFAILED tests/test_calc.py::test_zero - ZeroDivisionError: division by zero\nERROR tests/test_db.py::test_open\nFAILED (errors=1)\n",
                &["tests/test_calc.py::test_zero", "tests/test_db.py::test_open"]),
            ("unittest", "E.F\n======\nERROR: test_zero (tests.test_calc.TestCalc.test_zero)\n------\nTraceback (most recent call last):\nZeroDivisionError: division by zero\nFAIL: test_sub (tests.test_calc.TestCalc.test_sub)\n",
                &["test_zero", "test_sub"]),
            ("jest", "  Calc\n    ✓ adds (2 ms)\n    ✕ divides by zero (5 ms)\n    ✕ subtracts\n",
                &["divides by zero", "subtracts"]),
            ("go", "=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\n    --- FAIL: TestAdd/negative (0.00s)\n--- PASS: TestSub (0.00s)\nFAIL\n",
                &["TestAdd", "TestAdd/negative"]),
            ("the same name twice", "--- FAIL: TestAdd (0.00s)\n--- FAIL: TestAdd (0.01s)\n", &["TestAdd"]),
            ("no runner", "error: could not compile `demo`\nFAILED\nERROR\n", &[]),
        ];
        for (name, text, want) in cases {
            assert_eq!(read(text).names, *want, "{name}");
        }
        let many: String = (0..50).map(|i| format!("--- FAIL: Test{i}\n")).collect();
        assert_eq!(read(&many).names.len(), MAX_NAMES);
    }

    fn failed(failing: &[&str], score_failed: Option<u32>, out: &str, err: &str) -> Verdict {
        Verdict {
            passed: false,
            exit_code: Some(1),
            timed_out: false,
            interrupted: false,
            duration: Duration::from_millis(142),
            stdout_tail: out.into(),
            stderr_tail: err.into(),
            score: Score { exit_code: Some(1), failed: score_failed, passed_tests: None },
            failing: failing.iter().map(|s| s.to_string()).collect(),
            log: Some(PathBuf::from(".git/ralph/logs/r/gate-2.log")),
        }
    }

    #[test]
    fn a_failed_gate_says_what_failed_and_where_its_log_is() {
        let unittest_out = "ERROR: test_zero (tests.test_calc.TestCalc.test_zero)\n\
            Traceback (most recent call last):\n  File \"tests/test_calc.py\", line 9\n\
            ZeroDivisionError: division by zero\n\nRan 3 tests in 0.001s\n\nFAILED (errors=1)\n";
        let long: Vec<String> =
            (0..30).map(|i| format!("tests::a_rather_long_test_name_{i}")).collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let log = " · log: .git/ralph/logs/r/gate-2.log";
        #[rustfmt::skip]
        let cases: Vec<(&str, Verdict, String)> = vec![
            ("named tests", failed(&["test_zero"], Some(1), unittest_out, ""), format!("1 test failing: test_zero{log}")),
            ("more failing than named", failed(&["a", "b"], Some(5), "", ""), format!("5 tests failing: a, b and 3 more{log}")),
            ("names without a count", failed(&["TestAdd"], None, "", ""), format!("1 test failing: TestAdd{log}")),
            ("no names: the error lines", failed(&[], None, "compiling\n", "error[E0425]: cannot find value `y`\nerror: could not compile `demo`\nwarning: 1 warning\n"),
                format!("error[E0425]: cannot find value `y` · error: could not compile `demo`{log}")),
            ("a count, no names", failed(&[], Some(2), "test result: FAILED. 1 passed; 2 failed\n", ""), format!("2 tests failing: test result: FAILED. 1 passed; 2 failed{log}")),
            ("no error line: the last line", failed(&[], None, "checking\nnot ready yet\n", ""), format!("not ready yet{log}")),
            ("nothing printed", failed(&[], None, "", ""), "log: .git/ralph/logs/r/gate-2.log".into()),
        ];
        for (name, v, want) in &cases {
            assert_eq!(v.summary(), *want, "{name}");
        }
        let many = failed(&long, Some(30), "", "");
        let what = many.summary();
        let what = what.strip_suffix(log).unwrap();
        assert!(crate::text::chars(what) <= SUMMARY_CHARS, "{}: {what}", what.len());
        assert!(what.starts_with("30 tests failing: tests::a_rather_long_test_name_0, "), "{what}");
        assert!(what.ends_with(" more"), "{what}");
        let huge = failed(&[], None, &"E".repeat(5000), "");
        let what = huge.summary();
        assert!(crate::text::chars(what.strip_suffix(log).unwrap()) <= SUMMARY_CHARS, "{what}");
        let mut timed_out = failed(&["x"], None, "", "");
        timed_out.timed_out = true;
        assert_eq!(timed_out.summary(), format!("timed out{log}"));
        let mut passed = failed(&[], None, "", "");
        passed.passed = true;
        passed.score.passed_tests = Some(4);
        assert_eq!(passed.summary(), "4 tests pass");
        passed.log = None;
        passed.score.passed_tests = None;
        assert_eq!(passed.summary(), "");
    }

    fn gate(cmd: &[&str]) -> (Gate, Vec<String>) {
        let g = Gate {
            command: cmd.iter().map(|s| s.to_string()).collect(),
            timeout: Duration::from_secs(20),
            grace: Duration::from_millis(200),
            tail_bytes: 64,
            fatal_signatures: vec!["No space left".into()],
            redactor: None,
        };
        let c = g.command.clone();
        (g, c)
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn gate_text_with_shell_syntax_runs_through_sh_and_plain_text_does_not() {
        #[rustfmt::skip]
        let cases: &[(&str, &[&str])] = &[
            ("cargo test --quiet", &["cargo", "test", "--quiet"]),
            ("python3 -m unittest", &["python3", "-m", "unittest"]),
            ("sh -c 'exit 1'", &["sh", "-c", "exit 1"]),
            ("  cd tests && python3 -m unittest ", &["sh", "-c", "cd tests && python3 -m unittest"]),
            ("pytest -q | tee log", &["sh", "-c", "pytest -q | tee log"]),
            ("CI=1 npm test", &["sh", "-c", "CI=1 npm test"]),
            (r#"["sh", "-c", "cd tests && make"]"#, &["sh", "-c", "cd tests && make"]),
            (r#"["pytest", "tests/*.py"]"#, &["pytest", "tests/*.py"]),
            ("", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(argv(text).unwrap(), *want, "{text}");
        }
        assert!(argv("cd 'tests && x").is_err());
        assert_eq!(display(&argv("cd tests && make").unwrap()), "sh -c 'cd tests && make'");
    }

    #[test]
    fn the_programs_a_gate_needs() {
        #[rustfmt::skip]
        let cases: &[(&[&str], &[&str])] = &[
            (&["cargo", "test"], &["cargo"]),
            (&["sh", "-c", "cd tests && python3 -m unittest"], &["sh"]),
            (&["sh", "-c", "pytest -q | tee log"], &["sh", "pytest"]),
            (&["/bin/bash", "-c", "make check"], &["/bin/bash", "make"]),
            (&["sh", "script.sh"], &["sh"]),
            (&[], &[]),
        ];
        for (command, want) in cases {
            assert_eq!(programs(&strings(command)), *want, "{command:?}");
        }
    }

    #[test]
    fn check_programs_agrees_with_how_the_gate_runs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("check.sh"), "").unwrap();
        let prd = |verify: &str| {
            let json = format!(
                r#"{{"userStories":[{{"id":"US-001","title":"t","passes":false,"verify":{verify:?}}}]}}"#
            );
            crate::prd::Prd::parse(json.as_bytes(), Path::new("prd.json")).unwrap()
        };
        let none = prd("true");
        let check = |gate: &str, prd: &crate::prd::Prd| {
            check_programs_in(&argv(gate).unwrap(), prd, dir.path()).map_err(|e| e.message)
        };
        #[rustfmt::skip]
        let cases: &[(&str, &str, Result<(), &str>)] = &[
            ("cd tests && python3 -m unittest", "true", Ok(())),
            ("no-such-tool-xyz -q | tee log", "true", Err("`no-such-tool-xyz` (gate.command) not found")),
            ("no-such-tool-xyz -q", "true", Err("`no-such-tool-xyz` (gate.command) not found")),
            ("./check.sh", "true", Ok(())),
            ("./missing.sh", "true", Err("`./missing.sh` (gate.command) not found")),
            ("true", "cd sub && no-such-tool-xyz", Ok(())),
            ("true", "no-such-tool-xyz | tee x", Err("`no-such-tool-xyz` (the \"verify\" of US-001) not found")),
        ];
        for (gate, verify, want) in cases {
            let prd = if *verify == "true" { none.clone() } else { prd(verify) };
            match (check(gate, &prd), want) {
                (Ok(()), Ok(())) => {}
                (Err(got), Err(want)) => assert!(got.contains(want), "{gate} / {verify}: {got}"),
                (got, want) => panic!("{gate} / {verify}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn a_shell_gate_runs_in_the_project() {
        let _serial = crate::agent::supervise::serial();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/ok"), "").unwrap();
        let (g, _) = gate(&[]);
        let v = g.run(
            &argv("cd tests && test -f ok && echo in-$(basename $PWD)").unwrap(),
            dir.path(),
            None,
        );
        let v = v.unwrap();
        assert!(v.passed && v.stdout_tail == "in-tests\n", "{v:?}");
        let v = g.run(&argv("cd tests && test -f missing").unwrap(), dir.path(), None).unwrap();
        assert!(!v.passed);
        assert!(v.feedback(&argv("cd tests && test -f missing").unwrap()).starts_with(
            "ralph ran the gate `sh -c 'cd tests && test -f missing'`: FAILED (exit 1)"
        ));
    }

    #[test]
    fn passing_failing_and_unrunnable_gates() {
        let _serial = crate::agent::supervise::serial();
        let (g, c) = gate(&["sh", "-c", "echo ok; exit 0"]);
        let v = g.run(&c, Path::new("/"), None).unwrap();
        assert!(v.passed);
        let (g, c) = gate(&[
            "sh",
            "-c",
            "for i in $(seq 1 1000); do echo line $i; done; echo SUMMARY; echo err >&2; exit 3",
        ]);
        let v = g.run(&c, Path::new("/"), None).unwrap();
        assert!(!v.passed);
        assert_eq!(v.exit_code, Some(3));
        assert!(
            v.stdout_tail.contains("SUMMARY") && v.stdout_tail.len() <= 70,
            "{:?}",
            v.stdout_tail
        );
        assert_eq!(v.stderr_tail, "err\n");
        assert!(v.feedback(&c).contains("SUMMARY"));
        let (g, c) = gate(&["/nonexistent/gate"]);
        let e = g.run(&c, Path::new("/"), None).unwrap_err();
        assert!(
            e.message.contains("cannot run") && e.message.contains("not found"),
            "{}",
            e.message
        );
        let (g, c) =
            gate(&["sh", "-c", "echo 'write failed: No space left on device' >&2; exit 1"]);
        assert!(g.run(&c, Path::new("/"), None).unwrap_err().message.contains("fatal signature"));
    }
}
