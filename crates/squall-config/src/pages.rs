//! `error_pages = { 404 = "/srv/errors/404.html" }`: the bodies Squall answers its own errors
//! with, per `[[vhost]]` and as a `[server]` default.
//!
//! The config only names the files: reading them is the binary's (at start-up, on reload and
//! in `squall check`), which reports a missing or oversized file at the key that named it
//! through [`crate::Sites`] ([`crate::Site::ErrorPage`]). The content type comes from the
//! extension, so that a page is known to be servable before any request asks for it.

use std::path::PathBuf;

use http::StatusCode;

use crate::diagnostics::Report;
use crate::raw::Pairs;

/// Largest error page read into memory; a bigger file is a config error.
pub const ERROR_PAGE_BYTES_MAX: u64 = 1024 * 1024;

/// One configured page: the status it answers and the file its body comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPage {
    pub status: StatusCode,
    pub path: PathBuf,
    /// From the extension: `text/html; charset=utf-8`, `text/plain; charset=utf-8` or
    /// `application/json`.
    pub content_type: &'static str,
}

/// The pages of a `[[vhost]]` or of `[server]`, in file order, one per status.
pub type ErrorPages = Vec<ErrorPage>;

/// The content type a page file's extension gives it, if Squall serves that extension.
pub fn page_content_type(path: &std::path::Path) -> Option<&'static str> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    match extension.as_str() {
        "html" | "htm" => Some("text/html; charset=utf-8"),
        "txt" => Some("text/plain; charset=utf-8"),
        "json" => Some("application/json"),
        _ => None,
    }
}

/// Validates `error_pages = { STATUS = "PATH" }`: statuses 400..=599, each once, paths with a
/// known extension.
pub(crate) fn error_pages(raw: &Pairs, r: &mut Report) -> ErrorPages {
    let mut pages: ErrorPages = Vec::new();
    for (key, value) in &raw.0 {
        let status = (key.get_ref().parse::<u16>().ok())
            .filter(|s| (400..=599).contains(s))
            .and_then(|s| StatusCode::from_u16(s).ok());
        let Some(status) = status else {
            let message = format!(
                "error_pages: {:?} is not an error status (400 to 599)",
                key.get_ref()
            );
            r.error(&key.span(), message);
            continue;
        };
        if pages.iter().any(|p| p.status == status) {
            r.error(
                &key.span(),
                format!("error_pages: {status} is listed twice"),
            );
            continue;
        }
        let path = PathBuf::from(value.get_ref());
        let Some(content_type) = page_content_type(&path) else {
            r.error(
                &value.span(),
                "error_pages: the file must end in .html, .htm, .txt or .json",
            );
            continue;
        };
        pages.push(ErrorPage {
            status,
            path,
            content_type,
        });
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn content_types_come_from_the_extension() {
        let of = |p: &str| page_content_type(Path::new(p));
        assert_eq!(of("/e/404.html"), Some("text/html; charset=utf-8"));
        assert_eq!(of("/e/404.HTM"), Some("text/html; charset=utf-8"));
        assert_eq!(of("e.txt"), Some("text/plain; charset=utf-8"));
        assert_eq!(of("e.json"), Some("application/json"));
        assert_eq!(of("e.png"), None);
        assert_eq!(of("e"), None);
    }
}
