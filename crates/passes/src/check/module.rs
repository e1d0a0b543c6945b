//! What the pass does once per module: the facts every function's stages read, the ABI
//! variables it declares, the names it refuses, the launch bound it adds.

use gpusan_ptx::ast::{Function, Item, Linkage, Span, Statement, VarDecl};
use gpusan_ptx::Module;

use gpusan_abi::{COUNTER_SYMBOLS, HEAP_SYMBOL, RUNTIME_VARS};

use super::counting::Counting;
use super::declare::{abi_var, runtime_var};
use super::heap;
use super::plan::PREFIX;
use crate::PassError;

/// What the block-wide lookup of kernel-parameter roots needs to know of the module.
pub(super) struct ModuleFacts {
    /// The module declares dynamic shared memory: its kernels may ask for all the shared
    /// memory a block can have, and the few bytes the lookup adds could make their launch fail.
    pub(super) dynamic_shared: bool,
    /// Static shared bytes declared anywhere in the module (an upper bound per kernel);
    /// `None` when a size is not known.
    pub(super) static_shared_bytes: Option<u64>,
    /// The module calls `malloc`/`free`: roots may be heap blocks, whose state each check
    /// re-reads (`check/heap.rs`), so neither optimization applies.
    pub(super) uses_heap: bool,
}

impl ModuleFacts {
    pub(super) fn of(module: &Module) -> ModuleFacts {
        fn bytes(v: &VarDecl) -> Option<u64> {
            let elem: u64 = match v.ty.as_str() {
                "pred" => return None,
                t => t.get(1..)?.parse::<u64>().ok()? / 8,
            };
            let mut n = elem.max(1) * u64::from(v.vector.unwrap_or(1));
            for d in &v.array {
                n = n.checked_mul((*d)?)?;
            }
            Some(n)
        }
        fn walk(stmts: &[Statement], total: &mut Option<u64>) {
            for s in stmts {
                match s {
                    Statement::Decl(d) if d.space.is_shared() => {
                        *total = total.zip(bytes(d)).and_then(|(a, b)| a.checked_add(b));
                    }
                    Statement::Block(b) => walk(b, total),
                    _ => {}
                }
            }
        }
        let mut facts = ModuleFacts {
            dynamic_shared: false,
            static_shared_bytes: Some(0),
            uses_heap: heap::module_uses_heap(module),
        };
        for item in &module.items {
            match item {
                Item::Var(v) if v.space.is_shared() => {
                    if v.linkage.contains(&Linkage::Extern) || v.array.iter().any(Option::is_none) {
                        facts.dynamic_shared = true;
                    } else {
                        facts.static_shared_bytes = facts.static_shared_bytes.zip(bytes(v)).map(|(a, b)| a + b);
                    }
                }
                Item::Function(f) => walk(f.body.as_deref().unwrap_or_default(), &mut facts.static_shared_bytes),
                _ => {}
            }
        }
        facts
    }
}

/// Declares the variables of the device ABI after the module's header: the table, the
/// error buffer and the module number, the counters of a counting build, the device heap's
/// table in a module that uses it.
pub(super) fn declare_abi_variables(module: &mut Module, counting: Counting, uses_heap: bool) {
    let at = module
        .items
        .iter()
        .position(|i| !matches!(i, Item::Version { .. } | Item::Target(_) | Item::AddressSize(_)))
        .unwrap_or(module.items.len());
    for (k, v) in RUNTIME_VARS.iter().enumerate() {
        module.items.insert(at + k, Item::Var(runtime_var(v)));
    }
    let mut next = at + RUNTIME_VARS.len();
    if counting.is_on() {
        for name in COUNTER_SYMBOLS {
            module.items.insert(next, Item::Var(abi_var(name, "u64", 8)));
            next += 1;
        }
    }
    if uses_heap {
        module.items.insert(next, Item::Var(heap::table_decl()));
    }
}

/// The most threads a block can have: what `.maxntid` promises for every kernel.
pub(super) const MAX_BLOCK_THREADS: u64 = 1024;

/// The checks add registers; a kernel the program launches with 1024 threads and that
/// natively fit in 64 registers could then fail to launch (`CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`,
/// seen on the H100 with a 32×32-tile SGEMM). A kernel that says nothing about its block size
/// or registers gets `.maxntid 1024, 1, 1`, as `__launch_bounds__(1024)` writes it: true of
/// every launch, and it makes ptxas stay within 64 registers. `.maxnreg 64` would too, but
/// ptxas takes a register cap as a budget to fill: the instrumented SGEMM used 55 registers
/// under it and 32 under `.maxntid` (half the blocks per SM). One with
/// `.maxntid`/`.reqntid`/`.maxnreg` already tells ptxas its limits.
pub(super) fn keep_launchable(f: &mut Function) {
    if f.kind != gpusan_ptx::ast::FunctionKind::Entry {
        return;
    }
    let said = f.attributes.iter().any(|a| matches!(a.name.as_str(), "maxntid" | "reqntid" | "maxnreg"));
    if !said {
        use gpusan_ptx::ast::AttrValue::Int;
        f.attributes.push(gpusan_ptx::ast::Attribute {
            name: "maxntid".into(),
            values: vec![Int(MAX_BLOCK_THREADS), Int(1), Int(1)],
        });
    }
}

/// Refuses a module already declaring one of the ABI variables (instrumented PTX, or a
/// clash), or using the pass's name prefix.
pub(super) fn check_unused(module: &Module, counting: Counting) -> Result<(), PassError> {
    let mut abi: Vec<&str> = RUNTIME_VARS.iter().map(|v| v.name).chain([HEAP_SYMBOL]).collect();
    if counting.is_on() {
        abi.extend(COUNTER_SYMBOLS);
    }
    let taken = |name: &str| {
        PassError::new(format!(
            "`{name}` is already declared, and it is a variable of gpusan's device ABI this pass adds; \
             if this is instrumented PTX, instrument the original instead"
        ))
    };
    for item in &module.items {
        match item {
            Item::Var(v) if abi.contains(&v.name.as_str()) => return Err(taken(&v.name).at(v.span)),
            Item::Alias { alias, .. } if abi.contains(&alias.as_str()) => return Err(taken(alias)),
            Item::Function(f) => {
                if abi.contains(&f.name.as_str()) {
                    return Err(taken(&f.name).at(f.span));
                }
                let mut bad = None;
                visit_names(f.body.as_deref().unwrap_or_default(), &mut |n, span| {
                    let bare = n.trim_start_matches(['%', '$']);
                    if bare.starts_with(PREFIX) || abi.contains(&n) {
                        bad.get_or_insert((n.to_string(), span));
                    }
                });
                if let Some((n, span)) = bad {
                    return Err(PassError::new(format!(
                        "`{n}` is declared in a function body; the names the check pass adds start with \
                         `{PREFIX}` (after `%` or `$`) and the ABI variables must not be shadowed"
                    ))
                    .at(span)
                    .in_function(f.name));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

pub(super) fn visit_names(stmts: &[Statement], f: &mut impl FnMut(&str, Span)) {
    for s in stmts {
        match s {
            Statement::Decl(d) => f(&d.name, d.span),
            Statement::Label(l, span) => f(l, *span),
            Statement::Block(b) => visit_names(b, f),
            _ => {}
        }
    }
}
