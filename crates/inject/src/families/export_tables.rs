//! The driver's private export tables (`cuGetExportTable`): tables of functions cudart and
//! PyTorch ask the driver for by UUID, outside the public API. gpusan passes every request
//! through untouched; the injection probe (`$GPUSAN_PROBE_OUT`) records which tables a
//! program asks for, and the first word of each (its size in bytes, in the tables that
//! have one), so that fence mode's forwarding layer (docs/fence-design.md) knows which
//! tables a tenant needs served.

use std::ffi::c_void;

use crate::driver::hook::hooks;
use crate::driver::{CUresult, CUDA_SUCCESS};
use crate::probe;
use crate::state::quietly;

hooks! {
    fn cuGetExportTable(table: *mut *const c_void, id: *const [u8; 16]) => |real| get_export_table(real, table, id);
}

unsafe fn get_export_table(
    real: unsafe extern "C" fn(*mut *const c_void, *const [u8; 16]) -> CUresult,
    table: *mut *const c_void,
    id: *const [u8; 16],
) -> CUresult {
    let r = real(table, id);
    if std::env::var_os(gpusan_abi::env::PROBE_OUT).is_some() {
        quietly(|| {
            // SAFETY: the program's arguments, read only where the driver accepted them.
            let (uuid, first) = unsafe {
                let uuid = id.as_ref().map(|u| u.iter().map(|b| format!("{b:02x}")).collect::<String>());
                let first = if r == CUDA_SUCCESS && !table.is_null() && !(*table).is_null() {
                    crate::driver::peek::readable(*table as *const u8, 8).then(|| *(*table as *const u64))
                } else {
                    None
                };
                (uuid, first)
            };
            let key = format!("{} result={r} first_word={first:?}", uuid.unwrap_or_else(|| "null".into()));
            probe::with(|s| *s.export_tables.entry(key).or_default() += 1);
        });
    }
    r
}
