//! The gRPC origin of the end-to-end tests: `squall.test.Echo` as tonic-build would generate
//! it (see tests/tests/grpc.rs for the service), served by tonic in h2c on a loopback port, and
//! its one message type.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::mpsc;
use tonic::body::Body;
use tonic::codec::{ProstCodec, Streaming};
use tonic::codegen::tokio_stream::{self, Stream};
use tonic::codegen::{BoxFuture, BoxStream, Service};
use tonic::metadata::MetadataMap;
use tonic::server::{Grpc, NamedService, ServerStreamingService, StreamingService, UnaryService};
use tonic::{Code, Request, Response, Status};

use super::origin;

/// The largest message either side accepts: tonic's default (4 MiB) is too small for
/// grpc.rs's `large_messages_both_ways`, whose message is 4 MiB plus its other fields.
pub const MESSAGE_BYTES_MAX: usize = 8 << 20;

/// The one message type, both ways.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Msg {
    #[prost(uint32, tag = "1")]
    pub seq: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
    #[prost(string, tag = "3")]
    pub note: String,
}

// ---- The origin: the service as tonic-build would generate it, and its handlers. ----

/// The server side of `squall.test.Echo`, routing by path as generated code does.
#[derive(Clone)]
struct EchoServer;

impl NamedService for EchoServer {
    const NAME: &'static str = "squall.test.Echo";
}

/// The request's `te` field, which tonic keeps from the handlers' metadata (a reserved field):
/// noted in the request's extensions so that `Unary` can say whether it arrived.
#[derive(Clone)]
struct Te(String);

impl Service<http::Request<Body>> for EchoServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let te = request.headers().get(http::header::TE);
        let te = Te(te.map_or("-".into(), |v| v.to_str().unwrap_or("?").to_owned()));
        request.extensions_mut().insert(te);
        Box::pin(async move {
            let mut grpc = Grpc::new(ProstCodec::<Msg, Msg>::default())
                .max_decoding_message_size(MESSAGE_BYTES_MAX)
                .max_encoding_message_size(MESSAGE_BYTES_MAX);
            Ok(match request.uri().path() {
                "/squall.test.Echo/Unary" => grpc.server_streaming(UnaryEcho, request).await,
                "/squall.test.Echo/Fail" => grpc.unary(Fail, request).await,
                "/squall.test.Echo/Chat" => grpc.streaming(Chat, request).await,
                "/squall.test.Echo/Watch" => grpc.server_streaming(Watch, request).await,
                path => Status::unimplemented(path.to_owned()).into_http(),
            })
        })
    }
}

/// `Unary`: one message back, `seq + 1` and the data reversed (so the origin must have read it
/// whole), its note saying what metadata and `te` arrived; then trailers with `grpc-status: 0`
/// and `x-origin-trailer`. tonic's unary handlers cannot send trailing metadata, so this one is
/// served as a one-message stream ending in an `Ok` status that carries it: on the wire that
/// is exactly a unary response (HEADERS, one message, trailing HEADERS).
struct UnaryEcho;

impl ServerStreamingService<Msg> for UnaryEcho {
    type Response = Msg;
    type ResponseStream = BoxStream<Msg>;
    type Future = BoxFuture<Response<BoxStream<Msg>>, Status>;

    fn call(&mut self, request: Request<Msg>) -> Self::Future {
        let te = request
            .extensions()
            .get::<Te>()
            .map_or("-".into(), |t| t.0.clone());
        let tag = request.metadata().get("x-client-tag");
        let tag = tag.map_or("-".into(), |v| v.to_str().unwrap_or("?").to_owned());
        let msg = request.into_inner();
        let reply = Msg {
            seq: msg.seq + 1,
            data: msg.data.into_iter().rev().collect(),
            note: format!("tag={tag} te={te} note={}", msg.note),
        };
        let mut trailers = MetadataMap::new();
        trailers.insert("x-origin-trailer", "unary".parse().unwrap());
        let end = Status::with_metadata(Code::Ok, "", trailers);
        let stream: BoxStream<Msg> = Box::pin(tokio_stream::iter([Ok(reply), Err(end)]));
        let mut response = Response::new(stream);
        response
            .metadata_mut()
            .insert("x-origin-header", "yes".parse().unwrap());
        Box::pin(async move { Ok(response) })
    }
}

