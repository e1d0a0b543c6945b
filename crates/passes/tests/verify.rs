//! The verifier: every kind of error is found, all of them in one run, at the right place,
//! and well-formed modules pass (the whole corpus does too: `tests/corpus.rs`).

use gpusan_passes::verify::{verify, ErrorKind, Mismatch, Place, VerifierError, MAX_VERSION};
use gpusan_passes::{instrument, Error, Location, Pass, PassError, PassReport, Stage};
use gpusan_ptx::ast::{Instruction, Item, Operand, Statement};
use gpusan_ptx::cfg::CfgError;
use gpusan_ptx::Module;

const HEADER: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\n";

fn errors(body: &str) -> Vec<VerifierError> {
    let src = format!("{HEADER}{body}");
    let module = gpusan_ptx::parse(&src).unwrap_or_else(|e| panic!("test module does not parse:\n{e}"));
    match verify(&module) {
        Ok(()) => Vec::new(),
        Err(e) => e.0,
    }
}

fn kinds(body: &str) -> Vec<ErrorKind> {
    errors(body).into_iter().map(|e| e.kind).collect()
}

fn kernel(body: &str) -> String {
    format!(".visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n{body}\n}}\n")
}

fn assert_clean(src: &str) {
    let e = errors(src);
    assert!(e.is_empty(), "unexpected errors:\n{}", e.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"));
}

#[test]
fn well_formed_module_passes() {
    assert_clean(
        r#"
.extern .shared .align 16 .b8 smem[];
.global .align 4 .u32 g;
.global .align 8 .u64 table[1] = {g};
.func (.param .b32 r) f(.param .b32 a);
.func (.param .b32 r) f(.param .b32 a)
{
	.reg .b32 	%r<3>;
	ld.param.u32 	%r1, [a];
	st.param.b32 	[r], %r1;
	ret;
}
.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<10>;
	.reg .b32 	%r10;
	.reg .b64 	%rd<4>;
	ld.param.u64 	%rd1, [k_param_0];
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %envreg3;
	mov.u64 	%rd3, %clock64;
	mov.u32 	%r3, WARP_SZ;
	mov.u64 	%rd2, g;
	ld.shared.u32 	%r4, [smem+4];
	setp.eq.u32 	%p1, %r1, 0;
	@%p1 bra 	$L_later;
	{
	.reg .pred 	p;
	.reg .b32 	%r<2>;
	setp.ne.u32 	p, %r1, 0;
	@p bra 	$L_inner;
	mov.u32 	%r1, 1;
$L_inner:
	}
	{
	.reg .pred 	p;
	@p bra 	$L_inner;
$L_inner:
	}
	{
	.param .b32 param0;
	st.param.b32 	[param0], %r1;
	.param .b32 retval0;
	call.uni (retval0), f, (param0);
	ld.param.b32 	%r5, [retval0];
	}
	brx.idx 	%r1, $L_tab;
$L_tab: .branchtargets $L_later, $L_end;
$L_later:
	st.global.u32 	[%rd1], %r10;
$L_end:
	ret;
}
"#,
    );
}

#[test]
fn undeclared_register() {
    let k = kinds(&kernel("\t.reg .b32 \t%r<3>;\n\tmov.u32 \t%r3, 0;\n\tmov.u32 \t%q1, %r2;\n\tret;"));
    assert_eq!(k, vec![ErrorKind::UndeclaredRegister("%r3".into()), ErrorKind::UndeclaredRegister("%q1".into())]);
}

#[test]
fn guard_registers_are_checked() {
    let k = kinds(&kernel("\t@%p1 ret;"));
    assert_eq!(k, vec![ErrorKind::UndeclaredRegister("%p1".into())]);
}

#[test]
fn undeclared_register_is_reported_once_per_function() {
    let e = errors(&kernel("\tmov.u32 \t%r1, 0;\n\tmov.u32 \t%r1, 1;\n\tadd.u32 \t%r1, %r1, 1;\n\tret;"));
    assert_eq!(e.len(), 1);
    // At its first use, located in the source.
    let src = format!("{HEADER}{}", kernel("\tmov.u32 \t%r1, 0;\n\tmov.u32 \t%r1, 1;\n\tret;"));
    let loc = Location::of(&src, e[0].span).unwrap();
    assert_eq!((loc.line, loc.column), (9, 2));
    assert_eq!(e[0].context.as_deref(), Some("mov.u32 %r1, 0;"));
    assert_eq!(e[0].function.as_deref(), Some("k"));
}

