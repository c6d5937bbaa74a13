//! The events of an HTTP/2 origin connection handed to the exchanges of their streams: the
//! response head (and an interim one), body, trailers, resets; a GOAWAY re-queues the waiting.

use super::*;

impl Origins {
    /// Hands every event the connection has to the exchange of its stream.
    pub(super) fn h2_events(&mut self, io: &mut Io<'_>, index: usize) {
        loop {
            let Some(h2) = self.conns.h2_mut(index) else {
                return;
            };
            let Some(event) = h2.conn.poll_event() else {
                return;
            };
            let Some(stream) = event.stream_id() else {
                UpstreamEvents::inc(&h2.counters.h2_goaways);
                debug!(worker = io.worker, address = %self.conns[index].address, ?event, "origin GOAWAY");
                self.h2_requeue(index);
                continue;
            };
            let Some(&id) = h2.streams.get(&stream) else {
                continue;
            };
            let ended = matches!(
                event,
                ClientEvent::Reset { .. }
                    | ClientEvent::Trailers { .. }
                    | ClientEvent::Data {
                        end_stream: true,
                        ..
                    }
                    | ClientEvent::Response {
                        end_stream: true,
                        ..
                    }
            );
            if ended {
                h2.streams.remove(&stream);
                h2.unsent.remove(&stream);
            }
            // Only HEAD changes how a response head reads (no body, whatever it says).
            let method = match h2.heads.contains(&stream) {
                true => &http::Method::HEAD,
                false => &http::Method::GET,
            };
            match event {
                ClientEvent::Reset { refused, code, .. } => {
                    debug!(
                        worker = io.worker,
                        stream,
                        ?code,
                        refused,
                        "origin stream reset"
                    );
                    if let Some(h2) = self.conns.h2_mut(index) {
                        h2.stream_of.remove(&id);
                        UpstreamEvents::inc(&h2.counters.h2_resets);
                    }
                    (self.news).tell(id, index, News::Reset { refused });
                }
                ClientEvent::Interim {
                    status, fields: f, ..
                } => {
                    if let Some(head) = response_head(status, f, None, false, method) {
                        let event = Some(ResponseEvent::Interim(head));
                        let news = News::Response { event, end: false };
                        self.news.tell(id, index, news);
                    }
                }
                ClientEvent::Response {
                    status,
                    fields: f,
                    content_length,
                    end_stream,
                    ..
                } => {
                    let Some(head) = response_head(status, f, content_length, end_stream, method)
                    else {
                        self.h2_stream_failed(index, id, stream);
                        continue;
                    };
                    let event = Some(ResponseEvent::Head(head));
                    let news = News::Response {
                        event,
                        end: end_stream,
                    };
                    self.news.tell(id, index, news);
                }
                ClientEvent::Data {
                    data, end_stream, ..
                } => {
                    let event = (!data.is_empty()).then_some(ResponseEvent::Data(data));
                    let news = News::Response {
                        event,
                        end: end_stream,
                    };
                    self.news.tell(id, index, news);
                }
                ClientEvent::Trailers { fields: f, .. } => {
                    let trailers = Some(f.to_header_map());
                    let event = Some(ResponseEvent::End { trailers });
                    let news = News::Response { event, end: false };
                    self.news.tell(id, index, news);
                }
                ClientEvent::GoAway { .. } => {}
            }
        }
    }

    /// A response the proxy cannot take (a field list it cannot hold): the stream is reset
    /// and its exchange fails as for a malformed response.
    fn h2_stream_failed(&mut self, index: usize, id: SessionId, stream: StreamId) {
        if let Some(h2) = self.conns.h2_mut(index) {
            h2.streams.remove(&stream);
            h2.stream_of.remove(&id);
            h2.conn.reset_stream(stream, ErrorCode::ProtocolError);
        }
        (self.news).tell(id, index, News::Reset { refused: false });
    }
}

/// The head an HTTP/2 response stands for; `None` when its fields do not make a field list.
fn response_head(
    status: u16,
    headers: HeaderFields,
    content_length: Option<u64>,
    end_stream: bool,
    method: &http::Method,
) -> Option<squall_h1::OriginHead> {
    let status = StatusCode::from_u16(status).ok()?;
    let headers = fields(headers)?;
    let head =
        squall_proxy::forward::h2_origin_head(status, headers, content_length, end_stream, method);
    Some(head)
}
