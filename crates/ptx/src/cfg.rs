//! The control-flow graph of one function body, its dominator trees and natural loops.
//!
//! Passes that place checks need to know which instructions always run before which
//! (dominators), where a loop is entered (preheaders) and what a register holds at a
//! point ([`crate::dataflow`]); all of that is computed here from the tree the parser
//! built, without rewriting it.
//!
//! # Instructions and where they live
//!
//! A body is a tree: inline assembly nests `{ … }` scopes ([`Statement::Block`]). The
//! graph numbers the instructions of the whole tree in program order; that number is the
//! [`InstId`]. [`Cfg::inst_path`] maps it back to the index path into the nested
//! statement vectors (`[4, 2]` is statement 2 of the block that is statement 4 of the
//! body), which [`statement_at`] and [`statement_at_mut`] follow. Paths, and so the
//! graph, describe the body the graph was built from: a pass that inserts statements
//! should insert in reverse program order (later paths first) or build the graph again.
//!
//! # Blocks
//!
//! A basic block starts at a label or after a control transfer and holds consecutive
//! instructions. Every transfer ends its block, a guarded one included: `@%p bra`,
//! `@%p ret` and a guarded `brx.idx` also fall through to the next block. `ret`, `exit`
//! and `trap` go to one virtual exit block that holds no instruction and is the last
//! [`BlockId`]; so does falling off the end of the body. `call` is an ordinary
//! instruction: the callee returns. Block 0 is the entry, even when it holds nothing.
//!
//! Labels and `.branchtargets` tables are scoped like registers: one declared inside a
//! `{ }` is visible only there, which is what lets the same inline assembly, with its
//! labels, be inlined twice into one function. Scopes are numbered in the order their
//! `{` appear; the body itself is scope 0.

use std::collections::HashMap;
use std::fmt::Write;
use std::hash::BuildHasherDefault;
use std::ops::Range;

use smallvec::SmallVec;

use crate::ast::{Function, FunctionKind, Instruction, Name, Operand, Span, Statement};
use crate::printer::Ptx;

/// An instruction of the body, numbered in program order across nested scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstId(pub u32);

