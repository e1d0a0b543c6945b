//! Located error messages for commands that instrument PTX (`gpusan instrument`, the
//! `ptxas` stand-in): a failed parse, pass or verification is shown as a miette snippet
//! of the input with the offending spot marked, so a user compiling through nvcc or
//! Triton sees which line of which PTX file gpusan refused and why.

use gpusan_passes::{Diagnostic, Error, Stage};
use std::ops::Range;

use gpusan_ptx::excerpt;
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource, Report};

/// `err` (from instrumenting `src`, read from `path`) as text for standard error: the
/// message, then the snippet with its `path:line:column` header.
pub fn render(err: &Error, path: &str, src: &str) -> String {
    let mut labels = Vec::new();
    let mut diagnostic = match err {
        Error::Parse(e) => {
            let (start, len) = clamp(src, e.span.start as usize, e.span.end.saturating_sub(e.span.start) as usize);
            labels.push((start..start + len, "here".to_string()));
            MietteDiagnostic::new(format!("{}: {}", position(path, e.line, e.column), e.message))
        }
        Error::Pass { pass, diagnostic } => {
            labels.extend(label(src, diagnostic, "here"));
            MietteDiagnostic::new(format!(
                "{}pass `{pass}` cannot instrument this module: {}",
                prefix(path, diagnostic),
                in_function(diagnostic)
            ))
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
                    Some(l) => labels.push(l),
                    None => unlocated.push(excerpt::escape(&diag.to_string())),
                }
            }
            if !unlocated.is_empty() {
                d = d.with_help(unlocated.join("\n"));
            }
            d
        }
    };
    diagnostic.message = excerpt::escape(&diagnostic.message);
    let (shown, labels) = view(src, &labels);
    let diagnostic = diagnostic.with_labels(labels);
    let report = Report::new(diagnostic).with_source_code(NamedSource::new(excerpt::escape(path), shown));
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
        out = excerpt::escape(&format!("{err}")) + "\n";
    }
    out
}

/// Lines shown around a label, before and after it.
const CONTEXT_LINES: usize = 3;

/// The source miette is given in place of `src`: the lines it may show (those near a
/// label) escaped and cut to a window around the label by [`excerpt::window`], every
/// other line empty so line numbers stay the file's, and the labels moved into it. The
/// file is the user's input: raw, it could drive the terminal, and a long line would
/// overflow miette's column arithmetic (a formatting width past 65,535 panics).
fn view(src: &str, labels: &[(Range<usize>, String)]) -> (String, Vec<LabeledSpan>) {
    let line_of = |offset: usize| src.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count();
    let located: Vec<(usize, &Range<usize>, &String)> = labels.iter().map(|(r, t)| (line_of(r.start), r, t)).collect();
    let mut shown = String::new();
    let mut moved = Vec::new();
    let mut line_start = 0;
    for (n, line) in src.split('\n').enumerate() {
        if n > 0 {
            shown.push('\n');
        }
        let on_line: Vec<_> = located.iter().filter(|(l, _, _)| *l == n).collect();
        if let Some((_, first, _)) = on_line.first() {
            let w = excerpt::window(line, first.start - line_start, first.end - line_start);
            for (_, _, text) in &on_line {
                let start = shown.len() + w.marked.start;
                moved.push(LabeledSpan::at(start..start + w.marked.len(), text.as_str()));
            }
            shown.push_str(&w.text);
        } else if located.iter().any(|(l, _, _)| l.abs_diff(n) <= CONTEXT_LINES) {
            shown.push_str(&excerpt::window(line, 0, 0).text);
        }
        line_start += line.len() + 1;
    }
    (shown, moved)
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
fn label(src: &str, d: &Diagnostic, text: &str) -> Option<(Range<usize>, String)> {
    let l = d.location.as_ref()?;
    let line_start = if l.line <= 1 { 0 } else { src.match_indices('\n').nth(l.line as usize - 2)?.0 + 1 };
    let line = &src[line_start..src[line_start..].find('\n').map_or(src.len(), |i| line_start + i)];
    let col = line.char_indices().nth(l.column.saturating_sub(1) as usize).map_or(line.len(), |(i, _)| i);
    let word = line[col..].find(|c: char| c.is_whitespace() || c == ';' || c == ',').unwrap_or(line.len() - col);
    let (start, len) = clamp(src, line_start + col, word);
    Some((start..start + len, text.to_string()))
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
