//! Operand types and widths: each register operand of an instruction whose type modifier
//! the verifier knows must be declared with a type that instruction takes, as the PTX ISA
//! rules it ("Type Information for Instructions and Operands", §9.4, and "Operand Size
//! Exceeding Instruction-Type Size", §9.4.1):
//!
//! - a bit-size type `.bN` agrees with any type of the same size; signed and unsigned
//!   integers agree with each other at the same size; a floating-point type agrees only
//!   with itself (or `.bN`);
//! - `ld`, `ldu`, `st` and `cvt` relax the size: their data registers may be wider than the
//!   instruction type (a `.u8` loaded into a `.b32` register), never narrower, and a
//!   floating-point instruction type still takes only its own type or a bit-size one;
//! - a predicate register is wanted exactly where a predicate is (guards, `setp`'s
//!   destinations, `selp`'s selector, `vote`'s source, `.pred` logic) and nowhere else;
//! - some operands have a type of their own: a shift amount or bit position is `.u32`,
//!   `mul.wide`/`mad.wide` write (and `mad.wide` adds) twice the width, `popc`/`clz`/`bfind`
//!   count into a `.u32`, `cvt` and `set`/`slct` name two types.
//!
//! It is conservative: an opcode whose rules are not listed here, a type it does not model
//! (`.tf32`, `.e4m3x2`, `.s16x2`, …), an operand that is not a register (immediates,
//! symbols, special registers, vector components) and a `.f16x2` register (ptxas lets one
//! stand for any 32-bit value) are not checked. A false error would stop a user's module
//! from loading; a missed one only leaves it to ptxas. Where the ISA text and ptxas differ,
//! ptxas decides (it packs predicates into a `mov`, for one): `tests/verify.rs` assembles
//! every listed form with registers of every type and fails if the verifier objects to a
//! line ptxas accepts.
//!
//! The register types come from the scoped name resolution of [`super`]: each scope's
//! declarations carry their type, so a name declared again in an inner `{ }` has the inner
//! type there.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;

use gpusan_ptx::ast::{Instruction, Name, Operand, StateSpace};
use gpusan_ptx::semantics::type_width;

/// A scalar type the rules are written for. Four bytes, aligned, so that comparing two
/// (once per operand) is one compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(4))]
pub(super) struct Ty {
    class: Class,
    /// Size in bytes; 0 for `.pred`.
    bytes: u8,
    /// Which floating-point format of that size (`f16` and `bf16` are both 2 bytes); 0 for
    /// the other classes.
    format: u8,
    /// Always 0.
    pad: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Class {
    Bits,
    Signed,
    Unsigned,
    Float,
    Pred,
}

impl Ty {
    const U32: Ty = Ty { class: Class::Unsigned, bytes: 4, format: 0, pad: 0 };
    const B32: Ty = Ty { class: Class::Bits, bytes: 4, format: 0, pad: 0 };
    const PRED: Ty = Ty { class: Class::Pred, bytes: 0, format: 0, pad: 0 };

    /// The type a modifier or declaration names (`s32`, `f16x2`, `pred`), if modelled. The
    /// sizes are [`type_width`]'s; this adds the class.
    pub(super) fn parse(name: &str) -> Option<Ty> {
        let (class, format) = match name {
            "pred" => return Some(Ty::PRED),
            "f16" | "f32" | "f64" => (Class::Float, 0),
            "bf16" => (Class::Float, 1),
            "f16x2" => (Class::Float, 2),
            "bf16x2" => (Class::Float, 3),
            _ => match name.as_bytes().first()? {
                b'b' => (Class::Bits, 0),
                b's' => (Class::Signed, 0),
                b'u' => (Class::Unsigned, 0),
                _ => return None,
            },
        };
        let bytes = type_width(name)? as u8;
        Some(Ty { class, bytes, format, pad: 0 })
    }

    /// The type of a register declared `.reg .NAME`. ptxas lets a `.f16x2` register stand
    /// for any 32-bit value, a predicate even, so it is not modelled.
    fn of_register(name: &str) -> Option<Ty> {
        Ty::parse(name).filter(|t| !matches!(t.format, 2 | 3))
    }

