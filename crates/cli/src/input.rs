//! Reading a command's input: a file, or standard input for `-`, and PTX parsed from it
//! with the file's name in the error. Every subcommand that takes PTX reads it here.
//!
//! Input is bounded: reading stops at [`MAX_INPUT_BYTES`] (a named pipe or `/dev/zero`
//! never ends), and text that is not UTF-8 is refused at the byte where it stops being.

use std::fmt;
use std::io::Read;
use std::path::Path;

use anyhow::Result;
use gpusan_ptx::excerpt;

/// The largest PTX file read, 1 GiB. nvcc's largest modules (whole template libraries,
/// `-G` builds) are some hundred MiB; the PTX front-end's spans are `u32`, so 4 GiB is
/// the hard ceiling, and a quarter of it leaves room for the tree and the output.
pub(crate) const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Why an input could not be read as text.
#[derive(Debug)]
pub(crate) enum InputError {
    Io {
        name: String,
        error: std::io::Error,
    },
    TooLarge {
        name: String,
        limit: u64,
    },
    /// Not UTF-8 from byte `offset` on, which is at `line`:`column` of the text before it.
    NotUtf8 {
        name: String,
        offset: usize,
        line: usize,
        column: usize,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Io { name, error } => write!(f, "reading {name}: {error}"),
            InputError::TooLarge { name, limit } => {
                write!(f, "{name}: larger than the {limit}-byte limit on PTX input; not read further")
            }
            InputError::NotUtf8 { name, offset, line, column } => {
                write!(f, "{name}:{line}:{column}: byte {offset} is not UTF-8 text; PTX is text")
            }
        }
    }
}

impl std::error::Error for InputError {}

/// `path` (or standard input for `-`) as text, at most [`MAX_INPUT_BYTES`] of it.
pub(crate) fn read_input(path: &Path) -> Result<String> {
    Ok(read_text(path)?)
}

/// [`read_input`] with the reason kept, for callers that treat some failures differently.
pub(crate) fn read_text(path: &Path) -> Result<String, InputError> {
    if path.as_os_str() == "-" {
        read_bounded(std::io::stdin().lock(), "standard input", MAX_INPUT_BYTES)
    } else {
        let name = excerpt::escape(&path.display().to_string());
        let file = std::fs::File::open(path).map_err(|error| InputError::Io { name: name.clone(), error })?;
        // The size a regular file says it has, to read it into one allocation; a device or
        // pipe says 0 and grows the buffer as it goes, up to the limit.
        let hint = file.metadata().map_or(0, |m| m.len().min(MAX_INPUT_BYTES));
        read_bounded_with(file, &name, MAX_INPUT_BYTES, hint as usize)
    }
}

/// Reads `reader` to its end as text, or stops one byte past `limit`.
fn read_bounded(reader: impl Read, name: &str, limit: u64) -> Result<String, InputError> {
    read_bounded_with(reader, name, limit, 0)
}

/// [`read_bounded`] into a buffer of `capacity` bytes to start with.
fn read_bounded_with(reader: impl Read, name: &str, limit: u64, capacity: usize) -> Result<String, InputError> {
    // One byte more than the text, so reading to the end needs no second allocation.
    let mut bytes = Vec::with_capacity(capacity + 1);
    reader.take(limit + 1).read_to_end(&mut bytes).map_err(|error| InputError::Io { name: name.to_string(), error })?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLarge { name: name.to_string(), limit });
    }
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let text = std::str::from_utf8(&e.as_bytes()[..offset]).expect("valid up to here");
        let line_start = text.rfind('\n').map_or(0, |i| i + 1);
        InputError::NotUtf8 {
            name: name.to_string(),
            offset,
            line: text.bytes().filter(|&b| b == b'\n').count() + 1,
            column: text[line_start..].chars().count() + 1,
        }
    })
}

pub(crate) fn parse_file(path: &Path) -> Result<gpusan_ptx::Module> {
    let src = read_input(path)?;
    gpusan_ptx::parse(&src).map_err(|e| anyhow::anyhow!("{}", e.with_path(path.display().to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_stops_one_byte_past_the_limit() {
        // An endless reader: the read must end by itself, not when memory runs out.
        let endless = std::io::repeat(0);
        let e = read_bounded(endless, "/dev/zero", 1000).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { .. }));
        let shown = e.to_string();
        assert_eq!(shown, "/dev/zero: larger than the 1000-byte limit on PTX input; not read further");
    }

    #[test]
    fn input_at_the_limit_is_read() {
        assert_eq!(read_bounded(&b"abcd"[..], "x", 4).unwrap(), "abcd");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_at_their_offset_line_and_column() {
        let e = read_bounded(&b".version 9.0\n.tar\xffget"[..], "k.ptx", 100).unwrap_err();
        assert_eq!(e.to_string(), "k.ptx:2:5: byte 17 is not UTF-8 text; PTX is text");
    }
}
