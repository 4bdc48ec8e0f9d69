//! A map keyed by call-id [`Fingerprint`]s that stays a short inline list while few
//! keys are in it, and becomes a hash table past [`SPILL`] keys.
//!
//! Why: the call book's tables of pending calls and of early results hold a handful of
//! entries in real logs (the calls of one assistant round: 0-4, the largest seen in the
//! transcripts under `tests/fixtures/transcripts` is 7), and every `tool_use` and
//! `tool_result` inserts into or removes from them. A linear scan of up to [`SPILL`]
//! inline entries compares fingerprints' first words without hashing, probing or
//! growing a table (and allocates nothing up to [`INLINE`] entries); hostile logs with
//! thousands of open calls get the hash table's **O(1)** expected instead of a scan.
//! Measured in `cargo bench --bench append` (numbers in the README).

use crate::core::ensure::ensure;
use std::hash::BuildHasherDefault;

use hashbrown::HashMap;
use smallvec::SmallVec;

use super::fingerprint::{Fingerprint, FingerprintHasher};

/// Entries kept inline, without allocating.
pub(crate) const INLINE: usize = 4;

/// Entries kept in a list (scanned) before the map becomes a hash table.
pub(crate) const SPILL: usize = 16;

type Table<V> = HashMap<Fingerprint, V, BuildHasherDefault<FingerprintHasher>>;

/// See the module docs. Invariant (checked by `assert_invariants`): every entry lives
/// either in `list` (then `table` is `None`) or in `table` (then `list` is empty); keys
/// are distinct; the list holds at most [`SPILL`] entries.
#[derive(Clone, Debug)]
pub(crate) struct FpMap<V> {
    list: SmallVec<[(Fingerprint, V); INLINE]>,
    table: Option<Box<Table<V>>>,
}

impl<V> Default for FpMap<V> {
    fn default() -> Self {
        FpMap {
            list: SmallVec::new(),
            table: None,
        }
    }
}

