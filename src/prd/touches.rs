//! What a story is predicted to touch: the `touches` globs a person
//! declared in prd.json, and the paths ralph learnt from the story's earlier
//! attempts and conflicts. Two stories whose footprints overlap are not
//! worked at the same time (`driver::parallel::plan`). Pure.
//!
//! The overlap errs on the side of "they overlap": a glob and a glob
//! overlap when either's literal folder prefix contains the other's, since
//! files that do not exist yet may match both.

use std::collections::BTreeSet;

use globset::{GlobBuilder, GlobMatcher};

/// Why a `touches` entry is refused: it must name paths inside the
/// repository, relative to its top, as a glob git's paths can match.
#[derive(Debug, thiserror::Error)]
pub enum TouchesError {
    #[error("an empty pattern")]
    Empty,
    #[error("{0} is absolute: give paths relative to the repository's top")]
    Absolute(String),
    #[error("{0} leaves the repository (..)")]
    LeavesTheRepository(String),
    #[error("{0}: use / between folders")]
    Backslash(String),
    #[error("{pattern} is not a glob ralph can read: {source}")]
    NotAGlob { pattern: String, source: globset::Error },
}

/// Whether `pattern` is a `touches` entry ralph can use; why not.
pub fn check(pattern: &str) -> Result<(), TouchesError> {
    let p = pattern.trim();
    if p.is_empty() {
        return Err(TouchesError::Empty);
    }
    if p.starts_with('/') {
        return Err(TouchesError::Absolute(p.to_string()));
    }
    if p.split('/').any(|part| part == "..") {
        return Err(TouchesError::LeavesTheRepository(p.to_string()));
    }
    if p.contains('\\') {
        return Err(TouchesError::Backslash(p.to_string()));
    }
    matcher(p)
        .map(|_| ())
        .map_err(|source| TouchesError::NotAGlob { pattern: p.to_string(), source })
}

fn matcher(pattern: &str) -> Result<GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(pattern).literal_separator(true).build()?.compile_matcher())
}

/// `*`, `?`, `[` or `{`: the pattern is a glob, not one path.
fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '{'])
}

/// A story's predicted paths: globs and plain paths (a plain path also
/// stands for everything under it, when it is a folder).
#[derive(Debug, Clone, Default)]
pub struct Footprint {
    globs: Vec<(String, GlobMatcher)>,
    paths: BTreeSet<String>,
}

impl Footprint {
    /// From the declared `touches` (checked when prd.json was read: an
    /// entry that is not a glob is taken as a path) and the learnt paths.
    pub fn new<'a>(
        declared: impl IntoIterator<Item = &'a String>,
        learnt: impl IntoIterator<Item = &'a String>,
    ) -> Footprint {
        let mut f = Footprint::default();
        for p in declared.into_iter().chain(learnt) {
            let p = p.trim().trim_start_matches("./");
            let p = match p.strip_suffix('/') {
                Some(folder) => format!("{folder}/**"),
                None => p.to_string(),
            };
            if p.is_empty() {
                continue;
            }
            match is_glob(&p).then(|| matcher(&p)) {
                Some(Ok(m)) => f.globs.push((p, m)),
                _ => {
                    f.paths.insert(p);
                }
            }
        }
        f
    }

    pub fn is_empty(&self) -> bool {
        self.globs.is_empty() && self.paths.is_empty()
    }

    /// What the two footprints share, for a person to read ("src/routes.rs",
    /// "src/routes/** and src/routes/users.rs"); `None` when nothing.
    pub fn overlap(&self, other: &Footprint) -> Option<String> {
        for a in &self.paths {
            for b in &other.paths {
                if let Some(shared) = paths_meet(a, b) {
                    return Some(shared.to_string());
                }
            }
        }
        // A path matches a glob, or is a folder the glob's matches are in.
        let glob_path = |globs: &[(String, GlobMatcher)], paths: &BTreeSet<String>| {
            globs.iter().find_map(|(g, m)| {
                paths
                    .iter()
                    .find(|p| {
                        m.is_match(p.as_str()) || folder_prefix(g).starts_with(&format!("{p}/"))
                    })
                    .map(|p| format!("{p} ({g})"))
            })
        };
        if let Some(s) = glob_path(&self.globs, &other.paths) {
            return Some(s);
        }
        if let Some(s) = glob_path(&other.globs, &self.paths) {
            return Some(s);
        }
        for (a, _) in &self.globs {
            for (b, _) in &other.globs {
                if a == b {
                    return Some(a.clone());
                }
                let (pa, pb) = (folder_prefix(a), folder_prefix(b));
                if pa.starts_with(pb) || pb.starts_with(pa) {
                    return Some(format!("{a} and {b}"));
                }
            }
        }
        None
    }
}

