//! Pool blocks in the registry (`crate::pool_blocks` keeps them): registered and freed under
//! the registry's one write lock, named in reports as allocations of kind
//! [`AllocKind::PoolBlock`], and merged into the device table in place of the segments that
//! hold them.
//!
//! The table stays what kernels search (sorted, disjoint, 32 bytes an entry): an allocation
//! that overlaps any block is left out and its blocks stand for it, so its bytes no block
//! covers are in no entry. A block is one entry, 32 bytes, whatever its segment.

use crate::pool_blocks::{Block, BlockFree, PendingFree, PoolSource};

use super::{AllocKind, AllocState, Allocation, DeviceEntry, Inner, InsertError, Registry, SiteId};

/// What the pool says of a block it hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewBlock {
    pub base: u64,
    /// The size asked for, not the pool's rounded one: the rest is out of bounds.
    pub size: u64,
    pub source: PoolSource,
    pub stream: u64,
    pub device: i32,
    pub site: SiteId,
}

/// When kernels see a block's free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Show {
    /// At once (no kernel is checked against the table yet).
    Now,
    /// When [`Registry::publish_block_frees`] says.
    Later,
}

/// Where an address lies among a pool's blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolPlace {
    /// Inside a block (live or freed).
    Block(Allocation),
    /// Inside a segment that holds blocks, in none of them: the pool's slack. The nearest
    /// block below (else above) in the segment.
    Slack { segment: Allocation, nearest: Option<Allocation> },
    /// In no segment holding blocks.
    None,
}

impl Registry {
    /// Registers a block a pool handed out; blocks it overlaps are displaced (the pool reused
    /// their memory). Returns its id.
    pub fn insert_block(&self, new: NewBlock) -> Result<u64, InsertError> {
        if new.base == 0 {
            return Err(InsertError::Null);
        }
        if new.size == 0 {
            return Err(InsertError::Empty);
        }
        new.base.checked_add(new.size).ok_or(InsertError::Wraps)?;
        let mut inner = self.inner.write();
        let id = inner.next_id;
        inner.next_id += 1;
        let block = Block {
            id,
            base: new.base,
            size: new.size,
            source: new.source,
            stream: new.stream,
            device: new.device,
            site: new.site.raw(),
            freed_at: None,
            shown: false,
        };
        inner.blocks.insert(block);
        inner.version += 1;
        self.tell(|o| o.allocated(&inner.block_allocation(&block)));
        Ok(id)
    }

    /// The pool freed the block at `ptr` on `stream`: it stays, freed, until a block is
    /// allocated over it or its segment is freed. Kernels see it freed once the free is shown
    /// ([`Registry::publish_block_frees`]); until then the table shows it live, so a kernel
    /// launched before the free and still running never sees it freed.
    pub fn free_block(&self, ptr: u64, site: SiteId, stream: u64, show: Show) -> BlockFree {
        let mut inner = self.inner.write();
        let outcome = inner.blocks.free(ptr, site.raw(), stream, show == Show::Now);
        if let BlockFree::Freed(b) = outcome {
            self.tell(|o| o.freed(&inner.block_allocation(&b)));
        }
        match (outcome, show) {
            (BlockFree::Freed(_), Show::Now) => inner.version += 1,
            (BlockFree::Freed(_), Show::Later) => self.pending_hint.store(true, std::sync::atomic::Ordering::Relaxed),
            _ => {}
        }
        outcome
    }

