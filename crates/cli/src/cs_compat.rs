//! `gpusan run` as a drop-in for compute-sanitizer: its options, accepted with the meaning
//! its manual (`compute-sanitizer --help`, CUDA 13.0) gives them where gpusan can honour
//! them, and refused by name, with what to use instead, where it cannot.
//!
//! Honoured: `--tool memcheck` (gpusan's `--mode check`; the other tools are refused until
//! they exist), `--kernel-name`/`--kernel-name-exclude` and `--launch-skip`/`--launch-count`
//! (`gpusan_runtime::kernel_filter`: launches left out run unchecked and the coverage says
//! why), `--print-limit` (findings printed; the JSON report keeps all and says how many were
//! not printed), `--log-file` with `%p`, `%q{ENV}` and `%%`, `--target-processes`,
//! `--show-backtrace`, `--demangle`. `--error-exitcode`, `--leak-check` and `--padding`
//! (gpusan's `--redzone`) are `run`'s own options with the same meaning.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use gpusan_runtime::coverage::{demangle, signature};
use gpusan_runtime::kernel_filter::{Pattern, Spec};
use gpusan_runtime::report::{Details, Document, TextConfig};

/// compute-sanitizer's tools.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Tool {
    /// Memory access checking: gpusan's `--mode check`.
    Memcheck,
    /// Shared memory hazards: not in gpusan yet.
    Racecheck,
    /// Uninitialized global memory reads: not in gpusan yet.
    Initcheck,
    /// Synchronization misuse: not in gpusan yet.
    Synccheck,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum TargetProcesses {
    /// The application and every process it starts.
    All,
    /// The application's own process only; the processes it starts run unchecked.
    ApplicationOnly,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Backtrace {
    /// Host and device: a finding's host call stacks and its place in the kernel.
    Yes,
    /// Neither host call stacks nor anything past the finding's own line.
    No,
    /// Host call stacks.
    Host,
    /// The place in the kernel only (gpusan keeps no device call stack), no host stacks.
    Device,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Demangle {
    /// Demangled names with their parameters.
    Full,
    /// Demangled names without parameters.
    Simple,
    /// Mangled names.
    No,
}

/// compute-sanitizer's options, in `gpusan run`.
#[derive(Args, Debug)]
pub struct CsArgs {
    /// compute-sanitizer's tool: `memcheck` is `--mode check`; racecheck, initcheck and
    /// synccheck are not in gpusan yet (an error says so).
    #[arg(long, value_enum, value_name = "TOOL")]
    pub tool: Option<Tool>,
    /// Print at most N findings (0: all). The JSON report keeps all, and says how many were
    /// not printed; `--error-exitcode` counts all.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub print_limit: u64,
    /// Check only kernels matching these filters: `kernel_name=`/`kne=` (the whole mangled
    /// name), `kernel_substring=`/`kns=` (a substring of it), `regex=` (a regular
    /// expression found in it; takes the rest of the value). Pairs separated by `,`; the
    /// option may be repeated. Other kernels run unchecked. As compute-sanitizer's, every
    /// key matches the mangled name (`_Z5scalePfi`), not the demangled one.
    #[arg(long, value_name = "FILTERS")]
    pub kernel_name: Vec<String>,
    /// Do not check kernels matching these filters (same keys as --kernel-name): they run
    /// unchecked, listed as excluded in the coverage.
    #[arg(long, value_name = "FILTERS")]
    pub kernel_name_exclude: Vec<String>,
    /// Let the first N launches of kernels the filters let through run unchecked.
    #[arg(short = 's', long, value_name = "N", default_value_t = 0)]
    pub launch_skip: u64,
    /// Check at most N launches of kernels the filters let through, after the skipped ones
    /// (0: all); later launches run unchecked.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 0)]
    pub launch_count: u64,
    /// Which processes are checked: the application and the processes it starts, or the
    /// application alone.
    #[arg(long, value_enum, default_value = "all")]
    pub target_processes: TargetProcesses,
    /// Which call stacks findings show in the text report (the JSON report has them all).
    #[arg(long, value_enum, default_value = "yes")]
    pub show_backtrace: Backtrace,
    /// How the text report names functions: demangled with parameters, without, or mangled.
    #[arg(long, value_enum, default_value = "full")]
    pub demangle: Demangle,
    #[command(flatten)]
    pub unsupported: Unsupported,
}

impl CsArgs {
    /// Whether the options ask for the check mode (`--tool memcheck`); an error for a tool
    /// gpusan does not have, or one of compute-sanitizer's options it cannot honour.
    pub fn validate(&self) -> Result<bool, String> {
        self.unsupported.refuse()?;
        match self.tool {
            None => Ok(false),
            Some(Tool::Memcheck) => Ok(true),
            Some(t) => {
                let (name, what) = match t {
                    Tool::Racecheck => ("racecheck", "shared memory data races"),
                    Tool::Initcheck => ("initcheck", "reads of uninitialized global memory"),
                    _ => ("synccheck", "invalid uses of synchronization primitives"),
                };
                Err(format!(
                    "--tool {name}: gpusan has no {name} yet ({what} are not detected); it checks memory \
                     accesses: --tool memcheck (the default, --mode check)"
                ))
            }
        }
    }

    /// Which launches the run checks, as the injected library reads it.
    pub fn selection(&self) -> Result<Spec, String> {
        let patterns = |flag: &str, values: &[String]| -> Result<Vec<Pattern>, String> {
            let mut all = Vec::new();
            for v in values {
                all.extend(Pattern::parse_option(v).map_err(|e| format!("{flag} {v}: {e}"))?);
            }
            Ok(all)
        };
        Ok(Spec {
            include: patterns("--kernel-name", &self.kernel_name)?,
            exclude: patterns("--kernel-name-exclude", &self.kernel_name_exclude)?,
            skip: self.launch_skip,
            count: self.launch_count,
        })
    }

    pub fn presentation(&self) -> Presentation {
        Presentation {
            print_limit: self.print_limit,
            backtrace: self.show_backtrace,
            demangle: self.demangle,
            text: TextConfig::default(),
        }
    }
}

/// `--log-file`'s name with compute-sanitizer's sequences replaced: `%p` by `pid` (the
/// tool's own process, as compute-sanitizer's), `%q{FOO}` by the variable `FOO` (empty when
/// unset), `%%` by `%`; any other `%` is an error.
pub fn log_file_name(pattern: &str, pid: u32, env: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    let mut out = OsString::new();
    let mut rest = pattern;
    while let Some(at) = rest.find('%') {
        out.push(&rest[..at]);
        let after = &rest[at + 1..];
        rest = if let Some(r) = after.strip_prefix('p') {
            out.push(pid.to_string());
            r
        } else if let Some(r) = after.strip_prefix('%') {
            out.push("%");
            r
        } else if let Some(r) = after.strip_prefix("q{") {
            let Some(end) = r.find('}') else {
                return Err(format!("--log-file {pattern}: `%q{{` without its `}}`"));
            };
            out.push(env(&r[..end]).unwrap_or_default());
            &r[end + 1..]
        } else {
            let what = after.chars().next().map_or("the end".to_string(), |c| format!("`{c}`"));
            return Err(format!("--log-file {pattern}: `%` followed by {what} (known: %p, %q{{VAR}}, %%)"));
        };
    }
    out.push(rest);
    Ok(PathBuf::from(out))
}

/// How the text report shows findings (`--print-limit`, `--show-backtrace`, `--demangle`).
#[derive(Clone, Copy, Debug)]
pub struct Presentation {
    pub print_limit: u64,
    pub backtrace: Backtrace,
    pub demangle: Demangle,
    /// `gpusan run --verbose`: gpusan's own view too (instrumented PTX lines, counters,
    /// every frame).
    pub text: TextConfig,
}

impl Presentation {
    /// Distinct findings past the print limit.
    pub fn not_printed(&self, doc: &Document) -> usize {
        match self.print_limit {
            0 => 0,
            n => doc.errors.len().saturating_sub(usize::try_from(n).unwrap_or(usize::MAX)),
        }
    }

    /// The note the reports carry when findings were not printed.
    pub fn note(&self, doc: &Document) -> Option<String> {
        let n = self.not_printed(doc);
        (n > 0).then(|| {
            format!(
                "--print-limit {}: {n} more finding{} not printed (the JSON report has all {})",
                self.print_limit,
                if n == 1 { "" } else { "s" },
                doc.errors.len()
            )
        })
    }

    /// The document as the text report shows it (the streamed report applies the same
    /// limit and shape in `crate::stream`; `gpusan report show` uses this).
    pub fn for_text(&self, doc: &Document) -> Document {
        let mut d = doc.clone();
        let shown = d.errors.len() - self.not_printed(doc);
        d.errors.truncate(shown);
        self.shape(&mut d);
        d
    }

    /// How many findings the text may show; `None`: all.
    pub fn limit(&self) -> Option<usize> {
        (self.print_limit > 0).then(|| usize::try_from(self.print_limit).unwrap_or(usize::MAX))
    }

    /// Names and frames of `d` as `--demangle` and `--show-backtrace` ask, every finding kept.
    pub fn shape(&self, d: &mut Document) {
        for e in &mut d.errors {
            self.shape_report(&mut e.report);
        }
        for leak in &mut d.leaks {
            self.frames(&mut leak.alloc_stack.frames);
        }
        for k in &mut d.coverage.kernels {
            k.name = self.name(&k.mangled).unwrap_or_else(|| k.name.clone());
        }
    }

    /// One finding's names and frames as the text shows them (also as it is streamed).
    pub fn shape_report(&self, r: &mut gpusan_runtime::report::Report) {
        if let Details::Device(dev) = &mut r.details {
            let mangled = dev.mangled.clone().unwrap_or_else(|| dev.kernel.clone());
            dev.kernel = self.name(&mangled).unwrap_or_else(|| dev.kernel.clone());
        }
        for stack in r.stacks_mut() {
            self.frames(&mut stack.frames);
        }
    }

    /// `mangled` as `--demangle` names it (`None`: as the report has it).
    fn name(&self, mangled: &str) -> Option<String> {
        Some(match self.demangle {
            Demangle::Full => return None,
            Demangle::Simple => demangle(mangled),
            Demangle::No => mangled.to_string(),
        })
    }

    fn frames(&self, frames: &mut Vec<gpusan_runtime::registry::Frame>) {
        if matches!(self.backtrace, Backtrace::No | Backtrace::Device) {
            frames.clear();
            return;
        }
        for f in frames {
            // Reports name a frame's function demangled and keep its symbol apart.
            let mangled =
                f.symbol.as_ref().or(f.function.as_ref().filter(|n| n.starts_with("_Z") || n.starts_with("_R")));
            if let Some(mangled) = mangled.cloned() {
                f.function = Some(match self.demangle {
                    Demangle::Full => signature(&mangled),
                    Demangle::Simple => demangle(&mangled),
                    Demangle::No => mangled,
                });
            }
        }
    }
}

/// One of compute-sanitizer's options gpusan cannot honour, with what to use instead.
trait Given {
    fn given(&self) -> bool;
}

impl Given for bool {
    fn given(&self) -> bool {
        *self
    }
}

impl Given for Option<String> {
    fn given(&self) -> bool {
        self.is_some()
    }
}

/// compute-sanitizer's options gpusan cannot honour: accepted by the parser (hidden) only to
/// be refused by name, with what to use instead, rather than as an unknown option.
macro_rules! unsupported {
    ($( $field:ident: $ty:ty = $flag:literal => $instead:literal, )*) => {
        #[derive(Args, Debug, Default)]
        pub struct Unsupported {
            $( #[arg(long = $flag, hide = true, value_name = "X")] $field: $ty, )*
            #[arg(short = 'q', long = "quiet", hide = true)]
            quiet: bool,
        }

        impl Unsupported {
            /// The first option given that gpusan cannot honour, as an error.
            pub fn refuse(&self) -> Result<(), String> {
                $( if self.$field.given() {
                    return Err(format!("compute-sanitizer's --{} is not supported by gpusan: {}", $flag, $instead));
                } )*
                if self.quiet {
                    return Err("compute-sanitizer's --quiet is not supported by gpusan: send the report \
                                elsewhere with --log-file FILE".to_string());
                }
                Ok(())
            }
        }
    };
}

unsupported! {
    save: Option<String> = "save" => "write the findings with --report-json FILE",
    xml: bool = "xml" => "gpusan writes no XML; --report-json FILE writes the findings as JSON",
    read: Option<String> = "read" => "a run's record is its --report-json FILE: `gpusan report show FILE` prints it again",
    suppressions: Option<String> = "suppressions" => "gpusan has no suppression files yet; leave kernels out with --kernel-name-exclude",
    print_level: Option<String> = "print-level" => "gpusan prints every finding (up to --print-limit)",
    prefix: Option<String> = "prefix" => "gpusan's lines start with its own prefix",
    generate_coredump: bool = "generate-coredump" => "stop a kernel at its first error with --check-reaction abort (cuda-gdb then stops there)",
    coredump_name: Option<String> = "coredump-name" => "gpusan writes no coredumps",
    coredump_behavior: Option<String> = "coredump-behavior" => "gpusan writes no coredumps",
    destroy_on_device_error: Option<String> = "destroy-on-device-error" => "gpusan's kernels go on past an error (--check-reaction report) or stop (--check-reaction abort)",
    force_blocking_launches: bool = "force-blocking-launches" => "gpusan does not change how launches synchronize",
    force_synchronization_limit: Option<String> = "force-synchronization-limit" => "gpusan does not change how launches synchronize",
    check_exit_code: Option<String> = "check-exit-code" => "gpusan passes the program's exit code on (--error-exitcode N sets one for findings)",
    require_cuda_init: Option<String> = "require-cuda-init" => "gpusan never fails a program that does not use CUDA; its report says so",
    launch_timeout: Option<String> = "launch-timeout" => "gpusan does not attach to processes; --timeout SECONDS stops the program",
    port: Option<String> = "port" => "gpusan does not attach to processes through ports",
    max_connections: Option<String> = "max-connections" => "gpusan does not attach to processes through ports",
    kill: bool = "kill" => "gpusan does not attach to processes",
    injection_path: Option<String> = "injection-path" => "set GPUSAN_INJECT_LIB to the injected library",
    injection_path32: Option<String> = "injection-path32" => "gpusan checks 64-bit programs only",
    support_32bit: bool = "support-32bit" => "gpusan checks 64-bit programs only",
    preload_library: Option<String> = "preload-library" => "set LD_PRELOAD for the program: gpusan keeps it after its own library",
    target_processes_filter: Option<String> = "target-processes-filter" => "use --target-processes application-only, or run gpusan on the process to check",
    language: Option<String> = "language" => "gpusan prints 0-based thread and block indices, as C",
    nvtx: Option<String> = "nvtx" => "gpusan reads no NVTX ranges",
    num_callers_device: Option<String> = "num-callers-device" => "gpusan keeps no device call stacks",
    num_callers_host: Option<String> = "num-callers-host" => "gpusan keeps a fixed depth of host frames",
    backtrace_short: Option<String> = "backtrace-short" => "--show-backtrace no|host|device chooses what is shown",
    strip_paths: Option<String> = "strip-paths" => "gpusan prints paths as the debug information has them",
    print_session_details: bool = "print-session-details" => "gpusan's report header names its version and mode",
    save_session_details: bool = "save-session-details" => "the JSON of --report-json names gpusan's version and mode",
    check_bulk_copy: Option<String> = "check-bulk-copy" => "choose the binary route's access kinds with --binary-kinds",
    check_warpgroup_mma: Option<String> = "check-warpgroup-mma" => "gpusan does not check wgmma operands",
    check_device_heap: Option<String> = "check-device-heap" => "the device heap is checked in --mode check; --binary-kinds chooses it for machine code",
    check_cache_control: bool = "check-cache-control" => "gpusan does not check cache control instructions",
    detect_missing_module_unload: bool = "detect-missing-module-unload" => "gpusan reports leaked allocations with --leak-check full, not modules",
    report_api_errors: Option<String> = "report-api-errors" => "gpusan reports the API calls it judges wrong, not failed calls",
    track_stream_ordered_races: Option<String> = "track-stream-ordered-races" => "gpusan judges stream-ordered frees by quarantine, not by stream order",
    check_optix: bool = "check-optix" => "gpusan does not track OptiX",
    check_optix_leaks: bool = "check-optix-leaks" => "gpusan does not track OptiX",
    ignore_getprocaddress_notfound: bool = "ignore-getprocaddress-notfound" => "gpusan reports no API errors",
    num_cuda_barriers: Option<String> = "num-cuda-barriers" => "gpusan has no synccheck yet",
    missing_barrier_init_is_fatal: Option<String> = "missing-barrier-init-is-fatal" => "gpusan has no synccheck yet",
    racecheck_detect_level: Option<String> = "racecheck-detect-level" => "gpusan has no racecheck yet",
    racecheck_memcpy_async: Option<String> = "racecheck-memcpy-async" => "gpusan has no racecheck yet",
    racecheck_trace_sync: Option<String> = "racecheck-trace-sync" => "gpusan has no racecheck yet",
    racecheck_deadlock_timeout: Option<String> = "racecheck-deadlock-timeout" => "gpusan has no racecheck yet",
    racecheck_continue_on_deadlock: Option<String> = "racecheck-continue-on-deadlock" => "gpusan has no racecheck yet",
    racecheck_num_workers: Option<String> = "racecheck-num-workers" => "gpusan has no racecheck yet",
    racecheck_report: Option<String> = "racecheck-report" => "gpusan has no racecheck yet",
    check_api_memory_access: Option<String> = "check-api-memory-access" => "gpusan always judges copies and sets against their allocations",
    track_unused_memory: bool = "track-unused-memory" => "gpusan has no initcheck yet",
    unused_memory_threshold: Option<String> = "unused-memory-threshold" => "gpusan has no initcheck yet",
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cs: CsArgs,
    }

    fn parse(args: &[&str]) -> Result<CsArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("gpusan").chain(args.iter().copied())).map(|c| c.cs)
    }

    #[test]
    fn memcheck_is_the_check_mode_and_other_tools_are_refused_by_name() {
        assert_eq!(parse(&["--tool", "memcheck"]).unwrap().validate(), Ok(true));
        assert_eq!(parse(&[]).unwrap().validate(), Ok(false));
        for tool in ["racecheck", "initcheck", "synccheck"] {
            let e = parse(&["--tool", tool]).unwrap().validate().unwrap_err();
            assert!(e.starts_with(&format!("--tool {tool}: gpusan has no {tool} yet")), "{e}");
        }
        assert!(parse(&["--tool", "leakcheck"]).is_err(), "an unknown tool is clap's error");
    }

    #[test]
    fn options_gpusan_cannot_honour_are_refused_with_what_to_use() {
        let e = parse(&["--save", "x.rec"]).unwrap().validate().unwrap_err();
        assert_eq!(
            e,
            "compute-sanitizer's --save is not supported by gpusan: write the findings with --report-json FILE"
        );
        let e = parse(&["--xml"]).unwrap().validate().unwrap_err();
        assert!(e.contains("--xml") && e.contains("--report-json"), "{e}");
        let e = parse(&["--read", "x"]).unwrap().validate().unwrap_err();
        assert!(e.contains("--read"), "{e}");
        let e = parse(&["-q"]).unwrap().validate().unwrap_err();
        assert!(e.contains("--quiet") && e.contains("--log-file"), "{e}");
        assert!(parse(&["--no-such-flag"]).is_err(), "unknown flags stay clap's errors");
    }

    #[test]
    fn filters_and_window_become_the_selection() {
        let a = parse(&["--kernel-name", "kns=oob", "--kernel-name", "regex=a,b", "-s", "1", "-c", "2"]).unwrap();
        let s = a.selection().unwrap();
        assert_eq!(s.include, vec![Pattern::Substring("oob".into()), Pattern::Regex("a,b".into())]);
        assert_eq!((s.skip, s.count), (1, 2));
        let a = parse(&["--kernel-name-exclude", "kne=_Z4goodPi", "--launch-skip", "3"]).unwrap();
        assert_eq!(a.selection().unwrap().exclude, vec![Pattern::Name("_Z4goodPi".into())]);
        assert!(parse(&[]).unwrap().selection().unwrap().is_all());
        let e = parse(&["--kernel-name", "oob"]).unwrap().selection().unwrap_err();
        assert!(e.starts_with("--kernel-name oob: "), "{e}");
    }

    #[test]
    fn log_file_names_expand_as_compute_sanitizers() {
        let env = |k: &str| (k == "RANK").then(|| OsString::from("3"));
        let name = |p: &str| log_file_name(p, 4242, &env);
        assert_eq!(name("x.%p.log"), Ok(PathBuf::from("x.4242.log")));
        assert_eq!(name("r%q{RANK}-%q{NONE}.log"), Ok(PathBuf::from("r3-.log")));
        assert_eq!(name("100%%.txt"), Ok(PathBuf::from("100%.txt")));
        assert_eq!(name("plain"), Ok(PathBuf::from("plain")));
        assert!(name("x.%d").unwrap_err().contains("`%` followed by `d`"));
        assert!(name("x%").is_err());
        assert!(name("x%q{RANK").is_err());
    }

    #[test]
    fn print_limit_keeps_the_first_findings_and_says_how_many_were_left_out() {
        use gpusan_runtime::report::{Collector, ErrorKind, HostDetails, Operand, Report};
        let mut c = Collector::new(Default::default());
        for api in ["a", "b", "c"] {
            let details = HostDetails {
                api: api.to_string(),
                operand: Operand::Dst,
                address: 0x1000,
                size: 4,
                nearest: None,
                symbol: None,
                tensor: None,
                call_stack: Default::default(),
            };
            let (kind, message) = (ErrorKind::MemcpyOutOfBounds, "overflow".to_string());
            c.push(Report { kind, message, details: Details::Host(details), label: None });
        }
        let doc = c.finish("check", Vec::new(), |_| Vec::new());
        assert_eq!(doc.errors.len(), 3);
        let p = |n| Presentation {
            print_limit: n,
            backtrace: Backtrace::Yes,
            demangle: Demangle::Full,
            text: TextConfig::default(),
        };
        assert_eq!(p(1).for_text(&doc).errors.len(), 1);
        assert_eq!(
            p(1).note(&doc).unwrap(),
            "--print-limit 1: 2 more findings not printed (the JSON report has all 3)"
        );
        assert_eq!(p(0).for_text(&doc).errors.len(), 3, "0: no limit");
        assert_eq!(p(0).note(&doc), None);
        assert_eq!(p(5).note(&doc), None);
    }
}
