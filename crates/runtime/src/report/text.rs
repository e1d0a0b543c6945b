//! The text report: how a [`Document`] and each [`Report`] read for people, in
//! compute-sanitizer's layout (`=========` bars), plainly or verbose ([`TextConfig`]).

use std::fmt::{self, Write as _};

use super::*;

const BAR: &str = "=========";

impl Document {
    /// The text report's first line, naming the tool, its version and the mode: also what
    /// `gpusan run` prints before the first finding it streams, so the header comes first.
    pub fn header_line(version: &str, mode: &str) -> String {
        format!("{BAR} GPUSAN {version} (mode: {mode})")
    }

    /// The human rendering, verbose or not, with or without its header ([`TextConfig`]).
    pub fn to_text_with(&self, config: TextConfig) -> String {
        match (config.verbose, config.header_shown) {
            (true, false) => format!("{self:#}"),
            (false, false) => self.to_string(),
            (true, true) => format!("{:#}", Body(self)),
            (false, true) => Body(self).to_string(),
        }
    }
}

/// The text report; `{:#}` is the verbose form ([`TextConfig`]).
impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", Document::header_line(&self.version, &self.mode))?;
        self.write_body(f)
    }
}

/// The text report less its header line ([`TextConfig::header_shown`]); `{:#}` is the
/// verbose form.
struct Body<'a>(&'a Document);

impl fmt::Display for Body<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_body(f)
    }
}

impl Document {
    /// Everything below the header line.
    fn write_body(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verbose = f.alternate();
        if self.cuda_processes == 0 {
            writeln!(f, "{BAR} NOTE: {NO_CUDA_ACTIVITY} (no driver call reached gpusan)")?;
        }
        for note in &self.notes {
            writeln!(f, "{BAR} NOTE: {note}")?;
        }
        for error in &self.errors {
            if verbose {
                write!(f, "{:#}", error.report)?;
            } else {
                write!(f, "{}", error.report)?;
            }
            if error.count > 1 {
                writeln!(f, "{BAR}     Seen {} times", error.count)?;
            }
            // Said where the run had several processes, or a rank (a distributed job's).
            if let Some(p) = error.process.as_ref().filter(|p| self.cuda_processes > 1 || p.rank.is_some()) {
                writeln!(f, "{}", p.line())?;
            }
            writeln!(f, "{BAR}")?;
        }
        if !self.leaks.is_empty() {
            let count = sum(self.leaks.iter().map(|l| l.count));
            let bytes = sum(self.leaks.iter().map(|l| l.bytes));
            writeln!(f, "{BAR} LEAK SUMMARY: {} in {} leaked", plural(bytes, "byte"), plural(count, "allocation"))?;
            for leak in &self.leaks {
                writeln!(
                    f,
                    "{BAR}     {} in {}, allocated at:",
                    plural(leak.bytes, "byte"),
                    plural(leak.count, "allocation")
                )?;
                write_frames(f, &leak.alloc_stack)?;
            }
            writeln!(f, "{BAR}")?;
        }
        // gpusan's own measures, except in `count` mode, where the counts are what was asked.
        let counters = if verbose || self.mode == "count" { self.counters.iter() } else { Default::default() };
        for (name, value) in counters {
            writeln!(f, "{BAR} COUNTER {name}: {value}")?;
        }
        if let Some(c) = &self.check_counts {
            let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.1}%", 100.0 * x));
            writeln!(
                f,
                "{BAR} CHECK COUNTS: {} accesses, {} checks, {} group checks ran: {} of the checks removed \
                 ({} in the code)",
                c.accesses,
                c.checks,
                c.group_checks,
                pct(c.dynamic_fraction_removed()),
                pct(c.static_fraction_removed())
            )?;
        }
        for (why, n) in &self.unchecked_modules {
            writeln!(f, "{BAR} UNCHECKED: {} loaded unchanged: {why}", plural(*n, "module"))?;
        }
        if !self.coverage.is_empty() {
            writeln!(f, "{BAR} COVERAGE: {}", self.coverage.summary_line())?;
        }
        if let Some(canary) = &self.canary {
            writeln!(f, "{BAR} CANARIES: {}", canary.summary_line())?;
        }
        let s = &self.summary;
        write!(f, "{BAR} ERROR SUMMARY: {}", plural(s.total, "error"))?;
        if s.not_stored > 0 {
            write!(f, " ({} not shown)", s.not_stored)?;
        }
        if self.cuda_processes == 0 {
            write!(f, "; {NO_CUDA_ACTIVITY}")?;
        }
        if let Some((kernels, launches)) = self.coverage.none_checked() {
            let launches = if launches == 1 { "1 launch".to_string() } else { format!("{launches} launches") };
            write!(f, "; no kernel launch was checked ({}, {launches})", plural(kernels, "kernel"))?;
        }
        writeln!(f)
    }
}

