//! How the pass instruments: the reaction to a bad access and the counting of measurement builds.

use super::counting::Counting;

/// What a checked access does once it is found bad: the device ABI's, since
/// `gpusan run --check-reaction` and the injected library name it too.
pub use gpusan_abi::Reaction;

/// How accesses to a stack frame are bounded: by object (the default) or by the whole
/// frame (`onchip::objects`).
pub use gpusan_abi::LocalBounds;

/// How the pass instruments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckConfig {
    pub reaction: Reaction,
    pub local_bounds: LocalBounds,
    /// Measurement builds: count at run time the checks a naive checker would make and
    /// those that ran (`counting`).
    pub counting: Counting,
}
