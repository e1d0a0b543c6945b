//! `canary_heap`: tail canaries for the device heap in `--mode canary`, the one rewrite
//! that mode makes, and only to modules whose kernels call `malloc` or `free`.
//!
//! Canary mode touches no kernel: the guard scans canaries past allocations the host made.
//! The device heap is carved up by the kernels themselves, so its blocks exist only on the
//! device; the host cannot place a canary past them. In a module with PTX, every call to
//! `malloc` and `free` is renamed to a function this pass appends:
//!
//! - **`__gpusan_canary_malloc(n)`** asks `malloc` for `n` + [`CANARY_BYTES`] (a size of 0,
//!   or one so large that the sum wraps, is asked as it is and gets no canary), writes the
//!   canary into the [`CANARY_BYTES`] after the first `n` (byte by byte: `n` may be any
//!   size), records {base, `n`} in the module's table ([`TABLE_SYMBOL`]), and returns
//!   `malloc`'s own pointer, so that whatever frees it (this module, another, machine code)
//!   frees what `malloc` returned.
//! - **`__gpusan_canary_free(p)`** looks `p` up in the table. A block of this module's has
//!   its canary compared; if any byte differs, a record ({base, size, first differing
//!   offset past the end, bytes differing}) goes to the buffer [`ERRORS_SYMBOL`] points to
//!   (mapped host memory the guard reads; no record when it is null). The entry is marked
//!   freed, then `free(p)` is called, as the program asked.
//!
//! The canary is keyed by the block's base and size and the run's secret
//! ([`SECRET_SYMBOL`], set by the runtime after the load; GMOD's Eq. 1–3 in spirit): byte
//! `i` is byte `i % 8` of [`gpusan_abi::canary::heap::heap_key`]`(secret, base, n)`, which the
//! runtime computes alike to show what was expected.
//!
//! The table ([`TABLE_SYMBOL`], [`TABLE_ENTRIES`] entries of 16 bytes: base, size) is an
//! open-addressing hash over at most [`PROBES`] slots from the Fibonacci hash of
//! `base >> 4`. Keys are never removed: a base `malloc` hands out again reuses its entry,
//! so entries are bounded by the distinct bases. A freed entry's size is [`FREED`].
//!
//! # Limits
//!
//! - Overflows are found when the block is freed through a module gpusan rewrote, not
//!   periodically: a block never freed, or freed by machine code, is not judged.
//! - Blocks of a module that has no PTX (machine code only) get no canary.
//! - A block allocated here and freed by machine code leaves its entry; if machine code
//!   then allocates a block at the same base and this module frees it, the old size is
//!   used (a mixed heap across PTX and machine-code modules; not seen in practice).
//! - A full table (its [`PROBES`] slots taken) leaves a block without an entry: its
//!   canary is written but never compared.

use gpusan_abi::canary::heap as abi;
use gpusan_ptx::ast::{Function, Item, Name, Operand, Statement};
use gpusan_ptx::Module;

use crate::{FunctionReport, Pass, PassError, PassReport};

pub use abi::{CANARY_BYTES, ERRORS_SYMBOL, FREED, PROBES, SECRET_SYMBOL, TABLE_ENTRIES, TABLE_SYMBOL};

/// The functions the calls are renamed to.
pub const MALLOC: &str = "__gpusan_canary_malloc";
pub const FREE: &str = "__gpusan_canary_free";

/// The pass as a [`Pass`] object, for [`crate::instrument`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CanaryHeap;

impl Pass for CanaryHeap {
    fn name(&self) -> &'static str {
        "canary_heap"
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        run(module)
    }
}

/// Whether the kernels of `module` call the device heap: only such a module is rewritten.
pub fn uses_heap(module: &Module) -> bool {
    module.items.iter().any(|i| match i {
        Item::Function(f) => f.body.as_deref().is_some_and(calls_heap),
        _ => false,
    })
}

fn calls_heap(stmts: &[Statement]) -> bool {
    stmts.iter().any(|s| match s {
        Statement::Inst(i) => heap_callee(i).is_some(),
        Statement::Block(b) => calls_heap(b),
        _ => false,
    })
}

