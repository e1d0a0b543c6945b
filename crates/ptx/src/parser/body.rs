//! Function bodies: statements, labels and body directives (`.loc`, `.branchtargets`,
//! declarations), and instructions with their operands and address forms.

use smallvec::SmallVec;

use super::{is_var_space, PResult, Parser};
use crate::ast::*;
use crate::lexer::Token;

impl<'s> Parser<'s> {
    pub(super) fn statements(&mut self) -> PResult<Vec<Statement>> {
        self.statement_list(Token::RBrace)
    }

    /// Statements up to `end`: the `}` closing a body (taken), or the end of the input.
    pub(super) fn statement_list(&mut self, end: Token) -> PResult<Vec<Statement>> {
        self.enter()?;
        let mut out = Vec::new();
        loop {
            let t = self.peek();
            match t.tok {
                tok if tok == end => {
                    self.bump();
                    self.leave();
                    // Doubling growth leaves up to half the vector unused; bodies are large.
                    out.shrink_to_fit();
                    return Ok(out);
                }
                Token::RBrace => return self.expected("an instruction, label or declaration"),
                Token::Eof => return self.expected("`}` closing the body"),
                Token::LBrace => {
                    self.bump();
                    out.push(Statement::Block(self.statements()?));
                }
                Token::Dwarf => {
                    self.bump();
                    out.push(Statement::Raw(RawText {
                        text: self.text(t).to_string(),
                        span: Span { start: t.start, end: t.end },
                    }));
                }
                Token::Dot => self.body_directive(&mut out)?,
                Token::At => out.push(Statement::Inst(self.instruction()?)),
                Token::Ident => {
                    if self.peek_nth(1).tok == Token::Colon {
                        self.labelled(&mut out)?;
                    } else {
                        out.push(Statement::Inst(self.instruction()?));
                    }
                }
                _ => return self.expected("an instruction, label, declaration or `}`"),
            }
        }
    }

    fn body_directive(&mut self, out: &mut Vec<Statement>) -> PResult<()> {
        let t = self.peek();
        let name = self.text(t);
        match name {
            ".loc" => {
                self.bump();
                let file = self.u32_lit("a file index")?;
                let line = self.u32_lit("a line number")?;
                let column = self.u32_lit("a column number")?;
                // `.loc` ends at the end of its line, not at a `;`: take the rest verbatim.
                let mut rest = String::new();
                let next = self.peek();
                if next.tok == Token::Comma && !self.src[self.prev_end as usize..next.start as usize].contains('\n') {
                    let from = next.start as usize;
                    let line_end = self.src[from..].find('\n').map_or(self.src.len(), |i| from + i);
                    while self.peek().tok != Token::Eof && (self.peek().start as usize) < line_end {
                        self.bump();
                    }
                    rest = self.src[from..self.prev_end as usize].to_string();
                }
                out.push(Statement::Loc(Loc { file, line, column, rest }));
            }
            ".pragma" => {
                self.bump();
                out.push(Statement::Pragma(self.pragma_strings()?));
            }
            ".section" => out.push(Statement::Raw(self.raw_section()?)),
            _ => {
                let linkage = self.linkages();
                let t = self.peek();
                let name = self.text(t);
                if t.tok == Token::Dot && is_var_space(name) {
                    out.extend(self.var_decls(linkage)?.into_iter().map(|d| Statement::Decl(Box::new(d))));
                } else if t.tok == Token::Dot {
                    return Err(self.error_at(
                        t,
                        format!("unknown directive `{}` in a function body", crate::excerpt::quote(name)),
                    ));
                } else {
                    return self.expected("a declaration after the linkage directive");
                }
            }
        }
        Ok(())
    }

