//! A request body as its members and history elements, each kept as the bytes it
//! came as: what repair and session reuse edit, so that nothing they do not change
//! moves a byte.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::Route;

/// A JSON object's members in order, each value's bytes as they came; or, for one
/// member read with [`Members::split`], its array's elements' bytes.
pub(crate) struct Members<'a>(Vec<(Cow<'a, str>, Member<'a>)>);

/// One member's value.
enum Member<'a> {
    /// Its bytes.
    Raw(&'a RawValue),
    /// An array, as its elements' bytes ([`Members::split`]).
    Elements(Vec<&'a RawValue>),
}

/// Reads a JSON object's members; with `split`, that key's value as an array's
/// elements (the first time it comes).
struct MembersVisitor<'k> {
    split: Option<&'k str>,
}

impl<'de, 'k> Visitor<'de> for MembersVisitor<'k> {
    type Value = Members<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Members<'de>, M::Error> {
        let mut members = Vec::new();
        let mut split = self.split;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let value = match split {
                Some(k) if k == key => {
                    split = None;
                    Member::Elements(map.next_value()?)
                }
                _ => Member::Raw(map.next_value()?),
            };
            members.push((key, value));
        }
        Ok(Members(members))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MembersVisitor { split: None })
    }
}

impl<'a> Members<'a> {
    /// The members of the JSON object `text`, `key`'s value read as an array's
    /// elements: one pass over the bytes where the member's bytes and then its
    /// elements would take two. Fails as `serde_json::from_str` does (the syntax, a
    /// trailing character), and when `key`'s value is not an array. **O(len)**.
    pub(crate) fn split(text: &'a str, key: &str) -> Result<Members<'a>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let members = de.deserialize_map(MembersVisitor { split: Some(key) })?;
        de.end()?;
        Ok(members)
    }

    /// The value of `key` (its first, when it comes twice), unless it was split into
    /// elements. **O(members)**.
    pub(crate) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| match v {
                Member::Raw(raw) => Some(*raw),
                Member::Elements(_) => None,
            })
    }

    /// The elements of `key`'s array, when it was split ([`Members::split`]).
    /// **O(members)**.
    pub(crate) fn elements(&self, key: &str) -> Option<&[&'a RawValue]> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| match v {
                Member::Elements(elements) => Some(&elements[..]),
                Member::Raw(_) => None,
            })
    }

    /// Whether no key comes twice. **O(members log members)**.
    pub(crate) fn distinct(&self) -> bool {
        let mut keys: Vec<&str> = self.0.iter().map(|(k, _)| k.as_ref()).collect();
        keys.sort_unstable();
        keys.windows(2).all(|w| w[0] != w[1])
    }

    /// The object again, `key`'s value replaced by `value`; every other member's
    /// bytes as they came (a split array's elements as they came, joined by commas).
    /// **O(len)**.
    pub(crate) fn write_with(&self, key: &str, value: &str) -> String {
        self.write_replacing(&[(key, value)])
    }

    /// [`write_with`](Members::write_with) for several members: each key's value
    /// replaced by its value. **O(len)**.
    pub(crate) fn write_replacing(&self, with: &[(&str, &str)]) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::from(k.as_ref()).to_string());
            out.push(':');
            match v {
                _ if with.iter().any(|(key, _)| k == key) => {
                    let value = with.iter().find(|(key, _)| k == key).map_or("", |w| w.1);
                    out.push_str(value);
                }
                Member::Raw(raw) => out.push_str(raw.get()),
                Member::Elements(elements) => {
                    out.push('[');
                    for (j, e) in elements.iter().enumerate() {
                        if j > 0 {
                            out.push(',');
                        }
                        out.push_str(e.get());
                    }
                    out.push(']');
                }
            }
        }
        out.push('}');
        out
    }
}

/// One element of a rewritten array: its bytes as they came, or new ones.
pub(crate) enum Element<'a> {
    Raw(&'a RawValue),
    New(String),
}

pub(crate) fn join(elements: &[Element<'_>]) -> String {
    let mut out = String::from("[");
    for (i, e) in elements.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(match e {
            Element::Raw(r) => r.get(),
            Element::New(s) => s,
        });
    }
    out.push(']');
    out
}

/// The history's key in a request body of `route`.
pub(crate) fn history_key(route: Route) -> &'static str {
    match route {
        Route::OpenAiResponses => "input",
        _ => "messages",
    }
}

/// A session's continued body: the client's request (`members`) with `history` in
/// place of its own, and, for an Anthropic request whose forwarded history came from
/// a compaction that carried the task budget (`forwarded`'s `remaining`), that
/// `remaining` in the client's `output_config.task_budget`: the provider's countdown
/// goes on from the compaction, as Claude Code passes it after its own. **O(len)**.
pub(crate) fn continued_body(
    route: crate::Route,
    members: &Members<'_>,
    history: &str,
    forwarded: &cutpoint::format::Transcript,
) -> String {
    let key = history_key(route);
    let carried = forwarded
        .task_budget
        .and_then(|b| b.remaining)
        .filter(|_| route == crate::Route::AnthropicMessages)
        .and_then(|remaining| {
            let raw = members.get("output_config")?;
            let mut config: serde_json::Map<String, Value> =
                serde_json::from_str(raw.get()).ok()?;
            config
                .get_mut("task_budget")?
                .as_object_mut()?
                .insert("remaining".to_owned(), remaining.into());
            serde_json::to_string(&config).ok()
        });
    match carried {
        Some(config) => members.write_replacing(&[(key, history), ("output_config", &config)]),
        None => members.write_with(key, history),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass gives what two give: the members' bytes, the history's elements'
    /// bytes; and it refuses what the two refuse.
    #[test]
    fn split_reads_the_history_as_two_passes_would() {
        let text = r#"{"model":"m", "messages" : [ {"role":"user","content":"a"} ,{"b":[1, 2]}], "system":"s"}"#;
        let split = Members::split(text, "messages").unwrap();
        let plain: Members<'_> = serde_json::from_str(text).unwrap();
        let two: Vec<&RawValue> =
            serde_json::from_str(plain.get("messages").unwrap().get()).unwrap();
        let one: Vec<&str> = split
            .elements("messages")
            .unwrap()
            .iter()
            .map(|r| r.get())
            .collect();
        assert_eq!(one, two.iter().map(|r| r.get()).collect::<Vec<_>>());
        assert_eq!(split.get("system").unwrap().get(), r#""s""#);
        assert!(split.get("messages").is_none() && plain.elements("messages").is_none());
        assert_eq!(
            split.write_with("messages", "[]"),
            r#"{"model":"m","messages":[],"system":"s"}"#
        );
        assert_eq!(
            split.write_with("other", "1"),
            r#"{"model":"m","messages":[{"role":"user","content":"a"},{"b":[1, 2]}],"system":"s"}"#
        );
        for bad in [
            r#"{"messages":{}}"#,
            r#"{"messages":[1,]}"#,
            r#"{"messages":[]} x"#,
            r#"{"messages":["\x"]}"#,
            r#"[1]"#,
        ] {
            assert!(Members::split(bad, "messages").is_err(), "{bad}");
        }
    }
}