impl<V> FpMap<V> {
    /// Number of entries. **O(1)**.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match &self.table {
            Some(t) => t.len(),
            None => self.list.len(),
        }
    }

    /// Whether the map is empty. **O(1)**.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn position(&self, fp: &Fingerprint) -> Option<usize> {
        self.list.iter().position(|(k, _)| k == fp)
    }

    /// The value for `fp`. **O(1)**: a scan of at most [`SPILL`] entries, or a probe.
    #[inline]
    pub(crate) fn get(&self, fp: &Fingerprint) -> Option<&V> {
        match &self.table {
            Some(t) => t.get(fp),
            None => self.position(fp).map(|i| &self.list[i].1),
        }
    }

    /// The value for `fp`, mutably. **O(1)** as [`FpMap::get`].
    pub(crate) fn get_mut(&mut self, fp: &Fingerprint) -> Option<&mut V> {
        if let Some(t) = &mut self.table {
            return t.get_mut(fp);
        }
        self.list.iter_mut().find(|(k, _)| k == fp).map(|(_, v)| v)
    }

    /// Whether `fp` is a key. **O(1)** as [`FpMap::get`].
    #[inline]
    pub(crate) fn contains_key(&self, fp: &Fingerprint) -> bool {
        self.get(fp).is_some()
    }

    /// Inserts `value` under `fp`, returning the value it replaces. **O(1)** amortized;
    /// the insert that passes [`SPILL`] entries moves them into a table, **O(SPILL)**.
    pub(crate) fn insert(&mut self, fp: Fingerprint, value: V) -> Option<V> {
        if let Some(t) = &mut self.table {
            return t.insert(fp, value);
        }
        if let Some(i) = self.position(&fp) {
            return Some(std::mem::replace(&mut self.list[i].1, value));
        }
        if self.list.len() < SPILL {
            self.list.push((fp, value));
            return None;
        }
        let mut table: Table<V> = Table::with_capacity_and_hasher(2 * SPILL, Default::default());
        table.extend(self.list.drain(..));
        table.insert(fp, value);
        self.list = SmallVec::new();
        self.table = Some(Box::new(table));
        None
    }

    /// Removes `fp`, returning its value. **O(1)** as [`FpMap::get`]; a table that
    /// empties is dropped, so the map is a list again.
    #[inline]
    pub(crate) fn remove(&mut self, fp: &Fingerprint) -> Option<V> {
        if let Some(t) = &mut self.table {
            let removed = t.remove(fp);
            if t.is_empty() {
                self.table = None;
            }
            return removed;
        }
        // Order does not matter: the last entry takes the removed one's place.
        self.position(fp).map(|i| self.list.swap_remove(i).1)
    }

    /// Keeps the entries for which `keep` is true. **O(n)**.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Fingerprint, &mut V) -> bool) {
        match &mut self.table {
            Some(t) => {
                t.retain(|k, v| keep(k, v));
                if t.is_empty() {
                    self.table = None;
                }
            }
            None => self.list.retain(|(k, v)| keep(k, v)),
        }
    }

    /// The entries, in no particular order. **O(1)** per entry. (The list is empty
    /// whenever the table exists, so chaining the two yields each entry once.)
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Fingerprint, &V)> {
        let list = self.list.iter().map(|(k, v)| (k, v));
        list.chain(self.table.iter().flat_map(|t| t.iter()))
    }

    /// The values, in no particular order. **O(1)** per entry.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// The values, mutably, in no particular order. **O(1)** per entry.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        let list = self.list.iter_mut().map(|(_, v)| v);
        list.chain(self.table.iter_mut().flat_map(|t| t.values_mut()))
    }

    /// Heap bytes of the map's own storage (not of what the values own). **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(Fingerprint, V)>();
        match &self.table {
            // hashbrown: buckets are the next power of two above cap * 8 / 7, each
            // with one control byte, plus a group of trailing control bytes.
            Some(t) => {
                let buckets = (t.capacity() * 8 / 7).next_power_of_two();
                std::mem::size_of::<Table<V>>() + buckets * (entry + 1) + 16
            }
            None if self.list.spilled() => self.list.capacity() * entry,
            None => 0,
        }
    }

    /// Checks the invariants in the type docs. Panics with a description if one fails.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.table.is_some() {
            ensure!(
                self.list.is_empty(),
                "entries live in the list or the table"
            );
        }
        ensure!(self.list.len() <= SPILL, "the list holds at most {SPILL}");
        for (i, (k, _)) in self.list.iter().enumerate() {
            ensure!(
                self.list[..i].iter().all(|(other, _)| other != k),
                "keys are distinct"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap as Oracle;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u32),
        Remove(u8),
        Get(u8),
        Retain(u8),
    }

    /// Keys from a small space, so that inserts collide with live keys and removals
    /// hit; some share a first word (the scan must compare both).
    fn fp(k: u8) -> Fingerprint {
        Fingerprint::from_parts(u64::from(k % 40), u64::from(k))
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<u8>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => any::<u8>().prop_map(Op::Remove),
            2 => any::<u8>().prop_map(Op::Get),
            1 => any::<u8>().prop_map(Op::Retain),
        ]
    }

    proptest! {
        /// Any sequence of operations gives what a std `HashMap` gives, across
        /// spilling into a table and returning to a list.
        #[test]
        fn behaves_as_a_hash_map(ops in proptest::collection::vec(op(), 0..400)) {
            let mut map: FpMap<u32> = FpMap::default();
            let mut oracle: Oracle<u8, u32> = Oracle::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(map.insert(fp(k), v), oracle.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(map.remove(&fp(k)), oracle.remove(&k)),
                    Op::Get(k) => {
                        prop_assert_eq!(map.get(&fp(k)), oracle.get(&k));
                        prop_assert_eq!(map.contains_key(&fp(k)), oracle.contains_key(&k));
                        if let Some(v) = map.get_mut(&fp(k)) {
                            *v = v.wrapping_add(1);
                        }
                        if let Some(v) = oracle.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                    }
                    Op::Retain(m) => {
                        let m = u32::from(m % 3) + 2;
                        map.retain(|_, v| *v % m != 0);
                        oracle.retain(|_, v| *v % m != 0);
                    }
                }
                map.check().unwrap();
                prop_assert_eq!(map.len(), oracle.len());
                prop_assert_eq!(map.is_empty(), oracle.is_empty());
                let mut got: Vec<(Fingerprint, u32)> = map.iter().map(|(k, v)| (*k, *v)).collect();
                let mut want: Vec<(Fingerprint, u32)> = oracle.iter().map(|(k, v)| (fp(*k), *v)).collect();
                got.sort_by_key(|(k, _)| k.sort_key());
                want.sort_by_key(|(k, _)| k.sort_key());
                prop_assert_eq!(got, want);
                prop_assert_eq!(map.values().count(), oracle.len());
            }
        }
    }
}
