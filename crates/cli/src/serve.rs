//! `gpusan serve`: the manager of fenced tenants on one GPU (issue 18, `gpusan_serve`).
//! It owns the GPU's context and serves tenants over a Unix socket; `--status` asks a
//! running manager for its tenants. Tenants are programs run as `gpusan run --mode fence
//! --server SOCKET -- ./app`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use clap::Args;
use gpusan_serve::driver::Driver;
use gpusan_serve::protocol::{read_frame, write_frame, Reply, Request};
use gpusan_serve::server::{Config, Log, Server};

#[derive(Args)]
pub struct ServeArgs {
    /// The manager's socket.
    #[arg(long, default_value = "/tmp/gpusan-serve.sock")]
    socket: PathBuf,
    /// Show the tenants of the manager at --socket, and exit.
    #[arg(long)]
    status: bool,
    /// The CUDA driver library to load.
    #[arg(long, default_value = "libcuda.so.1")]
    driver: PathBuf,
    /// The GPU (ordinal) the manager serves.
    #[arg(long, default_value_t = 0)]
    device: i32,
    /// Let a tenant alone on the GPU load machine code the fence cannot take (cubins,
    /// fatbins without PTX), unfenced; no other tenant is admitted while it runs.
    #[arg(long)]
    allow_native: bool,
    /// Microseconds a tenant's thread watches for its next request before it blocks (0:
    /// never; default 50): a program that waits for every kernel then pays no wake-up.
    #[arg(long, value_name = "US")]
    spin_us: Option<u64>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<i32> {
    if args.status {
        return status(&args);
    }
    let driver = Driver::open(&args.driver, args.device).context("the manager needs the GPU's driver")?;
    let driver: &'static Driver = Box::leak(Box::new(driver));
    let log: Log = Arc::new(Mutex::new(Box::new(std::io::stderr())));
    let server = Server::bind(&args.socket, driver, log)
        .with_context(|| format!("cannot listen at {}", args.socket.display()))?
        .with_config(Config {
            allow_native: args.allow_native,
            spin: args.spin_us.map(std::time::Duration::from_micros),
        });
    server.run().context("the manager's socket failed")?;
    Ok(0)
}

fn status(args: &ServeArgs) -> anyhow::Result<i32> {
    let mut conn = std::os::unix::net::UnixStream::connect(&args.socket)
        .with_context(|| format!("no manager at {}", args.socket.display()))?;
    write_frame(&mut conn, &Request::Status)?;
    let Reply::Status(tenants) = read_frame(&mut conn)? else { bail!("the manager did not answer with its status") };
    println!("{} tenant(s) at {}", tenants.len(), args.socket.display());
    if !tenants.is_empty() {
        println!(
            "{:>6} {:16} {:>8} {:>18} {:>10} {:>12} {:>8} {:>10} {:>8} {:>8}",
            "tenant", "name", "pid", "partition", "MiB", "used bytes", "chunks", "launches", "refused", "kernels"
        );
    }
    for t in tenants {
        println!(
            "{:>6} {:16} {:>8} {:>#18x} {:>10} {:>12} {:>8} {:>10} {:>8} {:>8}",
            t.tenant,
            t.name,
            t.pid,
            t.partition_base,
            t.partition_size >> 20,
            t.used,
            t.real_chunks,
            t.launches,
            t.refused,
            if t.native { "NATIVE" } else { "fenced" }
        );
    }
    Ok(0)
}
