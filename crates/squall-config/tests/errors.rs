//! Every kind of mistake, with the exact diagnostic it produces: the line, the column (of the
//! offending value, key or table) and the message. These strings are what `squall check`
//! prints, so a change here is a change operators see.

use squall_config::parse;

/// Appended to cases that have no listener, so that they do not also report its absence. It
/// goes last so that it does not move the case's own line numbers.
const LISTEN: &str = "\n[[listen]]\naddress = \"127.0.0.1:8080\"\n";

/// The diagnostics for `case`, one per line, as `squall check` prints them.
fn errors(case: &str) -> String {
    let text = if case.contains("[[listen]]") {
        case.to_owned()
    } else {
        format!("{case}{LISTEN}")
    };
    match parse(&text, "test.toml") {
        Ok(_) => "(parsed)".to_owned(),
        Err(diagnostics) => diagnostics.to_string(),
    }
}

/// Checks every case and reports all mismatches at once.
fn check(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (case, expected) in cases {
        let actual = errors(case);
        if actual != *expected {
            failures.push(format!(
                "case:\n{case}\nexpected:\n{expected}\nactual:\n{actual}\n"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn syntax_errors() {
    check(&[
        ("[server\n", "test.toml:1:8: unclosed table, expected \"]\""),
        (
            "[server]\nworkers = = 2\n",
            "test.toml:2:11: extra \"=\", expected nothing",
        ),
        // One per line, every line.
        (
            "[server]\nworkers = = 2\ndrain_timeout = \"10s\nx = 'y\n",
            "test.toml:2:11: extra \"=\", expected nothing\n\
             test.toml:3:21: invalid basic string, expected \"\\\"\"\n\
             test.toml:4:7: invalid literal string, expected \"'\"",
        ),
        (
            "[server]\nworkers = 1\nworkers = 2\n",
            "test.toml:3:1: duplicate key",
        ),
    ]);
}

#[test]
fn unknown_keys() {
    let server_keys = "expected one of \"workers\", \"drain_timeout\", \"control\", \"tcp_notsent_lowat\", \"real_ip\", \"error_pages\", \"request_id_header\"";
    check(&[
        (
            "[server]\nworkerz = 4\n",
            &format!("test.toml:2:1: unknown key \"workerz\" in [server]; {server_keys}"),
        ),
        (
            "[server]\n  # indented\n  workerz = 4\n",
            &format!("test.toml:3:3: unknown key \"workerz\" in [server]; {server_keys}"),
        ),
        (
            "[serverz]\n",
            "test.toml:1:2: unknown section [serverz]; expected one of \"server\", \"admin\", \"log\", \"listen\", \"certificate\", \"limits\", \"cache\", \"upstream\", \"vhost\", \"cluster\", \"tls\", \"quic\"",
        ),
        (
            "colour = 1\n[server]\n",
            "test.toml:1:1: unknown key \"colour\" at the top level; expected one of \"server\", \"admin\", \"log\", \"listen\", \"certificate\", \"limits\", \"cache\", \"upstream\", \"vhost\", \"cluster\", \"tls\", \"quic\"",
        ),
        (
            "[[upstream]]\nname = \"a\"\nservers = [{ address = \"127.0.0.1:1\", wieght = 2 }]\n",
            "test.toml:3:39: unknown key \"wieght\"; expected \"address\" or \"weight\"",
        ),
        (
            "[[vhost]]\n[[vhost.route]]\nexact = \"/\"\nrespnd = { status = 200 }\n",
            "test.toml:4:1: unknown key \"respnd\" in [[vhost.route]]; expected one of \"exact\", \"prefix\", \"regex\", \"template\", \"methods\", \"headers\", \"respond\", \"redirect\", \"block\", \"proxy\", \"root\", \"index\", \"root_follow_symlinks\", \"precompressed\", \"cache\", \"cache_ttl\", \"request_no_cache\", \"cache_set_cookie\", \"allow\", \"deny\", \"auth_basic\", \"request_rate\", \"request_burst\", \"request_rate_key\", \"request_headers\", \"response_headers\", \"compress\", \"intercept_errors\", \"allow_trace\", \"upgrade\", \"tunnel_idle_timeout\", \"response_timeout\", \"read_timeout\", \"body_bytes_max\", \"strip_prefix\", \"upstream_prefix\", \"rewrite\"",
        ),
        (
            "[server.extra]\n",
            "test.toml:1:9: unknown section [server.extra]; expected one of \"workers\", \"drain_timeout\", \"control\", \"tcp_notsent_lowat\", \"real_ip\", \"error_pages\", \"request_id_header\" in [server]",
        ),
        (
            "[[vhost]]\n[[vhost.route]]\nexact = \"/\"\n[vhost.route.respond]\nbdy = \"\"\n",
            "test.toml:5:1: unknown key \"bdy\" in [vhost.route.respond]; expected one of \"status\", \"body\", \"headers\"",
        ),
        (
            "[admin]\nlisten = \"127.0.0.1:1\"\nport = 1\n",
            "test.toml:3:1: unknown key \"port\" in [admin]; expected \"listen\"",
        ),
    ]);
}

#[test]
fn type_errors_and_missing_keys() {
    check(&[
        (
            "[[listen]]\naddress = 8080\n",
            "test.toml:2:11: invalid type for \"address\" in [[listen]]: integer \"8080\", expected a string",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:1\"\ntls = \"yes\"\n",
            "test.toml:3:7: invalid type for \"tls\" in [[listen]]: string \"yes\", expected a boolean",
        ),
        (
            "server = 5\n",
            "test.toml:1:10: invalid type for \"server\" at the top level: integer \"5\", expected a table",
        ),
        (
            "[[vhost]]\nroute = 3\n",
            "test.toml:2:9: invalid type for \"route\" in [[vhost]]: integer \"3\", expected an array",
        ),
        (
            "[limits]\nrequest_rate = 1.5\n",
            "test.toml:2:16: invalid type for \"request_rate\" in [limits]: float \"1.5\", expected an integer",
        ),
        (
            "[[listen]]\naddress = { ip = \"::1\" }\n",
            "test.toml:2:11: invalid type for \"address\" in [[listen]]: table, expected a string",
        ),
        (
            "[[listen]]\naddress = 21100\n",
            "test.toml:2:11: invalid type for \"address\" in [[listen]]: integer \"21100\", expected a string",
        ),
        (
            "[[vhost]]\nhosts = [\"*\"]\n\n[[vhost.route]]\nexact = \"/\"\nheaders = { \"x y\" = 2 }\nblock = 403\n",
            "test.toml:6:21: invalid type for \"x y\": integer \"2\", expected a string",
        ),
        (
            "[[vhost]]\nhosts = [1]\n",
            "test.toml:2:10: invalid type: integer \"1\", expected a string",
        ),
        (
            "[[listen]]\ntls = true\n",
            "test.toml:1:1: missing key \"address\"",
        ),
        (
            "[[upstream]]\nname = \"a\"\n",
            "test.toml:1:1: missing key \"servers\"",
        ),
        (
            "[[vhost]]\nroute = [{ exact = \"/\", respond = { headers = { a = 1 } } }]\n",
            "test.toml:2:53: invalid type for \"a\": integer \"1\", expected a string",
        ),
    ]);
}

#[test]
fn server() {
    let workers = "workers must be \"auto\" or a positive integer";
    check(&[
        (
            "[server]\nworkers = 0\n",
            &format!("test.toml:2:11: {workers}"),
        ),
        (
            "[server]\nworkers = -2\n",
            &format!("test.toml:2:11: {workers}"),
        ),
        (
            "[server]\nworkers = \"all\"\n",
            &format!("test.toml:2:11: {workers}"),
        ),
        (
            "[server]\nworkers = 1.5\n",
            &format!("test.toml:2:11: {workers}"),
        ),
        (
            "[server]\nworkers = 5000\n",
            "test.toml:2:11: workers must be at most 1024",
        ),
        (
            "[server]\ndrain_timeout = \"10\"\n",
            "test.toml:2:17: drain_timeout: duration without a unit: use ms, s, m or h",
        ),
        (
            "[server]\ntcp_notsent_lowat = \"4GiB\"\n",
            "test.toml:2:21: tcp_notsent_lowat must be under 2GiB (0 leaves the kernel's default)",
        ),
        (
            "[server]\ntcp_notsent_lowat = true\n",
            "test.toml:2:21: tcp_notsent_lowat: expected a size such as \"16KiB\" or a number of bytes, found boolean",
        ),
        (
            "[server]\ndrain_timeout = 10\n",
            "test.toml:2:17: drain_timeout: duration without a unit: use ms, s, m or h, as in \"10s\"",
        ),
        (
            "[server]\ndrain_timeout = \"10sec\"\n",
            "test.toml:2:17: drain_timeout: unknown duration unit \"sec\": use ms, s, m or h",
        ),
        (
            "[server]\ndrain_timeout = true\n",
            "test.toml:2:17: drain_timeout: expected a duration such as \"10s\", found boolean",
        ),
        // Zero is a valid drain: stop at once.
        ("[server]\ndrain_timeout = \"0s\"\n", "(parsed)"),
    ]);
}

#[test]
fn listeners() {
    check(&[
        (
            "[[listen]]\naddress = \"127.0.0.1:99999\"\n",
            "test.toml:2:11: bad address \"127.0.0.1:99999\": expected IP:PORT, as in \"127.0.0.1:8080\" or \"[::1]:8080\"",
        ),
        (
            "[[listen]]\naddress = \"localhost:80\"\n",
            "test.toml:2:11: bad address \"localhost:80\": expected IP:PORT, as in \"127.0.0.1:8080\" or \"[::1]:8080\"",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\n[[listen]]\naddress = \"127.0.0.1:80\"\n",
            "test.toml:4:11: duplicate listen address 127.0.0.1:80 (first at line 1)",
        ),
        (
            "[admin]\nlisten = \"127.0.0.1:80\"\n[[listen]]\naddress = \"127.0.0.1:80\"\n",
            "test.toml:2:10: admin address 127.0.0.1:80 is also the [[listen]] at line 3",
        ),
        (
            "[admin]\nlisten = \"::1:80\"\n",
            "test.toml:2:10: bad address \"::1:80\": expected IP:PORT, as in \"127.0.0.1:8080\" or \"[::1]:8080\"",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:443\"\ntls = true\n",
            "test.toml:3:7: tls = true needs at least one [[certificate]]",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nprotocols = [\"http1\", \"h2\"]\n",
            "test.toml:3:23: \"h2\" needs tls = true: it is negotiated by TLS ALPN; use \"h2c\" for HTTP/2 over cleartext",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\nself_signed = true\n[[listen]]\naddress = \"127.0.0.1:443\"\ntls = true\nprotocols = [\"h2c\"]\n",
            "test.toml:7:14: \"h2c\" is HTTP/2 over cleartext; a tls listener offers \"h2\"",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nprotocols = [\"http1\", \"h3\"]\n",
            "test.toml:3:23: \"h3\" needs tls = true: HTTP/3 runs over QUIC, which is always encrypted",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nprotocols = [\"http1\", \"h4\"]\n",
            "test.toml:3:23: unknown protocol \"h4\": use http1, h2c, h2 or h3",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\nself_signed = true\n[[listen]]\naddress = \"127.0.0.1:443\"\ntls = true\nprotocols = [\"h2\", \"h3\"]\nproxy_protocol = true\nproxy_protocol_from = [\"10.0.0.0/8\"]\n",
            "test.toml:8:18: proxy_protocol is a header on TCP connections; \"h3\" (QUIC over UDP) has none: serve h3 on a listener of its own",
        ),
        (
            "[quic]\nretry = \"sometimes\"\n",
            "test.toml:2:9: retry: unknown value \"sometimes\": use load, always or never",
        ),
        (
            "[quic]\nstreams_max = 0\n",
            "test.toml:2:15: streams_max must be from 1 to 1048576, not 0",
        ),
        (
            "[quic]\nstream_window = \"0\"\n",
            "test.toml:2:17: stream_window must be more than 0",
        ),
        (
            "[quic]\nhandshake = 3\n",
            "test.toml:2:1: unknown key \"handshake\" in [quic]; expected one of \"retry\", \"handshakes_max\", \"early_data\", \"streams_max\", \"stream_window\", \"connection_window\", \"alt_svc_max_age\", \"gso\", \"gro\", \"steering\"",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nprotocols = [\"http1\", \"http1\"]\n",
            "test.toml:3:23: protocol \"http1\" is listed twice",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nprotocols = []\n",
            "test.toml:3:13: protocols is empty: list at least one of http1, h2c, h2, h3",
        ),
    ]);
}

#[test]
fn no_listener() {
    let expected = "test.toml:1:1: no [[listen]] section: Squall needs at least one address to accept connections on";
    for text in ["", "[server]\n", "# nothing\n"] {
        assert_eq!(
            parse(text, "test.toml").unwrap_err().to_string(),
            expected,
            "{text:?}"
        );
    }
}

#[test]
fn certificates() {
    check(&[
        (
            "[[certificate]]\nhosts = [\"a.test\"]\ncert = \"a.pem\"\nkey = \"a.key\"\nself_signed = true\n",
            "test.toml:5:15: self_signed = true cannot be combined with cert and key; use one",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\n",
            "test.toml:1:1: certificate needs cert and key, or self_signed = true",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\nself_signed = false\n",
            "test.toml:1:1: certificate needs cert and key, or self_signed = true",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\ncert = \"a.pem\"\n",
            "test.toml:3:8: cert without key: give both, or self_signed = true",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\nkey = \"a.key\"\n",
            "test.toml:3:7: key without cert: give both, or self_signed = true",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\ncert = \"\"\nkey = \"a.key\"\n",
            "test.toml:3:8: cert is an empty path",
        ),
        (
            "[[certificate]]\nself_signed = true\n",
            "test.toml:1:1: certificate has no hosts: list its names, as in hosts = [\"example.test\"]",
        ),
        (
            "[[certificate]]\nhosts = []\nself_signed = true\n",
            "test.toml:2:9: hosts is empty: list the certificate's names",
        ),
        (
            "[[certificate]]\nhosts = [\"*\"]\nself_signed = true\n",
            "test.toml:2:10: bad host \"*\": the first [[certificate]] is already the default",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test:443\"]\nself_signed = true\n",
            "test.toml:2:10: bad host \"a.test:443\": hosts are matched without the port; remove \":PORT\"",
        ),
        (
            "[[certificate]]\nhosts = [\"a.test\"]\nself_signed = true\n[[certificate]]\nhosts = [\"b.test\", \"A.test\"]\nself_signed = true\n",
            "test.toml:5:20: host \"a.test\" already has the [[certificate]] at line 1",
        ),
    ]);
}

#[test]
fn limits_and_cache() {
    let units = "use KiB, MiB or GiB (powers of 1024), or a plain number of bytes";
    check(&[
        (
            "[limits]\nheader_bytes_max = \"16KB\"\n",
            &format!("test.toml:2:20: header_bytes_max: unknown size unit \"KB\": {units}"),
        ),
        (
            "[limits]\nbody_bytes_max = -1\n",
            "test.toml:2:18: body_bytes_max: size must not be negative",
        ),
        (
            "[limits]\nuri_bytes_max = 0\n",
            "test.toml:2:17: uri_bytes_max must be more than 0",
        ),
        (
            "[limits]\nheader_timeout = \"0s\"\n",
            "test.toml:2:18: header_timeout must be longer than 0",
        ),
        (
            "[limits]\nidle_timeout = \"1.5m\"\n",
            "test.toml:2:16: idle_timeout: fractions are not supported; use a smaller unit, as in \"1500ms\"",
        ),
        (
            "[limits]\nrequest_rate = 0\n",
            "test.toml:2:16: request_rate must be at least 1, not 0",
        ),
        (
            "[limits]\nrequest_burst = 10\n",
            "test.toml:2:17: request_burst needs request_rate",
        ),
        (
            "[limits]\nconnections_per_ip_max = 5000000000\n",
            "test.toml:2:26: connections_per_ip_max must be at least 1, not 5000000000",
        ),
        (
            "[limits]\ndescriptor_reserve = -1\n",
            "test.toml:2:22: descriptor_reserve must be from 0 to 16777216, not -1",
        ),
        (
            "[limits]\ndescriptor_reserve = \"lots\"\n",
            "test.toml:2:22: descriptor_reserve: expected \"auto\" or a number, found \"lots\"",
        ),
        (
            "[limits]\ndescriptor_reserve = 1.5\n",
            "test.toml:2:22: descriptor_reserve: expected \"auto\" or a number, found float",
        ),
        (
            "[limits]\nbuffer_memory_max = \"lots\"\n",
            "test.toml:2:21: buffer_memory_max: size \"lots\" does not start with a number, as in \"16KiB\"",
        ),
        (
            "[limits]\nbuffer_memory_max = -1\n",
            "test.toml:2:21: buffer_memory_max: size must not be negative",
        ),
        (
            "[cache]\nmemory = [1]\n",
            "test.toml:2:10: memory: expected a size such as \"16KiB\" or a number of bytes, found array",
        ),
        (
            "[cache]\npurge_allow = [\"127.0.0.1/32\", \"10.0.0.1/8\", \"::1/200\"]\n",
            "test.toml:2:32: bad network \"10.0.0.1/8\": host bits are set; did you mean \"10.0.0.0/8\"?\n\
             test.toml:2:46: bad network \"::1/200\": prefix length 200 is longer than 128 bits",
        ),
    ]);
}

#[test]
fn upstreams() {
    let servers = "servers = [{ address = \"127.0.0.1:9000\" }]";
    check(&[
        (
            &format!(
                "[[upstream]]\nname = \"app\"\n{servers}\n[[upstream]]\nname = \"app\"\n{servers}\n"
            ),
            "test.toml:5:8: upstream \"app\" is already defined at line 1",
        ),
        (
            "[[upstream]]\nname = \"my app\"\nservers = [{ address = \"127.0.0.1:9000\" }]\n",
            "test.toml:2:8: bad upstream name \"my app\": use letters, digits, \"_\", \"-\" and \".\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = []\n",
            "test.toml:3:11: upstream \"app\" has no servers",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9000\", weight = 0 }]\n",
            "test.toml:3:51: weight must be from 1 to 1000, not 0",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:0\" }]\n",
            "test.toml:3:24: bad address \"127.0.0.1:0\": port 0; expected IP:PORT or NAME:PORT, as in \"127.0.0.1:8080\", \"[::1]:8080\" or \"api.internal:8080\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"api.internal\" }]\n",
            "test.toml:3:24: bad address \"api.internal\": no port; expected IP:PORT or NAME:PORT, as in \"127.0.0.1:8080\", \"[::1]:8080\" or \"api.internal:8080\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \":8080\" }]\n",
            "test.toml:3:24: bad address \":8080\": no host name; expected IP:PORT or NAME:PORT, as in \"127.0.0.1:8080\", \"[::1]:8080\" or \"api.internal:8080\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"api.internal:http\" }]\n",
            "test.toml:3:24: bad address \"api.internal:http\": bad port; expected IP:PORT or NAME:PORT, as in \"127.0.0.1:8080\", \"[::1]:8080\" or \"api.internal:8080\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"api..internal:80\" }]\n",
            "test.toml:3:24: bad address \"api..internal:80\": not an IP address or a DNS name; expected IP:PORT or NAME:PORT, as in \"127.0.0.1:8080\", \"[::1]:8080\" or \"api.internal:8080\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"::1:80\" }]\n",
            "test.toml:3:24: bad address \"::1:80\": not an IP address or a DNS name; expected IP:PORT or NAME:PORT, as in \"127.0.0.1:8080\", \"[::1]:8080\" or \"api.internal:8080\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"Api.internal:80\" }, { address = \"api.internal.:80\" }]\n",
            "test.toml:3:57: server api.internal:80 is listed twice",
        ),
        (
            &format!("[[upstream]]\nname = \"app\"\n{servers}\nresolve_interval = \"0s\"\n"),
            "test.toml:4:20: resolve_interval must be longer than 0",
        ),
        (
            &format!("[[upstream]]\nname = \"app\"\n{servers}\npool_idle_timeout = \"0s\"\n"),
            "test.toml:4:21: pool_idle_timeout must be longer than 0",
        ),
        (
            &format!(
                "[[upstream]]\nname = \"app\"\n{servers}\npool_idle_timeout = \"4s\"\npool_unsafe_idle_timeout = \"5s\"\n"
            ),
            "test.toml:5:28: pool_unsafe_idle_timeout (5s) is longer than pool_idle_timeout (4s), after which no request reuses a connection",
        ),
        (
            &format!("[[upstream]]\nname = \"app\"\n{servers}\nresolve_interval = \"soon\"\n"),
            "test.toml:4:20: resolve_interval: duration \"soon\" does not start with a number, as in \"10s\"",
        ),
        (
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:1\" }, { address = \"127.0.0.1:1\" }]\n",
            "test.toml:3:53: server 127.0.0.1:1 is listed twice",
        ),
        (
            &format!("[[upstream]]\nname = \"app\"\n{servers}\nbalance = \"random\"\n"),
            "test.toml:4:11: unknown balance \"random\": use round_robin, weighted, consistent_hash or least_conn",
        ),
        (
            &format!("[[upstream]]\nname = \"app\"\n{servers}\nhash_key = \"host\"\n"),
            "test.toml:4:12: hash_key needs balance = \"consistent_hash\"",
        ),
        (
            &format!(
                "[[upstream]]\nname = \"app\"\n{servers}\nbalance = \"consistent_hash\"\nhash_key = \"cookie\"\n"
            ),
            "test.toml:5:12: unknown hash_key \"cookie\": use \"uri\", \"host\", \"client_ip\" or \"header:NAME\"",
        ),
        (
            &format!("[[upstream]]\nname = \"app\"\n{servers}\nconnect_timeout = \"0ms\"\n"),
            "test.toml:4:19: connect_timeout must be longer than 0",
        ),
        (
            &format!(
                "[[upstream]]\nname = \"app\"\n{servers}\nhealth_check = {{ path = \"healthz\", fails = 0 }}\n"
            ),
            "test.toml:4:25: health_check path must start with \"/\"\n\
             test.toml:4:44: fails must be from 1 to 100, not 0",
        ),
    ]);
}

#[test]
fn vhosts() {
    check(&[
        (
            "[[vhost]]\nhosts = []\n",
            "test.toml:2:9: hosts is empty: list names, or [\"*\"] for the default vhost",
        ),
        (
            "[[vhost]]\nhosts = [\"a..test\"]\n",
            "test.toml:2:10: bad host \"a..test\": use a name such as \"example.test\", a wildcard such as \"*.example.test\", or \"*\"",
        ),
        (
            "[[vhost]]\n[[vhost]]\n",
            "test.toml:2:1: host \"*\" is already served by the [[vhost]] at line 1",
        ),
        (
            "[[vhost]]\nhosts = [\"a.test\"]\n[[vhost]]\nhosts = [\"*\", \"A.TEST\"]\n",
            "test.toml:4:15: host \"a.test\" is already served by the [[vhost]] at line 1",
        ),
    ]);
}

#[test]
fn request_no_cache_values() {
    check(&[
        (
            "[cache]\nrequest_no_cache = \"never\"\n",
            "test.toml:2:20: unknown request_no_cache \"never\": use honor or ignore",
        ),
        (
            "[cache]\nrequest_no_cache = true\n",
            "test.toml:2:20: invalid type for \"request_no_cache\" in [cache]: boolean \"true\", expected a string",
        ),
        ("[cache]\nrequest_no_cache = \"ignore\"\n", "(parsed)"),
        (
            "[cache]\nhit_for_pass = 30\n",
            "test.toml:2:16: hit_for_pass: duration without a unit: use ms, s, m or h, as in \"30s\"",
        ),
        ("[cache]\nhit_for_pass = \"0s\"\n", "(parsed)"),
        (
            "[cache]\nheuristic_freshness_max = 3600\n",
            "test.toml:2:27: heuristic_freshness_max: duration without a unit: use ms, s, m or h, as in \"3600s\"",
        ),
        (
            "[cache]\nheuristic_freshness_max = \"1d\"\n",
            "test.toml:2:27: heuristic_freshness_max: unknown duration unit \"d\": use ms, s, m or h",
        ),
        ("[cache]\nheuristic_freshness_max = \"24h\"\n", "(parsed)"),
    ]);
}

#[test]
fn target_header_values() {
    check(&[
        (
            "[cache]\ntarget_header = \"bad name\"\n",
            "test.toml:2:17: bad header name \"bad name\": a name is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 §5.1)",
        ),
        (
            "[cache]\ntarget_header = \"CDN-Cache-Control\"\n",
            "test.toml:2:17: target_header \"cdn-cache-control\" is already read by the cache: name a field of your own, such as \"squall-cache-control\"",
        ),
        (
            "[cache]\ntarget_header = \"cache-control\"\n",
            "test.toml:2:17: target_header \"cache-control\" is already read by the cache: name a field of your own, such as \"squall-cache-control\"",
        ),
        (
            "[cache]\ntarget_header = \"connection\"\n",
            "test.toml:2:17: header \"connection\" cannot be set or removed: Squall sets connection and framing headers itself",
        ),
        (
            "[cache]\ntarget_header = \"Squall-Cache-Control\"\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn log_format_values() {
    check(&[
        (
            "[log]\naccess = \"/tmp/a.log\"\nformat = \"xml\"\n",
            "test.toml:3:10: unknown log format \"xml\": use combined or json",
        ),
        (
            "[log]\nformat = \"json\"\n",
            "test.toml:2:10: format needs access = \"PATH\"",
        ),
        (
            "[log]\naccess = \"/tmp/a.log\"\nformat = \"json\"\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn proxy_protocol_listeners() {
    check(&[
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nproxy_protocol = true\n",
            "test.toml:3:18: proxy_protocol = true needs proxy_protocol_from, the balancers' networks (a header from anywhere else is refused)",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nproxy_protocol_from = [\"10.0.0.0/8\"]\n",
            "test.toml:3:23: proxy_protocol_from needs proxy_protocol = true",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nproxy_protocol = true\nproxy_protocol_from = []\n",
            "test.toml:4:23: proxy_protocol_from is empty: list the balancers' networks",
        ),
        (
            "[[listen]]\naddress = \"127.0.0.1:80\"\nproxy_protocol = true\nproxy_protocol_from = [\"10.0.0.0/8\", \"::1\"]\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn real_ip_and_auth_limits() {
    check(&[
        (
            "[server]\nreal_ip = { header = \"x forwarded\", from = [\"10.0.0.0/8\"] }\n",
            "test.toml:2:22: bad header name \"x forwarded\": a name is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 §5.1)",
        ),
        (
            "[server]\nreal_ip = { header = \"x-forwarded-for\", from = [] }\n",
            "test.toml:2:48: real_ip.from is empty: list the proxies whose header is believed",
        ),
        (
            "[server]\nreal_ip = { header = \"x-forwarded-for\", from = [\"10.0.0.0/33\"] }\n",
            "test.toml:2:49: bad network \"10.0.0.0/33\": prefix length 33 is longer than 32 bits",
        ),
        (
            "[server]\nreal_ip = { header = \"x-forwarded-for\" }\n",
            "test.toml:2:11: missing key \"from\"",
        ),
        (
            "[limits]\nauth_failures_max = 0\n",
            "test.toml:2:21: auth_failures_max must be at least 1, not 0",
        ),
    ]);
}

#[test]
fn error_pages_and_intercept_errors() {
    check(&[
        (
            "[server]\nerror_pages = { 200 = \"/e/ok.html\" }\n",
            "test.toml:2:17: error_pages: \"200\" is not an error status (400 to 599)",
        ),
        (
            "[server]\nerror_pages = { 404 = \"/e/404.png\" }\n",
            "test.toml:2:23: error_pages: the file must end in .html, .htm, .txt or .json",
        ),
        (
            "[[vhost]]\nerror_pages = { 502 = \"/e/a.html\", \"0502\" = \"/e/b.html\" }\n",
            "test.toml:2:36: error_pages: 502 Bad Gateway is listed twice",
        ),
        (
            "[[vhost]]\nerror_pages = { 404 = \"/e/404.html\", 502 = \"/e/502.json\" }\n",
            "(parsed)",
        ),
        (
            "[[vhost]]\n[[vhost.route]]\nexact = \"/\"\nblock = 403\nintercept_errors = true\n",
            "test.toml:5:20: intercept_errors only applies to proxy routes",
        ),
    ]);
}

#[test]
fn header_variables_and_request_id_header() {
    check(&[
        (
            "[[upstream]]\nname = \"o\"\nservers = [{ address = \"127.0.0.1:1\" }]\n[[vhost]]\n\
             [[vhost.route]]\nprefix = \"/\"\nproxy = \"o\"\n\
             request_headers = { set = { \"x-client\" = \"$remote_adr\" } }\n",
            "test.toml:8:42: unknown variable $remote_adr: use $remote_addr, $request_id, $host, $scheme or $request_uri",
        ),
        (
            "[[upstream]]\nname = \"o\"\nservers = [{ address = \"127.0.0.1:1\" }]\n[[vhost]]\n\
             [[vhost.route]]\nprefix = \"/\"\nproxy = \"o\"\n\
             request_headers = { set = { \"x-client\" = \"$remote_addr $request_id\" } }\n\
             response_headers = { set = { \"x-id\" = \"$request_id\", \"x-price\" = \"$5\" } }\n",
            "(parsed)",
        ),
        (
            "[server]\nrequest_id_header = \"x request\"\n",
            "test.toml:2:21: bad header name \"x request\": a name is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 §5.1)",
        ),
        (
            "[server]\nrequest_id_header = \"X-Request-Id\"\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn origin_protocols() {
    let up = "[[upstream]]\nname = \"o\"\nservers = [{ address = \"127.0.0.1:81\" }]\n";
    let cases = [
        (
            format!("{up}protocol = \"h3\"\n"),
            "test.toml:4:12: unknown protocol \"h3\": use \"http1\", \"h2\", \"h2c\" or \"auto\"",
        ),
        (
            format!("{up}protocol = \"h2\"\n"),
            "test.toml:4:12: protocol = \"h2\" chooses HTTP/2 with ALPN, which needs tls = true; use \"h2c\" for HTTP/2 over cleartext",
        ),
        (
            format!("{up}protocol = \"auto\"\n"),
            "test.toml:4:12: protocol = \"auto\" chooses HTTP/2 with ALPN, which needs tls = true; use \"h2c\" for HTTP/2 over cleartext",
        ),
        (
            format!("{up}protocol = \"h2c\"\ntls = true\n"),
            "test.toml:4:12: protocol = \"h2c\" is HTTP/2 over cleartext; with tls = true use \"h2\"",
        ),
        (
            format!("{up}protocol = \"h2c\"\nproxy_protocol = \"v1\"\n"),
            "test.toml:4:12: protocol = \"h2c\" shares a connection among clients, and a PROXY protocol header names one: use protocol = \"http1\" with proxy_protocol",
        ),
        (
            format!(
                "{up}protocol = \"h2c\"\n[[vhost]]\nhosts = [\"*\"]\n[[vhost.route]]\nprefix = \"/ws\"\n\
                 proxy = \"o\"\nupgrade = [\"websocket\"]\n"
            ),
            "test.toml:10:11: upgrade needs an upstream spoken to in HTTP/1.1, and \"o\" has protocol = \"h2c\": tunnels do not cross HTTP/2; give this route an upstream of the same servers with protocol = \"http1\"",
        ),
        (
            format!(
                "{up}protocol = \"http1\"\n[[vhost]]\nhosts = [\"*\"]\n[[vhost.route]]\nprefix = \"/ws\"\n\
                 proxy = \"o\"\nupgrade = [\"websocket\"]\n"
            ),
            "(parsed)",
        ),
        (format!("{up}protocol = \"h2c\"\n"), "(parsed)"),
        (format!("{up}protocol = \"h2\"\ntls = true\n"), "(parsed)"),
        (format!("{up}protocol = \"auto\"\ntls = true\n"), "(parsed)"),
        (format!("{up}protocol = \"http1\"\n"), "(parsed)"),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    check(&cases);
}

#[test]
fn upstream_path_rewrites() {
    // Line 1-3: an upstream; line 4 the vhost, 5 the route, 6 its match, 7 `proxy`, 8 the
    // rewrite key under test.
    let route = |matcher: &str, rewrite: &str| {
        format!(
            "[[upstream]]\nname = \"app\"\nservers = [{{ address = \"127.0.0.1:1\" }}]\n\
             [[vhost]]\n[[vhost.route]]\n{matcher}\nproxy = \"app\"\n{rewrite}\n"
        )
    };
    let cases = [
        (
            route("prefix = \"/app/\"", "strip_prefix = true"),
            "(parsed)",
        ),
        (
            route("prefix = \"/app/\"", "strip_prefix = false"),
            "(parsed)",
        ),
        (
            route("prefix = \"/old/\"", "upstream_prefix = \"/new/v2/\""),
            "(parsed)",
        ),
        (
            route(
                "template = \"/u/{id}/{name}.json\"",
                "rewrite = \"/users/{id}/{name}\"",
            ),
            "(parsed)",
        ),
        (
            route(
                "regex = \"^/v1/(?P<rest>[a-z]+)$\"",
                "rewrite = \"/v2/{rest}\"",
            ),
            "(parsed)",
        ),
        (route("exact = \"/old\"", "rewrite = \"/new\""), "(parsed)"),
        (
            route("template = \"/u/{id}\"", "rewrite = \"/users/{name}\""),
            "test.toml:8:11: rewrite: unknown capture {name}: the route captures {id}",
        ),
        (
            route("regex = \"^/v1/(?P<rest>.+)$\"", "rewrite = \"/v2/{res}\""),
            "test.toml:8:11: rewrite: unknown capture {res}: the route captures {rest}",
        ),
        (
            route("exact = \"/old\"", "rewrite = \"/new/{id}\""),
            "test.toml:8:11: rewrite: unknown capture {id}: the route captures nothing",
        ),
        (
            route("template = \"/u/{id}\"", "rewrite = \"/users/../{id}\""),
            "test.toml:8:11: rewrite: an upstream path has no . or .. segment",
        ),
        (
            route("template = \"/u/{id}\"", "rewrite = \"/users/{id}?x=1\""),
            "test.toml:8:11: rewrite: '?' is not allowed in an upstream path: visible ASCII without ?, # or \\, percent-encode the rest",
        ),
        (
            route("prefix = \"/app/\"", "rewrite = \"/x\""),
            "test.toml:8:11: rewrite: rewrite is for exact, template and regex routes: on a prefix route use strip_prefix or upstream_prefix",
        ),
        (
            route("prefix = \"/app\"", "strip_prefix = true"),
            "test.toml:8:16: strip_prefix: strip_prefix needs a prefix that ends with \"/\", so that what follows it is whole segments",
        ),
        (
            route("prefix = \"/app/\"", "upstream_prefix = \"/v2\""),
            "test.toml:8:19: upstream_prefix: an upstream prefix ends with \"/\"",
        ),
        (
            route("template = \"/u/{id}\"", "strip_prefix = true"),
            "test.toml:8:16: strip_prefix: strip_prefix only applies to prefix routes: use rewrite on exact, template and regex routes",
        ),
        (
            route(
                "prefix = \"/app/\"",
                "strip_prefix = true\nupstream_prefix = \"/\"",
            ),
            "test.toml:9:19: route has both strip_prefix and upstream_prefix: give one upstream path",
        ),
        (
            "[[vhost]]\n[[vhost.route]]\nprefix = \"/app/\"\nblock = 403\nstrip_prefix = true\n"
                .to_owned(),
            "test.toml:5:16: strip_prefix only applies to proxy routes",
        ),
    ];
    let cases: Vec<(&str, &str)> = cases.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    check(&cases);
}
