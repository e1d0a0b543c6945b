//! The verifier: checks a module for the mistakes a pass can make before ptxas or the
//! driver sees it, and reports every one it finds rather than the first (Cranelift's
//! verifier does the same: one run shows the whole extent of a pass bug).
//!
//! It checks what ptxas would reject with a less helpful message, or what the driver
//! would reject inside the user's process:
//!
//! - every name an instruction uses is declared before it, in its `{ }` scope or an
//!   enclosing one: registers (`%r<N>` declares `%r0 … %r{N-1}`), body variables,
//!   parameters, module variables and functions; labels may be used before they are
//!   defined, as in PTX;
//! - no name is declared twice in one scope (parameters share the body's scope, labels
//!   share the names of registers, as ptxas has it);
//! - every `bra`, `brx.idx` and `.branchtargets` names a label (or table) in scope, all of
//!   them reported, as [`gpusan_ptx::cfg`] words it; each body is then checked as the
//!   control-flow graph would be built ([`Cfg::check`]: the graph itself is not needed),
//!   and whatever else it rejects is reported too (it stops at its first error, which is
//!   why the labels are resolved here as well);
//! - every register operand of an instruction whose type rules it knows is declared with
//!   a type and width that instruction takes, and predicates stand exactly where predicates
//!   are wanted (`verify/types.rs`, the PTX ISA's operand type-checking rules);
//! - `.version` is at most [`MAX_VERSION`].
//!
//! A name that is undeclared is reported once per function, at its first use: a pass
//! that forgets a declaration forgets it at every site, and one line says so.

use std::fmt;

use gpusan_ptx::ast::{
    Function, Initializer, Instruction, Item, Linkage, Name, NameMap, NameSet, Operand, Span, Statement, VarDecl,
};
use gpusan_ptx::cfg::{Cfg, CfgError};
use gpusan_ptx::printer::Ptx;
use gpusan_ptx::Module;

mod types;

pub use types::{Mismatch, Place};
use types::{Rules, TypeError, Typed};

/// The newest PTX ISA the GPU machine's driver (580, CUDA 13.0) JIT-compiles. A module
/// declaring a newer one would load nowhere we run.
pub const MAX_VERSION: (u32, u32) = (9, 0);

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("register `{0}` is not declared")]
    UndeclaredRegister(Name),
    #[error("`{0}` is not a declared register, variable, parameter, function or label")]
    UndefinedSymbol(Name),
    #[error("`{0}` is used before its declaration, or outside the `{{ }}` that declares it")]
    UsedBeforeDeclaration(Name),
    /// The name as declared: `%r<4>` for a range.
    #[error("`{0}` is declared twice in one scope")]
    DuplicateDeclaration(String),
    #[error("{0}")]
    ControlFlow(CfgError),
    #[error(".version {major}.{minor} is newer than PTX ISA {}.{}, the newest the GPU driver accepts", MAX_VERSION.0, MAX_VERSION.1)]
    VersionTooNew { major: u32, minor: u32 },
    #[error("the module has no .version directive")]
    MissingVersion,
    /// A register of another size than the instruction type takes (`add.s32` on a `.b64`),
    /// or narrower than `ld`/`st`/`cvt` allow.
    #[error("{}", TypeError::Width(.0.clone()))]
    OperandWidth(Mismatch),
    /// A register whose type class the instruction type does not take (`add.s32` on an
    /// `.f32`, `add.f32` on a `.u32`).
    #[error("{}", TypeError::Type(.0.clone()))]
    OperandType(Mismatch),
    /// A value register where a predicate is wanted (a guard, `setp`'s destination, `selp`'s
    /// selector).
    #[error("{}", TypeError::NotAPredicate(.0.clone()))]
    NotAPredicate(Mismatch),
    /// A predicate register where a value is wanted.
    #[error("{}", TypeError::UnexpectedPredicate(.0.clone()))]
    UnexpectedPredicate(Mismatch),
}

impl From<TypeError> for ErrorKind {
    fn from(e: TypeError) -> ErrorKind {
        match e {
            TypeError::Width(m) => ErrorKind::OperandWidth(m),
            TypeError::Type(m) => ErrorKind::OperandType(m),
            TypeError::NotAPredicate(m) => ErrorKind::NotAPredicate(m),
            TypeError::UnexpectedPredicate(m) => ErrorKind::UnexpectedPredicate(m),
        }
    }
}

