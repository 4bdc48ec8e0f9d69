//! Token counting: a trait and a fast default estimate.

/// Counts the tokens of a piece of a transcript (a content block's JSON text).
///
/// Implementations must be deterministic. The default, [`ByteEstimate`], needs no
/// vocabulary; a real BPE tokenizer can be plugged in behind this trait.
pub trait TokenCounter {
    /// The number of tokens `text` costs. Should be **O(len)**.
    fn count(&self, text: &str) -> u64;

    /// The tokens of a block's JSON text `json`, as every format reader counts a
    /// block: its opaque payloads ([`opaque_payloads`]) cost
    /// [`OPAQUE_PAYLOAD_TOKENS`] each instead of their text, the rest costs
    /// [`count`](TokenCounter::count). A counter may override it (for instance to
    /// count payloads as text, as cutpoint did before). **O(len)**: one substring
    /// search per payload key, and a copy of `json` only when it holds a payload.
    fn count_json(&self, json: &str) -> u64 {
        let payloads = opaque_payloads(json);
        if payloads.is_empty() {
            return self.count(json);
        }
        let mut rest = String::with_capacity(json.len());
        let mut at = 0;
        for p in &payloads {
            rest.push_str(&json[at..p.start]);
            at = p.end;
        }
        rest.push_str(&json[at..]);
        let fixed = OPAQUE_PAYLOAD_TOKENS.saturating_mul(payloads.len() as u64);
        self.count(&rest).saturating_add(fixed)
    }
}

/// What one opaque payload costs in [`TokenCounter::count_json`]: a fixed small
/// number, whatever its length. Such a payload is base64 the model never reads as
/// text. Anthropic strips the thinking blocks of earlier turns from the context it
/// counts (its "Context windows" page: `context_window = (input_tokens -
/// previous_thinking_tokens) + current_turn_tokens`, `redacted_thinking` included);
/// OpenAI discards the reasoning of earlier turns ("reasoning tokens are discarded"),
/// and neither documents a cost per signature. So the payload counts as a marker,
/// not as its bytes; `docs/formats.md` has the estimate's error on the real
/// transcripts with and without this.
pub const OPAQUE_PAYLOAD_TOKENS: u64 = 8;