    /// The modifier that names this type.
    fn name(self) -> &'static str {
        match (self.class, self.bytes, self.format) {
            (Class::Pred, ..) => "pred",
            (Class::Float, 2, 1) => "bf16",
            (Class::Float, 4, 2) => "f16x2",
            (Class::Float, 4, 3) => "bf16x2",
            (Class::Float, 2, _) => "f16",
            (Class::Float, 4, _) => "f32",
            (Class::Float, _, _) => "f64",
            (class, bytes, _) => {
                const NAMES: [[&str; 5]; 3] = [
                    ["b8", "b16", "b32", "b64", "b128"],
                    ["s8", "s16", "s32", "s64", ""],
                    ["u8", "u16", "u32", "u64", ""],
                ];
                let row = match class {
                    Class::Bits => 0,
                    Class::Signed => 1,
                    _ => 2,
                };
                NAMES[row][bytes.trailing_zeros() as usize]
            }
        }
    }

    /// `b16` for 2 bytes: the element type of a `mov` pack or unpack.
    fn bits(bytes: u8) -> Option<Ty> {
        matches!(bytes, 1 | 2 | 4 | 8 | 16).then_some(Ty { class: Class::Bits, bytes, format: 0, pad: 0 })
    }

    /// Twice as wide, for `mul.wide`/`mad.wide` (16- and 32-bit integers only).
    fn wide(self) -> Option<Ty> {
        (matches!(self.class, Class::Signed | Class::Unsigned) && matches!(self.bytes, 2 | 4))
            .then_some(Ty { bytes: self.bytes * 2, ..self })
    }

    /// Whether a register of this class may stand for an instruction type of class
    /// `instr` (Table 26): sizes aside, integers and floats meet only through `.bN`.
    fn class_agrees(self, instr: Ty) -> bool {
        match instr.class {
            Class::Bits => true,
            Class::Signed | Class::Unsigned => matches!(self.class, Class::Bits | Class::Signed | Class::Unsigned),
            Class::Float => self.class == Class::Bits || (self.class == Class::Float && self.format == instr.format),
            Class::Pred => self.class == Class::Pred,
        }
    }
}

/// A modifier that names a type the rules do not model: an instruction carrying one is not
/// checked. Types are letters, digits and an optional `xN` (`tf32`, `e4m3x2`, `s16x2`,
/// `ue8m0x2`); `prmt`'s modes (`f4e`, `b4e`, `rc8`) and shapes (`m16n8k16`) are not.
fn is_type_like(m: &str) -> bool {
    let base = match m.rsplit_once('x') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => t,
        _ => m,
    };
    let letters = base.bytes().take_while(u8::is_ascii_lowercase).count();
    let (prefix, rest) = base.split_at(letters);
    // Digits, with more letters between for the narrow floats (`e4m3`, `ue8m0`, `s2f6`).
    matches!(prefix, "b" | "s" | "u" | "f" | "bf" | "tf" | "e" | "ue")
        && rest.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && rest.as_bytes().last().is_some_and(u8::is_ascii_digit)
        && rest.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

/// What one operand position wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Not checked: an address, an immediate-only position, or one whose rule is not known.
    Skip,
    /// A register of this instruction type, same size (Table 26).
    Same(Ty),
    /// A register of this type or a wider one (`ld`/`st`/`cvt`, Tables 27 and 28).
    AtLeast(Ty),
    /// `mov`: a register of this type, or a `{a, b}` pack whose elements split its bits.
    Packed(Ty),
}

/// What the operands of one instruction want, first to last; later operands are skipped.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rule {
    wants: [Want; MAX_OPERANDS],
}

const MAX_OPERANDS: usize = 5;

impl Rule {
    fn new(wants: &[Want]) -> Rule {
        let mut w = [Want::Skip; MAX_OPERANDS];
        w[..wants.len()].copy_from_slice(wants);
        Rule { wants: w }
    }
}

