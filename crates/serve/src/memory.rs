//! A tenant's partition carried out on the driver (`docs/fence-design.md` §2): the
//! reservation of `2^k` bytes aligned to `2^k`, every byte of it mapped at all times (a
//! fenced access may land anywhere in it; an unmapped one would be a fault that ends the
//! context of every tenant), the tenant's own sink chunk mapped wherever it has no
//! allocation, and real chunks where it has. `gpusan_runtime::partition` decides; this file
//! makes the driver calls, and undoes its half-done work when one fails, so the partition
//! is never left with a hole.

use std::collections::BTreeMap;

use gpusan_runtime::partition::{Partition, PartitionError, CHUNK};
use thiserror::Error;

use crate::driver::{CUdeviceptr, Driver, DriverError, Handle};

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MemoryError {
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error(transparent)]
    Partition(#[from] PartitionError),
    #[error("the driver's granularity ({0} bytes) does not divide a partition's chunk ({CHUNK} bytes)")]
    Granularity(u64),
}

/// One tenant's memory.
pub struct TenantMemory<'d> {
    driver: &'d Driver,
    partition: Partition,
    /// The chunk of physical memory mapped everywhere the tenant has nothing: what a
    /// fenced stray access reads and writes. The tenant's own, so a stray write changes
    /// no byte another tenant can see.
    sink: Handle,
    /// Real chunks by address.
    real: BTreeMap<CUdeviceptr, Handle>,
}

impl<'d> TenantMemory<'d> {
    /// Reserves a partition of `2^log2` bytes and maps the sink over all of it.
    pub fn new(driver: &'d Driver, log2: u32) -> Result<TenantMemory<'d>, MemoryError> {
        if driver.granularity() == 0 || !CHUNK.is_multiple_of(driver.granularity()) {
            return Err(MemoryError::Granularity(driver.granularity()));
        }
        let size = 1u64.checked_shl(log2).filter(|&s| s >= CHUNK).ok_or(PartitionError::Shape { base: 0, log2 })?;
        let base = driver.reserve(size, size)?;
        let partition = match Partition::new(base, log2) {
            Ok(p) => p,
            Err(e) => {
                let _ = driver.free_reservation(base, size);
                return Err(e.into());
            }
        };
        let sink = match driver.create(CHUNK) {
            Ok(h) => h,
            Err(e) => {
                let _ = driver.free_reservation(base, size);
                return Err(e.into());
            }
        };
        let m = TenantMemory { driver, partition, sink, real: BTreeMap::new() };
        for at in (base..base + size).step_by(CHUNK as usize) {
            // On failure, `m`'s drop unmaps what was mapped and frees the rest.
            driver.map(at, CHUNK, sink)?;
        }
        Ok(m)
    }

    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// Allocates `bytes` in the partition: chunks it newly covers become real memory.
    pub fn alloc(&mut self, bytes: u64) -> Result<CUdeviceptr, MemoryError> {
        let (at, ranges) = self.partition.alloc(bytes)?;
        let mut made = Vec::new();
        for chunk in ranges.iter().flat_map(|r| r.clone().step_by(CHUNK as usize)) {
            match self.make_real(chunk) {
                Ok(()) => made.push(chunk),
                Err(e) => {
                    // Back as it was: the chunks made real go back to the sink.
                    for c in made {
                        let _ = self.make_sink(c);
                    }
                    let _ = self.partition.free(at);
                    return Err(e.into());
                }
            }
        }
        Ok(at)
    }

    /// Frees the allocation at `at`: chunks with no allocation left go back to the sink.
    /// Returns the bytes freed (rounded as placed).
    pub fn free(&mut self, at: CUdeviceptr) -> Result<u64, MemoryError> {
        let (bytes, ranges) = self.partition.free(at)?;
        let mut first_error = None;
        for chunk in ranges.iter().flat_map(|r| r.clone().step_by(CHUNK as usize)) {
            if let Err(e) = self.make_sink(chunk) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(bytes),
        }
    }

    /// Chunks of real memory the tenant holds.
    pub fn real_chunks(&self) -> usize {
        self.real.len()
    }

    fn make_real(&mut self, chunk: CUdeviceptr) -> Result<(), DriverError> {
        let h = self.driver.create(CHUNK)?;
        if let Err(e) = self.driver.unmap(chunk, CHUNK) {
            let _ = self.driver.release(h);
            return Err(e);
        }
        if let Err(e) = self.driver.map(chunk, CHUNK, h) {
            let _ = self.driver.release(h);
            // The sink back in the hole; should that fail too, the chunk stays unmapped and
            // the error says so (the manager stops the tenant).
            self.driver.map(chunk, CHUNK, self.sink)?;
            return Err(e);
        }
        self.real.insert(chunk, h);
        Ok(())
    }

    fn make_sink(&mut self, chunk: CUdeviceptr) -> Result<(), DriverError> {
        let Some(h) = self.real.remove(&chunk) else { return Ok(()) };
        self.driver.unmap(chunk, CHUNK)?;
        // Released once unmapped: the driver frees its memory with its last mapping.
        let released = self.driver.release(h);
        self.driver.map(chunk, CHUNK, self.sink)?;
        released
    }
}

impl Drop for TenantMemory<'_> {
    fn drop(&mut self) {
        let (base, size) = (self.partition.base(), self.partition.size());
        for at in (base..base + size).step_by(CHUNK as usize) {
            let _ = self.driver.unmap(at, CHUNK);
        }
        for (_, h) in std::mem::take(&mut self.real) {
            let _ = self.driver.release(h);
        }
        let _ = self.driver.release(self.sink);
        let _ = self.driver.free_reservation(base, size);
    }
}
