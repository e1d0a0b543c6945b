//! The events a replay has read and not yet run, per thread, shared by every run that
//! replays the trace at once: each run keeps only how far it got in each thread's lane. A
//! lane is a list of fixed-size segments; a segment every run has passed goes back to a pool
//! and the next push reuses it (while still in the cache), so the memory held is what the
//! furthest-behind run still needs, not each run's own copy of it.

use std::collections::VecDeque;

/// Items per segment (a power of two: an item's place is a shift and a mask).
const SEGMENT: u64 = 1024;

struct Lane<T> {
    segments: VecDeque<Vec<T>>,
    /// The index (in the thread's order) of the first item of the first segment.
    first: u64,
    /// Items pushed so far.
    len: u64,
}

/// Every thread's lane.
pub struct Lanes<T> {
    lanes: Vec<Lane<T>>,
    free: Vec<Vec<T>>,
}

impl<T> Default for Lanes<T> {
    fn default() -> Self {
        Lanes { lanes: Vec::new(), free: Vec::new() }
    }
}

impl<T: Copy> Lanes<T> {
    /// Appends `item` to thread `t`'s lane.
    pub fn push(&mut self, t: usize, item: T) {
        if self.lanes.len() <= t {
            self.lanes.resize_with(t + 1, || Lane { segments: VecDeque::new(), first: 0, len: 0 });
        }
        let lane = &mut self.lanes[t];
        if lane.len == lane.first + SEGMENT * lane.segments.len() as u64 {
            let s = self.free.pop().unwrap_or_else(|| Vec::with_capacity(SEGMENT as usize));
            lane.segments.push_back(s);
        }
        lane.segments.back_mut().expect("a segment has room").push(item);
        lane.len += 1;
    }

    /// Thread `t`'s item number `i`, if pushed and not released.
    #[inline]
    pub fn get(&self, t: usize, i: u64) -> Option<&T> {
        let lane = self.lanes.get(t)?;
        let at = i.checked_sub(lane.first)?;
        lane.segments.get((at / SEGMENT) as usize)?.get((at % SEGMENT) as usize)
    }

    /// Every run is past item `upto` of thread `t` (exclusive): whole segments before it go
    /// back to the pool.
    pub fn release(&mut self, t: usize, upto: u64) {
        let Some(lane) = self.lanes.get_mut(t) else { return };
        while upto >= lane.first + SEGMENT && !lane.segments.is_empty() {
            let mut s = lane.segments.pop_front().expect("not empty");
            s.clear();
            self.free.push(s);
            lane.first += SEGMENT;
        }
    }

    pub fn threads(&self) -> usize {
        self.lanes.len()
    }

    /// Segments held, in lanes and in the pool (for tests).
    #[cfg(test)]
    fn segments(&self) -> (usize, usize) {
        (self.lanes.iter().map(|l| l.segments.len()).sum(), self.free.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_keep_each_threads_order_and_released_segments_are_reused() {
        let mut lanes = Lanes::default();
        let n = 3 * SEGMENT + 5;
        for i in 0..n {
            lanes.push(0, i);
            lanes.push(2, n + i);
        }
        assert_eq!(lanes.threads(), 3);
        assert!(lanes.get(1, 0).is_none(), "thread 1 pushed nothing");
        assert_eq!(lanes.get(0, 2 * SEGMENT + 1), Some(&(2 * SEGMENT + 1)));
        assert_eq!(lanes.get(2, n - 1), Some(&(2 * n - 1)));
        assert!(lanes.get(0, n).is_none(), "not pushed yet");
        // Runs are past item 2 * SEGMENT + 3 of thread 0: its first two segments go.
        lanes.release(0, 2 * SEGMENT + 3);
        assert_eq!(lanes.segments(), (6, 2));
        assert!(lanes.get(0, SEGMENT).is_none(), "released");
        assert_eq!(lanes.get(0, 2 * SEGMENT), Some(&(2 * SEGMENT)), "its segment is kept");
        // Thread 0's next segment comes from the pool.
        for i in n..n + SEGMENT {
            lanes.push(0, i);
        }
        assert_eq!(lanes.segments(), (7, 1));
        assert!((2 * SEGMENT..n + SEGMENT).all(|i| lanes.get(0, i) == Some(&i)));
        // All of a lane released: its partly filled last segment stays, and pushes go on in it.
        lanes.release(0, n + SEGMENT);
        assert_eq!(lanes.segments(), (5, 3));
        lanes.push(0, 99);
        assert_eq!(lanes.get(0, n + SEGMENT), Some(&99));
    }
}
