//! Recursive-descent parser from PTX text to [`crate::ast`].
//!
//! Tokens are pulled lazily from the logos lexer through a small lookahead buffer, so a
//! large module never exists twice in memory as a token vector, and [`Items`] yields one
//! module item at a time for callers that stream (`gpusan ptx fmt`). The grammar is
//! generic where PTX is regular (every instruction is `opcode{.mod} operand, …;`), so a
//! new modifier or instruction parses without a table entry. The first error stops the
//! parse and carries its line, column and the offending source line.

use std::fmt;

use logos::Logos;
use smallvec::SmallVec;

use crate::ast::*;
use crate::lexer::{Spanned, Token};

/// Why a source is not valid PTX, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What was expected and what was found.
    pub message: String,
    pub span: Span,
    /// 1-based line and column (in characters) of `span.start`.
    pub line: u32,
    pub column: u32,
    /// The source line that holds the error, for the snippet.
    pub source_line: String,
    /// The file name, when the caller knows it ([`ParseError::with_path`]).
    pub path: Option<String>,
}

impl ParseError {
    fn new(src: &str, span: Span, message: String) -> ParseError {
        let start = (span.start as usize).min(src.len());
        let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[start..].find('\n').map_or(src.len(), |i| start + i);
        let line = src[..line_start].bytes().filter(|&b| b == b'\n').count() as u32 + 1;
        let column = src[line_start..start].chars().count() as u32 + 1;
        ParseError { message, span, line, column, source_line: src[line_start..line_end].to_string(), path: None }
    }

