//! The PTX syntax tree: what the parser builds, the printer prints and passes rewrite.
//!
//! The tree is structural but not an enumeration of the ISA: an instruction is an opcode,
//! the list of its dot-modifiers and typed operands. A modifier combination the ISA adds
//! tomorrow is still parsed and printed exactly, and the meaning of instructions lives in
//! [`crate::semantics`], not here (the width of a type excepted: declarations need it).
//!
//! Everything a pass needs to insert is plain owned data: new registers are [`VarDecl`]s
//! in a body, new kernel parameters are [`Param`]s, module-level variables are
//! [`Item::Var`]s, new instructions are [`Instruction`]s built with [`Instruction::new`].
//! Spans point into the source the tree was parsed from and are [`Span::NONE`] for nodes
//! a pass created.

use smallvec::SmallVec;
pub use thin_vec::ThinVec;

/// An identifier, register name or modifier list: an interned 8-byte handle that derefs
/// to `&str`. PTX repeats a few thousand distinct names millions of times, so interning
/// keeps the tree small (a 50 MB module must parse within 4x its size) and comparisons
/// cheap.
pub type Name = ustr::Ustr;

/// Maps and sets keyed by [`Name`], hashed by the hash interning computed once, so a lookup
/// does not hash the text again.
pub type NameMap<V> = ustr::UstrMap<V>;
pub type NameSet = ustr::UstrSet;

/// Byte range in the parsed source. Nodes created by passes use [`Span::NONE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub const NONE: Span = Span { start: u32::MAX, end: u32::MAX };

    pub fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }

    pub fn is_none(self) -> bool {
        self.start == u32::MAX
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// A whole PTX file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Module {
    pub items: Vec<Item>,
}

/// One module-level element, in source order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `.version 9.0`
    Version { major: u32, minor: u32 },
    /// `.target sm_90, debug`
    Target(Vec<Name>),
    /// `.address_size 64`
    AddressSize(u32),
    /// `.file 1 "a.cu", 1700000000, 1234`
    File(FileDirective),
    /// A module-level variable (`.global`, `.const`, `.shared`, texture references…).
    Var(VarDecl),
    /// A kernel or device function, with or without a body.
    Function(Box<Function>),
    /// A block kept byte-exact: a DWARF `.section … { … }` or an `@@DWARF` line.
    Raw(RawText),
    /// `.pragma "…";` at module level.
    Pragma(String),
    /// `.alias fAlias, fTarget;`
    Alias { alias: Name, target: Name },
}

#[derive(Debug, Clone, PartialEq)]
pub struct FileDirective {
    pub index: u32,
    pub path: String,
    /// Optional modification time and size, as in `.file 1 "x.cu", 1700000000, 1234`.
    pub timestamp: Option<u64>,
    pub size: Option<u64>,
}

/// Source text reproduced exactly as it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct RawText {
    pub text: String,
    pub span: Span,
}

/// Linkage and visibility directives on functions and variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Linkage {
    Visible,
    Extern,
    Weak,
    Common,
}

impl Linkage {
    pub fn as_str(self) -> &'static str {
        match self {
            Linkage::Visible => ".visible",
            Linkage::Extern => ".extern",
            Linkage::Weak => ".weak",
            Linkage::Common => ".common",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionKind {
    /// `.entry`: a kernel.
    Entry,
    /// `.func`: a device function.
    Func,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    pub linkage: Vec<Linkage>,
    pub kind: FunctionKind,
    /// `.func (.param .b32 retval) f(...)`: the return parameters, if the list is present.
    pub returns: Option<Vec<Param>>,
    pub name: Name,
    /// `None` when the declaration has no parameter list at all (`.func f;`).
    pub params: Option<Vec<Param>>,
    /// Performance-tuning and other attributes between the signature and the body.
    pub attributes: Vec<Attribute>,
    /// `None` for a declaration ending with `;`.
    pub body: Option<Vec<Statement>>,
    pub span: Span,
}

impl Function {
    pub fn is_kernel(&self) -> bool {
        self.kind == FunctionKind::Entry
    }
}

/// A function attribute: `.maxntid 256, 1, 1`, `.noreturn`, `.pragma "nounroll"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// Directive name without the dot (`maxntid`, `reqntid`, `minnctapersm`, …).
    pub name: Name,
    pub values: Vec<AttrValue>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Int(u64),
    Str(String),
}

/// A kernel or function parameter, or a return parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// `param` or `reg`.
    pub space: StateSpace,
    pub align: Option<u32>,
    pub vector: Option<u32>,
    pub ty: Name,
    /// `.ptr .global .align 8`: the pointer annotation of a kernel parameter.
    pub ptr: Option<PtrAttr>,
    pub name: Name,
    pub array: Vec<Option<u64>>,
}

