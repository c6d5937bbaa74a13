//! The admin listener (`[admin] listen`): `GET /metrics` in the Prometheus text format and
//! `GET /healthz`, served by plain threads off the request path.
//!
//! Why threads and not a worker: the endpoint is scraped every few seconds from loopback, so it
//! needs no io_uring, and keeping it out of the workers means a stuck scrape can never delay a
//! client. Each admin connection gets a thread of its own, so that one slow client cannot
//! delay `/healthz` for the next (a balancer that sees it time out takes the node out); a
//! connection has `TOTAL_TIMEOUT` in all to send its request and read the answer, however it
//! dribbles, and at most `CONNECTIONS_MAX` are served at once (those beyond are closed at
//! once, and a slot frees within `TOTAL_TIMEOUT`). Answers carry `Connection: close`. The
//! text itself is `admin/render.rs`.

use std::io::{Read as _, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::metrics::Metrics;

mod render;

use render::render;

/// Time an admin connection has, in all, to send its request and read the answer.
const TOTAL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head the admin endpoint reads.
const REQUEST_BYTES_MAX: usize = 8 * 1024;
/// Admin connections served at once; more are closed on accept.
const CONNECTIONS_MAX: usize = 128;
/// Stack of an admin connection's thread: it parses a request line and formats text.
const THREAD_STACK_BYTES: usize = 256 * 1024;

/// Binds the admin address (a start-up failure if taken) and serves it on its own threads.
pub fn start(address: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    let listener = TcpListener::bind(address)
        .map_err(|e| anyhow::anyhow!("cannot listen on {address} (admin): {e}"))?;
    info!("admin endpoint on http://{}", listener.local_addr()?);
    std::thread::Builder::new()
        .name("squall-admin".into())
        .spawn(move || accept(listener, metrics))?;
    Ok(())
}

/// Accepts admin connections and hands each to a thread of its own, up to `CONNECTIONS_MAX`.
fn accept(listener: TcpListener, metrics: Arc<Metrics>) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                // Out of descriptors, most likely: wait a moment rather than spin.
                debug!("admin accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX {
            open.fetch_sub(1, Ordering::AcqRel);
            debug!("admin: {CONNECTIONS_MAX} connections open already; closing a new one");
            continue;
        }
        let (metrics, slot) = (metrics.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("squall-admin-conn".into())
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || {
                if let Err(e) = serve(stream, &metrics, Instant::now() + TOTAL_TIMEOUT) {
                    debug!("admin connection: {e}");
                }
                slot.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            open.fetch_sub(1, Ordering::AcqRel);
            warn!("admin: cannot start a thread for a connection: {e}");
        }
    }
}

/// The time left until `deadline`, as a socket timeout; an error once it has passed.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the admin request took too long",
        ));
    }
    Ok(left)
}

fn serve(mut stream: TcpStream, metrics: &Metrics, deadline: Instant) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REQUEST_BYTES_MAX {
        // Each read may wait only for what is left of the whole request's time.
        stream.set_read_timeout(Some(left(deadline)?))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let (status, content_type, body) = match line {
        b"GET /metrics HTTP/1.1" | b"GET /metrics HTTP/1.0" => {
            ("200 OK", "text/plain; version=0.0.4", render(metrics))
        }
        b"GET /healthz HTTP/1.1" | b"GET /healthz HTTP/1.0" => {
            if metrics.draining.load(std::sync::atomic::Ordering::Relaxed) {
                (
                    "503 Service Unavailable",
                    "text/plain",
                    "draining\n".to_owned(),
                )
            } else {
                ("200 OK", "text/plain", "ok\n".to_owned())
            }
        }
        _ => ("404 Not Found", "text/plain", "404 Not Found\n".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.set_write_timeout(Some(left(deadline)?))?;
    stream.write_all(response.as_bytes())
}