/// The callee operand of a call to `malloc` or `free`, with the function it becomes.
fn heap_callee(i: &gpusan_ptx::ast::Instruction) -> Option<(usize, &'static str)> {
    if i.opcode != "call" {
        return None;
    }
    // `call (ret), f, (args);` or `call f, (args);`
    let at = usize::from(matches!(i.operands.first(), Some(Operand::List(_))));
    match i.operands.get(at) {
        Some(Operand::Name(n)) if n.as_str() == "malloc" => Some((at, MALLOC)),
        Some(Operand::Name(n)) if n.as_str() == "free" => Some((at, FREE)),
        _ => None,
    }
}

/// Renames every call to `malloc` and `free` in `stmts`; returns how many.
fn rename(stmts: &mut [Statement]) -> u32 {
    let mut n = 0;
    for s in stmts {
        match s {
            Statement::Inst(i) => {
                if let Some((at, to)) = heap_callee(i) {
                    i.operands[at] = Operand::Name(Name::from(to));
                    n += 1;
                }
            }
            Statement::Block(b) => n += rename(b),
            _ => {}
        }
    }
    n
}

/// Rewrites a module that calls the device heap (see the module's comment); leaves any
/// other as it is. The report lists each function with the calls renamed in it.
pub fn run(module: &mut Module) -> Result<PassReport, PassError> {
    if !uses_heap(module) {
        return Ok(PassReport::default());
    }
    let taken = [MALLOC, FREE, TABLE_SYMBOL, SECRET_SYMBOL, ERRORS_SYMBOL];
    for item in &module.items {
        let name = match item {
            Item::Function(f) => Some(f.name),
            Item::Var(v) => Some(v.name),
            _ => None,
        };
        if let Some(n) = name.filter(|n| taken.contains(&n.as_str())) {
            return Err(PassError::new(format!("the module declares `{n}` already: instrumented twice?")));
        }
    }
    let mut report = PassReport::default();
    for item in module.items.iter_mut() {
        if let Item::Function(f) = item {
            let Some(body) = f.body.as_mut() else { continue };
            let renamed = rename(body);
            if renamed > 0 {
                report.functions.push(FunctionReport { name: f.name, kind: f.kind, sites: renamed, inserted: 0 });
            }
        }
    }
    let support =
        gpusan_ptx::parse(&support_ptx()).map_err(|e| PassError::new(format!("its own PTX does not parse: {e}")))?;
    let mut declarations = Vec::new();
    let mut definitions = Vec::new();
    for item in support.items {
        match item {
            Item::Var(v) => declarations.push(Item::Var(v)),
            Item::Function(f) => {
                declarations.push(Item::Function(Box::new(Function { body: None, ..(*f).clone() })));
                definitions.push(Item::Function(f));
            }
            _ => {}
        }
    }
    // Declared before the first function with a body (a call must follow its callee's
    // declaration), so after `malloc`'s and `free`'s own `.extern` declarations, which the
    // new functions call: the extern declarations the module lacks are added with them.
    let first_function = module
        .items
        .iter()
        .position(|i| matches!(i, Item::Function(f) if f.body.is_some()))
        .unwrap_or(module.items.len());
    let declared = |name: &str, items: &[Item]| {
        items.iter().any(|i| matches!(i, Item::Function(f) if f.name.as_str() == name && f.body.is_none()))
    };
    let externs = gpusan_ptx::parse(EXTERNS).map_err(|e| PassError::new(e.to_string()))?;
    let mut head: Vec<Item> = externs
        .items
        .into_iter()
        .filter(|i| matches!(i, Item::Function(f) if !declared(f.name.as_str(), &module.items)))
        .collect();
    head.extend(declarations);
    module.items.splice(first_function..first_function, head);
    module.items.extend(definitions);
    Ok(report)
}

/// `malloc` and `free` as nvcc declares them.
const EXTERNS: &str = ".version 7.0\n.target sm_50\n.address_size 64\n\
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);\n\
.extern .func free(.param .b64 free_param_0);\n";

