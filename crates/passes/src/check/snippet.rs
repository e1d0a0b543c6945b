//! PTX text the check pass writes, turned into statements: the pass writes its code as
//! text (it reads like the PTX it becomes), but a module gets hundreds of thousands of
//! lines of it, and nearly all are repeats (`setp.eq.u64 %__gs_q, %__gs_t, 0;` once per
//! root, `$__gs_L3:` once per function). Each distinct line is parsed once per module and
//! its statements cloned after that; only the new lines of a snippet go to the parser, all
//! in one call.
//!
//! The result is exactly what parsing the whole text gives (the unit tests compare the
//! two on every kind of snippet the pass writes): a line is cached only when the
//! statements parsed from it lie within it, so a statement that depends on its neighbours
//! (a label whose `.branchtargets` is on the next line, a `{ }` block over several lines)
//! sends the whole text to the parser, as do comments that could span lines.
//!
//! The longest code the pass writes, an error record's writer (some 40 lines for every
//! checked access), is a [`Template`] instead: parsed once with holes where its per-access
//! labels and numbers go, then cloned and filled. Even cached, writing those lines as text
//! and looking each up again was most of the pass's time.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use gpusan_ptx::ast::{Span, Statement};

/// Lines kept while a module is instrumented: a module's distinct lines that repeat are a
/// few thousand; lines seen once (an access's source line number) fill the rest, and past
/// this the cache stops growing rather than holding them all in the program's memory.
const MAX_LINES: usize = 1 << 16;

/// Lines kept from one module to the next (a program loads many small modules, whose code
/// is mostly the same lines): a cache larger than this (well under a megabyte) is dropped
/// when its module is done instead.
const KEPT_LINES: usize = 4096;

/// Statements by the line of text that gives them, spans cleared. The keys are the pass's
/// own text, so a fast unkeyed hash is safe.
#[derive(Default)]
pub(super) struct Cache {
    lines: HashMap<Box<str>, Vec<Statement>, BuildHasherDefault<ahash::AHasher>>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// [`Cache::parse`] with this thread's cache.
pub(super) fn parse(text: &str) -> Vec<Statement> {
    // About a statement for every 32 bytes of the pass's text: room for them at once.
    let mut out = Vec::with_capacity(text.len() / 32 + 1);
    parse_into(text, &mut out);
    out
}

/// [`Cache::parse_into`] with this thread's cache.
pub(super) fn parse_into(text: &str, out: &mut Vec<Statement>) {
    CACHE.with(|c| c.borrow_mut().parse_into(text, out))
}

/// [`Cache::end_module`] of this thread's cache: the pass calls it when a module is done.
pub(super) fn end_module() {
    CACHE.with(|c| c.borrow_mut().end_module());
}

impl Cache {
    /// Keeps the lines for the next module if they are few, so a long-lived process (the
    /// injected runtime) never holds more than [`KEPT_LINES`] after a large module.
    pub(super) fn end_module(&mut self) {
        if self.lines.len() > KEPT_LINES {
            *self = Cache::default();
        }
    }

    /// Statements from PTX text, with the spans of nodes a pass creates.
    #[cfg(test)]
    fn parse(&mut self, text: &str) -> Vec<Statement> {
        let mut out = Vec::new();
        self.parse_into(text, &mut out);
        out
    }

