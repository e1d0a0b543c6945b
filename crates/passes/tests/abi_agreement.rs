//! The check pass still carries copies of the device ABI (`gpusan_abi` is the reference);
//! until it takes them from there, they must stay equal to it.

use gpusan_passes::check;

#[test]
fn check_pass_speaks_the_abi() {
    assert_eq!(check::TABLE_SYMBOL, gpusan_abi::TABLE_SYMBOL);
    assert_eq!(check::ERRORS_SYMBOL, gpusan_abi::ERRORS_SYMBOL);
    assert_eq!(check::MODULE_SYMBOL, gpusan_abi::MODULE_SYMBOL);
    assert_eq!(check::LOOKUP_CACHE_BYTES, gpusan_abi::table::LOOKUP_CACHE_BYTES);
    assert_eq!(check::LOOKUP_CACHE_HASH, gpusan_abi::table::LOOKUP_CACHE_HASH);
    assert_eq!(check::CODE_OUT_OF_BOUNDS, gpusan_abi::CODE_OUT_OF_BOUNDS);
    assert_eq!(check::CODE_USE_AFTER_FREE, gpusan_abi::CODE_USE_AFTER_FREE);
    assert_eq!(check::CODE_SHARED_OUT_OF_BOUNDS, gpusan_abi::CODE_SHARED_OUT_OF_BOUNDS);
    assert_eq!(check::CODE_LOCAL_OUT_OF_BOUNDS, gpusan_abi::CODE_LOCAL_OUT_OF_BOUNDS);
    assert_eq!(check::CODE_LOCAL_USE_AFTER_SCOPE, gpusan_abi::CODE_LOCAL_USE_AFTER_SCOPE);
    assert_eq!(check::CODE_DOUBLE_FREE, gpusan_abi::CODE_DOUBLE_FREE);
    assert_eq!(check::CODE_INVALID_FREE, gpusan_abi::CODE_INVALID_FREE);
    assert_eq!(check::HEAP_SYMBOL, gpusan_abi::HEAP_SYMBOL);
    assert_eq!(check::N_ACCESS_SYMBOL, gpusan_abi::N_ACCESS_SYMBOL);
    assert_eq!(check::N_CHECK_SYMBOL, gpusan_abi::N_CHECK_SYMBOL);
    assert_eq!(check::N_GROUP_SYMBOL, gpusan_abi::N_GROUP_SYMBOL);
    assert_eq!(check::N_SPAN_SYMBOL, gpusan_abi::N_SPAN_SYMBOL);
    assert_eq!(check::COUNTER_SYMBOLS, gpusan_abi::COUNTER_SYMBOLS);
    assert_eq!(check::HEAP_BLOCK_TAG, gpusan_abi::heap::BLOCK_TAG);
    assert_eq!(check::HEAP_CAPACITY, gpusan_abi::heap::CAPACITY);
    assert_eq!(check::HEAP_HEADER_BYTES, gpusan_abi::heap::HEADER_BYTES);
    assert_eq!(check::HEAP_ENTRY_BYTES, gpusan_abi::heap::ENTRY_BYTES);
    assert_eq!(check::STATE_LIVE, gpusan_abi::table::STATE_LIVE);
    assert_eq!(check::STATE_FREED, gpusan_abi::heap::STATE_FREED);
    for r in [check::Reaction::Report, check::Reaction::Abort] {
        assert_eq!(gpusan_abi::Reaction::from_name(r.name()).map(gpusan_abi::Reaction::name), Some(r.name()));
    }
}

/// Records name their function by the number `gpusan_abi::function_numbers` gives it: the
/// runtime names the kernel of a record with that rule.
#[test]
fn check_pass_numbers_functions_as_the_abi_does() {
    let mut src = String::from(".version 9.0\n.target sm_90\n.address_size 64\n");
    let names = ["zeta", "_Z4axpyPfi", "alpha", "Beta", "k10", "k2"];
    for n in names {
        src.push_str(&format!(
            ".visible .entry {n}(.param .u64 p)\n{{\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\
             \tst.global.u32 [%rd1], 0;\n\tret;\n}}\n"
        ));
    }
    let mut module = gpusan_ptx::parse(&src).unwrap();
    let report = check::run_with(&mut module, Some(&src), &check::CheckConfig::default()).unwrap();
    let by_pass: Vec<(&str, u32)> = report.functions.iter().map(|f| (f.name.as_str(), f.index)).collect();
    let by_abi: Vec<(&str, u32)> = names.into_iter().zip(gpusan_abi::function_numbers(&names)).collect();
    assert_eq!(by_pass, by_abi);
}
