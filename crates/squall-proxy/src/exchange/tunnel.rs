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
//! WebSocket over HTTP/2 (RFC 8441): the worker turns an HTTP/2 client's extended CONNECT
//! with `:protocol websocket` into the same head, `GET` with `Upgrade: websocket`, a
//! `Sec-WebSocket-Key` of its own making and the client's other `Sec-WebSocket-*` fields. The
//! origin's 101 must then carry the matching `Sec-WebSocket-Accept` (`accept.rs`; checked for
//! HTTP/1.1 clients too, whenever the request has a key), and the HTTP/2 client gets `200`
//! (RFC 8441 §5) without the 101's upgrade fields; the tunnel runs in the stream's DATA frames,
//! its window given back only as the client's bytes reach the origin. An origin that answers
//! such a request with a 2xx other than 101 did not switch: 502. A 101 refused either way is
//! counted (`tunnel_refusal`).
//!
//! Half-close: the client's FIN becomes a `shutdown(SHUT_WR)` of the origin connection once
//! what the client sent before it has been written, and the origin's response direction goes
//! on. The origin's FIN ends the tunnel once its bytes are handed to the client (as nginx
//! does): the client connection closes after them. On HTTP/2 the FIN is END_STREAM both
//! ways; a stream the client has not ended by then is reset with NO_ERROR after it.

mod accept;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version, header};
use squall_upstream::{Outcome, UpstreamErrorClass};

use super::{Action, ClientFraming, ClientHead, ClientProtocol, Exchange, Phase, ToClient};
use crate::ProxyRoute;
use accept::websocket_accept;

/// A 101 head larger than this is refused (the decoder's own head bound, for the one head it
/// does not read).
const SWITCH_HEAD_BYTES_MAX: usize = 16 * 1024;

/// A tunnel's state, from the origin's 101 to its end; or, with `started` false, the mark a
/// refused 101 left.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tunnel {
    /// The origin's 101 was accepted: the exchange is, or was, a tunnel.
    started: bool,
    /// The origin answered the upgrade with a malformed or mismatched 101 (or, to an HTTP/2
    /// client's, a 2xx that is no switch).
    bad_switch: bool,
    /// HTTP/2 client bytes handed to the origin and not yet given back as window
    /// (`ClientBodyConsumed`): given back once written, so flow control is the backpressure.
    up_unreleased: usize,
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

/// Why an upgrade did not become a tunnel, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelRefusal {
    /// The origin's answer to the upgrade was a malformed 101, one naming no offered
    /// protocol or with a wrong `Sec-WebSocket-Accept`, or a 2xx to an HTTP/2 client's
    /// extended CONNECT (502).
    BadSwitch,
    /// The client asked for an upgrade the route does not allow: forwarded without it.
    NotAllowed,
}

