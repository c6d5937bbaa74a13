//! The service against requests decoded by the real codec, asserting the bytes it writes.

use super::*;
use bytes::BytesMut;
use squall_h1::{Event, Limits, RequestDecoder};

const DATE: &[u8] = b"Mon, 30 Nov 2026 00:00:00 GMT";

const CONFIG: &str = r#"
[[listen]]
address = "127.0.0.1:8080"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = { status = 200, body = "Hello, world!", headers = { "content-type" = "text/html" } }

[[vhost.route]]
exact = "/only-post"
methods = ["POST"]
respond = { status = 201, body = "posted" }

[[vhost.route]]
prefix = "/old/"
redirect = { status = 301, location = "https://$host$request_uri" }

[[vhost.route]]
prefix = "/same/"
redirect = { status = 302, location = "$scheme://$host$uri" }

[[vhost.route]]
prefix = "/admin/"
block = 403

[[vhost.route]]
prefix = "/app/"
proxy = "app"

[[upstream]]
name = "app"
servers = [{ address = "127.0.0.1:9000" }]
"#;

fn service() -> Service {
    let config = squall_config::parse(CONFIG, "test.toml").expect("test config is valid");
    Service::new(&config).expect("routes compile")
}

pub(crate) fn head(raw: &str) -> RequestHead {
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut buf = BytesMut::from(raw.as_bytes());
    match decoder.decode(&mut buf) {
        Ok(Some(Event::Head(head))) => head,
        other => panic!("not a request head: {other:?}"),
    }
}

fn respond(raw: &str, close: bool) -> (Outcome, String) {
    let mut out = BytesMut::new();
    let outcome = service().respond(&head(raw), "http", DATE, close, &mut out);
    (outcome, String::from_utf8(out.to_vec()).unwrap())
}

