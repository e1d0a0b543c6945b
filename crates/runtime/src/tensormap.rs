//! Tensor maps judged where they are made. `cp.async.bulk.tensor` (TMA) reads and writes
//! global memory through a descriptor `cuTensorMapEncode*` built on the host, and no
//! instrumentation sees those accesses: the descriptor is the one place to bound them.
//!
//! Only the tensor the map declares matters, never its tiles: TMA clips a box that runs
//! past `globalDim` (out-of-bound elements read as zeros or NaN, and are not written), so
//! every byte a map can reach lies within its declared extent, [`reach`]. A map whose
//! extent runs past the allocation holding `globalAddress`, or that starts in freed memory,
//! is a finding; one on memory the registry does not know is not judged (the caller counts
//! it), since gpusan cannot know its bounds.

use crate::checks::Mem;
use crate::registry::{Allocation, Lookup, Registry, SiteId};
use crate::report::{Details, ErrorKind, HostDetails, Nearest, Operand, Report, SymbolInfo, TensorShape};

/// The driver's limit on `tensorRank`.
pub const MAX_RANK: usize = 5;

/// A tensor as `cuTensorMapEncodeTiled`, `…Im2col` and `…Im2colWide` take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout<'a> {
    /// `CUtensorMapDataType`.
    pub data_type: u32,
    /// `globalDim`: `tensorRank` entries, innermost first.
    pub dims: &'a [u64],
    /// `globalStrides`: `tensorRank - 1` entries, in bytes.
    pub strides: &'a [u64],
}

/// How elements of a data type lie in memory along dimension 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    /// Whole bytes each.
    Bytes(u64),
    /// Sixteen values packed in `data` bytes, one packet every `every` bytes (the rest of
    /// each `every` is a gap between packets).
    Packed { data: u64, every: u64 },
}

/// `CUtensorMapDataType`'s elements and names (cuda.h, CUDA 13.0).
fn element(data_type: u32) -> Option<(Element, &'static str)> {
    use Element::{Bytes, Packed};
    Some(match data_type {
        0 => (Bytes(1), "uint8"),
        1 => (Bytes(2), "uint16"),
        2 => (Bytes(4), "uint32"),
        3 => (Bytes(4), "int32"),
        4 => (Bytes(8), "uint64"),
        5 => (Bytes(8), "int64"),
        6 => (Bytes(2), "float16"),
        7 => (Bytes(4), "float32"),
        8 => (Bytes(8), "float64"),
        9 => (Bytes(2), "bfloat16"),
        10 => (Bytes(4), "float32_ftz"),
        11 => (Bytes(4), "tfloat32"),
        12 => (Bytes(4), "tfloat32_ftz"),
        // 16 × U4 in 8 bytes, no gaps.
        13 => (Packed { data: 8, every: 8 }, "16u4_align8b"),
        // 16 × U4 in 8 bytes, then an 8-byte gap.
        14 => (Packed { data: 8, every: 16 }, "16u4_align16b"),
        // 16 × U6 in 12 bytes, then a 4-byte gap.
        15 => (Packed { data: 12, every: 16 }, "16u6_align16b"),
        _ => return None,
    })
}

/// The bytes from `globalAddress` that the map can reach: the end of its last element,
/// `dim0 bytes + Σ (dims[i] - 1) × strides[i - 1]`. Interleaved layouts change which
/// dimension is which, not this sum (their strides are in bytes too); the last packet of a
/// packed type counts to the end of its data, not of the gap after it. `None` for a shape
/// the driver refuses (no dimension, more than five, a zero size, strides missing) or a
/// data type this gpusan does not know: such a map is not judged.
pub fn reach(layout: &Layout) -> Option<u64> {
    let (element, _) = element(layout.data_type)?;
    let rank = layout.dims.len();
    if rank == 0 || rank > MAX_RANK || layout.strides.len() + 1 != rank || layout.dims.contains(&0) {
        return None;
    }
    let dim0 = u128::from(layout.dims[0]);
    let inner = match element {
        Element::Bytes(size) => dim0 * u128::from(size),
        Element::Packed { data, every } => {
            let packets = dim0.div_ceil(16);
            // A last packet only partly filled still ends where its values do.
            let last = ((dim0 - (packets - 1) * 16) * u128::from(data)).div_ceil(16);
            (packets - 1) * u128::from(every) + last
        }
    };
    let outer: u128 = layout.dims[1..]
        .iter()
        .zip(layout.strides)
        .map(|(&dim, &stride)| u128::from(dim - 1) * u128::from(stride))
        .sum();
    u64::try_from(inner + outer).ok()
}