#[test]
fn undefined_variable_and_function() {
    let body = kernel(
        "\t.reg .b32 \t%r<2>;\n\tld.global.u32 \t%r1, [missing];\n\
         \t{\n\t.param .b32 param0;\n\tcall.uni \tnowhere, (param0);\n\t}\n\tret;",
    );
    assert_eq!(
        kinds(&body),
        vec![ErrorKind::UndefinedSymbol("missing".into()), ErrorKind::UndefinedSymbol("nowhere".into())]
    );
}

#[test]
fn use_before_declaration() {
    // A register declared after its use, a module variable declared after the function,
    // and a register used outside the `{ }` that declares it.
    let body = format!(
        "{}.global .u32 late;\n",
        kernel(
            "\tmov.u32 \t%r1, 0;\n\t.reg .b32 \t%r<2>;\n\tld.global.u32 \t%r1, [late];\n\
             \t{{\n\t.reg .b32 \t%x;\n\tmov.u32 \t%x, 1;\n\t}}\n\tmov.u32 \t%r1, %x;\n\tret;"
        )
    );
    assert_eq!(
        kinds(&body),
        vec![
            ErrorKind::UsedBeforeDeclaration("%r1".into()),
            ErrorKind::UsedBeforeDeclaration("late".into()),
            ErrorKind::UsedBeforeDeclaration("%x".into()),
        ]
    );
}

#[test]
fn names_resolve_by_scope_however_often_they_are_used() {
    // The verifier remembers names that resolve for the rest of the function (body scope,
    // module): a body register used before, inside and after a block is fine everywhere; a
    // block's register used many times inside it is still undeclared after it.
    assert_clean(&kernel(
        "\t.reg .b32 \t%r<3>;\n\tmov.u32 \t%r1, 0;\n\t{\n\t.reg .b32 \t%x;\n\tmov.u32 \t%x, %r1;\n\t\
         add.s32 \t%x, %x, %x;\n\tmov.u32 \t%r2, %x;\n\t}\n\tadd.s32 \t%r2, %r2, %r1;\n\tret;",
    ));
    let k = kinds(&kernel(
        "\t.reg .b32 \t%r<3>;\n\t{\n\t.reg .b32 \t%x;\n\tmov.u32 \t%x, 1;\n\tadd.s32 \t%x, %x, %x;\n\t}\n\t\
         mov.u32 \t%r1, %x;\n\tret;",
    ));
    assert_eq!(k, vec![ErrorKind::UsedBeforeDeclaration("%x".into())]);
}

#[test]
fn register_components_resolve_however_often_they_are_used() {
    // `%tid.x` is remembered once its base is found predefined; a component of an
    // undeclared register is still reported, however often it is used.
    assert_clean(&kernel(
        "\t.reg .b32 \t%r<3>;\n\tmov.u32 \t%r1, %tid.x;\n\tmov.u32 \t%r2, %tid.x;\n\t\
         mov.u32 \t%r1, %ctaid.y;\n\tmov.u32 \t%r2, %tid.x;\n\tret;",
    ));
    let k = kinds(&kernel(
        "\t.reg .b32 \t%r<3>;\n\tmov.u32 \t%r1, %tid.x;\n\tmov.u32 \t%r1, %nope.x;\n\t\
         mov.u32 \t%r2, %nope.x;\n\tmov.u32 \t%r2, %tid.x;\n\tret;",
    ));
    assert_eq!(k, vec![ErrorKind::UndeclaredRegister("%nope.x".into())]);
}

#[test]
fn calls_need_a_declared_callee() {
    let src = format!(
        "{}.func f()\n{{\n\tret;\n}}\n",
        kernel("\t{\n\tcall.uni \tf, ();\n\t}\n\tret;").replace("entry k", "entry k2")
    );
    assert_eq!(kinds(&src), vec![ErrorKind::UsedBeforeDeclaration("f".into())]);
}

#[test]
fn duplicate_declarations() {
    let body = kernel(
        "\t.reg .b32 \t%r<4>;\n\t.reg .b32 \t%r2;\n\t.reg .b32 \t%r<4>;\n\t.reg .b64 \t%x;\n\t.reg .b64 \t%x;\n\
         \t.reg .b64 \tk_param_0;\n\t.reg .pred \tL;\nL:\n$M:\n$M:\n\
         \t{\n\t.reg .b32 \t%r<4>;\n\t.reg .b64 \t%x;\n\t}\n\tret;",
    );
    let k = kinds(&body);
    let dup = |s: &str| ErrorKind::DuplicateDeclaration(s.into());
    // The label duplicates are found first: labels are collected before the declarations.
    assert!(k.contains(&dup("$M")), "{k:?}");
    for d in ["%r2", "%r<4>", "%x", "k_param_0", "L"] {
        assert!(k.contains(&dup(d)), "{d} not reported: {k:?}");
    }
    // Shadowing in an inner scope is allowed, and the graph's duplicate-label error is not
    // reported a second time.
    assert_eq!(k.len(), 6, "{k:?}");
}

