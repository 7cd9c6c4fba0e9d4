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

use crate::agent::capture::{LineSplitter, Log, SharedLog, Tail};
use crate::agent::supervise::{self, Sink, Spec, TimeLimits};
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
    /// The gate runs code the agent wrote: confined like the agent (`None`: unconfined).
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Sandbox>>,
    /// Its log's cap in bytes (`logs.max_file_bytes`; 0: none).
    pub log_cap: u64,
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
    /// The tests the runners' summaries counted, when any summary was found.
    pub counts: Option<TestCounts>,
    /// What the sandbox denied it ("sandbox denied /etc/x").
    pub sandbox_denials: Vec<String>,
}

/// What a gate run's test runners counted: every summary line of the run
/// added up (cargo prints one per test binary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCounts {
    pub passed: u32,
    pub failed: u32,
    /// cargo's `#[ignore]`d tests.
    #[serde(default)]
    pub ignored: u32,
    /// pytest's, jest's, go's and unittest's skipped tests (pytest's
    /// `xfailed` and jest's `todo` count here too: tests that ran without
    /// being held to their result).
    #[serde(default)]
    pub skipped: u32,
}

impl TestCounts {
    /// Tests that ran and were held to their result.
    pub fn ran(&self) -> u32 {
        self.passed + self.failed
    }

    /// Tests set aside: ignored or skipped.
    pub fn set_aside(&self) -> u32 {
        self.ignored + self.skipped
    }

    /// "41 passed, 0 failed, 1 ignored".
    pub fn describe(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed, self.failed);
        if self.ignored > 0 {
            s.push_str(&format!(", {} ignored", self.ignored));
        }
        if self.skipped > 0 {
            s.push_str(&format!(", {} skipped", self.skipped));
        }
        s
    }
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

/// The gate could not run: an environment problem (exit 7).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
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
    ignored: u32,
    skipped: u32,
    /// unittest's "Ran N tests", until its "OK" or "FAILED (…)" line.
    ran: Option<u32>,
    names: Vec<String>,
}

fn summary_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: std::sync::OnceLock<Vec<(Regex, &'static str)>> = std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            // cargo test: "test result: FAILED. 3 passed; 2 failed; 0 ignored"
            (r"^test result: \w+\. (\d+) passed; (\d+) failed(?:; (\d+) ignored)?", "cargo"),
            // jest: "Tests:       2 failed, 5 passed, 7 total"
            (r"^Tests:\s+(?:(\d+) failed, )?(?:\d+ \w+, )*?(\d+) passed", "jest"),
            // pytest: "==== 2 failed, 5 passed in 0.12s ====" (either part may be missing)
            (r"^=+ (?:(\d+) failed)?(?:, )?(?:(\d+) passed)?.* in [\d.]+s", "pytest"),
            // go test: "--- FAIL: TestX" / "--- PASS: TestY"
            (r"^\s*--- (FAIL|PASS|SKIP):", "go"),
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
                    let skipped = c.get(0).map_or(0, |m| count_of(m.as_str(), "skipped="));
                    // unittest counts a skipped test among those it ran.
                    *self.passed.get_or_insert(0) += ran;
                    self.failed.get_or_insert(0);
                    self.skipped += skipped;
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
                    let skipped = count("skipped=");
                    *self.failed.get_or_insert(0) += failed;
                    *self.passed.get_or_insert(0) += ran.saturating_sub(failed);
                    self.skipped += skipped;
                }
                "cargo" => {
                    *self.passed.get_or_insert(0) += num(c.get(1));
                    *self.failed.get_or_insert(0) += num(c.get(2));
                    self.ignored += num(c.get(3));
                }
                "jest" | "pytest" => {
                    let (f, p) = (c.get(1), c.get(2));
                    let skipped = count_of(text, " skipped") + count_of(text, " xfailed");
                    let skipped = skipped + count_of(text, " todo");
                    if f.is_none() && p.is_none() && skipped == 0 {
                        continue;
                    }
                    *self.failed.get_or_insert(0) += num(f);
                    *self.passed.get_or_insert(0) += num(p);
                    self.skipped += skipped;
                }
                _ => match &c[1] {
                    "FAIL" => *self.failed.get_or_insert(0) += 1,
                    "SKIP" => {
                        self.failed.get_or_insert(0);
                        self.skipped += 1;
                    }
                    _ => *self.passed.get_or_insert(0) += 1,
                },
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

