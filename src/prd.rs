//! The `prd.json` model: loading with clear errors, story selection, and
//! read-modify-write that keeps every field ralph does not know about.
//!
//! The file is the ralph.sh schema (`project`, `branchName`, `description`,
//! `userStories[id, title, description, acceptanceCriteria, priority, passes,
//! notes]`) plus whatever people add. The JSON tree is the source of truth;
//! [`Story`] values are a read-only view rebuilt after each change.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

mod touches;
pub use touches::Footprint;

/// The PRD `ralph init` scaffolds: an example to replace, never to run.
pub const EXAMPLE: &str = include_str!("../prd.json.example");

/// A loaded, validated PRD.
#[derive(Debug, Clone)]
pub struct Prd {
    root: Map<String, Value>,
    stories: Vec<Story>,
    /// Every number as the file wrote it, in document order, when one of
    /// them would not read back the same from serde_json (`1e2` would be
    /// `100.0`, `99999999999999999999999999` would be `1e+26`); empty
    /// when every number is written as serde_json writes it.
    numbers: Vec<String>,
}

/// One user story, as ralph reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Story {
    /// Position in `userStories`.
    pub index: usize,
    pub id: String,
    pub title: String,
    pub description: String,
    pub acceptance_criteria: Vec<String>,
    pub priority: Option<f64>,
    pub passes: bool,
    pub notes: String,
    /// A per-story gate command that overrides `gate.command`.
    pub verify: Option<String>,
    /// Stories that must pass before this one may start (`dependsOn`).
    pub depends_on: Vec<String>,
    /// Paths (globs) the story is expected to change (`touches`): a
    /// parallel run does not work two stories that share one at once.
    pub touches: Vec<String>,
}

/// Why a prd.json cannot be used. Each names the file and, where it can,
/// the line and column or the story.
#[derive(Debug)]
pub enum PrdError {
    Read { path: PathBuf, source: std::io::Error },
    Syntax { path: PathBuf, line: usize, column: usize, message: String },
    Invalid { path: PathBuf, problems: Vec<String> },
}

