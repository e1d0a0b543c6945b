//! Prints [`crate::ast`] back to PTX text in nvcc's layout.
//!
//! The printer is the inverse of the parser up to whitespace and comments: literals keep
//! their radix and suffix, raw sections are copied byte for byte, and printing a printed
//! module again gives the same text. Output goes to any `fmt::Write` so a caller can
//! stream items (see [`crate::parser::Items`]) without building the whole text.
//!
//! An instrumented module is tens of megabytes of mostly short instructions, so the
//! statement printers write names and decimal numbers straight to the writer ([`dec`])
//! rather than through `write!`, whose formatting machinery cost more than the text.

use std::fmt::{self, Write};

use crate::ast::*;

/// Prints a whole module to a string.
pub fn print(module: &Module) -> String {
    let mut out = String::with_capacity(estimated_size(module));
    write_module(&mut out, module).expect("writing to a String cannot fail");
    out
}

/// Printed size is close to 40 bytes per statement; reserving it avoids regrowth copies.
fn estimated_size(module: &Module) -> usize {
    fn count(stmts: &[Statement]) -> usize {
        stmts.iter().map(|s| if let Statement::Block(b) = s { 1 + count(b) } else { 1 }).sum()
    }
    module
        .items
        .iter()
        .map(|i| match i {
            Item::Function(f) => 256 + f.body.as_deref().map_or(0, count) * 40,
            Item::Raw(r) => r.text.len() + 1,
            _ => 64,
        })
        .sum()
}

pub fn write_module(w: &mut impl Write, module: &Module) -> fmt::Result {
    for item in &module.items {
        write_item(w, item)?;
    }
    Ok(())
}

/// Prints one module item followed by its line break(s).
pub fn write_item(w: &mut impl Write, item: &Item) -> fmt::Result {
    match item {
        Item::Version { major, minor } => writeln!(w, ".version {major}.{minor}"),
        Item::Target(t) => {
            w.write_str(".target ")?;
            for (i, t) in t.iter().enumerate() {
                if i > 0 {
                    w.write_str(", ")?;
                }
                w.write_str(t)?;
            }
            w.write_char('\n')
        }
        Item::AddressSize(n) => writeln!(w, ".address_size {n}\n"),
        Item::File(f) => {
            write!(w, ".file\t{} \"{}\"", f.index, f.path)?;
            if let (Some(t), Some(s)) = (f.timestamp, f.size) {
                write!(w, ", {t}, {s}")?;
            }
            w.write_char('\n')
        }
        Item::Var(v) => {
            write_decl(w, v)?;
            w.write_str("\n\n")
        }
        Item::Function(f) => write_function(w, f),
        Item::Raw(r) => {
            w.write_str(&r.text)?;
            w.write_char('\n')
        }
        Item::Pragma(p) => writeln!(w, ".pragma {p};"),
        Item::Alias { alias, target } => writeln!(w, ".alias {alias}, {target};"),
    }
}

fn write_linkage(w: &mut impl Write, linkage: &[Linkage]) -> fmt::Result {
    for l in linkage {
        w.write_str(l.as_str())?;
        w.write_char(' ')?;
    }
    Ok(())
}

pub fn write_function(w: &mut impl Write, f: &Function) -> fmt::Result {
    write_linkage(w, &f.linkage)?;
    w.write_str(match f.kind {
        FunctionKind::Entry => ".entry ",
        FunctionKind::Func => ".func ",
    })?;
    if let Some(r) = &f.returns {
        write_params(w, r, false)?;
        w.write_char(' ')?;
    }
    w.write_str(&f.name)?;
    if let Some(p) = &f.params {
        write_params(w, p, true)?;
    }
    w.write_char('\n')?;
    write_attributes(w, &f.attributes, "\n")?;
    match &f.body {
        None => w.write_str(";\n\n"),
        Some(body) => {
            w.write_str("{\n")?;
            write_statements(w, body, 1)?;
            w.write_str("}\n\n")
        }
    }
}

fn write_attributes(w: &mut impl Write, attrs: &[Attribute], sep: &str) -> fmt::Result {
    for a in attrs {
        write!(w, ".{}", a.name)?;
        for (i, v) in a.values.iter().enumerate() {
            w.write_str(if i == 0 { " " } else { ", " })?;
            match v {
                AttrValue::Int(n) => write!(w, "{n}")?,
                AttrValue::Str(s) => write!(w, "{s};")?,
            }
        }
        w.write_str(sep)?;
    }
    Ok(())
}

/// `(.param .u64 a, .param .u32 b)`; kernel parameters one per line as nvcc prints them.
fn write_params(w: &mut impl Write, params: &[Param], multiline: bool) -> fmt::Result {
    w.write_char('(')?;
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            w.write_char(',')?;
            if !multiline {
                w.write_char(' ')?;
            }
        }
        if multiline {
            w.write_str("\n\t")?;
        }
        write_param(w, p)?;
    }
    if multiline && !params.is_empty() {
        w.write_char('\n')?;
    }
    w.write_char(')')
}