    /// The statements of PTX text, with the spans of nodes a pass creates, pushed onto
    /// `out`: into the list they go to, rather than through a vector of their own.
    pub(super) fn parse_into(&mut self, text: &str, out: &mut Vec<Statement>) {
        if memchr::memmem::find(text.as_bytes(), b"/*").is_some() {
            out.extend(parse_uncached(text));
            return;
        }
        // Most snippets are lines seen before: cloned as they are looked up, with nothing
        // planned or collected, until a line is new (then the general way below, from the
        // start, with what was pushed taken back).
        let start = out.len();
        let mut all_known = true;
        for line in lines(text) {
            match self.lines.get(line) {
                Some(stmts) => out.extend(stmts.iter().cloned()),
                None => {
                    all_known = false;
                    break;
                }
            }
        }
        if all_known {
            return;
        }
        out.truncate(start);
        // Each line: its cached statements, or `None` for one of the `fresh` lines, parsed
        // below all at once.
        let mut fresh = String::new();
        // The pass writes lines of 20 to 60 bytes.
        let mut plan: Vec<(&str, Option<&Vec<Statement>>)> = Vec::with_capacity(text.len() / 16 + 1);
        for line in lines(text) {
            let known = self.lines.get(line);
            if known.is_none() {
                fresh.push_str(line);
                fresh.push('\n');
            }
            plan.push((line, known));
        }
        let mut parsed = Vec::new();
        if !fresh.is_empty() {
            let Some(by_line) = parse_by_line(&fresh) else {
                out.extend(parse_uncached(text));
                return;
            };
            parsed = by_line;
        }
        let mut new_lines = Vec::with_capacity(parsed.len());
        let mut parsed = parsed.into_iter();
        for (line, known) in plan {
            match known {
                Some(stmts) => out.extend(stmts.iter().cloned()),
                None => {
                    let stmts = parsed.next().expect("one parsed entry per fresh line");
                    out.extend(stmts.iter().cloned());
                    new_lines.push((line, stmts));
                }
            }
        }
        for (line, stmts) in new_lines {
            if self.lines.len() >= MAX_LINES {
                break;
            }
            self.lines.insert(line.into(), stmts);
        }
    }
}

/// The lines of `text` without their `\n`, as `text.split_terminator('\n')` gives them:
/// found with `memchr`, since the generic string splitter cost more than looking a line
/// up in the cache.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (line, next) = match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        rest = next;
        Some(line)
    })
}

/// The statements of each line of `text` (every line ends with `\n`), spans cleared; `None`
/// when the text does not parse or a statement is not within one line.
fn parse_by_line(text: &str) -> Option<Vec<Vec<Statement>>> {
    let stmts = gpusan_ptx::parser::parse_statements(text).ok()?;
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    // `starts` has one entry past the last line (the text ends with a newline).
    let mut lines: Vec<Vec<Statement>> = vec![Vec::new(); starts.len() - 1];
    for mut s in stmts {
        let span = span_mut(&mut s)?;
        let line = starts.partition_point(|&st| st <= span.start as usize) - 1;
        if span.end as usize >= starts[line + 1] {
            return None;
        }
        *span = Span::NONE;
        lines[line].push(s);
    }
    Some(lines)
}

/// Where a statement was in its text, for the statements whose span [`parse_uncached`]
/// clears; `None` for the others, which keep theirs there and so go to it.
fn span_mut(s: &mut Statement) -> Option<&mut Span> {
    match s {
        Statement::Inst(i) => Some(&mut i.span),
        Statement::Label(_, span) => Some(span),
        Statement::Decl(d) => Some(&mut d.span),
        _ => None,
    }
}

/// The whole text through the parser, as one function body.
fn parse_uncached(text: &str) -> Vec<Statement> {
    let src = format!(".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry __gs_snippet()\n{{\n{text}}}\n");
    let module = gpusan_ptx::parse(&src).expect("the check pass's own PTX parses");
    let Some(gpusan_ptx::ast::Item::Function(f)) =
        module.items.into_iter().find(|i| matches!(i, gpusan_ptx::ast::Item::Function(_)))
    else {
        unreachable!("the snippet is one function")
    };
    let mut body = f.body.unwrap_or_default();
    for s in &mut body {
        match s {
            Statement::Inst(i) => i.span = Span::NONE,
            Statement::Label(_, span) => *span = Span::NONE,
            Statement::Decl(d) => d.span = Span::NONE,
            _ => {}
        }
    }
    body
}

/// The name a template's text has where its value number `i` goes: an identifier, so it
/// parses as a whole operand or a label wherever the value will be.
const HOLE: &str = "__gs_hole";

/// PTX text parsed once, with holes for the parts that change from one use to the next
/// (labels, numbers), filled by [`Template::fill_into`]: what parsing the text with the
/// values written in gives (the unit tests compare the two), without writing or reading it.
///
/// A hole is written `__gs_hole0`, `__gs_hole1`, … and must be a whole operand or a label.
pub(super) struct Template {
    stmts: Vec<Statement>,
    holes: Vec<Hole>,
}

/// Where a value goes: statement `stmt`'s label, or its operand `operand`.
struct Hole {
    stmt: usize,
    operand: Option<usize>,
    value: usize,
}

