//! PURGE on cached routes, from `cache.purge_allow` addresses only: drop one URL's variants,
//! every object carrying a surrogate key, or every object under a path.
//!
//! The request's fields choose what goes ([`mode`], a pure function):
//! - nothing: the URL's variants (`X-Squall-Purge: refetch` also fetches it again, which the
//!   caller in `cache.rs` starts, since that is a fill like any other);
//! - `Surrogate-Key: a b`: every object whose response carried tag `a` or `b`, on any URL of
//!   any host (the URL of the PURGE only has to be on a cached route);
//! - `X-Squall-Purge: prefix`: every object of the request's scheme and host whose path and
//!   query start with the request's.
//!
//! The store does the work (`Store::purge`, `purge_tags`, `purge_prefix`, each shard locked
//! only for its own part); this file checks the address, counts, and answers. Every mode
//! answers alike so that scripts read one format: `200` with `purged N` in the body and an
//! `X-Squall-Purged: N` field, `404` (with `purged 0`) when nothing was removed, `400` for
//! fields that ask for no known mode, `403` for an address outside `purge_allow`.

use bytes::Bytes;
use http::StatusCode;
use http::header::HeaderName;
use squall_cache::{CacheKey, SURROGATE_KEY, Tag};
use squall_h1::RequestHead;
use tracing::debug;

use super::downstream::Downstream;
use super::ids::Client;
use crate::cache::Cache;
use crate::cluster::fanout::Reply;

/// The field that picks a purge mode other than the URL's (`refetch`, `prefix`).
const MODE_FIELD: HeaderName = HeaderName::from_static("x-squall-purge");
/// The answer's field with the number of objects removed.
const PURGED_FIELD: &str = "x-squall-purged";

/// What a PURGE asks to remove.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// The URL's variants.
    Url,
    /// The URL's variants, then a fresh copy fetched as a GET answers the PURGE.
    Refetch,
    /// Every object of the scheme and host under the path (and query).
    Prefix,
    /// Every object carrying one of these tags.
    Tags(Vec<Tag>),
    /// Fields that name no mode Squall knows, or two at once: why.
    Invalid(&'static str),
}

/// The mode a PURGE's fields ask for. `X-Squall-Purge` is matched case-insensitively;
/// `Surrogate-Key` is read as a response's is ([`squall_cache::surrogate_keys`]: spaces
/// between tags, at most 64 tags of at most 256 bytes) and does not combine with
/// `X-Squall-Purge`.
pub(super) fn mode(headers: &squall_h1::Fields) -> Mode {
    let named = headers.get(&MODE_FIELD).map(|v| v.as_bytes().trim_ascii());
    if headers.contains_key(SURROGATE_KEY) {
        if named.is_some() {
            return Mode::Invalid("Surrogate-Key and X-Squall-Purge do not combine");
        }
        let tags = squall_cache::surrogate_keys(&headers.to_header_map());
        if tags.is_empty() {
            return Mode::Invalid("Surrogate-Key names no tag");
        }
        return Mode::Tags(tags);
    }
    match named {
        None => Mode::Url,
        Some(v) if v.eq_ignore_ascii_case(b"refetch") => Mode::Refetch,
        Some(v) if v.eq_ignore_ascii_case(b"prefix") => Mode::Prefix,
        Some(_) => Mode::Invalid("X-Squall-Purge is refetch or prefix"),
    }
}

/// The answer's status for a count: 200, or 404 when nothing was removed.
fn status_of(removed: usize) -> StatusCode {
    if removed > 0 {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    }
}

/// What [`Downstream::purge`] did.
pub(super) enum Purged {
    /// Answered (the count, or a refusal).
    Answered,
    /// The URL's variants are gone; the caller fetches it again with this head.
    Refetch(RequestHead),
    /// Removed here (this many); the caller sends it to the cluster's other nodes and
    /// answers once they have.
    Fleet(RequestHead, usize),
}

impl Downstream<'_> {
    /// Answers a PURGE of `key` from `cache` (the caller checked the method), unless it asks
    /// for a refetch, or `fleet` has it go to the cluster's other nodes too: see [`Purged`].
    /// A PURGE `from_peer` (with a trusted hop field) needs no `purge_allow`: its node checked.
    pub(super) fn purge(
        &mut self,
        client: Client,
        head: RequestHead,
        cache: &Cache,
        key: &CacheKey,
        from_peer: bool,
        fleet: bool,
    ) -> Purged {
        let counters = self.counters;
        let allowed = from_peer
            || (self.conns.get(client.conn()))
                .and_then(|conn| conn.peer)
                .is_some_and(|peer| cache.purge_allowed(peer.ip()));
        if !allowed {
            counters.count_refused(StatusCode::FORBIDDEN);
            self.answer_status(client, &head, StatusCode::FORBIDDEN);
            return Purged::Answered;
        }
        let mode = mode(&head.headers);
        let removed = match &mode {
            Mode::Url | Mode::Refetch => cache.store.purge(key),
            Mode::Prefix => cache.store.purge_prefix(key),
            Mode::Tags(tags) => cache.store.purge_tags(tags),
            Mode::Invalid(why) => {
                debug!(worker = self.log.worker, why, "purge refused");
                self.answer_status(client, &head, StatusCode::BAD_REQUEST);
                return Purged::Answered;
            }
        };
        counters.cache_purges.add(removed as u64);
        debug!(worker = self.log.worker, removed, ?mode, "purge");
        if mode == Mode::Refetch {
            return Purged::Refetch(head);
        }
        if fleet {
            return Purged::Fleet(head, removed);
        }
        self.answer_purged(client, &head, removed);
        Purged::Answered
    }

    /// The answer to a PURGE that removed `removed` objects: the count in the body and in
    /// `X-Squall-Purged`, 404 for none.
    pub(super) fn answer_purged(&mut self, client: Client, head: &RequestHead, removed: usize) {
        let mut count = squall_proxy::digits::itoa_buf(removed as u64);
        let count = count.as_bytes();
        let body = Bytes::from([&b"purged "[..], count, b"\n"].concat());
        let field = Some((PURGED_FIELD, count));
        self.answer_text(client, head, status_of(removed), field, body);
    }

    /// The answer to a PURGE sent across the cluster: `X-Squall-Purged-Nodes` names the nodes
    /// that confirmed (this one first); the body has the total, then a line per node. 404 when
    /// every node confirmed and none removed anything, 502 when one did not confirm.
    pub(super) fn answer_fleet_purge(
        &mut self,
        client: Client,
        head: &RequestHead,
        nodes: &[(String, Option<Reply>)],
    ) {
        let (status, nodes_field, body) = fleet_answer(nodes);
        let field = Some((PURGED_NODES_FIELD, nodes_field.as_bytes()));
        self.answer_text(client, head, status, field, Bytes::from(body));
    }
}

