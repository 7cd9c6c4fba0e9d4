//! Headless Chromium driven over the DevTools protocol, for the tests that
//! look at `ralph serve`'s page as a person would. The protocol runs over
//! `--remote-debugging-pipe` (JSON messages ending in NUL on fds 3 and 4),
//! so no websocket client is needed. One page per browser; every call has
//! a timeout, so a stuck browser fails the test instead of hanging it.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Chromium, if installed; else `None` after a SKIPPED line, or a panic
/// when `RALPH_REQUIRE_CHROMIUM=1` (CI, which installs it).
pub fn find(test: &str) -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| which::which(name).ok());
    if found.is_none() {
        assert!(
            std::env::var_os("RALPH_REQUIRE_CHROMIUM").is_none_or(|v| v.is_empty() || v == "0"),
            "{test}: chromium not installed and RALPH_REQUIRE_CHROMIUM is set (apt-get install chromium)"
        );
        eprintln!("SKIPPED: chromium not installed (apt-get install chromium): {test}");
    }
    found
}

pub struct Browser {
    child: Child,
    to: std::io::PipeWriter,
    from: Receiver<Value>,
    next: u64,
    session: Option<String>,
    _profile: tempfile::TempDir,
}

/// A descriptor at 10 or above, so that moving it to 3 or 4 in the child
/// never overwrites the other one.
fn high(fd: i32) -> i32 {
    // SAFETY: fcntl with F_DUPFD_CLOEXEC only duplicates a descriptor this
    // process owns; the result is checked.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
    assert!(new >= 10, "fcntl: {}", std::io::Error::last_os_error());
    new
}

impl Browser {
    pub fn launch(chromium: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (to_read, to_write) = std::io::pipe().unwrap();
        let (from_read, from_write) = std::io::pipe().unwrap();
        let (r, w) = (high(to_read.as_raw_fd()), high(from_write.as_raw_fd()));
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--remote-debugging-pipe",
            "--window-size=1280,1100",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: between fork and exec only dup2 runs (async-signal-safe);
        // `r` and `w` are open descriptors of this process, both >= 10.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        // SAFETY: `r` and `w` are this process's own duplicates, closed once
        // here (the child has its copies).
        unsafe {
            drop(File::from_raw_fd(r));
            drop(File::from_raw_fd(w));
        }
        drop((to_read, from_write));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut input = BufReader::new(from_read);
            loop {
                let mut msg = Vec::new();
                match input.read_until(0, &mut msg) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                msg.pop();
                if let Ok(v) = serde_json::from_slice::<Value>(&msg)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Browser { child, to: to_write, from: rx, next: 0, session: None, _profile: profile }
    }

    /// One protocol call, answered (events in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = s.clone().into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        let until = Instant::now() + CALL_TIMEOUT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(v) if v["id"] == id => {
                    assert!(v.get("error").is_none(), "{method}: {v}");
                    return v["result"].clone();
                }
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => panic!("chromium did not answer {method}"),
                Err(RecvTimeoutError::Disconnected) => panic!("chromium went away during {method}"),
            }
        }
    }

    /// Opens `url` in a new page, which later calls talk to.
    pub fn open(&mut self, url: &str) {
        self.session = None;
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = attached["sessionId"].as_str().map(str::to_string);
        self.call("Page.enable", json!({}));
        self.call("Page.navigate", json!({"url": url}));
    }

    /// The value of a JavaScript expression in the page (`null` while the
    /// page is still loading, or when it throws).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r =
            self.call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true}));
        r["result"]["value"].clone()
    }

    /// The page's visible text.
    pub fn text(&mut self) -> String {
        self.eval("document.body ? document.body.innerText : ''").as_str().unwrap_or("").to_string()
    }

    /// A PNG of the page, written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = base64(r["data"].as_str().expect("screenshot data"));
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    /// Asks the browser to close (it ends its own helper processes), and
    /// kills it if it has not within a while.
    fn drop(&mut self) {
        let close = json!({"id": 0, "method": "Browser.close"});
        let mut bytes = serde_json::to_vec(&close).unwrap();
        bytes.push(0);
        let _ = self.to.write_all(&bytes);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[test]
fn base64_decodes() {
    assert_eq!(base64("aGVsbG8="), b"hello");
    assert_eq!(base64("aGk="), b"hi");
    assert_eq!(base64("YWJj"), b"abc");
}
