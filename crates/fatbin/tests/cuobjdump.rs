//! The parse of every fixture against what the pinned cuobjdump and nvdisasm say about the
//! same file: entries listed, header fields, extracted cubins and PTX, kernels, parameters.

mod common;

use std::collections::BTreeSet;

use common::*;
use gpusan_fatbin::{summary, Compression, Cubin, Entry, EntryKind, Flags, HostElf, SectionKind};

fn fixtures_dir() -> std::path::PathBuf {
    fixture_path("")
}

fn listed_entries<'a>(fatbins: &'a [gpusan_fatbin::Fatbin<'a>]) -> Vec<&'a Entry<'a>> {
    fatbins.iter().flat_map(|f| &f.entries).filter(|e| matches!(e.kind, EntryKind::Elf | EntryKind::Ptx)).collect()
}

#[test]
fn listing_matches_cuobjdump() {
    for name in all_fixtures() {
        let data = fixture(name);
        let ours = summary(&listed_fatbins(name, &data), stem(name));
        assert_eq!(ours, run_tool("cuobjdump", &["-lelf", "-lptx", name], &fixtures_dir()), "{name}");
        if is_host(name) {
            let host = HostElf::parse(&data).unwrap();
            let all = summary(host.fatbins.iter().map(|e| &e.fatbin), stem(name));
            assert_eq!(all, run_tool("cuobjdump", &["-all", "-lelf", "-lptx", name], &fixtures_dir()), "{name} -all");
        }
    }
}

/// `cuobjdump <file>` prints a block of `key = value` lines (and bare words such as
/// `compressed`) per entry.
#[test]
fn entry_headers_match_cuobjdump() {
    for name in all_fixtures() {
        let data = fixture(name);
        let fatbins = listed_fatbins(name, &data);
        let entries = listed_entries(&fatbins);
        let text = run_tool("cuobjdump", &[name], &fixtures_dir());
        let blocks: Vec<&str> = text.split("Fatbin ").skip(1).collect();
        assert_eq!(blocks.len(), entries.len(), "{name}: entries");
        for (entry, block) in entries.iter().zip(&blocks) {
            let kind = if block.starts_with("elf code:") { EntryKind::Elf } else { EntryKind::Ptx };
            let value = |key: &str| block.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(" = "));
            let word = |word: &str| block.lines().any(|l| l == word);
            let context = format!("{name} entry {}: {block}", entry.index);
            let (major, minor) = entry.code_version;
            assert_eq!(entry.kind, kind, "{context}");
            assert_eq!(value("arch"), Some(entry.arch_name().as_str()), "{context}");
            assert_eq!(value("code version"), Some(format!("[{major},{minor}]").as_str()), "{context}");
            assert_eq!(value("host") == Some("linux"), entry.flags.contains(Flags::LINUX), "{context}");
            assert_eq!(value("compile_size") == Some("64bit"), entry.flags.contains(Flags::ADDRESS_64), "{context}");
            assert_eq!(word("compressed"), entry.compression != Compression::None, "{context}");
            assert_eq!(word("has debug info"), entry.flags.contains(Flags::DEBUG), "{context}");
            let ident = entry.identifier.map(|i| String::from_utf8(i.to_vec()).unwrap());
            assert_eq!(value("identifier"), ident.as_deref(), "{context}");
            if kind == EntryKind::Ptx {
                let options = entry.options.map(|o| String::from_utf8(o.to_vec()).unwrap());
                assert_eq!(value("ptxasOptions"), options.as_deref(), "{context}");
            }
        }
    }
}

#[test]
fn contents_match_cuobjdump_extraction() {
    let mut seen = BTreeSet::new();
    for name in all_fixtures() {
        let data = fixture(name);
        let fatbins = listed_fatbins(name, &data);
        let dir = tempfile::tempdir().unwrap();
        run_tool("cuobjdump", &["-xelf", "all", "-xptx", "all", fixture_path(name).to_str().unwrap()], dir.path());
        let listing = summary(&fatbins, stem(name));
        let files: Vec<&str> = listing.lines().map(|l| l.split_once(": ").unwrap().1).collect();
        let entries = listed_entries(&fatbins);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), files.len(), "{name}: files extracted");
        assert_eq!(entries.len(), files.len(), "{name}");
        for (entry, file) in entries.iter().zip(&files) {
            let expected = std::fs::read(dir.path().join(file)).unwrap_or_else(|e| panic!("{name}: {file}: {e}"));
            match entry.kind {
                EntryKind::Elf => assert!(entry.contents().unwrap()[..] == expected[..], "{name}: {file} differs"),
                _ => assert_eq!(entry.ptx_text().unwrap(), String::from_utf8(expected).unwrap(), "{name}: {file}"),
            }
            seen.insert(format!("{:?} {:?}", entry.kind, entry.compression));
        }
    }
    // The fixtures must keep covering every storage the parser decodes.
    for kind in ["Elf", "Ptx"] {
        for compression in ["None", "Lz4", "Zstd"] {
            assert!(seen.contains(&format!("{kind} {compression}")), "no fixture has a {compression} {kind} entry");
        }
    }
}

