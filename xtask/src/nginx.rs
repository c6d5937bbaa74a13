//! nginx as the peer server of `--vs nginx`: an nginx.conf generated from a scenario's Squall
//! config, so both servers answer the same requests with the same bodies.
//!
//! Only what the scenarios use is translated: one catch-all vhost whose routes are `exact`,
//! `prefix` or `regex` with a fixed `respond`. Anything else is "not supported by nginx" rather
//! than a silently different benchmark. Match order is preserved: nginx tries `=` locations,
//! then regexes in file order, then the longest plain prefix, which is Squall's order too
//! (CONFIG.md: exact, then regex in file order, then longest prefix).
//!
//! A TLS listener (`tls = true`) becomes `listen ... ssl` with TLS 1.2 and 1.3, nginx's default
//! key exchange groups (OpenSSL's: X25519 first) and resumption as Squall offers it: TLS 1.3
//! tickets (nginx's default `ssl_session_tickets on`) and a TLS 1.2 session cache. Its
//! certificate is the one `[[certificate]]` entry: `self_signed = true` becomes an ECDSA P-256
//! certificate generated with `openssl req` into the run folder (what Squall generates in
//! memory), `cert` and `key` are served as they are.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

/// Where nginx keeps its files: everything inside one run folder, so it needs no root-owned path.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    pub dir: &'a Path,
    pub port: u16,
}

/// An nginx.conf, and the certificate to generate before nginx starts, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    pub text: String,
    pub self_signed: Option<SelfSigned>,
}

/// A self-signed certificate for `hosts` that the caller generates with `openssl req`.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfSigned {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub hosts: Vec<String>,
}

impl SelfSigned {
    /// `openssl req` arguments for an ECDSA P-256 key and a certificate signed with it
    /// (ecdsa-with-SHA256), valid for two days, with the hosts as CN and subjectAltName.
    pub fn openssl_args(&self) -> Vec<String> {
        let first = self.hosts.first().map_or("localhost", String::as_str);
        let names: Vec<String> = self.hosts.iter().map(|h| format!("DNS:{h}")).collect();
        let mut args: Vec<String> = [
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-sha256",
            "-nodes",
            "-days",
            "2",
            "-subj",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("/CN={first}"));
        if !names.is_empty() {
            args.push("-addext".into());
            args.push(format!("subjectAltName={}", names.join(",")));
        }
        args.push("-keyout".into());
        args.push(self.key.to_string_lossy().into_owned());
        args.push("-out".into());
        args.push(self.cert.to_string_lossy().into_owned());
        args
    }
}

/// The nginx.conf for a Squall config, or why nginx cannot serve it.
pub fn config(squall: &Table, layout: &Layout) -> Result<Translated, String> {
    let vhost = single_catch_all_vhost(squall)?;
    let routes = vhost
        .get("route")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut locations = String::new();
    for route in routes {
        let route = route.as_table().ok_or("a route is not a table")?;
        locations.push_str(&location(route)?);
    }
    if !crate::scenario::listen_tls(squall) {
        return Ok(Translated {
            text: frame(layout, "", &locations),
            self_signed: None,
        });
    }
    let (cert, key, self_signed) = certificate(squall, layout.dir)?;
    let tls = format!(
        "        ssl_certificate {};
        ssl_certificate_key {};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_tickets on;
",
        quote(&cert.to_string_lossy()),
        quote(&key.to_string_lossy()),
    );
    Ok(Translated {
        text: frame(layout, &tls, &locations),
        self_signed,
    })
}

/// The certificate and key of the one `[[certificate]]` entry, and what to generate for a
/// `self_signed` one.
fn certificate(
    squall: &Table,
    dir: &Path,
) -> Result<(PathBuf, PathBuf, Option<SelfSigned>), String> {
    let entries = squall
        .get("certificate")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let [entry] = entries else {
        return Err(format!(
            "{} [[certificate]] entries (nginx is given exactly one)",
            entries.len()
        ));
    };
    let entry = entry.as_table().ok_or("[[certificate]] is not a table")?;
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(PathBuf::from);
    if entry.get("self_signed").and_then(Value::as_bool) == Some(true) {
        let hosts: Vec<String> = entry
            .get("hosts")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|h| h.as_str().map(String::from).ok_or("a host is not a string"))
            .collect::<Result<_, _>>()?;
        if let Some(odd) = hosts.iter().find(|h| {
            h.is_empty()
                || !h
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '*'))
        }) {
            return Err(format!("a self-signed certificate for {odd:?}"));
        }
        let generated = SelfSigned {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            hosts,
        };
        return Ok((
            generated.cert.clone(),
            generated.key.clone(),
            Some(generated),
        ));
    }
    match (text("cert"), text("key")) {
        (Some(cert), Some(key)) => Ok((cert, key, None)),
        _ => Err("a [[certificate]] without self_signed or cert and key".into()),
    }
}

