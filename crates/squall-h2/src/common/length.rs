//! A received body against its content-length (RFC 9113 §8.1.1): a request's on the
//! server, a response's on the client.

/// The body bytes of one stream so far, and the length they must come to.
#[derive(Debug, Default)]
pub(crate) struct BodyLength {
    /// Body bytes received.
    pub(crate) received: u64,
    /// The content-length, when the head gave one that binds.
    pub(crate) expected: Option<u64>,
}

impl BodyLength {
    /// Counts `len` more bytes of DATA; true when the body is malformed now: more than the
    /// content-length, or, at the `end`, less.
    #[inline]
    pub(crate) fn add(&mut self, len: u64, end: bool) -> bool {
        self.received += len;
        let body = self.received;
        self.expected
            .is_some_and(|n| body > n || (end && body != n))
    }

    /// Whether a body that ends now (with trailers) is not the content-length: malformed.
    pub(crate) fn ends_wrong(&self) -> bool {
        self.expected.is_some_and(|n| n != self.received)
    }
}
