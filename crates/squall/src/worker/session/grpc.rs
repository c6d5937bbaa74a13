//! gRPC calls in a session: refused for an upstream spoken to in HTTP/1.1 (no trailers, no
//! streaming both ways), the `grpc-message` a failed call from an HTTP/2 client gets, and the
//! `grpc-status` a call cut after its head ends with.

use std::time::Duration;

use squall_config::OriginProtocol;
use squall_h1::RequestHead;
use squall_upstream::UpstreamErrorClass;

use super::super::ids::SessionId;
use super::super::origin::origin_protocol;
use super::{SessionIo, Sessions};

/// The `grpc-message` of a call whose request went over its body limit.
const OVER_LIMIT: &str = "squall: the request is over body_bytes_max";

impl Sessions {
    /// For a gRPC call from an HTTP/2 client that failed with `status`: the `grpc-message` it
    /// is answered with (`Downstream::answer_grpc_error`).
    pub(super) fn grpc_error_message(
        &self,
        cx: &SessionIo<'_>,
        id: SessionId,
        status: http::StatusCode,
    ) -> Option<String> {
        let session = self.get(id).filter(|s| !s.ex.detached())?;
        if !session.client.ends_with_trailers() || !is_grpc(session.ex.head()) {
            return None;
        }
        let upstream = session.upstream;
        let name = cx.origins.upstreams.group_name(upstream);
        if status == http::StatusCode::PAYLOAD_TOO_LARGE {
            return Some(OVER_LIMIT.to_owned());
        }
        Some(match origin_protocol(cx.io.runtime, upstream) {
            OriginProtocol::Http1 => format!(
                "squall: upstream {name:?} is spoken to in HTTP/1.1, which cannot carry gRPC \
                 (set protocol = \"h2c\" or \"h2\")"
            ),
            _ => format!("squall: upstream {name:?} failed: {status}"),
        })
    }

    /// For a gRPC call whose response is cut after its head (`ToClient::Abort`): the
    /// `grpc-status` and `grpc-message` of the trailers that end it. A silent origin (the
    /// route's `read_timeout`) is 4, DEADLINE_EXCEEDED; an origin that failed mid-stream
    /// (reset, closed, malformed) is 14, UNAVAILABLE.
    pub(super) fn grpc_cut(
        &self,
        cx: &SessionIo<'_>,
        id: SessionId,
    ) -> Option<(&'static str, String)> {
        let session = self.get(id).filter(|s| !s.ex.detached())?;
        if !is_grpc(session.ex.head()) {
            return None;
        }
        if session.ex.body_over_limit() {
            return Some(("8", OVER_LIMIT.to_owned()));
        }
        let upstream = session.upstream;
        let name = cx.origins.upstreams.group_name(upstream);
        Some(match session.ex.failure() {
            Some(UpstreamErrorClass::ResponseTimeout) => (
                "4",
                format!("squall: upstream {name:?} sent nothing for the route's read_timeout"),
            ),
            _ => ("14", format!("squall: upstream {name:?} failed mid-stream")),
        })
    }

    /// Ends a gRPC call cut after its head with the trailers `grpc_cut` gives.
    pub(super) fn cut_grpc_call(&mut self, cx: &mut SessionIo<'_>, id: SessionId) {
        let Some((status, message)) = self.grpc_cut(cx, id) else {
            return;
        };
        if let Some(session) = self.get_mut(id) {
            cx.down.cut_grpc(session, status, &message);
        }
    }

    /// A gRPC call (`content-type: application/grpc...`) for an upstream spoken to in HTTP/1.1,
    /// which has no trailers for its status and no streaming both ways: refused as a 502 (which
    /// a gRPC client gets as `grpc-status` 14, see `grpc_error_message`) with a warning that
    /// names the upstream and the fix (at most once a minute per worker).
    pub(super) fn refuse_grpc(&mut self, cx: &mut SessionIo<'_>, id: SessionId) -> bool {
        let Some(session) = self.get(id) else {
            return false;
        };
        let upstream = session.upstream;
        if !is_grpc(session.ex.head())
            || origin_protocol(cx.io.runtime, upstream) != OriginProtocol::Http1
        {
            return false;
        }
        (cx.io.runtime.metrics.worker(cx.io.worker))
            .upstream_grpc_refused
            .inc();
        if self
            .grpc_logged_at
            .is_none_or(|at| cx.io.now >= at + Duration::from_secs(60))
        {
            self.grpc_logged_at = Some(cx.io.now);
            let name = cx.origins.upstreams.group_name(upstream);
            tracing::warn!(
                worker = cx.io.worker,
                upstream = name,
                "gRPC request for upstream {name:?}, which is spoken to in HTTP/1.1: refused \
                 (grpc-status 14, or 502); set protocol = \"h2c\" (or \"h2\" over TLS) on the \
                 upstream"
            );
        }
        if let Some(session) = self.get_mut(id) {
            session.ex.refuse(http::StatusCode::BAD_GATEWAY);
        }
        true
    }
}

/// A gRPC request: its content type is `application/grpc` or one of its `+format` forms.
pub(super) fn is_grpc(head: &RequestHead) -> bool {
    (head.headers.get(http::header::CONTENT_TYPE))
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}
