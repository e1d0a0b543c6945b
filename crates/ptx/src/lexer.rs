//! PTX tokens, produced by a logos DFA. Comments and whitespace are skipped here so the
//! parser only sees what carries meaning; every token keeps its byte span for errors.

use logos::Logos;

#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f]+")]
#[logos(skip r"//[^\n]*")]
pub enum Token {
    /// `/* … */`; skipped by its callback, an error if never closed.
    #[token("/*", block_comment)]
    BlockComment,
    /// `.global`, `.u32`, `.shared::cta`, `.2d`, `.L2::128B`: a directive or modifier.
    #[regex(r"\.[A-Za-z0-9_$]+(::[A-Za-z0-9_$]+)*")]
    Dot,
    /// `foo`, `%r1`, `$L__BB0_1`, `_`, `%tid`.
    #[regex(r"[A-Za-z][A-Za-z0-9_$]*|[_$%][A-Za-z0-9_$]*")]
    Ident,
    /// Decimal, hex, octal or binary integer, optionally with the `U` suffix.
    #[regex(r"[0-9]+U?|0[xX][0-9a-fA-F]+U?|0[bB][01]+U?")]
    Int,
    /// `0f3F800000`
    #[regex(r"0[fF][0-9a-fA-F]{8}")]
    HexF32,
    /// `0d3FF0000000000000`
    #[regex(r"0[dD][0-9a-fA-F]{16}")]
    HexF64,
    /// `1.5`, `1.`, `2e10`, `1.5e-3`
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")]
    DecFloat,
    #[regex(r#""([^"\\\n]|\\.)*""#)]
    Str,
    /// `@@DWARF …` lines of older debug PTX, kept verbatim up to the end of the line.
    #[regex(r"@@DWARF[^\n]*")]
    Dwarf,
    #[token(",")]
    Comma,
    #[token(";")]
    Semi,
    #[token(":")]
    Colon,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("!")]
    Bang,
    #[token("|")]
    Pipe,
    #[token("&")]
    Amp,
    #[token("^")]
    Caret,
    #[token("~")]
    Tilde,
    #[token("@")]
    At,
    #[token("=")]
    Eq,
    /// End of input; never produced by the DFA, used by the parser as a sentinel.
    Eof,
    /// Text that is no token; never produced by the DFA, used by the parser.
    Invalid,
}

impl Token {
    /// How the token is named in "expected …, found …" messages.
    pub fn describe(self) -> &'static str {
        match self {
            Token::BlockComment => "a comment",
            Token::Dot => "a directive or modifier",
            Token::Ident => "an identifier",
            Token::Int => "an integer",
            Token::HexF32 | Token::HexF64 | Token::DecFloat => "a floating-point literal",
            Token::Str => "a string",
            Token::Dwarf => "an @@DWARF line",
            Token::Comma => "`,`",
            Token::Semi => "`;`",
            Token::Colon => "`:`",
            Token::LBrace => "`{`",
            Token::RBrace => "`}`",
            Token::LBracket => "`[`",
            Token::RBracket => "`]`",
            Token::LParen => "`(`",
            Token::RParen => "`)`",
            Token::Lt => "`<`",
            Token::Gt => "`>`",
            Token::Shl => "`<<`",
            Token::Shr => "`>>`",
            Token::Plus => "`+`",
            Token::Minus => "`-`",
            Token::Star => "`*`",
            Token::Slash => "`/`",
            Token::Bang => "`!`",
            Token::Pipe => "`|`",
            Token::Amp => "`&`",
            Token::Caret => "`^`",
            Token::Tilde => "`~`",
            Token::At => "`@`",
            Token::Eq => "`=`",
            Token::Eof => "the end of the file",
            Token::Invalid => "a character that starts no PTX token",
        }
    }
}

fn block_comment(lex: &mut logos::Lexer<Token>) -> logos::FilterResult<(), ()> {
    match lex.remainder().find("*/") {
        Some(i) => {
            lex.bump(i + 2);
            logos::FilterResult::Skip
        }
        None => {
            lex.bump(lex.remainder().len());
            logos::FilterResult::Error(())
        }
    }
}

/// A token and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spanned {
    pub tok: Token,
    pub start: u32,
    pub end: u32,
}

/// A character sequence that is no PTX token (`#`, a stray `'`, an unterminated string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LexError {
    pub start: u32,
    pub end: u32,
}

/// Lexes a whole source. Sources are limited to 4 GiB so spans fit in `u32`.
pub fn lex(src: &str) -> Result<Vec<Spanned>, LexError> {
    // Roughly one token per 4 bytes of nvcc output; reserving avoids regrowth copies.
    let mut out = Vec::with_capacity(src.len() / 4 + 16);
    let mut lexer = Token::lexer(src);
    while let Some(t) = lexer.next() {
        let span = lexer.span();
        match t {
            Ok(tok) => out.push(Spanned { tok, start: span.start as u32, end: span.end as u32 }),
            Err(()) => return Err(LexError { start: span.start as u32, end: span.end as u32 }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Token> {
        lex(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn instruction_tokens() {
        use Token::*;
        assert_eq!(
            kinds("@!%p1 ld.global.nc.v4.f32 {%f1, _}, [%rd2+-16]; // c"),
            vec![
                At, Bang, Ident, Ident, Dot, Dot, Dot, Dot, LBrace, Ident, Comma, Ident, RBrace, Comma, LBracket,
                Ident, Plus, Minus, Int, RBracket, Semi
            ]
        );
    }

    #[test]
    fn literals() {
        use Token::*;
        assert_eq!(
            kinds("0f3F800000 0d3FF0000000000000 0x1fU 017 0b101 42 1.5 2e10"),
            vec![HexF32, HexF64, Int, Int, Int, Int, DecFloat, DecFloat]
        );
    }

    #[test]
    fn scoped_modifiers_and_digits() {
        use Token::*;
        assert_eq!(
            kinds("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"),
            vec![Ident, Dot, Dot, Dot, Dot, Dot, Dot, Dot]
        );
    }

    #[test]
    fn block_comment_spanning_lines_is_skipped() {
        assert_eq!(kinds("a /* x\n * y */ b"), vec![Token::Ident, Token::Ident]);
    }

    #[test]
    fn unterminated_block_comment_is_an_error() {
        assert!(lex("a /* b").is_err());
    }

    #[test]
    fn stray_character_is_an_error_with_its_offset() {
        assert_eq!(lex("add #").unwrap_err(), LexError { start: 4, end: 5 });
    }
}
