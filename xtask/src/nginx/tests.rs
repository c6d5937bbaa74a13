use std::path::Path;

use super::*;

fn squall(routes: &str) -> Table {
    let text = format!(
        "[server]\nworkers = 1\n[[listen]]\naddress = \"127.0.0.1:1\"\n\
         [[vhost]]\nhosts = [\"*\"]\n{routes}"
    );
    toml::from_str(&text).expect("valid toml")
}

fn layout() -> Layout<'static> {
    Layout {
        dir: Path::new("/tmp/run"),
        port: 8080,
        protocol: Protocol::H1,
        root: false,
        workers: None,
        server_cpus: &[1],
    }
}

fn h2() -> Layout<'static> {
    Layout {
        protocol: Protocol::H2,
        ..layout()
    }
}

#[test]
fn translates_each_route_kind_in_order() {
    let config = config(
        &squall(
            r#"
[[vhost.route]]
exact = "/"
respond = { status = 200, body = "Hello, world!", headers = { "content-type" = "text/plain" } }
[[vhost.route]]
regex = "^/x/1/[a-z]+$"
respond = { status = 201, body = "x", headers = { "x-a" = "b" } }
[[vhost.route]]
prefix = "/p/1/"
respond = { status = 200 }
"#,
        ),
        &layout(),
    )
    .expect("translatable");
    assert_eq!(config.self_signed, None);
    let config = config.text;
    let exact = r#"location = "/" { default_type "text/plain"; return 200 "Hello, world!"; }"#;
    let regex = r#"location ~ "^/x/1/[a-z]+$" { default_type "application/octet-stream"; add_header "x-a" "b" always; return 201 "x"; }"#;
    let prefix = r#"location "/p/1/" { default_type "application/octet-stream"; return 200 ""; }"#;
    let (e, r, p) = (config.find(exact), config.find(regex), config.find(prefix));
    assert!(e.is_some() && r.is_some() && p.is_some(), "{config}");
    assert!(e < r && r < p);
    assert!(config.contains("listen 127.0.0.1:8080 backlog=4096;"));
    assert!(config.contains("pid /tmp/run/nginx.pid;"));
    assert!(config.contains("master_process off;"));
    assert!(!config.contains("ssl"), "{config}");
}

fn tls(certificate: &str) -> Table {
    let text = format!(
        "[server]\nworkers = 1\n[[listen]]\naddress = \"127.0.0.1:1\"\ntls = true\n\
         protocols = [\"http1\"]\n{certificate}[[vhost]]\nhosts = [\"*\"]\n\
         [[vhost.route]]\nexact = \"/\"\nrespond = {{ body = \"x\" }}\n"
    );
    toml::from_str(&text).expect("valid toml")
}

