//! Each PTX form the front-end promises, parsed and printed: the printed text is pinned,
//! and printing it again must give the same text.

use gpusan_ptx::{parse, print};

const HEAD: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\n";

/// Parses `body` inside a kernel and returns the printed body lines (trimmed).
fn body(stmts: &str) -> Vec<String> {
    let src = format!("{HEAD}.visible .entry k()\n{{\n{stmts}\n}}\n");
    let printed = print(&parse(&src).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(print(&parse(&printed).unwrap()), printed, "printing is not stable");
    let inner = printed.split_once("{\n").unwrap().1.rsplit_once('}').unwrap().0;
    inner.lines().map(|l| l.trim().replace(" \t", " ").replace('\t', " ")).filter(|l| !l.is_empty()).collect()
}

/// Parses a whole module (after the header) and returns it printed without the header.
fn module(items: &str) -> String {
    let src = format!("{HEAD}{items}");
    let printed = print(&parse(&src).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(print(&parse(&printed).unwrap()), printed, "printing is not stable");
    printed.strip_prefix(".version 9.0\n.target sm_90\n.address_size 64\n\n").unwrap().to_string()
}

#[track_caller]
fn same(stmt: &str) {
    assert_eq!(body(stmt), vec![stmt.to_string()]);
}

#[test]
fn instructions_print_as_written() {
    for s in [
        "ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];",
        "st.global.v2.u64 [%rd1+-8], {%rd2, %rd3};",
        "ld.param.u64 %rd1, [k_param_0];",
        "ld.param.u64 %rd1, [k_param_0+0];",
        "ld.global.L2::cache_hint.b32 %r1, [%rd1], %rd2;",
        "ld.global.f32 %f1, [%rd1].unified;",
        "ld.shared.u32 %r1, [smem+4*2];",
        "ld.u32 %r1, [4096];",
        "@%p1 bra $L__BB0_2;",
        "@!%p1 bra.uni $L__BB0_2;",
        "setp.ge.s32 %p1|%p2, %r1, %r2;",
        "and.pred %p1, %p2, !%p3;",
        "mov.u32 %r1, %tid.x;",
        "mov.u64 %rd1, $str;",
        "mov.u64 %rd1, arr+8;",
        "mov.u64 %rd1, generic(arr);",
        "mov.b64 %rd1, {%r1, %r2};",
        "mov.b32 {%rs1, %rs2}, %r1;",
        "mov.f32 %f1, 0f3F800000;",
        "mov.f64 %fd1, 0d3FF0000000000000;",
        "mov.f32 %f1, 1.5;",
        "mov.f32 %f1, -1.5;",
        "add.s32 %r1, %r2, -4;",
        "and.b32 %r1, %r2, 0xff;",
        "or.b32 %r1, %r2, 0x80000000U;",
        "mov.u32 %r1, 017;",
        "mov.u32 %r1, 0b101;",
        "neg.f32 %f1, -%f2;",
        "call.uni (retval0), _Z1fPfi, (param0, param1);",
        "call.uni _Z1gv, ();",
        "call (retval0), %rd1, (param0), prototype_0;",
        "brx.idx %r1, $L_tbl;",
        "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6}];",
        "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}|%p1, [%rd1, {%f5, %f6}];",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];",
        "cp.async.cg.shared.global [%r1], [%rd1], 16;",
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];",
        "shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;",
        "vote.sync.ballot.b32 %r1, %p1, -1;",
        "atom.global.cas.b32 %r1, [%rd1], %r2, %r3;",
        "red.global.add.f32 [%rd1], %f1;",
        "bar.sync 0;",
        "ret;",
        "exit;",
    ] {
        same(s);
    }
}

#[test]
fn whitespace_and_comments_do_not_matter() {
    assert_eq!(body("  add.s32   %r1 ,%r2,/* c */%r3 ; // trailing"), vec!["add.s32 %r1, %r2, %r3;"]);
    assert_eq!(body("ld.global.u32 %r1, [ %rd1 + 4 ];"), vec!["ld.global.u32 %r1, [%rd1+4];"]);
    assert_eq!(body("ld.global.u32 %r1, [%rd1-4];"), vec!["ld.global.u32 %r1, [%rd1+-4];"]);
}

#[test]
fn declarations_labels_scopes_and_locs() {
    assert_eq!(
        body(
            ".reg .pred %p<3>;\n.reg .b32 r1, r2;\n.local .align 8 .b8 __local_depot0[32];\n\
             .shared .align 16 .b8 s[1024];\n$L__BB0_1:\n{\n.reg .pred p;\nsetp.ne.b32 p, r1, 0;\n}\n\
             .loc 1 23 5\n.loc 1 24 7, function_name $L__info_string0, inlined_at 1 10 3\n.pragma \"nounroll\";"
        ),
        vec![
            ".reg .pred %p<3>;",
            ".reg .b32 r1;",
            ".reg .b32 r2;",
            ".local .align 8 .b8 __local_depot0[32];",
            ".shared .align 16 .b8 s[1024];",
            "$L__BB0_1:",
            "{",
            ".reg .pred p;",
            "setp.ne.b32 p, r1, 0;",
            "}",
            ".loc 1 23 5",
            ".loc 1 24 7, function_name $L__info_string0, inlined_at 1 10 3",
            ".pragma \"nounroll\";",
        ]
    );
}

