//! `gpusan serve` (issue 18, `docs/fence-design.md`): the manager that owns the GPU's one
//! context and runs each fenced tenant's work in that tenant's own memory partition.
//! Built so far: the manager's handle on the driver ([`driver`]) and a tenant's partition
//! carried out on it ([`memory`]). The forwarding layer and the tenants' side are not.

pub mod driver;
pub mod memory;
pub mod protocol;
pub mod server;
pub mod tenant;
