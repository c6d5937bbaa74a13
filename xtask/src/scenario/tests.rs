use super::*;

fn shipped() -> Vec<Scenario> {
    load_all(&crate::util::repo_root().join("bench/scenarios")).expect("shipped scenarios load")
}

fn routes(config: &Table) -> Vec<&Table> {
    vhosts(config)
        .flat_map(|vhost| {
            vhost
                .get("route")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(Value::as_table)
        .collect()
}

#[test]
fn files_are_checked_and_site_roots_point_at_their_folder() {
    let text = |files: &str| {
        format!(
            "description = \"d\"\n[load]\npath = \"/a\"\nconnections = 1\n[files]\n{files}\n\
             [squall]\nconfig = '''\n[[listen]]\naddress = \"127.0.0.1:1\"\n[[vhost]]\n\
             [[vhost.route]]\nprefix = \"/\"\nroot = \"SITE\"\n'''\n"
        )
    };
    let mut scenario = Scenario::parse("s", &text("\"a\" = 10"), Path::new(".")).unwrap();
    assert_eq!(scenario.files.get("a"), Some(&10));
    scenario.set_site_dir(PathBuf::from("/bench/sites/s"));
    let config = scenario.squall_config(1, None).unwrap();
    assert!(config.contains("root = \"/bench/sites/s\""), "{config}");
    assert!(Scenario::parse("s", &text("\"a/b\" = 1"), Path::new(".")).is_err());
    assert!(Scenario::parse("s", &text("\"a\" = 999999999"), Path::new(".")).is_err());
}

#[test]
fn the_issue_scenarios_ship() {
    let names: Vec<String> = shipped().into_iter().map(|s| s.name).collect();
    for name in [
        "h1-small",
        "h1-pipelined",
        "h1-close",
        "h1-10k-routes-static",
        "h1-10k-routes-prefix",
        "h1-10k-routes-regex",
        "h1-tls-small",
        "h1-tls-handshake",
    ] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
}

#[test]
fn ten_thousand_routes_and_the_request_hits_the_5000th() {
    for scenario in shipped()
        .iter()
        .filter(|s| s.name.starts_with("h1-10k-routes"))
    {
        assert_eq!(scenario.route_count(), 10_000, "{}", scenario.name);
        let table = scenario.squall_table(1);
        let target = routes(&table)[4_999];
        let pattern = ["exact", "prefix", "regex"]
            .iter()
            .find_map(|kind| target.get(*kind).and_then(Value::as_str))
            .expect("a matcher");
        assert!(pattern.contains("/4999"), "{}: {pattern}", scenario.name);
        let path = &scenario.load.path;
        // The path carries the 5,000th route's number, and no shorter one as a whole segment.
        assert!(
            path.contains("/4999") && !path.contains("/4999/4"),
            "{path}"
        );
    }
}

#[test]
fn the_harness_owns_the_listen_address() {
    for scenario in shipped() {
        let text = scenario.squall_config(45_678, None).expect("serializes");
        let parsed: Table = toml::from_str(&text).expect("round-trips");
        let listen = &parsed["listen"].as_array().expect("listen")[0];
        assert_eq!(
            listen["address"].as_str(),
            Some("127.0.0.1:45678"),
            "{}",
            scenario.name
        );
        assert_eq!(
            parsed["server"]["workers"].as_integer(),
            Some(1),
            "{}",
            scenario.name
        );
    }
}

#[test]
fn the_tls_scenarios_speak_tls_to_a_self_signed_tls_listener() {
    let all = shipped();
    let tls: Vec<&Scenario> = all.iter().filter(|s| s.load.tls).collect();
    assert!(
        tls.len() >= 2,
        "{:?}",
        tls.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    for scenario in tls {
        let table = scenario.squall_table(45_678);
        assert!(listen_tls(&table), "{}", scenario.name);
        assert_eq!(scenario.load.scheme(), "https");
        let certificates = table["certificate"].as_array().expect("[[certificate]]");
        assert_eq!(certificates.len(), 1, "{}", scenario.name);
        assert_eq!(certificates[0]["self_signed"].as_bool(), Some(true));
        let listen = &table["listen"].as_array().expect("listen")[0];
        assert_eq!(listen["address"].as_str(), Some("127.0.0.1:45678"));
        assert_eq!(
            listen["tls"].as_bool(),
            Some(true),
            "the port change keeps tls"
        );
    }
    let by_name = |name: &str| {
        all.iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} ships"))
    };
    let small = by_name("h1-tls-small");
    assert!(!small.load.close && !small.load.new_client_per_request());
    let handshake = by_name("h1-tls-handshake");
    assert!(handshake.load.close && handshake.load.new_client_per_request());
    assert!(!by_name("h1-small").load.tls);
    assert_eq!(by_name("h1-small").load.scheme(), "http");
}

#[test]
fn the_http2_and_cache_scenarios_are_what_they_say() {
    let all = shipped();
    let by_name = |name: &str| {
        all.iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} ships"))
    };
    for (name, tls, streams) in [
        ("h2c-small", false, 10),
        ("h2c-small-m100", false, 100),
        ("h2-tls-small", true, 10),
        ("h2-tls-small-m100", true, 100),
        ("h2-tls-cache-hit-1k", true, 10),
    ] {
        let load = &by_name(name).load;
        assert_eq!(load.protocol, Protocol::H2, "{name}");
        assert_eq!(
            (load.tls, load.streams, load.connections),
            (tls, streams, 100)
        );
        let offered = listen_protocols(&by_name(name).squall_table(1));
        assert!(offered.iter().any(|p| p == "http1"), "{name}: {offered:?}");
    }
    assert_eq!(by_name("h1-small").load.protocol, Protocol::H1);
    for (name, bytes) in [
        ("h1-cache-hit-1k", 1024),
        ("h1-cache-hit-64k", 65_536),
        ("h2-tls-cache-hit-1k", 1024),
        ("h2-tls-cache-hit-64k", 65_536),
        ("h2-tls-cache-hit-1m", 1_048_576),
        ("h3-cache-hit-1k", 1024),
        ("h3-cache-hit-64k", 65_536),
    ] {
        let scenario = by_name(name);
        let origin = scenario.origin.as_ref().expect("an origin");
        assert_eq!(
            (origin.body.as_ref(), origin.body_bytes),
            (None, Some(bytes))
        );
        assert_eq!(origin.headers["cache-control"], "max-age=3600");
        let mut scenario = scenario.clone();
        scenario.set_origin_addr(([127, 0, 0, 1], 4_321).into());
        let table = scenario.squall_table(1);
        let route = routes(&table)[0];
        assert_eq!(route["cache"].as_bool(), Some(true), "{name}");
        let server = &table["upstream"][0]["servers"][0];
        assert_eq!(server["address"].as_str(), Some("127.0.0.1:4321"));
    }
}

#[test]
fn the_http2_origin_scenarios_are_what_they_say() {
    let all = shipped();
    let by_name = |name: &str| {
        all.iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} ships"))
    };
    for (name, client, tls, protocol) in [
        ("h1-proxy-h2c", Protocol::H1, false, "h2c"),
        ("h2-proxy-h2c", Protocol::H2, false, "h2c"),
        ("h1-proxy-h2-tls", Protocol::H1, true, "h2"),
    ] {
        let scenario = by_name(name);
        assert_eq!(scenario.load.protocol, client, "{name}");
        let origin = scenario.origin.as_ref().expect("an origin");
        assert!(origin.h2 && origin.tls == tls, "{name}");
        assert_eq!(origin.body.as_deref(), Some("Hello, world!"));
        let table = scenario.squall_table(1);
        let upstream = &table["upstream"][0];
        assert_eq!(upstream["protocol"].as_str(), Some(protocol), "{name}");
        assert_eq!(
            upstream.get("tls").and_then(Value::as_bool),
            tls.then_some(true)
        );
    }
    let load = &by_name("h2-proxy-h2c").load;
    assert_eq!((load.connections, load.streams), (16, 8));
    let load = &by_name("h1-proxy-h2c").load;
    assert_eq!((load.connections, load.streams), (64, 1));
}