/// Two plain paths meet when they are the same, or one is a folder holding
/// the other: the path they share.
fn paths_meet<'a>(a: &'a str, b: &'a str) -> Option<&'a str> {
    let under = |inner: &str, outer: &str| {
        inner.strip_prefix(outer).is_some_and(|rest| rest.starts_with('/'))
    };
    if a == b || under(a, b) {
        Some(a)
    } else if under(b, a) {
        Some(b)
    } else {
        None
    }
}

/// The folders a glob's matches are certainly under: everything up to the
/// last `/` before its first wildcard ("src/routes/" of "src/routes/*.rs",
/// "" of "*.md").
fn folder_prefix(glob: &str) -> &str {
    let wild = glob.find(['*', '?', '[', '{']).unwrap_or(glob.len());
    match glob[..wild].rfind('/') {
        Some(i) => &glob[..=i],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(items: &[&str]) -> Footprint {
        let v: Vec<String> = items.iter().map(|s| s.to_string()).collect();
        Footprint::new(&v, &[])
    }

    #[test]
    fn patterns_must_stay_inside_the_repository() {
        for ok in ["src/routes/**", "db/schema.sql", "*.md", "src/{a,b}.rs", "web/"] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("  ", "empty"),
            ("/etc/passwd", "absolute"),
            ("../other/x", "leaves the repository"),
            ("src/../../x", "leaves the repository"),
            ("src\\x", "use /"),
            ("src/[a", "not a glob"),
            ("src/{a,b", "not a glob"),
        ] {
            let e = check(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn footprints_overlap_on_a_shared_path_or_a_glob_that_could_match_both() {
        let cases: &[(&[&str], &[&str], Option<&str>)] = &[
            (&["src/routes.rs"], &["src/routes.rs"], Some("src/routes.rs")),
            (&["src/routes.rs"], &["src/db.rs"], None),
            // A folder holds its files.
            (&["src/routes"], &["src/routes/users.rs"], Some("src/routes/users.rs")),
            // A folder named without its slash holds what a glob under it matches.
            (&["src/routes"], &["src/routes/*.rs"], Some("src/routes (src/routes/*.rs)")),
            (&["src"], &["src/**/mod.rs"], Some("src (src/**/mod.rs)")),
            (&["src/route"], &["src/routes/*.rs"], None),
            (
                &["src/routes/"],
                &["src/routes/users.rs"],
                Some("src/routes/users.rs (src/routes/**)"),
            ),
            (&["src/route"], &["src/routes/users.rs"], None),
            (&["src/routes/**"], &["src/routes/a/b.rs"], Some("src/routes/a/b.rs (src/routes/**)")),
            (&["src/*.rs"], &["src/a/b.rs"], None),
            (&["src/*.rs"], &["src/main.rs"], Some("src/main.rs (src/*.rs)")),
            // Two globs: by the folders they are certainly under.
            (&["src/routes/**"], &["src/**/*.rs"], Some("src/routes/** and src/**/*.rs")),
            (&["src/routes/**"], &["db/**"], None),
            (&["*.md"], &["docs/**"], Some("*.md and docs/**")),
            (&["db/*.sql"], &["db/*.sql"], Some("db/*.sql")),
            // Nothing predicted: nothing shared.
            (&[], &["src/a.rs"], None),
            (&[], &[], None),
        ];
        for (a, b, want) in cases {
            let got = fp(a).overlap(&fp(b));
            assert_eq!(got.as_deref(), *want, "{a:?} vs {b:?}");
            // Symmetric in whether they overlap.
            assert_eq!(fp(b).overlap(&fp(a)).is_some(), want.is_some(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn learnt_paths_join_the_declared_ones() {
        let declared = vec!["db/**".to_string()];
        let learnt = vec!["src/shared.txt".to_string()];
        let f = Footprint::new(&declared, &learnt);
        assert!(!f.is_empty());
        assert_eq!(f.overlap(&fp(&["src/shared.txt"])).as_deref(), Some("src/shared.txt"));
        assert!(f.overlap(&fp(&["db/schema.sql"])).is_some());
        assert!(Footprint::new(&[], &[]).is_empty());
    }
}
