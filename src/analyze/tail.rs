//! A bounded tail of text: the last `cap` bytes of everything pushed.
//!
//! Agents can print gigabytes; the analyzer only ever needs the end of the
//! final answer, so every text it keeps goes through one of these.

/// Keeps the last `cap` bytes (cut at a char boundary) of what is pushed.
#[derive(Debug)]
pub(crate) struct Tail {
    buf: String,
    cap: usize,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Tail {
        Tail { buf: String::new(), cap }
    }

    pub(crate) fn clear(&mut self) {
        self.buf.clear();
    }

    /// Appends `text`. The buffer may grow to twice `cap` before the front is
    /// dropped, so appending stays amortised O(len).
    pub(crate) fn push(&mut self, text: &str) {
        if text.len() >= self.cap {
            self.buf.clear();
            self.buf.push_str(suffix(text, self.cap));
            return;
        }
        self.buf.push_str(text);
        if self.buf.len() > 2 * self.cap {
            let cut = self.buf.len() - suffix(&self.buf, self.cap).len();
            self.buf.drain(..cut);
        }
    }

    /// Appends `text` and reports whether `needle` now ends inside the
    /// newly pushed part, so a marker split across pushes is still found.
    pub(crate) fn push_find(&mut self, text: &str, needle: &str) -> bool {
        let before = self.buf.len();
        self.push(text);
        let from = if self.buf.len() < before + text.len() {
            0
        } else {
            before.saturating_sub(needle.len().saturating_sub(1))
        };
        memchr::memmem::find(&self.buf.as_bytes()[from..], needle.as_bytes()).is_some()
    }

    /// The kept text: at most `cap` bytes.
    pub(crate) fn as_str(&self) -> &str {
        suffix(&self.buf, self.cap)
    }

    pub(crate) fn into_string(mut self) -> String {
        let cut = self.buf.len() - self.as_str().len();
        self.buf.drain(..cut);
        self.buf
    }
}

pub(crate) use crate::text::suffix_bytes as suffix;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes() {
        let mut tail = Tail::new(8);
        for word in ["abc", "def", "ghi", "jkl", "mno", "pqr"] {
            tail.push(word);
        }
        assert_eq!(tail.as_str(), "klmnopqr");
        assert_eq!(tail.into_string(), "klmnopqr");
    }

    #[test]
    fn cuts_at_char_boundaries() {
        let mut tail = Tail::new(5);
        tail.push("ééééé");
        assert_eq!(tail.as_str(), "éé");
        tail.push(&"✨".repeat(10));
        assert_eq!(tail.as_str(), "✨");
    }

    #[test]
    fn finds_a_marker_split_across_pushes() {
        let mut tail = Tail::new(64);
        assert!(!tail.push_find("all done <prom", "<promise>COMPLETE</promise>"));
        assert!(!tail.push_find("ise>COMP", "<promise>COMPLETE</promise>"));
        assert!(tail.push_find("LETE</promise>", "<promise>COMPLETE</promise>"));
        assert!(!tail.push_find(" more", "<promise>COMPLETE</promise>"));
    }
}
