//! Shadows: the metadata of a value with several roots travels with the value, in shadow
//! registers of each register on its way (GPUArmor's "BB1/BB2" moves). The stage numbers
//! the shadows after the roots ([`ShadowPlan`]); the code of each move is [`shadow_move`].

use std::collections::{BTreeMap, BTreeSet};

use gpusan_ptx::cfg::InstId;
use gpusan_ptx::dataflow::RegId;

use super::plan::{Root, Shadow, BLOCK_META_BYTES};
use super::sites::SitePlan;

/// The shadows of a function: one number per register on the way from several roots to an
/// address, after the roots' numbers (the same registers as a root's).
#[derive(Debug, Default)]
pub(super) struct ShadowPlan {
    /// The first shadow number: the number of roots.
    pub(super) first: usize,
    /// Each register's shadow number.
    pub(super) number: BTreeMap<RegId, usize>,
    /// After each definition (instruction, register it defines), what that register's
    /// shadow becomes.
    pub(super) moves: BTreeMap<(InstId, RegId), Shadow>,
    /// Registers read before any definition (`.reg` parameters): their shadow is their
    /// root's on entry.
    pub(super) on_entry: BTreeSet<RegId>,
}

/// Numbers the shadows of the carried accesses of `sites`, and points each carried access
/// at its address's shadow.
pub(super) fn run(sites: &mut SitePlan) -> ShadowPlan {
    let mut plan = ShadowPlan { first: sites.roots.len(), ..ShadowPlan::default() };
    for carried in std::mem::take(&mut sites.carried) {
        let first = plan.first;
        let numbers = &mut plan.number;
        let mut number = |r: RegId| {
            let n = first + numbers.len();
            *numbers.entry(r).or_insert(n)
        };
        sites.sites[carried.site].accesses[carried.access].root = number(carried.address);
        for (d, r, shadow) in carried.carriers.moves {
            number(r);
            if let Shadow::Copy(x) | Shadow::Select(Some(x), _, _) = shadow {
                number(x);
            }
            if let Shadow::Select(_, Some(x), _) | Shadow::Either(_, x) = shadow {
                number(x);
            }
            if let Shadow::Either(x, _) = shadow {
                number(x);
            }
            plan.moves.entry((d, r)).or_insert(shadow);
        }
        for root in carried.carriers.roots {
            if let Root::Entry(r) = root {
                number(r);
                plan.on_entry.insert(r);
            }
        }
    }
    plan
}

/// Shadow `to` := root `k`'s metadata (the id from its block-lookup slot when it has one),
/// under `guard` when given.
pub(super) fn shadow_copy(to: usize, k: usize, block_slot: Option<usize>, guard: Option<&str>) -> String {
    let g = guard.unwrap_or("");
    let id = match block_slot {
        Some(slot) => {
            format!("{g}ld.shared.u64 %__gs_id{to}, [__gs_meta+{}];\n", BLOCK_META_BYTES as usize * slot + 16)
        }
        None => format!("{g}mov.b64 %__gs_id{to}, %__gs_id{k};\n"),
    };
    format!("\t{g}mov.b64 %__gs_low{to}, %__gs_low{k};\n\t{g}mov.b64 %__gs_lim{to}, %__gs_lim{k};\n\t{id}")
}

