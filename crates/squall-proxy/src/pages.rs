//! Error pages: the bodies configured for the statuses Squall answers itself, held in memory.
//!
//! The binary reads the files (at start-up and on reload) and hands their bytes in; this
//! module resolves, once per config, which page each vhost answers each status with (its own
//! `error_pages` over the `[server]` ones), so that an answer looks a page up in a short list.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use squall_config::{Config, ErrorPages as Configured};

/// One page, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub content_type: &'static str,
    pub body: Bytes,
}

/// The pages of one vhost (or of requests no vhost takes), by status.
type Table = Vec<(StatusCode, Arc<Page>)>;

/// Every vhost's pages, resolved.
#[derive(Debug, Default)]
pub struct ErrorPages {
    /// By vhost index, in config order.
    vhosts: Vec<Table>,
    /// `[server] error_pages`: for requests no vhost takes.
    server: Table,
}

impl ErrorPages {
    /// Resolves the pages of `config`, whose files' bytes are in `files` (a page whose file
    /// is missing there is left out).
    pub fn new(config: &Config, files: &HashMap<PathBuf, Bytes>) -> ErrorPages {
        let table = |pages: &Configured| -> Table {
            let found = pages.iter().filter_map(|p| {
                let body = files.get(&p.path)?.clone();
                let page = Page {
                    content_type: p.content_type,
                    body,
                };
                Some((p.status, Arc::new(page)))
            });
            found.collect()
        };
        let server = table(&config.server.error_pages);
        let vhosts = (config.vhost.iter())
            .map(|v| {
                let mut own = table(&v.error_pages);
                let defaults = server
                    .iter()
                    .filter(|(s, _)| !own.iter().any(|(o, _)| o == s));
                let defaults: Vec<_> = defaults.cloned().collect();
                own.extend(defaults);
                own
            })
            .collect();
        ErrorPages { vhosts, server }
    }

    /// The page for `status` in the vhost at index `vhost` (`None`: no vhost took the
    /// request, the `[server]` pages).
    pub fn get(&self, vhost: Option<usize>, status: StatusCode) -> Option<&Page> {
        let table = match vhost {
            Some(i) => self.vhosts.get(i)?,
            None => &self.server,
        };
        let (_, page) = table.iter().find(|(s, _)| *s == status)?;
        Some(page)
    }

    /// No page is configured anywhere: answers need not look.
    pub fn is_empty(&self) -> bool {
        self.server.is_empty() && self.vhosts.iter().all(Vec::is_empty)
    }
}

/// An origin's error head as the error `page` replaces it: its status and fields but those
/// that describe its body, the page's type and length, and the page to send (`None` when
/// the response has no body, as for HEAD).
pub fn intercepted(
    mut head: crate::ClientHead,
    page: &Page,
    h2: bool,
) -> (crate::ClientHead, Option<Bytes>) {
    for name in [
        http::header::CONTENT_TYPE,
        http::header::CONTENT_ENCODING,
        http::header::CONTENT_RANGE,
        http::header::CONTENT_LANGUAGE,
        http::header::CONTENT_LOCATION,
        http::header::ETAG,
        http::header::LAST_MODIFIED,
        http::header::TRANSFER_ENCODING,
    ] {
        head.headers.remove(name);
    }
    head.headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(page.content_type),
    );
    let length = page.body.len() as u64;
    head.body_len = Some(length);
    if head.framing == crate::ClientFraming::Empty {
        return (head, None);
    }
    head.framing = if h2 {
        crate::ClientFraming::Frames
    } else {
        crate::ClientFraming::Length(length)
    };
    let body = Some(page.body.clone()).filter(|b| !b.is_empty());
    (head, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vhost_page_wins_over_the_server_default_and_unread_files_are_left_out() {
        let text = r#"
[[listen]]
address = "127.0.0.1:8080"
[server]
error_pages = { 404 = "/e/server404.html", 502 = "/e/502.json" }
[[vhost]]
hosts = ["a.test"]
error_pages = { 404 = "/e/a404.txt", 503 = "/e/missing.html" }
[[vhost]]
hosts = ["b.test"]
"#;
        let config = squall_config::parse(text, "t.toml").unwrap();
        let files: HashMap<PathBuf, Bytes> = [
            ("/e/server404.html", "S404"),
            ("/e/502.json", "{}"),
            ("/e/a404.txt", "A404"),
        ]
        .into_iter()
        .map(|(p, b)| (PathBuf::from(p), Bytes::from_static(b.as_bytes())))
        .collect();
        let pages = ErrorPages::new(&config, &files);
        let body = |v, s: u16| {
            let page = pages.get(v, StatusCode::from_u16(s).unwrap());
            page.map(|p| (p.content_type, &p.body[..]))
        };
        assert_eq!(
            body(Some(0), 404),
            Some(("text/plain; charset=utf-8", &b"A404"[..]))
        );
        assert_eq!(body(Some(0), 502), Some(("application/json", &b"{}"[..])));
        assert_eq!(body(Some(0), 503), None);
        assert_eq!(body(Some(1), 404).map(|b| b.1), Some(&b"S404"[..]));
        assert_eq!(body(None, 404).map(|b| b.1), Some(&b"S404"[..]));
        assert_eq!(body(None, 500), None);
        assert!(!pages.is_empty());
    }

    #[test]
    fn an_intercepted_head_keeps_its_status_and_other_fields_and_takes_the_page() {
        let page = Page {
            content_type: "text/html; charset=utf-8",
            body: Bytes::from_static(b"<p>later</p>"),
        };
        let mut headers = http::HeaderMap::new();
        headers.insert("content-type", "text/plain".parse().unwrap());
        headers.insert("content-encoding", "gzip".parse().unwrap());
        headers.insert("etag", "\"x\"".parse().unwrap());
        headers.insert("retry-after", "7".parse().unwrap());
        let head = |framing| crate::ClientHead {
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: headers.clone(),
            body_len: None,
            framing,
            keep_alive: true,
        };
        let (h1, body) = intercepted(head(crate::ClientFraming::Chunked), &page, false);
        assert_eq!(h1.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(h1.framing, crate::ClientFraming::Length(12));
        assert_eq!((h1.body_len, body), (Some(12), Some(page.body.clone())));
        assert_eq!(h1.headers["content-type"], "text/html; charset=utf-8");
        assert_eq!(h1.headers["retry-after"], "7");
        assert!(!h1.headers.contains_key("content-encoding") && !h1.headers.contains_key("etag"));
        let (h2, _) = intercepted(head(crate::ClientFraming::Frames), &page, true);
        assert_eq!(h2.framing, crate::ClientFraming::Frames);
        // HEAD: the page's length, no body.
        let (bodiless, body) = intercepted(head(crate::ClientFraming::Empty), &page, false);
        assert_eq!(
            (bodiless.framing, bodiless.body_len, body),
            (crate::ClientFraming::Empty, Some(12), None)
        );
    }
}