    pub fn with_path(mut self, path: impl Into<String>) -> ParseError {
        self.path = Some(path.into());
        self
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.as_deref().unwrap_or("<input>");
        writeln!(f, "{path}:{}:{}: {}", self.line, self.column, self.message)?;
        let gutter = self.line.to_string().len();
        let text = self.source_line.replace('\t', " ");
        writeln!(f, "{:gutter$} |", "")?;
        writeln!(f, "{} | {}", self.line, text)?;
        let width = (self.span.end.saturating_sub(self.span.start) as usize)
            .clamp(1, text.len().saturating_sub(self.column as usize - 1).max(1));
        write!(f, "{:gutter$} | {:col$}{}", "", "", "^".repeat(width), col = self.column as usize - 1)
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
            Token::Invalid => format!("`{}`, which starts no PTX token", self.text(t)),
            _ => format!("`{}`", self.text(t)),
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
        parse_int(text, negative)
            .ok_or_else(|| self.error_at(t, format!("`{text}` is no valid integer literal or does not fit in 64 bits")))
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

    // ---- module level ----------------------------------------------------------------

    fn item(&mut self) -> PResult<Option<Item>> {
        let t = self.peek();
        match t.tok {
            Token::Eof => Ok(None),
            Token::Dwarf => {
                self.bump();
                Ok(Some(Item::Raw(RawText {
                    text: self.text(t).to_string(),
                    span: Span { start: t.start, end: t.end },
                })))
            }
            Token::Dot => self.directive_item().map(Some),
            _ => self.expected("a module directive (`.version`, `.target`, `.entry`, `.func`, `.global`, …)"),
        }
    }

    fn directive_item(&mut self) -> PResult<Item> {
        let t = self.peek();
        match self.text(t) {
            ".version" => {
                self.bump();
                let v = self.peek();
                let text = self.text(v);
                let parsed = match v.tok {
                    Token::DecFloat => text.split_once('.').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?))),
                    _ => None,
                };
                let (major, minor) = match parsed {
                    Some(p) => p,
                    None => return self.expected("a version number such as `9.0`"),
                };
                self.bump();
                Ok(Item::Version { major, minor })
            }
            ".target" => {
                self.bump();
                let mut targets = vec![self.ident("a target such as `sm_90`")?];
                while self.eat(Token::Comma) {
                    targets.push(self.ident("a target option such as `debug`")?);
                }
                Ok(Item::Target(targets))
            }
            ".address_size" => {
                self.bump();
                Ok(Item::AddressSize(self.u32_lit("an address size (32 or 64)")?))
            }
            ".file" => {
                self.bump();
                let index = self.u32_lit("a file index")?;
                let path = self.string("a file name in quotes")?;
                let (mut timestamp, mut size) = (None, None);
                if self.eat(Token::Comma) {
                    timestamp = Some(self.int_lit(false)?.value);
                    self.expect(Token::Comma, "`,` and the file size")?;
                    size = Some(self.int_lit(false)?.value);
                }
                Ok(Item::File(FileDirective { index, path, timestamp, size }))
            }
            ".section" => Ok(Item::Raw(self.raw_section()?)),
            ".pragma" => {
                self.bump();
                let s = self.pragma_strings()?;
                Ok(Item::Pragma(s))
            }
            ".alias" => {
                self.bump();
                let alias = self.ident("the alias name")?;
                self.expect(Token::Comma, "`,`")?;
                let target = self.ident("the aliased function")?;
                self.expect(Token::Semi, "`;`")?;
                Ok(Item::Alias { alias, target })
            }
            _ => {
                let linkage = self.linkages();
                let t = self.peek();
                match (t.tok, self.text(t)) {
                    (Token::Dot, ".entry") | (Token::Dot, ".func") => {
                        Ok(Item::Function(Box::new(self.function(linkage)?)))
                    }
                    (Token::Dot, name) if is_var_space(name) => {
                        let mut decls = self.var_decls(linkage)?;
                        if decls.len() != 1 {
                            let t = self.peek();
                            return Err(self.error_at(t, "a module-level declaration must name one variable".into()));
                        }
                        Ok(Item::Var(decls.pop().expect("one")))
                    }
                    (Token::Dot, name) => Err(self.error_at(t, format!("unknown directive `{name}` at module level"))),
                    _ => self.expected("`.entry`, `.func` or a variable declaration"),
                }
            }
        }
    }

    fn string(&mut self, what: &str) -> PResult<String> {
        let t = self.expect(Token::Str, what)?;
        let raw = self.text(t);
        Ok(raw[1..raw.len() - 1].to_string())
    }

    /// `.pragma "a", "b";` after the directive.
    fn pragma_strings(&mut self) -> PResult<String> {
        let start = self.peek();
        self.string("a pragma string")?;
        while self.eat(Token::Comma) {
            self.string("a pragma string")?;
        }
        let end = self.prev_end;
        self.expect(Token::Semi, "`;` after the pragma")?;
        Ok(self.src[start.start as usize..end as usize].to_string())
    }

    /// `.section NAME { … }` kept byte-exact up to its closing brace.
    fn raw_section(&mut self) -> PResult<RawText> {
        let start = self.bump();
        self.expect(Token::Dot, "a section name such as `.debug_info`")?;
        self.expect(Token::LBrace, "`{` opening the section")?;
        let mut depth = 1u32;
        loop {
            let t = self.bump();
            match t.tok {
                Token::LBrace => depth += 1,
                Token::RBrace => {
                    depth -= 1;
                    if depth == 0 {
                        let span = Span { start: start.start, end: t.end };
                        return Ok(RawText { text: self.src[span.range()].to_string(), span });
                    }
                }
                Token::Eof => {
                    return Err(
                        self.error_at(t, "expected `}` closing the `.section`, found the end of the file".into())
                    )
                }
                Token::Invalid => return Err(self.error_at(t, format!("`{}` starts no PTX token", self.text(t)))),
                _ => {}
            }
        }
    }

    fn linkages(&mut self) -> Vec<Linkage> {
        let mut out = Vec::new();
        loop {
            let t = self.peek();
            let l = match (t.tok, self.text(t)) {
                (Token::Dot, ".visible") => Linkage::Visible,
                (Token::Dot, ".extern") => Linkage::Extern,
                (Token::Dot, ".weak") => Linkage::Weak,
                (Token::Dot, ".common") => Linkage::Common,
                _ => return out,
            };
            self.bump();
            out.push(l);
        }
    }

    fn function(&mut self, linkage: Vec<Linkage>) -> PResult<Function> {
        let start = self.bump();
        let kind = if self.text(start) == ".entry" { FunctionKind::Entry } else { FunctionKind::Func };
        let returns =
            if kind == FunctionKind::Func && self.at(Token::LParen) { Some(self.param_list()?) } else { None };
        let name = self.ident("the function name")?;
        let params = if self.at(Token::LParen) { Some(self.param_list()?) } else { None };
        let attributes = self.attributes()?;
        let body = if self.eat(Token::Semi) {
            None
        } else if self.at(Token::LBrace) {
            self.bump();
            Some(self.statements()?)
        } else {
            return self.expected("`{` opening the body or `;` ending the declaration");
        };
        Ok(Function {
            linkage,
            kind,
            returns,
            name,
            params,
            attributes,
            body,
            span: Span { start: start.start, end: self.prev_end },
        })
    }

    /// Attributes between a signature and its body: `.maxntid 256, 1, 1 .noreturn`.
    fn attributes(&mut self) -> PResult<Vec<Attribute>> {
        let mut out = Vec::new();
        while self.at(Token::Dot) {
            let t = self.bump();
            let name = Name::from(&self.text(t)[1..]);
            let mut values = Vec::new();
            if name == "pragma" {
                values.push(AttrValue::Str(self.pragma_strings()?));
            } else if self.at(Token::Int) {
                values.push(AttrValue::Int(self.int_lit(false)?.value));
                while self.eat(Token::Comma) {
                    values.push(AttrValue::Int(self.int_lit(false)?.value));
                }
            }
            out.push(Attribute { name, values });
        }
        Ok(out)
    }

    fn param_list(&mut self) -> PResult<Vec<Param>> {
        self.expect(Token::LParen, "`(`")?;
        let mut params = Vec::new();
        if self.eat(Token::RParen) {
            return Ok(params);
        }
        loop {
            params.push(self.param()?);
            if self.eat(Token::RParen) {
                return Ok(params);
            }
            self.expect(Token::Comma, "`,` or `)` in the parameter list")?;
        }
    }

    fn param(&mut self) -> PResult<Param> {
        let t = self.peek();
        let space = match (t.tok, self.text(t)) {
            (Token::Dot, ".param") => StateSpace::Param,
            (Token::Dot, ".reg") => StateSpace::Reg,
            _ => return self.expected("`.param` or `.reg` starting a parameter"),
        };
        self.bump();
        let (mut align, mut vector, mut ty, mut ptr) = (None, None, None, None);
        while self.at(Token::Dot) {
            let t = self.bump();
            match self.text(t) {
                ".align" => align = Some(self.u32_lit("an alignment")?),
                ".ptr" => {
                    let mut p = PtrAttr { space: None, align: None };
                    loop {
                        let t = self.peek();
                        match (t.tok, self.text(t)) {
                            (Token::Dot, ".align") => {
                                self.bump();
                                p.align = Some(self.u32_lit("an alignment")?);
                            }
                            (Token::Dot, s) if StateSpace::from_name(&s[1..]).is_some() && p.space.is_none() => {
                                self.bump();
                                p.space = StateSpace::from_name(&s[1..]);
                            }
                            _ => break,
                        }
                    }
                    ptr = Some(p);
                }
                v @ (".v2" | ".v4" | ".v8") => vector = Some(v[2..].parse().expect("digit")),
                other => {
                    if ty.is_some() {
                        return Err(self.error_at(t, format!("unexpected `{other}`: the parameter already has a type")));
                    }
                    ty = Some(self.names.get(&other[1..]));
                }
            }
        }
        let Some(ty) = ty else { return self.expected("the parameter's type, such as `.u64`") };
        let name = self.ident("the parameter name")?;
        let array = self.array_dims()?;
        Ok(Param { space, align, vector, ty, ptr, name, array })
    }

    fn array_dims(&mut self) -> PResult<Vec<Option<u64>>> {
        let mut dims = Vec::new();
        while self.eat(Token::LBracket) {
            if self.eat(Token::RBracket) {
                dims.push(None);
            } else {
                dims.push(Some(self.int_lit(false)?.value));
                self.expect(Token::RBracket, "`]`")?;
            }
        }
        Ok(dims)
    }

    /// `.reg .b32 %r<4>;`, `.shared .align 4 .b8 a[16], b[16];`, `.global .u32 x = 1;`
    fn var_decls(&mut self, linkage: Vec<Linkage>) -> PResult<Vec<VarDecl>> {
        let start = self.peek();
        let t = self.bump();
        let space = StateSpace::from_name(&self.text(t)[1..]).expect("caller checked the space");
        let (mut attributes, mut align, mut vector, mut ty) = (Vec::new(), None, None, None);
        while self.at(Token::Dot) {
            let t = self.bump();
            match self.text(t) {
                ".align" => align = Some(self.u32_lit("an alignment")?),
                ".attribute" => {
                    let open = self.expect(Token::LParen, "`(` after `.attribute`")?;
                    let mut depth = 1u32;
                    let close = loop {
                        let t = self.bump();
                        match t.tok {
                            Token::LParen => depth += 1,
                            Token::RParen => {
                                depth -= 1;
                                if depth == 0 {
                                    break t;
                                }
                            }
                            Token::Eof | Token::Semi => {
                                return Err(self.error_at(t, "expected `)` closing `.attribute(`".into()))
                            }
                            _ => {}
                        }
                    };
                    attributes.push(self.src[open.end as usize..close.start as usize].to_string());
                }
                v @ (".v2" | ".v4" | ".v8") => vector = Some(v[2..].parse().expect("digit")),
                other => {
                    if ty.is_some() {
                        return Err(
                            self.error_at(t, format!("unexpected `{other}`: the declaration already has a type"))
                        );
                    }
                    ty = Some(self.names.get(&other[1..]));
                }
            }
        }
        let Some(ty) = ty else { return self.expected("the variable's type, such as `.b32`") };
        let mut decls = Vec::new();
        loop {
            let name_tok = self.peek();
            let name = self.ident("the variable name")?;
            let count = if self.eat(Token::Lt) {
                let n = self.u32_lit("a register count")?;
                self.expect(Token::Gt, "`>`")?;
                Some(n)
            } else {
                None
            };
            let array = self.array_dims()?;
            let init = if self.eat(Token::Eq) { Some(self.initializer()?) } else { None };
            let span_start = if decls.is_empty() { start.start } else { name_tok.start };
            decls.push(VarDecl {
                linkage: linkage.clone(),
                space,
                attributes: attributes.clone(),
                align,
                vector,
                ty,
                name,
                count,
                array,
                init,
                span: Span { start: span_start, end: self.prev_end },
            });
            if !self.eat(Token::Comma) {
                break;
            }
        }
        self.expect(Token::Semi, "`;` ending the declaration")?;
        Ok(decls)
    }

    fn initializer(&mut self) -> PResult<Initializer> {
        if self.eat(Token::LBrace) {
            self.enter()?;
            let mut items = Vec::new();
            if !self.at(Token::RBrace) {
                loop {
                    items.push(self.initializer()?);
                    if !self.eat(Token::Comma) {
                        break;
                    }
                }
            }
            self.expect(Token::RBrace, "`,` or `}` in the initializer")?;
            self.leave();
            Ok(Initializer::List(items))
        } else {
            Ok(Initializer::Expr(self.expr()?))
        }
    }

    // ---- constant expressions --------------------------------------------------------

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let e = self.binary(0);
        self.leave();
        e
    }

    fn binary(&mut self, min_prec: u8) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        // A chain `a+b+c+…` is parsed in a loop but builds a left-deep tree that printing
        // and dropping walk recursively: bound its depth like any other nesting.
        let mut chain = 0u32;
        loop {
            let next = self.peek();
            let (op, prec) = match next.tok {
                Token::Pipe => (BinOp::Or, 1),
                Token::Caret => (BinOp::Xor, 2),
                Token::Amp => (BinOp::And, 3),
                Token::Shl => (BinOp::Shl, 4),
                Token::Shr => (BinOp::Shr, 4),
                Token::Plus => (BinOp::Add, 5),
                Token::Minus => (BinOp::Sub, 5),
                Token::Star => (BinOp::Mul, 6),
                Token::Slash => (BinOp::Div, 6),
                Token::Ident if self.text(next) == "%" => (BinOp::Rem, 6),
                _ => return Ok(lhs),
            };
            if prec < min_prec {
                return Ok(lhs);
            }
            chain += 1;
            if self.depth + chain > MAX_DEPTH {
                return Err(self.error_at(next, format!("expression nesting deeper than {MAX_DEPTH} levels")));
            }
            self.bump();
            self.enter()?;
            let rhs = self.binary(prec + 1)?;
            self.leave();
            lhs = Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) };
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        let t = self.peek();
        match t.tok {
            Token::Minus | Token::Tilde | Token::Bang => {
                self.bump();
                if t.tok == Token::Minus && self.at(Token::Int) {
                    return Ok(Expr::Int(self.int_lit(true)?));
                }
                self.enter()?;
                let e = self.unary()?;
                self.leave();
                let op = match t.tok {
                    Token::Minus => '-',
                    Token::Tilde => '~',
                    _ => '!',
                };
                Ok(Expr::Unary { op, expr: Box::new(e) })
            }
            Token::LParen => {
                self.bump();
                let e = self.expr()?;
                self.expect(Token::RParen, "`)`")?;
                Ok(Expr::Paren(Box::new(e)))
            }
            Token::Int => Ok(Expr::Int(self.int_lit(false)?)),
            Token::HexF32 | Token::HexF64 | Token::DecFloat => Ok(Expr::Float(self.float_lit()?)),
            Token::Ident => {
                if self.text(t).starts_with('%') && self.text(t).len() > 1 {
                    return Err(self.error_at(t, format!("register `{}` in a constant expression", self.text(t))));
                }
                let name = self.dotted_name()?;
                if self.at(Token::LParen) && self.peek().start == self.prev_end {
                    self.bump();
                    let mut args = Vec::new();
                    if !self.at(Token::RParen) {
                        loop {
                            args.push(self.expr()?);
                            if !self.eat(Token::Comma) {
                                break;
                            }
                        }
                    }
                    self.expect(Token::RParen, "`)` closing the call")?;
                    Ok(Expr::Call { func: name, args })
                } else {
                    Ok(Expr::Symbol(name))
                }
            }
            _ => self.expected("a constant expression"),
        }
    }

    fn float_lit(&mut self) -> PResult<FloatLit> {
        let t = self.bump();
        let text = self.text(t);
        Ok(match t.tok {
            Token::HexF32 => FloatLit::F32(u32::from_str_radix(&text[2..], 16).expect("lexer checked")),
            Token::HexF64 => FloatLit::F64(u64::from_str_radix(&text[2..], 16).expect("lexer checked")),
            _ => FloatLit::Decimal(Name::from(text)),
        })
    }

    /// An identifier and any `.x`-style suffix written against it (`%tid.x`, `%envreg3`).
    #[inline]
    fn dotted_name(&mut self) -> PResult<Name> {
        let t = self.expect(Token::Ident, "a name")?;
        let mut end = t.end;
        loop {
            let n = self.peek();
            if n.tok == Token::Dot && n.start == end {
                self.bump();
                end = n.end;
            } else {
                break;
            }
        }
        let src = self.src;
        Ok(self.names.get(&src[t.start as usize..end as usize]))
    }

    // ---- function bodies -------------------------------------------------------------

    /// Statements up to and including the closing `}`.
    fn statements(&mut self) -> PResult<Vec<Statement>> {
        self.statement_list(Token::RBrace)
    }

    /// Statements up to `end`: the `}` closing a body (taken), or the end of the input.
    fn statement_list(&mut self, end: Token) -> PResult<Vec<Statement>> {
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
                    return Err(self.error_at(t, format!("unknown directive `{name}` in a function body")));
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
                    return Err(self.error_at(n, format!("expected `_` in the call prototype, found `{sink}`")));
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
