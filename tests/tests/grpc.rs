//! gRPC end to end: a tonic client calls a tonic server (h2c, an `[[upstream]]` with
//! `protocol = "h2c"`) through Squall, and every part of the call crosses unchanged: request
//! metadata and `te: trailers`, the response message, `grpc-status` and custom trailing metadata,
//! an error status with its message, a bidirectional stream whose messages flow one by one (not
//! buffered until the end), 4 MiB messages both ways, 50 calls at once on one channel, and a
//! call over TLS with ALPN `h2`. A gRPC
//! call on a route whose upstream is spoken to in HTTP/1.1 is answered at once with a 502 that
//! tonic reads as `Unavailable`, and never reaches that origin.
//!
//! There is no `.proto` file and no code generation: the message is a hand-written
//! `prost::Message`, and the service and client glue below is what `tonic-build` would generate
//! for
//!
//! ```proto
//! package squall.test;
//! service Echo {
//!   rpc Unary(Msg) returns (Msg);               // echoes with seq + 1, the data reversed
//!   rpc Fail(Msg) returns (Msg);                // always NOT_FOUND
//!   rpc Chat(stream Msg) returns (stream Msg);  // echoes each message with a counter
//!   rpc Watch(Msg) returns (stream Msg);        // two messages, `seq` milliseconds apart
//! }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::uri::PathAndQuery;
use squall_e2e::{Squall, TempDir, admin_addr, admin_get};
use tokio::sync::mpsc;
use tonic::codec::{ProstCodec, Streaming};
use tonic::codegen::tokio_stream::Stream;
use tonic::codegen::{BoxFuture, Service};
use tonic::metadata::MetadataMap;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};

#[path = "support/grpc_echo.rs"]
mod grpc_echo;
#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

use grpc_echo::{Inbox, MESSAGE_BYTES_MAX, Msg, grpc_origin, msg};

/// How long any one test may take: a call the proxy loses fails the test instead of hanging it.
const TEST_TIMEOUT: Duration = Duration::from_secs(30);

// ---- The client: as tonic-build would generate it. ----

struct EchoClient {
    grpc: tonic::client::Grpc<Channel>,
}

impl EchoClient {
    /// A client on one h2c channel to `addr`.
    async fn connect(addr: SocketAddr) -> EchoClient {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .expect("connect to Squall");
        EchoClient::new(channel)
    }

    fn new(channel: Channel) -> EchoClient {
        let grpc = tonic::client::Grpc::new(channel)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        EchoClient { grpc }
    }

    async fn unary(
        &mut self,
        path: &'static str,
        msg: Request<Msg>,
    ) -> Result<Response<Msg>, Status> {
        self.ready().await?;
        let path = PathAndQuery::from_static(path);
        self.grpc.unary(msg, path, ProstCodec::default()).await
    }

    async fn chat(
        &mut self,
        messages: impl Stream<Item = Msg> + Send + 'static,
    ) -> Result<Response<Streaming<Msg>>, Status> {
        self.ready().await?;
        let path = PathAndQuery::from_static("/squall.test.Echo/Chat");
        (self.grpc)
            .streaming(Request::new(messages), path, ProstCodec::default())
            .await
    }

    /// `Watch` with a pause of `pause_ms` between its two messages.
    async fn watch(&mut self, pause_ms: u32) -> Result<Response<Streaming<Msg>>, Status> {
        self.ready().await?;
        let path = PathAndQuery::from_static("/squall.test.Echo/Watch");
        let request = Request::new(msg(pause_ms, vec![], ""));
        (self.grpc)
            .server_streaming(request, path, ProstCodec::default())
            .await
    }

    async fn ready(&mut self) -> Result<(), Status> {
        (self.grpc.ready().await).map_err(|e| Status::unknown(format!("not ready: {e}")))
    }
}

// ---- Squall between them. ----