#[test]
fn branch_tables_and_call_prototypes() {
    assert_eq!(
        body("$L_tbl: .branchtargets $L1, $L2;\nprototype_0 : .callprototype (.param .b32 _) _ (.param .b64 _, .param .b32 _);\nret;"),
        vec![
            "$L_tbl: .branchtargets",
            "$L1,",
            "$L2;",
            "prototype_0 : .callprototype (.param .b32 _) _ (.param .b64 _, .param .b32 _);",
            "ret;"
        ]
    );
}

#[test]
fn functions_with_linkage_returns_and_attributes() {
    let m = module(
        ".extern .func (.param .b32 func_retval0) vprintf\n(\n.param .b64 vprintf_param_0,\n.param .b64 vprintf_param_1\n)\n;\n\
         .weak .func _Z1fv()\n.noreturn\n{\nret;\n}\n\
         .visible .entry k(\n.param .u64 .ptr .global .align 8 k_param_0,\n.param .align 8 .b8 k_param_1[16]\n)\n\
         .maxntid 256, 1, 1\n.minnctapersm 2\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n{\nret;\n}\n",
    );
    assert_eq!(
        m,
        ".extern .func (.param .b32 func_retval0) vprintf(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n\n\
         .weak .func _Z1fv()\n.noreturn\n{\n\tret;\n}\n\n\
         .visible .entry k(\n\t.param .u64 .ptr .global .align 8 k_param_0,\n\t.param .align 8 .b8 k_param_1[16]\n)\n\
         .maxntid 256, 1, 1\n.minnctapersm 2\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n{\n\tret;\n}\n\n"
    );
}

#[test]
fn module_variables_in_every_space() {
    let m = module(
        ".global .align 4 .u32 counter = 7;\n\
         .global .align 1 .b8 $str[6] = {104, 101, 108, 108, 111, 0};\n\
         .global .align 8 .u64 ptrs[2] = {generic(a), b+8};\n\
         .const .align 16 .v4 .f32 c[2] = {{0f3F800000, 0f00000000, 0f00000000, 0f00000000}, {0f00000000, 0f00000000, 0f00000000, 0f3F800000}};\n\
         .extern .shared .align 16 .b8 dyn[];\n\
         .visible .global .attribute(.managed) .align 4 .u32 m;\n\
         .global .texref t;\n\
         .common .global .align 8 .f64 d;\n",
    );
    let lines: Vec<&str> = m.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines,
        vec![
            ".global .align 4 .u32 \tcounter = 7;",
            ".global .align 1 .b8 \t$str[6] = {104, 101, 108, 108, 111, 0};",
            ".global .align 8 .u64 \tptrs[2] = {generic(a), b+8};",
            ".const .align 16 .v4 .f32 \tc[2] = {{0f3F800000, 0f00000000, 0f00000000, 0f00000000}, {0f00000000, 0f00000000, 0f00000000, 0f3F800000}};",
            ".extern .shared .align 16 .b8 \tdyn[];",
            ".visible .global .attribute(.managed) .align 4 .u32 \tm;",
            ".global .texref \tt;",
            ".common .global .align 8 .f64 \td;",
        ]
    );
}

#[test]
fn files_sections_and_dwarf_lines_are_kept_exactly() {
    let section = ".section .debug_info\n\t{\n.b32 40\n.b8 2, 0  // v2\n.b64 $L__func_begin0\n\t}";
    let m =
        module(&format!(".file\t1 \"/src/a.cu\", 1700000000, 1234\n.file 2 \"b.h\"\n{section}\n@@DWARF .byte 0x11\n"));
    assert_eq!(
        m,
        format!(".file\t1 \"/src/a.cu\", 1700000000, 1234\n.file\t2 \"b.h\"\n{section}\n@@DWARF .byte 0x11\n")
    );
}

#[test]
fn tree_exposes_structure() {
    use gpusan_ptx::ast::{Item, Operand, Statement};
    let src = format!("{HEAD}.visible .entry k()\n{{\n@!%p1 ld.global.nc.v4.f32 {{%f1, _}}, [%rd2+-16];\n}}\n");
    let m = parse(&src).unwrap();
    let Item::Function(f) = &m.items[3] else { panic!("no function") };
    let Statement::Inst(i) = &f.body.as_ref().unwrap()[0] else { panic!("no instruction") };
    assert_eq!(i.opcode, "ld");
    assert_eq!(i.modifiers().collect::<Vec<_>>(), ["global", "nc", "v4", "f32"]);
    let g = i.guard.as_ref().unwrap();
    assert!(g.negated && g.reg == "%p1");
    assert_eq!(i.operands[1].as_address(), Some((Some("%rd2".into()), -16)));
    assert!(matches!(&i.operands[0], Operand::Vector(v) if v.len() == 2));
}
