//! The end of a gRPC call whose response was cut after its head: an HTTP/2 client's stream
//! ends with trailers that carry a `grpc-status` (gRPC over HTTP/2 §Responses), which client
//! retry and deadline policies read, where an RST_STREAM(INTERNAL_ERROR) reaches them as a
//! protocol error. Other clients are cut as any response is.

use super::*;

impl Downstream<'_> {
    /// Ends `session`'s cut response with trailers `grpc-status: status` and `grpc-message`;
    /// a stream that can no longer carry them is reset, an HTTP/1.x client is cut.
    pub fn cut_grpc(&mut self, session: &mut Session, status: &str, message: &str) -> Written {
        let Some(stream) = session.client.stream() else {
            return self.write(session, ToClient::Abort);
        };
        let Some(mut mux) = (self.conns.get_mut(session.client.conn())).and_then(Mux::of) else {
            return Written::default();
        };
        let fields = [
            (&b"grpc-status"[..], status.as_bytes()),
            (b"grpc-message", message.as_bytes()),
        ];
        if mux.send_trailers(stream, fields).is_err() {
            mux.cut(stream);
            return Written { queued: true };
        }
        // The response ended, with the status the client got (the origin's head's).
        self.log_session(session, false);
        Written { queued: true }
    }
}