impl fmt::Display for PrdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrdError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            PrdError::Syntax { path, line, column, message } => {
                write!(f, "{}:{line}:{column}: invalid JSON: {message}", path.display())
            }
            PrdError::Invalid { path, problems } => {
                write!(f, "{} is not a valid PRD:", path.display())?;
                for p in problems {
                    write!(f, "\n  - {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// The first byte that is not UTF-8, by its offset, line and column (serde
/// would say "invalid unicode code point" at best, naming no byte).
fn not_utf8(bytes: &[u8], offset: usize, path: &Path) -> PrdError {
    let before = &bytes[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    PrdError::Syntax {
        path: path.to_path_buf(),
        line,
        column,
        message: format!("byte {offset} (0x{:02x}) is not UTF-8", bytes[offset]),
    }
}

impl std::error::Error for PrdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PrdError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Prd {
    /// Reads and validates a prd.json.
    pub fn load(path: &Path) -> Result<Prd, PrdError> {
        let bytes = crate::store::read_regular(path)
            .map_err(|source| PrdError::Read { path: path.to_path_buf(), source })?;
        Prd::parse(&bytes, path)
    }

    /// Parses and validates prd.json text; `path` is only used in messages.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Prd, PrdError> {
        if let Err(e) = std::str::from_utf8(bytes) {
            return Err(not_utf8(bytes, e.valid_up_to(), path));
        }
        let value: Value = serde_json::from_slice(bytes).map_err(|e| PrdError::Syntax {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
        })?;
        let invalid =
            |problems: Vec<String>| PrdError::Invalid { path: path.to_path_buf(), problems };
        let Value::Object(root) = value else {
            return Err(invalid(vec![format!(
                "the top level must be an object with \"userStories\", found {}",
                kind(&value)
            )]));
        };
        let stories = read_stories(&root).map_err(invalid)?;
        Ok(Prd { root, stories, numbers: numbers_as_written(bytes) })
    }

    pub fn stories(&self) -> &[Story] {
        &self.stories
    }

    pub fn story(&self, id: &str) -> Option<&Story> {
        self.stories.iter().find(|s| s.id == id)
    }

    pub fn project(&self) -> Option<&str> {
        self.root.get("project").and_then(Value::as_str)
    }

    pub fn description(&self) -> Option<&str> {
        self.root.get("description").and_then(Value::as_str)
    }

    /// The branch the work belongs on, if the PRD names one.
    pub fn branch_name(&self) -> Option<&str> {
        self.root.get("branchName").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }

    /// The story to work on: the lowest numeric `priority` among stories that
    /// do not pass; stories without a priority come last; ties keep file order.
    pub fn next_story(&self) -> Option<&Story> {
        next_of(&self.stories)
    }

    pub fn all_pass(&self) -> bool {
        self.stories.iter().all(|s| s.passes)
    }

    pub fn passing(&self) -> usize {
        self.stories.iter().filter(|s| s.passes).count()
    }

    /// Sets a story's `passes`, touching nothing else in the file.
    /// Returns whether anything changed.
    pub fn set_passes(&mut self, id: &str, passes: bool) -> bool {
        let Some(story) = self.stories.iter_mut().find(|s| s.id == id) else {
            return false;
        };
        if story.passes == passes {
            return false;
        }
        story.passes = passes;
        let index = story.index;
        if let Some(Value::Object(obj)) = self
            .root
            .get_mut("userStories")
            .and_then(|v| v.as_array_mut())
            .and_then(|a| a.get_mut(index))
        {
            obj.insert("passes".into(), Value::Bool(passes));
        }
        true
    }

    /// The story at `index` exactly as the file holds it, unknown fields included.
    pub fn story_json(&self, index: usize) -> Option<Value> {
        self.root.get("userStories")?.as_array()?.get(index).cloned()
    }

    /// Sets (or removes) a story's `verify` command, touching nothing else.
    pub fn set_verify(&mut self, id: &str, verify: Option<&str>) {
        let Some(story) = self.stories.iter_mut().find(|s| s.id == id) else { return };
        story.verify = verify.map(str::to_string).filter(|v| !v.trim().is_empty());
        let index = story.index;
        if let Some(Value::Object(obj)) = self
            .root
            .get_mut("userStories")
            .and_then(|v| v.as_array_mut())
            .and_then(|a| a.get_mut(index))
        {
            match verify {
                Some(v) => {
                    obj.insert("verify".into(), Value::String(v.to_string()));
                }
                None => {
                    obj.shift_remove("verify");
                }
            }
        }
    }

    /// The file's text as ralph writes it: two-space indented, key order kept.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.root).unwrap_or_default();
        if !self.numbers.is_empty() {
            text = with_numbers(&text, &self.numbers);
        }
        text.push('\n');
        text
    }

    /// Writes the PRD back atomically.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        crate::store::write_atomic(path, self.to_json().as_bytes())
    }

    /// Sets every story's `passes` and `verify` back to what `before` says,
    /// except the stories in `keep`; a story `before` does not have is set
    /// unfinished. Returns the ids whose `passes` changed.
    pub fn restore_claims(&mut self, before: &Prd, keep: &[String]) -> Vec<String> {
        let mut changed = Vec::new();
        for s in self.stories.clone() {
            if keep.contains(&s.id) {
                continue;
            }
            let (passes, verify) = match before.story(&s.id) {
                Some(b) => (b.passes, b.verify.clone()),
                None => (false, s.verify.clone()),
            };
            if self.set_passes(&s.id, passes) {
                changed.push(s.id.clone());
            }
            if s.verify != verify {
                self.set_verify(&s.id, verify.as_deref());
            }
        }
        changed
    }

    /// How `after` (what the agent left) broke the story list of `self`,
    /// if it did: a story deleted or stories' ids swapped. Adding stories
    /// and editing fields is allowed; losing or reshuffling identities is not.
    pub fn identity_damage(&self, after: &Prd) -> Option<String> {
        let mut last = None;
        for story in &self.stories {
            let Some(now) = after.story(&story.id) else {
                return Some(format!("story {} was deleted", story.id));
            };
            if let Some(prev) = last
                && now.index < prev
            {
                return Some(format!("story {} moved before an earlier story", story.id));
            }
            if now.title != story.title && after.stories.iter().any(|s| s.title == story.title) {
                return Some(format!("story {}'s title now belongs to another id", story.id));
            }
            last = Some(now.index);
        }
        None
    }
}

/// The byte spans of the numbers in JSON text, in document order (a
/// number is a token outside strings that starts with `-` or a digit).
fn number_spans(text: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let (mut i, mut in_string) = (0, false);
    while i < text.len() {
        let b = text[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < text.len()
                && matches!(text[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
            {
                i += 1;
            }
            spans.push((start, i));
            continue;
        }
        i += 1;
    }
    spans
}

/// The numbers of a (valid) document as written, if any of them would
/// not come back the same from serde_json; otherwise none.
fn numbers_as_written(text: &[u8]) -> Vec<String> {
    let lexemes: Vec<&str> = number_spans(text)
        .into_iter()
        .filter_map(|(a, b)| std::str::from_utf8(&text[a..b]).ok())
        .collect();
    let canonical = |l: &str| {
        let back = serde_json::from_str::<Value>(l).and_then(|v| serde_json::to_string(&v));
        back.is_ok_and(|b| b == l)
    };
    if lexemes.iter().all(|l| canonical(l)) {
        return Vec::new();
    }
    lexemes.into_iter().map(str::to_string).collect()
}

/// `text` (serde_json's output for the same document) with its numbers
/// written as the original file wrote them. Only when the documents have
/// the same numbers in the same order, which holds because ralph only ever
/// changes booleans and strings; otherwise `text` is kept as it is.
fn with_numbers(text: &str, numbers: &[String]) -> String {
    let spans = number_spans(text.as_bytes());
    if spans.len() != numbers.len() {
        return text.to_string();
    }
    let same = |a: &str, b: &str| match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(Value::Number(x)), Ok(Value::Number(y))) => x.as_f64() == y.as_f64(),
        _ => false,
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for ((a, b), original) in spans.into_iter().zip(numbers) {
        if !same(&text[a..b], original) {
            return text.to_string();
        }
        out.push_str(&text[at..a]);
        out.push_str(original);
        at = b;
    }
    out.push_str(&text[at..]);
    out
}

/// The selection rule, shared by [`Prd`] and [`View`].
fn next_of(stories: &[Story]) -> Option<&Story> {
    runnable(stories, &[]).into_iter().next()
}

/// The stories that may start now, best first: unfinished, every
/// `dependsOn` passing, not in `in_flight`; the lowest `priority` first
/// (none last), ties in file order.
pub fn runnable<'a>(stories: &'a [Story], in_flight: &[String]) -> Vec<&'a Story> {
    let passes: std::collections::HashMap<&str, bool> =
        stories.iter().map(|s| (s.id.as_str(), s.passes)).collect();
    let mut ready: Vec<&Story> = stories
        .iter()
        .filter(|s| !s.passes && !in_flight.contains(&s.id))
        .filter(|s| s.depends_on.iter().all(|d| passes.get(d.as_str()).copied().unwrap_or(false)))
        .collect();
    ready.sort_by(|a, b| {
        let key = |s: &Story| s.priority.unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b)).then(a.index.cmp(&b.index))
    });
    ready
}