impl Param {
    /// A scalar `.param .TY NAME`, as passes add them.
    pub fn scalar(ty: &str, name: &str) -> Param {
        Param {
            space: StateSpace::Param,
            align: None,
            vector: None,
            ty: ty.into(),
            ptr: None,
            name: name.into(),
            array: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PtrAttr {
    pub space: Option<StateSpace>,
    pub align: Option<u32>,
}

/// PTX state spaces as they appear on declarations and instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateSpace {
    Reg,
    Sreg,
    Const,
    Global,
    Local,
    Param,
    Shared,
    SharedCta,
    SharedCluster,
    Tex,
    Generic,
}

impl StateSpace {
    pub fn from_name(name: &str) -> Option<StateSpace> {
        Some(match name {
            "reg" => StateSpace::Reg,
            "sreg" => StateSpace::Sreg,
            "const" => StateSpace::Const,
            "global" => StateSpace::Global,
            "local" => StateSpace::Local,
            "param" => StateSpace::Param,
            "shared" => StateSpace::Shared,
            "shared::cta" => StateSpace::SharedCta,
            "shared::cluster" => StateSpace::SharedCluster,
            "tex" => StateSpace::Tex,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            StateSpace::Reg => "reg",
            StateSpace::Sreg => "sreg",
            StateSpace::Const => "const",
            StateSpace::Global => "global",
            StateSpace::Local => "local",
            StateSpace::Param => "param",
            StateSpace::Shared => "shared",
            StateSpace::SharedCta => "shared::cta",
            StateSpace::SharedCluster => "shared::cluster",
            StateSpace::Tex => "tex",
            StateSpace::Generic => "generic",
        }
    }

    /// Shared memory in any of its spellings.
    pub fn is_shared(self) -> bool {
        matches!(self, StateSpace::Shared | StateSpace::SharedCta | StateSpace::SharedCluster)
    }
}

/// A variable or register declaration, at module level or in a body.
#[derive(Debug, Clone, PartialEq)]
pub struct VarDecl {
    pub linkage: Vec<Linkage>,
    pub space: StateSpace,
    /// `.attribute(.managed)` and similar, kept as written inside the parentheses.
    pub attributes: Vec<String>,
    pub align: Option<u32>,
    pub vector: Option<u32>,
    /// `.b8`, `.u64`, `.pred`, `.texref`, …, without the dot.
    pub ty: Name,
    /// `%r<12>` declares `%r0 … %r11`.
    pub name: Name,
    pub count: Option<u32>,
    /// Array dimensions; `None` for `[]`.
    pub array: Vec<Option<u64>>,
    pub init: Option<Initializer>,
    pub span: Span,
}

impl VarDecl {
    /// `.reg .TY NAME;`, as passes add them.
    pub fn reg(ty: &str, name: &str) -> VarDecl {
        VarDecl {
            linkage: Vec::new(),
            space: StateSpace::Reg,
            attributes: Vec::new(),
            align: None,
            vector: None,
            ty: ty.into(),
            name: name.into(),
            count: None,
            array: Vec::new(),
            init: None,
            span: Span::NONE,
        }
    }

    /// Total size in bytes for a fixed-size variable of a sized scalar type.
    pub fn size_bytes(&self) -> Option<u64> {
        let elem = type_width(&self.ty)? as u64 * self.vector.unwrap_or(1) as u64;
        let mut n = elem;
        for d in &self.array {
            n = n.checked_mul((*d)?)?;
        }
        Some(n)
    }
}

/// `= …` after a variable declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Initializer {
    Expr(Expr),
    /// `{ a, b, { c, d } }`
    List(Vec<Initializer>),
}

/// Constant expressions in initializers and address offsets.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Int(IntLit),
    Float(FloatLit),
    Symbol(Name),
    /// `generic(var)`, `mask(…)` and similar.
    Call {
        func: Name,
        args: Vec<Expr>,
    },
    Unary {
        op: char,
        expr: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Paren(Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    And,
    Or,
    Xor,
}

impl BinOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
        }
    }
}

/// An integer literal, remembering how it was written: in PTX the radix and the `U`
/// suffix are part of the literal's type, so printing must keep them.
///
/// Packed so an [`Operand`] holding one stays 16 bytes; read fields by value
/// (`let v = lit.value;`), not by reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, packed(4))]
pub struct IntLit {
    pub value: u64,
    pub radix: Radix,
    pub unsigned: bool,
    /// Written with a leading `-` (the magnitude is `value`).
    pub negative: bool,
}

impl IntLit {
    pub fn dec(value: u64) -> IntLit {
        IntLit { value, radix: Radix::Dec, unsigned: false, negative: false }
    }