/// The byte ranges of the opaque payloads in the JSON text `json`: the contents
/// (between the quotes) of the string values of `signature` (Anthropic thinking),
/// `encrypted_content` (OpenAI reasoning), `thoughtSignature` (Gemini) and, in a text
/// holding a `redacted_thinking` block, `data`; in increasing order, not
/// overlapping. A text holding a provider's `compaction` has none: its encrypted
/// content stands for the history it replaced, so it keeps its text's count. A key
/// inside a string value never matches (its quotes are escaped there).
/// **O(len)**.
pub fn opaque_payloads(json: &str) -> Vec<std::ops::Range<usize>> {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    /// Every block of every read goes through here, most with no payload: the
    /// searchers are built once (and are faster than `str::contains` on these keys).
    struct Searchers {
        /// Two that every text with a key passes: `"signature"` and
        /// `"thoughtSignature"` end in `ignature"`; `"redacted_thinking"` and
        /// `"encrypted_content"` hold `ted_`.
        gate: [Finder<'static>; 2],
        redacted: Finder<'static>,
        compaction: Finder<'static>,
        /// The payload keys, `data` last (a key only beside a `redacted_thinking`).
        keys: [Finder<'static>; 4],
    }
    static FIND: LazyLock<Searchers> = LazyLock::new(|| Searchers {
        gate: [Finder::new("ignature\""), Finder::new("ted_")],
        redacted: Finder::new("\"redacted_thinking\""),
        compaction: Finder::new("\"compaction\""),
        keys: [
            Finder::new("\"signature\""),
            Finder::new("\"encrypted_content\""),
            Finder::new("\"thoughtSignature\""),
            Finder::new("\"data\""),
        ],
    });
    // A string holds no member, so no payload, whatever its text says (a quote in it
    // is escaped, and a key preceded by a backslash is skipped below): a text block's
    // or a tool output's string is not searched for keys. O(1).
    if json.trim_start().starts_with('"') {
        return Vec::new();
    }
    let bytes = json.as_bytes();
    let found = |f: &Finder<'_>| f.find(bytes).is_some();
    if !FIND.gate.iter().any(found) {
        return Vec::new();
    }
    let redacted = found(&FIND.redacted);
    let keys = if redacted {
        &FIND.keys[..]
    } else {
        &FIND.keys[..3]
    };
    if !redacted && !keys.iter().any(found) || found(&FIND.compaction) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for key in keys {
        let len = key.needle().len();
        for at in key.find_iter(bytes) {
            if at > 0 && bytes[at - 1] == b'\\' {
                continue;
            }
            if let Some(value) = string_value_after(json, at + len) {
                out.push(value);
            }
        }
    }
    out.sort_by_key(|r| r.start);
    out.dedup_by(|b, a| b.start < a.end);
    out
}

/// The contents of the JSON string that is the value after a key ending at `from`
/// (`: "…"`, whitespace allowed), or `None` when what follows is no string. **O(len
/// of the value)**.
fn string_value_after(json: &str, from: usize) -> Option<std::ops::Range<usize>> {
    let bytes = json.as_bytes();
    let mut i = from;
    let skip = |i: &mut usize| {
        while bytes.get(*i).is_some_and(u8::is_ascii_whitespace) {
            *i += 1;
        }
    };
    skip(&mut i);
    if bytes.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    skip(&mut i);
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let mut j = start;
    while let Some(&b) = bytes.get(j) {
        match b {
            b'\\' => j += 2,
            b'"' => return Some(start..j),
            _ => j += 1,
        }
    }
    None
}

/// The fast default estimate: one token per four bytes of text, rounded up, and at
/// least one token per non-empty piece. **O(1)** (it reads only the length).
///
/// For English prose and JSON, byte-pair tokenizers such as `o200k_base` average
/// about four bytes per token, so this is within a few tens of percent on typical
/// transcripts; it overestimates dense non-ASCII text less than a character count
/// would underestimate it. Use it for budgets, not billing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteEstimate;

impl TokenCounter for ByteEstimate {
    fn count(&self, text: &str) -> u64 {
        crate::compact::estimate_tokens(text)
    }

    /// What the default gives, without copying the text outside the payloads: the
    /// estimate depends on the length alone. **O(len)**, no allocation but the
    /// payloads' list.
    fn count_json(&self, json: &str) -> u64 {
        let payloads = opaque_payloads(json);
        let hidden: usize = payloads.iter().map(|p| p.len()).sum();
        let fixed = OPAQUE_PAYLOAD_TOKENS.saturating_mul(payloads.len() as u64);
        ((json.len() - hidden) as u64)
            .div_ceil(4)
            .saturating_add(fixed)
    }
}

/// OpenAI's `o200k_base` byte-pair encoding (GPT-4o, GPT-4.1, GPT-5, o-series), via
/// tiktoken-rs. Counts ordinary text: special tokens in a transcript count as text.
/// **O(len)** per count, after a one-time vocabulary load of some tens of
/// milliseconds in [`O200kBase::new`]. Feature `tiktoken`.
#[cfg(feature = "tiktoken")]
pub struct O200kBase {
    bpe: tiktoken_rs::CoreBPE,
}

#[cfg(feature = "tiktoken")]
impl O200kBase {
    /// Loads the vocabulary (bundled in the crate; no network).
    ///
    /// # Errors
    /// The tokenizer's own error, as text, if its bundled vocabulary fails to load.
    pub fn new() -> Result<Self, String> {
        tiktoken_rs::o200k_base()
            .map(|bpe| O200kBase { bpe })
            .map_err(|e| format!("o200k_base: {e}"))
    }
}

#[cfg(feature = "tiktoken")]
impl std::fmt::Debug for O200kBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("O200kBase")
    }
}

#[cfg(feature = "tiktoken")]
impl TokenCounter for O200kBase {
    fn count(&self, text: &str) -> u64 {
        self.bpe.count_ordinary(text) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_estimate_rounds_up_by_four_bytes() {
        assert_eq!(ByteEstimate.count(""), 0);
        assert_eq!(ByteEstimate.count("a"), 1);
        assert_eq!(ByteEstimate.count("abcd"), 1);
        assert_eq!(ByteEstimate.count("abcde"), 2);
        assert_eq!(ByteEstimate.count("é"), 1);
    }

    /// The naive oracle: every `"key": "value"` of the payload keys, by parsing.
    fn payload_values(json: &str) -> Vec<String> {
        fn walk(v: &serde_json::Value, redacted: bool, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(map) => {
                    for (k, v) in map {
                        let key = matches!(
                            k.as_str(),
                            "signature" | "encrypted_content" | "thoughtSignature"
                        ) || (redacted && k == "data");
                        match v {
                            serde_json::Value::String(s) if key => out.push(s.clone()),
                            _ => walk(v, redacted, out),
                        }
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, redacted, out)),
                _ => {}
            }
        }
        let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
        let mut out = Vec::new();
        walk(&v, json.contains("\"redacted_thinking\""), &mut out);
        out.sort();
        out
    }

