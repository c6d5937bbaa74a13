//! `[cluster]`: what it is parsed into, and the diagnostics for each mistake.

use std::time::Duration;

use squall_config::{HashKey, TlsEngine, parse};

const LISTEN: &str = "[[listen]]\naddress = \"127.0.0.1:8080\"\n";

fn with_cluster(cluster: &str) -> String {
    format!("{LISTEN}\n[cluster]\n{cluster}")
}

fn errors(cluster: &str) -> String {
    match parse(&with_cluster(cluster), "test.toml") {
        Ok(_) => "(parsed)".to_owned(),
        Err(diagnostics) => diagnostics.to_string(),
    }
}

const THREE: &str = r#"nodes = [
  { name = "a", address = "127.0.0.1:8080" },
  { name = "b", address = "127.0.0.1:8081" },
  { name = "c", address = "127.0.0.1:8082" },
]
"#;

#[test]
fn three_nodes_with_defaults() {
    let config = parse(&with_cluster(&format!("{THREE}self = \"b\"\n")), "t").unwrap();
    let cluster = config.cluster.unwrap();
    assert_eq!(cluster.nodes.len(), 3);
    assert_eq!(cluster.self_index, 1);
    assert_eq!(cluster.self_node().name, "b");
    assert_eq!(cluster.replicas, 1);
    assert_eq!(cluster.hash_key, None);
    assert_eq!(cluster.local_ttl, Duration::ZERO);
    assert_eq!(cluster.health_check, None);
    let peers: Vec<&str> = cluster.peers().map(|(_, n)| n.name.as_str()).collect();
    assert_eq!(peers, ["a", "c"]);
    assert!(parse(LISTEN, "t").unwrap().cluster.is_none());
}

#[test]
fn every_option() {
    let text =
        format!("{THREE}self = \"c\"\nhash_key = \"host\"\nreplicas = 2\nlocal_ttl = \"2s\"\n");
    let cluster = parse(&with_cluster(&text), "t").unwrap().cluster.unwrap();
    assert_eq!(cluster.self_index, 2);
    assert_eq!(cluster.hash_key, Some(HashKey::Host));
    assert_eq!(cluster.replicas, 2);
    assert_eq!(cluster.local_ttl, Duration::from_secs(2));
    let text = format!(
        "{THREE}self = \"c\"\nhealth_check = {{ path = \"/health\", interval = \"250ms\", fails = 2 }}\n"
    );
    let cluster = parse(&with_cluster(&text), "t").unwrap().cluster.unwrap();
    let check = cluster.health_check.unwrap();
    assert_eq!(check.path, "/health");
    assert_eq!(check.interval, Duration::from_millis(250));
    assert_eq!((check.fails, check.passes), (2, 2));
    let text = format!("{THREE}self = \"c\"\nhash_key = \"cache_key\"\n");
    let cluster = parse(&with_cluster(&text), "t").unwrap().cluster.unwrap();
    assert_eq!(cluster.hash_key, None);
}

#[test]
fn self_is_found_by_a_listen_address() {
    // The [[listen]] binds 127.0.0.1:8080: node "a".
    let cluster = parse(&with_cluster(THREE), "t").unwrap().cluster.unwrap();
    assert_eq!(cluster.self_index, 0);
}