/// The rule of `opcode` with `modifiers`, or `None` when the verifier does not check it.
fn rule(opcode: &str, modifiers: &str) -> Option<Rule> {
    let mods = || modifiers.split('.').filter(|m| !m.is_empty());
    let has = |m: &str| mods().any(|x| x == m);
    let mut types: Vec<Ty> = Vec::with_capacity(2);
    for m in mods() {
        match Ty::parse(m) {
            Some(t) => types.push(t),
            None if is_type_like(m) => return None,
            None => {}
        }
    }
    use Want::*;
    let one = match types.as_slice() {
        [t] => Some(*t),
        _ => None,
    };
    let same = |n: usize| -> Option<Rule> {
        let t = one?;
        Some(Rule::new(&[Same(t); MAX_OPERANDS][..n]))
    };
    let pred = Same(Ty::PRED);
    let u32 = Same(Ty::U32);
    let b32 = Same(Ty::B32);
    match opcode {
        "mul" | "mad" if has("wide") => {
            let t = one?;
            let w = Same(t.wide()?);
            // `mad.wide` adds a wide `c` too.
            let c = if opcode == "mad" { w } else { Skip };
            Some(Rule::new(&[w, Same(t), Same(t), c]))
        }
        // Every operand has the instruction type (`min`/`max` may take three sources).
        "add" | "sub" | "mul" | "mad" | "addc" | "subc" | "madc" | "mul24" | "mad24" | "sad" | "min" | "max"
        | "abs" | "neg" | "div" | "rem" | "fma" | "rcp" | "sqrt" | "rsqrt" | "sin" | "cos" | "lg2" | "ex2" | "tanh"
        | "copysign" | "and" | "or" | "xor" | "not" | "cnot" | "brev" => same(4),
        "shl" | "shr" => {
            let t = one?;
            Some(Rule::new(&[Same(t), Same(t), u32]))
        }
        "bfe" => {
            let t = one?;
            Some(Rule::new(&[Same(t), Same(t), u32, u32]))
        }
        "bfi" => {
            let t = one?;
            Some(Rule::new(&[Same(t), Same(t), Same(t), u32, u32]))
        }
        "popc" | "clz" | "bfind" => {
            let t = one?;
            Some(Rule::new(&[u32, Same(t)]))
        }
        "testp" => {
            let t = one?;
            Some(Rule::new(&[pred, Same(t)]))
        }
        "selp" => {
            let t = one?;
            Some(Rule::new(&[Same(t), Same(t), Same(t), pred]))
        }
        // `setp.cmp{.bool}.type p{|q}, a, b{, {!}c}`
        "setp" => {
            let t = one?;
            Some(Rule::new(&[pred, Same(t), Same(t), pred]))
        }
        // `set.cmp{.bool}.dtype.stype d, a, b{, {!}c}`
        "set" => match types.as_slice() {
            [d, s] => Some(Rule::new(&[Same(*d), Same(*s), Same(*s), pred])),
            _ => None,
        },
        // `slct.dtype.stype d, a, b, c`: `c`'s sign (or float sign) picks `a` or `b`.
        "slct" => match types.as_slice() {
            [d, s] => Some(Rule::new(&[Same(*d), Same(*d), Same(*d), Same(*s)])),
            _ => None,
        },
        // `mov.v2.u32 {…}, {…}` moves vectors element by element: rare, not modelled.
        "mov" if !has("v2") && !has("v4") => {
            let t = one?;
            Some(Rule::new(&[Packed(t), Packed(t)]))
        }
        // `cvt.frnd.dtype.stype d, a`; packing conversions (`cvt.rn.f16x2.f32 d, a, b`,
        // `cvt.pack.sat…`) take other operands.
        "cvt" if !has("pack") => match types.as_slice() {
            [d, s] if d.bytes <= 8 && !matches!(d.format, 2 | 3) => Some(Rule::new(&[AtLeast(*d), AtLeast(*s)])),
            _ => None,
        },
        "cvta" => same(2),
        "isspacep" => Some(Rule::new(&[pred])),
        // The data; the address and an `.L2::cache_hint` policy are not checked.
        "ld" | "ldu" => {
            let t = one?;
            Some(Rule::new(&[AtLeast(t)]))
        }
        "st" if !has("async") && !has("bulk") => {
            let t = one?;
            Some(Rule::new(&[Skip, AtLeast(t)]))
        }
        // `atom.op.type d, [a], b{, c}`
        "atom" => {
            let t = one?;
            Some(Rule::new(&[Same(t), Skip, Same(t), if has("cas") { Same(t) } else { Skip }]))
        }
        "red" if !has("async") => {
            let t = one?;
            Some(Rule::new(&[Skip, Same(t)]))
        }
        // `shfl.sync.mode.b32 d{|p}, a, b, c, membermask`; `prmt.b32{.mode} d, a, b, c`;
        // `shf.{l,r}.mode.b32 d, a, b, c`.
        "shfl" | "prmt" | "shf" => {
            let t = one?;
            (t == Ty::B32).then(|| Rule::new(&[b32, b32, b32, b32, b32]))
        }
        // `lop3.b32 d, a, b, c, immLut`; the newer `lop3.op.b32 d|p, a, b, c, immLut, q`
        // ends with a predicate, not checked.
        "lop3" => {
            let t = one?;
            (t == Ty::B32).then(|| Rule::new(&[b32, b32, b32, b32]))
        }
        // `vote{.sync}.ballot.b32 d, {!}a{, membermask}`; the other modes write a predicate.
        "vote" => {
            let d = if has("ballot") { b32 } else { pred };
            Some(Rule::new(&[d, pred, b32]))
        }
        "activemask" => same(1),
        // `redux.sync.op.type d, a, membermask`
        "redux" => {
            let t = one?;
            Some(Rule::new(&[Same(t), Same(t), b32]))
        }
        _ => None,
    }
}

