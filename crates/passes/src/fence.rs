//! `fence`: Guardian's address fencing (issue 18, `docs/fence-design.md` §3), the first step:
//! every load, store and atomic through a global or generic address goes to
//! `(a & mask_w) | base` instead of `a`, so that it lands inside the tenant's partition, a
//! power-of-two range `[base, base + 2^k)` aligned to its size, whatever `a` was.
//!
//! - `mask_w` is the partition's mask (`2^k - 1`) with the low bits of the access's width
//!   cleared: the fenced address is aligned to the width, so an access can neither cross
//!   the partition's end nor fault as misaligned (either would be a context-fatal fault in
//!   the manager's shared context).
//! - A generic address is fenced only when it is a global one (`isspacep.global`): shared
//!   and local addresses are the thread's and its block's own, and must stay as they are.
//! - Base and mask come from the module's `.visible .const .u64 __gpusan_fence[3]`, written
//!   by the manager after the load (each tenant loads its own copy of every module), read
//!   once per function into registers. The third entry is the address of the tenant's abort
//!   flag (a `u32` in its partition).
//! - `trap`, `brkpt` and a failed device-side `assert` (its call to `__assertfail`), which
//!   would end the shared context, set the abort flag and `exit` the thread instead (§5):
//!   the manager stops the tenant when it sees the flag. The assertion's message is not
//!   printed.
//!
//! Module variables (`.global` declarations of the module) are relocated into the partition
//! (§3, "Module variables"): each one's address is read from `.visible .const .u64
//! __gpusan_vars[N]` (in [`relocated_variables`]' order, which the manager fills after the
//! load with the addresses of the variables' copies in the partition) instead of being
//! taken from the symbol: `mov.u64 %rd, var` becomes `ld.const.u64 %rd, [__gpusan_vars+8i]`,
//! and `[var+8]` becomes `[%__gf_v+8]` after such a load, fenced then like any address.
//!
//! Bulk copies (`cp.async.bulk`, `cp.reduce.async.bulk`, `cp.async.bulk.prefetch`: a run-time
//! size) are fenced to 16 bytes, their size clamped to the partition's and their offset to
//! where the copy still ends inside it. A tensor copy (TMA) is bounded by its map: the map
//! must be a 128-byte kernel parameter, whose address the copy gets anew right before it
//! ([`FenceReport::maps`] names the parameters; the manager launches the kernel only with
//! maps it made on the tenant's partition there).
//!
//! Not fenced, and counted in the report as `unfenced` (a module with any is not fit for a
//! shared tenant):
//! - a variable's address in another form (a constant expression, another variable's
//!   initializer), and `.extern` variables (another module's);
//! - a tensor map from anywhere but a kernel parameter; textures and surfaces (handles into
//!   the context's one table, which other tenants' handles index too);
//! - accesses whose width is known only at run time outside the bulk copies (`st.bulk`),
//!   `multimem`, mbarriers through global addresses: every instruction whose access is not
//!   a plain `ld`/`st`/`atom`/`red`/`ldu`/`prefetch`, a `cp.async`'s source or a bulk copy.
//!
//! - An indirect branch (`brx.idx`) gets its index clamped to its table's last entry
//!   (`min.u32`): the index is a register, and an entry past the table is no label.
//!
//! Not done yet, and not counted: hung kernels (§5).

use gpusan_ptx::ast::{
    Expr, Function, Initializer, Instruction, Item, Linkage, Name, Operand, Span, StateSpace, Statement, VarDecl,
};
use gpusan_ptx::semantics::{memory_accesses, Space, Width};
use gpusan_ptx::Module;

use crate::check::regs::RegWidths;
use crate::{FunctionReport, Pass, PassError, PassReport};

/// The module constant holding {base, mask}.
pub const FENCE_SYMBOL: &str = "__gpusan_fence";
/// The module constant holding the relocated variables' addresses.
pub const VARS_SYMBOL: &str = "__gpusan_vars";

/// The registers the pass adds to each function it fences.
const ADDR: &str = "%__gf_a";
const FENCED: &str = "%__gf_t";
const BASE: &str = "%__gf_b";
const MASK: &str = "%__gf_m";
const IS_GLOBAL: &str = "%__gf_p";
const VAR: &str = "%__gf_v";
const INDEX: &str = "%__gf_i";
/// A bulk copy's size, clamped to the partition (64 and 32 bits), and the highest offset
/// its copy may start at.
const SIZE: &str = "%__gf_s";
const SIZE32: &str = "%__gf_z";
const LIMIT: &str = "%__gf_l";
/// A tensor map's address, taken from its kernel parameter again right before its use.
const MAP: &str = "%__gf_tm";
/// Bytes of a `CUtensorMap`.
const MAP_BYTES: u64 = 128;
/// Bulk copies move whole 16-byte units from 16-byte aligned addresses.
const BULK_UNIT: u32 = 16;

/// The pass as a [`Pass`] object, for [`crate::instrument`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Fence;

impl Pass for Fence {
    fn name(&self) -> &'static str {
        "fence"
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        run(module).map(|r| r.pass)
    }
}

/// What the pass did: the pass report (per function: accesses fenced) and the accesses it
/// left unfenced.
#[derive(Debug, Default)]
pub struct FenceReport {
    pub pass: PassReport,
    pub unfenced: u32,
    /// Uses of a module variable's address made to read it from `__gpusan_vars`.
    pub relocated: u32,
    /// `trap`s and `brkpt`s made to set the abort flag and exit.
    pub trapped: u32,
    /// Per function, the kernel parameters its tensor-map copies (TMA) read their map from:
    /// the manager lets such a kernel run only with maps it bound (made through
    /// `cuTensorMapEncode*` on the tenant's own partition) in those parameters.
    pub maps: Vec<(Name, Vec<Name>)>,
}