/// Squall with an h2c listener, the admin port, `/squall.test.Legacy/` proxied to `legacy` (an
/// HTTP/1.1 upstream) and everything else to `origin` in h2c.
fn config(origin: SocketAddr, legacy: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 2

[admin]
listen = "127.0.0.2:0"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "grpc"
protocol = "h2c"
servers = [{{ address = "{origin}" }}]

[[upstream]]
name = "legacy"
servers = [{{ address = "{legacy}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/squall.test.Legacy/"
proxy = "legacy"

[[vhost.route]]
prefix = "/"
proxy = "grpc"
"#
    )
}

/// Squall between a fresh gRPC origin and a legacy HTTP/1.1 origin that counts the requests it
/// gets (and answers each with a plain 200).
fn start() -> (Squall, Arc<AtomicUsize>) {
    let legacy_requests = Arc::new(AtomicUsize::new(0));
    let counter = legacy_requests.clone();
    let legacy = origin::raw_origin(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        origin::response("200 OK", &["content-type: text/plain"], b"legacy")
    });
    let squall = Squall::start(&config(grpc_origin(), legacy));
    (squall, legacy_requests)
}

/// `len` bytes that differ with `seed`, so a message swapped for another is seen.
fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

fn metadata(response: &MetadataMap, key: &str) -> String {
    (response.get(key)).map_or("<none>".into(), |v| v.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn unary_call_keeps_metadata_message_and_trailers() {
    let (squall, _) = start();
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut client = EchoClient::connect(squall.addr).await;
        let mut request = Request::new(msg(7, b"hello".to_vec(), "ping"));
        request
            .metadata_mut()
            .insert("x-client-tag", "abc123".parse().unwrap());
        let response = (client.unary("/squall.test.Echo/Unary", request).await)
            .expect("the unary call succeeds");
        let (meta, reply, _) = response.into_parts();
        assert_eq!(
            reply,
            msg(8, b"olleh".to_vec(), "tag=abc123 te=trailers note=ping")
        );
        // tonic's unary client merges the trailers into the response's metadata.
        assert_eq!(metadata(&meta, "x-origin-header"), "yes");
        assert_eq!(metadata(&meta, "grpc-status"), "0");
        assert_eq!(metadata(&meta, "x-origin-trailer"), "unary");
        assert_eq!(metadata(&meta, "content-type"), "application/grpc");

        let status = (client.unary("/squall.test.Echo/Fail", Request::new(msg(1, vec![], ""))))
            .await
            .expect_err("Fail fails");
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
        assert_eq!(status.message(), "no such thing: x");
        assert_eq!(metadata(status.metadata(), "x-why"), "testing");
    })
    .await
    .expect("within the time limit");
}

/// 200 messages of 0 to 64 KiB each way on one call: the first 100 in lockstep (the client
/// sends message i + 1 only once reply i is back, which a proxy that buffered either direction
/// until its end could never satisfy), the rest sent back to back while replies are read.
#[tokio::test]
async fn bidirectional_stream_flows_message_by_message() {
    const MESSAGES: u32 = 200;
    const LOCKSTEP: u32 = 100;
    let (squall, _) = start();
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut client = EchoClient::connect(squall.addr).await;
        let size = |i: u32| (i as usize * 7_919) % (64 * 1024 + 1);
        let (outbox, inbox) = mpsc::channel(4);
        let response = client.chat(Inbox(inbox)).await.expect("the call starts");
        let mut replies = response.into_inner();
        let check = |reply: Option<Msg>, i: u32| {
            let reply = reply.unwrap_or_else(|| panic!("reply {i} missing"));
            assert_eq!(reply.seq, i + 1);
            assert_eq!(reply.note, i.to_string());
            assert!(reply.data == pattern(i, size(i)), "reply {i}'s data");
        };
        for i in 0..LOCKSTEP {
            outbox.send(msg(i, pattern(i, size(i)), "")).await.unwrap();
            let next = replies.message();
            let Ok(reply) = tokio::time::timeout(Duration::from_secs(5), next).await else {
                panic!("reply {i} did not come before the next message");
            };
            check(reply.expect("a reply"), i);
        }
        let sender = tokio::spawn(async move {
            for i in LOCKSTEP..MESSAGES {
                outbox.send(msg(i, pattern(i, size(i)), "")).await.unwrap();
            }
            // The outbox dropped here ends the request stream.
        });
        for i in LOCKSTEP..MESSAGES {
            check(replies.message().await.expect("a reply"), i);
        }
        sender.await.unwrap();
        assert!(replies.message().await.expect("a clean end").is_none());
        let trailers = replies
            .trailers()
            .await
            .expect("trailers")
            .expect("some trailers");
        assert_eq!(metadata(&trailers, "grpc-status"), "0");
        assert_eq!(metadata(&trailers, "x-count"), MESSAGES.to_string());
    })
    .await
    .expect("within the time limit");
}

