//! Blocks that pool allocators hand out inside their segments (a tensor of PyTorch's
//! caching allocator, an array of CuPy's memory pool, a region an allocator describes
//! through the NVTX memory API): each a range of the exact size asked for, nested inside the
//! allocation (segment) the driver gave the pool.
//!
//! The registry keeps them beside its allocations (`registry::Registry::insert_block`) and
//! the device table shows a segment that holds blocks as its blocks alone: the bytes of the
//! segment no block covers (the pool's rounding slack, memory not handed out yet) are in no
//! entry, so an access there through a block's pointer is out of bounds of that block,
//! with no change to the search kernels run.
//!
//! Blocks are disjoint among themselves: a new block displaces every block it overlaps (the
//! pool handed that memory out again). A freed block stays, freed, until then, so a use of
//! it is a use after free; a freed segment drops the blocks inside it.
//!
//! This module knows nothing of the registry's types (it is a leaf the registry builds on);
//! call sites are kept as the registry's raw site numbers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which allocator described the block (the C ABI's `source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PoolSource {
    /// PyTorch's CUDA caching allocator.
    Torch,
    /// CuPy's `MemoryPool`.
    CupyPool,
    /// CuPy's `PinnedMemoryPool`.
    CupyPinned,
    /// A region registered through the NVTX memory API (RMM and others).
    Nvtx,
    /// Any other pool.
    Other,
}

/// The bytes a pool was asked for beyond a block's size (`GPUSAN_POOL_PADDED`, the upper half
/// of the C ABI's `source`).
pub fn padding_of(code: u32) -> u64 {
    u64::from(code >> 16)
}

impl PoolSource {
    /// The C ABI's number (`gpusan_pools.h`); unknown numbers are [`PoolSource::Other`].
    pub fn from_code(code: u32) -> PoolSource {
        // The upper half is the padding the pool was asked for ([`padding_of`]).
        match code & 0xffff {
            1 => PoolSource::Torch,
            2 => PoolSource::CupyPool,
            3 => PoolSource::CupyPinned,
            4 => PoolSource::Nvtx,
            _ => PoolSource::Other,
        }
    }

    pub fn code(self) -> u32 {
        match self {
            PoolSource::Torch => 1,
            PoolSource::CupyPool => 2,
            PoolSource::CupyPinned => 3,
            PoolSource::Nvtx => 4,
            PoolSource::Other => 5,
        }
    }

    /// How reports name the allocator ("torch caching allocator").
    pub fn describe(self) -> &'static str {
        match self {
            PoolSource::Torch => "torch caching allocator",
            PoolSource::CupyPool => "cupy memory pool",
            PoolSource::CupyPinned => "cupy pinned memory pool",
            PoolSource::Nvtx => "NVTX memory region",
            PoolSource::Other => "pool allocator",
        }
    }
}

/// One block, live or freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// The registry's allocation id: unique with the allocations' own.
    pub id: u64,
    pub base: u64,
    pub size: u64,
    pub source: PoolSource,
    /// The stream the pool handed it out on (0: the legacy default stream or unknown).
    pub stream: u64,
    pub device: i32,
    /// Raw `SiteId` of the allocation and, once freed, of the free.
    pub site: u32,
    pub freed_at: Option<u32>,
    /// The free is shown to kernels (the device table shows the block freed). A free is
    /// shown only once no kernel launched before it can still be running on its stream:
    /// until then the table shows the block live (see `Blocks::publish`).
    pub shown: bool,
}

impl Block {
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.size)
    }

    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }
}

/// What freeing a block found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockFree {
    /// Now freed (the block as it is now).
    Freed(Block),
    /// Already freed.
    Again(Block),
    /// No block starts at the pointer.
    Unknown,
}

/// A free not shown to kernels yet: its block's id and base, the stream it was freed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingFree {
    pub id: u64,
    pub base: u64,
    pub stream: u64,
    pub device: i32,
}

/// The blocks of every pool, by base.
#[derive(Clone, Debug, Default)]
pub struct Blocks {
    by_base: BTreeMap<u64, Block>,
    live: u64,
    /// Frees not shown yet, in free order.
    pending: Vec<PendingFree>,
}

impl Blocks {
    /// Adds `block`, displacing every block it overlaps; how many it displaced.
    pub fn insert(&mut self, block: Block) -> usize {
        // A pool's churn hands a block out where one was before: one search then. Blocks
        // are disjoint, so when the last block starting below the new one's end starts at
        // its base, it is the only one the new block overlaps.
        if let Some((&base, old)) = self.by_base.range_mut(..block.end()).next_back() {
            if base == block.base {
                let old = std::mem::replace(old, block);
                if old.freed_at.is_some() {
                    self.live += 1;
                }
                return 1;
            }
        }
        let displaced = self.remove_range(block.base, block.end()).len();
        self.by_base.insert(block.base, block);
        self.live += 1;
        displaced
    }