/// Fences every plain global and generic access of `module`'s functions.
pub fn run(module: &mut Module) -> Result<FenceReport, PassError> {
    let symbol = Name::from(FENCE_SYMBOL);
    let vars_symbol = Name::from(VARS_SYMBOL);
    for item in &module.items {
        let taken = match item {
            Item::Var(v) => v.name == symbol || v.name == vars_symbol,
            Item::Function(f) => f.name == symbol || f.name == vars_symbol,
            _ => false,
        };
        if taken {
            return Err(PassError::new(format!("`{FENCE_SYMBOL}` is declared already: instrumented twice?")));
        }
        if let Item::AddressSize(bits) = item {
            if *bits != 64 {
                return Err(PassError::new(format!(
                    "`.address_size {bits}`: fencing needs 64-bit addresses (the partition's base and mask)"
                )));
            }
        }
    }
    let vars = relocated_variables(module);
    let mut report = FenceReport::default();
    // A variable's address in another variable's initializer cannot be relocated here.
    for item in &module.items {
        if let Item::Var(v) = item {
            if v.init.as_ref().is_some_and(|i| init_names_any(i, &vars)) {
                report.unfenced += 1;
            }
        }
    }
    for item in &mut module.items {
        let Item::Function(f) = item else { continue };
        if f.body.is_none() {
            continue;
        }
        let mut site = Sites { regs: RegWidths::collect(f), ..Sites::default() };
        site.map_params = map_params(f);
        if !site.map_params.is_empty() {
            site.map_regs = map_registers(f, &site.map_params);
        }
        let Some(body) = f.body.as_mut() else { continue };
        let mut tables = Vec::new();
        branch_tables(body, &mut tables);
        site.tables = tables;
        fence_body(body, &vars, &mut site);
        report.unfenced += site.unfenced;
        report.relocated += site.relocated;
        report.trapped += site.trapped;
        if site.fenced > 0 || site.relocated > 0 || site.trapped > 0 || site.clamped > 0 || !site.maps.is_empty() {
            prepend_setup(body, &site.widths);
        }
        if !site.maps.is_empty() {
            report.maps.push((f.name, site.maps.clone()));
        }
        report.pass.functions.push(function_report(f, &site));
    }
    // After the header: a variable is declared before the first function using it.
    let at = module
        .items
        .iter()
        .position(|i| !matches!(i, Item::Version { .. } | Item::Target(_) | Item::AddressSize(_)))
        .unwrap_or(module.items.len());
    module.items.insert(at, Item::Var(const_decl(symbol, 3)));
    if !vars.is_empty() {
        module.items.insert(at + 1, Item::Var(const_decl(vars_symbol, vars.len() as u64)));
    }
    Ok(report)
}

/// The module variables the pass relocates, in the order of `__gpusan_vars`: every
/// `.global` variable the module defines (not `.extern`), in declaration order.
pub fn relocated_variables(module: &Module) -> Vec<Name> {
    module
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Var(v) if v.space == StateSpace::Global && !v.linkage.contains(&Linkage::Extern) => Some(v.name),
            _ => None,
        })
        .collect()
}

fn function_report(f: &Function, site: &Sites) -> FunctionReport {
    FunctionReport { name: f.name, kind: f.kind, sites: site.fenced, inserted: site.inserted }
}

#[derive(Default)]
struct Sites {
    /// The function's registers' widths: an address must be a 64-bit register.
    regs: RegWidths,
    fenced: u32,
    /// Indirect branches whose index was clamped.
    clamped: u32,
    /// The function's `.branchtargets` lists: label, entries.
    tables: Vec<(Name, u32)>,
    /// `trap`s and `brkpt`s made to set the abort flag and exit.
    trapped: u32,
    unfenced: u32,
    relocated: u32,
    inserted: u32,
    /// The access widths met (bytes, powers of two): one mask register each.
    widths: Vec<u32>,
    /// The kernel's parameters a tensor map fits in (128 bytes).
    map_params: Vec<Name>,
    /// Registers every definition of which takes the address of one such parameter: the
    /// parameter, and whether the address is generic (`cvta.param`).
    map_regs: std::collections::HashMap<Name, (Name, bool)>,
    /// The parameters tensor-map copies use, each once.
    maps: Vec<Name>,
}

/// The kernel parameters of `f` a `CUtensorMap` fits in: 128 bytes.
fn map_params(f: &Function) -> Vec<Name> {
    use gpusan_ptx::ast::FunctionKind;
    if f.kind != FunctionKind::Entry {
        return Vec::new();
    }
    f.params
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|p| {
            let elem =
                gpusan_ptx::ast::type_width(&p.ty).map(u64::from).unwrap_or(0) * u64::from(p.vector.unwrap_or(1));
            let size = p.array.iter().try_fold(elem, |n, d| d.and_then(|d| n.checked_mul(d)));
            p.space == StateSpace::Param && size == Some(MAP_BYTES)
        })
        .map(|p| p.name)
        .collect()
}

/// How a register is defined, as far as tensor maps go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum MapDef {
    /// `mov.b64 %r, PARAM`: the parameter's address (param space).
    Param(Name),
    /// `cvta.param.u64 %r, PARAM`: its generic address.
    Generic(Name),
    /// `cvta.param.u64 %r, %s`: the generic address of what `%s` holds.
    CvtaOf(Name),
    Other,
}

