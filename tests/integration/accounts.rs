//! What ralph says at the end of a run, in `status` and in the report is
//! exactly true: after resumes, limits and give-ups, with no gate, with a
//! gate that hangs, with a PRD too long to list.

use std::time::Duration;

use crate::harness::*;


/// `ralph status` without a usable prd.json is an error to a script (exit
/// 2, as `ralph run` says), says what to do about a missing one, and names
/// the byte that is not UTF-8.
#[test]
fn status_without_a_usable_prd_fails_and_says_why() {
    let p = Project::with_prd(THREE_STORIES);
    let ok = p.run(&["status"]);
    assert_eq!(ok.code, code(exit::COMPLETE), "{ok:?}");

    std::fs::remove_file(p.path("prd.json")).unwrap();
    let r = p.run(&["status"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stdout.contains("hint: create one with `ralph init`"), "{r:?}");
    assert!(r.stdout.contains("`ralph import`"), "{r:?}");
    assert!(!r.stdout.contains("(no project name)"), "{r:?}");

    p.write("prd.json", "{\"userStories\": [");
    let r = p.run(&["status"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stdout.contains("invalid JSON"), "{r:?}");

    let mut bytes = THREE_STORIES.as_bytes().to_vec();
    let at = THREE_STORIES.find("First").unwrap();
    bytes[at] = 0xff;
    std::fs::write(p.path("prd.json"), &bytes).unwrap();
    let r = p.run(&["status"]);
    assert_eq!(r.code, code(exit::USAGE), "{r:?}");
    assert!(r.stdout.contains(&format!("byte {at} (0xff) is not UTF-8")), "{r:?}");
    let json = p.run(&["status", "--json"]);
    assert_eq!(json.code, code(exit::USAGE), "{json:?}");
}
