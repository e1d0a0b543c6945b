//! Arbitrary bytes → if UTF-8, the logos lexer alone. It must never panic; the tokens
//! it returns must be in order, non-overlapping and on char boundaries, with only
//! whitespace and comments between them; each token's text must lex alone to the same
//! single token; and `lex()` must agree with the raw logos iterator the parser uses.
#![no_main]

use gpusan_ptx::lexer::{lex, Token};
use libfuzzer_sys::fuzz_target;
use logos::Logos;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let result = lex(src);
    if let Ok(tokens) = &result {
        let mut prev = 0usize;
        for t in tokens {
            let (s, e) = (t.start as usize, t.end as usize);
            assert!(prev <= s && s < e && e <= src.len(), "bad span {s}..{e} after {prev}");
            assert!(src.is_char_boundary(s) && src.is_char_boundary(e));
            // Between two tokens there is only whitespace and comments.
            let gap = &src[prev..s];
            assert_eq!(lex(gap).map(|g| g.len()), Ok(0), "gap {gap:?} before {s} holds a token");
            // A token's text alone lexes to that one token.
            let text = &src[s..e];
            let alone = lex(text).unwrap_or_else(|e| panic!("token {text:?} alone does not lex: {e:?}"));
            assert_eq!(alone.len(), 1, "token {text:?} alone lexes to {alone:?}");
            assert_eq!(alone[0].tok, t.tok, "token {text:?} alone lexes to another kind");
            prev = e;
        }
        let tail = &src[prev..];
        assert_eq!(lex(tail).map(|g| g.len()), Ok(0), "tail {tail:?} holds a token");
    }
    // The raw logos iterator (what the parser pulls from) must not panic either and
    // must agree with lex() up to the first error.
    let mut lexer = Token::lexer(src);
    let mut n = 0usize;
    while let Some(t) = lexer.next() {
        let span = lexer.span();
        match (&result, t) {
            (Ok(tokens), Ok(tok)) => {
                let x = tokens[n];
                assert_eq!((x.tok, x.start as usize, x.end as usize), (tok, span.start, span.end));
            }
            (Ok(_), Err(())) => panic!("lex() succeeded but the lexer reported an error at {span:?}"),
            (Err(e), Err(())) => {
                assert_eq!((e.start as usize, e.end as usize), (span.start, span.end), "first error differs");
                break;
            }
            (Err(_), Ok(_)) => {}
        }
        n += 1;
    }
    if let Ok(tokens) = &result {
        assert_eq!(n, tokens.len(), "lex() and the logos iterator disagree on the token count");
    }
});
