//! ralph's integration tests: one binary, driving the real `ralph` against
//! a fake agent (and, where installed, the real claude CLI) in temporary
//! git repositories.

mod accounts;
mod big_prd;
mod chromium;
mod claude_loop;
mod claude_stub;
mod cli;
mod core_loop;
mod deliver;
mod deploy;
mod fallback;
mod faults;
mod forge;
mod fuzz_replay;
mod harness;
mod history;
mod hooks;
mod hostile;
mod import;
mod killed;
mod merging;
mod notify;
mod openai_stub;
mod oracle;
mod parallel;
mod real_aider;
mod real_claude;
mod real_claude_resolve;
mod real_cli;
mod real_codex;
mod real_gemini;
mod real_opencode;
mod red_green;
mod remote;
mod safe_mode;
mod sandbox;
mod serve;
mod serve_page;
mod stopping;
mod trust;
mod ui;
mod verify;
mod work_tree;
