//! What the runtime must know of an instrumented module to name the kernel and the source
//! line of an error record: the module's functions in number order and its PTX-line →
//! source-line map. Both are taken from the very text and parsed module the pass
//! instruments ([`crate::instrument_with_meta`]), and travel with the instrumented PTX
//! (the injected library caches them next to it, [`ModuleMeta::to_text`]), so nobody works
//! them out again from another copy of the module, which may not be the PTX instrumented.

use std::fmt;

use gpusan_ptx::ast::{Item, Span, Statement};
use gpusan_ptx::{Items, Module};

/// The first line of [`ModuleMeta::to_text`]: a changed format changes it.
pub const FORMAT: &str = "gpusan-meta 1";

/// One step of the line map: instructions from PTX line `ptx_line` on (up to the next
/// entry's) came from source line `line` of file `file` (an index of
/// [`ModuleMeta::files`]), as the `.loc` before them says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineEntry {
    pub ptx_line: u32,
    pub file: u32,
    pub line: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModuleMeta {
    /// The defined functions in the order of their numbers ([`gpusan_abi::function_order`]):
    /// the function an error record's number names.
    pub functions: Vec<String>,
    /// The module's `.file` table: (index, path), in module order.
    pub files: Vec<(u32, String)>,
    /// The line map, in PTX line order; PTX lines are those of the text instrumented, the
    /// lines error records carry.
    pub lines: Vec<LineEntry>,
}

impl ModuleMeta {
    /// Of `module`, parsed from `src`, before a pass changed it.
    pub fn of_module(module: &Module, src: &str) -> ModuleMeta {
        let mut b = Builder::new(src);
        for item in &module.items {
            b.item(item);
        }
        b.finish()
    }

    /// Of PTX text, read item by item without holding the whole module, up to the first
    /// item that does not parse: for a module gpusan did not instrument itself.
    pub fn of_ptx(src: &str) -> ModuleMeta {
        let mut b = Builder::new(src);
        for item in Items::new(src) {
            let Ok(item) = item else { break };
            b.item(&item);
        }
        b.finish()
    }

    /// Line-based: [`FORMAT`], then `function NAME`, `file INDEX PATH` and `line PTX_LINE
    /// FILE LINE` lines, then `end` (a file cut short has none). Paths escape `\`, newline
    /// and carriage return.
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(64 + 32 * (self.functions.len() + self.lines.len()));
        s.push_str(FORMAT);
        s.push('\n');
        for f in &self.functions {
            s.push_str("function ");
            s.push_str(f);
            s.push('\n');
        }
        for (index, path) in &self.files {
            s.push_str(&format!("file {index} {}\n", escape(path)));
        }
        for e in &self.lines {
            s.push_str(&format!("line {} {} {}\n", e.ptx_line, e.file, e.line));
        }
        s.push_str("end\n");
        s
    }

    /// Reads what [`ModuleMeta::to_text`] wrote; anything else is refused with the line
    /// where it went wrong.
    pub fn from_text(text: &str) -> Result<ModuleMeta, MetaError> {
        let err = |line: usize, message: &str| MetaError { line, message: message.to_string() };
        let cut_short = |line: usize| err(line, "cut short: no end");
        let Some(body) = text.strip_suffix('\n') else { return Err(cut_short(text.split('\n').count())) };
        let mut lines = body.split('\n').enumerate().map(|(i, l)| (i + 1, l));
        if lines.next() != Some((1, FORMAT)) {
            return Err(err(1, "not gpusan module metadata of this version"));
        }
        let mut meta = ModuleMeta::default();
        for (n, l) in lines.by_ref() {
            let (kind, rest) = l.split_once(' ').unwrap_or((l, ""));
            match kind {
                "function" => {
                    if rest.is_empty() || rest.contains(char::is_whitespace) {
                        return Err(err(n, "bad function name"));
                    }
                    meta.functions.push(rest.to_string());
                }
                "file" => {
                    let (index, path) =
                        rest.split_once(' ').ok_or_else(|| err(n, "a file needs an index and a path"))?;
                    let index = index.parse().map_err(|_| err(n, "bad file index"))?;
                    meta.files.push((index, unescape(path).ok_or_else(|| err(n, "bad escape in a path"))?));
                }
                "line" => {
                    let e = line_entry(rest).ok_or_else(|| err(n, "a line needs three numbers"))?;
                    if meta.lines.last().is_some_and(|last| last.ptx_line > e.ptx_line) {
                        return Err(err(n, "line entries out of PTX line order"));
                    }
                    meta.lines.push(e);
                }
                "end" if rest.is_empty() => {
                    return match lines.next() {
                        None => Ok(meta),
                        Some((n, _)) => Err(err(n, "text after the end")),
                    };
                }
                _ => return Err(err(n, "unknown line")),
            }
        }
        Err(cut_short(body.split('\n').count() + 1))
    }
}

