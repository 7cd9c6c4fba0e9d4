//! The bodies of ralph's fuzz targets, shared by the cargo-fuzz binaries in
//! `fuzz_targets/` and by ralph's own `cargo test`, which replays the
//! checked-in seeds and every past crash through them
//! (`tests/integration/fuzz_replay.rs`), so a crash stays fixed without
//! cargo-fuzz or a nightly toolchain.
//!
//! Each target takes arbitrary bytes. Beyond "does not panic", each checks
//! what must hold for any input; those checks are what turn a fuzzer from a
//! crash finder into a bug finder.

use std::path::Path;

use chrono::{DateTime, TimeZone, Utc};
use ralph::agent::capture::LineSplitter;
use ralph::analyze::{self, Analyzer, Format, Outcome, Patterns, ProcessEnd};
use ralph::prd::Prd;

/// Every agent output format, picked by the first byte of an input.
pub const FORMATS: [Format; 7] = [
    Format::Text,
    Format::Claude,
    Format::Amp,
    Format::Codex,
    Format::Gemini,
    Format::Opencode,
    Format::Cursor,
];

/// The analyzer's bounds: the final text is a tail of at most this many
/// bytes, and no more than this many permission denials are kept.
const TEXT_CAP: usize = 64 * 1024;
const MAX_DENIALS: usize = 100;

/// prd.json: a file that loads saves to text that loads to the same
/// stories and saves to the same text again; the next story is one that
/// does not pass; flipping a story's `passes` is never identity damage.
pub fn prd(data: &[u8]) {
    let path = Path::new("prd.json");
    let Ok(prd) = Prd::parse(data, path) else { return };
    let text = prd.to_json();
    let again = match Prd::parse(text.as_bytes(), path) {
        Ok(again) => again,
        Err(e) => panic!("a saved PRD does not load again: {e}\n{text}"),
    };
    assert_eq!(prd.stories(), again.stories(), "stories change across a save");
    assert_eq!(text, again.to_json(), "a second save writes different text");
    match prd.next_story() {
        Some(next) => assert!(!next.passes, "next story {} already passes", next.id),
        None => assert!(prd.all_pass(), "no next story, but not all pass"),
    }
    if let Some(first) = prd.stories().first() {
        let mut flipped = prd.clone();
        assert!(flipped.set_passes(&first.id, !first.passes));
        assert_eq!(prd.identity_damage(&flipped), None);
    }
}

/// The RALPH_STATUS parser: reading the whole text at once and reading it
/// line by line as the text analyzer does (the same lines, split by the
/// saved-log reader) find the same block and the same problems.
pub fn status_block(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let whole = analyze::status_block::parse(&text);
    if let Some(block) = &whole.block {
        let recommendation = block.recommendation.as_deref().unwrap_or("");
        assert!(recommendation.len() <= 1024, "recommendation of {} bytes", recommendation.len());
    }
    let streamed = analyze::analyze_reader(
        data,
        Format::Text,
        Patterns::default(),
        &ProcessEnd::default(),
        now(),
    )
    .expect("reading a slice cannot fail");
    assert_eq!(streamed.status_block, whole.block, "streamed and whole-text blocks differ");
    assert_eq!(streamed.status_block_error, whole.error, "streamed and whole-text errors differ");
}

/// Every agent output parser, through [`Analyzer`]: the first byte picks the
/// format, how the process ended and the pipe's chunk size; the rest is
/// stdout. A saved log (`ralph analyze`) and the same bytes read live from
/// a pipe in chunks give the same outcome, within the analyzer's bounds.
pub fn agent_output(data: &[u8]) {
    let Some((&selector, output)) = data.split_first() else { return };
    let format = FORMATS[usize::from(selector) % FORMATS.len()];
    let end =
        ProcessEnd { exit_code: Some(i32::from(selector & 0x80 != 0)), ..ProcessEnd::default() };
    let chunk = 1 + usize::from(selector >> 3 & 0x0f) * 7;

    let saved = analyze::analyze_reader(output, format, Patterns::default(), &end, now())
        .expect("reading a slice cannot fail");
    check_bounds(&saved);

    let mut analyzer = Analyzer::new(format);
    let mut splitter = LineSplitter::keeping_cr();
    let mut feed = |line: &[u8], _len: usize| analyzer.feed(line);
    for piece in output.chunks(chunk) {
        splitter.push(piece, &mut feed);
    }
    splitter.finish(&mut feed);
    let live = analyzer.finish(&end, now());
    assert_eq!(format!("{saved:#?}"), format!("{live:#?}"), "saved and live analyses differ");
}

fn check_bounds(outcome: &Outcome) {
    assert!(outcome.final_text.len() <= TEXT_CAP, "final text of {}", outcome.final_text.len());
    assert!(outcome.permission_denials.len() <= MAX_DENIALS);
}

/// A fixed clock: the outcome of an input must not depend on when it runs.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 15, 12, 0, 0).single().expect("a valid date")
}
