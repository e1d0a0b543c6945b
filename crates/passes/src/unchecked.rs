//! Unchecked copies of a module's functions, appended to its instrumented build, so one
//! loaded module can run a launch checked or not: a run that checks only some launches
//! (compute-sanitizer's `--launch-skip`/`--launch-count`, `--kernel-name-exclude`) launches
//! `__gpusan_unchecked_<kernel>` for the others. Being in the same module, the copies see
//! the same module variables as the checked functions (a second module would have its own),
//! and their calls go to unchecked copies of the device functions, so nothing they run
//! checks or reports.
//!
//! The copies are the program's own functions, renamed: every reference to a function the
//! module defines (calls, function addresses, call targets, aliases) is renamed with them.
//! Debug information stays with the originals: `.loc` lines, DWARF blocks and the
//! `$L__func_*` labels DWARF refers to are left out of the copies (one label of a name per
//! module for the debug sections to point at).

use gpusan_abi::UNCHECKED_PREFIX;
use gpusan_ptx::ast::{Expr, Function, Initializer, Item, Module, Name, NameSet, Operand, Statement};

/// The name of `function`'s unchecked copy.
pub fn unchecked_name(function: &str) -> String {
    format!("{UNCHECKED_PREFIX}{function}")
}

/// The text of the unchecked copies of every function `src` defines (declarations of them
/// too, and aliases), to be appended to the module's instrumented build.
pub fn unchecked_copies(src: &str) -> Result<String, gpusan_ptx::ParseError> {
    let module = gpusan_ptx::parse(src)?;
    Ok(copies_of(&module))
}

fn copies_of(module: &Module) -> String {
    let defined: NameSet = module
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) if f.body.is_some() => Some(f.name),
            _ => None,
        })
        .collect();
    let rename = |n: &Name| if defined.contains(n) { Name::from(unchecked_name(n).as_str()) } else { *n };
    let mut out = Module { items: Vec::new() };
    for item in &module.items {
        match item {
            Item::Function(f) if defined.contains(&f.name) => {
                let mut copy: Function = (**f).clone();
                copy.name = rename(&f.name);
                if let Some(body) = copy.body.as_mut() {
                    strip_debug(body);
                    for s in body.iter_mut() {
                        rename_statement(s, &rename);
                    }
                }
                out.items.push(Item::Function(Box::new(copy)));
            }
            Item::Alias { alias, target } if defined.contains(target) => {
                out.items
                    .push(Item::Alias { alias: Name::from(unchecked_name(alias).as_str()), target: rename(target) });
            }
            _ => {}
        }
    }
    let mut text = String::new();
    for item in &out.items {
        gpusan_ptx::printer::write_item(&mut text, item).expect("writing to a String");
    }
    text
}

/// Leaves out what debug sections point at: the copies have no debug information.
fn strip_debug(body: &mut Vec<Statement>) {
    body.retain(|s| match s {
        Statement::Loc(_) | Statement::Raw(_) => false,
        Statement::Label(l, _) => !l.starts_with("$L__func"),
        _ => true,
    });
    for s in body.iter_mut() {
        if let Statement::Block(inner) = s {
            strip_debug(inner);
        }
    }
}

fn rename_statement(s: &mut Statement, rename: &impl Fn(&Name) -> Name) {
    match s {
        Statement::Inst(i) => {
            for op in i.operands.iter_mut() {
                rename_operand(op, rename);
            }
        }
        Statement::Block(inner) => {
            for s in inner {
                rename_statement(s, rename);
            }
        }
        Statement::CallTargets { targets, .. } => {
            for t in targets {
                *t = rename(t);
            }
        }
        Statement::Decl(d) => {
            if let Some(init) = d.init.as_mut() {
                rename_init(init, rename);
            }
        }
        _ => {}
    }
}

