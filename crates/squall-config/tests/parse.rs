//! Files that must parse: the contract's example, every option at once, and the defaults of an
//! almost empty file. Each asserts the whole `Config`, so a changed default or a dropped
//! option shows up here.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method, StatusCode};
use squall_config::*;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn header(name: &'static str, value: &'static str) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static(name),
        HeaderValue::from_static(value),
    )
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A route with no conditions, no cache and no header edits.
fn route(matcher: RouteMatch, action: Action) -> Route {
    Route {
        matcher,
        methods: None,
        headers: Vec::new(),
        action,
        cache: false,
        cache_ttl: None,
        request_no_cache: None,
        cache_set_cookie: CacheSetCookie::Pass,
        access: Access::default(),
        auth_basic: None,
        rate: None,
        request_headers: HeaderEdits::default(),
        response_headers: HeaderEdits::default(),
        compress: None,
        intercept_errors: false,
        allow_trace: false,
        upgrade: None,
        rewrite: None,
        timeouts: ProxyTimeouts::default(),
        body_bytes_max: None,
    }
}

#[test]
fn contract_example_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/full.toml");
    let config = match load(&path) {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    };
    let expected = Config {
        log: Log::default(),
        server: Server {
            workers: Workers::Auto,
            drain_timeout: secs(10),
            control: None,
            tcp_notsent_lowat: TCP_NOTSENT_LOWAT_DEFAULT,
            real_ip: None,
            error_pages: Vec::new(),
            request_id_header: None,
        },
        admin: Some(Admin {
            listen: addr("127.0.0.1:9901"),
        }),
        listen: vec![
            Listen {
                address: addr("127.0.0.1:8080"),
                tls: false,
                protocols: vec![Protocol::Http1, Protocol::H2c],
                proxy_protocol_from: Vec::new(),
            },
            Listen {
                address: addr("127.0.0.1:8443"),
                tls: true,
                protocols: vec![Protocol::H2, Protocol::Http1],
                proxy_protocol_from: Vec::new(),
            },
        ],
        certificate: vec![Certificate {
            hosts: vec!["example.test".into(), "*.example.test".into()],
            source: CertSource::Files {
                cert: PathBuf::from("/etc/squall/tls/example.pem"),
                key: PathBuf::from("/etc/squall/tls/example.key"),
            },
        }],
        limits: Limits::default(),
        cache: Cache::default(),
        upstream: vec![Upstream {
            name: "app".into(),
            servers: vec![UpstreamServer {
                address: ServerAddress::Ip(addr("127.0.0.1:9000")),
                weight: 1,
            }],
            balance: Balance::RoundRobin,
            hash_key: HashKey::Uri,
            connect_timeout: secs(2),
            response_timeout: secs(30),
            resolve_interval: secs(30),
            pool_idle_timeout: secs(60),
            pool_unsafe_idle_timeout: secs(1),
            health_check: None,
            tls: None,
            proxy_protocol: None,
            protocol: squall_config::OriginProtocol::Http1,
        }],
        vhost: vec![Vhost {
            hosts: vec!["*".into()],
            routes: vec![
                route(
                    RouteMatch::Exact("/".into()),
                    Action::Respond {
                        status: StatusCode::OK,
                        body: "Hello from Squall\n".into(),
                        headers: vec![header("content-type", "text/plain")],
                    },
                ),
                Route {
                    cache: true,
                    // A cached route keeps Surrogate-Control from clients; CDN-Cache-Control
                    // goes on to the next CDN.
                    response_headers: HeaderEdits {
                        set: Vec::new(),
                        remove: vec![HeaderName::from_static("surrogate-control")],
                        templates: Vec::new(),
                    },
                    ..route(
                        RouteMatch::Prefix("/".into()),
                        Action::Proxy {
                            upstream: "app".into(),
                        },
                    )
                },
            ],
            error_pages: Vec::new(),
        }],
        cluster: None,
        tls: Default::default(),
        quic: Quic::default(),
    };
    assert_eq!(config, expected);
}

