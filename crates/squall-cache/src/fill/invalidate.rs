//! RFC 9111 §4.4 in one place: a request with a method that is not safe, once its response is
//! a success or a redirection, invalidates what is stored for its target URI.
//!
//! The rule has two halves that happen at different times (the method is known at the request,
//! the status at the response), so it is a value the driver carries through the exchange:
//! make it with [`Invalidation::for_request`] for every request on a cached route, whatever
//! protocol it came on and whether or not it has a body, and settle it with
//! [`Invalidation::on_response`].

use http::{Method, StatusCode};

use crate::key::CacheKey;
use crate::policy::{invalidates, safe_method};
use crate::store::Store;

/// A pending invalidation: the method (not safe) and the key of its target URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalidation {
    method: Method,
    key: CacheKey,
}

impl Invalidation {
    /// `Some` when `method` is not safe (RFC 9110 §9.2.1): its response may invalidate `key`,
    /// which is computed only then.
    pub fn for_request(method: &Method, key: impl FnOnce() -> CacheKey) -> Option<Invalidation> {
        (!safe_method(method)).then(|| Invalidation {
            method: method.clone(),
            key: key(),
        })
    }

    pub fn key(&self) -> &CacheKey {
        &self.key
    }

    /// Whether a response with `status` invalidates: a success or a redirection (an error
    /// changed nothing at the origin).
    pub fn applies(&self, status: StatusCode) -> bool {
        invalidates(&self.method, status)
    }

    /// The response's status arrived: purges every variant of the URI if [`Self::applies`].
    /// Returns how many variants were removed.
    pub fn on_response(self, status: StatusCode, store: &Store) -> usize {
        if self.applies(status) {
            store.purge(&self.key)
        } else {
            0
        }
    }
}
