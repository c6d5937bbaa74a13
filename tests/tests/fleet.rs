//! A fleet on one machine (issue 16): three Squall nodes, each in a network namespace of its
//! own, behind HAProxy in TCP mode (`send-proxy-v2`, in a namespace too), in front of a
//! counting origin in the test process. One bridge in the root namespace joins them, with a
//! veth pair per namespace and addresses from a 10.X.Y.0/24 picked at random per run; names
//! are random too, so parallel runs cannot clash, and a Drop guard removes everything, also
//! when the test panics.
//!
//! Checks: 1,000 distinct objects requested through the balancer are each fetched from the
//! origin once across the fleet; a PURGE through the balancer removes an object from every
//! node; a node SIGKILLed under load costs only the requests in flight on it, its keys are
//! served by the others, and they return to it when it restarts; a TLS session made on one
//! node resumes on another (one `[tls] ticket_key_file` for all).
//!
//! Namespaces need root (CAP_NET_ADMIN): where they cannot be made the test fails, saying why;
//! it never passes without having run.

#[path = "support/origin.rs"]
mod origin;

use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use squall_e2e::{PathCounts, TempDir, metric_sum, openssl_cert, squall_bin, tool};

const NAMES: [&str; 3] = ["a", "b", "c"];
/// HAProxy's last octet; the nodes' are 10, 11, 12; the bridge (and origin) is 1.
const BALANCER: u8 = 20;

/// A random u64 from the standard library's per-process random hasher keys.
fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    hasher.finish()
}

/// Runs `ip ARGS`; the error names the command and what ip said.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = tool("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The bridge, the namespaces and their veths of one run; removed on drop.
struct Net {
    bridge: String,
    namespaces: Vec<String>,
    /// The first three octets of the run's /24.
    prefix: [u8; 3],
}