#[test]
fn a_range_after_a_register_it_covers_is_a_duplicate() {
    let k =
        kinds(&kernel("\t.reg .b32 \t%r7;\n\t.reg .b32 \t%r<8>;\n\t.reg .b32 \t%s9;\n\t.reg .b32 \t%s<9>;\n\tret;"));
    assert_eq!(k, vec![ErrorKind::DuplicateDeclaration("%r<8>".into())]);
}

#[test]
fn module_level_duplicates() {
    let src = ".global .u32 g;\n.global .u32 g;\n.extern .global .u32 e;\n.global .u32 e;\n\
               .func f()\n{\n\tret;\n}\n.func f()\n{\n\tret;\n}\n.func g2();\n.func g2()\n{\n\tret;\n}\n";
    assert_eq!(
        kinds(src),
        vec![ErrorKind::DuplicateDeclaration("g".into()), ErrorKind::DuplicateDeclaration("f".into())]
    );
}

#[test]
fn every_undefined_branch_target_is_reported() {
    let e = errors(&kernel(
        "\t.reg .pred \t%p1;\n\t.reg .b32 \t%r1;\n\t@%p1 bra \t$L_a;\n\t@%p1 bra \t$L_b;\n\tbrx.idx \t%r1, $T;\n\
         $T2: .branchtargets $L_c;\n\tret;",
    ));
    let labels: Vec<String> = e
        .iter()
        .map(|e| match &e.kind {
            ErrorKind::ControlFlow(CfgError::UndefinedLabel { label, .. }) => format!("label {label}"),
            ErrorKind::ControlFlow(CfgError::UndefinedTable { table, .. }) => format!("table {table}"),
            ErrorKind::ControlFlow(CfgError::UndefinedTarget { label, .. }) => format!("target {label}"),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(labels, ["label $L_a", "label $L_b", "table $T", "target $L_c"]);
    assert_eq!(
        e[0].to_string(),
        "in `k`: `@%p1 bra $L_a;` branches to `$L_a`, which is not a label in scope\n    | @%p1 bra $L_a;"
    );
}

#[test]
fn a_label_in_an_inner_scope_is_not_a_target_outside() {
    let k = kinds(&kernel("\tbra \t$L_in;\n\t{\n$L_in:\n\t}\n\tret;"));
    assert!(
        matches!(&k[..], [ErrorKind::ControlFlow(CfgError::UndefinedLabel { label, .. })] if label == "$L_in"),
        "{k:?}"
    );
}

#[test]
fn graph_errors_the_name_checks_do_not_find_are_reported() {
    // A register is in scope but is no label: only the control-flow graph objects.
    let k = kinds(&kernel("\t.reg .b32 \t%r1;\n\tbra \t%r1;\n\tret;"));
    assert!(matches!(&k[..], [ErrorKind::ControlFlow(CfgError::UndefinedLabel { .. })]), "{k:?}");
}

#[test]
fn version_too_new_and_missing() {
    let module = gpusan_ptx::parse(".version 9.1\n.target sm_90\n.address_size 64\n").unwrap();
    let e = verify(&module).unwrap_err().0;
    assert_eq!(e[0].kind, ErrorKind::VersionTooNew { major: 9, minor: 1 });
    assert_eq!(e[0].to_string(), ".version 9.1 is newer than PTX ISA 9.0, the newest the GPU driver accepts");
    let module = gpusan_ptx::parse(".version 10.0\n.target sm_90\n").unwrap();
    assert_eq!(verify(&module).unwrap_err().0[0].kind, ErrorKind::VersionTooNew { major: 10, minor: 0 });
    let module = gpusan_ptx::parse(&format!(".version {}.{}\n.target sm_90\n", MAX_VERSION.0, MAX_VERSION.1)).unwrap();
    assert!(verify(&module).is_ok());
    let module = gpusan_ptx::parse(".version 8.7\n.target sm_90\n").unwrap();
    assert!(verify(&module).is_ok());
    // The parser refuses text without `.version` first; a tree a tool builds can lack it.
    let mut module = gpusan_ptx::parse(".version 8.7\n.target sm_90\n").unwrap();
    module.items.retain(|i| !matches!(i, gpusan_ptx::ast::Item::Version { .. }));
    assert_eq!(verify(&module).unwrap_err().0[0].kind, ErrorKind::MissingVersion);
}

#[test]
fn all_errors_of_all_functions_are_collected() {
    let src = format!(
        "{}{}",
        kernel("\tmov.u32 \t%a, 0;\n\tmov.u32 \t%b, 0;\n\tbra \t$nowhere;\n\tret;"),
        kernel("\tmov.u32 \t%c, 0;\n\tret;").replace("entry k", "entry k2")
    );
    let e = errors(&src);
    assert_eq!(e.len(), 4, "{e:?}");
    assert_eq!(e[3].function.as_deref(), Some("k2"));
}

/// A pass that forgets to declare the register it uses.
struct Forgetful;

impl Pass for Forgetful {
    fn name(&self) -> &'static str {
        "forgetful"
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        for item in &mut module.items {
            if let Item::Function(f) = item {
                let inst = Instruction::new("mov", &["u32"], vec![Operand::reg("%undeclared"), Operand::int(0)]);
                f.body.as_mut().unwrap().insert(0, Statement::Inst(inst));
            }
        }
        Ok(PassReport::default())
    }
}

#[test]
fn a_pass_bug_is_caught_after_the_pass_and_shows_the_inserted_instruction() {
    let src = format!("{HEADER}{}", kernel("\tret;"));
    let e = instrument(&src, &Forgetful).unwrap_err();
    let Error::Verify { stage, diagnostics } = &e else { panic!("{e}") };
    assert_eq!(*stage, Stage::After("forgetful"));
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].location, None);
    assert_eq!(
        e.to_string(),
        "pass `forgetful` produced invalid PTX (1 error); this is a bug in the pass\n\
         <inserted>: in `k`: register `%undeclared` is not declared\n    | mov.u32 %undeclared, 0;"
    );
}

