//! Module-level items: `.version`/`.target`/`.address_size`, DWARF sections, function
//! signatures with their parameters and attributes, and variable declarations with their
//! initializers (the declarations of a body use the same code).

use super::{is_var_space, PResult, Parser, MAX_REGISTER_COUNT, MAX_VARIABLE_BYTES};
use crate::ast::*;
use crate::lexer::Token;

impl<'s> Parser<'s> {
    pub(super) fn item(&mut self) -> PResult<Option<Item>> {
        let t = self.peek();
        let header = match self.items {
            0 => Some(".version"),
            1 => Some(".target"),
            _ => None,
        };
        if let Some(first) = header {
            if t.tok != Token::Dot || self.text(t) != first {
                let what = format!("`{first}`: a PTX module starts with `.version` and then `.target`");
                return self.expected(&what);
            }
        }
        self.items += 1;
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
                    (Token::Dot, name) => Err(self
                        .error_at(t, format!("unknown directive `{}` at module level", crate::excerpt::quote(name)))),
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
    pub(super) fn pragma_strings(&mut self) -> PResult<String> {
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
    pub(super) fn raw_section(&mut self) -> PResult<RawText> {
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
                Token::Invalid => {
                    return Err(
                        self.error_at(t, format!("`{}` starts no PTX token", crate::excerpt::quote(self.text(t))))
                    )
                }
                _ => {}
            }
        }
    }

    pub(super) fn linkages(&mut self) -> Vec<Linkage> {
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
    pub(super) fn attributes(&mut self) -> PResult<Vec<Attribute>> {
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

    pub(super) fn param_list(&mut self) -> PResult<Vec<Param>> {
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
                        return Err(self.error_at(
                            t,
                            format!("unexpected `{}`: the parameter already has a type", crate::excerpt::quote(other)),
                        ));
                    }
                    ty = Some(self.names.get(&other[1..]));
                }
            }
        }
        let Some(ty) = ty else { return self.expected("the parameter's type, such as `.u64`") };
        let name = self.ident("the parameter name")?;
        let array = self.array_dims(ty, vector)?;
        Ok(Param { space, align, vector, ty, ptr, name, array })
    }

    /// `[4][8]`, `[]`: the dimensions of a variable or parameter of element type `ty`
    /// (vectors of `vector`), refused where the whole would be over
    /// [`MAX_VARIABLE_BYTES`](super::MAX_VARIABLE_BYTES).
    fn array_dims(&mut self, ty: Name, vector: Option<u32>) -> PResult<Vec<Option<u64>>> {
        let mut dims = Vec::new();
        if !self.at(Token::LBracket) {
            return Ok(dims);
        }
        let element = u64::from(type_width(&ty).unwrap_or(1)) * u64::from(vector.unwrap_or(1));
        let mut bytes = Some(element);
        while self.eat(Token::LBracket) {
            if self.eat(Token::RBracket) {
                dims.push(None);
            } else {
                let at = self.peek();
                let n = self.int_lit(false)?.value;
                bytes = bytes.and_then(|b| b.checked_mul(n)).filter(|&b| b <= MAX_VARIABLE_BYTES);
                if bytes.is_none() {
                    let message = format!(
                        "an array of {n} elements makes the variable larger than {MAX_VARIABLE_BYTES} bytes, the most a signed 64-bit offset reaches"
                    );
                    return Err(self.error_at(at, message));
                }
                dims.push(Some(n));
                self.expect(Token::RBracket, "`]`")?;
            }
        }
        Ok(dims)
    }

    /// `.reg .b32 %r<4>;`, `.shared .align 4 .b8 a[16], b[16];`, `.global .u32 x = 1;`
    pub(super) fn var_decls(&mut self, linkage: Vec<Linkage>) -> PResult<Vec<VarDecl>> {
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
                        return Err(self.error_at(
                            t,
                            format!(
                                "unexpected `{}`: the declaration already has a type",
                                crate::excerpt::quote(other)
                            ),
                        ));
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
                let at = self.peek();
                let n = self.u32_lit("a register count")?;
                if n > MAX_REGISTER_COUNT {
                    return Err(self.error_at(
                        at,
                        format!("register count {n} is over the limit of {MAX_REGISTER_COUNT} registers a declaration may name"),
                    ));
                }
                self.expect(Token::Gt, "`>`")?;
                Some(n)
            } else {
                None
            };
            let array = self.array_dims(ty, vector)?;
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
}
