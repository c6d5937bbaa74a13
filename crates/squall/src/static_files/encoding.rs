//! A static file's content coding, sans-IO: which precompressed siblings a request may get
//! (`precompressed`), whether a sibling is fresh enough to stand for its file, and how the
//! file is sent otherwise (`compress`: as it is, as it is but varying, or compressed as it is
//! read). The worker (`worker/files.rs`) opens the siblings and runs the compressor.
//!
//! The negotiation is the proxy's (`squall_proxy::compress`): the same `Accept-Encoding`
//! weights, `q=0` refusing a coding, `*` standing for the codings not listed. A request with
//! `Range` never gets an encoded answer: its range is of the file's own bytes.

use http::{Method, header};
use squall_h1::RequestHead;
use squall_proxy::ClientProtocol;
use squall_proxy::compress::{self, Coding, Plan, Weights};
use squall_uring::FileStat;

use crate::roots::Root;

/// How a file's answer is coded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// The file's bytes, and nothing says the answer depends on `Accept-Encoding`.
    Identity,
    /// The file's bytes with `Vary: Accept-Encoding`: another request could get it encoded.
    Vary,
    /// A precompressed sibling's bytes as they are: its own length and validators.
    Sibling(Coding),
    /// The file's bytes compressed as they are read: no length, a weak ETag.
    Compressed(Coding),
}

impl Encoding {
    /// The `Content-Encoding` the answer carries, if any.
    pub fn coding(self) -> Option<Coding> {
        match self {
            Encoding::Sibling(coding) | Encoding::Compressed(coding) => Some(coding),
            Encoding::Identity | Encoding::Vary => None,
        }
    }

    /// Whether the answer carries `Vary: Accept-Encoding`.
    pub fn varies(self) -> bool {
        self != Encoding::Identity
    }
}

/// The file name extension of a coding's siblings: `NAME.br`, `NAME.zst`, `NAME.gz` (what
/// `brotli`, `zstd` and `gzip` write, and what nginx and Caddy look for).
pub fn extension(coding: Coding) -> &'static [u8] {
    match coding {
        Coding::Brotli => b"br",
        Coding::Zstd => b"zst",
        Coding::Gzip => b"gz",
    }
}

/// The siblings to look for, the one to serve first at the end (taken with `pop`): the
/// route's `precompressed` codings the request accepts, the heaviest first and ties in the
/// route's order. None for a request with `Range` (it gets a range of the file's own bytes).
pub fn siblings(root: &Root, head: &RequestHead) -> Vec<Coding> {
    let get_or_head = head.method == Method::GET || head.method == Method::HEAD;
    if root.precompressed.is_empty() || !get_or_head || head.headers.contains_key(header::RANGE) {
        return Vec::new();
    }
    let lines = head.headers.get_all(header::ACCEPT_ENCODING);
    let mut ranked = Weights::of(lines.map(|v| v.as_bytes())).rank(&root.precompressed);
    ranked.reverse();
    ranked
}

/// Whether a sibling may stand for its file: a regular file modified no earlier than the
/// file (an older one was left behind when the file changed). The same time is fresh:
/// `gzip -k` and `brotli` give the sibling the file's own modification time.
pub fn fresh(sibling: &FileStat, file: &FileStat) -> bool {
    sibling.is_file()
        && (sibling.mtime_sec, sibling.mtime_nsec) >= (file.mtime_sec, file.mtime_nsec)
}

