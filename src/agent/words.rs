//! Splitting a command string into argv the way a POSIX shell splits words
//! (quotes and backslashes), without ever running a shell: `$(…)`, `;`,
//! globs and variables stay literal text.
//!
//! A text that is a JSON array of strings is read as that argv instead
//! ([`strings_argv`]): how a list is written in an environment variable.
//!
//! [`shell_syntax`] says whether a text needs a shell to mean what it says
//! (`cd tests && pytest`); only a gate, the user's own command, is then run
//! by one ([`crate::gate::argv`]). Agents never are: an agent command's
//! leading `NAME=value` words are its environment, and any other shell
//! syntax is refused with the reason ([`command`]).

/// Why a command written as text cannot be read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WordsError {
    #[error("unterminated {quote} in {text:?}")]
    Unterminated { quote: char, text: String },
    #[error("{text} is a JSON array, but not of strings only")]
    NotStrings { text: String },
    /// An agent command that needs a shell (`what`: the first shell feature).
    #[error(
        "the agent command {text:?} has shell syntax ({what}), and ralph runs an agent without a \
         shell, unlike a gate: the process it starts must be the agent, whose exit code ralph \
         judges, and the prompt ({{prompt}}) or ralph's own arguments must never pass through a \
         shell. ralph keeps the agent's output itself (no `| tee` needed). Put the pipeline in a \
         script and name the script, or write [\"sh\", \"-c\", \"…\"] to run a shell on purpose; \
         leading NAME=value words are fine: they are the agent's environment"
    )]
    ShellSyntax { text: String, what: &'static str },
    #[error("the agent command {text:?} sets variables but names no program")]
    NoProgram { text: String },
}

/// Splits `text` into words. Errors on an unterminated quote.
///
/// A text that is a JSON array of strings (`["notify-send", "ralph done"]`)
/// is that argv: it is how a list is written where only text fits (an
/// environment variable such as `RALPH_HOOKS_ON_HALT`), and split as shell
/// words it would be one word, `[notify-send,ralph done]`. A JSON array with
/// anything but strings in it is an error; text that only looks like one
/// (`[ -f done.txt ]`) is split as usual.
pub fn split(text: &str) -> Result<Vec<String>, WordsError> {
    if let Some(argv) = strings_argv(text) {
        return argv;
    }
    let unterminated = |quote| WordsError::Unterminated { quote, text: text.to_string() };
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(unterminated('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(unterminated('"')),
                        },
                        Some(c) => word.push(c),
                        None => return Err(unterminated('"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => word.push(c),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// An agent command written as text: its argv, and the environment its
/// leading `NAME=value` words give it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentCommand {
    pub env: Vec<(String, String)>,
    pub argv: Vec<String>,
}

/// Reads an agent command: `FOO=1 BAR="a b" my-agent --fast` is `my-agent
/// --fast` with `FOO` and `BAR` set, as a shell would run it. Other shell
/// syntax (`| tee log`, `&&`, `$VAR`, `$(…)`, a glob) is refused, saying
/// why: ralph never runs an agent through a shell. A JSON array is the
/// argv as it is.
pub fn command(text: &str) -> Result<AgentCommand, WordsError> {
    if let Some(argv) = strings_argv(text) {
        return argv.map(|argv| AgentCommand { env: Vec::new(), argv });
    }
    let mut rest = text.trim_start();
    let mut env = Vec::new();
    while shell_syntax(rest) == Some("assignment") {
        let (word, after) = rest.split_at(first_word_end(rest));
        let (name, raw) = word.split_once('=').unwrap_or((word, ""));
        if let Some(what) = shell_syntax(raw) {
            return Err(WordsError::ShellSyntax { text: text.to_string(), what });
        }
        let value = split(raw)?.concat();
        env.push((name.to_string(), value));
        rest = after.trim_start();
    }
    if let Some(what) = shell_syntax(rest) {
        return Err(WordsError::ShellSyntax { text: text.to_string(), what });
    }
    let argv = split(rest)?;
    if argv.is_empty() && !env.is_empty() {
        return Err(WordsError::NoProgram { text: text.to_string() });
    }
    Ok(AgentCommand { env, argv })
}

/// Where the first word of `text` ends (quotes and backslashes kept whole).
fn first_word_end(text: &str) -> usize {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            _ if escaped => escaped = false,
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() => return i,
            (None, _) => {}
        }
    }
    text.len()
}

/// `text` as a JSON array of strings, when it is a JSON array.
pub fn strings_argv(text: &str) -> Option<Result<Vec<String>, WordsError>> {
    let text = text.trim();
    if !(text.starts_with('[') && text.ends_with(']')) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let items = value.as_array()?;
    Some(
        items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| WordsError::NotStrings { text: text.to_string() }),
    )
}

