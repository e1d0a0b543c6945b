//! The manager's socket (`gpusan serve`): a thread per tenant connection, serving its
//! requests in order (`tenant`). A tenant that disconnects, however it ends (exit, crash,
//! SIGKILL), is cleaned up by its thread; the others never wait for it. The manager log
//! (one line per event, to the writer given) says who came, what was refused, who left.

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::driver::Driver;
use crate::protocol::{read_frame, write_frame, FrameError, Reply, Request, TenantStatus};
use crate::tenant::Tenant;

/// Where the manager log goes.
pub type Log = Arc<Mutex<Box<dyn Write + Send>>>;

pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    driver: &'static Driver,
    tenants: Arc<Mutex<BTreeMap<u32, TenantStatus>>>,
    next: AtomicU32,
    log: Log,
}

fn say(log: &Log, line: std::fmt::Arguments) {
    if let Ok(mut w) = log.lock() {
        let _ = writeln!(w, "gpusan serve: {line}");
    }
}

impl Server {
    /// Listens at `path` (a stale socket file there is replaced) with `driver`, which lives
    /// as long as the process.
    pub fn bind(path: &Path, driver: &'static Driver, log: Log) -> std::io::Result<Server> {
        if path.exists() && UnixStream::connect(path).is_err() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        Ok(Server {
            listener,
            path: path.to_path_buf(),
            driver,
            tenants: Arc::new(Mutex::new(BTreeMap::new())),
            next: AtomicU32::new(1),
            log,
        })
    }

    /// Serves connections until the listener fails.
    pub fn run(&self) -> std::io::Result<()> {
        say(&self.log, format_args!("listening at {}", self.path.display()));
        for conn in self.listener.incoming() {
            let conn = conn?;
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            let (driver, tenants, log) = (self.driver, self.tenants.clone(), self.log.clone());
            std::thread::Builder::new()
                .name(format!("tenant-{id}"))
                .spawn(move || serve_connection(conn, id, driver, &tenants, &log))?;
        }
        Ok(())
    }
}

fn serve_connection(
    mut conn: UnixStream,
    id: u32,
    driver: &'static Driver,
    tenants: &Mutex<BTreeMap<u32, TenantStatus>>,
    log: &Log,
) {
    if let Err(e) = driver.make_current() {
        say(log, format_args!("connection {id} refused: {e}"));
        return;
    }
    // Frames are read through a buffer: a tenant's launches arrive back to back, and one
    // system call then takes several of them (each read of a Unix socket wakes its writer).
    let mut incoming = match conn.try_clone() {
        Ok(c) => BufReader::with_capacity(64 << 10, c),
        Err(e) => {
            say(log, format_args!("connection {id} refused: {e}"));
            return;
        }
    };
    let first: Request = match read_frame(&mut incoming) {
        Ok(r) => r,
        Err(e) => {
            say(log, format_args!("connection {id} ended before Hello: {e}"));
            return;
        }
    };
    if first == Request::Status {
        let all = tenants.lock().map(|t| t.values().cloned().collect()).unwrap_or_default();
        let _ = write_frame(&mut conn, &Reply::Status(all));
        return;
    }
    let (mut tenant, hello) = match Tenant::start(driver, id, first) {
        Ok(t) => t,
        Err(refusal) => {
            say(log, format_args!("tenant {id} refused: {refusal:?}"));
            let _ = write_frame(&mut conn, &refusal);
            return;
        }
    };
    let p = tenant.memory().partition();
    say(
        log,
        format_args!(
            "tenant {id} ({}, pid {}) started: partition of {} MiB at {:#x}",
            tenant.name,
            tenant.pid,
            p.size() >> 20,
            p.base()
        ),
    );
    let publish = |t: &Tenant| {
        if let Ok(mut all) = tenants.lock() {
            all.insert(id, t.status());
        }
    };
    publish(&tenant);
    // A tenant gone before reading its Hello leaves as any other: cleaned up and logged.
    let why = if let Err(e) = write_frame(&mut conn, &hello) {
        format!("its connection failed: {e}")
    } else {
        loop {
            let request: Request = match read_frame(&mut incoming) {
                Ok(r) => r,
                Err(FrameError::Closed) => break "disconnected".to_string(),
                Err(e) => break format!("its connection failed: {e}"),
            };
            let answered = request.answered();
            let reply = tenant.handle(request);
            if let Reply::Error { message, .. } = &reply {
                say(log, format_args!("tenant {id}: refused: {message}"));
            }
            publish(&tenant);
            if !answered {
                continue;
            }
            if let Err(e) = write_frame(&mut conn, &reply) {
                break format!("its connection failed: {e}");
            }
        }
    };
    let s = tenant.status();
    drop(tenant);
    tenants.lock().map(|mut t| t.remove(&id)).ok();
    say(
        log,
        format_args!(
            "tenant {id} left ({why}): {} launches, {} refused; its partition is freed",
            s.launches, s.refused
        ),
    );
}
