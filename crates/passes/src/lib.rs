//! gpusan's instrumentation passes over the PTX syntax tree of `gpusan-ptx`, and the
//! verifier that runs around every one of them.
//!
//! A pass rewrites a parsed [`Module`] in place ([`Pass::run`]) and says what it did
//! ([`PassReport`]). [`instrument`] is the whole job from text to text: parse, verify the
//! input, run the pass, verify its output, print. The input is verified too so a broken
//! module is blamed on whoever produced it, not on the pass; and because the output is
//! verified before anything reaches ptxas or the driver, a pass bug shows up as a located
//! message here instead of as a JIT failure inside the user's process.
//!
//! ```
//! let src = ".version 9.0\n.target sm_90\n.address_size 64\n\
//!            .visible .entry k(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\
//!            \tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 0;\n\tret;\n}\n";
//! let out = gpusan_passes::instrument(src, &gpusan_passes::count::Count::default()).unwrap();
//! assert!(out.ptx.contains("red.global.add.u64 \t[__gpusan_count], 1;"));
//! assert_eq!(out.report.functions[0].sites, 1);
//! ```
//!
//! Passes, one module each (ZLUDA's layout): [`count`], [`check`], [`canary_heap`],
//! [`fence`]. The verifier: [`mod@verify`].
//! What the runtime needs to know of an instrumented module, taken from the text
//! instrumented ([`instrument_with_meta`]): [`meta`].

use std::fmt;

use gpusan_ptx::ast::{FunctionKind, Name, Span};
use gpusan_ptx::{Module, ParseError};

pub mod canary_heap;
pub mod check;
pub mod count;
pub mod fence;
#[doc(hidden)]
pub mod fuzz;
pub mod meta;
pub mod unchecked;
pub mod verify;

pub use verify::{verify, VerifierError, VerifierErrors};

/// A transformation of a whole module.
///
/// Passes take the module rather than one function because what they add is module-wide
/// (a counter, a metadata table, a new parameter on every kernel) and must be added once.
pub trait Pass {
    /// Short name for reports and errors: `count`.
    fn name(&self) -> &'static str;

    /// Rewrites `module` in place. On error the module may be half rewritten; callers
    /// drop it (the original text is still theirs).
    fn run(&self, module: &mut Module) -> Result<PassReport, PassError>;

    /// [`Pass::run`] knowing the text `module` was parsed from, for passes that record
    /// source positions in what they emit (`check` writes each access's PTX line into its
    /// error records). [`instrument`] calls this.
    fn run_with_source(&self, module: &mut Module, src: &str) -> Result<PassReport, PassError> {
        let _ = src;
        self.run(module)
    }
}

/// What a pass did, function by function, in module order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PassReport {
    pub functions: Vec<FunctionReport>,
}

impl PassReport {
    /// Instrumented sites over all functions.
    pub fn total_sites(&self) -> u64 {
        self.functions.iter().map(|f| f.sites as u64).sum()
    }

    /// Instructions added over all functions.
    pub fn total_inserted(&self) -> u64 {
        self.functions.iter().map(|f| f.inserted as u64).sum()
    }

    pub fn function(&self, name: &str) -> Option<&FunctionReport> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// One function with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionReport {
    pub name: Name,
    pub kind: FunctionKind,
    /// Instructions the pass instrumented (for `count`: memory instructions counted).
    pub sites: u32,
    /// Instructions the pass added.
    pub inserted: u32,
}

/// Why a pass refused a module. Passes fail only on modules they cannot instrument
/// soundly (a name they need is taken, a configuration is invalid); anything else is a
/// bug the verifier catches.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PassError {
    pub message: String,
    /// Where in the source the problem is; [`Span::NONE`] when nowhere in particular.
    pub span: Span,
    /// The function concerned, if one is.
    pub function: Option<Name>,
}

impl PassError {
    pub fn new(message: impl Into<String>) -> PassError {
        PassError { message: message.into(), span: Span::NONE, function: None }
    }

    pub fn at(mut self, span: Span) -> PassError {
        self.span = span;
        self
    }

    pub fn in_function(mut self, function: Name) -> PassError {
        self.function = Some(function);
        self
    }
}

/// A 1-based line and column in the instrumented source, as the parser reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub path: Option<String>,
    pub line: u32,
    pub column: u32,
}

