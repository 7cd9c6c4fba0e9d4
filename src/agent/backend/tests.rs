use super::*;

/// The invocation with nothing set in ralph's environment.
fn invocation(b: &Backend, prompt: &str, file: &str) -> Result<Invocation, InvocationError> {
    b.invocation_in(prompt, Path::new(file), InheritedEnv::default())
}

fn argv(b: &Backend) -> (Vec<String>, PromptChannel) {
    let inv = invocation(b, "PROMPT", "/p/prompt.md").unwrap();
    let mut v = vec![inv.program.clone()];
    v.extend(inv.args.clone());
    assert_eq!(inv.stdin.is_some(), b.channel() == PromptChannel::Stdin);
    (v, b.channel())
}

fn with(tool: Tool, f: impl FnOnce(&mut Backend)) -> Backend {
    let mut b = Backend::new(tool);
    f(&mut b);
    b
}

#[test]
fn exact_command_lines() {
    use PromptChannel::*;
    let cases: Vec<(Backend, &str, PromptChannel)> = vec![
        (
            Backend::new(Tool::Claude),
            "claude -p --output-format stream-json --verbose --dangerously-skip-permissions",
            Stdin,
        ),
        (
            with(Tool::Claude, |b| b.model = Some("sonnet".into())),
            "claude -p --output-format stream-json --verbose --dangerously-skip-permissions --model sonnet",
            Stdin,
        ),
        (
            with(Tool::Claude, |b| {
                b.safe = true;
                b.allowed_tools = vec!["Read".into(), "Bash(git add:*)".into()]
            }),
            "claude -p --output-format stream-json --verbose --permission-mode acceptEdits --allowedTools Read Bash(git add:*)",
            Stdin,
        ),
        (Backend::new(Tool::Amp), "amp --dangerously-allow-all --stream-json -x", Stdin),
        (
            Backend::new(Tool::Codex),
            "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox",
            Stdin,
        ),
        (
            with(Tool::Codex, |b| b.safe = true),
            "codex exec --json --skip-git-repo-check --sandbox workspace-write",
            Stdin,
        ),
        (
            Backend::new(Tool::Gemini),
            "gemini --output-format stream-json --skip-trust --approval-mode=yolo",
            Stdin,
        ),
        (
            with(Tool::Gemini, |b| {
                b.safe = true;
                b.allowed_tools = vec!["Read".into(), "Bash(git commit:*)".into()];
                b.gate_commands = vec![vec!["cargo".into(), "test".into()]];
            }),
            "gemini --output-format stream-json --skip-trust --approval-mode=auto_edit --allowed-tools=run_shell_command(git commit),run_shell_command(cargo)",
            Stdin,
        ),
        (
            Backend::new(Tool::Opencode),
            "opencode run --format json --print-logs --log-level WARN --auto PROMPT",
            Argv,
        ),
        (
            Backend::new(Tool::Cursor),
            "cursor-agent -p --output-format stream-json --force PROMPT",
            Argv,
        ),
        (
            Backend::new(Tool::Aider),
            "aider --yes-always --no-stream --no-pretty --no-check-update --no-gitignore --no-show-release-notes --no-analytics --no-auto-commits --message-file /p/prompt.md",
            File,
        ),
        (
            with(Tool::Aider, |b| b.safe = true),
            "aider --yes-always --no-suggest-shell-commands --no-detect-urls --no-stream --no-pretty --no-check-update --no-gitignore --no-show-release-notes --no-analytics --no-auto-commits --message-file /p/prompt.md",
            File,
        ),
        (
            with(Tool::Claude, |b| {
                b.safe = true;
                b.allowed_tools = vec!["Read".into(), "Bash(make:*)".into()];
                b.gate_commands = vec![
                    vec!["sh".into(), "-c".into(), "cd tests && python3 -m unittest".into()],
                    vec!["make".into(), "check".into()],
                ];
            }),
            "claude -p --output-format stream-json --verbose --permission-mode acceptEdits --allowedTools Read Bash(make:*) Bash(cd:*) Bash(python3:*)",
            Stdin,
        ),
        (
            with(Tool::Codex, |b| {
                b.model = Some("o4".into());
                b.extra_args = vec!["-c".into(), "x=1".into()]
            }),
            "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --model o4 -c x=1",
            Stdin,
        ),
    ];
    for (b, want, channel) in cases {
        let (got, ch) = argv(&b);
        assert_eq!(got.join(" "), want);
        assert_eq!(ch, channel, "{want}");
    }
}