#[test]
fn the_listener_must_offer_the_loads_protocol() {
    let text = |load: &str, listen: &str| {
        format!(
            "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n{load}\n\
             [squall]\nconfig = '''\n[[listen]]\naddress = \"x\"\n{listen}\n'''\n"
        )
    };
    let parse =
        |load: &str, listen: &str| Scenario::parse("t", &text(load, listen), Path::new("."));
    assert!(parse("protocol = \"h2\"", "protocols = [\"http1\", \"h2c\"]").is_ok());
    // Without `protocols`, CONFIG.md's defaults: http1 and h2c, or h2 and http1 with TLS.
    assert!(parse("protocol = \"h2\"", "").is_ok());
    assert!(parse("protocol = \"h2\"\ntls = true", "tls = true").is_ok());
    let err = parse("protocol = \"h2\"", "protocols = [\"http1\"]").expect_err("no h2c");
    assert!(format!("{err:#}").contains("speaks h2c"), "{err:#}");
    assert!(parse("", "protocols = [\"h2c\"]").is_err());
    assert!(parse("protocol = \"h3\"", "").is_err());
    // HTTP/3 needs TLS, an h3 listener, and h2 beside it for the probe over TCP.
    let h3 = "protocol = \"h3\"\ntls = true";
    let all = "tls = true\nprotocols = [\"h2\", \"http1\", \"h3\"]";
    let load = parse(h3, all).expect("valid").load;
    assert_eq!(
        (load.listener_protocol(), load.application_protocols()),
        ("h3", &["h3"][..])
    );
    assert_eq!(load.over(), " over QUIC (h3)");
    let err = parse("protocol = \"h3\"", "protocols = [\"h2\", \"h3\"]").expect_err("no TLS");
    assert!(format!("{err:#}").contains("tls = true"), "{err:#}");
    let err = parse(h3, "tls = true").expect_err("no h3 listener");
    assert!(format!("{err:#}").contains("speaks h3"), "{err:#}");
    let err = parse(h3, "tls = true\nprotocols = [\"http1\", \"h3\"]").expect_err("no h2");
    assert!(format!("{err:#}").contains("list \"h2\" too"), "{err:#}");
    assert!(parse(&format!("{h3}\nclose = true"), all).is_err());
    let close = parse("protocol = \"h2\"\nclose = true", "").expect_err("close");
    assert!(
        format!("{close:#}").contains("Connection: close"),
        "{close:#}"
    );
}

