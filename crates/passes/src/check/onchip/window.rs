//! A window: the bounds of one shared or local variable, and the region it lives in. A
//! leaf of `onchip`, which classifies accesses against windows, and of `scope`.

use gpusan_abi::{record, CODE_LOCAL_OUT_OF_BOUNDS, CODE_SHARED_OUT_OF_BOUNDS};
use gpusan_ptx::ast::{Linkage, StateSpace, VarDecl};
use gpusan_ptx::semantics::{type_width, Space};

/// The on-chip memory a window lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(in crate::check) enum Region {
    Shared,
    Local,
}

impl Region {
    pub(super) fn of_space(s: Space) -> Option<Region> {
        match s {
            Space::Shared | Space::SharedCta => Some(Region::Shared),
            Space::Local => Some(Region::Local),
            _ => None,
        }
    }

    /// The `cvta` spelling of the region.
    pub(super) fn name(self) -> &'static str {
        match self {
            Region::Shared => "shared",
            Region::Local => "local",
        }
    }

    pub(in crate::check) fn code(self) -> u32 {
        match self {
            Region::Shared => CODE_SHARED_OUT_OF_BOUNDS,
            Region::Local => CODE_LOCAL_OUT_OF_BOUNDS,
        }
    }

    /// A record's [`record::SPACE`] for an access made in the window's own space.
    pub(in crate::check) fn record_space(self) -> u32 {
        match self {
            Region::Shared => record::SPACE_SHARED,
            Region::Local => record::SPACE_LOCAL,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Extent {
    Bytes(u64),
    /// `%dynamic_smem_size` bytes.
    Dynamic,
}

/// One variable's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::check) struct Window {
    pub(in crate::check) region: Region,
    pub(super) extent: Extent,
}

impl Window {
    /// The window a declaration makes; `None` for other spaces and sizes not known.
    pub(super) fn of(d: &VarDecl) -> Option<Window> {
        let region = match d.space {
            StateSpace::Shared | StateSpace::SharedCta => Region::Shared,
            StateSpace::Local => Region::Local,
            _ => return None,
        };
        let mut bytes = u64::from(type_width(&d.ty)?) * u64::from(d.vector.unwrap_or(1));
        let mut unsized_dim = false;
        for dim in &d.array {
            match dim {
                Some(n) => bytes = bytes.checked_mul(*n)?,
                None => unsized_dim = true,
            }
        }
        let extent = if !unsized_dim {
            Extent::Bytes(bytes)
        } else if region == Region::Shared && d.linkage.contains(&Linkage::Extern) {
            Extent::Dynamic
        } else {
            return None;
        };
        Some(Window { region, extent })
    }
}
