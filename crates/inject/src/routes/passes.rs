//! The pass a run applies to the modules it substitutes: the one its mode names, with the
//! run's options (`check`'s reaction, and counting).

use std::cell::RefCell;

use gpusan_passes::check::{self, CheckConfig, CheckReport};
use gpusan_passes::meta::ModuleMeta;
use gpusan_passes::{Pass, PassError, PassReport};
use gpusan_ptx::Module;

use gpusan_abi::Mode;

/// An instrumented module, its metadata, and for `check` what the pass did in detail.
pub struct Instrumented {
    pub ptx: String,
    pub meta: ModuleMeta,
    pub check: Option<CheckReport>,
}

/// Instruments a whole module's PTX text with the pass `mode` names (`count`, `check`).
pub fn instrument(ptx: &str, mode: Mode) -> Result<Instrumented, String> {
    let _shown = Progress::start(ptx.len());
    if mode == Mode::Check {
        let pass = KeepReport { config: check_config(), report: RefCell::new(None) };
        let (mut out, meta) = gpusan_passes::instrument_with_meta(ptx, &pass).map_err(|e| e.to_string())?;
        if some_launches() {
            out.ptx.push_str(&gpusan_passes::unchecked::unchecked_copies(ptx).map_err(|e| e.to_string())?);
        }
        return Ok(Instrumented { ptx: out.ptx, meta, check: pass.report.into_inner() });
    }
    let pass = gpusan_passes::pass_by_name(mode.name()).ok_or_else(|| format!("no pass for mode `{}`", mode.name()))?;
    let (out, meta) = gpusan_passes::instrument_with_meta(ptx, &*pass).map_err(|e| e.to_string())?;
    Ok(Instrumented { ptx: out.ptx, meta, check: None })
}

/// `report-<pid>.json.progress` while a module is instrumented, when `gpusan run` shows
/// progress (`GPUSAN_PROGRESS`: its standard error is a terminal): the command shows a
/// progress line when one stays longer than a moment. Removed when dropped.
struct Progress(Option<std::path::PathBuf>);

impl Progress {
    fn start(bytes: usize) -> Progress {
        let options = &crate::state::state().options;
        let Some(report) = options.report.as_ref().filter(|_| options.progress) else { return Progress(None) };
        let mut path = report.clone().into_os_string();
        path.push(".progress");
        let path = std::path::PathBuf::from(path);
        let what = format!("instrumenting a module ({} KiB of PTX)", bytes.div_ceil(1024));
        Progress(crate::state::write_no_follow(&path, what.as_bytes()).then_some(path))
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The check pass, keeping its detailed report (the static counts of `check_counts`).
struct KeepReport {
    config: CheckConfig,
    report: RefCell<Option<CheckReport>>,
}

impl Pass for KeepReport {
    fn name(&self) -> &'static str {
        Mode::Check.name()
    }

    fn run(&self, module: &mut Module) -> Result<PassReport, PassError> {
        let r = check::run_with(module, None, &self.config)?;
        Ok(self.report.borrow_mut().insert(r).to_pass_report())
    }

    fn run_with_source(&self, module: &mut Module, src: &str) -> Result<PassReport, PassError> {
        let r = check::run_with(module, Some(src), &self.config)?;
        Ok(self.report.borrow_mut().insert(r).to_pass_report())
    }
}

/// A counting build: its modules are instrumented at every load (no cache), so the static
/// counts of every module reach the report.
pub fn counting() -> bool {
    check_config().counting.is_on()
}

/// What distinguishes the code `instrument(_, mode)` makes, for the cache of instrumented PTX: builds
/// with different options must not share an entry.
pub fn cache_name(mode: Mode) -> String {
    if mode == Mode::Check {
        let c = check_config();
        let frame = if c.local_bounds == gpusan_abi::LocalBounds::Frame { "/frame" } else { "" };
        let copies = if some_launches() { "/unchecked-copies" } else { "" };
        format!("check/{}{}{frame}{copies}", c.reaction.name(), if c.counting.is_on() { "/count" } else { "" })
    } else {
        mode.name().to_string()
    }
}

/// The run checks only some launches (`routes::window`): instrumented modules carry
/// unchecked copies of their functions for the others.
fn some_launches() -> bool {
    crate::state::state().options.selection.is_some()
}

fn check_config() -> CheckConfig {
    let options = &crate::state::state().options;
    CheckConfig {
        reaction: options.check_reaction,
        counting: options.check_counting,
        local_bounds: options.local_bounds,
    }
}
