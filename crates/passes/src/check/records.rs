//! Error records: the code that writes one record of the error buffer
//! ([`gpusan_abi::record`]) when an access is bad.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use gpusan_abi::record::{self, ACCESS, ADDRESS, ALLOCATION, BLOCK, CODE, KERNEL, PTX_LINE, SIZE, SPACE, THREAD};
use gpusan_abi::table::STATE_LIVE;
use gpusan_abi::{Field, CODE_MISALIGNED, CODE_OUT_OF_BOUNDS, CODE_USE_AFTER_FREE, ERRORS_SYMBOL, MODULE_SYMBOL};
use gpusan_ptx::ast::{Name, Operand, Statement};
use gpusan_ptx::semantics::AccessKind;

use super::config::Reaction;
use super::plan::{Layout, BLOCK_META_BYTES, DEAD_BIT};
use super::snippet;

// The writers store each field at its width: `u64` address and allocation, `u32` the
// rest (three of them for block and thread), `u32` count and capacity in the header.
const _: () = assert!(ADDRESS.bytes == 8 && ALLOCATION.bytes == 8 && BLOCK.bytes == 3 * 4 && THREAD.bytes == 3 * 4);
const _: () = assert!(KERNEL.bytes == 4 && CODE.bytes == 4 && SIZE.bytes == 4 && PTX_LINE.bytes == 4);
const _: () = assert!(SPACE.bytes == 4 && ACCESS.bytes == 4 && record::COUNT.bytes == 4 && record::CAPACITY.bytes == 4);

/// A record's [`record::ACCESS`] for an access kind.
pub(super) fn access_code(kind: AccessKind) -> u32 {
    match kind {
        AccessKind::Read => record::ACCESS_READ,
        AccessKind::Write => record::ACCESS_WRITE,
        _ => record::ACCESS_ATOMIC,
    }
}

/// Where a field of the record being written lies from `%__gs_r`, which holds the buffer's
/// address plus [`record::RECORD_BYTES`] times the record's index: past the buffer's header.
pub(super) const fn field(f: Field) -> usize {
    record::HEADER_BYTES + f.offset
}

/// A memory operand `[reg+offset]`, as PTX writes it without an offset of 0.
pub(super) fn memory_operand(reg: &str, offset: usize) -> String {
    match offset {
        0 => format!("[{reg}]"),
        _ => format!("[{reg}+{offset}]"),
    }
}

/// The start of every record writer: the buffer's address into `%__gs_eb` (on to `full`
/// when the runtime set none), on to `full` when the buffer is full already, a record
/// claimed (`i = atom.add(count, 1)`), on to `full` when `i` is past the capacity, and
/// record `i`'s address less the header into `%__gs_r` (so fields lie at [`field`]). `q` is
/// the predicate register it may clobber.
///
/// The buffer is mapped host memory: every atomic crosses PCIe, and a kernel whose every
/// thread errs (a freed buffer read whole) would queue millions of them on one address
/// (seen through the binary route's patch on the H100: minutes for 16M threads). Once the
/// buffer is full a plain read of the count, one per warp (the lanes' loads of one address
/// coalesce), ends the writer: errors past the capacity until the next drain are then not
/// counted, and the report says the buffer filled.
pub(super) fn claim_text(q: &str, full: &str) -> String {
    format!(
        "\tld.global.u64 %__gs_eb, [{ERRORS_SYMBOL}];\n\
         \tsetp.eq.u64 {q}, %__gs_eb, 0;\n\
         \t@{q} bra {full};\n\
         \tld.global.u32 %__gs_c, {capacity};\n\
         \tld.volatile.global.u32 %__gs_i, {count};\n\
         \tsetp.ge.u32 {q}, %__gs_i, %__gs_c;\n\
         \t@{q} bra {full};\n\
         \tatom.global.add.u32 %__gs_i, {count}, 1;\n\
         \tsetp.ge.u32 {q}, %__gs_i, %__gs_c;\n\
         \t@{q} bra {full};\n\
         \tmul.wide.u32 %__gs_r, %__gs_i, {bytes};\n\
         \tadd.s64 %__gs_r, %__gs_eb, %__gs_r;\n",
        count = memory_operand("%__gs_eb", record::COUNT.offset),
        capacity = memory_operand("%__gs_eb", record::CAPACITY.offset),
        bytes = record::RECORD_BYTES,
    )
}

/// The record's [`KERNEL`]: this module's number (`__gpusan_module`) above `function`.
pub(super) fn kernel_text(function: &str) -> String {
    format!(
        "\tld.global.u32 %__gs_k, [{MODULE_SYMBOL}];\n\
         \tshl.b32 %__gs_k, %__gs_k, {bits};\n\
         \tor.b32 %__gs_k, %__gs_k, {function};\n\
         \tst.global.u32 [%__gs_r+{at}], %__gs_k;\n",
        bits = record::FUNCTION_BITS,
        at = field(KERNEL),
    )
}