/// The registers of `f` every definition of which (anywhere in its body, guarded or not)
/// takes the address of the same map parameter: the parameter, and whether generic. The
/// fence does not rely on this to be safe (the use gets the parameter's address anew); it
/// names which parameter the program meant.
fn map_registers(f: &Function, params: &[Name]) -> std::collections::HashMap<Name, (Name, bool)> {
    use std::collections::HashMap;
    fn walk(stmts: &[Statement], params: &[Name], defs: &mut HashMap<Name, Vec<MapDef>>) {
        for s in stmts {
            match s {
                Statement::Inst(i) if gpusan_ptx::semantics::has_destination(i) => {
                    let def = match (i.opcode.as_str(), i.operands.get(1)) {
                        ("mov", Some(Operand::Name(p))) if i.operands.len() == 2 && params.contains(p) => {
                            MapDef::Param(*p)
                        }
                        ("cvta", Some(Operand::Name(x)))
                            if i.operands.len() == 2 && i.has_modifier("param") && !i.has_modifier("to") =>
                        {
                            if params.contains(x) {
                                MapDef::Generic(*x)
                            } else {
                                MapDef::CvtaOf(*x)
                            }
                        }
                        _ => MapDef::Other,
                    };
                    match i.operands.first() {
                        Some(Operand::Name(r)) => defs.entry(*r).or_default().push(def),
                        Some(other) => {
                            // Every register a vector or paired destination names is
                            // defined otherwise.
                            let mut names = Vec::new();
                            other.for_each_name(&mut |n| names.push(n));
                            for n in names {
                                defs.entry(n).or_default().push(MapDef::Other);
                            }
                        }
                        None => {}
                    }
                }
                Statement::Block(b) => walk(b, params, defs),
                _ => {}
            }
        }
    }
    let mut defs: HashMap<Name, Vec<MapDef>> = HashMap::new();
    if let Some(body) = &f.body {
        walk(body, params, &mut defs);
    }
    let direct = |r: &Name| -> Option<Name> {
        let d = defs.get(r)?;
        let first = match d.first()? {
            MapDef::Param(p) => *p,
            _ => return None,
        };
        d.iter().all(|x| *x == MapDef::Param(first)).then_some(first)
    };
    let mut out = HashMap::new();
    for (r, d) in &defs {
        let meant: Option<Vec<(Name, bool)>> = d
            .iter()
            .map(|x| match x {
                MapDef::Param(p) => Some((*p, false)),
                MapDef::Generic(p) => Some((*p, true)),
                MapDef::CvtaOf(s) => direct(s).map(|p| (p, true)),
                MapDef::Other => None,
            })
            .collect();
        if let Some(m) = meant {
            if m.windows(2).all(|w| w[0] == w[1]) {
                if let Some(first) = m.first() {
                    out.insert(*r, *first);
                }
            }
        }
    }
    out
}

fn const_decl(symbol: Name, entries: u64) -> VarDecl {
    VarDecl {
        linkage: vec![Linkage::Visible],
        space: StateSpace::Const,
        attributes: Vec::new(),
        align: Some(8),
        vector: None,
        ty: "u64".into(),
        name: symbol,
        count: None,
        array: vec![Some(entries)],
        init: None,
        span: Span::NONE,
    }
}

/// The mask register for accesses of `width` bytes.
fn mask_reg(width: u32) -> String {
    format!("{MASK}{width}")
}

/// The registers and the loads of base and mask, at the top of a fenced function.
fn prepend_setup(body: &mut Vec<Statement>, widths: &[u32]) {
    let mut head: Vec<Statement> = Vec::new();
    for r in [ADDR, FENCED, BASE, MASK, VAR, SIZE, LIMIT, MAP] {
        head.push(Statement::Decl(Box::new(VarDecl::reg("b64", r))));
    }
    for w in widths {
        head.push(Statement::Decl(Box::new(VarDecl::reg("b64", &mask_reg(*w)))));
    }
    head.push(Statement::Decl(Box::new(VarDecl::reg("pred", IS_GLOBAL))));
    head.push(Statement::Decl(Box::new(VarDecl::reg("b32", INDEX))));
    head.push(Statement::Decl(Box::new(VarDecl::reg("b32", SIZE32))));
    let fence = Name::from(FENCE_SYMBOL);
    let at = |offset: i32| Operand::Address { base: Some(fence), offset, offset_written: offset != 0 };
    head.push(Statement::Inst(Instruction::new("ld", &["const", "u64"], vec![Operand::reg(BASE), at(0)])));
    head.push(Statement::Inst(Instruction::new("ld", &["const", "u64"], vec![Operand::reg(MASK), at(8)])));
    for w in widths {
        let keep = !(u64::from(*w) - 1);
        head.push(Statement::Inst(Instruction::new(
            "and",
            &["b64"],
            vec![Operand::reg(&mask_reg(*w)), Operand::reg(MASK), Operand::int(keep as i64)],
        )));
    }
    body.splice(0..0, head);
}

/// The `.branchtargets` lists of a function body: label, entries.
fn branch_tables(stmts: &[Statement], out: &mut Vec<(Name, u32)>) {
    for s in stmts {
        match s {
            Statement::BranchTargets { label, targets, .. } => out.push((*label, targets.len() as u32)),
            Statement::Block(b) => branch_tables(b, out),
            _ => {}
        }
    }
}

/// `brx.idx idx, table;` → its index clamped to the table's last entry: the `min` to put
/// before it (the branch then reads the clamped register). A table the function does not
/// list, or an immediate index, is left as it is.
fn clamp_index(inst: &mut Instruction, site: &mut Sites) -> Option<Instruction> {
    let (Some(Operand::Name(index)), Some(Operand::Name(table))) = (inst.operands.first(), inst.operands.get(1)) else {
        return None;
    };
    let &(_, entries) = site.tables.iter().find(|(l, _)| l == table)?;
    let min = Instruction::new(
        "min",
        &["u32"],
        vec![Operand::reg(INDEX), Operand::Name(*index), Operand::int(i64::from(entries.saturating_sub(1)))],
    );
    inst.operands[0] = Operand::reg(INDEX);
    site.clamped += 1;
    Some(min)
}

