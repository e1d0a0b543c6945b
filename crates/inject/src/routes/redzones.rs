//! Red zones: bytes asked of the driver after a device allocation and registered nowhere,
//! so that no other allocation can start right after its end. The binary route judges an
//! access by its address alone (machine code shows no pointer's provenance): without them,
//! an overflow that reaches a live neighbour is a valid access to the neighbour. With
//! them, the patch's tail rule (`gpusan_abi::binary`) covers the entry's red zone, recorded
//! in its table entry's flags (`gpusan_abi::table::REDZONE_SHIFT`).
//!
//! When: in `--mode check` on a route that patches machine code (`auto`, `binary`) with the
//! Compute Sanitizer API started, from the first allocation on, whatever modules are loaded
//! yet. Which kernels will be patched is not known when memory is allocated (PyTorch loads
//! its cubins lazily, at the first launch of each kernel, after its allocations), and an
//! allocation made before the first patched module would otherwise stay without one for
//! good. A run whose kernels all take the PTX route pays the padding for nothing; the PTX
//! route needs none (it follows each pointer to its allocation), so `--route ptx` pads
//! nothing.
//!
//! How much ([`policy`]): `--redzone BYTES` (default 256) in whole 256-byte units, except
//! where it would cost the allocation another 2 MiB page of the driver's for less than 8 times
//! that page in the allocation: the driver maps large allocations in 2 MiB pages, so a red
//! zone after PyTorch's 2 MiB segments or a 2 MiB cuBLAS workspace would double their
//! memory. Those keep the 256-byte alignment tail only. A red zone applies to device,
//! pitched (whole extra rows), stream-ordered, pool and managed allocations; not to host
//! memory, VMM mappings (the program places those), nor allocations under stream capture
//! (graph memory, registered again at each launch of its graph).
//!
//! Memory: an allocation that fails padded is made again without the red zone (before the
//! quarantine is given back: a red zone protects one allocation, the quarantine all freed
//! ones), so a red zone never makes a program fail that would not. `cuMemGetInfo` reports
//! the red zones held (live and quarantined allocations of the device) as free, as the
//! program would see them without gpusan.

use gpusan_abi::table::{REDZONE_MAX_UNITS, REDZONE_UNIT};

use crate::state::state;

/// The page the driver maps large device allocations in.
const DRIVER_PAGE: u64 = 2 << 20;
/// What `cuMemAlloc` rounds a request up to (measured on the H100: 20,000 allocations of
/// 16 KiB padded by 32 bytes took 490 bytes more each).
const DRIVER_GRANULE: u64 = 512;
/// A red zone may cost an allocation a page of the driver's only when it holds at least
/// this many such pages already.
const PAGES_PER_EXTRA_PAGE: u64 = 8;

/// The red zone to ask for after an allocation of `size` bytes, in this run: 0 where none
/// applies (see the module's comment). In canary mode, whatever the route: the padding
/// holds the allocation's tail canary (`routes::canary`), exact bytes, no whole units (no
/// table records it).
pub fn for_request(size: u64) -> u64 {
    let redzone = state().options.redzone;
    if super::canary::active() {
        return canary_policy(size, redzone);
    }
    if redzone == 0 || !super::binary::started() {
        return 0;
    }
    policy(size, redzone)
}

/// Canary mode's padding after `size` bytes when the run asks for `pad` (0: none): the
/// canary fills the driver's rounding up to where the next allocation may start, so its
/// last bytes are what an underflow of that allocation meets (the scan checks both edges,
/// `gpusan_abi::canary::EDGE_BYTES`). Where the rounding of `size` leaves at least a word,
/// that slack is the canary, and the allocation costs no device memory more than natively;
/// otherwise `pad` (whole words) is asked for and the canary fills the granule it lands in.
/// None for an empty request, nor where it costs a driver page the allocation cannot carry
/// (as [`policy`]).
pub fn canary_policy(size: u64, pad: u64) -> u64 {
    let pad = pad.next_multiple_of(8).min(u64::from(REDZONE_MAX_UNITS) * REDZONE_UNIT);
    if size == 0 || pad == 0 {
        return 0;
    }
    let slack = size.next_multiple_of(DRIVER_GRANULE) - size;
    if slack >= 8 {
        return slack;
    }
    let Some(padded) = size.checked_add(pad) else { return 0 };
    let fill = padded.next_multiple_of(DRIVER_GRANULE) - size;
    let extra_pages = (size + fill).div_ceil(DRIVER_PAGE) - size.div_ceil(DRIVER_PAGE);
    if extra_pages > 0 && size < extra_pages * DRIVER_PAGE * PAGES_PER_EXTRA_PAGE {
        return 0;
    }
    fill
}