/// Whom an error record blames, and so its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Blame {
    /// The allocation of root number `k`: its id, and out of bounds or use after free as
    /// the entry's state says. A root of the block-wide lookup has its id in that slot of
    /// `__gs_meta`, not in a register.
    Root { k: usize, layout: Layout, block_slot: Option<usize> },
    /// A shared or local variable: this code, and as the allocation the word saying which
    /// local object it is ([`gpusan_abi::record::FrameObject`]), 0 for none.
    Window(u32, u64),
}

/// The fields of an error record known when instrumenting.
#[derive(Clone, Copy)]
pub(super) struct Record {
    pub(super) blame: Blame,
    pub(super) width: u32,
    /// The low bits of the address that must be 0 (the access's alignment less one): when
    /// some is set, the record's code is [`CODE_MISALIGNED`] whatever else is wrong, as it
    /// is what the hardware would fault on.
    pub(super) align_mask: u32,
    pub(super) line: u32,
    pub(super) function: u32,
    pub(super) space: u32,
    pub(super) access: u32,
}

/// The label the record's writer ends at before `trap` under [`Reaction::Abort`]; none
/// (the skip label) under [`Reaction::Report`].
pub(super) fn stop_label(reaction: Reaction, label: &mut dyn FnMut() -> String) -> Option<String> {
    (reaction == Reaction::Abort).then(label)
}

/// Stores of an error record's [`BLOCK`] and [`THREAD`] (`%ctaid` and `%tid`, x, y, z),
/// shared by every record writer: written once, for every writer of every module.
pub(super) fn record_where() -> &'static str {
    static WHERE: LazyLock<String> = LazyLock::new(|| {
        let mut t = String::new();
        for (f, sreg) in [(BLOCK, "%ctaid"), (THREAD, "%tid")] {
            for (d, dim) in ["x", "y", "z"].into_iter().enumerate() {
                let at = field(f) + 4 * d;
                let _ = write!(t, "\tmov.u32 %__gs_k, {sreg}.{dim};\n\tst.global.u32 [%__gs_r+{at}], %__gs_k;\n");
            }
        }
        t
    });
    &WHERE
}

/// [`fill_record_into`] with the labels as the pass writes them.
#[cfg(test)]
pub(super) fn report_record_into(
    r: &Record,
    reaction: Reaction,
    stop: &Option<String>,
    skip: &str,
    out: &mut Vec<Statement>,
) {
    debug_assert_eq!(stop.is_some(), reaction == Reaction::Abort);
    let skip = label_name(skip);
    let end = stop.as_deref().map_or(skip, label_name);
    fill_record_into(r, stop.is_some(), skip, end, out);
}

/// Writes one error record when `%__gs_bad` holds: `i = atom.add(count, 1)`, and if
/// `i < capacity`, record `i` ([`record::record_offset`]; bench/injection/abi_test.cpp
/// writes the same), every field of it. Under
/// [`Reaction::Abort`] every bad access then reaches `end` (the stop label) and traps, stored or not (no
/// runtime, or a full buffer).
///
/// Every checked access gets one, some 40 lines, and they differ only in their labels and
/// numbers: each kind of record ([`record_text`]) is a [`snippet::Template`], parsed once
/// per thread and then filled, rather than written and parsed line by line.
///
/// `skip` is the label the access skips to; `end` the one the writer ends at: the stop
/// label with `abort`, else `skip`.
pub(super) fn fill_record_into(r: &Record, abort: bool, skip: Name, end: Name, out: &mut Vec<Statement>) {
    let int = |v: u32| Operand::Int(gpusan_ptx::ast::IntLit::dec(v.into()));
    let Record { blame, width, align_mask, line, function, space, access } = *r;
    let values = [
        Operand::Name(skip),
        Operand::Name(end),
        int(function),
        int(width),
        int(line),
        int(space),
        int(access),
        int(align_mask),
    ];
    RECORDS.with(|records| {
        let mut records = records.borrow_mut();
        // Kinds are few (a function's roots, block slots, window codes), but bounded all
        // the same for a process that instruments module after module.
        if records.len() >= MAX_RECORD_KINDS {
            records.clear();
        }
        records
            .entry((blame, abort))
            .or_insert_with(|| snippet::Template::new(&record_text(blame, abort)))
            .fill_into(&values, out)
    });
}

