//! UDP socket set-up and the steering of a `SO_REUSEPORT` group, against real sockets on
//! 127.0.0.1 and ::1.

use super::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::os::fd::AsFd;

/// The loopback addresses to test, each as `127.0.0.1:0` or `[::1]:0`. A host without IPv6
/// may skip that half, but only when it says so (`SQUALL_TEST_NO_IPV6=1`).
pub(super) fn loopbacks() -> Vec<SocketAddr> {
    let mut addrs = vec![SocketAddr::from((Ipv4Addr::LOCALHOST, 0))];
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, 0));
    match UdpSocket::bind(v6) {
        Ok(_) => addrs.push(v6),
        Err(_) if std::env::var_os("SQUALL_TEST_NO_IPV6").is_some_and(|v| v == "1") => {}
        Err(e) => panic!("binding [::1] failed ({e}); set SQUALL_TEST_NO_IPV6=1 on such a host"),
    }
    addrs
}

pub(super) fn local_addr(fd: &OwnedFd) -> SocketAddr {
    socket2::SockRef::from(fd)
        .local_addr()
        .unwrap()
        .as_socket()
        .unwrap()
}

/// A blocking client socket of the same family, with a bounded read timeout.
pub(super) fn client(near: SocketAddr) -> UdpSocket {
    let ip: IpAddr = match near {
        SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
        SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
    };
    let socket = UdpSocket::bind((ip, 0)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    socket
}

#[test]
fn udp_sockets_are_set_up_as_asked() {
    for addr in loopbacks() {
        let fd = udp_socket(addr, true).unwrap();
        let socket = socket2::SockRef::from(&fd);
        assert!(socket.reuse_port().unwrap());
        assert!(socket.nonblocking().unwrap());
        if addr.is_ipv6() {
            assert!(socket.only_v6().unwrap());
        }
        // A second socket joins the group on the same port; without SO_REUSEPORT, refused.
        let port = local_addr(&fd).port();
        let same = SocketAddr::new(addr.ip(), port);
        assert!(udp_socket(same, true).is_ok());
        assert!(udp_socket(same, false).is_err());
        let (recv, send) = set_socket_buffers(&fd, Some(256 * 1024), Some(128 * 1024)).unwrap();
        assert!(recv > 0 && send > 0);
        let (recv_again, send_again) = set_socket_buffers(&fd, None, None).unwrap();
        assert_eq!((recv_again, send_again), (recv, send));
    }
}

/// The steering program, attached to a group of three sockets on one port, delivers each
/// QUIC packet to socket `first DCID byte % 3`, for short and long headers.
#[test]
fn the_steering_program_sends_each_packet_to_its_workers_socket() {
    const WORKERS: usize = 3;
    for addr in loopbacks() {
        let first = udp_socket(addr, true).unwrap();
        let group_addr = local_addr(&first);
        let mut sockets = vec![first];
        for _ in 1..WORKERS {
            sockets.push(udp_socket(group_addr, true).unwrap());
        }
        let program = quic_steering_program(WORKERS as u16);
        attach_reuseport_cbpf(&sockets[0], &program).unwrap();
        let sockets: Vec<UdpSocket> = sockets.into_iter().map(UdpSocket::from).collect();
        for socket in &sockets {
            socket.set_nonblocking(false).unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
        }
        let client = client(addr);
        for dcid in [0u8, 1, 2, 3, 4, 5, 7, 0x80, 0xfe, 0xff] {
            // Short header: flags (0x40, fixed bit), DCID, packet number, payload.
            let mut short = vec![0x40, dcid, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0];
            // Long header: flags (Initial 0xc0, Handshake 0xe0), version 1, DCID length 8,
            // DCID, SCID length 0.
            let mut initial = vec![0xc0, 0, 0, 0, 1, 8, dcid, 9, 9, 9, 9, 9, 9, 9, 0];
            initial.resize(1200, 0);
            let mut handshake = initial.clone();
            handshake[0] = 0xe0;
            for packet in [&mut short, &mut initial, &mut handshake] {
                // A tag after the DCID byte tells the packets apart.
                let tag = packet.len() as u8 ^ packet[0];
                *packet.last_mut().unwrap() = tag;
                client.send_to(packet, group_addr).unwrap();
                let owner = &sockets[usize::from(dcid) % WORKERS];
                let mut got = vec![0u8; 1500];
                let (len, _) = owner.recv_from(&mut got).unwrap_or_else(|e| {
                    panic!("{addr}: DCID byte {dcid} (flags {:#x}): {e}", packet[0])
                });
                assert_eq!(&got[..len], &packet[..]);
            }
        }
        // Nothing went anywhere else.
        for socket in &sockets {
            socket.set_nonblocking(true).unwrap();
            let mut got = [0u8; 1500];
            let err = socket.recv_from(&mut got).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        }
        // Too short for a QUIC packet: the kernel's hash picks, so it arrives somewhere.
        client.send_to(&[0xc0, 1], group_addr).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut arrived = 0;
        while arrived == 0 && Instant::now() < deadline {
            for socket in &sockets {
                let mut got = [0u8; 16];
                if socket.recv_from(&mut got).is_ok() {
                    arrived += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(arrived, 1, "{addr}: the short packet reached one socket");
    }
}

#[test]
fn the_steering_program_is_refused_where_no_group_exists_and_holds_its_shape() {
    let program = quic_steering_program(0);
    // Workers 0 is taken as 1 (a modulo by 0 would not load).
    assert!(program.iter().any(|f| f.k == 1 && f.code == 0x94));
    let lone = udp_socket(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), false).unwrap();
    let e = attach_reuseport_cbpf(&lone, &quic_steering_program(4)).unwrap_err();
    assert!(e.raw_os_error().is_some(), "{e}");
    assert!(attach_reuseport_cbpf(&lone.as_fd(), &[]).is_err());
}
