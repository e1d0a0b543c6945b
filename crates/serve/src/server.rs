//! The manager's socket (`gpusan serve`): a thread per tenant connection, serving its
//! requests in order (`tenant`). A tenant that disconnects, however it ends (exit, crash,
//! SIGKILL), is cleaned up by its thread; the others never wait for it. The manager log
//! (one line per event, to the writer given) says who came, what was refused, who left.
//!
//! With [`Config::allow_native`], a tenant alone on the GPU may load machine code unfenced;
//! from then until it leaves, no other tenant is admitted (`Admission`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::driver::Driver;
use crate::fdpass::FdReader;
use crate::protocol::{read_frame, write_frame, FrameError, Reply, Request, TenantStatus};
use crate::tenant::Tenant;

/// Where the manager log goes.
pub type Log = Arc<Mutex<Box<dyn Write + Send>>>;

/// What the operator allows.
#[derive(Clone, Copy, Debug, Default)]
pub struct Config {
    /// A tenant alone on the GPU may load machine code the fence cannot take, unfenced; no
    /// other tenant is admitted while it lives.
    pub allow_native: bool,
    /// How long a tenant's thread watches for its next request before it blocks
    /// (`protocol::spin_until_readable`; zero: never). Default `protocol::SPIN`.
    pub spin: Option<std::time::Duration>,
}

/// Who is admitted, and who holds the GPU alone with unfenced machine code: one lock, so a
/// tenant cannot join between the check that another is alone and its native load.
#[derive(Default)]
struct Admission {
    present: BTreeSet<u32>,
    native: Option<u32>,
}

pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    driver: &'static Driver,
    tenants: Arc<Mutex<BTreeMap<u32, TenantStatus>>>,
    admission: Arc<Mutex<Admission>>,
    config: Config,
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
            admission: Arc::new(Mutex::new(Admission::default())),
            config: Config::default(),
            next: AtomicU32::new(1),
            log,
        })
    }

    /// The server with `config`.
    pub fn with_config(mut self, config: Config) -> Server {
        self.config = config;
        self
    }

    /// Serves connections until the listener fails.
    pub fn run(&self) -> std::io::Result<()> {
        say(&self.log, format_args!("listening at {}", self.path.display()));
        for conn in self.listener.incoming() {
            let conn = conn?;
            let id = self.next.fetch_add(1, Ordering::Relaxed);
            let shared = Shared {
                driver: self.driver,
                tenants: self.tenants.clone(),
                admission: self.admission.clone(),
                config: self.config,
                log: self.log.clone(),
            };
            std::thread::Builder::new()
                .name(format!("tenant-{id}"))
                .spawn(move || serve_connection(conn, id, &shared))?;
        }
        Ok(())
    }
}

/// What every connection's thread shares.
struct Shared {
    driver: &'static Driver,
    tenants: Arc<Mutex<BTreeMap<u32, TenantStatus>>>,
    admission: Arc<Mutex<Admission>>,
    config: Config,
    log: Log,
}

fn serve_connection(mut conn: UnixStream, id: u32, shared: &Shared) {
    let (driver, tenants, log) = (shared.driver, &*shared.tenants, &shared.log);
    if let Err(e) = driver.make_current() {
        say(log, format_args!("connection {id} refused: {e}"));
        return;
    }
    // Frames are read through a buffer: a tenant's launches arrive back to back, and one
    // system call then takes several of them (each read of a Unix socket wakes its writer).
    // Through an `FdReader`: a frame may come with a descriptor (the tenant's segment).
    let mut incoming = match conn.try_clone() {
        Ok(c) => BufReader::with_capacity(64 << 10, FdReader::new(c)),
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
    let admitted = shared.admission.lock().map(|mut a| match a.native {
        Some(holder) => Err(holder),
        None => {
            a.present.insert(id);
            Ok(())
        }
    });
    if let Ok(Err(holder)) = admitted {
        let refusal = Reply::Error {
            code: crate::tenant::NOT_SUPPORTED,
            message: format!(
                "the GPU is held by tenant {holder}, which runs unfenced machine code (gpusan serve --allow-native)"
            ),
        };
        say(log, format_args!("tenant {id} refused: {refusal:?}"));
        let _ = write_frame(&mut conn, &refusal);
        return;
    }
    let leave = || {
        if let Ok(mut a) = shared.admission.lock() {
            a.present.remove(&id);
            if a.native == Some(id) {
                a.native = None;
            }
        }
    };
    let (mut tenant, hello) = match Tenant::start(driver, id, first) {
        Ok(t) => t,
        Err(refusal) => {
            say(log, format_args!("tenant {id} refused: {refusal:?}"));
            let _ = write_frame(&mut conn, &refusal);
            leave();
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
        let spin = shared.config.spin.unwrap_or(crate::protocol::SPIN);
        let fd = std::os::fd::AsRawFd::as_raw_fd(&conn);
        loop {
            if incoming.buffer().is_empty() {
                crate::protocol::spin_until_readable(fd, spin);
            }
            let request: Request = match read_frame(&mut incoming) {
                Ok(r) => r,
                Err(FrameError::Closed) => break "disconnected".to_string(),
                Err(e) => break format!("its connection failed: {e}"),
            };
            let answered = request.answered();
            let reply = match request {
                Request::ModuleLoad { image } if tenant.is_machine_code(&image) => {
                    native_load(&mut tenant, image, shared)
                }
                // The frame's bytes are read: the descriptor that came with them is kept.
                Request::Segment { bytes } => {
                    let fd = incoming.get_mut().take_fd();
                    let r = tenant.attach_segment(fd, bytes);
                    tenant.note_refusal(&r);
                    if r == Reply::Done {
                        say(log, format_args!("tenant {id} gave a segment of {} MiB for its copies", bytes >> 20));
                    }
                    r
                }
                request => tenant.handle(request),
            };
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
    leave();
    say(
        log,
        format_args!(
            "tenant {id} left ({why}): {} launches, {} refused; its partition is freed",
            s.launches, s.refused
        ),
    );
}

/// A machine-code module: loaded unfenced only with `--allow-native` and for a tenant alone
/// on the GPU, which then holds it alone until it leaves; refused otherwise.
fn native_load(tenant: &mut Tenant, image: Vec<u8>, shared: &Shared) -> Reply {
    let id = tenant.id;
    let mut refuse = |message: String| {
        let r = Reply::Error { code: crate::tenant::NOT_SUPPORTED, message };
        tenant.note_refusal(&r);
        r
    };
    if !shared.config.allow_native {
        return refuse(
            "cuModuleLoadData: machine code (no PTX for this GPU) cannot be fenced; the manager does not allow \
             unfenced machine code (gpusan serve --allow-native)"
                .into(),
        );
    }
    let held = shared.admission.lock().map(|mut a| {
        let others = a.present.iter().filter(|&&t| t != id).count();
        if others == 0 {
            a.native = Some(id);
        }
        others
    });
    match held {
        Ok(0) => {}
        Ok(others) => {
            return refuse(format!(
                "cuModuleLoadData: unfenced machine code is for a tenant alone on the GPU; {others} other tenant(s) are here"
            ))
        }
        Err(_) => return refuse("cuModuleLoadData: the manager's admission lock is poisoned".into()),
    }
    let reply = tenant.load_native(image);
    if matches!(reply, Reply::Module(_)) {
        say(
            &shared.log,
            format_args!("tenant {id} loaded unfenced machine code (--allow-native): it is the GPU's only tenant until it leaves"),
        );
    }
    reply
}
