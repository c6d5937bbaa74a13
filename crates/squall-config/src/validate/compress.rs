//! A route's `compress`: media types, the size below which nothing is compressed, and a level
//! per coding.
//!
//! Levels are bounded by what each coding defines (gzip 1..=9, brotli 0..=11) and, for zstd, by
//! what a streaming edge can afford: levels past 19 need windows of 8 MiB and more per
//! response, which a thousand concurrent responses would turn into gigabytes.

use toml::Spanned;

use super::value::{int_in, size_or};
use crate::diagnostics::Report;
use crate::model::{Action, Compress};
use crate::raw::{RawCompress, RawCompressLevels};

/// Validates `raw`; `action` is the route's (compression applies to proxied responses and
/// static files, not to the answers a route gives itself).
pub(super) fn compress(
    raw: &Spanned<RawCompress>,
    action: &Option<Action>,
    r: &mut Report,
) -> Compress {
    if action
        .as_ref()
        .is_some_and(|a| !a.is_proxy() && !matches!(a, Action::Files(_)))
    {
        r.error(
            &raw.span(),
            "compress only applies to proxy and root routes",
        );
    }
    let defaults = Compress::default();
    let raw = raw.get_ref();
    let types = match &raw.types {
        Some(list) => types(list, r),
        None => defaults.types.clone(),
    };
    let min_bytes = size_or(r, "min_bytes", raw.min_bytes.as_ref(), defaults.min_bytes);
    let mut compress = Compress {
        types,
        min_bytes,
        ..defaults
    };
    if let Some(levels) = &raw.level {
        self::levels(levels.get_ref(), &mut compress, r);
    }
    compress
}

/// `types`: each `type/subtype` or `type/*`, lowercased; at least one.
fn types(list: &Spanned<Vec<Spanned<String>>>, r: &mut Report) -> Vec<String> {
    if list.get_ref().is_empty() {
        r.error(
            &list.span(),
            "types is empty: list media types, or leave compress out",
        );
    }
    let mut types = Vec::new();
    for item in list.get_ref() {
        let text = item.get_ref().trim().to_ascii_lowercase();
        match media_range_error(&text) {
            Some(error) => r.error(&item.span(), format!("bad type {text:?}: {error}")),
            None => types.push(text),
        }
    }
    types
}

/// Why `text` is not `type/subtype` or `type/*`, if it is not.
fn media_range_error(text: &str) -> Option<&'static str> {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let Some((kind, sub)) = text.split_once('/') else {
        return Some("a media type is type/subtype, as in text/html or text/*");
    };
    if !token(kind) || !(sub == "*" || token(sub)) {
        return Some("a media type is type/subtype, as in text/html or text/*");
    }
    None
}

fn levels(raw: &RawCompressLevels, compress: &mut Compress, r: &mut Report) {
    if let Some(level) = &raw.gzip {
        compress.gzip_level = int_in(r, "level.gzip", level, 1..=9).unwrap_or(compress.gzip_level);
    }
    if let Some(level) = &raw.br {
        compress.brotli_level =
            int_in(r, "level.br", level, 0..=11).unwrap_or(compress.brotli_level);
    }
    if let Some(level) = &raw.zstd {
        compress.zstd_level = int_in(r, "level.zstd", level, 1..=19).unwrap_or(compress.zstd_level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_ranges() {
        for ok in [
            "text/html",
            "text/*",
            "image/svg+xml",
            "application/vnd.api+json",
        ] {
            assert_eq!(media_range_error(ok), None, "{ok}");
        }
        for bad in [
            "text",
            "*/html",
            "text/",
            "/html",
            "text/html; charset=utf-8",
            "a b/c",
        ] {
            assert!(media_range_error(bad).is_some(), "{bad}");
        }
    }
}
