//! Constant expressions, as initializers and operands write them (`var+8`, `(1<<3)`,
//! `generic(g)`), and the literals and dotted names inside them.

use super::{PResult, Parser, MAX_DEPTH};
use crate::ast::*;
use crate::lexer::Token;

impl<'s> Parser<'s> {
    pub(super) fn expr(&mut self) -> PResult<Expr> {
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

    pub(super) fn float_lit(&mut self) -> PResult<FloatLit> {
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
    pub(super) fn dotted_name(&mut self) -> PResult<Name> {
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
}