/// A finding as the text report shows it; `{:#}` is the verbose form ([`TextConfig`]).
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{BAR} {}", self.message)?;
        if let Some(label) = &self.label {
            writeln!(f, "{BAR}     during: {label}")?;
        }
        match &self.details {
            Details::Host(h) => {
                if let Some(symbol) = &h.symbol {
                    let offset = h.address.wrapping_sub(symbol.address);
                    writeln!(
                        f,
                        "{BAR}     Symbol {} is {} at {:#x}; the access of {} at offset {offset} runs {} past its end",
                        symbol.name,
                        plural(symbol.size, "byte"),
                        symbol.address,
                        plural(h.size, "byte"),
                        plural(offset.saturating_add(h.size).saturating_sub(symbol.size), "byte"),
                    )?;
                }
                if let Some(t) = &h.tensor {
                    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
                    writeln!(
                        f,
                        "{BAR}     Tensor of {} [{}], strides [{}] bytes: reaches {} from {:#x}",
                        t.data_type,
                        list(&t.dims),
                        list(&t.strides),
                        plural(h.size, "byte"),
                        h.address
                    )?;
                }
                // A pitch finding is about the call's shape, not an address.
                let unknown = h.symbol.is_none() && self.kind != ErrorKind::InvalidPitch;
                write_nearest(f, h.address, h.size, h.nearest.as_ref(), unknown)?;
                write_stack(f, "Called at", &h.call_stack)
            }
            Details::Device(d) => {
                write!(f, "{BAR}     at {}", d.kernel)?;
                if let Some(source) = &d.source {
                    write!(f, " in {}:{}", source.file, source.line)?;
                }
                // The instrumented PTX is gpusan's, not a file the user can open.
                if let Some(ptx) = d.ptx.as_ref().filter(|_| f.alternate()) {
                    write!(f, " (PTX {}:{})", ptx.file, ptx.line)?;
                }
                if let Some(offset) = d.sass_offset {
                    write!(f, " (SASS +{offset:#x})")?;
                }
                writeln!(f)?;
                let [tx, ty, tz] = d.thread;
                let [bx, by, bz] = d.block;
                write!(f, "{BAR}     by thread ({tx},{ty},{tz}) in block ({bx},{by},{bz})")?;
                match d.device {
                    Some(device) => writeln!(f, " on device {device}")?,
                    None => writeln!(f)?,
                }
                let heap_free = matches!(self.kind, ErrorKind::DoubleFree | ErrorKind::InvalidFree);
                match (d.heap_block, heap_free) {
                    (Some(b), true) if b.base == d.address => {
                        writeln!(f, "{BAR}     The device-heap block at {:#x} was already freed", b.base)?
                    }
                    (Some(b), _) => {
                        let offset = d.address.wrapping_sub(b.base) as i64;
                        let at = if offset < 0 {
                            format!("{} before", plural(offset.unsigned_abs(), "byte"))
                        } else {
                            format!("at offset {offset} of")
                        };
                        writeln!(
                            f,
                            "{BAR}     Address {:#x} is {at} the device-heap block (malloc in a kernel) at {:#x}",
                            d.address, b.base
                        )?
                    }
                    (None, true) => {
                        writeln!(f, "{BAR}     Address {:#x} is not the start of any device-heap block", d.address)?
                    }
                    (None, false) if d.frame_object.is_some() => write_frame_object(f, d)?,
                    (None, false) if self.kind == ErrorKind::UseAfterScope => writeln!(
                        f,
                        "{BAR}     Address {:#x} is local memory outside the kernel's frame: the frame of a \
                         function that has returned",
                        d.address
                    )?,
                    (None, false) => write_nearest(f, d.address, u64::from(d.size), d.nearest.as_ref(), true)?,
                }
                if d.heap_block.is_some() {
                    write_nearest(f, d.address, u64::from(d.size), d.nearest.as_ref(), false)?;
                }
                write_stack(f, FIRST_LAUNCHED, &d.launch_stack)
            }
            Details::Fault(d) => {
                d.write(f, BAR)?;
                write_stack(f, "Seen at", &d.call_stack)
            }
            Details::Canary(d) => write_canary(f, d),
        }
    }
}

