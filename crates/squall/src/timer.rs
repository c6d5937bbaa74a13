//! A hashed timer wheel for connection deadlines (header, idle, drain, linger).
//!
//! Why a wheel: 10,000 keep-alive connections each re-arm their idle deadline on every request,
//! and a heap would pay log n for each. Here arming is a push into a slot; a connection whose
//! deadline moved later is simply re-filed when its old slot comes round, and one whose entry is
//! stale (closed, slot reused) is dropped by its generation check. Resolution is one tick:
//! deadlines fire up to a tick late, never early.

use std::time::{Duration, Instant};

/// Resolution of the wheel.
pub const TICK: Duration = Duration::from_millis(100);
/// Slots in the wheel: 1,024 ticks cover 102 s; a later deadline is re-filed when its slot passes.
const SLOTS: usize = 1024;

/// What the wheel stores: an opaque key (connection index and generation) and its due time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: u64,
    pub due: Instant,
}

pub struct TimerWheel {
    slots: Vec<Vec<Entry>>,
    start: Instant,
    /// The next tick to process; every tick before it has fired.
    next_tick: u64,
    len: usize,
}

impl TimerWheel {
    pub fn new(now: Instant) -> TimerWheel {
        TimerWheel {
            slots: vec![Vec::new(); SLOTS],
            start: now,
            next_tick: 0,
            len: 0,
        }
    }

    /// Files `key` to be returned by `expire` once `due` has passed.
    pub fn insert(&mut self, key: u64, due: Instant) {
        // Filed in the tick after the one `due` falls in, so that by the time its slot is
        // processed `due` has passed. Never in a tick already processed: it would wait a turn.
        let tick = (self.tick_of(due) + 1).max(self.next_tick);
        let slot = (tick % SLOTS as u64) as usize;
        self.slots[slot].push(Entry { key, due });
        self.len += 1;
    }

    /// Moves every entry whose slot time has come into `fired`; callers check `due` themselves
    /// (an entry filed a full turn ahead shares its slot with nearer ones) and re-insert.
    pub fn expire(&mut self, now: Instant, fired: &mut Vec<Entry>) {
        let now_tick = self.tick_of(now);
        if now_tick < self.next_tick {
            return;
        }
        // Bound the walk to one turn: after a long stall, every slot is visited once.
        let last = now_tick.min(self.next_tick + SLOTS as u64 - 1);
        for tick in self.next_tick..=last {
            let entries = &mut self.slots[(tick % SLOTS as u64) as usize];
            let before = fired.len();
            let mut i = 0;
            while i < entries.len() {
                if entries[i].due <= now {
                    fired.push(entries.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            self.len -= fired.len() - before;
        }
        self.next_tick = now_tick + 1;
    }

    /// How long the event loop may sleep before the next tick needs processing.
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        if self.len == 0 {
            return None;
        }
        let next = self.start + TICK * u32::try_from(self.next_tick).unwrap_or(u32::MAX);
        Some(
            next.saturating_duration_since(now)
                .max(Duration::from_millis(1)),
        )
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn tick_of(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.start).as_nanos() / TICK.as_nanos()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(wheel: &mut TimerWheel, now: Instant) -> Vec<u64> {
        let mut fired = Vec::new();
        wheel.expire(now, &mut fired);
        let mut keys: Vec<u64> = fired.iter().map(|e| e.key).collect();
        keys.sort();
        keys
    }

    #[test]
    fn fires_at_or_after_due_never_before() {
        let t0 = Instant::now();
        let mut wheel = TimerWheel::new(t0);
        wheel.insert(1, t0 + Duration::from_millis(250));
        wheel.insert(2, t0 + Duration::from_secs(5));
        assert_eq!(
            fire(&mut wheel, t0 + Duration::from_millis(200)),
            Vec::<u64>::new()
        );
        assert_eq!(fire(&mut wheel, t0 + Duration::from_millis(300)), vec![1]);
        assert_eq!(
            fire(&mut wheel, t0 + Duration::from_millis(4_999)),
            Vec::<u64>::new()
        );
        // Up to one tick late, never early.
        assert_eq!(
            fire(&mut wheel, t0 + Duration::from_secs(5)),
            Vec::<u64>::new()
        );
        assert_eq!(fire(&mut wheel, t0 + Duration::from_millis(5_100)), vec![2]);
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.timeout(t0), None);
    }

    #[test]
    fn deadlines_beyond_one_turn_wait_for_their_turn() {
        let t0 = Instant::now();
        let mut wheel = TimerWheel::new(t0);
        let far = t0 + TICK * (SLOTS as u32 + 10);
        wheel.insert(7, far);
        // Its slot comes round after 10 ticks, a turn early: not due, stays filed.
        assert!(fire(&mut wheel, t0 + TICK * 11).is_empty());
        assert_eq!(wheel.len(), 1);
        assert_eq!(fire(&mut wheel, far + TICK), vec![7]);
    }

    #[test]
    fn a_long_stall_fires_everything_due() {
        let t0 = Instant::now();
        let mut wheel = TimerWheel::new(t0);
        for k in 0..100 {
            wheel.insert(k, t0 + Duration::from_millis(10 * k));
        }
        assert_eq!(fire(&mut wheel, t0 + Duration::from_secs(3600)).len(), 100);
        // Entries inserted after the stall still fire on time.
        let now = t0 + Duration::from_secs(3600);
        wheel.insert(500, now + Duration::from_millis(150));
        assert!(fire(&mut wheel, now + Duration::from_millis(100)).is_empty());
        assert_eq!(
            fire(&mut wheel, now + Duration::from_millis(300)),
            vec![500]
        );
    }

    #[test]
    fn past_deadlines_fire_on_the_next_expire() {
        let t0 = Instant::now();
        let mut wheel = TimerWheel::new(t0);
        assert!(fire(&mut wheel, t0 + Duration::from_secs(1)).is_empty());
        wheel.insert(3, t0);
        assert_eq!(fire(&mut wheel, t0 + Duration::from_millis(1_100)), vec![3]);
    }
}
