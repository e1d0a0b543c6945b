//! The functions of a cubin (the ELF of an `Elf` fatbin entry): which are kernels, and their
//! parameter layout, so the runtime can tell launches apart and instrument them.
//!
//! What ptxas 13 emits, checked against nvdisasm and `cuobjdump -elf`:
//! - every function (kernel or not) is an `STT_FUNC` symbol with its own `.text.<name>`
//!   section; subroutines ptxas keeps inside a caller's section are not functions here, as
//!   `cuobjdump -sass` does not list them either;
//! - kernels have `STO_CUDA_ENTRY` (0x10) in `st_other`. `.nv.info.<name>` is no test: with
//!   `-rdc=true` plain device functions get one too;
//! - `.nv.info.<name>` is a list of attributes: u8 format, u8 attribute, then a u16 value
//!   (formats 1–3) or a u16 length and that many bytes (format 4). `EIATTR_KPARAM_INFO`
//!   (0x17) describes one parameter: u32 index, u16 ordinal, u16 offset, u32 whose bits 18–31
//!   are the size; `EIATTR_CBANK_PARAM_SIZE` (0x19) is the total parameter size;
//! - `e_flags` holds the SM: bits 8–15 in ELF ABI version 8 (ptxas 13), the low byte before;
//! - module variables (`__device__`, `__constant__`) are symbols of type `STT_OBJECT` (whole
//!   program) or `STT_CUDA_OBJECT` (13, `-rdc=true`) in `.nv.global` (zero-initialized),
//!   `.nv.global.init` (initialized) or `.nv.constant<bank>` (user constants; ptxas 13 uses
//!   bank 3), with their size in `st_size`; kernel parameter banks (`.nv.constant0.<kernel>`)
//!   hold no variables. Static variables keep their name in whole-program cubins and get a
//!   `__nv_static_…_` prefix with `-rdc=true`.

use std::collections::HashMap;

use object::elf::{FileHeader64, EM_CUDA};
use object::read::elf::{ElfFile64, FileHeader};
use object::{LittleEndian, Object, ObjectSection, ObjectSymbol, SectionIndex, SymbolFlags, SymbolKind};

use crate::Error;

pub const STO_CUDA_ENTRY: u8 = 0x10;

const EIFMT_SVAL: u8 = 4;
const EIATTR_KPARAM_INFO: u8 = 0x17;
const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cubin<'a> {
    /// The SM architecture the code is for: 90 for sm_90.
    pub sm: u32,
    pub e_flags: u32,
    /// `e_ident[EI_ABIVERSION]`: it decides where `e_flags` keeps the SM.
    pub abi_version: u8,
    /// In symbol table order.
    pub functions: Vec<Function<'a>>,
    /// Module variables, in symbol table order.
    pub variables: Vec<Variable<'a>>,
}

/// A `__device__` or `__constant__` variable: what `cuModuleGetGlobal` can be asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable<'a> {
    pub name: &'a str,
    /// Bytes (`st_size`).
    pub size: u64,
    /// Offset in its section (`st_value`).
    pub offset: u64,
    /// In a constant bank (`__constant__`), not global memory.
    pub constant: bool,
}

/// `STT_CUDA_OBJECT`: what ptxas calls a variable with `-rdc=true`.
const STT_CUDA_OBJECT: object::elf::SymbolType = object::elf::SymbolType(13);

/// The sections module variables live in: `.nv.global`, `.nv.global.init`, and the
/// constant banks `.nv.constant<N>` (not a kernel's parameter bank `.nv.constant0.<name>`).
/// `Some(true)` for a constant bank.
fn variable_section(name: &str) -> Option<bool> {
    if name == ".nv.global" || name == ".nv.global.init" {
        return Some(false);
    }
    let bank = name.strip_prefix(".nv.constant")?;
    (!bank.is_empty() && bank.bytes().all(|b| b.is_ascii_digit())).then_some(true)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function<'a> {
    pub name: &'a str,
    /// A kernel (`STO_CUDA_ENTRY`), not a device function.
    pub is_entry: bool,
    /// Code size in bytes.
    pub size: u64,
    /// Bytes of parameters in the constant bank (`EIATTR_CBANK_PARAM_SIZE`); kernels only.
    pub param_size: Option<u32>,
    /// By ordinal (`EIATTR_KPARAM_INFO`); kernels only.
    pub params: Vec<Param>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub ordinal: u16,
    /// From the start of the parameter block.
    pub offset: u16,
    pub size: u32,
}