impl Location {
    /// Where `span` starts in `src`; `None` for nodes a pass created.
    pub fn of(src: &str, span: Span) -> Option<Location> {
        if span.is_none() || span.start as usize > src.len() {
            return None;
        }
        let start = span.start as usize;
        // A span from another text than `src` must give no location, not a panic: the
        // runtime calls this inside the user's process.
        if !src.is_char_boundary(start) {
            return None;
        }
        let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let line = src.as_bytes()[..line_start].iter().filter(|&&b| b == b'\n').count() as u32 + 1;
        let column = src.get(line_start..start).map_or(0, |s| s.chars().count()) as u32 + 1;
        Some(Location { path: None, line, column })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.path.as_deref().unwrap_or("<input>"), self.line, self.column)
    }
}

/// One located message of a failed pass or verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `None` when the node has no source position (a pass created it).
    pub location: Option<Location>,
    pub function: Option<Name>,
    /// The instruction concerned, printed, when there is one: the only way to find a node
    /// a pass created.
    pub context: Option<String>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.location, &self.context) {
            (Some(l), _) => write!(f, "{l}: ")?,
            // An instruction without a source position is one a pass created.
            (None, Some(_)) => f.write_str("<inserted>: ")?,
            (None, None) => {}
        }
        if let Some(func) = &self.function {
            write!(f, "in `{func}`: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(c) = &self.context {
            write!(f, "\n    | {c}")?;
        }
        Ok(())
    }
}

/// What stage a verification failed after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The module as parsed, before any pass.
    Input,
    /// The output of the named pass.
    After(&'static str),
}

/// Why [`instrument`] produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Parse(#[from] ParseError),
    #[error("pass `{pass}` cannot instrument this module: {diagnostic}")]
    Pass { pass: &'static str, diagnostic: Diagnostic },
    #[error("{}", verify_message(*stage, diagnostics))]
    Verify { stage: Stage, diagnostics: Vec<Diagnostic> },
}

fn verify_message(stage: Stage, diagnostics: &[Diagnostic]) -> String {
    let n = diagnostics.len();
    let mut s = match stage {
        Stage::Input => format!("the input is not valid PTX ({n} error{})", plural(n)),
        Stage::After(p) => {
            format!("pass `{p}` produced invalid PTX ({n} error{}); this is a bug in the pass", plural(n))
        }
    };
    for d in diagnostics {
        s.push('\n');
        s.push_str(&d.to_string());
    }
    s
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl Error {
    /// Names the file every location is in.
    pub fn with_path(self, path: impl Into<String>) -> Error {
        let path = path.into();
        let set = |d: &mut Diagnostic| {
            if let Some(l) = &mut d.location {
                l.path = Some(path.clone());
            }
        };
        match self {
            Error::Parse(e) => Error::Parse(e.with_path(path)),
            Error::Pass { pass, mut diagnostic } => {
                set(&mut diagnostic);
                Error::Pass { pass, diagnostic }
            }
            Error::Verify { stage, mut diagnostics } => {
                diagnostics.iter_mut().for_each(set);
                Error::Verify { stage, diagnostics }
            }
        }
    }

    fn pass(src: &str, pass: &'static str, e: PassError) -> Error {
        let diagnostic =
            Diagnostic { location: Location::of(src, e.span), function: e.function, context: None, message: e.message };
        Error::Pass { pass, diagnostic }
    }

    fn verify(src: &str, stage: Stage, errors: VerifierErrors) -> Error {
        let diagnostics = errors
            .0
            .into_iter()
            .map(|e| Diagnostic {
                location: Location::of(src, e.span),
                function: e.function,
                context: e.context,
                message: e.kind.to_string(),
            })
            .collect();
        Error::Verify { stage, diagnostics }
    }
}

/// An instrumented module and what the pass did to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instrumented {
    pub ptx: String,
    pub report: PassReport,
}

/// Parses `src`, verifies it, runs `pass`, verifies the result and prints it.
pub fn instrument(src: &str, pass: &dyn Pass) -> Result<Instrumented, Error> {
    let (module, report) = instrument_tree(src, pass)?;
    Ok(Instrumented { ptx: gpusan_ptx::print(&module), report })
}

/// [`instrument`] up to the verified tree, not printed: for a caller that prints it
/// itself, or that exits right after and need not free it node by node (`gpusan
/// instrument`: freeing an instrumented module's millions of nodes takes about a tenth of
/// its instrumentation).
pub fn instrument_tree(src: &str, pass: &dyn Pass) -> Result<(Module, PassReport), Error> {
    let mut module = parse_verified(src)?;
    let report = run_verified(src, &mut module, pass)?;
    Ok((module, report))
}

/// [`instrument`], with the module's metadata ([`meta::ModuleMeta`]: its functions'
/// numbers and its line map), taken from the same text and parsed module the pass
/// instruments, before the pass changes it.
pub fn instrument_with_meta(src: &str, pass: &dyn Pass) -> Result<(Instrumented, meta::ModuleMeta), Error> {
    let mut module = parse_verified(src)?;
    let meta = meta::ModuleMeta::of_module(&module, src);
    let report = run_verified(src, &mut module, pass)?;
    Ok((Instrumented { ptx: gpusan_ptx::print(&module), report }, meta))
}

