//! Active health checks: `health_check = { path, interval, fails, passes }` on an upstream.
//!
//! Each worker probes the servers of its own groups (its health state is its own, as with
//! passive health): when squall-upstream says a probe is due, the worker opens a fresh origin
//! connection over the ring, sends `GET path` with `Connection: close`, and reports a 2xx or
//! 3xx head within the group's timeouts as a pass, anything else (refused, reset, timeout, an
//! error status, garbage) as a failure. A TLS upstream's probe runs the same handshake as its
//! requests (a certificate that fails verification fails the probe). An upstream spoken to in
//! HTTP/2 (`h2`, `h2c`, or `auto` when the origin chose `h2`) is probed in HTTP/2: the preface,
//! SETTINGS and one stream with `GET path`, judged by its `:status`. Probes use the origin
//! connection slab and its timers, but never the keep-alive pool or the shared HTTP/2
//! connections, and never count as proxied requests.

use bytes::{BufMut, Bytes, BytesMut};
use squall_config::OriginProtocol;
use squall_h1::{ResponseDecoder, ResponseLimits};
use squall_h2::{ClientConfig, ClientConnection, ClientEvent};
use squall_upstream::ServerId;
use tracing::debug;

use super::{OriginTarget, Origins, origin_socket};
use crate::worker::Io;

/// A probe's side of its origin connection: the response decoder and what arrived.
pub struct Probe {
    decoder: ResponseDecoder,
    pub rbuf: BytesMut,
    /// The probe speaks HTTP/2 (see the module documentation).
    mux: Option<ClientConnection>,
}

impl Probe {
    pub fn new(method: &http::Method) -> Probe {
        Probe {
            decoder: ResponseDecoder::new(ResponseLimits::default(), method),
            rbuf: BytesMut::new(),
            mux: None,
        }
    }
}

impl Origins {
    /// Starts the probes that are due (once per loop turn).
    pub(in crate::worker) fn start_due_probes(&mut self, io: &mut Io<'_>) {
        for (upstream, server) in self.upstreams.due_probes(io.now) {
            self.start_probe(io, upstream, server);
        }
    }

    fn start_probe(&mut self, io: &mut Io<'_>, upstream: usize, server: ServerId) {
        let Some(group) = self.upstreams.group(upstream) else {
            return;
        };
        let connect_timeout = group.connect_timeout;
        let Some(address) = group.group.address(server) else {
            return;
        };
        let generation = self.upstreams.generation();
        let fd = match origin_socket(address) {
            Ok(fd) => fd,
            Err(e) => {
                self.conns.socket_failed(io, Some(address), &e);
                self.upstreams
                    .record_check(generation, upstream, server, false, io.now);
                return;
            }
        };
        let target = OriginTarget {
            upstream,
            server,
            address,
            generation,
        };
        let header = (io.runtime.upstreams.get(upstream))
            .and_then(|u| u.proxy_protocol)
            .map(|version| super::ProxyHeader::new(version, None));
        let index = self
            .conns
            .open(io, fd, target, &http::Method::GET, None, header);
        self.conns[index].deadline = Some(io.now + connect_timeout);
        self.conns.arm_timer(io, index);
    }

