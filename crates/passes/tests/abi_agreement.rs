//! The check pass emits code against the runtime's device ABI but cannot depend on the
//! runtime crate; its copies of the ABI's names and codes must stay equal to the source.

use gpusan_passes::check;
use gpusan_runtime::device_abi;

#[test]
fn check_pass_speaks_the_runtime_abi() {
    assert_eq!(check::TABLE_SYMBOL, device_abi::TABLE_SYMBOL);
    assert_eq!(check::ERRORS_SYMBOL, device_abi::ERRORS_SYMBOL);
    assert_eq!(check::MODULE_SYMBOL, device_abi::MODULE_SYMBOL);
    assert_eq!(check::LOOKUP_CACHE_BYTES, device_abi::LOOKUP_CACHE_BYTES);
    assert_eq!(check::LOOKUP_CACHE_HASH, device_abi::LOOKUP_CACHE_HASH);
    assert_eq!(check::CODE_OUT_OF_BOUNDS, device_abi::CODE_OUT_OF_BOUNDS);
    assert_eq!(check::CODE_USE_AFTER_FREE, device_abi::CODE_USE_AFTER_FREE);
    assert_eq!(check::CODE_SHARED_OUT_OF_BOUNDS, device_abi::CODE_SHARED_OUT_OF_BOUNDS);
    assert_eq!(check::CODE_LOCAL_OUT_OF_BOUNDS, device_abi::CODE_LOCAL_OUT_OF_BOUNDS);
    assert_eq!(check::CODE_LOCAL_USE_AFTER_SCOPE, device_abi::CODE_LOCAL_USE_AFTER_SCOPE);
    assert_eq!(check::CODE_DOUBLE_FREE, device_abi::CODE_DOUBLE_FREE);
    assert_eq!(check::CODE_INVALID_FREE, device_abi::CODE_INVALID_FREE);
    assert_eq!(check::HEAP_SYMBOL, device_abi::HEAP_SYMBOL);
    assert_eq!(check::N_ACCESS_SYMBOL, device_abi::N_ACCESS_SYMBOL);
    assert_eq!(check::N_CHECK_SYMBOL, device_abi::N_CHECK_SYMBOL);
    assert_eq!(check::N_GROUP_SYMBOL, device_abi::N_GROUP_SYMBOL);
    assert_eq!(check::N_SPAN_SYMBOL, device_abi::N_SPAN_SYMBOL);
    assert_eq!(check::HEAP_BLOCK_TAG, device_abi::HEAP_BLOCK_TAG);
    assert_eq!(check::HEAP_CAPACITY, device_abi::HEAP_CAPACITY);
    assert_eq!(check::HEAP_HEADER_BYTES, device_abi::HEAP_HEADER_BYTES);
    assert_eq!(check::HEAP_ENTRY_BYTES, device_abi::HEAP_ENTRY_BYTES);
    assert_eq!(check::STATE_LIVE, device_abi::HEAP_STATE_LIVE);
    assert_eq!(check::STATE_FREED, device_abi::HEAP_STATE_FREED);
    assert_eq!(std::mem::size_of::<device_abi::ErrorRecord>(), 64, "the pass writes 64-byte records");
}
