//! Located error messages for commands that instrument PTX (`gpusan instrument`, the
//! `ptxas` stand-in): a failed parse, pass or verification is shown as a miette snippet
//! of the input with the offending spot marked, so a user compiling through nvcc or
//! Triton sees which line of which PTX file gpusan refused and why.

use gpusan_passes::{Diagnostic, Error, Stage};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource, Report};

/// `err` (from instrumenting `src`, read from `path`) as text for standard error: the
/// message, then the snippet with its `path:line:column` header.
pub fn render(err: &Error, path: &str, src: &str) -> String {
    let diagnostic = match err {
        Error::Parse(e) => {
            let (start, len) = clamp(src, e.span.start as usize, e.span.end.saturating_sub(e.span.start) as usize);
            MietteDiagnostic::new(format!("{}: {}", position(path, e.line, e.column), e.message))
                .with_label(LabeledSpan::at(start..start + len, "here"))
        }
        Error::Pass { pass, diagnostic } => {
            let mut d = MietteDiagnostic::new(format!(
                "{}pass `{pass}` cannot instrument this module: {}",
                prefix(path, diagnostic),
                in_function(diagnostic)
            ));
            if let Some(l) = label(src, diagnostic, "here") {
                d = d.with_label(l);
            }
            d
        }
        Error::Verify { stage, diagnostics } => {
            let what = match stage {
                Stage::Input => "the input is not valid PTX".to_string(),
                Stage::After(p) => format!("pass `{p}` produced invalid PTX; this is a bug in the pass"),
            };
            let first = diagnostics.first().map(|d| prefix(path, d)).unwrap_or_default();
            let mut d = MietteDiagnostic::new(format!("{first}{what}"));
            let mut unlocated = Vec::new();
            for diag in diagnostics {
                match label(src, diag, &in_function(diag)) {
                    Some(l) => d = d.with_label(l),
                    None => unlocated.push(diag.to_string()),
                }
            }
            if !unlocated.is_empty() {
                d = d.with_help(unlocated.join("\n"));
            }
            d
        }
    };
    let report = Report::new(diagnostic).with_source_code(NamedSource::new(path, src.to_string()));
    let theme = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let mut out = String::new();
    // Unwrapped: the first line stays `path:line:column: message` for tools that parse it.
    // Writing into a String cannot fail; a handler error would only lose the snippet.
    if GraphicalReportHandler::new_themed(theme)
        .with_wrap_lines(false)
        .render_report(&mut out, report.as_ref())
        .is_err()
    {
        out = format!("{err}\n");
    }
    out
}

fn position(path: &str, line: u32, column: u32) -> String {
    format!("{path}:{line}:{column}")
}

/// `path:line:column: ` of a located diagnostic, so the first line alone says where
/// (editors and CI logs parse that form).
fn prefix(path: &str, d: &Diagnostic) -> String {
    d.location.as_ref().map(|l| format!("{}: ", position(path, l.line, l.column))).unwrap_or_default()
}

fn in_function(d: &Diagnostic) -> String {
    match &d.function {
        Some(f) => format!("in `{f}`: {}", d.message),
        None => d.message.clone(),
    }
}

/// A label on the word the diagnostic's line and column point at.
fn label(src: &str, d: &Diagnostic, text: &str) -> Option<LabeledSpan> {
    let l = d.location.as_ref()?;
    let line_start = if l.line <= 1 { 0 } else { src.match_indices('\n').nth(l.line as usize - 2)?.0 + 1 };
    let line = &src[line_start..src[line_start..].find('\n').map_or(src.len(), |i| line_start + i)];
    let col = line.char_indices().nth(l.column.saturating_sub(1) as usize).map_or(line.len(), |(i, _)| i);
    let word = line[col..].find(|c: char| c.is_whitespace() || c == ';' || c == ',').unwrap_or(line.len() - col);
    let (start, len) = clamp(src, line_start + col, word);
    Some(LabeledSpan::at(start..start + len, text))
}

/// A span inside `src` of at least one character where there is one.
fn clamp(src: &str, start: usize, len: usize) -> (usize, usize) {
    let start = start.min(src.len());
    let len = len.max(1).min(src.len() - start);
    (start, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpusan_abi::ERRORS_SYMBOL;

    const SRC: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry k(.param .u64 p)\n{\n\
                       \t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 0;\n\tret\n}\n";

    #[test]
    fn parse_errors_name_file_line_and_column_and_show_the_line() {
        let err = gpusan_passes::instrument(SRC, &gpusan_passes::check::Check).unwrap_err();
        let text = render(&err, "k.ptx", SRC);
        assert!(text.contains("k.ptx:11:1: expected an operand or `;`"), "{text}");
        assert!(text.contains("[k.ptx:11:1]"), "{text}");
        assert!(text.contains("11 │ }"), "{text}");
    }

    #[test]
    fn pass_errors_point_at_the_declaration_they_refuse() {
        let src = SRC.replace("\tret\n", "\tret;\n").replace(
            ".address_size 64\n",
            &format!(".address_size 64\n.visible .global .align 8 .u64 {ERRORS_SYMBOL};\n"),
        );
        let err = gpusan_passes::instrument(&src, &gpusan_passes::check::Check).unwrap_err();
        let text = render(&err, "k.ptx", &src);
        assert!(text.contains("k.ptx:4:10: pass `check` cannot instrument this module"), "{text}");
        assert!(text.contains(ERRORS_SYMBOL), "{text}");
    }
}
