//! `gpusan serve` (issue 18, `docs/fence-design.md`): the manager that owns the GPU's one
//! context and runs each fenced tenant's work in that tenant's own memory partition: its
//! handle on the driver ([`driver`]), a tenant's partition carried out on it ([`memory`]),
//! what tenant and manager say ([`protocol`], with a descriptor passed alongside:
//! [`fdpass`]), one tenant served ([`tenant`]) and the socket ([`server`]). The tenants'
//! side is `gpusan-inject`'s `driver::remote`.

pub mod driver;
pub mod fdpass;
pub mod memory;
pub mod protocol;
pub mod server;
pub mod tenant;