#[test]
fn defaults_of_a_minimal_file() {
    let config = parse("[[listen]]\naddress = \"[::1]:80\"\n", "min.toml").unwrap();
    let expected = Config {
        log: Log::default(),
        server: Server {
            workers: Workers::Auto,
            drain_timeout: secs(10),
            control: None,
            tcp_notsent_lowat: TCP_NOTSENT_LOWAT_DEFAULT,
            real_ip: None,
            error_pages: Vec::new(),
            request_id_header: None,
        },
        admin: None,
        listen: vec![Listen {
            address: addr("[::1]:80"),
            tls: false,
            protocols: vec![Protocol::Http1, Protocol::H2c],
            proxy_protocol_from: Vec::new(),
        }],
        certificate: Vec::new(),
        limits: Limits {
            header_bytes_max: 16 * 1024,
            uri_bytes_max: 8 * 1024,
            body_bytes_max: 16 * 1024 * 1024,
            header_timeout: secs(10),
            idle_timeout: secs(60),
            request_rate: None,
            request_burst: None,
            connections_per_ip_max: None,
            auth_failures_max: 10,
            descriptor_reserve: DescriptorReserve::Auto,
            buffer_memory_max: BufferMemory::Auto,
            h2: H2Limits::default(),
        },
        cache: Cache {
            memory: 1 << 30,
            purge_allow: vec!["127.0.0.1/32".parse().unwrap(), "::1/128".parse().unwrap()],
            object_bytes_max: 16 << 20,
            x_cache: true,
            coalesce_timeout: secs(5),
            hit_for_pass: secs(120),
            request_no_cache: RequestNoCache::Honor,
            target_header: None,
            strip_cdn_cache_control: false,
            heuristic_freshness_max: Duration::ZERO,
        },
        upstream: Vec::new(),
        vhost: Vec::new(),
        cluster: None,
        tls: Default::default(),
        quic: Quic::default(),
    };
    assert_eq!(config, expected);
}

/// Every option of the contract, the commented-out ones included, with non-default values.
const ALL_OPTIONS: &str = r#"
[server]
workers = 4
drain_timeout = "1500ms"
control = "/run/squall/control.sock"
tcp_notsent_lowat = "64KiB"

[admin]
listen = "[::1]:9901"

[[listen]]
address = "0.0.0.0:443"
tls = true
protocols = ["http1"]

[[certificate]]
hosts = ["Example.TEST"]
cert = "tls/example.pem"
key = "tls/example.key"

[[certificate]]
hosts = ["*.demo.test", "127.0.0.1"]
self_signed = true

[limits]
header_bytes_max = 32768
uri_bytes_max = "4KiB"
body_bytes_max = 0
header_timeout = "5s"
idle_timeout = "2m"
request_rate = 1000
connections_per_ip_max = 100
descriptor_reserve = 500
buffer_memory_max = "256MiB"
h2_streams_max = 64
h2_resets_max = 50
h2_control_frames_max = 500
h2_empty_frames_max = 20
h2_continuation_frames_max = 8
h2_flood_window = "5s"
h2_stall_timeout = "15s"

[cache]
memory = "256MiB"
purge_allow = ["10.0.0.0/8", "192.0.2.7", "fd00::/8"]
object_bytes_max = "2MiB"
x_cache = false
coalesce_timeout = "750ms"
hit_for_pass = "0s"
strip_cdn_cache_control = true
heuristic_freshness_max = "1h"

[[upstream]]
name = "app"
servers = [{ address = "127.0.0.1:9000" }, { address = "[::1]:9001", weight = 3 }]
balance = "least_conn"
health_check = { path = "/healthz", interval = "2s", fails = 5, passes = 1 }

[[vhost]]
hosts = ["Example.test", "*.example.test"]

