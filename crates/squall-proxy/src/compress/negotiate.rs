//! Whether a response is compressed, and with which coding: pure functions of the request, the
//! response head and the route's `compress` settings.
//!
//! The coding follows the client's `Accept-Encoding` weights (RFC 9110 §12.5.3): the highest
//! weight wins, ties go to brotli, then zstd, then gzip (smallest output first at the default
//! levels). A coding listed with `q=0` anywhere is refused, `*` stands for every coding not
//! listed by name, `x-gzip` is gzip (§8.4.1.3), and a member with a weight that is not a qvalue
//! is ignored. These are the rules the cache normalises `Accept-Encoding` by (squall-cache
//! `normalize_accept_encoding`), so the coding chosen for one request is acceptable to every
//! request stored under the same set of codings.
//!
//! When no coding is acceptable (`identity;q=0` with nothing else) the response goes out
//! uncompressed: §12.5.3 lets a server send identity rather than 415 when it has nothing
//! acceptable, and a proxy's 415 would break clients that a plain origin serves.

use http::header::{
    ACCEPT_ENCODING, ACCEPT_RANGES, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE,
    ETAG, HeaderMap, HeaderValue, RANGE, VARY,
};
use http::{Method, StatusCode};
use squall_config::Compress;
use squall_h1::RequestHead;

use super::Coding;

/// What to do with one response on a route that compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Leave the response as it is: it does not depend on `Accept-Encoding` (encoded already,
    /// `no-transform`, a type not compressed, too short, no body).
    Leave,
    /// Send it uncompressed but say `Vary: Accept-Encoding`: another request could have had
    /// it compressed (this one accepts no coding, is a HEAD, asks for a range, or is HTTP/1.0).
    Vary,
    /// Compress it with this coding.
    Encode(Coding),
}

/// The plan for a response with `status`, client-bound `headers` and `body_len` (when known),
/// to `request`, under `rules`. `can_stream`: the client's framing carries a body of a length
/// known only at its end (HTTP/1.1 chunked, HTTP/2 DATA frames); HTTP/1.0 clients are left
/// alone, as nginx's `gzip_http_version` does, since their compressed body could only end
/// with the connection.
pub fn plan(
    rules: &Compress,
    request: &RequestHead,
    status: StatusCode,
    headers: &HeaderMap,
    body_len: Option<u64>,
    can_stream: bool,
) -> Plan {
    if !compressible(rules, status, headers, body_len) {
        return Plan::Leave;
    }
    let as_is =
        request.method == Method::HEAD || !can_stream || request.headers.contains_key(RANGE);
    if as_is {
        return Plan::Vary;
    }
    let lines = request.headers.get_all(ACCEPT_ENCODING);
    match negotiate(lines.map(|v| v.as_bytes())) {
        Some(coding) => Plan::Encode(coding),
        None => Plan::Vary,
    }
}

/// The plan for a static file (a `root` route's `compress`) of `content_type` and `len`
/// bytes, answered whole (200): [`plan`]'s rules for a file, but a HEAD is planned as its GET
/// would be, since a file's HEAD gets the GET's head. A request with `Range` gets the
/// identity bytes (its range of them), with `Vary`.
pub fn plan_file(
    rules: &Compress,
    request: &RequestHead,
    content_type: &str,
    len: u64,
    can_stream: bool,
) -> Plan {
    let compressible =
        len > 0 && len >= rules.min_bytes && essence_matches(&rules.types, content_type.as_bytes());
    if !compressible {
        return Plan::Leave;
    }
    if !can_stream || request.headers.contains_key(RANGE) {
        return Plan::Vary;
    }
    let lines = request.headers.get_all(ACCEPT_ENCODING);
    match negotiate(lines.map(|v| v.as_bytes())) {
        Some(coding) => Plan::Encode(coding),
        None => Plan::Vary,
    }
}

/// Whether the response could be compressed for some request.
fn compressible(
    rules: &Compress,
    status: StatusCode,
    headers: &HeaderMap,
    len: Option<u64>,
) -> bool {
    // 206 is a part of the identity representation; 204, 304 and 1xx have no content.
    let no_content = status.is_informational()
        || matches!(
            status,
            StatusCode::NO_CONTENT | StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED
        );
    !no_content
        && !headers.contains_key(CONTENT_ENCODING)
        && !no_transform(headers)
        && len.is_none_or(|n| n > 0 && n >= rules.min_bytes)
        && type_matches(&rules.types, headers)
}