#[test]
fn invalid_input_is_blamed_on_the_input_with_file_line_and_column() {
    let src = format!("{HEADER}{}", kernel("\tmov.u32 \t%r1, 0;\n\tret;"));
    let e = instrument(&src, &Forgetful).unwrap_err().with_path("k.ptx");
    assert_eq!(
        e.to_string(),
        "the input is not valid PTX (1 error)\n\
         k.ptx:9:2: in `k`: register `%r1` is not declared\n    | mov.u32 %r1, 0;"
    );
    let e = instrument(".version 9.0\n.target sm_90\nbogus", &Forgetful).unwrap_err().with_path("k.ptx");
    assert!(matches!(e, Error::Parse(_)));
    assert!(e.to_string().starts_with("k.ptx:3:1: "), "{e}");
}

// ---- operand types and widths ----------------------------------------------------------

/// Assembles `ptx` with the pinned ptxas; `Err` holds the lines it reports an error at.
fn ptxas_error_lines(name: &str, ptx: &str) -> Result<(), Vec<u32>> {
    let dir = std::env::temp_dir().join(format!("gpusan-verify-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.ptx"));
    std::fs::write(&path, ptx).unwrap();
    let result = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &path, &dir.join(format!("{name}.cubin")));
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|_| ()).map_err(|msg| {
        let mut lines: Vec<u32> =
            msg.lines().filter_map(|l| l.split(", line ").nth(1)?.split(';').next()?.parse().ok()).collect();
        assert!(!lines.is_empty(), "ptxas failed without a line:\n{msg}");
        lines.dedup();
        lines
    })
}

/// The line each error is at (a line table: the matrix below has thousands).
fn error_lines(src: &str, errors: &[VerifierError]) -> Vec<u32> {
    let starts: Vec<usize> = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let mut lines: Vec<u32> =
        errors.iter().map(|e| starts.partition_point(|&s| s <= e.span.start as usize) as u32).collect();
    lines.dedup();
    lines
}

const REGISTERS: &str = "\t.reg .pred \t%p<3>;\n\t.reg .b16 \t%rs<3>;\n\t.reg .b32 \t%r<4>;\n\t.reg .f32 \t%f<3>;\n\
                         \t.reg .b64 \t%rd<4>;\n\t.reg .f64 \t%fd<2>;\n";

