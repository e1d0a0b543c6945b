//! A tenant's memory partition for `--mode fence` (issue 18, `docs/fence-design.md` §2): the
//! bookkeeping, without the driver. The manager reserves `2^k` bytes of virtual address
//! space aligned to `2^k` (the fence's mask needs both), keeps every byte of it mapped (a
//! fenced access may land anywhere in it, and an unmapped one is a context-fatal fault):
//! chunks of [`CHUNK`] bytes of real memory where the tenant has allocations, the tenant's
//! sink everywhere else. This type decides where allocations go and which chunks must turn
//! from sink to real memory (or back); the manager makes the driver calls it returns.
//!
//! Allocations are rounded to [`GRANULE`] bytes, as the driver rounds `cuMemAlloc`, and
//! placed first fit, so a partition's chunks stay few and low.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

/// Bytes of one physical chunk (the driver's VMM granularity on the H100).
pub const CHUNK: u64 = 2 << 20;
/// Bytes an allocation is rounded to.
pub const GRANULE: u64 = 512;

/// Why a partition cannot be made or an allocation placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionError {
    /// The partition's size is not a power of two of at least one chunk, or its base is not
    /// aligned to it.
    Shape { base: u64, log2: u32 },
    /// No free range of this many bytes: the tenant's limit.
    Full { bytes: u64 },
    /// An allocation of 0 bytes, or one past the partition's size.
    Size { bytes: u64 },
    /// A free of an address that is no live allocation's base.
    NotLive { address: u64 },
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::Shape { base, log2 } => write!(
                f,
                "a partition of 2^{log2} bytes at {base:#x}: it must be a power of two of at least {CHUNK} bytes, \
                 aligned to its size"
            ),
            PartitionError::Full { bytes } => write!(f, "no free range of {bytes} bytes left in the partition"),
            PartitionError::Size { bytes } => write!(f, "an allocation of {bytes} bytes cannot be placed"),
            PartitionError::NotLive { address } => write!(f, "{address:#x} is not the base of a live allocation"),
        }
    }
}

impl std::error::Error for PartitionError {}

/// One tenant's partition.
#[derive(Debug, Clone)]
pub struct Partition {
    base: u64,
    log2: u32,
    /// Free ranges, offset → length (coalesced: no two touch).
    free: BTreeMap<u64, u64>,
    /// Live allocations, offset → rounded length.
    live: BTreeMap<u64, u64>,
    /// Live allocations overlapping each chunk (index: offset / CHUNK); 0 means the sink.
    users: Vec<u32>,
}