[[vhost.route]]
template = "/users/{name}/orders"
methods = ["GET", "HEAD", "M-SEARCH"]
headers = { "X-Canary" = "1" }
proxy = "app"
cache = true
cache_ttl = "60s"
request_headers = { set = { "x-forwarded-proto" = "https" }, remove = ["x-debug"] }
response_headers = { set = { "x-cache-node" = "edge-1" } }

[[vhost.route]]
regex = "^/v[0-9]+/"
redirect = { status = 301, location = "https://$host$request_uri" }

[[vhost.route]]
prefix = "/admin/"
block = 403

[[vhost]]
[[vhost.route]]
exact = "/teapot"
respond = { status = 418 }
"#;

#[test]
fn every_option() {
    let config = match parse(ALL_OPTIONS, "all.toml") {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        config.server,
        Server {
            workers: Workers::Count(NonZeroUsize::new(4).unwrap()),
            drain_timeout: Duration::from_millis(1500),
            control: Some("/run/squall/control.sock".into()),
            tcp_notsent_lowat: 64 * 1024,
            real_ip: None,
            error_pages: Vec::new(),
            request_id_header: None,
        }
    );
    assert_eq!(
        config.admin,
        Some(Admin {
            listen: addr("[::1]:9901")
        })
    );
    assert_eq!(
        config.listen,
        [Listen {
            address: addr("0.0.0.0:443"),
            tls: true,
            protocols: vec![Protocol::Http1],
            proxy_protocol_from: Vec::new(),
        }]
    );
    assert_eq!(
        config.certificate,
        [
            Certificate {
                hosts: vec!["example.test".into()],
                source: CertSource::Files {
                    cert: "tls/example.pem".into(),
                    key: "tls/example.key".into()
                },
            },
            Certificate {
                hosts: vec!["*.demo.test".into(), "127.0.0.1".into()],
                source: CertSource::SelfSigned
            },
        ]
    );
    assert_eq!(
        config.limits,
        Limits {
            header_bytes_max: 32768,
            uri_bytes_max: 4096,
            body_bytes_max: 0,
            header_timeout: secs(5),
            idle_timeout: secs(120),
            request_rate: Some(1000),
            request_burst: Some(1000),
            connections_per_ip_max: Some(100),
            auth_failures_max: 10,
            descriptor_reserve: DescriptorReserve::Fixed(500),
            buffer_memory_max: BufferMemory::Bytes(256 << 20),
            h2: H2Limits {
                streams_max: 64,
                resets_max: 50,
                control_frames_max: 500,
                empty_frames_max: 20,
                continuation_frames_max: 8,
                flood_window: secs(5),
                stall_timeout: secs(15),
            },
        }
    );
    assert_eq!(
        (
            config.cache.object_bytes_max,
            config.cache.x_cache,
            config.cache.coalesce_timeout,
            config.cache.hit_for_pass,
            config.cache.strip_cdn_cache_control,
            config.cache.heuristic_freshness_max,
        ),
        (
            2 << 20,
            false,
            Duration::from_millis(750),
            Duration::ZERO,
            true,
            Duration::from_secs(3600),
        )
    );
    let purge: Vec<String> = config
        .cache
        .purge_allow
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        (config.cache.memory, purge),
        (
            256 << 20,
            vec![
                "10.0.0.0/8".into(),
                "192.0.2.7/32".into(),
                "fd00::/8".into()
            ]
        )
    );
    assert_eq!(
        config.upstream,
        [Upstream {
            name: "app".into(),
            servers: vec![
                UpstreamServer {
                    address: ServerAddress::Ip(addr("127.0.0.1:9000")),
                    weight: 1
                },
                UpstreamServer {
                    address: ServerAddress::Ip(addr("[::1]:9001")),
                    weight: 3
                },
            ],
            balance: Balance::LeastConn,
            hash_key: HashKey::Uri,
            connect_timeout: secs(5),
            response_timeout: secs(60),
            resolve_interval: secs(30),
            pool_idle_timeout: secs(60),
            pool_unsafe_idle_timeout: secs(1),
            health_check: Some(HealthCheck {
                path: "/healthz".into(),
                interval: secs(2),
                fails: 5,
                passes: 1
            }),
            tls: None,
            proxy_protocol: None,
            protocol: squall_config::OriginProtocol::Http1,
        }]
    );
    let proxied = Route {
        methods: Some(vec![
            Method::GET,
            Method::HEAD,
            Method::from_bytes(b"M-SEARCH").unwrap(),
        ]),
        headers: vec![header("x-canary", "1")],
        cache: true,
        cache_ttl: Some(secs(60)),
        request_no_cache: None,
        request_headers: HeaderEdits {
            set: vec![header("x-forwarded-proto", "https")],
            remove: vec![HeaderName::from_static("x-debug")],
            templates: Vec::new(),
        },
        response_headers: HeaderEdits {
            set: vec![header("x-cache-node", "edge-1")],
            // A cached route keeps the targeted fields from clients (CDN-Cache-Control too:
            // strip_cdn_cache_control is on).
            remove: vec![
                HeaderName::from_static("cdn-cache-control"),
                HeaderName::from_static("surrogate-control"),
            ],
            templates: Vec::new(),
        },
        ..route(
            RouteMatch::Template("/users/{name}/orders".into()),
            Action::Proxy {
                upstream: "app".into(),
            },
        )
    };
    let redirect = Action::Redirect {
        status: StatusCode::MOVED_PERMANENTLY,
        location: "https://$host$request_uri".into(),
    };
    let expected_vhosts = [
        Vhost {
            hosts: vec!["example.test".into(), "*.example.test".into()],
            routes: vec![
                proxied,
                route(RouteMatch::Regex("^/v[0-9]+/".into()), redirect),
                route(
                    RouteMatch::Prefix("/admin/".into()),
                    Action::Block {
                        status: StatusCode::FORBIDDEN,
                    },
                ),
            ],
            error_pages: Vec::new(),
        },
        Vhost {
            hosts: vec!["*".into()],
            routes: vec![route(
                RouteMatch::Exact("/teapot".into()),
                Action::Respond {
                    status: StatusCode::IM_A_TEAPOT,
                    body: String::new(),
                    headers: Vec::new(),
                },
            )],
            error_pages: Vec::new(),
        },
    ];
    assert_eq!(config.vhost, expected_vhosts);
}