#[test]
fn each_kind_of_operand_type_error_is_found_where_ptxas_finds_it() {
    let body = format!(
        "{REGISTERS}\tld.param.u64 \t%rd1, [k_param_0];\n\
         \tadd.s32 \t%r1, %rd1, 1;\n\
         \tadd.s32 \t%r2, %f1, %r1;\n\
         \t@%r1 bra \t$L_end;\n\
         \tselp.b32 \t%r3, %r1, %r2, %r1;\n\
         \tadd.f32 \t%f2, %f1, %p1;\n\
         \tld.global.f32 \t%fd1, [%rd1];\n\
         \tst.global.u32 \t[%rd1], %rs1;\n\
         \tsetp.lt.s32 \t%r1, %r2, 0;\n\
         $L_end:\n\tret;"
    );
    let src = format!("{HEADER}{}", kernel(&body));
    let e = errors(&kernel(&body));
    let shown: Vec<(u32, u32, String)> = e
        .iter()
        .map(|e| {
            let loc = Location::of(&src, e.span).unwrap();
            assert_eq!(e.function.as_deref(), Some("k"));
            (loc.line, loc.column, e.to_string())
        })
        .collect();
    let expected = [
        (16, 2, "in `k`: operand 2 `%rd1` is `.b64`, a register of another size than `.s32` takes\n    | add.s32 %r1, %rd1, 1;"),
        (17, 2, "in `k`: operand 2 `%f1` is `.f32`, which `.s32` does not take (integers and floating-point values meet only through `.bN`)\n    | add.s32 %r2, %f1, %r1;"),
        (18, 2, "in `k`: the guard `%r1` is `.b32` where a `.pred` register is wanted\n    | @%r1 bra $L_end;"),
        (19, 2, "in `k`: operand 4 `%r1` is `.b32` where a `.pred` register is wanted\n    | selp.b32 %r3, %r1, %r2, %r1;"),
        (20, 2, "in `k`: operand 3 `%p1` is a `.pred` register where `.f32` wants a value\n    | add.f32 %f2, %f1, %p1;"),
        // `ld` may write a wider register, but not a wider float for a float type.
        (21, 2, "in `k`: operand 1 `%fd1` is `.f64`, a register of another size than `.f32` takes\n    | ld.global.f32 %fd1, [%rd1];"),
        // `st` may read a wider register, never a narrower one.
        (22, 2, "in `k`: operand 2 `%rs1` is `.b16`, a register of another size than `.u32` takes\n    | st.global.u32 [%rd1], %rs1;"),
        (23, 2, "in `k`: operand 1 `%r1` is `.b32` where a `.pred` register is wanted\n    | setp.lt.s32 %r1, %r2, 0;"),
    ];
    let expected: Vec<(u32, u32, String)> = expected.iter().map(|(l, c, m)| (*l, *c, m.to_string())).collect();
    assert_eq!(shown, expected);
    let kind = |i: usize| std::mem::discriminant(&e[i].kind);
    let m = |i: usize| match &e[i].kind {
        ErrorKind::OperandWidth(m)
        | ErrorKind::OperandType(m)
        | ErrorKind::NotAPredicate(m)
        | ErrorKind::UnexpectedPredicate(m) => m.clone(),
        other => panic!("{other:?}"),
    };
    assert!(matches!(e[0].kind, ErrorKind::OperandWidth(_)));
    assert!(matches!(e[1].kind, ErrorKind::OperandType(_)));
    assert!(matches!(e[2].kind, ErrorKind::NotAPredicate(_)));
    assert!(matches!(e[4].kind, ErrorKind::UnexpectedPredicate(_)));
    assert_eq!(kind(5), kind(0));
    assert_eq!(
        m(0),
        Mismatch { place: Place::Operand(1), register: "%rd1".into(), declared: "b64".into(), expected: "s32".into() }
    );
    assert_eq!(m(2).place, Place::Guard);
    // ptxas refuses the same lines, and only those.
    assert_eq!(ptxas_error_lines("kinds", &src), Err(shown.iter().map(|s| s.0).collect()));
}