/// The fixed part: one process (`master_process off`) so that the PID started is the one that
/// serves and its CPU time is the whole cost; logs and temp files inside the run folder. `tls`
/// is empty in cleartext, else the `ssl_*` directives of the server.
fn frame(layout: &Layout, tls: &str, locations: &str) -> String {
    let dir = layout.dir.display();
    let port = layout.port;
    let ssl = if tls.is_empty() { "" } else { " ssl" };
    format!(
        "# Generated by cargo xtask bench --vs nginx from a Squall scenario.
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 20000;
pcre_jit on;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections 16384;
}}
http {{
    access_log off;
    server_tokens off;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 65s;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port}{ssl} backlog=4096;
        server_name _;
{tls}{locations}    }}
}}
"
    )
}

fn single_catch_all_vhost(squall: &Table) -> Result<&Table, String> {
    let vhosts = squall
        .get("vhost")
        .and_then(Value::as_array)
        .ok_or("no [[vhost]]")?;
    let [vhost] = vhosts.as_slice() else {
        return Err("more than one [[vhost]]".into());
    };
    let vhost = vhost.as_table().ok_or("[[vhost]] is not a table")?;
    let catch_all = vhost
        .get("hosts")
        .and_then(Value::as_array)
        .is_some_and(|hosts| hosts.iter().any(|h| h.as_str() == Some("*")));
    if !catch_all {
        return Err("a vhost that is not hosts = [\"*\"]".into());
    }
    Ok(vhost)
}

/// One `location` block for one route.
fn location(route: &Table) -> Result<String, String> {
    let mut matcher = None;
    for key in route.keys() {
        let kind = match key.as_str() {
            "exact" => "= ",
            "prefix" => "",
            "regex" => "~ ",
            "respond" => continue,
            other => return Err(format!("routes with `{other}`")),
        };
        let pattern = route[key]
            .as_str()
            .ok_or("a route pattern is not a string")?;
        if matcher.replace((kind, pattern)).is_some() {
            return Err("a route with two matchers".into());
        }
    }
    let (kind, pattern) = matcher.ok_or("a route without exact, prefix or regex")?;
    let respond = route
        .get("respond")
        .and_then(Value::as_table)
        .ok_or("routes without respond")?;
    Ok(format!(
        "        location {kind}{} {{ {}}}\n",
        quote(pattern),
        respond_body(respond)?
    ))
}

/// `default_type` carries the content type because `return` has no header of its own.
fn respond_body(respond: &Table) -> Result<String, String> {
    let status = respond
        .get("status")
        .and_then(Value::as_integer)
        .unwrap_or(200);
    let body = respond.get("body").and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    let mut content_type = "application/octet-stream";
    if let Some(headers) = respond.get("headers").and_then(Value::as_table) {
        for (name, value) in headers {
            let value = value.as_str().ok_or("a header value is not a string")?;
            if name.eq_ignore_ascii_case("content-type") {
                content_type = value;
            } else {
                // Formatting into a String cannot fail.
                let _ = write!(
                    out,
                    "add_header {} {} always; ",
                    quote(name),
                    quote_value(value)?
                );
            }
        }
    }
    let content_type = quote_value(content_type)?;
    Ok(format!(
        "default_type {content_type}; {out}return {status} {}; ",
        quote_value(body)?
    ))
}

/// A double-quoted nginx string for a value nginx expands (`return`, `add_header`): there `$`
/// starts a variable and nginx has no escape for it.
fn quote_value(text: &str) -> Result<String, String> {
    if text.contains('$') {
        return Err(format!("{text:?}: `$` in a response"));
    }
    Ok(quote(text))
}

/// A double-quoted nginx string, for names and location patterns (where `$` is literal).
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
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
        let prefix =
            r#"location "/p/1/" { default_type "application/octet-stream"; return 200 ""; }"#;
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
            Err("0 [[certificate]] entries (nginx is given exactly one)".into())
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
    fn refuses_what_it_cannot_translate() {
        let proxy = squall("[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\n");
        assert_eq!(config(&proxy, &layout()), Err("routes with `proxy`".into()));
        let dollar = squall("[[vhost.route]]\nexact = \"/\"\nrespond = { body = \"$x y\" }\n");
        assert!(config(&dollar, &layout()).is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
        assert_eq!(quote("^/x$"), "\"^/x$\"");
        assert!(quote_value("$host").is_err());
    }
}
