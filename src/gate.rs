//! The verification gate: ralph's own check that a story is done, so the
//! agent's "done" is a claim and the gate's exit code is the verdict.
//!
//! The gate runs in its own process group with its own timeout. Its stdout
//! and stderr are kept as separate bounded tails (test runners print their
//! summary last) for the next prompt, and test-runner summaries are read
//! as they stream by to score how close an iteration came to passing.
//!
//! A gate that cannot run at all — missing program, permission denied, a
//! configured fatal signature in its output — is an environment error: not
//! the agent's fault, not a lesson, not a strike against the breaker.

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::agent::capture::{LineSplitter, Tail};
use crate::agent::supervise::{self, Limits, Sink, Spec};

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

/// Reads test-runner summaries line by line.
#[derive(Debug, Default)]
struct Summaries {
    failed: Option<u32>,
    passed: Option<u32>,
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
        ]
        .iter()
        .filter_map(|(p, k)| Regex::new(p).ok().map(|r| (r, *k)))
        .collect()
    })
}

impl Summaries {
    fn line(&mut self, line: &[u8]) {
        let first = line.iter().position(|b| !b.is_ascii_whitespace()).map(|i| line[i]);
        if !matches!(first, Some(b't' | b'T' | b'=' | b'-')) || line.len() > 4096 {
            return;
        }
        let Ok(text) = std::str::from_utf8(line) else { return };
        let num =
            |m: Option<regex::Match>| m.and_then(|m| m.as_str().parse::<u32>().ok()).unwrap_or(0);
        for (re, kind) in summary_patterns() {
            let Some(c) = re.captures(text) else { continue };
            match *kind {
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

/// Every gate program — `gate.command` and the unfinished stories'
/// `verify` — must exist before the first agent is paid for: a gate that
/// cannot start is an environment error, not something an agent can fix.
pub fn check_programs(gate: &[String], prd: &crate::prd::Prd) -> Result<(), NotRun> {
    let mut commands: Vec<(Vec<String>, String)> = Vec::new();
    if !gate.is_empty() {
        commands.push((gate.to_vec(), "gate.command".into()));
    }
    for s in prd.stories().iter().filter(|s| !s.passes) {
        if let Some(words) = s.verify.as_deref().and_then(|v| crate::agent::words::split(v).ok()) {
            commands.push((words, format!("the \"verify\" of {}", s.id)));
        }
    }
    for (words, what) in commands {
        let Some(program) = words.first() else { continue };
        let found = if program.contains('/') {
            std::fs::metadata(program).is_ok_and(|m| m.is_file())
        } else {
            which::which(program).is_ok()
        };
        if !found {
            return Err(NotRun {
                message: format!("the gate cannot run: `{program}` ({what}) not found"),
                hint: "install it or fix the command; ralph stops before any agent runs".into(),
            });
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
                    command.join(" ")
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
        Ok(Verdict {
            passed: finished.success(),
            exit_code: finished.exit_code,
            timed_out,
            interrupted,
            duration: finished.duration,
            score: Score { exit_code: finished.exit_code, failed, passed_tests },
            stdout_tail,
            stderr_tail,
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
    /// One line for the event stream.
    pub fn summary(&self) -> String {
        if self.timed_out {
            return "timed out".into();
        }
        if self.passed {
            return match self.score.passed_tests {
                Some(n) => format!("{n} tests pass"),
                None => String::new(),
            };
        }
        match self.score.failed {
            Some(n) => format!("{n} test{} failing", crate::text::plural(n as usize)),
            None => String::new(),
        }
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
            command.join(" "),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn summaries(text: &str) -> (Option<u32>, Option<u32>) {
        let mut s = Summaries::default();
        for line in text.lines() {
            s.line(line.as_bytes());
        }
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
        ];
        for (text, want) in cases {
            assert_eq!(summaries(text), *want, "{text}");
        }
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
