//! The shared test support (the corpus, the pinned toolchain): see `gpusan-testkit`.
#![allow(unused_imports)]
pub use gpusan_testkit::*;
