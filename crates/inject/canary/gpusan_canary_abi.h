/* Generated from crates/abi (gpusan_abi::canary::c_header): do not edit.
 * `cargo test -p gpusan-abi` fails when this file is stale; BLESS=1 rewrites it. */
#pragma once
#define GPUSAN_CANARY_ENTRY_BYTES 16ull
#define GPUSAN_CANARY_COMMAND_BYTES 32ull
#define GPUSAN_CANARY_WRITE_BYTES 1ull
#define GPUSAN_CANARY_ERRORS_HEADER_BYTES 16ull
#define GPUSAN_CANARY_ERROR_CAPACITY 256ull
#define GPUSAN_CANARY_ERROR_RECORD_BYTES 40ull
#define GPUSAN_CANARY_EDGE_BYTES 32ull
#define GPUSAN_CANARY_BATCH_MAX_COMMANDS 64ull
#define GPUSAN_CANARY_VECTORS \
    static_assert(canary_word(0x0ull, 0x0ull, 0x0ull) == 0x0ull, "canary_word"); \
    static_assert(canary_word(0x123456789abcdefull, 0x7f0000001000ull, 0x7f0000001003ull) == 0xf5859f32db3da797ull, "canary_word"); \
    static_assert(canary_word(0xffffffffffffffffull, 0x7ffffffffff8ull, 0x7ffffffffffdull) == 0xfeed4858dea997b7ull, "canary_word"); \
    static_assert(canary_word(0xdeadbeefcafef00dull, 0x300000200ull, 0x3000001f4ull) == 0xedf2740f8ec91580ull, "canary_word"); \
    /* end */