#[test]
fn relaxed_and_own_operand_types_pass_as_they_assemble() {
    // `ld`/`st`/`cvt` with wider registers, `.bN` for any type of its size, `.wide`
    // results, `.u32` shift amounts and counts, predicate pairs, `mov` packs, and a name
    // declared with another type in an inner scope.
    let body = format!(
        "{REGISTERS}\t.reg .f16 \t%h1;\n\tld.param.u64 \t%rd1, [k_param_0];\n\
         \tld.global.u8 \t%r1, [%rd1];\n\tld.global.s16 \t%rd2, [%rd1];\n\tld.global.f32 \t%r2, [%rd1];\n\
         \tst.global.u8 \t[%rd1], %r1;\n\tst.global.b16 \t[%rd1], %rd2;\n\
         \tcvt.u16.u32 \t%rs1, %rd2;\n\tcvt.s64.s32 \t%rd3, %r1;\n\tcvt.f32.f16 \t%f1, %h1;\n\tcvt.rn.f16.f32 \t%rs2, %f1;\n\
         \tadd.s32 \t%r1, %r1, %r2;\n\tadd.f32 \t%r3, %f1, %r2;\n\tmul.wide.s32 \t%rd2, %r1, %r2;\n\
         \tmad.wide.u32 \t%rd3, %r1, %r2, %rd2;\n\tshl.b64 \t%rd2, %rd2, %r1;\n\tpopc.b64 \t%r1, %rd2;\n\
         \tsetp.lt.s32 \t%p1|%p2, %r1, %r2;\n\tsetp.eq.and.f32 \t%p1, %f1, %f2, !%p2;\n\
         \tselp.b32 \t%r1, %r1, %r2, %p1;\n\tmov.b64 \t%rd2, {{%r1, %r2}};\n\tmov.b64 \t{{%r1, %r2}}, %fd1;\n\
         \tadd.f16 \t%rs1, %rs1, %h1;\n\tcvta.to.global.u64 \t%rd3, %rd1;\n\t@!%p1 bra \t$L_end;\n\
         \t{{\n\t.reg .b64 \t%r1;\n\tadd.s64 \t%r1, %rd2, 1;\n\t}}\n\tadd.s32 \t%r1, %r1, 1;\n\
         $L_end:\n\tret;"
    );
    assert_clean(&kernel(&body));
    assert_eq!(ptxas_error_lines("relaxed", &format!("{HEADER}{}", kernel(&body))), Ok(()));
}

#[test]
fn all_type_errors_of_a_module_are_collected() {
    let bad = |name: &str| {
        kernel(&format!("{REGISTERS}\tadd.s32 \t%r1, %rd1, %r2;\n\tmov.u64 \t%rd1, %r1;\n\t@%f1 ret;\n\tret;"))
            .replace("entry k", &format!("entry {name}"))
    };
    let src = format!("{}{}", bad("k1"), bad("k2"));
    let e = errors(&src);
    let got: Vec<(Option<&str>, String)> =
        e.iter().map(|e| (e.function.as_deref(), e.context.clone().unwrap_or_default())).collect();
    let per = ["add.s32 %r1, %rd1, %r2;", "mov.u64 %rd1, %r1;", "@%f1 ret;"];
    let expected: Vec<(Option<&str>, String)> =
        ["k1", "k2"].iter().flat_map(|f| per.iter().map(move |c| (Some(*f), c.to_string()))).collect();
    assert_eq!(got, expected);
    let full = format!("{HEADER}{src}");
    assert_eq!(ptxas_error_lines("collected", &full).unwrap_err(), error_lines(&full, &e));
}

/// A pass that writes a 64-bit register with a 32-bit add.
struct Narrow;

impl Pass for Narrow {
    fn name(&self) -> &'static str {
        "narrow"
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        for item in &mut module.items {
            if let Item::Function(f) = item {
                let body = f.body.as_mut().unwrap();
                body.insert(0, Statement::Decl(Box::new(gpusan_ptx::ast::VarDecl::reg("b64", "%wide"))));
                let add = Instruction::new(
                    "add",
                    &["s32"],
                    vec![Operand::reg("%wide"), Operand::reg("%wide"), Operand::int(1)],
                );
                body.insert(1, Statement::Inst(add));
            }
        }
        Ok(PassReport::default())
    }
}

#[test]
fn a_pass_that_mistypes_a_register_is_caught_after_the_pass() {
    let e = instrument(&format!("{HEADER}{}", kernel("\tret;")), &Narrow).unwrap_err();
    let Error::Verify { stage, diagnostics } = &e else { panic!("{e}") };
    assert_eq!(*stage, Stage::After("narrow"));
    assert_eq!(diagnostics.len(), 2, "{e}");
    assert!(e.to_string().contains("operand 1 `%wide` is `.b64`, a register of another size than `.s32` takes"), "{e}");
}

