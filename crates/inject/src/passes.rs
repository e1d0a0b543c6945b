//! The pass a run applies to the modules it substitutes: the one its mode names.

/// Instruments a whole module's PTX text with the pass named `mode` (`count`, `check`).
pub fn instrument(ptx: &str, mode: &str) -> Result<String, String> {
    let pass = gpusan_passes::pass_by_name(mode).ok_or_else(|| format!("no pass for mode `{mode}`"))?;
    gpusan_passes::instrument(ptx, &*pass).map(|i| i.ptx).map_err(|e| e.to_string())
}