#[tokio::test]
async fn large_messages_both_ways() {
    const BYTES: usize = 4 << 20;
    let (squall, _) = start();
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut client = EchoClient::connect(squall.addr).await;
        let data = pattern(3, BYTES);
        let request = Request::new(msg(41, data.clone(), "big"));
        let started = Instant::now();
        let response = (client.unary("/squall.test.Echo/Unary", request).await)
            .expect("the 4 MiB call succeeds");
        eprintln!("4 MiB each way through Squall in {:?}", started.elapsed());
        let (meta, reply, _) = response.into_parts();
        assert_eq!(reply.seq, 42);
        assert_eq!(reply.data.len(), BYTES);
        assert!(reply.data.iter().eq(data.iter().rev()), "the reversed data");
        assert_eq!(metadata(&meta, "grpc-status"), "0");
        assert_eq!(metadata(&meta, "x-origin-trailer"), "unary");
    })
    .await
    .expect("within the time limit");
}

#[tokio::test]
async fn fifty_concurrent_calls_on_one_channel() {
    const CALLS: u32 = 50;
    let (squall, _) = start();
    tokio::time::timeout(TEST_TIMEOUT, async {
        let channel = Endpoint::from_shared(format!("http://{}", squall.addr))
            .unwrap()
            .connect()
            .await
            .expect("connect to Squall");
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let mut client = EchoClient::new(channel.clone());
                tokio::spawn(async move {
                    let data = pattern(i, 1_000 + i as usize * 997);
                    let mut request = Request::new(msg(i * 10, data.clone(), ""));
                    let tag = format!("call-{i}").parse().unwrap();
                    request.metadata_mut().insert("x-client-tag", tag);
                    let response = client.unary("/squall.test.Echo/Unary", request).await;
                    let (meta, reply, _) = response.expect("the call succeeds").into_parts();
                    assert_eq!(reply.seq, i * 10 + 1);
                    assert_eq!(reply.note, format!("tag=call-{i} te=trailers note="));
                    assert!(reply.data.iter().eq(data.iter().rev()), "call {i}'s data");
                    assert_eq!(metadata(&meta, "grpc-status"), "0");
                })
            })
            .collect();
        for call in calls {
            call.await.expect("a call task");
        }
    })
    .await
    .expect("within the time limit");
}