#[test]
fn redirect_status_defaults_to_302() {
    let text = "[[listen]]\naddress = \"127.0.0.1:80\"\n[[vhost]]\nroute = [{ prefix = \"/\", redirect = { location = \"/x\" } }]\n";
    let config = parse(text, "t.toml").unwrap();
    assert_eq!(
        config.vhost[0].routes[0].action,
        Action::Redirect {
            status: StatusCode::FOUND,
            location: "/x".into()
        }
    );
}

#[test]
fn load_resolves_relative_certificate_paths() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("squall-config-load");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("squall.toml");
    std::fs::write(&path, ALL_OPTIONS).unwrap();
    let config = load(&path).unwrap();
    let expected = CertSource::Files {
        cert: dir.join("tls/example.pem"),
        key: dir.join("tls/example.key"),
    };
    assert_eq!(config.certificate[0].source, expected);
    // `parse` has no directory to resolve against and leaves them as written.
    let parsed = parse(ALL_OPTIONS, "squall.toml").unwrap();
    let as_written = CertSource::Files {
        cert: "tls/example.pem".into(),
        key: "tls/example.key".into(),
    };
    assert_eq!(parsed.certificate[0].source, as_written);
}

#[test]
fn load_reports_an_unreadable_file() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("squall-config-missing/none.toml");
    let error = load(&path).unwrap_err();
    let expected = format!(
        "{}: cannot read: No such file or directory (os error 2)",
        path.display()
    );
    assert_eq!(error.to_string(), expected);
    assert_eq!((error.0[0].line, error.0[0].col), (0, 0));
}

