//! UDP datagrams through the ring, against real sockets on 127.0.0.1 and ::1.

use super::udp_sockets::{client, local_addr, loopbacks};
use super::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

fn udp_ring(buffers: u16, buffer_bytes: u32) -> Ring {
    Ring::new(&RingConfig {
        sq_entries: 64,
        recv_buffers: 8,
        recv_buffer_bytes: 64,
        udp_buffers: buffers,
        udp_buffer_bytes: buffer_bytes,
        ..RingConfig::default()
    })
    .unwrap()
}

/// A bound ring socket and its address.
fn bound(addr: SocketAddr) -> (OwnedFd, SocketAddr) {
    let fd = udp_socket(addr, false).unwrap();
    let local = local_addr(&fd);
    (fd, local)
}

/// The next datagram of receive `token`, which must still be armed.
fn next_datagram(ring: &mut Ring, token: u64) -> Datagram {
    match next(ring) {
        Completion::Datagram {
            token: t,
            result: Ok(datagram),
            more: true,
        } if t == token => datagram,
        other => panic!("expected a datagram: {other:?}"),
    }
}

#[test]
fn datagrams_arrive_through_multishot_recvmsg_with_their_source() {
    for addr in loopbacks() {
        let mut ring = udp_ring(16, 2048);
        let (server, server_addr) = bound(addr);
        let client = client(addr);
        ring.recvmsg_multi(server.as_raw_fd(), 1);
        ring.submit_and_wait(Some(Duration::ZERO)).unwrap();
        // More datagrams than buffers: each is recycled as it is read.
        for i in 0..50u32 {
            let payload = format!("datagram {i} {}", "x".repeat(i as usize));
            client.send_to(payload.as_bytes(), server_addr).unwrap();
            let datagram = next_datagram(&mut ring, 1);
            assert_eq!(ring.datagram_bytes(&datagram), payload.as_bytes());
            assert_eq!(datagram.len(), payload.len());
            assert_eq!(datagram.peer(), client.local_addr().unwrap(), "{addr}");
            assert_eq!(datagram.local(), None, "packet info is off");
            assert_eq!(datagram.segment_size(), None);
            assert!(!datagram.truncated());
            ring.recycle_datagram(datagram);
        }
        // An empty datagram is a datagram, but it ends the receive (the kernel reads an empty
        // receive as a stream's end): the caller arms it again.
        client.send_to(b"", server_addr).unwrap();
        let Completion::Datagram {
            token: 1,
            result: Ok(empty),
            more: false,
        } = next(&mut ring)
        else {
            panic!("expected the empty datagram, ending the receive");
        };
        assert!(empty.is_empty() && !empty.truncated());
        assert_eq!(empty.peer(), client.local_addr().unwrap());
        ring.recycle_datagram(empty);
        assert_eq!(ring.in_flight(), 0);
        ring.recvmsg_multi(server.as_raw_fd(), 2);
        client.send_to(b"after", server_addr).unwrap();
        let datagram = next_datagram(&mut ring, 2);
        assert_eq!(ring.datagram_bytes(&datagram), b"after");
        ring.recycle_datagram(datagram);
    }
}

