//! What an accepted record did ([`Appended`]) and what was unusual about it
//! ([`Anomaly`]): the answer of [`Tracker::append`](crate::Tracker::append) and of the
//! events ([`Handled`](crate::Handled)), in a module of their own so that the events
//! do not import the tracker that handles them.

/// What an accepted append did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Appended {
    /// The record's position.
    pub at: usize,
    /// Whether the cut right after it (`at + 1`) is legal now.
    pub cut_after_is_legal: bool,
    /// What was unusual about the record, if anything.
    pub anomaly: Option<Anomaly>,
}

/// A record the tracker accepted but that a clean log would not contain. Anomalies are
/// not errors: the selector sees through them exactly as the seed does. A validator
/// over the whole log reports them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Anomaly {
    /// A `tool_result` arrived before any `tool_use` with its id.
    OrphanResult,
    /// A `tool_result` arrived for an id that already had a result.
    DuplicateResult,
    /// A `tool_use` arrived whose result came earlier, at `first_result`; every cut
    /// between the two became illegal.
    UseAfterResult {
        /// Position of the earlier result.
        first_result: usize,
    },
}
