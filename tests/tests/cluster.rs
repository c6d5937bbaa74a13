//! `[cluster]`: three Squall nodes on loopback ports share one cache. Each object is fetched
//! from the origin once across the fleet whichever node a client reaches; a PURGE through one
//! node removes the object from every node; a node killed with SIGKILL costs the others no
//! error (its keys go to the origin or move), and once restarted it owns its keys again.
//! Nodes with the same `[tls] ticket_key_file` resume each other's TLS sessions; probes
//! (`[cluster] health_check`) mark a dead peer down without traffic. An ignored test measures
//! a Zipf workload through one node and through three (docs/CLUSTER.md).

use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use squall_e2e::{PathCounts, Response, Squall, admin_addr, admin_get, metric_sum, roundtrip};

#[path = "support/origin.rs"]
mod origin;

const NAMES: [&str; 3] = ["a", "b", "c"];

/// Requests the origin saw, by path.
type Seen = PathCounts;

/// A counting origin: every path is fresh for a minute, its body names it.
fn start_origin() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let addr = origin::hyper_origin(move |req: http::Request<Incoming>| {
        let seen = shared.clone();
        async move {
            let path = req.uri().path().to_owned();
            seen.hit(&path);
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
    start_node_with(origin, addresses, i, "")
}

/// A node whose `[cluster]` section also has `extra` (keys of this node's cluster section),
/// and a `/health` route for probes.
fn start_node_with(origin: SocketAddr, addresses: &[SocketAddr], i: usize, extra: &str) -> Squall {
    let config = config(origin, addresses, i)
        .replace("[cluster]\n", &format!("[cluster]\n{extra}\n"))
        .replace(
            "[[vhost.route]]\nprefix",
            "[[vhost.route]]\nexact = \"/health\"\nrespond = { status = 200 }\n\n[[vhost.route]]\nprefix",
        );
    let node = Squall::start(&config);
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

/// A TLS node: one listener, the fleet's certificate, and `ticket_key_file` when given.
fn tls_node(cert: &Path, key: &Path, keys: Option<&Path>) -> Squall {
    let tls = keys.map_or(String::new(), |keys| {
        format!("[tls]\nticket_key_file = {keys:?}\n")
    });
    Squall::start(&format!(
        r#"[server]
workers = 2

[[listen]]
address = "ADDR"
tls = true
protocols = ["http1"]

[[certificate]]
hosts = ["fleet.test"]
cert = {cert:?}
key = {key:?}

{tls}
[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "Hello, fleet!" }}
"#
    ))
}

/// A ticket key file of `keys`, made by `openssl rand -base64 48`, mode 0600.
fn key_file(dir: &Path, name: &str, keys: &[&str]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, keys.join("\n") + "\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn new_ticket_key() -> String {
    let out = squall_e2e::tool("openssl")
        .args(["rand", "-base64", "48"])
        .output()
        .expect("openssl rand");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// One TLS 1.3 handshake and request with `openssl s_client`, saving the session to
/// `sess_out` or resuming `sess_in`; true when the session was resumed ("Reused").
fn s_client_resumed(node: &Squall, sess: (&str, &Path)) -> bool {
    let addr = node.tls_addr.expect("a TLS listener");
    let request = b"GET / HTTP/1.1\r\nHost: fleet.test\r\nConnection: close\r\n\r\n";
    let (text, resumed) = squall_e2e::s_client_tls13(addr, "fleet.test", sess, request);
    assert!(text.contains("Hello, fleet!"), "{text}");
    assert!(resumed || text.contains("New, TLSv1.3"), "{text}");
    resumed
}

#[test]
fn nodes_sharing_a_ticket_key_file_resume_each_others_sessions() {
    let dir = squall_e2e::TempDir::new();
    let (cert, key) = squall_e2e::openssl_cert(dir.path(), "fleet.test");
    let (shared_key, other_key, next_key) = (new_ticket_key(), new_ticket_key(), new_ticket_key());
    let shared = key_file(dir.path(), "shared.keys", &[&shared_key]);
    // b's own copy of the same key: what an operator's tooling pushes to each node, and what
    // lets the test rotate b alone (each node watches its file).
    let shared_b = key_file(dir.path(), "shared-b.keys", &[&shared_key]);
    let other = key_file(dir.path(), "other.keys", &[&other_key]);
    let a = tls_node(&cert, &key, Some(&shared));
    let b = tls_node(&cert, &key, Some(&shared_b));
    let c = tls_node(&cert, &key, Some(&other));
    let alone = tls_node(&cert, &key, None);
    let session = |name: &str| dir.path().join(name);

    // A session made on a resumes on b (another process, same key file), not on c (another
    // key) nor on a node with its own random key.
    assert!(!s_client_resumed(&a, ("-sess_out", &session("a"))));
    assert!(s_client_resumed(&b, ("-sess_in", &session("a"))), "a -> b");
    assert!(!s_client_resumed(&c, ("-sess_in", &session("a"))), "a -> c");
    assert!(!s_client_resumed(&alone, ("-sess_in", &session("a"))));
    // And back: b's tickets open on a.
    assert!(!s_client_resumed(&b, ("-sess_out", &session("b"))));
    assert!(s_client_resumed(&a, ("-sess_in", &session("b"))), "b -> a");

    // Rotation on b: a new key first, the shared one kept. b seals with the new key (which a
    // does not have yet) and still opens a's tickets.
    key_file(dir.path(), "shared-b.keys", &[&next_key, &shared_key]);
    b.signal(libc::SIGHUP);
    assert!(
        b.wait_log("configuration reloaded", 1, Duration::from_secs(10)),
        "{}",
        b.log()
    );
    assert!(
        s_client_resumed(&b, ("-sess_in", &session("a"))),
        "old key opens"
    );
    assert!(!s_client_resumed(&b, ("-sess_out", &session("b2"))));
    assert!(
        !s_client_resumed(&a, ("-sess_in", &session("b2"))),
        "a lacks the new key"
    );
    // The old key removed, and no signal this time: b sees the file change and reloads by
    // itself; a's tickets no longer open on b.
    let count = |needle: &str| b.log().matches(needle).count();
    let (changes, reloads) = (
        count("ticket_key_file changed"),
        count("configuration reloaded"),
    );
    key_file(dir.path(), "shared-b.keys", &[&next_key]);
    assert!(
        b.wait_log(
            "ticket_key_file changed",
            changes + 1,
            Duration::from_secs(10)
        ),
        "the change was not noticed: {}",
        b.log()
    );
    assert!(b.wait_log(
        "configuration reloaded",
        reloads + 1,
        Duration::from_secs(10)
    ));
    assert!(
        !s_client_resumed(&b, ("-sess_in", &session("a"))),
        "old key gone"
    );
    assert!(
        s_client_resumed(&b, ("-sess_in", &session("b2"))),
        "new key kept"
    );
}

#[test]
fn check_reports_a_bad_ticket_key_file_at_its_line_and_a_loose_mode() {
    let dir = squall_e2e::TempDir::new();
    let (cert, key) = squall_e2e::openssl_cert(dir.path(), "fleet.test");
    let good = key_file(dir.path(), "good.keys", &[&new_ticket_key()]);
    let bad = key_file(dir.path(), "bad.keys", &["# first line", "AAAA"]);
    let config = |keys: &Path| {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:0\"\ntls = true\n\n[[certificate]]\n\
             hosts = [\"fleet.test\"]\ncert = {cert:?}\nkey = {key:?}\n\n[tls]\n\
             ticket_key_file = {keys:?}\n"
        );
        let path = dir.path().join("squall.toml");
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(squall_e2e::squall_bin())
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), stderr)
    };
    assert_eq!(config(&good), (true, String::new()));
    let (ok, stderr) = config(&bad);
    assert!(!ok);
    let at = format!("{}:2:1: a ticket key is 48 bytes", bad.display());
    assert!(stderr.starts_with(&at), "{stderr}");
    let (ok, stderr) = config(&dir.path().join("missing.keys"));
    assert!(
        !ok && stderr.contains("squall.toml:11:19: cannot read ticket_key_file"),
        "{stderr}"
    );
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, stderr) = config(&good);
    assert!(ok && stderr.contains("has mode 0644"), "{stderr}");
}

