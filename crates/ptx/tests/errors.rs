//! Malformed PTX gets a located error that says what was expected, never a panic.

use gpusan_ptx::{parse, ParseError};

const HEAD: &str = ".version 9.0\n.target sm_90\n.address_size 64\n";

fn err(src: &str) -> ParseError {
    match parse(src) {
        Ok(_) => panic!("parsed without error:\n{src}"),
        Err(e) => e,
    }
}

/// Asserts the error's 1-based line and column and that its message contains `needle`.
#[track_caller]
fn assert_err(src: &str, line: u32, column: u32, needle: &str) {
    let e = err(src);
    assert_eq!((e.line, e.column), (line, column), "wrong location for `{}`:\n{e}", e.message);
    assert!(e.message.contains(needle), "message `{}` lacks `{needle}`", e.message);
}

fn kernel(body: &str) -> String {
    format!("{HEAD}.visible .entry k(\n\t.param .u64 p\n)\n{{\n\t.reg .b32 %r<4>;\n{body}\n}}\n")
}

#[test]
fn truncated_file_points_at_the_end() {
    let full = kernel("\tld.param.u64 %r1, [p];\n\tret;");
    let cut = &full[..full.find("ret").unwrap()];
    let e = err(cut);
    assert_eq!(e.span.start as usize, cut.len());
    assert!(e.message.contains("expected `}` closing the body, found the end of the file"), "{}", e.message);
}

#[test]
fn truncated_inside_an_instruction() {
    let src = format!("{HEAD}.visible .entry k()\n{{\n\tadd.s32 %r1, %r2,");
    let e = err(&src);
    assert_eq!(e.line, 6);
    assert!(e.message.contains("expected an operand, found the end of the file"), "{}", e.message);
}

#[test]
fn bad_operand() {
    // line 9 of the kernel: `add.s32 %r1, ;`
    assert_err(&kernel("\tadd.s32 %r1, ;"), 9, 15, "expected an operand, found `;`");
}

#[test]
fn missing_semicolon_between_instructions() {
    assert_err(&kernel("\tadd.s32 %r1, %r2, %r3\n\tret;"), 10, 2, "expected `,` or `;` after the operand");
}

#[test]
fn bad_address_offset() {
    assert_err(&kernel("\tld.global.u32 %r1, [%r2+%r3];"), 9, 26, "register `%r3` in a constant expression");
}

#[test]
fn unknown_directive_at_module_level() {
    assert_err(&format!("{HEAD}.bogus 1;\n"), 4, 1, "unknown directive `.bogus` at module level");
}

#[test]
fn unknown_directive_in_a_body() {
    assert_err(&kernel("\t.maxwell 3;"), 9, 2, "unknown directive `.maxwell` in a function body");
}

#[test]
fn stray_character() {
    assert_err(&kernel("\tadd.s32 %r1, %r2, #3;"), 9, 20, "`#`, which starts no PTX token");
}

#[test]
fn unterminated_string() {
    let e = err(&format!("{HEAD}.file 1 \"a.cu\n"));
    assert_eq!(e.line, 4);
}

#[test]
fn unterminated_block_comment() {
    let e = err(&format!("{HEAD}/* never closed\n.visible .entry k() {{ ret; }}\n"));
    assert_eq!((e.line, e.column), (4, 1), "{e}");
}

#[test]
fn integer_too_large() {
    assert_err(&kernel("\tmov.u64 %r1, 99999999999999999999999;"), 9, 15, "does not fit in 64 bits");
}

#[test]
fn register_count_needs_brackets_closed() {
    assert_err(&format!("{HEAD}.visible .entry k()\n{{\n\t.reg .b32 %r<4;\n}}\n"), 6, 16, "expected `>`");
}

