//! The block-wide lookup of kernel-parameter roots: one lookup per block, shared through
//! shared memory.

use std::collections::{BTreeMap, HashSet};

use gpusan_ptx::ast::{Function, FunctionKind, Name};

use super::loadmeta::{found_nothing, loadmeta};
use super::module::ModuleFacts;
use super::plan::{Layout, Root, BLOCK_META_BYTES};
use super::roots::RootAnalysis;

/// The roots looked up once per block: root number → the kernel parameter (and offset in
/// it) the root is loaded from. Their slots in `__gs_meta` are in this order.
pub(super) type BlockRoots = BTreeMap<usize, (Name, i64)>;

/// The roots of kernel `f` loaded from its parameters, up to [`MAX_BLOCK_ROOTS`], when the
/// shared memory their metadata takes fits (none in a module with dynamic shared memory or
/// the device heap, or in a `.func`).
pub(super) fn select(
    f: &Function,
    analysis: &RootAnalysis,
    roots: &BTreeMap<Root, usize>,
    facts: &ModuleFacts,
) -> BlockRoots {
    let mut block_roots = BlockRoots::new();
    if f.kind != FunctionKind::Entry || facts.dynamic_shared || facts.uses_heap {
        return block_roots;
    }
    let params: HashSet<Name> = f.params.iter().flatten().map(|p| p.name).collect();
    for (root, &k) in roots {
        let Root::Inst(d, _) = *root else { continue };
        let inst = analysis.insts[d.index()];
        if inst.opcode.as_str() != "ld" || inst.modifiers().next() != Some("param") {
            continue;
        }
        if let Some((Some(p), off)) = inst.operands.get(1).and_then(|o| o.as_address()) {
            if params.contains(&p) && block_roots.len() < MAX_BLOCK_ROOTS {
                block_roots.insert(k, (p, off));
            }
        }
    }
    let fits =
        |n: usize| facts.static_shared_bytes.is_some_and(|b| b + BLOCK_META_BYTES * n as u64 <= STATIC_SHARED_LIMIT);
    if !fits(block_roots.len()) {
        block_roots.clear();
    }
    block_roots
}

/// Static shared memory the pass may add per kernel, and the static total it stays under
/// (48 KiB is the most a block may declare statically; `BLOCK_META_BYTES` a root).
pub(super) const MAX_BLOCK_ROOTS: usize = 16;
pub(super) const STATIC_SHARED_LIMIT: u64 = 40 * 1024;