/// Probes every 200 ms, down after 2 failed ones, up after 1 good one.
const PROBES: &str =
    "health_check = { path = \"/health\", interval = \"200ms\", fails = 2, passes = 1 }";

/// Whether `node` holds peer `peer` up, by its `squall_upstream_server_up` gauge.
fn peer_up(node: &Squall, peer: &str) -> bool {
    let metrics = admin_get(admin_addr(node), "/metrics").1;
    let prefix = format!("squall_upstream_server_up{{upstream=\"cluster:{peer}\"");
    let values: Vec<&str> = (metrics.lines())
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next())
        .collect();
    assert!(!values.is_empty(), "{prefix} in {metrics}");
    values.iter().all(|v| *v == "1")
}

/// Polls `condition` every 20 ms for at most `limit`; how long it took, or None.
fn within(limit: Duration, mut condition: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn probes_mark_a_killed_peer_down_without_traffic_and_up_when_it_returns() {
    let (origin, seen) = start_origin();
    let addresses = node_addresses();
    let mut nodes: Vec<Squall> = (0..3)
        .map(|i| start_node_with(origin, &addresses, i, PROBES))
        .collect();
    let paths: Vec<String> = (0..60).map(|i| format!("/c/probed/{i}")).collect();
    for path in &paths {
        assert_eq!(request(&nodes[0], "GET", path).status, 200);
    }
    assert!(metric(&nodes[2], "squall_cluster_served_for_peers_total") > 0.0);
    assert!(peer_up(&nodes[0], "c") && peer_up(&nodes[1], "c"));

    // No request at all: the probes alone notice, within 2 failed probes (about 400 ms, at
    // most 2 s on a loaded machine).
    nodes[2].signal(libc::SIGKILL);
    assert!(nodes[2].wait_exit(Duration::from_secs(5)).is_some());
    let down = within(Duration::from_secs(2), || {
        !peer_up(&nodes[0], "c") && !peer_up(&nodes[1], "c")
    });
    assert!(down.is_some(), "c still up on a or b after 2 s");
    // c's keys are served by the others, and no forward ever tried c.
    for (i, path) in paths.iter().enumerate() {
        let response = request(&nodes[i % 2], "GET", path);
        assert_eq!((response.status, response.body_text()), (200, path.clone()));
    }
    let failures: f64 = (nodes[..2].iter())
        .map(|n| metric(n, "squall_cluster_owner_failures_total"))
        .sum();
    assert_eq!(failures, 0.0, "every forward went to a live owner");

    // Restarted, c answers a probe and is up again, before any request reaches it.
    nodes[2] = start_node_with(origin, &addresses, 2, PROBES);
    let up = within(Duration::from_secs(3), || {
        peer_up(&nodes[0], "c") && peer_up(&nodes[1], "c")
    });
    assert!(up.is_some(), "c not up again on a and b after 3 s");
    for path in &paths {
        assert_eq!(request(&nodes[0], "GET", path).status, 200);
    }
    assert!(
        metric(&nodes[2], "squall_cluster_served_for_peers_total") > 0.0,
        "c owns its keys again"
    );
    eprintln!("marked down in {down:?}, up again in {up:?}");
    let _ = seen;
}

/// Zipf(α) over `n` ranks: a cumulative table and a xorshift generator, deterministic.
struct Zipf {
    cdf: Vec<f64>,
    state: u64,
}

impl Zipf {
    fn new(n: usize, alpha: f64, seed: u64) -> Zipf {
        let mut total = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|k| {
                total += 1.0 / (k as f64).powf(alpha);
                total
            })
            .collect();
        cdf.iter_mut().for_each(|c| *c /= total);
        Zipf {
            cdf,
            state: seed | 1,
        }
    }

    fn next(&mut self) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let u = (self.state >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1)
    }
}

