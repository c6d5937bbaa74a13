//! Upgrades (RFC 9110 §7.8) and the tunnel after them: on a route with `upgrade = [..]` an
//! HTTP/1.1 `GET` with `Connection: upgrade` and an allowed `Upgrade` protocol (RFC 6455's
//! `websocket`) is forwarded with both fields; an origin's `101` naming one offered protocol
//! goes back to the client, and from then on the exchange is a tunnel: bytes both ways, as
//! they are, until both sides are done, either fails, or nothing moves for
//! `tunnel_idle_timeout`.
//!
//! Why in the exchange: the tunnel has the same decisions as a response (when to stop reading
//! a side that outruns the other, when the origin connection is let go, what the balancer
//! hears), and the same need to be tested byte by byte; the driver only moves bytes.
//!
//! The 101 is read here, not by the response decoder, which refuses it for every request
//! that offered no upgrade: a 101 must name an offered protocol in `Upgrade`, else it is an
//! invalid response (502). A response other than 101 goes to the decoder as any other.
//!
//! Half-close: the client's FIN becomes a `shutdown(SHUT_WR)` of the origin connection once
//! what the client sent before it has been written, and the origin's response direction goes
//! on. The origin's FIN ends the tunnel once its bytes are handed to the client (as nginx
//! does): the client connection closes after them.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version, header};
use squall_upstream::{Outcome, UpstreamErrorClass};

use super::{Action, ClientFraming, ClientHead, ClientProtocol, Exchange, Phase, ToClient};
use crate::ProxyRoute;

/// A 101 head larger than this is refused (the decoder's own head bound, for the one head it
/// does not read).
const SWITCH_HEAD_BYTES_MAX: usize = 16 * 1024;

/// A tunnel's state, from the origin's 101 to its end.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tunnel {
    /// The client's FIN arrived.
    client_eof: bool,
    /// The origin connection's write side was shut (after the client's FIN).
    origin_shut: bool,
    /// Bytes from the client to the origin, and back.
    bytes_up: u64,
    bytes_down: u64,
}

/// What a finished (or running) tunnel moved, for the access log and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelStats {
    /// Client to origin.
    pub bytes_up: u64,
    /// Origin to client.
    pub bytes_down: u64,
}

/// The `Upgrade` protocols of `head` that `route` allows, lowercase, as they go to the origin
/// (`None`: no upgrade is forwarded, and `Upgrade` is stripped as every hop-by-hop field is).
/// Only an HTTP/1.1 `GET` without a body that lists `upgrade` in `Connection` qualifies.
pub(super) fn offered(
    head: &squall_h1::RequestHead,
    route: &ProxyRoute,
    protocol: ClientProtocol,
) -> Option<String> {
    let allowed = &route.upgrade.as_ref()?.protocols;
    if protocol != ClientProtocol::Http11
        || head.version != Version::HTTP_11
        || head.method != Method::GET
        || head.body != squall_h1::BodyKind::Empty
    {
        return None;
    }
    let connection_upgrade = head
        .headers
        .get_all(header::CONNECTION)
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"));
    if !connection_upgrade {
        return None;
    }
    let tokens: Vec<String> = head
        .headers
        .get_all(header::UPGRADE)
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .filter_map(|t| std::str::from_utf8(t.trim_ascii()).ok())
        .map(str::to_ascii_lowercase)
        .filter(|t| allowed.iter().any(|a| protocol_name(t) == a))
        .collect();
    (!tokens.is_empty()).then(|| tokens.join(", "))
}

/// `websocket` of `websocket/13`: a protocol's name without its version (RFC 9110 §7.8).
fn protocol_name(token: &str) -> &str {
    token.split('/').next().unwrap_or(token)
}

impl Exchange {
    /// The exchange became a tunnel: the driver hands it the client's bytes as they come.
    pub fn is_tunnel(&self) -> bool {
        self.phase == Phase::Tunnel
    }

    /// What the tunnel moved so far; `None` when the request was not upgraded.
    pub fn tunnel_stats(&self) -> Option<TunnelStats> {
        self.tunnel.map(|t| TunnelStats {
            bytes_up: t.bytes_up,
            bytes_down: t.bytes_down,
        })
    }