/// The red zone an allocation of `size` bytes gets when the run asks for `redzone` bytes:
/// whole units (the table records whole units, and every byte asked for is recorded),
/// capped at what an entry records; none for an empty request (which must fail as it
/// would), and none where it costs another driver page that the allocation is not large
/// enough to carry.
pub fn policy(size: u64, redzone: u64) -> u64 {
    if size == 0 || redzone == 0 {
        return 0;
    }
    let redzone = redzone.div_ceil(REDZONE_UNIT).min(u64::from(REDZONE_MAX_UNITS)) * REDZONE_UNIT;
    let Some(padded) = size.checked_add(redzone) else { return 0 };
    let extra_pages = padded.div_ceil(DRIVER_PAGE) - size.div_ceil(DRIVER_PAGE);
    if extra_pages > 0 && size < extra_pages * DRIVER_PAGE * PAGES_PER_EXTRA_PAGE {
        return 0;
    }
    redzone
}

/// Whole rows of `width` bytes that hold a red zone of `redzone` bytes after a pitched
/// allocation (the pitch is at least the width; the rows' count is what the driver takes).
pub fn pitched_rows(width: u64, redzone: u64) -> u64 {
    if width == 0 || redzone == 0 {
        return 0;
    }
    redzone.div_ceil(width)
}

/// Device memory red zones hold on `device`, after its live allocations and those in
/// quarantine: what the driver's rounding of each padded size takes beyond that of the size
/// asked (a red zone inside the rounding the program pays natively costs nothing).
pub fn held(device: i32) -> u64 {
    if state().options.redzone == 0 || !(super::binary::wanted() || super::canary::active()) {
        return 0;
    }
    let costs = |a: &gpusan_runtime::registry::Allocation| {
        (a.size + a.redzone).next_multiple_of(DRIVER_GRANULE) - a.size.next_multiple_of(DRIVER_GRANULE)
    };
    state().registry.snapshot().iter().filter(|a| a.device == device).map(costs).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn small_allocations_get_the_red_zone_in_whole_units() {
        assert_eq!(policy(1000, 256), 256);
        assert_eq!(policy(1000, 100), 256, "rounded up: never less than asked");
        assert_eq!(policy(1, 1000), 1024);
        assert_eq!(policy(MIB, 256), 256, "stays inside the allocation's last page");
    }

    #[test]
    fn none_for_an_empty_request_or_when_disabled() {
        assert_eq!(policy(0, 256), 0, "a 0-byte request must fail as it would");
        assert_eq!(policy(1000, 0), 0);
        assert_eq!(policy(u64::MAX - 10, 256), 0, "no wrap");
    }

    #[test]
    fn a_page_sized_allocation_gets_none_unless_the_page_is_small_beside_it() {
        // PyTorch's 2 MiB segments, a 2 MiB workspace: another 2 MiB page each.
        assert_eq!(policy(2 * MIB, 256), 0);
        assert_eq!(policy(2 * MIB - 100, 256), 0);
        assert_eq!(policy(14 * MIB, 256), 0);
        // 16 MiB and more: a page is an eighth at most.
        assert_eq!(policy(16 * MIB, 256), 256);
        assert_eq!(policy(20 * MIB, 4096), 4096);
        // Where the last page has room, it costs nothing.
        assert_eq!(policy(3 * MIB, 256), 256);
    }

    #[test]
    fn the_red_zone_is_capped_at_what_an_entry_records() {
        let cap = u64::from(REDZONE_MAX_UNITS) * REDZONE_UNIT;
        assert_eq!(policy(1 << 40, u64::MAX / 2), cap);
    }

    #[test]
    fn canary_padding_never_costs_a_page_a_small_allocation_cannot_carry() {
        assert_eq!(canary_policy(1024, 32), 512);
        assert_eq!(canary_policy(0, 32), 0);
        assert_eq!(canary_policy(1000, 0), 0, "none asked: none");
        assert_eq!(canary_policy(2 * MIB, 32), 0, "PyTorch's segments keep their size");
        assert_eq!(canary_policy(16 * MIB, 32), 512);
    }

    #[test]
    fn a_canary_fills_the_drivers_rounding_and_costs_a_granule_only_where_none_is_left() {
        assert_eq!(canary_policy(1000, 32), 24, "the 24 bytes of slack up to 1024");
        assert_eq!(canary_policy(4000, 32), 96, "all 96 bytes of slack");
        assert_eq!(canary_policy(1001, 32), 23, "to the byte: the next allocation starts at 1024");
        assert_eq!(canary_policy(1017, 32), 519, "7 bytes of slack: a granule more, filled");
        assert_eq!(canary_policy(16 * 1024, 32), 512, "no slack: a granule more, filled");
        for size in [1u64, 7, 100, 500, 511, 513, 4000, 100_003] {
            let pad = canary_policy(size, 32);
            assert!(pad >= 8 && (size + pad).is_multiple_of(DRIVER_GRANULE), "{size}: {pad}");
            let fits = size.next_multiple_of(DRIVER_GRANULE) - size >= 8;
            assert_eq!(
                (size + pad).next_multiple_of(DRIVER_GRANULE) == size.next_multiple_of(DRIVER_GRANULE),
                fits,
                "{size}"
            );
        }
    }

    #[test]
    fn pitched_rows_hold_the_red_zone() {
        assert_eq!(pitched_rows(1000, 256), 1);
        assert_eq!(pitched_rows(100, 256), 3);
        assert_eq!(pitched_rows(0, 256), 0);
        assert_eq!(pitched_rows(100, 0), 0);
    }
}