/// Where in an instruction an operand is, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `@%p`
    Guard,
    /// The operand at this index (0 first).
    Operand(u8),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Guard => f.write_str("the guard"),
            Place::Operand(i) => write!(f, "operand {}", i + 1),
        }
    }
}

/// A register whose declared type the instruction does not take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub place: Place,
    pub register: Name,
    /// Its declared type, without the dot (`b64`).
    pub declared: Name,
    /// The type the instruction wants there (`s32`), or `pred`.
    pub expected: Name,
}

/// A type error, as [`super::ErrorKind`] words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeError {
    /// Same class but another size (`add.s32` on a `.b64`), or narrower than `ld`/`st`/`cvt`
    /// allow.
    Width(Mismatch),
    /// Sizes aside, the classes do not meet (`add.s32` on an `.f32`, `add.f32` on a `.u32`,
    /// `add.f16` on a `.bf16`).
    Type(Mismatch),
    /// A value register where a predicate is wanted.
    NotAPredicate(Mismatch),
    /// A predicate where a value is wanted.
    UnexpectedPredicate(Mismatch),
}

/// The type of a register declaration, when the rules model it: a scalar `.reg` of a type
/// [`Ty`] knows (not `.f16x2`, which ptxas lets stand for any 32-bit value).
pub(super) fn declared(space: StateSpace, vector: Option<u32>, array: &[Option<u64>], ty: Name) -> Typed {
    let scalar = space == StateSpace::Reg && vector.is_none() && array.is_empty();
    Ty::of_register(&ty).filter(|_| scalar).map(|t| (t, ty))
}

/// A register's type and its name as declared (`b32`); `None` for anything the rules do
/// not check (symbols, special registers, vectors, unmodelled types).
pub(super) type Typed = Option<(Ty, Name)>;