/// Functions per cubin, as `cuobjdump -sass` lists them in each `Fatbin elf code` block.
fn sass_functions(name: &str) -> Vec<(String, BTreeSet<String>)> {
    let text = run_tool("cuobjdump", &["-sass", name], &fixtures_dir());
    text.split("Fatbin ")
        .filter(|block| block.starts_with("elf code:"))
        .map(|block| {
            let arch = block.lines().find_map(|l| l.trim().strip_prefix("code for ")).unwrap_or_default().to_string();
            let functions = block.lines().filter_map(|l| l.trim().strip_prefix("Function : ")).map(String::from);
            (arch, functions.collect())
        })
        .collect()
}

/// (functions, kernels) of a cubin as nvdisasm prints them: a `.section .text.<name>` per
/// function, `.other <name>,@"STO_CUDA_ENTRY ..."` for kernels.
fn nvdisasm_functions(cubin: &[u8]) -> (BTreeSet<String>, BTreeSet<String>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cubin"), cubin).unwrap();
    let text = run_tool("nvdisasm", &["k.cubin"], dir.path());
    let functions = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".section")?.trim().strip_prefix(".text.")?.split(',').next())
        .map(String::from)
        .collect();
    let kernels = text
        .lines()
        .filter_map(|l| {
            let (name, what) = l.trim().strip_prefix(".other")?.trim().split_once(',')?;
            what.contains("STO_CUDA_ENTRY").then(|| name.to_string())
        })
        .collect();
    (functions, kernels)
}

#[test]
fn kernels_match_cuobjdump_and_nvdisasm() {
    let mut kernels_seen = 0;
    for name in all_fixtures() {
        let data = fixture(name);
        let fatbins = listed_fatbins(name, &data);
        let elves: Vec<_> = listed_entries(&fatbins).into_iter().filter(|e| e.kind == EntryKind::Elf).collect();
        let sass = sass_functions(name);
        assert_eq!(elves.len(), sass.len(), "{name}: cubins");
        for (entry, (arch, functions)) in elves.iter().zip(&sass) {
            let contents = entry.contents().unwrap();
            let cubin = Cubin::parse(&contents).unwrap_or_else(|e| panic!("{name}: {e}"));
            let context = format!("{name} entry {}", entry.index);
            assert_eq!(cubin.sm, entry.arch, "{context}");
            assert_eq!(format!("sm_{}", cubin.sm), *arch, "{context}");
            let ours: BTreeSet<String> = cubin.functions.iter().map(|f| f.name.to_string()).collect();
            assert_eq!(&ours, functions, "{context}: functions against cuobjdump -sass");
            let (functions, kernels) = nvdisasm_functions(&contents);
            assert_eq!(ours, functions, "{context}: functions against nvdisasm");
            let ours: BTreeSet<String> = cubin.kernels().map(|f| f.name.to_string()).collect();
            assert_eq!(ours, kernels, "{context}: kernels against nvdisasm");
            kernels_seen += kernels.len();
        }
    }
    assert!(kernels_seen > 10, "only {kernels_seen} kernels in the fixtures");
}

/// Per `.nv.info.<function>` section of `cuobjdump -elf`: the (ordinal, offset, size) of
/// each `EIATTR_KPARAM_INFO` and the `EIATTR_CBANK_PARAM_SIZE` value.
/// (function, (ordinal, offset, size) per parameter, parameter size)
type NvInfoParams = Vec<(String, Vec<(u16, u16, u32)>, Option<u32>)>;

fn cuobjdump_params(cubin: &[u8]) -> NvInfoParams {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cubin"), cubin).unwrap();
    let text = run_tool("cuobjdump", &["-elf", "k.cubin"], dir.path());
    let hex = |line: &str, key: &str| -> u32 {
        let rest = line.split(key).nth(1).unwrap().trim_start_matches([' ', '\t', ':']);
        u32::from_str_radix(rest.trim_start_matches("0x").split_whitespace().next().unwrap(), 16).unwrap()
    };
    let mut sections = Vec::new();
    for block in text.split("\n\n") {
        let Some(name) = block.trim_start().strip_prefix(".nv.info.").and_then(|b| b.lines().next()) else { continue };
        let (mut params, mut size, mut attribute) = (Vec::new(), None, "");
        for line in block.lines().map(str::trim) {
            if let Some(a) = line.strip_prefix("Attribute:") {
                attribute = a.trim();
            } else if line.starts_with("Value:") && attribute == "EIATTR_KPARAM_INFO" {
                params.push((hex(line, "Ordinal") as u16, hex(line, "Offset") as u16, hex(line, "Size")));
            } else if line.starts_with("Value:") && attribute == "EIATTR_CBANK_PARAM_SIZE" {
                size = Some(hex(line, "Value"));
            }
        }
        params.sort();
        sections.push((name.trim().to_string(), params, size));
    }
    sections
}