fn line_entry(rest: &str) -> Option<LineEntry> {
    let mut n = rest.split(' ').map(str::parse::<u32>);
    let (Some(Ok(ptx_line)), Some(Ok(file)), Some(Ok(line)), None) = (n.next(), n.next(), n.next(), n.next()) else {
        return None;
    };
    Some(LineEntry { ptx_line, file, line })
}

fn escape(path: &str) -> String {
    path.replace('\\', "\\\\").replace('\n', "\\n").replace('\r', "\\r")
}

fn unescape(path: &str) -> Option<String> {
    let mut out = String::with_capacity(path.len());
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => match chars.next()? {
                '\\' => '\\',
                'n' => '\n',
                'r' => '\r',
                _ => return None,
            },
            c => c,
        });
    }
    Some(out)
}

/// Why [`ModuleMeta::from_text`] refused a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaError {
    /// 1-based.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "module metadata, line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for MetaError {}

/// Walks the items in module order. The `.loc` in force carries on across functions, as
/// the text reads: an instruction's source line is that of the last `.loc` before it.
struct Builder<'s> {
    lines: LineCounter<'s>,
    defined: Vec<String>,
    files: Vec<(u32, String)>,
    entries: Vec<LineEntry>,
    /// (file, line) of the last `.loc` seen.
    current: Option<(u32, u32)>,
}

impl<'s> Builder<'s> {
    fn new(src: &'s str) -> Builder<'s> {
        Builder {
            lines: LineCounter { src: src.as_bytes(), at: 0, line: 1 },
            defined: Vec::new(),
            files: Vec::new(),
            entries: Vec::new(),
            current: None,
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::File(f) => self.files.push((f.index, f.path.clone())),
            Item::Function(f) => {
                // The functions the check pass numbers: those with a body.
                if let Some(body) = &f.body {
                    self.defined.push(f.name.to_string());
                    self.statements(body);
                }
            }
            _ => {}
        }
    }

    fn statements(&mut self, body: &[Statement]) {
        for s in body {
            match s {
                Statement::Loc(l) => self.current = Some((l.file, l.line)),
                Statement::Inst(i) => self.instruction(i.span),
                Statement::Block(inner) => self.statements(inner),
                _ => {}
            }
        }
    }

    /// Error records carry the PTX line of an instruction: the map needs an entry only
    /// where the `.loc` in force changes from one instruction to the next.
    fn instruction(&mut self, span: Span) {
        let Some((file, line)) = self.current else { return };
        if span.is_none() || self.entries.last().is_some_and(|e| (e.file, e.line) == (file, line)) {
            return;
        }
        let ptx_line = self.lines.line_of(span.start as usize);
        self.entries.push(LineEntry { ptx_line, file, line });
    }

    fn finish(self) -> ModuleMeta {
        ModuleMeta { functions: gpusan_abi::function_order(self.defined), files: self.files, lines: self.entries }
    }
}

/// 1-based line numbers of offsets met in increasing order, counting each newline once.
struct LineCounter<'s> {
    src: &'s [u8],
    at: usize,
    line: u32,
}

