//! Use after scope of local memory (cuCatch §4.3): a local address a kernel reaches through
//! a call result or a pointer loaded from memory must lie in the kernel's own frame, and a
//! `.func` must not return an address in its own frame.
//!
//! # Why not "below the current frame"
//!
//! The obvious rule, "the stack grows downward, so an address below the current function's
//! frame is in a popped frame", does not hold for what ptxas makes. For a call graph it can
//! see whole (no recursion, no `-rdc`, no indirect calls) ptxas gives each function's frame
//! a fixed place *inside the kernel's frame*, calls with `CALL.REL.NOINC` and returns with
//! `RET.REL.NODEC`, and never moves `R1`. Seen with the pinned ptxas (sm_90, `-O3`): a
//! kernel with a 32-byte `__local_depot` reserves 0x60 bytes, its own arrays at `[R1]`, and a
//! `__noinline__` callee's 64-byte array at `[R1+0x20]`, *above* the kernel's. Only
//! recursive callees get an ABI frame below their caller (`R1 -= size` in the prologue).
//! So in a `.func`, a pointer into its caller's frame (passed down, or handed back by a
//! callee) may lie below or above its own frame, and no comparison with its own frame is
//! sound. (`bench/probes/local_stack.cu` measures both layouts on the GPU.)
//!
//! # What is sound: the kernel's frame
//!
//! A kernel has no live caller. Every local object it may legally reach is in its own frame
//! (`__local_depotN`, where nvcc puts all its locals), whatever the layout: a callee's frame
//! is dead once the callee returned, wherever ptxas placed it. So in a kernel, an access
//! whose address is in the thread's local window and outside `[depot, depot + size)` is a
//! use after scope (a kernel without a depot has no live local memory at all). The check is
//! placed on accesses whose address comes from a call result or a pointer loaded from memory
//! (`ld`, `ldu`, `atom`, `call`), the ways a dead frame's address comes back: local accesses
//! derived from the depot itself are bounded by the frame check already, and kernel
//! parameters never hold local addresses. Generic accesses are judged only when
//! `isspacep.local` holds for the address.
//!
//! Kernels where local memory outside the depot can be live get no check: kernels using
//! `alloca`/`stacksave`/`stackrestore` (dynamic stack allocations lie outside the depot),
//! kernels declaring more than one `.local` variable or one of unknown size (hand-written
//! PTX), modules with module-scope `.local` variables (per-thread statics, placed where
//! ptxas likes), and kernels that take generic addresses of their parameters (`cvta.param`).
//!
//! # In a `.func`: where the dead frame is handed out
//!
//! A use in a `.func` cannot be judged (its callers' frames are live and may lie anywhere in
//! the local window), so the bug is caught at its root: a function handing out an address in
//! its own frame, which is dead after `ret` wherever ptxas placed it. A `.func` storing to
//! its return parameter (`st.param [func_retval0]`) a 64-bit value every definition of which
//! leads back to a `.local` variable of its own body (its depot, generic or not) has that
//! value checked at run time: inside `[depot, depot + size)` is
//! `CODE_LOCAL_USE_AFTER_SCOPE`, recorded with the frame's size
//! (`record::FrameObject::ReturnedFrame`), and the store still runs (the value is harmless
//! until used; a kernel's use of it is judged there too). nvcc warns about the same
//! (`returning pointer to local variable`). A pointer the function was given, a distance
//! between two of its addresses, or a value that may also come from elsewhere (`selp` of
//! its frame and a parameter) is not judged.
//!
//! # Left unchecked
//!
//! A `.func` storing an address in its own frame through a pointer (into its caller's
//! variable, or global memory) is not judged: a frame address published and withdrawn
//! before the return (a node of a list kept on the stack) is legal, and which stores are
//! withdrawn the PTX does not say; the kernel-side check still catches the caller's use when
//! the caller is a kernel. So is a frame address returned by a vector store
//! (`st.param.v2.b64`, a struct's fields at once) or through anything but one 64-bit
//! register (a struct's field stored alone, at any offset, is judged). Also left: an
//! access straddling the end of the kernel's frame through a call result (its first byte is
//! inside: the frame check does not see the pointer).

use gpusan_ptx::ast::{Function, Instruction, Name, Operand, StateSpace, Statement};
use gpusan_ptx::semantics::{address_conversion, Conversion, Space};

