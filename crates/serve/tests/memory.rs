//! A tenant's partition on the fake driver of `crates/cli/tests/fake_cuda` (its VMM calls:
//! a mapped and opened range is host memory, an unmapped one faults when touched): every
//! byte stays mapped, allocations turn sink chunks into real memory and back, a failed
//! driver call leaves the partition as it was, and dropping it gives everything back.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use gpusan_runtime::partition::CHUNK;
use gpusan_serve::driver::Driver;
use gpusan_serve::memory::{MemoryError, TenantMemory};

/// The fake driver, built once per test process.
fn fake_driver() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fake_cuda/libcuda.c");
        let dir = std::env::temp_dir().join(format!("gpusan-serve-fake-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libcuda.so.1");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&lib)
            .arg(&src)
            .output()
            .expect("a C compiler (cc)");
        assert!(out.status.success(), "cc: {}", String::from_utf8_lossy(&out.stderr));
        lib
    })
}

/// The fake driver's state is the process's: one test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn driver() -> Driver {
    Driver::open(fake_driver(), 0).expect("the fake driver opens")
}

/// Bytes of physical memory the fake driver holds (created, not yet released or still mapped).
fn physical() -> u64 {
    // SAFETY: the fake driver's own function, `uint64_t (void)`.
    unsafe {
        let lib = libloading::Library::new(fake_driver()).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn() -> u64> = lib.get(b"fake_vmm_physical_bytes\0").unwrap();
        f()
    }
}

/// Writes and reads back a byte at the first and last address of every chunk: an unmapped
/// chunk would fault here.
fn touch_every_chunk(m: &TenantMemory) {
    let (base, size) = (m.partition().base(), m.partition().size());
    for at in (base..base + size).step_by(CHUNK as usize) {
        for a in [at, at + CHUNK - 1] {
            // SAFETY: the fake driver's mapped, opened range is host memory.
            unsafe {
                std::ptr::write_volatile(a as *mut u8, 0x5a);
                assert_eq!(std::ptr::read_volatile(a as *const u8), 0x5a);
            }
        }
    }
}

#[test]
fn a_new_partition_is_aligned_to_its_size_and_all_of_it_is_the_sink() {
    let _s = serial();
    let d = driver();
    let before = physical();
    let m = TenantMemory::new(&d, 24).unwrap(); // 16 MiB: 8 chunks
    assert_eq!(m.partition().base() % (1 << 24), 0);
    assert_eq!(m.real_chunks(), 0);
    // One chunk of physical memory, mapped eight times.
    assert_eq!(physical() - before, CHUNK);
    touch_every_chunk(&m);
}

#[test]
fn allocations_make_their_chunks_real_and_frees_give_them_back_to_the_sink() {
    let _s = serial();
    let d = driver();
    let before = physical();
    let mut m = TenantMemory::new(&d, 24).unwrap();
    let a = m.alloc(3 * CHUNK + 100).unwrap(); // chunks 0..4
    let b = m.alloc(1000).unwrap(); // in chunk 3, after a
    assert_eq!(m.real_chunks(), 4);
    assert_eq!(physical() - before, 5 * CHUNK);
    // SAFETY: b's bytes are mapped real memory of the fake's.
    unsafe { std::ptr::write_bytes(b as *mut u8, 0xab, 1000) };
    assert_eq!(m.free(a).unwrap(), (3 * CHUNK + 100).next_multiple_of(512));
    // Chunk 3 still holds b: it stays real, with b's bytes.
    assert_eq!(m.real_chunks(), 1);
    assert_eq!(physical() - before, 2 * CHUNK);
    // SAFETY: as above.
    assert!(unsafe { std::slice::from_raw_parts(b as *const u8, 1000) }.iter().all(|&x| x == 0xab));
    m.free(b).unwrap();
    assert_eq!(m.real_chunks(), 0);
    assert_eq!(physical() - before, CHUNK);
    touch_every_chunk(&m);
    drop(m);
    assert_eq!(physical(), before, "dropping the partition gives every chunk back");
}

#[test]
fn a_chunk_the_driver_refuses_leaves_the_partition_as_it_was() {
    let _s = serial();
    let d = driver();
    let mut m = TenantMemory::new(&d, 24).unwrap();
    let before = physical();
    // Room for two more chunks: an allocation needing three fails at the third.
    std::env::set_var("FAKE_CUDA_VMM_LIMIT", (before + 2 * CHUNK).to_string());
    let r = m.alloc(2 * CHUNK + 1);
    std::env::remove_var("FAKE_CUDA_VMM_LIMIT");
    assert!(matches!(r, Err(MemoryError::Driver(_))), "{r:?}");
    assert_eq!(m.real_chunks(), 0);
    assert_eq!(m.partition().used(), 0);
    assert_eq!(physical(), before);
    touch_every_chunk(&m);
    // And the same allocation succeeds once memory is there, at the same place.
    let a = m.alloc(2 * CHUNK + 1).unwrap();
    assert_eq!(a, m.partition().base());
}

#[test]
fn a_free_of_what_is_not_an_allocation_is_refused_and_changes_nothing() {
    let _s = serial();
    let d = driver();
    let mut m = TenantMemory::new(&d, 22).unwrap();
    let a = m.alloc(4096).unwrap();
    assert!(matches!(m.free(a + 512), Err(MemoryError::Partition(_))));
    assert_eq!(m.real_chunks(), 1);
    m.free(a).unwrap();
    assert!(matches!(m.free(a), Err(MemoryError::Partition(_))));
}
