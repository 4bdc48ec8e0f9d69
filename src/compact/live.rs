//! A [`Log`] fed live: records that open and grow by deltas, as [`Event`]s, and plans
//! for a region chosen elsewhere (the [trigger policy](crate::policy)).

use std::ops::Range;

use super::apply::ApplyError;
use super::{ArgumentPolicy, Entry, Log, Payload, Plan};
#[cfg(doc)]
use crate::ReplaceError;
use crate::{AppendError, Appended, Event, EventError, Handled, Record};

impl Log {
    /// Appends `entry` open, as [`Tracker::open`](crate::Tracker::open): it may grow
    /// through [`handle`](Log::handle)d deltas until closed. **O(1)** amortized. A
    /// refused entry leaves the log as it was.
    ///
    /// # Errors
    /// Whatever [`Tracker::open`](crate::Tracker::open) refuses.
    pub fn open(&mut self, entry: Entry) -> Result<Appended, AppendError> {
        self.check_withdrawn(&entry.record)?;
        let appended = self.tracker.open(entry.record.clone())?;
        self.pushed(entry);
        Ok(appended)
    }

    /// Applies one event of a live turn to the tracker and mirrors it in the entries:
    /// a record event appends an entry with no payload (use [`append`](Log::append) or
    /// [`open`](Log::open) to attach one); a delta or usage report resizes the last
    /// entry's record; a [withdrawn call](Event::CallWithdrawn) becomes what the
    /// provider readers make of a block the API dropped (`format::build` of a text
    /// block): an `assistant` record of the same size and binding, with no payload
    /// ([`Payload::Kept`] stays kept), and its message stops being a tool group when
    /// it holds no other call. **O(1)** amortized, as
    /// [`Tracker::handle`](crate::Tracker::handle) (a withdrawal: **O(m)** for its
    /// message's `m` records). From then on a `tool_result` naming the withdrawn
    /// call is refused ([`AppendError::ResultForWithdrawnCall`]).
    ///
    /// ```
    /// use cutpoint::compact::{Entry, Log, Payload};
    /// use cutpoint::{Event, Record};
    /// let mut log = Log::new();
    /// log.handle(Event::Record(Record::user(100)))?;
    /// let call = Payload::Call { name: Some("bash".into()), arguments: Some(r#"{"command":"ls"}"#.into()) };
    /// log.open(Entry::new(Record::tool_use("toolu_1", 0), call))?;
    /// log.handle(Event::Delta { tokens: 12 })?;
    /// log.handle(Event::Closed)?;
    /// assert_eq!(log.entries()[1].record.tokens(), 12);
    /// assert_eq!(log.tracker().total_tokens(), 112);
    /// # Ok::<(), cutpoint::EventError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tracker::handle`](crate::Tracker::handle); a refused event leaves the log
    /// as it was.
    pub fn handle(&mut self, event: Event) -> Result<Handled, EventError> {
        let pushed = match &event {
            Event::Record(r) | Event::Opened(r) => {
                self.check_withdrawn(r)?;
                Some(r.clone())
            }
            _ => None,
        };
        let withdrawn = match &event {
            Event::CallWithdrawn(id) => Some(id.clone()),
            _ => None,
        };
        let handled = self.tracker.handle(event)?;
        match handled {
            Handled::Appended(_) | Handled::Opened(_) => {
                if let Some(record) = pushed {
                    self.pushed(Entry::from(record));
                }
            }
            Handled::Grew { at, tokens } | Handled::Resized { at, tokens } => {
                if let Some(entry) = self.entries.get_mut(at) {
                    entry.record = entry.record.clone().with_tokens(tokens);
                }
                self.changes += 1;
            }
            Handled::Withdrawn { at, .. } => {
                if let Some(id) = withdrawn {
                    self.interim.remove(&id);
                    self.withdrawn.insert(id);
                }
                self.call_withdrawn(at);
            }
            _ => self.changes += 1,
        }
        Ok(handled)
    }