/// A gRPC call routed to an HTTP/1.1 upstream: HTTP/1.1 has no trailers for `grpc-status` and
/// no streaming both ways, so Squall refuses it at once with a trailers-only answer
/// (`grpc-status: 14`, tonic: `Unavailable`, and a `grpc-message` naming the upstream and the
/// fix), counts it, and the origin never sees the request.
#[tokio::test]
async fn grpc_to_an_http1_upstream_is_refused_clearly() {
    let (squall, legacy_requests) = start();
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(5), async {
        let mut client = EchoClient::connect(squall.addr).await;
        let request = Request::new(msg(1, b"x".to_vec(), ""));
        client.unary("/squall.test.Legacy/Unary", request).await
    })
    .await
    .expect("an answer within 5 s");
    let status = outcome.expect_err("the call fails");
    eprintln!("refused in {:?}: {status:?}", started.elapsed());
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("HTTP/1.1") && status.message().contains("protocol = \"h2c\""),
        "{status:?}"
    );

    // The same call from a plain HTTP/2 client: HTTP 200, trailers-only, at once.
    let client = h2_client::h2c(squall.addr).await;
    let uri = "http://localhost/squall.test.Legacy/Unary";
    let response = h2_client::grpc_empty_call(&client, uri).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("grpc-status").unwrap(), "14");
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "application/grpc"
    );
    assert!(
        response.body().is_end_stream(),
        "trailers-only: nothing follows the head"
    );

    assert_eq!(
        legacy_requests.load(Ordering::SeqCst),
        0,
        "the HTTP/1.1 origin saw nothing"
    );
    let (status, metrics) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(status, 200);
    let refused: u64 = (metrics.lines())
        .filter(|l| l.starts_with("squall_upstream_grpc_refused_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(refused, 2, "{metrics}");
}

/// A tonic connector for Squall's TLS listener: TCP to `addr`, then TLS offering ALPN `h2`
/// alone and trusting the test's certificate for `grpc.test`.
#[derive(Clone)]
struct TlsConnect {
    addr: SocketAddr,
    tls: tokio_rustls::TlsConnector,
}

type TlsIo = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

impl Service<http::Uri> for TlsConnect {
    type Response = TlsIo;
    type Error = std::io::Error;
    type Future = BoxFuture<TlsIo, std::io::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), std::io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let (addr, tls) = (self.addr, self.tls.clone());
        Box::pin(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await?;
            let name = rustls_pki_types::ServerName::try_from("grpc.test").unwrap();
            let stream = tls.connect(name, tcp).await?;
            assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

/// The unary call again, from a client that reaches Squall over TLS (HTTP/2 chosen by ALPN).
#[tokio::test]
async fn unary_call_over_tls_with_alpn_h2() {
    let dir = TempDir::new();
    let certified = rcgen::generate_simple_self_signed(vec!["grpc.test".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("grpc.pem"), dir.path().join("grpc.key"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let legacy = origin::raw_origin(|_| Vec::new());
    let tls_listener = format!(
        "\n[[listen]]\naddress = \"127.0.0.3:0\"\ntls = true\nprotocols = [\"h2\", \"http1\"]\n\n\
         [[certificate]]\nhosts = [\"grpc.test\"]\ncert = {cert:?}\nkey = {key:?}\n"
    );
    let squall = Squall::start(&(config(grpc_origin(), legacy) + &tls_listener));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let mut tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let connector = TlsConnect {
        addr: squall.tls_addr.expect("a TLS listener"),
        tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
    };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let channel = Endpoint::from_static("https://grpc.test")
            .connect_with_connector(connector)
            .await
            .expect("connect to Squall over TLS");
        let mut client = EchoClient::new(channel);
        let mut request = Request::new(msg(1, pattern(1, 100_000), "tls"));
        request
            .metadata_mut()
            .insert("x-client-tag", "over-tls".parse().unwrap());
        let response = (client.unary("/squall.test.Echo/Unary", request).await)
            .expect("the call over TLS succeeds");
        let (meta, reply, _) = response.into_parts();
        assert_eq!(reply.note, "tag=over-tls te=trailers note=tls");
        assert!(reply.data.iter().eq(pattern(1, 100_000).iter().rev()));
        assert_eq!(metadata(&meta, "grpc-status"), "0");
        assert_eq!(metadata(&meta, "x-origin-trailer"), "unary");
    })
    .await
    .expect("within the time limit");
}

// ---- Long-lived streams and their timers. ----

/// Squall with one h2c upstream of `origin` (`upstream` lines added) and one route to it
/// (`route` lines added), `limits` lines in `[limits]`.
fn timers_config(origin: SocketAddr, limits: &str, upstream: &str, route: &str) -> String {
    let upstream = format!("protocol = \"h2c\"\n{upstream}");
    squall_e2e::proxy_route_config(origin, limits, &upstream, route)
}

/// A server stream silent for 2.5 s between its messages, past the head's timeout (1 s) and
/// the client connection's `idle_timeout` (1 s), ends whole within the route's `read_timeout`
/// (6 s): the tester's 75 s stream at 60 s timers, scaled down.
#[tokio::test]
async fn a_server_stream_silent_past_the_head_and_idle_timeouts_ends_whole() {
    let squall = Squall::start(&timers_config(
        grpc_origin(),
        "idle_timeout = \"1s\"",
        "response_timeout = \"1s\"",
        "read_timeout = \"6s\"",
    ));
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut client = EchoClient::connect(squall.addr).await;
        let mut replies = client
            .watch(2_500)
            .await
            .expect("the call starts")
            .into_inner();
        for seq in 0..2 {
            let reply = replies.message().await.expect("a message, not a cut");
            assert_eq!(reply.map(|m| m.seq), Some(seq));
        }
        assert!(replies.message().await.expect("a clean end").is_none());
        let trailers = replies.trailers().await.expect("trailers").expect("some");
        assert_eq!(metadata(&trailers, "grpc-status"), "0");
    })
    .await
    .expect("within the time limit");
}

/// A server stream whose origin stays silent past the route's `read_timeout` (1 s) ends with
/// trailers `grpc-status: 4` (DEADLINE_EXCEEDED) and a message naming the upstream, not an
/// RST_STREAM: not before 1 s, and well before the origin's 20 s pause.
#[tokio::test]
async fn a_stream_silent_past_the_read_timeout_ends_with_deadline_exceeded() {
    let squall = Squall::start(&timers_config(
        grpc_origin(),
        "",
        "",
        "read_timeout = \"1s\"",
    ));
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut client = EchoClient::connect(squall.addr).await;
        let mut replies = client
            .watch(20_000)
            .await
            .expect("the call starts")
            .into_inner();
        let first = replies.message().await.expect("the first message");
        assert_eq!(first.map(|m| m.seq), Some(0));
        let started = Instant::now();
        let status = replies.message().await.expect_err("the call is cut");
        let took = started.elapsed();
        assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
        assert!(status.message().contains("\"app\""), "{status:?}");
        let bounds = Duration::from_millis(900)..Duration::from_secs(8);
        assert!(bounds.contains(&took), "cut after {took:?}");
    })
    .await
    .expect("within the time limit");
}