/// Whether `inst` would end the shared context: `trap`, `brkpt`, and the call to
/// `__assertfail` a device-side `assert` compiles to (it prints, then traps).
fn ends_context(inst: &Instruction) -> bool {
    match inst.opcode.as_str() {
        "trap" | "brkpt" => true,
        "call" => {
            let at = usize::from(matches!(inst.operands.first(), Some(Operand::List(_))));
            matches!(inst.operands.get(at), Some(Operand::Name(n)) if n.as_str() == "__assertfail")
        }
        _ => false,
    }
}

/// Whether `inst` is one of the instructions whose accesses the pass fences: plain loads,
/// stores, atomics and prefetches, and `cp.async` (its global source; not the bulk forms).
fn fenceable(inst: &Instruction) -> bool {
    let plain = matches!(inst.opcode.as_str(), "ld" | "ldu" | "st" | "atom" | "red" | "prefetch")
        && !inst.has_modifier("async");
    let copy = inst.opcode.as_str() == "cp" && inst.has_modifier("async");
    (plain || copy) && !inst.has_modifier("bulk") && !inst.has_modifier("tensor")
}

fn fence_body(stmts: &mut Vec<Statement>, vars: &[Name], site: &mut Sites) {
    let mut out = Vec::with_capacity(stmts.len());
    for s in std::mem::take(stmts) {
        match s {
            Statement::Inst(i) if ends_context(&i) => {
                // The flag's address from the fence constant, the store, the thread's exit,
                // under the guard the trap had.
                let fence = Name::from(FENCE_SYMBOL);
                let flag = Operand::Address { base: Some(fence), offset: 16, offset_written: true };
                let mut load = Instruction::new("ld", &["const", "u64"], vec![Operand::reg(ADDR), flag]);
                let at = Operand::Address { base: Some(Name::from(ADDR)), offset: 0, offset_written: false };
                let mut store = Instruction::new("st", &["volatile", "global", "u32"], vec![at, Operand::int(1)]);
                let mut exit = Instruction::new("exit", &[], vec![]);
                for x in [&mut load, &mut store, &mut exit] {
                    x.guard = i.guard.clone();
                    x.span = i.span;
                }
                out.extend([load, store, exit].map(Statement::Inst));
                site.trapped += 1;
                site.inserted += 2;
            }
            Statement::Inst(mut i) if i.opcode.as_str() == "brx" => {
                if let Some(min) = clamp_index(&mut i, site) {
                    site.inserted += 1;
                    out.push(Statement::Inst(min));
                }
                out.push(Statement::Inst(i));
            }
            Statement::Inst(mut i) => {
                let mut before = relocate(&mut i, vars, site);
                before.extend(fence_inst(&mut i, site));
                site.inserted += before.len() as u32;
                out.extend(before.into_iter().map(Statement::Inst));
                out.push(Statement::Inst(i));
            }
            Statement::Block(mut b) => {
                fence_body(&mut b, vars, site);
                out.push(Statement::Block(b));
            }
            other => out.push(other),
        }
    }
    *stmts = out;
}

/// Whether constant expression `e` names one of `vars`.
fn expr_names_any(e: &Expr, vars: &[Name]) -> bool {
    match e {
        Expr::Symbol(n) => vars.contains(n),
        Expr::Call { args, .. } => args.iter().any(|a| expr_names_any(a, vars)),
        Expr::Unary { expr, .. } => expr_names_any(expr, vars),
        Expr::Binary { lhs, rhs, .. } => expr_names_any(lhs, vars) || expr_names_any(rhs, vars),
        _ => false,
    }
}

fn init_names_any(i: &Initializer, vars: &[Name]) -> bool {
    match i {
        Initializer::Expr(e) => expr_names_any(e, vars),
        Initializer::List(l) => l.iter().any(|i| init_names_any(i, vars)),
    }
}

/// `__gpusan_vars`' entry of variable `i`.
fn var_entry(i: usize) -> Operand {
    Operand::Address { base: Some(Name::from(VARS_SYMBOL)), offset: 8 * i as i32, offset_written: i != 0 }
}

/// Makes `inst` take each relocated variable's address from `__gpusan_vars` instead of its
/// symbol; returns the instructions to put before it (`inst` itself may become the load).
fn relocate(inst: &mut Instruction, vars: &[Name], site: &mut Sites) -> Vec<Instruction> {
    let index = |n: &Name| vars.iter().position(|v| v == n);
    let mut before = Vec::new();
    // `mov.u64 %rd, var` (and `cvta.global.u64 %rd, var`): the load is the instruction.
    if matches!(inst.opcode.as_str(), "mov" | "cvta") && inst.operands.len() == 2 {
        if let Operand::Name(n) = &inst.operands[1] {
            if let Some(i) = index(n) {
                let dest = inst.operands[0].clone();
                let guard = inst.guard.take();
                *inst = Instruction::new("ld", &["const", "u64"], vec![dest, var_entry(i)]);
                inst.guard = guard;
                site.relocated += 1;
                return before;
            }
        }
    }
    let mut loaded = false;
    for op in inst.operands.iter_mut() {
        match op {
            Operand::Address { base: Some(b), offset, offset_written } => {
                let Some(i) = index(b) else { continue };
                if loaded {
                    // Two variables in one instruction: one register only.
                    site.unfenced += 1;
                    continue;
                }
                before.push(Instruction::new("ld", &["const", "u64"], vec![Operand::reg(VAR), var_entry(i)]));
                *op =
                    Operand::Address { base: Some(Name::from(VAR)), offset: *offset, offset_written: *offset_written };
                loaded = true;
                site.relocated += 1;
            }
            Operand::Name(n) if index(n).is_some() => {
                if loaded {
                    site.unfenced += 1;
                    continue;
                }
                let i = index(n).unwrap_or_default();
                before.push(Instruction::new("ld", &["const", "u64"], vec![Operand::reg(VAR), var_entry(i)]));
                *op = Operand::reg(VAR);
                loaded = true;
                site.relocated += 1;
            }
            Operand::Expr(e) if expr_names_any(e, vars) => {
                site.unfenced += 1;
            }
            _ => {}
        }
    }
    before
}

