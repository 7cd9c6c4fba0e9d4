//! Lenient, borrowing views of the JSON events agent CLIs print.
//!
//! The CLIs change their event shapes between releases. A typed struct that
//! rejects a line because `num_turns` became a string would lose the whole
//! `result` event, so every field here accepts any JSON value: [`Any`] keeps
//! scalars (strings borrowed from the line when they have no escapes),
//! [`Obj`], [`List`] and [`Entries`] read containers of the expected kind and
//! skip anything else. Unknown fields are skipped by serde without being
//! built, which keeps big tool inputs cheap.
//!
//! [`DocBuffer`] joins a pretty-printed document (Gemini's `json` output is
//! `JSON.stringify(…, null, 2)`) back into one piece.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Any JSON value, with only scalars kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Any<'a> {
    #[default]
    Null,
    Bool(bool),
    Num(f64),
    Str(Cow<'a, str>),
    /// An array or object, skipped.
    Other,
}

impl Any<'_> {
    pub(crate) fn str(&self) -> Option<&str> {
        match self {
            Any::Str(text) => Some(text),
            _ => None,
        }
    }

    /// A string that is not empty.
    pub(crate) fn text(&self) -> Option<&str> {
        self.str().filter(|text| !text.is_empty())
    }

    /// A number, or a string holding one.
    pub(crate) fn num(&self) -> Option<f64> {
        match self {
            Any::Num(n) if n.is_finite() => Some(*n),
            Any::Str(text) => text.trim().parse().ok().filter(|n: &f64| n.is_finite()),
            _ => None,
        }
    }

    pub(crate) fn u64(&self) -> Option<u64> {
        self.num().filter(|n| *n >= 0.0).map(|n| n as u64)
    }

    pub(crate) fn bool(&self) -> Option<bool> {
        match self {
            Any::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub(crate) fn is(&self, text: &str) -> bool {
        self.str() == Some(text)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Any<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AnyVisitor(PhantomData))
    }
}

struct AnyVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for AnyVisitor<'a> {
    type Value = Any<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<Any<'a>, E> {
        Ok(Any::Bool(v))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Any<'a>, E> {
        Ok(Any::Num(v as f64))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Any<'a>, E> {
        Ok(Any::Num(v as f64))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Any<'a>, E> {
        Ok(Any::Num(v))
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Any<'a>, E> {
        Ok(Any::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Any<'a>, E> {
        Ok(Any::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Any<'a>, E> {
        Ok(Any::Str(Cow::Owned(v)))
    }

    fn visit_unit<E: Error>(self) -> Result<Any<'a>, E> {
        Ok(Any::Null)
    }

    fn visit_none<E: Error>(self) -> Result<Any<'a>, E> {
        Ok(Any::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Any<'a>, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Any<'a>, A::Error> {
        skip_seq(seq).map(|()| Any::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Any<'a>, A::Error> {
        skip_map(map).map(|()| Any::Other)
    }
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// The visitor methods for values of the wrong kind: accept and return the
/// empty value, so a shape change never fails the whole event.
macro_rules! accept_other_kinds {
    ($empty:expr) => {
        fn visit_bool<E: Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_i64<E: Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_u64<E: Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_f64<E: Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_str<E: Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok($empty)
        }
        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok($empty)
        }
    };
}

/// A number (or a string holding one); anything else reads as `None`.
/// Unlike [`Any`] it borrows nothing, for usage structs shared by lifetimes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Num(pub(crate) Option<f64>);

impl Num {
    pub(crate) fn u64(self) -> u64 {
        self.0.filter(|n| n.is_finite() && *n >= 0.0).map_or(0, |n| n as u64)
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Any::deserialize(deserializer)?;
        Ok(Num(value.num()))
    }
}

/// An object read as `T`, or `None` when the value is not an object.
#[derive(Debug)]
pub(crate) struct Obj<T>(pub(crate) Option<T>);

impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ObjVisitor(PhantomData))
    }
}

struct ObjVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
    type Value = Obj<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    accept_other_kinds!(Obj(None));

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Obj<T>, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Obj<T>, A::Error> {
        skip_seq(seq).map(|()| Obj(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|t| Obj(Some(t)))
    }
}

/// An array of `T`, or empty when the value is not an array.
#[derive(Debug)]
pub(crate) struct List<T>(pub(crate) Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ListVisitor(PhantomData))
    }
}

