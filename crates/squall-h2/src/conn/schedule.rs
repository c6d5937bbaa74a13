//! The DATA scheduler: which stream's frame goes next (RFC 9218 §10).
//!
//! Streams are filed by urgency, eight levels, and a level with a stream in it has its bit
//! set in `occupied`, so the most urgent level is found with one `trailing_zeros`, whatever
//! the number of streams. Within a level, incremental streams take turns round robin (a
//! `VecDeque`: a frame each, then to the back); non-incremental ones go one after another
//! in stream-id order (a `BTreeSet`: the lowest id sends until it is done), and as a group
//! they take one turn among the incremental ones, so neither kind starves the other.
//! A stream without a priority signal is urgency 3, incremental: plain round robin, one
//! `VecDeque` push and pop per frame, as before priorities.
//!
//! Streams whose next DATA waits for the connection window are parked, out of the levels,
//! until a WINDOW_UPDATE opens it: a closed window costs one look at each stream, not one
//! per output poll. Streams blocked on their own window are in no list at all (the caller
//! files them again when it opens).

use std::collections::{BTreeSet, VecDeque};

use super::priority::{PriorityParams, URGENCY_LEVELS};
use crate::frame::StreamId;

/// Where a stream is in the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Slot {
    /// In no list: nothing to send, or blocked on its own window, or being sent from.
    #[default]
    Out,
    /// In the level of its priority.
    Ready,
    /// Waiting for connection window.
    Parked,
}

/// The streams with something to send, by priority.
#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    /// Bit `u` is set when level `u` holds a stream.
    occupied: u8,
    levels: [Level; URGENCY_LEVELS],
    /// In the order they found the connection window closed.
    parked: Vec<StreamId>,
}

/// The streams of one urgency.
#[derive(Debug, Default)]
struct Level {
    /// Non-incremental streams: the lowest id goes first.
    sequential: BTreeSet<StreamId>,
    /// Incremental streams, in turn order.
    rotating: VecDeque<StreamId>,
    /// When both kinds wait: whether the incremental streams have the next turn.
    incremental_turn: bool,
}

const _: () = assert!(URGENCY_LEVELS <= u8::BITS as usize);

impl Scheduler {
    /// Files a stream at its priority. The caller sets its slot to [`Slot::Ready`].
    pub(crate) fn push(&mut self, id: StreamId, priority: PriorityParams) {
        let urgency = usize::from(priority.urgency);
        let level = &mut self.levels[urgency];
        match priority.incremental {
            true => level.rotating.push_back(id),
            false => {
                level.sequential.insert(id);
            }
        }
        self.occupied |= 1 << urgency;
    }

    /// Takes the stream whose frame goes next out of its level.
    pub(crate) fn pop(&mut self) -> Option<StreamId> {
        if self.occupied == 0 {
            return None;
        }
        let urgency = self.occupied.trailing_zeros() as usize;
        let level = &mut self.levels[urgency];
        let sequential = match (level.sequential.is_empty(), level.rotating.is_empty()) {
            (false, false) => {
                let sequential = !level.incremental_turn;
                level.incremental_turn = sequential;
                sequential
            }
            (empty, _) => !empty,
        };
        let id = match sequential {
            true => level.sequential.pop_first(),
            false => level.rotating.pop_front(),
        };
        if level.is_empty() {
            self.occupied &= !(1 << urgency);
        }
        id
    }

    /// Takes a stream out of its level (`Ready`) or the parked list; O(log n) for a
    /// non-incremental stream, a scan of its level or of the parked list otherwise.
    pub(crate) fn remove(&mut self, id: StreamId, priority: PriorityParams, slot: Slot) {
        match slot {
            Slot::Out => {}
            Slot::Parked => self.parked.retain(|&p| p != id),
            Slot::Ready => {
                let urgency = usize::from(priority.urgency);
                let level = &mut self.levels[urgency];
                match priority.incremental {
                    true => level.rotating.retain(|&r| r != id),
                    false => {
                        level.sequential.remove(&id);
                    }
                }
                if level.is_empty() {
                    self.occupied &= !(1 << urgency);
                }
            }
        }
    }

