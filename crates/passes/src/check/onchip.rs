//! Shared and local memory for the `check` pass (cuCatch §4.2–4.3, without its symbol
//! table: the bounds come from the PTX declarations).
//!
//! Every `.shared` and `.local` variable the function can see is a *window*: static arrays
//! span `[sym, sym + declared size)`, dynamic shared memory (`.extern .shared … name[]`)
//! spans `[sym, sym + %dynamic_smem_size)`, and nvcc's stack frame `__local_depotN` is a
//! local window like any other. An access is checked against a window when every
//! definition its address can come from leads back, through pointer arithmetic and window
//! conversions, to that one symbol ([`classify`]). The bounds are computed at run time from
//! the symbol (`mov`, or `cvta` for a generic access), so where ptxas places the arrays does
//! not matter, and overflowing one array into its neighbour is caught.
//!
//! The walk keeps the address's *form* (window address or generic address) and requires
//! every `cvta` on the way to convert between the symbol's own window and generic: a value
//! that left the window some other way (a `cvta` of another space, a load, a call, a `.reg`
//! parameter, `mapa`, an operation that is not pointer arithmetic) makes the access
//! unchecked. Shared addresses held in 32-bit registers are formed in 32 bits, as the
//! hardware forms them, so a base that wraps below 0 and an offset that brings it back are
//! not judged.
//!
//! In kernels, local and generic accesses through a call result or a loaded pointer are
//! also checked for use after scope: they must stay inside the kernel's own frame
//! ([`scope`], which says why only kernels can be judged). A use in a `.func` is caught
//! where the dead frame is handed out instead: a `.func` whose returned value leads back to
//! its own frame has that value checked at its return ([`returned`]; the value is reported
//! when it is inside the frame, and returned all the same).
//!
//! # Local arrays one by one
//!
//! nvcc merges a function's locals into `__local_depotN`, and NVVM gives each object (an
//! `alloca`: an array, a struct) its own base `%SPL + c`. Under [`LocalBounds::Object`] (the
//! default) an access whose address the walk follows back to one such base is held to that
//! object: from `c` to the next object's start ([`objects`] says how starts are found and
//! merged, and what that can miss), so an index past one array that lands in its neighbour
//! is out of bounds (cuCatch §5.2.3 bounds only the frame). Addresses made from the frame
//! register with no constant base first, or from two bases, are held to the frame;
//! `gpusan run --local-bounds frame` holds every one to the frame. An offset inside an
//! object is no boundary: `&m[1][0]` of `int m[4][8]` may walk into rows 2 and 3, and a
//! member pointer may reach the whole struct, and both are within their object. The
//! record of a bad access names the object, its frame offset and size
//! ([`FrameObject`], `WindowCheck::frame_object`), and the report says which array was
//! overrun. `tests/check_cases.rs` holds the objects found in what the pinned nvcc makes of
//! `tests/fixtures/check/local_layouts.cu` (rows, flat walks, member and interior pointers,
//! byte walks, unrolled loops) to the arrays and structs the source declares.
//!
//! What is left unchecked (counted as `other`): on-chip accesses whose address does not lead
//! to exactly one window (except those the use-after-scope check takes), `ldmatrix`/
//! `stmatrix` with fewer than four matrices (some threads' addresses are unused),
//! `shared::cluster` windows reached through `mapa`, and local accesses in a `.func`
//! through pointers from elsewhere (a parameter, a call result, a load): of those, a
//! pointer to a dead frame is caught only where a `.func` returns it ([`scope`] says what
//! else hands one out unseen).

use std::collections::HashMap;
use std::fmt::Write as _;

use gpusan_abi::record::{self, FrameObject};
use gpusan_abi::CODE_LOCAL_USE_AFTER_SCOPE;
use gpusan_ptx::ast::{Function, Instruction, Item, Name, Operand, StateSpace, Statement, VarDecl};
use gpusan_ptx::cfg::InstId;
use gpusan_ptx::dataflow::DefSite;
use gpusan_ptx::semantics::{address_conversion, AccessKind, Conversion, MemAccess, Space};
use gpusan_ptx::Module;

use super::config::LocalBounds;
use super::plan::{required_alignment, Align};
use super::regs::RegWidths;
use super::roots::RootAnalysis;

mod objects;
mod scope;
mod window;
use objects::FrameObjects;
use scope::LiveFrame;
use window::{Extent, Region, Window};

