//! Turning HTTP/2 requests into heads: targets, hosts, framing, extended CONNECT.

use super::*;
use crate::worker::tunnel::is_stream_upgrade;

fn request(authority: Option<&'static str>, path: &'static str, end_stream: bool) -> Request {
    Request {
        method: Method::GET,
        scheme: Bytes::from_static(b"https"),
        authority: authority.map(|a| Bytes::from_static(a.as_bytes())),
        path: Bytes::from_static(path.as_bytes()),
        headers: squall_h2::HeaderFields::default(),
        content_length: None,
        end_stream,
        protocol: None,
    }
}

#[test]
fn request_head_has_host_target_and_framing() {
    let head = request_head(request(Some("ex.test:8443"), "/a?b=1", true)).unwrap();
    assert_eq!(head.host(), Some("ex.test"));
    assert_eq!(head.uri.path(), "/a");
    assert_eq!(head.uri.query(), Some("b=1"));
    assert_eq!(
        head.headers.get(http::header::HOST).unwrap(),
        "ex.test:8443"
    );
    assert_eq!(head.body, BodyKind::Empty);
    assert_eq!(head.version, Version::HTTP_2);

    let head = request_head(request(None, "/x", false)).unwrap();
    assert_eq!(head.host(), None);
    assert_eq!(head.body, BodyKind::Chunked);
    let mut with_length = request(Some("a"), "/", false);
    with_length.content_length = Some(5);
    assert_eq!(request_head(with_length).unwrap().body, BodyKind::Length(5));
}

#[test]
fn request_head_refuses_a_target_or_authority_it_cannot_hold() {
    assert!(request_head(request(Some("a\u{7f}b"), "/", true)).is_none());
    assert!(request_head(request(Some("a"), "/\u{7f}", true)).is_none());
    // A `:path` that cannot be normalised: above the root, NUL, a bad escape.
    for path in ["/..", "/a/%2e%2e/..", "/a%00", "/%zz", "/%C0%AE"] {
        assert!(
            request_head(request(Some("a"), path, true)).is_none(),
            "{path}"
        );
    }
}

/// `:path` is normalised as an HTTP/1.1 target is, the received one kept beside it.
#[test]
fn request_head_normalises_the_path() {
    let head = request_head(request(Some("a"), "//x/./%79/../z?q=%2e", true)).unwrap();
    assert_eq!(head.uri, "/x/z?q=%2e");
    assert_eq!(head.request_uri(), b"//x/./%79/../z?q=%2e");
    let head = request_head(request(Some("a"), "/x/z", true)).unwrap();
    assert_eq!(head.received_target, None);
    let head = request_head(request(Some("a"), "*", true)).unwrap();
    assert_eq!(head.uri, "*");
}

#[test]
fn an_extended_connect_becomes_an_http1_upgrade_with_a_fresh_key() {
    let mut connect = request(Some("o.test"), "/chat", false);
    connect.method = Method::CONNECT;
    connect.protocol = Some(Bytes::from_static(b"websocket"));
    let head = request_head(connect.clone()).unwrap();
    assert_eq!(head.method, Method::GET);
    assert_eq!(head.body, BodyKind::Empty, "its DATA is the tunnel's");
    assert_eq!(
        head.headers.get(http::header::UPGRADE).unwrap(),
        "websocket"
    );
    assert_eq!(
        head.headers.get(http::header::CONNECTION).unwrap(),
        "upgrade"
    );
    assert!(is_stream_upgrade(&head));
    let key = head.headers.get(http::header::SEC_WEBSOCKET_KEY).unwrap();
    assert_eq!(key.as_bytes().len(), 24, "16 bytes, base64");
    let again = request_head(connect).unwrap();
    let other = again.headers.get(http::header::SEC_WEBSOCKET_KEY).unwrap();
    assert_ne!(key.as_bytes(), other.as_bytes(), "a fresh key each time");
    let plain = request_head(request(Some("o.test"), "/", true)).unwrap();
    assert!(!is_stream_upgrade(&plain));
}