    /// Whether some block free may wait to be shown (one relaxed load: asked at every launch).
    pub fn has_pending_block_frees(&self) -> bool {
        self.pending_hint.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The frees not shown yet.
    pub fn pending_block_frees(&self) -> Vec<PendingFree> {
        self.inner.read().blocks.pending().copied().collect()
    }

    /// Shows the pending frees `which` picks to kernels (the table changes); how many.
    pub fn publish_block_frees(&self, which: impl FnMut(&PendingFree) -> bool) -> usize {
        let mut inner = self.inner.write();
        let shown = inner.blocks.publish(which);
        if shown > 0 {
            inner.version += 1;
        }
        let left = inner.blocks.pending().next().is_some();
        self.pending_hint.store(left, std::sync::atomic::Ordering::Relaxed);
        shown
    }

    /// The block with registry id `id`, as an allocation.
    pub fn block(&self, id: u64) -> Option<Allocation> {
        let inner = self.inner.read();
        inner.blocks.by_id(id).map(|b| inner.block_allocation(&b))
    }

    /// The segment (registered allocation) holding `block`'s first byte.
    pub fn segment_of(&self, block: &Allocation) -> Option<Allocation> {
        self.inner.read().containing(block.base)
    }

    /// Where `addr` lies among the pools' blocks.
    pub fn pool_place(&self, addr: u64) -> PoolPlace {
        let inner = self.inner.read();
        if let Some(b) = inner.blocks.containing(addr) {
            return PoolPlace::Block(inner.block_allocation(&b));
        }
        let Some(segment) = inner.containing(addr) else { return PoolPlace::None };
        if !inner.blocks.overlaps(segment.base, segment.end()) {
            return PoolPlace::None;
        }
        let (below, above) = inner.blocks.around(addr);
        let in_segment = |b: &Block| b.base >= segment.base && b.base < segment.end();
        let nearest = below.filter(in_segment).or(above.filter(in_segment)).map(|b| inner.block_allocation(&b));
        PoolPlace::Slack { segment, nearest }
    }

    /// Blocks registered (live and freed) and live ones.
    pub fn block_counts(&self) -> (u64, u64) {
        let inner = self.inner.read();
        (inner.blocks.len() as u64, inner.blocks.live())
    }
}

impl Inner {
    fn block_allocation(&self, b: &Block) -> Allocation {
        Allocation {
            id: b.id,
            base: b.base,
            size: b.size,
            kind: AllocKind::PoolBlock { source: b.source, stream: b.stream },
            device: b.device,
            context: self.containing(b.base).map_or(0, |s| s.context),
            site: SiteId::from_raw(b.site),
            state: match b.freed_at {
                None => AllocState::Live,
                Some(site) => AllocState::Freed { site: SiteId::from_raw(site) },
            },
            // The pool's memory, not the driver's: no padding of gpusan's after it.
            redzone: 0,
        }
    }

    /// A block as kernels see it: a free not shown yet leaves it live. Inside a segment its
    /// own kind; outside every known one `Other` (see [`Inner::merge_blocks`]).
    fn device_entry(&self, b: &Block) -> DeviceEntry {
        let e = DeviceEntry::from(&self.block_allocation(b));
        let state = if b.freed_at.is_some() && b.shown { DeviceEntry::FREED } else { DeviceEntry::LIVE };
        let kind = if self.containing(b.base).is_some() { e.kind_code() } else { AllocKind::Other.code() };
        DeviceEntry { flags: state | u32::from(kind) << DeviceEntry::KIND_SHIFT, ..e }
    }

    /// The device view with blocks: every allocation no block overlaps, and every block,
    /// in address order. A block inside a segment has its own kind (the binary route then
    /// judges the tail past its end up to 256 bytes its overflow, which inside a segment is
    /// right whatever lies there: no other block starts in it); one outside every known
    /// segment is shown as `Other`, whose tail the binary route leaves alone.
    pub(super) fn merge_blocks(&self, out: &mut Vec<DeviceEntry>) {
        let mut blocks = self.blocks.iter().peekable();
        let entry = |b: &Block| self.device_entry(b);
        for a in self.by_base.values() {
            while let Some(b) = blocks.next_if(|b| b.base < a.base) {
                out.push(entry(b));
            }
            if !self.blocks.overlaps(a.base, a.end()) {
                out.push(DeviceEntry::from(a));
            }
        }
        out.extend(blocks.map(entry));
    }
}
