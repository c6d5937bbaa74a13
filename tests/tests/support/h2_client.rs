//! An HTTP/2 client for the end-to-end tests: the `h2` crate, driven on tokio.
#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::Bytes;

/// An h2 client connection with prior knowledge; its driver runs on a task.
pub async fn h2c(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// Sends a request with an optional body and reads the whole response, releasing flow-control
/// capacity as the body arrives.
pub async fn fetch(
    client: &h2::client::SendRequest<Bytes>,
    method: &str,
    uri: &str,
    body: Option<Bytes>,
) -> Reply {
    let mut client = client.clone().ready().await.expect("connection ready");
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .body(())
        .unwrap();
    let (response, mut send) = client
        .send_request(request, body.is_none())
        .expect("send request");
    if let Some(body) = body {
        send_all(&mut send, body).await;
    }
    let response = response.await.expect("response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut stream = response.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = stream.data().await {
        let chunk = chunk.expect("body chunk");
        body.extend_from_slice(&chunk);
        stream.flow_control().release_capacity(chunk.len()).unwrap();
    }
    Reply {
        status,
        headers,
        body,
    }
}

/// A bare gRPC call: POST `uri` with `content-type: application/grpc`, `te: trailers` and one
/// empty message (a 5-byte frame), ending the stream; returns the response head (with its body
/// stream).
pub async fn grpc_empty_call(
    client: &h2::client::SendRequest<Bytes>,
    uri: &str,
) -> http::Response<h2::RecvStream> {
    let mut client = client.clone().ready().await.expect("connection ready");
    let request = http::Request::post(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut body) = client.send_request(request, false).unwrap();
    body.send_data(Bytes::from_static(b"\0\0\0\0\0"), true)
        .unwrap();
    response.await.expect("a response")
}

/// Sends `body` through the stream's flow control, then ends the stream.
pub async fn send_all(send: &mut h2::SendStream<Bytes>, mut body: Bytes) {
    while !body.is_empty() {
        send.reserve_capacity(body.len());
        let granted = std::future::poll_fn(|cx| send.poll_capacity(cx))
            .await
            .expect("capacity")
            .expect("capacity granted");
        let chunk = body.split_to(granted.min(body.len()));
        send.send_data(chunk, false).unwrap();
    }
    send.send_data(Bytes::new(), true).unwrap();
}
