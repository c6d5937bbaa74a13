//! Route mistakes, with the exact diagnostic each produces. Like `errors.rs`, but for
//! `[[vhost.route]]`, which has the most rules.

use squall_config::parse;

const LISTEN: &str = "\n[[listen]]\naddress = \"127.0.0.1:8080\"\n";

/// Routes of one vhost (lines 1-2 are its header and an upstream "app" is defined after it),
/// followed by `LISTEN`.
fn errors(routes: &str) -> String {
    let upstream = "\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9000\" }]\n";
    let text = format!("[[vhost]]\n{routes}{upstream}{LISTEN}");
    match parse(&text, "test.toml") {
        Ok(_) => "(parsed)".to_owned(),
        Err(diagnostics) => diagnostics.to_string(),
    }
}

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
fn matchers() {
    check(&[
        (
            "[[vhost.route]]\nexact = \"/\"\nprefix = \"/\"\nblock = 403\n",
            "test.toml:4:10: route has both exact and prefix: give one path match",
        ),
        (
            "[[vhost.route]]\nblock = 403\n",
            "test.toml:2:1: route has no path match: give one of exact, prefix, regex or template",
        ),
        (
            "route = [{ block = 403 }]\n",
            "test.toml:2:10: route has no path match: give one of exact, prefix, regex or template",
        ),
        (
            "[[vhost.route]]\nexact = \"index.html\"\nblock = 403\n",
            "test.toml:3:9: bad exact \"index.html\": a path starts with \"/\"",
        ),
        (
            "[[vhost.route]]\nprefix = \"/a?b=1\"\nblock = 403\n",
            "test.toml:3:10: bad prefix \"/a?b=1\": paths are matched without the query: remove \"?...\"",
        ),
        (
            "[[vhost.route]]\nregex = \"^/v[0-9+/\"\nblock = 403\n",
            "test.toml:3:9: bad regex \"^/v[0-9+/\": unclosed character class",
        ),
        (
            "[[vhost.route]]\ntemplate = \"/users/{name/orders\"\nblock = 403\n",
            "test.toml:3:12: bad template \"/users/{name/orders\": segment \"{name\" has unbalanced braces",
        ),
        (
            "[[vhost.route]]\ntemplate = \"/users/name}\"\nblock = 403\n",
            "test.toml:3:12: bad template \"/users/name}\": segment \"name}\" has unbalanced braces",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nblock = 403\n[[vhost.route]]\nexact = \"/\"\nblock = 404\n",
            "test.toml:5:1: route can never match: the route at line 2 has the same path match",
        ),
        // A condition makes the second route reachable.
        (
            "[[vhost.route]]\nexact = \"/\"\nblock = 403\n[[vhost.route]]\nexact = \"/\"\nmethods = [\"POST\"]\nblock = 405\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn actions() {
    check(&[
        (
            "[[vhost.route]]\nexact = \"/\"\n",
            "test.toml:2:1: route has no action: give one of respond, redirect, block, proxy or root",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nblock = 403\nproxy = \"app\"\n",
            "test.toml:5:9: route has both block and proxy: give one action",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = {}\nredirect = { location = \"/\" }\n",
            "test.toml:5:12: route has both respond and redirect: give one action",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"ap\"\n",
            "test.toml:4:9: unknown upstream \"ap\"; defined: \"app\"",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = { status = 101 }\n",
            "test.toml:4:22: respond status 101 is not allowed: use 200 to 599",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = { status = 600 }\n",
            "test.toml:4:22: respond status 600 is not allowed: use 200 to 599",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = { status = 204, body = \"x\" }\n",
            "test.toml:4:11: a 204 response cannot have a body",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nredirect = { status = 300, location = \"/\" }\n",
            "test.toml:4:23: redirect status 300 is not allowed: use 301, 302, 303, 307 or 308",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nredirect = { location = \"https://$hostname/\" }\n",
            "test.toml:4:25: bad location \"https://$hostname/\": unknown variable \"$hostname\": use $scheme, $host, $request_uri, $uri",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nblock = 200\n",
            "test.toml:4:9: block status 200 is not allowed: use 400 to 599",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nblock = 403\ncache = true\n",
            "test.toml:5:9: cache = true only applies to proxy routes",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\ncache_ttl = \"60s\"\n",
            "test.toml:5:13: cache_ttl needs cache = true",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\ncache = true\ncache_ttl = \"60\"\n",
            "test.toml:6:13: cache_ttl: duration without a unit: use ms, s, m or h",
        ),
    ]);
}

#[test]
fn conditions_and_headers() {
    let route = "[[vhost.route]]\nexact = \"/\"\nblock = 403\n";
    check(&[
        (
            &format!("{route}methods = [\"get\"]\n"),
            "test.toml:5:12: methods are case-sensitive: did you mean \"GET\"?",
        ),
        (
            &format!("{route}methods = [\"GE T\"]\n"),
            "test.toml:5:12: bad method \"GE T\": methods are tokens such as \"GET\" or \"M-SEARCH\" (RFC 9110 §9.1)",
        ),
        (
            &format!("{route}methods = []\n"),
            "test.toml:5:11: methods is empty: leave it out to match every method",
        ),
        (
            &format!("{route}headers = {{ \"x canary\" = \"1\" }}\n"),
            "test.toml:5:13: bad header name \"x canary\": a name is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 §5.1)",
        ),
        (
            &format!("{route}headers = {{ \"x-canary\" = \"é\" }}\n"),
            "test.toml:5:26: bad header value \"é\": only visible ASCII, spaces and tabs are allowed (RFC 9110 §5.5)",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = { headers = { \"Content-Length\" = \"5\" } }\n",
            "test.toml:4:25: header \"content-length\" cannot be set or removed: Squall sets connection and framing headers itself",
        ),
        (
            &format!(
                "{route}request_headers = {{ set = {{ \"x-a\" = \"1\", \"X-A\" = \"2\" }}, remove = [\"x-a\", \"connection\"] }}\n"
            ),
            "test.toml:5:42: header \"x-a\" is set twice\n\
             test.toml:5:67: header \"x-a\" is both set and removed\n\
             test.toml:5:74: header \"connection\" cannot be set or removed: Squall sets connection and framing headers itself",
        ),
    ]);
}

/// All violations are reported together, in file order, across sections.
#[test]
fn many_errors_at_once() {
    let text = "\
[server]
workers = 0
drain_timeout = \"5\"

[[listen]]
address = \"127.0.0.1:99999\"
tls = true

[[vhost]]
[[vhost.route]]
regex = \"(\"
proxy = \"nowhere\"
cache = true
";
    let expected = "\
test.toml:2:11: workers must be \"auto\" or a positive integer
test.toml:3:17: drain_timeout: duration without a unit: use ms, s, m or h
test.toml:6:11: bad address \"127.0.0.1:99999\": expected IP:PORT, as in \"127.0.0.1:8080\" or \"[::1]:8080\"
test.toml:7:7: tls = true needs at least one [[certificate]]
test.toml:11:9: bad regex \"(\": unclosed group
test.toml:12:9: unknown upstream \"nowhere\"; there is no [[upstream]]";
    let diagnostics = parse(text, "test.toml").unwrap_err();
    assert_eq!(diagnostics.to_string(), expected);
    assert_eq!(diagnostics.len(), 6);
}

#[test]
fn request_no_cache_per_route() {
    check(&[
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\nrequest_no_cache = \"ignore\"\n",
            "test.toml:5:20: request_no_cache needs cache = true",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\ncache = true\nrequest_no_cache = \"Ignore\"\n",
            "test.toml:6:20: unknown request_no_cache \"Ignore\": use honor or ignore",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\ncache = true\nrequest_no_cache = \"ignore\"\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn cache_set_cookie_per_route() {
    check(&[
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\ncache_set_cookie = \"strip\"\n",
            "test.toml:5:20: cache_set_cookie needs cache = true",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\ncache = true\ncache_set_cookie = \"keep\"\n",
            "test.toml:6:20: unknown cache_set_cookie \"keep\": use pass, strip or store",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\ncache = true\ncache_set_cookie = \"store\"\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn allow_and_deny_networks() {
    check(&[
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = { status = 200 }\nallow = [\"10.0.0.1/8\"]\n",
            "test.toml:5:10: bad network \"10.0.0.1/8\": host bits are set; did you mean \"10.0.0.0/8\"?",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = { status = 200 }\nallow = [\"10.0.0.0/8\"]\ndeny = [\"10.0.0.0/8\"]\n",
            "test.toml:5:10: \"10.0.0.0/8\" is in both allow and deny",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nrespond = { status = 200 }\nallow = []\n",
            "test.toml:5:9: allow is empty: list networks, or use block = 403",
        ),
        (
            "[[vhost.route]]\nexact = \"/\"\nproxy = \"app\"\nallow = [\"10.0.0.0/8\", \"::1\"]\ndeny = [\"10.0.0.7\"]\n",
            "(parsed)",
        ),
    ]);
}

#[test]
fn auth_basic_and_route_rates() {
    check(&[
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nauth_basic = { realm = \"Sta\\\"ff\", users_file = \"/etc/u\" }\n",
            "test.toml:5:24: bad realm \"Sta\\\"ff\": give visible ASCII and spaces, without '\"' or '\\\\'",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nauth_basic = { realm = \"Staff\", users_file = \"\" }\n",
            "test.toml:5:46: users_file is an empty path",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nauth_basic = { realm = \"Staff\" }\n",
            "test.toml:5:14: missing key \"users_file\"",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nrequest_rate = \"10/d\"\n",
            "test.toml:5:16: bad request_rate \"10/d\": give requests per unit, such as \"10/s\", \"600/m\" or \"1000/h\"",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nrequest_rate_key = \"route\"\n",
            "test.toml:5:20: request_rate_key needs request_rate on the route",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nrequest_burst = 5\n",
            "test.toml:5:17: request_burst needs request_rate on the route",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nrequest_rate = \"1/s\"\nrequest_rate_key = \"cookie\"\n",
            "test.toml:6:20: unknown request_rate_key \"cookie\": use \"client_ip\", \"header:NAME\" or \"route\"",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nrequest_rate = \"1/s\"\nrequest_rate_key = \"header:a b\"\n",
            "test.toml:6:20: bad header name \"a b\": a name is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 §5.1)",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nrequest_rate = \"1/s\"\nrequest_burst = 0\n",
            "test.toml:6:17: request_burst must be at least 1, not 0",
        ),
    ]);
}

#[test]
fn static_files() {
    check(&[
        (
            "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\nroot = \"/srv\"\n",
            "test.toml:5:8: route has both proxy and root: give one action",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"\"\n",
            "test.toml:4:8: root is empty: name the directory to serve",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nindex = \"i.html\"\n",
            "test.toml:5:9: index needs root",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nroot_follow_symlinks = true\n",
            "test.toml:5:24: root_follow_symlinks needs root",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\nindex = [\"a/b.html\"]\n",
            "test.toml:5:9: index \"a/b.html\" is not a file name (no '/', not '.' or '..')",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\nindex = []\n",
            "test.toml:5:9: index is empty: leave it out for index.html",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\ncache = true\n",
            "test.toml:5:9: cache = true only applies to proxy routes",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\nprecompressed = [\"gzip\"]\n",
            "test.toml:5:17: precompressed needs root",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\nprecompressed = []\n",
            "test.toml:5:17: precompressed is empty: leave it out",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\nprecompressed = [\"br\", \"deflate\"]\n",
            "test.toml:5:24: unknown coding \"deflate\" in precompressed: use \"br\", \"zstd\" or \"gzip\"",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\nprecompressed = [\"gzip\", \"GZIP\"]\n",
            "test.toml:5:26: precompressed names \"gzip\" twice",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\ncompress = {}\n",
            "test.toml:5:12: compress only applies to proxy and root routes",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\ncompress = {}\n\
             precompressed = [\"br\", \"zstd\", \"gzip\"]\n",
            "(parsed)",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv\"\nindex = [\"i.html\", \"i.htm\"]\n\
             root_follow_symlinks = true\n",
            "(parsed)",
        ),
    ]);
}

/// A route's `response_timeout` and `read_timeout`: proxy routes only, longer than 0; parsed
/// into the route, absent ones left to the upstream's.
#[test]
fn proxy_timeouts() {
    check(&[
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nread_timeout = \"5s\"\n",
            "test.toml:5:16: read_timeout only applies to proxy routes",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\nresponse_timeout = \"0s\"\n",
            "test.toml:5:20: response_timeout must be longer than 0",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\nread_timeout = 5\n",
            "test.toml:5:16: read_timeout: duration without a unit: use ms, s, m or h, as in \"5s\"",
        ),
        (
            "[[vhost.route]]\nprefix = \"/\"\nblock = 403\nbody_bytes_max = \"1GiB\"\n",
            "test.toml:5:18: body_bytes_max only applies to proxy routes",
        ),
    ]);
    let routes = "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\nread_timeout = \"10m\"\n";
    let upstream = "\n[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9000\" }]\n";
    let config = parse(
        &format!("[[vhost]]\n{routes}{upstream}{LISTEN}"),
        "test.toml",
    )
    .unwrap();
    let timeouts = config.vhost[0].routes[0].timeouts;
    assert_eq!(timeouts.read, Some(std::time::Duration::from_secs(600)));
    assert_eq!(timeouts.response, None, "the upstream's");
}