#[test]
fn origin_sections() {
    let text = |origin: &str| {
        format!(
            "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n[origin]\n{origin}\n\
             [squall]\nconfig = '''\n[[listen]]\naddress = \"x\"\n'''\n"
        )
    };
    let parse = |origin: &str| Scenario::parse("t", &text(origin), Path::new("."));
    let written = parse("body = \"x\"").expect("valid");
    let section = written.origin.expect("an origin");
    assert_eq!(section.body.as_deref(), Some("x"));
    assert!(section.headers.is_empty());
    assert!(parse("body_bytes = 10\nheaders = { \"cache-control\" = \"max-age=1\" }").is_ok());
    assert!(parse("").is_err());
    assert!(parse("body = \"x\"\nbody_bytes = 1").is_err());
    assert!(parse("body_bytes = 100000000").is_err());
    let text = parse("text_bytes = 65536").expect("valid").origin;
    assert_eq!(text.expect("an origin").text_bytes, Some(65_536));
    assert!(parse("text_bytes = 1\nbody_bytes = 1").is_err());
    assert!(parse("text_bytes = 1\nbody = \"x\"").is_err());
    assert!(parse("text_bytes = 100000000").is_err());
    assert!(parse("body = \"x\"\nheaders = { \"a b\" = \"c\" }").is_err());
    assert!(parse("body = \"x\"\nheaders = { \"a\" = \"$c\" }").is_err());
}

#[test]
fn upstreams_to_the_origin_speak_what_it_serves() {
    let text = |origin: &str, upstream: &str| {
        format!(
            "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n\
             [origin]\nbody = \"x\"\n{origin}\n[squall]\nconfig = '''\n\
             [[listen]]\naddress = \"x\"\n[[upstream]]\nname = \"app\"\n\
             servers = [{{ address = \"ORIGIN\" }}]\n{upstream}\n'''\n"
        )
    };
    let parse = |origin: &str, upstream: &str| {
        Scenario::parse("t", &text(origin, upstream), Path::new("."))
    };
    let h2c = parse("h2 = true", "protocol = \"h2c\"").expect("valid");
    assert!(h2c.origin.expect("an origin").h2);
    assert!(parse("", "").is_ok());
    assert!(parse("tls = true", "tls = true").is_ok());
    let h2_tls = "tls = true\nh2 = true";
    assert!(parse(h2_tls, "tls = true\nprotocol = \"h2\"").is_ok());
    // Over TLS the HTTP/2 origin offers http/1.1 too.
    assert!(parse(h2_tls, "tls = true").is_ok());
    assert!(parse(h2_tls, "tls = true\nprotocol = \"auto\"").is_ok());
    let err = parse("h2 = true", "").expect_err("HTTP/1.1 to an h2c origin");
    assert!(format!("{err:#}").contains("say protocol"), "{err:#}");
    let err = parse("", "protocol = \"h2c\"").expect_err("h2c to an HTTP/1.1 origin");
    assert!(format!("{err:#}").contains("no h2 = true"), "{err:#}");
    assert!(parse("tls = true", "tls = true\nprotocol = \"h2\"").is_err());
    let err = parse(h2_tls, "protocol = \"h2c\"").expect_err("cleartext to https");
    assert!(format!("{err:#}").contains("must agree"), "{err:#}");
    assert!(parse("h2 = true", "tls = true\nprotocol = \"h2\"").is_err());
    assert!(parse("h2 = \"yes\"", "").is_err());
}

