//! The objects inside a function's stack frame (`__local_depotN`): where each local array
//! or struct starts and where the next one does, so that an index past one array that lands
//! in its neighbour is out of bounds ([`super::LocalBounds::Object`]). A leaf of `onchip`.
//!
//! # What the PTX says, and what is read from it
//!
//! nvcc merges a function's locals into one frame, and NVVM lowers each `alloca` to its own
//! base `add.u64 %rd, %SPL, c` (or `%SP`, the generic copy): `c` is where the object starts.
//! Addresses inside the object are made from that base (`&m[1][0]` is `%rd + 32`, an index
//! `%rd + 4*i`), so an access reached from base `c` belongs to the object at `c` (the walk in
//! `onchip::origin` carries `c` along, [`super::Obj`]).
//!
//! An object's end is not written anywhere. It is taken as the next object's start (or the
//! frame's end), which bounds the object by its padding too and never makes it smaller than
//! it is, as long as every start found really is an object's. One can be an interior address
//! instead: LLVM folds a base and a constant offset into one `add %SPL, c+k` in a basic block
//! where the base itself is not needed. So starts are merged back: an object whose base
//! register is used at constant offsets (its initialisation, scalarised fields) reaches at
//! least the last byte so touched, and a start inside that reach is the same object's
//! ([`FrameObjects::of`]). Seen with the pinned nvcc (sm_90, `-O3` and `-G`; the kernels of
//! `tests/fixtures/check/local_layouts.cu`, which `tests/check_cases.rs` holds to this):
//! every base is one `alloca`'s start (`add.u64 %rd, %SPL, c`, and `%SP, c` when the address
//! is also taken generic; once under `-O3`, anew at each use under `-G`), and every interior
//! address is made from it: `&m[1][0]`,
//! `&m[2][0]` walked, passed to a `__noinline__` function, stored in a volatile local or made
//! only in a branch is `base + 32`/`+ 64` or an immediate offset on the access; member
//! pointers and byte walks of a struct, loops unrolled or started mid-array, and pointers
//! one past the end, the same. An interior `&b[2]` passed to a call once came out as
//! `or.b64 %rd, %rd_b, 8` (the base is 16-byte aligned), which the walk reads as an integer:
//! unchecked, never a wrong bound. So all bases are taken as starts, also those only ever
//! accessed at constant offsets (a scalar whose address is taken is an object too), rather
//! than only the bases indexed at run time.
//!
//! What is left: an interior start that no constant-offset access of its object reaches
//! past (an object only ever indexed dynamically, with an interior pointer made in another
//! block) would split it; `gpusan run --local-bounds frame` (for build-time instrumentation
//! `gpusan instrument --local-bounds frame`, or `GPUSAN_LOCAL_BOUNDS=frame` for the ptxas
//! stand-in) goes back to the frame's bounds.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpusan_ptx::ast::{Function, Instruction, Name, Operand, Statement};
use gpusan_ptx::semantics::{address_conversion, memory_accesses, Conversion, Space};

/// The objects of each local variable a function addresses through bases: starts merged as
/// the module doc says, each with its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(in crate::check) struct FrameObjects {
    by_var: HashMap<Name, Vec<(u64, u64)>>,
}

impl FrameObjects {
    /// The objects of `f`'s local variables `sizes` names (frame variables of known size).
    pub(super) fn of(f: &Function, sizes: &HashMap<Name, u64>) -> FrameObjects {
        let mut insts = Vec::new();
        collect(f.body.as_deref().unwrap_or_default(), &mut insts);
        let mut defs: HashMap<Name, usize> = HashMap::new();
        for inst in &insts {
            if let Some(Operand::Name(d)) = inst.operands.first() {
                if d.starts_with('%') && writes_first_operand(inst) {
                    *defs.entry(*d).or_default() += 1;
                }
            }
        }
        let once = |r: &Name| defs.get(r) == Some(&1);
        // Registers holding a frame variable's address, in its own space or generic.
        let mut frame_regs: HashMap<Name, Name> = HashMap::new();
        for inst in &insts {
            let (Some(Operand::Name(d)), Some(Operand::Name(s))) = (inst.operands.first(), inst.operands.get(1)) else {
                continue;
            };
            if !once(d) || inst.guard.is_some() {
                continue;
            }
            let var = match inst.opcode.as_str() {
                "mov" if sizes.contains_key(s) => Some(*s),
                "cvta" if matches!(address_conversion(inst), Some(Conversion::ToGeneric(Space::Local))) => {
                    frame_regs.get(s).copied().or_else(|| sizes.contains_key(s).then_some(*s))
                }
                _ => None,
            };
            if let Some(var) = var {
                frame_regs.insert(*d, var);
            }
        }
        // Object bases: `add %d, frame_reg, c`; the register of each, when defined once.
        let mut starts: HashMap<Name, BTreeSet<u64>> = HashMap::new();
        let mut base_regs: HashMap<Name, (Name, u64)> = HashMap::new();
        for inst in &insts {
            let Some((var, c)) = object_base(inst, &frame_regs) else { continue };
            starts.entry(var).or_default().insert(c);
            if let Some(Operand::Name(d)) = inst.operands.first() {
                if once(d) {
                    base_regs.insert(*d, (var, c));
                }
            }
        }
        // How far each start's own register reaches at constant offsets.
        let mut reach: HashMap<(Name, u64), u64> = HashMap::new();
        for inst in &insts {
            for access in memory_accesses(inst) {
                let Some((Some(base), k)) = access.address(inst).as_address() else { continue };
                let (Some(&(var, c)), Some(w)) = (base_regs.get(&base), access.width.bytes()) else { continue };
                let end = (c as i64).saturating_add(k).saturating_add(i64::from(w));
                if end > 0 {
                    let e = reach.entry((var, c)).or_default();
                    *e = (*e).max(end as u64);
                }
            }
        }
        let mut by_var = HashMap::new();
        for (var, set) in starts {
            let size = sizes[&var];
            // Merged: a start inside the reach of the object before it is that object's.
            let mut groups: BTreeMap<u64, u64> = BTreeMap::new();
            let (mut current, mut reached) = (None, 0u64);
            for c in set.into_iter().filter(|&c| c < size) {
                if current.is_some() && c < reached {
                    reached = reached.max(reach.get(&(var, c)).copied().unwrap_or(0));
                    continue;
                }
                groups.insert(c, 0);
                current = Some(c);
                reached = reach.get(&(var, c)).copied().unwrap_or(0);
            }
            let firsts: Vec<u64> = groups.keys().copied().collect();
            let objects =
                firsts.iter().enumerate().map(|(i, &c)| (c, firsts.get(i + 1).copied().unwrap_or(size))).collect();
            by_var.insert(var, objects);
        }
        FrameObjects { by_var }
    }