/// One line per (instruction form, operand, register type): the valid form, then each
/// operand in turn given a register of every other type.
const FORMS: &[(&str, &[&str])] = &[
    ("add.s32 {0}, {1}, {2};", &["s32", "s32", "s32"]),
    ("add.u64 {0}, {1}, {2};", &["u64", "u64", "u64"]),
    ("add.f32 {0}, {1}, {2};", &["f32", "f32", "f32"]),
    ("add.f16 {0}, {1}, {2};", &["f16", "f16", "f16"]),
    ("add.bf16 {0}, {1}, {2};", &["b16", "b16", "b16"]),
    ("add.rn.f16x2 {0}, {1}, {2};", &["b32", "b32", "b32"]),
    ("sub.s16 {0}, {1}, {2};", &["s16", "s16", "s16"]),
    ("mul.lo.s32 {0}, {1}, {2};", &["s32", "s32", "s32"]),
    ("mul.wide.s32 {0}, {1}, {2};", &["s64", "s32", "s32"]),
    ("mul.wide.u16 {0}, {1}, {2};", &["u32", "u16", "u16"]),
    ("mad.lo.s32 {0}, {1}, {2}, {3};", &["s32", "s32", "s32", "s32"]),
    ("mad.wide.u32 {0}, {1}, {2}, {3};", &["u64", "u32", "u32", "u64"]),
    ("fma.rn.f64 {0}, {1}, {2}, {3};", &["f64", "f64", "f64", "f64"]),
    ("min.s32 {0}, {1}, {2};", &["s32", "s32", "s32"]),
    ("abs.s32 {0}, {1};", &["s32", "s32"]),
    ("neg.f32 {0}, {1};", &["f32", "f32"]),
    ("div.rn.f64 {0}, {1}, {2};", &["f64", "f64", "f64"]),
    ("rem.u64 {0}, {1}, {2};", &["u64", "u64", "u64"]),
    ("rcp.rn.f32 {0}, {1};", &["f32", "f32"]),
    ("ex2.approx.f32 {0}, {1};", &["f32", "f32"]),
    ("and.b32 {0}, {1}, {2};", &["b32", "b32", "b32"]),
    ("xor.pred {0}, {1}, {2};", &["pred", "pred", "pred"]),
    ("not.b16 {0}, {1};", &["b16", "b16"]),
    ("addc.u32 {0}, {1}, {2};", &["u32", "u32", "u32"]),
    ("shl.b32 {0}, {1}, {2};", &["b32", "b32", "u32"]),
    ("shr.s64 {0}, {1}, {2};", &["s64", "s64", "u32"]),
    ("bfe.s64 {0}, {1}, {2}, {3};", &["s64", "s64", "u32", "u32"]),
    ("bfi.b32 {0}, {1}, {2}, {3}, {4};", &["b32", "b32", "b32", "u32", "u32"]),
    ("popc.b64 {0}, {1};", &["u32", "b64"]),
    ("bfind.u64 {0}, {1};", &["u32", "u64"]),
    ("testp.finite.f32 {0}, {1};", &["pred", "f32"]),
    ("selp.f64 {0}, {1}, {2}, {3};", &["f64", "f64", "f64", "pred"]),
    ("setp.eq.and.f32 {0}, {1}, {2}, {3};", &["pred", "f32", "f32", "pred"]),
    ("setp.ne.u64 {0}|{1}, {2}, {3};", &["pred", "pred", "u64", "u64"]),
    ("set.eq.u32.s32 {0}, {1}, {2};", &["u32", "s32", "s32"]),
    ("slct.s32.f32 {0}, {1}, {2}, {3};", &["s32", "s32", "s32", "f32"]),
    ("mov.u32 {0}, {1};", &["u32", "u32"]),
    ("mov.pred {0}, {1};", &["pred", "pred"]),
    ("mov.b64 {0}, {{{1}, {2}}};", &["b64", "b32", "b32"]),
    ("mov.b32 {{{0}, {1}}}, {2};", &["b16", "b16", "b32"]),
    ("cvt.u32.u16 {0}, {1};", &["u32", "u16"]),
    ("cvt.s64.s32 {0}, {1};", &["s64", "s32"]),
    ("cvt.rzi.s32.f32 {0}, {1};", &["s32", "f32"]),
    ("cvt.f64.f32 {0}, {1};", &["f64", "f32"]),
    ("cvt.rn.f16.f32 {0}, {1};", &["f16", "f32"]),
    ("cvt.rn.bf16.f32 {0}, {1};", &["b16", "f32"]),
    ("cvta.to.global.u64 {0}, {1};", &["u64", "u64"]),
    ("isspacep.global {0}, {1};", &["pred", "u64"]),
    ("ld.global.u8 {0}, [%x_u64];", &["u8"]),
    ("ld.global.f32 {0}, [%x_u64];", &["f32"]),
    ("ld.global.b64 {0}, [%x_u64];", &["b64"]),
    ("ld.global.nc.v2.f32 {{{0}, {1}}}, [%x_u64];", &["f32", "f32"]),
    ("ld.global.b128 {0}, [%x_u64];", &["b128"]),
    ("st.global.u32 [%x_u64], {0};", &["u32"]),
    ("st.global.f64 [%x_u64], {0};", &["f64"]),
    ("st.shared.v4.f32 [%x_u64], {{{0}, {1}, {2}, {3}}};", &["f32", "f32", "f32", "f32"]),
    ("atom.global.add.f32 {0}, [%x_u64], {1};", &["f32", "f32"]),
    ("atom.global.cas.b64 {0}, [%x_u64], {1}, {2};", &["b64", "b64", "b64"]),
    ("red.global.add.u64 [%x_u64], {0};", &["u64"]),
    ("shfl.sync.idx.b32 {0}|{1}, {2}, {3}, {4}, {5};", &["b32", "pred", "b32", "b32", "b32", "b32"]),
    ("prmt.b32 {0}, {1}, {2}, {3};", &["b32", "b32", "b32", "b32"]),
    ("lop3.b32 {0}, {1}, {2}, {3}, 0x96;", &["b32", "b32", "b32", "b32"]),
    ("vote.sync.ballot.b32 {0}, {1}, {2};", &["b32", "pred", "b32"]),
    ("vote.sync.any.pred {0}, {1}, {2};", &["pred", "pred", "b32"]),
    ("redux.sync.add.u32 {0}, {1}, {2};", &["u32", "u32", "b32"]),
    ("@{0} bra $L_end;", &["pred"]),
];