#[test]
fn a_datagram_larger_than_its_buffer_is_flagged_truncated() {
    let mut ring = udp_ring(4, (DATAGRAM_HEADROOM + 64) as u32);
    let (server, server_addr) = bound(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    let client = client(server_addr);
    ring.recvmsg_multi(server.as_raw_fd(), 1);
    client.send_to(&[7u8; 100], server_addr).unwrap();
    client.send_to(&[8u8; 64], server_addr).unwrap();
    let cut = next_datagram(&mut ring, 1);
    assert!(cut.truncated());
    assert_eq!(ring.datagram_bytes(&cut), &[7u8; 64]);
    ring.recycle_datagram(cut);
    let whole = next_datagram(&mut ring, 1);
    assert!(!whole.truncated());
    assert_eq!(ring.datagram_bytes(&whole), &[8u8; 64]);
    ring.recycle_datagram(whole);
}

#[test]
fn a_ring_without_datagram_buffers_refuses_a_size_with_no_room_for_payload() {
    let refused = Ring::new(&RingConfig {
        sq_entries: 64,
        recv_buffers: 8,
        recv_buffer_bytes: 64,
        udp_buffers: 4,
        udp_buffer_bytes: DATAGRAM_HEADROOM as u32,
        ..RingConfig::default()
    });
    assert_eq!(
        refused.err().map(|e| e.kind()),
        Some(io::ErrorKind::InvalidInput)
    );
}

/// Buffers run out (none recycled): the receive ends with ENOBUFS and `more` false, the
/// datagrams not yet received wait in the socket, and receives armed again after recycling get
/// them all, in order. A receive takes whatever is queued at once, as long as buffers last, so
/// the caller's loop is: on ENOBUFS, recycle what it holds and arm again.
#[test]
fn datagram_buffers_run_out_and_the_receive_is_armed_again() {
    let mut ring = udp_ring(4, 256);
    let (server, server_addr) = bound(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    let client = client(server_addr);
    for i in 0..10u8 {
        client.send_to(&[i; 10], server_addr).unwrap();
    }
    let mut token = 1;
    ring.recvmsg_multi(server.as_raw_fd(), token);
    let mut held = Vec::new();
    let mut seen = Vec::new();
    let mut ran_out = 0;
    while seen.len() < 10 {
        match next(&mut ring) {
            Completion::Datagram {
                token: t,
                result: Ok(datagram),
                more: true,
            } if t == token => {
                assert_eq!(datagram.len(), 10);
                seen.push(ring.datagram_bytes(&datagram)[0]);
                held.push(datagram);
            }
            Completion::Datagram {
                token: t,
                result: Err(e),
                more: false,
            } if t == token => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS), "{e}");
                assert_eq!(held.len(), 4, "every buffer was taken first");
                ran_out += 1;
                for datagram in held.drain(..) {
                    ring.recycle_datagram(datagram);
                }
                token += 1;
                ring.recvmsg_multi(server.as_raw_fd(), token);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        ran_out >= 2,
        "10 datagrams, 4 buffers: ran out {ran_out} times"
    );
    assert_eq!(seen, (0..10).collect::<Vec<u8>>(), "none lost, in order");
}

/// With receive offload on, several same-size datagrams sent in a burst may arrive as one
/// receive with a segment size, or one by one (the kernel decides): either way every byte is
/// there, each datagram whole and in order.
#[test]
fn receive_offload_accounts_for_every_byte() {
    const COUNT: usize = 40;
    const SIZE: usize = 1000;
    for addr in loopbacks() {
        let mut ring = udp_ring(64, UDP_BUFFER_BYTES_GRO);
        let (server, server_addr) = bound(addr);
        assert!(enable_udp_gro(&server).unwrap(), "UDP_GRO is Linux 5.0");
        let client = client(addr);
        ring.recvmsg_multi(server.as_raw_fd(), 1);
        for i in 0..COUNT {
            // The last one shorter, as a coalesced run may end.
            let len = if i == COUNT - 1 { SIZE / 2 } else { SIZE };
            client.send_to(&vec![i as u8; len], server_addr).unwrap();
        }
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut total = 0;
        while got.len() < COUNT {
            let datagram = next_datagram(&mut ring, 1);
            assert!(!datagram.truncated());
            assert_eq!(datagram.peer(), client.local_addr().unwrap());
            let payload = ring.datagram_bytes(&datagram);
            total += payload.len();
            if let Some(size) = datagram.segment_size() {
                assert_eq!(usize::from(size), SIZE);
            }
            got.extend(datagram.segments(payload).map(<[u8]>::to_vec));
            ring.recycle_datagram(datagram);
        }
        assert_eq!(total, (COUNT - 1) * SIZE + SIZE / 2);
        for (i, segment) in got.iter().enumerate() {
            let len = if i == COUNT - 1 { SIZE / 2 } else { SIZE };
            assert_eq!(segment, &vec![i as u8; len], "datagram {i}");
        }
    }
}

/// A payload of 4.5 segments, sent with a segment size, arrives as five datagrams at a socket
/// without receive offload; at a socket with it (over loopback the kernel keeps the batch
/// whole) as one receive whose segments are those five.
#[test]
fn a_segmented_send_arrives_as_separate_datagrams() {
    for addr in loopbacks() {
        let mut ring = udp_ring(8, UDP_BUFFER_BYTES_GRO);
        let (sender, sender_addr) = bound(addr);
        assert!(gso_supported(&sender), "UDP_SEGMENT is Linux 4.18");
        let receiver = client(addr);
        let payload: Vec<u8> = (0..4500u32).map(|i| (i / 1000) as u8).collect();
        let payload = Bytes::from(payload);
        let dest = receiver.local_addr().unwrap();
        ring.send_datagrams(
            sender.as_raw_fd(),
            dest,
            None,
            payload.clone(),
            Some(1000),
            3,
        );
        let Completion::Send {
            token: 3,
            result: Ok(4500),
            buf,
        } = next(&mut ring)
        else {
            panic!("expected the send of 4500 bytes");
        };
        assert_eq!(buf, payload, "the payload comes back");
        let mut got = [0u8; 2000];
        for i in 0..5u8 {
            let (len, from) = receiver.recv_from(&mut got).unwrap();
            assert_eq!(from, sender_addr);
            assert_eq!(len, if i == 4 { 500 } else { 1000 }, "datagram {i}");
            assert!(got[..len].iter().all(|&b| b == i));
        }

        // To a ring socket with receive offload: the segments, whole, however they come.
        let (gro, gro_addr) = bound(addr);
        assert!(enable_udp_gro(&gro).unwrap());
        ring.recvmsg_multi(gro.as_raw_fd(), 4);
        ring.send_datagrams(
            sender.as_raw_fd(),
            gro_addr,
            None,
            payload.clone(),
            Some(1000),
            5,
        );
        let mut segments = Vec::new();
        let mut sent = false;
        while !(sent && segments.len() == 5) {
            match next(&mut ring) {
                Completion::Send {
                    token: 5,
                    result: Ok(4500),
                    ..
                } => sent = true,
                Completion::Datagram {
                    token: 4,
                    result: Ok(datagram),
                    more: true,
                } => {
                    let bytes = ring.datagram_bytes(&datagram);
                    segments.extend(datagram.segments(bytes).map(<[u8]>::len));
                    ring.recycle_datagram(datagram);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(segments, [1000, 1000, 1000, 1000, 500]);
    }
}

/// A segmented send the kernel refuses (more segments than it takes at once) fails in its
/// completion, with the error the caller reads as "turn segmentation off", and the payload
/// back.
#[test]
fn a_refused_segmented_send_reports_its_error() {
    let mut ring = udp_ring(0, UDP_BUFFER_BYTES_GRO);
    let (sender, _) = bound(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    let receiver = client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    let dest = receiver.local_addr().unwrap();
    let payload = Bytes::from(vec![1u8; 1000]);
    ring.send_datagrams(sender.as_raw_fd(), dest, None, payload.clone(), Some(1), 6);
    let Completion::Send {
        token: 6,
        result: Err(e),
        buf,
    } = next(&mut ring)
    else {
        panic!("expected a refused send");
    };
    assert!(is_gso_error(&e), "{e}");
    assert_eq!(buf, payload);
    // The same payload without a segment size goes out as one datagram.
    ring.send_datagrams(sender.as_raw_fd(), dest, None, payload, None, 7);
    assert!(matches!(
        next(&mut ring),
        Completion::Send {
            token: 7,
            result: Ok(1000),
            ..
        }
    ));
    let mut got = [0u8; 2000];
    assert_eq!(receiver.recv_from(&mut got).unwrap().0, 1000);
}

/// On a wildcard socket, packet info tells which address a datagram was sent to, and an
/// answer sent from that address leaves from it (not from the one the route would pick).
#[test]
fn packet_info_names_the_destination_and_picks_the_source() {
    // 127.0.0.2 is as local as 127.0.0.1 on Linux (all of 127/8 is loopback); the route back
    // to a client on 127.0.0.1 would pick 127.0.0.1 as source.
    let cases = loopbacks().into_iter().map(|addr| match addr {
        SocketAddr::V4(_) => (
            Ipv4Addr::UNSPECIFIED.into(),
            Ipv4Addr::new(127, 0, 0, 2).into(),
        ),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED.into(), Ipv6Addr::LOCALHOST.into()),
    });
    for (wildcard, target) in cases.collect::<Vec<(IpAddr, IpAddr)>>() {
        let mut ring = udp_ring(8, 2048);
        let (server, server_addr) = bound(SocketAddr::new(wildcard, 0));
        enable_pktinfo(&server, wildcard.is_ipv6()).unwrap();
        let client = client(server_addr);
        ring.recvmsg_multi(server.as_raw_fd(), 1);
        let to = SocketAddr::new(target, server_addr.port());
        client.send_to(b"hello", to).unwrap();
        let datagram = next_datagram(&mut ring, 1);
        assert_eq!(ring.datagram_bytes(&datagram), b"hello");
        assert_eq!(datagram.local(), Some(target), "{wildcard}");
        let peer = datagram.peer();
        assert_eq!(peer, client.local_addr().unwrap());
        ring.recycle_datagram(datagram);

        let answer = Bytes::from_static(b"world");
        ring.send_datagrams(server.as_raw_fd(), peer, Some(target), answer, None, 2);
        assert!(matches!(
            next(&mut ring),
            Completion::Send {
                token: 2,
                result: Ok(5),
                ..
            }
        ));
        let mut got = [0u8; 16];
        let (len, from) = client.recv_from(&mut got).unwrap();
        assert_eq!(&got[..len], b"world");
        assert_eq!(from, to, "the answer leaves from the address written to");
    }
}

#[test]
fn a_datagram_receive_ends_with_its_cancellation() {
    let mut ring = udp_ring(4, 2048);
    let (server, _) = bound(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    let recv = ring.recvmsg_multi(server.as_raw_fd(), 1);
    ring.submit_and_wait(Some(Duration::ZERO)).unwrap();
    ring.cancel(recv, 2);
    let (mut ended, mut cancelled) = (false, false);
    while !(ended && cancelled) {
        match next(&mut ring) {
            Completion::Datagram {
                token: 1,
                result: Err(e),
                more: false,
            } => {
                assert_eq!(e.raw_os_error(), Some(libc::ECANCELED));
                ended = true;
            }
            Completion::Cancel { token: 2 } => cancelled = true,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(ring.in_flight(), 0);
}
