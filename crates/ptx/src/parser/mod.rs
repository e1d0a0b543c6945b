//! Recursive-descent parser from PTX text to [`crate::ast`].
//!
//! Tokens are pulled lazily from the logos lexer through a small lookahead buffer, so a
//! large module never exists twice in memory as a token vector, and [`Items`] yields one
//! module item at a time for callers that stream (`gpusan ptx fmt`). The grammar is
//! generic where PTX is regular (every instruction is `opcode{.mod} operand, …;`), so a
//! new modifier or instruction parses without a table entry. The first error stops the
//! parse and carries its line, column and the offending source line.
//!
//! This file holds the token buffer and the entry points; the grammar is in
//! `directives.rs` (module items, signatures, declarations), `body.rs` (statements,
//! instructions, operands) and `expressions.rs` (constant expressions and literals).

use std::fmt;

use logos::Logos;

use crate::ast::*;
use crate::excerpt::{self, Window};
use crate::lexer::{Spanned, Token};

mod body;
mod directives;
mod expressions;

/// Why a source is not valid PTX, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What was expected and what was found; quoted input is escaped
    /// ([`crate::excerpt::escape`]).
    pub message: String,
    /// Byte offsets into the source.
    pub span: Span,
    /// 1-based line and column (in characters) of `span.start`.
    pub line: u32,
    pub column: u32,
    /// The part of the source line around the error, escaped and cut to a window
    /// ([`crate::excerpt::window`]), with where the marker goes in it.
    pub source_line: Window,
    /// The file name, when the caller knows it ([`ParseError::with_path`]).
    pub path: Option<String>,
}

impl ParseError {
    fn new(src: &str, span: Span, message: String) -> ParseError {
        let start = floor_char(src, (span.start as usize).min(src.len()));
        let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        let line = src.as_bytes()[..line_start].iter().filter(|&&b| b == b'\n').count() as u32 + 1;
        let column = src[line_start..start].chars().count() as u32 + 1;
        let end = (span.end as usize).clamp(start, line_end);
        let source_line = excerpt::window(&src[line_start..line_end], start - line_start, end - line_start);
        // Messages quote tokens of the input; escaping here covers every message at once.
        ParseError { message: excerpt::escape(&message), span, line, column, source_line, path: None }
    }

    pub fn with_path(mut self, path: impl Into<String>) -> ParseError {
        self.path = Some(path.into());
        self
    }
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.as_deref().map_or("<input>".into(), excerpt::escape);
        writeln!(f, "{path}:{}:{}: {}", self.line, self.column, self.message)?;
        // Padding is written out rather than with a `{:width$}` argument: formatting widths
        // are limited to 65,535 and the window keeps these short anyway.
        let gutter = " ".repeat(self.line.to_string().len());
        let w = &self.source_line;
        writeln!(f, "{gutter} |")?;
        writeln!(f, "{} | {}", self.line, w.text)?;
        write!(f, "{gutter} | {}{}", " ".repeat(w.marker_indent()), "^".repeat(w.marker_width()))
    }
}

impl std::error::Error for ParseError {}

/// Parses a whole module.
pub fn parse(src: &str) -> Result<Module, ParseError> {
    let items = Items::new(src).collect::<Result<Vec<_>, _>>()?;
    Ok(Module { items })
}

/// Parses the statements of a function body without the braces around them (`mov.u32 %r1,
/// 0;\n$L: …`), for passes that write new code as PTX text: the module header and the
/// function around it, and the name cache a whole module wants, would cost more than
/// parsing a few lines. Spans are offsets into `src`.
pub fn parse_statements(src: &str) -> Result<Vec<Statement>, ParseError> {
    let mut p = Parser::with_name_slots(src, SNIPPET_NAME_SLOTS);
    p.statement_list(Token::Eof)
}

/// Parses a module one item at a time; stops after the first error.
pub struct Items<'s> {
    p: Parser<'s>,
    failed: bool,
}