    /// Marks the block based at `base` freed at `site` on `stream`; shown to kernels at once
    /// when `shown`, else once [`Blocks::publish`] says.
    pub fn free(&mut self, base: u64, site: u32, stream: u64, shown: bool) -> BlockFree {
        let Some(block) = self.by_base.get_mut(&base) else { return BlockFree::Unknown };
        if block.freed_at.is_some() {
            return BlockFree::Again(*block);
        }
        block.freed_at = Some(site);
        block.shown = shown;
        self.live -= 1;
        let freed = *block;
        if !shown {
            self.pending.push(PendingFree { id: freed.id, base, stream, device: freed.device });
        }
        BlockFree::Freed(freed)
    }

    /// Frees not shown yet (those of blocks since displaced or dropped are left out).
    pub fn pending(&self) -> impl Iterator<Item = &PendingFree> {
        self.pending.iter().filter(|p| self.by_base.get(&p.base).is_some_and(|b| b.id == p.id && !b.shown))
    }

    /// Shows the pending frees `which` picks; returns how many were shown.
    pub fn publish(&mut self, mut which: impl FnMut(&PendingFree) -> bool) -> usize {
        let mut shown = 0;
        let by_base = &mut self.by_base;
        self.pending.retain(|p| {
            let Some(b) = by_base.get_mut(&p.base).filter(|b| b.id == p.id && !b.shown) else { return false };
            if !which(p) {
                return true;
            }
            b.shown = true;
            shown += 1;
            false
        });
        shown
    }

    /// Removes every block overlapping `[base, end)` and returns them.
    pub fn remove_range(&mut self, base: u64, end: u64) -> Vec<Block> {
        let mut gone = Vec::new();
        // Blocks are disjoint: those overlapping are the last few starting below `end`.
        while let Some(b) = self.by_base.range(..end).next_back().map(|(_, b)| *b) {
            if b.end() <= base {
                break;
            }
            self.by_base.remove(&b.base);
            if b.freed_at.is_none() {
                self.live -= 1;
            }
            gone.push(b);
        }
        gone.reverse();
        gone
    }

    /// The block holding `addr`.
    pub fn containing(&self, addr: u64) -> Option<Block> {
        self.by_base.range(..=addr).next_back().map(|(_, b)| *b).filter(|b| b.contains(addr))
    }

    /// The last block starting at or below `addr`, and the first above it.
    pub fn around(&self, addr: u64) -> (Option<Block>, Option<Block>) {
        let below = self.by_base.range(..=addr).next_back().map(|(_, b)| *b);
        let above = self.by_base.range(addr.saturating_add(1)..).next().map(|(_, b)| *b);
        (below, above)
    }

    /// Whether some block overlaps `[base, end)`.
    pub fn overlaps(&self, base: u64, end: u64) -> bool {
        self.by_base.range(..end).next_back().is_some_and(|(_, b)| b.end() > base)
    }

    pub fn by_id(&self, id: u64) -> Option<Block> {
        self.by_base.values().find(|b| b.id == id).copied()
    }

    /// Every block, by base.
    pub fn iter(&self) -> impl Iterator<Item = &Block> {
        self.by_base.values()
    }

    pub fn len(&self) -> usize {
        self.by_base.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_base.is_empty()
    }

    /// Blocks not freed.
    pub fn live(&self) -> u64 {
        self.live
    }
}

/// What one device table held: its entries, and what they stand for. A pool block is one
/// entry and the segment holding it loses its own (`registry::blocks`), so
/// `entries - allocations` is what the blocks added to the table: at most one 32-byte entry
/// each ([`TableShape::bytes_per_block`]; the report's `device_table_bytes_per_pool_block`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableShape {
    pub entries: u64,
    /// Registered allocations (segments included): the entries the table would hold
    /// without blocks.
    pub allocations: u64,
    /// Pool blocks, live and freed.
    pub blocks: u64,
}

impl TableShape {
    /// Device bytes the blocks added to the table (0 when they took fewer entries than
    /// the segments they replaced).
    pub fn block_bytes(&self) -> u64 {
        self.entries.saturating_sub(self.allocations) * gpusan_abi::table::ENTRY_BYTES
    }

    /// [`TableShape::block_bytes`] per block, rounded up; `None` without blocks.
    pub fn bytes_per_block(&self) -> Option<u64> {
        (self.blocks > 0).then(|| self.block_bytes().div_ceil(self.blocks))
    }
}