#[test]
fn respond_route_answers_its_body_and_headers() {
    let (outcome, text) = respond("GET / HTTP/1.1\r\nHost: a\r\n\r\n", false);
    assert_eq!(
        outcome,
        Outcome {
            status: StatusCode::OK,
            keep_alive: true,
            route: Some(0),
        }
    );
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("\r\ncontent-type: text/html\r\n"), "{text}");
    assert!(
        !text.contains("text/plain"),
        "configured type replaces the default: {text}"
    );
    assert!(text.contains("\r\nserver: squall\r\n"), "{text}");
    assert!(
        text.to_lowercase().contains("\r\ncontent-length: 13\r\n"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\nHello, world!"), "{text}");
}

#[test]
fn head_request_gets_headers_without_body() {
    let (_, text) = respond("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", false);
    assert!(
        text.to_lowercase().contains("content-length: 13\r\n"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\n"), "{text}");
}

#[test]
fn unmatched_path_gets_the_default_404() {
    let (outcome, text) = respond("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n", false);
    assert_eq!(outcome.status, StatusCode::NOT_FOUND);
    assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
    assert!(text.ends_with("404 Not Found\n"), "{text}");
}

#[test]
fn method_condition_falls_through_to_404() {
    let (outcome, _) = respond("GET /only-post HTTP/1.1\r\nHost: a\r\n\r\n", false);
    assert_eq!(outcome.status, StatusCode::NOT_FOUND);
    let post = "POST /only-post HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
    let (outcome, _) = respond(post, false);
    assert_eq!(outcome.status, StatusCode::CREATED);
}

#[test]
fn redirect_expands_host_and_request_uri() {
    let (outcome, text) = respond(
        "GET /old/x?y=1 HTTP/1.1\r\nHost: ex.test:8080\r\n\r\n",
        false,
    );
    assert_eq!(outcome.status, StatusCode::MOVED_PERMANENTLY);
    assert!(
        text.contains("\r\nlocation: https://ex.test/old/x?y=1\r\n"),
        "{text}"
    );
}

#[test]
fn block_route_answers_its_status() {
    let (outcome, text) = respond("GET /admin/x HTTP/1.1\r\nHost: a\r\n\r\n", false);
    assert_eq!(outcome.status, StatusCode::FORBIDDEN);
    assert!(text.ends_with("403 Forbidden\n"), "{text}");
}

#[test]
fn proxy_routes_name_their_upstream_and_local_ones_do_not() {
    let service = service();
    let route = service.proxy_route(&head("GET /app/x HTTP/1.1\r\nHost: a\r\n\r\n"));
    assert_eq!(route.map(|r| r.upstream), Some(0));
    assert!(
        service
            .proxy_route(&head("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
            .is_none()
    );
}

#[test]
fn close_and_http10_end_the_connection() {
    let (outcome, text) = respond("GET / HTTP/1.1\r\nHost: a\r\n\r\n", true);
    assert!(!outcome.keep_alive);
    assert!(
        text.to_lowercase().contains("\r\nconnection: close\r\n"),
        "{text}"
    );
    let (outcome, _) = respond("GET / HTTP/1.0\r\n\r\n", false);
    assert!(!outcome.keep_alive);
    let (outcome, text) = respond("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false);
    assert!(outcome.keep_alive);
    assert!(
        text.to_lowercase()
            .contains("\r\nconnection: keep-alive\r\n"),
        "{text}"
    );
}

#[test]
fn location_variables_parse() {
    use handler::LocationPart::*;
    assert_eq!(
        handler::parse_location("https://$host$request_uri"),
        vec![Literal("https://".into()), Host, RequestUri]
    );
    assert_eq!(
        handler::parse_location("$scheme://x$uri?a=$"),
        vec![Scheme, Literal("://x".into()), Uri, Literal("?a=$".into())]
    );
}

/// The config accepts exactly the variables this crate expands: the two lists must not drift.
#[test]
fn every_redirect_variable_the_config_accepts_is_expanded() {
    for name in squall_config::REDIRECT_VARIABLES {
        let parts = handler::parse_location(&format!("${name}"));
        assert_eq!(parts.len(), 1, "${name}");
        assert!(
            !matches!(parts[0], handler::LocationPart::Literal(_)),
            "${name} is not expanded"
        );
    }
}

/// Routes are numbered in file order across vhosts; the default 404 has no number.
#[test]
fn routes_have_ids_and_labels() {
    let service = service();
    let (route, _) = service.route(&head("GET /admin/x HTTP/1.1\r\nHost: a\r\n\r\n"));
    let route = route.unwrap();
    let label = &service.route_labels()[route.id as usize];
    assert_eq!(label, "* prefix:/admin/");
    assert_eq!(&route.label, label);
    assert!(std::ptr::eq(service.route_by_id(route.id).unwrap(), route));
    let nope = service.route(&head("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"));
    assert!(nope.0.is_none());
    let proxied = service.proxy_route(&head("GET /app/x HTTP/1.1\r\nHost: a\r\n\r\n"));
    assert_eq!(
        service.route_labels()[proxied.unwrap().id as usize],
        "* prefix:/app/"
    );
}

#[test]
fn scheme_variable_follows_the_listener() {
    let service = service();
    let request = head("GET /same/p?q HTTP/1.1\r\nHost: ex.test\r\n\r\n");
    for scheme in ["http", "https"] {
        let mut out = BytesMut::new();
        service.respond(&request, scheme, DATE, false, &mut out);
        let text = String::from_utf8(out.to_vec()).unwrap();
        let expected = format!("\r\nlocation: {scheme}://ex.test/same/p\r\n");
        assert!(text.contains(&expected), "{text}");
    }
}

/// `reply` (HTTP/2) and `respond` (HTTP/1.x) give the same status, fields and body.
#[test]
fn reply_matches_respond_for_every_kind_of_route() {
    let service = service();
    // Each request, and whether its answer is fixed (`respond`, `block`, the default 404) and
    // so pre-encoded for HPACK; a redirect's Location and the 502 are not.
    for (raw, fixed) in [
        ("GET / HTTP/1.1\r\nHost: a\r\n\r\n", true),
        ("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n", true),
        ("GET /old/x?y=1 HTTP/1.1\r\nHost: ex.test\r\n\r\n", false),
        ("GET /admin/x HTTP/1.1\r\nHost: a\r\n\r\n", true),
        ("GET /app/x HTTP/1.1\r\nHost: a\r\n\r\n", false),
    ] {
        let request = head(raw);
        let mut out = BytesMut::new();
        let outcome = service.respond(&request, "https", DATE, false, &mut out);
        let text = String::from_utf8(out.to_vec()).unwrap();
        let reply = service.route(&request).1.reply(&request, "https");
        assert_eq!(reply.status, outcome.status, "{raw}");
        let body = std::str::from_utf8(&reply.body).unwrap();
        assert!(text.ends_with(body), "{raw}: {text} vs {body}");
        for (name, value) in reply.fields.iter() {
            let line = format!(
                "\r\n{}: {}\r\n",
                std::str::from_utf8(name).unwrap(),
                std::str::from_utf8(value).unwrap()
            );
            assert!(text.contains(&line), "{raw}: {line:?} missing in {text}");
        }
        // The pre-encoded HPACK fragment says the same, plus the content-length. A fixed
        // answer must have one, so the comparison below cannot be skipped for it.
        assert_eq!(reply.hpack.is_some(), fixed, "{raw:?}: pre-encoded HPACK");
        if let Some(hpack) = &reply.hpack {
            let decoded = squall_hpack::Decoder::new(4096)
                .decode_to_vec(hpack, 1 << 16)
                .expect("a valid fragment");
            let mut expected: Vec<(Vec<u8>, Vec<u8>)> = (reply.fields.iter())
                .map(|(n, v)| (n.to_vec(), v.to_vec()))
                .collect();
            expected.push((
                b"content-length".to_vec(),
                body.len().to_string().into_bytes(),
            ));
            let decoded: Vec<(Vec<u8>, Vec<u8>)> = (decoded.into_iter())
                .map(|f| (f.name.to_vec(), f.value.to_vec()))
                .collect();
            assert_eq!(decoded, expected, "{raw}");
        }
    }
}

#[test]
fn header_templates_expand_per_request_and_ids_are_32_hex_digits() {
    use crate::forward::{Peer, expand, request_id_hex};
    let request = head("GET /a/b?q=1 HTTP/1.1\r\nHost: Shop.Test:8080\r\n\r\n");
    let peer = Peer {
        addr: Some("10.0.0.1:5000".parse().unwrap()),
        tls: true,
        client: Some("[2001:db8::7]:443".parse().unwrap()),
        request_id: 0xabc,
    };
    let template =
        squall_config::parse_template("$remote_addr|$request_id|$host|$scheme|$request_uri")
            .unwrap()
            .unwrap();
    let value = expand(&template, &request, peer).unwrap();
    assert_eq!(
        value.to_str().unwrap(),
        "2001:db8::7|00000000000000000000000000000abc|shop.test|https|/a/b?q=1"
    );
    // No client address (a Unix socket): the variable is empty.
    let unknown = Peer {
        client: None,
        ..peer
    };
    let template = squall_config::parse_template("[$remote_addr]")
        .unwrap()
        .unwrap();
    assert_eq!(expand(&template, &request, unknown).unwrap(), "[]");
    assert_eq!(
        &request_id_hex(u128::MAX),
        b"ffffffffffffffffffffffffffffffff"
    );
    assert_eq!(
        &request_id_hex(1 << 124),
        b"10000000000000000000000000000000"
    );
}
