//! The device ABI the instrumented code shares with the runtime (`crates/runtime/src/device_abi.rs`).

/// `device_abi::TABLE_SYMBOL`.
pub const TABLE_SYMBOL: &str = "__gpusan_table";
/// `device_abi::ERRORS_SYMBOL`.
pub const ERRORS_SYMBOL: &str = "__gpusan_errors";
/// `device_abi::MODULE_SYMBOL`.
pub const MODULE_SYMBOL: &str = "__gpusan_module";

/// `device_abi::CODE_OUT_OF_BOUNDS`.
pub const CODE_OUT_OF_BOUNDS: u32 = 1;
/// `device_abi::CODE_USE_AFTER_FREE`.
pub const CODE_USE_AFTER_FREE: u32 = 2;

/// `DeviceEntry::LIVE`: state bits (0–7 of `flags`) of a live allocation.
pub const STATE_LIVE: u32 = 1;
