//! A vector that keeps its first few items on the stack: the per-request scratch list of
//! candidate route (or node) indices. Routing must not allocate in the common case, yet a
//! pathological config can make one request collect many candidates, so it spills to the heap
//! rather than drop any.

/// Items kept inline before spilling. A request rarely has more than a handful of candidates.
pub(crate) const INLINE_ITEMS: usize = 32;

pub(crate) struct SmallBuf {
    inline: [u32; INLINE_ITEMS],
    len: usize,
    /// Holds every item once the inline array overflows.
    spill: Vec<u32>,
}

impl SmallBuf {
    pub(crate) fn new() -> Self {
        SmallBuf {
            inline: [0; INLINE_ITEMS],
            len: 0,
            spill: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, item: u32) {
        if self.len < INLINE_ITEMS {
            self.inline[self.len] = item;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push(item);
        }
        self.len += 1;
    }

    pub(crate) fn extend(&mut self, items: &[u32]) {
        for &item in items {
            self.push(item);
        }
    }

    pub(crate) fn as_slice(&self) -> &[u32] {
        if self.len <= INLINE_ITEMS {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }

    /// Sorts and removes repeats, so candidates come out once each, in file order.
    pub(crate) fn sort_dedup(&mut self) {
        if self.len <= INLINE_ITEMS {
            let items = &mut self.inline[..self.len];
            items.sort_unstable();
            let mut kept = 0;
            for i in 0..items.len() {
                if kept == 0 || items[i] != items[kept - 1] {
                    items[kept] = items[i];
                    kept += 1;
                }
            }
            self.len = kept;
        } else {
            self.spill.sort_unstable();
            self.spill.dedup();
            self.len = self.spill.len();
            if self.len <= INLINE_ITEMS {
                self.inline[..self.len].copy_from_slice(&self.spill);
                self.spill.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spills_past_inline_and_sorts() {
        for n in [0, 1, 5, INLINE_ITEMS, INLINE_ITEMS + 1, 3 * INLINE_ITEMS] {
            let mut buf = SmallBuf::new();
            for i in (0..n as u32).rev() {
                buf.push(i);
                buf.push(i);
            }
            buf.sort_dedup();
            let want: Vec<u32> = (0..n as u32).collect();
            assert_eq!(buf.as_slice(), want.as_slice(), "n = {n}");
        }
    }

    #[test]
    fn dedup_back_to_inline() {
        let mut buf = SmallBuf::new();
        for _ in 0..INLINE_ITEMS * 2 {
            buf.push(7);
        }
        buf.extend(&[3, 7]);
        buf.sort_dedup();
        assert_eq!(buf.as_slice(), &[3, 7]);
    }
}
