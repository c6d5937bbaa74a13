//! HTTP/3 clients whose address changes mid-connection (NAT rebinding, a phone switching
//! networks), against two workers: with the steering program the packets keep reaching the
//! worker that owns the connection; without it (`[quic] steering = false`, as on a kernel that
//! refuses the program) the kernel spreads packets by address, and the worker a moved client's
//! packets reach hands them to the owner. Either way every request is answered.

use std::net::UdpSocket;

use squall_e2e::{Squall, admin_addr, admin_get, metric_sum};

#[path = "support/h3_client.rs"]
mod h3_client;

/// Address changes tried before giving up on seeing a packet reach the other worker: each
/// new port lands there with probability 1/2 under the kernel's spreading.
const MOVES_MAX: usize = 40;

fn config(steering: bool) -> String {
    format!(
        r#"[server]
workers = 2

[admin]
listen = "127.0.0.2:0"

[[certificate]]
hosts = ["localhost"]
self_signed = true

[[listen]]
address = "ADDR"
tls = true
protocols = ["h2", "http1", "h3"]

[quic]
steering = {steering}

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "still here\n" }}
"#
    )
}

/// One GET of `/` on `h3`, which must be answered whole.
async fn still_served(squall: &Squall, h3: &mut h3_client::H3, moves: usize) {
    let uri = format!("https://localhost:{}/", squall.addr.port());
    let reply = h3_client::fetch(h3, "GET", &uri, None).await;
    assert_eq!(
        (reply.status, &reply.body[..]),
        (200, &b"still here\n"[..]),
        "after {moves} address changes; squall's log:\n{}",
        squall.log()
    );
}

/// The client's connection moves to a new local port (a new UDP socket under the same QUIC
/// connection): the server sees a new address for it.
fn move_client(h3: &h3_client::H3) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a new client socket");
    h3.endpoint.rebind(socket).expect("the client moves");
}

fn misrouted(squall: &Squall) -> f64 {
    let (_, metrics) = admin_get(admin_addr(squall), "/metrics");
    metric_sum(&metrics, "squall_quic_misrouted_total")
}

/// Without steering, a moved client's packets that reach the other worker are handed to the
/// connection's owner: the requests after the move are answered, and the metric counts the
/// hand-overs (a connection whose packets were dropped there would time out instead).
#[tokio::test]
async fn packets_that_reach_another_worker_are_handed_to_the_owner() {
    let squall = Squall::start(&config(false));
    let mut h3 = h3_client::connect(squall.addr).await;
    still_served(&squall, &mut h3, 0).await;
    let mut moves = 0;
    while misrouted(&squall) == 0.0 {
        assert!(
            moves < MOVES_MAX,
            "no packet reached the other worker after {MOVES_MAX} moves"
        );
        move_client(&h3);
        moves += 1;
        still_served(&squall, &mut h3, moves).await;
    }
    // The connection goes on from wherever it now is, moved again or not.
    for _ in 0..4 {
        move_client(&h3);
        moves += 1;
        still_served(&squall, &mut h3, moves).await;
    }
}

/// With steering (the default), every packet reaches its connection's worker, however often
/// the client moves: nothing is handed over.
#[tokio::test]
async fn steered_packets_reach_the_owner_directly() {
    let squall = Squall::start(&config(true));
    let mut h3 = h3_client::connect(squall.addr).await;
    for moves in 0..12 {
        if moves > 0 {
            move_client(&h3);
        }
        still_served(&squall, &mut h3, moves).await;
    }
    assert_eq!(misrouted(&squall), 0.0, "steered packets were handed over");
}