/// The unfinished stories `story` waits on.
pub fn waiting_on<'a>(stories: &'a [Story], story: &Story) -> Vec<&'a str> {
    story
        .depends_on
        .iter()
        .filter_map(|d| stories.iter().find(|s| s.id == *d))
        .filter(|s| !s.passes)
        .map(|s| s.id.as_str())
        .collect()
}

/// A read-only look at a PRD: its stories, without the JSON tree that
/// read-modify-write needs. For `ralph status`, which only reads: on a
/// 10,000-story file building the tree costs three times the parse. A
/// file the fast path does not take as it is goes through [`Prd::parse`],
/// so errors read the same either way.
#[derive(Debug, Clone)]
pub struct View {
    pub project: Option<String>,
    pub branch_name: Option<String>,
    pub stories: Vec<Story>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct FastPrd {
    project: Option<String>,
    branch_name: Option<String>,
    user_stories: Vec<FastStory>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct FastStory {
    id: String,
    title: Option<String>,
    description: Option<String>,
    acceptance_criteria: Option<Vec<String>>,
    priority: Option<f64>,
    passes: Option<bool>,
    notes: Option<String>,
    verify: Option<String>,
    depends_on: Option<Vec<String>>,
    touches: Option<Vec<String>>,
}

impl View {
    pub fn load(path: &Path) -> Result<View, PrdError> {
        let bytes = crate::store::read_regular(path)
            .map_err(|source| PrdError::Read { path: path.to_path_buf(), source })?;
        if let Some(view) = View::fast(&bytes) {
            return Ok(view);
        }
        let prd = Prd::parse(&bytes, path)?;
        Ok(View {
            project: prd.project().map(str::to_string),
            branch_name: prd.branch_name().map(str::to_string),
            stories: prd.stories,
        })
    }

    fn fast(bytes: &[u8]) -> Option<View> {
        let raw: FastPrd = serde_json::from_slice(bytes).ok()?;
        if raw.user_stories.is_empty() {
            return None;
        }
        let mut seen = std::collections::HashSet::with_capacity(raw.user_stories.len());
        let mut stories = Vec::with_capacity(raw.user_stories.len());
        for (index, s) in raw.user_stories.into_iter().enumerate() {
            if s.id.trim().is_empty() || !seen.insert(s.id.clone()) {
                return None;
            }
            if s.verify.as_deref().is_some_and(|v| crate::agent::words::split(v).is_err()) {
                return None;
            }
            stories.push(Story {
                index,
                id: s.id,
                title: s.title.unwrap_or_default(),
                description: s.description.unwrap_or_default(),
                acceptance_criteria: s.acceptance_criteria.unwrap_or_default(),
                priority: s.priority,
                passes: s.passes.unwrap_or(false),
                notes: s.notes.unwrap_or_default(),
                verify: s.verify.filter(|v| !v.trim().is_empty()),
                depends_on: s.depends_on.unwrap_or_default(),
                touches: s.touches.unwrap_or_default(),
            });
        }
        let touches_ok = stories.iter().flat_map(|s| &s.touches).all(|t| touches::check(t).is_ok());
        if !touches_ok || !dependency_problems(&stories).is_empty() {
            return None;
        }
        let branch_name = raw.branch_name.map(|b| b.trim().to_string()).filter(|b| !b.is_empty());
        Some(View { project: raw.project, branch_name, stories })
    }

    pub fn next_story(&self) -> Option<&Story> {
        next_of(&self.stories)
    }
}

fn read_stories(root: &Map<String, Value>) -> Result<Vec<Story>, Vec<String>> {
    let list = story_list(root)?;
    let mut problems = Vec::new();
    let mut stories = Vec::with_capacity(list.len());
    let mut seen = std::collections::HashMap::with_capacity(list.len());
    for (index, item) in list.iter().enumerate() {
        let Value::Object(obj) = item else {
            problems.push(format!("story #{} must be an object, found {}", index + 1, kind(item)));
            continue;
        };
        let mut fields = Fields { obj, index, problems: &mut problems };
        let Some(id) = fields.id() else { continue };
        if let Some(first) = seen.insert(id, index) {
            fields.problem(format!("duplicate id {id} (also story #{})", first + 1));
        }
        stories.push(fields.story(id));
    }
    problems.extend(dependency_problems(&stories));
    if problems.is_empty() { Ok(stories) } else { Err(problems) }
}

/// The `userStories` array, not empty.
fn story_list(root: &Map<String, Value>) -> Result<&Vec<Value>, Vec<String>> {
    let list = match root.get("userStories") {
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(vec![format!("\"userStories\" must be an array, found {}", kind(other))]);
        }
        None => {
            let hint = ["stories", "tasks", "prd"]
                .iter()
                .find(|k| root.contains_key(**k))
                .map(|k| format!(" (found \"{k}\": rename it to \"userStories\")"))
                .unwrap_or_default();
            return Err(vec![format!("no \"userStories\" array{hint}")]);
        }
    };
    if list.is_empty() {
        return Err(vec!["\"userStories\" is empty: there is nothing to do".into()]);
    }
    Ok(list)
}

/// One story's object, read field by field: a field of the wrong type is
/// a problem (named with the story) and reads as empty, so every problem
/// of a PRD is told at once.
struct Fields<'a, 'p> {
    obj: &'a Map<String, Value>,
    index: usize,
    problems: &'p mut Vec<String>,
}

impl<'a> Fields<'a, '_> {
    /// "story #3 (US-003)". Only a problem needs it: building it for every
    /// story is most of the validation's cost on a large PRD.
    fn problem(&mut self, what: String) {
        let label = match self.obj.get("id") {
            Some(Value::String(id)) if !id.trim().is_empty() => {
                format!("story #{} ({id})", self.index + 1)
            }
            _ => format!("story #{}", self.index + 1),
        };
        self.problems.push(format!("{label}: {what}"));
    }

