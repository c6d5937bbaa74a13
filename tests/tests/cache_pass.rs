//! Hit-for-pass (`cache.hit_for_pass`): after a response that could not be stored (here one
//! that sets a cookie), concurrent requests for the same URL go to the origin side by side
//! instead of queueing behind one another's fetches, for as long as the mark holds; then they
//! coalesce again.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use squall_e2e::{Squall, admin_addr, admin_get, metric_sum, roundtrip};

#[path = "support/origin.rs"]
mod origin;

/// An origin that answers every request after `delay` with a response that sets a cookie
/// (never stored on a `cache_set_cookie = "pass"` route), and counts them.
fn cookie_origin(delay: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let addr = origin::raw_origin(move |_| {
        std::thread::sleep(delay);
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        let cookie = format!("set-cookie: s={n}");
        let fields = ["cache-control: max-age=600", cookie.as_str()];
        origin::response("200 OK", &fields, format!("response {n}").as_bytes())
    });
    (addr, count)
}

fn config(origin: SocketAddr, hit_for_pass: &str) -> String {
    let cache = format!("hit_for_pass = \"{hit_for_pass}\"");
    squall_e2e::cache_config(origin, &cache, "/", "")
}

fn get(squall: &Squall) -> squall_e2e::Response {
    let mut stream = squall.connect();
    roundtrip(&mut stream, "GET /account HTTP/1.1\r\nHost: p.test\r\n\r\n")
}

/// Sends `n` requests for the same URL at once; every answer is a 200 from the origin.
fn burst(squall: &Squall, n: usize) {
    let barrier = Arc::new(Barrier::new(n));
    let clients: Vec<_> = (0..n)
        .map(|_| {
            let mut stream = squall.connect();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                roundtrip(&mut stream, "GET /account HTTP/1.1\r\nHost: p.test\r\n\r\n")
            })
        })
        .collect();
    for client in clients {
        let response = client.join().unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.header("x-cache"), Some("MISS"));
    }
}

fn metric(squall: &Squall, name: &str) -> f64 {
    let (_, metrics) = admin_get(admin_addr(squall), "/metrics");
    metric_sum(&metrics, name)
}

#[test]
fn after_an_uncacheable_response_requests_pass_without_waiting_until_the_mark_expires() {
    let (origin, count) = cookie_origin(Duration::from_millis(300));
    let squall = Squall::start(&config(origin, "2s"));
    // The first fetch finds the response not storable (it sets a cookie): the URL is marked.
    assert_eq!(get(&squall).header("x-cache"), Some("MISS"));
    // Ten at once: each goes to the origin itself; nobody waits on another's fetch.
    burst(&squall, 10);
    assert_eq!(count.load(Ordering::SeqCst), 11);
    assert_eq!(metric(&squall, "squall_cache_hit_for_pass_total"), 10.0);
    assert_eq!(metric(&squall, "squall_cache_coalesced_total"), 0.0);
    // Once the mark has expired, a burst coalesces again behind one leader (which renews it).
    std::thread::sleep(Duration::from_millis(2200));
    burst(&squall, 10);
    assert!(metric(&squall, "squall_cache_coalesced_total") > 0.0);
    assert_eq!(metric(&squall, "squall_cache_hit_for_pass_total"), 10.0);
}

#[test]
fn with_hit_for_pass_off_every_burst_coalesces() {
    let (origin, _) = cookie_origin(Duration::from_millis(300));
    let squall = Squall::start(&config(origin, "0s"));
    assert_eq!(get(&squall).header("x-cache"), Some("MISS"));
    burst(&squall, 10);
    assert!(metric(&squall, "squall_cache_coalesced_total") > 0.0);
    assert_eq!(metric(&squall, "squall_cache_hit_for_pass_total"), 0.0);
}
