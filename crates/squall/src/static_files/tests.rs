use super::*;

/// A request head as the HTTP/1.1 decoder makes it from `method`, `path` and `fields`.
fn head(method: &str, path: &str, fields: &[(&str, &str)]) -> RequestHead {
    let mut text = format!("{method} {path} HTTP/1.1\r\nhost: a.test\r\n");
    for (name, value) in fields {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    let mut decoder = squall_h1::RequestDecoder::new(squall_h1::Limits::default());
    let mut bytes = bytes::BytesMut::from(text.as_bytes());
    match decoder.decode(&mut bytes) {
        Ok(Some(squall_h1::Event::Head(head))) => head,
        other => panic!("not a head: {other:?}"),
    }
}

fn stat() -> FileStat {
    FileStat {
        mode: libc::S_IFREG | 0o644,
        size: 1000,
        inode: 0x2a,
        mtime_sec: 1_700_000_000,
        mtime_nsec: 5,
    }
}

#[test]
fn paths_decode_once_and_keep_beneath_the_root() {
    let ok = |path: &str, relative: &str, directory: bool| {
        let target = target(path).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        assert_eq!(target.relative, relative.as_bytes(), "{path}");
        assert_eq!(target.directory, directory, "{path}");
    };
    ok("/", "", true);
    ok("/a.txt", "a.txt", false);
    ok("/dir/", "dir", true);
    ok("//a/./b//c", "a/b/c", false);
    ok("/caf%C3%A9.txt", "café.txt", false);
    // Decoded once: an encoded percent stays a percent.
    ok("/100%2525", "100%25", false);
    ok("/...", "...", false);
    ok("/a..b", "a..b", false);
    let refused = |path: &str, why: Refused| assert_eq!(target(path), Err(why), "{path}");
    refused("/../etc/passwd", Refused::DotDot);
    refused("/a/../../b", Refused::DotDot);
    refused("/%2e%2e/etc/passwd", Refused::DotDot);
    refused("/%2E%2E", Refused::DotDot);
    refused("/..%2fetc", Refused::EncodedSlash);
    refused("/a%2Fb", Refused::EncodedSlash);
    refused("/a%5cb", Refused::EncodedSlash);
    refused("/a\\b", Refused::Backslash);
    refused("/a%00.txt", Refused::Nul);
    refused("/a%zz", Refused::BadEscape);
    refused("/a%2", Refused::BadEscape);
    refused("*", Refused::NotAbsolute);
    refused("a/b", Refused::NotAbsolute);
    refused(
        &format!("/{}", "a".repeat(PATH_BYTES_MAX + 1)),
        Refused::TooLong,
    );
}

#[test]
fn types_come_from_the_extension() {
    assert_eq!(content_type(b"index.html"), "text/html; charset=utf-8");
    assert_eq!(content_type(b"a/b/STYLE.CSS"), "text/css; charset=utf-8");
    assert_eq!(content_type(b"x.tar.gz"), "application/gzip");
    assert_eq!(content_type(b"dir.d/noext"), OCTET_STREAM);
    assert_eq!(content_type(b"file.unknown"), OCTET_STREAM);
    assert_eq!(content_type(b".hidden"), OCTET_STREAM);
}

#[test]
fn validators_are_nginx_like_with_the_inode() {
    let v = Validators::of(&stat());
    assert_eq!(v.etag, "\"6553f100-3e8-2a\"");
    assert_eq!(v.last_modified, "Tue, 14 Nov 2023 22:13:20 GMT");
}

#[test]
fn conditions_follow_rfc_9110_order() {
    let v = Validators::of(&stat());
    let check =
        |method: &str, fields: &[(&str, &str)]| precondition(&head(method, "/", fields), &v);
    let (etag, date) = (v.etag.as_str(), v.last_modified.as_str());
    let weak = format!("W/{etag}");
    let earlier = "Tue, 14 Nov 2023 22:13:19 GMT";
    assert_eq!(check("GET", &[]), Precondition::Proceed);
    assert_eq!(
        check("GET", &[("if-none-match", etag)]),
        Precondition::NotModified
    );
    assert_eq!(
        check("GET", &[("if-none-match", &weak)]),
        Precondition::NotModified
    );
    assert_eq!(
        check("HEAD", &[("if-none-match", "\"x\", *")]),
        Precondition::NotModified
    );
    assert_eq!(
        check("GET", &[("if-none-match", "\"other\"")]),
        Precondition::Proceed
    );
    // If-None-Match decides alone: a matching date beside a different tag is a 200.
    let both = [("if-none-match", "\"other\""), ("if-modified-since", date)];
    assert_eq!(check("GET", &both), Precondition::Proceed);
    assert_eq!(
        check("GET", &[("if-modified-since", date)]),
        Precondition::NotModified
    );
    assert_eq!(
        check("GET", &[("if-modified-since", earlier)]),
        Precondition::Proceed
    );
    assert_eq!(
        check("GET", &[("if-modified-since", "yesterday")]),
        Precondition::Proceed
    );
    assert_eq!(check("GET", &[("if-match", etag)]), Precondition::Proceed);
    assert_eq!(check("GET", &[("if-match", "*")]), Precondition::Proceed);
    assert_eq!(check("GET", &[("if-match", &weak)]), Precondition::Failed);
    assert_eq!(
        check("GET", &[("if-match", "\"other\"")]),
        Precondition::Failed
    );
    assert_eq!(
        check("GET", &[("if-unmodified-since", earlier)]),
        Precondition::Failed
    );
    assert_eq!(
        check("GET", &[("if-unmodified-since", date)]),
        Precondition::Proceed
    );
    // A failed If-Match wins over a matching If-None-Match.
    let both = [("if-match", "\"other\""), ("if-none-match", etag)];
    assert_eq!(check("GET", &both), Precondition::Failed);
}

#[test]
fn ranges_give_one_part_or_the_whole_file() {
    let v = Validators::of(&stat());
    let of = |fields: &[(&str, &str)]| extent(&head("GET", "/", fields), &v, 1000);
    let part = |first, last| Extent::Part(ByteRange { first, last });
    assert_eq!(of(&[]), Extent::Whole);
    assert_eq!(of(&[("range", "bytes=0-9")]), part(0, 9));
    assert_eq!(of(&[("range", "bytes=990-")]), part(990, 999));
    assert_eq!(of(&[("range", "bytes=-10")]), part(990, 999));
    assert_eq!(of(&[("range", "bytes=995-2000")]), part(995, 999));
    assert_eq!(of(&[("range", "bytes=1000-")]), Extent::Unsatisfiable);
    assert_eq!(of(&[("range", "bytes=0-1,5-6")]), Extent::Whole);
    assert_eq!(of(&[("range", "items=0-1")]), Extent::Whole);
    assert_eq!(
        of(&[("range", "bytes=0-1"), ("range", "bytes=2-3")]),
        Extent::Whole
    );
    let etag = v.etag.as_str();
    assert_eq!(
        of(&[("range", "bytes=0-9"), ("if-range", etag)]),
        part(0, 9)
    );
    let date = v.last_modified.as_str();
    assert_eq!(
        of(&[("range", "bytes=0-9"), ("if-range", date)]),
        part(0, 9)
    );
    assert_eq!(
        of(&[("range", "bytes=0-9"), ("if-range", "\"old\"")]),
        Extent::Whole
    );
    let weak = format!("W/{etag}");
    assert_eq!(
        of(&[("range", "bytes=0-9"), ("if-range", &weak)]),
        Extent::Whole
    );
    // Other methods ignore Range.
    assert_eq!(
        extent(&head("POST", "/", &[("range", "bytes=0-1")]), &v, 1000),
        Extent::Whole
    );
}

#[test]
fn only_get_and_head_are_served() {
    assert_eq!(method_refusal(&Method::GET), None);
    assert_eq!(method_refusal(&Method::HEAD), None);
    assert_eq!(
        method_refusal(&Method::POST),
        Some(StatusCode::METHOD_NOT_ALLOWED)
    );
    assert_eq!(
        method_refusal(&Method::DELETE),
        Some(StatusCode::METHOD_NOT_ALLOWED)
    );
}