    /// Parks a stream until the connection window opens. The caller sets its slot.
    pub(crate) fn park(&mut self, id: StreamId) {
        self.parked.push(id);
    }

    /// The parked streams, for the caller to file again now that the window is open.
    pub(crate) fn unpark(&mut self) -> Vec<StreamId> {
        std::mem::take(&mut self.parked)
    }

    /// No stream waits for a turn, in a level or parked.
    pub(crate) fn is_idle(&self) -> bool {
        self.occupied == 0 && self.parked.is_empty()
    }

    pub(crate) fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }

    /// Streams in the levels, most urgent level first.
    pub(crate) fn ready(&self) -> impl Iterator<Item = StreamId> + '_ {
        (self.levels.iter()).flat_map(|l| l.sequential.iter().chain(&l.rotating).copied())
    }

    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Asserts the bookkeeping and returns every stream filed, with its slot and, when
    /// `Ready`, its priority, so the caller can check them against its streams.
    pub(crate) fn check(&self) -> Vec<(StreamId, Slot, Option<PriorityParams>)> {
        let mut all = Vec::new();
        for (urgency, level) in self.levels.iter().enumerate() {
            assert_eq!(
                self.occupied & (1 << urgency) != 0,
                !level.is_empty(),
                "occupied bit of level {urgency}"
            );
            let urgency = urgency as u8;
            for (ids, incremental) in [
                (level.sequential.iter().collect::<Vec<_>>(), false),
                (level.rotating.iter().collect(), true),
            ] {
                let priority = PriorityParams {
                    urgency,
                    incremental,
                };
                all.extend(ids.into_iter().map(|&id| (id, Slot::Ready, Some(priority))));
            }
        }
        all.extend(self.parked.iter().map(|&id| (id, Slot::Parked, None)));
        all
    }
}

impl Level {
    fn is_empty(&self) -> bool {
        self.sequential.is_empty() && self.rotating.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(urgency: u8, incremental: bool) -> PriorityParams {
        PriorityParams {
            urgency,
            incremental,
        }
    }

    /// Pops `n` turns, filing each stream back at its priority as a sending stream would be.
    fn turns(
        s: &mut Scheduler,
        n: usize,
        priority: impl Fn(StreamId) -> PriorityParams,
    ) -> Vec<StreamId> {
        (0..n)
            .map(|_| {
                let id = s.pop().unwrap();
                s.push(id, priority(id));
                id
            })
            .collect()
    }

    #[test]
    fn lower_urgency_first_then_round_robin() {
        let mut s = Scheduler::default();
        let prio = |id: StreamId| if id == 7 { p(1, true) } else { p(3, true) };
        for id in [1, 3, 5, 7] {
            s.push(id, prio(id));
        }
        assert_eq!(turns(&mut s, 3, prio), [7, 7, 7]);
        s.remove(7, prio(7), Slot::Ready);
        assert_eq!(turns(&mut s, 6, prio), [1, 3, 5, 1, 3, 5]);
    }

    #[test]
    fn sequential_streams_share_turns_with_incremental_ones() {
        let mut s = Scheduler::default();
        let prio = |id: StreamId| p(3, id == 1);
        for id in [5, 1, 3] {
            s.push(id, prio(id));
        }
        // 3 and 5 are not incremental: 3 (the lower id) takes every turn of the group.
        assert_eq!(turns(&mut s, 4, prio), [3, 1, 3, 1]);
        s.remove(3, prio(3), Slot::Ready);
        assert_eq!(turns(&mut s, 2, prio), [5, 1]);
        s.remove(1, prio(1), Slot::Ready);
        assert_eq!(turns(&mut s, 2, prio), [5, 5]);
        s.remove(5, prio(5), Slot::Ready);
        assert_eq!(s.pop(), None);
        s.check();
    }
}