impl LineCounter<'_> {
    fn line_of(&mut self, offset: usize) -> u32 {
        let offset = offset.min(self.src.len());
        if offset < self.at {
            (self.at, self.line) = (0, 1);
        }
        self.line += memchr::memchr_iter(b'\n', &self.src[self.at..offset]).count() as u32;
        self.at = offset;
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two kernels in non-sorted order; `.loc` lines in both; a `.loc` followed by no
    /// instruction before the next one; an inline block.
    const SRC: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\
                       .file 1 \"/src/a.cu\", 1700000000, 12\n.file 2 \"b.h\"\n\
                       .visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\
                       \tld.param.u64 %rd1, [p];\n\t.loc 1 7 3\n\tst.global.u32 [%rd1], 0;\n\
                       \t.loc 2 40 1, function_name $L__info_string0\n\t.loc 1 8 1\n\t{\n\tst.global.u32 [%rd1], 1;\n\t}\n\
                       \tret;\n}\n\
                       .visible .entry alpha(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\
                       \tld.param.u64 %rd1, [p];\n\t.loc 2 3 1\n\tst.global.u32 [%rd1], 2;\n\tret;\n}\n\
                       .extern .func undefined();\n";

    #[test]
    fn functions_in_number_order_lines_from_loc() {
        let m = ModuleMeta::of_module(&gpusan_ptx::parse(SRC).unwrap(), SRC);
        assert_eq!(m.functions, ["alpha", "zeta"], "defined functions only, by name");
        assert_eq!(m.files, [(1, "/src/a.cu".to_string()), (2, "b.h".to_string())]);
        let e = |ptx_line, file, line| LineEntry { ptx_line, file, line };
        // Line 9 (`ld.param` before any `.loc`) has no entry; `.loc 2 40` has no instruction.
        // `alpha`'s `ld.param` (line 22) still runs under zeta's last `.loc`: no new entry.
        assert_eq!(m.lines, [e(11, 1, 7), e(15, 1, 8), e(24, 2, 3)]);
        assert_eq!(ModuleMeta::of_ptx(SRC), m, "the streaming reading agrees");
    }

    #[test]
    fn of_ptx_keeps_what_came_before_a_parse_error() {
        let broken = format!("{SRC}.visible .entry broken(\n");
        let m = ModuleMeta::of_ptx(&broken);
        assert_eq!(m.functions, ["alpha", "zeta"]);
        assert_eq!(m.lines.len(), 3);
    }

    #[test]
    fn the_text_form_round_trips() {
        let mut m = ModuleMeta::of_module(&gpusan_ptx::parse(SRC).unwrap(), SRC);
        m.files.push((3, "C:\\odd\npath\r with spaces".to_string()));
        let text = m.to_text();
        assert!(text.starts_with("gpusan-meta 1\nfunction alpha\nfunction zeta\nfile 1 /src/a.cu\n"), "{text}");
        assert!(text.ends_with("line 24 2 3\nend\n"), "{text}");
        assert_eq!(ModuleMeta::from_text(&text), Ok(m));
        assert_eq!(ModuleMeta::from_text(&ModuleMeta::default().to_text()), Ok(ModuleMeta::default()));
    }

    #[test]
    fn corrupt_text_is_refused_where_it_goes_wrong() {
        let good = ModuleMeta::of_module(&gpusan_ptx::parse(SRC).unwrap(), SRC).to_text();
        let line_of = |text: &str| ModuleMeta::from_text(text).map_err(|e| e.line);
        assert_eq!(line_of(&good.replace("gpusan-meta 1", "gpusan-meta 2")), Err(1), "another version");
        assert_eq!(line_of(""), Err(1));
        assert_eq!(line_of(&good.replace("line 15 1 8", "line 15 x 8")), Err(7));
        assert_eq!(line_of(&good.replace("line 15 1 8", "line 15 1")), Err(7));
        assert_eq!(line_of(&good.replace("line 15 1 8", "line 15 1 8 9")), Err(7));
        assert_eq!(line_of(&good.replace("line 15 1 8", "line 10 1 8")), Err(7), "out of order");
        assert_eq!(line_of(&good.replace("file 2 b.h", "file 2 b\\q.h")), Err(5), "bad escape");
        assert_eq!(line_of(&good.replace("file 2 b.h", "file two b.h")), Err(5));
        assert_eq!(line_of(&good.replace("function zeta", "function")), Err(3));
        assert_eq!(line_of(&good.replace("function zeta", "fn zeta")), Err(3));
        let cut = &good[..good.len() - "end\n".len()];
        assert_eq!(line_of(cut), Err(9), "cut short");
        assert_eq!(line_of(&format!("{good}line 1 1 1\n")), Err(10), "after the end");
        let e = ModuleMeta::from_text(cut).unwrap_err();
        assert_eq!(e.to_string(), "module metadata, line 9: cut short: no end");
    }
}