impl<'s> Items<'s> {
    pub fn new(src: &'s str) -> Items<'s> {
        Items { p: Parser::new(src), failed: false }
    }
}

impl Iterator for Items<'_> {
    type Item = Result<Item, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.p.item() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

type PResult<T> = Result<T, ParseError>;

/// Tokens the parser may look ahead (`peek_nth(LOOKAHEAD - 1)` at most).
const LOOKAHEAD: usize = 4;

/// The most registers one `.reg .T %r<N>;` may declare: 4,194,304. nvcc and Triton number
/// registers densely from 0, and their largest modules declare some thousands (1,403 in
/// the corpus); ptxas takes seconds and hundreds of MB per ten million. A count past this
/// is refused, at the count, before any pass sees it.
pub const MAX_REGISTER_COUNT: u32 = 1 << 22;

/// The largest variable, in bytes: `i64::MAX`. Address offsets in PTX are signed 64-bit,
/// so no byte past this could be addressed, and sizes and end offsets of variables stay
/// sums that cannot overflow. (`.b8 a[18446744073709551615]` once parsed, and summing
/// such sizes wrapped.)
pub const MAX_VARIABLE_BYTES: u64 = i64::MAX as u64;

/// Nesting deeper than this is rejected rather than risking the stack on hostile input.
const MAX_DEPTH: u32 = 256;

struct Parser<'s> {
    src: &'s str,
    lexer: logos::Lexer<'s, Token>,
    /// Lookahead ring: `ahead[(head + i) % LOOKAHEAD]` for `i < len`. A fixed array rather
    /// than a deque: `peek`/`bump` run once per token and dominate the profile otherwise.
    ahead: [Spanned; LOOKAHEAD],
    head: usize,
    len: usize,
    /// End of the last token taken, for adjacency tests and "after this" errors.
    prev_end: u32,
    depth: u32,
    names: NameCache,
    /// Module items parsed so far, for the header rule: as ptxas requires, a module
    /// starts with `.version` and then `.target` (an empty file is no module).
    items: u32,
}

/// Slots of [`checked_before`].
const CHECKED_SLOTS: usize = 64;

thread_local! {
    /// Opcode-and-modifier spellings of memory instructions already found valid, direct
    /// mapped. Per thread rather than per parser: the passes parse their own snippets by
    /// the thousand, each with a fresh parser, and the answer never changes.
    static CHECKED: std::cell::RefCell<[(Name, Name); CHECKED_SLOTS]> =
        std::cell::RefCell::new([(Name::default(), Name::default()); CHECKED_SLOTS]);
}

/// Whether `opcode` with `modifiers` was found valid before; a module repeats a few dozen
/// spellings, so nearly every memory instruction is one compare of two interned names.
#[inline]
fn checked_before(opcode: Name, modifiers: Name) -> bool {
    let slot = (opcode.precomputed_hash() ^ modifiers.precomputed_hash()) as usize % CHECKED_SLOTS;
    CHECKED.with(|c| c.borrow()[slot] == (opcode, modifiers))
}

/// Remembers that `opcode` with `modifiers` is valid.
fn remember_checked(opcode: Name, modifiers: Name) {
    let slot = (opcode.precomputed_hash() ^ modifiers.precomputed_hash()) as usize % CHECKED_SLOTS;
    CHECKED.with(|c| c.borrow_mut()[slot] = (opcode, modifiers));
}

/// A direct-mapped cache in front of the global interner: a module names the same few
/// thousand registers and modifiers millions of times, and a hit here costs a short hash
/// and a compare instead of the interner's lock.
struct NameCache {
    /// A power of two long.
    slots: Box<[Option<Name>]>,
}

const NAME_SLOTS: usize = 4096;
/// A few lines name few things; clearing 4096 slots would cost more than parsing them.
const SNIPPET_NAME_SLOTS: usize = 64;

impl NameCache {
    fn new(slots: usize) -> NameCache {
        debug_assert!(slots.is_power_of_two());
        NameCache { slots: vec![None; slots].into_boxed_slice() }
    }

