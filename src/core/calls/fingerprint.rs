//! The keyed 128-bit fingerprint a call id is hashed to once per record, and the
//! pass-through hasher the call book's tables use with it (see the [module
//! docs](super) for the choice of hash and its cost).

use std::hash::{Hash, Hasher};

/// A keyed 128-bit fingerprint of a call id, as two words (8-byte aligned, so map
/// entries stay 16 bytes where a `u128` would pad them to 32).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Fingerprint(pub(crate) u64, pub(crate) u64);

#[cfg(test)]
impl Fingerprint {
    /// A fingerprint from its two words, for tests.
    pub(crate) fn from_parts(a: u64, b: u64) -> Self {
        Fingerprint(a, b)
    }

    /// A total order, for sorting in tests.
    pub(crate) fn sort_key(self) -> (u64, u64) {
        (self.0, self.1)
    }
}

#[cfg(feature = "serde")]
impl Fingerprint {
    /// The two words, for snapshots.
    pub(crate) fn words(self) -> [u64; 2] {
        [self.0, self.1]
    }

    /// A fingerprint from its two words, as a snapshot stored them.
    pub(crate) fn from_words([a, b]: [u64; 2]) -> Self {
        Fingerprint(a, b)
    }
}

impl Hash for Fingerprint {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The first word is already a keyed, uniformly mixed hash: hand it over as is.
        state.write_u64(self.0);
    }
}

/// Passes a [`Fingerprint`]'s first word through unchanged.
#[derive(Default)]
pub(crate) struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `Fingerprint` is hashed with this hasher, through `write_u64`; stay
        // correct (if slow) for anything else.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, word: u64) {
        self.0 ^= word;
    }
}
