//! A deque in fixed chunks: what the position indexes store their blocks in.
//!
//! A `VecDeque` doubles its buffer and copies everything into the new one: at 10^7
//! records that is tens of MB copied at once by one unlucky `append`, and up to half
//! the buffer idle afterwards. [`Chunked`] allocates `C` elements at a time and never
//! moves an element once its chunk is full: pushing is **O(C)** worst case (one
//! allocation of a chunk every `C` pushes; the first chunk of a fresh deque doubles up
//! to `C` from 4, so short logs stay small; the table of chunk pointers, `1 / C` of the
//! elements, is the only other thing that doubles), popping from the front frees whole
//! chunks, and the slack is at most one chunk at each end.
//!
//! The chunk table is a `Vec` whose first `gone` slots are chunks already freed (empty,
//! so no heap), closed up once they are half the table: an element is reached with
//! one offset and no ring arithmetic, and the last one (read by every append) is the
//! last chunk's last.

use std::ops::{Index, IndexMut};

/// A double-ended queue of `T` in chunks of `C` elements (pushed at the back, popped
/// at either end). Element `i` lives in chunk `gone + (front + i) / C` at
/// `(front + i) % C`.
#[derive(Clone, Debug)]
pub(crate) struct Chunked<T, const C: usize> {
    chunks: Vec<Vec<T>>,
    /// Slots at the start of `chunks` whose chunks were popped (empty `Vec`s).
    gone: usize,
    /// Elements of the first chunk already popped (still stored until it goes).
    front: usize,
    len: usize,
}

impl<T, const C: usize> Default for Chunked<T, C> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            gone: 0,
            front: 0,
            len: 0,
        }
    }
}

impl<T, const C: usize> Chunked<T, C> {
    /// Number of elements. **O(1)**.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Element `i`, if `i < len`. **O(1)**: one load of the chunk's pointer (a table of
    /// `len / C` entries, in cache) and one of the element.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        let p = self.front + i;
        self.chunks
            .get(self.gone + p / C)
            .and_then(|c| c.get(p % C))
    }

    /// The last element. **O(1)**.
    #[inline]
    pub(crate) fn back(&self) -> Option<&T> {
        // The last element is the last chunk's last: only the first live chunk is
        // entered at an offset (`front`), no live chunk is empty (the freed ones are
        // at the front), and an empty deque holds none. So no index is computed:
        // every append reads the last block.
        self.chunks.last()?.last()
    }

    /// The last element, to change. **O(1)**.
    #[inline]
    pub(crate) fn back_mut(&mut self) -> Option<&mut T> {
        // As in `back`.
        self.chunks.last_mut()?.last_mut()
    }

    /// The first element. **O(1)**.
    pub(crate) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// Appends `value`. **O(1)** worst case, plus one allocation of `C` elements every
    /// `C` pushes.
    #[inline]
    pub(crate) fn push_back(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < C => last.push(value),
            _ => {
                // A fresh deque's first chunk starts small and doubles up to `C` (a
                // copy of at most `C` elements), so a short log does not hold a
                // whole chunk; every later chunk is allocated whole.
                let first = if self.chunks.is_empty() { C.min(4) } else { C };
                let mut chunk = Vec::with_capacity(first);
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// Drops the first element; a chunk is freed once all its elements are popped.
    /// **O(1)**.
    pub(crate) fn pop_front(&mut self) {
        if self.len == 0 {
            return;
        }
        self.len -= 1;
        self.front += 1;
        if self.len == 0 {
            self.chunks.clear();
            self.gone = 0;
            self.front = 0;
        } else if self.front == C {
            // The first chunk is spent: freed now, its slot closed up with the others
            // once they are half the table (O(1) amortized).
            self.chunks[self.gone] = Vec::new();
            self.gone += 1;
            self.front = 0;
            if 2 * self.gone >= self.chunks.len() {
                self.chunks.drain(..self.gone);
                self.gone = 0;
            }
        }
    }

    /// Keeps the first `n` elements. **O(1 + dropped chunks)**, plus dropping the
    /// elements.
    pub(crate) fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        if n == 0 {
            self.chunks.clear();
            self.gone = 0;
            self.front = 0;
            self.len = 0;
            return;
        }
        let end = self.front + n;
        let keep = end.div_ceil(C);
        self.chunks.truncate(self.gone + keep);
        if let Some(last) = self.chunks.last_mut() {
            last.truncate(end - (keep - 1) * C);
        }
        self.len = n;
    }

    /// The elements `lo..hi` (`lo <= hi <= len`) as contiguous slices, in order.
    /// **O(1 + (hi - lo) / C)**.
    pub(crate) fn slices(&self, lo: usize, hi: usize) -> impl Iterator<Item = &[T]> + '_ {
        debug_assert!(lo <= hi && hi <= self.len);
        let (from, to) = (self.front + lo, self.front + hi);
        let chunks = if from < to {
            from / C..(to - 1) / C + 1
        } else {
            0..0
        };
        chunks.map(move |c| {
            let a = from.max(c * C) - c * C;
            let b = to.min((c + 1) * C) - c * C;
            &self.chunks[self.gone + c][a..b]
        })
    }

    /// The elements in order. **O(1)** per element.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.slices(0, self.len).flatten()
    }

    /// Bytes of heap held: every chunk's buffer and the chunk table. **O(chunks)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() * std::mem::size_of::<T>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<T>>()
    }

    /// Gives back the chunk table's spare room once it is mostly empty. **O(chunks)**.
    pub(crate) fn shrink(&mut self) {
        if self.chunks.capacity() > 4 * self.chunks.len() + 16 {
            self.chunks.shrink_to(2 * self.chunks.len());
        }
    }
}