/// The table, the secret, the errors pointer and the two functions, as a module of their
/// own (parsed, then moved into the module rewritten). Branches and calls are plain
/// (`bra`, `call`): each thread's block is its own, so a warp may diverge anywhere here.
pub fn support_ptx() -> String {
    let entries = TABLE_ENTRIES;
    let bits = entries.trailing_zeros();
    let table_bytes = entries * 16;
    let probes = PROBES;
    let canary = CANARY_BYTES;
    let freed = FREED;
    let rec = abi::RECORD_BYTES;
    let cap = abi::RECORDS;
    let head = abi::HEADER_BYTES;
    let shift = 64 - bits;
    // The key (murmur3's fmix64 of secret ^ base ^ n·φ), into %hk from %hs, %hp, %hn.
    let key = "\tmul.lo.u64 \t%hk, %hn, 0x9E3779B97F4A7C15;\n\
               \txor.b64 \t%hk, %hk, %hp;\n\txor.b64 \t%hk, %hk, %hs;\n\
               \tshr.u64 \t%ht, %hk, 33;\n\txor.b64 \t%hk, %hk, %ht;\n\tmul.lo.u64 \t%hk, %hk, 0xFF51AFD7ED558CCD;\n\
               \tshr.u64 \t%ht, %hk, 33;\n\txor.b64 \t%hk, %hk, %ht;\n\tmul.lo.u64 \t%hk, %hk, 0xC4CEB9FE1A85EC53;\n\
               \tshr.u64 \t%ht, %hk, 33;\n\txor.b64 \t%hk, %hk, %ht;\n";
    // The first slot of %hp's probe sequence, into %ha (its address) and %hi (probes left).
    let slot = format!(
        "\tshr.u64 \t%ht, %hp, 4;\n\tmul.lo.u64 \t%ht, %ht, 0x9E3779B97F4A7C15;\n\tshr.u64 \t%ht, %ht, {shift};\n\
         \tshl.b64 \t%ht, %ht, 4;\n\tmov.u64 \t%ha, {TABLE_SYMBOL};\n\tadd.u64 \t%ha, %ha, %ht;\n\
         \tmov.u32 \t%hi, {probes};\n"
    );
    // The next slot, wrapping at the table's end.
    let next = format!(
        "\tadd.u64 \t%ha, %ha, 16;\n\tmov.u64 \t%ht, {TABLE_SYMBOL};\n\tadd.u64 \t%ht, %ht, {table_bytes};\n\
         \tsetp.ge.u64 \t%hq, %ha, %ht;\n\t@%hq mov.u64 \t%ha, {TABLE_SYMBOL};\n\tsub.u32 \t%hi, %hi, 1;\n"
    );
    let regs = ".reg .b64 \t%hn, %hp, %hk, %ht, %ha, %hc, %hs, %he, %hb;\n\t.reg .b32 \t%hi, %hj, %hd, %hf, %hg;\n\t.reg .pred \t%hq, %hr;\n";
    format!(
        ".version 7.0\n.target sm_50\n.address_size 64\n\
.global .align 16 .b8 {TABLE_SYMBOL}[{table_bytes}];\n\
.visible .global .align 8 .u64 {SECRET_SYMBOL};\n\
.visible .global .align 8 .u64 {ERRORS_SYMBOL};\n\
.func (.param .b64 __gpusan_r) {MALLOC}(.param .b64 __gpusan_n)\n{{\n\t{regs}\
\tld.param.b64 \t%hn, [__gpusan_n];\n\tadd.u64 \t%ht, %hn, {canary};\n\
\tsetp.le.u64 \t%hr, %ht, {canary};\n\t@%hr mov.u64 \t%ht, %hn;\n\
\t{{\n\t.param .b64 __gpusan_p0;\n\tst.param.b64 \t[__gpusan_p0], %ht;\n\t.param .b64 __gpusan_r0;\n\
\tcall (__gpusan_r0), malloc, (__gpusan_p0);\n\tld.param.b64 \t%hp, [__gpusan_r0];\n\t}}\n\
\tsetp.eq.u64 \t%hq, %hp, 0;\n\t@%hq bra \t$__gh_done;\n\t@%hr bra \t$__gh_done;\n\
\tld.global.u64 \t%hs, [{SECRET_SYMBOL}];\n{key}\
\tadd.u64 \t%hc, %hp, %hn;\n\tmov.u32 \t%hj, 0;\n\
$__gh_fill:\n\tand.b32 \t%hd, %hj, 7;\n\tshl.b32 \t%hd, %hd, 3;\n\tshr.u64 \t%ht, %hk, %hd;\n\
\tst.u8 \t[%hc], %ht;\n\tadd.u64 \t%hc, %hc, 1;\n\tadd.u32 \t%hj, %hj, 1;\n\
\tsetp.lt.u32 \t%hq, %hj, {canary};\n\t@%hq bra \t$__gh_fill;\n\
\tmembar.gl;\n{slot}\
$__gh_insert:\n\tatom.global.cas.b64 \t%ht, [%ha], 0, %hp;\n\tsetp.eq.u64 \t%hq, %ht, 0;\n\t@%hq bra \t$__gh_size;\n\
\tsetp.eq.u64 \t%hq, %ht, %hp;\n\t@%hq bra \t$__gh_size;\n{next}\
\tsetp.ne.u32 \t%hq, %hi, 0;\n\t@%hq bra \t$__gh_insert;\n\tbra \t$__gh_done;\n\
$__gh_size:\n\tst.global.u64 \t[%ha+8], %hn;\n\
$__gh_done:\n\tst.param.b64 \t[__gpusan_r], %hp;\n\tret;\n}}\n\
.func {FREE}(.param .b64 __gpusan_f)\n{{\n\t{regs}\
\tld.param.b64 \t%hp, [__gpusan_f];\n\tsetp.eq.u64 \t%hq, %hp, 0;\n\t@%hq bra \t$__gh_free;\n{slot}\
$__gh_find:\n\tld.global.u64 \t%ht, [%ha];\n\tsetp.eq.u64 \t%hq, %ht, %hp;\n\t@%hq bra \t$__gh_found;\n\
\tsetp.eq.u64 \t%hq, %ht, 0;\n\t@%hq bra \t$__gh_free;\n{next}\
\tsetp.ne.u32 \t%hq, %hi, 0;\n\t@%hq bra \t$__gh_find;\n\tbra \t$__gh_free;\n\
$__gh_found:\n\tatom.global.exch.b64 \t%hn, [%ha+8], {freed};\n\tsetp.eq.u64 \t%hq, %hn, {freed};\n\t@%hq bra \t$__gh_free;\n\
\tld.global.u64 \t%hs, [{SECRET_SYMBOL}];\n{key}\
\tadd.u64 \t%hc, %hp, %hn;\n\tmov.u32 \t%hj, 0;\n\tmov.u32 \t%hf, 0;\n\tmov.u32 \t%hi, 0;\n\tmov.u32 \t%hg, 0;\n\
$__gh_cmp:\n\tand.b32 \t%hd, %hj, 7;\n\tshl.b32 \t%hd, %hd, 3;\n\tshr.u64 \t%ht, %hk, %hd;\n\tand.b64 \t%ht, %ht, 255;\n\
\tld.u8 \t%hb, [%hc];\n\tsetp.eq.u64 \t%hq, %hb, %ht;\n\t@%hq bra \t$__gh_same;\n\
\tsetp.eq.u32 \t%hq, %hf, 0;\n\t@%hq mov.u32 \t%hi, %hj;\n\t@%hq cvt.u32.u64 \t%hg, %hb;\n\tadd.u32 \t%hf, %hf, 1;\n\
$__gh_same:\n\tadd.u64 \t%hc, %hc, 1;\n\tadd.u32 \t%hj, %hj, 1;\n\
\tsetp.lt.u32 \t%hq, %hj, {canary};\n\t@%hq bra \t$__gh_cmp;\n\
\tsetp.eq.u32 \t%hq, %hf, 0;\n\t@%hq bra \t$__gh_free;\n\
\tld.global.u64 \t%he, [{ERRORS_SYMBOL}];\n\tsetp.eq.u64 \t%hq, %he, 0;\n\t@%hq bra \t$__gh_free;\n\
\tatom.add.u32 \t%hd, [%he], 1;\n\tsetp.ge.u32 \t%hq, %hd, {cap};\n\t@%hq bra \t$__gh_free;\n\
\tmul.wide.u32 \t%ht, %hd, {rec};\n\tadd.u64 \t%ht, %ht, {head};\n\tadd.u64 \t%ht, %ht, %he;\n\
\tst.u64 \t[%ht], %hp;\n\tst.u64 \t[%ht+8], %hn;\n\tst.u32 \t[%ht+16], %hi;\n\tst.u32 \t[%ht+20], %hf;\n\tst.u32 \t[%ht+28], %hg;\n\
\tmembar.sys;\n\tst.volatile.u32 \t[%ht+24], 1;\n\
$__gh_free:\n\t{{\n\t.param .b64 __gpusan_p0;\n\tst.param.b64 \t[__gpusan_p0], %hp;\n\
\tcall free, (__gpusan_p0);\n\t}}\n\tret;\n}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
.extern .func (.param .b64 func_retval0) malloc(.param .b64 malloc_param_0);\n\
.extern .func free(.param .b64 free_param_0);\n\
.visible .entry k(.param .u64 n)\n{\n\t.reg .b64 %rd<4>;\n\tld.param.u64 %rd1, [n];\n\
\t{ // callseq 0, 0\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd1;\n\t.param .b64 retval0;\n\
\tcall.uni (retval0), malloc, (param0);\n\tld.param.b64 %rd2, [retval0];\n\t} // callseq 0\n\
\tst.u8 [%rd2], 1;\n\
\t{ // callseq 1, 0\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd2;\n\tcall.uni free, (param0);\n\t} // callseq 1\n\
\tret;\n}\n";

    #[test]
    fn the_calls_are_renamed_and_the_functions_appended() {
        let out = crate::instrument(KERNEL, &CanaryHeap).unwrap();
        assert!(out.ptx.contains("call.uni \t(retval0), __gpusan_canary_malloc, (param0);"), "{}", out.ptx);
        assert!(out.ptx.contains("call.uni \t__gpusan_canary_free, (param0);"), "{}", out.ptx);
        // The module's own calls go to the new functions; theirs go to the heap.
        assert_eq!(out.ptx.matches(", malloc, (").count(), 1, "{}", out.ptx);
        assert_eq!(out.ptx.matches("call \tfree,").count(), 1, "{}", out.ptx);
        assert_eq!(out.report.functions.len(), 1);
        assert_eq!(out.report.functions[0].sites, 2);
        // Declared before the kernel that calls them.
        let decl = out.ptx.find(".func (.param .b64 __gpusan_r) __gpusan_canary_malloc").unwrap();
        assert!(decl < out.ptx.find(".entry k").unwrap(), "{}", out.ptx);
        assert!(out.ptx.find(".extern .func free").unwrap() < decl, "{}", out.ptx);
    }

    #[test]
    fn a_module_that_never_calls_the_heap_is_left_alone() {
        let src = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n";
        let mut m = gpusan_ptx::parse(src).unwrap();
        let before = m.clone();
        assert!(run(&mut m).unwrap().functions.is_empty());
        assert_eq!(m, before);
    }

    #[test]
    fn a_module_rewritten_already_is_refused() {
        let once = crate::instrument(KERNEL, &CanaryHeap).unwrap();
        let err = crate::instrument(&once.ptx, &CanaryHeap).unwrap_err();
        assert!(err.to_string().contains("instrumented twice"), "{err}");
    }

    #[test]
    fn a_module_that_only_frees_gets_mallocs_declaration_for_its_wrapper() {
        let src = ".version 8.0\n.target sm_90\n.address_size 64\n\
.extern .func free(.param .b64 free_param_0);\n\
.visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\
\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd1;\n\tcall.uni free, (param0);\n\t}\n\tret;\n}\n";
        let out = crate::instrument(src, &CanaryHeap).unwrap();
        assert_eq!(out.ptx.matches(".extern .func (.param .b64 func_retval0) malloc").count(), 1, "{}", out.ptx);
        assert_eq!(out.ptx.matches(".extern .func free").count(), 1, "{}", out.ptx);
    }

    /// The ABI's key is murmur3's fmix64 of `secret ^ base ^ size·φ`, and the PTX uses its
    /// three constants. (Only the GPU runs the PTX: that it computes the same key is not
    /// shown here, only that it is built from the same parts.)
    #[test]
    fn the_abis_key_is_fmix64_and_the_support_code_uses_its_constants() {
        let ptx = support_ptx();
        for k in ["0x9E3779B97F4A7C15", "0xFF51AFD7ED558CCD", "0xC4CEB9FE1A85EC53"] {
            assert!(ptx.contains(k), "{k}");
        }
        // fmix64 of secret ^ base ^ n·φ, as gpusan_abi computes it.
        let (s, p, n) = (0x1234_5678_9abc_def0u64, 0x7f00_0000_1000u64, 1000u64);
        let mut k = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ p ^ s;
        k ^= k >> 33;
        k = k.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        k ^= k >> 33;
        k = k.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        k ^= k >> 33;
        assert_eq!(gpusan_abi::canary::heap::heap_key(s, p, n), k);
    }
}