    /// `NAME:` and what may follow it on the same statement.
    fn labelled(&mut self, out: &mut Vec<Statement>) -> PResult<()> {
        let t = self.bump();
        let label = Name::from(self.text(t));
        self.bump(); // the colon
        let n = self.peek();
        let span_start = t.start;
        match (n.tok, self.text(n)) {
            (Token::Dot, d @ (".branchtargets" | ".calltargets")) => {
                let is_branch = d == ".branchtargets";
                self.bump();
                let mut targets = vec![self.ident("a target label")?];
                while self.eat(Token::Comma) {
                    targets.push(self.ident("a target label")?);
                }
                self.expect(Token::Semi, "`;`")?;
                let span = Span { start: span_start, end: self.prev_end };
                out.push(if is_branch {
                    Statement::BranchTargets { label, targets, span }
                } else {
                    Statement::CallTargets { label, targets, span }
                });
            }
            (Token::Dot, ".callprototype") => {
                self.bump();
                let returns = if self.at(Token::LParen) { Some(self.param_list()?) } else { None };
                let sink = self.ident("`_` naming the prototype")?;
                if sink != "_" {
                    return Err(self.error_at(
                        n,
                        format!("expected `_` in the call prototype, found `{}`", crate::excerpt::quote(&sink)),
                    ));
                }
                let params = if self.at(Token::LParen) { self.param_list()? } else { Vec::new() };
                let attributes = self.attributes()?;
                self.expect(Token::Semi, "`;` ending the prototype")?;
                out.push(Statement::CallPrototype {
                    label,
                    returns,
                    params,
                    attributes,
                    span: Span { start: span_start, end: self.prev_end },
                });
            }
            _ => out.push(Statement::Label(label, Span { start: t.start, end: t.end })),
        }
        Ok(())
    }

    fn instruction(&mut self) -> PResult<Instruction> {
        let start = self.peek().start;
        let guard = if self.eat(Token::At) {
            let negated = self.eat(Token::Bang);
            Some(Guard { negated, reg: self.ident("a predicate register after `@`")? })
        } else {
            None
        };
        let op = self.expect(Token::Ident, "an instruction")?;
        let text = self.text(op);
        let opcode = self.names.get(text);
        // Modifiers are written against the opcode: `ld.global.v4.f32`.
        let mods_start = self.peek().start;
        let mut mods_end = op.end;
        while self.at(Token::Dot) && self.peek().start == mods_end {
            mods_end = self.bump().end;
        }
        let modifiers = if mods_end == op.end {
            Name::default()
        } else {
            let src = self.src;
            self.names.get(&src[mods_start as usize + 1..mods_end as usize])
        };
        if is_memory_opcode(text) && !super::checked_before(opcode, modifiers) {
            self.check_memory_modifiers(text, mods_start)?;
            super::remember_checked(opcode, modifiers);
        }
        let mut operands = SmallVec::new();
        let starts_operand = matches!(
            self.peek().tok,
            Token::Ident
                | Token::LBracket
                | Token::LBrace
                | Token::LParen
                | Token::Bang
                | Token::Minus
                | Token::Int
                | Token::HexF32
                | Token::HexF64
                | Token::DecFloat
        );
        if !starts_operand && !self.at(Token::Semi) {
            return self.expected("an operand or `;` ending the instruction");
        }
        if !self.at(Token::Semi) {
            loop {
                operands.push(self.operand()?);
                if !self.eat(Token::Comma) {
                    break;
                }
            }
        }
        if !self.at(Token::Semi) {
            return self.expected("`,` or `;` after the operand");
        }
        self.bump();
        Ok(Instruction { guard, opcode, modifiers, operands, span: Span { start, end: self.prev_end } })
    }

    /// Refuses a modifier of a memory instruction that PTX does not define (`ld.globl`):
    /// the state space decides how an access is checked, and a misspelt one would
    /// otherwise read as no space at all, a generic access.
    #[cold]
    fn check_memory_modifiers(&mut self, opcode: &str, mods_start: u32) -> PResult<()> {
        let mut at = mods_start as usize;
        let src = self.src;
        let end =
            src[at..].find(|c: char| !(c == '.' || c == ':' || c == '_' || c == '$' || c.is_ascii_alphanumeric()));
        let mods = &src[at..end.map_or(src.len(), |e| at + e)];
        for m in mods.split('.').skip(1) {
            at += 1;
            if !MEMORY_MODIFIERS.contains(&m) {
                let t = crate::lexer::Spanned { tok: Token::Dot, start: at as u32 - 1, end: (at + m.len()) as u32 };
                let message = format!("unknown modifier `.{}` of `{opcode}`", crate::excerpt::quote(m));
                return Err(self.error_at(t, message));
            }
            at += m.len();
        }
        Ok(())
    }