/// The `Upgrade` protocols of `head` that `route` allows, lowercase, as they go to the origin
/// (`None`: no upgrade is forwarded, and `Upgrade` is stripped as every hop-by-hop field is).
/// Only a `GET` without a body that lists `upgrade` in `Connection` qualifies: an HTTP/1.1
/// client's, or the one an HTTP/2 client's extended CONNECT was made into (an HTTP/2 request
/// cannot carry those fields otherwise: they make it malformed).
pub(super) fn offered(
    head: &squall_h1::RequestHead,
    route: &ProxyRoute,
    protocol: ClientProtocol,
) -> Option<String> {
    let allowed = &route.upgrade.as_ref()?.protocols;
    let version_ok = match protocol {
        ClientProtocol::Http11 => head.version == Version::HTTP_11,
        ClientProtocol::H2 => head.version == Version::HTTP_2 || head.version == Version::HTTP_3,
        ClientProtocol::Http10 => false,
    };
    if !version_ok || head.method != Method::GET || head.body != squall_h1::BodyKind::Empty {
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

/// Whether `head` asks for an upgrade at all (`Upgrade`, and `upgrade` in `Connection`).
fn asks_upgrade(head: &squall_h1::RequestHead) -> bool {
    let connection_upgrade = (head.headers.get_all(header::CONNECTION))
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"));
    connection_upgrade && head.headers.contains_key(header::UPGRADE)
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
        self.tunnel.filter(|t| t.started).map(|t| TunnelStats {
            bytes_up: t.bytes_up,
            bytes_down: t.bytes_down,
        })
    }

    /// Why the request's upgrade did not become a tunnel, if it asked for one and did not:
    /// final once the exchange is finished.
    pub fn tunnel_refusal(&self) -> Option<TunnelRefusal> {
        if self.tunnel.is_some_and(|t| t.bad_switch && !t.started) {
            return Some(TunnelRefusal::BadSwitch);
        }
        let refused = self.offered.is_none() && asks_upgrade(&self.head);
        refused.then_some(TunnelRefusal::NotAllowed)
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
        if self.client.protocol == ClientProtocol::H2 {
            tunnel.up_unreleased += data.len();
        }
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
        // What left for the origin gives the HTTP/2 client its window back.
        let written = tunnel.up_unreleased.saturating_sub(unsent);
        if written > 0 {
            tunnel.up_unreleased -= written;
            self.actions.push_back(Action::ClientBodyConsumed(written));
        }
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
            if self.not_switched() {
                self.refuse_switch(now);
                return Some(true);
            }
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
            None => self.refuse_switch(now),
        }
        Some(true)
    }

    /// An HTTP/2 client's extended CONNECT answered with a 2xx that is not a 101: the origin
    /// did not switch, and a 200 passed on would tell the client it had (RFC 8441 §5).
    fn not_switched(&self) -> bool {
        let status = self.rbuf.get(..10);
        self.client.protocol == ClientProtocol::H2
            && status.is_some_and(|s| s.starts_with(b"HTTP/1.") && s[9] == b'2')
    }

    /// The origin's answer to the upgrade is not one: 502 (or a retry), and a mark for
    /// `tunnel_refusal`.
    fn refuse_switch(&mut self, now: Instant) {
        self.tunnel = Some(Tunnel {
            bad_switch: true,
            ..Tunnel::default()
        });
        self.fail(UpstreamErrorClass::InvalidResponse, now);
    }

    /// The client-bound fields of a 101, or `None` when it is malformed, names no offered
    /// protocol in `Upgrade`, or answers a `Sec-WebSocket-Key` with the wrong
    /// `Sec-WebSocket-Accept`. An HTTP/2 client gets neither the upgrade fields nor the accept.
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
        let key = self.head.headers.get(header::SEC_WEBSOCKET_KEY);
        if protocol_name(&upgrade) == "websocket"
            && let Some(key) = key
        {
            let accept = headers.get(header::SEC_WEBSOCKET_ACCEPT)?;
            if accept.as_bytes() != websocket_accept(key.as_bytes()).as_bytes() {
                return None;
            }
        }
        if self.client.protocol == ClientProtocol::H2 {
            headers.remove(header::SEC_WEBSOCKET_ACCEPT);
            return Some(headers);
        }
        headers.insert(header::UPGRADE, HeaderValue::from_str(&upgrade).ok()?);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        Some(headers)
    }

    fn start_tunnel(&mut self, headers: HeaderMap, now: Instant) {
        // RFC 8441 §5: an HTTP/2 client hears 200, and the tunnel runs in DATA frames.
        let (status, framing) = match self.client.protocol {
            ClientProtocol::H2 => (StatusCode::OK, ClientFraming::Frames),
            _ => (StatusCode::SWITCHING_PROTOCOLS, ClientFraming::UntilClose),
        };
        self.status = status;
        self.response_started = true;
        self.framing = Some(framing);
        self.decoder = None;
        self.tunnel = Some(Tunnel {
            started: true,
            ..Tunnel::default()
        });
        self.phase = Phase::Tunnel;
        self.report(Outcome::from_status(101), None, now);
        self.tell_client(ToClient::Head(ClientHead {
            status,
            headers,
            body_len: None,
            framing,
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
        // An HTTP/2 client still sending is told to stop (RST_STREAM NO_ERROR after the
        // END_STREAM), as an HTTP/1.1 one is by the close.
        let client_eof = self.tunnel.is_some_and(|t| t.client_eof);
        self.tell_client(ToClient::End {
            trailers: None,
            request_unfinished: !client_eof,
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
