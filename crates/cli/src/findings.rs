//! What the report formats say of one finding, shared by SARIF, JUnit and the stream:
//! its text without the report's `=========` margin, its kind's name as the JSON spells it,
//! the stack that says where it happened, and where in the user's code it is.

use std::path::Path;

use gpusan_runtime::registry::Frame;
use gpusan_runtime::report::{Details, ErrorKind, Report};

/// The finding's text as the report shows it, without the margin: plain text for a SARIF
/// message or a JUnit failure.
pub fn plain_text(report: &Report) -> String {
    let mut out = String::new();
    for line in report.to_string().lines() {
        let line = line.trim_start_matches('=');
        out.push_str(line.strip_prefix(' ').unwrap_or(line));
        out.push('\n');
    }
    out
}

/// `out_of_bounds_write`: the kind as `--report-json` names it.
pub fn kind_name(kind: ErrorKind) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// "Out of bounds write": the kind's name for people.
pub fn kind_title(kind: ErrorKind) -> String {
    let name = kind_name(kind).replace('_', " ");
    let mut chars = name.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// The stack of the call that made the finding: the API call of a host finding, the launch
/// of a kernel's, the call that learnt of a fault.
pub fn own_frames(report: &Report) -> &[Frame] {
    match &report.details {
        Details::Host(h) => &h.call_stack.frames,
        Details::Device(d) => &d.launch_stack.frames,
        Details::Fault(f) => &f.call_stack.frames,
        Details::Canary(c) => &c.allocation.alloc_stack.frames,
    }
}

/// The kernel a finding is in, by its symbol (what coverage lists kernels by).
pub fn kernel_symbol(report: &Report) -> Option<&str> {
    match &report.details {
        Details::Device(d) => Some(d.mangled.as_deref().unwrap_or(&d.kernel)),
        _ => None,
    }
}

/// The innermost frame with a file and line that is on this machine: where in the
/// program's own source a host stack points, as a code-scanning UI can open it (frames
/// without debug information have no file; a C library's name the sources it was built
/// from, which are not here).
pub fn first_source_frame(frames: &[Frame]) -> Option<(&str, u32)> {
    frames.iter().find_map(|f| {
        let (file, line) = (f.file.as_deref()?, f.line?);
        Path::new(file).is_file().then_some((file, line))
    })
}