    fn operand_list(&mut self, close: Token, what: &str) -> PResult<ThinVec<Operand>> {
        self.enter()?;
        let mut items = Vec::new();
        if !self.at(close) {
            loop {
                items.push(self.operand()?);
                if !self.eat(Token::Comma) {
                    break;
                }
            }
        }
        self.expect(close, what)?;
        self.leave();
        Ok(ThinVec::from(items))
    }

    fn operand(&mut self) -> PResult<Operand> {
        let t = self.peek();
        match t.tok {
            Token::Ident => {
                let name = self.dotted_name()?;
                match self.peek().tok {
                    Token::Pipe => {
                        self.bump();
                        Ok(Operand::Pair(Box::new((name, self.ident("the second predicate after `|`")?))))
                    }
                    Token::Plus | Token::Minus => {
                        // `sym+8` outside brackets, as in `mov.u64 %rd1, sym+8;`
                        let lhs = Expr::Symbol(name);
                        let op = if self.bump().tok == Token::Plus { BinOp::Add } else { BinOp::Sub };
                        let rhs = self.expr()?;
                        Ok(Operand::Expr(Box::new(Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) })))
                    }
                    Token::LParen if self.peek().start == self.prev_end => {
                        // `generic(sym)` and similar as an operand.
                        self.bump();
                        let arg = self.expr()?;
                        self.expect(Token::RParen, "`)`")?;
                        Ok(Operand::Expr(Box::new(Expr::Call { func: name, args: vec![arg] })))
                    }
                    _ => Ok(Operand::Name(name)),
                }
            }
            Token::LBracket => {
                self.bump();
                let addr = self.address()?;
                // `[a].unified`: a suffix written against the address.
                let n = self.peek();
                if n.tok == Token::Dot && n.start == self.prev_end {
                    self.bump();
                    return Ok(Operand::Suffixed(Box::new((addr, Name::from(&self.text(n)[1..])))));
                }
                Ok(addr)
            }
            Token::LBrace => {
                self.bump();
                let elems = self.operand_list(Token::RBrace, "`,` or `}` in the vector")?;
                if self.eat(Token::Pipe) {
                    // `tex … {d0, d1, d2, d3}|p, …`: a vector destination with a predicate.
                    let pred = self.ident("the predicate after `|`")?;
                    return Ok(Operand::VectorPair(Box::new((elems, pred))));
                }
                Ok(Operand::Vector(elems))
            }
            Token::LParen => {
                self.bump();
                Ok(Operand::List(self.operand_list(Token::RParen, "`,` or `)` in the list")?))
            }
            Token::Bang => {
                self.bump();
                Ok(Operand::Not(self.dotted_name()?))
            }
            Token::Minus => {
                let n = self.peek_nth(1);
                match n.tok {
                    Token::Int => {
                        self.bump();
                        Ok(Operand::Int(self.int_lit(true)?))
                    }
                    Token::Ident => {
                        self.bump();
                        Ok(Operand::Neg(self.dotted_name()?))
                    }
                    Token::DecFloat => {
                        self.bump();
                        let f = self.bump();
                        Ok(Operand::DecFloat(Name::from(&self.src[t.start as usize..f.end as usize])))
                    }
                    _ => Ok(Operand::Expr(Box::new(self.expr()?))),
                }
            }
            Token::Int => {
                let v = self.int_lit(false)?;
                Ok(Operand::Int(v))
            }
            Token::HexF32 | Token::HexF64 | Token::DecFloat => Ok(match self.float_lit()? {
                FloatLit::F32(b) => Operand::F32(b),
                FloatLit::F64(b) => Operand::F64(b),
                FloatLit::Decimal(d) => Operand::DecFloat(d),
            }),
            _ => self.expected("an operand"),
        }
    }

    /// After `[`: `base`, `base+imm`, `base+-imm`, `imm`, or a composite list.
    fn address(&mut self) -> PResult<Operand> {
        // The common shapes take the fast path without allocating; anything else
        // (`[tex, {…}]`, `[sym+4*2]`) is a list of general operands.
        let first = self.peek();
        let kinds = [self.peek_nth(1).tok, self.peek_nth(2).tok, self.peek_nth(3).tok];
        use Token::{Int, Minus, Plus, RBracket};
        let simple = match first.tok {
            Token::Ident => {
                matches!(kinds, [RBracket, _, _] | [Plus, Int, RBracket] | [Plus, Minus, Int] | [Minus, Int, RBracket])
            }
            Token::Int => kinds[0] == RBracket,
            Token::Minus => kinds[0] == Int && kinds[1] == RBracket,
            _ => false,
        };
        if !simple {
            return Ok(Operand::AddressList(self.operand_list(Token::RBracket, "`,` or `]` in the address")?));
        }
        let base = if first.tok == Token::Ident { Some(self.dotted_name()?) } else { None };
        let (offset, offset_written) = if base.is_none() || self.eat(Token::Plus) || self.at(Token::Minus) {
            (self.signed_i64()?, true)
        } else {
            (0, false)
        };
        self.expect(Token::RBracket, "`]` closing the address")?;
        match i32::try_from(offset) {
            Ok(offset) => Ok(Operand::Address { base, offset, offset_written }),
            // An absolute 64-bit address or a huge offset: keep it as written, as a bracketed expression.
            Err(_) => {
                let int = Expr::Int(IntLit {
                    value: offset.unsigned_abs(),
                    radix: Radix::Dec,
                    unsigned: false,
                    negative: offset < 0,
                });
                let e = match base {
                    Some(b) => Expr::Binary { op: BinOp::Add, lhs: Box::new(Expr::Symbol(b)), rhs: Box::new(int) },
                    None => int,
                };
                Ok(Operand::AddressList(thin_vec::thin_vec![Operand::Expr(Box::new(e))]))
            }
        }
    }
}

