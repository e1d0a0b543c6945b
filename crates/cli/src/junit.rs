//! `gpusan run --report-junit FILE`: the run as JUnit XML, the test report CI systems read.
//!
//! One test case per kernel the program launched, and one for the host side (API calls,
//! faults, leaks). Per kernel rather than per finding kind, because that is what a CI user
//! tracks: a test case keeps its name from run to run, so the CI's history shows which
//! kernel started failing and when, and a clean kernel is a passing test rather than the
//! absence of one. A kernel gpusan did not check is a skipped test with the reason (a
//! failure under `--require-checked`, where that is an error), so a run that checked nothing
//! never reads as green. A failure carries every finding's text.

use std::io::Cursor;

use gpusan_runtime::coverage::KernelCoverage;
use gpusan_runtime::report::{Counted, Document, ErrorKind, NO_CUDA_ACTIVITY};
use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::Writer;

use crate::findings;

/// What the JUnit report is named by.
pub struct JunitConfig {
    /// The test suite's name: the program checked.
    pub suite: String,
}

/// A test case's verdict.
enum Verdict {
    Passed,
    Skipped(String),
    /// Its `message` (the first finding's headline, and how many more), `type` (the first
    /// finding's kind), and text (every finding's).
    Failed {
        message: String,
        kind: String,
        text: String,
    },
}

struct Case {
    class: &'static str,
    name: String,
    verdict: Verdict,
}

/// The JUnit XML of `doc`.
pub fn to_junit(doc: &Document, config: &JunitConfig) -> String {
    let cases = cases(doc);
    let count = |f: fn(&Verdict) -> bool| cases.iter().filter(|c| f(&c.verdict)).count().to_string();
    let (tests, failures, skipped) = (
        cases.len().to_string(),
        count(|v| matches!(v, Verdict::Failed { .. })),
        count(|v| matches!(v, Verdict::Skipped(_))),
    );
    let suite = xml_text(&config.suite);
    let mut w = Writer::new_with_indent(Cursor::new(Vec::new()), b' ', 2);
    // Writing into memory cannot fail.
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let _ = w
        .create_element("testsuites")
        .with_attributes([("name", "gpusan"), ("tests", &tests), ("failures", &failures), ("errors", "0")])
        .with_attribute(("skipped", skipped.as_str()))
        .write_inner_content(|w| {
            w.create_element("testsuite")
                .with_attributes([("name", suite.as_str()), ("tests", &tests), ("failures", &failures)])
                .with_attributes([("errors", "0"), ("skipped", skipped.as_str())])
                .write_inner_content(|w| {
                    w.create_element("properties").write_inner_content(|w| {
                        for (name, value) in [("tool", "gpusan"), ("version", &doc.version), ("mode", &doc.mode)] {
                            w.create_element("property")
                                .with_attributes([("name", name), ("value", value)])
                                .write_empty()?;
                        }
                        Ok(())
                    })?;
                    for case in &cases {
                        write_case(w, case)?;
                    }
                    if !doc.notes.is_empty() {
                        w.create_element("system-out")
                            .write_text_content(BytesText::new(&xml_text(&doc.notes.join("\n"))))?;
                    }
                    Ok(())
                })?;
            Ok(())
        });
    let mut xml = String::from_utf8(w.into_inner().into_inner()).unwrap_or_default();
    xml.push('\n');
    xml
}

fn write_case(w: &mut Writer<Cursor<Vec<u8>>>, case: &Case) -> std::io::Result<()> {
    let name = xml_text(&case.name);
    let element = w.create_element("testcase").with_attributes([("classname", case.class), ("name", &name)]);
    match &case.verdict {
        Verdict::Passed => element.write_empty().map(drop),
        Verdict::Skipped(why) => element
            .write_inner_content(|w| {
                w.create_element("skipped").with_attribute(("message", xml_text(why).as_str())).write_empty().map(drop)
            })
            .map(drop),
        Verdict::Failed { message, kind, text } => element
            .write_inner_content(|w| {
                w.create_element("failure")
                    .with_attributes([("message", xml_text(message).as_str()), ("type", kind)])
                    .write_text_content(BytesText::new(&xml_text(text)))
                    .map(drop)
            })
            .map(drop),
    }
}