/// One error, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierError {
    pub kind: ErrorKind,
    /// The function it is in, if any.
    pub function: Option<Name>,
    /// Source position; [`Span::NONE`] for nodes a pass created (see `context`).
    pub span: Span,
    /// The instruction, printed, when the error is at one.
    pub context: Option<String>,
}

impl fmt::Display for VerifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(func) = &self.function {
            write!(f, "in `{func}`: ")?;
        }
        write!(f, "{}", self.kind)?;
        if let Some(c) = &self.context {
            write!(f, "\n    | {c}")?;
        }
        Ok(())
    }
}

/// All errors of one module, in module order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifierErrors(pub Vec<VerifierError>);

impl fmt::Display for VerifierErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifierErrors {}

/// Checks `module`; `Err` holds every error found.
pub fn verify(module: &Module) -> Result<(), VerifierErrors> {
    let mut v = Verifier {
        errors: Vec::new(),
        symbols: NameMap::default(),
        all_symbols: NameSet::default(),
        numbered: Numbered::default(),
        spare_known: NameMap::default(),
        rules: Rules::default(),
    };
    v.module(module);
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(VerifierErrors(v.errors))
    }
}

/// What a module-level name is, for duplicate checks.
#[derive(Clone, Copy)]
enum Symbol {
    Var { external: bool },
    Function { defined: bool },
    Alias,
}

struct Verifier {
    errors: Vec<VerifierError>,
    /// Module-level names declared so far.
    symbols: NameMap<Symbol>,
    /// Every module-level name, to tell "declared later" from "never declared".
    all_symbols: NameSet,
    numbered: Numbered,
    /// The last function's `known` set, emptied: the next function's starts with its
    /// capacity instead of growing (and rehashing) from nothing again.
    spare_known: NameMap<Typed>,
    /// The operand-type rules of the instruction forms met so far.
    rules: Rules,
}

impl Verifier {
    fn error(&mut self, kind: ErrorKind, function: Option<Name>, span: Span) {
        self.errors.push(VerifierError { kind, function, span, context: None });
    }

    fn module(&mut self, module: &Module) {
        for item in &module.items {
            match item {
                Item::Var(v) => self.all_symbols.insert(v.name),
                Item::Function(f) => self.all_symbols.insert(f.name),
                Item::Alias { alias, .. } => self.all_symbols.insert(*alias),
                _ => false,
            };
        }
        let mut version = false;
        for item in &module.items {
            match item {
                Item::Version { major, minor } => {
                    version = true;
                    if (*major, *minor) > MAX_VERSION {
                        self.error(ErrorKind::VersionTooNew { major: *major, minor: *minor }, None, Span::NONE);
                    }
                }
                Item::Var(v) => self.module_var(v),
                Item::Function(f) => {
                    let defined = f.body.is_some();
                    match self.symbols.get(&f.name) {
                        Some(Symbol::Function { defined: true }) if defined => {
                            self.error(ErrorKind::DuplicateDeclaration(f.name.to_string()), None, f.span)
                        }
                        Some(Symbol::Function { defined: true }) => {}
                        Some(Symbol::Var { .. } | Symbol::Alias) => {
                            self.error(ErrorKind::DuplicateDeclaration(f.name.to_string()), None, f.span)
                        }
                        _ => {
                            self.symbols.insert(f.name, Symbol::Function { defined });
                        }
                    }
                    if f.body.is_some() {
                        self.function(f);
                    }
                }
                Item::Alias { alias, target } => {
                    if !self.symbols.contains_key(target) {
                        let kind = self.unresolved(*target, false);
                        self.error(kind, None, Span::NONE);
                    }
                    if self.symbols.insert(*alias, Symbol::Alias).is_some() {
                        self.error(ErrorKind::DuplicateDeclaration(alias.to_string()), None, Span::NONE);
                    }
                }
                Item::Target(_) | Item::AddressSize(_) | Item::File(_) | Item::Raw(_) | Item::Pragma(_) => {}
            }
        }
        if !version {
            self.error(ErrorKind::MissingVersion, None, Span::NONE);
        }
    }

