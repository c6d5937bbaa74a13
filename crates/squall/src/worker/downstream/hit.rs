//! Cache hits written to a client: the whole stored response, a 304, the parts a Range asks
//! for, or a 416, for HTTP/1.1 and HTTP/2 alike.

use super::*;

impl Downstream<'_> {
    /// Writes a stored entry as the response to `head`: a 304 when the client's validators
    /// match, else the part its Range asks for (206, or 416 when none overlaps the body), else
    /// the whole response; no body for HEAD (a ranged HEAD gets the 206 head, as nginx
    /// answers). `x_cache` adds the label.
    #[allow(clippy::too_many_arguments)]
    pub fn serve_entry(
        &mut self,
        client: Client,
        head: &RequestHead,
        entry: &Entry,
        label: Label,
        x_cache: bool,
        route: u32,
    ) {
        let cut = Cut::of(head, entry, self.wall);
        let status = cut.status(entry);
        let not_modified = matches!(cut, Cut::NotModified);
        let body = cut.body(entry);
        let body_len: usize = body.iter().map(Bytes::len).sum();
        // No allocation here for a whole response: numbers are formatted on the stack, the
        // head is assembled in the worker's scratch buffer and the body is shared.
        let age = entry.age(self.wall).as_secs() as usize;
        let mut age = squall_proxy::digits::itoa_buf(age as u64);
        let age = age.as_bytes();
        let logged = label.as_str();
        let label = x_cache.then_some(label.as_str().as_bytes());
        // RFC 9111 §4: the stored response's own Date, with Age beside it; the time of the
        // hit would count the time in cache twice.
        let date = entry.date.as_ref().map_or(self.date, |d| d.as_bytes());
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        let sent = match client {
            Client::H2(..) | Client::H3(..) => {
                let (Some(mut mux), Some(stream)) = (Mux::of(conn), client.stream()) else {
                    return;
                };
                let mut length = squall_proxy::digits::itoa_buf(body_len as u64);
                let length = length.as_bytes();
                let no_body = not_modified || head.method == Method::HEAD || body_len == 0;
                let fields = entry
                    .headers
                    .iter()
                    .filter(|(name, _)| cut.keeps(name))
                    .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
                    .chain(cut.fields())
                    .chain([(&b"date"[..], date), (&b"age"[..], age)])
                    .chain(label.map(|l| (&b"x-cache"[..], l)))
                    .chain((!not_modified).then_some((&b"content-length"[..], length)));
                let Ok(head) = mux.send_headers(stream, status.as_u16(), fields, no_body) else {
                    return;
                };
                if no_body {
                    head
                } else {
                    let last = body.len() - 1;
                    for (n, piece) in body.iter().enumerate() {
                        let _ = mux.send_data(stream, piece.clone(), n == last);
                    }
                    head + body_len
                }
            }
            Client::H1(_) => {
                let raw = &mut *self.scratch;
                raw.clear();
                if cut.keeps_every_field() {
                    raw.put_slice(&entry.wire_head);
                } else {
                    for (name, value) in entry.headers.iter().filter(|(n, _)| cut.keeps(n)) {
                        put_line(raw, name.as_str().as_bytes(), value.as_bytes());
                    }
                }
                for (name, value) in cut.fields() {
                    put_line(raw, name, value);
                }
                put_line(raw, b"age", age);
                if let Some(label) = label {
                    put_line(raw, b"x-cache", label);
                }
                let mut framing = head.framing();
                framing.keep_alive &= !self.draining;
                // A 304 carries the length a 200 would have had (RFC 9110 §8.6).
                let length = if not_modified {
                    entry.body.len()
                } else {
                    body_len
                };
                let response = squall_h1::ResponseHead {
                    status,
                    headers: &HeaderMap::new(),
                    raw_headers: raw,
                    body_len: Some(length as u64),
                };
                let before = conn.out.len() + conn.chain.bytes;
                let head_at = conn.out.len();
                let whole =
                    squall_h1::encode_response_head(&response, framing, date, &mut conn.out);
                conn.alt_svc_h1(head_at);
                if whole && !not_modified {
                    let copy = conn.tls.is_some();
                    for piece in body {
                        conn.chain.push(&mut conn.out, piece.clone(), copy);
                    }
                }
                if !framing.keep_alive {
                    conn.close_after = true;
                }
                conn.out.len() + conn.chain.bytes - before
            }
        };
        conn.log_note.cache = Some(logged);
        conn.log_note.route = Some(route);
        self.log_answer(client.conn(), Some(head), status, sent);
    }
}