struct ListVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
    type Value = List<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }

    accept_other_kinds!(List(Vec::new()));

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<List<T>, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List<T>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<List<T>, A::Error> {
        skip_map(map).map(|()| List(Vec::new()))
    }
}

/// An object with keys not known in advance (Cursor's `tool_call`, Gemini's
/// per-model stats), as `(key, value)` pairs; empty for other values.
#[derive(Debug)]
pub(crate) struct Entries<'a, T>(pub(crate) Vec<(Cow<'a, str>, T)>);

impl<T> Default for Entries<'_, T> {
    fn default() -> Self {
        Entries(Vec::new())
    }
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for Entries<'a, T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(EntriesVisitor(PhantomData))
    }
}

struct EntriesVisitor<'a, T>(PhantomData<(&'a (), T)>);

impl<'de: 'a, 'a, T: Deserialize<'de>> Visitor<'de> for EntriesVisitor<'a, T> {
    type Value = Entries<'a, T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    accept_other_kinds!(Entries(Vec::new()));

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        skip_seq(seq).map(|()| Entries(Vec::new()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<Any<'a>, T>()? {
            if let Any::Str(key) = key {
                entries.push((key, value));
            }
        }
        Ok(Entries(entries))
    }
}

/// Text given as a string or as an array of `{"text": …}` blocks (the two
/// shapes of Claude's `tool_result` content); empty for anything else.
#[derive(Debug, Default)]
pub(crate) struct Texts<'a>(pub(crate) Vec<Cow<'a, str>>);

impl Texts<'_> {
    pub(crate) fn pieces(&self) -> Vec<&str> {
        self.0.iter().map(|piece| piece.as_ref()).collect()
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct TextBlock<'a> {
    #[serde(borrow)]
    text: Any<'a>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Texts<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextsVisitor(PhantomData))
    }
}

struct TextsVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TextsVisitor<'a> {
    type Value = Texts<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or an array of text blocks")
    }

    fn visit_bool<E: Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Texts::default())
    }
    fn visit_i64<E: Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Texts::default())
    }
    fn visit_u64<E: Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Texts::default())
    }
    fn visit_f64<E: Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Texts::default())
    }
    fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
        Ok(Texts::default())
    }
    fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
        Ok(Texts::default())
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Texts(vec![Cow::Borrowed(v)]))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Texts(vec![Cow::Owned(v.to_owned())]))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Texts(vec![Cow::Owned(v)]))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut pieces = Vec::new();
        while let Some(Obj(block)) = seq.next_element::<Obj<TextBlock<'a>>>()? {
            if let Some(TextBlock { text: Any::Str(text) }) = block {
                pieces.push(text);
            }
        }
        Ok(Texts(pieces))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        skip_map(map).map(|()| Texts::default())
    }
}

/// Joins the lines of one pretty-printed JSON document.
///
/// It starts at a line that is only `{` or `[` and ends when the brackets
/// balance (brackets inside strings do not count). A document over the cap,
/// or a new single-line event appearing inside it, abandons it: the lines
/// were not one document after all.
#[derive(Debug, Default)]
pub(crate) struct DocBuffer {
    buf: Vec<u8>,
    depth: u32,
    in_string: bool,
    escaped: bool,
    active: bool,
}

/// What [`DocBuffer::push`] did with a line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DocLine {
    /// Not part of a document: handle the line as usual.
    Outside,
    /// Taken into the open document.
    Taken,
    /// The document is complete: read it with [`DocBuffer::take`].
    Complete,
}

/// A pretty-printed document larger than this is not read.
const MAX_DOC: usize = 4 * 1024 * 1024;

