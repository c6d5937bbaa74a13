//! The request's fields as the cache reads them.
//!
//! Why a trait: the cache knows no codec. An HTTP/1.1 request head keeps its fields as spans
//! into the bytes received, not as an `http::HeaderMap`, and building a map for every lookup
//! would cost more than the lookup. The worker wraps its heads in this trait; a `HeaderMap`
//! (tests, stored requests) is one as it is.

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The field lines of a request, by name.
pub trait RequestFields {
    /// The values of every line of `name`, in the order received.
    fn values<'a>(&'a self, name: &'a HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a;

    /// The first line of `name`.
    fn first<'a>(&'a self, name: &'a HeaderName) -> Option<&'a [u8]> {
        self.values(name).next()
    }

    fn has(&self, name: &HeaderName) -> bool {
        self.values(name).next().is_some()
    }
}

impl RequestFields for HeaderMap {
    fn values<'a>(&'a self, name: &'a HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.get_all(name).iter().map(HeaderValue::as_bytes)
    }
}