/// Checks the operand types of `inst` (whose form has `rule`, if the rules know it),
/// calling `report` for each mismatch; `type_of` gives the type of a name where `inst` is.
/// Inline: it runs for most instructions, and its closures are the verifier's own.
#[inline]
pub(super) fn check(
    inst: &Instruction,
    rule: Option<&Rule>,
    type_of: &mut impl FnMut(Name) -> Typed,
    report: &mut impl FnMut(TypeError),
) {
    if let Some(g) = &inst.guard {
        check_name(g.reg, Want::Same(Ty::PRED), Place::Guard, type_of, report);
    }
    let Some(rule) = rule else { return };
    for (i, (op, &want)) in inst.operands.iter().zip(rule.wants.iter()).enumerate() {
        let place = Place::Operand(i as u8);
        match op {
            Operand::Name(n) | Operand::Not(n) => check_name(*n, want, place, type_of, report),
            // `setp`'s `p|q`, `shfl`'s `d|p`: the second is a predicate.
            Operand::Pair(p) if want != Want::Skip => {
                check_name(p.0, want, place, type_of, report);
                check_name(p.1, Want::Same(Ty::PRED), place, type_of, report);
            }
            Operand::Vector(elems) => check_vector(elems, want, place, type_of, report),
            _ => {}
        }
    }
}