    fn module_var(&mut self, v: &VarDecl) {
        if let Some(init) = &v.init {
            let mut missing = Vec::new();
            for_each_init_symbol(init, &mut |n| {
                if !self.symbols.contains_key(&n) && n != v.name {
                    missing.push(n)
                }
            });
            for n in missing {
                let kind = self.unresolved(n, false);
                self.error(kind, None, v.span);
            }
        }
        let external = v.linkage.contains(&Linkage::Extern);
        match self.symbols.get(&v.name) {
            // `.extern` declares what another declaration (or module) defines.
            Some(&Symbol::Var { external: e }) if e || external => {
                self.symbols.insert(v.name, Symbol::Var { external: e && external });
            }
            Some(_) => self.error(ErrorKind::DuplicateDeclaration(v.name.to_string()), None, v.span),
            None => {
                self.symbols.insert(v.name, Symbol::Var { external });
            }
        }
    }

    /// The error for a name nothing in scope declares.
    fn unresolved(&self, name: Name, declared_in_function: bool) -> ErrorKind {
        if declared_in_function || self.all_symbols.contains(&name) {
            ErrorKind::UsedBeforeDeclaration(name)
        } else if name.starts_with('%') {
            ErrorKind::UndeclaredRegister(name)
        } else {
            ErrorKind::UndefinedSymbol(name)
        }
    }

    fn function(&mut self, f: &Function) {
        let body = f.body.as_deref().unwrap_or_default();
        let first_error = self.errors.len();
        let known = std::mem::take(&mut self.spare_known);
        let mut fc = FunctionChecker {
            v: self,
            function: f.name,
            body,
            scopes: vec![Scope::default()],
            known,
            all_decls: None,
            reported: NameSet::default(),
            recent: Box::new([(None, None); RECENT]),
        };
        // Parameters live in the body's scope: `.reg .b64 p;` in a kernel taking `p` is a
        // duplicate definition to ptxas.
        for p in f.returns.iter().flatten().chain(f.params.iter().flatten()) {
            fc.declare(p.name, None, f.span, types::declared(p.space, p.vector, &p.array, p.ty));
        }
        fc.block(body, true);
        let mut known = std::mem::take(&mut fc.known);
        known.clear();
        fc.v.spare_known = known;

        // The graph stops at its first error, which the name checks above have usually
        // reported already with the same span; add it only when it is news.
        if let Err(e) = Cfg::check(f) {
            let (span, inst) = cfg_error_site(&e);
            let known = self.errors[first_error..].iter().any(|x| {
                if span.is_none() {
                    x.context.as_deref().is_some_and(|c| Some(c) == inst)
                } else {
                    x.span == span
                }
            });
            if !known {
                self.errors.push(VerifierError {
                    kind: ErrorKind::ControlFlow(e),
                    function: Some(f.name),
                    span,
                    context: None,
                });
            }
        }
    }
}

/// The operand index of a branch's label (`bra L`) or table (`brx.idx i, T`), and whether
/// it is a table.
fn branch_target(inst: &Instruction) -> Option<(usize, bool)> {
    match inst.opcode.as_str() {
        "bra" => Some((0, false)),
        "brx" => Some((1, true)),
        _ => None,
    }
}

fn cfg_error_site(e: &CfgError) -> (Span, Option<&str>) {
    match e {
        CfgError::NoBody(_) => (Span::NONE, None),
        CfgError::UndefinedLabel { inst, span, .. }
        | CfgError::UndefinedTable { inst, span, .. }
        | CfgError::MissingTarget { inst, span } => (*span, Some(inst)),
        CfgError::UndefinedTarget { span, .. } | CfgError::DuplicateLabel { span, .. } => (*span, None),
    }
}

fn for_each_init_symbol(init: &Initializer, f: &mut impl FnMut(Name)) {
    match init {
        Initializer::Expr(e) => e.for_each_symbol(f),
        Initializer::List(items) => items.iter().for_each(|i| for_each_init_symbol(i, f)),
    }
}

