//! The code of one checked instruction (a *site*): MEMCHECK of each access, the fast path
//! behind its groups, the slow path that reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpusan_ptx::ast::{Name, Operand, Span, Statement};
use gpusan_ptx::semantics::Space;

use super::config::Reaction;
use super::plan::{Align, Layout};
use super::records::{access_code, fill_record_into, label_name, record_len, stop_label, Blame, Record};
use super::regs::RegBits;
use super::sites::{Access, Site};
use super::{counting, heap, onchip, snippet, spans};
use gpusan_abi::record;
use gpusan_abi::table::STATE_LIVE;

/// What one site gets: `before` goes before the instruction, `after` right after it (the
/// label a faulting access skips to), `slow` (reporting, then the skip) where it runs only
/// when branched to.
pub(super) struct SiteCode {
    pub(super) before: Vec<Statement>,
    pub(super) after: Vec<Statement>,
    pub(super) slow: SlowPath,
}

/// A site's slow path as what it is made of (its labels, its checks' text, its records'
/// fields), turned into statements by [`SlowPath::emit_into`] only where it goes. A slow
/// path is some 45 statements of 96 bytes an access and this a tenth of that: a large
/// kernel's slow paths (the tail of its body) held as statements until the body was
/// rebuilt were as large as that body, both alive at once (1.4 GB for 50,000 blocks).
#[derive(Default)]
pub(super) struct SlowPath {
    pieces: Vec<Piece>,
    /// The statements it becomes.
    len: usize,
}

enum Piece {
    Label(Name),
    /// PTX text the pass wrote, one statement a line.
    Text(Box<str>),
    Record {
        record: Record,
        abort: bool,
        skip: Name,
        end: Name,
    },
}

impl SlowPath {
    fn label(&mut self, label: Name) {
        self.pieces.push(Piece::Label(label));
        self.len += 1;
    }

    fn text(&mut self, text: &str) {
        self.len += memchr::memchr_iter(b'\n', text.as_bytes()).count();
        self.pieces.push(Piece::Text(text.into()));
    }

    fn record(&mut self, record: Record, stop: Option<String>, skip: &str) {
        let skip = label_name(skip);
        let end = stop.as_deref().map_or(skip, label_name);
        let abort = stop.is_some();
        self.len += record_len(record.blame, abort);
        self.pieces.push(Piece::Record { record, abort, skip, end });
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The number of statements [`SlowPath::emit_into`] pushes.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Its statements, pushed onto `out`.
    pub(super) fn emit_into(&self, out: &mut Vec<Statement>) {
        let start = out.len();
        for piece in &self.pieces {
            match piece {
                Piece::Label(l) => out.push(Statement::Label(*l, Span::NONE)),
                Piece::Text(t) => snippet::parse_into(t, out),
                Piece::Record { record, abort, skip, end } => fill_record_into(record, *abort, *skip, *end, out),
            }
        }
        debug_assert_eq!(out.len() - start, self.len, "a slow path's length is known before it is written");
    }
}

/// What the code of every site of a function shares.
pub(super) struct SiteGen<'a> {
    pub(super) layout: Layout,
    pub(super) reaction: Reaction,
    pub(super) emit: counting::Emit,
    pub(super) function: u32,
    pub(super) block_roots: &'a BTreeMap<usize, (Name, i64)>,
    pub(super) reg_bits: RegBits,
}