/// The windows a function sees, and what the use-after-scope check knows of it.
#[derive(Debug, Default, Clone)]
pub(super) struct Windows {
    /// Windows by name. `None`: declared more than once with different bounds, so which
    /// one a use means depends on scope; such names are not judged.
    vars: HashMap<Name, Option<Window>>,
    /// The module declares `.local` variables at module scope.
    module_local: bool,
    /// The function is a kernel whose live local memory is known ([`scope`]).
    live: Option<LiveFrame>,
    /// How local accesses are bounded.
    local_bounds: LocalBounds,
    /// The objects in the function's frame ([`objects`]), under [`LocalBounds::Object`].
    objects: FrameObjects,
    /// A `.func`'s return parameters and the `.local` variables of its own body: a value
    /// stored to the one and derived from the other hands out a dead frame ([`returned`]).
    returns: Vec<Name>,
    own_locals: Vec<Name>,
}

impl Windows {
    /// The windows declared at module scope.
    pub(super) fn of_module(m: &Module, local_bounds: LocalBounds) -> Windows {
        let mut w = Windows { local_bounds, ..Windows::default() };
        for item in &m.items {
            if let Item::Var(d) = item {
                w.module_local |= d.space == StateSpace::Local;
                w.add(d);
            }
        }
        w
    }

    /// These and the ones declared in `f`'s body.
    pub(super) fn with_function(&self, f: &Function) -> Windows {
        let mut w = self.clone();
        w.live = LiveFrame::of(f, self.module_local);
        fn walk(stmts: &[Statement], w: &mut Windows) {
            for s in stmts {
                match s {
                    Statement::Decl(d) => w.add(d),
                    Statement::Block(b) => walk(b, w),
                    _ => {}
                }
            }
        }
        walk(f.body.as_deref().unwrap_or_default(), &mut w);
        if !f.is_kernel() {
            w.returns = f.returns.iter().flatten().map(|p| p.name).collect();
            w.own_locals = scope::own_locals(f);
        }
        if w.local_bounds == LocalBounds::Object {
            let sizes = w
                .vars
                .iter()
                .filter_map(|(n, v)| match v {
                    Some(Window { region: Region::Local, extent: Extent::Bytes(b) }) => Some((*n, *b)),
                    _ => None,
                })
                .collect();
            w.objects = FrameObjects::of(f, &sizes);
        }
        w
    }

    fn add(&mut self, d: &VarDecl) {
        if !matches!(d.space, StateSpace::Shared | StateSpace::SharedCta | StateSpace::Local) {
            return;
        }
        let new = Window::of(d);
        match self.vars.get_mut(&d.name) {
            Some(old) if *old != new => *old = None,
            Some(_) => {}
            None => {
                self.vars.insert(d.name, new);
            }
        }
    }

    fn get(&self, name: Name) -> Option<Window> {
        self.vars.get(&name).copied().flatten()
    }
}

/// The address operand's base as the check reads it.
#[derive(Debug, Clone)]
enum Base {
    Reg32(Name),
    Reg64(Name),
    /// `[sym+k]`: the window's own symbol.
    Symbol,
}

/// What an on-chip check holds the access to.
#[derive(Debug, Clone)]
enum Bound {
    /// The variable `symbol`'s window; for an object in a frame ([`objects`]), the part of
    /// it `[start, end)` the object spans.
    Window { symbol: Name, window: Window, object: Option<(u64, u64)> },
    /// A kernel's live local memory: its frame, or nothing ([`scope`]).
    Live(Option<(Name, u64)>),
    /// A `.func`'s own frame variable and its size: the value the function returns must not
    /// be an address in it ([`returned`]).
    Returned(Name, u64),
}

/// One access checked against a window, or for use after scope.
#[derive(Debug, Clone)]
pub(super) struct WindowCheck {
    /// Index of the address operand.
    pub(super) operand: usize,
    offset: i64,
    base: Base,
    pub(super) width: u32,
    /// The access's space: the window's (local for use after scope), or generic.
    pub(super) space: Space,
    pub(super) kind: AccessKind,
    bound: Bound,
    /// What the address must be aligned to ([`super::plan::required_alignment`]).
    pub(super) align: Align,
}

/// One line of the plan (`explain`): what the access is held to, and through which address.
impl std::fmt::Display for WindowCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let offset = self.offset;
        match self.base {
            Base::Reg32(r) | Base::Reg64(r) => write!(f, "[{r}{offset:+}]")?,
            Base::Symbol => write!(f, "[symbol{offset:+}]")?,
        }
        write!(f, " {} bytes", self.width)?;
        if !self.align.is_none() {
            match self.align.want {
                0 => write!(f, " aligned {}", self.align.bytes())?,
                w => write!(f, " at {w} mod {}", self.align.bytes())?,
            }
        }
        match &self.bound {
            Bound::Window { symbol, window, object } => {
                let region = if window.region == Region::Shared { "shared" } else { "local" };
                if let Some((lo, hi)) = object {
                    return write!(f, " in the {region} object at {symbol} [{lo}, {hi})");
                }
                match window.extent {
                    Extent::Bytes(n) => write!(f, " in {region} {symbol} [0, {n})"),
                    Extent::Dynamic => write!(f, " in {region} {symbol} [0, %dynamic_smem_size)"),
                }
            }
            Bound::Live(Some((frame, bytes))) => write!(f, " in the live frame {frame} ({bytes} bytes)"),
            Bound::Live(None) => write!(f, " in the live frame (none)"),
            Bound::Returned(frame, bytes) => write!(f, " returned: not to be in its own frame {frame} ({bytes} bytes)"),
        }
    }
}

