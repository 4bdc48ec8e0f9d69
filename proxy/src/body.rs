//! A request body as its members and history elements, each kept as the bytes it
//! came as: what repair and session reuse edit, so that nothing they do not change
//! moves a byte.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::Route;

/// A JSON object's members in order, each value's bytes as they came.
pub(crate) struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Members<'a>, M::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<Cow<'a, str>, &'a RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

impl<'a> Members<'a> {
    /// The value of `key` (its first, when it comes twice). **O(members)**.
    pub(crate) fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Whether no key comes twice. **O(members log members)**.
    pub(crate) fn distinct(&self) -> bool {
        let mut keys: Vec<&str> = self.0.iter().map(|(k, _)| k.as_ref()).collect();
        keys.sort_unstable();
        keys.windows(2).all(|w| w[0] != w[1])
    }

    /// The object again, `key`'s value replaced by `value`. **O(len)**.
    pub(crate) fn write_with(&self, key: &str, value: &str) -> String {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::from(k.as_ref()).to_string());
            out.push(':');
            out.push_str(if k == key { value } else { v.get() });
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
