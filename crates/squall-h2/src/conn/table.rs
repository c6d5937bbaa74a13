//! The server connection's open streams, by id.
//!
//! Why not a map of boxed streams: every stream was an allocation of its own, and a tree
//! node came and went with each burst of requests. Here the streams live in one vector of
//! slots, reused as streams close, and a second vector keeps their ids in ascending order
//! with each one's slot (a client opens streams in ascending order, so a new id goes at its
//! end). Lookups search that short list (at most `max_concurrent_streams` entries). An idle
//! connection gives both vectors back ([`StreamTable::shrink`]).

use std::cell::Cell;

use super::stream::Stream;
use crate::frame::StreamId;

/// Slots a table starts with, so that a burst of streams does not grow it step by step.
const FIRST_SLOTS: usize = 16;

#[derive(Debug, Default)]
pub(super) struct StreamTable {
    /// Open streams' ids, ascending, each with its slot in `slots`.
    ids: Vec<(StreamId, u32)>,
    /// The streams; `None` marks a free slot (listed in `free`).
    slots: Vec<Option<Stream>>,
    free: Vec<u32>,
    /// Where in `ids` the last lookup found its stream: a response's head, its data and its
    /// frames look the same stream up one after another.
    last: Cell<usize>,
}

impl StreamTable {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn position(&self, id: StreamId) -> Result<usize, usize> {
        // The stream looked up last, then the newest (new ids arrive in ascending order),
        // before searching.
        let last = self.last.get();
        if self.ids.get(last).is_some_and(|&(at, _)| at == id) {
            return Ok(last);
        }
        match self.ids.last() {
            Some(&(newest, _)) if newest < id => return Err(self.ids.len()),
            Some(&(newest, _)) if newest == id => return Ok(self.ids.len() - 1),
            _ => {}
        }
        let found = self.ids.binary_search_by_key(&id, |&(id, _)| id);
        if let Ok(at) = found {
            self.last.set(at);
        }
        found
    }

    pub fn contains_key(&self, id: &StreamId) -> bool {
        self.position(*id).is_ok()
    }

    pub fn get(&self, id: &StreamId) -> Option<&Stream> {
        let at = self.position(*id).ok()?;
        self.slots[self.ids[at].1 as usize].as_ref()
    }

    pub fn get_mut(&mut self, id: &StreamId) -> Option<&mut Stream> {
        let at = self.position(*id).ok()?;
        self.slots[self.ids[at].1 as usize].as_mut()
    }

    /// Adds stream `id`, replacing one of the same id if there is one.
    pub fn insert(&mut self, id: StreamId, stream: Stream) {
        let at = match self.position(id) {
            Ok(at) => {
                self.slots[self.ids[at].1 as usize] = Some(stream);
                return;
            }
            Err(at) => at,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(stream);
                slot
            }
            None => {
                if self.slots.capacity() == 0 {
                    self.slots.reserve_exact(FIRST_SLOTS);
                    self.ids.reserve_exact(FIRST_SLOTS);
                    self.free.reserve_exact(FIRST_SLOTS);
                }
                self.slots.push(Some(stream));
                (self.slots.len() - 1) as u32
            }
        };
        self.ids.insert(at, (id, slot));
    }

    /// Drops stream `id` where it lies; true if there was one.
    pub fn discard(&mut self, id: &StreamId) -> bool {
        let Ok(at) = self.position(*id) else {
            return false;
        };
        let (_, slot) = self.ids.remove(at);
        self.slots[slot as usize] = None;
        self.free.push(slot);
        if self.ids.is_empty() {
            // Every slot is free: start again from the first.
            self.slots.clear();
            self.free.clear();
        }
        true
    }

    /// The open streams' ids, ascending.
    pub fn keys(&self) -> impl Iterator<Item = &StreamId> {
        self.ids.iter().map(|(id, _)| id)
    }

    /// The streams with their ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (&StreamId, &Stream)> {
        (self.ids.iter()).filter_map(|(id, slot)| Some((id, self.slots[*slot as usize].as_ref()?)))
    }

    /// The streams, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Stream> {
        self.slots.iter().flatten()
    }

    /// The streams, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.slots.iter_mut().flatten()
    }

    /// Gives back the table's memory when no stream is open.
    pub fn shrink(&mut self) {
        if self.ids.is_empty() {
            *self = StreamTable::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(window: i64) -> Stream {
        Stream::new(true, window, 0)
    }

    /// Ids stay in order whatever order streams open and close in, slots are reused, and
    /// an emptied table starts over.
    #[test]
    fn streams_are_found_by_id_in_any_order_of_opening_and_closing() {
        let mut table = StreamTable::default();
        for id in [1, 3, 5, 7, 9] {
            table.insert(id, stream(i64::from(id)));
        }
        assert!(table.discard(&3));
        assert!(!table.discard(&3) && table.get(&3).is_none());
        table.insert(11, stream(11));
        table.insert(2, stream(2));
        table.insert(5, stream(50));
        let ids: Vec<_> = table.keys().copied().collect();
        assert_eq!(ids, [1, 2, 5, 7, 9, 11]);
        let windows: Vec<_> = table.iter().map(|(&id, s)| (id, s.recv_window)).collect();
        assert_eq!(windows, [(1, 1), (2, 2), (5, 50), (7, 7), (9, 9), (11, 11)]);
        assert_eq!(table.slots.len(), 6, "the freed slot was reused");
        assert!(table.contains_key(&7) && !table.contains_key(&4));
        table.get_mut(&9).unwrap().recv_window = 90;
        assert_eq!(table.get(&9).unwrap().recv_window, 90);
        let mut sum: i64 = table.values().map(|s| s.recv_window).sum();
        assert_eq!(sum, 1 + 2 + 50 + 7 + 90 + 11);
        for s in table.values_mut() {
            s.recv_window += 1;
        }
        sum = table.values().map(|s| s.recv_window).sum();
        assert_eq!(sum, 1 + 2 + 50 + 7 + 90 + 11 + 6);
        // The remembered place of the last lookup goes stale as ids shift: still found.
        assert_eq!(table.get(&7).unwrap().recv_window, 8);
        assert!(table.discard(&1));
        assert_eq!(table.get(&7).unwrap().recv_window, 8);
        assert_eq!(table.get(&9).unwrap().recv_window, 91);
        assert!(table.get(&1).is_none() && table.get(&3).is_none());
        for id in [11, 9, 2, 7, 5] {
            assert!(table.discard(&id), "{id}");
        }
        assert!(table.is_empty() && table.slots.is_empty() && table.free.is_empty());
        table.shrink();
        assert_eq!(table.slots.capacity(), 0);
        table.insert(13, stream(13));
        assert_eq!((table.len(), table.slots.capacity()), (1, FIRST_SLOTS));
    }
}
