//! Streaming analysis of agent output: throughput and peak memory of the
//! release ralph on 1 MB, 100 MB and 1 GB outputs (`$RALPH_BENCH_SIZES_MB`
//! changes the list), in two ways:
//!
//! - `ralph analyze FILE --format F --json`: the analyser alone, reading a
//!   saved log;
//! - `ralph 1 --agent-cmd "cat FILE"`: the live path, where the same bytes
//!   come through a pipe from a running agent and are teed to the
//!   iteration's log as they are analysed.
//!
//! Outputs are plain text ending in a RALPH_STATUS block, Claude
//! stream-json (assistant text, tool calls, bulky tool results, a final
//! `result`), and Claude `--output-format json --verbose` (one array on one
//! line; only at sizes under ralph's 4 MiB line cap). Every run's outcome
//! is checked, so a fast wrong answer cannot pass as a fast answer.

mod common;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Stdio;

use common::{NO_BRAKES, Project, heading, measure, prd_json, report, runs, spread};
use serde_json::Value;

const MB: u64 = 1_000_000;
/// ralph reads lines up to this length (`agent::capture::MAX_LINE`).
const LINE_CAP: u64 = 4 * 1024 * 1024;

#[derive(Clone, Copy)]
enum Kind {
    Text,
    StreamJson,
    Json,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::StreamJson => "claude stream-json",
            Kind::Json => "claude json",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::StreamJson => "stream_json",
            Kind::Json => "json",
        }
    }

    fn format(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::StreamJson | Kind::Json => "claude",
        }
    }
}

fn main() {
    heading("streaming analysis of agent output");
    let sizes: Vec<u64> = std::env::var("RALPH_BENCH_SIZES_MB")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 100, 1000]);
    let project = Project::new(&prd_json(1), &format!("{NO_BRAKES}\n[agent]\nformat = \"text\"\n"));
    let dir = tempfile::tempdir().expect("temp dir");
    for &mb in &sizes {
        for kind in [Kind::Text, Kind::StreamJson, Kind::Json] {
            let size = mb * MB;
            if matches!(kind, Kind::Json) && size >= LINE_CAP {
                continue;
            }
            let path = dir.path().join(format!("{}-{mb}.out", kind.key()));
            generate(kind, size, &path);
            let bytes = std::fs::metadata(&path).expect("generated file").len();
            let n = runs(if mb >= 1000 {
                2
            } else if mb >= 100 {
                3
            } else {
                5
            });
            saved(kind, mb, &path, bytes, n);
            if !matches!(kind, Kind::Json) {
                live(&project, kind, mb, &path, bytes, n);
            }
            std::fs::remove_file(&path).expect("remove the generated file");
        }
    }
}

/// `ralph analyze` on the file.
fn saved(kind: Kind, mb: u64, path: &Path, bytes: u64, n: usize) {
    let out = path.with_extension("json");
    let (mut secs, mut rss) = (Vec::new(), 0);
    for _ in 0..n {
        let mut cmd = std::process::Command::new(common::ralph_bin());
        cmd.args(["analyze", "--no-config", "--json", "--format", kind.format()])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(File::create(&out).expect("output file"))
            .stderr(Stdio::null());
        let m = measure(&mut cmd);
        assert_eq!(m.exit_code, Some(0), "ralph analyze failed");
        check(kind, &std::fs::read_to_string(&out).expect("ralph analyze output"), bytes);
        secs.push(m.wall.as_secs_f64());
        rss = rss.max(m.max_rss_kb);
    }
    let _ = std::fs::remove_file(&out);
    row("analyze", kind, mb, bytes, &mut secs, rss);
}