/// A canary finding: where the first bad byte is, both allocations it may belong to, when
/// it was seen, and the kernels that may have done it.
fn write_canary(f: &mut fmt::Formatter<'_>, d: &CanaryDetails) -> fmt::Result {
    let a = &d.allocation;
    writeln!(
        f,
        "{BAR}     Address {:#x} is {} past the end of {} at {:#x}{} (expected {:#04x}, found {:#04x})",
        d.address,
        plural(d.offset_past_end, "byte"),
        describe_alloc(a),
        a.base,
        // A device-heap block is the kernels' own: gpusan's registry gave it no id.
        if a.kind == AllocKind::DeviceHeap { String::new() } else { format!(" (id {})", a.id) },
        d.expected,
        d.found
    )?;
    match &d.next {
        Some(b) => writeln!(
            f,
            "{BAR}     an overflow past the end of it, or an underflow before the start of {} at {:#x} (id {}), \
             which begins {} after it",
            describe_alloc(b),
            b.base,
            b.id,
            plural(b.base.saturating_sub(a.base.saturating_add(a.size)), "byte")
        )?,
        None => writeln!(f, "{BAR}     an overflow past the end of it")?,
    }
    if d.scan == CanaryScan::DeviceFree {
        // Compared by gpusan's `free` in the kernel: no scan, and the record does not name
        // the kernel.
        writeln!(f, "{BAR}     Detected {} at {} ms", d.scan.describe(), d.detected_ms)?;
    } else {
        writeln!(
            f,
            "{BAR}     Detected {} at {} ms, {} ms after the last clean scan",
            d.scan.describe(),
            d.detected_ms,
            d.since_clean_scan_ms
        )?;
        if d.kernels.is_empty() {
            writeln!(f, "{BAR}     No kernel was launched in its context since the last clean scan")?;
        } else {
            writeln!(f, "{BAR}     Kernels launched in its context since the last clean scan (oldest first):")?;
            for k in &d.kernels {
                let name = if k.kernel.is_empty() {
                    format!("graph {:#x}", k.graph.unwrap_or_default())
                } else {
                    k.kernel.clone()
                };
                writeln!(f, "{BAR}         {name} on stream {:#x}", k.stream)?;
            }
        }
    }
    write_stack(f, "Allocated at", &a.alloc_stack)?;
    if let Some(s) = &a.free_stack {
        write_stack(f, "Freed at", s)?;
    }
    if let Some(b) = &d.next {
        write_stack(f, "The next allocation was made at", &b.alloc_stack)?;
    }
    Ok(())
}

fn describe_alloc(a: &AllocInfo) -> String {
    let what = super::canary_noun(&a.kind);
    let freed = if a.freed { " (freed)" } else { "" };
    format!("{what} of {}{freed}", plural(a.size, "byte"))
}

/// The line naming the local object a finding is about ([`DeviceDetails::frame_object`]).
fn write_frame_object(f: &mut fmt::Formatter<'_>, d: &DeviceDetails) -> fmt::Result {
    match d.frame_object {
        Some(FrameObject::LocalObject { frame_offset, size }) => writeln!(
            f,
            "{BAR}     Address {:#x} is outside the local array at frame offset {frame_offset} ({}) it was \
             indexed from; `--local-bounds frame` bounds only the whole frame",
            d.address,
            plural(size, "byte")
        ),
        Some(FrameObject::ReturnedFrame { size }) => writeln!(
            f,
            "{BAR}     Address {:#x} is in the function's own stack frame ({}), which it returns: the frame \
             is dead once the function has returned",
            d.address,
            plural(size, "byte")
        ),
        None => Ok(()),
    }
}

fn write_nearest(
    f: &mut fmt::Formatter<'_>,
    addr: u64,
    size: u64,
    nearest: Option<&Nearest>,
    unknown: bool,
) -> fmt::Result {
    let Some(Nearest { allocation: a, position, landed }) = nearest else {
        return if unknown {
            writeln!(f, "{BAR}     Address {addr:#x} is not in any known allocation")
        } else {
            Ok(())
        };
    };
    let state = if a.freed { ", freed" } else { "" };
    let mut what = match a.kind {
        AllocKind::PoolBlock { source, .. } => format!(
            "a tensor block of {} B ({}) at {:#x} (id {}, device {}{state})",
            a.size,
            source.describe(),
            a.base,
            a.id,
            a.device
        ),
        _ => format!(
            "a {}-byte {} allocation at {:#x} (id {}, device {}{state})",
            a.size,
            a.kind.describe(),
            a.base,
            a.id,
            a.device
        ),
    };
    if let Some(s) = &a.segment {
        let _ = write!(what, " inside a segment of {} at {:#x} (id {})", bytes_human(s.size), s.base, s.id);
    }
    match *position {
        Position::Inside { offset } => {
            write!(f, "{BAR}     Address {addr:#x} is at offset {offset} of {what}")?;
            let over = offset.saturating_add(size).saturating_sub(a.size);
            if over > 0 {
                write!(f, "; the access of {} runs {} past its end", plural(size, "byte"), plural(over, "byte"))?;
            }
            writeln!(f)?;
        }
        Position::PastEnd { bytes } => {
            writeln!(f, "{BAR}     Address {addr:#x} is {} past the end of {what}", plural(bytes, "byte"))?
        }
        Position::Before { bytes } => {
            writeln!(f, "{BAR}     Address {addr:#x} is {} before {what}", plural(bytes, "byte"))?
        }
    }
    match landed {
        Some(Landing::PoolSlack) => {
            writeln!(f, "{BAR}     It fell in the pool's slack: memory of the segment that no block holds")?
        }
        Some(Landing::NeighbourBlock { id, base, size, freed }) => writeln!(
            f,
            "{BAR}     It fell in a neighbouring block of {size} B at {base:#x} (id {id}{})",
            if *freed { ", freed" } else { "" }
        )?,
        None => {}
    }
    write_stack(f, "Allocated at", &a.alloc_stack)?;
    match &a.free_stack {
        Some(stack) => write_stack(f, "Freed at", stack),
        None => Ok(()),
    }
}

