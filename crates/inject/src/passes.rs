//! The pass a run applies to the modules it substitutes: the one its mode names, with the
//! run's options (`check`'s reaction).

use gpusan_passes::check::{CheckConfig, CheckWith};

/// Instruments a whole module's PTX text with the pass named `mode` (`count`, `check`).
pub fn instrument(ptx: &str, mode: &str) -> Result<String, String> {
    let pass: Box<dyn gpusan_passes::Pass> = if mode == "check" {
        Box::new(CheckWith(check_config()))
    } else {
        gpusan_passes::pass_by_name(mode).ok_or_else(|| format!("no pass for mode `{mode}`"))?
    };
    gpusan_passes::instrument(ptx, &*pass).map(|i| i.ptx).map_err(|e| e.to_string())
}

/// What distinguishes the code `instrument(_, mode)` makes, for the cubin cache: builds
/// with different options must not share an entry.
pub fn cache_name(mode: &str) -> String {
    if mode == "check" {
        format!("check/{}", check_config().reaction.name())
    } else {
        mode.to_string()
    }
}

fn check_config() -> CheckConfig {
    CheckConfig { reaction: crate::state::state().options.check_reaction }
}
