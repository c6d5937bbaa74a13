//! The Host an origin is asked for: a route's `request_headers = { set = { host = ".." } }`
//! replaces the client's, as nginx's `proxy_set_header Host` does, for HTTP/1.1 origins (the
//! Host field, once) and HTTP/2 origins (`:authority`, and no Host field), from HTTP/1.1 and
//! HTTP/2 clients alike; a value may name `$host`; a route without it passes the client's.

use std::net::SocketAddr;

use bytes::Bytes;
use squall_e2e::{Squall, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// An HTTP/1.1 origin that answers with every Host line it received, `|` between them.
fn h1_origin() -> SocketAddr {
    origin::raw_origin(|head| {
        let hosts: Vec<&str> = (head.lines().skip(1))
            .filter_map(|line| line.split_once(':'))
            .filter(|(name, _)| name.eq_ignore_ascii_case("host"))
            .map(|(_, value)| value.trim())
            .collect();
        origin::response("200 OK", &[], hosts.join("|").as_bytes())
    })
}

/// An HTTP/2 origin (the `h2` crate, cleartext) that answers with the `:authority` it
/// received, then its Host fields if any: `authority=A host=H|H`.
fn h2c_origin() -> SocketAddr {
    origin::tokio_origin_on("127.0.0.1:0", 1, |tcp| async move {
        let Ok(mut conn) = h2::server::Builder::new().handshake::<_, Bytes>(tcp).await else {
            return;
        };
        while let Some(Ok((request, mut respond))) = conn.accept().await {
            let authority = request.uri().authority().map_or("-", |a| a.as_str());
            let hosts: Vec<&str> = (request.headers().get_all("host").iter())
                .map(|v| v.to_str().unwrap_or("?"))
                .collect();
            let text = format!("authority={authority} host={}", hosts.join("|"));
            let response = http::Response::builder().status(200).body(()).unwrap();
            if let Ok(mut send) = respond.send_response(response, false) {
                let _ = send.send_data(Bytes::from(text), true);
            }
        }
    })
}

/// Routes `/{edit}/{upstream}/` for each Host edit (`set`: a fixed name, `var`: one with
/// `$host`, `none`) and each upstream (`one`: HTTP/1.1, `two`: h2c).
fn config(one: SocketAddr, two: SocketAddr) -> String {
    let edits = [
        (
            "set",
            r#"request_headers = { set = { "Host" = "origin.internal" } }"#,
        ),
        (
            "var",
            r#"request_headers = { set = { "host" = "$host.backend" } }"#,
        ),
        ("none", ""),
    ];
    let mut routes = String::new();
    for (edit, line) in edits {
        for upstream in ["one", "two"] {
            routes.push_str(&format!(
                "[[vhost.route]]\nprefix = \"/{edit}/{upstream}/\"\nproxy = \"{upstream}\"\n{line}\n\n"
            ));
        }
    }
    format!(
        "[server]\nworkers = 1\n\n[[listen]]\naddress = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]\n\n\
         [[upstream]]\nname = \"one\"\nservers = [{{ address = \"{one}\" }}]\n\n\
         [[upstream]]\nname = \"two\"\nservers = [{{ address = \"{two}\" }}]\nprotocol = \"h2c\"\n\n\
         [[vhost]]\nhosts = [\"*\"]\n\n{routes}"
    )
}

/// What each origin reports for each edit, the client's Host being `Client.Test:8080`.
const EXPECTED: [(&str, &str, &str); 6] = [
    ("set", "one", "origin.internal"),
    ("set", "two", "authority=origin.internal host="),
    // `$host` is the client's host, lowercase and without its port, as nginx's.
    ("var", "one", "client.test.backend"),
    ("var", "two", "authority=client.test.backend host="),
    ("none", "one", "Client.Test:8080"),
    ("none", "two", "authority=Client.Test:8080 host="),
];

#[tokio::test]
async fn a_routes_host_reaches_http1_and_http2_origins_from_both_kinds_of_client() {
    let squall = Squall::start(&config(h1_origin(), h2c_origin()));
    let h2 = h2_client::h2c(squall.addr).await;
    for (edit, upstream, want) in EXPECTED {
        let path = format!("/{edit}/{upstream}/x");
        let mut stream = squall.connect();
        let request = format!("GET {path} HTTP/1.1\r\nHost: Client.Test:8080\r\n\r\n");
        let h1 = roundtrip(&mut stream, &request);
        assert_eq!(
            (h1.status, h1.body_text().as_str()),
            (200, want),
            "HTTP/1.1 client, {path}"
        );
        let url = format!("http://Client.Test:8080{path}");
        let reply = h2_client::fetch(&h2, "GET", &url, None).await;
        let body = String::from_utf8(reply.body).unwrap();
        assert_eq!(
            (reply.status, body.as_str()),
            (200, want),
            "HTTP/2 client, {path}"
        );
    }
}