use super::window::{Extent, Window};

/// The local memory a kernel may legally reach: its one frame variable, or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::check) struct LiveFrame {
    /// `__local_depotN` and its size; `None`: the kernel declares no local memory.
    pub(super) frame: Option<(Name, u64)>,
    /// The kernel's parameters: `ld.param` of one of these is not a loaded pointer.
    params: Vec<Name>,
}

impl LiveFrame {
    /// The live frame of kernel `f`, when the check can judge it (see the module's doc).
    pub(super) fn of(f: &Function, module_has_local: bool) -> Option<LiveFrame> {
        if !f.is_kernel() || module_has_local {
            return None;
        }
        let body = f.body.as_deref()?;
        let mut locals = Vec::new();
        let mut dynamic_stack = false;
        fn walk<'a>(stmts: &'a [Statement], locals: &mut Vec<&'a gpusan_ptx::ast::VarDecl>, dynamic: &mut bool) {
            for s in stmts {
                match s {
                    Statement::Decl(d) if d.space == StateSpace::Local => locals.push(d),
                    Statement::Block(b) => walk(b, locals, dynamic),
                    Statement::Inst(i) => {
                        let param_address = matches!(address_conversion(i), Some(Conversion::ToGeneric(Space::Param)));
                        if matches!(i.opcode.as_str(), "alloca" | "stacksave" | "stackrestore") || param_address {
                            *dynamic = true;
                        }
                    }
                    _ => {}
                }
            }
        }
        walk(body, &mut locals, &mut dynamic_stack);
        if dynamic_stack {
            return None;
        }
        let frame = match locals.as_slice() {
            [] => None,
            [d] => match Window::of(d) {
                Some(Window { extent: Extent::Bytes(n), .. }) => Some((d.name, n)),
                _ => return None,
            },
            _ => return None,
        };
        let params = f.params.iter().flatten().map(|p| p.name).collect();
        Some(LiveFrame { frame, params })
    }

    /// Whether `inst` brings a value in from outside the kernel's own arithmetic: a call's
    /// result or a value loaded from memory (not a kernel parameter).
    pub(super) fn is_foreign(&self, inst: &Instruction) -> bool {
        match inst.opcode.as_str() {
            "call" | "atom" | "ldu" => true,
            "ld" => {
                if inst.modifiers().next() != Some("param") {
                    return true;
                }
                // `ld.param` of a call's return parameter, declared in the call's block.
                match inst.operands.get(1).and_then(Operand::as_address) {
                    Some((Some(sym), _)) => !self.params.contains(&sym),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// Sets `%__gs_bad` to whether the address in `%__gs_a` is local memory outside the
/// kernel's frame; `generic` when `%__gs_a` is a generic address. Clobbers `%__gs_q`,
/// `%__gs_wlo`, `%__gs_wlim`.
pub(super) fn check_text(frame: Option<(Name, u64)>, generic: bool) -> String {
    let mut t = String::new();
    match frame {
        Some((sym, n)) => {
            if generic {
                t.push_str(&format!("\tcvta.local.u64 %__gs_wlo, {sym};\n"));
            } else {
                t.push_str(&format!("\tmov.u64 %__gs_wlo, {sym};\n"));
            }
            t.push_str(&format!(
                "\tadd.s64 %__gs_wlim, %__gs_wlo, {n};\n\
                 \tsetp.lt.u64 %__gs_bad, %__gs_a, %__gs_wlo;\n\
                 \tsetp.ge.or.u64 %__gs_bad, %__gs_a, %__gs_wlim, %__gs_bad;\n"
            ));
        }
        // No local memory is live in a kernel without a frame.
        None => t.push_str("\tmov.pred %__gs_bad, 1;\n"),
    }
    if generic {
        t.push_str("\tisspacep.local %__gs_q, %__gs_a;\n\tand.pred %__gs_bad, %__gs_bad, %__gs_q;\n");
    }
    t
}

/// The `.local` variables `f`'s body declares: its own frame (module-scope `.local`
/// variables are per-thread statics, alive for the whole thread).
pub(super) fn own_locals(f: &Function) -> Vec<Name> {
    fn walk(stmts: &[Statement], out: &mut Vec<Name>) {
        for s in stmts {
            match s {
                Statement::Decl(d) if d.space == StateSpace::Local => out.push(d.name),
                Statement::Block(b) => walk(b, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(f.body.as_deref().unwrap_or_default(), &mut out);
    out
}

/// Sets `%__gs_bad` to whether the value in `%__gs_a`, which a `.func` is about to return,
/// is an address inside its own frame variable `frame` of `n` bytes (generic when
/// `generic`). Clobbers `%__gs_wlo`, `%__gs_wlim`.
pub(super) fn returned_text(frame: Name, n: u64, generic: bool) -> String {
    let base = if generic { "cvta.local.u64" } else { "mov.u64" };
    format!(
        "\t{base} %__gs_wlo, {frame};\n\
         \tadd.s64 %__gs_wlim, %__gs_wlo, {n};\n\
         \tsetp.ge.u64 %__gs_bad, %__gs_a, %__gs_wlo;\n\
         \tsetp.lt.and.u64 %__gs_bad, %__gs_a, %__gs_wlim, %__gs_bad;\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(body: &str) -> (Function, bool) {
        let src = format!(
            ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 k_p)\n{{\n{body}\n\tret;\n}}\n"
        );
        let m = gpusan_ptx::parse(&src).unwrap();
        let module_local =
            m.items.iter().any(|i| matches!(i, gpusan_ptx::ast::Item::Var(v) if v.space == StateSpace::Local));
        let f = m
            .items
            .into_iter()
            .find_map(|i| match i {
                gpusan_ptx::ast::Item::Function(f) => Some(f),
                _ => None,
            })
            .unwrap();
        (*f, module_local)
    }

    #[test]
    fn the_frame_is_the_one_depot() {
        let (f, l) = kernel("\t.local .align 16 .b8 __local_depot0[48];");
        let live = LiveFrame::of(&f, l).unwrap();
        assert_eq!(live.frame, Some(("__local_depot0".into(), 48)));
        let (f, l) = kernel("\t.reg .b64 %rd<2>;");
        assert_eq!(LiveFrame::of(&f, l).unwrap().frame, None);
    }

    #[test]
    fn kernels_with_other_live_local_memory_are_not_judged() {
        for body in [
            "\t.local .b8 a[16];\n\t.local .b8 b[16];",
            "\t.reg .b64 %rd<2>;\n\talloca.u64 %rd1, 16;",
            "\t.reg .b64 %rd<3>;\n\tmov.u64 %rd1, k_p;\n\tcvta.param.u64 %rd2, %rd1;",
        ] {
            let (f, l) = kernel(body);
            assert_eq!(LiveFrame::of(&f, l), None, "{body}");
        }
        let (f, _) = kernel("\t.local .b8 __local_depot0[16];");
        assert_eq!(LiveFrame::of(&f, true), None, "a module-scope .local variable");
    }

    #[test]
    fn loads_and_call_results_are_foreign_kernel_parameters_are_not() {
        let (f, l) = kernel("");
        let live = LiveFrame::of(&f, l).unwrap();
        let inst = |s: &str| {
            let (f, _) = kernel(&format!("\t.reg .b64 %rd<3>;\n\t{s}"));
            f.body
                .unwrap()
                .into_iter()
                .find_map(|st| match st {
                    Statement::Inst(i) => Some(i),
                    _ => None,
                })
                .unwrap()
        };
        assert!(live.is_foreign(&inst("ld.param.b64 %rd1, [retval0+0];")));
        assert!(live.is_foreign(&inst("ld.global.u64 %rd1, [%rd2];")));
        assert!(live.is_foreign(&inst("ld.local.u64 %rd1, [%rd2];")));
        assert!(!live.is_foreign(&inst("ld.param.u64 %rd1, [k_p];")));
        assert!(!live.is_foreign(&inst("add.s64 %rd1, %rd2, 4;")));
    }

    #[test]
    fn generic_addresses_are_judged_only_in_the_local_window() {
        let t = check_text(Some(("__local_depot0".into(), 32)), true);
        assert!(t.starts_with("\tcvta.local.u64 %__gs_wlo, __local_depot0;\n\tadd.s64 %__gs_wlim, %__gs_wlo, 32;\n"));
        assert!(t.ends_with("isspacep.local %__gs_q, %__gs_a;\n\tand.pred %__gs_bad, %__gs_bad, %__gs_q;\n"), "{t}");
        let t = check_text(None, false);
        assert_eq!(t, "\tmov.pred %__gs_bad, 1;\n");
    }
}