    fn id(&mut self) -> Option<&'a str> {
        match self.obj.get("id") {
            Some(Value::String(id)) if !id.trim().is_empty() => Some(id),
            Some(Value::String(_)) => {
                self.problem("\"id\" is empty".into());
                None
            }
            None => {
                self.problem("missing \"id\"".into());
                None
            }
            Some(other) => {
                self.problem(format!("\"id\" must be a string, found {}", kind(other)));
                None
            }
        }
    }

    fn text(&mut self, key: &str) -> String {
        match self.obj.get(key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                self.problem(format!("\"{key}\" must be a string, found {}", kind(other)));
                String::new()
            }
        }
    }

    /// An array of strings; `what` says what they are, for the problem.
    fn strings(&mut self, key: &str, what: &str) -> Vec<String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
            }
            Some(other) => {
                self.problem(format!(
                    "\"{key}\" must be an array of {what}, found {}",
                    kind(other)
                ));
                Vec::new()
            }
        }
    }

    fn story(mut self, id: &str) -> Story {
        let title = self.text("title");
        let description = self.text("description");
        let notes = self.text("notes");
        let verify = Some(self.text("verify")).filter(|s| !s.trim().is_empty());
        // A `verify` ralph cannot split would silently mean "no gate" for
        // the story: the agent's word would be taken. Refuse it up front.
        if let Some(Err(e)) = verify.as_deref().map(crate::agent::words::split) {
            self.problem(format!("\"verify\" is not a command ralph can run: {e}"));
        }
        let depends_on = self.strings("dependsOn", "story ids");
        let touches = self.strings("touches", "paths or globs");
        for t in &touches {
            if let Err(e) = touches::check(t) {
                self.problem(format!("\"touches\": {e}"));
            }
        }
        let passes = match self.obj.get("passes") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.problem(format!("\"passes\" must be true or false, found {other}"));
                false
            }
        };
        let priority = match self.obj.get("priority") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n.as_f64(),
            Some(other) => {
                self.problem(format!("\"priority\" must be a number, found {other}"));
                None
            }
        };
        let acceptance_criteria = match self.obj.get("acceptanceCriteria") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(other) => {
                self.problem(format!(
                    "\"acceptanceCriteria\" must be an array of strings, found {}",
                    kind(other)
                ));
                Vec::new()
            }
        };
        Story {
            index: self.index,
            id: id.to_string(),
            title,
            description,
            acceptance_criteria,
            priority,
            passes,
            notes,
            verify,
            depends_on,
            touches,
        }
    }
}

