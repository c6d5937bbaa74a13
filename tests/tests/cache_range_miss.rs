//! A Range request for an object the cache does not hold: the whole object is fetched once
//! (coalesced across concurrent ranges, HTTP/1.1 and HTTP/2 alike), stored, and each range is
//! served from it; an object over `cache.object_bytes_max` is asked of the origin by range.

use std::net::SocketAddr;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use squall_e2e::{Squall, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// What the origin saw: path and Range of each request, in order.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// The bytes of an object of `len` bytes: no short period, so a misplaced part cannot pass.
fn object(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((i * 7 + i / 26) % 26) as u8)
        .collect()
}

/// An origin on raw sockets that serves `/small` (20,000 bytes) and `/large` (300,000 bytes),
/// fresh for a minute, after a short delay, answering a single `bytes=a-b` range with a 206.
fn start_origin() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let addr = origin::raw_origin(move |head| {
        let path = head.split(' ').nth(1).unwrap_or("").to_owned();
        let range = origin::field(head, "range").map(str::to_owned);
        log.lock().unwrap().push((path.clone(), range.clone()));
        std::thread::sleep(Duration::from_millis(200));
        let len = if path == "/large" { 300_000 } else { 20_000 };
        let body = object(len);
        match range.as_deref().and_then(parse_range) {
            Some((a, b)) => {
                let content_range = format!("content-range: bytes {a}-{b}/{len}");
                let fields = ["cache-control: max-age=60", "etag: \"o\"", &content_range];
                origin::response("206 Partial Content", &fields, &body[a..=b])
            }
            None => {
                let fields = ["cache-control: max-age=60", "etag: \"o\""];
                origin::response("200 OK", &fields, &body)
            }
        }
    });
    (addr, seen)
}

fn parse_range(value: &str) -> Option<(usize, usize)> {
    let (a, b) = value.strip_prefix("bytes=")?.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn config(origin: SocketAddr) -> String {
    squall_e2e::cache_config(origin, "object_bytes_max = \"64KiB\"", "/", "")
}

fn requests(seen: &Seen) -> Vec<(String, Option<String>)> {
    seen.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ranges_of_a_missing_object_make_one_whole_fetch() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin));
    let host = squall.addr.to_string();
    let expected = object(20_000);
    // Eight HTTP/1.1 clients ask for different ranges at once.
    let barrier = Arc::new(Barrier::new(8));
    let clients: Vec<_> = (0..8usize)
        .map(|i| {
            let mut stream = squall.connect();
            let (barrier, host) = (barrier.clone(), host.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let (a, b) = (i * 1000, i * 1000 + 499);
                let request =
                    format!("GET /small HTTP/1.1\r\nHost: {host}\r\nRange: bytes={a}-{b}\r\n\r\n");
                (a, b, roundtrip(&mut stream, &request))
            })
        })
        .collect();
    for client in clients {
        let (a, b, response) = client.join().unwrap();
        assert_eq!(response.status, 206, "{a}-{b}");
        assert_eq!(
            response.header("content-range"),
            Some(format!("bytes {a}-{b}/20000").as_str())
        );
        assert_eq!(response.body, expected[a..=b], "{a}-{b}");
    }
    // The origin was asked once, for the whole object.
    assert_eq!(requests(&seen), [("/small".to_owned(), None)]);
    // Now stored: an HTTP/2 client's range is a hit.
    let client = h2_client::h2c(squall.addr).await;
    let mut request = client.clone().ready().await.unwrap();
    let get = http::Request::get(format!("http://{host}/small"))
        .header("range", "bytes=-100")
        .body(())
        .unwrap();
    let (response, _) = request.send_request(get, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 206);
    assert_eq!(response.headers()["x-cache"], "HIT");
    let mut body = response.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got, expected[19_900..]);
    assert_eq!(requests(&seen).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_miss_over_http2_is_served_from_the_fetched_object() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin));
    let client = h2_client::h2c(squall.addr).await;
    let mut request = client.clone().ready().await.unwrap();
    let get = http::Request::get(format!("http://{}/small", squall.addr))
        .header("range", "bytes=5-14")
        .body(())
        .unwrap();
    let (response, _) = request.send_request(get, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 206);
    assert_eq!(response.headers()["x-cache"], "MISS");
    assert_eq!(response.headers()["content-range"], "bytes 5-14/20000");
    let mut body = response.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = body.data().await {
        got.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(got, object(20_000)[5..15]);
    assert_eq!(requests(&seen), [("/small".to_owned(), None)]);
}

#[test]
fn a_range_of_an_object_too_large_to_store_goes_to_the_origin_by_range() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin));
    let host = squall.addr.to_string();
    let expected = object(300_000);
    for (a, b) in [(1000, 1999), (250_000, 250_099)] {
        let mut stream = squall.connect();
        let request =
            format!("GET /large HTTP/1.1\r\nHost: {host}\r\nRange: bytes={a}-{b}\r\n\r\n");
        let response = roundtrip(&mut stream, &request);
        assert_eq!(response.status, 206);
        assert_eq!(
            response.header("content-range"),
            Some(format!("bytes {a}-{b}/300000").as_str())
        );
        assert_eq!(response.body, expected[a..=b]);
    }
    let seen = requests(&seen);
    // The first range tried the whole object (given up at its head: too large), then asked
    // for its range; the second went by range at once (the URL passes now).
    assert_eq!(
        seen,
        [
            ("/large".to_owned(), None),
            ("/large".to_owned(), Some("bytes=1000-1999".to_owned())),
            ("/large".to_owned(), Some("bytes=250000-250099".to_owned())),
        ]
    );
}