/// The number written just before `word` in `text` ("3 skipped" → 3;
/// "skipped=2" → 2 when `word` ends with `=`), 0 when there is none.
fn count_of(text: &str, word: &str) -> u32 {
    let Some(at) = text.find(word) else { return 0 };
    if let Some(after) = word.strip_suffix('=').map(|_| &text[at + word.len()..]) {
        return after
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0);
    }
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().unwrap_or(0)
}

impl Summaries {
    fn counts(&self) -> Option<TestCounts> {
        (self.passed.is_some() || self.failed.is_some() || self.ignored + self.skipped > 0).then(
            || TestCounts {
                passed: self.passed.unwrap_or(0),
                failed: self.failed.unwrap_or(0),
                ignored: self.ignored,
                skipped: self.skipped,
            },
        )
    }
}

struct GateSink {
    tail: Tail,
    splitter: LineSplitter,
    summaries: Summaries,
    /// The log stdout and stderr share (it redacts).
    log: Option<SharedLog>,
    denials: crate::sandbox::Denials,
}

impl Sink for GateSink {
    fn write(&mut self, chunk: &[u8]) {
        self.tail.push(chunk);
        if let Some(log) = &self.log {
            log.lock().unwrap_or_else(|p| p.into_inner()).write(chunk);
        }
        let (s, d) = (&mut self.summaries, &mut self.denials);
        self.splitter.push(chunk, &mut |line, _| {
            s.line(line);
            d.line(line);
        });
    }