/// Fences the global and generic accesses of `inst` in place; returns the instructions to
/// put before it.
fn fence_inst(inst: &mut Instruction, site: &mut Sites) -> Vec<Instruction> {
    let accesses = memory_accesses(inst);
    let mut before = Vec::new();
    if inst.opcode.as_str() == "cp" && inst.has_modifier("bulk") {
        for a in &accesses {
            let done = match a.space {
                Space::Tex => bind_map(inst, a.operand, site),
                Space::Global => fence_bulk(inst, a.operand, site),
                Space::Generic => None,
                _ => continue,
            };
            match done {
                Some(b) => before.extend(b),
                None => site.unfenced += 1,
            }
        }
        return before;
    }
    // Textures and surfaces: handles into the context's one descriptor table, which
    // another tenant's handles also index.
    site.unfenced += accesses.iter().filter(|a| a.space == Space::Tex).count() as u32;
    for a in accesses.iter().filter(|a| matches!(a.space, Space::Global | Space::Generic)) {
        // `cp.async [dst], [src], cp-size{, src-size}`: the source is aligned to cp-size
        // and read for at most that many bytes, whatever src-size says.
        let copy_size = match inst.operands.get(2) {
            Some(Operand::Int(n)) if inst.opcode.as_str() == "cp" && !n.negative => u32::try_from(n.value).ok(),
            _ => None,
        };
        let width = match (copy_size, a.width) {
            (Some(w), _) | (None, Width::Bytes(w) | Width::AtMost { max: w, .. })
                if w.is_power_of_two() && w <= 256 =>
            {
                w
            }
            _ => {
                site.unfenced += 1;
                continue;
            }
        };
        if !fenceable(inst) {
            site.unfenced += 1;
            continue;
        }
        let Some(load) = address_into_addr(&inst.operands[a.operand], site) else {
            site.unfenced += 1;
            continue;
        };
        before.push(load);
        before.push(Instruction::new(
            "and",
            &["b64"],
            vec![Operand::reg(FENCED), Operand::reg(ADDR), Operand::reg(&mask_reg(width))],
        ));
        before.push(Instruction::new(
            "or",
            &["b64"],
            vec![Operand::reg(FENCED), Operand::reg(FENCED), Operand::reg(BASE)],
        ));
        if a.space == Space::Generic {
            before.push(Instruction::new("isspacep", &["global"], vec![Operand::reg(IS_GLOBAL), Operand::reg(ADDR)]));
            before.push(Instruction::new(
                "selp",
                &["b64"],
                vec![Operand::reg(FENCED), Operand::reg(FENCED), Operand::reg(ADDR), Operand::reg(IS_GLOBAL)],
            ));
        }
        inst.operands[a.operand] =
            Operand::Address { base: Some(Name::from(FENCED)), offset: 0, offset_written: false };
        if !site.widths.contains(&width) {
            site.widths.push(width);
        }
        site.fenced += 1;
        // One fenced address register per instruction: a second access of the same
        // instruction (none of the fenced opcodes has two) would overwrite it.
        break;
    }
    before
}

/// The instruction putting the address of memory operand `op` into ADDR: a 64-bit
/// register (plus its offset), or an absolute address. `None` for what the fence cannot
/// take: a 32-bit register as an address (what a mutated or hand-written module may hold),
/// or a symbol that is no variable of this module (an `.extern` one).
fn address_into_addr(op: &Operand, site: &Sites) -> Option<Instruction> {
    let Operand::Address { base, offset, .. } = op else { return None };
    match base {
        Some(b) if b.as_str().starts_with('%') && !(site.regs.is_64(*b) || b.as_str() == VAR) => None,
        Some(b) if b.as_str().starts_with('%') => Some(if *offset == 0 {
            Instruction::new("mov", &["b64"], vec![Operand::reg(ADDR), Operand::Name(*b)])
        } else {
            Instruction::new(
                "add",
                &["s64"],
                vec![Operand::reg(ADDR), Operand::Name(*b), Operand::int(i64::from(*offset))],
            )
        }),
        Some(_) => None,
        None => Some(Instruction::new("mov", &["b64"], vec![Operand::reg(ADDR), Operand::int(i64::from(*offset))])),
    }
}

