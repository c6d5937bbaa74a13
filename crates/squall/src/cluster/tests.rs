use super::*;

fn seeds(names: &[&str]) -> Vec<u64> {
    names.iter().map(|n| node_seed(n)).collect()
}

fn key(i: u32) -> u64 {
    let key = CacheKey::new("http", b"example.com", format!("/object/{i}").as_bytes());
    cache_key_hash(&key)
}

#[test]
fn keys_spread_evenly_over_three_nodes() {
    let seeds = seeds(&["a", "b", "c"]);
    let mut counts = [0u32; 3];
    for i in 0..30_000 {
        counts[owners(key(i), &seeds, |_| true, 1).as_slice()[0]] += 1;
    }
    for count in counts {
        // 10,000 each, within 5%.
        assert!((9_500..=10_500).contains(&count), "{counts:?}");
    }
}

#[test]
fn removing_a_node_moves_only_its_keys() {
    let seeds = seeds(&["a", "b", "c"]);
    let mut moved = 0;
    for i in 0..10_000 {
        let before = owners(key(i), &seeds, |_| true, 1).as_slice()[0];
        let after = owners(key(i), &seeds, |n| n != 1, 1).as_slice()[0];
        if before == 1 {
            assert_ne!(after, 1);
            moved += 1;
        } else {
            assert_eq!(before, after, "key {i} moved though its owner lives");
        }
    }
    assert!((3_000..=3_700).contains(&moved), "{moved}");
}

#[test]
fn adding_a_node_takes_only_a_share() {
    let three = seeds(&["a", "b", "c"]);
    let four = seeds(&["a", "b", "c", "d"]);
    let mut taken = 0;
    for i in 0..10_000 {
        let before = owners(key(i), &three, |_| true, 1).as_slice()[0];
        let after = owners(key(i), &four, |_| true, 1).as_slice()[0];
        if after == 3 {
            taken += 1;
        } else {
            assert_eq!(before, after);
        }
    }
    assert!((2_200..=2_800).contains(&taken), "{taken}");
}

#[test]
fn replicas_are_two_distinct_nodes_and_the_first_is_the_single_owner() {
    let seeds = seeds(&["a", "b", "c"]);
    let mut second = [0u32; 3];
    for i in 0..3_000 {
        let one = owners(key(i), &seeds, |_| true, 1);
        let two = owners(key(i), &seeds, |_| true, 2);
        let [first, next] = two.as_slice() else {
            panic!("two owners: {two:?}");
        };
        assert_ne!(first, next);
        assert_eq!(one.as_slice(), &[*first]);
        second[*next] += 1;
        // A dead first owner leaves the second as the first.
        let without = owners(key(i), &seeds, |n| n != *first, 2);
        assert_eq!(without.as_slice()[0], *next);
    }
    assert!(second.iter().all(|&n| n > 800), "{second:?}");
}

#[test]
fn no_node_alive_owns_nothing_and_one_node_owns_all() {
    let seeds = seeds(&["a", "b"]);
    assert!(owners(key(1), &seeds, |_| false, 2).as_slice().is_empty());
    assert_eq!(owners(key(1), &seeds, |n| n == 1, 2).as_slice(), &[1]);
}

#[test]
fn the_cache_key_hash_is_stable() {
    // Every node of a fleet (and every build) must agree: a change remaps every key.
    let key = CacheKey::new("http", b"example.com", b"/index.html");
    assert_eq!(cache_key_hash(&key), cache_key_hash(&key.clone()));
    let other = CacheKey::new("https", b"example.com", b"/index.html");
    assert_ne!(cache_key_hash(&key), cache_key_hash(&other));
}

fn config(nodes: &[(&str, &str)], me: usize) -> squall_config::Cluster {
    squall_config::Cluster {
        nodes: (nodes.iter())
            .map(|(name, address)| squall_config::ClusterNode {
                name: (*name).to_owned(),
                address: address.parse().unwrap(),
            })
            .collect(),
        self_index: me,
        hash_key: None,
        replicas: 1,
        local_ttl: Duration::ZERO,
        health_check: None,
    }
}

#[test]
fn peers_are_groups_after_the_config_s_own() {
    let nodes = [
        ("a", "127.0.0.1:1001"),
        ("b", "127.0.0.1:1002"),
        ("c", "127.0.0.1:1003"),
    ];
    let cluster = Cluster::new(&config(&nodes, 1), 2);
    let upstreams: Vec<_> = cluster.nodes.iter().map(|n| n.upstream).collect();
    assert_eq!(upstreams, [Some(2), None, Some(3)]);
    assert!(!cluster.is_peer_upstream(1));
    assert!(cluster.is_peer_upstream(2) && cluster.is_peer_upstream(3));
    assert!(!cluster.is_peer_upstream(4));
    let specs = cluster.peer_specs();
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[0].name, "cluster:a");
    assert_eq!(specs[1].servers[0].address, nodes[2].1.parse().unwrap());
    for spec in &specs {
        spec.validate().unwrap();
    }
    assert_eq!(cluster.self_name(), "b");
    assert!(cluster.trusts("127.0.0.1".parse().unwrap()));
    assert!(!cluster.trusts("127.0.0.2".parse().unwrap()));
    assert!(specs.iter().all(|s| s.health_check.is_none()));
}

#[test]
fn peers_are_probed_with_the_cluster_s_health_check() {
    let nodes = [("a", "127.0.0.1:1001"), ("b", "127.0.0.1:1002")];
    let mut config = config(&nodes, 0);
    config.health_check = Some(squall_config::HealthCheck {
        path: "/health".into(),
        interval: Duration::from_millis(250),
        fails: 2,
        passes: 1,
    });
    let specs = Cluster::new(&config, 0).peer_specs();
    let check = specs[0].health_check.as_ref().expect("probed");
    assert_eq!(check.path, "/health");
    assert_eq!(check.interval, Duration::from_millis(250));
    assert_eq!(specs[0].thresholds(), (2, 1));
    specs[0].validate().unwrap();
}
