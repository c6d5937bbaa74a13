//! The client connection against an independent server, the `h2` crate's, over loopback
//! TCP: many concurrent streams with bodies both ways and trailers, and a server that
//! allows only a few streams at once. The client is driven by a small blocking loop (the
//! worker's job in Squall): a reader thread hands the socket's bytes over a channel, the
//! loop writes the connection's output and acts on its events.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use squall_h2::{ClientConfig, ClientConnection, ClientEvent, StreamId};

/// The request body of request `i`: a pattern that differs per request.
fn request_body(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| ((i * 7 + j) % 251) as u8).collect()
}

/// What the server answers to a body: every byte inverted.
fn response_body(request: &[u8]) -> Vec<u8> {
    request.iter().map(|b| !b).collect()
}

/// Starts an `h2` server on 127.0.0.1 that answers each request with 200, the inverted
/// request body, and trailers echoing the request's `x-trailer` and the body length.
fn start_server(max_concurrent_streams: Option<u32>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                tokio::spawn(serve(socket, max_concurrent_streams));
            }
        });
    });
    addr
}

async fn serve(socket: tokio::net::TcpStream, max_concurrent_streams: Option<u32>) {
    let mut builder = h2::server::Builder::new();
    if let Some(max) = max_concurrent_streams {
        builder.max_concurrent_streams(max);
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(socket).await else {
        return;
    };
    while let Some(Ok((request, respond))) = conn.accept().await {
        tokio::spawn(async move {
            if let Err(error) = answer(request, respond).await {
                panic!("server: {error}");
            }
        });
    }
}

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) -> Result<(), h2::Error> {
    let path = request.uri().path().to_string();
    let mut body = request.into_body();
    let mut received = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        body.flow_control().release_capacity(chunk.len())?;
        received.extend_from_slice(&chunk);
    }
    let trailer = (body.trailers().await?)
        .and_then(|t| t.get("x-trailer").cloned())
        .expect("request trailers");
    let response = http::Response::builder()
        .status(200)
        .header("x-path", path)
        .body(())
        .unwrap();
    let mut send = respond.send_response(response, false)?;
    let answer = Bytes::from(response_body(&received));
    for piece in answer.chunks(20_000) {
        send.send_data(answer.slice_ref(piece), false)?;
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-trailer", trailer);
    trailers.insert("x-len", received.len().into());
    send.send_trailers(trailers)
}

/// One request's progress on the client side.
#[derive(Debug, Default)]
struct Progress {
    index: usize,
    status: Option<u16>,
    body: Vec<u8>,
    done: bool,
}

/// What a run saw.
#[derive(Debug)]
struct Run {
    completed: usize,
    most_open: usize,
    refused: usize,
}

/// Sends `count` POSTs of `body_len` bytes each, with trailers, on one connection, as many
/// at once as `available_streams` allows; checks every response; returns what it saw.
fn run_client(addr: SocketAddr, count: usize, body_len: usize, wait_settings: bool) -> Run {
    let socket = TcpStream::connect(addr).unwrap();
    socket.set_nodelay(true).unwrap();
    let mut reader = socket.try_clone().unwrap();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut writer = socket;
    let now = Instant::now();
    let deadline = now + Duration::from_secs(60);
    let mut conn = ClientConnection::new(ClientConfig::default(), now);
    let mut input = BytesMut::new();
    let mut waiting: VecDeque<usize> = (0..count).collect();
    let mut streams: BTreeMap<StreamId, Progress> = BTreeMap::new();
    let mut run = Run {
        completed: 0,
        most_open: 0,
        refused: 0,
    };
    while run.completed < count {
        assert!(
            Instant::now() < deadline,
            "stuck: {run:?}, {} open",
            conn.open_streams()
        );
        // Open what the connection allows.
        while !waiting.is_empty()
            && conn.available_streams() > 0
            && (conn.peer_settings_received() || !wait_settings)
        {
            let index = waiting.pop_front().unwrap();
            let id = open(&mut conn, index, body_len);
            let progress = Progress {
                index,
                ..Progress::default()
            };
            streams.insert(id, progress);
            run.most_open = run.most_open.max(conn.open_streams());
        }
        conn.check_invariants();
        // Write everything there is.
        let mut pieces = Vec::new();
        conn.poll_output(usize::MAX, |piece| pieces.push(piece));
        for piece in &pieces {
            writer.write_all(piece).unwrap();
        }
        // Events.
        while let Some(event) = conn.poll_event() {
            on_event(
                &mut conn,
                event,
                &mut streams,
                &mut waiting,
                &mut run,
                body_len,
            );
        }
        conn.check_invariants();
        if run.completed == count {
            break;
        }
        if conn.has_output() {
            continue;
        }
        // Read: wait for the next piece, then take whatever else is there.
        let first = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the server answers");
        input.extend_from_slice(&first);
        while let Ok(more) = rx.try_recv() {
            input.extend_from_slice(&more);
        }
        conn.recv(&mut input, Instant::now())
            .expect("no connection error");
        conn.check_invariants();
    }
    conn.go_away(squall_h2::ErrorCode::NoError);
    let mut pieces = Vec::new();
    conn.poll_output(usize::MAX, |piece| pieces.push(piece));
    for piece in &pieces {
        writer.write_all(piece).unwrap();
    }
    assert!(conn.is_finished());
    run
}

