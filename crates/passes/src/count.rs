//! `count`: counts executed memory instructions that reach global memory, with one
//! module-level 64-bit counter.
//!
//! The pass exists to prove module substitution end to end — parse, rewrite, print,
//! JIT, run, read a device variable back — with the smallest rewrite that has a visible
//! result, before the checking pass replaces it. It adds
//!
//! ```ptx
//! .visible .global .align 8 .u64 __gpusan_count;
//! ```
//!
//! once per module (zero-initialized, as PTX defines `.global` variables without an
//! initializer) and, before every instruction that [`memory_accesses`] says reaches
//! global or generic memory,
//!
//! ```ptx
//! red.global.add.u64 [__gpusan_count], 1;
//! ```
//!
//! under the same guard as the instruction (`@%p ld…` gets `@%p red…`), so the counter is
//! the number of memory instructions threads executed. One increment per instruction,
//! however many locations it reaches: a copy from global to global counts once.
//!
//! Only `.global` and generic accesses count. Those are what the checking pass will guard
//! (a generic address may point anywhere, global included); `.param`, `.const`,
//! `.local` and `.shared` accesses are either compiler-managed (parameters, spills) or
//! bounded by the hardware window, and counting them would prove nothing more about
//! substitution. Textures, surfaces and tensor maps ([`Space::Tex`]) reach memory
//! through handles, not addresses, and are left alone for the same reason.
//!
//! `.visible` lets the runtime find the counter with `cuModuleGetGlobal`; its name is
//! [`Config::counter_symbol`].

use gpusan_ptx::ast::{Function, Instruction, Item, Linkage, Name, Operand, Span, StateSpace, Statement, VarDecl};
use gpusan_ptx::semantics::{memory_accesses, Space};
use gpusan_ptx::Module;

use crate::{FunctionReport, Pass, PassError, PassReport};

/// The counter's name when the runtime does not choose one; the injected library reads it.
pub const DEFAULT_COUNTER_SYMBOL: &str = gpusan_abi::COUNT_SYMBOL;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The module-level `.u64` the pass adds and increments. It must not be declared
    /// anywhere in the module already.
    pub counter_symbol: String,
}

impl Default for Config {
    fn default() -> Config {
        Config { counter_symbol: DEFAULT_COUNTER_SYMBOL.to_string() }
    }
}

/// The pass as a [`Pass`] object, for [`crate::instrument`].
#[derive(Debug, Clone, Default)]
pub struct Count {
    pub config: Config,
}

impl Count {
    pub fn new(config: Config) -> Count {
        Count { config }
    }
}

impl Pass for Count {
    fn name(&self) -> &'static str {
        "count"
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        run(module, &self.config)
    }
}

/// Adds the counter to `module` and an increment before each counted instruction.
pub fn run(module: &mut Module, config: &Config) -> Result<PassReport, PassError> {
    let symbol = config.counter_symbol.as_str();
    if !is_identifier(symbol) {
        return Err(PassError::new(format!(
            "`{symbol}` is not a PTX identifier and cannot name the counter (count::Config::counter_symbol)"
        )));
    }
    let symbol = Name::from(symbol);
    check_unused(module, symbol)?;

    let increment = Instruction::new(
        "red",
        &["global", "add", "u64"],
        vec![Operand::Address { base: Some(symbol), offset: 0, offset_written: false }, Operand::int(1)],
    );
    let mut report = PassReport::default();
    for item in &mut module.items {
        let Item::Function(f) = item else { continue };
        let Some(body) = &mut f.body else { continue };
        let sites = instrument_body(body, &increment);
        report.functions.push(FunctionReport { name: f.name, kind: f.kind, sites, inserted: sites });
    }

    // After the header: a variable must be declared before the first function using it.
    let at = module
        .items
        .iter()
        .position(|i| !matches!(i, Item::Version { .. } | Item::Target(_) | Item::AddressSize(_)))
        .unwrap_or(module.items.len());
    module.items.insert(at, Item::Var(counter_decl(symbol)));
    Ok(report)
}

/// The instructions the pass counts: those reaching global or generic memory.
pub fn is_counted(inst: &Instruction) -> bool {
    memory_accesses(inst).iter().any(|a| matches!(a.space, Space::Global | Space::Generic))
}

fn counter_decl(symbol: Name) -> VarDecl {
    VarDecl {
        linkage: vec![Linkage::Visible],
        space: StateSpace::Global,
        attributes: Vec::new(),
        align: Some(8),
        vector: None,
        ty: "u64".into(),
        name: symbol,
        count: None,
        array: Vec::new(),
        init: None,
        span: Span::NONE,
    }
}