impl Template {
    pub(super) fn new(text: &str) -> Template {
        let stmts = parse_uncached(text);
        let hole_of = |n: &str| n.strip_prefix(HOLE).map(|i| i.parse::<usize>().expect("a hole is numbered"));
        let mut holes = Vec::new();
        for (stmt, s) in stmts.iter().enumerate() {
            match s {
                Statement::Label(n, _) => {
                    holes.extend(hole_of(n).map(|value| Hole { stmt, operand: None, value }));
                }
                Statement::Inst(i) => {
                    for (o, op) in i.operands.iter().enumerate() {
                        if let gpusan_ptx::ast::Operand::Name(n) = op {
                            holes.extend(hole_of(n).map(|value| Hole { stmt, operand: Some(o), value }));
                        }
                    }
                }
                _ => {}
            }
        }
        assert_eq!(holes.len(), text.matches(HOLE).count(), "every hole is a whole operand or a label:\n{text}");
        Template { stmts, holes }
    }

    /// The number of statements [`Template::fill_into`] writes.
    pub(super) fn len(&self) -> usize {
        self.stmts.len()
    }

    /// The statements with `values[i]` for hole `i`, pushed onto `out`. A value for a label
    /// must be a name.
    pub(super) fn fill_into(&self, values: &[gpusan_ptx::ast::Operand], out: &mut Vec<Statement>) {
        let start = out.len();
        out.extend(self.stmts.iter().cloned());
        for h in &self.holes {
            match (&mut out[start + h.stmt], h.operand) {
                (Statement::Label(n, _), None) => {
                    let gpusan_ptx::ast::Operand::Name(v) = &values[h.value] else {
                        panic!("a label's value is a name")
                    };
                    *n = *v;
                }
                (Statement::Inst(i), Some(o)) => i.operands[o] = values[h.value].clone(),
                _ => unreachable!("holes are found in labels and operands"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snippet from the cache, first with nothing cached, then with every line cached,
    /// then with some: all three are what the parser gives for the whole text.
    fn same_as_parser(text: &str) {
        let whole = parse_uncached(text);
        let mut cache = Cache::default();
        assert_eq!(cache.parse(text), whole, "fresh cache:\n{text}");
        assert_eq!(cache.parse(text), whole, "every line cached:\n{text}");
        let mut half = Cache::default();
        for (i, line) in text.lines().enumerate() {
            if i % 2 == 0 {
                half.parse(&format!("{line}\n"));
            }
        }
        assert_eq!(half.parse(text), whole, "half the lines cached:\n{text}");
    }

    #[test]
    fn snippets_parse_without_spans() {
        let s = parse("\tmov.pred %__gs_q, 0;\n$__gs_L0:\n");
        assert_eq!(s.len(), 2);
        assert!(matches!(&s[0], Statement::Inst(i) if i.span.is_none()));
    }

    #[test]
    fn cached_lines_parse_as_the_whole_text() {
        same_as_parser("\tmov.pred %__gs_q, 0;\n$__gs_L0:\n\t@!%__gs_q bra $__gs_L0;\n");
        same_as_parser("\t.reg .b64 %__gs_t;\n\t.reg .b32 %__gs_i<4>;\n\t.shared .align 16 .b8 __gs_meta[96];\n");
        same_as_parser("\tld.global.v2.u64 {%__gs_base0, %__gs_sz}, [%__gs_x+-32];\n\tmembar.sys;\n\ttrap;\n");
        // Two statements on one line, and a line without a newline at the end.
        same_as_parser("\tmov.u32 %__gs_k, %tid.x; mov.u32 %__gs_c, %tid.y;\n\tret;");
    }

    #[test]
    fn the_pass_snippets_parse_as_the_whole_text() {
        let mut n = 0;
        let mut label = || {
            n += 1;
            format!("$__gs_L{n}")
        };
        same_as_parser(&super::super::loadmeta::loadmeta(3, "%rd7", super::super::plan::Layout::Folded, &mut label));
        same_as_parser(&super::super::loadmeta::loadmeta(3, "%rd7", super::super::plan::Layout::Heap, &mut label));
        same_as_parser(&super::super::block::fetch_block_meta(2, 1));
        same_as_parser(super::super::records::record_where());
    }

    #[test]
    fn text_spanning_lines_is_parsed_whole() {
        // A label whose `.branchtargets` follows on the next line, a block over several
        // lines, a comment over two lines: not line by line, yet the same statements.
        for text in [
            "$__gs_T:\n.branchtargets $__gs_A, $__gs_B;\n$__gs_A:\n$__gs_B:\n",
            "{\n\t.reg .b32 %__gs_i;\n\tmov.u32 %__gs_i, 0;\n}\n",
            "\tmov.u32 %__gs_i, 0; /* one\n two */\n\tret;\n",
        ] {
            let mut cache = Cache::default();
            assert_eq!(cache.parse(text), parse_uncached(text), "{text}");
        }
        // The two-line statement is not cached as two one-line ones.
        let mut cache = Cache::default();
        cache.parse("$__gs_T:\n.branchtargets $__gs_A, $__gs_B;\n$__gs_A:\n$__gs_B:\n");
        assert!(!cache.lines.contains_key("$__gs_T:"));
    }

    #[test]
    fn a_small_cache_is_kept_for_the_next_module_and_a_large_one_dropped() {
        let mut cache = Cache::default();
        cache.parse("\tsetp.eq.u64 %__gs_q, %__gs_t, 0;\n");
        cache.end_module();
        assert_eq!(cache.lines.len(), 1);
        let text: String = (0..=KEPT_LINES).map(|i| format!("\tst.global.u32 [%__gs_r+44], {i};\n")).collect();
        cache.parse(&text);
        assert_eq!(cache.lines.len(), KEPT_LINES + 2);
        cache.end_module();
        assert!(cache.lines.is_empty());
    }

    #[test]
    fn repeated_lines_are_parsed_once() {
        let mut cache = Cache::default();
        cache.parse("\tsetp.eq.u64 %__gs_q, %__gs_t, 0;\n\tst.global.u32 [%__gs_r+44], 17;\n");
        assert_eq!(cache.lines.len(), 2);
        cache.parse("\tsetp.eq.u64 %__gs_q, %__gs_t, 0;\n\tst.global.u32 [%__gs_r+44], 18;\n");
        assert_eq!(cache.lines.len(), 3);
        assert!(cache.lines.contains_key("\tsetp.eq.u64 %__gs_q, %__gs_t, 0;"));
    }

    /// A template filled is the text with the values written in, parsed.
    #[test]
    fn a_filled_template_is_the_text_with_its_values() {
        use gpusan_ptx::ast::Operand;
        let text = "\t@!%__gs_bad bra __gs_hole0;\n\tor.b32 %__gs_k, %__gs_k, __gs_hole1;\n\tst.global.u32 [%__gs_r+44], __gs_hole2;\n__gs_hole0:\n";
        let t = Template::new(text);
        for (label, a, b) in [("$__gs_L3", 0u64, 17u64), ("$__gs_L12", 65535, 4_000_000_000)] {
            let mut got = vec![Statement::Label("before".into(), Span::NONE)];
            let values = [
                Operand::Name(label.into()),
                Operand::Int(gpusan_ptx::ast::IntLit::dec(a)),
                Operand::Int(gpusan_ptx::ast::IntLit::dec(b)),
            ];
            t.fill_into(&values, &mut got);
            let written = text
                .replace("__gs_hole0", label)
                .replace("__gs_hole1", &a.to_string())
                .replace("__gs_hole2", &b.to_string());
            let mut want = vec![Statement::Label("before".into(), Span::NONE)];
            want.extend(parse_uncached(&written));
            assert_eq!(got, want);
        }
    }

    #[test]
    #[should_panic(expected = "whole operand")]
    fn a_hole_inside_an_operand_is_refused() {
        Template::new("\tst.global.u32 [__gs_hole0+4], 1;\n");
    }

    #[test]
    fn lines_are_split_terminator() {
        for text in ["", "\n", "a", "a\n", "a\nb", "a\n\nb\n", "\n\na\n\n", "\ta;\n\tb;\n"] {
            assert_eq!(lines(text).collect::<Vec<_>>(), text.split_terminator('\n').collect::<Vec<_>>(), "{text:?}");
        }
    }
}