/// One iteration whose agent prints the file.
fn live(project: &Project, kind: Kind, mb: u64, path: &Path, bytes: u64, n: usize) {
    let config = project.dir().join(".ralph/config.toml");
    let format = format!("{NO_BRAKES}\n[agent]\nformat = \"{}\"\n", kind.format());
    std::fs::write(&config, format).expect("write the config");
    let cat = common::program("cat");
    let (mut secs, mut rss) = (Vec::new(), 0);
    for _ in 0..n {
        let mut cmd = project.ralph();
        cmd.arg("1")
            .arg("--fresh")
            .arg("--quiet")
            .arg("--agent-cmd")
            .arg(format!("{} {}", cat.display(), path.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let m = measure(&mut cmd);
        assert!(m.exit_code.is_some_and(|c| c <= 1), "the live run failed: {:?}", m.exit_code);
        let logged = newest_log(&project.dir().join(".ralph/logs"));
        assert_eq!(logged, bytes, "the iteration's log is not the agent's whole output");
        secs.push(m.wall.as_secs_f64());
        rss = rss.max(m.max_rss_kb);
        // Keep the disk from filling up with gigabyte logs.
        let _ = std::fs::remove_dir_all(project.dir().join(".ralph/logs"));
    }
    row("live", kind, mb, bytes, &mut secs, rss);
}

fn row(mode: &str, kind: Kind, mb: u64, bytes: u64, secs: &mut [f64], rss_kb: u64) {
    let n = secs.len();
    let (median, lo, hi) = spread(secs);
    let rate = bytes as f64 / MB as f64 / median;
    let key = format!("{mode}.{}.{mb}mb", kind.key());
    let label = format!("{mode} {} {mb} MB", kind.name());
    report(&format!("{key}.s"), &label, median, "s", &format!("[{lo:.3} – {hi:.3}] ×{n}"));
    report(&format!("{key}.mb_s"), "  throughput", rate, "MB/s", "");
    report(&format!("{key}.rss_mb"), "  peak RSS", rss_kb as f64 / 1024.0, "MiB", "");
}

/// Size of the newest iteration log under `logs`.
fn newest_log(logs: &Path) -> u64 {
    let mut best = (std::time::SystemTime::UNIX_EPOCH, 0);
    for run in std::fs::read_dir(logs).expect("logs").flatten() {
        for f in std::fs::read_dir(run.path()).into_iter().flatten().flatten() {
            let name = f.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("iter-") && name.ends_with(".log") {
                let meta = f.metadata().expect("log metadata");
                let modified = meta.modified().expect("mtime");
                if modified >= best.0 {
                    best = (modified, meta.len());
                }
            }
        }
    }
    best.1
}

/// The analysis found what the output says, and read all of it.
fn check(kind: Kind, json: &str, bytes: u64) {
    let v: Value = serde_json::from_str(json).expect("ralph analyze --json output");
    let o = &v["outcome"];
    assert_eq!(o["output_bytes"].as_u64(), Some(bytes), "not every byte was read");
    assert_eq!(o["status_block"]["status"], "COMPLETE", "the status block was missed");
    assert_eq!(o["error"], Value::Null, "a clean run was classified as an error");
    if !matches!(kind, Kind::Text) {
        assert_eq!(o["session_id"], SESSION, "the session was missed");
        assert!(o["cost_usd"].as_f64().is_some(), "the result event was missed");
    }
}

const SESSION: &str = "4f1c2d9e-7a0b-4c3e-9d21-0b5e8a6f1c11";

const FINAL: &str = "Implemented the parser and its tests; all acceptance criteria pass.\n\n\
---RALPH_STATUS---\nSTATUS: COMPLETE\nTASKS_COMPLETED_THIS_LOOP: 1\nFILES_MODIFIED: 3\n\
TESTS_STATUS: PASSING\nWORK_TYPE: IMPLEMENTATION\nEXIT_SIGNAL: true\n\
RECOMMENDATION: none\n---END_RALPH_STATUS---\n";

/// Writes an output of `kind` of at least `size` bytes to `path`.
fn generate(kind: Kind, size: u64, path: &Path) {
    let mut out = Out {
        w: BufWriter::with_capacity(1 << 20, File::create(path).expect("create")),
        written: 0,
    };
    match kind {
        Kind::Text => {
            let mut i = 0;
            while out.written < size {
                out.put(&text_chunk(i));
                i += 1;
            }
            out.put(FINAL);
        }
        Kind::StreamJson => {
            out.put(&init_event());
            out.put("\n");
            let mut i = 0;
            while out.written < size {
                for event in event_group(i) {
                    out.put(&event);
                    out.put("\n");
                }
                i += 1;
            }
            out.put(&final_events().join("\n"));
            out.put("\n");
        }
        Kind::Json => {
            out.put("[");
            out.put(&init_event());
            let mut i = 0;
            while out.written < size {
                for event in event_group(i) {
                    out.put(",");
                    out.put(&event);
                }
                i += 1;
            }
            for event in final_events() {
                out.put(",");
                out.put(&event);
            }
            out.put("]\n");
        }
    }
    out.w.flush().expect("flush");
}

struct Out {
    w: BufWriter<File>,
    written: u64,
}

impl Out {
    fn put(&mut self, s: &str) {
        self.w.write_all(s.as_bytes()).expect("write");
        self.written += s.len() as u64;
    }
}

/// About 1.5 KB of what an agent prints while it works.
fn text_chunk(i: u64) -> String {
    format!(
        "I'll look at src/parser/module_{i}.rs to see how tokens are read.\n\
         Running `cargo test -p parser` to check the current state.\n\
         running 42 tests\n\
         test lexer::tests::numbers_{i} ... ok\n\
         test lexer::tests::strings ... ok\n\
         test parser::tests::nested_blocks ... FAILED\n\
         failures:\n\
         ---- parser::tests::nested_blocks stdout ----\n\
         thread 'parser::tests::nested_blocks' panicked at src/parser.rs:{i}:9:\n\
         assertion `left == right` failed\n\
         \x20 left: Block([Stmt(Let), Stmt(Expr)])\n\
         \x20right: Block([Stmt(Let)])\n\
         test result: FAILED. 41 passed; 1 failed; 0 ignored; 0 measured\n\
         The nested block keeps the trailing expression; the parser must stop at the brace.\n\
         Editing src/parser.rs: replacing the loop in `parse_block` so it returns at `}}`.\n\
         \x20   fn parse_block(&mut self) -> Result<Block, ParseError> {{\n\
         \x20       let mut stmts = Vec::new();\n\
         \x20       while !self.at(Token::RBrace) {{ stmts.push(self.parse_stmt()?); }}\n\
         \x20       Ok(Block(stmts))\n\
         \x20   }}\n\
         Running `cargo test -p parser` again.\n\
         test result: ok. 42 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n\
         Committing: git commit -m \"parser: stop a block at its closing brace ({i})\"\n\n"
    )
}

fn init_event() -> String {
    format!(
        r#"{{"type":"system","subtype":"init","cwd":"/work/project","session_id":"{SESSION}","tools":["Bash","Edit","Read","Write"],"mcp_servers":[],"model":"claude-sonnet-5","permissionMode":"bypassPermissions","apiKeySource":"none","claude_code_version":"2.1.197"}}"#
    )
}

fn usage() -> &'static str {
    r#""usage":{"input_tokens":1200,"cache_creation_input_tokens":0,"cache_read_input_tokens":5000,"output_tokens":180}"#
}

fn assistant(id: u64, content: &str) -> String {
    format!(
        r#"{{"type":"assistant","message":{{"id":"msg_{id}","type":"message","role":"assistant","model":"claude-sonnet-5","content":[{content}],"stop_reason":null,{}}},"parent_tool_use_id":null,"session_id":"{SESSION}","uuid":"u-{id}"}}"#,
        usage()
    )
}

fn tool_result(id: u64, content: &str) -> String {
    format!(
        r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_{id}","type":"tool_result","content":{},"is_error":false}}]}},"parent_tool_use_id":null,"session_id":"{SESSION}","uuid":"u-toolu_{id}"}}"#,
        serde_json::to_string(content).expect("a string")
    )
}

/// One round of work: text, a test run with bulky output, an edit.
fn event_group(i: u64) -> Vec<String> {
    let test_output: String = (0..40)
        .map(|t| format!("test module_{i}::tests::case_{t} ... ok\n"))
        .chain(["test result: ok. 40 passed; 0 failed; 0 ignored\n".to_string()])
        .collect();
    let edit = serde_json::json!({
        "file_path": format!("/work/project/src/module_{i}.rs"),
        "old_string": "fn parse(&self) -> Result<(), Error> {\n    todo!()\n}",
        "new_string": "fn parse(&self) -> Result<(), Error> {\n    self.tokens.iter().try_for_each(|t| t.check())\n}",
    });
    vec![
        assistant(
            3 * i,
            &format!(r#"{{"type":"text","text":"Let me run the tests of module {i} first."}}"#),
        ),
        assistant(
            3 * i,
            &format!(
                r#"{{"type":"tool_use","id":"toolu_{i}a","name":"Bash","input":{{"command":"cargo test -p module_{i} 2>&1 | tail -40","description":"Run tests"}}}}"#
            ),
        ),
        tool_result(i, &test_output),
        assistant(
            3 * i + 1,
            &format!(r#"{{"type":"tool_use","id":"toolu_{i}b","name":"Edit","input":{edit}}}"#),
        ),
        tool_result(i + 1, "The file has been updated."),
    ]
}

fn final_events() -> Vec<String> {
    let text = serde_json::to_string(FINAL).expect("a string");
    vec![
        assistant(u64::MAX, &format!(r#"{{"type":"text","text":{text}}}"#)),
        format!(
            r#"{{"type":"result","subtype":"success","is_error":false,"duration_ms":912345,"num_turns":420,"result":{text},"session_id":"{SESSION}","total_cost_usd":4.2,{}}}"#,
            usage()
        ),
    ]
}
