//! Module variables of a cubin (`Cubin::variables`) against the symbol table `cuobjdump -elf`
//! prints for the same file, and against the source (`fixtures/src/vars.cu`), whole-program
//! and `-rdc=true`.

mod common;

use std::collections::BTreeMap;

use common::*;
use gpusan_fatbin::{Cubin, EntryKind};

/// (name → (size, offset, section name)) of the variables in `cuobjdump -elf`'s `.symtab`:
/// object symbols (type 1, or 13 with -rdc) in a `.nv.global*` or `.nv.constant<N>` section.
fn cuobjdump_variables(file: &std::path::Path) -> BTreeMap<String, (u64, u64, String)> {
    let text = run_tool("cuobjdump", &["-elf", file.to_str().unwrap()], file.parent().unwrap());
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    // Section headers: "  index offset size entsize align type flags link info name".
    let mut sections = BTreeMap::new();
    let mut symbols = Vec::new();
    let mut in_symtab = false;
    for line in text.lines() {
        if line.starts_with(".section .symtab") {
            in_symtab = true;
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if in_symtab {
            if f.is_empty() {
                in_symtab = false;
            } else if f.len() == 7 && f[0] != "index" {
                symbols.push((hex(f[1]), hex(f[2]), hex(f[3]), hex(f[5]), f[6].to_string()));
            }
        } else if f.len() == 10 && f[9].starts_with('.') && u64::from_str_radix(f[0], 16).is_ok() {
            sections.entry(hex(f[0])).or_insert_with(|| f[9].to_string());
        }
    }
    assert!(!sections.is_empty() && !symbols.is_empty(), "cuobjdump output not understood:\n{text}");
    symbols
        .into_iter()
        .filter(|&(_, _, info, _, _)| matches!(info & 0xf, 1 | 13))
        .filter_map(|(value, size, _, shndx, name)| {
            let section = sections.get(&shndx)?.clone();
            let bank = section
                .strip_prefix(".nv.constant")
                .is_some_and(|b| !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()));
            (section.starts_with(".nv.global") || bank).then_some((name, (size, value, section)))
        })
        .collect()
}

fn ours(data: &[u8]) -> BTreeMap<String, (u64, u64, bool)> {
    let cubin = Cubin::parse(data).unwrap();
    cubin.variables.iter().map(|v| (v.name.to_string(), (v.size, v.offset, v.constant))).collect()
}

#[test]
fn variables_match_cuobjdump() {
    for name in ["vars.cubin", "vars-rdc.cubin"] {
        let theirs = cuobjdump_variables(&fixture_path(name));
        let ours = ours(&fixture(name));
        assert_eq!(ours.len(), theirs.len(), "{name}: {ours:?} vs {theirs:?}");
        for (var, (size, offset, section)) in &theirs {
            let got = ours.get(var).unwrap_or_else(|| panic!("{name}: {var} missing from {ours:?}"));
            assert_eq!(*got, (*size, *offset, section.starts_with(".nv.constant")), "{name}: {var}");
        }
    }
}

#[test]
fn variables_match_the_source() {
    // vars.cu: int vals[64], next_vals[64]; double one; __constant__ float coeffs[17];
    // ns::bytes[5]; static int hidden[3].
    let whole = ours(&fixture("vars.cubin"));
    let size = |m: &BTreeMap<String, (u64, u64, bool)>, n: &str| m.get(n).map(|v| (v.0, v.2));
    for m in [&whole, &ours(&fixture("vars-rdc.cubin"))] {
        assert_eq!(size(m, "vals"), Some((256, false)));
        assert_eq!(size(m, "next_vals"), Some((256, false)));
        assert_eq!(size(m, "one"), Some((8, false)));
        assert_eq!(size(m, "coeffs"), Some((68, true)));
        assert_eq!(size(m, "_ZN2ns5bytesE"), Some((5, false)));
    }
    assert_eq!(size(&whole, "hidden"), Some((12, false)));
    assert_eq!(whole.len(), 6, "{whole:?}");
}

#[test]
fn kernels_only_fixtures_have_no_variables() {
    // kernels.cu declares no variables: nothing else in a cubin may pass for one.
    for name in all_fixtures() {
        let data = fixture(name);
        for entry in listed_fatbins(name, &data).iter().flat_map(|f| &f.entries).filter(|e| e.kind == EntryKind::Elf) {
            let contents = entry.contents().unwrap();
            let cubin = Cubin::parse(&contents).unwrap();
            assert!(cubin.variables.is_empty(), "{name}: {:?}", cubin.variables);
        }
    }
}