    /// Entry `at`, whose call the tracker just withdrew, as an `assistant` record
    /// (see [`handle`](Log::handle)). **O(m)** for its message's `m` records.
    fn call_withdrawn(&mut self, at: usize) {
        let Some(entry) = self.entries.get_mut(at) else {
            return;
        };
        let record = Record::assistant(entry.record.tokens());
        entry.record = if entry.record.is_bound_to_previous() {
            record.bound_to_previous()
        } else {
            record
        };
        if !entry.kept() {
            entry.payload = Payload::None;
        }
        let entries = &self.entries;
        self.structure
            .call_withdrawn(at, entries.len(), |i| &entries[i].record);
        self.changes += 1;
    }

    /// Entry `at` is thinking the provider dropped (an Anthropic `fallback` block
    /// follows it in its message): its payload goes, as the provider readers read such
    /// a block (text). Returns whether it was thinking; other entries are left alone.
    /// **O(1)**.
    #[cfg(feature = "formats")]
    pub(crate) fn reasoning_dropped(&mut self, at: usize) -> bool {
        match self.entries.get_mut(at) {
            Some(entry) if entry.reasoning().is_some() => {
                entry.payload = Payload::None;
                self.changes += 1;
                true
            }
            _ => false,
        }
    }

    /// Replaces the payload of the last entry (a streamed call's, once its arguments
    /// are complete) and returns the one it had; `None` for an empty log. **O(1)**
    /// (**O(n)** when it takes a compaction payload away: the one before is looked for).
    pub fn set_last_payload(&mut self, payload: super::Payload) -> Option<super::Payload> {
        let last = self.entries.len().checked_sub(1)?;
        let entry = self.entries.back_mut()?;
        let old = std::mem::replace(&mut entry.payload, payload);
        let kept = entry.kept();
        match self.kept.last() {
            Some(&k) if k == last && !kept => {
                self.kept.pop();
            }
            Some(&k) if k == last => {}
            _ if kept => self.kept.push(last),
            _ => {}
        }
        let entry = &self.entries[last];
        if entry.compaction().is_some() {
            self.compaction = Some(last);
        } else if self.compaction == Some(last) {
            self.compaction = self.entries.iter().rposition(|e| e.compaction().is_some());
        }
        Some(old)
    }

    /// Compactions applied to this log so far. Positions (of records, cuts, plans and
    /// waiters such as `SharedTracker::legal_cut_ready`) taken before the last one are
    /// stale: plan again, and drop and recreate waiters. **O(1)**.
    pub fn compactions(&self) -> u64 {
        self.generation
    }

    /// A plan for exactly `region`, for callers that chose it themselves (the
    /// [trigger policy](crate::policy::TriggerPolicy::plan) does). **O(r)** expected
    /// for a region of `r` records. An empty region gives an empty plan.
    ///
    /// # Errors
    /// [`ApplyError::Region`] with [`ReplaceError::OutOfRange`] when the region ends
    /// past the log, [`ReplaceError::NotALegalCut`] when an end is not a legal cut (a
    /// pair would be split), [`ReplaceError::EmptyRegion`] when `start > end`;
    /// [`ApplyError::Pinned`] when a non-empty region starts at or before the latest
    /// compaction record; [`ApplyError::Kept`] when it covers a kept record.
    pub fn plan_region(
        &self,
        region: Range<usize>,
        arguments: ArgumentPolicy,
    ) -> Result<Plan, ApplyError> {
        self.tracker.check_region(region.start, region.end)?;
        self.check_unpinned(&region)?;
        Ok(self.plan_between(region.start, region.end, arguments))
    }