/// The test cases: each kernel launched (coverage's order), then any kernel that has a
/// finding but is not in the coverage, then the host side.
fn cases(doc: &Document) -> Vec<Case> {
    let require_checked = doc.summary.by_kind.get(&ErrorKind::UncheckedLaunch).is_some_and(|&n| n > 0);
    let in_kernel = |symbol: &str| -> Vec<&Counted> {
        doc.errors.iter().filter(|e| findings::kernel_symbol(&e.report) == Some(symbol)).collect()
    };
    let mut cases: Vec<Case> = doc
        .coverage
        .kernels
        .iter()
        .map(|k| Case {
            class: "gpusan.kernel",
            name: k.name.clone(),
            verdict: kernel_verdict(k, &in_kernel(&k.mangled), require_checked),
        })
        .collect();
    let mut orphans: Vec<&str> = doc
        .errors
        .iter()
        .filter_map(|e| findings::kernel_symbol(&e.report))
        .filter(|s| !doc.coverage.kernels.iter().any(|k| k.mangled == *s))
        .collect();
    orphans.sort_unstable();
    orphans.dedup();
    for symbol in orphans {
        let verdict = failed(&in_kernel(symbol), &[]);
        cases.push(Case { class: "gpusan.kernel", name: symbol.to_string(), verdict });
    }
    let host: Vec<&Counted> = doc.errors.iter().filter(|e| findings::kernel_symbol(&e.report).is_none()).collect();
    let leaks: Vec<String> =
        doc.leaks.iter().map(|l| format!("Leak: {} bytes in {} allocation(s) never freed", l.bytes, l.count)).collect();
    let verdict = if host.is_empty() && leaks.is_empty() {
        if doc.cuda_processes == 0 {
            Verdict::Skipped(NO_CUDA_ACTIVITY.to_string())
        } else {
            Verdict::Passed
        }
    } else {
        failed(&host, &leaks)
    };
    cases.push(Case { class: "gpusan.host", name: "host API calls, faults and leaks".into(), verdict });
    cases
}

fn kernel_verdict(k: &KernelCoverage, found: &[&Counted], require_checked: bool) -> Verdict {
    match (&k.unchecked, found.is_empty()) {
        (_, false) => failed(found, &[]),
        (Some(why), true) if require_checked => Verdict::Failed {
            message: format!("launched unchecked ({why}) under --require-checked"),
            kind: findings::kind_name(ErrorKind::UncheckedLaunch),
            text: format!("{} was launched {} time(s) unchecked: {why}\n", k.name, k.launches),
        },
        (Some(why), true) => Verdict::Skipped(format!("not checked: {why}")),
        (None, true) => Verdict::Passed,
    }
}

/// A failure made of `found` (findings) and `more` (lines of text, e.g. leaks).
fn failed(found: &[&Counted], more: &[String]) -> Verdict {
    let mut text = String::new();
    for e in found {
        text.push_str(&findings::plain_text(&e.report));
        if e.count > 1 {
            text.push_str(&format!("    Seen {} times\n", e.count));
        }
        text.push('\n');
    }
    for line in more {
        text.push_str(line);
        text.push('\n');
    }
    let first = found.first().map(|e| (e.report.message.clone(), findings::kind_name(e.report.kind)));
    let (headline, kind) =
        first.unwrap_or_else(|| (more.first().cloned().unwrap_or_default(), findings::kind_name(ErrorKind::Leak)));
    let others = found.len() + more.len() - 1;
    let message = if others == 0 { headline } else { format!("{headline} (and {others} more)") };
    Verdict::Failed { message, kind, text }
}

/// `text` with the characters XML 1.0 cannot carry at all (most control characters, even
/// escaped) replaced by U+FFFD; quick-xml escapes the rest.
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || matches!(c as u32, 0xFFFE | 0xFFFF) => '\u{FFFD}',
            c => c,
        })
        .collect()
}
