//! Dynamic check counters, for measurement builds ([`Counting::Dynamic`]): how many checks
//! the optimizations (`groups`, `spans`, statically in-bounds on-chip accesses) remove from
//! what runs, which static counts cannot tell (a group check after a loop-invariant
//! definition replaces one check per iteration).
//!
//! The module gets four more variables next to the device ABI's, which the runtime reads
//! back at synchronizations and at exit ([`gpusan_abi::COUNTER_SYMBOLS`], in this order):
//!
//! ```ptx
//! .visible .global .align 8 .u64 __gpusan_n_access; // checks a naive checker would run
//! .visible .global .align 8 .u64 __gpusan_n_check;  // per-access checks that ran
//! .visible .global .align 8 .u64 __gpusan_n_group;  // group range checks that ran
//! .visible .global .align 8 .u64 __gpusan_n_span;   // entries into a two-version run
//! ```
//!
//! All count per thread that reaches the point, whatever the access's guard (the checks
//! run whatever the guard too, and-ed with it):
//!
//! - `n_access` counts one per check a naive checker makes: each checked global or generic
//!   access (one per root), each on-chip access checked against its variable, each
//!   use-after-scope check, and each statically in-bounds on-chip access (no code of its
//!   own now, one check without the optimization). Counted before the instruction, or at
//!   the entry of the run holding it (both versions of a run hold the same accesses).
//! - `n_check` counts the per-access checks that ran: every one of an access without a
//!   fast path, and those of a grouped access or a run only when the fast path was not
//!   taken.
//! - `n_group` counts range checks of a group where they run, after the definition.
//!   Checks other optimizations hoist (loop versioning) count here too: they call
//!   [`bump`] with [`Counter::Group`] where they emit them.
//! - `n_span` counts entries into a run's branch: a branch on group predicates already
//!   computed, like the fast-path branch of one access, so no check.
//!
//! So the dynamic fraction of checks removed is `1 - (n_check + n_group) / n_access`.
//!
//! The increments are aggregated per warp (`activemask`, one `red.global.add.u64` by the
//! highest active lane for the whole mask), which keeps a kernel of millions of threads from
//! serializing on four addresses; modules for targets before `sm_70` (no `activemask`) get
//! one `red` per thread. The counters use registers of their own, so no predicate or value
//! of the checks changes: a counting build reports exactly what a plain build reports.

use gpusan_abi::{N_ACCESS_SYMBOL, N_CHECK_SYMBOL, N_GROUP_SYMBOL, N_SPAN_SYMBOL};

/// Whether the pass also counts, at run time, the checks it emits ([`super::CheckConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Counting {
    /// No counters: the code that checks and nothing else.
    #[default]
    Off,
    /// The four counters of this module, incremented where checks run.
    Dynamic,
}

impl Counting {
    pub fn is_on(self) -> bool {
        self == Counting::Dynamic
    }
}

/// One of the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Counter {
    Access,
    Check,
    Group,
    Span,
}

impl Counter {
    fn symbol(self) -> &'static str {
        match self {
            Counter::Access => N_ACCESS_SYMBOL,
            Counter::Check => N_CHECK_SYMBOL,
            Counter::Group => N_GROUP_SYMBOL,
            Counter::Span => N_SPAN_SYMBOL,
        }
    }
}

/// How the increments are made, by the module's target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Emit {
    pub counting: Counting,
    /// `activemask` exists (`sm_70` on): one `red` per warp.
    pub per_warp: bool,
}

impl Emit {
    /// For a module whose `.target` names `targets`.
    pub fn new(counting: Counting, targets: &[&str]) -> Emit {
        let sm = targets.iter().find_map(|t| t.strip_prefix("sm_")).map(|v| {
            let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().unwrap_or(0)
        });
        Emit { counting, per_warp: sm.is_some_and(|v| v >= 70) }
    }

    /// The registers [`Emit::bump`] uses, declared at the top of each instrumented function.
    pub fn registers(self) -> &'static str {
        match (self.counting, self.per_warp) {
            (Counting::Off, _) => "",
            (Counting::Dynamic, true) => {
                "\t.reg .b32 %__gs_n_mask;\n\t.reg .b32 %__gs_n_lanes;\n\t.reg .b32 %__gs_n_lane;\n\
                 \t.reg .pred %__gs_n_lead;\n\t.reg .b64 %__gs_n_add;\n"
            }
            (Counting::Dynamic, false) => "",
        }
    }

    /// Adds `n` to each named counter for every thread that runs this code; nothing when
    /// counting is off or every `n` is 0.
    pub fn bump(self, counts: &[(Counter, u32)]) -> String {
        let counts: Vec<(Counter, u32)> = counts.iter().copied().filter(|&(_, n)| n > 0).collect();
        if !self.counting.is_on() || counts.is_empty() {
            return String::new();
        }
        let mut t = String::new();
        if !self.per_warp {
            for (c, n) in counts {
                t.push_str(&format!("\tred.global.add.u64 [{}], {n};\n", c.symbol()));
            }
            return t;
        }
        // Every active lane gets the same mask; the highest one adds for all of them.
        t.push_str(
            "\tactivemask.b32 %__gs_n_mask;\n\
             \tpopc.b32 %__gs_n_lanes, %__gs_n_mask;\n\
             \tbfind.u32 %__gs_n_mask, %__gs_n_mask;\n\
             \tmov.u32 %__gs_n_lane, %laneid;\n\
             \tsetp.eq.u32 %__gs_n_lead, %__gs_n_mask, %__gs_n_lane;\n",
        );
        for (c, n) in counts {
            t.push_str(&format!(
                "\tmul.wide.u32 %__gs_n_add, %__gs_n_lanes, {n};\n\t@%__gs_n_lead red.global.add.u64 [{}], %__gs_n_add;\n",
                c.symbol()
            ));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_emits_nothing() {
        let off = Emit::new(Counting::Off, &["sm_90"]);
        assert_eq!(off.bump(&[(Counter::Access, 3)]), "");
        assert_eq!(off.registers(), "");
        let on = Emit::new(Counting::Dynamic, &["sm_90"]);
        assert_eq!(on.bump(&[(Counter::Check, 0)]), "");
    }

    #[test]
    fn per_warp_from_sm_70() {
        assert!(Emit::new(Counting::Dynamic, &["sm_90a"]).per_warp);
        assert!(Emit::new(Counting::Dynamic, &["sm_70", "debug"]).per_warp);
        assert!(!Emit::new(Counting::Dynamic, &["sm_61"]).per_warp);
        let old = Emit::new(Counting::Dynamic, &["sm_61"]).bump(&[(Counter::Group, 1)]);
        assert_eq!(old, "\tred.global.add.u64 [__gpusan_n_group], 1;\n");
        let warp = Emit::new(Counting::Dynamic, &["sm_90"]).bump(&[(Counter::Access, 4), (Counter::Span, 1)]);
        assert!(warp.contains(
            "mul.wide.u32 %__gs_n_add, %__gs_n_lanes, 4;\n\t@%__gs_n_lead red.global.add.u64 [__gpusan_n_access]"
        ));
        assert!(warp.contains("[__gpusan_n_span], %__gs_n_add;"));
        assert_eq!(warp.matches("activemask").count(), 1);
    }
}
