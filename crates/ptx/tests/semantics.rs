//! The semantic table, form by form: for each PTX instruction, what it defines and uses and
//! which memory it touches. Each case is parsed from text with the real parser, so a case
//! also pins how the parser shapes the instruction's operands.

mod common;

use gpusan_ptx::ast::{Instruction, Item, Operand, Statement};
use gpusan_ptx::semantics::{
    address_conversion, for_each_def, for_each_use, has_destination, memory_accesses, space_test, type_width,
    AccessKind, Conversion, MemAccess, Space, Width,
};

const REGS: &str = "\t.reg .pred %p<8>;\n\t.reg .b16 %h<16>;\n\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<32>;\n\
                    \t.reg .f32 %f<32>;\n\t.reg .f64 %fd<8>;\n\t.reg .b128 %q<4>;\n";

/// Parses `text` as the only instruction (before a `ret`) of a kernel and returns it.
#[track_caller]
fn parse_inst(text: &str) -> Instruction {
    let src = format!(
        ".version 9.0\n.target sm_90a\n.address_size 64\n\n\
         .visible .entry k(\n\t.param .u64 p,\n\t.param .align 64 .b8 tmap[128]\n)\n{{\n{REGS}\t{text}\n\tret;\n}}\n"
    );
    let module = gpusan_ptx::parse(&src).unwrap_or_else(|e| panic!("`{text}` does not parse:\n{e}"));
    let body = module
        .items
        .iter()
        .find_map(|i| match i {
            Item::Function(f) => f.body.as_ref(),
            _ => None,
        })
        .expect("the kernel has a body");
    let insts: Vec<&Instruction> = body
        .iter()
        .filter_map(|s| match s {
            Statement::Inst(i) => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(insts.len(), 2, "`{text}` did not parse as one instruction: {insts:?}");
    assert_eq!(insts[1].opcode, "ret");
    insts[0].clone()
}

fn acc(space: Space, operand: usize, width: Width, kind: AccessKind) -> MemAccess {
    MemAccess { space, operand, width, kind }
}
fn rd(space: Space, operand: usize, width: Width) -> MemAccess {
    acc(space, operand, width, AccessKind::Read)
}
fn wr(space: Space, operand: usize, width: Width) -> MemAccess {
    acc(space, operand, width, AccessKind::Write)
}
fn at(space: Space, operand: usize, width: Width) -> MemAccess {
    acc(space, operand, width, AccessKind::Atomic)
}
fn pf(space: Space, operand: usize, width: Width) -> MemAccess {
    acc(space, operand, width, AccessKind::Prefetch)
}
fn b(n: u32) -> Width {
    Width::Bytes(n)
}
fn size_op(i: usize) -> Width {
    Width::Operand(i)
}
const UNKNOWN: Width = Width::Unknown;

/// Instruction text → the accesses `memory_accesses` must list, in order.
fn memory_cases() -> Vec<(&'static str, Vec<MemAccess>)> {
    use Space::*;
    vec![
        // ---- ld / ldu -------------------------------------------------------------------
        ("ld.global.u32 %r1, [%rd1];", vec![rd(Global, 1, b(4))]),
        ("ld.global.nc.L1::no_allocate.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];", vec![rd(Global, 1, b(16))]),
        ("ld.global.nc.v2.f64 {%fd1, %fd2}, [%rd1];", vec![rd(Global, 1, b(16))]),
        ("ld.global.nc.u16 %h1, [%rd1];", vec![rd(Global, 1, b(2))]),
        ("ld.global.L2::cache_hint.b32 %r1, [%rd1], %rd2;", vec![rd(Global, 1, b(4))]),
        ("ld.global.L1::evict_last.L2::256B.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];", vec![rd(Global, 1, b(16))]),
        ("ld.global.cs.v2.s32 {%r1, %r2}, [%rd1+-8];", vec![rd(Global, 1, b(8))]),
        ("ld.param.u64 %rd1, [p];", vec![rd(Param, 1, b(8))]),
        ("ld.param::entry.b32 %r1, [p+4];", vec![rd(Param, 1, b(4))]),
        ("ld.local.u32 %r1, [%rd1];", vec![rd(Local, 1, b(4))]),
        ("ld.u32 %r1, [%rd1];", vec![rd(Generic, 1, b(4))]),
        ("ld.s8 %h1, [%rd1];", vec![rd(Generic, 1, b(1))]),
        ("ld.shared::cluster.u32 %r1, [%r2];", vec![rd(SharedCluster, 1, b(4))]),
        ("ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%r1];", vec![rd(Shared, 1, b(16))]),
        ("ld.volatile.shared::cta.u8 %h1, [%r2];", vec![rd(SharedCta, 1, b(1))]),
        ("ld.const.f64 %fd1, [%rd1];", vec![rd(Const, 1, b(8))]),
        ("ld.acquire.gpu.global.b64 %rd1, [%rd2];", vec![rd(Global, 1, b(8))]),
        ("ld.relaxed.sys.b64 %rd1, [%rd2];", vec![rd(Generic, 1, b(8))]),
        ("ld.mmio.relaxed.sys.global.u32 %r1, [%rd1];", vec![rd(Global, 1, b(4))]),
        ("ld.global.b128 %q1, [%rd1];", vec![rd(Global, 1, b(16))]),
        (
            "ld.global.L2::evict_last.v8.f32 {%f0, _, %f2, %f3, %f4, %f5, %f6, %f7}, [%rd1];",
            vec![rd(Global, 1, b(32))],
        ),
        ("ldu.global.v2.f32 {%f1, %f2}, [%rd1];", vec![rd(Global, 1, b(8))]),
        ("ldu.u64 %rd1, [%rd2];", vec![rd(Generic, 1, b(8))]),
        // ---- st ------------------------------------------------------------------------
        ("st.global.L1::no_allocate.v2.u64 [%rd1], {%rd2, %rd3};", vec![wr(Global, 0, b(16))]),
        ("st.v4.f32 [%rd1], {%f1, %f2, %f3, %f4};", vec![wr(Generic, 0, b(16))]),
        ("st.param.b64 [param0], %rd1;", vec![wr(Param, 0, b(8))]),
        ("st.param::func.b32 [param0+4], %r1;", vec![wr(Param, 0, b(4))]),
        ("st.local.u16 [%rd1+-8], %h1;", vec![wr(Local, 0, b(2))]),
        ("st.global.L2::cache_hint.b32 [%rd1], %r1, %rd2;", vec![wr(Global, 0, b(4))]),
        ("st.release.gpu.shared::cta.u32 [%r1], %r2;", vec![wr(SharedCta, 0, b(4))]),
        ("st.volatile.global.u32 [%rd1], %r1;", vec![wr(Global, 0, b(4))]),
        ("st.shared::cluster.f64 [%r1+8], %fd1;", vec![wr(SharedCluster, 0, b(8))]),
        ("st.global.b128 [%rd1], %q1;", vec![wr(Global, 0, b(16))]),
        // ---- st.async, st.bulk --------------------------------------------------------
        (
            "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.s32 [%r1], {%r2, %r3}, [%r4];",
            vec![wr(SharedCluster, 0, b(8)), at(SharedCluster, 2, b(8))],
        ),
        (
            "st.async.mbarrier::complete_tx::bytes.b64 [%r1], %rd1, [%r4];",
            vec![wr(SharedCluster, 0, b(8)), at(SharedCluster, 2, b(8))],
        ),
        ("st.async.release.gpu.global.b32 [%rd1], %r1;", vec![wr(Global, 0, b(4))]),
        ("st.bulk.weak.shared::cta [%r1], %r2, 0;", vec![wr(SharedCta, 0, size_op(1))]),
        ("st.bulk.weak [%rd1], 256, 0;", vec![wr(Generic, 0, b(256))]),
        // ---- atom ----------------------------------------------------------------------
        ("atom.global.cas.b32 %r1, [%rd1], %r2, %r3;", vec![at(Global, 1, b(4))]),
        ("atom.shared::cta.add.u64 %rd1, [%r1], %rd2;", vec![at(SharedCta, 1, b(8))]),
        ("atom.global.v4.f32.add {%f0, %f1, %f2, %f3}, [%rd1], {%f4, %f5, %f6, %f7};", vec![at(Global, 1, b(16))]),
        ("atom.global.add.v4.f32 {%f0, %f1, %f2, %f3}, [%rd1], {%f4, %f5, %f6, %f7};", vec![at(Global, 1, b(16))]),
        ("atom.add.v2.f32 {%f0, %f1}, [%rd1], {%f4, %f5};", vec![at(Generic, 1, b(8))]),
        (
            "atom.global.v8.f16.max.noftz {%h0, %h1, %h2, %h3, %h4, %h5, %h6, %h7}, [%rd1], \
             {%h8, %h9, %h10, %h11, %h12, %h13, %h14, %h15};",
            vec![at(Global, 1, b(16))],
        ),
        ("atom.global.v2.bf16x2.add.noftz {%r1, %r2}, [%rd1], {%r3, %r4};", vec![at(Global, 1, b(8))]),
        ("atom.global.cas.b128 %q1, [%rd1], %q2, %q3;", vec![at(Global, 1, b(16))]),
        ("atom.sys.exch.b128 %q1, [%rd1], %q2;", vec![at(Generic, 1, b(16))]),
        ("atom.global.cas.b16 %h1, [%rd1], %h2, %h3;", vec![at(Global, 1, b(2))]),
        ("atom.add.noftz.f16 %h1, [%rd1], %h2;", vec![at(Generic, 1, b(2))]),
        ("atom.global.add.L2::cache_hint.s32 %r1, [%rd1], 1, %rd2;", vec![at(Global, 1, b(4))]),
        ("atom.acq_rel.cluster.shared::cluster.exch.b64 %rd1, [%r1], %rd2;", vec![at(SharedCluster, 1, b(8))]),
        ("atom.shared.inc.u32 %r1, [%r2+4], 15;", vec![at(Shared, 1, b(4))]),
        // ---- red, red.async -----------------------------------------------------------
        ("red.global.add.f32 [%rd1], %f1;", vec![at(Global, 0, b(4))]),
        ("red.shared::cluster.max.u32 [%r1+4], 0;", vec![at(SharedCluster, 0, b(4))]),
        ("red.global.v4.f32.add [%rd1], {%f0, %f1, %f2, %f3};", vec![at(Global, 0, b(16))]),
        ("red.release.gpu.add.u64 [%rd1], %rd2;", vec![at(Generic, 0, b(8))]),
        ("red.global.and.L2::cache_hint.b32 [%rd1], 1, %rd2;", vec![at(Global, 0, b(4))]),
        (
            "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%r1], %r2, [%r3];",
            vec![at(SharedCluster, 0, b(4)), at(SharedCluster, 2, b(8))],
        ),
        ("red.async.release.gpu.global.add.u64 [%rd1], %rd2;", vec![at(Global, 0, b(8))]),
        // ---- multimem ------------------------------------------------------------------
        ("multimem.ld_reduce.relaxed.gpu.global.add.u32 %r1, [%rd1];", vec![rd(Global, 1, b(4))]),
        ("multimem.ld_reduce.add.acc::f32.v4.f16x2 {%r1, %r2, %r3, %r4}, [%rd1];", vec![rd(Generic, 1, b(16))]),
        ("multimem.st.relaxed.gpu.global.b32 [%rd1], %r1;", vec![wr(Global, 0, b(4))]),
        ("multimem.red.release.cta.global.add.v4.f32 [%rd1], {%f0, %f1, %f2, %f3};", vec![at(Global, 0, b(16))]),
        // ---- cp.async ------------------------------------------------------------------
        ("cp.async.cg.shared.global [%r1], [%rd1], 16;", vec![wr(Shared, 0, b(16)), rd(Global, 1, b(16))]),
        (
            "cp.async.ca.shared.global [%r1], [%rd1], 4, %r2;",
            vec![wr(Shared, 0, b(4)), rd(Global, 1, Width::AtMost { max: 4, operand: 3 })],
        ),
        (
            "cp.async.ca.shared::cta.global.L2::cache_hint [%r1], [%rd1], 8, %rd2;",
            vec![wr(SharedCta, 0, b(8)), rd(Global, 1, b(8))],
        ),
        (
            "cp.async.cg.shared.global.L2::cache_hint [%r1], [%rd1], 16, %p1, %rd2;",
            vec![wr(Shared, 0, b(16)), rd(Global, 1, Width::AtMost { max: 16, operand: 3 })],
        ),
        ("cp.async.cg.shared.global.L2::128B [%r1+16], [%rd1], 16, 0;", vec![wr(Shared, 0, b(16)), rd(Global, 1, b(0))]),
        ("cp.async.commit_group;", vec![]),
        ("cp.async.wait_group 1;", vec![]),
        ("cp.async.wait_all;", vec![]),
        ("cp.async.mbarrier.arrive.noinc.shared.b64 [%r1];", vec![at(Shared, 0, b(8))]),
        ("cp.async.mbarrier.arrive.b64 [%rd1];", vec![at(Generic, 0, b(8))]),
        // ---- cp.async.bulk, cp.reduce.async.bulk ------------------------------------------
        (
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r2, [%r3];",
            vec![wr(SharedCluster, 0, size_op(2)), rd(Global, 1, size_op(2)), at(SharedCluster, 3, b(8))],
        ),
        (
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint \
             [%r1], [%rd1], 1024, [%r3], %h1, %rd2;",
            vec![wr(SharedCluster, 0, b(1024)), rd(Global, 1, b(1024)), at(SharedCluster, 3, b(8))],
        ),
        (
            "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r1], [%rd1], %r2, [%r3];",
            vec![wr(SharedCta, 0, size_op(2)), rd(Global, 1, size_op(2)), at(SharedCta, 3, b(8))],
        ),
        (
            "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r1], [%r2], %r3, [%r4];",
            vec![wr(SharedCluster, 0, size_op(2)), rd(SharedCta, 1, size_op(2)), at(SharedCluster, 3, b(8))],
        ),
        (
            "cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], %r2;",
            vec![wr(Global, 0, size_op(2)), rd(SharedCta, 1, size_op(2))],
        ),
        (
            "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.cp_mask [%rd1], [%r1], 64, %rd2, %h1;",
            vec![wr(Global, 0, b(64)), rd(SharedCta, 1, b(64))],
        ),
        (
            "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes.ignore_oob \
             [%r1], [%rd1], %r2, %r3, %r4, [%r5];",
            vec![wr(SharedCta, 0, size_op(2)), rd(Global, 1, size_op(2)), at(SharedCta, 5, b(8))],
        ),
        (
            "multimem.cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], %r2;",
            vec![wr(Global, 0, size_op(2)), rd(SharedCta, 1, size_op(2))],
        ),
        (
            "multimem.cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd1], [%r1], 512;",
            vec![at(Global, 0, b(512)), rd(SharedCta, 1, b(512))],
        ),
        ("cp.async.bulk.commit_group;", vec![]),
        ("cp.async.bulk.wait_group.read 0;", vec![]),
        (
            "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd1], [%r1], %r2;",
            vec![at(Global, 0, size_op(2)), rd(SharedCta, 1, size_op(2))],
        ),
        (
            "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u32 \
             [%r1], [%r2], %r3, [%r4];",
            vec![at(SharedCluster, 0, size_op(2)), rd(SharedCta, 1, size_op(2)), at(SharedCluster, 3, b(8))],
        ),
        ("cp.async.bulk.prefetch.L2.global [%rd1], %r1;", vec![pf(Global, 0, size_op(1))]),
        ("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%rd1], 4096, %rd2;", vec![pf(Global, 0, b(4096))]),
        // ---- bulk tensor copies ----------------------------------------------------------
        (
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \
             [%r1], [%rd1, {%r2, %r3}], [%r4];",
            vec![wr(SharedCluster, 0, UNKNOWN), rd(Tex, 1, UNKNOWN), at(SharedCluster, 2, b(8))],
        ),
        (
            "cp.async.bulk.tensor.5d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes.multicast::cluster.\
             L2::cache_hint [%r1], [tmap, {%r2, %r3, %r4, %r5, %r6}], [%r7], {%h1, %h2, %h3}, %h4, %rd2;",
            vec![wr(SharedCluster, 0, UNKNOWN), rd(Tex, 1, UNKNOWN), at(SharedCluster, 2, b(8))],
        ),
        (
            "cp.async.bulk.tensor.1d.shared::cta.global.tile.mbarrier::complete_tx::bytes.cta_group::1 \
             [%r1], [%rd1, {%r2}], [%r3];",
            vec![wr(SharedCta, 0, UNKNOWN), rd(Tex, 1, UNKNOWN), at(SharedCta, 2, b(8))],
        ),
        (
            "cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd1, {%r1}], [%r2];",
            vec![wr(Tex, 0, UNKNOWN), rd(SharedCta, 1, UNKNOWN)],
        ),
        (
            "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%rd1, {%r1, %r2}], [%r3];",
            vec![at(Tex, 0, UNKNOWN), rd(SharedCta, 1, UNKNOWN)],
        ),
        ("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd1, {%r1, %r2}];", vec![pf(Tex, 0, UNKNOWN)]),
        // ---- prefetch, applypriority, discard ----------------------------------------------
        ("prefetch.global.L2 [%rd1];", vec![pf(Global, 0, b(1))]),
        ("prefetch.local.L1 [%rd1];", vec![pf(Local, 0, b(1))]),
        ("prefetch.L1 [%rd1];", vec![pf(Generic, 0, b(1))]),
        ("prefetch.global.L2::evict_last [%rd1+128];", vec![pf(Global, 0, b(1))]),
        ("prefetchu.L1 [%rd1];", vec![pf(Generic, 0, b(1))]),
        ("prefetch.param.tensormap [tmap];", vec![pf(Param, 0, b(128))]),
        ("prefetch.const.tensormap [%rd1];", vec![pf(Const, 0, b(128))]),
        ("prefetch.tensormap [%rd1];", vec![pf(Generic, 0, b(128))]),
        ("applypriority.global.L2::evict_normal [%rd1], 128;", vec![pf(Global, 0, b(128))]),
        ("discard.global.L2 [%rd1], 128;", vec![wr(Global, 0, b(128))]),
        ("discard.L2 [%rd1], 128;", vec![wr(Generic, 0, b(128))]),
        // ---- ldmatrix, stmatrix -------------------------------------------------------------
        ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];", vec![rd(Shared, 1, b(16))]),
        ("ldmatrix.sync.aligned.m8n8.x2.trans.shared::cta.b16 {%r1, %r2}, [%r3];", vec![rd(SharedCta, 1, b(16))]),
        ("ldmatrix.sync.aligned.m8n8.x1.b16 {%r1}, [%rd1];", vec![rd(Generic, 1, b(16))]),
        (
            "ldmatrix.sync.aligned.m16n16.x2.trans.shared::cta.b8x16.b6x16_p32 {%r1, %r2, %r3, %r4}, [%r5];",
            vec![rd(SharedCta, 1, b(16))],
        ),
        ("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%r1], {%r2, %r3, %r4, %r5};", vec![wr(Shared, 0, b(16))]),
        ("stmatrix.sync.aligned.m16n8.x1.trans.shared::cta.b8 [%r1], {%r2};", vec![wr(SharedCta, 0, b(16))]),
        // ---- mbarrier ----------------------------------------------------------------------
        ("mbarrier.init.shared::cta.b64 [%r1], %r2;", vec![wr(SharedCta, 0, b(8))]),
        ("mbarrier.init.b64 [%rd1], 32;", vec![wr(Generic, 0, b(8))]),
        ("mbarrier.inval.shared.b64 [%r1];", vec![wr(Shared, 0, b(8))]),
        ("mbarrier.arrive.shared.b64 %rd1, [%r1];", vec![at(Shared, 1, b(8))]),
        ("mbarrier.arrive.expect_tx.relaxed.cluster.shared::cluster.b64 _, [%r1], %r2;", vec![at(SharedCluster, 1, b(8))]),
        ("mbarrier.arrive_drop.noComplete.shared.b64 %rd1, [%r1], 1;", vec![at(Shared, 1, b(8))]),
        ("mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], %r2;", vec![rd(SharedCta, 1, b(8))]),
        ("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;", vec![rd(SharedCta, 1, b(8))]),
        ("mbarrier.try_wait.acquire.cluster.shared::cta.b64 %p1, [%r1], %rd2, %r3;", vec![rd(SharedCta, 1, b(8))]),
        ("mbarrier.try_wait.b64 %p1, [%rd1], %rd2;", vec![rd(Generic, 1, b(8))]),
        ("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], %r2;", vec![at(SharedCta, 0, b(8))]),
        ("mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%r1], %r2;", vec![at(SharedCluster, 0, b(8))]),
        ("mbarrier.pending_count.b64 %r1, %rd1;", vec![]),
        // ---- textures and surfaces -----------------------------------------------------------
        ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [tex0, {%f5, %f6}];", vec![rd(Tex, 1, b(16))]),
        ("tex.1d.v4.s32.f32 {%r1, %r2, %r3, %r4}, [tex0, smp0, {%f1}];", vec![rd(Tex, 1, b(16))]),
        ("tex.level.2d.v2.f16x2.f32 {%r1, %r2}, [tex0, {%f5, %f6}], %f7;", vec![rd(Tex, 1, b(8))]),
        ("tld4.r.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [tex0, {%f5, %f6}];", vec![rd(Tex, 1, b(16))]),
        ("suld.b.2d.v4.b32.trap {%r1, %r2, %r3, %r4}, [surf0, {%r5, %r6}];", vec![rd(Tex, 1, b(16))]),
        ("suld.b.1d.b8.zero %r1, [surf0, {%r5}];", vec![rd(Tex, 1, b(1))]),
        ("sust.b.2d.v2.b16.clamp [surf0, {%r1, %r2}], {%h1, %h2};", vec![wr(Tex, 0, b(4))]),
        ("sured.b.add.2d.trap.u32 [surf0, {%r1, %r2}], %r3;", vec![at(Tex, 0, b(4))]),
        // ---- wmma -------------------------------------------------------------------------
        (
            "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1], %r9;",
            vec![rd(Global, 1, UNKNOWN)],
        ),
        (
            "wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 [%r1], {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, %r2;",
            vec![wr(Shared, 0, UNKNOWN)],
        ),
        // ---- tensor maps, fences, tcgen05, cluster launch control ---------------------------
        ("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r1], %rd1;", vec![wr(SharedCta, 0, b(128))]),
        ("tensormap.replace.tile.box_dim.global.b1024.b32 [%rd1], 1, %r1;", vec![wr(Global, 0, b(128))]),
        (
            "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd1], [%r1], 128;",
            vec![wr(Global, 0, b(128)), rd(SharedCta, 1, b(128))],
        ),
        ("fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;", vec![pf(Generic, 0, b(128))]),
        ("fence.proxy.tensormap::generic.release.gpu;", vec![]),
        ("fence.proxy.async.shared::cta;", vec![]),
        ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;", vec![wr(SharedCta, 0, b(4))]),
        ("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r1];", vec![at(SharedCluster, 0, b(8))]),
        ("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1, 32;", vec![]),
        ("tcgen05.ld.sync.aligned.16x64b.x2.b32 {%r1, %r2}, [%r3];", vec![]),
        (
            "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r1], [%r2];",
            vec![wr(SharedCta, 0, b(16)), at(SharedCta, 1, b(8))],
        ),
        // ---- no memory ------------------------------------------------------------------
        ("add.s32 %r1, %r2, %r3;", vec![]),
        ("mov.u64 %rd1, %rd2;", vec![]),
        ("mov.u64 %rd1, smem;", vec![]),
        ("bra $L__BB0_1;", vec![]),
        (
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1, 1, 1, 0, 0;",
            vec![],
        ),
        ("wgmma.fence.sync.aligned;", vec![]),
        ("cvta.to.global.u64 %rd1, %rd2;", vec![]),
        ("cvta.shared.u64 %rd1, %rd2;", vec![]),
        ("isspacep.shared %p1, %rd1;", vec![]),
        ("mapa.shared::cluster.u32 %r1, %r2, %r3;", vec![]),
        ("getctarank.shared::cluster.u32 %r1, %r2;", vec![]),
        ("alloca.u64 %rd1, %rd2, 16;", vec![]),
        ("stacksave.u64 %rd1;", vec![]),
        ("stackrestore.u64 %rd1;", vec![]),
        ("bar.sync 0;", vec![]),
        ("barrier.cluster.arrive.relaxed.aligned;", vec![]),
        ("fence.sc.gpu;", vec![]),
        ("membar.gl;", vec![]),
        ("txq.width.b32 %r1, [tex0];", vec![]),
        ("createpolicy.fractional.L2::evict_last.b64 %rd1, 0f3E800000;", vec![]),
        ("shfl.sync.idx.b32 %r1|%p1, %r2, %r3, 31, -1;", vec![]),
        ("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2}, {%r3}, {%f5, %f6, %f7, %f8};", vec![]),
    ]
}

#[test]
fn memory_access_table() {
    let cases = memory_cases();
    let mut failures = Vec::new();
    let mut distinct = std::collections::HashSet::new();
    for (text, expected) in &cases {
        assert!(distinct.insert(*text), "duplicate case `{text}`");
        let inst = parse_inst(text);
        let got: Vec<MemAccess> = memory_accesses(&inst).into_iter().collect();
        if got != *expected {
            failures.push(format!("{text}\n    expected {expected:?}\n    got      {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases wrong:\n{}", failures.len(), cases.len(), failures.join("\n"));
    assert!(cases.len() >= 50, "only {} cases", cases.len());
}

/// Every access names a bracketed operand, handle-addressed ones a composite `[h, {…}]`.
#[test]
fn accesses_point_at_address_operands() {
    for (text, _) in memory_cases() {
        let inst = parse_inst(text);
        for a in memory_accesses(&inst) {
            match (a.space, a.address(&inst)) {
                (Space::Tex, Operand::AddressList(_)) => {}
                (Space::Tex, other) => panic!("`{text}`: tex access through {other:?}"),
                (_, Operand::Address { .. }) => {}
                (_, other) => panic!("`{text}`: access through {other:?}"),
            }
            if let Width::Operand(i) | Width::AtMost { operand: i, .. } = a.width {
                assert!(i < inst.operands.len(), "`{text}`: size operand {i} out of range");
                assert!(!matches!(inst.operands[i], Operand::Address { .. }), "`{text}`: size operand is an address");
            }
        }
    }
}

/// Without brackets there is no address: malformed forms give no access rather than one
/// pointing at a register or past the operands.
#[test]
fn no_access_without_an_address_operand() {
    for text in
        ["ld.global.u32 %r1, %rd1;", "st.global.u32 %rd1, %r1;", "atom.global.add.u32 %r1;", "prefetch.global.L2;"]
    {
        assert!(memory_accesses(&parse_inst(text)).is_empty(), "`{text}`");
    }
}

#[test]
fn built_instructions_are_classified_too() {
    let i =
        Instruction::new("ld", &["global", "nc", "v2", "u32"], vec![Operand::reg("%r1"), Operand::address("%rd1", 8)]);
    let got: Vec<_> = memory_accesses(&i).into_iter().collect();
    assert_eq!(got, vec![rd(Space::Global, 1, b(8))]);
    assert_eq!(memory_accesses(&i)[0].address(&i), &Operand::address("%rd1", 8));
}

#[test]
fn cvta_conversions() {
    use Conversion::*;
    use Space::*;
    let cases: &[(&str, Option<Conversion>)] = &[
        ("cvta.to.global.u64 %rd1, %rd2;", Some(FromGeneric(Global))),
        ("cvta.global.u64 %rd1, %rd2;", Some(ToGeneric(Global))),
        ("cvta.shared.u64 %rd1, %rd2;", Some(ToGeneric(Shared))),
        ("cvta.to.shared.u32 %r1, %rd2;", Some(FromGeneric(Shared))),
        ("cvta.shared::cta.u64 %rd1, smem;", Some(ToGeneric(SharedCta))),
        ("cvta.to.shared::cluster.u32 %r1, %rd2;", Some(FromGeneric(SharedCluster))),
        ("cvta.local.u64 %rd1, %rd2;", Some(ToGeneric(Local))),
        ("cvta.to.local.u64 %rd1, %rd2;", Some(FromGeneric(Local))),
        ("cvta.const.u64 %rd1, %rd2;", Some(ToGeneric(Const))),
        ("cvta.to.const.u64 %rd1, %rd2;", Some(FromGeneric(Const))),
        ("cvta.param.u64 %rd1, p;", Some(ToGeneric(Param))),
        ("cvta.to.param::entry.u64 %rd1, %rd2;", Some(FromGeneric(Param))),
        ("mov.u64 %rd1, %rd2;", None),
        ("isspacep.global %p1, %rd1;", None),
        ("ld.global.u64 %rd1, [%rd2];", None),
    ];
    for (text, expected) in cases {
        assert_eq!(address_conversion(&parse_inst(text)), *expected, "`{text}`");
    }
}

#[test]
fn isspacep_tests() {
    use Space::*;
    let cases: &[(&str, Option<Space>)] = &[
        ("isspacep.global %p1, %rd1;", Some(Global)),
        ("isspacep.shared %p1, %rd1;", Some(Shared)),
        ("isspacep.shared::cta %p1, %rd1;", Some(SharedCta)),
        ("isspacep.shared::cluster %p1, %rd1;", Some(SharedCluster)),
        ("isspacep.local %p1, %rd1;", Some(Local)),
        ("isspacep.const %p1, %rd1;", Some(Const)),
        ("isspacep.param %p1, %rd1;", Some(Param)),
        ("isspacep.param::entry %p1, %rd1;", Some(Param)),
        ("cvta.to.global.u64 %rd1, %rd2;", None),
        ("setp.ne.s32 %p1, %r1, 0;", None),
    ];
    for (text, expected) in cases {
        assert_eq!(space_test(&parse_inst(text)), *expected, "`{text}`");
    }
}

#[test]
fn type_widths() {
    let cases: &[(&str, Option<u32>)] = &[
        ("b8", Some(1)),
        ("s8", Some(1)),
        ("u16", Some(2)),
        ("f16", Some(2)),
        ("bf16", Some(2)),
        ("u32", Some(4)),
        ("f32", Some(4)),
        ("f16x2", Some(4)),
        ("bf16x2", Some(4)),
        ("e4m3x4", Some(4)),
        ("s64", Some(8)),
        ("f64", Some(8)),
        ("b128", Some(16)),
        ("pred", None),
        ("v4", None),
        ("global", None),
        ("b1024", None),
        ("", None),
    ];
    for (ty, w) in cases {
        assert_eq!(type_width(ty), *w, "type_width({ty:?})");
    }
}

// ---- definitions and uses ---------------------------------------------------------------

fn names(inst: &Instruction, each: fn(&Instruction, &mut dyn FnMut(gpusan_ptx::ast::Name))) -> Vec<String> {
    let mut out = Vec::new();
    each(inst, &mut |n| out.push(n.to_string()));
    out
}

fn defs(inst: &Instruction) -> Vec<String> {
    names(inst, |i, f| for_each_def(i, f))
}

fn uses(inst: &Instruction) -> Vec<String> {
    names(inst, |i, f| for_each_use(i, f))
}

/// Instruction text → (has_destination, defs, uses).
#[test]
fn defs_and_uses() {
    let cases: &[(&str, bool, &[&str], &[&str])] = &[
        ("st.global.u32 [%rd1+4], %r1;", false, &[], &["%rd1", "%r1"]),
        ("st.param.b64 [param0], %rd1;", false, &[], &["param0", "%rd1"]),
        ("st.global.v2.f32 [%rd1], {%f1, %f2};", false, &[], &["%rd1", "%f1", "%f2"]),
        ("atom.global.cas.b32 %r1, [%rd1], %r2, %r3;", true, &["%r1"], &["%rd1", "%r2", "%r3"]),
        ("red.global.add.u32 [%rd1], %r1;", false, &[], &["%rd1", "%r1"]),
        ("call.uni (retval0), foo, (param0, param1);", false, &["retval0"], &["foo", "param0", "param1"]),
        ("call.uni foo, (param0);", false, &[], &["foo", "param0"]),
        ("call.uni foo;", false, &[], &["foo"]),
        ("call (retval0), %rd1, (param0), proto0;", false, &["retval0"], &["%rd1", "param0", "proto0"]),
        ("setp.lt.s32 %p1|%p2, %r1, %r2;", true, &["%p1", "%p2"], &["%r1", "%r2"]),
        ("setp.eq.and.s32 %p1, %r1, %r2, !%p2;", true, &["%p1"], &["%r1", "%r2", "%p2"]),
        ("ld.global.v4.f32 {%f1, %f2, _, %f4}, [%rd1];", true, &["%f1", "%f2", "%f4"], &["%rd1"]),
        ("ld.shared.u32 %r1, [smem+8];", true, &["%r1"], &["smem"]),
        (
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1, 1, 1, 0, 0;",
            true,
            &["%f1", "%f2", "%f3", "%f4"],
            &["%f1", "%f2", "%f3", "%f4", "%rd1", "%rd2", "%p1"],
        ),
        ("wgmma.fence.sync.aligned;", false, &[], &[]),
        ("wgmma.wait_group.sync.aligned 0;", false, &[], &[]),
        (
            "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2}, {%r3}, {%f5, %f6, %f7, %f8};",
            true,
            &["%f1", "%f2", "%f3", "%f4"],
            &["%r1", "%r2", "%r3", "%f5", "%f6", "%f7", "%f8"],
        ),
        ("@%p1 add.s32 %r1, %r2, %r3;", true, &["%r1"], &["%p1", "%r2", "%r3"]),
        ("@!%p2 bra $L__BB0_3;", false, &[], &["%p2", "$L__BB0_3"]),
        ("@%p3 st.shared.u32 [%r1], %r2;", false, &[], &["%p3", "%r1", "%r2"]),
        ("mbarrier.arrive.shared.b64 %rd1, [%r1];", true, &["%rd1"], &["%r1"]),
        ("mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%r1], %r2;", true, &[], &["%r1", "%r2"]),
        ("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;", true, &["%p1"], &["%r1", "%r2"]),
        ("mbarrier.init.shared.b64 [%r1], %r2;", false, &[], &["%r1", "%r2"]),
        ("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], %r2;", false, &[], &["%r1", "%r2"]),
        ("mbarrier.pending_count.b64 %r1, %rd1;", true, &["%r1"], &["%rd1"]),
        ("mov.u32 %r1, %tid.x;", true, &["%r1"], &["%tid.x"]),
        ("shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;", true, &["%r1", "%p1"], &["%r2"]),
        ("cp.async.cg.shared.global [%r1], [%rd1], 16;", false, &[], &["%r1", "%rd1"]),
        ("cp.async.wait_group 0;", false, &[], &[]),
        ("prefetch.global.L2 [%rd1];", false, &[], &["%rd1"]),
        ("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r1], {%r2, %r3};", false, &[], &["%r1", "%r2", "%r3"]),
        ("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r2, %r3}, [%r1];", true, &["%r2", "%r3"], &["%r1"]),
        ("bar.red.popc.u32 %r1, 0, %p1;", true, &["%r1"], &["%p1"]),
        ("bar.sync 0;", false, &[], &[]),
        ("ret;", false, &[], &[]),
        (
            "wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd1], {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, %r1;",
            false,
            &[],
            &["%rd1", "%f1", "%f2", "%f3", "%f4", "%f5", "%f6", "%f7", "%f8", "%r1"],
        ),
        ("wmma.load.c.sync.aligned.row.m16n16k16.global.f32 {%f1, %f2}, [%rd1];", true, &["%f1", "%f2"], &["%rd1"]),
        ("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1, 32;", false, &[], &["%r1"]),
        ("tcgen05.ld.sync.aligned.16x64b.x2.b32 {%r1, %r2}, [%r3];", true, &["%r1", "%r2"], &["%r3"]),
        ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;", false, &[], &["%r1"]),
        ("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p1, %q1;", true, &["%p1"], &["%q1"]),
        ("multimem.ld_reduce.relaxed.gpu.global.add.u32 %r1, [%rd1];", true, &["%r1"], &["%rd1"]),
        ("multimem.st.relaxed.gpu.global.b32 [%rd1], %r1;", false, &[], &["%rd1", "%r1"]),
        ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [tex0, {%f5, %f6}];", true, &["%f1", "%f2", "%f3", "%f4"], &["tex0", "%f5", "%f6"]),
        ("cvta.to.global.u64 %rd1, %rd2;", true, &["%rd1"], &["%rd2"]),
    ];
    let mut failures = Vec::new();
    for (text, has_dest, d, u) in cases {
        let inst = parse_inst(text);
        let got = (has_destination(&inst), defs(&inst), uses(&inst));
        let want = (*has_dest, d.iter().map(|s| s.to_string()).collect(), u.iter().map(|s| s.to_string()).collect());
        if got != want {
            failures.push(format!("{text}\n    expected {want:?}\n    got      {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases wrong:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

// ---- the corpus ------------------------------------------------------------------------

/// Opcodes that always reach memory through an address operand.
const MEMORY_OPCODES: &[&str] = &["ld", "ldu", "st", "atom", "red", "ldmatrix", "stmatrix", "prefetch", "prefetchu"];

/// Over every instruction nvcc wrote in the corpus: loads, stores and atomics all have an
/// access through a bracketed operand, and nothing else but the known families does.
#[test]
fn corpus_instructions_are_classified() {
    let files = common::corpus_files();
    assert!(!files.is_empty(), "no PTX corpus: run scripts/build-corpus.sh");
    let mut checked = 0usize;
    let mut unparsed = 0usize;
    let mut failures = Vec::new();
    for path in &files {
        let src = std::fs::read_to_string(path).unwrap();
        // Parse failures are the round-trip test's to report.
        let Ok(module) = gpusan_ptx::parse(&src) else {
            unparsed += 1;
            continue;
        };
        let mut visit = |inst: &Instruction| {
            let accesses = memory_accesses(inst);
            let must = MEMORY_OPCODES.contains(&inst.opcode.as_str());
            let may = must
                || matches!(
                    inst.opcode.as_str(),
                    "cp" | "mbarrier"
                        | "wmma"
                        | "multimem"
                        | "tex"
                        | "tld4"
                        | "suld"
                        | "sust"
                        | "sured"
                        | "fence"
                        | "tensormap"
                        | "applypriority"
                        | "discard"
                        | "tcgen05"
                        | "clusterlaunchcontrol"
                );
            if (must && accesses.is_empty()) || (!may && !accesses.is_empty()) {
                failures.push(format!("{}: {} {:?} → {accesses:?}", path.display(), inst.mnemonic(), inst.operands));
            }
            for a in &accesses {
                if !matches!(a.address(inst), Operand::Address { .. } | Operand::AddressList(_)) {
                    failures.push(format!("{}: {} access through a non-address", path.display(), inst.mnemonic()));
                }
                if a.width == Width::Unknown && !matches!(inst.opcode.as_str(), "wmma" | "cp") {
                    failures.push(format!("{}: {} has no width", path.display(), inst.mnemonic()));
                }
            }
            checked += 1;
        };
        for item in &module.items {
            if let Item::Function(f) = item {
                for_each_inst(f.body.as_deref().unwrap_or(&[]), &mut visit);
            }
        }
    }
    failures.truncate(40);
    assert!(failures.is_empty(), "misclassified:\n{}", failures.join("\n"));
    eprintln!("{checked} instructions of {} files checked, {unparsed} files unparsed", files.len());
    assert!(unparsed * 2 < files.len(), "{unparsed} of {} corpus files do not parse", files.len());
    assert!(checked > 1000, "only {checked} instructions checked");
}

fn for_each_inst(stmts: &[Statement], f: &mut impl FnMut(&Instruction)) {
    for s in stmts {
        match s {
            Statement::Inst(i) => f(i),
            Statement::Block(b) => for_each_inst(b, f),
            _ => {}
        }
    }
}
