//! Host API checks, one test per API shape, each at the exact byte where it starts to fail.

use gpusan_runtime::checks::*;
use gpusan_runtime::registry::*;
use gpusan_runtime::report::{Details, ErrorKind, Operand, Position};

const A: u64 = 0x7f00_0000_0000;
const B: u64 = 0x7f00_0000_1000;
const HOST: u64 = 0x5555_0000_0000;

fn registry(allocs: &[(u64, u64, AllocKind)]) -> Registry {
    let r = Registry::default();
    for &(base, size, kind) in allocs {
        r.insert(NewAlloc { base, size, kind, device: 0, context: 1, site: SiteId::from_raw(1) }).unwrap();
    }
    r
}

/// A 1 KiB device allocation at `A`, another right after it at `B`.
fn two() -> Registry {
    registry(&[(A, 1024, AllocKind::Device), (A + 1024, 1024, AllocKind::Device), (B, 1024, AllocKind::Device)])
}

/// (kind, operand, past_end or 0) of each finding, for compact expectations.
fn summary(findings: &[Finding]) -> Vec<(ErrorKind, Operand, u64)> {
    findings
        .iter()
        .map(|f| {
            let n = match f.problem {
                Problem::OutOfBounds { past_end, .. } | Problem::SymbolOutOfBounds { past_end, .. } => past_end,
                _ => 0,
            };
            (f.kind(), f.operand, n)
        })
        .collect()
}

fn copy(r: &Registry, dst: Mem, src: Mem, count: u64) -> Vec<(ErrorKind, Operand, u64)> {
    summary(&check_call(r, "cudaMemcpy", &Call::Copy { dst, src, count }))
}

use ErrorKind::*;
use Operand::*;