impl<'a> Cubin<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Cubin<'a>, Error> {
        let err = |offset: u64, what: String| Error::new("cubin", offset, what);
        let elf = ElfFile64::<LittleEndian>::parse(data).map_err(|e| err(0, e.to_string()))?;
        let header: &FileHeader64<LittleEndian> = elf.elf_header();
        let machine = header.e_machine(LittleEndian);
        if machine != EM_CUDA {
            return Err(err(0x12, format!("e_machine is {}, not EM_CUDA ({})", machine.0, EM_CUDA.0)));
        }
        let e_flags = header.e_flags(LittleEndian).0;
        let abi_version = header.e_ident().abi_version;
        let sm = if abi_version >= 8 { (e_flags >> 8) & 0xff } else { e_flags & 0xff };
        // Looked up once per function: a library's cubin can have thousands.
        let info_sections: HashMap<&str, _> =
            elf.sections().filter_map(|s| Some((s.name().ok()?.strip_prefix(".nv.info.")?, s))).collect();
        let mut functions = Vec::new();
        let mut variables = Vec::new();
        for symbol in elf.symbols() {
            let st_type = symbol.elf_symbol().st_type();
            if st_type == object::elf::STT_OBJECT || st_type == STT_CUDA_OBJECT {
                let Some(constant) =
                    symbol.section_index().and_then(|s| section_name(&elf, s)).and_then(variable_section)
                else {
                    continue;
                };
                let name = symbol.name().map_err(|e| err(0, format!("symbol {}: {e}", symbol.index().0)))?;
                if symbol.size() > 0 && !name.is_empty() {
                    variables.push(Variable { name, size: symbol.size(), offset: symbol.address(), constant });
                }
                continue;
            }
            let Some(section) = symbol.section_index().filter(|_| symbol.kind() == SymbolKind::Text) else { continue };
            let name = symbol.name().map_err(|e| err(0, format!("symbol {}: {e}", symbol.index().0)))?;
            if section_name(&elf, section).and_then(|s| s.strip_prefix(".text.")) != Some(name) {
                continue;
            }
            let st_other = match symbol.flags() {
                SymbolFlags::Elf { st_other, .. } => st_other.0,
                _ => 0,
            };
            let (params, param_size) = match info_sections.get(name) {
                Some(info) => {
                    let offset = info.file_range().map_or(0, |(offset, _)| offset);
                    let bytes = info.data().map_err(|e| err(offset, e.to_string()))?;
                    nv_info(bytes).map_err(|(at, what)| Error::new(format!(".nv.info.{name}"), offset + at, what))?
                }
                None => (Vec::new(), None),
            };
            functions.push(Function {
                name,
                is_entry: st_other & STO_CUDA_ENTRY != 0,
                size: symbol.size(),
                param_size,
                params,
            });
        }
        Ok(Cubin { sm, e_flags, abi_version, functions, variables })
    }

    pub fn kernels(&self) -> impl Iterator<Item = &Function<'a>> {
        self.functions.iter().filter(|f| f.is_entry)
    }
}

fn section_name<'a>(elf: &ElfFile64<'a, LittleEndian>, index: SectionIndex) -> Option<&'a str> {
    elf.section_by_index(index).ok()?.name().ok()
}

/// The parameters and parameter size in a `.nv.info.<name>` section; errors carry the
/// position in the section.
fn nv_info(bytes: &[u8]) -> Result<(Vec<Param>, Option<u32>), (u64, String)> {
    let (mut params, mut param_size) = (Vec::new(), None);
    let mut at = 0;
    while at < bytes.len() {
        let Some(&[format, attribute, lo, hi]) = bytes.get(at..at + 4) else {
            return Err((at as u64, format!("attribute needs 4 bytes, {} left", bytes.len() - at)));
        };
        let short = u16::from_le_bytes([lo, hi]);
        let value = match format {
            1..=3 => &bytes[at + 2..at + 4],
            EIFMT_SVAL => bytes.get(at + 4..at + 4 + usize::from(short)).ok_or_else(|| {
                (at as u64, format!("attribute {attribute:#x}: {short:#x} bytes run past the end of the section"))
            })?,
            _ => return Err((at as u64, format!("unknown attribute format {format:#x}"))),
        };
        match (attribute, value) {
            (EIATTR_KPARAM_INFO, &[_, _, _, _, o0, o1, f0, f1, s0, s1, s2, s3, ..]) => params.push(Param {
                ordinal: u16::from_le_bytes([o0, o1]),
                offset: u16::from_le_bytes([f0, f1]),
                size: u32::from_le_bytes([s0, s1, s2, s3]) >> 18,
            }),
            (EIATTR_CBANK_PARAM_SIZE, &[lo, hi]) => param_size = Some(u32::from(u16::from_le_bytes([lo, hi]))),
            _ => {}
        }
        at += if format == EIFMT_SVAL { 4 + value.len() } else { 4 };
    }
    params.sort_by_key(|p| p.ordinal);
    Ok((params, param_size))
}
