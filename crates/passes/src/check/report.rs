//! What the pass reports, function by function.

use gpusan_ptx::ast::Name;

use crate::{FunctionReport, PassReport};

/// What the pass did, function by function, in module order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckReport {
    pub functions: Vec<CheckFunction>,
}

impl CheckReport {
    pub fn to_pass_report(&self) -> PassReport {
        PassReport {
            functions: self
                .functions
                .iter()
                .map(|f| FunctionReport {
                    name: f.name,
                    kind: f.kind,
                    sites: f.checked + f.shared + f.local + f.scope,
                    inserted: f.inserted,
                })
                .collect(),
        }
    }
}

/// One function with a body. Counts are of memory accesses (one instruction may make
/// several: a copy reads one place and writes another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFunction {
    pub name: Name,
    pub kind: gpusan_ptx::ast::FunctionKind,
    /// Index among the module's defined functions sorted by name
    /// ([`gpusan_abi::function_numbers`]): the low bits of a record's
    /// [`gpusan_abi::record::KERNEL`].
    pub index: u32,
    /// Global and generic accesses checked against the allocation table.
    pub checked: u32,
    /// Accesses checked against a shared memory variable's bounds (shared, or generic
    /// into the shared window).
    pub shared: u32,
    /// Accesses checked against a local variable's bounds (nvcc's frame `__local_depotN`).
    pub local: u32,
    /// Accesses checked for use after scope: local or generic accesses in a kernel through
    /// a call result or a loaded pointer, which must stay in the kernel's frame (`onchip`).
    pub scope: u32,
    /// Roots looked up (one LOADMETA each).
    pub roots: u32,
    /// Left unchecked: the address has several roots and no one shadow (a definition adds
    /// two pointers, or the module uses the device heap).
    pub multi_root: u32,
    /// Checked although the address has several roots: the metadata travels with the value
    /// along each path in shadow registers (`Shadow`, `check::plan`); counted in `checked` too.
    pub carried: u32,
    /// Left unchecked: the address has no root (a symbol, integer arithmetic only).
    pub no_root: u32,
    /// Left unchecked: the width is not a constant.
    pub unknown_width: u32,
    /// Left unchecked: shared and local accesses bound to no one variable, param, const
    /// or texture accesses, and prefetches.
    pub other: u32,
    /// Checked accesses whose own check runs only when their group's range check fails
    /// (cuCatch §4.6.1–4.6.2; see `groups`): the checks the optimization removes from the
    /// common path.
    pub grouped: u32,
    /// Range checks added for those groups.
    pub group_checks: u32,
    /// Roots whose metadata one thread per block looks up for all (kernel parameters).
    pub block_roots: u32,
    /// Straight runs of grouped accesses given two versions (`spans`): one branch picks the
    /// unchecked original when every group's range check passed.
    pub spans: u32,
    /// Shared and local accesses at a constant address inside their variable (`[sym+8]`):
    /// counted in `shared`/`local`, and left without a check because none can fail.
    pub static_in_bounds: u32,
    /// Innermost loops given two versions (`loops`): one branch in the preheader picks an
    /// unchecked clone when the whole range of every access over all iterations is in bounds.
    pub loops_versioned: u32,
    /// Checked accesses in those loops, covered by the preheader's range checks.
    pub loop_hoisted: u32,
    /// Instructions added.
    pub inserted: u32,
    /// Device-heap calls (`malloc`, `free`) instrumented (`check/heap.rs`).
    pub heap_calls: u32,
}

impl CheckFunction {
    /// Nothing counted yet.
    pub(super) fn new(name: Name, kind: gpusan_ptx::ast::FunctionKind, index: u32) -> CheckFunction {
        CheckFunction {
            name,
            kind,
            index,
            checked: 0,
            shared: 0,
            local: 0,
            scope: 0,
            roots: 0,
            multi_root: 0,
            carried: 0,
            no_root: 0,
            unknown_width: 0,
            other: 0,
            grouped: 0,
            group_checks: 0,
            block_roots: 0,
            static_in_bounds: 0,
            spans: 0,
            loops_versioned: 0,
            loop_hoisted: 0,
            inserted: 0,
            heap_calls: 0,
        }
    }

    pub fn unchecked(&self) -> u32 {
        self.multi_root + self.no_root + self.unknown_width + self.other
    }
}