fn write_param(w: &mut impl Write, p: &Param) -> fmt::Result {
    write!(w, ".{}", p.space.name())?;
    if let Some(a) = p.align {
        write!(w, " .align {a}")?;
    }
    if let Some(v) = p.vector {
        write!(w, " .v{v}")?;
    }
    write!(w, " .{}", p.ty)?;
    if let Some(ptr) = &p.ptr {
        w.write_str(" .ptr")?;
        if let Some(s) = ptr.space {
            write!(w, " .{}", s.name())?;
        }
        if let Some(a) = ptr.align {
            write!(w, " .align {a}")?;
        }
    }
    write!(w, " {}", p.name)?;
    write_dims(w, &p.array)
}

fn write_dims(w: &mut impl Write, dims: &[Option<u64>]) -> fmt::Result {
    for d in dims {
        match d {
            Some(n) => write!(w, "[{n}]")?,
            None => w.write_str("[]")?,
        }
    }
    Ok(())
}

/// A declaration with its `;`, no line break.
pub fn write_decl(w: &mut impl Write, d: &VarDecl) -> fmt::Result {
    write_linkage(w, &d.linkage)?;
    write!(w, ".{}", d.space.name())?;
    for a in &d.attributes {
        write!(w, " .attribute({a})")?;
    }
    if let Some(a) = d.align {
        write!(w, " .align {a}")?;
    }
    if let Some(v) = d.vector {
        write!(w, " .v{v}")?;
    }
    write!(w, " .{} \t{}", d.ty, d.name)?;
    if let Some(n) = d.count {
        write!(w, "<{n}>")?;
    }
    write_dims(w, &d.array)?;
    if let Some(init) = &d.init {
        w.write_str(" = ")?;
        write_init(w, init)?;
    }
    w.write_char(';')
}

fn write_init(w: &mut impl Write, init: &Initializer) -> fmt::Result {
    match init {
        Initializer::Expr(e) => write_expr(w, e),
        Initializer::List(items) => {
            w.write_char('{')?;
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    w.write_str(", ")?;
                }
                write_init(w, it)?;
            }
            w.write_char('}')
        }
    }
}

/// A decimal integer, as `write!(w, "{v}")` writes it.
fn dec(w: &mut impl Write, v: impl itoa::Integer) -> fmt::Result {
    w.write_str(itoa::Buffer::new().format(v))
}

pub fn write_int(w: &mut impl Write, v: IntLit) -> fmt::Result {
    let IntLit { value, radix, unsigned, negative } = v;
    if negative {
        w.write_char('-')?;
    }
    match radix {
        Radix::Dec => dec(w, value)?,
        Radix::Hex => write!(w, "0x{value:x}")?,
        Radix::Oct => write!(w, "0{value:o}")?,
        Radix::Bin => write!(w, "0b{value:b}")?,
    }
    if unsigned {
        w.write_char('U')?;
    }
    Ok(())
}

fn write_float(w: &mut impl Write, f: &FloatLit) -> fmt::Result {
    match f {
        FloatLit::F32(b) => write!(w, "0f{b:08X}"),
        FloatLit::F64(b) => write!(w, "0d{b:016X}"),
        FloatLit::Decimal(d) => w.write_str(d),
    }
}

pub fn write_expr(w: &mut impl Write, e: &Expr) -> fmt::Result {
    match e {
        Expr::Int(v) => write_int(w, *v),
        Expr::Float(f) => write_float(w, f),
        Expr::Symbol(s) => w.write_str(s),
        Expr::Call { func, args } => {
            write!(w, "{func}(")?;
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    w.write_str(", ")?;
                }
                write_expr(w, a)?;
            }
            w.write_char(')')
        }
        Expr::Unary { op, expr } => {
            w.write_char(*op)?;
            write_expr(w, expr)
        }
        Expr::Binary { op, lhs, rhs } => {
            write_expr(w, lhs)?;
            // `a%b` would lex as `a` and the register `%b`.
            w.write_str(if *op == BinOp::Rem { " % " } else { op.as_str() })?;
            write_expr(w, rhs)
        }
        Expr::Paren(e) => {
            w.write_char('(')?;
            write_expr(w, e)?;
            w.write_char(')')
        }
    }
}

fn indent(w: &mut impl Write, depth: usize) -> fmt::Result {
    for _ in 0..depth {
        w.write_char('\t')?;
    }
    Ok(())
}

pub fn write_statements(w: &mut impl Write, stmts: &[Statement], depth: usize) -> fmt::Result {
    for s in stmts {
        write_statement(w, s, depth)?;
    }
    Ok(())
}

