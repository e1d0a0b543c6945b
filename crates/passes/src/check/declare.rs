//! The declaration of a variable of the device ABI the pass adds to a module.

use gpusan_ptx::ast::{Linkage, Span, StateSpace, VarDecl};

use super::abi::TABLE_SYMBOL;

pub(super) fn abi_var(name: &str, ty: &str, align: u32) -> VarDecl {
    VarDecl {
        linkage: vec![Linkage::Visible],
        // The table's address is read at every lookup, which the constant cache serves
        // when streaming kernels have long evicted it from L1; it changes only between
        // launches (the runtime writes it like `cudaMemcpyToSymbol` does a `__constant__`).
        space: if name == TABLE_SYMBOL { StateSpace::Const } else { StateSpace::Global },
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
