//! The routing rules of CONFIG.md, one test per rule: vhost selection, the order of route kinds,
//! condition fall-through, template captures, regex anchoring, and build errors.

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use squall_router::{
    BuildError, Pattern, PatternError, RouteRequest, RouteSpec, Router, VhostSpec,
};

fn route(pattern: Pattern, action: &'static str) -> RouteSpec<&'static str> {
    RouteSpec {
        pattern,
        methods: None,
        headers: Vec::new(),
        action,
    }
}

fn exact(p: &str, action: &'static str) -> RouteSpec<&'static str> {
    route(Pattern::Exact(p.into()), action)
}
fn prefix(p: &str, action: &'static str) -> RouteSpec<&'static str> {
    route(Pattern::Prefix(p.into()), action)
}
fn template(p: &str, action: &'static str) -> RouteSpec<&'static str> {
    route(Pattern::Template(p.into()), action)
}
fn regex(p: &str, action: &'static str) -> RouteSpec<&'static str> {
    route(Pattern::Regex(p.into()), action)
}

fn with_methods(mut r: RouteSpec<&'static str>, methods: &[Method]) -> RouteSpec<&'static str> {
    r.methods = Some(methods.to_vec());
    r
}

fn with_header(mut r: RouteSpec<&'static str>, name: &str, value: &str) -> RouteSpec<&'static str> {
    let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
    r.headers
        .push((name, HeaderValue::from_str(value).unwrap()));
    r
}

fn vhost(hosts: &[&str], routes: Vec<RouteSpec<&'static str>>) -> VhostSpec<&'static str> {
    VhostSpec {
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        routes,
    }
}

fn one_vhost(routes: Vec<RouteSpec<&'static str>>) -> Router<&'static str> {
    Router::new(vec![vhost(&["*"], routes)]).unwrap()
}

/// Routes a request and returns the matched action, or "404".
struct Client<'a> {
    router: &'a Router<&'static str>,
    host: Option<&'a str>,
    method: Method,
    headers: HeaderMap,
}

impl<'a> Client<'a> {
    fn new(router: &'a Router<&'static str>) -> Self {
        Client {
            router,
            host: None,
            method: Method::GET,
            headers: HeaderMap::new(),
        }
    }

    fn host(mut self, host: &'a str) -> Self {
        self.host = Some(host);
        self
    }

    fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.append(name, HeaderValue::from_static(value));
        self
    }

    fn get(&self, path: &str) -> &'static str {
        let req = RouteRequest {
            host: self.host,
            method: &self.method,
            path,
            headers: &self.headers,
        };
        self.router.route(&req).map_or("404", |m| *m.action)
    }
}

#[test]
fn exact_beats_regex_and_template_which_beat_prefix() {
    let r = one_vhost(vec![
        prefix("/", "prefix-root"),
        prefix("/api/", "prefix-api"),
        regex("^/api/", "regex-api"),
        template("/api/{name}", "template-api"),
        exact("/api/users", "exact"),
    ]);
    let c = Client::new(&r);
    assert_eq!(
        c.get("/api/users"),
        "exact",
        "exact first, wherever it is in the file"
    );
    assert_eq!(
        c.get("/api/orders"),
        "regex-api",
        "regex before template: file order"
    );
    assert_eq!(c.get("/api/a/b"), "regex-api");
    assert_eq!(c.get("/apis"), "prefix-root");
    assert_eq!(c.get("/elsewhere"), "prefix-root");
}

#[test]
fn regex_and_template_interleave_in_file_order() {
    let r = one_vhost(vec![
        template("/users/{id}", "template-1"),
        regex("^/users/", "regex-2"),
        template("/users/{id}/orders", "template-3"),
        regex("orders$", "regex-4"),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.get("/users/7"), "template-1");
    assert_eq!(c.get("/users/7/orders"), "regex-2");
    assert_eq!(c.get("/shop/orders"), "regex-4");
}

#[test]
fn longest_prefix_wins_whatever_the_file_order() {
    let r = one_vhost(vec![
        prefix("/", "root"),
        prefix("/static/img/", "img"),
        prefix("/static/", "static"),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.get("/static/img/a.png"), "img");
    assert_eq!(c.get("/static/css/a.css"), "static");
    assert_eq!(
        c.get("/static"),
        "root",
        "string prefix: /static/ needs the slash"
    );
    assert_eq!(c.get("/"), "root");
    assert_eq!(c.get(""), "404", "no prefix of the empty path");
}

#[test]
fn exact_routes_on_one_path_split_by_method() {
    let r = one_vhost(vec![
        with_methods(exact("/", "get"), &[Method::GET]),
        with_methods(exact("/", "post"), &[Method::POST]),
        prefix("/", "fallback"),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.get("/"), "get");
    assert_eq!(c.clone_with(Method::POST).get("/"), "post");
    assert_eq!(
        c.clone_with(Method::HEAD).get("/"),
        "fallback",
        "HEAD is not GET unless listed"
    );
    assert_eq!(
        c.clone_with(Method::from_bytes(b"M-SEARCH").unwrap())
            .get("/"),
        "fallback"
    );
}

impl Client<'_> {
    fn clone_with(&self, method: Method) -> Self {
        Client {
            router: self.router,
            host: self.host,
            method,
            headers: self.headers.clone(),
        }
    }
}

#[test]
fn head_matches_when_listed_and_extension_methods_compare_exactly() {
    let purge = Method::from_bytes(b"PURGE").unwrap();
    let r = one_vhost(vec![
        with_methods(exact("/x", "read"), &[Method::GET, Method::HEAD]),
        with_methods(exact("/x", "purge"), std::slice::from_ref(&purge)),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.clone_with(Method::HEAD).get("/x"), "read");
    assert_eq!(c.clone_with(purge).get("/x"), "purge");
    assert_eq!(c.clone_with(Method::DELETE).get("/x"), "404");
}

#[test]
fn failing_condition_on_longer_prefix_falls_back_to_shorter() {
    let r = one_vhost(vec![
        prefix("/", "root"),
        with_header(prefix("/app/", "canary"), "x-canary", "1"),
        with_methods(prefix("/app/", "app-post"), &[Method::POST]),
        with_methods(prefix("/app/v2/", "v2-put"), &[Method::PUT]),
    ]);
    let c = Client::new(&r);
    assert_eq!(
        c.get("/app/v2/x"),
        "root",
        "v2 needs PUT, /app/ routes need a header or POST"
    );
    assert_eq!(
        Client::new(&r).header("x-canary", "1").get("/app/v2/x"),
        "canary"
    );
    assert_eq!(c.clone_with(Method::POST).get("/app/v2/x"), "app-post");
    assert_eq!(c.clone_with(Method::PUT).get("/app/v2/x"), "v2-put");
}

#[test]
fn failing_condition_falls_through_the_kinds_in_order() {
    let r = one_vhost(vec![
        with_methods(exact("/a/b", "exact-post"), &[Method::POST]),
        with_methods(regex("^/a/", "regex-put"), &[Method::PUT]),
        with_header(template("/a/{x}", "template-hdr"), "x-t", "yes"),
        template("/a/{x}", "template"),
        prefix("/a/", "prefix"),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.clone_with(Method::POST).get("/a/b"), "exact-post");
    assert_eq!(c.clone_with(Method::PUT).get("/a/b"), "regex-put");
    assert_eq!(
        Client::new(&r).header("x-t", "yes").get("/a/b"),
        "template-hdr"
    );
    assert_eq!(c.get("/a/b"), "template");
    assert_eq!(c.get("/a/b/c"), "prefix");
}

#[test]
fn header_conditions_exact_value_case_insensitive_name() {
    let r = one_vhost(vec![
        with_header(
            with_header(exact("/", "both"), "X-Canary", "1"),
            "x-zone",
            "eu",
        ),
        with_header(exact("/", "canary"), "x-canary", "1"),
        exact("/", "plain"),
    ]);
    assert_eq!(Client::new(&r).header("x-canary", "1").get("/"), "canary");
    assert_eq!(
        Client::new(&r)
            .header("x-canary", "1")
            .header("x-zone", "eu")
            .get("/"),
        "both"
    );
    assert_eq!(
        Client::new(&r).header("x-canary", "01").get("/"),
        "plain",
        "byte-exact value"
    );
    assert_eq!(Client::new(&r).header("x-canary", "1 ").get("/"), "plain");
    assert_eq!(
        Client::new(&r)
            .header("x-zone", "EU")
            .header("x-canary", "1")
            .get("/"),
        "canary"
    );
    assert_eq!(
        Client::new(&r)
            .header("x-canary", "0")
            .header("x-canary", "1")
            .get("/"),
        "canary",
        "any one of repeated lines may satisfy it"
    );
    assert_eq!(Client::new(&r).get("/"), "plain");
}

#[test]
fn vhost_selection() {
    let r = Router::new(vec![
        vhost(&["*.example.com"], vec![prefix("/", "wild")]),
        vhost(&["*.api.example.com"], vec![prefix("/", "api-wild")]),
        vhost(
            &["example.com", "www.example.com"],
            vec![prefix("/", "exact")],
        ),
        vhost(&["*"], vec![prefix("/", "default")]),
    ])
    .unwrap();
    let get = |host: &'static str| Client::new(&r).host(host).get("/");
    assert_eq!(get("example.com"), "exact");
    assert_eq!(
        get("Example.COM."),
        "exact",
        "case-insensitive, trailing dot ignored"
    );
    assert_eq!(get("www.example.com"), "exact");
    assert_eq!(get("a.example.com"), "wild");
    assert_eq!(get("a.b.example.com"), "wild");
    assert_eq!(
        get("v1.api.example.com"),
        "api-wild",
        "longest wildcard suffix"
    );
    assert_eq!(get("api.example.com"), "wild");
    assert_eq!(get("example.org"), "default");
    assert_eq!(get("notexample.com"), "default");
    assert_eq!(Client::new(&r).get("/"), "default", "no Host");
    assert_eq!(r.select_vhost(Some("A.Example.com")), Some(0));
}

#[test]
fn no_default_vhost_and_unknown_host_is_none() {
    let r = Router::new(vec![vhost(&["example.com"], vec![prefix("/", "x")])]).unwrap();
    assert_eq!(Client::new(&r).host("other.com").get("/"), "404");
    assert_eq!(Client::new(&r).get("/"), "404");
    assert_eq!(Client::new(&r).host("example.com").get("/"), "x");
}

#[test]
fn selected_vhost_does_not_fall_back_to_default() {
    let r = Router::new(vec![
        vhost(&["a.com"], vec![exact("/only", "a")]),
        vhost(&["*"], vec![prefix("/", "default")]),
    ])
    .unwrap();
    assert_eq!(
        Client::new(&r).host("a.com").get("/other"),
        "404",
        "nginx: the server is chosen first"
    );
}

#[test]
fn matched_reports_indices_and_template_params() {
    let r = Router::new(vec![
        vhost(&["x.com"], vec![]),
        vhost(
            &["*"],
            vec![
                prefix("/", "root"),
                template("/users/{name}/orders/{id}.json", "orders"),
            ],
        ),
    ])
    .unwrap();
    let headers = HeaderMap::new();
    let path = "/users/ann/orders/42.json";
    let req = RouteRequest {
        host: Some("y.com"),
        method: &Method::GET,
        path,
        headers: &headers,
    };
    let m = r.route(&req).unwrap();
    assert_eq!((*m.action, m.vhost_index, m.route_index), ("orders", 1, 1));
    assert_eq!(m.params.len(), 2);
    assert_eq!(m.params.value("name", path), Some("ann"));
    assert_eq!(m.params.value("id", path), Some("42"));
    assert_eq!(m.params.get("id"), Some(18..20));
    assert_eq!(m.params.value("nope", path), None);
    let names: Vec<&str> = m.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["name", "id"]);
    assert_eq!(r.route_count(1), 2);
    assert_eq!(r.vhost_count(), 2);
}

#[test]
fn template_segments_are_whole_and_non_empty() {
    let r = one_vhost(vec![
        template("/users/{name}/orders", "t"),
        template("/", "root"),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.get("/users/bob/orders"), "t");
    assert_eq!(
        c.get("/users/bob/x/orders"),
        "404",
        "a parameter never spans a '/'"
    );
    assert_eq!(
        c.get("/users//orders"),
        "404",
        "nor matches an empty segment"
    );
    assert_eq!(c.get("/users/bob/orders/"), "404");
    assert_eq!(
        c.get("/users/bob/orders?x=1"),
        "404",
        "the caller strips the query"
    );
    assert_eq!(c.get("/"), "root");
}

#[test]
fn regex_is_unanchored_unless_it_anchors_itself() {
    let r = one_vhost(vec![
        regex("^/v[0-9]+/", "anchored"),
        regex(r"\.php$", "php"),
        regex("/admin/", "admin-anywhere"),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.get("/v2/x"), "anchored");
    assert_eq!(c.get("/x/v2/y"), "404");
    assert_eq!(c.get("/a/b/index.php"), "php");
    assert_eq!(c.get("/index.php/x"), "404");
    assert_eq!(c.get("/site/admin/panel"), "admin-anywhere");
    assert_eq!(c.get("/admin"), "404");
}

#[test]
fn regex_named_groups_become_params() {
    let r = one_vhost(vec![
        regex(r"^/v(?<version>[0-9]+)/(?<rest>.*)$", "v"),
        regex("(x)(?<y>y)?$", "xy"),
    ]);
    let headers = HeaderMap::new();
    let path = "/v12/a/b";
    let m = r
        .route(&RouteRequest {
            host: None,
            method: &Method::GET,
            path,
            headers: &headers,
        })
        .unwrap();
    assert_eq!(m.params.value("version", path), Some("12"));
    assert_eq!(m.params.value("rest", path), Some("a/b"));
    let path = "/ax";
    let m = r
        .route(&RouteRequest {
            host: None,
            method: &Method::GET,
            path,
            headers: &headers,
        })
        .unwrap();
    assert_eq!(
        (*m.action, m.params.len()),
        ("xy", 0),
        "a group that did not take part is absent"
    );
}

#[test]
fn regex_features_the_index_must_not_break() {
    let r = one_vhost(vec![
        regex("(?i)^/API/", "case"),
        regex("(?m)^/line", "multiline"),
        regex(r"^/(img|css|js)/.+\.(png|css|js)$", "assets"),
        regex(r"\bword\b", "word"),
        regex("^$", "empty"),
        regex("[a-z]+[0-9]$", "no-literal"),
    ]);
    let c = Client::new(&r);
    assert_eq!(c.get("/api/x"), "case");
    assert_eq!(c.get("/Api/x"), "case");
    assert_eq!(c.get("/line"), "multiline");
    assert_eq!(c.get("/css/site.css"), "assets");
    assert_eq!(c.get("/a/word/b"), "word");
    assert_eq!(c.get("/a/swordfish"), "404");
    assert_eq!(c.get(""), "empty");
    assert_eq!(c.get("/zz/abc7"), "no-literal");
}

#[test]
fn build_errors_name_vhost_and_route() {
    let bad_regex = Router::new(vec![vhost(
        &["*"],
        vec![exact("/", "ok"), regex("(", "bad")],
    )]);
    match bad_regex {
        Err(
            e @ BuildError::Pattern {
                vhost: 0,
                route: 1,
                source: PatternError::Regex(_),
            },
        ) => {
            assert!(
                e.to_string().starts_with("vhost 0 route 1: bad regex"),
                "{e}"
            );
            assert_eq!((e.vhost(), e.route()), (0, Some(1)));
        }
        other => panic!("{other:?}"),
    }
    let bad_template = Router::new(vec![
        vhost(&["a.com"], vec![]),
        vhost(
            &["*"],
            vec![
                prefix("/", "ok"),
                prefix("/x", "ok"),
                template("/u/{a b}", "bad"),
            ],
        ),
    ]);
    assert!(matches!(
        bad_template,
        Err(BuildError::Pattern {
            vhost: 1,
            route: 2,
            source: PatternError::Template { .. }
        })
    ));
    let too_many_groups = format!(
        "^{}$",
        (0..9).map(|i| format!("(?<g{i}>.)")).collect::<String>()
    );
    let err = Router::new(vec![vhost(&["*"], vec![regex(&too_many_groups, "x")])]).unwrap_err();
    assert!(
        matches!(err.route(), Some(0)) && err.to_string().contains("named groups"),
        "{err}"
    );
    let dup = Router::new(vec![vhost(&["a.com"], vec![]), vhost(&["A.com"], vec![])]).unwrap_err();
    assert!(
        matches!(
            dup,
            BuildError::DuplicateHost {
                vhost: 1,
                first: 0,
                ..
            }
        ),
        "{dup}"
    );
    assert_eq!(dup.route(), None);
}

#[test]
fn router_is_shareable_across_workers() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Router<String>>();
    let r = one_vhost(vec![exact("/", "x")]);
    assert_eq!(format!("{r:?}"), "Router { routes_per_vhost: [1] }");
}