pub(super) fn write_stack(f: &mut fmt::Formatter<'_>, title: &str, stack: &Stack) -> fmt::Result {
    if stack.frames.is_empty() {
        return Ok(());
    }
    writeln!(f, "{BAR}     {title}:")?;
    write_frames(f, stack)
}

/// A stack's frames, innermost first. Each run of the CUDA runtime's (and gpusan's) own
/// frames is one line, and the unwinder's end marks (`[0x0]` at the bottom) are left out,
/// unless verbose (`{:#}`): the program's frames are what a user acts on.
fn write_frames(f: &mut fmt::Formatter<'_>, stack: &Stack) -> fmt::Result {
    let fold = !f.alternate();
    let shown = match stack.frames.iter().rposition(|g| g.address != 0) {
        Some(last) if fold => &stack.frames[..=last],
        _ => &stack.frames[..],
    };
    let mut frames = shown.iter().peekable();
    while let Some(frame) = frames.next() {
        if crate::pyframes::is_python(frame.address) {
            let (function, file) = (frame.function.as_deref().unwrap_or("?"), frame.file.as_deref().unwrap_or("?"));
            writeln!(f, "{BAR}         Python Frame: {function} at {file}:{}", frame.line.unwrap_or(0))?;
            continue;
        }
        if fold && frame.in_cuda_runtime() {
            let mut n = 1;
            while frames.next_if(|g| !crate::pyframes::is_python(g.address) && g.in_cuda_runtime()).is_some() {
                n += 1;
            }
            writeln!(f, "{BAR}         ({} in the CUDA runtime)", plural(n, "frame"))?;
            continue;
        }
        write!(f, "{BAR}         Host Frame: ")?;
        if let Some(function) = &frame.function {
            write!(f, "{function} ")?;
        }
        match (&frame.file, frame.line) {
            (Some(file), Some(line)) => write!(f, "at {file}:{line} ")?,
            (Some(file), None) => write!(f, "in {file} ")?,
            _ => {}
        }
        // As compute-sanitizer: the offset in the module, which `addr2line -e` takes.
        match (&frame.module, frame.offset) {
            (Some(module), Some(offset)) => writeln!(f, "[{offset:#x}] in {module}")?,
            _ => writeln!(f, "[{:#x}]", frame.address)?,
        }
    }
    Ok(())
}

impl FaultDetails {
    pub fn write(&self, f: &mut std::fmt::Formatter<'_>, bar: &str) -> std::fmt::Result {
        writeln!(f, "{bar}     Returned by {} after the kernel ended the context", self.api)?;
        match self.kernels.as_slice() {
            [] => writeln!(f, "{bar}     No kernel launch seen since the last synchronization that succeeded")?,
            [one] => {
                writeln!(f, "{bar}     In kernel {}", fault_launch(one))?;
                write_stack(f, FIRST_LAUNCHED, &one.launch_stack)?;
            }
            many => {
                writeln!(
                    f,
                    "{bar}     In one of the kernels launched since the last synchronization (the latest last):"
                )?;
                for (i, k) in many.iter().enumerate() {
                    writeln!(f, "{bar}       {}", fault_launch(k))?;
                    // Kernels launched from one place share a stack: it is shown once.
                    let shown = many[..i].iter().any(|o| o.launch_stack.frames == k.launch_stack.frames);
                    if !shown {
                        write_stack(f, FIRST_LAUNCHED, &k.launch_stack)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The title of a kernel's launch stack: what it is.
const FIRST_LAUNCHED: &str = "First launched at (a kernel's stack is taken at its first launch only)";

fn fault_launch(k: &FaultLaunch) -> String {
    if let Some(graph) = k.graph {
        return format!("the kernels of CUDA graph {graph:#x} (cuGraphLaunch) on stream {:#x}", k.stream);
    }
    let [gx, gy, gz] = k.grid;
    let [bx, by, bz] = k.block;
    format!("{} with grid ({gx},{gy},{gz}), block ({bx},{by},{bz}) on stream {:#x}", k.kernel, k.stream)
}
