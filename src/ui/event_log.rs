//! `logs/<run>/events.jsonl`: every event of a run, one JSON line each,
//! exactly as `--json` prints it, written beside the run's other logs
//! whatever the terminal shows. It is how a process that did not start the
//! run follows it (`ralph serve` tails it for its event stream) and what a
//! finished run's history is read from.
//!
//! The file is opened at `run_start`, the first event that names the run;
//! the few notices a run emits before it are kept and written first. A
//! run that resumes after a crash keeps the same id and appends to the
//! same file. Writing is best effort: a full disk never stops the loop.

use std::fs::{File, OpenOptions};

use crate::event::{Event, Reporter};
use crate::store::Store;

use super::Json;

/// The file name, in the run's log folder.
pub const FILE: &str = "events.jsonl";

/// Events before `run_start` kept for the file; more are not written.
const EARLY: usize = 64;

/// A [`Reporter`] that writes every event to the run's `events.jsonl` and
/// hands it on to the one that renders it.
pub struct EventLog {
    inner: Box<dyn Reporter>,
    store: Store,
    file: Option<Json<File>>,
    early: Vec<Event>,
    /// The file could not be opened: nothing more is tried.
    failed: bool,
}

impl EventLog {
    pub fn new(inner: Box<dyn Reporter>, store: Store) -> EventLog {
        EventLog { inner, store, file: None, early: Vec::new(), failed: false }
    }

    fn open(&mut self, run_id: &str) {
        let dir = self.store.run_log_dir(run_id);
        let opened = std::fs::create_dir_all(&dir)
            .and_then(|_| OpenOptions::new().create(true).append(true).open(dir.join(FILE)));
        match opened {
            Ok(f) => {
                let mut json = Json::new(f);
                for e in self.early.drain(..) {
                    json.emit(&e);
                }
                self.file = Some(json);
            }
            Err(_) => {
                self.failed = true;
                self.early.clear();
            }
        }
    }
}

impl Reporter for EventLog {
    fn emit(&mut self, event: &Event) {
        if let Event::RunStart { run_id, .. } = event
            && self.file.is_none()
            && !self.failed
        {
            self.open(run_id);
        }
        match &mut self.file {
            Some(f) => f.emit(event),
            None if !self.failed && self.early.len() < EARLY => self.early.push(event.clone()),
            None => {}
        }
        self.inner.emit(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Level;

    struct Count(std::rc::Rc<std::cell::Cell<usize>>);
    impl Reporter for Count {
        fn emit(&mut self, _: &Event) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn every_event_is_written_as_json_prints_it_and_passed_on() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path());
        let seen = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut log = EventLog::new(Box::new(Count(seen.clone())), store.clone());
        let notice = Event::Notice { level: Level::Info, message: "before".into() };
        log.emit(&notice);
        log.emit(&Event::RunStart {
            run_id: "20261203-101500-1-ab".into(),
            project: None,
            branch: None,
            prd: "prd.json".into(),
            agent: "custom".into(),
            max_iterations: 3,
            stories: 1,
            passing: 0,
            resumed_from: None,
            budget: Default::default(),
        });
        log.emit(&Event::AgentOutput { iteration: 1, text: "hello".into() });
        assert_eq!(seen.get(), 3, "every event reaches the renderer");
        let path = store.run_log_dir("20261203-101500-1-ab").join(FILE);
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let names: Vec<&str> = lines.iter().map(|v| v["event"].as_str().unwrap()).collect();
        assert_eq!(names, ["notice", "run_start", "agent_output"]);
        assert_eq!(lines[2]["v"], 1);
        assert_eq!(lines[2]["text"], "hello");
    }
}
