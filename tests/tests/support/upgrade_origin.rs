//! An upgrading origin for the tunnel tests over HTTP/2 and HTTP/3, written by hand on raw
//! sockets: a `GET` with `Upgrade` is answered 101 naming the protocol asked for (with the
//! `Sec-WebSocket-Accept` RFC 6455 §4.2.2 computes from the request's key, by tungstenite's
//! implementation, and `Sec-WebSocket-Protocol: chat`, when the request has a key; a wrong
//! accept on `/bad-accept`), then every byte is echoed until the client's FIN, after which it
//! says `bye`; any other request is answered `200 plain`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the origin saw: upgrade request heads (as sent), and tunnels that ended.
#[derive(Default)]
pub struct Seen {
    pub heads: std::sync::Mutex<Vec<String>>,
    pub ended: AtomicUsize,
}

/// The origin on a loopback port of its own.
pub fn origin() -> (SocketAddr, Arc<Seen>) {
    origin_on(TcpListener::bind("127.0.0.1:0").unwrap())
}

/// The origin on `listener` (one whose buffers a test chose).
pub fn origin_on(listener: TcpListener) -> (SocketAddr, Arc<Seen>) {
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let seen = shared.clone();
            std::thread::spawn(move || serve(&mut stream, &seen));
        }
    });
    (addr, seen)
}

/// `Sec-WebSocket-Accept` for `key`, by tungstenite: independent of the one Squall checks the
/// origin's answer with.
pub fn websocket_accept(key: &[u8]) -> String {
    tokio_tungstenite::tungstenite::handshake::derive_accept_key(key)
}

/// `squall_tunnel_refused_total` with `reason`, summed over the workers, from `/metrics`'s
/// `text`: how the tunnel tests count refusals.
pub fn refused(text: &str, reason: &str) -> f64 {
    (text.lines())
        .filter(|l| l.starts_with("squall_tunnel_refused_total{"))
        .filter(|l| l.contains(&format!("reason=\"{reason}\"")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

fn serve(stream: &mut TcpStream, seen: &Seen) {
    let Some((head, early)) = squall_e2e::read_request_head(stream) else {
        return;
    };
    seen.heads.lock().unwrap().push(head.clone());
    let field = |name: &str| {
        (head.lines())
            .find(|l| l.to_ascii_lowercase().starts_with(name))
            .map(|l| l[name.len()..].trim().to_owned())
    };
    let upgrade = field("upgrade:").filter(|_| head.starts_with("GET "));
    let Some(upgrade) = upgrade else {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nplain");
        return;
    };
    let mut switch = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: {upgrade}\r\nConnection: Upgrade\r\n"
    );
    if let Some(key) = field("sec-websocket-key:") {
        let accept = match head.split(' ').nth(1) {
            Some("/bad-accept") => "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".to_owned(),
            _ => websocket_accept(key.as_bytes()),
        };
        switch += &format!("Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: chat\r\n");
    }
    switch += "\r\n";
    if stream.write_all(switch.as_bytes()).is_err() || stream.write_all(&early).is_err() {
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if stream.write_all(&buf[..n]).is_ok() => {}
            _ => {
                seen.ended.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
    }
    let _ = stream.write_all(b"bye");
    seen.ended.fetch_add(1, Ordering::SeqCst);
}