/// Shell builtins and keywords with no program of the same name: a
/// command that starts with one means nothing without a shell.
const SHELL_WORDS: &[&str] = &[
    "cd", "export", "source", ".", "set", "unset", "ulimit", "umask", "alias", "eval", "exec",
    "shift", "trap", "wait", "read", "if", "for", "while", "until", "case", "!", "{", "function",
];

/// The first shell feature in `text`, outside quotes where quotes make it
/// literal: a list or pipeline (`&&`, `||`, `;`, `&`, `|`, a newline), a
/// redirection, a subshell, an expansion (`$VAR`, `$(…)`, backquotes, also
/// inside double quotes), a glob (`*`, `?`, `[…]`), a `~` or `#` starting a
/// word, a variable assignment before the command, or a builtin such as
/// `cd` as the command. `None`: splitting into words ([`split`]) is all a
/// shell would do with it.
pub fn shell_syntax(text: &str) -> Option<&'static str> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut word_start = true;
    // The first word, while it can still be the command's name.
    let mut first = Some(String::new());
    let mut glob_open = false;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let at_start = word_start;
        word_start = false;
        match c {
            '\\' => {
                i += 1;
                first = None;
            }
            '\'' => {
                first = None;
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '"' => {
                first = None;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    match chars[i] {
                        '\\' => i += 1,
                        '`' => return Some("command substitution"),
                        '$' if expands(chars.get(i + 1).copied()) => return Some("expansion"),
                        _ => {}
                    }
                    i += 1;
                }
            }
            '\n' => return Some("newline"),
            ';' => return Some(";"),
            '&' if next == Some('&') => return Some("&&"),
            '&' => return Some("&"),
            '|' if next == Some('|') => return Some("||"),
            '|' => return Some("|"),
            '<' | '>' => return Some("redirection"),
            '(' | ')' => return Some("subshell"),
            '`' => return Some("command substitution"),
            '$' if expands(next) => return Some("expansion"),
            '*' | '?' => return Some("glob"),
            '[' => glob_open = true,
            ']' if glob_open => return Some("glob"),
            '~' if at_start => return Some("~"),
            '#' if at_start => return Some("comment"),
            '=' if first.as_deref().is_some_and(is_name) => return Some("assignment"),
            c if c.is_whitespace() => {
                word_start = true;
                glob_open = false;
                if let Some(word) = first.take_if(|w| !w.is_empty())
                    && SHELL_WORDS.contains(&word.as_str())
                {
                    return Some("builtin");
                }
                // Past the command's name (if it was a word): arguments follow.
            }
            c => {
                if let Some(word) = first.as_mut() {
                    word.push(c);
                }
            }
        }
        i += 1;
    }
    match first {
        Some(word) if SHELL_WORDS.contains(&word.as_str()) => Some("builtin"),
        _ => None,
    }
}

/// Whether `$` followed by `next` is an expansion (not a literal `$`).
fn expands(next: Option<char>) -> bool {
    next.is_some_and(|c| c.is_ascii_alphanumeric() || "_{(?#@*!$-".contains(c))
}

fn is_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The program a shell command starts with, when it is a plain one worth
/// looking for on PATH: not a builtin, not made by an expansion or a glob.
/// `pytest -q | tee log` → `pytest`; `cd tests && pytest` → `None`;
/// `FOO=1 make check` → `make`.
pub fn first_program(script: &str) -> Option<String> {
    command_words(script).into_iter().next().filter(|w| is_plain_program(w))
}

/// The word each simple command of a shell script starts with (after
/// variable assignments and redirections), in order: `cd tests && FOO=1
/// python3 -m unittest | tee log` → `cd`, `python3`, `tee`. A command
/// ralph cannot split (an unterminated quote) is left out.
pub fn command_words(script: &str) -> Vec<String> {
    segments(script)
        .into_iter()
        .filter_map(|segment| {
            split(segment).ok()?.into_iter().find(|w| {
                let assignment = w.split_once('=').is_some_and(|(name, _)| is_name(name));
                let redirection =
                    w.trim_start_matches(|c: char| c.is_ascii_digit()).starts_with(['<', '>']);
                !assignment && !redirection
            })
        })
        .collect()
}

/// Whether `word` names a program as it is: not a shell builtin, nothing
/// a shell would expand.
pub fn is_plain_program(word: &str) -> bool {
    !word.is_empty()
        && !SHELL_WORDS.contains(&word)
        && !word.contains(['$', '`', '*', '?', '[', '~', '"', '\'', '\\'])
}