/// A gRPC origin (the `h2` crate) that answers a call's head and one message, then dies: its
/// connection closes mid-stream.
fn dying_grpc_origin() -> SocketAddr {
    origin::tokio_origin(|stream| async move {
        let Ok(mut conn) = h2::server::handshake(stream).await else {
            return;
        };
        let Some(Ok((_, mut respond))) = conn.accept().await else {
            return;
        };
        let head = http::Response::builder()
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        let mut body = respond.send_response(head, false).unwrap();
        let encoded = prost::Message::encode_to_vec(&msg(0, vec![], "last words"));
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        framed.extend_from_slice(&encoded);
        body.send_data(framed.into(), false).unwrap();
        // Driven until the frames are out, then dropped with the stream: the origin dies.
        let _ = tokio::time::timeout(Duration::from_millis(300), conn.accept()).await;
    })
}

/// An origin that dies after the head and a message: the call ends with trailers
/// `grpc-status: 14` (UNAVAILABLE), which clients may retry, not an RST_STREAM.
#[tokio::test]
async fn an_origin_dying_mid_stream_ends_the_call_unavailable() {
    let squall = Squall::start(&timers_config(dying_grpc_origin(), "", "", ""));
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut client = EchoClient::connect(squall.addr).await;
        let mut replies = client.watch(0).await.expect("the call starts").into_inner();
        let first = replies.message().await.expect("the first message");
        assert_eq!(first.map(|m| m.note), Some("last words".to_owned()));
        let status = replies.message().await.expect_err("the call is cut");
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert!(status.message().contains("mid-stream"), "{status:?}");
    })
    .await
    .expect("within the time limit");
}

// ---- Request bodies over `body_bytes_max`. ----

/// A call whose request is over `limits.body_bytes_max` (2 MiB, a 3 MiB message) gets a
/// trailers-only `grpc-status: 8` (RESOURCE_EXHAUSTED), not an HTTP 413 that gRPC clients read
/// as a protocol error; a route with its own `body_bytes_max` (8 MiB) lifts the limit for
/// its calls, so the same message goes through.
#[tokio::test]
async fn a_body_over_body_bytes_max_is_resource_exhausted_unless_the_route_lifts_it() {
    let limits = "body_bytes_max = \"2MiB\"";
    let big = || Request::new(msg(5, pattern(5, 3 << 20), "big"));
    let squall = Squall::start(&timers_config(grpc_origin(), limits, "", ""));
    let lifted = Squall::start(&timers_config(
        grpc_origin(),
        limits,
        "",
        "body_bytes_max = \"8MiB\"",
    ));
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut client = EchoClient::connect(squall.addr).await;
        let status =
            (client.unary("/squall.test.Echo/Unary", big()).await).expect_err("over the limit");
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert!(status.message().contains("body_bytes_max"), "{status:?}");

        let mut client = EchoClient::connect(lifted.addr).await;
        let reply = (client.unary("/squall.test.Echo/Unary", big()).await)
            .expect("the route's own limit lets it through");
        assert_eq!(reply.into_inner().data.len(), 3 << 20);
    })
    .await
    .expect("within the time limit");
}