    /// The object of `var` that starts at `c` or contains it: `[start, end)`.
    pub(super) fn object(&self, var: Name, c: i64) -> Option<(u64, u64)> {
        let c = u64::try_from(c).ok()?;
        let objects = self.by_var.get(&var)?;
        objects.iter().copied().find(|&(lo, hi)| lo <= c && c < hi)
    }
}

fn collect<'a>(stmts: &'a [Statement], out: &mut Vec<&'a Instruction>) {
    for s in stmts {
        match s {
            Statement::Inst(i) => out.push(i),
            Statement::Block(b) => collect(b, out),
            _ => {}
        }
    }
}

/// Whether `inst`'s first operand is a register it writes (not a store, branch or call).
fn writes_first_operand(inst: &Instruction) -> bool {
    !matches!(inst.opcode.as_str(), "st" | "bra" | "call" | "ret" | "exit" | "red" | "bar" | "membar" | "fence")
}

/// `add %d, r, c` (either order) with `r` a frame register: its variable and `c`.
fn object_base(inst: &Instruction, frame_regs: &HashMap<Name, Name>) -> Option<(Name, u64)> {
    if inst.opcode != "add" || inst.guard.is_some() {
        return None;
    }
    let (a, b) = (inst.operands.get(1)?, inst.operands.get(2)?);
    let (reg, lit) = match (a, b) {
        (Operand::Name(r), Operand::Int(l)) | (Operand::Int(l), Operand::Name(r)) => (r, l),
        _ => return None,
    };
    let var = *frame_regs.get(reg)?;
    u64::try_from(lit.as_i64()).ok().map(|c| (var, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(body: &str) -> FrameObjects {
        let src = format!(
            ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u32 i)\n{{\n\
             \t.local .align 16 .b8 __local_depot0[128];\n\t.reg .b64 %SP;\n\t.reg .b64 %SPL;\n\
             \t.reg .b32 %r<9>;\n\t.reg .b64 %rd<9>;\n\tmov.u64 %SPL, __local_depot0;\n{body}\tret;\n}}\n"
        );
        let m = gpusan_ptx::parse(&src).unwrap();
        let f = m.items.iter().find_map(|i| if let gpusan_ptx::ast::Item::Function(f) = i { Some(f) } else { None });
        FrameObjects::of(f.unwrap(), &[(d(), 128)].into_iter().collect())
    }

    fn d() -> Name {
        "__local_depot0".into()
    }

    #[test]
    fn each_base_starts_an_object_that_ends_at_the_next() {
        let o = objects(
            "\tadd.u64 %rd1, %SPL, 0;\n\tadd.u64 %rd2, %SPL, 32;\n\
             \tst.local.v4.u32 [%rd1], {%r1, %r1, %r1, %r1};\n\tst.local.v4.u32 [%rd2+16], {%r1, %r1, %r1, %r1};\n",
        );
        assert_eq!(o.object(d(), 0), Some((0, 32)));
        assert_eq!(o.object(d(), 32), Some((32, 128)));
    }

    #[test]
    fn a_start_inside_what_an_object_touches_is_that_objects() {
        // `m[4][8]` initialised through its base, `&m[1][0]` folded to `%SPL+32` elsewhere.
        let o = objects(
            "\tadd.u64 %rd1, %SPL, 0;\n\tst.local.v4.u32 [%rd1+112], {%r1, %r1, %r1, %r1};\n\
             \tadd.u64 %rd2, %SPL, 32;\n\tld.local.u32 %r2, [%rd2];\n",
        );
        assert_eq!(o.object(d(), 0), Some((0, 128)));
        assert_eq!(o.object(d(), 32), Some((0, 128)));
    }

    #[test]
    fn generic_bases_count_and_twice_defined_registers_do_not() {
        let o = objects(
            "\tcvta.local.u64 %SP, %SPL;\n\tadd.u64 %rd1, %SP, 64;\n\
             \tmov.u64 %rd3, %SPL;\n\tmov.u64 %rd3, 0;\n\tadd.u64 %rd4, %rd3, 16;\n",
        );
        assert_eq!(o.object(d(), 64), Some((64, 128)));
        assert_eq!(o.object(d(), 16), None, "%rd3 is defined twice: no base");
    }
}