    fn finish(&mut self) {
        let (s, d) = (&mut self.summaries, &mut self.denials);
        self.splitter.finish(&mut |line, _| {
            s.line(line);
            d.line(line);
        });
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
pub fn argv(text: &str) -> Result<Vec<String>, words::WordsError> {
    if let Some(argv) = words::strings_argv(text) {
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
        let Some((program, _)) = command.split_first() else {
            return Err(NotRun {
                message: "the gate command is empty".into(),
                hint: "set gate.command".into(),
            });
        };
        let child = self.confine(program, cwd)?;
        let log_file = log.and_then(|p| std::fs::File::create(p).ok());
        let log_written = log_file.is_some();
        let shared = log_file.map(|f| Log::capped(Some(f), self.redactor.clone(), self.log_cap));
        let (finished, out, err) = self.supervise(command, cwd, child.as_ref(), &shared)?;
        let stdout_tail = self.clean(out.tail.text());
        let stderr_tail = self.clean(err.tail.text());
        if let Some(sig) = self.fatal_signature(&stdout_tail, &stderr_tail) {
            finish_log(&shared, &[]);
            return Err(NotRun {
                message: format!("the gate's output contains the fatal signature {sig:?}"),
                hint: "the environment is broken (see gate.fatal_signatures): fix it and run ralph again".into(),
            });
        }
        let found = Findings::of(out, err);
        finish_log(&shared, &found.sandbox_denials);
        let interrupted = finished.stopped == Some(crate::analyze::StopReason::Interrupted);
        let log =
            log.filter(|_| log_written).map(|p| p.strip_prefix(cwd).unwrap_or(p).to_path_buf());
        Ok(Verdict {
            sandbox_denials: found.sandbox_denials,
            passed: finished.success(),
            exit_code: finished.exit_code,
            timed_out: finished.stopped.is_some() && !interrupted,
            interrupted,
            duration: finished.duration,
            score: Score {
                exit_code: finished.exit_code,
                failed: found.failed,
                passed_tests: found.passed,
            },
            stdout_tail,
            stderr_tail,
            failing: found.failing,
            log,
            counts: found.counts,
        })
    }

    /// The sandbox the gate runs in, when children are confined.
    fn confine(&self, program: &str, cwd: &Path) -> Result<Option<crate::sandbox::Child>, NotRun> {
        let Some(sandbox) = &self.sandbox else { return Ok(None) };
        sandbox.child(None, cwd, program, &[]).map_err(|e| NotRun {
            message: format!("the gate cannot run: cannot make its sandbox's temp dir: {e}"),
            hint: "check that the temp dir (TMPDIR) is writable".into(),
        })
    }

    /// Runs the command to its end (or its timeout), stdout and stderr
    /// each read by a [`GateSink`] that shares `log`.
    fn supervise(
        &self,
        command: &[String],
        cwd: &Path,
        child: Option<&crate::sandbox::Child>,
        log: &Option<SharedLog>,
    ) -> Result<(supervise::Finished, GateSink, GateSink), NotRun> {
        let (program, args) = command.split_first().expect("the caller checked it is not empty");
        let sink = || GateSink {
            tail: Tail::new(self.tail_bytes),
            splitter: LineSplitter::default(),
            summaries: Summaries::default(),
            log: log.clone(),
            denials: child.map(|c| c.denials()).unwrap_or_default(),
        };
        let spec = Spec {
            program,
            args,
            cwd,
            env_remove: &[],
            env_set: &[],
            stdin: None,
            limits: TimeLimits {
                timeout: Some(self.timeout).filter(|t| !t.is_zero()),
                idle: None,
                grace: self.grace,
                deadline: None,
                interruptible: true,
            },
            sandbox: child,
        };
        supervise::run(&spec, sink(), sink(), &mut || {}).map_err(|e| NotRun {
            message: format!("the gate cannot run: {e}"),
            hint: format!(
                "check gate.command ({}) — ralph stops here because no agent can fix a gate that does not start",
                display(command)
            ),
        })
    }

    /// Output as it may be kept: with secrets redacted.
    fn clean(&self, text: String) -> String {
        match &self.redactor {
            Some(r) => r.text(&text).into_owned(),
            None => text,
        }
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

/// The gate's log ended: ralph's own lines (the sandbox's denials) after
/// the gate's output.
fn finish_log(log: &Option<SharedLog>, lines: &[String]) {
    if let Some(log) = log {
        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
        for line in lines {
            log.write(format!("[ralph] {line}\n").as_bytes());
        }
        log.finish();
    }
}

/// What the gate's stdout and stderr said, taken together: the test
/// runners' counts added up, the failing tests they named (stdout's first)
/// and what the sandbox denied.
struct Findings {
    failed: Option<u32>,
    passed: Option<u32>,
    counts: Option<TestCounts>,
    failing: Vec<String>,
    sandbox_denials: Vec<String>,
}

impl Findings {
    fn of(out: GateSink, err: GateSink) -> Findings {
        let counts = match (out.summaries.counts(), err.summaries.counts()) {
            (None, None) => None,
            (a, b) => {
                let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
                Some(TestCounts {
                    passed: a.passed + b.passed,
                    failed: a.failed + b.failed,
                    ignored: a.ignored + b.ignored,
                    skipped: a.skipped + b.skipped,
                })
            }
        };
        let mut failing = out.summaries.names;
        for name in err.summaries.names {
            if failing.len() < MAX_NAMES && !failing.contains(&name) {
                failing.push(name);
            }
        }
        let mut sandbox_denials = out.denials.texts();
        for d in err.denials.texts() {
            if !sandbox_denials.contains(&d) {
                sandbox_denials.push(d);
            }
        }
        Findings {
            failed: sum(out.summaries.failed, err.summaries.failed),
            passed: sum(out.summaries.passed, err.summaries.passed),
            counts,
            failing,
            sandbox_denials,
        }
    }
}

/// Two counts added, `None` when neither stream had one.
fn sum(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
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
mod tests;