/// The simple commands of a script: the text between unquoted `;`, `&`,
/// `|`, newlines and parentheses (not the `&` of `2>&1` or `&>`, nor the
/// `|` of `>|`: those are redirections).
fn segments(script: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut prev = ' ';
    for (i, c) in script.char_indices() {
        let before = std::mem::replace(&mut prev, c);
        if escaped {
            escaped = false;
            continue;
        }
        let redirection = match c {
            '&' => matches!(before, '<' | '>') || script[i + 1..].starts_with('>'),
            '|' => before == '>',
            _ => false,
        };
        if quote.is_none() && redirection {
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('"'), '\\') | (None, '\\') => escaped = true,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, ';' | '&' | '|' | '\n' | '(' | ')') => {
                out.push(&script[start..i]);
                start = i + c.len_utf8();
            }
            (None, _) => {}
        }
    }
    out.push(&script[start..]);
    out.retain(|s| !s.trim().is_empty());
    out
}

/// argv as a person would type it: words with spaces or shell syntax in
/// single quotes.
pub fn join(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
            if plain { w.clone() } else { format!("'{}'", w.replace('\'', "'\\''")) }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        let cases: &[(&str, &[&str])] = &[
            ("a b  c", &["a", "b", "c"]),
            ("my-agent --flag 'two words'", &["my-agent", "--flag", "two words"]),
            (r#"x "a \"q\" b" y"#, &["x", "a \"q\" b", "y"]),
            (r"a\ b c", &["a b", "c"]),
            ("''", &[""]),
            ("echo $(rm -rf /); ls *", &["echo", "$(rm", "-rf", "/);", "ls", "*"]),
            ("  ", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(split(text).unwrap(), *want, "{text}");
        }
        assert!(split("a 'b").is_err());
        assert!(split("a \"b").is_err());
    }

    #[test]
    fn agent_commands_take_their_environment_and_refuse_other_shell_syntax() {
        let ok = |env: &[(&str, &str)], argv: &[&str]| {
            Ok(AgentCommand {
                env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                argv: argv.iter().map(|s| s.to_string()).collect(),
            })
        };
        #[rustfmt::skip]
        let cases: &[(&str, Result<AgentCommand, &str>)] = &[
            ("my-agent --fast", ok(&[], &["my-agent", "--fast"])),
            ("FOO=1 my-agent", ok(&[("FOO", "1")], &["my-agent"])),
            ("FOO=1 BAR=\"a b\" my-agent -x 'y z'", ok(&[("FOO", "1"), ("BAR", "a b")], &["my-agent", "-x", "y z"])),
            ("  A_1='' claude", ok(&[("A_1", "")], &["claude"])),
            ("my-agent X=1", ok(&[], &["my-agent", "X=1"])),
            ("my-agent --prompt-file {prompt_file}", ok(&[], &["my-agent", "--prompt-file", "{prompt_file}"])),
            (r#"["sh", "-c", "a | b"]"#, ok(&[], &["sh", "-c", "a | b"])),
            ("my-agent | tee x", Err("has shell syntax (|)")),
            ("FOO=1 my-agent && echo done", Err("has shell syntax (&&)")),
            ("my-agent $(touch x)", Err("has shell syntax (expansion)")),
            ("FOO=$(id) my-agent", Err("has shell syntax (expansion)")),
            ("FOO=~/x my-agent", Err("has shell syntax (~)")),
            ("cd sub; my-agent", Err("has shell syntax")),
            ("FOO=1", Err("names no program")),
            ("my-agent 'x", Err("unterminated")),
        ];
        for (text, want) in cases {
            match (command(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{text}"),
                (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{text}: {e}"),
                (got, want) => panic!("{text}: {got:?}, want {want:?}"),
            }
        }
        let e = command("cmd | tee x").unwrap_err().to_string();
        assert!(e.contains("unlike a gate") && e.contains("[\"sh\", \"-c\""), "{e}");
    }

    #[test]
    fn a_json_array_of_strings_is_that_argv() {
        #[rustfmt::skip]
        let cases: &[(&str, &[&str])] = &[
            (r#"["no-such-notifier","x"]"#, &["no-such-notifier", "x"]),
            (r#" [ "notify-send", "ralph: all done", "$HOME" ] "#, &["notify-send", "ralph: all done", "$HOME"]),
            ("[]", &[]),
            ("[ -f done.txt ]", &["[", "-f", "done.txt", "]"]),
            ("[no-such-notifier, x]", &["[no-such-notifier,", "x]"]),
            (r#"echo ["a"]"#, &["echo", "[a]"]),
        ];
        for (text, want) in cases {
            assert_eq!(split(text).unwrap(), *want, "{text}");
        }
        let e = split(r#"["a", 1]"#).unwrap_err();
        assert!(matches!(e, WordsError::NotStrings { .. }), "{e}");
        assert!(e.to_string().contains("not of strings only"), "{e}");
        // Shell syntax is looked for in text, never in a JSON argv.
        assert_eq!(
            strings_argv(r#"["sh", "-c", "a && b"]"#).unwrap().unwrap(),
            ["sh", "-c", "a && b"]
        );
    }

    #[test]
    fn shell_syntax_is_found_where_a_shell_would_see_it() {
        #[rustfmt::skip]
        let cases: &[(&str, Option<&str>)] = &[
            ("cargo test --quiet", None),
            ("python3 -m unittest discover -s tests", None),
            ("pytest -k 'a or b'", None),
            ("sh -c 'seq 1 10; echo done'", None),
            ("echo '$HOME; *'", None),
            (r"echo a\;b", None),
            ("test -f done.txt", None),
            ("[ -f done.txt ]", None),
            ("npm test -- --watch=false", None),
            ("curl https://x/?q", Some("glob")),
            ("cd tests && python3 -m unittest", Some("builtin")),
            ("make check && echo ok", Some("&&")),
            ("make || true", Some("||")),
            ("make; make test", Some(";")),
            ("pytest -q | tee log", Some("|")),
            ("pytest > out.txt", Some("redirection")),
            ("pytest 2>&1", Some("redirection")),
            ("go test ./... &", Some("&")),
            ("pytest $PYTEST_ARGS", Some("expansion")),
            ("pytest \"${ARGS}\"", Some("expansion")),
            ("echo $(date)", Some("expansion")),
            ("echo `date`", Some("command substitution")),
            ("echo costs $5", Some("expansion")),
            ("echo 'a' $", None),
            ("grep -q x src/*.rs", Some("glob")),
            ("ls file[12].txt", Some("glob")),
            ("~/bin/check", Some("~")),
            ("make # the default target", Some("comment")),
            ("make x#y", None),
            ("CI=1 npm test", Some("assignment")),
            ("npm test --x=1", None),
            ("(cd tests; pytest)", Some("subshell")),
            ("export X=1", Some("builtin")),
            ("source venv/bin/activate", Some("builtin")),
            (". venv/bin/activate", Some("builtin")),
            ("cd", Some("builtin")),
            ("make\ncheck", Some("newline")),
            ("'cd' x", None),
        ];
        for (text, want) in cases {
            assert_eq!(shell_syntax(text), *want, "{text}");
        }
    }

    #[test]
    fn the_first_program_of_a_shell_command() {
        #[rustfmt::skip]
        let cases: &[(&str, Option<&str>)] = &[
            ("pytest -q | tee log", Some("pytest")),
            ("cd tests && python3 -m unittest", None),
            ("FOO=1 BAR=2 make check", Some("make")),
            ("2>/dev/null pytest", Some("pytest")),
            ("./run-tests.sh; echo done", Some("./run-tests.sh")),
            ("$RUNNER test", None),
            ("~/bin/check", None),
            ("(cd x; make)", None),
            ("pytest -k \"a|b\" | tee log", Some("pytest")),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(first_program(text).as_deref(), *want, "{text}");
        }
        #[rustfmt::skip]
        let all: &[(&str, &[&str])] = &[
            ("cd tests && FOO=1 python3 -m unittest | tee log", &["cd", "python3", "tee"]),
            ("pytest -k 'a; b' || echo \"x && y\"", &["pytest", "echo"]),
            ("(cd x; make) & wait", &["cd", "make", "wait"]),
            ("a\\;b c", &["a;b"]),
            ("pytest -q 2>&1 | tee log", &["pytest", "tee"]),
            ("make &> out; make >| out2 >&2", &["make", "make"]),
            ("make 'check", &[]),
        ];
        for (script, want) in all {
            assert_eq!(command_words(script), *want, "{script}");
        }
    }

    #[test]
    fn join_quotes_what_a_shell_would_split() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(join(&argv(&["cargo", "test", "--quiet"])), "cargo test --quiet");
        assert_eq!(
            join(&argv(&["sh", "-c", "cd tests && it's ok"])),
            r"sh -c 'cd tests && it'\''s ok'"
        );
        assert_eq!(join(&argv(&["echo", ""])), "echo ''");
        for v in [&["a b", "c"][..], &["x", "$(y)", "'"][..]] {
            assert_eq!(split(&join(&argv(v))).unwrap(), argv(v));
        }
    }
}