#[test]
fn tls_in_the_load_and_in_the_listener_must_agree() {
    let text = |load: &str, listen: &str| {
        format!(
            "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n{load}\n\
             [squall]\nconfig = '''\n[[listen]]\naddress = \"x\"\n{listen}\n'''\n"
        )
    };
    let parse =
        |load: &str, listen: &str| Scenario::parse("t", &text(load, listen), Path::new("."));
    let tls = parse("tls = true", "tls = true").expect("valid");
    assert!(tls.load.tls && tls.load.tls_resumption);
    assert!(!tls.load.new_client_per_request());
    let err = parse("tls = true", "").expect_err("a cleartext listener");
    assert!(format!("{err:#}").contains("must agree"), "{err:#}");
    assert!(parse("", "tls = true").is_err());
    assert!(parse("tls = false", "tls = false").is_ok());
    let full = parse(
        "tls = true\nclose = true\ntls_resumption = false",
        "tls = true",
    )
    .expect("valid");
    assert!(full.load.new_client_per_request());
    // Without TLS or without close there is no session to resume.
    let err = parse("tls = true\ntls_resumption = false", "tls = true").expect_err("close");
    assert!(format!("{err:#}").contains("tls_resumption"), "{err:#}");
    assert!(parse("close = true\ntls_resumption = false", "").is_err());
    assert!(parse("tls = \"yes\"", "tls = true").is_err());
}

#[test]
fn templates_and_errors() {
    let text = r#"
description = "d"
[load]
path = "/a/2"
connections = 4
[squall]
config = '''
[[listen]]
address = "x"
[[vhost]]
hosts = ["*"]
[[vhost.route]]
prefix = "/"
respond = { status = 404 }
'''
[squall.routes]
count = 3
route = { exact = "/a/{n}", respond = { body = "n={n}" } }
"#;
    let scenario = Scenario::parse("t", text, Path::new(".")).expect("valid");
    let table = scenario.squall_table(9);
    let all = routes(&table);
    assert_eq!(all.len(), 4);
    assert_eq!(all[2]["exact"].as_str(), Some("/a/2"));
    assert_eq!(all[2]["respond"]["body"].as_str(), Some("n=2"));
    assert_eq!(all[3]["prefix"].as_str(), Some("/"));
    assert_eq!(scenario.load.streams, 1);
    assert_eq!(scenario.load.expect_status, 200);
    let unknown = text.replace("connections = 4", "connections = 4\nconections = 5");
    assert!(Scenario::parse("t", &unknown, Path::new(".")).is_err());
    let relative = text.replace("path = \"/a/2\"", "path = \"a\"");
    assert!(Scenario::parse("t", &relative, Path::new(".")).is_err());
}