    #[test]
    fn opaque_payloads_are_the_string_values_of_their_keys() {
        let cases = [
            r#"{"type":"thinking","thinking":"I think","signature":"RXVzZ0lHRUF"}"#,
            r#"{"type":"redacted_thinking","data":"QUJDREVGRw=="}"#,
            r#"{"type":"reasoning","summary":[],"encrypted_content" : "gAAAAB\"x"}"#,
            r#"{"text":"a","thoughtSignature":"c2ln","functionCall":{"name":"f"}}"#,
            // A key inside a string value, and `data` outside redacted thinking.
            r#"{"type":"text","text":"\"signature\":\"no\"","data":"kept"}"#,
            r#"{"type":"image","source":{"data":"iVBOR"}}"#,
            r#"{"signature":null,"encrypted_content":12}"#,
        ];
        for json in cases {
            let mut found: Vec<String> = opaque_payloads(json)
                .into_iter()
                .map(|r| serde_json::from_str(&format!("\"{}\"", &json[r])).expect("a string"))
                .collect();
            found.sort();
            assert_eq!(found, payload_values(json), "{json}");
        }
        // A provider's compaction keeps its text's count.
        let compaction = r#"{"type":"compaction","encrypted_content":"gAAAAB"}"#;
        assert!(opaque_payloads(compaction).is_empty());
    }

    #[test]
    fn count_json_charges_a_payload_its_fixed_cost() {
        let long = "A".repeat(4000);
        let signed = format!(r#"{{"type":"thinking","thinking":"hm","signature":"{long}"}}"#);
        let bare = r#"{"type":"thinking","thinking":"hm","signature":""}"#;
        assert_eq!(
            ByteEstimate.count_json(&signed),
            ByteEstimate.count(bare) + OPAQUE_PAYLOAD_TOKENS
        );
        // Without a payload it is the plain count.
        let text = r#"{"type":"text","text":"hello"}"#;
        assert_eq!(ByteEstimate.count_json(text), ByteEstimate.count(text));
        // Unterminated JSON: no payload, no panic.
        assert_eq!(
            ByteEstimate.count_json(r#"{"signature":"abc"#),
            ByteEstimate.count(r#"{"signature":"abc"#)
        );
    }

    /// [`ByteEstimate`]'s count through the trait's default `count_json` (the
    /// oracle of its own, copy-free one).
    struct ByDefault;

    impl TokenCounter for ByDefault {
        fn count(&self, text: &str) -> u64 {
            ByteEstimate.count(text)
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3_000))]
        #[test]
        fn byte_estimate_counts_json_as_the_default_does(
            members in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "signature", "encrypted_content", "thoughtSignature", "data",
                        "type", "text", "compaction",
                    ]),
                    proptest::sample::select(vec![
                        "\"AAAA\"", "\"\"", "\"x\\\"y\"", "\"redacted_thinking\"", "12",
                        "{\"signature\":\"s\"}", "[\"data\"]", "null",
                    ]),
                    proptest::sample::select(vec!["", " ", "\n  "]),
                ),
                0..8,
            )
        ) {
            let body: Vec<String> = members
                .iter()
                .map(|(k, v, blank)| format!("{blank}\"{k}\"{blank}:{blank}{v}"))
                .collect();
            let json = format!("{{{}}}", body.join(","));
            proptest::prop_assert_eq!(ByteEstimate.count_json(&json), ByDefault.count_json(&json), "{}", json);
        }
    }

    #[test]
    fn every_key_passes_the_gate() {
        for (json, payload) in [
            (r#"{"type":"thinking","signature":"AAAA"}"#, "AAAA"),
            (r#"{"thoughtSignature":"BBBB","text":"t"}"#, "BBBB"),
            (r#"{"type":"reasoning","encrypted_content":"CCCC"}"#, "CCCC"),
            (r#"{"type":"redacted_thinking","data":"DDDD"}"#, "DDDD"),
        ] {
            let found: Vec<&str> = opaque_payloads(json)
                .into_iter()
                .map(|r| &json[r])
                .collect();
            assert_eq!(found, [payload], "{json}");
        }
        // A gate word alone is no payload.
        assert!(opaque_payloads(r#"{"created_at":"x","Signature":"y"}"#).is_empty());
    }

    #[test]
    fn a_string_holds_no_payload_whatever_it_says() {
        // A text block or a tool output quoting a signed block, as JSON escapes it.
        let quoted = serde_json::to_string(
            r#"{"type":"thinking","signature":"AAAA","encrypted_content":"B","thoughtSignature":"C"} "redacted_thinking" "data":"D" \"signature\":\"E\""#,
        )
        .expect("a string serializes");
        for text in [
            quoted.as_str(),
            r#""signature""#,
            r#" "\"signature\": \"x\"" "#,
        ] {
            assert!(opaque_payloads(text).is_empty(), "{text}");
            assert_eq!(ByteEstimate.count_json(text), ByteEstimate.count(text));
        }
        // The same members in an object are payloads.
        let object = r#"{"signature":"AAAA","encrypted_content":"B"}"#;
        assert_eq!(opaque_payloads(object).len(), 2);
    }

    #[cfg(feature = "tiktoken")]
    #[test]
    fn o200k_counts_real_tokens() {
        let bpe = O200kBase::new().expect("the bundled vocabulary loads");
        assert_eq!(bpe.count("hello world"), 2);
        assert_eq!(bpe.count(""), 0);
        // JSON punctuation is several tokens, unlike the byte estimate's 4 bytes each.
        assert!(bpe.count(r#"{"a":1}"#) >= 4);
    }
}
