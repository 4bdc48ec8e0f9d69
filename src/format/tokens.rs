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
        (text.len() as u64).div_ceil(4)
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
}