impl Net {
    /// One namespace per entry of `members` (named `sq<tag>-<member>`), each with a veth on
    /// the bridge and `10.X.Y.<octet>`; the bridge itself holds `10.X.Y.1`.
    fn create(members: &[(&str, u8)]) -> Result<Net, String> {
        let r = random();
        let tag = format!("{:06x}", r & 0xff_ffff);
        let mut prefix = [10, 100 + (r >> 24) as u8 % 100, (r >> 32) as u8];
        // Another /24 if the machine already has addresses in this one.
        let routes = Command::new("ip").args(["-4", "route"]).output();
        let routes = routes.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        while routes
            .as_deref()
            .unwrap_or("")
            .contains(&format!("10.{}.{}.", prefix[1], prefix[2]))
        {
            prefix[2] = prefix[2].wrapping_add(1);
        }
        let mut net = Net {
            bridge: format!("sqbr{tag}"),
            namespaces: Vec::new(),
            prefix,
        };
        let bridge = net.bridge.clone();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{}/24", net.ip(1)), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for (member, octet) in members {
            let ns = format!("sq{tag}-{member}");
            ip(&["netns", "add", &ns])?;
            net.namespaces.push(ns.clone());
            let (host, inside) = (format!("sq{tag}{member}h"), format!("sq{tag}{member}n"));
            ip(&[
                "link", "add", &host, "type", "veth", "peer", "name", &inside,
            ])?;
            ip(&["link", "set", &inside, "netns", &ns])?;
            ip(&["link", "set", &host, "master", &bridge, "up"])?;
            let address = format!("{}/24", net.ip(*octet));
            ip(&["-n", &ns, "addr", "add", &address, "dev", &inside])?;
            ip(&["-n", &ns, "link", "set", &inside, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn ip(&self, octet: u8) -> IpAddr {
        let [a, b, c] = self.prefix;
        IpAddr::V4(Ipv4Addr::new(a, b, c, octet))
    }

    fn namespace(&self, member: &str) -> &str {
        let suffix = format!("-{member}");
        (self.namespaces.iter())
            .find(|ns| ns.ends_with(&suffix))
            .expect("a namespace of the run")
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end, and with it the bridge's end.
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// A process started in a namespace with `ip netns exec` (which execs it: the child's PID is
/// the process's), killed by that PID on drop. Its stderr goes to `log`.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(ns: &str, program: &Path, args: &[&str], log: PathBuf) -> Proc {
        let file = std::fs::File::create(&log).expect("create a log file");
        let child = tool("ip")
            .args(["netns", "exec", ns])
            .arg(program)
            .args(args)
            .env("SQUALL_LOG", "info,squall=debug")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("ip netns exec");
        Proc { child, log }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Requests the origin saw, by path.
type Seen = PathCounts;

/// A counting hyper origin on `ip` (the bridge's address, in the root namespace): every path
/// is fresh for a minute and its body names it.
fn start_origin(ip: IpAddr) -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let address = SocketAddr::new(ip, 0).to_string();
    let addr = origin::tokio_origin_on(&address, 1, move |stream| {
        let seen = shared.clone();
        let handler = move |req: http::Request<Incoming>| {
            let seen = seen.clone();
            async move {
                let path = req.uri().path().to_owned();
                seen.hit(&path);
                let _ = req.into_body().collect().await;
                let response = http::Response::builder()
                    .header("cache-control", "max-age=60")
                    .header("surrogate-key", "fleet");
                Ok::<_, std::io::Error>(response.body(Full::new(Bytes::from(path))).unwrap())
            }
        };
        async move {
            let service = hyper::service::service_fn(handler);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    });
    (addr, seen)
}

/// One answer, read to the connection's end (`Connection: close`).
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// `METHOD path` to `addr` on a new connection; an error for anything but a whole answer.
fn fetch(addr: SocketAddr, method: &str, path: &str) -> Result<Answer, String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request =
        format!("{method} {path} HTTP/1.1\r\nHost: fleet.test\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or(format!("no head: {text:?}"))?;
    let status = head.get(9..12).and_then(|s| s.parse().ok());
    let status = status.ok_or(format!("no status: {head:?}"))?;
    let answer = Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    };
    let length: Option<usize> = answer.header("content-length").and_then(|v| v.parse().ok());
    if length.is_some_and(|l| l != answer.body.len()) {
        return Err(format!("short body: {text:?}"));
    }
    Ok(answer)
}

/// The fleet of one run. Fields drop in order: the processes, then the network.
struct Fleet {
    nodes: Vec<Option<Proc>>,
    balancer: Proc,
    dir: TempDir,
    seen: Arc<Seen>,
    origin: SocketAddr,
    net: Net,
}

impl Fleet {
    fn start() -> Fleet {
        let members: Vec<(&str, u8)> = (NAMES.iter().enumerate())
            .map(|(i, n)| (*n, 10 + i as u8))
            .chain([("lb", BALANCER)])
            .collect();
        let net = Net::create(&members).unwrap_or_else(|e| {
            panic!(
                "the fleet test needs network namespaces, a bridge and veth pairs (run it as \
                 root, with CAP_NET_ADMIN, iproute2 installed); cannot make them: {e}"
            )
        });
        let (origin, seen) = start_origin(net.ip(1));
        let dir = TempDir::new();
        let (cert, key) = openssl_cert(dir.path(), "fleet.test");
        let keys = dir.path().join("ticket.keys");
        let key_line = tool("openssl")
            .args(["rand", "-base64", "48"])
            .output()
            .expect("openssl rand")
            .stdout;
        std::fs::write(&keys, key_line).unwrap();
        for (i, name) in NAMES.iter().enumerate() {
            let text = node_config(&net, origin, i, &cert, &key, &keys);
            std::fs::write(dir.path().join(format!("{name}.toml")), text).unwrap();
        }
        std::fs::write(dir.path().join("haproxy.cfg"), haproxy_config(&net)).unwrap();
        let balancer = Proc::spawn(
            net.namespace("lb"),
            Path::new("haproxy"),
            &[
                "-db",
                "-f",
                dir.path().join("haproxy.cfg").to_str().unwrap(),
            ],
            dir.path().join("haproxy.log"),
        );
        let mut fleet = Fleet {
            nodes: Vec::new(),
            balancer,
            dir,
            seen,
            origin,
            net,
        };
        for i in 0..NAMES.len() {
            let node = fleet.start_node(i);
            fleet.nodes.push(Some(node));
        }
        fleet.wait_until(
            Duration::from_secs(10),
            "every node healthy through HAProxy",
            |f| f.served_by_each(),
        );
        // Each node probed the others before they were all started: wait until every node
        // holds every peer up, or a node would serve a peer's keys itself meanwhile.
        fleet.wait_until(
            Duration::from_secs(10),
            "every peer up on every node",
            |f| (0..NAMES.len()).all(|i| NAMES.iter().all(|p| *p == NAMES[i] || f.peer_up(i, p))),
        );
        fleet
    }

    fn start_node(&self, i: usize) -> Proc {
        let config = self.dir.path().join(format!("{}.toml", NAMES[i]));
        let log = self.dir.path().join(format!("{}.log", NAMES[i]));
        let node = Proc::spawn(
            self.net.namespace(NAMES[i]),
            squall_bin(),
            &["--config", config.to_str().unwrap()],
            log,
        );
        let admin = self.admin(i);
        let ready = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            TcpStream::connect_timeout(&admin, Duration::from_millis(200)).is_ok()
        });
        assert!(ready, "node {} did not start: {}", NAMES[i], node.log());
        node
    }

    fn balancer(&self) -> SocketAddr {
        SocketAddr::new(self.net.ip(BALANCER), 80)
    }

    fn admin(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.net.ip(10 + i as u8), 9090)
    }

    fn metric(&self, i: usize, name: &str) -> f64 {
        metric_sum(&self.metrics(i), name)
    }

    /// Node `i`'s `/metrics` (tried three times: a read of it over the veths was once reset).
    fn metrics(&self, i: usize) -> String {
        let mut errors = Vec::new();
        for _ in 0..3 {
            match fetch(self.admin(i), "GET", "/metrics") {
                Ok(answer) if answer.status == 200 => return answer.body,
                Ok(answer) => errors.push(format!("status {}", answer.status)),
                Err(e) => errors.push(e),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("/metrics of {}: {errors:?}\n{}", NAMES[i], self.logs());
    }

    /// Whether node `i` holds peer `peer` up (every worker).
    fn peer_up(&self, i: usize, peer: &str) -> bool {
        let metrics = self.metrics(i);
        let prefix = format!("squall_upstream_server_up{{upstream=\"cluster:{peer}\"");
        (metrics.lines())
            .filter(|l| l.starts_with(&prefix))
            .all(|l| l.ends_with(" 1"))
    }

    /// Whether six requests for `/whoami` through HAProxy reached every node.
    fn served_by_each(&self) -> bool {
        let mut names: Vec<String> = (0..6)
            .filter_map(|_| fetch(self.balancer(), "GET", "/whoami").ok())
            .filter_map(|a| node_named(&a.body))
            .collect();
        names.sort();
        names.dedup();
        names == NAMES
    }

    fn wait_until(&self, limit: Duration, what: &str, condition: impl Fn(&Fleet) -> bool) {
        let start = Instant::now();
        while !condition(self) {
            assert!(
                start.elapsed() < limit,
                "not within {limit:?}: {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn logs(&self) -> String {
        let mut text = format!("haproxy:\n{}\n", self.balancer.log());
        for (name, node) in NAMES.iter().zip(&self.nodes) {
            if let Some(node) = node {
                let log = node.log();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                text += &format!(
                    "{name}:\n{}\n",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        }
        text
    }
}

fn node_config(
    net: &Net,
    origin: SocketAddr,
    i: usize,
    cert: &Path,
    key: &Path,
    keys: &Path,
) -> String {
    let me = net.ip(10 + i as u8);
    let nodes: Vec<String> = (NAMES.iter().enumerate())
        .map(|(n, name)| {
            format!(
                "{{ name = \"{name}\", address = \"{}:8080\" }}",
                net.ip(10 + n as u8)
            )
        })
        .collect();
    let balancer = net.ip(BALANCER);
    let [x, y, z] = net.prefix;
    format!(
        r#"[server]
workers = 2

[admin]
listen = "{me}:9090"

[[listen]]
address = "{me}:80"
proxy_protocol = true
proxy_protocol_from = ["{balancer}/32"]

[[listen]]
address = "{me}:443"
tls = true
protocols = ["http1"]
proxy_protocol = true
proxy_protocol_from = ["{balancer}/32"]

[[listen]]
address = "{me}:8080"

[[certificate]]
hosts = ["fleet.test"]
cert = {cert:?}
key = {key:?}

[tls]
ticket_key_file = {keys:?}

[cache]
purge_allow = ["{x}.{y}.{z}.0/24"]

[cluster]
nodes = [{nodes}]
self = "{name}"
health_check = {{ path = "/health", interval = "200ms", fails = 2, passes = 1 }}

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
response_timeout = "5s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/health"
respond = {{ status = 200 }}

[[vhost.route]]
exact = "/whoami"
respond = {{ status = 200, body = "node={name};" }}

[[vhost.route]]
prefix = "/c/"
proxy = "app"
cache = true
"#,
        nodes = nodes.join(", "),
        name = NAMES[i],
    )
}

/// HAProxy in TCP mode: the PROXY protocol v2 to the nodes, their `[admin]` `/healthz`
/// checked every 200 ms, and a connection a dead node refuses retried on another node.
fn haproxy_config(net: &Net) -> String {
    let lb = net.ip(BALANCER);
    let servers = |port: u16| -> String {
        (NAMES.iter().enumerate())
            .map(|(i, name)| {
                format!(
                    "    server {name} {}:{port} send-proxy-v2 check port 9090 inter 200 fall 2 rise 1\n",
                    net.ip(10 + i as u8)
                )
            })
            .collect()
    };
    format!(
        "global\n    maxconn 4096\n\n\
         defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 30s\n    \
         timeout server 30s\n    retries 3\n    option redispatch 1\n\n\
         frontend edge\n    bind {lb}:80\n    default_backend squall\n\n\
         frontend edge_tls\n    bind {lb}:443\n    default_backend squall_tls\n\n\
         backend squall\n    balance roundrobin\n    option httpchk GET /healthz\n{}\n\
         backend squall_tls\n    balance roundrobin\n    option httpchk GET /healthz\n{}",
        servers(80),
        servers(443)
    )
}

/// One TLS 1.3 handshake through HAProxy with `openssl s_client`, asking `/whoami`: the node
/// that answered, and whether the session was resumed.
fn s_client(fleet: &Fleet, sess: (&str, &Path)) -> (String, bool) {
    let addr = SocketAddr::new(fleet.net.ip(BALANCER), 443);
    let request = b"GET /whoami HTTP/1.1\r\nHost: fleet.test\r\nConnection: close\r\n\r\n";
    let (text, resumed) = squall_e2e::s_client_tls13(addr, "fleet.test", sess, request);
    let node = node_named(&text).unwrap_or_else(|| panic!("no node name in {text}"));
    (node, resumed)
}

/// The node named in a `/whoami` body (`node=NAME;`).
fn node_named(text: &str) -> Option<String> {
    let at = text.find("node=")? + "node=".len();
    let name = &text[at..at + text[at..].find(';')?];
    NAMES.contains(&name).then(|| name.to_owned())
}

#[test]
fn a_fleet_behind_haproxy_shares_one_cache() {
    let mut fleet = Fleet::start();
    let lb = fleet.balancer();

    // 1,000 distinct objects through the balancer: each fetched from the origin once.
    for i in 0..1000 {
        let path = format!("/c/object/{i}");
        let answer = fetch(lb, "GET", &path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!((answer.status, answer.body.as_str()), (200, path.as_str()));
    }
    for i in 0..1000 {
        let path = format!("/c/object/{i}");
        let answer = fetch(lb, "GET", &path).unwrap();
        assert_eq!(answer.status, 200);
    }
    let counts: Vec<usize> = (0..1000)
        .map(|i| fleet.seen.count(&format!("/c/object/{i}")))
        .collect();
    let not_once: Vec<_> = (counts.iter().enumerate())
        .filter(|(_, c)| **c != 1)
        .collect();
    let owner_failures: Vec<f64> = (0..NAMES.len())
        .map(|i| fleet.metric(i, "squall_cluster_owner_failures_total"))
        .collect();
    assert!(
        not_once.is_empty(),
        "fetched other than once: {not_once:?}; owner failures {owner_failures:?}\n{}",
        fleet.logs()
    );
    for (i, name) in NAMES.iter().enumerate() {
        let forwarded = fleet.metric(i, "squall_cluster_forwarded_total");
        assert!(forwarded > 100.0, "{name} forwarded {forwarded}");
    }

    // A PURGE through the balancer removes the object from every node.
    for i in 0..6 {
        let path = format!("/c/object/{i}");
        let answer = fetch(lb, "PURGE", &path).unwrap();
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        let mut confirmed: Vec<&str> = answer
            .header("x-squall-purged-nodes")
            .unwrap_or("")
            .split(',')
            .collect();
        confirmed.sort_unstable();
        assert_eq!(confirmed, NAMES, "{path}");
        for _ in 0..3 {
            assert_eq!(fetch(lb, "GET", &path).unwrap().status, 200);
        }
        assert_eq!(
            fleet.seen.count(&path),
            2,
            "{path}: one miss at the origin after the purge"
        );
    }

    // A TLS session made on one node resumes on another.
    let session = fleet.dir.path().join("session");
    let (first, resumed) = s_client(&fleet, ("-sess_out", &session));
    assert!(!resumed);
    let mut elsewhere = None;
    for _ in 0..6 {
        let (node, resumed) = s_client(&fleet, ("-sess_in", &session));
        if node != first {
            elsewhere = Some((node, resumed));
            break;
        }
    }
    let (other, resumed) = elsewhere.expect("HAProxy's round robin reaches another node");
    assert!(resumed, "a session of {first} resumed on {other}");

    // SIGKILL c under load: only requests in flight on c may fail.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let loaders: Vec<_> = (0..4)
        .map(|t| {
            let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) && n < 5000 {
                    let path = format!("/c/load/{}", (n * 4 + t) % 400);
                    let started = Instant::now();
                    let failure = match fetch(lb, "GET", &path) {
                        Ok(a) if a.status == 200 && a.body == path => None,
                        Ok(a) => Some(format!("{path}: {}", a.status)),
                        Err(e) => Some(format!("{path}: {e}")),
                    };
                    match failure {
                        None => _ = ok.fetch_add(1, Ordering::Relaxed),
                        Some(what) => failed.lock().unwrap().push((started, what)),
                    }
                    n += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let before = ok.load(Ordering::Relaxed);
    let kill_sent = Instant::now();
    fleet.nodes[2].as_mut().unwrap().kill(); // SIGKILL, then waits until c is reaped
    // Reaped is not yet closed: the kernel tears an io_uring instance down after its process
    // has exited (a few ms, more on a loaded machine), and until then c's listening sockets,
    // held by the ring's operations, still complete handshakes, which the teardown then
    // resets; HAProxy (TCP mode) cannot redispatch a connection it has made. c is gone once
    // its port refuses.
    let c_port = SocketAddr::new(fleet.net.ip(12), 80);
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect_timeout(&c_port, Duration::from_millis(200)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "c's port accepts 5 s after c was reaped"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let dead = Instant::now();
    eprintln!(
        "c's port refused {:?} after the kill",
        dead.duration_since(kill_sent)
    );
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    for loader in loaders {
        loader.join().unwrap();
    }
    let after = ok.load(Ordering::Relaxed) - before;
    let failed = failed.lock().unwrap().clone();
    assert!(
        before > 20 && after > 100,
        "load went on: {before} before, {after} after"
    );
    // A request that fails was in flight on c: sent before c was gone. One sent after is
    // refused by c's closed port and HAProxy redispatches it to another node.
    let late: Vec<_> = (failed.iter())
        .filter(|(started, _)| *started >= dead)
        .map(|(started, what)| (started.duration_since(kill_sent), what))
        .collect();
    assert!(
        late.is_empty(),
        "requests sent after c died failed: {late:?}\n{}",
        fleet.logs()
    );
    assert!(failed.len() <= 16, "too many in flight on c: {failed:?}");
    let failed: Vec<&String> = failed.iter().map(|(_, what)| what).collect();
    assert!(
        !fleet.peer_up(0, "c") && !fleet.peer_up(1, "c"),
        "c marked down by a and b"
    );
    eprintln!("load: {before} before the kill, {after} after, failed: {failed:?}");

    // Restarted, c is up again for HAProxy and the peers, and owns its keys again.
    let c = fleet.start_node(2);
    fleet.nodes[2] = Some(c);
    fleet.wait_until(Duration::from_secs(10), "c up on a and b", |f| {
        f.peer_up(0, "c") && f.peer_up(1, "c")
    });
    fleet.wait_until(Duration::from_secs(10), "HAProxy sends c traffic", |f| {
        f.served_by_each()
    });
    for i in 0..300 {
        let path = format!("/c/back/{i}");
        assert_eq!(fetch(lb, "GET", &path).unwrap().status, 200, "{path}");
    }
    let served = fleet.metric(2, "squall_cluster_served_for_peers_total");
    assert!(
        served >= 30.0,
        "c serves its keys for the others again: {served}"
    );
    let _ = fleet.origin;
}
