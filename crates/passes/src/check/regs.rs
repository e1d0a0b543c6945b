//! Register widths by declaration, for the stages that keep 64-bit addresses and the code
//! that clears a skipped instruction's destinations.

use std::collections::HashMap;

use gpusan_ptx::ast::{Function, Name, StateSpace, Statement};

/// The declared width of each register name, to keep the 64-bit ones (and, for shared
/// addresses, the 32-bit ones): `%rd<N>` declares `%rd0…`. Names declared with different
/// widths in different scopes have none.
#[derive(Default)]
pub(crate) struct RegWidths {
    plain: HashMap<Name, Option<u32>>,
    ranges: HashMap<Name, Option<u32>>,
}

impl RegWidths {
    pub(crate) fn collect(f: &Function) -> RegWidths {
        let mut w = RegWidths::default();
        fn bits(ty: &str) -> Option<u32> {
            match ty {
                "b64" | "u64" | "s64" => Some(64),
                "b32" | "u32" | "s32" => Some(32),
                _ => None,
            }
        }
        fn merge(e: &mut Option<u32>, b: Option<u32>) {
            if *e != b {
                *e = None;
            }
        }
        for p in f.params.iter().flatten().chain(f.returns.iter().flatten()) {
            if p.space == StateSpace::Reg {
                let b = if p.vector.is_none() { bits(&p.ty) } else { None };
                let e = w.plain.entry(p.name).or_insert(b);
                merge(e, b);
            }
        }
        fn walk(stmts: &[Statement], w: &mut RegWidths) {
            for s in stmts {
                match s {
                    Statement::Decl(d) if d.space == StateSpace::Reg => {
                        let map = if d.count.is_some() { &mut w.ranges } else { &mut w.plain };
                        let b = if d.vector.is_none() && d.array.is_empty() { bits(&d.ty) } else { None };
                        let e = map.entry(d.name).or_insert(b);
                        merge(e, b);
                    }
                    Statement::Block(b) => walk(b, w),
                    _ => {}
                }
            }
        }
        walk(f.body.as_deref().unwrap_or_default(), &mut w);
        w
    }

    /// 32 or 64 for an integer register of one known width.
    pub(crate) fn bits(&self, name: Name) -> Option<u32> {
        if let Some(&b) = self.plain.get(&name) {
            return b;
        }
        let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
        let prefix = &name[..name.len() - digits];
        if digits == 0 {
            return None;
        }
        Name::from_existing(prefix).and_then(|p| self.ranges.get(&p)).copied().flatten()
    }

    pub(crate) fn is_64(&self, name: Name) -> bool {
        self.bits(name) == Some(64)
    }
}

/// The width in bits of each non-predicate register name, by its declaration (`.f32` 32,
/// `.f16x2` 32, `.b64` 64), for the `mov.bN` that clears it; names declared with different
/// types in different scopes have none.
#[derive(Default)]
pub(super) struct RegBits {
    plain: HashMap<Name, Option<u32>>,
    ranges: HashMap<Name, Option<u32>>,
}

impl RegBits {
    pub(super) fn collect(f: &Function) -> RegBits {
        fn bits(ty: &str) -> Option<u32> {
            let (base, lanes) = match ty.split_once('x') {
                Some((b, n)) => (b, n.parse::<u32>().ok()?),
                None => (ty, 1),
            };
            let digits: String = base.chars().filter(char::is_ascii_digit).collect();
            let b = digits.parse::<u32>().ok()? * lanes;
            matches!(b, 16 | 32 | 64).then_some(b)
        }
        fn walk(stmts: &[Statement], out: &mut RegBits) {
            for s in stmts {
                match s {
                    Statement::Decl(d) if d.space == StateSpace::Reg && d.vector.is_none() && d.array.is_empty() => {
                        let map = if d.count.is_some() { &mut out.ranges } else { &mut out.plain };
                        let b = bits(&d.ty);
                        let e = map.entry(d.name).or_insert(b);
                        if *e != b {
                            *e = None;
                        }
                    }
                    Statement::Block(b) => walk(b, out),
                    _ => {}
                }
            }
        }
        let mut out = RegBits::default();
        walk(f.body.as_deref().unwrap_or_default(), &mut out);
        out
    }

    pub(super) fn get(&self, name: Name) -> Option<u32> {
        if let Some(&b) = self.plain.get(&name) {
            return b;
        }
        let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        Name::from_existing(&name[..name.len() - digits]).and_then(|p| self.ranges.get(&p)).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpusan_ptx::ast::Item;

    #[test]
    fn register_widths_for_clearing() {
        let m = gpusan_ptx::parse(
            ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\
             .reg .f32 %f<4>;\n.reg .b64 %rd<2>;\n.reg .f16x2 %h<2>;\n.reg .pred %p<2>;\n.reg .b16 %x;\nret;\n}\n",
        )
        .unwrap();
        let Some(Item::Function(f)) = m.items.iter().find(|i| matches!(i, Item::Function(_))) else { panic!() };
        let b = RegBits::collect(f);
        assert_eq!(b.get("%f3".into()), Some(32));
        assert_eq!(b.get("%rd1".into()), Some(64));
        assert_eq!(b.get("%h0".into()), Some(32));
        assert_eq!(b.get("%x".into()), Some(16));
        assert_eq!(b.get("%p1".into()), None);
    }
}