#[test]
fn unclosed_section_points_at_the_end() {
    let src = format!("{HEAD}.section .debug_info {{\n.b8 1, 2\n");
    let e = err(&src);
    assert!(e.message.contains("closing the `.section`"), "{}", e.message);
    assert_eq!(e.span.start as usize, src.len());
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let body = "{".repeat(100_000);
    let e = err(&format!("{HEAD}.visible .entry k()\n{{\n{body}"));
    assert!(e.message.contains("nesting deeper"), "{}", e.message);
}

#[test]
fn error_display_has_path_line_column_and_caret() {
    let e = err(&kernel("\tadd.s32 %r1, ;")).with_path("k.ptx");
    let shown = e.to_string();
    assert!(shown.starts_with("k.ptx:9:15: expected an operand"), "{shown}");
    assert!(shown.contains("9 |  add.s32 %r1, ;"), "{shown}");
    assert!(shown.lines().last().unwrap().ends_with('^'), "{shown}");
}

#[test]
fn long_expression_chains_are_refused_not_overflowed() {
    let chain = vec!["1"; 50_000].join("+");
    let e = err(&format!("{HEAD}.global .u64 x = {chain};\n"));
    assert!(e.message.contains("expression nesting deeper"), "{}", e.message);
}

#[test]
fn an_error_past_column_65535_displays_a_cut_line() {
    let e = err(&kernel(&format!("\t{}ret #;", " ".repeat(70_000))));
    assert_eq!((e.line, e.column), (9, 70_006));
    let shown = e.to_string();
    assert!(shown.lines().all(|l| l.len() < 300), "{shown}");
    let caret = shown.lines().last().unwrap().find('^').unwrap();
    let text = shown.lines().nth(2).unwrap();
    assert_eq!(text.chars().nth(caret), Some('#'), "{shown}");
}

#[test]
fn control_characters_of_the_input_are_escaped_in_the_message_and_snippet() {
    let e = err(&kernel("\tmov.u32 %r1, \"\u{1b}[2J\u{7}\";"));
    let shown = e.to_string();
    assert!(!shown.contains('\u{1b}') && !shown.contains('\u{7}'), "{shown:?}");
    assert!(shown.contains("\\u{1b}[2J\\u{7}"), "{shown}");
    let e = err(&kernel("\t\u{1b}ret;"));
    assert!(e.message.contains("`\\u{1b}`, which starts no PTX token"), "{}", e.message);
}

#[test]
fn a_lex_error_carries_its_byte_offset() {
    let src = kernel("\tadd.s32 %r1, %r2, #3;");
    let e = err(&src);
    assert_eq!(e.span.start as usize, src.find('#').unwrap());
    // Random bytes that are text but no PTX: an error at a byte, never a panic.
    let e = err("\u{0}\u{1}garbage");
    assert_eq!((e.span.start, e.line, e.column), (0, 1, 1));
}

#[test]
fn a_register_count_over_the_limit_is_refused_at_the_count() {
    let src = format!("{HEAD}.visible .entry k()\n{{\n\t.reg .b64 %rd<100000000>;\n\tret;\n}}\n");
    assert_err(&src, 6, 16, "register count 100000000 is over the limit of 4194304");
    let at_limit =
        format!("{HEAD}.visible .entry k()\n{{\n\t.reg .b64 %rd<{}>;\n\tret;\n}}\n", gpusan_ptx::MAX_REGISTER_COUNT);
    parse(&at_limit).unwrap();
}

/// ptxas refuses a file without `.version` first ("Missing .version directive at start
/// of file") and one whose `.target` does not follow; so does the parser, an empty file
/// included.
#[test]
fn a_module_starts_with_version_then_target() {
    for empty in ["", "// only a comment\n", "\n\n"] {
        let e = err(empty);
        assert!(e.message.contains("expected `.version`"), "{empty:?}: {}", e.message);
        assert!(e.message.contains("found the end of the file"), "{}", e.message);
    }
    assert_err(".target sm_90\n.version 9.0\n", 1, 1, "expected `.version`: a PTX module starts with");
    assert_err(".version 9.0\n.address_size 64\n.target sm_90\n", 2, 1, "expected `.target`");
    parse(".version 9.0\n.target sm_90\n").unwrap();
}