/// What is wrong with the stories' `dependsOn`: ids that name no story,
/// and cycles (each named once, by the stories in it).
fn dependency_problems(stories: &[Story]) -> Vec<String> {
    let index: std::collections::HashMap<&str, usize> =
        stories.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let mut problems = Vec::new();
    for s in stories {
        for d in &s.depends_on {
            if !index.contains_key(d.as_str()) {
                problems.push(format!("{}: \"dependsOn\" names {d}, which is no story", s.id));
            } else if *d == s.id {
                problems.push(format!("{}: \"dependsOn\" names the story itself", s.id));
            }
        }
    }
    // Depth-first, three colours: a grey node reached again closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        White,
        Grey,
        Black,
    }
    let mut marks = vec![Mark::White; stories.len()];
    let mut reported = std::collections::HashSet::new();
    for start in 0..stories.len() {
        if marks[start] != Mark::White {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        marks[start] = Mark::Grey;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let deps = &stories[node].depends_on;
            if *next == deps.len() {
                marks[node] = Mark::Black;
                stack.pop();
                continue;
            }
            let dep = &deps[*next];
            *next += 1;
            let Some(&d) = index.get(dep.as_str()) else { continue };
            match marks[d] {
                Mark::White => {
                    marks[d] = Mark::Grey;
                    stack.push((d, 0));
                }
                Mark::Grey if d != node => {
                    let from = stack.iter().position(|(n, _)| *n == d).unwrap_or(0);
                    let mut cycle: Vec<&str> =
                        stack[from..].iter().map(|(n, _)| stories[*n].id.as_str()).collect();
                    let mut key = cycle.clone();
                    key.sort_unstable();
                    if reported.insert(key.join(",")) {
                        cycle.push(stories[d].id.as_str());
                        problems.push(format!(
                            "\"dependsOn\" goes round in a circle: {}",
                            cycle.join(" → ")
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    problems
}

/// "a string", "an array", …: a JSON value's type, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// serde_json appends " at line L column C"; we print the position up front.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

mod tampering;

pub use tampering::Tampering;

#[cfg(test)]
mod tests;
