//! Tensor maps judged against the registry: the extent a map declares, computed from its
//! dims, strides and data type, each at the exact element where it starts to overrun.

use gpusan_runtime::checks::Mem;
use gpusan_runtime::registry::*;
use gpusan_runtime::report::{Details, ErrorKind, Operand, Position};
use gpusan_runtime::tensormap::*;

const A: u64 = 0x7f00_0000_0000;

const UINT8: u32 = 0;
const FLOAT16: u32 = 6;
const FLOAT32: u32 = 7;
const FLOAT64: u32 = 8;
const U4_ALIGN8B: u32 = 13;
const U4_ALIGN16B: u32 = 14;
const U6_ALIGN16B: u32 = 15;

fn layout<'a>(data_type: u32, dims: &'a [u64], strides: &'a [u64]) -> Layout<'a> {
    Layout { data_type, dims, strides }
}

#[test]
fn reach_is_the_end_of_the_last_element() {
    // 1-D: the elements.
    assert_eq!(reach(&layout(FLOAT32, &[100], &[])), Some(400));
    assert_eq!(reach(&layout(UINT8, &[3], &[])), Some(3));
    // Rows of 16 float32 with rows 128 bytes apart (padding): the last row ends after 64.
    assert_eq!(reach(&layout(FLOAT32, &[16, 4], &[128])), Some(3 * 128 + 64));
    // Dense 3-D fp16 [8, 4, 2]: 128 bytes.
    assert_eq!(reach(&layout(FLOAT16, &[8, 4, 2], &[16, 64])), Some(128));
    // Five dimensions, a larger element.
    assert_eq!(reach(&layout(FLOAT64, &[2, 2, 2, 2, 2], &[16, 32, 64, 128])), Some(16 + 16 + 32 + 64 + 128));
    // A stride smaller than the row (rows overlap) still ends at the last row's end.
    assert_eq!(reach(&layout(FLOAT32, &[8, 3], &[16])), Some(2 * 16 + 32));
}

#[test]
fn packed_types_count_their_packets() {
    // 16 × U4 in 8 bytes, no gaps: 4 bits a value.
    assert_eq!(reach(&layout(U4_ALIGN8B, &[128], &[])), Some(64));
    assert_eq!(reach(&layout(U4_ALIGN8B, &[2], &[])), Some(1));
    // 16 × U4 in 8 bytes then 8 bytes of gap: 128 values are 8 packets; the last gap is
    // not part of the tensor.
    assert_eq!(reach(&layout(U4_ALIGN16B, &[128], &[])), Some(7 * 16 + 8));
    // 16 × U6 in 12 bytes then 4 of gap.
    assert_eq!(reach(&layout(U6_ALIGN16B, &[128, 2], &[128])), Some(128 + 7 * 16 + 12));
}

#[test]
fn shapes_the_driver_refuses_are_not_judged() {
    assert_eq!(reach(&layout(FLOAT32, &[], &[])), None, "no dimension");
    assert_eq!(reach(&layout(FLOAT32, &[1; 6], &[16; 5])), None, "six dimensions");
    assert_eq!(reach(&layout(FLOAT32, &[4, 0], &[16])), None, "a zero size");
    assert_eq!(reach(&layout(FLOAT32, &[4, 4], &[])), None, "a stride missing");
    assert_eq!(reach(&layout(16, &[4], &[])), None, "a data type CUDA 13.0 does not have");
}

fn registry(allocs: &[(u64, u64)]) -> Registry {
    let r = Registry::default();
    for &(base, size) in allocs {
        let kind = AllocKind::Device;
        r.insert(NewAlloc { base, size, kind, device: 0, context: 1, site: SiteId::from_raw(1) }).unwrap();
    }
    r
}

fn judge(r: &Registry, address: Mem, dims: &[u64], strides: &[u64]) -> Verdict {
    check_tensor_map(r, "cuTensorMapEncodeTiled", address, &layout(FLOAT32, dims, strides))
}

#[test]
fn a_map_exactly_covering_its_allocation_is_inside_and_one_element_more_is_not() {
    // 16 × 16 float32 rows 64 bytes apart: 1024 bytes, its allocation exactly.
    let r = registry(&[(A, 1024), (A + 1024, 1024)]);
    assert_eq!(judge(&r, Mem::Device(A), &[16, 16], &[64]), Verdict::Inside);
    // One more element on each row: the last row ends 4 bytes into the neighbour.
    let Verdict::Finding(f) = judge(&r, Mem::Device(A), &[17, 16], &[64]) else { panic!("not found") };
    assert_eq!((f.kind(), f.extent, f.past_end(), f.alloc.base), (ErrorKind::TensorMapOutOfBounds, 1028, 4, A));
    // One more row.
    let Verdict::Finding(f) = judge(&r, Mem::Device(A), &[16, 17], &[64]) else { panic!("not found") };
    assert_eq!(f.past_end(), 64);
    // Started inside: what remains of the allocation is what counts.
    assert_eq!(judge(&r, Mem::Device(A + 512), &[16, 8], &[64]), Verdict::Inside);
    assert!(matches!(judge(&r, Mem::Device(A + 512), &[16, 9], &[64]), Verdict::Finding(_)));
}

#[test]
fn a_map_on_freed_memory_is_a_use_after_free() {
    let r = registry(&[(A, 1024)]);
    r.free(A, FreeApi::Free, SiteId::from_raw(2));
    let Verdict::Finding(f) = judge(&r, Mem::Device(A), &[4], &[]) else { panic!("not found") };
    assert_eq!(f.kind(), ErrorKind::TensorMapUseAfterFree);
}

#[test]
fn memory_gpusan_does_not_know_is_not_judged() {
    let r = registry(&[(A, 1024)]);
    assert_eq!(judge(&r, Mem::Device(A + (1 << 20)), &[1 << 20], &[]), Verdict::NotJudged, "in no allocation");
    assert_eq!(judge(&r, Mem::Untracked(A), &[1 << 20], &[]), Verdict::NotJudged, "the driver's, not gpusan's");
    assert_eq!(judge(&r, Mem::Device(A), &[4, 0], &[16]), Verdict::NotJudged, "a shape the driver refuses");
}

#[test]
fn the_report_names_the_call_the_tensor_and_the_allocation() {
    let r = registry(&[(A, 1024)]);
    let Verdict::Finding(f) = judge(&r, Mem::Device(A), &[17, 16], &[64]) else { panic!("not found") };
    let report = f.to_report(SiteId::from_raw(3), None);
    assert_eq!(report.kind, ErrorKind::TensorMapOutOfBounds);
    assert_eq!(report.message, "Out-of-bounds tensor map of 1028 bytes by cuTensorMapEncodeTiled (globalAddress)");
    let Details::Host(h) = &report.details else { panic!("{report:?}") };
    assert_eq!((h.operand, h.address, h.size), (Operand::GlobalAddress, A, 1028));
    assert_eq!(h.nearest.as_ref().map(|n| n.position), Some(Position::Inside { offset: 0 }));
    let t = h.tensor.as_ref().unwrap();
    assert_eq!((t.data_type.as_str(), t.dims.as_slice(), t.strides.as_slice()), ("float32", &[17, 16][..], &[64][..]));
    let text = report.to_string();
    assert!(text.contains("Tensor of float32 [17, 16], strides [64] bytes: reaches 1028 bytes from"), "{text}");
    assert!(text.contains("runs 4 bytes past its end"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["kind"], "tensor_map_out_of_bounds");
    assert_eq!(json["details"]["operand"], "global_address");
}