/// Opens request `index`: POST with a content-length, its body in 16 KiB pieces, trailers.
fn open(conn: &mut ClientConnection, index: usize, body_len: usize) -> StreamId {
    let path = format!("/r/{index}");
    let length = body_len.to_string();
    let fields = [
        (&b":method"[..], &b"POST"[..]),
        (b":scheme", b"http"),
        (b":authority", b"origin.test"),
        (b":path", path.as_bytes()),
        (b"content-length", length.as_bytes()),
    ];
    let id = conn.send_request(fields, false).expect("a stream");
    let body = Bytes::from(request_body(index, body_len));
    for piece in body.chunks(16 * 1024) {
        conn.send_data(id, body.slice_ref(piece), false).unwrap();
    }
    let trailer = format!("t{index}");
    conn.send_trailers(id, [(&b"x-trailer"[..], trailer.as_bytes())])
        .unwrap();
    id
}

fn on_event(
    conn: &mut ClientConnection,
    event: ClientEvent,
    streams: &mut BTreeMap<StreamId, Progress>,
    waiting: &mut VecDeque<usize>,
    run: &mut Run,
    body_len: usize,
) {
    match event {
        ClientEvent::Response {
            stream_id,
            status,
            fields,
            end_stream,
            ..
        } => {
            let progress = streams.get_mut(&stream_id).expect("our stream");
            let path = format!("/r/{}", progress.index);
            assert_eq!(fields.get("x-path"), Some(path.as_bytes()));
            assert!(!end_stream);
            progress.status = Some(status);
        }
        ClientEvent::Data {
            stream_id,
            data,
            end_stream,
        } => {
            let progress = streams.get_mut(&stream_id).expect("our stream");
            assert!(progress.status.is_some() && !end_stream);
            progress.body.extend_from_slice(&data);
            conn.release_capacity(stream_id, data.len());
        }
        ClientEvent::Trailers { stream_id, fields } => {
            let mut progress = streams.remove(&stream_id).expect("our stream");
            assert_eq!(progress.status, Some(200));
            let expected = response_body(&request_body(progress.index, body_len));
            assert!(
                progress.body == expected,
                "body of request {}",
                progress.index
            );
            let trailer = format!("t{}", progress.index);
            assert_eq!(fields.get("x-trailer"), Some(trailer.as_bytes()));
            assert_eq!(fields.get("x-len"), Some(body_len.to_string().as_bytes()));
            progress.done = true;
            run.completed += 1;
        }
        ClientEvent::Reset {
            stream_id,
            refused: true,
            ..
        } => {
            let progress = streams.remove(&stream_id).expect("our stream");
            waiting.push_back(progress.index);
            run.refused += 1;
        }
        other => panic!("unexpected event: {other:?}"),
    }
}

#[test]
fn hundred_concurrent_streams_with_bodies_and_trailers_against_h2() {
    let addr = start_server(None);
    let run = run_client(addr, 100, 64 * 1024, true);
    assert_eq!(run.completed, 100);
    assert_eq!(run.most_open, 100, "all at once: {run:?}");
    assert_eq!(run.refused, 0);
}

#[test]
fn server_stream_limit_is_respected() {
    let addr = start_server(Some(10));
    let run = run_client(addr, 30, 20_000, true);
    assert_eq!(run.completed, 30);
    assert_eq!(run.most_open, 10, "{run:?}");
    assert_eq!(run.refused, 0);
}
