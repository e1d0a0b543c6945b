//! What instructions mean for memory: which touch memory, in which state space, through
//! which operand, how many bytes, and whether they read, write or are atomic.
//!
//! The parser keeps instructions generic; this table is where their meaning lives, so
//! passes (the checker, the fence, the tracer) ask one place.

/// Width in bytes of a PTX scalar type (`u32` → 4, `b128` → 16, `pred` → none).
pub fn type_width(ty: &str) -> Option<u32> {
    Some(match ty {
        "b8" | "u8" | "s8" | "e4m3" | "e5m2" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" | "e4m3x2" | "e5m2x2" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

use crate::ast::{Instruction, Name, Operand};

/// Whether the instruction's first operand is a destination it writes. Most PTX
/// instructions write their first operand; these families do not.
pub fn has_destination(inst: &Instruction) -> bool {
    let first = inst.modifiers().next().unwrap_or("");
    match inst.opcode.as_str() {
        "st" | "red" | "bra" | "brx" | "ret" | "exit" | "trap" | "brkpt" | "membar" | "fence" | "prefetch"
        | "prefetchu" | "sust" | "sured" | "pmevent" | "nanosleep" | "setmaxnreg" | "griddepcontrol"
        | "stackrestore" | "stmatrix" | "discard" | "applypriority" | "cp" | "tensormap" | "call" => false,
        // `bar.red`/`barrier.red` return the reduction; the other barriers write nothing.
        "bar" | "barrier" => inst.has_modifier("red"),
        "wgmma" => first == "mma_async",
        "mbarrier" => matches!(first, "arrive" | "arrive_drop" | "test_wait" | "try_wait" | "pending_count"),
        "multimem" => first == "ld_reduce",
        _ => true,
    }
}

/// Calls `f` on each register the instruction writes. `call (r), f, (a)` writes `r`;
/// a vector or pair destination writes each element; `_` is no register.
pub fn for_each_def(inst: &Instruction, mut f: impl FnMut(Name)) {
    let dest = if inst.opcode == "call" {
        match (inst.operands.first(), inst.operands.get(1)) {
            (Some(ret @ Operand::List(_)), Some(_)) => Some(ret),
            _ => None,
        }
    } else if has_destination(inst) {
        inst.operands.first()
    } else {
        None
    };
    if let Some(d) = dest {
        d.for_each_name(&mut |n| {
            if n != "_" {
                f(n)
            }
        });
    }
}

/// Calls `f` on each name the instruction reads: the guard, source operands, address
/// bases, and the destination of instructions that also read it (`wgmma.mma_async`
/// accumulates into its first operand). Symbols (labels, variables, parameters) are
/// included; callers keep the registers they declared.
pub fn for_each_use(inst: &Instruction, mut f: impl FnMut(Name)) {
    if let Some(g) = &inst.guard {
        f(g.reg);
    }
    let skip_first = if inst.opcode == "call" {
        matches!((inst.operands.first(), inst.operands.get(1)), (Some(Operand::List(_)), Some(_)))
    } else {
        has_destination(inst) && !(inst.opcode == "wgmma")
    };
    for op in inst.operands.iter().skip(skip_first as usize) {
        op.for_each_name(&mut |n| {
            if n != "_" {
                f(n)
            }
        });
    }
}
