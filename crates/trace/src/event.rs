//! The events of a trace: one flat record for every kind (the fields a kind does not use are
//! zero), so that a chunk decodes into one vector with no allocation per event.

/// What an event records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A warp's memory instruction: `addr` its lowest byte, `size` the bytes from there to
    /// its highest byte's end, `op` what and where, `lanes` its active threads, `alloc` and
    /// `epoch` the allocation it resolved to (0: none known).
    #[default]
    Access = 0,
    /// A metadata lookup (GPUArmor's LOADMETA) where the check pass places one: `addr` the
    /// root pointer, `alloc` what it resolved to (0: none, the instruction returns 0).
    LoadMeta = 1,
    /// A check of an access against the metadata found (MEMCHECK): `addr` the address,
    /// `alloc` the allocation whose metadata it reads.
    MemCheck = 2,
    /// An allocation made: `alloc` its id (never reused in a trace), `addr` its base,
    /// `size` its bytes, `epoch` its tag.
    Alloc = 3,
    /// An allocation freed: `alloc`.
    Free = 4,
    /// A kernel launched: `kernel` its number in the trace (its name and shape are in the
    /// chunk's [`crate::Chunk::kernels`]).
    KernelBegin = 5,
    /// A kernel done: `kernel`.
    KernelEnd = 6,
    /// A warp done: `kernel`, `sm`, `warp`, and `count` the instructions it executed.
    WarpDone = 7,
}

impl Kind {
    pub(crate) fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            0 => Kind::Access,
            1 => Kind::LoadMeta,
            2 => Kind::MemCheck,
            3 => Kind::Alloc,
            4 => Kind::Free,
            5 => Kind::KernelBegin,
            6 => Kind::KernelEnd,
            7 => Kind::WarpDone,
            _ => return None,
        })
    }
}

/// The state space an access reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
    Local,
    /// Generic addresses the trace could not place, and everything else.
    Other,
}

/// Whether an access reads, writes or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Load,
    Store,
    Atomic,
}

/// An access's space, kind and width per thread, in one byte: bits 0-1 the space, 2-3 the
/// kind, 4-7 the width's base-2 logarithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Op(pub u8);

impl Op {
    /// `width` in bytes, a power of two up to 2^15.
    pub fn new(space: Space, access: Access, width: u32) -> Op {
        let s = match space {
            Space::Global => 0,
            Space::Shared => 1,
            Space::Local => 2,
            Space::Other => 3,
        };
        let a = match access {
            Access::Load => 0,
            Access::Store => 1,
            Access::Atomic => 2,
        };
        let w = width.max(1).ilog2().min(15) as u8;
        Op(s | a << 2 | w << 4)
    }

    pub fn space(self) -> Space {
        match self.0 & 3 {
            0 => Space::Global,
            1 => Space::Shared,
            2 => Space::Local,
            _ => Space::Other,
        }
    }

    /// The kind; the reserved value 3 reads as a load.
    pub fn access(self) -> Access {
        match self.0 >> 2 & 3 {
            1 => Access::Store,
            2 => Access::Atomic,
            _ => Access::Load,
        }
    }

    /// Bytes per thread.
    pub fn width(self) -> u32 {
        1 << (self.0 >> 4)
    }
}

/// One event. Fields a kind does not use are zero (see [`Kind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub kind: Kind,
    pub kernel: u32,
    pub sm: u32,
    pub warp: u32,
    pub addr: u64,
    pub size: u64,
    pub op: Op,
    pub lanes: u8,
    pub alloc: u32,
    pub epoch: u32,
    pub count: u64,
}

impl Event {
    pub fn access(kernel: u32, sm: u32, warp: u32, op: Op, addr: u64, size: u64, alloc: u32) -> Event {
        Event { kind: Kind::Access, kernel, sm, warp, op, addr, size, lanes: 32, alloc, ..Event::default() }
    }
    pub fn load_meta(kernel: u32, sm: u32, warp: u32, root: u64, alloc: u32) -> Event {
        Event { kind: Kind::LoadMeta, kernel, sm, warp, addr: root, alloc, ..Event::default() }
    }
    pub fn mem_check(kernel: u32, sm: u32, warp: u32, addr: u64, alloc: u32) -> Event {
        Event { kind: Kind::MemCheck, kernel, sm, warp, addr, alloc, ..Event::default() }
    }
    pub fn alloc(alloc: u32, base: u64, size: u64) -> Event {
        Event { kind: Kind::Alloc, alloc, addr: base, size, ..Event::default() }
    }
    pub fn free(alloc: u32) -> Event {
        Event { kind: Kind::Free, alloc, ..Event::default() }
    }
    pub fn kernel_end(kernel: u32) -> Event {
        Event { kind: Kind::KernelEnd, kernel, ..Event::default() }
    }
    pub fn warp_done(kernel: u32, sm: u32, warp: u32, instructions: u64) -> Event {
        Event { kind: Kind::WarpDone, kernel, sm, warp, count: instructions, ..Event::default() }
    }
}

/// A kernel as launched: what its [`Kind::KernelBegin`] event stands for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelInfo {
    pub kernel: u32,
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
}
