//! The check pass's launch-bounds rule: an instrumented kernel that says nothing about its
//! block size or registers gets `.maxntid 1024, 1, 1` (true of every launch; it holds ptxas
//! to 64 registers, so the added checks cannot make a kernel the program launches with 1024
//! threads fail with `LAUNCH_OUT_OF_RESOURCES`); a kernel
//! with `.maxntid`, `.reqntid` or `.maxnreg` keeps exactly what it said, and non-kernel
//! functions get nothing. Checked on the printed PTX and with the pinned ptxas.

use gpusan_passes::check::Check;
use gpusan_ptx::ast::{AttrValue, FunctionKind, Item};

/// A kernel body with `n` loads from global memory all live at once (their products are
/// summed only after the last load), so ptxas wants many registers for it.
fn pressure_body(n: usize) -> String {
    let mut b = format!(
        "\t.reg .b64 %rd<3>;\n\t.reg .f32 %f<{}>;\n\tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd2, %rd1;\n",
        2 * n + 2
    );
    for i in 1..=n {
        b += &format!("\tld.global.volatile.f32 %f{i}, [%rd2+{}];\n", 4 * (i - 1));
    }
    b += "\tmov.f32 %f0, 0f00000000;\n";
    for i in 1..=n / 2 {
        b += &format!("\tfma.rn.f32 %f0, %f{i}, %f{}, %f0;\n", n + 1 - i);
    }
    b += "\tst.global.f32 [%rd2], %f0;\n\tret;\n";
    b
}

fn module() -> String {
    let body = pressure_body(160);
    let mut m = String::from(".version 9.0\n.target sm_90\n.address_size 64\n\n");
    m += ".func helper(.param .b64 q)\n{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [q];\n\tst.global.u32 [%rd1], 0;\n\tret;\n}\n\n";
    for (name, bounds) in [
        ("plain", ""),
        ("with_maxntid", ".maxntid 256, 1, 1\n"),
        ("with_reqntid", ".reqntid 128, 1, 1\n"),
        ("with_maxnreg", ".maxnreg 96\n"),
    ] {
        m += &format!(".visible .entry {name}(.param .u64 p)\n{bounds}{{\n{body}}}\n\n");
    }
    m
}

/// (name, kind, attributes as `name=values`) of every function of `ptx`.
fn attributes(ptx: &str) -> Vec<(String, FunctionKind, Vec<String>)> {
    let m = gpusan_ptx::parse(ptx).expect("the output parses");
    m.items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) => Some((
                f.name.to_string(),
                f.kind,
                f.attributes
                    .iter()
                    .map(|a| {
                        let v: Vec<String> = a
                            .values
                            .iter()
                            .map(|v| match v {
                                AttrValue::Int(n) => n.to_string(),
                                AttrValue::Str(s) => s.clone(),
                            })
                            .collect();
                        format!("{}={}", a.name, v.join(","))
                    })
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn only_kernels_without_bounds_get_maxntid_1024() {
    let input = module();
    let out = gpusan_passes::instrument(&input, &Check).expect("instrumented").ptx;
    let got = attributes(&out);
    let want = [
        ("helper", FunctionKind::Func, vec![]),
        ("plain", FunctionKind::Entry, vec!["maxntid=1024,1,1"]),
        ("with_maxntid", FunctionKind::Entry, vec!["maxntid=256,1,1"]),
        ("with_reqntid", FunctionKind::Entry, vec!["reqntid=128,1,1"]),
        ("with_maxnreg", FunctionKind::Entry, vec!["maxnreg=96"]),
    ];
    let want: Vec<(String, FunctionKind, Vec<String>)> =
        want.into_iter().map(|(n, k, a)| (n.to_string(), k, a.into_iter().map(str::to_string).collect())).collect();
    assert_eq!(got, want, "{out}");
    // The checks were added (the rule is about instrumented kernels).
    assert!(out.contains("__gpusan_table"), "{out}");
}

/// With the pinned ptxas: the kernel without bounds needs more than 64 registers as the
/// program wrote it, and fits in 64 once instrumented (what keeps a 1024-thread launch
/// possible); the kernel whose own `.maxnreg 96` is kept may use more than 64.
#[test]
fn ptxas_holds_an_unbounded_kernel_to_64_registers() {
    let dir = std::env::temp_dir().join(format!("gpusan-maxnreg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptxas = gpusan_testkit::ptxas();
    let regs = |name: &str, ptx: &str| {
        let path = dir.join(format!("{name}.ptx"));
        std::fs::write(&path, ptx).unwrap();
        let report = gpusan_testkit::assemble(&ptxas, &path, &dir.join(format!("{name}.cubin")))
            .unwrap_or_else(|e| panic!("{name} does not assemble:\n{e}"));
        gpusan_testkit::registers(&report).into_iter().collect::<std::collections::HashMap<_, _>>()
    };
    let input = module();
    let before = regs("input", &input);
    let after = regs("instrumented", &gpusan_passes::instrument(&input, &Check).expect("instrumented").ptx);
    assert!(before["plain"] > 64, "the input kernel must need more than 64 registers: {before:?}");
    assert!(after["plain"] <= 64, "{after:?}");
    assert!(after["with_maxnreg"] > 64 && after["with_maxnreg"] <= 96, "{after:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