/// `Cache-Control: no-transform` (RFC 9111 §5.2.2.6): intermediaries must not change the
/// content, coding included.
fn no_transform(headers: &HeaderMap) -> bool {
    (headers.get_all(CACHE_CONTROL).iter())
        .flat_map(|line| line.as_bytes().split(|&b| b == b','))
        .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
}

/// Whether the response's media type (without parameters) is one of `types` (`type/*` covers
/// a whole type). A response without `Content-Type`, or with two, is not compressed: its type
/// is unknown.
fn type_matches(types: &[String], headers: &HeaderMap) -> bool {
    let mut lines = headers.get_all(CONTENT_TYPE).iter();
    let (Some(value), None) = (lines.next(), lines.next()) else {
        return false;
    };
    essence_matches(types, value.as_bytes())
}

/// Whether a `Content-Type` value's media type (without parameters) is one of `types`.
fn essence_matches(types: &[String], value: &[u8]) -> bool {
    let essence = value.split(|&b| b == b';').next().unwrap_or(b"");
    let essence = essence.trim_ascii();
    types.iter().any(|t| match t.strip_suffix('*') {
        Some(prefix) => {
            essence.len() > prefix.len()
                && essence[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
        }
        None => essence.eq_ignore_ascii_case(t.as_bytes()),
    })
}

/// The coding an `Accept-Encoding` value (all its lines) prefers among those Squall makes
/// (see the module documentation); `None` when it accepts none of them, or is absent.
/// Linear in the value's length, without allocating: a value of a thousand codings costs one
/// pass over its bytes.
pub fn negotiate<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Option<Coding> {
    let weights = Weights::of(lines);
    let mut best: Option<(Coding, u16)> = None;
    for coding in Coding::PREFERENCE {
        if let Some(weight) = weights.get(coding)
            && best.is_none_or(|(_, w)| weight > w)
        {
            best = Some((coding, weight));
        }
    }
    best.map(|(coding, _)| coding)
}

/// What an `Accept-Encoding` value says of each coding Squall knows: its weight, or that it
/// is not acceptable (listed with `q=0`, or neither listed nor covered by `*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weights {
    /// Per coding in `Coding::PREFERENCE` order, in thousandths; 0 when not acceptable.
    weights: [u16; Coding::PREFERENCE.len()],
}

impl Weights {
    /// Reads every line of the value in one pass (the rules of [`negotiate`]).
    pub fn of<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Weights {
        // Per coding, and for `*`: the highest weight listed, in thousandths, or `REFUSED`
        // once listed with q=0.
        const UNLISTED: i32 = -1;
        const REFUSED: i32 = -2;
        let mut listed = [UNLISTED; Coding::PREFERENCE.len()];
        let mut star = UNLISTED;
        for member in lines.flat_map(|l| l.split(|&b| b == b',')) {
            let mut parts = member.split(|&b| b == b';');
            let name = parts.next().unwrap_or_default().trim_ascii();
            if name.is_empty() {
                continue;
            }
            let Some(weight) = weight(parts) else {
                continue;
            };
            let slot = if name == b"*" {
                &mut star
            } else if let Some(coding) = Coding::from_token(name) {
                &mut listed[coding as usize]
            } else {
                continue;
            };
            *slot = match (*slot, weight) {
                (REFUSED, _) | (_, 0) => REFUSED,
                (old, new) => old.max(i32::from(new)),
            };
        }
        let weights = listed.map(|w| {
            let w = if w == UNLISTED { star } else { w };
            u16::try_from(w.max(0)).unwrap_or(0)
        });
        Weights { weights }
    }

    /// The weight of `coding` in thousandths (1 to 1000), or `None` when it is not acceptable.
    pub fn get(&self, coding: Coding) -> Option<u16> {
        Some(self.weights[coding as usize]).filter(|&w| w > 0)
    }

    /// The acceptable codings among `offered`, the heaviest first; ties keep `offered`'s
    /// order (a `root` route's `precompressed` list).
    pub fn rank(&self, offered: &[Coding]) -> Vec<Coding> {
        let mut ranked: Vec<Coding> = (offered.iter().copied())
            .filter(|&c| self.get(c).is_some())
            .collect();
        ranked.sort_by_key(|&c| std::cmp::Reverse(self.get(c)));
        ranked
    }
}