#[test]
fn gemini_runs_unrelaunched_and_safe_opencode_denies_bash_but_the_allowed_prefixes() {
    let env = |b: &Backend| invocation(b, "x", "/p/prompt.md").unwrap().env_set;
    let gemini = env(&Backend::new(Tool::Gemini));
    assert!(gemini.contains(&("GEMINI_CLI_NO_RELAUNCH".into(), "true".into())), "{gemini:?}");
    assert!(!env(&Backend::new(Tool::Opencode)).iter().any(|(k, _)| k == "OPENCODE_PERMISSION"));
    let safe = with(Tool::Opencode, |b| {
        b.safe = true;
        b.allowed_tools = vec!["Read".into(), "Bash(git commit:*)".into()];
        b.gate_commands = vec![vec!["make".into(), "check".into()]];
    });
    let permission = env(&safe)
        .into_iter()
        .find_map(|(k, v)| (k == "OPENCODE_PERMISSION").then_some(v))
        .expect("safe opencode sets OPENCODE_PERMISSION");
    // opencode takes the last rule that matches: the deny-all comes first.
    assert_eq!(
        permission,
        r#"{"bash":{"*":"deny","git commit":"allow","git commit *":"allow","make":"allow","make *":"allow"},"webfetch":"deny"}"#
    );
    assert!(!argv(&safe).0.contains(&"--auto".to_string()));
}

#[test]
fn aider_keeps_its_scratch_files_out_of_git() {
    assert_eq!(
        Tool::Aider.scratch_files(),
        [".aider.chat.history.md", ".aider.input.history", ".aider.tags.cache.v4"]
    );
    assert!(Tool::Claude.scratch_files().is_empty());
}

#[test]
fn safe_mode_differs_from_the_default_for_every_tool_with_a_safer_mode() {
    for tool in Tool::ALL.into_iter().filter(|t| *t != Tool::Custom) {
        let default = argv(&Backend::new(tool)).0;
        let safe = argv(&with(tool, |b| b.safe = true)).0;
        assert_ne!(default, safe, "{tool}: --safe changes nothing");
    }
}

#[test]
fn the_gate_adds_what_it_runs_to_claudes_safe_mode() {
    let gate = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    #[rustfmt::skip]
        let cases: &[(&[&str], &[&str])] = &[
            (&["python3", "-m", "unittest"], &["Bash(python3:*)"]),
            (&["npm", "test"], &["Bash(npm:*)"]),
            (&["./scripts/check.sh", "--all"], &["Bash(./scripts/check.sh:*)"]),
            (&["sh", "-c", "cd tests && uv run pytest -q | tee log"], &["Bash(cd:*)", "Bash(uv:*)", "Bash(tee:*)"]),
            (&["sh", "-c", "CI=1 bundle exec rspec"], &["Bash(bundle:*)"]),
            (&["bash", "-c", "env X=1 make; sudo make install"], &[]),
            (&["sh", "scripts/check.sh"], &[]),
            (&["timeout", "60", "pytest"], &[]),
            (&["/usr/bin/env", "pytest"], &[]),
            (&["sh", "-c", "$RUNNER test; ~/bin/x"], &[]),
            (&[], &[]),
        ];
    for (command, want) in cases {
        assert_eq!(gate_tools(&[gate(command)]), *want, "{command:?}");
    }
    // Once each, and on top of the default list, which has python3, node and uv.
    let twice = [gate(&["pytest"]), gate(&["sh", "-c", "pytest -x"])];
    assert_eq!(gate_tools(&twice), ["Bash(pytest:*)"]);
    let mut b = with(Tool::Claude, |b| b.safe = true);
    b.gate_commands = vec![gate(&["sh", "-c", "cd tests && tox -q"])];
    let (args, _) = argv(&b);
    let allowed: Vec<&String> =
        args.iter().skip_while(|a| *a != "--allowedTools").skip(1).collect();
    for tool in [
        "Bash(python3:*)",
        "Bash(node:*)",
        "Bash(uv:*)",
        "Bash(npm:*)",
        "Bash(cd:*)",
        "Bash(tox:*)",
    ] {
        assert_eq!(allowed.iter().filter(|a| **a == tool).count(), 1, "{tool}: {args:?}");
    }
    // Outside safe mode the gate changes nothing.
    let mut b = Backend::new(Tool::Claude);
    b.gate_commands = vec![gate(&["tox"])];
    assert!(!argv(&b).0.iter().any(|a| a.contains("tox")));
}