/// An origin whose every path is fresh for an hour, with a 4 KiB body.
fn start_sized_origin() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let addr = origin::hyper_origin(move |req: http::Request<Incoming>| {
        let seen = shared.clone();
        async move {
            let path = req.uri().path().to_owned();
            seen.hit(&path);
            let response = http::Response::builder().header("cache-control", "max-age=3600");
            Ok(response
                .body(Full::new(Bytes::from(vec![b'z'; 4096])))
                .unwrap())
        }
    });
    (addr, seen)
}

/// One Zipf run: `nodes` nodes with `memory` of cache each (clustered or each alone), 8
/// keep-alive clients spread over the nodes. Origin fetches, hit ratio (X-Cache: HIT at the
/// node asked), and p50/p99 of the hits' latency in microseconds.
fn zipf_run(nodes: usize, memory: &str, clustered: bool, requests: usize) -> ZipfStats {
    let (origin, seen) = start_sized_origin();
    let addresses = node_addresses();
    let fleet: Vec<Squall> = (0..nodes)
        .map(|i| {
            let mut text = config(origin, &addresses[..nodes], i).replace(
                "[cluster]",
                &format!("[cache]\nmemory = \"{memory}\"\n\n[cluster]"),
            );
            if !clustered {
                let start = text.find("[cluster]").unwrap();
                let end = text.find("[[upstream]]").unwrap();
                text.replace_range(start..end, "");
            }
            Squall::start(&text)
        })
        .collect();
    let clients = 8;
    let results: Vec<(usize, Vec<u128>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|t| {
                let node = &fleet[t % nodes];
                scope.spawn(move || {
                    let mut zipf = Zipf::new(100_000, 0.9, 0x9e37_79b9 + t as u64);
                    let mut stream = node.connect();
                    let (mut hits, mut latencies) = (0, Vec::new());
                    for _ in 0..requests / clients {
                        let path = format!("/c/zipf/{}", zipf.next());
                        let start = Instant::now();
                        let request = format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n\r\n");
                        let response = roundtrip(&mut stream, &request);
                        assert_eq!(response.status, 200);
                        if response.header("x-cache") == Some("HIT") {
                            hits += 1;
                            latencies.push(start.elapsed().as_micros());
                        }
                    }
                    (hits, latencies)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let hits: usize = results.iter().map(|(h, _)| h).sum();
    let mut latencies: Vec<u128> = results.into_iter().flat_map(|(_, l)| l).collect();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let fetches: usize = seen.total();
    let per_node = requests / clients * clients;
    let sum = |name| fleet.iter().map(|n| metric(n, name)).sum::<f64>();
    let (entries, evictions) = (
        sum("squall_cache_entries"),
        sum("squall_cache_evictions_total"),
    );
    ZipfStats {
        fetches,
        hit_ratio: hits as f64 / per_node as f64,
        p50_us: at(0.50),
        p99_us: at(0.99),
        entries,
        evictions,
    }
}

/// What one Zipf run measured.
struct ZipfStats {
    fetches: usize,
    hit_ratio: f64,
    p50_us: u128,
    p99_us: u128,
    /// Cache entries held at the end, and evictions, summed over the nodes.
    entries: f64,
    evictions: f64,
}

#[test]
#[ignore = "a measurement, minutes long: cargo test -p squall-e2e --test cluster zipf -- --ignored --nocapture (docs/CLUSTER.md; SQUALL_ZIPF_REQUESTS=N for another count)"]
fn zipf_one_node_against_three_with_equal_memory() {
    let requests = std::env::var("SQUALL_ZIPF_REQUESTS").map_or(200_000, |n| n.parse().unwrap());
    let runs = [
        ("1 node, 48 MiB", 1, "48MiB", true),
        ("3 nodes clustered, 16 MiB each", 3, "16MiB", true),
        ("3 nodes alone, 16 MiB each", 3, "16MiB", false),
    ];
    println!(
        "Zipf α = 0.9 over 100,000 objects of 4 KiB, {requests} requests, 8 keep-alive clients"
    );
    println!(
        "| fleet | origin fetches | hit ratio | hit p50 | hit p99 | entries at the end | evictions |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, nodes, memory, clustered) in runs {
        let z = zipf_run(nodes, memory, clustered, requests);
        println!(
            "| {name} | {} | {:.1}% | {} µs | {} µs | {} | {} |",
            z.fetches,
            z.hit_ratio * 100.0,
            z.p50_us,
            z.p99_us,
            z.entries,
            z.evictions
        );
    }
}

/// `local_ttl`: a node keeps a borrowed copy of what it fetched from a key's owner and serves
/// it itself while the copy is young; without it, every request for the key goes to its owner.
#[test]
fn local_ttl_keeps_a_borrowed_copy_on_the_node_that_fetched_it() {
    // (local_ttl, forwards for the 5 requests after the first)
    for (local_ttl, forwards_expected) in [("2s", 0.0), ("0s", 5.0)] {
        let (origin, seen) = start_origin();
        let addresses = node_addresses();
        let extra = format!("local_ttl = \"{local_ttl}\"");
        let nodes: Vec<Squall> = (0..3)
            .map(|i| start_node_with(origin, &addresses, i, &extra))
            .collect();
        // A path node a does not own (found by asking: a forward shows in a's counter).
        let path = (0..64)
            .map(|i| format!("/c/hot/{i}"))
            .find(|path| {
                let before = metric(&nodes[0], "squall_cluster_forwarded_total");
                assert_eq!(request(&nodes[0], "GET", path).status, 200);
                metric(&nodes[0], "squall_cluster_forwarded_total") > before
            })
            .expect("some key is owned by another node");
        let forwarded = metric(&nodes[0], "squall_cluster_forwarded_total");
        for _ in 0..5 {
            let response = request(&nodes[0], "GET", &path);
            assert_eq!(response.status, 200);
            assert_eq!(response.body_text(), path);
        }
        let again = metric(&nodes[0], "squall_cluster_forwarded_total") - forwarded;
        assert!(
            (again - forwards_expected).abs() < 0.5,
            "local_ttl {local_ttl}: {again} more forwards for 5 requests"
        );
        assert_eq!(seen.count(&path), 1, "fetched from the origin once");
        if local_ttl == "2s" {
            // Once the copy is older than local_ttl, the owner is asked again (still no origin
            // fetch: the owner's copy is fresh for a minute).
            std::thread::sleep(Duration::from_millis(2_300));
            assert_eq!(request(&nodes[0], "GET", &path).status, 200);
            let after = metric(&nodes[0], "squall_cluster_forwarded_total") - forwarded;
            assert!(after >= 1.0, "the expired copy was served again");
            assert_eq!(seen.count(&path), 1);
        }
    }
}