/// The code of one shadow move into shadow `to`; `root` gives a root's number and block
/// slot, `shadow` a register's shadow number. A guarded `selp` or two-pointer `add` would
/// need two predicates (never seen from nvcc): where its guard holds, the shadow becomes
/// "found nowhere", so the value's accesses go unchecked rather than judged against the
/// shadow of the value it replaced.
pub(super) fn shadow_move(
    to: usize,
    shadow: &Shadow,
    guard: Option<&gpusan_ptx::ast::Guard>,
    root: &dyn Fn(&Root) -> (usize, Option<usize>),
    shadow_of: &dyn Fn(RegId) -> usize,
) -> String {
    let g = guard.map(|g| format!("@{}{} ", if g.negated { "!" } else { "" }, g.reg));
    let g = g.as_deref();
    let nothing = |g: &str| format!("\t{g}mov.b64 %__gs_low{to}, 0;\n\t{g}mov.b64 %__gs_lim{to}, -1;\n");
    match shadow {
        Shadow::Root(r) => {
            let (k, slot) = root(r);
            shadow_copy(to, k, slot, g)
        }
        Shadow::Copy(x) => shadow_copy(to, shadow_of(*x), None, g),
        Shadow::Nothing => nothing(g.unwrap_or("")),
        Shadow::Either(..) | Shadow::Select(..) if g.is_some() => nothing(g.unwrap_or("")),
        Shadow::Either(a, b) => {
            let (a, b) = (shadow_of(*a), shadow_of(*b));
            // Found: the limit of "found nowhere" is the top of the address space.
            let mut t = format!("\tsetp.ne.u64 %__gs_q, %__gs_lim{a}, -1;\n");
            t.push_str(&shadow_copy(to, b, None, Some("@!%__gs_q ")));
            t.push_str(&shadow_copy(to, a, None, Some("@%__gs_q ")));
            t
        }
        Shadow::Select(a, b, p) => {
            let side = |x: &Option<RegId>, pred: String| match x {
                Some(x) => shadow_copy(to, shadow_of(*x), None, Some(&pred)),
                None => nothing(&pred),
            };
            // `a`'s shadow when `p`, else `b`'s: one of the two runs, so `selp r, r, b, p`
            // (its own register on one side) reads that shadow before anything changes it.
            let mut t = side(b, format!("@!{p} "));
            t.push_str(&side(a, format!("@{p} ")));
            t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_moves_follow_the_value() {
        let no_root = |_: &Root| -> (usize, Option<usize>) { unreachable!("no root in these moves") };
        // Shadows 5 and 6 belong to registers 1 and 2.
        let shadow_of = |r: RegId| 4 + r.0 as usize;
        let (a, b) = (RegId(1), RegId(2));
        // selp: each side's shadow under its predicate.
        let t = shadow_move(9, &Shadow::Select(Some(a), Some(b), "%p1".into()), None, &no_root, &shadow_of);
        assert!(
            t.contains("@%p1 mov.b64 %__gs_lim9, %__gs_lim5;") && t.contains("@!%p1 mov.b64 %__gs_lim9, %__gs_lim6;"),
            "{t}"
        );
        // A pointer plus a loaded offset: the shadow the table found something for.
        let t = shadow_move(9, &Shadow::Either(a, b), None, &no_root, &shadow_of);
        assert!(t.starts_with("\tsetp.ne.u64 %__gs_q, %__gs_lim5, -1;\n"), "{t}");
        assert!(
            t.contains("@%__gs_q mov.b64 %__gs_low9, %__gs_low5;")
                && t.contains("@!%__gs_q mov.b64 %__gs_low9, %__gs_low6;"),
            "{t}"
        );
        // Guarded, they would need two predicates: found nowhere where the guard holds (the
        // register's old shadow would judge the new value against the wrong allocation).
        let guard = gpusan_ptx::ast::Guard { negated: true, reg: "%p2".into() };
        for shadow in [Shadow::Select(Some(a), Some(b), "%p1".into()), Shadow::Either(a, b)] {
            let t = shadow_move(9, &shadow, Some(&guard), &no_root, &shadow_of);
            assert_eq!(t, "\t@!%p2 mov.b64 %__gs_low9, 0;\n\t@!%p2 mov.b64 %__gs_lim9, -1;\n");
        }
        // Pointer arithmetic under a guard copies under it.
        let t = shadow_move(9, &Shadow::Copy(a), Some(&guard), &no_root, &shadow_of);
        assert_eq!(t.matches("@!%p2 mov.b64").count(), 3, "{t}");
    }
}