/// Every name the body declares anywhere, as if in one scope (the widest range of a
/// prefix).
fn collect_decls(stmts: &[Statement], out: &mut Scope) {
    for s in stmts {
        match s {
            Statement::Decl(d) => match d.count {
                Some(n) => {
                    let max = out.ranges.entry(d.name).or_insert((n, None));
                    max.0 = max.0.max(n);
                }
                None => {
                    out.names.insert(d.name, None);
                }
            },
            Statement::Label(l, _) => {
                out.names.insert(*l, None);
            }
            Statement::BranchTargets { label, .. }
            | Statement::CallTargets { label, .. }
            | Statement::CallPrototype { label, .. } => {
                out.names.insert(*label, None);
            }
            Statement::Block(b) => collect_decls(b, out),
            _ => {}
        }
    }
}

/// The names one `{ }` scope has declared so far.
#[derive(Default)]
struct Scope {
    /// Plain declarations: registers, variables, parameters, with the register's type.
    names: NameMap<Typed>,
    /// `%r<N>`: prefix → N and the registers' type.
    ranges: NameMap<(u32, Typed)>,
    /// For each prefix, the lowest number of a plain name `prefix<number>`, which a later
    /// range declaration of that prefix would declare again.
    lowest_numbered: NameMap<u64>,
    /// Labels and `.branchtargets`/`.calltargets`/`.callprototype` names: the whole
    /// scope's, known before its first statement since branches may jump forward.
    labels: NameSet,
}

impl Scope {
    /// `numbered` is the name split by [`Numbered::get`].
    fn contains(&self, name: Name, numbered: Option<(Name, u64)>) -> bool {
        self.lookup(name, numbered).is_some()
    }

    /// What this scope declares `name` as: `Some` with its register type when it does.
    fn lookup(&self, name: Name, numbered: Option<(Name, u64)>) -> Option<Typed> {
        if let Some(&t) = self.names.get(&name) {
            return Some(t);
        }
        if self.labels.contains(&name) {
            return Some(None);
        }
        self.in_range(numbered)
    }

    fn in_range(&self, numbered: Option<(Name, u64)>) -> Option<Typed> {
        let (prefix, n) = numbered?;
        let &(count, t) = self.ranges.get(&prefix)?;
        (n < count as u64).then_some(t)
    }
}

/// [`split_number`] of each name looked up, remembered: the same few thousand names are
/// looked up millions of times. The prefix is `None`'s case when no name has that text,
/// so no range declares it.
#[derive(Default)]
struct Numbered(NameMap<Option<(Name, u64)>>);

impl Numbered {
    fn get(&mut self, name: Name) -> Option<(Name, u64)> {
        *self
            .0
            .entry(name)
            .or_insert_with(|| split_number(&name).and_then(|(prefix, n)| Some((Name::from_existing(prefix)?, n))))
    }
}

/// `%r12` → (`%r`, 12). ptxas reads the digits as a number, so `%r012` is `%r12` too.
fn split_number(name: &str) -> Option<(&str, u64)> {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits == name.len() {
        return None;
    }
    let (prefix, n) = name.split_at(name.len() - digits);
    Some((prefix, n.parse().ok()?))
}

struct FunctionChecker<'v, 'b> {
    v: &'v mut Verifier,
    function: Name,
    body: &'b [Statement],
    /// The scopes enclosing the statement being checked, innermost last.
    scopes: Vec<Scope>,
    /// Names found in the body's scope, the module or the predefined ones, with their
    /// register type: they resolve until the end of the function, so the scopes need not be
    /// searched for them again.
    known: NameMap<Typed>,
    /// Everything the function declares, in any scope: only wanted to word an error, so
    /// collected at the first one.
    all_decls: Option<Scope>,
    /// Undeclared names already reported in this function.
    reported: NameSet,
    /// The last names of `known` looked up, by their address: an instrumented body names
    /// the same few registers millions of times, and comparing one slot costs a fraction
    /// of a hash-set probe.
    /// Each slot holds the name's type too, for the operand type check that follows.
    recent: Box<[(Option<Name>, Typed); RECENT]>,
}

/// Slots of [`FunctionChecker::recent`].
const RECENT: usize = 256;

/// The slot of `name` in [`FunctionChecker::recent`]: interned names are distinct
/// addresses at least 8 bytes apart.
fn recent_slot(name: Name) -> usize {
    (name.as_char_ptr() as usize >> 3) % RECENT
}

