//! Damaged inputs: every fixture truncated, with bytes flipped, and randomly mutated. Nothing
//! may panic; a parse that succeeds must still describe bytes inside its input.

mod common;

use common::*;
use gpusan_fatbin::{fuzz_parse, parse, Compression, Cubin, EntryKind, Fatbin, HostElf};
use proptest::prelude::*;
use proptest::sample::Index;

/// Every container of every fixture, as its own byte vector.
fn containers() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in all_fixtures() {
        let data = fixture(name);
        let fatbins: Vec<Fatbin<'_>> = if is_host(name) {
            HostElf::parse(&data).unwrap().fatbins.into_iter().map(|e| e.fatbin).collect()
        } else {
            parse(&data).unwrap()
        };
        for (i, fatbin) in fatbins.iter().enumerate() {
            out.push((format!("{name} container {i}"), fatbin.data.to_vec()));
        }
    }
    out
}

/// What a successful parse promises: entries in order, inside their container, payloads of
/// the stated size; decompressed contents of the stated size.
fn check(fatbins: &[Fatbin<'_>], input: &[u8], context: &str) {
    let within = |inner: &[u8], outer: &[u8]| {
        let (start, end) = (inner.as_ptr() as usize, inner.as_ptr() as usize + inner.len());
        start >= outer.as_ptr() as usize && end <= outer.as_ptr() as usize + outer.len()
    };
    for fatbin in fatbins {
        assert!(within(fatbin.data, input), "{context}: container outside the input");
        let mut previous_end = fatbin.offset + u64::from(fatbin.header_size);
        for entry in &fatbin.entries {
            assert!(entry.offset >= previous_end, "{context}: entries overlap");
            assert!(within(entry.payload, fatbin.data), "{context}: payload outside its container");
            previous_end = entry.offset + u64::from(entry.header_size) + entry.payload.len() as u64;
            if let (Ok(contents), true) = (entry.contents(), entry.compression != Compression::None) {
                assert_eq!(contents.len() as u64, entry.uncompressed_size, "{context}");
            }
        }
    }
}

#[test]
fn truncated_containers_are_errors() {
    for (name, data) in containers() {
        for len in 0..data.len() {
            let cut = &data[..len];
            let err = parse(cut).expect_err(&format!("{name} cut at {len:#x} parsed"));
            assert!(err.offset <= len as u64, "{name} cut at {len:#x}: error points past the input: {err}");
            assert!(!err.what.is_empty());
            // The full accessor walk on a sample: decompressors and cubin parser included.
            if len < 0x200 || len % 61 == 0 {
                fuzz_parse(cut);
            }
        }
        check(&parse(&data).unwrap(), &data, &name);
    }
}

#[test]
fn truncated_files_and_cubins_never_panic() {
    for name in all_fixtures() {
        let data = fixture(name);
        let step = (data.len() / 500).max(1);
        for len in (0..data.len()).step_by(step) {
            fuzz_parse(&data[..len]);
            if let Ok(fatbins) = parse(&data[..len]) {
                check(&fatbins, &data[..len], name);
            }
        }
    }
    for (name, data) in containers() {
        for entry in parse(&data).unwrap().iter().flat_map(|f| &f.entries).filter(|e| e.kind == EntryKind::Elf) {
            let cubin = entry.contents().unwrap();
            for len in (0..cubin.len()).step_by(7) {
                let _ = Cubin::parse(&cubin[..len]);
            }
            // A truncated payload must fail to decompress, not come out short.
            if entry.compression != Compression::None {
                let mut short = entry.clone();
                short.payload = &entry.payload[..entry.payload.len() / 2];
                assert!(short.contents().is_err(), "{name}: entry {} decompressed from half its data", entry.index);
            }
        }
    }
}

#[test]
fn flipped_header_bytes_never_panic() {
    for (name, data) in containers() {
        let fatbins = parse(&data).unwrap();
        let mut positions: Vec<usize> = (0..16).collect();
        for entry in fatbins.iter().flat_map(|f| &f.entries) {
            let start = entry.offset as usize;
            positions.extend(start..start + entry.header_size as usize);
            // A sample of the payload: corrupt compressed streams and cubins.
            let payload = entry.payload.as_ptr() as usize - data.as_ptr() as usize;
            positions.extend((payload..payload + entry.payload.len()).step_by(13));
        }
        for &at in &positions {
            for flip in [|b: u8| b ^ 0xff, |b: u8| b ^ 0x01, |b: u8| b ^ 0x80, |_| 0, |_| 0xff] {
                let mut mutated = data.clone();
                mutated[at] = flip(mutated[at]);
                fuzz_parse(&mutated);
                if let Ok(fatbins) = parse(&mutated) {
                    check(&fatbins, &mutated, &format!("{name} byte {at:#x}"));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random edits to a whole fixture or to one of its containers, maybe truncated.
    #[test]
    fn random_mutations_never_panic(
        pick in any::<Index>(),
        whole_file in any::<bool>(),
        edits in proptest::collection::vec((any::<Index>(), any::<u8>()), 1..24),
        cut in proptest::option::of(any::<Index>()),
    ) {
        let mut data = if whole_file {
            let names: Vec<_> = all_fixtures().collect();
            fixture(names[pick.index(names.len())])
        } else {
            let containers = containers();
            containers[pick.index(containers.len())].1.clone()
        };
        for (at, byte) in edits {
            let at = at.index(data.len());
            data[at] = byte;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len() + 1));
        }
        fuzz_parse(&data);
        if let Ok(fatbins) = parse(&data) {
            check(&fatbins, &data, "mutated");
        }
    }
}