/// A bulk copy's global side (`cp.async.bulk`, `cp.reduce.async.bulk`,
/// `cp.async.bulk.prefetch`: its size is a run-time value): the size cleared to whole
/// 16-byte units and clamped to the partition's, the address fenced to 16 bytes and its
/// offset clamped so that the copy ends inside the partition. A copy that lies inside
/// already is left as it was. The instructions to put before it; `None` if it cannot be
/// fenced.
fn fence_bulk(inst: &mut Instruction, operand: usize, site: &mut Sites) -> Option<Vec<Instruction>> {
    let size_at = if inst.has_modifier("prefetch") { 1 } else { 2 };
    let size = match inst.operands.get(size_at)? {
        Operand::Int(n) if !n.negative => Instruction::new("mov", &["b64"], vec![Operand::reg(SIZE), Operand::Int(*n)]),
        Operand::Name(r) if r.as_str().starts_with('%') => {
            if site.regs.is_64(*r) {
                Instruction::new("mov", &["b64"], vec![Operand::reg(SIZE), Operand::Name(*r)])
            } else {
                Instruction::new("cvt", &["u64", "u32"], vec![Operand::reg(SIZE), Operand::Name(*r)])
            }
        }
        _ => return None,
    };
    let load = address_into_addr(inst.operands.get(operand)?, site)?;
    let unit = mask_reg(BULK_UNIT);
    let op = |opcode: &str, mods: &[&str], ops: Vec<Operand>| Instruction::new(opcode, mods, ops);
    let out = vec![
        size,
        op("and", &["b64"], vec![Operand::reg(SIZE), Operand::reg(SIZE), Operand::int(-i64::from(BULK_UNIT))]),
        // The partition's size, then the last offset a copy of SIZE bytes may start at.
        op("add", &["s64"], vec![Operand::reg(LIMIT), Operand::reg(MASK), Operand::int(1)]),
        op("min", &["u64"], vec![Operand::reg(SIZE), Operand::reg(SIZE), Operand::reg(LIMIT)]),
        op("sub", &["s64"], vec![Operand::reg(LIMIT), Operand::reg(LIMIT), Operand::reg(SIZE)]),
        load,
        op("and", &["b64"], vec![Operand::reg(FENCED), Operand::reg(ADDR), Operand::reg(&unit)]),
        op("min", &["u64"], vec![Operand::reg(FENCED), Operand::reg(FENCED), Operand::reg(LIMIT)]),
        op("or", &["b64"], vec![Operand::reg(FENCED), Operand::reg(FENCED), Operand::reg(BASE)]),
        op("cvt", &["u32", "u64"], vec![Operand::reg(SIZE32), Operand::reg(SIZE)]),
    ];
    inst.operands[operand] = Operand::Address { base: Some(Name::from(FENCED)), offset: 0, offset_written: false };
    inst.operands[size_at] = Operand::reg(SIZE32);
    if !site.widths.contains(&BULK_UNIT) {
        site.widths.push(BULK_UNIT);
    }
    site.fenced += 1;
    Some(out)
}

