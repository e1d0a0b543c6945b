//! The one error type: what was being read, where, and what was wrong with it, so a report
//! about a user's binary can be checked with a hex dump.

use std::fmt;

/// A malformed or unsupported input. `offset` counts bytes from the start of what was handed
/// to the parser: the blob for [`crate::parse`], the file for [`crate::HostElf::parse`], the
/// payload for [`crate::Cubin::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What was being read, e.g. `fatbin entry 3`.
    pub item: String,
    pub offset: u64,
    pub what: String,
}

impl Error {
    pub(crate) fn new(item: impl Into<String>, offset: u64, what: impl Into<String>) -> Self {
        Error { item: item.into(), offset, what: what.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {:#x}: {}", self.item, self.offset, self.what)
    }
}

impl std::error::Error for Error {}