fn rename_operand(op: &mut Operand, rename: &impl Fn(&Name) -> Name) {
    match op {
        Operand::Name(n) => *n = rename(n),
        Operand::AddressList(ops) | Operand::Vector(ops) | Operand::List(ops) => {
            for o in ops.iter_mut() {
                rename_operand(o, rename);
            }
        }
        Operand::Suffixed(b) => rename_operand(&mut b.0, rename),
        Operand::Expr(e) => rename_expr(e, rename),
        _ => {}
    }
}

fn rename_init(init: &mut Initializer, rename: &impl Fn(&Name) -> Name) {
    match init {
        Initializer::Expr(e) => rename_expr(e, rename),
        Initializer::List(l) => {
            for i in l {
                rename_init(i, rename);
            }
        }
    }
}

fn rename_expr(e: &mut Expr, rename: &impl Fn(&Name) -> Name) {
    match e {
        Expr::Symbol(n) => *n = rename(n),
        Expr::Call { args, .. } => {
            for a in args {
                rename_expr(a, rename);
            }
        }
        Expr::Unary { expr, .. } | Expr::Paren(expr) => rename_expr(expr, rename),
        Expr::Binary { lhs, rhs, .. } => {
            rename_expr(lhs, rename);
            rename_expr(rhs, rename);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = ".version 8.0\n.target sm_90\n.address_size 64\n.file 1 \"a.cu\"\n\
        .global .align 4 .u32 counter;\n\
        .func (.param .b32 r) helper(.param .b64 p);\n\
        .visible .entry kern(.param .u64 p)\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n\
        $L__func_begin0:\n\t.loc 1 3 1\n\tld.param.u64 %rd1, [p];\n\tmov.u64 %rd2, helper;\n\
        \t{\n\t.param .b64 a;\n\t.param .b32 r;\n\tst.param.b64 [a], %rd1;\n\
        \tcall.uni (r), helper, (a);\n\tld.param.b32 %r1, [r];\n\t}\n\
        \tst.global.u32 [counter], %r1;\n\tret;\n}\n\
        .func (.param .b32 r) helper(.param .b64 p)\n{\n\t.reg .b64 %rd<2>;\n\t.reg .b32 %r<2>;\n\
        \tld.param.u64 %rd1, [p];\n\tcvta.to.global.u64 %rd1, %rd1;\n\tld.global.u32 %r1, [%rd1];\n\
        \tst.param.b32 [r], %r1;\n\tret;\n}\n\
        .extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 a);\n";

    #[test]
    fn copies_call_copies_and_keep_the_modules_variables_and_external_functions() {
        // Compared without the printer's layout.
        let copies: String = unchecked_copies(SRC).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(copies.contains(".entry __gpusan_unchecked_kern("), "{copies}");
        assert!(copies.contains("__gpusan_unchecked_helper( .param .b64 p ) ;"), "the declaration too: {copies}");
        assert!(copies.contains("call.uni (r), __gpusan_unchecked_helper, (a);"), "{copies}");
        assert!(copies.contains("mov.u64 %rd2, __gpusan_unchecked_helper;"), "{copies}");
        assert!(copies.contains("[counter]"), "the same variable: {copies}");
        assert!(!copies.contains("vprintf"), "external functions are not copied: {copies}");
        assert!(!copies.contains(".loc") && !copies.contains("$L__func_begin0"), "{copies}");
    }

    /// The instrumented module with its copies is one module ptxas assembles.
    #[test]
    fn the_instrumented_module_with_its_copies_assembles() {
        let checked = crate::instrument(SRC, &crate::check::Check).unwrap().ptx;
        let whole = format!("{checked}{}", unchecked_copies(SRC).unwrap());
        let dir = std::env::temp_dir().join(format!("gpusan-unchecked-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ptx = dir.join("m.ptx");
        std::fs::write(&ptx, &whole).unwrap();
        let r = gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &ptx, &dir.join("m.cubin"));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(r.is_ok(), "{}\n{whole}", r.unwrap_err());
    }
}
