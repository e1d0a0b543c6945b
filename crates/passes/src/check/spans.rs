//! Two versions of a straight run of grouped accesses (loop versioning at the scale of a
//! basic block, cuCatch §4.6's hoisting taken one step further).
//!
//! A grouped access (`groups`) still pays a branch on its group's predicate, and that branch
//! ends the basic block: ptxas can no longer schedule the loads of an unrolled loop body
//! together, which is most of what a shared-memory GEMM loses. A *span* is a run of
//! top-level instructions (and `.loc` lines) holding two or more grouped accesses, and nothing the pass
//! inserts code between (no root definitions, no group definitions, no other checks), no
//! labels, no branches, calls or barriers. It is emitted twice:
//!
//! ```text
//!     @all-groups-passed bra FAST
//!     <the run, every access checked as without spans>
//!     bra.uni END
//! FAST:
//!     <the run as it was>
//! END:
//! ```
//!
//! Sound because each group's predicate is computed right after the only definition of its
//! register that reaches its members (see `groups`), so it is set before the run starts
//! and describes the values the run's accesses use; and the checked version is exactly the
//! code the run would get without this optimization.

use gpusan_ptx::ast::Statement;

use super::plan::Insertion;

/// A run `body[first..=last]` of the function's top-level statements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Span {
    pub first: usize,
    pub last: usize,
    /// (statement index, site number) of each grouped access in it.
    pub sites: Vec<(usize, usize)>,
    /// Every group its accesses need.
    pub groups: Vec<usize>,
}

/// Instructions a span may not hold: control flow and barriers (both versions would have
/// to reach the same barrier instruction).
fn ends_a_run(opcode: &str) -> bool {
    matches!(opcode, "bra" | "brx" | "call" | "ret" | "exit" | "trap" | "brkpt" | "bar" | "barrier" | "setmaxnreg")
}

/// The spans of a body. `site_paths[s]` is site `s`'s path, `site_groups[s]` its groups
/// (empty when it has no fast path); `insertions` are the ones already planned, which
/// must not fall inside a span.
pub(super) fn find(
    body: &[Statement],
    site_paths: &[&[u32]],
    site_groups: &[Vec<usize>],
    insertions: &[Insertion],
) -> Vec<Span> {
    let mut site_at: Vec<Option<usize>> = vec![None; body.len()];
    for (s, p) in site_paths.iter().enumerate() {
        if let [j] = p {
            site_at[*j as usize] = Some(s);
        }
    }
    let mut cut = vec![false; body.len() + 1];
    for ins in insertions {
        if let [j] = ins.at.as_slice() {
            cut[*j as usize] = true;
        }
    }
    let mut spans = Vec::new();
    let mut run: Vec<(usize, usize)> = Vec::new();
    let mut close = |run: &mut Vec<(usize, usize)>| {
        if run.len() >= 2 {
            let mut groups: Vec<usize> = run.iter().flat_map(|&(_, s)| site_groups[s].iter().copied()).collect();
            groups.sort_unstable();
            groups.dedup();
            spans.push(Span { first: run[0].0, last: run.last().unwrap().0, sites: run.clone(), groups });
        }
        run.clear();
    };
    for (j, stmt) in body.iter().enumerate() {
        if cut[j] && !run.is_empty() {
            // Code planned at point `j` (between `j - 1` and `j`) would land inside.
            close(&mut run);
        }
        // `.loc` lines (every `-lineinfo` build has one per source line) go into both
        // versions; labels, declarations and blocks end a run.
        let fits = match stmt {
            Statement::Inst(i) => !ends_a_run(i.opcode.as_str()),
            Statement::Loc(_) => true,
            _ => false,
        };
        match site_at[j] {
            _ if !fits => close(&mut run),
            Some(s) if !site_groups[s].is_empty() => run.push((j, s)),
            Some(_) => close(&mut run),
            None => {}
        }
    }
    close(&mut run);
    spans
}

/// The branch to `fast` when every group in `groups` passed (a span's unchecked version,
/// or one access's fast path).
pub(super) fn enter_text(groups: &[usize], fast: &str) -> String {
    let mut t = String::new();
    match groups {
        [g] => t.push_str(&format!("\t@%__gs_gok{g} bra {fast};\n")),
        _ => {
            t.push_str(&format!("\tmov.pred %__gs_q, %__gs_gok{};\n", groups[0]));
            for g in &groups[1..] {
                t.push_str(&format!("\tand.pred %__gs_q, %__gs_q, %__gs_gok{g};\n"));
            }
            t.push_str(&format!("\t@%__gs_q bra {fast};\n"));
        }
    }
    t
}