/// Which count of [`super::CheckFunction`] a check adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Counted {
    Shared,
    Local,
    Scope,
}

impl WindowCheck {
    /// The register the address is formed from, and the constant offset added to it; none
    /// for `[sym+k]`.
    pub(super) fn base_reg(&self) -> Option<(Name, i64)> {
        match self.base {
            Base::Reg32(r) | Base::Reg64(r) => Some((r, self.offset)),
            Base::Symbol => None,
        }
    }

    /// The variable bounding the access; none for a use-after-scope check (whose group
    /// range check is not built).
    pub(super) fn symbol(&self) -> Option<Name> {
        match self.bound {
            Bound::Window { symbol, .. } => Some(symbol),
            Bound::Live(_) | Bound::Returned(..) => None,
        }
    }

    /// `[sym+k]` inside a window of known size: in bounds whatever runs, so no check is
    /// needed (cuCatch's static elimination).
    pub(super) fn statically_in_bounds(&self) -> bool {
        match (&self.base, &self.bound) {
            (Base::Symbol, Bound::Window { window: Window { extent: Extent::Bytes(n), .. }, object: None, .. }) => {
                let n = *n;
                self.offset >= 0 && (self.offset as u64).checked_add(u64::from(self.width)).is_some_and(|e| e <= n)
            }
            _ => false,
        }
    }

    /// The same address form over `[base + min, base + end)`, its first byte aligned as
    /// `align` says: the range check of a group of accesses through one register (`groups`).
    pub(super) fn spanning(&self, min: i64, end: i64, align: Align) -> WindowCheck {
        WindowCheck { offset: min, width: u32::try_from(end - min).unwrap_or(u32::MAX), align, ..self.clone() }
    }

    /// A record's [`record::SPACE`].
    pub(super) fn record_space(&self) -> u32 {
        match &self.bound {
            _ if self.space == Space::Generic => record::SPACE_GENERIC,
            Bound::Window { window, .. } => window.region.record_space(),
            Bound::Live(_) | Bound::Returned(..) => Region::Local.record_space(),
        }
    }

    /// A record's [`record::ALLOCATION`]: the local object the access was held to, or the
    /// frame a function returned an address in ([`FrameObject`]); 0 for anything else.
    pub(super) fn frame_object(&self) -> u64 {
        match self.bound {
            Bound::Window { window: Window { region: Region::Local, .. }, object: Some((lo, hi)), .. } => {
                FrameObject::Object { offset: lo, size: hi - lo }.word()
            }
            Bound::Returned(_, size) => FrameObject::ReturnedFrame { size }.word(),
            _ => 0,
        }
    }

    /// Whether a bad value is reported and the instruction still runs: a returned frame
    /// address is harmless until used, and the caller's own checks judge that use.
    pub(super) fn runs_anyway(&self) -> bool {
        matches!(self.bound, Bound::Returned(..))
    }

    /// A record's [`record::CODE`] for a bad access.
    pub(super) fn code(&self) -> u32 {
        match &self.bound {
            Bound::Window { window, .. } => window.region.code(),
            Bound::Live(_) | Bound::Returned(..) => CODE_LOCAL_USE_AFTER_SCOPE,
        }
    }

    pub(super) fn counted(&self) -> Counted {
        match &self.bound {
            Bound::Window { window, .. } if window.region == Region::Shared => Counted::Shared,
            Bound::Window { .. } => Counted::Local,
            Bound::Live(_) | Bound::Returned(..) => Counted::Scope,
        }
    }
}

pub(super) enum Verdict {
    Check(WindowCheck),
    /// An on-chip access this module cannot bound.
    Unchecked,
    /// Not an on-chip access as far as this module can tell: the global check's business;
    /// with a use-after-scope check when it may also be a generic access to local memory.
    Elsewhere(Option<WindowCheck>),
}