#[test]
fn linear_copy_in_bounds_and_one_byte_over() {
    let r = registry(&[(A, 1024, AllocKind::Device), (B, 4096, AllocKind::Device)]);
    type Expected = &'static [(ErrorKind, Operand, u64)];
    let cases: &[(Mem, Mem, u64, Expected)] = &[
        (Mem::Device(A), Mem::Host(HOST), 1024, &[]),
        (Mem::Device(A), Mem::Host(HOST), 1025, &[(MemcpyOutOfBounds, Dst, 1)]),
        (Mem::Device(A + 1000), Mem::Host(HOST), 24, &[]),
        (Mem::Device(A + 1000), Mem::Host(HOST), 25, &[(MemcpyOutOfBounds, Dst, 1)]),
        (Mem::Host(HOST), Mem::Device(A), 1025, &[(MemcpyOutOfBounds, Src, 1)]),
        (Mem::Device(B), Mem::Device(A), 1024, &[]),
        (Mem::Device(A), Mem::Device(B), 2048, &[(MemcpyOutOfBounds, Dst, 1024)]),
        (
            Mem::Device(B + 4000),
            Mem::Device(A + 1),
            1024,
            &[(MemcpyOutOfBounds, Dst, 928), (MemcpyOutOfBounds, Src, 1)],
        ),
        (Mem::Device(A), Mem::Host(HOST), 0, &[]),
        (Mem::Device(A), Mem::Host(HOST), u64::MAX, &[(MemcpyOutOfBounds, Dst, u64::MAX - 1024)]),
    ];
    for (i, &(dst, src, count, want)) in cases.iter().enumerate() {
        assert_eq!(copy(&r, dst, src, count), want, "case {i}");
    }
    let f =
        &check_call(&r, "cudaMemcpyAsync", &Call::Copy { dst: Mem::Device(A), src: Mem::Host(HOST), count: 1025 })[0];
    assert_eq!(f.api, "cudaMemcpyAsync");
    match &f.problem {
        Problem::OutOfBounds { start, len, alloc, past_end } => {
            assert_eq!((*start, *len, alloc.base, *past_end), (A, 1025, A, 1))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_range_running_into_the_next_live_allocation_overflows() {
    let r = two();
    assert_eq!(copy(&r, Mem::Device(A + 512), Mem::Host(HOST), 1024), [(MemcpyOutOfBounds, Dst, 512)]);
    assert_eq!(copy(&r, Mem::Device(A + 1024), Mem::Host(HOST), 1024), []);
}

#[test]
fn copy_2d_checks_the_end_of_the_last_row() {
    let pitched = AllocKind::Pitched { pitch: 512, width_bytes: 500, height: 4 };
    let r = registry(&[(A, 2048, pitched)]);
    let copy2d = |dst: Mem, dpitch, width, height| {
        summary(&check_call(
            &r,
            "cudaMemcpy2D",
            &Call::Copy2D { dst, dpitch, src: Mem::Host(HOST), spitch: width, width, height },
        ))
    };
    assert_eq!(copy2d(Mem::Device(A), 512, 512, 4), []);
    // The last row ends at 3 * 512 + 500: the padding after it is never touched.
    assert_eq!(copy2d(Mem::Device(A + 12), 512, 500, 4), []);
    assert_eq!(copy2d(Mem::Device(A + 13), 512, 500, 4), [(MemcpyOutOfBounds, Dst, 1)]);
    assert_eq!(copy2d(Mem::Device(A), 512, 500, 5), [(MemcpyOutOfBounds, Dst, 500)]);
    assert_eq!(copy2d(Mem::Device(A), 512, 513, 2), [(InvalidPitch, Dst, 0)]);
    assert_eq!(copy2d(Mem::Device(A), 512, 0, 9), []);
    assert_eq!(copy2d(Mem::Array(1), 0, 64, 9), [], "arrays are the driver's to check");
    let set = |width, height| {
        summary(&check_call(&r, "cudaMemset2D", &Call::Set2D { dst: Mem::Device(A), pitch: 512, width, height }))
    };
    assert_eq!(set(512, 4), []);
    assert_eq!(set(1, 5), [(MemsetOutOfBounds, Dst, 1)]);
}

#[test]
fn copy_3d_checks_the_last_row_of_the_last_slice() {
    // 4 slices of 8 rows of pitch 256: 8 KiB.
    let r = registry(&[(A, 8192, AllocKind::Pitched { pitch: 256, width_bytes: 200, height: 32 })]);
    let side = |pos| Pitched3D { mem: Mem::Device(A), pitch: 256, rows: 8, pos };
    let host = Pitched3D { mem: Mem::Host(HOST), pitch: 256, rows: 8, pos: [0; 3] };
    let copy3d = |pos, width, height, depth| {
        let extent = Extent { width, height, depth };
        summary(&check_call(&r, "cudaMemcpy3D", &Call::Copy3D { dst: side(pos), src: host, extent }))
    };
    assert_eq!(copy3d([0, 0, 0], 256, 8, 4), []);
    assert_eq!(copy3d([56, 7, 3], 200, 1, 1), [], "ends on the last byte");
    assert_eq!(copy3d([57, 7, 3], 200, 1, 1), [(InvalidPitch, Dst, 0)]);
    assert_eq!(copy3d([0, 1, 0], 256, 8, 4), [(MemcpyOutOfBounds, Dst, 256)]);
    assert_eq!(copy3d([0, 0, 1], 10, 1, 4), [(MemcpyOutOfBounds, Dst, 10)]);
    assert_eq!(copy3d([0, 0, 4], 1, 1, 1), [(UnknownDeviceAddress, Dst, 0)], "starts past the end");
    let set3d = |depth| {
        let extent = Extent { width: 256, height: 8, depth };
        summary(&check_call(&r, "cudaMemset3D", &Call::Set3D { dst: side([0; 3]), extent }))
    };
    assert_eq!(set3d(4), []);
    assert_eq!(set3d(5), [(MemsetOutOfBounds, Dst, 2048)]);
}

#[test]
fn peer_copies_check_both_devices() {
    let r = Registry::default();
    for (base, device) in [(A, 0), (B, 1)] {
        r.insert(NewAlloc { base, size: 1024, kind: AllocKind::Device, device, context: 9, site: SiteId::UNKNOWN })
            .unwrap();
    }
    let peer = |dst, dst_device, src, src_device, count| {
        summary(&check_call(&r, "cudaMemcpyPeer", &Call::CopyPeer { dst, dst_device, src, src_device, count }))
    };
    assert_eq!(peer(B, 1, A, 0, 1024), []);
    assert_eq!(peer(B, 1, A + 1, 0, 1024), [(MemcpyOutOfBounds, Src, 1)]);
    assert_eq!(peer(B, 0, A, 0, 16), [(DeviceMismatch, Dst, 0)]);
    assert_eq!(peer(B + 2048, 1, A, 0, 16), [(UnknownDeviceAddress, Dst, 0)]);
}

/// Memory that does not lie on the device that was current at its allocation (managed
/// memory moves, host memory is on none, a VMM mapping is on its physical memory's) is
/// never another device's: only its bounds are judged.
#[test]
fn a_peer_copy_of_memory_on_no_one_device_is_judged_for_bounds_only() {
    let kinds = [AllocKind::Managed, AllocKind::HostPinned { mapped: true }, AllocKind::Vmm, AllocKind::IpcImport];
    for kind in kinds {
        let r = Registry::default();
        r.insert(NewAlloc { base: A, size: 1024, kind, device: 0, context: 9, site: SiteId::UNKNOWN }).unwrap();
        r.insert(NewAlloc {
            base: B,
            size: 1024,
            kind: AllocKind::Device,
            device: 1,
            context: 9,
            site: SiteId::UNKNOWN,
        })
        .unwrap();
        let peer = |src_device, count| {
            let call = Call::CopyPeer { dst: B, dst_device: 1, src: A, src_device, count };
            summary(&check_call(&r, "cuMemcpyPeer", &call))
        };
        assert_eq!(peer(1, 1024), [], "{kind:?}");
        assert_eq!(peer(1, 1025), [(MemcpyOutOfBounds, Dst, 1), (MemcpyOutOfBounds, Src, 1)], "{kind:?}");
    }
}

#[test]
fn symbol_copies_check_offset_plus_count_against_the_symbol() {
    let r = registry(&[(A, 1024, AllocKind::Device)]);
    let symbol = Symbol { name: "lut", address: 0x7e00_0000_0000, size: 256 };
    let to = |offset, count| {
        summary(&check_call(
            &r,
            "cudaMemcpyToSymbol",
            &Call::CopyToSymbol { symbol, offset, src: Mem::Device(A), count },
        ))
    };
    assert_eq!(to(0, 256), []);
    assert_eq!(to(200, 56), []);
    assert_eq!(to(200, 57), [(MemcpyOutOfBounds, Dst, 1)]);
    assert_eq!(to(0, 1025), [(MemcpyOutOfBounds, Dst, 769), (MemcpyOutOfBounds, Src, 1)]);
    assert_eq!(to(u64::MAX, 2), [(MemcpyOutOfBounds, Dst, u64::MAX - 254)]);
    let from = |offset, count| {
        summary(&check_call(
            &r,
            "cudaMemcpyFromSymbol",
            &Call::CopyFromSymbol { dst: Mem::Host(HOST), symbol, offset, count },
        ))
    };
    assert_eq!(from(255, 1), []);
    assert_eq!(from(256, 1), [(MemcpyOutOfBounds, Src, 1)]);
    let report = check_call(
        &r,
        "cudaMemcpyToSymbol",
        &Call::CopyToSymbol { symbol, offset: 200, src: Mem::Host(HOST), count: 57 },
    )[0]
    .to_report(SiteId::UNKNOWN);
    let Details::Host(h) = &report.details else { panic!() };
    assert_eq!(
        (h.address, h.size, h.symbol.as_ref().map(|s| s.name.as_str())),
        (0x7e00_0000_0000 + 200, 57, Some("lut"))
    );
}

#[test]
fn memset_one_byte_over() {
    let r = registry(&[(A, 1024, AllocKind::Device)]);
    let set = |dst, count| summary(&check_call(&r, "cudaMemset", &Call::Set { dst, count }));
    assert_eq!(set(Mem::Device(A), 1024), []);
    assert_eq!(set(Mem::Device(A), 1025), [(MemsetOutOfBounds, Dst, 1)]);
    assert_eq!(set(Mem::Device(A + 1024), 1), [(UnknownDeviceAddress, Dst, 0)]);
}

#[test]
fn freed_memory_is_use_after_free() {
    let r = two();
    r.free(A, FreeApi::Free, SiteId::from_raw(2));
    let findings =
        check_call(&r, "cudaMemcpy", &Call::Copy { dst: Mem::Host(HOST), src: Mem::Device(A + 8), count: 8 });
    assert_eq!(summary(&findings), [(UseAfterFreeHost, Src, 0)]);
    let report = findings[0].to_report(SiteId::from_raw(3));
    assert_eq!(report.message, "Use-after-free read of 8 bytes by cudaMemcpy (src)");
    let Details::Host(h) = &report.details else { panic!() };
    let nearest = h.nearest.as_ref().unwrap();
    assert_eq!(nearest.position, Position::Inside { offset: 8 });
    assert!(nearest.allocation.freed);
    assert_eq!(nearest.allocation.free_stack.as_ref().map(|s| s.site), Some(SiteId::from_raw(2)));
    assert_eq!(h.call_stack.site, SiteId::from_raw(3));
    let set = check_call(&r, "cudaMemsetAsync", &Call::Set { dst: Mem::Device(A), count: 1 });
    assert_eq!(summary(&set), [(UseAfterFreeHost, Dst, 0)]);
}

#[test]
fn host_pointers_are_judged_only_inside_host_memory_we_know_whole() {
    let r = registry(&[
        (HOST, 4096, AllocKind::HostPinned { mapped: true }),
        (HOST + 0x10000, 4096, AllocKind::HostRegistered),
        (A, 1024, AllocKind::Device),
    ]);
    let up = |src| copy(&r, Mem::Device(A), src, 1024);
    assert_eq!(up(Mem::Host(0x1234_5678)), [], "pageable memory is not ours");
    assert_eq!(up(Mem::Host(HOST + 3072)), []);
    assert_eq!(up(Mem::Host(HOST + 3073)), [(MemcpyOutOfBounds, Src, 1)], "pinned memory has known bounds");
    assert_eq!(up(Mem::Host(HOST + 0x10000 + 4000)), [], "registered memory may extend past the registration");
    r.free(HOST + 0x10000, FreeApi::HostUnregister, SiteId::UNKNOWN);
    assert_eq!(up(Mem::Host(HOST + 0x10000)), [], "and outlives it");
    r.free(HOST, FreeApi::FreeHost, SiteId::UNKNOWN);
    assert_eq!(up(Mem::Host(HOST)), [(UseAfterFreeHost, Src, 0)]);
    assert_eq!(copy(&r, Mem::Device(A), Mem::Device(HOST + 0x10000), 4), [(UseAfterFreeHost, Src, 0)]);
}

#[test]
fn unknown_device_addresses_name_the_nearest_allocation() {
    let r = two();
    let findings =
        check_call(&r, "cudaMemcpy", &Call::Copy { dst: Mem::Device(A + 2048 + 4), src: Mem::Host(HOST), count: 4 });
    assert_eq!(summary(&findings), [(UnknownDeviceAddress, Dst, 0)]);
    let report = findings[0].to_report(SiteId::UNKNOWN);
    let Details::Host(h) = &report.details else { panic!() };
    let nearest = h.nearest.as_ref().unwrap();
    assert_eq!((nearest.allocation.base, nearest.position), (A + 1024, Position::PastEnd { bytes: 4 }));
    let below_b = check_call(&r, "cudaMemcpy", &Call::Copy { dst: Mem::Device(B - 2), src: Mem::Host(HOST), count: 1 });
    let Details::Host(h) = below_b[0].to_report(SiteId::UNKNOWN).details else { panic!() };
    assert_eq!(h.nearest.map(|n| (n.allocation.base, n.position)), Some((B, Position::Before { bytes: 2 })));
}

#[test]
fn frees_map_to_findings() {
    let r = registry(&[(A, 1024, AllocKind::Device), (B, 64, AllocKind::HostPinned { mapped: false })]);
    let free = |ptr, api, site| {
        let outcome = r.free(ptr, api, SiteId::from_raw(site)).outcome;
        check_free(&r, "cudaFree", ptr, &outcome)
    };
    assert_eq!(free(0, FreeApi::Free, 1), None);
    assert_eq!(free(A, FreeApi::Free, 10), None);
    let double = free(A, FreeApi::Free, 11).unwrap();
    assert!(matches!(double.problem, Problem::DoubleFree { first_free, .. } if first_free == SiteId::from_raw(10)));
    let interior = free(B + 4, FreeApi::FreeHost, 1).unwrap();
    assert!(matches!(interior.problem, Problem::InvalidFree { offset: 4, .. }));
    let mismatched = free(B, FreeApi::Free, 1).unwrap();
    assert!(matches!(mismatched.problem, Problem::MismatchedFree { free_api: FreeApi::Free, .. }));
    let unknown = free(B + 100, FreeApi::Free, 1).unwrap();
    assert!(matches!(unknown.problem, Problem::UnknownFree { below: Some(b), .. } if b.base == B));
    let kinds: Vec<_> = [double, interior, mismatched, unknown].iter().map(|f| (f.kind(), f.operand)).collect();
    assert_eq!(kinds, [(DoubleFree, Ptr), (InvalidFree, Ptr), (MismatchedFree, Ptr), (UnknownFree, Ptr)]);
}

#[test]
fn finding_messages() {
    let r = registry(&[(A, 1024, AllocKind::Device), (B, 64, AllocKind::HostPinned { mapped: false })]);
    let message = |f: &Finding| f.to_report(SiteId::UNKNOWN).message;
    let copy =
        check_call(&r, "cudaMemcpy", &Call::Copy { dst: Mem::Device(A + 1), src: Mem::Device(A + 1), count: 1024 });
    assert_eq!(message(&copy[0]), "Out-of-bounds write of 1024 bytes by cudaMemcpy (dst)");
    assert_eq!(message(&copy[1]), "Out-of-bounds read of 1024 bytes by cudaMemcpy (src)");
    let pitch = check_call(
        &r,
        "cudaMemcpy2D",
        &Call::Copy2D { dst: Mem::Device(A), dpitch: 8, src: Mem::Host(HOST), spitch: 16, width: 16, height: 1 },
    );
    assert_eq!(message(&pitch[0]), "cudaMemcpy2D (dst): width of 16 bytes exceeds pitch of 8 bytes");
    let outcome = r.free(B, FreeApi::Free, SiteId::UNKNOWN).outcome;
    let f = check_free(&r, "cudaFree", B, &outcome).unwrap();
    assert_eq!(message(&f), format!("Mismatched free of {B:#x} by cudaFree: it is pinned host memory"));
    let outcome = r.free(A + 16, FreeApi::Free, SiteId::UNKNOWN).outcome;
    let f = check_free(&r, "cudaFree", A + 16, &outcome).unwrap();
    assert_eq!(
        message(&f),
        format!("Invalid free of {:#x} by cudaFree: 16 bytes into an allocation, not its start", A + 16)
    );
}

#[test]
fn leaks_are_grouped_by_allocation_site() {
    let r = Registry::default();
    let site = |n| SiteId::from_raw(n);
    for (i, (size, s)) in [(100, 1), (200, 2), (300, 1), (50, 3)].into_iter().enumerate() {
        let base = A + i as u64 * 0x1000;
        r.insert(NewAlloc { base, size, kind: AllocKind::Device, device: 0, context: 1, site: site(s) }).unwrap();
    }
    r.free(A + 0x3000, FreeApi::Free, site(9));
    let leaks: Vec<_> = leak_summary(&r, &LeakConfig::default())
        .0
        .into_iter()
        .map(|l| (l.alloc_stack.site, l.count, l.bytes))
        .collect();
    assert_eq!(leaks, [(site(1), 2, 400), (site(2), 1, 200)]);
}

#[test]
fn a_faulted_contexts_memory_is_no_leak() {
    // After a kernel fault every call of the context fails, its frees too: what it held is
    // left out and counted, while another context's memory is still judged.
    let r = Registry::default();
    for (i, context) in [1u64, 2, 2].into_iter().enumerate() {
        let base = A + i as u64 * 0x1000;
        let new = NewAlloc { base, size: 64, kind: AllocKind::Device, device: 0, context, site: SiteId::from_raw(1) };
        r.insert(new).unwrap();
    }
    let config = LeakConfig { faulted_contexts: [2].into_iter().collect() };
    let (leaks, left_out) = leak_summary(&r, &config);
    assert_eq!(leaks.iter().map(|l| (l.count, l.bytes)).collect::<Vec<_>>(), [(1, 64)]);
    assert_eq!(left_out, 2);
}

#[test]
fn untracked_device_memory_is_never_judged() {
    // Module variables and memory allocated before injection: the driver vouches for them,
    // gpusan has no bounds, so nothing may be reported, while the same address as plain
    // device memory is an unknown address.
    let r = two();
    let far = 0x7000_0000_0000;
    assert!(copy(&r, Mem::Untracked(far), Mem::Host(0x1000), 64).is_empty());
    assert!(copy(&r, Mem::Host(0x1000), Mem::Untracked(far), 64).is_empty());
    assert!(check_call(&r, "cuMemsetD8", &Call::Set { dst: Mem::Untracked(far), count: 1 << 20 }).is_empty());
    assert_eq!(copy(&r, Mem::Device(far), Mem::Host(0x1000), 64).len(), 1);
}

/// A range a call acts on as a whole (a managed-memory prefetch or advice): judged for its
/// bounds and its allocation's life, named as a range.
#[test]
fn a_range_past_its_allocation_or_in_freed_memory_is_found() {
    let r = registry(&[(A, 1024, AllocKind::Managed)]);
    let range =
        |ptr, count| summary(&check_call(&r, "cuMemPrefetchAsync", &Call::Range { ptr: Mem::Device(ptr), count }));
    assert_eq!(range(A, 1024), []);
    assert_eq!(range(A + 512, 516), [(RangeOutOfBounds, Ptr, 4)]);
    let f = check_call(&r, "cuMemPrefetchAsync", &Call::Range { ptr: Mem::Device(A), count: 1025 });
    assert_eq!(
        f[0].to_report(SiteId::UNKNOWN).message,
        "Out-of-bounds range of 1025 bytes by cuMemPrefetchAsync (ptr)"
    );
    r.free(A, FreeApi::Free, SiteId::UNKNOWN);
    assert_eq!(range(A, 16), [(UseAfterFreeHost, Ptr, 0)]);
}