/// What became of one tensor map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within one live allocation.
    Inside,
    /// Memory gpusan does not know the bounds of, or a shape it does not know: not judged.
    NotJudged,
    Finding(TensorMapFinding),
}

/// A tensor map that can reach memory its tensor does not own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapFinding {
    pub api: &'static str,
    /// `globalAddress`.
    pub address: u64,
    /// [`reach`].
    pub extent: u64,
    pub alloc: Allocation,
    /// False when the allocation is freed (still in quarantine).
    pub live: bool,
    pub shape: TensorShape,
}

/// Judges a map `api` made at `address` (classified by the caller: memory the driver
/// knows but gpusan never saw allocated is [`Mem::Untracked`]) over `layout`.
pub fn check_tensor_map(registry: &Registry, api: &'static str, address: Mem, layout: &Layout) -> Verdict {
    let (Mem::Device(address), Some(extent)) = (address, reach(layout)) else { return Verdict::NotJudged };
    let finding = |alloc, live| {
        let data_type = element(layout.data_type).map_or("", |(_, name)| name).into();
        let shape = TensorShape { data_type, dims: layout.dims.to_vec(), strides: layout.strides.to_vec() };
        Verdict::Finding(TensorMapFinding { api, address, extent, alloc, live, shape })
    };
    match registry.lookup(address) {
        Lookup::Live { alloc, offset } if u128::from(offset) + u128::from(extent) > u128::from(alloc.size) => {
            finding(alloc, true)
        }
        Lookup::Live { .. } => Verdict::Inside,
        Lookup::Freed { alloc, .. } => finding(alloc, false),
        Lookup::Outside { .. } => Verdict::NotJudged,
    }
}

impl TensorMapFinding {
    pub fn kind(&self) -> ErrorKind {
        if self.live {
            ErrorKind::TensorMapOutOfBounds
        } else {
            ErrorKind::TensorMapUseAfterFree
        }
    }

    /// Bytes the extent runs past the allocation's end (0 for a map on freed memory inside it).
    pub fn past_end(&self) -> u64 {
        (u128::from(self.address) + u128::from(self.extent)).saturating_sub(u128::from(self.alloc.end())) as u64
    }

    /// The report, its stack unsymbolized; `symbol` names the allocation when it is a
    /// module variable, `call_site` is where the map was made.
    pub fn to_report(&self, call_site: SiteId, symbol: Option<String>) -> Report {
        let (api, extent) = (self.api, crate::report::plural(self.extent, "byte"));
        let message = if self.live {
            format!("Out-of-bounds tensor map of {extent} by {api} (globalAddress)")
        } else {
            format!("Use-after-free tensor map of {extent} by {api} (globalAddress)")
        };
        let symbol = symbol.map(|name| SymbolInfo { name, address: self.alloc.base, size: self.alloc.size });
        let details = HostDetails {
            api: api.into(),
            operand: Operand::GlobalAddress,
            address: self.address,
            size: self.extent,
            nearest: Some(Nearest::new(self.address, &self.alloc)),
            symbol,
            tensor: Some(self.shape.clone()),
            call_stack: call_site.into(),
        };
        Report { kind: self.kind(), message, details: Details::Host(details), label: None }
    }
}
