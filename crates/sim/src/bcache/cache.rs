//! A set-associative cache of blocks with LRU replacement: the L1 bounds caches and the L2
//! slices of both designs (the paper's Table II: 4-way, 64-byte blocks).

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Geometry {
    pub bytes: u64,
    pub ways: u32,
    pub block: u64,
}

impl Geometry {
    pub fn sets(&self) -> u64 {
        (self.bytes / self.block / u64::from(self.ways)).max(1)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Way {
    /// Block number + 1 (0: empty).
    tag: u64,
    used: u64,
}

#[derive(Clone, Debug)]
pub struct Cache {
    geometry: Geometry,
    /// `geometry.sets()`, kept: every access needs it.
    sets: u64,
    ways: Vec<Way>,
    clock: u64,
}

impl Cache {
    pub fn new(geometry: Geometry) -> Cache {
        let n = geometry.sets() as usize * geometry.ways as usize;
        Cache { geometry, sets: geometry.sets(), ways: vec![Way::default(); n], clock: 0 }
    }

    /// The block an address lies in.
    pub fn block_of(&self, addr: u64) -> u64 {
        addr / self.geometry.block
    }

    fn set(&mut self, block: u64) -> &mut [Way] {
        let ways = self.geometry.ways as usize;
        let s = (block % self.sets) as usize;
        &mut self.ways[s * ways..(s + 1) * ways]
    }

    /// Whether `block` is held; a hit becomes the most recently used.
    pub fn lookup(&mut self, block: u64) -> bool {
        self.clock += 1;
        let now = self.clock;
        match self.set(block).iter_mut().find(|w| w.tag == block + 1) {
            Some(w) => {
                w.used = now;
                true
            }
            None => false,
        }
    }

    pub fn holds(&self, block: u64) -> bool {
        let ways = self.geometry.ways as usize;
        let s = (block % self.sets) as usize;
        self.ways[s * ways..(s + 1) * ways].iter().any(|w| w.tag == block + 1)
    }

    /// Puts `block` in (most recently used); the block it evicted, if any.
    pub fn insert(&mut self, block: u64) -> Option<u64> {
        self.clock += 1;
        let now = self.clock;
        let set = self.set(block);
        if let Some(w) = set.iter_mut().find(|w| w.tag == block + 1) {
            w.used = now;
            return None;
        }
        let victim = match set.iter().position(|w| w.tag == 0) {
            Some(i) => i,
            None => set.iter().enumerate().min_by_key(|(_, w)| w.used).map_or(0, |(i, _)| i),
        };
        let old = set[victim].tag;
        set[victim] = Way { tag: block + 1, used: now };
        (old != 0).then(|| old - 1)
    }

    /// Drops `block`; whether it was held.
    pub fn invalidate(&mut self, block: u64) -> bool {
        match self.set(block).iter_mut().find(|w| w.tag == block + 1) {
            Some(w) => {
                *w = Way::default();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_set_evicts_its_least_recently_used_block() {
        // 2 sets of 2 ways: blocks 0, 2, 4 share set 0.
        let mut c = Cache::new(Geometry { bytes: 256, ways: 2, block: 64 });
        assert_eq!(c.insert(0), None);
        assert_eq!(c.insert(2), None);
        assert!(c.lookup(0));
        assert_eq!(c.insert(4), Some(2), "2 was used least recently");
        assert!(c.holds(0) && c.holds(4) && !c.holds(2));
        assert!(c.invalidate(4));
        assert!(!c.lookup(4));
        assert_eq!(c.insert(1), None, "another set");
        assert_eq!(c.block_of(130), 2);
    }
}