#[test]
fn parameters_match_cuobjdump() {
    for name in all_fixtures() {
        let data = fixture(name);
        for entry in listed_fatbins(name, &data).iter().flat_map(|f| &f.entries).filter(|e| e.kind == EntryKind::Elf) {
            let contents = entry.contents().unwrap();
            let cubin = Cubin::parse(&contents).unwrap();
            let theirs = cuobjdump_params(&contents);
            for (function, params, size) in &theirs {
                let ours = cubin.functions.iter().find(|f| f.name == function).unwrap_or_else(|| panic!("{function}"));
                let ours_params: Vec<_> = ours.params.iter().map(|p| (p.ordinal, p.offset, p.size)).collect();
                assert_eq!(&ours_params, params, "{name}: {function}");
                assert_eq!(ours.param_size, *size, "{name}: {function}");
            }
            assert_eq!(theirs.len(), cubin.functions.len(), "{name}: every function has a .nv.info section");
        }
    }
}

/// Layouts known from the sources, in case cuobjdump and this crate ever agree on a mistake.
#[test]
fn parameters_match_the_sources() {
    let data = fixture("sm90.fatbin");
    let fatbins = gpusan_fatbin::parse(&data).unwrap();
    let contents = fatbins[0].entries.iter().find(|e| e.kind == EntryKind::Elf).unwrap().contents().unwrap();
    let cubin = Cubin::parse(&contents).unwrap();
    let layout = |name: &str| {
        let f = cubin.functions.iter().find(|f| f.name == name).unwrap();
        (f.params.iter().map(|p| (p.offset, p.size)).collect::<Vec<_>>(), f.param_size)
    };
    // scale(float *, int, double, char), add(float *, const float *, int)
    assert_eq!(layout("_Z5scalePfidc"), (vec![(0, 8), (8, 4), (16, 8), (24, 1)], Some(25)));
    assert_eq!(layout("_Z3addPfPKfi"), (vec![(0, 8), (8, 8), (16, 4)], Some(20)));

    let data = fixture("lib.so");
    let host = HostElf::parse(&data).unwrap();
    // The last cubin: the first container holds nvcc's empty one.
    let entry = host.fatbins.iter().flat_map(|e| &e.fatbin.entries).rfind(|e| e.kind == EntryKind::Elf).unwrap();
    let contents = entry.contents().unwrap();
    let cubin = Cubin::parse(&contents).unwrap();
    let by_value = cubin.functions.iter().find(|f| f.name == "by_value").unwrap();
    assert_eq!((by_value.is_entry, by_value.param_size), (true, Some(24)));
    assert_eq!(cubin.kernels().count(), 3);

    let data = fixture("rdc.o");
    let host = HostElf::parse(&data).unwrap();
    let fatbin = host.fatbins_in(SectionKind::RelFatbin).next().unwrap();
    let contents = fatbin.entries.iter().find(|e| e.kind == EntryKind::Elf).unwrap().contents().unwrap();
    let cubin = Cubin::parse(&contents).unwrap();
    let entry = |name: &str| cubin.functions.iter().find(|f| f.name == name).map(|f| f.is_entry);
    assert_eq!((entry("_Z5applyPfi"), entry("_Z6offsetf")), (Some(true), Some(false)));
}

#[test]
fn wrappers_point_at_the_fatbins() {
    for &name in HOST_FIXTURES {
        let data = fixture(name);
        let host = HostElf::parse(&data).unwrap();
        assert!(!host.wrappers.is_empty(), "{name}: no wrapper");
        let targets: BTreeSet<_> =
            host.wrappers.iter().map(|w| w.fatbin.unwrap_or_else(|| panic!("{name}: {w:?}"))).collect();
        assert_eq!(targets.len(), host.wrappers.len(), "{name}: two wrappers share a fatbin");
        // nvcc registers every container it emits.
        assert_eq!(targets.len(), host.fatbins.len(), "{name}");
        for wrapper in &host.wrappers {
            let fatbin = &host.fatbins[wrapper.fatbin.unwrap()];
            let relocated = name.ends_with(".o");
            assert_eq!(wrapper.data == 0, relocated, "{name}: {wrapper:?}");
            if !relocated {
                assert_eq!(wrapper.data, fatbin.address, "{name}");
            }
            assert!((1..=2).contains(&wrapper.version), "{name}: {wrapper:?}");
        }
    }
}