/// A member's weight in thousandths (RFC 9110 §12.4.2; no `q` is 1000, the last `q` counts);
/// `None` for a weight that is not a qvalue.
fn weight<'a>(params: impl Iterator<Item = &'a [u8]>) -> Option<u16> {
    let mut weight = 1000;
    for param in params {
        let param = param.trim_ascii();
        let Some(value) = param
            .strip_prefix(b"q=")
            .or_else(|| param.strip_prefix(b"Q="))
        else {
            continue;
        };
        weight = qvalue(value)?;
    }
    Some(weight)
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in thousandths.
fn qvalue(value: &[u8]) -> Option<u16> {
    let (whole, fraction) = match value {
        [w, b'.', rest @ ..] => (*w, rest),
        [w] => (*w, &[][..]),
        _ => return None,
    };
    if fraction.len() > 3 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + fraction.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match whole {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Edits the client-bound `headers` of a response planned as `plan`: `Vary: Accept-Encoding`
/// for [`Plan::Vary`] and [`Plan::Encode`]; for `Encode` also `Content-Encoding`, no
/// `Content-Length` (the compressed length is known only at the end), no `Accept-Ranges`
/// (ranges of the stream would not be ranges of the identity bytes an origin serves), and a
/// strong `ETag` made weak (RFC 9110 §8.8.1: the compressed bytes are another representation,
/// equivalent but not byte-equal).
pub fn edit_headers(headers: &mut HeaderMap, plan: Plan) {
    if plan == Plan::Leave {
        return;
    }
    add_vary(headers);
    let Plan::Encode(coding) = plan else {
        return;
    };
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
    headers.remove(CONTENT_LENGTH);
    headers.remove(ACCEPT_RANGES);
    if let Some(etag) = headers.get(ETAG)
        && etag.as_bytes().first() == Some(&b'"')
    {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(etag.as_bytes());
        if let Ok(weak) = HeaderValue::from_bytes(&weak) {
            headers.insert(ETAG, weak);
        }
    }
}

/// Adds `Accept-Encoding` to the response's Vary unless it is there already (or Vary is `*`).
fn add_vary(headers: &mut HeaderMap) {
    let present = (headers.get_all(VARY).iter())
        .flat_map(|line| line.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .any(|m| m == b"*" || m.eq_ignore_ascii_case(b"accept-encoding"));
    if !present {
        headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(value: &str) -> Option<Coding> {
        negotiate(std::iter::once(value.as_bytes()))
    }

    #[test]
    fn weights_decide_and_ties_prefer_br_then_zstd_then_gzip() {
        use Coding::*;
        let cases = [
            ("gzip", Some(Gzip)),
            ("gzip, deflate, br", Some(Brotli)),
            ("gzip, deflate, br, zstd", Some(Brotli)),
            ("gzip, zstd", Some(Zstd)),
            ("br;q=0.5, gzip", Some(Gzip)),
            ("br;q=0.5, gzip;q=0.4", Some(Brotli)),
            ("br;q=0.001, gzip;q=0", Some(Brotli)),
            ("BR;Q=1.0, GZip", Some(Brotli)),
            ("x-gzip", Some(Gzip)),
            ("*", Some(Brotli)),
            ("*;q=0.5, br;q=0.2", Some(Zstd)),
            ("gzip;q=0, *", Some(Brotli)),
            ("br;q=0, zstd;q=0, *;q=0.1", Some(Gzip)),
            ("br;q=0, zstd;q=0, gzip;q=0, *", None),
            ("br, br;q=0", None),
            ("br;q=0, br", None),
            ("*;q=0, gzip", Some(Gzip)),
            ("identity", None),
            ("identity;q=0", None),
            ("deflate, compress", None),
            ("", None),
            (" , ,gzip ,", Some(Gzip)),
            ("gzip;q=2, br;q=0.9x", None),
            ("gzip;q=1.001", None),
            ("gzip;q=.5", None),
            ("gzip;q=0.5;q=0, br;q=0.1", Some(Brotli)),
            ("gzip;level=9", Some(Gzip)),
            ("gzip; q=0.8, zstd ; q=0.8", Some(Zstd)),
        ];
        for (value, expected) in cases {
            assert_eq!(pick(value), expected, "{value:?}");
        }
        assert_eq!(negotiate(std::iter::empty()), None);
        let lines: [&[u8]; 2] = [b"gzip;q=0.5", b"br;q=0.6"];
        assert_eq!(negotiate(lines.into_iter()), Some(Brotli), "across lines");
    }

    #[test]
    fn weights_rank_the_offered_codings_ties_in_the_offered_order() {
        use Coding::*;
        let rank = |value: &str, offered: &[Coding]| {
            Weights::of(std::iter::once(value.as_bytes())).rank(offered)
        };
        assert_eq!(
            rank("gzip, br, zstd", &[Gzip, Zstd, Brotli]),
            [Gzip, Zstd, Brotli]
        );
        assert_eq!(
            rank("gzip;q=0.2, br;q=0.9, zstd;q=0.5", &[Gzip, Zstd, Brotli]),
            [Brotli, Zstd, Gzip]
        );
        assert_eq!(rank("*;q=0.5, gzip", &[Brotli, Gzip]), [Gzip, Brotli]);
        assert_eq!(rank("*, br;q=0", &[Brotli, Gzip]), [Gzip]);
        assert_eq!(rank("gzip", &[Brotli, Zstd]), []);
        assert_eq!(rank("", &[Brotli, Zstd, Gzip]), []);
        let weights = Weights::of(std::iter::once(&b"br;q=0.25, gzip;q=0"[..]));
        assert_eq!(
            (weights.get(Brotli), weights.get(Gzip), weights.get(Zstd)),
            (Some(250), None, None)
        );
    }

    #[test]
    fn a_file_is_planned_by_its_type_and_length_and_its_head_as_its_get() {
        let rules = Compress::default();
        let html = "text/html; charset=utf-8";
        let gzip = [("accept-encoding", "gzip")];
        let encode = Plan::Encode(Coding::Gzip);
        let get = head(Method::GET, &gzip);
        assert_eq!(plan_file(&rules, &get, html, 256, true), encode);
        assert_eq!(
            plan_file(&rules, &head(Method::HEAD, &gzip), html, 256, true),
            encode
        );
        assert_eq!(plan_file(&rules, &get, html, 255, true), Plan::Leave);
        assert_eq!(
            plan_file(&rules, &get, "image/png", 9000, true),
            Plan::Leave
        );
        assert_eq!(plan_file(&rules, &get, html, 9000, false), Plan::Vary);
        let ranged = head(
            Method::GET,
            &[("accept-encoding", "gzip"), ("range", "bytes=0-1")],
        );
        assert_eq!(plan_file(&rules, &ranged, html, 9000, true), Plan::Vary);
        let refused = head(Method::GET, &[("accept-encoding", "gzip;q=0, identity")]);
        assert_eq!(plan_file(&rules, &refused, html, 9000, true), Plan::Vary);
    }

    #[test]
    fn qvalues_are_read_to_the_thousandth() {
        assert_eq!(qvalue(b"0"), Some(0));
        assert_eq!(qvalue(b"0."), Some(0));
        assert_eq!(qvalue(b"0.5"), Some(500));
        assert_eq!(qvalue(b"0.125"), Some(125));
        assert_eq!(qvalue(b"1"), Some(1000));
        assert_eq!(qvalue(b"1.000"), Some(1000));
        for bad in [&b"1.5"[..], b"0.1234", b"2", b"", b"0.a", b"-1", b"01"] {
            assert_eq!(qvalue(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_thousand_codings_are_read_in_one_pass() {
        let mut value = String::new();
        for i in 0..1000 {
            value.push_str(&format!("c{i};q=0.{}, ", i % 10));
        }
        value.push_str("gzip;q=0.3");
        assert_eq!(pick(&value), Some(Coding::Gzip));
        let refused = format!("{value}, gzip;q=0");
        assert_eq!(pick(&refused), None);
    }

    fn head(method: Method, pairs: &[(&'static str, &'static str)]) -> RequestHead {
        let mut headers = HeaderMap::new();
        for (n, v) in pairs {
            headers.append(*n, HeaderValue::from_static(v));
        }
        RequestHead {
            method,
            uri: http::Uri::from_static("/"),
            received_target: None,
            version: http::Version::HTTP_11,
            headers: squall_h1::Fields::from_header_map(&headers),
            keep_alive: true,
            expect_continue: false,
            body: squall_h1::BodyKind::Empty,
        }
    }

    fn response(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (n, v) in pairs {
            headers.append(*n, HeaderValue::from_static(v));
        }
        headers
    }

    #[test]
    fn plans_follow_the_response_and_the_request() {
        let rules = Compress::default();
        let get = head(Method::GET, &[("accept-encoding", "gzip")]);
        let html = response(&[("content-type", "text/html; charset=utf-8")]);
        let ok = StatusCode::OK;
        let gzip = Plan::Encode(Coding::Gzip);
        assert_eq!(plan(&rules, &get, ok, &html, None, true), gzip);
        assert_eq!(plan(&rules, &get, ok, &html, Some(256), true), gzip);
        assert_eq!(plan(&rules, &get, ok, &html, Some(255), true), Plan::Leave);
        assert_eq!(plan(&rules, &get, ok, &html, Some(0), true), Plan::Leave);
        let not_found = StatusCode::NOT_FOUND;
        assert_eq!(plan(&rules, &get, not_found, &html, None, true), gzip);
        for status in [204, 206, 304, 103] {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(plan(&rules, &get, status, &html, None, true), Plan::Leave);
        }
        let leave = [
            response(&[("content-type", "text/html"), ("content-encoding", "br")]),
            response(&[
                ("content-type", "text/html"),
                ("cache-control", "max-age=1, No-Transform"),
            ]),
            response(&[("content-type", "image/png")]),
            response(&[("content-type", "text/htmlx")]),
            response(&[("content-type", "text/html"), ("content-type", "image/png")]),
            response(&[]),
        ];
        for headers in &leave {
            assert_eq!(
                plan(&rules, &get, ok, headers, None, true),
                Plan::Leave,
                "{headers:?}"
            );
        }
        let star = Compress {
            types: vec!["text/*".into()],
            ..Compress::default()
        };
        let csv = response(&[("content-type", "TEXT/CSV")]);
        assert_eq!(plan(&star, &get, ok, &csv, None, true), gzip);
        let vary = [
            head(Method::HEAD, &[("accept-encoding", "gzip")]),
            head(
                Method::GET,
                &[("accept-encoding", "gzip"), ("range", "bytes=0-1")],
            ),
            head(Method::GET, &[("accept-encoding", "identity")]),
            head(Method::GET, &[]),
        ];
        for request in &vary {
            assert_eq!(
                plan(&rules, request, ok, &html, None, true),
                Plan::Vary,
                "{request:?}"
            );
        }
        assert_eq!(plan(&rules, &get, ok, &html, None, false), Plan::Vary);
    }

    #[test]
    fn encoded_heads_vary_and_carry_a_weak_etag() {
        let mut headers = response(&[
            ("vary", "Origin"),
            ("etag", "\"v1\""),
            ("content-length", "1000"),
            ("accept-ranges", "bytes"),
        ]);
        edit_headers(&mut headers, Plan::Encode(Coding::Brotli));
        let vary: Vec<_> = headers.get_all(VARY).iter().collect();
        assert_eq!(vary, ["Origin", "Accept-Encoding"]);
        assert_eq!(headers[ETAG], "W/\"v1\"");
        assert_eq!(headers[CONTENT_ENCODING], "br");
        assert!(!headers.contains_key(CONTENT_LENGTH));
        assert!(!headers.contains_key(ACCEPT_RANGES));
        let mut weak = response(&[("etag", "W/\"v1\""), ("vary", "accept-encoding")]);
        edit_headers(&mut weak, Plan::Encode(Coding::Gzip));
        assert_eq!(weak[ETAG], "W/\"v1\"");
        assert_eq!(weak.get_all(VARY).iter().count(), 1);
        let mut star = response(&[("vary", "*"), ("content-length", "5")]);
        edit_headers(&mut star, Plan::Vary);
        assert_eq!(star.get_all(VARY).iter().count(), 1);
        assert_eq!(star[CONTENT_LENGTH], "5", "Vary alone keeps the length");
        let mut left = response(&[("content-length", "5")]);
        edit_headers(&mut left, Plan::Leave);
        assert_eq!(left, response(&[("content-length", "5")]));
    }
}