/// How the file itself (no sibling) is sent whole to `head` over `protocol`: `compress`'s
/// plan for its type and length, with `Vary` wherever the route could answer it encoded (a
/// route with `precompressed` could for any file, as Caddy says too).
pub fn plan(
    root: &Root,
    head: &RequestHead,
    protocol: ClientProtocol,
    content_type: &str,
    len: u64,
) -> Encoding {
    let can_stream = protocol.frames_unknown_length();
    let plan = (root.compress.as_ref()).map_or(Plan::Leave, |rules| {
        compress::plan_file(rules, head, content_type, len, can_stream)
    });
    match plan {
        Plan::Encode(coding) => Encoding::Compressed(coding),
        Plan::Vary => Encoding::Vary,
        Plan::Leave if !root.precompressed.is_empty() => Encoding::Vary,
        Plan::Leave => Encoding::Identity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(compress: Option<squall_config::Compress>, precompressed: &[Coding]) -> Root {
        let dir = std::fs::File::open("/").unwrap();
        Root {
            id: 0,
            dir: std::os::fd::OwnedFd::from(dir),
            index: Vec::new(),
            resolve: 0,
            compress,
            precompressed: precompressed.to_vec(),
        }
    }

    fn head(method: &str, fields: &str) -> RequestHead {
        let text = format!("{method} /a HTTP/1.1\r\nhost: a.test\r\n{fields}\r\n");
        let mut decoder = squall_h1::RequestDecoder::new(squall_h1::Limits::default());
        let mut bytes = bytes::BytesMut::from(text.as_bytes());
        match decoder.decode(&mut bytes) {
            Ok(Some(squall_h1::Event::Head(head))) => head,
            other => panic!("not a head: {other:?}"),
        }
    }

    #[test]
    fn siblings_follow_the_weights_then_the_routes_order() {
        use Coding::*;
        let all = root(None, &[Gzip, Brotli, Zstd]);
        let order = |r: &Root, method, fields| {
            let mut list = siblings(r, &head(method, fields));
            list.reverse();
            list
        };
        let ae = "accept-encoding: gzip, br, zstd\r\n";
        assert_eq!(
            order(&all, "GET", ae),
            [Gzip, Brotli, Zstd],
            "ties: the route's order"
        );
        assert_eq!(order(&all, "HEAD", ae), [Gzip, Brotli, Zstd], "HEAD as GET");
        let weighted = "accept-encoding: gzip;q=0.5, br, zstd;q=0.8\r\n";
        assert_eq!(order(&all, "GET", weighted), [Brotli, Zstd, Gzip]);
        let refused = "accept-encoding: *, gzip;q=0\r\n";
        assert_eq!(order(&all, "GET", refused), [Brotli, Zstd]);
        assert_eq!(order(&all, "GET", ""), [], "no Accept-Encoding");
        assert_eq!(order(&all, "GET", "accept-encoding: identity\r\n"), []);
        let ranged = "accept-encoding: gzip\r\nrange: bytes=0-1\r\n";
        assert_eq!(
            order(&all, "GET", ranged),
            [],
            "a range is of the file's bytes"
        );
        let gzip_only = root(None, &[Gzip]);
        assert_eq!(order(&gzip_only, "GET", ae), [Gzip]);
        assert_eq!(order(&root(None, &[]), "GET", ae), []);
    }

    #[test]
    fn a_sibling_older_than_its_file_is_stale() {
        let file = FileStat {
            mode: libc::S_IFREG | 0o644,
            size: 1000,
            inode: 1,
            mtime_sec: 1_700_000_000,
            mtime_nsec: 500,
        };
        let at = |mtime_sec, mtime_nsec| FileStat {
            mtime_sec,
            mtime_nsec,
            inode: 2,
            size: 100,
            ..file
        };
        assert!(fresh(&at(1_700_000_000, 500), &file), "the same time");
        assert!(fresh(&at(1_700_000_001, 0), &file));
        assert!(!fresh(&at(1_700_000_000, 499), &file));
        assert!(!fresh(&at(1_699_999_999, 900), &file));
        let dir = FileStat {
            mode: libc::S_IFDIR | 0o755,
            ..at(1_800_000_000, 0)
        };
        assert!(!fresh(&dir, &file), "not a regular file");
    }

    #[test]
    fn the_file_itself_is_compressed_or_varies_as_the_route_says() {
        use ClientProtocol::*;
        let html = "text/html; charset=utf-8";
        let gzip = "accept-encoding: gzip\r\n";
        let compressing = root(Some(squall_config::Compress::default()), &[]);
        let plan_of = |r: &Root, method, fields, protocol, ty, len| {
            plan(r, &head(method, fields), protocol, ty, len)
        };
        let encoded = Encoding::Compressed(Coding::Gzip);
        assert_eq!(
            plan_of(&compressing, "GET", gzip, Http11, html, 1000),
            encoded
        );
        assert_eq!(plan_of(&compressing, "HEAD", gzip, H2, html, 1000), encoded);
        assert_eq!(
            plan_of(&compressing, "GET", gzip, Http10, html, 1000),
            Encoding::Vary
        );
        let ranged = "accept-encoding: gzip\r\nrange: bytes=0-9\r\n";
        assert_eq!(
            plan_of(&compressing, "GET", ranged, H2, html, 1000),
            Encoding::Vary
        );
        assert_eq!(
            plan_of(&compressing, "GET", "", H2, html, 1000),
            Encoding::Vary
        );
        let png = "image/png";
        assert_eq!(
            plan_of(&compressing, "GET", gzip, H2, png, 1000),
            Encoding::Identity
        );
        assert_eq!(
            plan_of(&compressing, "GET", gzip, H2, html, 255),
            Encoding::Identity
        );
        assert_eq!(
            plan_of(&compressing, "GET", gzip, H2, html, 0),
            Encoding::Identity
        );
        let siblings_only = root(None, &[Coding::Brotli]);
        assert_eq!(
            plan_of(&siblings_only, "GET", gzip, H2, png, 1000),
            Encoding::Vary
        );
        let neither = root(None, &[]);
        assert_eq!(
            plan_of(&neither, "GET", gzip, H2, html, 1000),
            Encoding::Identity
        );
    }
}
