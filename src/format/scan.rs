//! A one-pass walk over JSON lines, for the JSONL readers' fast path.
//!
//! The readers' reference path deserializes a line into a struct of borrowed
//! [`RawValue`](serde_json::value::RawValue)s and then parses the value it needs again:
//! every byte of a payload is tokenized once per level it is nested in. A [`Cursor`]
//! instead walks the line's objects and arrays itself (keys and punctuation) and hands
//! each value to serde_json once, at its position: skipped ([`Cursor::skip`]) or
//! deserialized ([`Cursor::value`]), both returning the value's exact text (what a
//! `RawValue` holds), so token counts see the same bytes.
//!
//! The walk accepts only plain JSON: keys without escapes, objects and arrays where the
//! caller expects them. On anything else every method returns `None` ("give up"), and
//! the caller reads the line with its reference path instead, which then produces the
//! same result or the same error as before. The invariant each fast reader keeps, and
//! its tests check: **when the fast path returns a result, the reference path returns
//! the same one**.

use serde::Deserialize;
use serde::de::IgnoredAny;

/// A position in one line of JSON text. Whitespace is JSON's (space, tab, CR, LF), as
/// serde_json reads it.
pub(crate) struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

/// An object or array being walked: whether its first member is still to come.
pub(crate) struct Open {
    first: bool,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `text`. **O(1)**.
    pub(crate) fn new(text: &'a str) -> Self {
        Cursor { text, pos: 0 }
    }

    /// Skips whitespace and returns the next byte without consuming it. **O(whitespace)**.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Consumes `byte` after whitespace, or gives up. **O(whitespace)**.
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// Enters an object: `{`. **O(whitespace)**.
    pub(crate) fn object(&mut self) -> Option<Open> {
        self.eat(b'{')?;
        Some(Open { first: true })
    }

    /// Enters an array: `[`. **O(whitespace)**.
    pub(crate) fn array(&mut self) -> Option<Open> {
        self.eat(b'[')?;
        Some(Open { first: true })
    }

    /// The next key of the object `open` (consuming it and its `:`), or `Some(None)` at
    /// its closing `}` (consumed). Gives up on a key with escapes or control characters
    /// (serde would unescape or reject it). **O(key)**.
    pub(crate) fn key(&mut self, open: &mut Open) -> Option<Option<&'a str>> {
        match self.peek()? {
            b'}' => {
                self.pos += 1;
                return Some(None);
            }
            b',' if !open.first => {
                self.pos += 1;
                self.eat(b'"')?;
            }
            b'"' if open.first => self.pos += 1,
            _ => return None,
        }
        open.first = false;
        let start = self.pos;
        let bytes = self.text.as_bytes();
        loop {
            match *bytes.get(self.pos)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.pos += 1,
            }
        }
        let key = self.text.get(start..self.pos)?;
        self.pos += 1;
        self.eat(b':')?;
        Some(Some(key))
    }

    /// Whether the array `open` has another element (consuming the `,` before it), or
    /// ends here (consuming its `]`). **O(whitespace)**.
    pub(crate) fn element(&mut self, open: &mut Open) -> Option<bool> {
        match self.peek()? {
            b']' => {
                self.pos += 1;
                Some(false)
            }
            b',' if !open.first => {
                self.pos += 1;
                Some(true)
            }
            _ if open.first => {
                open.first = false;
                Some(true)
            }
            _ => None,
        }
    }

    /// Deserializes the value here as `T`, returning it and its exact text. Gives up if
    /// serde_json rejects it. **O(len)** of the value, in one pass.
    pub(crate) fn value<T: Deserialize<'a>>(&mut self) -> Option<(T, &'a str)> {
        self.peek()?;
        let start = self.pos;
        let rest = self.text.get(start..)?;
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = stream.next()?.ok()?;
        self.pos = start + stream.byte_offset();
        Some((value, self.text.get(start..self.pos)?))
    }

    /// Skips the value here (checking it is valid JSON), returning its exact text.
    /// **O(len)** of the value.
    pub(crate) fn skip(&mut self) -> Option<&'a str> {
        self.value::<IgnoredAny>().map(|(_, raw)| raw)
    }

    /// Gives up unless only whitespace is left. **O(whitespace)**.
    pub(crate) fn end(&mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks an object of arrays and scalars, returning `key=raw` pairs.
    fn walk(text: &str) -> Option<Vec<String>> {
        let mut c = Cursor::new(text);
        let mut obj = c.object()?;
        let mut out = Vec::new();
        while let Some(key) = c.key(&mut obj)? {
            if c.peek()? == b'[' {
                let mut arr = c.array()?;
                while c.element(&mut arr)? {
                    out.push(format!("{key}[]={}", c.skip()?));
                }
            } else {
                out.push(format!("{key}={}", c.skip()?));
            }
        }
        c.end()?;
        Some(out)
    }

    #[test]
    fn walks_plain_json_and_gives_up_on_the_rest() {
        assert_eq!(
            walk(r#" { "a" : 1 , "b":[ "x\n" ,{"c":null}], "d":[]} "#).unwrap(),
            ["a=1", r#"b[]="x\n""#, r#"b[]={"c":null}"#]
        );
        assert_eq!(walk("{}").unwrap(), Vec::<String>::new());
        for bad in [
            "",
            "[]",
            "{,}",
            r#"{"a":1,}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":[,1]}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":1}x"#,
            r#"{"a":1}{}"#,
            r#"{"\u0061":1}"#,
            r#"{"a":tru}"#,
            r#"{"a":01}"#,
            r#"{"a" 1}"#,
            r#"{"a":1"#,
        ] {
            assert_eq!(walk(bad), None, "{bad}");
        }
    }
}