impl InstId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A basic block. The virtual exit block is the last one ([`Cfg::exit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u32);

impl BlockId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A `{ }` scope of the body; 0 is the body itself.
pub type ScopeId = u32;

const NONE: u32 = u32::MAX;

/// Why a body has no control-flow graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CfgError {
    #[error("function `{0}` is a declaration without a body")]
    NoBody(Name),
    #[error("`{inst}` branches to `{label}`, which is not a label in scope")]
    UndefinedLabel { label: Name, inst: String, span: Span },
    #[error("`{inst}` jumps through `{table}`, which is not a `.branchtargets` table in scope")]
    UndefinedTable { table: Name, inst: String, span: Span },
    #[error("`.branchtargets` table `{table}` lists `{label}`, which is not a label in scope")]
    UndefinedTarget { table: Name, label: Name, span: Span },
    #[error("label `{label}` is defined twice in one scope")]
    DuplicateLabel { label: Name, span: Span },
    #[error("`{inst}` has no label operand to branch to")]
    MissingTarget { inst: String, span: Span },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The labels naming the block's first instruction, in source order.
    pub labels: Vec<Name>,
    /// The instructions, consecutive in program order.
    pub insts: Range<u32>,
    /// Branch targets in operand order, then the fall-through; no duplicates.
    pub succs: Vec<BlockId>,
    /// In increasing block order; no duplicates.
    pub preds: Vec<BlockId>,
    /// Whether some path from the entry reaches the block. Unreachable blocks stay in
    /// the graph so every instruction belongs to a block.
    pub reachable: bool,
}

impl Block {
    fn empty_at(inst: u32) -> Block {
        Block { labels: Vec::new(), insts: inst..inst, succs: Vec::new(), preds: Vec::new(), reachable: false }
    }

    pub fn insts(&self) -> impl DoubleEndedIterator<Item = InstId> + ExactSizeIterator + Clone {
        self.insts.clone().map(InstId)
    }

    pub fn len(&self) -> usize {
        self.insts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }
}

/// The control-flow graph of one function body.
#[derive(Debug, Clone)]
pub struct Cfg {
    blocks: Vec<Block>,
    /// Blocks reachable from the entry, in reverse postorder; the entry first.
    rpo: Vec<BlockId>,
    /// Position of each block in `rpo`, or `NONE`.
    rpo_index: Vec<u32>,
    block_of: Vec<BlockId>,
    inst_scope: Vec<ScopeId>,
    /// Concatenated index paths; those of instruction `i` are `paths[path_start[i]..path_start[i + 1]]`.
    paths: Vec<u32>,
    path_start: Vec<u32>,
    scope_parent: Vec<ScopeId>,
}

/// A `.branchtargets` table, resolved in its own scope.
struct Table<'a> {
    targets: &'a [Name],
    scope: ScopeId,
    span: Span,
}

/// How an instruction passes control on.
enum Flow {
    Next,
    Jump(Name),
    Table(Name),
    Return,
}

fn flow(inst: &Instruction) -> Result<Flow, CfgError> {
    let label = |i: usize| match inst.operands.get(i) {
        Some(Operand::Name(n)) => Ok(*n),
        _ => Err(CfgError::MissingTarget { inst: inst_text(inst), span: inst.span }),
    };
    Ok(match inst.opcode.as_str() {
        "bra" => Flow::Jump(label(0)?),
        // `brx.idx index, table`
        "brx" => Flow::Table(label(1)?),
        "ret" | "exit" | "trap" => Flow::Return,
        _ => Flow::Next,
    })
}

/// Visits the statements of a body other than `{ }` blocks, in program order, with the
/// scope each belongs to and its index path; returns each scope's parent (`NONE` for
/// the body). [`Cfg::build`] and [`crate::dataflow::Registers`] both number scopes with
/// it, so their numbers agree.
pub(crate) fn walk<'a>(body: &'a [Statement], mut f: impl FnMut(&'a Statement, ScopeId, &[u32])) -> Vec<ScopeId> {
    fn go<'a>(
        stmts: &'a [Statement],
        scope: ScopeId,
        parents: &mut Vec<ScopeId>,
        path: &mut Vec<u32>,
        f: &mut impl FnMut(&'a Statement, ScopeId, &[u32]),
    ) {
        for (i, s) in stmts.iter().enumerate() {
            path.push(i as u32);
            if let Statement::Block(inner) = s {
                let id = parents.len() as ScopeId;
                parents.push(scope);
                go(inner, id, parents, path, f);
            } else {
                f(s, scope, path);
            }
            path.pop();
        }
    }
    let mut parents = vec![NONE];
    go(body, 0, &mut parents, &mut Vec::new(), &mut f);
    parents
}

/// Labels or tables by scope and name. Hashed with an unkeyed fast hash: the keys are a
/// module's own names, and the graph is built for every function of every module.
type ScopedNames<T> = HashMap<(ScopeId, Name), T, BuildHasherDefault<ahash::AHasher>>;

/// Looks `name` up from `scope` outwards.
fn resolve<'m, T>(map: &'m ScopedNames<T>, parents: &[ScopeId], scope: ScopeId, name: Name) -> Option<&'m T> {
    let mut s = scope;
    while s != NONE {
        if let Some(v) = map.get(&(s, name)) {
            return Some(v);
        }
        s = parents[s as usize];
    }
    None
}

/// Calls `f` with the block of each label the transfer `inst` (in `scope`) names, in
/// operand order: a branch's label, or a table's labels in table order. Returns whether it
/// leaves the function instead (`ret`, `exit`, `trap`).
fn transfer_targets<T: Copy>(
    inst: &Instruction,
    scope: ScopeId,
    labels: &ScopedNames<T>,
    tables: &ScopedNames<Table>,
    scope_parent: &[ScopeId],
    mut f: impl FnMut(T),
) -> Result<bool, CfgError> {
    match flow(inst)? {
        Flow::Next => unreachable!("only transfers end a block early"),
        Flow::Jump(label) => f(*resolve(labels, scope_parent, scope, label)
            .ok_or_else(|| CfgError::UndefinedLabel { label, inst: inst_text(inst), span: inst.span })?),
        Flow::Table(name) => {
            let table = resolve(tables, scope_parent, scope, name).ok_or_else(|| CfgError::UndefinedTable {
                table: name,
                inst: inst_text(inst),
                span: inst.span,
            })?;
            for &label in table.targets {
                f(*resolve(labels, scope_parent, table.scope, label).ok_or(CfgError::UndefinedTarget {
                    table: name,
                    label,
                    span: table.span,
                })?);
            }
        }
        Flow::Return => return Ok(true),
    }
    Ok(false)
}

fn inst_text(inst: &Instruction) -> String {
    Ptx(inst).to_string().replace(" \t", " ")
}

impl Cfg {
    pub fn build(f: &Function) -> Result<Cfg, CfgError> {
        let body = f.body.as_deref().ok_or(CfgError::NoBody(f.name))?;

        let mut blocks = vec![Block::empty_at(0)];
        // The transfer ending each block, if it ends with one.
        let mut terminators: Vec<Option<(&Instruction, ScopeId)>> = vec![None];
        let mut labels: ScopedNames<BlockId> = ScopedNames::default();
        let mut tables: ScopedNames<Table> = ScopedNames::default();
        // Most statements are instructions: reserve for all of them.
        let mut block_of = Vec::with_capacity(body.len());
        let mut inst_scope = Vec::with_capacity(body.len());
        let mut paths = Vec::with_capacity(body.len());
        let mut path_start = Vec::with_capacity(body.len() + 1);
        path_start.push(0);
        let mut closed = false;
        let mut error = None;
        let mut n = 0u32;

        let scope_parent = walk(body, |s, scope, path| {
            let start_block = |blocks: &mut Vec<Block>, terminators: &mut Vec<_>| {
                blocks.push(Block::empty_at(n));
                terminators.push(None);
            };
            match s {
                Statement::Label(name, span) => {
                    if closed || !blocks.last().unwrap().insts.is_empty() {
                        start_block(&mut blocks, &mut terminators);
                        closed = false;
                    }
                    let b = BlockId(blocks.len() as u32 - 1);
                    blocks.last_mut().unwrap().labels.push(*name);
                    if labels.insert((scope, *name), b).is_some() && error.is_none() {
                        error = Some(CfgError::DuplicateLabel { label: *name, span: *span });
                    }
                }
                Statement::Inst(inst) => {
                    if closed {
                        start_block(&mut blocks, &mut terminators);
                        closed = false;
                    }
                    blocks.last_mut().unwrap().insts.end = n + 1;
                    block_of.push(BlockId(blocks.len() as u32 - 1));
                    inst_scope.push(scope);
                    paths.extend_from_slice(path);
                    path_start.push(paths.len() as u32);
                    n += 1;
                    match flow(inst) {
                        Ok(Flow::Next) => {}
                        Ok(_) => {
                            *terminators.last_mut().unwrap() = Some((inst, scope));
                            closed = true;
                        }
                        Err(e) => {
                            error.get_or_insert(e);
                        }
                    }
                }
                Statement::BranchTargets { label, targets, span } => {
                    let table = Table { targets, scope, span: *span };
                    if tables.insert((scope, *label), table).is_some() && error.is_none() {
                        error = Some(CfgError::DuplicateLabel { label: *label, span: *span });
                    }
                }
                _ => {}
            }
        });
        if let Some(e) = error {
            return Err(e);
        }

        let exit = BlockId(blocks.len() as u32);
        for (i, term) in terminators.iter().enumerate() {
            let fall = BlockId(i as u32 + 1);
            let mut succs: SmallVec<[BlockId; 2]> = SmallVec::new();
            match term {
                None => succs.push(fall),
                Some((inst, scope)) => {
                    let returns = transfer_targets(inst, *scope, &labels, &tables, &scope_parent, |b| succs.push(b))?;
                    if returns {
                        succs.push(exit);
                    }
                    if inst.guard.is_some() {
                        succs.push(fall);
                    }
                }
            }
            // A table may list a label twice, or a branch target the next block.
            let mut unique = Vec::with_capacity(succs.len());
            for s in succs {
                if !unique.contains(&s) {
                    unique.push(s);
                }
            }
            blocks[i].succs = unique;
        }
        blocks.push(Block::empty_at(n));
        let mut npreds = vec![0u32; blocks.len()];
        for b in &blocks {
            for s in &b.succs {
                npreds[s.index()] += 1;
            }
        }
        for (b, n) in blocks.iter_mut().zip(npreds) {
            b.preds.reserve_exact(n as usize);
        }
        for i in 0..blocks.len() {
            for j in 0..blocks[i].succs.len() {
                let s = blocks[i].succs[j];
                blocks[s.index()].preds.push(BlockId(i as u32));
            }
        }

        let mut rpo = postorder(blocks.len(), BlockId(0), |b| &blocks[b.index()].succs);
        rpo.reverse();
        let mut rpo_index = vec![NONE; blocks.len()];
        for (i, b) in rpo.iter().enumerate() {
            rpo_index[b.index()] = i as u32;
            blocks[b.index()].reachable = true;
        }
        Ok(Cfg { blocks, rpo, rpo_index, block_of, inst_scope, paths, path_start, scope_parent })
    }

    /// The error [`Cfg::build`] would return, without building the graph: for a verifier,
    /// which only wants to know whether the graph can be built.
    pub fn check(f: &Function) -> Result<(), CfgError> {
        let body = f.body.as_deref().ok_or(CfgError::NoBody(f.name))?;
        let mut labels: ScopedNames<()> = ScopedNames::default();
        let mut tables: ScopedNames<Table> = ScopedNames::default();
        // Every transfer ends its block in `build`, so these are its blocks' terminators, in
        // block order.
        let mut transfers = Vec::new();
        let mut error = None;
        let scope_parent = walk(body, |s, scope, _| match s {
            Statement::Label(name, span) => {
                let again = labels.insert((scope, *name), ()).is_some();
                if again && error.is_none() {
                    error = Some(CfgError::DuplicateLabel { label: *name, span: *span });
                }
            }
            Statement::Inst(inst) => match flow(inst) {
                Ok(Flow::Next) => {}
                Ok(_) => transfers.push((inst, scope)),
                Err(e) => {
                    error.get_or_insert(e);
                }
            },
            Statement::BranchTargets { label, targets, span } => {
                let table = Table { targets, scope, span: *span };
                if tables.insert((scope, *label), table).is_some() && error.is_none() {
                    error = Some(CfgError::DuplicateLabel { label: *label, span: *span });
                }
            }
            _ => {}
        });
        if let Some(e) = error {
            return Err(e);
        }
        for (inst, scope) in transfers {
            transfer_targets(inst, scope, &labels, &tables, &scope_parent, |()| {})?;
        }
        Ok(())
    }

    /// All blocks, the virtual exit last.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    pub fn block(&self, b: BlockId) -> &Block {
        &self.blocks[b.index()]
    }

    pub fn block_ids(&self) -> impl DoubleEndedIterator<Item = BlockId> + ExactSizeIterator {
        (0..self.blocks.len() as u32).map(BlockId)
    }

    /// Number of blocks, the virtual exit included.
    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    pub fn num_insts(&self) -> usize {
        self.block_of.len()
    }

    pub fn entry(&self) -> BlockId {
        BlockId(0)
    }

    /// The virtual block every `ret`, `exit` and `trap` leads to.
    pub fn exit(&self) -> BlockId {
        BlockId(self.blocks.len() as u32 - 1)
    }

    pub fn succs(&self, b: BlockId) -> &[BlockId] {
        &self.blocks[b.index()].succs
    }

    pub fn preds(&self, b: BlockId) -> &[BlockId] {
        &self.blocks[b.index()].preds
    }

    pub fn is_reachable(&self, b: BlockId) -> bool {
        self.blocks[b.index()].reachable
    }

    /// The blocks reachable from the entry in reverse postorder: every block comes
    /// before its successors except along retreating edges.
    pub fn rpo(&self) -> &[BlockId] {
        &self.rpo
    }

    /// Position of `b` in [`Cfg::rpo`]; `None` when unreachable.
    pub fn rpo_index(&self, b: BlockId) -> Option<usize> {
        let i = self.rpo_index[b.index()];
        (i != NONE).then_some(i as usize)
    }

    pub fn block_of(&self, i: InstId) -> BlockId {
        self.block_of[i.index()]
    }

    /// The index path of the instruction in the body (see the module documentation).
    pub fn inst_path(&self, i: InstId) -> &[u32] {
        &self.paths[self.path_start[i.index()] as usize..self.path_start[i.index() + 1] as usize]
    }

    pub fn inst_scope(&self, i: InstId) -> ScopeId {
        self.inst_scope[i.index()]
    }

    /// The scope enclosing `s`; `None` for the body.
    pub fn scope_parent(&self, s: ScopeId) -> Option<ScopeId> {
        let p = self.scope_parent[s as usize];
        (p != NONE).then_some(p)
    }

    pub fn num_scopes(&self) -> usize {
        self.scope_parent.len()
    }

    /// The instruction `i` of `f`, which must be the function the graph was built from.
    pub fn inst<'f>(&self, f: &'f Function, i: InstId) -> &'f Instruction {
        match f.body.as_deref().and_then(|b| statement_at(b, self.inst_path(i))) {
            Some(Statement::Inst(inst)) => inst,
            _ => panic!("instruction {} is not in this function body", i.0),
        }
    }

    /// All instructions of `f` indexed by [`InstId`], in one walk of the body.
    pub fn instructions<'f>(&self, f: &'f Function) -> Vec<&'f Instruction> {
        let mut out = Vec::with_capacity(self.num_insts());
        walk(f.body.as_deref().unwrap_or_default(), |s, _, _| {
            if let Statement::Inst(i) = s {
                out.push(i)
            }
        });
        assert_eq!(out.len(), self.num_insts(), "the graph was built from another body");
        out
    }
}

/// The statement at an index path of [`Cfg::inst_path`].
pub fn statement_at<'a>(body: &'a [Statement], path: &[u32]) -> Option<&'a Statement> {
    let (last, outer) = path.split_last()?;
    let mut stmts = body;
    for &i in outer {
        match stmts.get(i as usize)? {
            Statement::Block(inner) => stmts = inner,
            _ => return None,
        }
    }
    stmts.get(*last as usize)
}

pub fn statement_at_mut<'a>(body: &'a mut [Statement], path: &[u32]) -> Option<&'a mut Statement> {
    let (last, outer) = path.split_last()?;
    let mut stmts = body;
    for &i in outer {
        match stmts.get_mut(i as usize)? {
            Statement::Block(inner) => stmts = inner,
            _ => return None,
        }
    }
    stmts.get_mut(*last as usize)
}

/// Postorder of the blocks reachable from `root` along `next`. Iterative: bodies of tens
/// of thousands of blocks would overflow the stack of a recursive walk.
fn postorder<'a>(n: usize, root: BlockId, next: impl Fn(BlockId) -> &'a [BlockId]) -> Vec<BlockId> {
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut stack = vec![(root, 0usize)];
    seen[root.index()] = true;
    while let Some((b, i)) = stack.last_mut() {
        let edges = next(*b);
        if let Some(&s) = edges.get(*i) {
            *i += 1;
            if !seen[s.index()] {
                seen[s.index()] = true;
                stack.push((s, 0));
            }
        } else {
            order.push(*b);
            stack.pop();
        }
    }
    order
}

/// A dominator tree, or a post-dominator tree when built over the reversed graph.
#[derive(Debug, Clone)]
pub struct DomTree {
    root: BlockId,
    /// `NONE` for blocks the root does not reach; the root is its own.
    idom: Vec<u32>,
    children: Vec<Vec<BlockId>>,
    /// Preorder entry and exit numbers in the tree, which make `dominates` O(1).
    pre: Vec<u32>,
    post: Vec<u32>,
}

impl DomTree {
    /// Dominators: `a` dominates `b` when every path from the entry to `b` passes `a`.
    pub fn dominators(cfg: &Cfg) -> DomTree {
        DomTree::compute(cfg.num_blocks(), cfg.entry(), |b| cfg.succs(b), |b| cfg.preds(b))
    }

    /// Post-dominators: `a` post-dominates `b` when every path from `b` to the exit
    /// passes `a`. Blocks that never reach the exit (an infinite loop) have none.
    pub fn post_dominators(cfg: &Cfg) -> DomTree {
        DomTree::compute(cfg.num_blocks(), cfg.exit(), |b| cfg.preds(b), |b| cfg.succs(b))
    }

    /// Cooper, Harvey and Kennedy, "A Simple, Fast Dominance Algorithm": iterate
    /// `idom(b) = common ancestor of the processed predecessors` in reverse postorder.
    /// Fewer passes than there are loop nesting levels in practice, and no extra storage.
    fn compute<'a>(
        n: usize,
        root: BlockId,
        succs: impl Fn(BlockId) -> &'a [BlockId],
        preds: impl Fn(BlockId) -> &'a [BlockId],
    ) -> DomTree {
        let mut rpo = postorder(n, root, succs);
        rpo.reverse();
        let mut index = vec![NONE; n];
        for (i, b) in rpo.iter().enumerate() {
            index[b.index()] = i as u32;
        }
        let mut idom = vec![NONE; n];
        idom[root.index()] = root.0;
        let mut changed = true;
        while changed {
            changed = false;
            for &b in &rpo[1..] {
                let mut new = NONE;
                for &p in preds(b) {
                    if idom[p.index()] == NONE {
                        continue;
                    }
                    new = if new == NONE { p.0 } else { intersect(&idom, &index, p.0, new) };
                }
                if idom[b.index()] != new {
                    idom[b.index()] = new;
                    changed = true;
                }
            }
        }
        let mut children = vec![Vec::new(); n];
        for &b in &rpo[1..] {
            children[idom[b.index()] as usize].push(b);
        }
        let (mut pre, mut post) = (vec![NONE; n], vec![NONE; n]);
        let mut clock = 0;
        let mut stack = vec![(root, 0usize)];
        pre[root.index()] = 0;
        while let Some((b, i)) = stack.last_mut() {
            if let Some(&c) = children[b.index()].get(*i) {
                *i += 1;
                clock += 1;
                pre[c.index()] = clock;
                stack.push((c, 0));
            } else {
                post[b.index()] = clock;
                stack.pop();
            }
        }
        DomTree { root, idom, children, pre, post }
    }

    pub fn root(&self) -> BlockId {
        self.root
    }

    /// Whether the root reaches `b` (in the direction of the tree).
    pub fn contains(&self, b: BlockId) -> bool {
        self.idom[b.index()] != NONE
    }

    /// The immediate dominator; `None` for the root and for blocks the root does not reach.
    pub fn idom(&self, b: BlockId) -> Option<BlockId> {
        match self.idom[b.index()] {
            NONE => None,
            d if d == b.0 => None,
            d => Some(BlockId(d)),
        }
    }

    /// Blocks whose immediate dominator is `b`, in reverse postorder.
    pub fn children(&self, b: BlockId) -> &[BlockId] {
        &self.children[b.index()]
    }

    /// Whether every path from the root to `b` passes `a`; a block dominates itself.
    /// False when the root does not reach `b`.
    pub fn dominates(&self, a: BlockId, b: BlockId) -> bool {
        self.contains(a)
            && self.contains(b)
            && self.pre[a.index()] <= self.pre[b.index()]
            && self.pre[b.index()] <= self.post[a.index()]
    }

    pub fn strictly_dominates(&self, a: BlockId, b: BlockId) -> bool {
        a != b && self.dominates(a, b)
    }
}

fn intersect(idom: &[u32], index: &[u32], mut a: u32, mut b: u32) -> u32 {
    while a != b {
        while index[a as usize] > index[b as usize] {
            a = idom[a as usize];
        }
        while index[b as usize] > index[a as usize] {
            b = idom[b as usize];
        }
    }
    a
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoopId(pub u32);

impl LoopId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A natural loop: a header and every block that reaches one of its back edges without
/// passing the header. Back edges to one header make one loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    pub header: BlockId,
    /// Sorted; the header included.
    pub blocks: Vec<BlockId>,
    /// Sources of the back edges, sorted.
    pub latches: Vec<BlockId>,
    /// Edges from a block of the loop to one outside (the virtual exit counts).
    pub exits: Vec<(BlockId, BlockId)>,
    /// The header's only predecessor outside the loop, when that block's only successor
    /// is the header: code placed at its end runs exactly once per entry into the loop,
    /// which is what hoisting a check out of the loop needs.
    pub preheader: Option<BlockId>,
    /// The innermost enclosing loop.
    pub parent: Option<LoopId>,
    /// 1 for an outermost loop.
    pub depth: u32,
}

impl Loop {
    pub fn contains(&self, b: BlockId) -> bool {
        self.blocks.binary_search(&b).is_ok()
    }
}

/// The natural loops of a graph and how they nest.
#[derive(Debug, Clone)]
pub struct LoopForest {
    /// Ordered by the reverse-postorder position of the header, so a parent comes before
    /// its children.
    loops: Vec<Loop>,
    innermost: Vec<Option<LoopId>>,
    irreducible: Vec<(BlockId, BlockId)>,
}

impl LoopForest {
    pub fn compute(cfg: &Cfg, dom: &DomTree) -> LoopForest {
        let n = cfg.num_blocks();
        let mut headers: Vec<BlockId> = Vec::new();
        let mut irreducible = Vec::new();
        for &u in cfg.rpo() {
            for &h in cfg.succs(u) {
                // Retreating edges (target no later in reverse postorder) close cycles;
                // those whose target does not dominate the source enter the cycle
                // somewhere other than its header.
                if cfg.rpo_index(h) <= cfg.rpo_index(u) {
                    if dom.dominates(h, u) {
                        headers.push(h);
                    } else {
                        irreducible.push((u, h));
                    }
                }
            }
        }
        headers.sort_by_key(|&h| cfg.rpo_index(h));
        headers.dedup();

        let mut loops: Vec<Loop> = Vec::with_capacity(headers.len());
        let mut innermost: Vec<Option<LoopId>> = vec![None; n];
        // `stamp[b] == id + 1` marks the blocks of the loop being built.
        let mut stamp = vec![0u32; n];
        for (id, &h) in headers.iter().enumerate() {
            let mark = id as u32 + 1;
            let latches: Vec<BlockId> = cfg.preds(h).iter().copied().filter(|&u| dom.dominates(h, u)).collect();
            stamp[h.index()] = mark;
            let mut blocks = vec![h];
            let mut work = latches.clone();
            while let Some(b) = work.pop() {
                if stamp[b.index()] == mark {
                    continue;
                }
                stamp[b.index()] = mark;
                blocks.push(b);
                work.extend(cfg.preds(b).iter().filter(|p| cfg.is_reachable(**p) && stamp[p.index()] != mark));
            }
            blocks.sort();
            // Headers are visited outermost first, so the innermost loop holding `h`
            // so far is the parent.
            let parent = innermost[h.index()];
            let depth = parent.map_or(1, |p| loops[p.index()].depth + 1);
            for &b in &blocks {
                innermost[b.index()] = Some(LoopId(id as u32));
            }
            let mut exits = Vec::new();
            for &b in &blocks {
                exits.extend(cfg.succs(b).iter().filter(|s| stamp[s.index()] != mark).map(|&s| (b, s)));
            }
            let outside: Vec<BlockId> =
                cfg.preds(h).iter().copied().filter(|&p| cfg.is_reachable(p) && stamp[p.index()] != mark).collect();
            let preheader = match outside[..] {
                [p] if cfg.succs(p) == [h] => Some(p),
                _ => None,
            };
            let mut latches = latches;
            latches.sort();
            loops.push(Loop { header: h, blocks, latches, exits, preheader, parent, depth });
        }
        LoopForest { loops, innermost, irreducible }
    }

    pub fn loops(&self) -> &[Loop] {
        &self.loops
    }

    pub fn get(&self, l: LoopId) -> &Loop {
        &self.loops[l.index()]
    }

    pub fn len(&self) -> usize {
        self.loops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.loops.is_empty()
    }

    /// The innermost loop holding `b`.
    pub fn innermost(&self, b: BlockId) -> Option<LoopId> {
        self.innermost[b.index()]
    }

    /// How many loops hold `b`; 0 outside any loop.
    pub fn depth(&self, b: BlockId) -> u32 {
        self.innermost(b).map_or(0, |l| self.loops[l.index()].depth)
    }

    /// The loop `b` is the header of.
    pub fn header_of(&self, b: BlockId) -> Option<LoopId> {
        self.innermost(b).filter(|l| self.loops[l.index()].header == b)
    }

    /// Retreating edges that are not back edges: they enter a cycle that has no single
    /// header, so the cycle is no natural loop.
    pub fn irreducible_edges(&self) -> &[(BlockId, BlockId)] {
        &self.irreducible
    }
}

/// The text `gpusan ptx cfg` prints: each block with its instructions' extent, edges,
/// dominators and loop depth, then the loops. The format is stable so fixture tests can
/// compare it.
pub fn dump(cfg: &Cfg, f: &Function) -> String {
    let dom = DomTree::dominators(cfg);
    let pdom = DomTree::post_dominators(cfg);
    let loops = LoopForest::compute(cfg, &dom);
    let insts = cfg.instructions(f);
    let name = |b: BlockId| if b == cfg.exit() { "exit".to_string() } else { format!("b{}", b.0) };
    let names = |bs: &mut dyn Iterator<Item = BlockId>| {
        let v: Vec<String> = bs.map(name).collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(" ")
        }
    };
    let edges = |es: &[(BlockId, BlockId)]| {
        let v: Vec<String> = es.iter().map(|&(a, b)| format!("{}->{}", name(a), name(b))).collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(" ")
        }
    };

    let mut out = String::new();
    let kind = if f.kind == FunctionKind::Entry { ".entry" } else { ".func" };
    let real = cfg.num_blocks() - 1;
    let _ = writeln!(out, "{kind} {}: blocks {real}, instructions {}, loops {}", f.name, cfg.num_insts(), loops.len());
    for b in cfg.block_ids() {
        let block = cfg.block(b);
        let mut head = name(b);
        head.push(':');
        for l in &block.labels {
            let _ = write!(head, " {l}");
        }
        if b == cfg.entry() {
            head.push_str(" [entry]");
        }
        if !block.reachable {
            head.push_str(" [unreachable]");
        }
        if let Some(l) = loops.header_of(b) {
            let _ = write!(head, " [header L{}]", l.0);
        }
        let _ = writeln!(out, "{head}");
        if b != cfg.exit() {
            let r = &block.insts;
            let _ = writeln!(out, "    insts  {} (i{}..i{})", r.len(), r.start, r.end);
            match r.len() {
                0 => {}
                1 => {
                    let _ = writeln!(out, "    only   {}", inst_text(insts[r.start as usize]));
                }
                _ => {
                    let _ = writeln!(out, "    first  {}", inst_text(insts[r.start as usize]));
                    let _ = writeln!(out, "    last   {}", inst_text(insts[r.end as usize - 1]));
                }
            }
            let _ = writeln!(out, "    succs  {}", names(&mut block.succs.iter().copied()));
        }
        let _ = writeln!(out, "    preds  {}", names(&mut block.preds.iter().copied()));
        let _ = writeln!(out, "    idom   {}", names(&mut dom.idom(b).into_iter()));
        let _ = writeln!(out, "    ipdom  {}", names(&mut pdom.idom(b).into_iter()));
        if b != cfg.exit() {
            let _ = writeln!(out, "    depth  {}", loops.depth(b));
        }
    }
    for (i, l) in loops.loops().iter().enumerate() {
        let parent = l.parent.map_or("-".to_string(), |p| format!("L{}", p.0));
        let _ = writeln!(out, "L{i}: header {} depth {} parent {parent}", name(l.header), l.depth);
        let _ = writeln!(out, "    blocks     {}", names(&mut l.blocks.iter().copied()));
        let _ = writeln!(out, "    latches    {}", names(&mut l.latches.iter().copied()));
        let _ = writeln!(out, "    exits      {}", edges(&l.exits));
        let _ = writeln!(out, "    preheader  {}", names(&mut l.preheader.into_iter()));
    }
    if !loops.irreducible_edges().is_empty() {
        let _ = writeln!(out, "irreducible edges {}", edges(loops.irreducible_edges()));
    }
    out
}