/// The number of statements [`fill_record_into`] writes for a record of `blame`.
pub(super) fn record_len(blame: Blame, abort: bool) -> usize {
    RECORDS.with(|records| {
        let mut records = records.borrow_mut();
        if records.len() >= MAX_RECORD_KINDS {
            records.clear();
        }
        records.entry((blame, abort)).or_insert_with(|| snippet::Template::new(&record_text(blame, abort))).len()
    })
}

/// Record kinds kept by [`fill_record_into`].
pub(super) const MAX_RECORD_KINDS: usize = 1024;

thread_local! {
    static RECORDS: std::cell::RefCell<HashMap<(Blame, bool), snippet::Template>> = std::cell::RefCell::new(HashMap::new());
}

/// What every record writer's text has around its allocation and code, with the holes of
/// [`record_text`], written once: before the allocation (the skip, the claim, the address),
/// between it and the code (the kernel), and after the code.
static RECORD_FIXED: LazyLock<(String, String, String)> = LazyLock::new(|| {
    let head = format!(
        "\t@!%__gs_bad bra __gs_hole0;\n\
         {claim}\
         \tst.global.u64 [%__gs_r+{address}], %__gs_a;\n",
        claim = claim_text("%__gs_q", "__gs_hole1"),
        address = field(ADDRESS),
    );
    let tail = format!(
        "\tst.global.u32 [%__gs_r+{size}], __gs_hole3;\n\
         \tst.global.u32 [%__gs_r+{line}], __gs_hole4;\n\
         {where}\
         \tst.global.u32 [%__gs_r+{space}], __gs_hole5;\n\
         \tst.global.u32 [%__gs_r+{access}], __gs_hole6;\n",
        size = field(SIZE),
        line = field(PTX_LINE),
        where = record_where(),
        space = field(SPACE),
        access = field(ACCESS),
    );
    (head, kernel_text("__gs_hole2"), tail)
});

/// The text of an error record's writer for `blame`, with holes ([`snippet::Template`]):
/// 0 the skip label, 1 the label it ends at when stored (the stop label with `abort`, else
/// the skip label), 2 the function's index, 3 the access's width, 4 its line, 5 its space,
/// 6 its kind, 7 its alignment mask ([`Record::align_mask`]).
pub(super) fn record_text(blame: Blame, abort: bool) -> String {
    let (at_allocation, at_code) = (field(ALLOCATION), field(CODE));
    let (alloc, code) = match blame {
        Blame::Root { k, layout: Layout::Folded, block_slot } => {
            let id = match block_slot {
                Some(slot) => {
                    format!("\tld.shared.u64 %__gs_x, [__gs_meta+{}];\n", BLOCK_META_BYTES as usize * slot + 16)
                }
                None => format!("\tmov.b64 %__gs_x, %__gs_id{k};\n"),
            };
            (
                format!(
                    "{id}\tand.b64 %__gs_y, %__gs_x, {:#x};\n\tst.global.u64 [%__gs_r+{at_allocation}], %__gs_y;\n",
                    !DEAD_BIT
                ),
                format!(
                    "\tsetp.lt.s64 %__gs_q, %__gs_x, 0;\n\
                     \tselp.u32 %__gs_k, {CODE_USE_AFTER_FREE}, {CODE_OUT_OF_BOUNDS}, %__gs_q;\n"
                ),
            )
        }
        Blame::Root { k, layout: Layout::Heap, .. } => (
            format!("\tst.global.u64 [%__gs_r+{at_allocation}], %__gs_id{k};\n"),
            format!(
                "\tsetp.ne.u32 %__gs_q, %__gs_st{k}, {STATE_LIVE};\n\
                 \tselp.u32 %__gs_k, {CODE_USE_AFTER_FREE}, {CODE_OUT_OF_BOUNDS}, %__gs_q;\n"
            ),
        ),
        Blame::Window(window_code, object) => (
            format!("\tst.global.u64 [%__gs_r+{at_allocation}], {object};\n"),
            format!("\tmov.u32 %__gs_k, {window_code};\n"),
        ),
    };
    // A misaligned address is what the hardware faults on: that is the record's code.
    let code = format!(
        "{code}\tcvt.u32.u64 %__gs_c, %__gs_a;\n\
         \tand.b32 %__gs_c, %__gs_c, __gs_hole7;\n\
         \tsetp.ne.u32 %__gs_q, %__gs_c, 0;\n\
         \tselp.u32 %__gs_k, {CODE_MISALIGNED}, %__gs_k, %__gs_q;\n\
         \tst.global.u32 [%__gs_r+{at_code}], %__gs_k;\n"
    );
    let fixed = &*RECORD_FIXED;
    let mut t = format!("{head}{alloc}{kernel}{code}{tail}", head = fixed.0, kernel = fixed.1, tail = fixed.2);
    if abort {
        t.push_str("__gs_hole1:\n\tmembar.sys;\n\ttrap;\n");
    }
    t.push_str("__gs_hole0:\n");
    t
}

