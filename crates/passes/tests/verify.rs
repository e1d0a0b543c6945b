//! The verifier: every kind of error is found, all of them in one run, at the right place,
//! and well-formed modules pass (the whole corpus does too: `tests/corpus.rs`).

use gpusan_passes::verify::{verify, ErrorKind, VerifierError, MAX_VERSION};
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
    let module = gpusan_ptx::parse(".target sm_90\n").unwrap();
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