/// Inserts the increments into one statement list and the `{ }` blocks inside it;
/// returns how many.
fn instrument_body(stmts: &mut Vec<Statement>, increment: &Instruction) -> u32 {
    let mut direct = 0;
    let mut nested = 0;
    for s in stmts.iter_mut() {
        match s {
            Statement::Inst(i) if is_counted(i) => direct += 1,
            Statement::Block(b) => nested += instrument_body(b, increment),
            _ => {}
        }
    }
    if direct == 0 {
        return nested;
    }
    // One rebuild of the list rather than an insert per site: bodies run to tens of
    // thousands of statements.
    let mut out = Vec::with_capacity(stmts.len() + direct as usize);
    for s in stmts.drain(..) {
        if let Statement::Inst(i) = &s {
            if is_counted(i) {
                // The same guard: a predicated-off access executes nothing and is not counted.
                out.push(Statement::Inst(Instruction { guard: i.guard.clone(), ..increment.clone() }));
            }
        }
        out.push(s);
    }
    *stmts = out;
    direct + nested
}

/// Refuses a module that already declares the counter's name anywhere: at module level it
/// would be a duplicate definition, and inside a function (a register, a label, a
/// parameter) it would shadow the counter in the increments placed there.
fn check_unused(module: &Module, symbol: Name) -> Result<(), PassError> {
    let taken = |what: &str| {
        PassError::new(format!(
            "`{symbol}` is already declared ({what}), and it is the name of the counter this pass \
             adds; if this is instrumented PTX, instrument the original instead, otherwise choose \
             another name with count::Config::counter_symbol"
        ))
    };
    for item in &module.items {
        match item {
            Item::Var(v) if v.name == symbol => return Err(taken("a module variable").at(v.span)),
            Item::Alias { alias, .. } if *alias == symbol => return Err(taken("an alias")),
            Item::Function(f) => {
                if f.name == symbol {
                    return Err(taken("a function").at(f.span));
                }
                check_function(f, symbol).map_err(|(what, span)| taken(what).at(span).in_function(f.name))?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_function(f: &Function, symbol: Name) -> Result<(), (&'static str, Span)> {
    let params = f.params.iter().flatten().chain(f.returns.iter().flatten());
    if params.into_iter().any(|p| p.name == symbol) {
        return Err(("a parameter", f.span));
    }
    fn walk(stmts: &[Statement], symbol: Name) -> Result<(), (&'static str, Span)> {
        for s in stmts {
            match s {
                // `%x<N>` declares `%x0…`, never the bare prefix, but a counter named like
                // one of them would still be shadowed.
                Statement::Decl(d) if d.name == symbol || in_range(d, symbol) => {
                    return Err(("a declaration in a function body", d.span))
                }
                Statement::Label(l, span) if *l == symbol => return Err(("a label", *span)),
                Statement::BranchTargets { label, span, .. }
                | Statement::CallTargets { label, span, .. }
                | Statement::CallPrototype { label, span, .. }
                    if *label == symbol =>
                {
                    return Err(("a label", *span))
                }
                Statement::Block(b) => walk(b, symbol)?,
                _ => {}
            }
        }
        Ok(())
    }
    walk(f.body.as_deref().unwrap_or_default(), symbol)
}

fn in_range(d: &VarDecl, name: Name) -> bool {
    let Some(count) = d.count else { return false };
    let Some(rest) = name.as_str().strip_prefix(d.name.as_str()) else { return false };
    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) && rest.parse::<u64>().is_ok_and(|n| n < count as u64)
}

/// PTX identifiers: `[a-zA-Z][a-zA-Z0-9_$]*` or `[_$%][a-zA-Z0-9_$]+`.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let rest_ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => chars.all(rest_ok),
        Some('_' | '$' | '%') => {
            let rest = chars.as_str();
            !rest.is_empty() && rest.chars().all(rest_ok)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert!(is_identifier("__gpusan_count"));
        assert!(is_identifier("c$1"));
        assert!(!is_identifier("_"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("1abc"));
        assert!(!is_identifier("a.b"));
        assert!(!is_identifier("a b"));
    }

    #[test]
    fn invalid_symbol_is_refused() {
        let mut m = gpusan_ptx::parse(".version 9.0\n.target sm_90\n.address_size 64\n").unwrap();
        let e = run(&mut m, &Config { counter_symbol: "no good".into() }).unwrap_err();
        assert!(e.message.contains("not a PTX identifier"), "{e}");
    }
}
