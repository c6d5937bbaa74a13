//! The fast local origin that proxy scenarios forward to: one nginx process answering every
//! request with a fixed body, started once per bench and shared by both builds, so the origin
//! costs the same whichever proxy is measured. It runs on the load generator's CPU.

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::util::free_port;

/// The origin's address, once started; scenario configs name it `ORIGIN`.
static ADDRESS: OnceLock<SocketAddr> = OnceLock::new();

/// The running origin; killed (by PID) on drop.
pub struct Origin {
    child: Child,
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The started origin's address, if one was started.
pub fn address() -> Option<SocketAddr> {
    ADDRESS.get().copied()
}

/// Starts nginx answering `body` on a free loopback port, pinned to `cpu`.
pub fn start(body: &str, cpu: usize, dir: &Path) -> Result<Origin> {
    let port = free_port()?;
    let dir = dir.join("origin");
    fs::create_dir_all(&dir)?;
    let d = dir.display();
    let conf = format!(
        "worker_processes 1; daemon off; master_process off; pid {d}/nginx.pid; \
         error_log {d}/error.log;\nevents {{ worker_connections 4096; }}\n\
         http {{ access_log off; keepalive_requests 10000000; client_body_temp_path {d}; \
         proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
         server {{ listen 127.0.0.1:{port}; location / {{ default_type text/plain; \
         return 200 {body:?}; }} }} }}\n"
    );
    let path = dir.join("nginx.conf");
    fs::write(&path, conf)?;
    let child = Command::new("taskset")
        .arg("-c")
        .arg(cpu.to_string())
        .arg("nginx")
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the nginx origin (apt install nginx-light)")?;
    let origin = Origin { child };
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            bail!("the nginx origin did not listen on {addr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = ADDRESS.set(addr);
    Ok(origin)
}
