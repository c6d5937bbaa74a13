//! The admin listener: Prometheus metrics that count what clients did, and a health check.

use std::io::Write;

use squall_e2e::{
    Squall, admin_addr, admin_get, hello_config, is_closed, read_response, roundtrip,
};

#[test]
fn metrics_count_good_and_bad_requests() {
    let squall = Squall::start(&hello_config("[admin]\nlisten = \"127.0.0.2:0\""));
    let admin = admin_addr(&squall);
    let mut good = squall.connect();
    for _ in 0..3 {
        assert_eq!(
            roundtrip(&mut good, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
            200
        );
    }
    let mut bad = squall.connect();
    bad.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut bad).unwrap().status, 400);
    assert!(is_closed(&mut bad));

    let (status, metrics) = admin_get(admin, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("squall_responses_total{worker=\"0\",class=\"2xx\"} 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_responses_total{worker=\"0\",class=\"4xx\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_bad_requests_total{worker=\"0\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_refused_total{worker=\"0\",status=\"400\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_connections_accepted_total{worker=\"0\"} 2\n"),
        "{metrics}"
    );
    assert_eq!(admin_get(admin, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(admin_get(admin, "/nope").0, 404);
}

#[test]
fn reloads_are_counted_and_healthz_fails_while_draining() {
    let mut squall = Squall::start(&hello_config("[admin]\nlisten = \"127.0.0.2:0\""));
    let admin = admin_addr(&squall);
    squall.rewrite_config("[server]\nworkerz = 1\n");
    squall.signal(libc::SIGHUP);
    assert!(squall.wait_log("reload refused", 1, std::time::Duration::from_secs(5)));
    let (_, metrics) = admin_get(admin, "/metrics");
    assert!(
        metrics.contains("squall_reloads_total{result=\"failed\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_reloads_total{result=\"ok\"} 0\n"),
        "{metrics}"
    );

    // An in-flight request keeps the drain going while the health check is asked.
    let mut busy = squall.connect();
    busy.write_all(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(admin_get(admin, "/healthz").0, 200);
    squall.signal(libc::SIGTERM);
    assert!(squall.wait_log("stopping", 1, std::time::Duration::from_secs(5)));
    assert_eq!(admin_get(admin, "/healthz"), (503, "draining\n".to_owned()));
    busy.write_all(b"ok").unwrap();
    assert_eq!(read_response(&mut busy).unwrap().status, 200);
    assert!(
        squall
            .wait_exit(std::time::Duration::from_secs(5))
            .unwrap()
            .success()
    );
}

/// One sample of the Prometheus text format: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// Parses the Prometheus text exposition format (version 0.0.4) strictly enough to catch what
/// a scraper would reject: every sample's family has HELP and TYPE lines before it, labels are
/// `name="value"` pairs, values are numbers, histogram buckets are cumulative and end in +Inf.
fn parse_prometheus(text: &str) -> Vec<Sample> {
    let mut typed = std::collections::HashMap::new();
    let mut helped = std::collections::HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.insert(rest.split(' ').next().unwrap().to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment: {line}");
        let (series, value) = line.rsplit_once(' ').expect("name and value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let labels = body
                    .split(',')
                    .map(|pair| {
                        let (k, v) = pair.split_once('=').expect("label=value");
                        let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                        (k.to_owned(), v.expect("quoted label value").to_owned())
                    })
                    .collect();
                (name.to_owned(), labels)
            }
            None => (series.to_owned(), Vec::new()),
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(&name)
            .to_owned();
        assert!(typed.contains_key(&family), "no TYPE for {family}");
        assert!(helped.contains(&family), "no HELP for {family}");
        samples.push((name, labels, value));
    }
    for (family, kind) in &typed {
        if kind != "histogram" {
            continue;
        }
        let buckets: Vec<f64> = samples
            .iter()
            .filter(|(n, _, _)| *n == format!("{family}_bucket"))
            .map(|(_, _, v)| *v)
            .collect();
        assert!(
            buckets.windows(2).all(|w| w[0] <= w[1]),
            "{family} not cumulative"
        );
        let count = samples
            .iter()
            .find(|(n, _, _)| *n == format!("{family}_count"))
            .map(|(_, _, v)| *v);
        assert_eq!(
            buckets.last().copied(),
            count,
            "{family}: +Inf bucket is the count"
        );
    }
    samples
}

fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| *v)
        .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text_and_match_the_traffic() {
    let config = hello_config("[admin]\nlisten = \"127.0.0.2:0\"").replace(
        "address = \"ADDR\"",
        "address = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]",
    );
    let squall = Squall::start(&config);
    let admin = admin_addr(&squall);
    let mut stream = squall.connect();
    for _ in 0..5 {
        assert_eq!(
            roundtrip(&mut stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
            200
        );
    }
    let tcp = tokio::net::TcpStream::connect(squall.addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    for _ in 0..3 {
        let mut ready = client.clone().ready().await.unwrap();
        let request = http::Request::get(format!("http://{}/b", squall.addr))
            .body(())
            .unwrap();
        let (response, _) = ready.send_request(request, true).unwrap();
        assert_eq!(response.await.unwrap().status(), 200);
    }
    let (_, text) = admin_get(admin, "/metrics");
    let samples = parse_prometheus(&text);
    let worker = [("worker", "0")];
    let requests = |protocol| {
        sample(
            &samples,
            "squall_requests_total",
            &[("worker", "0"), ("protocol", protocol)],
        )
    };
    assert_eq!(requests("http1"), 5.0);
    assert_eq!(requests("h2"), 3.0);
    let route = |label: &str| {
        sample(
            &samples,
            "squall_route_responses_total",
            &[("route", label), ("class", "2xx")],
        )
    };
    assert_eq!(route("* exact:/a"), 5.0);
    assert_eq!(route("* exact:/b"), 3.0);
    assert_eq!(sample(&samples, "squall_h2_streams_total", &worker), 3.0);
    assert_eq!(
        sample(&samples, "squall_h2_connections_total", &worker),
        1.0
    );
    assert_eq!(
        sample(&samples, "squall_request_duration_seconds_count", &[]),
        8.0
    );
    // Our two client connections, at least (the admin's is not counted).
    assert!(sample(&samples, "squall_connections_active", &worker) >= 2.0);
    let hash = |samples: &[Sample]| {
        samples
            .iter()
            .find(|(n, _, _)| n == "squall_config_info")
            .map(|(_, l, _)| l[0].1.clone())
            .unwrap()
    };
    let before = hash(&samples);

    squall.rewrite_config(&config.replace("body = \"A\"", "body = \"AA\""));
    squall.signal(libc::SIGHUP);
    assert!(squall.wait_log(
        "configuration reloaded",
        1,
        std::time::Duration::from_secs(5)
    ));
    let (_, text) = admin_get(admin, "/metrics");
    assert_ne!(
        hash(&parse_prometheus(&text)),
        before,
        "the hash follows the config"
    );
}

/// Fifty connections dribbling a request at the admin port do not delay `/healthz`: each admin
/// connection is served on its own, so a balancer's health check is answered at once.
#[test]
fn healthz_answers_at_once_while_fifty_connections_dribble_at_the_admin_port() {
    let lateness = squall_e2e::Lateness::start();
    let squall = Squall::start(&hello_config("[admin]\nlisten = \"127.0.0.2:0\""));
    let admin = admin_addr(&squall);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dribblers = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut slow: Vec<std::net::TcpStream> = (0..50)
                .map(|_| std::net::TcpStream::connect(admin).expect("connect to admin"))
                .collect();
            // A byte per connection every 100 ms, for at most 3 s.
            let request = b"GET /metrics HTTP/1.1\r\nHost: admin\r\nX-Slow: ";
            for i in 0..30 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                for stream in &mut slow {
                    let _ = stream.write_all(&[request[i.min(request.len() - 1)]]);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    let (status, body) = admin_get(admin, "/healthz");
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    dribblers.join().unwrap();
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    lateness.assert_within("/healthz", took, std::time::Duration::from_secs(1));
}

/// An admin connection that dribbles its request is cut when its total time (5 s) is up,
/// however often a byte arrives: a per-read timeout alone would let it hold on for ever.
#[test]
fn a_dribbling_admin_connection_is_cut_when_its_total_time_is_up() {
    let lateness = squall_e2e::Lateness::start();
    let squall = Squall::start(&hello_config("[admin]\nlisten = \"127.0.0.2:0\""));
    let admin = admin_addr(&squall);
    let mut slow = std::net::TcpStream::connect(admin).expect("connect to admin");
    slow.set_read_timeout(Some(std::time::Duration::from_millis(250)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let cut = loop {
        // A byte every 250 ms: never a pause near any per-read timeout.
        if slow.write_all(b"x").is_err() {
            break started.elapsed();
        }
        match std::io::Read::read(&mut slow, &mut buf) {
            Ok(0) => break started.elapsed(),
            Ok(n) => panic!("no answer expected to a request that never ends: {n} bytes"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break started.elapsed(),
            Err(_) => {}
        }
        let ceiling = lateness.allow(std::time::Duration::from_secs(10));
        assert!(
            started.elapsed() < ceiling,
            "still open after {ceiling:?} of dribbling"
        );
    };
    assert!(
        cut >= std::time::Duration::from_millis(4500),
        "cut early: {cut:?}"
    );
    lateness.assert_within("the cut", cut, std::time::Duration::from_secs(7));
}