/// What one access is to the on-chip checks.
pub(super) fn classify(
    analysis: &mut RootAnalysis,
    widths: &RegWidths,
    windows: &Windows,
    i: InstId,
    inst: &Instruction,
    access: &MemAccess,
) -> Verdict {
    let region = Region::of_space(access.space);
    let generic = access.space == Space::Generic;
    let not_mine = || {
        if access.space.is_shared() || access.space == Space::Local {
            Verdict::Unchecked
        } else {
            Verdict::Elsewhere(None)
        }
    };
    if (region.is_none() && !generic) || access.kind == AccessKind::Prefetch {
        return not_mine();
    }
    if matches!(inst.opcode.as_str(), "ldmatrix" | "stmatrix") && !inst.has_modifier("x4") {
        return not_mine();
    }
    let Some(width) = access.width.bytes() else { return not_mine() };
    let Some((Some(name), offset)) = access.address(inst).as_address() else { return not_mine() };
    let align = Align::of(required_alignment(inst, width));
    let make = |base: Base, bound: Bound| WindowCheck {
        operand: access.operand,
        offset,
        base,
        width,
        space: access.space,
        kind: access.kind,
        bound,
        align,
    };
    if !name.starts_with('%') {
        // `[sym+k]`: only in the symbol's own space is it the window's address.
        return match (region, windows.get(name)) {
            (Some(r), Some(w)) if w.region == r => {
                Verdict::Check(make(Base::Symbol, Bound::Window { symbol: name, window: w, object: None }))
            }
            _ => not_mine(),
        };
    }
    let Some(reg) = analysis.resolve(i, name) else { return not_mine() };
    let base = match widths.bits(name) {
        Some(64) => Base::Reg64(name),
        Some(32) if !generic => Base::Reg32(name),
        _ => return not_mine(),
    };
    let form = if generic { Form::Generic } else { Form::Window };
    let o = origin(analysis, windows, i, reg, form);
    match o.window {
        Some((symbol, w)) if region.is_none_or(|r| r == w.region) => {
            let object = match o.object {
                Obj::At(c) if w.region == Region::Local => windows.objects.object(symbol, c),
                _ => None,
            };
            return Verdict::Check(make(base, Bound::Window { symbol, window: w, object }));
        }
        Some(_) => return not_mine(),
        None => {}
    }
    // A local address from a call or from memory, in a kernel: it must be in the frame.
    match (&windows.live, region) {
        (Some(live), Some(Region::Local) | None) if o.foreign => {
            let c = make(base, Bound::Live(live.frame));
            if generic {
                Verdict::Elsewhere(Some(c))
            } else {
                Verdict::Check(c)
            }
        }
        _ => not_mine(),
    }
}

/// The check of `inst` when it is a `.func` storing its return value, a 64-bit register
/// whose every definition leads back to a `.local` variable of the function's own body: that
/// address is dead once the function returns, wherever ptxas placed its frame ([`scope`]).
/// The check confirms at run time that the value is inside the variable.
pub(super) fn returned(
    analysis: &mut RootAnalysis,
    widths: &RegWidths,
    windows: &Windows,
    i: InstId,
    inst: &Instruction,
) -> Option<WindowCheck> {
    if windows.returns.is_empty() || inst.opcode != "st" || inst.modifiers().next() != Some("param") {
        return None;
    }
    let (Some(to), _) = inst.operands.first()?.as_address()? else { return None };
    let Some(Operand::Name(value)) = inst.operands.get(1) else { return None };
    if !windows.returns.contains(&to) || !value.starts_with('%') || widths.bits(*value) != Some(64) {
        return None;
    }
    let reg = analysis.resolve(i, *value)?;
    for (form, space) in [(Form::Generic, Space::Generic), (Form::Window, Space::Local)] {
        let o = origin(analysis, windows, i, reg, form);
        let Some((symbol, Window { extent: Extent::Bytes(n), .. })) = o.window else { continue };
        if !windows.own_locals.contains(&symbol) {
            return None;
        }
        return Some(WindowCheck {
            operand: 0,
            offset: 0,
            base: Base::Reg64(*value),
            width: 8,
            space,
            kind: AccessKind::Write,
            bound: Bound::Returned(symbol, n),
            align: Align::of(1),
        });
    }
    None
}

/// How a value holds an on-chip address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Form {
    /// An address in the window's own space (what `mov %r, sym` gives).
    Window,
    /// A generic address (what `cvta.shared` gives).
    Generic,
}

/// What a value is, as far as windows go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    /// No address in it: an integer computed by arithmetic (or not known yet).
    Offset,
    /// An address derived from this window symbol, within the object [`Obj`] says.
    Sym(Name, Obj),
    /// From somewhere the walk does not see (a load, a call, a `.reg` parameter): an
    /// integer or a pointer.
    Unknown,
    /// Two origins, or a value that left the window: not judged.
    Conflict,
}