    #[inline]
    fn get(&mut self, s: &str) -> Name {
        // FNV-1a over the bytes: names are short, and this only picks a slot.
        let mut h: u32 = 0x811c_9dc5;
        for &b in s.as_bytes() {
            h = (h ^ b as u32).wrapping_mul(0x0100_0193);
        }
        let mask = self.slots.len() - 1;
        let slot = &mut self.slots[h as usize & mask];
        match slot {
            Some(n) if n.as_str() == s => *n,
            _ => {
                let n = Name::from(s);
                *slot = Some(n);
                n
            }
        }
    }
}

impl<'s> Parser<'s> {
    fn new(src: &'s str) -> Parser<'s> {
        Parser::with_name_slots(src, NAME_SLOTS)
    }

    fn with_name_slots(src: &'s str, name_slots: usize) -> Parser<'s> {
        Parser {
            src,
            lexer: Token::lexer(src),
            ahead: [Spanned { tok: Token::Eof, start: 0, end: 0 }; LOOKAHEAD],
            head: 0,
            len: 0,
            prev_end: 0,
            depth: 0,
            names: NameCache::new(name_slots),
            items: 0,
        }
    }

    #[inline]
    fn fill(&mut self, n: usize) {
        debug_assert!(n < LOOKAHEAD);
        while self.len <= n {
            let t = match self.lexer.next() {
                Some(Ok(tok)) => {
                    let s = self.lexer.span();
                    Spanned { tok, start: s.start as u32, end: s.end as u32 }
                }
                Some(Err(())) => {
                    let s = self.lexer.span();
                    Spanned { tok: Token::Invalid, start: s.start as u32, end: s.end as u32 }
                }
                None => Spanned { tok: Token::Eof, start: self.src.len() as u32, end: self.src.len() as u32 },
            };
            self.ahead[(self.head + self.len) % LOOKAHEAD] = t;
            self.len += 1;
        }
    }

    #[inline]
    fn peek(&mut self) -> Spanned {
        self.fill(0);
        self.ahead[self.head]
    }

    fn peek_nth(&mut self, n: usize) -> Spanned {
        self.fill(n);
        self.ahead[(self.head + n) % LOOKAHEAD]
    }

    #[inline]
    fn bump(&mut self) -> Spanned {
        self.fill(0);
        let t = self.ahead[self.head];
        self.head = (self.head + 1) % LOOKAHEAD;
        self.len -= 1;
        if t.tok != Token::Eof {
            self.prev_end = t.end;
        }
        t
    }

    #[inline]
    fn text(&self, t: Spanned) -> &'s str {
        &self.src[t.start as usize..t.end as usize]
    }

    #[inline]
    fn at(&mut self, tok: Token) -> bool {
        self.peek().tok == tok
    }

    #[inline]
    fn eat(&mut self, tok: Token) -> bool {
        if self.at(tok) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn error_at(&self, t: Spanned, message: String) -> ParseError {
        ParseError::new(self.src, Span { start: t.start, end: t.end }, message)
    }

    /// "expected WHAT, found …" at the next token.
    #[cold]
    #[inline(never)]
    fn expected<T>(&mut self, what: &str) -> PResult<T> {
        let t = self.peek();
        let found = match t.tok {
            Token::Eof => "the end of the file".to_string(),
            Token::Invalid => format!("`{}`, which starts no PTX token", excerpt::quote(self.text(t))),
            _ => format!("`{}`", excerpt::quote(self.text(t))),
        };
        Err(self.error_at(t, format!("expected {what}, found {found}")))
    }

    #[inline]
    fn expect(&mut self, tok: Token, what: &str) -> PResult<Spanned> {
        if self.at(tok) {
            Ok(self.bump())
        } else {
            self.expected(what)
        }
    }

    #[inline]
    fn ident(&mut self, what: &str) -> PResult<Name> {
        let t = self.expect(Token::Ident, what)?;
        let text = self.text(t);
        Ok(self.names.get(text))
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let t = self.peek();
            return Err(self.error_at(t, format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    // ---- numbers ---------------------------------------------------------------------

    fn int_lit(&mut self, negative: bool) -> PResult<IntLit> {
        let t = self.expect(Token::Int, "an integer")?;
        let text = self.text(t);
        parse_int(text, negative).ok_or_else(|| {
            self.error_at(
                t,
                format!("`{}` is no valid integer literal or does not fit in 64 bits", excerpt::quote(text)),
            )
        })
    }

    fn u32_lit(&mut self, what: &str) -> PResult<u32> {
        if !self.at(Token::Int) {
            return self.expected(what);
        }
        let t = self.peek();
        let v = self.int_lit(false)?;
        let value = v.value;
        u32::try_from(value).map_err(|_| self.error_at(t, format!("{what} `{value}` does not fit in 32 bits")))
    }

    /// An optionally negative integer with an optional leading `+`/`-` already consumed by the caller.
    fn signed_i64(&mut self) -> PResult<i64> {
        let negative = self.eat(Token::Minus);
        let t = self.peek();
        let v = self.int_lit(negative)?;
        if !negative && v.value > i64::MAX as u64 && v.radix == Radix::Dec {
            return Err(self.error_at(t, "offset does not fit in 64 bits".into()));
        }
        Ok(v.as_i64())
    }
}

fn is_var_space(directive: &str) -> bool {
    matches!(directive, ".reg" | ".sreg" | ".const" | ".global" | ".local" | ".param" | ".shared" | ".tex")
}

/// Parses an integer literal token's text: decimal, `0x`, `0b`, leading-zero octal, `U` suffix.
fn parse_int(text: &str, negative: bool) -> Option<IntLit> {
    let (digits, unsigned) = match text.strip_suffix('U') {
        Some(d) => (d, true),
        None => (text, false),
    };
    let (radix, body) = if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        (Radix::Hex, h)
    } else if let Some(b) = digits.strip_prefix("0b").or_else(|| digits.strip_prefix("0B")) {
        (Radix::Bin, b)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (Radix::Oct, &digits[1..])
    } else {
        (Radix::Dec, digits)
    };
    let base = match radix {
        Radix::Hex => 16,
        Radix::Bin => 2,
        Radix::Oct => 8,
        Radix::Dec => 10,
    };
    let value = u64::from_str_radix(body, base).ok()?;
    Some(IntLit { value, radix, unsigned, negative })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_parse_as_in_a_body() {
        let text =
            "\t.reg .b64 %rd<3>;\n$L0:\n\t@!%p1 bra $L0;\n\t{\n\tld.global.v2.u64 {%rd1, %rd2}, [%rd0+-32];\n\t}\n";
        let alone = parse_statements(text).unwrap();
        let src = format!(".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{{\n{text}}}\n");
        let module = parse(&src).unwrap();
        let Some(Item::Function(f)) = module.items.into_iter().find(|i| matches!(i, Item::Function(_))) else {
            panic!("one function")
        };
        let mut in_body = f.body.unwrap();
        // Spans are offsets into each text; everything else is the same.
        let offset = src.find(text).unwrap() as u32;
        for s in &mut in_body {
            match s {
                Statement::Inst(i) => i.span = Span { start: i.span.start - offset, end: i.span.end - offset },
                Statement::Label(_, sp) => *sp = Span { start: sp.start - offset, end: sp.end - offset },
                Statement::Decl(d) => d.span = Span { start: d.span.start - offset, end: d.span.end - offset },
                Statement::Block(b) => {
                    for s in b {
                        if let Statement::Inst(i) = s {
                            i.span = Span { start: i.span.start - offset, end: i.span.end - offset };
                        }
                    }
                }
                _ => {}
            }
        }
        assert_eq!(alone, in_body);
        assert_eq!(alone.len(), 4);
    }

    #[test]
    fn a_stray_brace_or_an_open_block_is_an_error() {
        let e = parse_statements("\tret;\n}\n").unwrap_err();
        assert!(e.message.contains("found `}`"), "{}", e.message);
        let e = parse_statements("\t{\n\tret;\n").unwrap_err();
        assert!(e.message.contains("`}` closing the body"), "{}", e.message);
    }
}