fn parse_verified(src: &str) -> Result<Module, Error> {
    let module = gpusan_ptx::parse(src)?;
    verify(&module).map_err(|e| Error::verify(src, Stage::Input, e))?;
    Ok(module)
}

fn run_verified(src: &str, module: &mut Module, pass: &dyn Pass) -> Result<PassReport, Error> {
    let report = pass.run_with_source(module, src).map_err(|e| Error::pass(src, pass.name(), e))?;
    verify(module).map_err(|e| Error::verify(src, Stage::After(pass.name()), e))?;
    Ok(report)
}

/// The names [`pass_by_name`] knows.
pub const PASSES: &[&str] = &["count", "check"];

/// A pass with its default configuration, by the name it reports (`count`), for command
/// lines.
pub fn pass_by_name(name: &str) -> Option<Box<dyn Pass>> {
    match name {
        "count" => Some(Box::new(count::Count::default())),
        "check" => Some(Box::new(check::Check)),
        "canary_heap" => Some(Box::new(canary_heap::CanaryHeap)),
        "fence" => Some(Box::new(fence::Fence)),
        _ => None,
    }
}

/// [`pass_by_name`], with the check pass bounding local memory as `local_bounds` says (the
/// other passes have no such choice).
pub fn pass_with_local_bounds(name: &str, local_bounds: check::LocalBounds) -> Option<Box<dyn Pass>> {
    match name {
        "check" => Some(Box::new(check::CheckWith(check::CheckConfig { local_bounds, ..Default::default() }))),
        _ => pass_by_name(name),
    }
}

/// Separate compilation (`nvcc -rdc`, `ptxas -c`, the driver's linker) puts every translation unit's ABI
/// variables into one linked module: declared `.weak`, nvlink keeps one of each instead of
/// refusing the duplicates, and the runtime still finds them by name.
pub fn weak_abi(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    for line in ptx.split_inclusive('\n') {
        let decl = line.trim_end();
        let abi = gpusan_abi::RUNTIME_VARS.iter().map(|v| v.name).any(|n| {
            decl.strip_suffix(';')
                .is_some_and(|d| d.ends_with(n) && d[..d.len() - n.len()].ends_with(char::is_whitespace))
        });
        let space = [".global ", ".const "].into_iter().find(|s| line.starts_with(&format!(".visible {s}")));
        match space {
            Some(space) if abi => {
                out.push_str(".weak ");
                out.push_str(space);
                out.push_str(&line[".visible ".len() + space.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Whether `src` declares the device ABI's error buffer: it was instrumented already (by
/// gpusan's `ptxas` stand-in, or handed out instrumented by one of gpusan's doors), and a
/// second pass would refuse its names.
pub fn declares_abi(src: &str) -> bool {
    let name = gpusan_abi::ERRORS_SYMBOL;
    src.contains(name)
        && gpusan_ptx::Items::new(src)
            .any(|i| matches!(i, Ok(gpusan_ptx::ast::Item::Var(v)) if v.name.as_str() == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry k(.param .u64 p)\n{\n\
                       \t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 0;\n\tret;\n}\n";

    #[test]
    fn count_uses_its_counter_name_and_refuses_its_own_output() {
        let pass = count::Count::new(count::Config { counter_symbol: "__rt_n".into() });
        let ptx = instrument(SRC, &pass).unwrap().ptx;
        assert!(ptx.contains(".visible .global .align 8 .u64 \t__rt_n;\n"), "{ptx}");
        assert!(ptx.contains("\tred.global.add.u64 \t[__rt_n], 1;\n\tst.global.u32"), "{ptx}");
        // Instrumented output is refused, not instrumented twice.
        let e = instrument(&ptx, &pass).unwrap_err();
        assert!(matches!(e, Error::Pass { pass: "count", .. }), "{e}");
    }

    #[test]
    fn passes_by_name() {
        for name in PASSES {
            assert_eq!(pass_by_name(name).unwrap().name(), *name);
        }
        assert!(pass_by_name("nope").is_none());
    }

    #[test]
    fn locations() {
        let l = Location::of("ab\ncd", Span::new(4, 5)).unwrap();
        assert_eq!((l.line, l.column), (2, 2));
        assert_eq!(l.to_string(), "<input>:2:2");
        assert_eq!(Location::of("ab", Span::NONE), None);
        assert_eq!(Location::of("ab", Span::new(9, 10)), None);
        assert_eq!(Location::of("é", Span::new(1, 2)), None);
    }
}