/// Which object of a window an address is derived from: for a frame (`__local_depotN`), the
/// object whose base `frame + c` the address was formed from ([`objects`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Obj {
    /// The window's own address, or arithmetic on it with no constant base first.
    #[default]
    Whole,
    /// From the base `window + c`.
    At(i64),
    /// From two bases: the window as a whole bounds it.
    Mixed,
}

impl Val {
    /// The value of a register some definitions of which reach (a join point, `selp`).
    fn join(self, o: Val) -> Val {
        use Val::*;
        match (self, o) {
            (Offset, x) | (x, Offset) => x,
            (Sym(a, x), Sym(b, y)) if a == b => Sym(a, if x == y { x } else { Obj::Mixed }),
            (Unknown, Unknown) => Unknown,
            _ => Conflict,
        }
    }

    /// `a + b`. Pointers do not add: next to a window address, an unknown is an integer.
    fn sum(self, o: Val) -> Val {
        use Val::*;
        match (self, o) {
            (Conflict, _) | (_, Conflict) | (Sym(..), Sym(..)) => Conflict,
            (Offset, x) | (x, Offset) => x,
            (Sym(a, o), Unknown) | (Unknown, Sym(a, o)) => Sym(a, o),
            (Unknown, Unknown) => Unknown,
        }
    }

    /// `a - b`.
    fn difference(self, o: Val) -> Val {
        use Val::*;
        match (self, o) {
            (Conflict, _) | (_, Conflict) => Conflict,
            (x, Offset) => x,
            // Two addresses in one window: how far apart they are.
            (Sym(a, _), Sym(b, _)) if a == b => Offset,
            (Sym(..), Sym(..)) | (Offset, Sym(..)) => Conflict,
            // An address less an unknown is an address, or a distance: unknown.
            (Sym(..), Unknown) | (Unknown, _) | (Offset, Unknown) => Unknown,
        }
    }
}

/// How a definition makes its value from its operands.
enum Step {
    /// An integer that carries no address.
    Offset,
    /// Anything the walk does not follow.
    Unknown,
    /// `mov %r, sym`.
    Symbol(Name),
    /// The value of operand `k` (`mov`, `cvt` between integers).
    Copy(usize),
    Add,
    Sub,
    /// `mad`: the addend, operand 3, plus a product (an integer).
    Mad,
    Selp,
    /// `cvta.R` (`to_generic`) or `cvta.to.R` of operand 1.
    Convert {
        region: Region,
        to_generic: bool,
    },
}

fn step(inst: &Instruction) -> Step {
    let special = |n: &str| n.contains('.') || gpusan_ptx::semantics::is_predefined(n);
    match inst.opcode.as_str() {
        "mov" => match inst.operands.get(1) {
            Some(Operand::Name(n)) if n.starts_with('%') => {
                if special(n) {
                    Step::Offset
                } else {
                    Step::Copy(1)
                }
            }
            Some(Operand::Name(n)) => Step::Symbol(*n),
            Some(Operand::Int(_)) => Step::Offset,
            _ => Step::Unknown,
        },
        "add" => Step::Add,
        "sub" => Step::Sub,
        "mad" => Step::Mad,
        "selp" => Step::Selp,
        // Widening and narrowing between integer registers: shared addresses move between
        // 32- and 64-bit registers this way.
        "cvt" => {
            let source = inst.modifiers().last().unwrap_or("");
            if matches!(source, "u16" | "u32" | "u64" | "s16" | "s32" | "s64" | "b32" | "b64") {
                Step::Copy(1)
            } else {
                Step::Offset
            }
        }
        "cvta" => match address_conversion(inst) {
            Some(Conversion::ToGeneric(s)) => {
                Region::of_space(s).map_or(Step::Unknown, |region| Step::Convert { region, to_generic: true })
            }
            Some(Conversion::FromGeneric(s)) => {
                Region::of_space(s).map_or(Step::Unknown, |region| Step::Convert { region, to_generic: false })
            }
            None => Step::Unknown,
        },
        "mul" | "mul24" | "mad24" | "shl" | "shr" | "and" | "or" | "xor" | "not" | "neg" | "div" | "rem" | "min"
        | "max" | "abs" | "popc" | "clz" | "bfe" | "bfi" | "brev" | "prmt" | "setp" | "set" | "sad" | "bfind"
        | "fns" | "shf" | "cnot" | "lop3" => Step::Offset,
        _ => Step::Unknown,
    }
}

/// One definition, read in one form.
type Key = (InstId, gpusan_ptx::dataflow::RegId, Form);

/// The value of one operand: the join of the definitions reaching it, or a constant.
enum Read {
    Defs(Vec<Key>, bool /* a `.reg` parameter's value reaches too */),
    Const(Val),
    /// An immediate: an integer, whose value makes a frame object's start ([`Obj::At`]).
    Imm(i64),
}