/// Every register type a kernel may declare (ptxas has no `.reg .bf16`).
const TYPES: &[&str] = &[
    "b8", "b16", "b32", "b64", "b128", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64",
    "f16x2", "pred",
];

#[test]
fn the_verifier_never_objects_where_ptxas_accepts() {
    let mut body: String = TYPES.iter().map(|t| format!("\t.reg .{t} \t%x_{t};\n")).collect();
    for (form, valid) in FORMS {
        let line = |ops: &[&str]| {
            let regs: Vec<String> = ops.iter().map(|t| format!("%x_{t}")).collect();
            let mut text = form.to_string();
            for (i, r) in regs.iter().enumerate() {
                text = text.replace(&format!("{{{i}}}"), r);
            }
            format!("\t{}\n", text.replace("{{", "{").replace("}}", "}"))
        };
        body.push_str(&line(valid));
        for slot in 0..valid.len() {
            for t in TYPES.iter().filter(|&&t| t != valid[slot]) {
                let mut ops = valid.to_vec();
                ops[slot] = t;
                body.push_str(&line(&ops));
            }
        }
    }
    body.push_str("$L_end:\n\tret;");
    let src = format!(".version 8.7\n.target sm_90a\n.address_size 64\n\n{}", kernel(&body));
    let module = gpusan_ptx::parse(&src).unwrap();
    let found = verify(&module).map_or_else(|e| error_lines(&src, &e.0), |()| Vec::new());
    let refused = ptxas_error_lines("matrix", &src).unwrap_err();
    let false_errors: Vec<&str> = found
        .iter()
        .filter(|l| refused.binary_search(l).is_err())
        .map(|&l| src.lines().nth(l as usize - 1).unwrap())
        .collect();
    assert!(false_errors.is_empty(), "the verifier objects where ptxas does not:\n{}", false_errors.join("\n"));
    // Not vacuous: most of what ptxas refuses is found (the rest is in forms and
    // register types the verifier leaves alone, such as `.f16x2` registers).
    assert!(found.len() * 10 >= refused.len() * 9, "found {} of {} refused lines", found.len(), refused.len());
}

#[test]
fn a_register_declared_again_in_an_inner_scope_has_the_inner_type_there() {
    let body = "\t.reg .b32 \t%r<2>;\n\tmov.u32 \t%r1, 0;\n\t{\n\t.reg .b64 \t%r1;\n\tadd.s32 \t%r1, %r1, 1;\n\
                \tadd.s64 \t%r1, %r1, 1;\n\t}\n\tadd.s32 \t%r1, %r1, 1;\n\tadd.s64 \t%r1, %r1, 1;\n\tret;";
    let src = format!("{HEADER}{}", kernel(body));
    let e = errors(&kernel(body));
    let lines = error_lines(&src, &e);
    assert_eq!(lines, [13, 17], "{e:?}");
    assert!(e.iter().all(|e| matches!(e.kind, ErrorKind::OperandWidth(_))), "{e:?}");
    assert_eq!(ptxas_error_lines("shadow", &src), Err(lines));
}