#[test]
fn config_file_beside_the_scenario() {
    let dir = std::env::temp_dir().join(format!("xtask-scenario-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    fs::write(dir.join("t.squall.toml"), "[[listen]]\naddress = \"x\"\n").expect("write");
    let text = "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n\
                [squall]\nconfig_file = \"t.squall.toml\"\n";
    let scenario = Scenario::parse("t", text, &dir);
    fs::remove_dir_all(&dir).expect("cleanup");
    assert_eq!(scenario.expect("valid").route_count(), 0);
}

#[test]
fn the_http3_scenarios_are_what_they_say() {
    let all = shipped();
    let by_name = |name: &str| {
        all.iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} ships"))
    };
    for (name, twin) in [
        ("h3-small", "h2-tls-small"),
        ("h3-small-nogso", "h2-tls-small"),
        ("h3-cache-hit-1k", "h2-tls-cache-hit-1k"),
        ("h3-cache-hit-64k", "h2-tls-cache-hit-64k"),
        ("h3-cache-hit-64k-nogso", "h2-tls-cache-hit-64k"),
    ] {
        let (h3, twin) = (by_name(name), by_name(twin));
        let load = &h3.load;
        assert_eq!((load.protocol, load.tls), (Protocol::H3, true), "{name}");
        assert_eq!(
            (&load.path, load.connections, load.streams),
            (&twin.load.path, twin.load.connections, twin.load.streams),
            "{name}: the load"
        );
        assert!(!load.close && load.headers.is_empty(), "{name}");
        let table = h3.squall_table(45_678);
        // QUIC on UDP beside h2 and http/1.1 on TCP (the probe).
        assert_eq!(
            listen_protocols(&table),
            ["h2", "http1", "h3"],
            "{name}: the listener"
        );
        let certificates = table["certificate"].as_array().expect("[[certificate]]");
        assert_eq!(certificates[0]["self_signed"].as_bool(), Some(true));
        // The same answer as the twin: its routes, and its origin when it has one.
        let twin_table = twin.squall_table(45_678);
        assert_eq!(routes(&table), routes(&twin_table), "{name}: routes");
        assert_eq!(h3.origin, twin.origin, "{name}: origin");
        let gso = table
            .get("quic")
            .and_then(|quic| quic.get("gso"))
            .and_then(Value::as_bool);
        assert_eq!(gso, name.ends_with("-nogso").then_some(false), "{name}");
    }
    let small = &by_name("h3-small").load;
    assert_eq!((small.connections, small.streams), (100, 10));
    assert_eq!(by_name("h3-small-nogso").load, *small);
    let large = &by_name("h3-cache-hit-64k").load;
    assert_eq!((large.connections, large.streams), (16, 4));
    assert_eq!(by_name("h3-cache-hit-64k-nogso").load, *large);
    let origin = by_name("h3-cache-hit-64k")
        .origin
        .clone()
        .expect("an origin");
    assert_eq!(origin.body_bytes, Some(65_536));
}

/// `[tls] engine` in a scenario's Squall config, if set.
fn tls_engine(config: &Table) -> Option<&str> {
    config.get("tls")?.get("engine")?.as_str()
}

#[test]
fn the_buffered_engine_scenarios_are_twins_on_the_other_engine() {
    let all = shipped();
    let by_name = |name: &str| {
        all.iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} ships"))
    };
    for twin in ["h2-tls-small", "h2-tls-cache-hit-64k"] {
        let name = format!("{twin}-buffered");
        let (buffered, twin) = (by_name(&name), by_name(twin));
        assert_eq!(buffered.load, twin.load, "{name}: the load");
        assert_eq!(buffered.origin, twin.origin, "{name}: the origin");
        let (table, twin_table) = (buffered.squall_table(45_678), twin.squall_table(45_678));
        assert_eq!(routes(&table), routes(&twin_table), "{name}: routes");
        assert_eq!(
            listen_protocols(&table),
            listen_protocols(&twin_table),
            "{name}: the listener"
        );
        assert_eq!(tls_engine(&table), Some("buffered"), "{name}");
        assert_eq!(
            tls_engine(&twin_table),
            None,
            "{name}: the twin runs the default"
        );
    }
}

#[test]
fn workers_are_set_in_the_server_table() {
    let mut with: Table =
        toml::from_str("[server]\nworkers = 1\ndrain_timeout = \"1s\"\n").expect("valid toml");
    set_workers(&mut with, 4);
    assert_eq!(with["server"]["workers"].as_integer(), Some(4));
    assert_eq!(with["server"]["drain_timeout"].as_str(), Some("1s"));
    let mut without = Table::new();
    set_workers(&mut without, 2);
    assert_eq!(without["server"]["workers"].as_integer(), Some(2));
    let small = shipped()
        .into_iter()
        .find(|s| s.name == "h1-small")
        .expect("shipped");
    let text = small.squall_config(9, Some(3)).expect("serializes");
    let config: Table = toml::from_str(&text).expect("valid toml");
    assert_eq!(config["server"]["workers"].as_integer(), Some(3));
    let text = small.squall_config(9, None).expect("serializes");
    let config: Table = toml::from_str(&text).expect("valid toml");
    assert_eq!(config["server"]["workers"].as_integer(), Some(1));
}