impl FunctionChecker<'_, '_> {
    fn error(&mut self, kind: ErrorKind, span: Span, inst: Option<&Instruction>) {
        let context = inst.map(|i| Ptx(i).to_string().replace(" \t", " "));
        self.v.errors.push(VerifierError { kind, function: Some(self.function), span, context });
    }

    /// Checks one statement list; `body` for the function's own, whose scope already
    /// exists (it holds the parameters).
    fn block(&mut self, stmts: &[Statement], body: bool) {
        if !body {
            self.scopes.push(Scope::default());
        }
        for s in stmts {
            let (label, span) = match s {
                Statement::Label(l, span) => (*l, *span),
                Statement::BranchTargets { label, span, .. }
                | Statement::CallTargets { label, span, .. }
                | Statement::CallPrototype { label, span, .. } => (*label, *span),
                _ => continue,
            };
            let numbered = self.v.numbered.get(label);
            let scope = self.scopes.last_mut().unwrap();
            if !scope.labels.insert(label) || scope.names.contains_key(&label) || scope.in_range(numbered).is_some() {
                self.error(ErrorKind::DuplicateDeclaration(label.to_string()), span, None);
            }
        }
        for s in stmts {
            match s {
                Statement::Decl(d) => {
                    if let Some(init) = &d.init {
                        for_each_init_symbol(init, &mut |n| self.use_name(n, d.span, None));
                    }
                    self.declare(d.name, d.count, d.span, types::declared(d.space, d.vector, &d.array, d.ty));
                }
                Statement::Inst(i) => {
                    if let Some(g) = &i.guard {
                        self.use_name(g.reg, i.span, Some(i));
                    }
                    let target = branch_target(i);
                    for (k, op) in i.operands.iter().enumerate() {
                        match (target, op) {
                            (Some((t, table)), Operand::Name(n)) if t == k => self.use_target(*n, table, i),
                            _ => op.for_each_name(&mut |n| self.use_name(n, i.span, Some(i))),
                        }
                    }
                    self.types(i);
                }
                Statement::Block(b) => self.block(b, false),
                Statement::BranchTargets { label, targets, span } => {
                    for &t in targets {
                        if self.resolves(t).is_none() {
                            let e = CfgError::UndefinedTarget { table: *label, label: t, span: *span };
                            self.error(ErrorKind::ControlFlow(e), *span, None);
                        }
                    }
                }
                Statement::CallTargets { targets, span, .. } => {
                    for &t in targets {
                        self.use_name(t, *span, None);
                    }
                }
                Statement::Label(..)
                | Statement::CallPrototype { .. }
                | Statement::Loc(_)
                | Statement::Pragma(_)
                | Statement::Raw(_) => {}
            }
        }
        if !body {
            self.scopes.pop();
        }
    }

    /// The operand-type errors of `i`, each at `i`.
    fn types(&mut self, i: &Instruction) {
        let rule = self.v.rules.get(i);
        if rule.is_none() && i.guard.is_none() {
            return;
        }
        // Empty, and so not allocated, for nearly every instruction.
        let mut found = Vec::new();
        types::check(i, rule.as_ref(), &mut |n| self.type_of(n), &mut |e| found.push(e));
        for e in found {
            self.error(e.into(), i.span, Some(i));
        }
    }

    /// The register type of `name` here: the walk has just resolved it (and cached it in
    /// [`Self::recent`] unless it lives in an inner scope).
    #[inline]
    fn type_of(&mut self, name: Name) -> Typed {
        // The caches hold what a name is in the body's scope; an inner `{ }` may declare it
        // again with another type.
        if self.scopes.len() > 1 {
            if let Some(t) = self.inner_type(name) {
                return t;
            }
        }
        match self.recent[recent_slot(name)] {
            (Some(n), t) if n == name => t,
            _ => self.resolves(name).flatten(),
        }
    }

    /// What the innermost `{ }` inside the body that declares `name` makes it, if one does.
    #[inline(never)]
    fn inner_type(&mut self, name: Name) -> Option<Typed> {
        let numbered =
            if self.scopes[1..].iter().any(|s| !s.ranges.is_empty()) { self.v.numbered.get(name) } else { None };
        self.scopes[1..].iter().rev().find_map(|s| s.lookup(name, numbered))
    }