/// The name of a label the pass wrote (`$__gs_L{n}`). Interning a string takes the
/// interner's global lock, and every function numbers its labels from 0 again, so each
/// thread interns label `n` once and keeps its name.
pub(super) fn label_name(label: &str) -> Name {
    thread_local! {
        static LABELS: std::cell::RefCell<Vec<Name>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // Only the digits `label()` writes: no sign, no leading zero.
    let canonical = |d: &&str| d.bytes().all(|b| b.is_ascii_digit()) && (d == &"0" || !d.starts_with('0'));
    let Some(n) = label.strip_prefix("$__gs_L").filter(canonical).and_then(|d| d.parse::<usize>().ok()) else {
        return Name::from(label);
    };
    LABELS.with(|names| {
        let mut names = names.borrow_mut();
        while names.len() <= n {
            let next = Name::from(format!("$__gs_L{}", names.len()).as_str());
            names.push(next);
        }
        names[n]
    })
}

/// The offsets from `%__gs_r` of a writer's stores, in order: what the tests of every
/// record writer compare with [`every_field`].
#[cfg(test)]
pub(super) fn stored_offsets(text: &str) -> Vec<usize> {
    text.match_indices("st.global.")
        .filter_map(|(i, _)| text[i..].lines().next()?.split_once("[%__gs_r+").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once(']').and_then(|(n, _)| n.parse().ok()))
        .collect()
}

/// Every `u32` and `u64` of a record in the layout's order, from `%__gs_r`.
#[cfg(test)]
pub(super) fn every_field() -> Vec<usize> {
    record::FIELDS
        .iter()
        .flat_map(|f| {
            let unit = if f.bytes == 12 { 4 } else { f.bytes };
            (0..f.bytes / unit).map(move |i| field(*f) + unit * i)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of error record, filled from its template, is its text with the labels
    /// and numbers written in, parsed.
    #[test]
    fn records_from_templates_are_their_text() {
        let blames = [
            Blame::Root { k: 2, layout: Layout::Folded, block_slot: None },
            Blame::Root { k: 0, layout: Layout::Folded, block_slot: Some(3) },
            Blame::Root { k: 5, layout: Layout::Heap, block_slot: None },
            Blame::Window(7, 0),
        ];
        for blame in blames {
            for reaction in [Reaction::Report, Reaction::Abort] {
                let r = Record { blame, width: 8, align_mask: 7, line: 1234, function: 3, space: 0, access: 1 };
                let stop = (reaction == Reaction::Abort).then(|| "$__gs_L9".to_string());
                // Twice: built, then from the kept template.
                for _ in 0..2 {
                    let mut got = Vec::new();
                    report_record_into(&r, reaction, &stop, "$__gs_L8", &mut got);
                    let text = record_text(blame, stop.is_some())
                        .replace("__gs_hole0", "$__gs_L8")
                        .replace("__gs_hole1", stop.as_deref().unwrap_or("$__gs_L8"))
                        .replace("__gs_hole2", "3")
                        .replace("__gs_hole3", "8")
                        .replace("__gs_hole4", "1234")
                        .replace("__gs_hole5", "0")
                        .replace("__gs_hole6", "1")
                        .replace("__gs_hole7", "7");
                    assert_eq!(got, snippet::parse(&text), "{blame:?} {reaction:?}");
                }
            }
        }
    }

    /// Each kind of writer stores every field of the record once, where the ABI puts it.
    #[test]
    fn records_fill_every_field_of_the_layout() {
        let mut want = every_field();
        want.sort();
        assert_eq!(want.len(), 14);
        for blame in [
            Blame::Root { k: 2, layout: Layout::Folded, block_slot: None },
            Blame::Root { k: 0, layout: Layout::Folded, block_slot: Some(3) },
            Blame::Root { k: 5, layout: Layout::Heap, block_slot: None },
            Blame::Window(7, 0),
        ] {
            let text = record_text(blame, false);
            let mut got = stored_offsets(&text);
            got.sort();
            assert_eq!(got, want, "{blame:?}:\n{text}");
            assert!(text.contains(&format!("mul.wide.u32 %__gs_r, %__gs_i, {};", record::RECORD_BYTES)));
        }
    }

    #[test]
    fn label_names_are_the_labels() {
        for l in ["$__gs_L7", "$__gs_L0", "$__gs_L12", "$__gs_L7", "$__gs_Lx", "$__gs_L007", "$__gs_L+3", "$__gs_L"] {
            assert_eq!(label_name(l).as_str(), l);
        }
    }
}
