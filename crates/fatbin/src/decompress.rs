//! Decompression of fatbin payloads, bounded by the size the entry header states.
//!
//! The header's uncompressed size is untrusted: LZ4 output is allocated up front, so a claim
//! beyond what LZ4 can expand the payload to is refused first; ZSTD output grows only as the
//! decoder really produces bytes, and the decoder stops one byte past the claim.

use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One LZ4 input byte can stand for at most 255 output bytes (a run-length extension byte).
const LZ4_MAX_RATIO: usize = 255;
/// Output reserved before the first ZSTD block is decoded; more comes as it is produced.
const ZSTD_INITIAL_CAPACITY: usize = 1 << 20;
/// Window the ZSTD decoder may allocate even when the stated size is smaller: encoders may
/// pick a window larger than the content.
const ZSTD_MIN_WINDOW: u64 = 1 << 20;

/// Decompresses one LZ4 block (no frame: what fatbinary writes) to exactly `size` bytes.
pub(crate) fn lz4(input: &[u8], size: usize) -> Result<Vec<u8>, String> {
    if size > input.len().saturating_mul(LZ4_MAX_RATIO).saturating_add(16) {
        return Err(format!("uncompressed size {size:#x} is more than LZ4 can make of {:#x} bytes", input.len()));
    }
    let mut out = vec![0; size];
    let written = guarded(|| lz4_flex::block::decompress_into(input, &mut out).map_err(|e| format!("LZ4: {e}")))?;
    if written != size {
        return Err(format!("LZ4 data decompresses to {written:#x} bytes, the header says {size:#x}"));
    }
    Ok(out)
}

/// Decompresses one ZSTD frame to exactly `size` bytes.
pub(crate) fn zstd(input: &[u8], size: usize) -> Result<Vec<u8>, String> {
    let max_window = (size as u64).max(ZSTD_MIN_WINDOW);
    let out = guarded(|| {
        let decoder = ruzstd::decoding::StreamingDecoder::new_with_max_window_size(input, max_window)
            .map_err(|e| format!("ZSTD: {e}"))?;
        let mut out = Vec::with_capacity(size.min(ZSTD_INITIAL_CAPACITY));
        // One byte past the claim tells "too long" from "exactly right" without decoding more.
        decoder.take(size as u64 + 1).read_to_end(&mut out).map_err(|e| format!("ZSTD: {e}"))?;
        Ok(out)
    })?;
    if out.len() > size {
        return Err(format!("ZSTD data decompresses to more than the {size:#x} bytes the header says"));
    }
    if out.len() < size {
        return Err(format!("ZSTD data decompresses to {:#x} bytes, the header says {size:#x}", out.len()));
    }
    Ok(out)
}

/// The decoders are third-party code run inside the user's process: a panic in them on
/// hostile input must become an error, not unwind into the application.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err("the decompressor panicked".to_string()))
}