/// What a hit sends of its entry (RFC 9110 §13.2.2, §14): the whole response, a 304, one part
/// of the body, several as `multipart/byteranges`, or a 416. Protocol-neutral: both branches
/// of [`Downstream::serve_entry`] write the same status, fields and body pieces.
enum Cut {
    Whole,
    NotModified,
    /// 206 with one part: its bytes (a slice of the entry's body) and Content-Range.
    Part(Bytes, ContentRange),
    /// 206 with several parts.
    Parts(Multipart),
    /// 416 with `Content-Range: bytes */len` and a short text body.
    Unsatisfiable(ContentRange, Bytes),
}

impl Cut {
    /// The cut of `entry` that answers `head`. A conditional request's 304 comes first
    /// (§13.2.2); `wall` seeds a multipart boundary.
    fn of(head: &RequestHead, entry: &Entry, wall: std::time::SystemTime) -> Cut {
        let headers = super::super::cache::CacheFields(&head.headers);
        if squall_cache::not_modified(&headers, entry) {
            return Cut::NotModified;
        }
        if !head.headers.contains_key(header::RANGE) {
            return Cut::Whole;
        }
        let complete = entry.body.len() as u64;
        match squall_cache::range_answer(&headers, entry) {
            RangeAnswer::Full => Cut::Whole,
            RangeAnswer::Partial(ranges) if ranges.len() == 1 => {
                let range = ranges[0];
                Cut::Part(
                    range.slice(&entry.body),
                    ContentRange::part(range, complete),
                )
            }
            RangeAnswer::Partial(ranges) => {
                let nanos = wall
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                // The entry's address tells two multipart answers of one instant apart.
                let seed = nanos ^ (entry as *const Entry as usize as u64);
                Cut::Parts(squall_cache::multipart(entry, &ranges, seed))
            }
            RangeAnswer::Unsatisfiable => {
                let body = Bytes::from_static(b"416 Range Not Satisfiable\n");
                Cut::Unsatisfiable(ContentRange::unsatisfied(complete), body)
            }
        }
    }

    fn status(&self, entry: &Entry) -> StatusCode {
        match self {
            Cut::Whole => entry.status,
            Cut::NotModified => StatusCode::NOT_MODIFIED,
            Cut::Part(..) | Cut::Parts(_) => StatusCode::PARTIAL_CONTENT,
            Cut::Unsatisfiable(..) => StatusCode::RANGE_NOT_SATISFIABLE,
        }
    }

    /// Whether the stored field `name` goes out: a 304 keeps the validators and caching
    /// fields, a multipart 206 has its own Content-Type, a 416 describes no representation.
    fn keeps(&self, name: &HeaderName) -> bool {
        match self {
            Cut::Whole | Cut::Part(..) => true,
            Cut::NotModified => keeps_in_304(name),
            Cut::Parts(_) => name != header::CONTENT_TYPE,
            Cut::Unsatisfiable(..) => false,
        }
    }

    /// Whether every stored field goes out (HTTP/1.1 then copies the pre-encoded lines).
    fn keeps_every_field(&self) -> bool {
        matches!(self, Cut::Whole | Cut::Part(..))
    }

    /// The fields this cut adds to the stored ones.
    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let (first, second) = match self {
            Cut::Whole | Cut::NotModified => (None, None),
            Cut::Part(_, range) => (Some((&b"content-range"[..], range.as_bytes())), None),
            Cut::Parts(parts) => {
                let content_type = (&b"content-type"[..], parts.content_type.as_bytes());
                (Some(content_type), None)
            }
            Cut::Unsatisfiable(range, _) => (
                Some((&b"content-range"[..], range.as_bytes())),
                Some((&b"content-type"[..], &b"text/plain"[..])),
            ),
        };
        first.into_iter().chain(second)
    }

    /// The body's pieces, in order (none for a 304).
    fn body<'a>(&'a self, entry: &'a Entry) -> &'a [Bytes] {
        match self {
            Cut::Whole => std::slice::from_ref(&entry.body),
            Cut::NotModified => &[],
            Cut::Part(part, _) | Cut::Unsatisfiable(_, part) => std::slice::from_ref(part),
            Cut::Parts(parts) => &parts.pieces,
        }
    }
}

/// The fields a 304 carries (RFC 9110 §15.4.5): those a 200 would have that describe the
/// representation's validators and caching.
fn keeps_in_304(name: &HeaderName) -> bool {
    [
        header::ETAG,
        header::LAST_MODIFIED,
        header::CACHE_CONTROL,
        header::EXPIRES,
        header::VARY,
        header::CONTENT_LOCATION,
    ]
    .contains(name)
}
