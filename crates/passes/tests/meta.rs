//! The metadata `instrument_with_meta` hands out names what the instrumented code writes:
//! the function number in each error record indexes its function list, and the PTX line
//! each record carries finds the `.loc` before the access in its line map.

use gpusan_passes::check::Check;
use gpusan_passes::meta::{LineEntry, ModuleMeta};

/// Two kernels, not in name order, each with one checked store after a `.loc`.
const SRC: &str = ".version 9.0\n.target sm_90\n.address_size 64\n.file 1 \"k.cu\"\n\
                   .visible .entry zeta(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\
                   \t.loc 1 30 5\n\tst.global.u32 [%rd1], 0;\n\tret;\n}\n\
                   .visible .entry alpha(.param .u64 p)\n{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\
                   \t.loc 1 12 5\n\tst.global.u32 [%rd1], 1;\n\tret;\n}\n";

/// (function number, PTX line) of every error record a function's instrumented text writes.
fn records(function_text: &str) -> Vec<(u32, u32)> {
    let lines: Vec<&str> = function_text.lines().map(str::trim).collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        // `or.b32 %__gs_k, %__gs_k, NUMBER;` puts the function number under the module's.
        let Some(number) = l.strip_prefix("or.b32 \t%__gs_k, %__gs_k, ").and_then(|r| r.strip_suffix(';')) else {
            continue;
        };
        let ptx_line = lines[i..]
            .iter()
            .find_map(|l| l.strip_prefix("st.global.u32 \t[%__gs_r+44], ").and_then(|r| r.strip_suffix(';')))
            .expect("the record's PTX line follows its kernel field");
        out.push((number.parse().unwrap(), ptx_line.parse().unwrap()));
    }
    out
}

fn source_line(meta: &ModuleMeta, ptx_line: u32) -> Option<(String, u32)> {
    let at = meta.lines.partition_point(|e| e.ptx_line <= ptx_line);
    let e = meta.lines.get(at.checked_sub(1)?)?;
    let file = meta.files.iter().find(|(i, _)| *i == e.file)?;
    Some((file.1.clone(), e.line))
}

#[test]
fn records_are_numbered_and_located_by_the_meta() {
    let (out, meta) = gpusan_passes::instrument_with_meta(SRC, &Check).unwrap();
    assert_eq!(meta.functions, ["alpha", "zeta"]);
    assert_eq!(
        meta.lines,
        [LineEntry { ptx_line: 10, file: 1, line: 30 }, LineEntry { ptx_line: 18, file: 1, line: 12 }]
    );
    assert_eq!(out.ptx, gpusan_passes::instrument(SRC, &Check).unwrap().ptx, "the same instrumented PTX");

    let at = |name: &str| out.ptx.find(&format!(".entry {name}(")).unwrap();
    let (zeta, alpha) = (&out.ptx[at("zeta")..at("alpha")], &out.ptx[at("alpha")..]);
    for (text, name, source) in [(zeta, "zeta", 30), (alpha, "alpha", 12)] {
        let recs = records(text);
        assert!(!recs.is_empty(), "{name} writes no record:\n{text}");
        for (number, ptx_line) in recs {
            assert_eq!(meta.functions[number as usize], name, "record number {number} in {name}");
            assert_eq!(source_line(&meta, ptx_line), Some(("k.cu".to_string(), source)), "{name}: PTX line {ptx_line}");
        }
    }
}
