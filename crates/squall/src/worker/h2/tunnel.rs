//! An HTTP/2 client's tunnels (RFC 8441): an extended CONNECT admitted on a route that allows
//! its protocol becomes a session like an HTTP/1.1 upgrade (`tunnel.rs`), refused with 501
//! elsewhere; its stream's DATA goes to the exchange, or waits until the tunnel begins.

use squall_h1::RequestHead;
use squall_h2::{ErrorCode, StreamId};
use tracing::info;

use super::super::Worker;
use super::super::entry::Admission;
use super::super::tunnel::{is_h2_upgrade, upgrade_allowed};

impl Worker {
    /// What an HTTP/2 extended CONNECT's admission leads to: a session on a route that allows
    /// its protocol (never the cache); a 501 on any other route (`None`: answered). Other
    /// requests, and refusals, pass as they are.
    pub(super) fn admit_tunnel_h2(
        &mut self,
        index: usize,
        stream_id: StreamId,
        head: &RequestHead,
        admission: Admission,
    ) -> Option<Admission> {
        if !is_h2_upgrade(head) {
            return Some(admission);
        }
        let route = match admission {
            Admission::Forward { route, .. } | Admission::Cached(route) => route,
            Admission::Answer { .. } => {
                self.refuse_h2_tunnel(index, stream_id, head);
                return None;
            }
            refused @ (Admission::Refused(..) | Admission::Verify(_)) => return Some(refused),
        };
        if !upgrade_allowed(&route, head) {
            self.refuse_h2_tunnel(index, stream_id, head);
            return None;
        }
        Some(Admission::Forward {
            route,
            invalidate: None,
        })
    }

    /// 501 to an extended CONNECT whose protocol the route does not take (RFC 9220 §3 says
    /// 501 for a `:protocol` the server does not support); the stream, which the client has
    /// not ended, is then reset with NO_ERROR (RFC 9113 §8.1).
    fn refuse_h2_tunnel(&mut self, index: usize, stream_id: StreamId, head: &RequestHead) {
        let counters = self.runtime.metrics.worker(self.id);
        counters.tunnel_refused[1].inc();
        info!(
            worker = self.id,
            conn = index,
            stream = stream_id,
            "extended CONNECT on a route that does not allow its upgrade: 501"
        );
        let status = http::StatusCode::NOT_IMPLEMENTED;
        (self.downstream()).refuse_h2(index, stream_id, status, Some(head));
        if let Some(h2) = self.conns[index].h2.as_mut() {
            h2.conn.reset_stream(stream_id, ErrorCode::NoError);
        }
    }

    /// DATA on an HTTP/2 tunnel's stream: to the exchange (its window given back as it reaches
    /// the origin), or kept until the tunnel begins. False when the stream is no tunnel's.
    pub(super) fn tunnel_h2_data(
        &mut self,
        index: usize,
        stream_id: StreamId,
        data: &bytes::Bytes,
        end_stream: bool,
    ) -> bool {
        let Some(h2) = self.conns[index].h2.as_mut() else {
            return false;
        };
        let Some(&id) = h2.exchanges.get(&stream_id) else {
            return false;
        };
        let Some(session) = self.session_mut(id) else {
            return false;
        };
        if !is_h2_upgrade(session.ex.head()) {
            return false;
        }
        if !session.ex.is_tunnel() {
            if let Some(h2) = self.conns[index].h2.as_mut() {
                let early = h2.early.entry(stream_id).or_default();
                early.push((data.clone(), end_stream));
            }
            return true;
        }
        let now = self.now;
        self.feed(id, |ex| {
            ex.on_tunnel_client_data(data, now);
            if end_stream {
                ex.on_tunnel_client_eof(now);
            }
        });
        true
    }
}