/// Linkers that leave RELA targets zero (lld's default) make the wrapper's stored pointer 0;
/// the `R_X86_64_RELATIVE` addend in `.rela.dyn` then gives the address.
#[test]
fn zeroed_wrapper_pointers_resolve_through_dynamic_relocations() {
    for name in ["exe_sm90", "lib.so"] {
        let mut data = fixture(name);
        let expected: Vec<_> = HostElf::parse(&data).unwrap().wrappers.iter().map(|w| w.fatbin).collect();
        for wrapper in HostElf::parse(&data.clone()).unwrap().wrappers {
            let at = wrapper.offset as usize + 8;
            data[at..at + 8].fill(0);
        }
        let host = HostElf::parse(&data).unwrap();
        assert!(host.wrappers.iter().all(|w| w.data == 0), "{name}");
        assert_eq!(host.wrappers.iter().map(|w| w.fatbin).collect::<Vec<_>>(), expected, "{name}");
    }
}

#[test]
fn pointers_parse_like_slices() {
    for &name in FATBIN_FIXTURES {
        let data = fixture(name);
        let expected: Vec<String> =
            gpusan_fatbin::parse(&data).unwrap()[0].entries.iter().map(|e| e.to_string()).collect();
        // What nvcc emits: magic, version, pointer to the fatbin, pointer to prelinked fatbins.
        let wrapper: [u64; 3] = [0x0000_0001_4662_43B1, data.as_ptr() as u64, 0];
        for ptr in [wrapper.as_ptr().cast::<u8>(), data.as_ptr()] {
            // SAFETY: both point to memory that outlives the call: the wrapper to `data`.
            let fatbin = unsafe { gpusan_fatbin::from_wrapper_ptr(ptr) }.unwrap();
            assert_eq!(fatbin.size(), data.len(), "{name}");
            let got: Vec<String> = fatbin.entries.iter().map(|e| e.to_string()).collect();
            assert_eq!(got, expected, "{name}");
        }
    }
}

#[test]
fn bad_pointers_are_refused() {
    let data = fixture("sm90.fatbin");
    let refused = |ptr: *const u8| unsafe { gpusan_fatbin::from_wrapper_ptr(ptr) }.unwrap_err().to_string();
    assert!(refused(std::ptr::null()).contains("null pointer"));
    let garbage = [0x5au8; 32];
    assert!(refused(garbage.as_ptr()).contains("magic 0x5a5a5a5a"));
    let unknown_version: [u64; 3] = [0x0000_0007_4662_43B1, data.as_ptr() as u64, 0];
    assert!(refused(unknown_version.as_ptr().cast()).contains("version 7"));
    let null_data: [u64; 3] = [0x0000_0001_4662_43B1, 0, 0];
    assert!(refused(null_data.as_ptr().cast()).contains("null fatbin pointer"));
    let mut huge = data[..16].to_vec();
    huge[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(refused(huge.as_ptr()).contains("over the limit"));
}

/// A pointer nothing vouches for (an image handed to `cuModuleLoadData`, which has no length):
/// every range is asked of the predicate before it is read, and a fatbin whose header claims
/// more than is readable (a file cut short) is refused without a read past what is.
#[test]
fn checked_pointers_read_only_what_the_predicate_allows() {
    let data = fixture("sm90.fatbin");
    let within = |n: usize| {
        let (start, end) = (data.as_ptr() as usize, data.as_ptr() as usize + n);
        move |p: *const u8, len: usize| p as usize >= start && (p as usize).saturating_add(len) <= end
    };
    let whole = within(data.len());
    // SAFETY: the predicate accepts only ranges inside `data`.
    let fatbin = unsafe { gpusan_fatbin::from_ptr_checked(data.as_ptr(), &whole) }.unwrap();
    assert_eq!(fatbin.size(), data.len());
    for cut in [8, 16, data.len() / 2, data.len() - 1] {
        let asked = std::cell::RefCell::new(Vec::new());
        let short = within(cut);
        let readable = |p: *const u8, n: usize| {
            asked.borrow_mut().push(n);
            short(p, n)
        };
        // SAFETY: as above, only ranges inside the first `cut` bytes of `data` are read.
        let err = unsafe { gpusan_fatbin::from_ptr_checked(data.as_ptr(), &readable) }.unwrap_err().to_string();
        let expected = if cut < 16 { "is not readable" } else { "not all of them are readable" };
        assert!(err.contains(expected), "cut at {cut}: {err}");
        assert!(!asked.borrow().is_empty());
    }
    // A wrapper whose fatbin pointer leads nowhere readable.
    let wrapper: [u64; 3] = [0x0000_0001_4662_43B1, 0x10, 0];
    let err = unsafe { gpusan_fatbin::from_ptr_checked(wrapper.as_ptr().cast(), &|p, _| p as usize != 0x10) };
    assert!(err.unwrap_err().to_string().contains("header at 0x10 is not readable"));
}
