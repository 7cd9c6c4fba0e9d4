//! Splitting a command string into argv the way a POSIX shell splits words
//! (quotes and backslashes), without ever running a shell: `$(…)`, `;`,
//! globs and variables stay literal text.

/// Splits `text` into words. Errors on an unterminated quote.
pub fn split(text: &str) -> Result<Vec<String>, String> {
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
                        None => return Err(format!("unterminated ' in {text:?}")),
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
                            None => return Err(format!("unterminated \" in {text:?}")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated \" in {text:?}")),
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

#[cfg(test)]
mod tests {
    use super::split;

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
}