pub fn write_statement(w: &mut impl Write, s: &Statement, depth: usize) -> fmt::Result {
    match s {
        Statement::Decl(d) => {
            indent(w, depth)?;
            write_decl(w, d)?;
            w.write_char('\n')
        }
        Statement::Label(l, _) => {
            w.write_str(l)?;
            w.write_str(":\n")
        }
        Statement::Inst(i) => {
            indent(w, depth)?;
            write_instruction(w, i)?;
            w.write_char('\n')
        }
        Statement::Block(b) => {
            indent(w, depth)?;
            w.write_str("{\n")?;
            write_statements(w, b, depth + 1)?;
            indent(w, depth)?;
            w.write_str("}\n")
        }
        Statement::Loc(l) => {
            indent(w, depth)?;
            w.write_str(".loc\t")?;
            dec(w, l.file)?;
            w.write_char(' ')?;
            dec(w, l.line)?;
            w.write_char(' ')?;
            dec(w, l.column)?;
            w.write_str(&l.rest)?;
            w.write_char('\n')
        }
        Statement::Pragma(p) => {
            indent(w, depth)?;
            writeln!(w, ".pragma {p};")
        }
        Statement::BranchTargets { label, targets, .. } | Statement::CallTargets { label, targets, .. } => {
            let d = if matches!(s, Statement::BranchTargets { .. }) { ".branchtargets" } else { ".calltargets" };
            write!(w, "{label}: {d}\n\t")?;
            for (i, t) in targets.iter().enumerate() {
                if i > 0 {
                    w.write_str(",\n\t")?;
                }
                w.write_str(t)?;
            }
            w.write_str(";\n")
        }
        Statement::CallPrototype { label, returns, params, attributes, .. } => {
            write!(w, "{label} : .callprototype ")?;
            if let Some(r) = returns {
                write_params(w, r, false)?;
                w.write_char(' ')?;
            }
            w.write_str("_ ")?;
            write_params(w, params, false)?;
            if !attributes.is_empty() {
                w.write_char(' ')?;
                write_attributes(w, attributes, " ")?;
            }
            w.write_str(";\n")
        }
        Statement::Raw(r) => {
            w.write_str(&r.text)?;
            w.write_char('\n')
        }
    }
}

/// An instruction with its `;`, no indentation or line break.
pub fn write_instruction(w: &mut impl Write, i: &Instruction) -> fmt::Result {
    if let Some(g) = &i.guard {
        w.write_char('@')?;
        if g.negated {
            w.write_char('!')?;
        }
        w.write_str(&g.reg)?;
        w.write_char(' ')?;
    }
    w.write_str(&i.opcode)?;
    if !i.modifiers.is_empty() {
        w.write_char('.')?;
        w.write_str(&i.modifiers)?;
    }
    for (n, op) in i.operands.iter().enumerate() {
        w.write_str(if n == 0 { " \t" } else { ", " })?;
        // Most operands are plain names: written here rather than through the full match
        // of `write_operand`, whose entry and exit cost more than the name.
        match op {
            Operand::Name(name) => w.write_str(name)?,
            _ => write_operand(w, op)?,
        }
    }
    w.write_char(';')
}

pub fn write_operand(w: &mut impl Write, op: &Operand) -> fmt::Result {
    match op {
        Operand::Name(n) => w.write_str(n),
        Operand::Not(n) => {
            w.write_char('!')?;
            w.write_str(n)
        }
        Operand::Neg(n) => {
            w.write_char('-')?;
            w.write_str(n)
        }
        Operand::Int(v) => write_int(w, *v),
        Operand::F32(b) => write!(w, "0f{b:08X}"),
        Operand::F64(b) => write!(w, "0d{b:016X}"),
        Operand::DecFloat(d) => w.write_str(d),
        Operand::Address { base, offset, offset_written } => {
            w.write_char('[')?;
            match base {
                Some(b) => {
                    w.write_str(b)?;
                    if *offset != 0 || *offset_written {
                        w.write_char('+')?;
                        dec(w, *offset)?;
                    }
                }
                None => dec(w, *offset)?,
            }
            w.write_char(']')
        }
        Operand::AddressList(ops) => write_list(w, '[', ops, ']'),
        Operand::Vector(ops) => write_list(w, '{', ops, '}'),
        Operand::List(ops) => write_list(w, '(', ops, ')'),
        Operand::Pair(p) => write!(w, "{}|{}", p.0, p.1),
        Operand::VectorPair(vp) => {
            write_list(w, '{', &vp.0, '}')?;
            write!(w, "|{}", vp.1)
        }
        Operand::Suffixed(s) => {
            write_operand(w, &s.0)?;
            write!(w, ".{}", s.1)
        }
        Operand::Expr(e) => write_expr(w, e),
    }
}

fn write_list(w: &mut impl Write, open: char, ops: &[Operand], close: char) -> fmt::Result {
    w.write_char(open)?;
    for (i, o) in ops.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        write_operand(w, o)?;
    }
    w.write_char(close)
}

/// Wraps a node so `format!("{}", Display(&inst))` prints it as PTX.
pub struct Ptx<'a, T>(pub &'a T);

impl fmt::Display for Ptx<'_, Instruction> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_instruction(f, self.0)
    }
}

impl fmt::Display for Ptx<'_, Operand> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_operand(f, self.0)
    }
}

impl fmt::Display for Ptx<'_, Module> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_module(f, self.0)
    }
}
