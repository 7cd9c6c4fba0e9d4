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
fn counts_what_each_runner_ignored_or_skipped() {
    let counts = |text: &str| read(text).counts();
    let c =
        |passed, failed, ignored, skipped| Some(TestCounts { passed, failed, ignored, skipped });
    let cases: &[(&str, Option<TestCounts>)] = &[
        ("test result: ok. 5 passed; 0 failed; 1 ignored; 0 measured", c(5, 0, 1, 0)),
        (
            "test result: ok. 2 passed; 0 failed; 0 ignored\ntest result: ok. 0 passed; 0 failed; 2 ignored",
            c(2, 0, 2, 0),
        ),
        ("======= 3 passed, 1 skipped in 0.12s =======", c(3, 0, 0, 1)),
        ("======= 1 failed, 3 passed, 1 xfailed in 0.12s =======", c(3, 1, 0, 1)),
        ("============ 2 skipped in 0.01s ============", c(0, 0, 0, 2)),
        ("Tests:       1 skipped, 5 passed, 6 total", c(5, 0, 0, 1)),
        ("--- PASS: TestA (0.00s)\n--- SKIP: TestB (0.00s)", c(1, 0, 0, 1)),
        ("Ran 4 tests in 0.001s\nOK (skipped=1)", c(4, 0, 0, 1)),
        ("nothing to see here", None),
    ];
    for (text, want) in cases {
        assert_eq!(counts(text), *want, "{text}");
    }
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
        sandbox_denials: Vec::new(),
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
        counts: None,
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
        sandbox: None,
        command: cmd.iter().map(|s| s.to_string()).collect(),
        timeout: Duration::from_secs(20),
        grace: Duration::from_millis(200),
        tail_bytes: 64,
        fatal_signatures: vec!["No space left".into()],
        redactor: None,
        log_cap: 0,
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
    assert!(
        v.feedback(&argv("cd tests && test -f missing").unwrap()).starts_with(
            "ralph ran the gate `sh -c 'cd tests && test -f missing'`: FAILED (exit 1)"
        )
    );
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
    assert!(v.stdout_tail.contains("SUMMARY") && v.stdout_tail.len() <= 70, "{:?}", v.stdout_tail);
    assert_eq!(v.stderr_tail, "err\n");
    assert!(v.feedback(&c).contains("SUMMARY"));
    let (g, c) = gate(&["/nonexistent/gate"]);
    let e = g.run(&c, Path::new("/"), None).unwrap_err();
    assert!(e.message.contains("cannot run") && e.message.contains("not found"), "{}", e.message);
    let (g, c) = gate(&["sh", "-c", "echo 'write failed: No space left on device' >&2; exit 1"]);
    assert!(g.run(&c, Path::new("/"), None).unwrap_err().message.contains("fatal signature"));
}