#[test]
fn an_array_whose_size_overflows_is_refused_at_the_dimension() {
    assert_err(
        &format!("{HEAD}.global .b8 arr[18446744073709551615];\n"),
        4,
        17,
        "larger than 9223372036854775807 bytes",
    );
    // Eight-byte elements: the product overflows 64 bits though the count does not.
    assert_err(&format!("{HEAD}.global .u64 arr[4][2305843009213693952];\n"), 4, 21, "larger than");
    assert_err(
        &format!("{HEAD}.visible .entry k(.param .align 8 .b8 p[9223372036854775808])\n{{\n\tret;\n}}\n"),
        4,
        41,
        "larger than",
    );
    parse(&format!("{HEAD}.global .b8 arr[9223372036854775807];\n")).unwrap();
    parse(&format!("{HEAD}.extern .shared .align 16 .b8 dyn[];\n")).unwrap();
}

/// A misspelt state space (`ld.globl`) once parsed and was instrumented as a generic
/// access; every modifier of a memory instruction must be one PTX defines.
#[test]
fn an_unknown_modifier_of_a_memory_instruction_is_refused_at_it() {
    assert_err(&kernel("\tld.globl.u32 %r1, [p];"), 9, 4, "unknown modifier `.globl` of `ld`");
    assert_err(&kernel("\tst.global.v4.u23 [p], {%r1, %r1, %r1, %r1};"), 9, 14, "unknown modifier `.u23` of `st`");
    assert_err(&kernel("\tatom.shared::cta.adds.u32 %r1, [p], 1;"), 9, 18, "unknown modifier `.adds` of `atom`");
    assert_err(&kernel("\tcvta.to.gobal.u64 %r1, %r1;"), 9, 9, "unknown modifier `.gobal` of `cvta`");
    assert_err(&kernel("\tisspacep.shard %r1, %r1;"), 9, 10, "unknown modifier `.shard` of `isspacep`");
    // Other instructions keep their open grammar: a new modifier parses without a table.
    parse(&kernel("\tadd.newthing.s32 %r1, %r1, 1;\n\tret;")).unwrap();
    parse(&kernel(
        "\tld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%r1, %r1, %r1, %r1}, [p];\n\
         \tst.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [p], %r1, [p];\n\
         \tatom.relaxed.gpu.global.add.noftz.bf16x2 %r1, [p], %r1;\n\tret;",
    ))
    .unwrap();
}

proptest::proptest! {
    /// Any text, valid PTX spliced with arbitrary characters included: the parser returns,
    /// and an error points inside the text, at the line and column of its byte offset, and
    /// shows no raw control character.
    #[test]
    fn any_text_gets_a_located_escaped_error_or_parses(
        junk in "(\\PC|[\\x00-\\x1f\\x7f\\u{202e}]){0,40}",
        at in 0usize..400,
        wide in 0usize..3,
    ) {
        let base = kernel("\tld.global.u32 %r1, [p];\n\tret;");
        let at = (0..=at.min(base.len())).rev().find(|&i| base.is_char_boundary(i)).unwrap();
        let src = format!("{}{}{}{}", &base[..at], " ".repeat(wide * 40_000), junk, &base[at..]);
        if let Err(e) = parse(&src) {
            let start = e.span.start as usize;
            proptest::prop_assert!(start <= src.len());
            let before = &src[..start];
            proptest::prop_assert_eq!(e.line as usize, before.matches('\n').count() + 1);
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            proptest::prop_assert_eq!(e.column as usize, before[line_start..].chars().count() + 1);
            let shown = e.to_string();
            proptest::prop_assert!(!shown.chars().any(|c| c.is_control() && c != '\n' || c == '\u{202e}'), "{:?}", shown);
            proptest::prop_assert!(shown.lines().all(|l| l.chars().count() < 400));
        }
    }
}