impl DocBuffer {
    pub(crate) fn push(&mut self, line: &[u8]) -> DocLine {
        let trimmed = line.trim_ascii();
        if !self.active {
            if trimmed != b"{" && trimmed != b"[" {
                return DocLine::Outside;
            }
            self.active = true;
            self.buf.clear();
            self.depth = 0;
            self.in_string = false;
            self.escaped = false;
        }
        // A pretty printer never puts a key on the line of its `{`, so such a
        // line is a new single-line event and the "document" was not one.
        if trimmed.starts_with(b"{\"") || self.buf.len() + line.len() > MAX_DOC {
            self.abandon();
            return DocLine::Outside;
        }
        self.buf.extend_from_slice(line);
        self.buf.push(b'\n');
        for &byte in line {
            if self.in_string {
                match (self.escaped, byte) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        if self.depth == 0 {
            self.active = false;
            DocLine::Complete
        } else {
            DocLine::Taken
        }
    }

    /// The completed document.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Ends an open document at the end of the output; it was cut off.
    pub(crate) fn abandon(&mut self) {
        self.active = false;
        self.buf = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Event<'a> {
        #[serde(borrow, rename = "type")]
        kind: Any<'a>,
        num_turns: Any<'a>,
        #[serde(borrow)]
        message: Obj<Message<'a>>,
        #[serde(borrow)]
        errors: List<Any<'a>>,
        #[serde(borrow)]
        tool_call: Entries<'a, Any<'a>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Message<'a> {
        #[serde(borrow)]
        id: Any<'a>,
    }

    #[test]
    fn every_field_accepts_any_kind() {
        let lines = [
            r#"{"type":"result","num_turns":3,"message":{"id":"m1"},"errors":["a","b"],"tool_call":{"shell":1}}"#,
            r#"{"type":"result","num_turns":"3","message":"text","errors":{"a":1},"tool_call":[1,2]}"#,
            r#"{"type":"result","num_turns":null,"message":[{"id":1}],"errors":"x","tool_call":null,"extra":{"deep":[1,{"x":2}]}}"#,
        ];
        let events: Vec<Event> =
            lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert!(events.iter().all(|e| e.kind.is("result")));
        assert_eq!(events[0].num_turns.u64(), Some(3));
        assert_eq!(events[1].num_turns.u64(), Some(3));
        assert_eq!(events[2].num_turns.u64(), None);
        assert_eq!(events[0].message.0.as_ref().and_then(|m| m.id.str()), Some("m1"));
        assert!(events[1].message.0.is_none() && events[2].message.0.is_none());
        assert_eq!(events[0].errors.0.len(), 2);
        assert!(events[1].errors.0.is_empty() && events[2].errors.0.is_empty());
        assert_eq!(events[0].tool_call.0[0].0, "shell");
        assert!(events[1].tool_call.0.is_empty());
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let event: Event = serde_json::from_str(r#"{"type":"assistant"}"#).unwrap();
        assert!(matches!(event.kind, Any::Str(Cow::Borrowed("assistant"))));
        let event: Event = serde_json::from_str(r#"{"type":"a\nb"}"#).unwrap();
        assert!(matches!(event.kind, Any::Str(Cow::Owned(_))));
    }

    #[test]
    fn texts_are_a_string_or_text_blocks() {
        #[derive(Debug, Default, Deserialize)]
        #[serde(default)]
        struct Block<'a> {
            #[serde(borrow)]
            content: Texts<'a>,
        }
        let cases: &[(&str, &[&str])] = &[
            (r#"{"content":"one\ntwo"}"#, &["one\ntwo"]),
            (r#"{"content":"plain"}"#, &["plain"]),
            (
                r#"{"content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"text":"b"},7]}"#,
                &["a", "b"],
            ),
            (r#"{"content":{"text":"not a list"}}"#, &[]),
            (r#"{"content":null}"#, &[]),
            (r#"{}"#, &[]),
        ];
        for (json, want) in cases {
            let block: Block = serde_json::from_str(json).unwrap();
            assert_eq!(block.content.pieces(), *want, "{json}");
        }
    }

    #[test]
    fn joins_a_pretty_document() {
        let text = "banner\n{\n  \"response\": \"a { b [ \\\" c\",\n  \"stats\": {\n    \"x\": [1, 2]\n  }\n}\nafter";
        let mut doc = DocBuffer::default();
        let results: Vec<DocLine> = text.lines().map(|line| doc.push(line.as_bytes())).collect();
        use DocLine::*;
        assert_eq!(results, [Outside, Taken, Taken, Taken, Taken, Taken, Complete, Outside]);
        let value: serde_json::Value = serde_json::from_slice(&doc.take()).unwrap();
        assert_eq!(value["response"], "a { b [ \" c");
    }

    #[test]
    fn a_stray_brace_line_gives_way_to_events() {
        let mut doc = DocBuffer::default();
        assert_eq!(doc.push(b"{"), DocLine::Taken);
        assert_eq!(doc.push(b"  let x = 1;"), DocLine::Taken);
        assert_eq!(doc.push(br#"{"type":"result"}"#), DocLine::Outside);
        assert_eq!(doc.push(b"plain"), DocLine::Outside);
    }
}