    /// The plan for `start..end`, both legal cuts (unchecked: [`plan_region`](Log::plan_region)
    /// checks). **O(end - start)** expected.
    pub(crate) fn plan_between(&self, start: usize, end: usize, arguments: ArgumentPolicy) -> Plan {
        let t = &self.tracker;
        Plan {
            region: start..end,
            atoms: self.atoms(start, end),
            region_tokens: t.tokens_before(end).unwrap_or(0) - t.tokens_before(start).unwrap_or(0),
            len: t.len(),
            generation: self.generation,
            arguments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compact::{Options, Payload, ResultStatus, validate};
    use crate::{Record, RecordKind, RegionEnd, ReplaceError};

    fn call(id: &str) -> Entry {
        Entry::new(
            Record::tool_use(id, 0).bound_to_previous(),
            Payload::Call {
                name: Some("bash".into()),
                arguments: Some(format!(r#"{{"command":"run {id}"}}"#)),
            },
        )
    }

    fn result(id: &str, tokens: u64) -> Entry {
        Entry::new(
            Record::tool_result(id, tokens),
            Payload::Result {
                status: Some(ResultStatus::Ok),
                content: Some(format!("{id} done\nmore")),
            },
        )
    }

    /// A user message, then an assistant message streamed with two calls; `a` answered.
    fn live() -> Log {
        let mut log = Log::new();
        log.handle(Event::Record(Record::user(100))).unwrap();
        log.handle(Event::Opened(Record::assistant(0))).unwrap();
        log.handle(Event::Delta { tokens: 30 }).unwrap();
        log.handle(Event::Closed).unwrap();
        for id in ["a", "b"] {
            log.open(call(id)).unwrap();
            log.handle(Event::Delta { tokens: 7 }).unwrap();
            log.handle(Event::Closed).unwrap();
        }
        log.handle(Event::UsageReported { tokens: 9 }).unwrap();
        log.handle(Event::TurnEnded).unwrap();
        log.append(result("a", 5_000)).unwrap();
        log
    }

    #[test]
    fn events_keep_entries_and_tracker_in_step() {
        let mut log = live();
        log.assert_invariants();
        let tokens: Vec<u64> = log.entries().iter().map(|e| e.record.tokens()).collect();
        assert_eq!(tokens, [100, 30, 7, 9, 5_000]);
        assert!(
            log.entries()[3].record.is_bound_to_previous(),
            "binding kept"
        );
        assert!(matches!(log.entries()[2].payload, Payload::Call { .. }));
        // A refused event changes neither side.
        assert!(log.handle(Event::Delta { tokens: 1 }).is_err());
        assert_eq!(log.len(), 5);
        log.open(Entry::from(Record::user(0))).unwrap();
        assert!(log.handle(Event::Record(Record::user(1))).is_err());
        assert_eq!(log.len(), 6);
        log.handle(Event::Delta { tokens: 4 }).unwrap();
        log.assert_invariants();
        assert_eq!(log.entries()[5].record.tokens(), 4);
    }

    #[test]
    fn a_chosen_region_is_checked_then_applied_in_place_mid_turn() {
        let mut log = live();
        // b is in flight: every cut past its call is illegal; 1 and 2 split nothing.
        assert_eq!(
            log.plan_region(0..4, ArgumentPolicy::Verbatim),
            Err(ApplyError::Region(ReplaceError::NotALegalCut {
                at: 4,
                which: RegionEnd::End
            }))
        );
        assert_eq!(
            log.plan_region(1..9, ArgumentPolicy::Verbatim),
            Err(ApplyError::Region(ReplaceError::OutOfRange {
                end: 9,
                len: 5
            }))
        );
        #[expect(clippy::reversed_empty_ranges, reason = "a reversed region is refused")]
        let reversed = 1..0;
        assert!(matches!(
            log.plan_region(reversed, ArgumentPolicy::Verbatim),
            Err(ApplyError::Region(ReplaceError::EmptyRegion {
                start: 1,
                end: 0
            }))
        ));
        let before = validate(log.entries(), Options::allowing_pending());
        assert!(before.is_clean(), "{:?}", before.violations);
        assert_eq!(log.compactions(), 0);
        // Append the answer to b, then compact the whole first round (1..6).
        let mut b = result("b", 40);
        b.record = b.record.bound_to_previous();
        log.append(b).unwrap();
        let plan = log.plan_region(1..6, ArgumentPolicy::Verbatim).unwrap();
        assert_eq!(
            plan.covered().map(|c| c.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let before = validate(log.entries(), Options::strict());
        log.apply(&plan, None, 50).unwrap();
        log.assert_invariants();
        assert_eq!(log.compactions(), 1);
        let after = validate(log.entries(), Options::strict());
        assert!(after.is_clean(), "{:?}", after.violations);
        assert_eq!(after.structure, before.structure, "pairing structure kept");
        let RecordKind::Summary(ids) = log.entries()[1].record.kind() else {
            panic!("a summary at 1")
        };
        assert_eq!(ids.len(), 2);
        // The old plan is stale now.
        assert!(matches!(
            log.apply(&plan, None, 50),
            Err(ApplyError::StalePlan { planned: 0, now: 1 })
        ));
    }
}
