//! `[cluster]`: three Squall nodes on loopback ports share one cache. Each object is fetched
//! from the origin once across the fleet whichever node a client reaches; a PURGE through one
//! node removes the object from every node; a node killed with SIGKILL costs the others no
//! error (its keys go to the origin or move), and once restarted it owns its keys again.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use squall_e2e::{Response, Squall, admin_addr, admin_get, metric_sum, roundtrip};

#[path = "support/origin.rs"]
mod origin;

const NAMES: [&str; 3] = ["a", "b", "c"];

/// Requests the origin saw, by path.
#[derive(Default)]
struct Seen(Mutex<HashMap<String, usize>>);

impl Seen {
    fn count(&self, path: &str) -> usize {
        self.0.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

/// A counting origin: every path is fresh for a minute, its body names it.
fn start_origin() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let addr = origin::hyper_origin(move |req: http::Request<Incoming>| {
        let seen = shared.clone();
        async move {
            let path = req.uri().path().to_owned();
            *seen.0.lock().unwrap().entry(path.clone()).or_default() += 1;
            let _ = req.into_body().collect().await;
            let response = http::Response::builder().header("cache-control", "max-age=60");
            Ok(response.body(Full::new(Bytes::from(path))).unwrap())
        }
    });
    (addr, seen)
}

/// Three free loopback ports for the nodes (bound and released: each node binds its own).
fn node_addresses() -> Vec<SocketAddr> {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    listeners.iter().map(|l| l.local_addr().unwrap()).collect()
}

fn config(origin: SocketAddr, nodes: &[SocketAddr], me: usize) -> String {
    let list: Vec<String> = (NAMES.iter().zip(nodes))
        .map(|(name, address)| format!("{{ name = \"{name}\", address = \"{address}\" }}"))
        .collect();
    format!(
        r#"[server]
workers = 1

[admin]
listen = "127.0.0.1:0"

[[listen]]
address = "{address}"

[cluster]
nodes = [{nodes}]
self = "{name}"

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
response_timeout = "5s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/c/"
proxy = "app"
cache = true
"#,
        address = nodes[me],
        nodes = list.join(", "),
        name = NAMES[me],
    )
}

struct Fleet {
    origin: SocketAddr,
    seen: Arc<Seen>,
    addresses: Vec<SocketAddr>,
    nodes: Vec<Squall>,
}

impl Fleet {
    fn start() -> Fleet {
        let (origin, seen) = start_origin();
        let addresses = node_addresses();
        let nodes = (0..3).map(|i| start_node(origin, &addresses, i)).collect();
        Fleet {
            origin,
            seen,
            addresses,
            nodes,
        }
    }
}

fn start_node(origin: SocketAddr, addresses: &[SocketAddr], i: usize) -> Squall {
    let node = Squall::start(&config(origin, addresses, i));
    assert_eq!(
        node.addr, addresses[i],
        "node {} listens where it was told",
        NAMES[i]
    );
    node
}

fn request(node: &Squall, method: &str, path: &str) -> Response {
    let mut stream = node.connect();
    roundtrip(
        &mut stream,
        &format!("{method} {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n"),
    )
}

fn metric(node: &Squall, name: &str) -> f64 {
    metric_sum(&admin_get(admin_addr(node), "/metrics").1, name)
}

#[test]
fn each_object_is_fetched_from_the_origin_once_across_the_fleet() {
    let fleet = Fleet::start();
    // Round robin over the nodes, as an L4 balancer would spread clients.
    for round in 0..2 {
        for i in 0..300 {
            let node = &fleet.nodes[(i + round) % 3];
            let path = format!("/c/object/{i}");
            let response = request(node, "GET", &path);
            assert_eq!(response.status, 200, "{path}");
            assert_eq!(response.body_text(), path);
            if round == 1 {
                // Served by the owner from its cache, whichever node was asked.
                assert_eq!(response.header("x-cache"), Some("HIT"), "{path}");
            }
        }
    }
    for i in 0..300 {
        let path = format!("/c/object/{i}");
        assert_eq!(
            fleet.seen.count(&path),
            1,
            "{path} fetched once in the fleet"
        );
    }
    // Every node owns a share and forwards the rest.
    for node in &fleet.nodes {
        let forwarded = metric(node, "squall_cluster_forwarded_total");
        let served = metric(node, "squall_cluster_served_for_peers_total");
        assert!(
            forwarded >= 100.0 && served >= 100.0,
            "{forwarded} {served}"
        );
    }
    let _ = fleet.origin;
}

#[test]
fn a_purge_through_one_node_removes_the_object_from_every_node() {
    let fleet = Fleet::start();
    let paths: Vec<String> = (0..12).map(|i| format!("/c/purged/{i}")).collect();
    for path in &paths {
        for node in &fleet.nodes {
            assert_eq!(request(node, "GET", path).status, 200);
        }
        assert_eq!(fleet.seen.count(path), 1, "{path}");
    }
    // Each object through each node in turn: purged through one, the next request through
    // any other is a MISS at the owner, and the origin is asked again.
    for (i, path) in paths.iter().enumerate() {
        let (through, next) = (&fleet.nodes[i % 3], &fleet.nodes[(i + 1) % 3]);
        let answer = request(through, "PURGE", path);
        assert_eq!(answer.status, 200, "{path}: {:?}", answer.body_text());
        let mut confirmed: Vec<&str> = answer
            .header("x-squall-purged-nodes")
            .unwrap_or("")
            .split(',')
            .collect();
        confirmed.sort_unstable();
        assert_eq!(confirmed, NAMES, "{path}");
        assert!(
            answer.body_text().starts_with("purged 1\n"),
            "{}",
            answer.body_text()
        );
        let again = request(next, "GET", path);
        assert_eq!(
            (again.status, again.header("x-cache")),
            (200, Some("MISS")),
            "{path}"
        );
        assert_eq!(fleet.seen.count(path), 2, "{path}");
    }
}

#[test]
fn a_killed_node_costs_no_error_and_owns_its_keys_again_when_restarted() {
    let mut fleet = Fleet::start();
    let paths: Vec<String> = (0..60).map(|i| format!("/c/kill/{i}")).collect();
    for path in &paths {
        assert_eq!(request(&fleet.nodes[0], "GET", path).status, 200);
    }
    let served_by_c = metric(&fleet.nodes[2], "squall_cluster_served_for_peers_total");
    assert!(served_by_c > 0.0, "c owns some keys");
    fleet.nodes[2].signal(libc::SIGKILL);
    assert!(fleet.nodes[2].wait_exit(Duration::from_secs(5)).is_some());
    // Every request through the others succeeds: c's keys go to the origin or move.
    for round in 0..3 {
        for (i, path) in paths.iter().enumerate() {
            let response = request(&fleet.nodes[(i + round) % 2], "GET", path);
            assert_eq!(response.status, 200, "{path} while c is down");
            assert_eq!(response.body_text(), *path);
        }
    }
    let failures: f64 = (fleet.nodes[..2].iter())
        .map(|n| metric(n, "squall_cluster_owner_failures_total"))
        .sum();
    assert!(
        failures >= 1.0,
        "the first forwards to c failed over: {failures}"
    );
    // Restarted (empty), c is tried again after its back-off and owns its keys again.
    fleet.nodes[2] = start_node(fleet.origin, &fleet.addresses, 2);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut back = false;
    while !back && Instant::now() < deadline {
        for (i, path) in paths.iter().enumerate() {
            assert_eq!(
                request(&fleet.nodes[i % 2], "GET", path).status,
                200,
                "{path}"
            );
        }
        back = metric(&fleet.nodes[2], "squall_cluster_served_for_peers_total") >= 5.0;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(back, "c serves its keys for the others again");
}