#[test]
fn request_no_cache_in_cache_and_per_route() {
    let text = r#"
[[listen]]
address = "127.0.0.1:8080"

[cache]
request_no_cache = "ignore"

[[upstream]]
name = "app"
servers = [{ address = "127.0.0.1:9000" }]

[[vhost]]
[[vhost.route]]
prefix = "/strict/"
proxy = "app"
cache = true
request_no_cache = "honor"

[[vhost.route]]
prefix = "/"
proxy = "app"
cache = true
"#;
    let config = match parse(text, "test.toml") {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(config.cache.request_no_cache, RequestNoCache::Ignore);
    let routes = &config.vhost[0].routes;
    assert_eq!(routes[0].request_no_cache, Some(RequestNoCache::Honor));
    assert_eq!(routes[1].request_no_cache, None);
    // Absent: honoured, as RFC 9111 says.
    let config = parse("[[listen]]\naddress = \"127.0.0.1:8080\"\n", "t.toml").unwrap();
    assert_eq!(config.cache.request_no_cache, RequestNoCache::Honor);
}

#[test]
fn target_header_and_cache_set_cookie() {
    let text = r#"
[[listen]]
address = "127.0.0.1:8080"

[cache]
target_header = "Squall-Cache-Control"

[[upstream]]
name = "app"
servers = [{ address = "127.0.0.1:9000" }]

[[vhost]]
[[vhost.route]]
prefix = "/strip/"
proxy = "app"
cache = true
cache_set_cookie = "strip"
response_headers = { set = { "CDN-Cache-Control" = "max-age=5" }, remove = ["x-debug"] }

[[vhost.route]]
prefix = "/store/"
proxy = "app"
cache = true
cache_set_cookie = "store"

[[vhost.route]]
prefix = "/"
proxy = "app"
"#;
    let config = match parse(text, "test.toml") {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    };
    let ours = HeaderName::from_static("squall-cache-control");
    assert_eq!(config.cache.target_header, Some(ours.clone()));
    let routes = &config.vhost[0].routes;
    let modes: Vec<_> = routes.iter().map(|r| r.cache_set_cookie).collect();
    assert_eq!(
        modes,
        [
            CacheSetCookie::Strip,
            CacheSetCookie::Store,
            CacheSetCookie::Pass
        ]
    );
    // Cached routes hide the targeted fields meant for this cache alone from clients, except
    // one the route sets itself; CDN-Cache-Control goes on to the next CDN (RFC 9213 §3); an
    // uncached route passes them all through.
    let removed = |routes: &[Route], i: usize| routes[i].response_headers.remove.clone();
    let name = HeaderName::from_static;
    assert_eq!(
        removed(routes, 0),
        [name("x-debug"), ours.clone(), name("surrogate-control")]
    );
    assert_eq!(
        removed(routes, 1),
        [ours.clone(), name("surrogate-control")]
    );
    assert!(removed(routes, 2).is_empty());
    assert!(!config.cache.strip_cdn_cache_control);
    // strip_cdn_cache_control: cached routes hide it too, unless they set it.
    let strip = text.replace("[cache]\n", "[cache]\nstrip_cdn_cache_control = true\n");
    let config = parse(&strip, "test.toml").unwrap();
    let routes = &config.vhost[0].routes;
    assert_eq!(
        removed(routes, 0),
        [name("x-debug"), ours.clone(), name("surrogate-control")]
    );
    assert_eq!(
        removed(routes, 1),
        [ours, name("cdn-cache-control"), name("surrogate-control")]
    );
    assert!(removed(routes, 2).is_empty());
    // Absent: no field of our own, and `pass`.
    let config = parse("[[listen]]\naddress = \"127.0.0.1:8080\"\n", "t.toml").unwrap();
    assert_eq!(config.cache.target_header, None);
}

#[test]
fn descriptor_reserve_is_auto_or_a_count() {
    let reserve = |value: &str| {
        let text =
            format!("[[listen]]\naddress = \"[::1]:80\"\n[limits]\ndescriptor_reserve = {value}\n");
        parse(&text, "reserve.toml")
            .unwrap()
            .limits
            .descriptor_reserve
    };
    assert_eq!(reserve("\"auto\""), DescriptorReserve::Auto);
    assert_eq!(reserve("0"), DescriptorReserve::Fixed(0));
    assert_eq!(reserve("16777216"), DescriptorReserve::Fixed(1 << 24));
}

#[test]
fn buffer_memory_max_is_auto_or_a_size() {
    let budget = |value: &str| {
        let text =
            format!("[[listen]]\naddress = \"[::1]:80\"\n[limits]\nbuffer_memory_max = {value}\n");
        parse(&text, "budget.toml")
            .unwrap()
            .limits
            .buffer_memory_max
    };
    assert_eq!(budget("\"auto\""), BufferMemory::Auto);
    assert_eq!(budget("0"), BufferMemory::Bytes(0));
    assert_eq!(budget("\"64MiB\""), BufferMemory::Bytes(64 << 20));
    assert_eq!(budget("1048576"), BufferMemory::Bytes(1 << 20));
    // "auto" is an eighth of the machine's memory, at most 1 GiB; a number is itself.
    assert_eq!(BufferMemory::Auto.resolve(4 << 30), 512 << 20);
    assert_eq!(BufferMemory::Auto.resolve(64 << 30), BUFFER_MEMORY_AUTO_MAX);
    assert_eq!(BufferMemory::Auto.resolve(0), 1);
    assert_eq!(BufferMemory::Bytes(0).resolve(64 << 30), 0);
}

/// `h3` on a TLS listener, and `[quic]` with every key; absent, `[quic]` is its defaults.
#[test]
fn h3_listener_and_quic_section() {
    let text = r#"
[[certificate]]
hosts = ["a.test"]
self_signed = true

[[listen]]
address = "127.0.0.1:8443"
tls = true
protocols = ["h3", "h2", "http1"]

[quic]
retry = "always"
handshakes_max = 50
early_data = true
streams_max = 64
stream_window = "256KiB"
connection_window = "4MiB"
alt_svc_max_age = "1h"
gso = false
gro = false
steering = false
"#;
    let config = parse(text, "quic.toml").unwrap();
    let listen = &config.listen[0];
    assert_eq!(
        listen.protocols,
        vec![Protocol::H3, Protocol::H2, Protocol::Http1]
    );
    assert!(!Protocol::H3.is_tcp() && Protocol::H2.is_tcp());
    assert_eq!(Protocol::H3.alpn_id(), None, "h3 is never offered on TCP");
    assert_eq!(
        config.quic,
        Quic {
            retry: QuicRetry::Always,
            handshakes_max: 50,
            early_data: true,
            streams_max: 64,
            stream_window: 256 * 1024,
            connection_window: 4 << 20,
            alt_svc_max_age: secs(3600),
            gso: false,
            gro: false,
            steering: false,
        }
    );
    let plain = parse("[[listen]]\naddress = \"[::1]:80\"\n", "min.toml").unwrap();
    assert_eq!(plain.quic, Quic::default());
    assert_eq!(Quic::default().retry, QuicRetry::Load);
    assert!(!Quic::default().early_data, "0-RTT is off unless asked for");
    assert!(
        Quic::default().steering,
        "packets are steered unless asked not to"
    );
}

/// `allow` / `deny`: the most specific network decides, a tie is a deny, and a client in no
/// network is allowed only when there is no `allow`.
#[test]
fn access_rules_decide_by_the_most_specific_network() {
    let net = |s: &str| s.parse::<squall_config::IpNet>().unwrap();
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let rules = Access {
        allow: vec![net("10.0.0.0/8"), net("10.1.2.3"), net("::1")],
        deny: vec![net("10.1.0.0/16"), net("192.168.0.0/16")],
    };
    for (client, permitted) in [
        ("10.9.9.9", true),
        ("10.1.9.9", false),
        ("10.1.2.3", true),
        ("192.168.1.1", false),
        ("172.16.0.1", false),
        ("::1", true),
        ("::ffff:10.9.9.9", true),
        ("::ffff:10.1.9.9", false),
    ] {
        assert_eq!(rules.permits(ip(client)), permitted, "{client}");
    }
    let deny_only = Access {
        allow: Vec::new(),
        deny: vec![net("10.0.0.0/8")],
    };
    assert!(!deny_only.permits(ip("10.2.3.4")));
    assert!(deny_only.permits(ip("192.0.2.1")));
    assert!(Access::default().permits(ip("192.0.2.1")));
    let tie = Access {
        allow: vec![net("10.0.0.0/8")],
        deny: vec![net("10.0.0.0/8")],
    };
    assert!(!tie.permits(ip("10.0.0.1")), "a tie is a deny");
}

#[test]
fn auth_real_ip_and_route_rates_parse() {
    let text = r#"
[server]
real_ip = { header = "X-Forwarded-For", from = ["10.0.0.0/8", "::1"] }

[limits]
auth_failures_max = 3

[[listen]]
address = "127.0.0.1:8080"

[[vhost]]
[[vhost.route]]
prefix = "/staff/"
respond = { status = 200, body = "hi" }
auth_basic = { realm = "Staff", users_file = "users" }
request_rate = "600/m"
request_burst = 20
request_rate_key = "header:X-Api-Key"

[[vhost.route]]
prefix = "/"
respond = { status = 200, body = "hi" }
request_rate = "10/s"
"#;
    let mut config = squall_config::parse(text, "test.toml").unwrap();
    config.resolve_paths(Path::new("/etc/squall"));
    let real_ip = config.server.real_ip.as_ref().unwrap();
    assert_eq!(real_ip.header, "x-forwarded-for");
    assert_eq!(real_ip.from.len(), 2);
    assert_eq!(config.limits.auth_failures_max, 3);
    let staff = &config.vhost[0].routes[0];
    let auth = staff.auth_basic.as_ref().unwrap();
    assert_eq!(auth.realm, "Staff");
    assert_eq!(auth.users_file, Path::new("/etc/squall/users"));
    let rate = staff.rate.as_ref().unwrap();
    assert_eq!((rate.requests, rate.per, rate.burst), (600, secs(60), 20));
    assert_eq!(
        rate.key,
        RateKey::Header(HeaderName::from_static("x-api-key"))
    );
    let home = config.vhost[0].routes[1].rate.as_ref().unwrap();
    assert_eq!((home.requests, home.per, home.burst), (10, secs(1), 10));
    assert_eq!(home.key, RateKey::ClientIp);
    assert_eq!(Limits::default().auth_failures_max, 10);
}

#[test]
fn upstream_servers_by_name() {
    let text = "[[upstream]]\nname = \"app\"\nresolve_interval = \"5s\"\nservers = [\n  { address = \"API.internal.:8080\", weight = 2 },\n  { address = \"10.0.0.1:80\" },\n  { address = \"api.internal:8081\" },\n]\n[[listen]]\naddress = \"127.0.0.1:8080\"\n";
    let config = parse(text, "t.toml").unwrap();
    let upstream = &config.upstream[0];
    assert_eq!(upstream.resolve_interval, secs(5));
    let name = |port| ServerAddress::Name {
        host: "api.internal".into(),
        port,
    };
    assert_eq!(upstream.servers[0].address, name(8080));
    assert_eq!(upstream.servers[0].weight, 2);
    assert_eq!(
        upstream.servers[1].address,
        ServerAddress::Ip(addr("10.0.0.1:80"))
    );
    assert_eq!(upstream.servers[2].address, name(8081));
    assert_eq!(
        upstream.names(),
        [("api.internal", 8080), ("api.internal", 8081)]
    );
    assert_eq!(name(8080).to_string(), "api.internal:8080");
}
