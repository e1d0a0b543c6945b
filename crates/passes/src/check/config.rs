//! How the pass instruments: the reaction to a bad access and the counting of measurement builds.

use super::counting::Counting;

/// What a checked access does once it is found bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reaction {
    /// Write the error record and skip the access; the kernel goes on (and may report more).
    #[default]
    Report,
    /// Write the error record, then `trap`: the kernel stops at its first error, where a
    /// debugger (cuda-gdb) shows it. The record is made visible system-wide first
    /// (`membar.sys`) for a runtime that can still read it.
    Abort,
}

impl Reaction {
    /// By the name the command line and `GPUSAN_CHECK_REACTION` use: `report`, `abort`.
    pub fn from_name(name: &str) -> Option<Reaction> {
        match name {
            "report" => Some(Reaction::Report),
            "abort" => Some(Reaction::Abort),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Reaction::Report => "report",
            Reaction::Abort => "abort",
        }
    }
}

/// How the pass instruments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckConfig {
    pub reaction: Reaction,
    /// Measurement builds: count at run time the checks a naive checker would make and
    /// those that ran (`counting`).
    pub counting: Counting,
}
