//! The pass a run applies to the modules it substitutes.

/// Instruments a whole module's PTX text for this run's mode.
pub fn instrument(ptx: &str) -> Result<String, String> {
    gpusan_passes::instrument_ptx_for_runtime(ptx, &gpusan_passes::RuntimeConfig::default()).map_err(|e| e.to_string())
}