/// A definition's value from its operands' reads.
enum Rule {
    Const(Val),
    Copy(Read),
    Add(Read, Read),
    Sub(Read, Read),
    Selp(Read, Read),
    Convert(Region, Read),
}

/// Definitions a value may depend on before the walk gives up (unchecked).
const MAX_NODES: usize = 20_000;
/// Rounds of the fixpoint before the walk gives up.
const MAX_ROUNDS: usize = 64;

/// What [`origin`] found.
#[derive(Debug, Default)]
struct Origin {
    /// The one window symbol the value is derived from.
    window: Option<(Name, Window)>,
    /// The object in that window it is derived from.
    object: Obj,
    /// Some definition the value depends on is a call result or a load
    /// ([`LiveFrame::is_foreign`]); only looked for in kernels the use-after-scope check judges.
    foreign: bool,
}

/// The one window symbol the value of `reg` at `i`, read in form `form`, is derived from.
///
/// A fixpoint over the definitions the value depends on (loops carry addresses around):
/// every definition starts as [`Val::Offset`] and is recomputed from its operands until
/// nothing changes.
fn origin(
    analysis: &mut RootAnalysis,
    windows: &Windows,
    i: InstId,
    reg: gpusan_ptx::dataflow::RegId,
    form: Form,
) -> Origin {
    let mut foreign = false;
    // Most walks visit a few dozen definitions: room for them from the start.
    let mut nodes: super::plan::FastMap<Key, Rule> =
        super::plan::FastMap::with_capacity_and_hasher(64, Default::default());
    let mut order: Vec<Key> = Vec::new();
    let mut work: Vec<Key> = Vec::new();

    // The read of register `r` at instruction `at` in form `f`, queueing new definitions.
    fn read(analysis: &mut RootAnalysis, at: InstId, name: Option<Name>, f: Form, work: &mut Vec<Key>) -> Read {
        let Some(r) = name.and_then(|n| analysis.resolve(at, n)) else { return Read::Const(Val::Unknown) };
        let mut defs = Vec::new();
        let mut entry = false;
        for site in analysis.reaching(at, r) {
            match site {
                DefSite::Entry => entry = true,
                DefSite::Inst(d) => {
                    defs.push((d, r, f));
                    work.push((d, r, f));
                }
            }
        }
        Read::Defs(defs, entry)
    }
    // An operand of a definition: a register's read, an immediate (an integer), or
    // anything else (unknown).
    fn operand(
        analysis: &mut RootAnalysis,
        d: InstId,
        inst: &Instruction,
        k: usize,
        f: Form,
        work: &mut Vec<Key>,
    ) -> Read {
        match inst.operands.get(k) {
            Some(Operand::Name(n)) if n.starts_with('%') => {
                if n.contains('.') || gpusan_ptx::semantics::is_predefined(n) {
                    Read::Const(Val::Offset)
                } else {
                    read(analysis, d, Some(*n), f, work)
                }
            }
            Some(Operand::Int(l)) => Read::Imm(l.as_i64()),
            _ => Read::Const(Val::Unknown),
        }
    }

    let start = read(analysis, i, Some(analysis.reaching_defs.analysis().registers().name(reg)), form, &mut work);
    while let Some(key) = work.pop() {
        if nodes.contains_key(&key) {
            continue;
        }
        if nodes.len() >= MAX_NODES {
            return Origin::default();
        }
        let (d, _, f) = key;
        let inst = analysis.insts[d.index()];
        let rule = match step(inst) {
            Step::Offset => Rule::Const(Val::Offset),
            Step::Unknown => {
                foreign |= windows.live.as_ref().is_some_and(|l| l.is_foreign(inst));
                Rule::Const(Val::Unknown)
            }
            Step::Symbol(s) => Rule::Const(if f == Form::Window { Val::Sym(s, Obj::Whole) } else { Val::Conflict }),
            Step::Copy(k) => Rule::Copy(operand(analysis, d, inst, k, f, &mut work)),
            Step::Add => {
                Rule::Add(operand(analysis, d, inst, 1, f, &mut work), operand(analysis, d, inst, 2, f, &mut work))
            }
            Step::Sub => {
                Rule::Sub(operand(analysis, d, inst, 1, f, &mut work), operand(analysis, d, inst, 2, f, &mut work))
            }
            Step::Mad => Rule::Copy(operand(analysis, d, inst, 3, f, &mut work)),
            Step::Selp => {
                Rule::Selp(operand(analysis, d, inst, 1, f, &mut work), operand(analysis, d, inst, 2, f, &mut work))
            }
            Step::Convert { region, to_generic } => {
                // Walking backwards: `cvta.R d, s` makes a generic `d` from a window `s`.
                let (needed, before) =
                    if to_generic { (Form::Generic, Form::Window) } else { (Form::Window, Form::Generic) };
                if f != needed {
                    Rule::Const(Val::Conflict)
                } else {
                    match inst.operands.get(1) {
                        Some(Operand::Name(n)) if n.starts_with('%') => {
                            Rule::Convert(region, read(analysis, d, Some(*n), before, &mut work))
                        }
                        // `cvta.R d, sym`.
                        Some(Operand::Name(n)) if before == Form::Window => {
                            Rule::Convert(region, Read::Const(Val::Sym(*n, Obj::Whole)))
                        }
                        _ => Rule::Const(Val::Conflict),
                    }
                }
            }
        };
        nodes.insert(key, rule);
        order.push(key);
    }

    let mut values: HashMap<Key, Val> = HashMap::new();
    let value_of = |values: &HashMap<Key, Val>, r: &Read| match r {
        Read::Const(v) => *v,
        Read::Imm(_) => Val::Offset,
        Read::Defs(defs, entry) => {
            let init = if *entry { Val::Unknown } else { Val::Offset };
            defs.iter().fold(init, |acc, k| acc.join(values.get(k).copied().unwrap_or(Val::Offset)))
        }
    };
    let mut stable = false;
    for _ in 0..MAX_ROUNDS {
        let mut changed = false;
        // Definitions were found from the use backwards: compute them the other way.
        for key in order.iter().rev() {
            let v = match &nodes[key] {
                Rule::Const(v) => *v,
                Rule::Copy(r) => value_of(&values, r),
                Rule::Add(a, b) => {
                    let (va, vb) = (value_of(&values, a), value_of(&values, b));
                    // The frame's own address plus a constant: the start of an object in it.
                    match (va, vb, a, b) {
                        (Val::Sym(s, Obj::Whole), _, _, Read::Imm(c))
                        | (_, Val::Sym(s, Obj::Whole), Read::Imm(c), _) => Val::Sym(s, Obj::At(*c)),
                        _ => va.sum(vb),
                    }
                }
                Rule::Sub(a, b) => value_of(&values, a).difference(value_of(&values, b)),
                Rule::Selp(a, b) => value_of(&values, a).join(value_of(&values, b)),
                Rule::Convert(region, r) => match value_of(&values, r) {
                    Val::Sym(s, o) if windows.get(s).is_some_and(|w| w.region == *region) => Val::Sym(s, o),
                    Val::Offset => Val::Offset,
                    _ => Val::Conflict,
                },
            };
            if values.insert(*key, v) != Some(v) {
                changed = true;
            }
        }
        if !changed {
            stable = true;
            break;
        }
    }
    if !stable {
        return Origin::default();
    }
    let (window, object) = match value_of(&values, &start) {
        Val::Sym(s, o) => (windows.get(s).map(|w| (s, w)), o),
        _ => (None, Obj::Whole),
    };
    Origin { window, object, foreign }
}

