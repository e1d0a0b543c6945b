//! Generic dataflow framework over [`crate::cfg`] (being written).