/// `Fail`: NOT_FOUND with a message and trailing metadata, before any message (a trailers-only
/// response: one HEADERS frame with END_STREAM that carries `grpc-status`).
struct Fail;

impl UnaryService<Msg> for Fail {
    type Response = Msg;
    type Future = BoxFuture<Response<Msg>, Status>;

    fn call(&mut self, _: Request<Msg>) -> Self::Future {
        let mut metadata = MetadataMap::new();
        metadata.insert("x-why", "testing".parse().unwrap());
        let status = Status::with_metadata(Code::NotFound, "no such thing: x", metadata);
        Box::pin(async move { Err(status) })
    }
}

/// `Chat`: each message echoed as it arrives (its data, `seq` the count so far, `note` the
/// client's `seq`), then trailers with `grpc-status: 0` and `x-count`.
struct Chat;

impl StreamingService<Msg> for Chat {
    type Response = Msg;
    type ResponseStream = BoxStream<Msg>;
    type Future = BoxFuture<Response<BoxStream<Msg>>, Status>;

    fn call(&mut self, request: Request<Streaming<Msg>>) -> Self::Future {
        let mut incoming = request.into_inner();
        let (replies, inbox) = mpsc::channel(4);
        tokio::spawn(async move {
            let mut count = 0u32;
            let end = loop {
                match incoming.message().await {
                    Ok(Some(msg)) => {
                        count += 1;
                        let data = msg.data;
                        let note = msg.seq.to_string();
                        let reply = Msg {
                            seq: count,
                            data,
                            note,
                        };
                        if replies.send(Ok(reply)).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break Status::with_metadata(Code::Ok, "", count_trailer(count)),
                    Err(status) => break status,
                }
            };
            let _ = replies.send(Err(end)).await;
        });
        let stream: BoxStream<Msg> = Box::pin(Inbox(inbox));
        Box::pin(async move { Ok(Response::new(stream)) })
    }
}

/// `Watch`: a server stream of two messages `seq` milliseconds apart (a stream silent between
/// its events), then `grpc-status: 0`.
struct Watch;

impl ServerStreamingService<Msg> for Watch {
    type Response = Msg;
    type ResponseStream = BoxStream<Msg>;
    type Future = BoxFuture<Response<BoxStream<Msg>>, Status>;

    fn call(&mut self, request: Request<Msg>) -> Self::Future {
        let pause = Duration::from_millis(request.into_inner().seq.into());
        let (replies, inbox) = mpsc::channel(2);
        tokio::spawn(async move {
            let _ = replies.send(Ok(msg(0, vec![], "watch"))).await;
            tokio::time::sleep(pause).await;
            let _ = replies.send(Ok(msg(1, vec![], "watch"))).await;
        });
        let stream: BoxStream<Msg> = Box::pin(Inbox(inbox));
        Box::pin(async move { Ok(Response::new(stream)) })
    }
}

fn count_trailer(count: u32) -> MetadataMap {
    let mut metadata = MetadataMap::new();
    metadata.insert("x-count", count.to_string().parse().unwrap());
    metadata
}

/// A stream of what an mpsc channel receives (tokio-stream's wrapper needs a feature tonic
/// does not turn on).
pub struct Inbox<T>(pub mpsc::Receiver<T>);

impl<T> Stream for Inbox<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

/// The tonic server, h2c on a loopback port, on a thread of its own.
pub fn grpc_origin() -> SocketAddr {
    origin::tokio_serve_on("127.0.0.1:0", 2, |listener| async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tonic::transport::Server::builder()
            .serve_with_incoming(EchoServer, incoming)
            .await
            .expect("the gRPC origin serves");
    })
}

/// A message.
pub fn msg(seq: u32, data: Vec<u8>, note: &str) -> Msg {
    let note = note.to_owned();
    Msg { seq, data, note }
}