#[test]
fn a_tls_listener_gets_ssl_and_a_generated_certificate() {
    let squall = tls("[[certificate]]\nhosts = [\"localhost\"]\nself_signed = true\n");
    let translated = config(&squall, &layout()).expect("translatable");
    let text = &translated.text;
    assert!(
        text.contains("listen 127.0.0.1:8080 ssl backlog=4096;"),
        "{text}"
    );
    for line in [
        r#"ssl_certificate "/tmp/run/cert.pem";"#,
        r#"ssl_certificate_key "/tmp/run/key.pem";"#,
        "ssl_protocols TLSv1.2 TLSv1.3;",
        "ssl_session_cache shared:SSL:10m;",
        "ssl_session_tickets on;",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    // nginx's default groups (OpenSSL's, X25519 first) and ciphers, as Squall's are its own.
    assert!(!text.contains("ssl_ecdh_curve") && !text.contains("ssl_ciphers"));
    // The server's directives come before its locations.
    assert!(text.find("ssl_certificate") < text.find("location"));
    let generated = translated.self_signed.expect("a certificate to generate");
    assert_eq!(generated.cert, Path::new("/tmp/run/cert.pem"));
    assert_eq!(
        generated.openssl_args().join(" "),
        "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -sha256 -nodes \
         -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost \
         -keyout /tmp/run/key.pem -out /tmp/run/cert.pem"
    );
}

#[test]
fn tls_certificates_nginx_can_and_cannot_take() {
    let files = tls("[[certificate]]\nhosts = [\"a\"]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\n");
    let translated = config(&files, &layout()).expect("translatable");
    assert!(translated.text.contains(r#"ssl_certificate "/c.pem";"#));
    assert!(translated.text.contains(r#"ssl_certificate_key "/k.pem";"#));
    assert_eq!(translated.self_signed, None);
    assert_eq!(
        config(&tls(""), &layout()),
        Err("0 [[certificate]] entries (a peer server is given exactly one)".into())
    );
    let two = "[[certificate]]\nhosts = [\"a\"]\nself_signed = true\n".repeat(2);
    assert!(config(&tls(&two), &layout()).is_err());
    let odd = tls("[[certificate]]\nhosts = [\"a/b\"]\nself_signed = true\n");
    assert!(config(&odd, &layout()).is_err());
    // A certificate next to a cleartext listener is not nginx's business.
    let cleartext = squall("[[certificate]]\nhosts = [\"a\"]\nself_signed = true\n");
    assert_eq!(config(&cleartext, &layout()).expect("ok").self_signed, None);
}

#[test]
fn a_root_route_serves_files_with_sendfile() {
    let squall = squall("[[vhost.route]]\nprefix = \"/\"\nroot = \"/srv/site\"\n");
    let text = config(&squall, &layout()).expect("translatable").text;
    let location = "location \"/\" { root \"/srv/site\"; index index.html; sendfile on; \
                    disable_symlinks on from=$document_root; }";
    assert!(text.contains(location), "{text}");
}

#[test]
fn http2_listens_with_http2() {
    let text = config(&squall(""), &h2()).expect("translatable").text;
    assert!(
        text.contains("listen 127.0.0.1:8080 http2 backlog=4096;"),
        "{text}"
    );
    let squall = tls("[[certificate]]\nhosts = [\"localhost\"]\nself_signed = true\n");
    let text = config(&squall, &h2()).expect("translatable").text;
    assert!(
        text.contains("listen 127.0.0.1:8080 ssl http2 backlog=4096;"),
        "{text}"
    );
}

fn proxied(route: &str, upstream: &str) -> Table {
    let text = format!(
        "[server]\nworkers = 1\n[[listen]]\naddress = \"127.0.0.1:1\"\n\
         [[upstream]]\nname = \"app\"\nservers = [{{ address = \"127.0.0.1:9\" }}]\n{upstream}\
         [[vhost]]\nhosts = [\"*\"]\n[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\n{route}"
    );
    toml::from_str(&text).expect("valid toml")
}

#[test]
fn a_proxy_route_is_proxy_pass_to_a_keepalive_upstream() {
    let text = config(&proxied("", ""), &layout())
        .expect("translatable")
        .text;
    let upstream = "    upstream squall_app {\n        server 127.0.0.1:9;\n        \
                    keepalive 256;\n        keepalive_requests 1000;\n        \
                    keepalive_timeout 60s;\n    }\n    server {";
    assert!(text.contains(upstream), "{text}");
    let location = "location \"/\" { proxy_pass http://squall_app; proxy_http_version 1.1; \
                    proxy_set_header Connection \"\"; proxy_set_header Host $host; \
                    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; \
                    proxy_set_header X-Forwarded-Proto $scheme; }";
    assert!(text.contains(location), "{text}");
    assert!(!text.contains("proxy_cache"), "{text}");
}

#[test]
fn a_cached_proxy_route_uses_a_cache_in_the_run_folder() {
    let text = config(&proxied("cache = true\n", ""), &layout())
        .expect("translatable")
        .text;
    assert!(
        text.contains(
            "    proxy_cache_path /tmp/run/cache levels=1:2 keys_zone=squall:10m \
             max_size=1g inactive=1h use_temp_path=off;\n    server {"
        ),
        "{text}"
    );
    assert!(
        text.contains("proxy_cache squall; proxy_cache_lock on; sendfile on; }"),
        "{text}"
    );
    assert!(!text.contains("proxy_cache_valid"), "{text}");
}

#[test]
fn a_compressed_proxy_route_gzips_at_the_same_level() {
    let route = "compress = { types = [\"text/plain\"], level = { gzip = 6 } }\n";
    let text = config(&proxied(route, ""), &layout())
        .expect("translatable")
        .text;
    let location = "proxy_set_header X-Forwarded-Proto $scheme; gzip on; gzip_comp_level 6; \
                    gzip_types \"text/plain\"; gzip_min_length 256; gzip_proxied any; \
                    gzip_vary on; }";
    assert!(text.contains(location), "{text}");
    // Squall's defaults: level 6, its type list (text/html is nginx's own), 256 bytes.
    let text = config(&proxied("compress = {}\n", ""), &layout())
        .expect("translatable")
        .text;
    let defaults = "gzip on; gzip_comp_level 6; gzip_types \"text/css\" \"text/plain\" \
                    \"text/javascript\" \"application/javascript\" \"application/json\" \
                    \"application/xml\" \"image/svg+xml\"; gzip_min_length 256;";
    assert!(text.contains(defaults), "{text}");
    let sized = "compress = { min_bytes = \"1KiB\", level = { gzip = 1, br = 5 } }\n";
    let text = config(&proxied(sized, ""), &layout())
        .expect("translatable")
        .text;
    assert!(text.contains("gzip_comp_level 1;"), "{text}");
    assert!(text.contains("gzip_min_length 1024;"), "{text}");
    // No gzip where the route does not compress.
    let plain = config(&proxied("", ""), &layout()).expect("ok").text;
    assert!(!plain.contains("gzip"), "{plain}");
    for odd in [
        "compress = { types = [\"text/*\"] }\n",
        "compress = { level = { gzip = 10 } }\n",
        "compress = { min_bytes = \"1KB\" }\n",
        "compress = { other = 1 }\n",
    ] {
        assert!(config(&proxied(odd, ""), &layout()).is_err(), "{odd}");
    }
}

#[test]
fn an_https_upstream_is_proxy_pass_https_without_verification() {
    let tls = "tls = true\ntls_verify = false\n";
    let text = config(&proxied("", tls), &layout())
        .expect("translatable")
        .text;
    let location = "location \"/\" { proxy_pass https://squall_app; proxy_http_version 1.1; \
                    proxy_set_header Connection \"\"; proxy_set_header Host $host; \
                    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; \
                    proxy_set_header X-Forwarded-Proto $scheme; \
                    proxy_ssl_protocols TLSv1.2 TLSv1.3; proxy_ssl_verify off; \
                    proxy_ssl_session_reuse on; }";
    assert!(text.contains(location), "{text}");
    let verified = config(&proxied("", "tls = true\n"), &layout()).expect_err("verify");
    assert!(verified.contains("tls_verify"), "{verified}");
    let named = format!("{tls}tls_server_name = \"localhost\"\n");
    assert_eq!(
        config(&proxied("", &named), &layout()),
        Err("upstreams with `tls_server_name`".into())
    );
}

#[test]
fn an_http2_upstream_is_grpc_pass_to_the_keepalive_upstream() {
    let text = config(&proxied("", "protocol = \"h2c\"\n"), &h2())
        .expect("translatable")
        .text;
    let location = "location \"/\" { grpc_pass grpc://squall_app; grpc_set_header Host $host; \
                    grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for; \
                    grpc_set_header X-Forwarded-Proto $scheme; }";
    assert!(text.contains(location), "{text}");
    assert!(text.contains("keepalive 256;"), "{text}");
    assert!(!text.contains("proxy_pass"), "{text}");
    let tls = "tls = true\ntls_verify = false\nprotocol = \"h2\"\n";
    let text = config(&proxied("", tls), &layout())
        .expect("translatable")
        .text;
    let location = "{ grpc_pass grpcs://squall_app; grpc_set_header Host $host; \
                    grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for; \
                    grpc_set_header X-Forwarded-Proto $scheme; \
                    grpc_ssl_protocols TLSv1.2 TLSv1.3; grpc_ssl_verify off; \
                    grpc_ssl_session_reuse on; }";
    assert!(text.contains(location), "{text}");
    let auto = "tls = true\ntls_verify = false\nprotocol = \"auto\"\n";
    let err = config(&proxied("", auto), &layout()).expect_err("auto");
    assert!(err.contains("ALPN"), "{err}");
    let cached = config(
        &proxied("cache = true\n", "protocol = \"h2c\"\n"),
        &layout(),
    );
    assert!(cached.expect_err("no grpc cache").contains("no cache"));
    assert!(config(&proxied("", "protocol = \"h2\"\n"), &layout()).is_err());
    assert!(config(&proxied("", "protocol = \"h3\"\n"), &layout()).is_err());
}

#[test]
fn sizes() {
    let size = |v: Value| size_bytes(&v);
    assert_eq!(size(Value::Integer(300)), Ok(300));
    assert_eq!(size(Value::String("16KiB".into())), Ok(16_384));
    assert_eq!(size(Value::String("2MiB".into())), Ok(2 << 20));
    assert_eq!(size(Value::String("7B".into())), Ok(7));
    assert_eq!(size(Value::String("7".into())), Ok(7));
    assert!(size(Value::String("16k".into())).is_err());
    assert!(size(Value::String("KiB".into())).is_err());
    assert!(size(Value::Integer(-1)).is_err());
}

#[test]
fn upstream_balance() {
    let least = config(&proxied("", "balance = \"least_conn\"\n"), &layout())
        .expect("translatable")
        .text;
    assert!(
        least.contains("upstream squall_app {\n        least_conn;\n"),
        "{least}"
    );
    let hash = proxied("", "balance = \"consistent_hash\"\n");
    assert!(config(&hash, &layout()).is_err());
}

#[test]
fn refuses_what_it_cannot_translate() {
    let proxy = squall("[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\n");
    assert_eq!(
        config(&proxy, &layout()),
        Err("no [[upstream]] \"app\"".into())
    );
    let redirect = squall("[[vhost.route]]\nprefix = \"/\"\nredirect = { location = \"/\" }\n");
    assert_eq!(
        config(&redirect, &layout()),
        Err("routes with `redirect`".into())
    );
    let dollar = squall("[[vhost.route]]\nexact = \"/\"\nrespond = { body = \"$x y\" }\n");
    assert!(config(&dollar, &layout()).is_err());
}

#[test]
fn quoting() {
    assert_eq!(quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
    assert_eq!(quote("^/x$"), "\"^/x$\"");
    assert!(quote_value("$host").is_err());
}

#[test]
fn workers_are_processes_pinned_as_squall_pins_its_workers() {
    let one = processes(&layout());
    assert_eq!(one, "master_process off;\nworker_processes 1;");
    let cpus = [0, 1, 2];
    let four = Layout {
        workers: Some(4),
        server_cpus: &cpus,
        ..layout()
    };
    assert_eq!(
        processes(&four),
        "master_process on;\nworker_processes 4;\nworker_cpu_affinity 1 10 100 1;"
    );
    let as_root = Layout {
        workers: Some(1),
        server_cpus: &cpus[2..],
        root: true,
        ..layout()
    };
    assert_eq!(
        processes(&as_root),
        "user root;\nmaster_process on;\nworker_processes 1;\nworker_cpu_affinity 100;"
    );
    let text = config(
        &squall("[[vhost.route]]\nexact = \"/\"\nrespond = { body = \"x\" }\n"),
        &four,
    )
    .expect("translatable")
    .text;
    assert!(
        text.starts_with("# Generated by cargo xtask bench --vs nginx"),
        "{text}"
    );
    assert!(
        text.contains("\ndaemon off;\nmaster_process on;\nworker_processes 4;\n"),
        "{text}"
    );
}