/// Instructions whose modifiers name a state space, checked against
/// [`MEMORY_MODIFIERS`].
fn is_memory_opcode(opcode: &str) -> bool {
    matches!(opcode, "ld" | "ldu" | "st" | "atom" | "red" | "cvta" | "isspacep" | "prefetch" | "prefetchu")
}

/// Every modifier the PTX ISA defines for `ld`, `ldu`, `st`, `atom`, `red`, `cvta`,
/// `isspacep`, `prefetch` and `prefetchu` (PTX ISA 9.0, "Data Movement and Conversion
/// Instructions" and "Parallel Synchronization and Communication Instructions"): state
/// spaces, memory-model semantics and scopes, cache operators and eviction priorities,
/// atomic operations, vector widths and types. One list for all of them keeps it short;
/// the mistake it catches is a word PTX has nowhere here.
const MEMORY_MODIFIERS: &[&str] = &[
    // State spaces (and `cvta.to`).
    "global",
    "shared",
    "shared::cta",
    "shared::cluster",
    "local",
    "const",
    "param",
    "param::entry",
    "param::func",
    "to",
    "tensormap",
    // Memory-model semantics and scopes.
    "weak",
    "relaxed",
    "acquire",
    "release",
    "acq_rel",
    "volatile",
    "mmio",
    "cta",
    "cluster",
    "gpu",
    "sys",
    // Cache operators, eviction priorities, prefetch sizes and levels.
    "ca",
    "cg",
    "cs",
    "lu",
    "cv",
    "wb",
    "wt",
    "nc",
    "L1",
    "L2",
    "L1::evict_normal",
    "L1::evict_unchanged",
    "L1::evict_first",
    "L1::evict_last",
    "L1::no_allocate",
    "L2::evict_normal",
    "L2::evict_first",
    "L2::evict_last",
    "L2::evict_unchanged",
    "L2::cache_hint",
    "L2::64B",
    "L2::128B",
    "L2::256B",
    // Asynchronous stores and reductions (`st.async`, `red.async`) and bulk stores.
    "async",
    "bulk",
    "mbarrier::complete_tx::bytes",
    // Atomic and reduction operations.
    "and",
    "or",
    "xor",
    "cas",
    "exch",
    "add",
    "inc",
    "dec",
    "min",
    "max",
    "noftz",
    // Vectors and types.
    "v2",
    "v4",
    "v8",
    "b8",
    "b16",
    "b32",
    "b64",
    "b128",
    "u8",
    "u16",
    "u32",
    "u64",
    "s8",
    "s16",
    "s32",
    "s64",
    "f16",
    "f16x2",
    "bf16",
    "bf16x2",
    "f32",
    "f64",
    "e4m3",
    "e5m2",
    "e4m3x2",
    "e5m2x2",
    "e4m3x4",
    "e5m2x4",
    "pred",
];
