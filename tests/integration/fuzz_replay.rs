//! The fuzz targets' seeds and every crash they ever found, replayed
//! through the same target functions on a plain `cargo test`: a fixed
//! crash stays fixed without cargo-fuzz or a nightly toolchain.
//! `fuzz/regressions/<target>/` holds the crash inputs (fuzz/README.md).

#[path = "../../fuzz/src/lib.rs"]
mod targets;

use std::path::{Path, PathBuf};

const TARGETS: [(&str, fn(&[u8])); 3] = [
    ("prd", targets::prd),
    ("status_block", targets::status_block),
    ("agent_output", targets::agent_output),
];

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files: Vec<PathBuf> = ["seeds", "regressions"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(fuzz.join(dir).join(target)).into_iter().flatten())
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn seeds_and_past_crashes_pass_every_fuzz_target() {
    for (target, run) in TARGETS {
        let files = inputs(target);
        assert!(!files.is_empty(), "no seeds for the {target} fuzz target");
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "fuzz target {target} fails on {}", file.display());
        }
    }
}
