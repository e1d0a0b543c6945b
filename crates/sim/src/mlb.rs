//! GPUArmor's Metadata Lookaside Buffer (§5.2): a small per-SM cache of allocations'
//! metadata, keyed by the metadata entry's location. Here an allocation's location is its
//! id (metadata entries are one per allocation), so a set is chosen by the id; a LOADMETA's
//! range match finds the same entry, since live allocations are disjoint.

/// Which entry of a full set goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// The least recently used.
    Lru,
    /// The first filled.
    Fifo,
    /// One picked by a fixed-seed generator (the same run gives the same result).
    Random,
}

/// The buffer's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    /// Entries in all (0: no buffer).
    pub entries: u32,
    /// Entries per set (0 or `entries`: fully associative).
    pub ways: u32,
    pub policy: Policy,
}

impl Shape {
    pub fn fully_associative(entries: u32) -> Shape {
        Shape { entries, ways: 0, policy: Policy::Lru }
    }

    fn ways(&self) -> u32 {
        if self.ways == 0 || self.ways > self.entries {
            self.entries
        } else {
            self.ways
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Line {
    /// 0: empty.
    alloc: u32,
    /// When it was last used (LRU) or filled (FIFO).
    stamp: u64,
}

/// One SM's buffer.
#[derive(Clone, Debug)]
pub struct Mlb {
    ways: usize,
    sets: usize,
    policy: Policy,
    lines: Vec<Line>,
    clock: u64,
    rng: u64,
}

impl Mlb {
    pub fn new(shape: Shape) -> Mlb {
        let ways = shape.ways() as usize;
        let sets = if ways == 0 { 0 } else { (shape.entries as usize).div_ceil(ways) };
        Mlb {
            ways,
            sets,
            policy: shape.policy,
            lines: vec![Line::default(); ways * sets],
            clock: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    fn set(&self, alloc: u32) -> std::ops::Range<usize> {
        // A multiplicative hash: consecutive ids spread over the sets.
        let s = (u64::from(alloc).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % self.sets;
        s * self.ways..(s + 1) * self.ways
    }

    /// Looks `alloc` up; on a miss fills it in (evicting per the policy). Whether it hit.
    pub fn access(&mut self, alloc: u32) -> bool {
        if self.sets == 0 || alloc == 0 {
            return false;
        }
        self.clock += 1;
        let range = self.set(alloc);
        let lines = &mut self.lines[range];
        if let Some(l) = lines.iter_mut().find(|l| l.alloc == alloc) {
            if self.policy == Policy::Lru {
                l.stamp = self.clock;
            }
            return true;
        }
        let victim = match lines.iter().position(|l| l.alloc == 0) {
            Some(i) => i,
            None => match self.policy {
                Policy::Lru | Policy::Fifo => {
                    lines.iter().enumerate().min_by_key(|(_, l)| l.stamp).map_or(0, |(i, _)| i)
                }
                Policy::Random => {
                    // xorshift64
                    self.rng ^= self.rng << 13;
                    self.rng ^= self.rng >> 7;
                    self.rng ^= self.rng << 17;
                    (self.rng % lines.len() as u64) as usize
                }
            },
        };
        lines[victim] = Line { alloc, stamp: self.clock };
        false
    }

    /// Whether `alloc` is held (no change to the buffer).
    pub fn holds(&self, alloc: u32) -> bool {
        self.sets > 0 && alloc != 0 && self.lines[self.set(alloc)].iter().any(|l| l.alloc == alloc)
    }

    /// Drops `alloc` (its allocation was freed); whether it was held.
    pub fn invalidate(&mut self, alloc: u32) -> bool {
        if self.sets == 0 || alloc == 0 {
            return false;
        }
        let range = self.set(alloc);
        match self.lines[range].iter_mut().find(|l| l.alloc == alloc) {
            Some(l) => {
                *l = Line::default();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-worked sequence on a 2-entry fully associative LRU buffer.
    #[test]
    fn lru_keeps_the_two_most_recent() {
        let mut m = Mlb::new(Shape::fully_associative(2));
        let hits: Vec<bool> = [1, 2, 1, 3, 2, 1, 3].iter().map(|&a| m.access(a)).collect();
        // 1 miss, 2 miss, 1 hit, 3 miss (evicts 2), 2 miss (evicts 1), 1 miss (evicts 3), 3 miss.
        assert_eq!(hits, [false, false, true, false, false, false, false]);
    }

    #[test]
    fn fifo_evicts_the_first_filled_even_if_used_since() {
        let mut m = Mlb::new(Shape { entries: 2, ways: 0, policy: Policy::Fifo });
        let hits: Vec<bool> = [1, 2, 1, 3, 1].iter().map(|&a| m.access(a)).collect();
        // 3 evicts 1 (filled first) though 1 was just used; LRU would have evicted 2.
        assert_eq!(hits, [false, false, true, false, false]);
    }

    #[test]
    fn a_freed_allocation_misses_afterwards() {
        let mut m = Mlb::new(Shape::fully_associative(8));
        assert!(!m.access(5));
        assert!(m.access(5));
        assert!(m.invalidate(5));
        assert!(!m.holds(5));
        assert!(!m.access(5));
    }

    #[test]
    fn no_buffer_never_hits_and_sets_bound_what_is_kept() {
        let mut none = Mlb::new(Shape::fully_associative(0));
        assert!(!none.access(1) && !none.access(1));
        // Direct-mapped, 4 sets: at most one allocation per set.
        let mut dm = Mlb::new(Shape { entries: 4, ways: 1, policy: Policy::Lru });
        for a in 1..=64 {
            dm.access(a);
        }
        assert_eq!((1..=64).filter(|&a| dm.holds(a)).count(), 4);
    }
}