/// A tensor-map copy (TMA): the hardware keeps its accesses inside the tensor its map
/// declares, so the map is what must be the tenant's. The map must come from a kernel
/// parameter: the operand is made to hold that parameter's address, taken again right
/// before the copy (whatever a path through the kernel left in the register), and the
/// manager checks at each launch that the parameter holds a map it bound. The instructions
/// to put before it; `None` for a map from anywhere else (global or shared memory, which
/// the kernel could write).
fn bind_map(inst: &mut Instruction, operand: usize, site: &mut Sites) -> Option<Vec<Instruction>> {
    let Some(Operand::AddressList(ops)) = inst.operands.get_mut(operand) else { return None };
    let (param, before) = match ops.first()? {
        Operand::Name(p) if site.map_params.contains(p) => (*p, Vec::new()),
        Operand::Name(r) if r.as_str().starts_with('%') => {
            let &(p, generic) = site.map_regs.get(r)?;
            let mut before = vec![Instruction::new("mov", &["b64"], vec![Operand::reg(MAP), Operand::Name(p)])];
            if generic {
                before.push(Instruction::new("cvta", &["param", "u64"], vec![Operand::reg(MAP), Operand::reg(MAP)]));
            }
            ops[0] = Operand::reg(MAP);
            (p, before)
        }
        _ => return None,
    };
    if !site.maps.contains(&param) {
        site.maps.push(param);
    }
    Some(before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(body: &str) -> String {
        format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n.shared .align 4 .b8 sh[64];\n\
             .visible .global .align 4 .b8 var[64];\n\
             .visible .entry k(.param .u64 p)\n{{\n\t.reg .b64 %rd<5>;\n\t.reg .b32 %r<3>;\n\t.reg .pred %q;\n\
             \tld.param.u64 %rd1, [p];\n{body}\tret;\n}}\n"
        )
    }

    #[test]
    fn a_global_store_goes_to_its_fenced_address() {
        let out = crate::instrument(&kernel("\tst.global.u32 [%rd1+8], %r1;\n"), &Fence).unwrap();
        let p = &out.ptx;
        assert!(p.contains("add.s64 \t%__gf_a, %rd1, 8;"), "{p}");
        assert!(p.contains("and.b64 \t%__gf_t, %__gf_a, %__gf_m4;"), "{p}");
        assert!(p.contains("or.b64 \t%__gf_t, %__gf_t, %__gf_b;"), "{p}");
        assert!(p.contains("st.global.u32 \t[%__gf_t], %r1;"), "{p}");
        // The mask for 4-byte accesses keeps the partition's bits above the lowest two.
        assert!(p.contains("and.b64 \t%__gf_m4, %__gf_m, -4;"), "{p}");
        assert!(p.contains("ld.const.u64 \t%__gf_b, [__gpusan_fence];"), "{p}");
        assert!(p.contains(".visible .const .align 8 .u64 \t__gpusan_fence[3];"), "{p}");
        assert_eq!(out.report.functions[0].sites, 1);
        assert!(!p.contains("isspacep"), "a global access needs no space test: {p}");
    }

    #[test]
    fn a_generic_access_is_fenced_only_when_it_is_global() {
        let out =
            crate::instrument(&kernel("\tld.u32 %r1, [%rd1];\n\tatom.add.u32 %r2, [%rd1+4], 1;\n"), &Fence).unwrap();
        let p = &out.ptx;
        assert_eq!(p.matches("isspacep.global \t%__gf_p, %__gf_a;").count(), 2, "{p}");
        assert_eq!(p.matches("selp.b64 \t%__gf_t, %__gf_t, %__gf_a, %__gf_p;").count(), 2, "{p}");
        assert!(p.contains("ld.u32 \t%r1, [%__gf_t];"), "{p}");
        assert!(p.contains("atom.add.u32 \t%r2, [%__gf_t], 1;"), "{p}");
        assert_eq!(out.report.functions[0].sites, 2);
    }

    #[test]
    fn on_chip_and_parameter_accesses_are_left_alone() {
        let src = kernel("\tst.shared.u32 [sh+4], %r1;\n\tld.local.u32 %r2, [%rd2];\n");
        let out = crate::instrument(&src, &Fence).unwrap();
        assert_eq!(out.report.functions[0].sites, 0);
        assert!(!out.ptx.contains("%__gf_t"), "{}", out.ptx);
        assert!(out.ptx.contains("ld.param.u64 \t%rd1, [p];"), "{}", out.ptx);
    }

    /// A bulk copy's size is a run-time value: the copy is fenced to 16 bytes, its size
    /// clamped to the partition's and its offset to where a copy of that size still ends
    /// inside it.
    #[test]
    fn a_bulk_copys_global_side_is_fenced_and_its_size_clamped() {
        let out = crate::instrument(
            &kernel("\tcp.async.bulk.global.shared::cta.bulk_group [%rd1+32], [sh], %r1;\n\tcp.async.bulk.prefetch.L2.global [%rd1], 64;\n"),
            &Fence,
        )
        .unwrap();
        let p = &out.ptx;
        let expected = [
            "cvt.u64.u32 \t%__gf_s, %r1;",
            "and.b64 \t%__gf_s, %__gf_s, -16;",
            "add.s64 \t%__gf_l, %__gf_m, 1;",
            "min.u64 \t%__gf_s, %__gf_s, %__gf_l;",
            "sub.s64 \t%__gf_l, %__gf_l, %__gf_s;",
            "add.s64 \t%__gf_a, %rd1, 32;",
            "and.b64 \t%__gf_t, %__gf_a, %__gf_m16;",
            "min.u64 \t%__gf_t, %__gf_t, %__gf_l;",
            "or.b64 \t%__gf_t, %__gf_t, %__gf_b;",
            "cvt.u32.u64 \t%__gf_z, %__gf_s;",
            "cp.async.bulk.global.shared::cta.bulk_group \t[%__gf_t], [sh], %__gf_z;",
        ];
        let mut at = 0;
        for e in expected {
            at = at + p[at..].find(e).unwrap_or_else(|| panic!("{e:?} not in order in:\n{p}")) + e.len();
        }
        assert!(p.contains("mov.b64 \t%__gf_s, 64;"), "an immediate size: {p}");
        assert!(p.contains("cp.async.bulk.prefetch.L2.global \t[%__gf_t], %__gf_z;"), "{p}");
        assert_eq!(out.report.functions[0].sites, 2);
    }

    /// A tensor map is the tenant's only if it is a kernel parameter the manager checked:
    /// the copy gets the parameter's address anew right before it.
    #[test]
    fn a_tensor_copy_takes_its_map_from_its_parameter_anew() {
        let src = ".version 8.0\n.target sm_90\n.address_size 64\n.shared .align 128 .b8 sh[4096];\n\
                   .visible .entry k(.param .align 64 .b8 k_map[128], .param .u32 k_x)\n{\n\
                   \t.reg .b64 %rd<4>;\n\t.reg .b32 %r<4>;\n\tmov.b64 %rd1, k_map;\n\tld.param.u32 %r1, [k_x];\n\
                   \tcvta.param.u64 %rd2, %rd1;\n\tmov.u32 %r2, sh;\n\
                   \tcp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd2, {%r1}], [%r2];\n\tret;\n}\n";
        let mut m = gpusan_ptx::parse(src).unwrap();
        let r = run(&mut m).unwrap();
        assert_eq!(r.unfenced, 0);
        assert_eq!(r.maps, vec![(Name::from("k"), vec![Name::from("k_map")])]);
        let p = gpusan_ptx::print(&m);
        let anew = "mov.b64 \t%__gf_tm, k_map;\n\tcvta.param.u64 \t%__gf_tm, %__gf_tm;\n\tcp.async.bulk.tensor.1d.global.shared::cta.bulk_group \t[%__gf_tm, {%r1}], [%r2];";
        assert!(p.contains(anew), "{p}");
        crate::verify(&gpusan_ptx::parse(&p).unwrap()).unwrap();
    }

    /// A map the kernel reads from memory, or whose register is also set otherwise, could
    /// be one the kernel wrote: not the tenant's for sure.
    #[test]
    fn a_tensor_map_from_anywhere_else_is_counted_unfenced() {
        let copy = "\tcp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd1, {%r1}], [sh];\n";
        // %rd1 is loaded from a parameter's value: a pointer the kernel was given.
        let mut m = gpusan_ptx::parse(&kernel(copy)).unwrap();
        let r = run(&mut m).unwrap();
        assert_eq!((r.unfenced, r.maps.len()), (1, 0));
        let src = ".version 8.0\n.target sm_90\n.address_size 64\n.shared .align 128 .b8 sh[4096];\n\
                   .visible .entry k(.param .align 64 .b8 k_map[128], .param .u64 k_p)\n{\n\
                   \t.reg .b64 %rd<4>;\n\t.reg .b32 %r<4>;\n\t.reg .pred %q;\n\tmov.b64 %rd1, k_map;\n\
                   \tsetp.eq.u32 %q, %r1, 0;\n\t@%q ld.param.u64 %rd1, [k_p];\n\
                   \tcp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd1, {%r1}], [sh];\n\tret;\n}\n";
        let mut m = gpusan_ptx::parse(src).unwrap();
        assert_eq!(run(&mut m).unwrap().unfenced, 1, "one definition of the register is a load");
    }

    #[test]
    fn a_texture_or_surface_access_is_counted_unfenced() {
        let mut m = gpusan_ptx::parse(&kernel("\tsust.b.1d.b32.trap [%rd1, {%r1}], {%r2};\n")).unwrap();
        assert_eq!(run(&mut m).unwrap().unfenced, 1);
    }

    /// The module's variables are read through `__gpusan_vars`, in declaration order: their
    /// address taken with `mov` becomes the load, an address operand gets one before it, and
    /// the access is then fenced like any other.
    #[test]
    fn module_variables_are_reached_through_their_relocated_addresses() {
        let src = ".version 8.0\n.target sm_90\n.address_size 64\n.global .align 4 .b8 table[64];\n\
                   .global .align 4 .f32 scale = 0f40000000;\n.extern .global .align 4 .u32 other;\n\
                   .visible .entry k()\n{\n\t.reg .b64 %rd<3>;\n\t.reg .f32 %f<2>;\n\t.reg .b32 %r<2>;\n\
                   \tmov.u64 %rd1, table;\n\tst.global.u32 [%rd1+8], 1;\n\tld.global.f32 %f1, [scale+0];\n\
                   \tld.global.u32 %r1, [other];\n\tret;\n}\n";
        let mut m = gpusan_ptx::parse(src).unwrap();
        assert_eq!(relocated_variables(&m), vec![Name::from("table"), Name::from("scale")]);
        let r = run(&mut m).unwrap();
        assert_eq!(r.relocated, 2);
        assert_eq!(r.unfenced, 1, "the extern variable");
        let p = gpusan_ptx::print(&m);
        assert!(p.contains(".visible .const .align 8 .u64 \t__gpusan_vars[2];"), "{p}");
        assert!(p.contains("ld.const.u64 \t%rd1, [__gpusan_vars];"), "{p}");
        assert!(p.contains("ld.const.u64 \t%__gf_v, [__gpusan_vars+8];"), "{p}");
        assert!(p.contains("add.s64 \t%__gf_a, %__gf_v, 0;") || p.contains("mov.b64 \t%__gf_a, %__gf_v;"), "{p}");
        assert!(p.contains("ld.global.f32 \t%f1, [%__gf_t];"), "{p}");
        assert!(!p.contains("mov.u64 \t%rd1, table;"), "{p}");
        crate::verify(&gpusan_ptx::parse(&p).unwrap()).unwrap();
    }

    #[test]
    fn a_variables_address_in_another_variables_initializer_is_counted_unfenced() {
        let src = ".version 8.0\n.target sm_90\n.address_size 64\n.global .align 4 .b8 table[64];\n\
                   .global .align 8 .u64 p = generic(table);\n.visible .entry k()\n{\n\tret;\n}\n";
        let mut m = gpusan_ptx::parse(src).unwrap();
        assert_eq!(run(&mut m).unwrap().unfenced, 1);
    }

    #[test]
    fn a_vector_access_is_aligned_to_its_whole_width() {
        let out = crate::instrument(&kernel("\tld.global.v4.u32 {%r1, %r2, %r1, %r2}, [%rd1];\n"), &Fence).unwrap();
        assert!(out.ptx.contains("and.b64 \t%__gf_t, %__gf_a, %__gf_m16;"), "{}", out.ptx);
        assert!(out.ptx.contains("and.b64 \t%__gf_m16, %__gf_m, -16;"), "{}", out.ptx);
    }

    /// A trap would end the shared context: the thread sets the tenant's abort flag and
    /// exits instead, under the trap's own guard.
    #[test]
    fn a_trap_sets_the_abort_flag_and_exits() {
        let out = crate::instrument(&kernel("\tsetp.eq.u32 %q, %r1, 0;\n\t@%q trap;\n\tbrkpt;\n"), &Fence).unwrap();
        let p = &out.ptx;
        assert!(!p.contains("trap;") && !p.contains("brkpt;"), "{p}");
        assert!(p.contains("@%q ld.const.u64 \t%__gf_a, [__gpusan_fence+16];"), "{p}");
        assert!(p.contains("@%q st.volatile.global.u32 \t[%__gf_a], 1;"), "{p}");
        assert!(p.contains("@%q exit;"), "{p}");
        assert_eq!(p.matches("st.volatile.global.u32 \t[%__gf_a], 1;").count(), 2, "{p}");
    }

    #[test]
    fn an_indirect_branchs_index_is_clamped_to_its_table() {
        let body = "\t$T: .branchtargets $A, $B, $C;\n\t@%q brx.idx %r1, $T;\n$A:\n\tret;\n$B:\n\tret;\n$C:\n";
        let out = crate::instrument(&kernel(body), &Fence).unwrap();
        let p = &out.ptx;
        assert!(p.contains("min.u32 \t%__gf_i, %r1, 2;"), "{p}");
        assert!(p.contains("@%q brx.idx \t%__gf_i, $T;"), "{p}");
    }

    /// `cp.async` reads global memory into shared: its source is fenced to the copy's size,
    /// its shared destination left alone.
    #[test]
    fn an_async_copys_global_source_is_fenced() {
        let out = crate::instrument(&kernel("\tcp.async.cg.shared.global [sh], [%rd1+16], 16;\n"), &Fence).unwrap();
        let p = &out.ptx;
        assert!(p.contains("cp.async.cg.shared.global \t[sh], [%__gf_t], 16;"), "{p}");
        assert!(p.contains("and.b64 \t%__gf_t, %__gf_a, %__gf_m16;"), "{p}");
        assert_eq!(out.report.functions[0].sites, 1);
    }

    #[test]
    fn a_module_fenced_already_is_refused() {
        let once = crate::instrument(&kernel("\tst.global.u32 [%rd1], %r1;\n"), &Fence).unwrap();
        let err = crate::instrument(&once.ptx, &Fence).unwrap_err();
        assert!(err.to_string().contains("instrumented twice"), "{err}");
    }
}