#[test]
fn custom_commands_choose_their_channel_and_never_use_a_shell() {
    let b = Backend::custom("my-agent --mode 'fast run'", Format::Text).unwrap();
    let (v, ch) = argv(&b);
    assert_eq!(v, ["my-agent", "--mode", "fast run"]);
    assert_eq!(ch, PromptChannel::Stdin);
    let b = Backend::custom("my-agent --prompt {prompt}", Format::Text).unwrap();
    let (v, ch) = argv(&b);
    assert_eq!(v, ["my-agent", "--prompt", "PROMPT"]);
    assert_eq!(ch, PromptChannel::Argv);
    let b = Backend::custom("my-agent -f {prompt_file}", Format::Text).unwrap();
    let (v, ch) = argv(&b);
    assert_eq!(v, ["my-agent", "-f", "/p/prompt.md"]);
    assert_eq!(ch, PromptChannel::File);
    // A prompt with shell syntax stays one literal argument.
    let inv = invocation(&b, "$(rm -rf ~)", "/p").unwrap();
    assert_eq!(inv.program, "my-agent");
    assert!(Backend::custom("  ", Format::Text).is_none());
    assert!(Backend::custom("a 'b", Format::Text).is_none());
}

#[test]
fn argv_prompts_over_the_kernel_limit_are_refused() {
    let big = "x".repeat(MAX_ARGV_PROMPT + 1);
    let e = invocation(&Backend::new(Tool::Opencode), &big, "/p").unwrap_err();
    assert!(matches!(e, InvocationError::PromptTooLong { tool: Tool::Opencode, .. }), "{e}");
    assert!(e.to_string().contains("one argument"), "{e}");
    assert!(invocation(&Backend::new(Tool::Claude), &big, "/p").is_ok());
}

#[test]
fn preflight_names_the_missing_program_and_the_root_problem() {
    let b = Backend::custom("surely-not-installed-agent-xyz", Format::Text).unwrap();
    let e = b.preflight(false, &|_| None).unwrap_err();
    assert!(e.to_string().contains("`surely-not-installed-agent-xyz` not found"), "{e}");
    let mut claude = Backend::new(Tool::Claude);
    claude.command = vec!["true".into()];
    let e = claude.preflight(true, &|_| None).unwrap_err();
    assert_eq!(e, PreflightError::ClaudeAsRoot);
    assert!(e.to_string().contains("IS_SANDBOX=1"), "{e}");
    assert!(claude.preflight(true, &|k| (k == "IS_SANDBOX").then(|| "1".into())).is_ok());
    assert!(claude.preflight(false, &|_| None).is_ok());
    claude.safe = true;
    assert!(claude.preflight(true, &|_| None).is_ok());
}

#[test]
fn parent_session_variables_are_scrubbed() {
    let inv = invocation(&Backend::new(Tool::Claude), "p", "/p").unwrap();
    assert!(inv.env_remove.iter().any(|v| v == "CLAUDECODE"));
}

#[test]
fn what_ralph_sets_in_the_agents_environment_yields_to_what_the_person_set() {
    let unset = InheritedEnv::default();
    let gemini_set = InheritedEnv { gemini_no_relaunch: true, ..unset };
    let claude_set = InheritedEnv { claude_max_retries: true, ..unset };
    let custom =
        with(Tool::Claude, |b| b.env = vec![("CLAUDE_CODE_MAX_RETRIES".into(), "0".into())]);
    #[rustfmt::skip]
    let cases: Vec<(Backend, InheritedEnv, &[(&str, &str)])> = vec![
        (Backend::new(Tool::Claude), unset, &[("CLAUDE_CODE_MAX_RETRIES", "3")]),
        (Backend::new(Tool::Claude), claude_set, &[]),
        (Backend::new(Tool::Claude), gemini_set, &[("CLAUDE_CODE_MAX_RETRIES", "3")]),
        // The command's own `NAME=value` words come last: the agent sees them.
        (custom, unset, &[("CLAUDE_CODE_MAX_RETRIES", "3"), ("CLAUDE_CODE_MAX_RETRIES", "0")]),
        (Backend::new(Tool::Gemini), unset, &[("GEMINI_CLI_NO_RELAUNCH", "true")]),
        (Backend::new(Tool::Gemini), gemini_set, &[]),
        (Backend::new(Tool::Gemini), claude_set, &[("GEMINI_CLI_NO_RELAUNCH", "true")]),
        (Backend::new(Tool::Codex), unset, &[]),
        (Backend::new(Tool::Opencode), unset, &[]),
    ];
    for (b, env, want) in cases {
        let got = b.invocation_in("p", Path::new("/p"), env).unwrap().env_set;
        let want: Vec<(String, String)> =
            want.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(got, want, "{} with {env:?}", b.tool);
    }
}