impl<T, const C: usize> Index<usize> for Chunked<T, C> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        let p = self.front + i;
        assert!(i < self.len, "index {i} out of {} elements", self.len);
        &self.chunks[self.gone + p / C][p % C]
    }
}

impl<T, const C: usize> IndexMut<usize> for Chunked<T, C> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        let p = self.front + i;
        assert!(i < self.len, "index {i} out of {} elements", self.len);
        &mut self.chunks[self.gone + p / C][p % C]
    }
}

impl<T, const C: usize> FromIterator<T> for Chunked<T, C> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut out = Chunked::default();
        for v in iter {
            out.push_back(v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Chunked;
    use std::collections::VecDeque;

    /// Every operation against a `VecDeque` on a seeded random sequence.
    #[test]
    fn matches_a_vecdeque() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rng = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..200 {
            let mut a: Chunked<u32, 4> = Chunked::default();
            let mut b: VecDeque<u32> = VecDeque::new();
            for step in 0..200u32 {
                match rng() % 6 {
                    0..=2 => {
                        a.push_back(step);
                        b.push_back(step);
                    }
                    3 => {
                        a.pop_front();
                        b.pop_front();
                    }
                    4 => {
                        let n = (rng() as usize) % (b.len() + 2);
                        a.truncate(n);
                        b.truncate(n);
                    }
                    5 if step % 2 == 0 => {
                        if let (Some(x), Some(y)) = (a.back_mut(), b.back_mut()) {
                            *x += 7;
                            *y += 7;
                        }
                    }
                    _ => {
                        if !b.is_empty() {
                            let i = rng() as usize % b.len();
                            a[i] += 1000;
                            b[i] += 1000;
                        }
                    }
                }
                assert_eq!(a.len(), b.len());
                assert!(a.iter().eq(b.iter()));
                assert_eq!(a.back(), b.back());
                assert_eq!(a.back_mut(), b.back_mut());
                assert_eq!(a.front(), b.front());
                let lo = if b.is_empty() {
                    0
                } else {
                    rng() as usize % b.len()
                };
                let hi = lo + (rng() as usize) % (b.len() - lo + 1);
                let got: Vec<u32> = a.slices(lo, hi).flatten().copied().collect();
                let want: Vec<u32> = b.range(lo..hi).copied().collect();
                assert_eq!(got, want);
            }
        }
    }
}