/// Registers the window checks use, declared when a function has any.
pub(super) const REGISTERS: &str = "\t.reg .b32 %__gs_a32;\n\t.reg .b64 %__gs_wlo;\n\t.reg .b64 %__gs_wlim;\n";

/// Sets `%__gs_a` to the access's first byte and `%__gs_bad` to whether `[a, a + width)`
/// leaves the window (for use after scope: whether `a` is local memory outside the kernel's
/// frame); `%__gs_c` and `%__gs_q` are clobbered.
pub(super) fn check_text(c: &WindowCheck) -> String {
    // Written in place (`write!`): a string per line was a good part of the pass's time.
    let mut t = String::with_capacity(256);
    let off = c.offset;
    match &c.base {
        Base::Reg32(r) => {
            // In 32 bits, as the hardware forms the address: `sym - 4` then `+8` is `sym + 4`.
            if off == 0 {
                let _ = writeln!(t, "\tmov.b32 %__gs_a32, {r};");
            } else {
                let _ = writeln!(t, "\tadd.s32 %__gs_a32, {r}, {off};");
            }
            t.push_str("\tcvt.u64.u32 %__gs_a, %__gs_a32;\n");
        }
        Base::Reg64(r) => {
            if off == 0 {
                let _ = writeln!(t, "\tmov.b64 %__gs_a, {r};");
            } else {
                let _ = writeln!(t, "\tadd.s64 %__gs_a, {r}, {off};");
            }
        }
        Base::Symbol => {
            // Only a window's own symbol is a base (see `classify`).
            if let Bound::Window { symbol, .. } = &c.bound {
                let _ = writeln!(t, "\tmov.u64 %__gs_a, {symbol};");
                if off != 0 {
                    let _ = writeln!(t, "\tadd.s64 %__gs_a, %__gs_a, {off};");
                }
            }
        }
    }
    let (symbol, window, object) = match &c.bound {
        Bound::Window { symbol, window, object } => (symbol, window, object),
        Bound::Live(frame) => {
            t.push_str(&scope::check_text(*frame, c.space == Space::Generic));
            t.push_str(&c.align.text("%__gs_a", "%__gs_bad", true));
            return t;
        }
        Bound::Returned(frame, n) => {
            t.push_str(&scope::returned_text(*frame, *n, c.space == Space::Generic));
            return t;
        }
    };
    if c.space == Space::Generic {
        let _ = writeln!(t, "\tcvta.{}.u64 %__gs_wlo, {symbol};", window.region.name());
    } else {
        let _ = writeln!(t, "\tmov.u64 %__gs_wlo, {symbol};");
    }
    match (object, window.extent) {
        (Some((lo, hi)), _) => {
            let _ = writeln!(t, "\tadd.s64 %__gs_wlim, %__gs_wlo, {hi};");
            if *lo != 0 {
                let _ = writeln!(t, "\tadd.s64 %__gs_wlo, %__gs_wlo, {lo};");
            }
        }
        (None, Extent::Bytes(n)) => {
            let _ = writeln!(t, "\tadd.s64 %__gs_wlim, %__gs_wlo, {n};");
        }
        (None, Extent::Dynamic) => t.push_str(
            "\tmov.u32 %__gs_c, %dynamic_smem_size;\n\
             \tcvt.u64.u32 %__gs_wlim, %__gs_c;\n\
             \tadd.s64 %__gs_wlim, %__gs_wlo, %__gs_wlim;\n",
        ),
    }
    let _ = write!(
        t,
        "\tadd.s64 %__gs_e, %__gs_a, {};\n\
         \tsetp.lt.u64 %__gs_bad, %__gs_a, %__gs_wlo;\n\
         \tsetp.gt.or.u64 %__gs_bad, %__gs_e, %__gs_wlim, %__gs_bad;\n",
        c.width
    );
    t.push_str(&c.align.text("%__gs_a", "%__gs_bad", true));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(src: &str) -> VarDecl {
        let m = gpusan_ptx::parse(&format!(".version 9.0\n.target sm_90\n.address_size 64\n{src}\n")).unwrap();
        match m.items.into_iter().find(|i| matches!(i, Item::Var(_))) {
            Some(Item::Var(d)) => d,
            _ => panic!("no variable in {src}"),
        }
    }

    #[test]
    fn window_sizes_come_from_the_declaration() {
        let w = |s: &str| Window::of(&decl(s));
        assert_eq!(
            w(".shared .align 4 .b8 a[128];"),
            Some(Window { region: Region::Shared, extent: Extent::Bytes(128) })
        );
        assert_eq!(w(".shared .f32 t[16][17];"), Some(Window { region: Region::Shared, extent: Extent::Bytes(1088) }));
        assert_eq!(w(".shared .v4 .f32 v[2];"), Some(Window { region: Region::Shared, extent: Extent::Bytes(32) }));
        assert_eq!(w(".shared .u64 x;"), Some(Window { region: Region::Shared, extent: Extent::Bytes(8) }));
        assert_eq!(
            w(".extern .shared .align 16 .b8 dyn[];"),
            Some(Window { region: Region::Shared, extent: Extent::Dynamic })
        );
        assert_eq!(
            w(".local .align 16 .b8 __local_depot0[64];"),
            Some(Window { region: Region::Local, extent: Extent::Bytes(64) })
        );
        assert_eq!(w(".global .u32 g[4];"), None);
    }

    #[test]
    fn names_declared_twice_differently_are_not_windows() {
        let mut w = Windows::default();
        w.add(&decl(".shared .b8 a[16];"));
        w.add(&decl(".shared .b8 a[16];"));
        assert!(w.get("a".into()).is_some());
        w.add(&decl(".shared .b8 a[32];"));
        assert!(w.get("a".into()).is_none());
    }

    #[test]
    fn thirty_two_bit_addresses_are_formed_in_thirty_two_bits() {
        let c = WindowCheck {
            operand: 1,
            offset: 8,
            base: Base::Reg32("%r1".into()),
            width: 4,
            space: Space::Shared,
            kind: AccessKind::Read,
            bound: Bound::Window {
                symbol: "a".into(),
                window: Window { region: Region::Shared, extent: Extent::Bytes(16) },
                object: None,
            },
            align: Align::of(4),
        };
        let t = check_text(&c);
        assert!(t.starts_with("\tadd.s32 %__gs_a32, %r1, 8;\n\tcvt.u64.u32 %__gs_a, %__gs_a32;\n"), "{t}");
        assert!(t.contains("add.s64 %__gs_wlim, %__gs_wlo, 16;"), "{t}");
    }
}