    /// How many more client bytes the tunnel takes now: 0 while the high-water mark waits
    /// unsent to the origin (the driver then stops taking the client's bytes).
    pub fn tunnel_client_room(&self) -> usize {
        self.config
            .high_water_bytes
            .saturating_sub(self.origin_unsent)
    }

    /// Bytes from the client, for the origin.
    pub fn on_tunnel_client_data(&mut self, data: &[u8], now: Instant) {
        let Some(tunnel) = self.tunnel.as_mut().filter(|_| self.phase == Phase::Tunnel) else {
            return;
        };
        if data.is_empty() || tunnel.client_eof {
            return;
        }
        tunnel.bytes_up += data.len() as u64;
        self.origin_unsent += data.len();
        let bytes = Bytes::copy_from_slice(data);
        self.actions.push_back(Action::WriteOrigin(bytes));
        self.arm_tunnel_timeout(now);
    }

    /// The client closed its side: the origin's write side is shut once what came before is
    /// written.
    pub fn on_tunnel_client_eof(&mut self, now: Instant) {
        if let Some(tunnel) = self.tunnel.as_mut().filter(|_| self.phase == Phase::Tunnel) {
            tunnel.client_eof = true;
            self.shut_origin_when_sent(now);
        }
    }

    /// After a send to the origin completed (`on_origin_sent`).
    pub(super) fn shut_origin_when_sent(&mut self, now: Instant) {
        let unsent = self.origin_unsent;
        let Some(tunnel) = self.tunnel.as_mut().filter(|_| self.phase == Phase::Tunnel) else {
            return;
        };
        if tunnel.client_eof && !tunnel.origin_shut && unsent == 0 {
            tunnel.origin_shut = true;
            self.actions.push_back(Action::ShutdownOrigin);
        }
        self.arm_tunnel_timeout(now);
    }

    /// Writes the request's upgrade fields (after the others, before the blank line `out`
    /// ends with).
    pub(super) fn put_upgrade(&self, out: &mut BytesMut) {
        let Some(protocols) = &self.offered else {
            return;
        };
        debug_assert!(out.ends_with(b"\r\n\r\n"), "a whole head");
        out.truncate(out.len() - 2);
        out.extend_from_slice(b"upgrade: ");
        out.extend_from_slice(protocols.as_bytes());
        out.extend_from_slice(b"\r\nconnection: upgrade\r\n\r\n");
    }

    /// Before the decoder sees the origin's bytes: a 101 to an upgrade request starts the
    /// tunnel or fails the attempt (`Some(true)`), or waits for the rest of its head
    /// (`Some(false)`). `None`: anything else, left to the decoder.
    pub(super) fn take_switch(&mut self, now: Instant) -> Option<bool> {
        if self.offered.is_none() || self.response_started || self.phase != Phase::Exchanging {
            return None;
        }
        let prefix = b"HTTP/1.1 101";
        let n = self.rbuf.len().min(prefix.len());
        if self.rbuf[..n] != prefix[..n] || (n == 0 && !self.origin_eof) {
            return if n == 0 { Some(false) } else { None };
        }
        if n < prefix.len() && !self.origin_eof {
            return Some(false);
        }
        if n < prefix.len() {
            return None;
        }
        let Some(end) = self.rbuf.windows(4).position(|w| w == b"\r\n\r\n") else {
            if self.rbuf.len() > SWITCH_HEAD_BYTES_MAX || self.origin_eof {
                self.fail(UpstreamErrorClass::InvalidResponse, now);
                return Some(true);
            }
            // More of the head to come; the decoder must not see the 101.
            return Some(false);
        };
        let head = self.rbuf.split_to(end + 4);
        match self.switch_headers(&head) {
            Some(headers) => self.start_tunnel(headers, now),
            None => self.fail(UpstreamErrorClass::InvalidResponse, now),
        }
        Some(true)
    }