impl Partition {
    /// The partition of `2^log2` bytes at `base`, all of it sink.
    pub fn new(base: u64, log2: u32) -> Result<Partition, PartitionError> {
        let shape = PartitionError::Shape { base, log2 };
        if !(CHUNK.trailing_zeros()..64).contains(&log2) {
            return Err(shape);
        }
        let size = 1u64 << log2;
        if base & (size - 1) != 0 || base.checked_add(size).is_none() {
            return Err(shape);
        }
        let chunks = (size / CHUNK) as usize;
        Ok(Partition { base, log2, free: BTreeMap::from([(0, size)]), live: BTreeMap::new(), users: vec![0; chunks] })
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> u64 {
        1 << self.log2
    }

    /// The fence's mask: the offset bits within the partition.
    pub fn mask(&self) -> u64 {
        self.size() - 1
    }

    /// Places an allocation of `bytes`; returns its address and the chunks (address ranges)
    /// that must now be real memory instead of the sink.
    pub fn alloc(&mut self, bytes: u64) -> Result<(u64, Vec<Range<u64>>), PartitionError> {
        if bytes == 0 || bytes > self.size() {
            return Err(PartitionError::Size { bytes });
        }
        let len = bytes.next_multiple_of(GRANULE);
        let (&at, &free_len) = self.free.iter().find(|(_, &l)| l >= len).ok_or(PartitionError::Full { bytes })?;
        self.free.remove(&at);
        if free_len > len {
            self.free.insert(at + len, free_len - len);
        }
        self.live.insert(at, len);
        let mut real = Vec::new();
        for c in self.chunks_of(at, len) {
            if self.users[c] == 0 {
                real.push(self.chunk_range(c));
            }
            self.users[c] += 1;
        }
        Ok((self.base + at, merge(real)))
    }

    /// Frees the allocation at `address`; returns its rounded size and the chunks that go
    /// back to the sink (no live allocation left in them).
    pub fn free(&mut self, address: u64) -> Result<(u64, Vec<Range<u64>>), PartitionError> {
        let not_live = PartitionError::NotLive { address };
        let at = address.checked_sub(self.base).ok_or(not_live.clone())?;
        let len = self.live.remove(&at).ok_or(not_live)?;
        let mut sink = Vec::new();
        for c in self.chunks_of(at, len) {
            self.users[c] -= 1;
            if self.users[c] == 0 {
                sink.push(self.chunk_range(c));
            }
        }
        // Coalesced with the free ranges on either side.
        let (mut start, mut end) = (at, at + len);
        if let Some((&before, &l)) = self.free.range(..at).next_back() {
            if before + l == at {
                start = before;
                self.free.remove(&before);
            }
        }
        if let Some(l) = self.free.remove(&end) {
            end += l;
        }
        self.free.insert(start, end - start);
        Ok((len, merge(sink)))
    }

    /// Whether `[address, address + bytes)` lies inside the partition (a copy's bound).
    pub fn contains(&self, address: u64, bytes: u64) -> bool {
        address >= self.base && address.checked_add(bytes).is_some_and(|end| end <= self.base + self.size())
    }

    /// Whether `[address, address + bytes)` lies inside one live allocation (its rounded
    /// size): what a host copy of the tenant's may touch.
    pub fn in_live(&self, address: u64, bytes: u64) -> bool {
        let Some(at) = address.checked_sub(self.base) else { return false };
        match self.live.range(..=at).next_back() {
            Some((&start, &len)) => at.checked_add(bytes).is_some_and(|end| end <= start + len),
            None => false,
        }
    }

    /// Bytes of live allocations (rounded).
    pub fn used(&self) -> u64 {
        self.live.values().sum()
    }

    /// Chunks of real memory now (the rest is sink).
    pub fn real_chunks(&self) -> usize {
        self.users.iter().filter(|&&u| u > 0).count()
    }

    fn chunks_of(&self, at: u64, len: u64) -> Range<usize> {
        (at / CHUNK) as usize..(at + len).div_ceil(CHUNK) as usize
    }

    fn chunk_range(&self, c: usize) -> Range<u64> {
        let start = self.base + c as u64 * CHUNK;
        start..start + CHUNK
    }
}

/// Adjacent ranges joined (the manager maps or unmaps each range with one call).
fn merge(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x7f00_0000_0000;

    #[test]
    fn a_partition_must_be_a_power_of_two_chunks_aligned_to_its_size() {
        assert!(Partition::new(BASE, 30).is_ok());
        assert!(matches!(Partition::new(BASE + CHUNK, 30), Err(PartitionError::Shape { .. })));
        assert!(matches!(Partition::new(BASE, 20), Err(PartitionError::Shape { .. })), "under one chunk");
        let p = Partition::new(BASE, 30).unwrap();
        assert_eq!(p.mask(), (1 << 30) - 1);
        assert_eq!(p.real_chunks(), 0);
    }

    #[test]
    fn allocations_are_rounded_placed_first_fit_and_make_their_chunks_real() {
        let mut p = Partition::new(BASE, 30).unwrap();
        let (a, real) = p.alloc(1000).unwrap();
        assert_eq!(a, BASE);
        assert_eq!(real, vec![BASE..BASE + CHUNK]);
        let (b, real) = p.alloc(3 * CHUNK).unwrap();
        assert_eq!(b, BASE + 1024, "after the first, rounded to 512");
        assert_eq!(real, vec![BASE + CHUNK..BASE + 4 * CHUNK], "the chunks it newly covers, merged");
        assert_eq!(p.real_chunks(), 4);
        assert!(p.in_live(a + 1000, 24), "the rounding is the allocation's");
        assert!(!p.in_live(a + 1000, 25));
        assert!(p.contains(BASE + (1 << 30) - 8, 8));
        assert!(!p.contains(BASE + (1 << 30) - 8, 9));
    }

    #[test]
    fn a_free_coalesces_and_gives_chunks_without_allocations_back_to_the_sink() {
        let mut p = Partition::new(BASE, 30).unwrap();
        let (a, _) = p.alloc(512).unwrap();
        let (b, _) = p.alloc(CHUNK).unwrap();
        let (c, _) = p.alloc(512).unwrap();
        // b spans chunks 0 and 1; chunk 0 still has a, chunk 1 still has c.
        assert_eq!(p.free(b).unwrap(), (CHUNK, vec![]));
        let (size, sink) = p.free(c).unwrap();
        assert_eq!(size, 512);
        assert_eq!(sink, vec![BASE + CHUNK..BASE + 2 * CHUNK]);
        assert_eq!(p.free(a).unwrap().1, vec![BASE..BASE + CHUNK]);
        assert_eq!(p.real_chunks(), 0);
        // All free again, in one range: the whole partition fits once more.
        assert_eq!(p.alloc(1 << 30).unwrap().0, BASE);
    }

    #[test]
    fn a_full_partition_and_a_bad_free_are_errors() {
        let mut p = Partition::new(BASE, 21).unwrap();
        p.alloc(CHUNK).unwrap();
        assert_eq!(p.alloc(1), Err(PartitionError::Full { bytes: 1 }));
        assert_eq!(p.alloc(0), Err(PartitionError::Size { bytes: 0 }));
        assert_eq!(p.free(BASE + 512), Err(PartitionError::NotLive { address: BASE + 512 }));
        assert_eq!(p.free(1), Err(PartitionError::NotLive { address: 1 }));
    }

    proptest::proptest! {
        /// Whatever the sequence: allocations never overlap, stay inside the partition, and
        /// every chunk they touch is real; a chunk is real only while an allocation is in it.
        #[test]
        fn allocations_stay_apart_inside_and_backed(ops in proptest::collection::vec((0u8..3, 1u64..(3 * CHUNK)), 1..60)) {
            let mut p = Partition::new(BASE, 24).unwrap();
            let mut live: Vec<(u64, u64)> = Vec::new();
            let mut real = std::collections::BTreeSet::new();
            for (op, n) in ops {
                if op < 2 || live.is_empty() {
                    if let Ok((a, became)) = p.alloc(n) {
                        for r in became { for c in (r.start..r.end).step_by(CHUNK as usize) { proptest::prop_assert!(real.insert(c)); } }
                        live.push((a, n.next_multiple_of(GRANULE)));
                    }
                } else {
                    let (a, len) = live.remove(n as usize % live.len());
                    let (size, back) = p.free(a).unwrap();
                    proptest::prop_assert_eq!(size, len);
                    for r in back { for c in (r.start..r.end).step_by(CHUNK as usize) { proptest::prop_assert!(real.remove(&c)); } }
                }
                for (i, &(a, len)) in live.iter().enumerate() {
                    proptest::prop_assert!(p.contains(a, len));
                    for &(b, l) in &live[i + 1..] {
                        proptest::prop_assert!(a + len <= b || b + l <= a, "overlap");
                    }
                    let mut c = a - a % CHUNK;
                    while c < a + len {
                        proptest::prop_assert!(real.contains(&c), "an allocation on the sink");
                        c += CHUNK;
                    }
                }
                proptest::prop_assert_eq!(real.len(), p.real_chunks());
            }
        }
    }
}
