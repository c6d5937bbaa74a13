//! Byte-exact headers, each fed whole and cut at every point: a prefix is always
//! `Incomplete` (never an error, never a wrong header), the whole is `Done` with its length.

use super::*;

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// Feeds `bytes` (a header followed by `tail`) cut at every point.
fn parses_at_every_split(bytes: &[u8], header: Header, len: usize) {
    for cut in 0..len {
        assert_eq!(
            parse(&bytes[..cut]),
            Ok(Parsed::Incomplete),
            "cut at {cut} of {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    for end in len..=bytes.len() {
        assert_eq!(parse(&bytes[..end]), Ok(Parsed::Done { header, len }));
    }
}

#[test]
fn version_1_tcp4_tcp6_and_unknown() {
    let tcp4 = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n";
    parses_at_every_split(
        tcp4,
        Header::Proxied {
            source: addr("192.0.2.7:56324"),
            destination: addr("198.51.100.1:443"),
        },
        45,
    );
    let tcp6 = b"PROXY TCP6 2001:db8::1 2001:db8::2 65535 0\r\n\x16\x03\x01";
    parses_at_every_split(
        tcp6,
        Header::Proxied {
            source: addr("[2001:db8::1]:65535"),
            destination: addr("[2001:db8::2]:0"),
        },
        44,
    );
    parses_at_every_split(b"PROXY UNKNOWN\r\n", Header::Local, 15);
    parses_at_every_split(b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nx", Header::Local, 35);
}

#[test]
fn the_longest_version_1_header_fits_and_one_byte_more_does_not() {
    let ip = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    let tcp6 = format!("PROXY TCP6 {ip} {ip} 65535 65535\r\n");
    assert!(matches!(
        parse(tcp6.as_bytes()),
        Ok(Parsed::Done { len: 104, .. })
    ));
    // The spec's worst case is UNKNOWN followed by the longest addresses.
    let longest = format!("PROXY UNKNOWN {ip} {ip} 65535 65535\r\n");
    assert_eq!(longest.len(), V1_MAX_BYTES);
    assert!(matches!(
        parse(longest.as_bytes()),
        Ok(Parsed::Done { len: 107, .. })
    ));
    let mut endless = b"PROXY TCP4 ".to_vec();
    endless.resize(V1_MAX_BYTES, b'1');
    assert_eq!(parse(&endless), Err(Error::V1TooLong));
    assert_eq!(parse(&endless[..V1_MAX_BYTES - 1]), Ok(Parsed::Incomplete));
}

#[test]
fn malformed_version_1_headers_are_refused() {
    for bad in [
        &b"PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n"[..],
        b"PROXY TCP4 192.0.2.7  198.51.100.1 1 2\r\n",
        b"PROXY TCP4 2001:db8::1 198.51.100.1 1 2\r\n",
        b"PROXY TCP6 192.0.2.7 198.51.100.1 1 2\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 65536 2\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 01 2\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 +1 2\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 1 2 3\r\n",
        b"PROXY UDP4 192.0.2.7 198.51.100.1 1 2\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 1 2\n",
        b"PROXY TCP4 192.0.2.7\r198.51.100.1 1 2\r\n",
        b"PROXY \r\n",
        b"PROXY TCP4 \xff.0.2.7 198.51.100.1 1 2\r\n",
        // Found by fuzzing: a lone CR inside an UNKNOWN line was accepted whole but refused
        // when the header arrived in two reads.
        b"PROXY UNKNOWN TCP\rY N\r\n",
        b"PROXY UNKNOWN TCP\nY N\r\n",
    ] {
        let error = parse(bad).expect_err(&String::from_utf8_lossy(bad));
        assert!(
            matches!(error, Error::V1Malformed),
            "{:?}: {error:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn what_is_not_a_header_is_refused_at_the_first_byte_that_shows_it() {
    for (bytes, error) in [
        (&b"GET / HTTP/1.1\r\n"[..], Error::NotProxy),
        (b"G", Error::NotProxy),
        (b"PROX ", Error::NotProxy),
        (b"proxy TCP4", Error::NotProxy),
        (b"\x16\x03\x01\x02\x00", Error::NotProxy),
        (b"\r\n\r\n\0\r\nQUIX", Error::NotProxy),
        (b"\r\n\r\n\0\r\nQUIT\n\x31", Error::V2Version),
        (b"\r\n\r\n\0\r\nQUIT\n\x22", Error::V2Version),
    ] {
        assert_eq!(parse(bytes), Err(error), "{bytes:?}");
    }
    assert_eq!(parse(b""), Ok(Parsed::Incomplete));
    assert_eq!(parse(b"PRO"), Ok(Parsed::Incomplete));
}

#[test]
fn version_2_inet_inet6_local_and_unspec() {
    let source = addr("192.0.2.7:56324");
    let destination = addr("198.51.100.1:443");
    let mut v4 = encode_v2(source, destination);
    assert_eq!(v4.len(), 28);
    v4.extend_from_slice(b"GET /");
    parses_at_every_split(
        &v4,
        Header::Proxied {
            source,
            destination,
        },
        28,
    );
    let source6 = addr("[2001:db8::1]:1");
    let destination6 = addr("[2001:db8::2]:2");
    let v6 = encode_v2(source6, destination6);
    parses_at_every_split(
        &v6,
        Header::Proxied {
            source: source6,
            destination: destination6,
        },
        52,
    );
    // LOCAL (a balancer's health check), with the addresses it may still carry.
    let mut local = v4.clone();
    local[12] = 0x20;
    parses_at_every_split(&local, Header::Local, 28);
    // UNSPEC with no address block; AF_UNIX with its 216 bytes.
    let unspec = [&V2_SIGNATURE[..], &[0x21, 0x00, 0, 0]].concat();
    parses_at_every_split(&unspec, Header::Local, 16);
    let mut unix = [&V2_SIGNATURE[..], &[0x21, 0x31, 0, 216]].concat();
    unix.resize(16 + 216, 0);
    parses_at_every_split(&unix, Header::Local, 232);
}

#[test]
fn version_2_tlvs_are_skipped_and_its_length_is_bounded() {
    let mut with_tlvs = encode_v2(addr("192.0.2.7:1"), addr("198.51.100.1:2"));
    // PP2_TYPE_UNIQUE_ID (0x05) of 10 bytes, then PP2_TYPE_NOOP (0x04) of 3.
    let tlvs = [&[0x05, 0, 10][..], &[7; 10], &[0x04, 0, 3], &[0; 3]].concat();
    let length = 12 + tlvs.len() as u16;
    with_tlvs[14..16].copy_from_slice(&length.to_be_bytes());
    with_tlvs.extend_from_slice(&tlvs);
    let len = with_tlvs.len();
    parses_at_every_split(
        &with_tlvs,
        Header::Proxied {
            source: addr("192.0.2.7:1"),
            destination: addr("198.51.100.1:2"),
        },
        len,
    );
    let mut huge = [&V2_SIGNATURE[..], &[0x21, 0x11]].concat();
    huge.extend_from_slice(&((V2_MAX_BYTES - 16 + 1) as u16).to_be_bytes());
    assert_eq!(parse(&huge), Err(Error::V2TooLong));
    // An INET block shorter than two addresses and ports.
    let short = [&V2_SIGNATURE[..], &[0x21, 0x11, 0, 4], &[1, 2, 3, 4]].concat();
    assert_eq!(parse(&short), Err(Error::V2Short));
}

#[test]
fn encode_v1_round_trips_and_mixed_families_are_unknown() {
    for (source, destination) in [
        ("192.0.2.7:56324", "198.51.100.1:443"),
        ("[2001:db8::1]:1", "[::1]:8443"),
    ] {
        let (source, destination) = (addr(source), addr(destination));
        let bytes = encode_v1(source, destination);
        assert_eq!(
            parse(&bytes),
            Ok(Parsed::Done {
                header: Header::Proxied {
                    source,
                    destination
                },
                len: bytes.len()
            })
        );
    }
    let mixed = encode_v1(addr("192.0.2.7:1"), addr("[::1]:2"));
    assert_eq!(mixed, b"PROXY UNKNOWN\r\n");
    let mapped = encode_v2(addr("192.0.2.7:1"), addr("[::1]:2"));
    let Ok(Parsed::Done {
        header: Header::Proxied { source, .. },
        ..
    }) = parse(&mapped)
    else {
        panic!("a header");
    };
    assert_eq!(source.ip().to_canonical(), addr("192.0.2.7:1").ip());
}

#[test]
fn local_headers_parse_as_local_at_every_split() {
    for v2 in [false, true] {
        let mut bytes = encode_local(v2);
        let len = bytes.len();
        assert_eq!(len, if v2 { 16 } else { 15 });
        bytes.extend_from_slice(b"GET /");
        parses_at_every_split(&bytes, Header::Local, len);
    }
}