/// The answer's field with the nodes that confirmed a cluster-wide purge.
const PURGED_NODES_FIELD: &str = "x-squall-purged-nodes";

/// The status, the `X-Squall-Purged-Nodes` value and the body of a cluster-wide purge's
/// answer, from each node's reply.
fn fleet_answer(nodes: &[(String, Option<Reply>)]) -> (StatusCode, String, String) {
    let removed = |reply: &Option<Reply>| match reply {
        Some(Reply::Purged(n)) => Some(*n),
        _ => None,
    };
    let total: usize = nodes.iter().filter_map(|(_, r)| removed(r)).sum();
    let confirmed: Vec<&str> = (nodes.iter())
        .filter(|(_, r)| removed(r).is_some())
        .map(|(name, _)| name.as_str())
        .collect();
    let mut body = format!("purged {total}\n");
    for (name, reply) in nodes {
        let line = match reply {
            Some(Reply::Purged(n)) => format!("{name}: purged {n}\n"),
            Some(Reply::Failed(why)) => format!("{name}: failed: {why}\n"),
            None => format!("{name}: no answer\n"),
        };
        body.push_str(&line);
    }
    let status = if confirmed.len() < nodes.len() {
        StatusCode::BAD_GATEWAY
    } else {
        status_of(total)
    };
    (status, confirmed.join(","), body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue};

    fn fields(pairs: &[(&str, &str)]) -> squall_h1::Fields {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            let name = HeaderName::from_bytes(n.as_bytes()).unwrap();
            h.append(name, HeaderValue::from_str(v).unwrap());
        }
        squall_h1::Fields::from_header_map(&h)
    }

    #[test]
    fn fields_choose_the_mode() {
        assert_eq!(mode(&fields(&[])), Mode::Url);
        assert_eq!(
            mode(&fields(&[("x-squall-purge", "Refetch")])),
            Mode::Refetch
        );
        assert_eq!(
            mode(&fields(&[("x-squall-purge", " prefix ")])),
            Mode::Prefix
        );
        let Mode::Tags(tags) = mode(&fields(&[("surrogate-key", "a  b a")])) else {
            panic!("tags");
        };
        assert_eq!(
            tags.iter().map(|t| &t[..]).collect::<Vec<_>>(),
            [b"a", b"b"]
        );
        for bad in [
            &[("x-squall-purge", "prefixes")][..],
            &[("surrogate-key", "  ")],
            &[("surrogate-key", "a"), ("x-squall-purge", "prefix")],
        ] {
            assert!(matches!(mode(&fields(bad)), Mode::Invalid(_)), "{bad:?}");
        }
    }

    #[test]
    fn a_fleet_answer_names_the_nodes_that_confirmed() {
        let nodes = [
            ("a".to_owned(), Some(Reply::Purged(1))),
            ("b".to_owned(), Some(Reply::Purged(0))),
            ("c".to_owned(), Some(Reply::Purged(2))),
        ];
        let (status, field, body) = fleet_answer(&nodes);
        assert_eq!((status, field.as_str()), (StatusCode::OK, "a,b,c"));
        assert_eq!(body, "purged 3\na: purged 1\nb: purged 0\nc: purged 2\n");
        let nodes = [
            ("a".to_owned(), Some(Reply::Purged(0))),
            ("b".to_owned(), Some(Reply::Failed("refused".into()))),
            ("c".to_owned(), None),
        ];
        let (status, field, body) = fleet_answer(&nodes);
        assert_eq!((status, field.as_str()), (StatusCode::BAD_GATEWAY, "a"));
        assert!(
            body.contains("b: failed: refused\nc: no answer\n"),
            "{body}"
        );
        let (status, _, _) = fleet_answer(&nodes[..1]);
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn nothing_removed_is_404() {
        assert_eq!(status_of(0), StatusCode::NOT_FOUND);
        assert_eq!(status_of(3), StatusCode::OK);
    }
}
