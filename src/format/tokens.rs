//! Token counting: a trait and a fast default estimate.

/// Counts the tokens of a piece of a transcript (a content block's JSON text).
///
/// Implementations must be deterministic. The default, [`ByteEstimate`], needs no
/// vocabulary; a real BPE tokenizer can be plugged in behind this trait.
pub trait TokenCounter {
    /// The number of tokens `text` costs. Should be **O(len)**.
    fn count(&self, text: &str) -> u64;
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
