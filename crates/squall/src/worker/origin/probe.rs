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
        let now = io.now;
        let mut due = Vec::new();
        for (upstream, group) in self.upstreams.groups.iter_mut().enumerate() {
            if group.group.next_check_at().is_some_and(|at| at <= now) {
                due.extend(group.group.due_checks(now).map(|server| (upstream, server)));
            }
        }
        for (upstream, server) in due {
            self.start_probe(io, upstream, server);
        }
    }

    /// Publishes this worker's view of every upstream server (up, in flight, picks, failures)
    /// for `/metrics`, at most every `UPSTREAM_GAUGES_PERIOD`.
    pub(in crate::worker) fn publish_upstream_state(&mut self, io: &mut Io<'_>) {
        use std::sync::atomic::Ordering::Relaxed;
        const UPSTREAM_GAUGES_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);
        if self.gauges_due.is_some_and(|due| io.now < due) {
            return;
        }
        self.gauges_due = Some(io.now + UPSTREAM_GAUGES_PERIOD);
        let gauges = io.runtime.upstream_gauges.clone();
        for (group, published) in self.upstreams.groups.iter().zip(gauges.iter()) {
            for (id, server) in group.group.ids().zip(published.servers.iter()) {
                let up = group.group.state(id, io.now) != Some(squall_upstream::HealthState::Down);
                let stats = group.group.stats(id);
                let slot = |values: &[std::sync::atomic::AtomicU64], value: u64| {
                    if let Some(v) = values.get(io.worker) {
                        v.store(value, Relaxed);
                    }
                };
                slot(&server.up, u64::from(up));
                slot(&server.in_flight, u64::from(group.group.in_flight(id)));
                slot(&server.picks, stats.picks);
                slot(&server.failures, stats.failures);
            }
        }
    }

    /// When the next probe of any group is due, for the loop's wait.
    pub(in crate::worker) fn next_probe_at(&self) -> Option<std::time::Instant> {
        (self.upstreams.groups.iter())
            .filter_map(|g| g.group.next_check_at())
            .min()
    }

    fn start_probe(&mut self, io: &mut Io<'_>, upstream: usize, server: ServerId) {
        let group = &self.upstreams.groups[upstream];
        let Some(address) = group.group.address(server) else {
            return;
        };
        let fd = match origin_socket(address) {
            Ok(fd) => fd,
            Err(e) => {
                self.origin_socket_failed(io, Some(address), &e);
                self.upstreams.groups[upstream]
                    .group
                    .record_check(server, false, io.now);
                return;
            }
        };
        let target = OriginTarget {
            upstream,
            server,
            address,
        };
        let connect_timeout = self.upstreams.groups[upstream].connect_timeout;
        let header = (io.runtime.upstreams.get(upstream))
            .and_then(|u| u.proxy_protocol)
            .map(|version| super::ProxyHeader::new(version, None));
        let index = self.open_origin(io, fd, target, &http::Method::GET, None, header);
        self.slab[index].deadline = Some(io.now + connect_timeout);
        self.arm_origin_timer(io, index);
    }

    /// The probe's connection is up: send the request.
    pub(in crate::worker) fn write_probe(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        let Some(upstream) = self.upstreams.groups.get(origin.upstream) else {
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
            self.arm_origin_timer(io, index);
            return self.write_origin(io, index, bytes);
        }
        let mut out = BytesMut::new();
        out.put_slice(b"GET ");
        out.put_slice(path.as_bytes());
        out.put_slice(b" HTTP/1.1\r\nhost: ");
        out.put_slice(origin.address.to_string().as_bytes());
        out.put_slice(b"\r\nuser-agent: squall-health-check\r\nconnection: close\r\n\r\n");
        self.arm_origin_timer(io, index);
        // Through write_origin, which encrypts it for a TLS upstream.
        self.write_origin(io, index, out.freeze());
    }

    /// Reads the probe's answer: its status decides; the body is not waited for.
    pub(in crate::worker) fn read_probe(&mut self, io: &mut Io<'_>, index: usize, eof: bool) {
        let Some(probe) = self.slab[index].probe.as_mut() else {
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
        let origin = &self.slab[index];
        if origin.upstream_generation == self.upstreams.generation
            && let Some(group) = self.upstreams.groups.get_mut(origin.upstream)
        {
            if !ok {
                debug!(worker = io.worker, address = %origin.address, "health check failed");
            }
            group.group.record_check(origin.server, ok, io.now);
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