    /// The value as a signed 64-bit integer, wrapping like PTX does for `-0x8000…`.
    pub fn as_i64(self) -> i64 {
        let value = self.value;
        if self.negative {
            (value as i64).wrapping_neg()
        } else {
            value as i64
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Radix {
    Dec,
    Hex,
    Oct,
    Bin,
}

/// A floating-point literal. Hex forms carry exact bits; decimal ones keep their text so
/// printing reproduces them digit for digit.
#[derive(Debug, Clone, PartialEq)]
pub enum FloatLit {
    /// `0f3F800000`
    F32(u32),
    /// `0d3FF0000000000000`
    F64(u64),
    /// `1.5`, `1e-3`
    Decimal(Name),
}

/// A statement in a function body.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Decl(Box<VarDecl>),
    Label(Name, Span),
    Inst(Instruction),
    /// `{ … }`: an inline scope, as inline assembly produces.
    Block(Vec<Statement>),
    /// `.loc 1 23 5` with whatever follows (`, function_name …, inlined_at …`) verbatim.
    Loc(Loc),
    /// `.pragma "nounroll";`
    Pragma(String),
    /// `LABEL: .branchtargets L1, L2;`
    BranchTargets {
        label: Name,
        targets: Vec<Name>,
        span: Span,
    },
    /// `LABEL: .calltargets f1, f2;`
    CallTargets {
        label: Name,
        targets: Vec<Name>,
        span: Span,
    },
    /// `LABEL: .callprototype (.param .b32 _) _ (.param .b64 _);`
    CallPrototype {
        label: Name,
        returns: Option<Vec<Param>>,
        params: Vec<Param>,
        attributes: Vec<Attribute>,
        span: Span,
    },
    /// `.section`/`@@DWARF` text inside a body, byte-exact.
    Raw(RawText),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Loc {
    pub file: u32,
    pub line: u32,
    pub column: u32,
    /// Text after the column (`, function_name $L__info_string0, inlined_at 1 5 3`), as written.
    pub rest: String,
}

/// `@%p` or `@!%p` before an instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub negated: bool,
    pub reg: Name,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Instruction {
    pub guard: Option<Guard>,
    /// The mnemonic before the first dot: `ld`, `cp`, `wgmma`, `mma`.
    pub opcode: Name,
    /// The modifiers as written after the opcode, without the leading dot:
    /// `global.nc.v4.f32`, or empty. One interned string rather than a list because the
    /// few hundred distinct combinations repeat on every line; [`Instruction::modifiers`]
    /// iterates them.
    pub modifiers: Name,
    pub operands: SmallVec<[Operand; 3]>,
    pub span: Span,
}

impl Instruction {
    /// An instruction built by a pass: `Instruction::new("add", &["s64"], ops)`.
    pub fn new(opcode: &str, modifiers: &[&str], operands: Vec<Operand>) -> Instruction {
        Instruction {
            guard: None,
            opcode: opcode.into(),
            modifiers: Name::from(modifiers.join(".").as_str()),
            operands: operands.into(),
            span: Span::NONE,
        }
    }

    /// The modifiers in order: `global`, `nc`, `v4`, `f32`. `::` stays inside one
    /// modifier (`shared::cta`).
    pub fn modifiers(&self) -> impl Iterator<Item = &str> + Clone {
        self.modifiers.as_str().split('.').filter(|m| !m.is_empty())
    }

    pub fn set_modifiers(&mut self, modifiers: &[&str]) {
        self.modifiers = Name::from(modifiers.join(".").as_str());
    }

    /// The full mnemonic as written: `ld.global.nc.v4.f32`.
    pub fn mnemonic(&self) -> String {
        if self.modifiers.is_empty() {
            self.opcode.to_string()
        } else {
            format!("{}.{}", self.opcode, self.modifiers)
        }
    }

    pub fn with_guard(mut self, reg: &str, negated: bool) -> Instruction {
        self.guard = Some(Guard { negated, reg: reg.into() });
        self
    }

    pub fn has_modifier(&self, m: &str) -> bool {
        self.modifiers().any(|x| x == m)
    }
}

/// An instruction operand. Kept at 16 bytes, three inline in an instruction: lists are
/// thin vectors (one pointer) and rare forms are boxed. A module of millions of
/// instructions must fit in a few times its text.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A register, special register (`%tid.x`), variable, label or function name, or `_`.
    Name(Name),
    /// `!%p`: a negated predicate source.
    Not(Name),
    /// `-%f1`: a negated source, as some instructions allow.
    Neg(Name),
    /// An integer literal; `negative` for `-4`.
    Int(IntLit),
    /// `0f3F800000`
    F32(u32),
    /// `0d3FF0000000000000`
    F64(u64),
    /// `1.5`, `-2e3`, kept as written.
    DecFloat(Name),
    /// `[base+offset]`, `[base]`, `[offset]`: the usual address operand. `offset_written`
    /// keeps an explicit `+0`: in unoptimized (`-G`) code ptxas assembles `[p+0]` to an
    /// add that `[p]` does not have, so dropping it would change the machine code.
    /// Offsets beyond 32 bits (absolute addresses) are kept as an [`Operand::AddressList`].
    Address { base: Option<Name>, offset: i32, offset_written: bool },
    /// Any other bracketed operand: `[tex, {%f1, %f2}]`, `[%rd1, {%r2, %r3}]`, `[s+4*2]`.
    AddressList(ThinVec<Operand>),
    /// `{%r1, %r2, _}`
    Vector(ThinVec<Operand>),
    /// `%p|%q`: the paired predicate destination of `setp`, `shfl`, `match`, `elect`.
    Pair(Box<(Name, Name)>),
    /// `{%f1, %f2, %f3, %f4}|%p`: the vector destination with predicate of `tex`/`tld4`.
    VectorPair(Box<(ThinVec<Operand>, Name)>),
    /// An operand with a suffix written against it: `[%rd1].unified`.
    Suffixed(Box<(Operand, Name)>),
    /// `(a, b)`: the parameter lists of `call`.
    List(ThinVec<Operand>),
    /// Any other constant expression (`var+8` outside brackets, `(1<<3)`).
    Expr(Box<Expr>),
}

impl Operand {
    pub fn reg(name: &str) -> Operand {
        Operand::Name(name.into())
    }

    pub fn int(v: i64) -> Operand {
        Operand::Int(IntLit { value: v.unsigned_abs(), radix: Radix::Dec, unsigned: false, negative: v < 0 })
    }

    /// `[base+offset]`
    pub fn address(base: &str, offset: i32) -> Operand {
        Operand::Address { base: Some(base.into()), offset, offset_written: false }
    }

    pub fn as_name(&self) -> Option<&Name> {
        match self {
            Operand::Name(n) => Some(n),
            _ => None,
        }
    }

    /// The base register or symbol and offset of a simple address operand.
    pub fn as_address(&self) -> Option<(Option<Name>, i64)> {
        match self {
            Operand::Address { base, offset, .. } => Some((*base, *offset as i64)),
            Operand::Suffixed(s) => s.0.as_address(),
            _ => None,
        }
    }

    /// Calls `f` on every name this operand mentions (registers, symbols), in order.
    ///
    /// Inline for the plain name, most operands by far; the other forms out of line
    /// (analyses and the verifier call this for every operand of every instruction).
    #[inline]
    pub fn for_each_name(&self, f: &mut impl FnMut(Name)) {
        match self {
            Operand::Name(n) => f(*n),
            _ => self.for_each_name_other(f),
        }
    }

    fn for_each_name_other(&self, f: &mut impl FnMut(Name)) {
        match self {
            Operand::Name(n) | Operand::Not(n) | Operand::Neg(n) => f(*n),
            Operand::Address { base: Some(b), .. } => f(*b),
            Operand::Pair(p) => {
                f(p.0);
                f(p.1)
            }
            Operand::AddressList(ops) | Operand::Vector(ops) | Operand::List(ops) => {
                ops.iter().for_each(|o| o.for_each_name(f))
            }
            Operand::VectorPair(vp) => {
                vp.0.iter().for_each(|o| o.for_each_name(f));
                f(vp.1)
            }
            Operand::Suffixed(s) => s.0.for_each_name(f),
            Operand::Expr(e) => e.for_each_symbol(f),
            _ => {}
        }
    }
}

impl Expr {
    pub fn for_each_symbol(&self, f: &mut impl FnMut(Name)) {
        match self {
            Expr::Symbol(n) => f(*n),
            Expr::Call { args, .. } => args.iter().for_each(|a| a.for_each_symbol(f)),
            Expr::Unary { expr, .. } | Expr::Paren(expr) => expr.for_each_symbol(f),
            Expr::Binary { lhs, rhs, .. } => {
                lhs.for_each_symbol(f);
                rhs.for_each_symbol(f)
            }
            Expr::Int(_) | Expr::Float(_) => {}
        }
    }
}

/// Width in bytes of a PTX scalar type (`u32` → 4, `b128` → 16, `pred` → none).
///
/// Packed types count their whole container (`f16x2` → 4, `e4m3x4` → 4).
pub fn type_width(ty: &str) -> Option<u32> {
    Some(match ty {
        "b8" | "u8" | "s8" | "e4m3" | "e5m2" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" | "e4m3x2" | "e5m2x2" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" | "e4m3x4" | "e5m2x4" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// The memory budget (a module within a few times its text) rests on these sizes.
    #[test]
    fn nodes_stay_small() {
        assert_eq!(std::mem::size_of::<Operand>(), 16);
        assert!(std::mem::size_of::<Instruction>() <= 96, "{}", std::mem::size_of::<Instruction>());
        assert!(std::mem::size_of::<Statement>() <= 104, "{}", std::mem::size_of::<Statement>());
    }
}