    fn declare(&mut self, name: Name, count: Option<u32>, span: Span, ty: Typed) {
        let numbered = if count.is_none() { self.v.numbered.get(name) } else { None };
        let scope = self.scopes.last_mut().unwrap();
        let duplicate = match count {
            Some(n) => {
                let again = scope.ranges.insert(name, (n, ty)).is_some();
                again || scope.lowest_numbered.get(&name).is_some_and(|&low| low < n as u64)
            }
            None => {
                let dup = scope.names.insert(name, ty).is_some()
                    || scope.labels.contains(&name)
                    || scope.in_range(numbered).is_some();
                if let Some((prefix, n)) = split_number(&name) {
                    let low = scope.lowest_numbered.entry(Name::from(prefix)).or_insert(n);
                    *low = (*low).min(n);
                }
                dup
            }
        };
        if duplicate {
            let shown = match count {
                Some(n) => format!("{name}<{n}>"),
                None => name.to_string(),
            };
            self.error(ErrorKind::DuplicateDeclaration(shown), span, None);
        }
    }

    /// `Some` with the register type of `name` if it resolves here.
    fn resolves(&mut self, name: Name) -> Option<Typed> {
        let slot = recent_slot(name);
        match self.recent[slot] {
            (Some(n), t) if n == name => return Some(t),
            _ => {}
        }
        if let Some(&t) = self.known.get(&name) {
            self.recent[slot] = (Some(name), t);
            return Some(t);
        }
        let numbered = self.v.numbered.get(name);
        let found = self.scopes.iter().enumerate().rev().find_map(|(i, s)| Some((i, s.lookup(name, numbered)?)));
        let t = match found {
            Some((0, t)) => t,
            Some((_, t)) => return Some(t),
            None if self.v.symbols.contains_key(&name) || gpusan_ptx::semantics::is_predefined(&name) => None,
            None => return None,
        };
        self.known.insert(name, t);
        self.recent[slot] = (Some(name), t);
        Some(t)
    }

    /// A branch's label or a `brx.idx`'s table: reported as the graph would, but every one
    /// of them rather than the graph's first.
    fn use_target(&mut self, name: Name, table: bool, inst: &Instruction) {
        if self.resolves(name).is_some() {
            return;
        }
        let text = Ptx(inst).to_string().replace(" \t", " ");
        let e = if table {
            CfgError::UndefinedTable { table: name, inst: text, span: inst.span }
        } else {
            CfgError::UndefinedLabel { label: name, inst: text, span: inst.span }
        };
        self.error(ErrorKind::ControlFlow(e), inst.span, Some(inst));
    }

    /// Checks that `name` resolves here, and reports it once when not.
    #[inline]
    fn use_name(&mut self, name: Name, span: Span, inst: Option<&Instruction>) {
        // Nearly every use is of a name seen a moment before: that test inline, the
        // rest out of line, so the per-operand loop stays small.
        if self.recent[recent_slot(name)].0 == Some(name) {
            return;
        }
        self.use_name_searched(name, span, inst);
    }

    #[inline(never)]
    fn use_name_searched(&mut self, name: Name, span: Span, inst: Option<&Instruction>) {
        if name == "_" || self.resolves(name).is_some() {
            return;
        }
        // `%tid.x`, and the `.x` components of vector registers.
        if let Some((base, _)) = name.split_once('.') {
            // A predefined register's component resolves everywhere: known from now on,
            // rather than searched for at each of its uses.
            if gpusan_ptx::semantics::is_predefined(base) {
                self.known.insert(name, None);
                return;
            }
            if Name::from_existing(base).is_some_and(|b| self.resolves(b).is_some()) {
                return;
            }
        }
        if !self.reported.insert(name) {
            return;
        }
        let body = self.body;
        let all_decls = self.all_decls.get_or_insert_with(|| {
            let mut all = Scope::default();
            collect_decls(body, &mut all);
            all
        });
        let declared = all_decls.contains(name, self.v.numbered.get(name));
        let kind = self.v.unresolved(name, declared);
        self.error(kind, span, inst);
    }
}