/// The block-wide lookup of kernel-parameter roots, at the top of a kernel: the first
/// `L = min(32, threads in the block)` threads, all in warp 0, share the roots out (thread
/// `r` takes roots `r`, `r + L`, …), each loads its parameter and runs LOADMETA for it, and
/// stores the metadata in shared memory (32 bytes a root); the block waits for it at a
/// barrier. At the root's definition every thread then reads the metadata back
/// ([`fetch_block_meta`]) instead of searching the table: a kernel parameter has one value
/// for the whole grid, so one lookup per block is exact, and it spares every other warp the
/// search (the cost `bench/lookup` measures).
///
/// Why lanes and not thread 0 alone: the lookups are chains of dependent loads, and a
/// kernel with many small blocks (a stencil launches 262,144 of 256 threads) waits for the
/// chain in every block. Lanes of one warp run one instruction stream, so the lookups of
/// all roots overlap and the block waits for one chain, not one per root. The parameter is
/// picked by predicated loads, not by a branch per root, which would serialize the lanes
/// again.
///
/// The barrier is the kernel's first instruction, which every thread of the block runs.
///
/// Why not per warp (each warp's lanes look the roots up and `shfl.sync` them to all lanes,
/// no barrier, no shared memory): every warp then waits for its own chain of loads, and the
/// stencil ran 0.84 ms against 0.43 ms with this lookup and 0.24 ms natively
/// (`bench/results/prologue-ab-warp.json`); ptxas also gave it 52 registers against 32.
///
/// Why not a search by all lanes together when the table is short (lane `i` loads entry `i`
/// with the length, a vote per root, the winner's entry shuffled to all): one round of
/// loads less, but the votes and shuffles per root made the chain longer, and the stencil
/// ran 0.50 ms against 0.44 (`bench/results/prologue-ab-small.json`).
pub(super) fn block_lookup(roots: &BTreeMap<usize, (Name, i64)>, label: &mut dyn FnMut() -> String) -> String {
    let (done, next) = (label(), label());
    let n = roots.len();
    // The linear thread index r = (tid.z * ntid.y + tid.y) * ntid.x + tid.x, and L.
    let mut t = format!(
        "\t.reg .b64 %__gs_pv;\n\
         \t.shared .align 16 .b8 __gs_meta[{}];\n\
         \tmov.u32 %__gs_k, %ntid.x;\n\
         \tmov.u32 %__gs_c, %ntid.y;\n\
         \tmul.lo.u32 %__gs_i, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %ntid.z;\n\
         \tmul.lo.u32 %__gs_i, %__gs_i, %__gs_c;\n\
         \tmin.u32 %__gs_i, %__gs_i, 32;\n\
         \tmov.u32 %__gs_k, %tid.z;\n\
         \tmov.u32 %__gs_c, %ntid.y;\n\
         \tmul.lo.u32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %tid.y;\n\
         \tadd.s32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %ntid.x;\n\
         \tmul.lo.u32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tmov.u32 %__gs_c, %tid.x;\n\
         \tadd.s32 %__gs_k, %__gs_k, %__gs_c;\n\
         \tsetp.ge.u32 %__gs_q, %__gs_k, %__gs_i;\n\
         \t@%__gs_q bra {done};\n\
         \tsetp.ge.u32 %__gs_q, %__gs_k, {n};\n\
         \t@%__gs_q bra {done};\n\
         {next}:\n",
        BLOCK_META_BYTES * n as u64
    );
    for (slot, &(param, offset)) in roots.values().enumerate() {
        if slot == 0 {
            t.push_str(&format!("\tld.param.u64 %__gs_pv, [{param}+{offset}];\n"));
        } else {
            t.push_str(&format!(
                "\tsetp.eq.u32 %__gs_q, %__gs_k, {slot};\n\t@%__gs_q ld.param.u64 %__gs_pv, [{param}+{offset}];\n"
            ));
        }
    }
    // One set of per-root registers does for all: the metadata goes to shared memory, and
    // every root's registers are reset after the barrier.
    let k = *roots.keys().next().expect("a block lookup has roots");
    t.push_str(&loadmeta(k, "%__gs_pv", Layout::Folded, label));
    t.push_str(&format!(
        "\tmov.u32 %__gs_c, __gs_meta;\n\
         \tmad.lo.u32 %__gs_c, %__gs_k, {BLOCK_META_BYTES}, %__gs_c;\n\
         \tst.shared.v2.u64 [%__gs_c], {{%__gs_low{k}, %__gs_lim{k}}};\n\
         \tst.shared.u64 [%__gs_c+16], %__gs_id{k};\n\
         \tadd.s32 %__gs_k, %__gs_k, %__gs_i;\n\
         \tsetp.lt.u32 %__gs_q, %__gs_k, {n};\n\
         \t@%__gs_q bra {next};\n\
         {done}:\n\tbar.sync 0;\n"
    ));
    for &k in roots.keys() {
        t.push_str(&found_nothing(k, Layout::Folded));
    }
    t
}

/// Root `k`'s bounds from slot `slot` of the block-wide lookup; its id stays there for
/// the record writer ([`Blame::Root`](super::records::Blame::Root)).
pub(super) fn fetch_block_meta(k: usize, slot: usize) -> String {
    let at = BLOCK_META_BYTES as usize * slot;
    format!("\tld.shared.v2.u64 {{%__gs_low{k}, %__gs_lim{k}}}, [__gs_meta+{at}];\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_lookup_spreads_roots_over_lanes_without_branching_per_root() {
        let roots: BTreeMap<usize, (Name, i64)> =
            [(0, ("k_param_0".into(), 0)), (1, ("k_param_1".into(), 0)), (2, ("k_param_2".into(), 8))].into();
        let text = block_lookup(&roots, &mut {
            let mut n = 0;
            move || {
                n += 1;
                format!("$__gs_L{n}")
            }
        });
        // One LOADMETA for all roots, each parameter picked by a predicated load.
        assert_eq!(text.matches("ld.const.u64 %__gs_t, [__gpusan_table];").count(), 1);
        assert!(text.contains("ld.param.u64 %__gs_pv, [k_param_0+0];"));
        assert!(text.contains("setp.eq.u32 %__gs_q, %__gs_k, 2;\n\t@%__gs_q ld.param.u64 %__gs_pv, [k_param_2+8];"));
        // At most 32 lanes, looping when the block has fewer threads than roots.
        assert!(text.contains("min.u32 %__gs_i, %__gs_i, 32;"));
        assert!(text.contains("add.s32 %__gs_k, %__gs_k, %__gs_i;\n\tsetp.lt.u32 %__gs_q, %__gs_k, 3;"));
        assert!(text.contains(&format!("mad.lo.u32 %__gs_c, %__gs_k, {BLOCK_META_BYTES}, %__gs_c;")));
        assert!(text.ends_with("\tbar.sync 0;\n\tmov.b64 %__gs_low0, 0;\n\tmov.b64 %__gs_lim0, -1;\n\tmov.b64 %__gs_low1, 0;\n\tmov.b64 %__gs_lim1, -1;\n\tmov.b64 %__gs_low2, 0;\n\tmov.b64 %__gs_lim2, -1;\n"), "{text}");
    }
}
