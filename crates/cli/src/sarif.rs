//! `gpusan run --report-sarif FILE`: the findings as SARIF 2.1.0, the format code-scanning
//! UIs read. One result per distinct finding (and per leak site): its rule is the finding's
//! kind, its locations the device source line (kernels built with line information) and
//! the innermost host frame with a file and line, its stacks the host frames. Each result
//! has a partial fingerprint made only of what stays the same when the program runs again
//! (kind, kernel or API, source lines, function names), never of addresses, threads or
//! process ids, so a code-scanning UI matches a finding across runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpusan_runtime::registry::Frame;
use gpusan_runtime::report::{Details, Document, ErrorKind, Report};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::findings;

/// The schema a SARIF 2.1.0 log names: OASIS's, as published with the standard.
const SARIF_SCHEMA: &str = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// The key of gpusan's partial fingerprint; its version is raised if what goes into the
/// fingerprint changes, so old and new fingerprints are never compared as equal.
pub const FINGERPRINT_KEY: &str = "gpusanFinding/v1";

/// The SARIF log of `doc`.
pub fn to_sarif(doc: &Document) -> Value {
    let mut rules: BTreeMap<ErrorKind, usize> = BTreeMap::new();
    for kind in doc.errors.iter().map(|e| e.report.kind).chain((!doc.leaks.is_empty()).then_some(ErrorKind::Leak)) {
        let n = rules.len();
        rules.entry(kind).or_insert(n);
    }
    let mut results: Vec<Value> =
        doc.errors.iter().map(|e| result(&e.report, e.count, rules[&e.report.kind])).collect();
    for leak in &doc.leaks {
        let message = format!("{} bytes in {} allocation(s) never freed", leak.bytes, leak.count);
        let mut r = json!({
            "ruleId": findings::kind_name(ErrorKind::Leak),
            "ruleIndex": rules[&ErrorKind::Leak],
            "level": level(ErrorKind::Leak),
            "message": { "text": message },
            "partialFingerprints": { FINGERPRINT_KEY: fingerprint(&["leak"], &leak.alloc_stack.frames) },
        });
        add_host_locations(&mut r, &leak.alloc_stack.frames, "Allocated at");
        results.push(r);
    }
    let mut ordered: Vec<(ErrorKind, usize)> = rules.into_iter().collect();
    ordered.sort_by_key(|&(_, i)| i);
    let rules: Vec<Value> = ordered.iter().map(|&(kind, _)| rule(kind)).collect();
    let notifications: Vec<Value> =
        doc.notes.iter().map(|n| json!({ "level": "note", "message": { "text": n } })).collect();
    json!({
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "gpusan",
                "version": doc.version,
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notifications,
                "properties": { "mode": doc.mode, "errorTotal": doc.summary.total },
            }],
            "results": results,
        }],
    })
}

fn rule(kind: ErrorKind) -> Value {
    let title = findings::kind_title(kind);
    json!({
        "id": findings::kind_name(kind),
        "name": title.replace(' ', ""),
        "shortDescription": { "text": title },
        "defaultConfiguration": { "level": level(kind) },
    })
}

/// Leaks and launches left unchecked are warnings; memory errors and faults are errors.
fn level(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Leak | ErrorKind::UncheckedLaunch => "warning",
        _ => "error",
    }
}

fn result(report: &Report, count: u64, rule_index: usize) -> Value {
    let mut r = json!({
        "ruleId": findings::kind_name(report.kind),
        "ruleIndex": rule_index,
        "level": level(report.kind),
        "message": { "text": findings::plain_text(report).trim_end() },
        "occurrenceCount": count.max(1),
        "partialFingerprints": { FINGERPRINT_KEY: finding_fingerprint(report) },
    });
    if let Some(label) = &report.label {
        r["properties"] = json!({ "label": label });
    }
    let mut locations = Vec::new();
    if let Details::Device(d) = &report.details {
        let logical = json!([{ "fullyQualifiedName": d.kernel, "kind": "function" }]);
        let mut location = json!({ "logicalLocations": logical });
        if let Some(source) = &d.source {
            location["physicalLocation"] = physical(&source.file, source.line);
        }
        locations.push(location);
    }
    r["locations"] = Value::Array(locations);
    let title = match &report.details {
        Details::Host(_) => "Called at",
        Details::Device(_) => "Launched at",
        Details::Fault(_) => "Seen at",
        Details::Canary(_) => "Allocated at",
    };
    add_host_locations(&mut r, findings::own_frames(report), title);
    r
}

/// Adds the innermost host frame with a file and line to `result`'s locations, and the
/// whole stack as its stack.
fn add_host_locations(result: &mut Value, frames: &[Frame], title: &str) {
    if let Some((file, line)) = findings::first_source_frame(frames) {
        let location = json!({ "physicalLocation": physical(file, line) });
        match result["locations"].as_array_mut() {
            Some(list) => list.push(location),
            None => result["locations"] = json!([location]),
        }
    }
    if frames.is_empty() {
        return;
    }
    let frames: Vec<Value> = frames.iter().map(stack_frame).collect();
    result["stacks"] = json!([{ "message": { "text": title }, "frames": frames }]);
}

fn stack_frame(frame: &Frame) -> Value {
    let mut location = json!({});
    if let Some(function) = &frame.function {
        location["logicalLocations"] = json!([{ "fullyQualifiedName": function, "kind": "function" }]);
    }
    if let Some(file) = &frame.file {
        location["physicalLocation"] = match frame.line {
            Some(line) => physical(file, line),
            None => json!({ "artifactLocation": { "uri": file_uri(file) } }),
        };
    }
    json!({ "location": location, "properties": { "address": format!("{:#x}", frame.address) } })
}

fn physical(file: &str, line: u32) -> Value {
    // SARIF lines start at 1; a line 0 (unknown) names the file only.
    if line == 0 {
        return json!({ "artifactLocation": { "uri": file_uri(file) } });
    }
    json!({ "artifactLocation": { "uri": file_uri(file) }, "region": { "startLine": line } })
}

/// `path` as a URI reference (SARIF's `artifactLocation.uri`): `file://` for an absolute
/// path, relative otherwise (code-scanning UIs resolve it against the repository), with
/// every byte outside RFC 3986's unreserved set and `/` percent-encoded.
pub fn file_uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(b as char),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// What identifies a finding across runs: its kind, the kernel or API call, the device
/// source line, the label, and the host frames by function, file and line.
fn finding_fingerprint(report: &Report) -> String {
    let kind = findings::kind_name(report.kind);
    let label = report.label.clone().unwrap_or_default();
    let (name, place) = match &report.details {
        Details::Host(h) => (h.api.clone(), h.operand.name().to_string()),
        Details::Device(d) => {
            let source = d.source.as_ref().map(|s| format!("{}:{}", s.file, s.line)).unwrap_or_default();
            (findings::kernel_symbol(report).unwrap_or_default().to_string(), source)
        }
        Details::Fault(f) => (f.error.clone(), f.api.clone()),
        Details::Canary(c) => (format!("{:?}", c.allocation.kind), String::new()),
    };
    fingerprint(&[&kind, &name, &place, &label], findings::own_frames(report))
}

fn fingerprint(parts: &[&str], frames: &[Frame]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    for f in frames {
        let line = f.line.map(|l| l.to_string()).unwrap_or_default();
        for part in [f.function.as_deref().unwrap_or(""), f.file.as_deref().unwrap_or(""), &line] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
    }
    hash.finalize().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