#[test]
fn mistakes() {
    let cases = [
        (
            "nodes = []\n",
            "test.toml:5:9: nodes: a cluster needs at least one node\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }, { name = \"a\", address = \"127.0.0.1:2\" }]\nself = \"a\"\n",
            "test.toml:5:60: node name \"a\" is used twice\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }, { name = \"b\", address = \"127.0.0.1:1\" }]\nself = \"a\"\n",
            "test.toml:5:75: node address 127.0.0.1:1 is used twice\n",
        ),
        (
            "nodes = [{ name = \"a b\", address = \"127.0.0.1:1\" }]\nself = \"a b\"\n",
            "test.toml:5:19: bad node name \"a b\": use letters, digits, \"_\", \"-\" and \".\"\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"z\"\n",
            "test.toml:6:8: self = \"z\" is not among the nodes\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\n",
            "test.toml:4:1: [cluster] does not say which node this is: set self = \"NAME\", or listen on this node's address\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"a\"\nreplicas = 2\n",
            "test.toml:7:12: replicas = 2 needs at least 2 nodes\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"a\"\nreplicas = 3\n",
            "test.toml:7:12: replicas must be from 1 to 2, not 3\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"a\"\nlocal_ttl = 5\n",
            "test.toml:7:13: local_ttl: duration without a unit: use ms, s, m or h, as in \"5s\"\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"a\"\nhash_key = \"path\"\n",
            "test.toml:7:12: unknown hash_key \"path\": use \"uri\", \"host\", \"client_ip\" or \"header:NAME\", or \"cache_key\"\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"localhost:1\" }]\nself = \"a\"\n",
            "test.toml:5:34: bad address \"localhost:1\": expected IP:PORT, as in \"127.0.0.1:8080\" or \"[::1]:8080\"\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"a\"\nhealth_check = { path = \"health\" }\n",
            "test.toml:7:25: health_check path must start with \"/\"\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"a\"\nhealth_check = { path = \"/\", fails = 0 }\n",
            "test.toml:7:38: fails must be from 1 to 100, not 0\n",
        ),
        (
            "nodes = [{ name = \"a\", address = \"127.0.0.1:1\" }]\nself = \"a\"\ngossip = true\n",
            "unknown key \"gossip\" in [cluster]",
        ),
    ];
    let mut failures = Vec::new();
    for (case, expected) in cases {
        let actual = errors(case);
        // Each expected diagnostic is among those reported (a case may cause others).
        if !actual.contains(expected.trim_end()) {
            failures.push(format!(
                "case:\n{case}expected:\n{expected}actual:\n{actual}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_ticket_key_file_needs_certificates_and_a_path() {
    let tls = "[[listen]]\naddress = \"127.0.0.1:8443\"\ntls = true\n\n[[certificate]]\n\
               hosts = [\"a.test\"]\nself_signed = true\n\n[tls]\n";
    let config = parse(&format!("{tls}ticket_key_file = \"t.keys\"\n"), "t").unwrap();
    assert_eq!(config.tls.ticket_key_file, Some("t.keys".into()));
    assert_eq!(parse(tls, "t").unwrap().tls.ticket_key_file, None);
    let errors = |text: &str| parse(text, "t.toml").unwrap_err().to_string();
    assert_eq!(
        errors(&format!("{tls}ticket_key_file = \"\"\n")),
        "t.toml:10:19: ticket_key_file: an empty path; leave the key out"
    );
    assert_eq!(
        errors(&format!("{LISTEN}[tls]\nticket_key_file = \"t.keys\"\n")),
        "t.toml:4:19: ticket_key_file needs a TLS listener and its [[certificate]]"
    );
    assert!(errors(&format!("{tls}ticket_keys = \"t\"\n")).contains("unknown key"));
}

#[test]
fn the_tls_engine_is_one_of_two_names_and_unbuffered_by_default() {
    let tls = "[[listen]]\naddress = \"127.0.0.1:8443\"\ntls = true\n\n[[certificate]]\n\
               hosts = [\"a.test\"]\nself_signed = true\n\n[tls]\n";
    let engine = |text: &str| parse(text, "t").map(|config| config.tls.engine);
    assert_eq!(engine(LISTEN).unwrap(), TlsEngine::Unbuffered);
    assert_eq!(engine(tls).unwrap(), TlsEngine::Unbuffered);
    for name in ["unbuffered", "buffered"] {
        let parsed = engine(&format!("{tls}engine = \"{name}\"\n")).unwrap();
        assert_eq!(parsed.as_str(), name);
        assert_eq!(TlsEngine::from_name(name), Some(parsed));
    }
    let errors = |text: &str| parse(text, "t.toml").unwrap_err().to_string();
    assert_eq!(
        errors(&format!("{tls}engine = \"Buffered\"\n")),
        "t.toml:10:10: engine: unknown value \"Buffered\": use unbuffered or buffered"
    );
    assert!(errors(&format!("{tls}engine = true\n")).contains("t.toml:10:10"));
}