fn check_vector(
    elems: &[Operand],
    want: Want,
    place: Place,
    type_of: &mut impl FnMut(Name) -> Typed,
    report: &mut impl FnMut(TypeError),
) {
    let n = elems.len().max(1);
    let (want, packed) = match want {
        // `mov.b64 %rd, {%r1, %r2}`: each element holds its share of the bits.
        Want::Packed(t) => match Ty::bits(t.bytes / n as u8) {
            Some(e) if (t.bytes as usize).is_multiple_of(n) => (Want::Same(e), true),
            _ => return,
        },
        w => (w, false),
    };
    for e in elems {
        if let Operand::Name(n) = e {
            // ptxas packs predicates into a `mov` too.
            if !(packed && type_of(*n).is_some_and(|(t, _)| t == Ty::PRED)) {
                check_name(*n, want, place, type_of, report);
            }
        }
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<ahash::AHasher>>;

/// Slots of [`Rules::recent`]: a power of two.
const RECENT_RULES: usize = 512;

/// The rules of the (opcode, modifiers) pairs met so far: a module repeats a few hundred,
/// and a loop body a few dozen.
pub(super) struct Rules {
    /// Index into `list` (`NONE` when the form is not checked) of each pair met.
    all: FastMap<Form, u32>,
    list: Vec<Rule>,
    /// The last pairs looked up, by address, with their index.
    recent: Box<[(Option<Form>, u32); RECENT_RULES]>,
}

/// An instruction form: opcode and modifiers.
type Form = (Name, Name);

/// [`Rules`]' index of a form the verifier does not check.
const NONE: u32 = u32::MAX;

impl Default for Rules {
    fn default() -> Rules {
        Rules { all: FastMap::default(), list: Vec::new(), recent: Box::new([(None, NONE); RECENT_RULES]) }
    }
}

impl Rules {
    /// The rule of `inst`'s form, `None` when the verifier does not check it.
    #[inline]
    pub(super) fn get(&mut self, inst: &Instruction) -> Option<Rule> {
        let key = (inst.opcode, inst.modifiers);
        let slot = ((key.1.as_char_ptr() as usize >> 3) ^ (key.0.as_char_ptr() as usize >> 6)) % RECENT_RULES;
        let index = match self.recent[slot] {
            (Some(k), index) if k == key => index,
            _ => {
                let index = self.lookup(key);
                self.recent[slot] = (Some(key), index);
                index
            }
        };
        self.list.get(index as usize).copied()
    }

    #[inline(never)]
    fn lookup(&mut self, key: Form) -> u32 {
        let list = &mut self.list;
        *self.all.entry(key).or_insert_with(|| match rule(&key.0, &key.1) {
            Some(r) => {
                list.push(r);
                list.len() as u32 - 1
            }
            None => NONE,
        })
    }
}

#[inline(always)]
fn check_name(
    name: Name,
    want: Want,
    place: Place,
    type_of: &mut impl FnMut(Name) -> Typed,
    report: &mut impl FnMut(TypeError),
) {
    let (instr, at_least) = match want {
        Want::Skip => return,
        Want::Same(t) | Want::Packed(t) => (t, false),
        Want::AtLeast(t) => (t, true),
    };
    let Some((reg, declared)) = type_of(name) else { return };
    // Nearly always the very type: that test first, the rules only for the rest.
    if reg == instr {
        return;
    }
    if let Some(kind) = mismatch(reg, instr, at_least) {
        report(kind(Mismatch { place, register: name, declared, expected: Name::from(instr.name()) }));
    }
}

/// What is wrong with a `reg` register where `instr` is wanted (`at_least` for the relaxed
/// sizes of `ld`/`st`/`cvt`), if anything.
fn mismatch(reg: Ty, instr: Ty, at_least: bool) -> Option<fn(Mismatch) -> TypeError> {
    match (instr.class == Class::Pred, reg.class == Class::Pred) {
        (true, true) => return None,
        (true, false) => return Some(TypeError::NotAPredicate),
        (false, true) => return Some(TypeError::UnexpectedPredicate),
        (false, false) => {}
    }
    if !reg.class_agrees(instr) {
        Some(TypeError::Type)
    } else if reg.bytes == instr.bytes {
        None
    } else if at_least && reg.bytes > instr.bytes && !(reg.class == Class::Float && instr.class == Class::Float) {
        // A floating-point instruction type takes only its own size in a float register.
        None
    } else {
        Some(TypeError::Width)
    }
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeError::Width(m) => {
                write!(f, "{} `{}` is `.{}`, a register of another size than `.{}` takes", m.place, m.register, m.declared, m.expected)
            }
            TypeError::Type(m) => write!(
                f,
                "{} `{}` is `.{}`, which `.{}` does not take (integers and floating-point values meet only through `.bN`)",
                m.place, m.register, m.declared, m.expected
            ),
            TypeError::NotAPredicate(m) => {
                write!(f, "{} `{}` is `.{}` where a `.pred` register is wanted", m.place, m.register, m.declared)
            }
            TypeError::UnexpectedPredicate(m) => {
                write!(f, "{} `{}` is a `.pred` register where `.{}` wants a value", m.place, m.register, m.expected)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_type_like_modifiers() {
        assert_eq!(Ty::parse("s32"), Some(Ty { class: Class::Signed, bytes: 4, format: 0, pad: 0 }));
        assert_eq!(Ty::parse("b128").map(|t| t.bytes), Some(16));
        assert_eq!(Ty::parse("u128"), None);
        assert_eq!(Ty::parse("bf16").map(|t| t.format), Some(1));
        for m in ["tf32", "e4m3x2", "s16x2", "ue8m0x2", "e2m1", "u16x2", "f32x2", "s4", "b1"] {
            assert!(is_type_like(m), "{m}");
        }
        for m in ["f4e", "b4e", "rc8", "m16n8k16", "x4", "v4", "L2::cache_hint", "rn", "ftz", "sync", "shared::cta"] {
            assert!(!is_type_like(m), "{m}");
        }
    }

    #[test]
    fn rules_of_the_common_forms() {
        let r = rule("mul", "wide.s32").unwrap();
        assert_eq!(
            &r.wants[..3],
            &[
                Want::Same(Ty::parse("s64").unwrap()),
                Want::Same(Ty::parse("s32").unwrap()),
                Want::Same(Ty::parse("s32").unwrap())
            ]
        );
        assert!(rule("cvt", "rn.satfinite.e4m3x2.f32").is_none());
        assert!(rule("cvt", "pack.sat.u8.s32.b32").is_none());
        assert!(rule("add", "rn.f32.f16").is_none(), "mixed-precision forms are not modelled");
        assert!(rule("wgmma", "mma_async.sync.aligned.m64n8k16.f32.f16.f16").is_none());
        assert!(rule("prmt", "b32.f4e").is_some());
        assert_eq!(rule("ld", "global.nc.v4.f32").unwrap().wants[0], Want::AtLeast(Ty::parse("f32").unwrap()));
    }
}
