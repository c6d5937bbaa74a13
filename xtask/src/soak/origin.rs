//! The soak's origin: one nginx process the soak can kill and start again on the same port, so
//! the origin-down fault is a real dead process (connections refused), not a paused one. Its
//! files (config, `small` and `big` bodies, error log) live in one folder.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::config;

/// How long nginx may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// The origin; killed (by PID, through `Child`) on drop.
pub struct Origin {
    child: Option<Child>,
    conf: PathBuf,
    cpu: usize,
    pub addr: SocketAddr,
}

impl Origin {
    /// Writes the origin's files to `dir` and starts it on `addr`, pinned to `cpu`.
    pub fn start(dir: &Path, addr: SocketAddr, cpu: usize) -> Result<Origin> {
        fs::create_dir_all(dir)?;
        fs::write(dir.join("small"), config::body(config::SMALL_BYTES))?;
        fs::write(dir.join("big"), config::body(config::BIG_BYTES))?;
        let conf = dir.join("nginx.conf");
        fs::write(&conf, config::origin(dir, addr.port()))?;
        let mut origin = Origin {
            child: None,
            conf,
            cpu,
            addr,
        };
        origin.restart()?;
        Ok(origin)
    }

    /// Kills the origin (SIGKILL: a crash, not a graceful stop).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts nginx again (after [`Origin::kill`]) and waits until it listens.
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        let child = Command::new("taskset")
            .arg("-c")
            .arg(self.cpu.to_string())
            .arg("nginx")
            .arg("-c")
            .arg(&self.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the nginx origin (apt-get install nginx-light)")?;
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_err() {
            if Instant::now() > deadline {
                bail!("the nginx origin did not listen on {}", self.addr);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.kill();
    }
}
