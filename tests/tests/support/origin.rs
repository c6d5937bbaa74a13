//! Scripted origins for the end-to-end tests: hyper's HTTP/1.1 server on a thread of its own,
//! or raw sockets with a thread per connection, each answering by a function the test gives;
//! and the loopback listener, tokio runtime thread and accept loop that every tokio origin of
//! the tests (TLS, HTTP/2, gRPC) runs on, so that each keeps only what is its own.
#![allow(dead_code)]

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

/// What a hyper origin's handler returns; an error makes hyper drop the connection unanswered.
pub type Answer = Result<http::Response<Full<Bytes>>, std::io::Error>;

/// An HTTP/1.1 origin (hyper, keep-alive) answering every request with `handler`.
pub fn hyper_origin<F, Fut>(handler: F) -> SocketAddr
where
    F: Fn(http::Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    hyper_origin_with(|| true, handler)
}

/// As [`hyper_origin`], with `accept()` called for each new connection: `false` closes it at
/// once, as an origin that stopped would (and a test can count connections there).
pub fn hyper_origin_with<A, F, Fut>(accept: A, handler: F) -> SocketAddr
where
    A: Fn() -> bool + Send + 'static,
    F: Fn(http::Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    tokio_origin(move |stream| {
        // Asked in the accept loop, so that a refused connection is closed at once.
        let stream = accept().then_some(stream);
        let handler = handler.clone();
        async move {
            let Some(stream) = stream else { return };
            let service = hyper::service::service_fn(handler);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    })
}

/// A tokio origin on 127.0.0.1 (a port of its own) with a one-thread runtime on a thread of its
/// own: `each` is called in the accept loop for every connection, and what it returns runs as a
/// task of its own. Returns the address it listens on.
pub fn tokio_origin<F, Fut>(each: F) -> SocketAddr
where
    F: FnMut(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio_origin_on("127.0.0.1:0", 1, each)
}

/// As [`tokio_origin`], listening on `address`, with `workers` runtime threads (1: a current-thread
/// runtime, as most origins need; more for an origin whose connections must not wait on each
/// other's work).
pub fn tokio_origin_on<F, Fut>(address: &str, workers: usize, mut each: F) -> SocketAddr
where
    F: FnMut(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio_serve_on(address, workers, move |listener| async move {
        // An accept error ends the origin, as the listener's would.
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(each(stream));
        }
    })
}

/// The ground under [`tokio_origin_on`], for an origin that takes the listener whole (a tonic
/// server): binds `address`, starts a runtime of `workers` threads on a thread of its own and
/// runs `serve` with the listener there until it returns. Returns the bound address.
pub fn tokio_serve_on<S, Fut>(address: &str, workers: usize, serve: S) -> SocketAddr
where
    S: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let listener = TcpListener::bind(address).expect("bind an origin");
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut builder = if workers > 1 {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(workers);
            builder
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        let runtime = builder.enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            serve(listener).await;
        });
    });
    addr
}

/// An origin on raw sockets, a thread per connection: each request head (the text before its
/// blank line; bodies are not read, so only for bodiless requests) is answered with the bytes
/// `answer` returns for it, in order, on a kept-alive connection; an empty answer closes it.
pub fn raw_origin(answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> SocketAddr {
    raw_origin_writing(move |head, stream| {
        let response = answer(head);
        !response.is_empty() && stream.write_all(&response).is_ok()
    })
}

/// As [`raw_origin`], with each answer written by `answer` itself, which may pause between
/// pieces; `false` closes the connection.
pub fn raw_origin_writing(
    answer: impl Fn(&str, &mut TcpStream) -> bool + Send + Sync + 'static,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an origin");
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let answer = answer.clone();
            std::thread::spawn(move || serve_heads(stream, &*answer));
        }
    });
    addr
}

fn serve_heads(mut stream: TcpStream, answer: &dyn Fn(&str, &mut TcpStream) -> bool) {
    let mut pending = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            return;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).into_owned();
            pending.drain(..end + 4);
            if !answer(&head, &mut stream) {
                return;
            }
        }
    }
}

/// The value of field `name` (lowercase) in a raw request `head`, if present.
pub fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A response with `status` (e.g. `"200 OK"`), extra `fields` (each `"name: value"`), and
/// `body`, framed by its length.
pub fn response(status: &str, fields: &[&str], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\n");
    for f in fields {
        out.push_str(f);
        out.push_str("\r\n");
    }
    out.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}
