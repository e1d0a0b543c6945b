//! The declaration of a variable of the device ABI the pass adds to a module.

use gpusan_abi::RuntimeVar;
use gpusan_ptx::ast::{Linkage, Span, StateSpace, VarDecl};

/// A `.global` variable of the ABI that only kernels write (counters, the heap's table).
pub(super) fn abi_var(name: &str, ty: &str, align: u32) -> VarDecl {
    VarDecl {
        linkage: vec![Linkage::Visible],
        space: StateSpace::Global,
        attributes: Vec::new(),
        align: Some(align),
        vector: None,
        ty: ty.into(),
        name: name.into(),
        count: None,
        array: Vec::new(),
        init: None,
        span: Span::NONE,
    }
}

/// A variable the runtime sets after loading the module ([`gpusan_abi::RUNTIME_VARS`]),
/// aligned to its width.
pub(super) fn runtime_var(v: &RuntimeVar) -> VarDecl {
    VarDecl {
        space: StateSpace::from_name(v.space).expect("the ABI names a state space"),
        ..abi_var(v.name, v.ty, v.bytes)
    }
}