    /// The client-bound fields of a 101, or `None` when it is malformed or names no offered
    /// protocol in `Upgrade`.
    fn switch_headers(&self, head: &[u8]) -> Option<HeaderMap> {
        let offered = self.offered.as_deref()?;
        // Each line keeps its CR: the head less its blank line, split after each LF.
        let mut lines = head[..head.len() - 3].split(|&b| b == b'\n');
        let status_line = lines.next()?;
        // "HTTP/1.1 101", then a reason after a space, or nothing.
        let rest = status_line.get(12..)?;
        if !(rest == b"\r" || rest.starts_with(b" ")) {
            return None;
        }
        let mut headers = HeaderMap::new();
        let mut upgrade = None;
        for line in lines {
            let line = line.strip_suffix(b"\r")?;
            let colon = line.iter().position(|&b| b == b':')?;
            let name = HeaderName::from_bytes(&line[..colon]).ok()?;
            let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii()).ok()?;
            if name == header::UPGRADE {
                upgrade = Some(value.to_str().ok()?.trim().to_ascii_lowercase());
                continue;
            }
            if is_hop_by_hop(&name) {
                continue;
            }
            headers.append(name, value);
        }
        let upgrade = upgrade?;
        let named = offered
            .split(',')
            .any(|o| protocol_name(o.trim()) == protocol_name(&upgrade));
        if !named || upgrade.contains(',') {
            return None;
        }
        headers.insert(header::UPGRADE, HeaderValue::from_str(&upgrade).ok()?);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        Some(headers)
    }

    fn start_tunnel(&mut self, headers: HeaderMap, now: Instant) {
        self.status = StatusCode::SWITCHING_PROTOCOLS;
        self.response_started = true;
        self.framing = Some(ClientFraming::UntilClose);
        self.decoder = None;
        self.tunnel = Some(Tunnel::default());
        self.phase = Phase::Tunnel;
        self.report(Outcome::from_status(101), None, now);
        self.tell_client(ToClient::Head(ClientHead {
            status: StatusCode::SWITCHING_PROTOCOLS,
            headers,
            body_len: None,
            framing: ClientFraming::UntilClose,
            keep_alive: false,
        }));
        // The origin may have sent its first bytes right behind the 101.
        let early = self.rbuf.split();
        self.tunnel_origin_data(&early, now);
        self.arm_tunnel_timeout(now);
    }

    /// Bytes from the origin in the tunnel: to the client, as they are; the origin pauses
    /// when the client has no room left.
    pub(super) fn tunnel_origin_data(&mut self, data: &[u8], now: Instant) {
        let Some(tunnel) = self.tunnel.as_mut() else {
            return;
        };
        if !data.is_empty() {
            tunnel.bytes_down += data.len() as u64;
            self.room = self.room.saturating_sub(data.len());
            self.tell_client(ToClient::Data(Bytes::copy_from_slice(data)));
        }
        if self.room == 0 && !self.paused {
            self.paused = true;
            self.actions.push_back(Action::PauseOrigin);
        }
        self.arm_tunnel_timeout(now);
    }

    /// The origin closed its side: the tunnel ends once its bytes reach the client.
    pub(super) fn tunnel_origin_eof(&mut self, now: Instant) {
        let _ = now;
        self.tell_client(ToClient::End {
            trailers: None,
            request_unfinished: false,
        });
        self.end_tunnel();
    }

    /// A failure (read or write error, the idle timeout): both sides are closed at once.
    pub(super) fn tunnel_failed(&mut self) {
        self.tell_client(ToClient::Abort);
        self.end_tunnel();
    }

    fn end_tunnel(&mut self) {
        if self.holding_origin {
            self.release_origin(false);
        }
        self.paused = false;
        self.phase = Phase::Done;
    }

    fn arm_tunnel_timeout(&mut self, now: Instant) {
        if self.phase == Phase::Tunnel {
            let idle = (self.route.upgrade.as_ref())
                .map_or(Duration::from_secs(60), |u| u.tunnel_idle_timeout);
            self.deadline = Some(now + idle);
        }
    }
}

/// Fields that belong to one connection (RFC 9110 §7.6.1), and framing ones a 101 has no use
/// for.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::CONTENT_LENGTH,
        header::PROXY_AUTHENTICATE,
        header::DATE,
    ]
    .contains(name)
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}