    /// The probe's connection is up: send the request.
    pub(in crate::worker) fn write_probe(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.conns[index];
        let Some(upstream) = self.upstreams.group(origin.upstream) else {
            self.close_origin(io, index);
            return;
        };
        let path = upstream.health_check_path.as_deref().unwrap_or("/");
        origin.deadline = Some(io.now + upstream.response_timeout);
        let protocol = (io.runtime.upstreams.get(origin.upstream)).map(|u| u.protocol);
        let h2 = match protocol.unwrap_or_default() {
            OriginProtocol::H2 | OriginProtocol::H2c => true,
            OriginProtocol::Auto => origin.tls.as_ref().is_some_and(|t| t.chose_h2()),
            OriginProtocol::Http1 => false,
        };
        if h2 {
            let request = h2_probe(path, origin.tls.is_some(), origin.address, io.now);
            let Some((conn, bytes)) = request else {
                return self.end_probe(io, index, false);
            };
            if let Some(probe) = origin.probe.as_mut() {
                probe.mux = Some(conn);
            }
            self.conns.arm_timer(io, index);
            return self.conns.write(io, index, bytes);
        }
        let mut out = BytesMut::new();
        out.put_slice(b"GET ");
        out.put_slice(path.as_bytes());
        out.put_slice(b" HTTP/1.1\r\nhost: ");
        out.put_slice(origin.address.to_string().as_bytes());
        out.put_slice(b"\r\nuser-agent: squall-health-check\r\nconnection: close\r\n\r\n");
        self.conns.arm_timer(io, index);
        // Through `Conns::write`, which encrypts it for a TLS upstream.
        self.conns.write(io, index, out.freeze());
    }

    /// Reads the probe's answer: its status decides; the body is not waited for.
    pub(in crate::worker) fn read_probe(&mut self, io: &mut Io<'_>, index: usize, eof: bool) {
        let Some(probe) = self.conns[index].probe.as_mut() else {
            return;
        };
        if let Some(conn) = probe.mux.as_mut() {
            let now = io.now;
            let failed = conn.recv(&mut probe.rbuf, now).is_err();
            while let Some(event) = conn.poll_event() {
                match event {
                    ClientEvent::Response { status, .. } => {
                        let ok = (200..400).contains(&status);
                        return self.end_probe(io, index, ok);
                    }
                    ClientEvent::Reset { .. } => return self.end_probe(io, index, false),
                    _ => {}
                }
            }
            if failed || eof {
                self.end_probe(io, index, false);
            }
            return;
        }
        let event = if eof && probe.rbuf.is_empty() {
            probe.decoder.eof()
        } else {
            probe.decoder.decode(&mut probe.rbuf)
        };
        let ok = match event {
            Ok(Some(squall_h1::ResponseEvent::Head(head))) => {
                head.status.is_success() || head.status.is_redirection()
            }
            Ok(Some(squall_h1::ResponseEvent::Interim(_))) => {
                return self.read_probe(io, index, eof);
            }
            Ok(None) if !eof => return,
            _ => false,
        };
        self.end_probe(io, index, ok);
    }

    /// Records the probe's result and closes its connection.
    pub(in crate::worker) fn end_probe(&mut self, io: &mut Io<'_>, index: usize, ok: bool) {
        let origin = &self.conns[index];
        let (generation, upstream) = (origin.upstream_generation, origin.upstream);
        let recorded = self
            .upstreams
            .record_check(generation, upstream, origin.server, ok, io.now);
        if recorded && !ok {
            debug!(worker = io.worker, address = %origin.address, "health check failed");
        }
        self.close_origin(io, index);
    }
}

/// An HTTP/2 probe's connection and its first bytes: the preface, SETTINGS and `GET path` on
/// stream 1, ending it. `None` if the stream cannot be opened (it always can on a new one).
fn h2_probe(
    path: &str,
    tls: bool,
    address: std::net::SocketAddr,
    now: std::time::Instant,
) -> Option<(ClientConnection, Bytes)> {
    let mut conn = ClientConnection::new(ClientConfig::default(), now);
    let authority = address.to_string();
    let scheme: &[u8] = if tls { b"https" } else { b"http" };
    let fields = [
        (&b":method"[..], &b"GET"[..]),
        (b":scheme", scheme),
        (b":authority", authority.as_bytes()),
        (b":path", path.as_bytes()),
        (b"user-agent", b"squall-health-check"),
    ];
    conn.send_request(fields, true).ok()?;
    let mut out = BytesMut::new();
    conn.poll_output(usize::MAX, |piece| out.extend_from_slice(&piece));
    Some((conn, out.freeze()))
}