impl SiteGen<'_> {
    /// A skipped instruction's destination registers set to 0. Left as they were, they would
    /// carry their value from before (the previous iteration of a loop) into the code after,
    /// and ptxas would have to keep every loaded value alive across the loop's back edge:
    /// an unrolled SGEMM body then needs over 100 registers instead of 32.
    fn zero_destinations(&self, site: &Site, inst: &gpusan_ptx::ast::Instruction) -> String {
        let addresses: Vec<usize> =
            site.accesses.iter().map(|a| a.operand).chain(site.windows.iter().map(|c| c.operand)).collect();
        if addresses.contains(&0) {
            return String::new();
        }
        let regs: Vec<Name> = match inst.operands.first() {
            Some(Operand::Name(n)) if n.starts_with('%') => vec![*n],
            Some(Operand::Vector(v)) => {
                v.iter().filter_map(|o| if let Operand::Name(n) = o { Some(*n) } else { None }).collect()
            }
            _ => Vec::new(),
        };
        let mut t = String::new();
        for r in regs {
            if let Some(bits) = self.reg_bits.get(r) {
                let _ = writeln!(t, "\tmov.b{bits} {r}, 0;");
            }
        }
        t
    }

    /// The checks of `site`: `groups` are the groups covering every access (the fast path
    /// when all passed; empty for none). With `inline`, the slow path is in `before`,
    /// jumped over when no access is bad, and `slow` is empty.
    pub(super) fn code(
        &self,
        site: &Site,
        inst: &gpusan_ptx::ast::Instruction,
        groups: &[usize],
        line: u32,
        inline: bool,
        label: &mut dyn FnMut() -> String,
    ) -> SiteCode {
        let guard = &inst.guard;
        let mut text = String::with_capacity(512);
        // The guard as a positive predicate: an access that does not run is not judged.
        if let Some(g) = guard {
            let op = if g.negated { "not" } else { "mov" };
            let _ = writeln!(text, "\t{op}.pred %__gs_g, {};", g.reg);
        }
        // The fast path: the groups' range checks passed, so the access's own are jumped over.
        let fast = label();
        if !groups.is_empty() {
            text.push_str(&spans::enter_text(groups, &fast));
        }
        // Past the fast path: the access's own checks run.
        text.push_str(
            &self.emit.bump(&[(counting::Counter::Check, (site.accesses.len() + site.windows.len()) as u32)]),
        );
        // The check: `%__gs_any` when some access of the instruction is bad.
        let mut first = true;
        let mut any = |text: &mut String| {
            text.push_str(if first {
                "\tmov.pred %__gs_any, %__gs_bad;\n"
            } else {
                "\tor.pred %__gs_any, %__gs_any, %__gs_bad;\n"
            });
            first = false;
        };
        let address = |operand: usize| inst.operands[operand].as_address().expect("a checked access has an address");
        for &Access { operand, width: w, space, root: k, align, .. } in &site.accesses {
            access_check(self.layout, k, address(operand), (w, Align::of(align)), space, &mut text);
            any(&mut text);
        }
        for c in &site.windows {
            text.push_str(&onchip::check_text(c));
            any(&mut text);
        }
        if guard.is_some() {
            text.push_str("\tand.pred %__gs_any, %__gs_any, %__gs_g;\n");
        }
        let mut before = snippet::parse(&text);
        // The slow path: each access judged again and reported, then the instruction skipped.
        let (slow_label, skip) = (label(), label());
        let mut slow = SlowPath::default();
        slow.label(label_name(&slow_label));
        let guarded = if guard.is_some() { "\tand.pred %__gs_bad, %__gs_bad, %__gs_g;\n" } else { "" };
        // One buffer for every access's check, rather than a string each.
        let mut check = String::with_capacity(512);
        for &Access { operand, width: w, space, kind, root: k, align } in &site.accesses {
            check.clear();
            access_check(self.layout, k, address(operand), (w, Align::of(align)), space, &mut check);
            check.push_str(guarded);
            slow.text(&check);
            let block_slot = self.block_roots.keys().position(|&b| b == k);
            let record = Record {
                blame: Blame::Root { k, layout: self.layout, block_slot },
                width: w,
                align_mask: Align::of(align).mask,
                line,
                function: self.function,
                space: if space == Space::Generic { record::SPACE_GENERIC } else { record::SPACE_GLOBAL },
                access: access_code(kind),
            };
            let (done, stop) = (label(), stop_label(self.reaction, label));
            slow.record(record, stop, &done);
        }
        for c in &site.windows {
            check.clear();
            check.push_str(&onchip::check_text(c));
            check.push_str(guarded);
            slow.text(&check);
            let record = Record {
                blame: Blame::Window(c.code(), c.frame_object()),
                width: c.width,
                align_mask: c.align.mask,
                line,
                function: self.function,
                space: c.record_space(),
                access: access_code(c.kind),
            };
            let (done, stop) = (label(), stop_label(self.reaction, label));
            slow.record(record, stop, &done);
        }
        check.clear();
        if site.accesses.is_empty() && site.windows.iter().all(onchip::WindowCheck::runs_anyway) {
            // Reported, and the instruction runs as it would have.
            let _ = writeln!(check, "\tbra.uni {fast};");
        } else {
            check.push_str(&self.zero_destinations(site, inst));
            let _ = writeln!(check, "\tbra.uni {skip};");
        }
        slow.text(&check);
        let slow = if inline {
            snippet::parse_into(&format!("\t@!%__gs_any bra {fast};\n"), &mut before);
            before.reserve(slow.len());
            slow.emit_into(&mut before);
            SlowPath::default()
        } else {
            snippet::parse_into(&format!("\t@%__gs_any bra {slow_label};\n"), &mut before);
            slow
        };
        before.push(Statement::Label(label_name(&fast), Span::NONE));
        SiteCode { before, after: vec![Statement::Label(label_name(&skip), Span::NONE)], slow }
    }
}

/// MEMCHECK of one access through `address` (register and constant offset) against root
/// `k`, `w` bytes wide and aligned as `align` says: `%__gs_a` is its first byte,
/// `%__gs_bad` whether it is bad. A generic access is judged against the root only inside
/// the global window, and for its alignment in every window (a misaligned access faults
/// wherever it goes). Appended to `t`.
pub(super) fn access_check(
    layout: Layout,
    k: usize,
    address: (Option<Name>, i64),
    (w, align): (u32, Align),
    space: Space,
    t: &mut String,
) {
    let (base, offset) = address;
    let base = base.expect("a checked access has a base register");
    if layout == Layout::Heap {
        t.push_str(&heap::reload_state(k));
    }
    if offset == 0 {
        let _ = writeln!(t, "\tmov.b64 %__gs_a, {base};");
    } else {
        let _ = writeln!(t, "\tadd.s64 %__gs_a, {base}, {offset};");
    }
    let _ = write!(
        t,
        "\tadd.s64 %__gs_e, %__gs_a, {w};\n\
         \tsetp.lt.u64 %__gs_bad, %__gs_a, %__gs_low{k};\n\
         \tsetp.gt.or.u64 %__gs_bad, %__gs_e, %__gs_lim{k}, %__gs_bad;\n"
    );
    if layout == Layout::Heap {
        let _ = write!(
            t,
            "\tsetp.ge.u64 %__gs_q, %__gs_a, %__gs_base{k};\n\
             \tsetp.ne.and.u32 %__gs_q, %__gs_st{k}, {STATE_LIVE}, %__gs_q;\n\
             \tor.pred %__gs_bad, %__gs_bad, %__gs_q;\n\
             \tand.pred %__gs_bad, %__gs_bad, %__gs_ok{k};\n"
        );
    }
    if space == Space::Generic {
        t.push_str("\tisspacep.global %__gs_q, %__gs_a;\n\tand.pred %__gs_bad, %__gs_bad, %__gs_q;\n");
    }
    t.push_str(&align.text("%__gs_a", "%__gs_bad", true));
}
