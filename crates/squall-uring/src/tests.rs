//! Tests against real loopback sockets: the ring's operations as the worker uses them.

mod splice;
mod udp;
mod udp_sockets;

use super::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn small_ring() -> Ring {
    Ring::new(&RingConfig {
        sq_entries: 64,
        recv_buffers: 8,
        recv_buffer_bytes: 64,
        ..RingConfig::default()
    })
    .unwrap()
}

/// Waits (bounded) for the next completion.
fn next(ring: &mut Ring) -> Completion {
    for _ in 0..200 {
        if let Some(c) = ring.next_completion() {
            return c;
        }
        ring.submit_and_wait(Some(Duration::from_millis(10)))
            .unwrap();
    }
    panic!("no completion within 2 s");
}

#[test]
fn accept_recv_send_close() {
    let mut ring = small_ring();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    ring.accept_multi(listener.as_raw_fd(), 1);
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let Completion::Accept {
        token: 1,
        result: Ok(conn),
        more: true,
    } = next(&mut ring)
    else {
        panic!("expected an accept");
    };
    let recv = ring.recv_multi(conn.as_raw_fd(), 2);
    client.write_all(b"ping").unwrap();
    let Completion::Recv {
        token: 2,
        result: Ok(Some(buf)),
        more: true,
    } = next(&mut ring)
    else {
        panic!("expected data");
    };
    assert_eq!(ring.recv_bytes(&buf), b"ping");
    ring.recycle(buf);

    ring.send(conn.as_raw_fd(), Bytes::from_static(b"pong"), 3);
    let Completion::Send {
        token: 3,
        result: Ok(4),
        buf,
    } = next(&mut ring)
    else {
        panic!("expected a send");
    };
    assert_eq!(&buf[..], b"pong");
    let mut got = [0u8; 4];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"pong");

    ring.writev(
        conn.as_raw_fd(),
        vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cde")],
        4,
    );
    let Completion::Writev {
        token: 4,
        result: Ok(5),
        bufs,
    } = next(&mut ring)
    else {
        panic!("expected a writev");
    };
    assert_eq!(bufs.len(), 2);
    let mut got = [0u8; 5];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"abcde");

    // Cancelling the multishot receive ends it with a final completion.
    ring.cancel(recv, 5);
    let mut saw_recv_end = false;
    let mut saw_cancel = false;
    while !(saw_recv_end && saw_cancel) {
        match next(&mut ring) {
            Completion::Recv {
                token: 2,
                more: false,
                ..
            } => saw_recv_end = true,
            Completion::Cancel { token: 5 } => saw_cancel = true,
            other => panic!("unexpected {other:?}"),
        }
    }
    ring.close(conn, 6);
    assert!(matches!(
        next(&mut ring),
        Completion::Close {
            token: 6,
            result: Ok(())
        }
    ));
    let mut rest = Vec::new();
    assert_eq!(
        client.read_to_end(&mut rest).unwrap(),
        0,
        "peer sees EOF after close"
    );
}

#[test]
fn recv_reports_end_of_stream() {
    let mut ring = small_ring();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (conn, _) = listener.accept().unwrap();
    ring.recv_multi(conn.as_raw_fd(), 7);
    drop(client);
    let Completion::Recv {
        token: 7,
        result: Ok(None),
        more: false,
    } = next(&mut ring)
    else {
        panic!("expected end of stream");
    };
}

#[test]
fn buffers_run_out_and_come_back() {
    // 8 buffers of 64 bytes: 1 KiB sent without recycling ends the receive with ENOBUFS.
    let mut ring = small_ring();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (conn, _) = listener.accept().unwrap();
    ring.recv_multi(conn.as_raw_fd(), 1);
    client.write_all(&[b'x'; 1024]).unwrap();
    let mut held = Vec::new();
    let mut total = 0;
    loop {
        match next(&mut ring) {
            Completion::Recv {
                result: Ok(Some(buf)),
                ..
            } => {
                total += buf.len();
                held.push(buf);
            }
            Completion::Recv {
                result: Err(e),
                more: false,
                ..
            } => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS));
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(held.len(), 8);
    for buf in held {
        ring.recycle(buf);
    }
    ring.recv_multi(conn.as_raw_fd(), 2);
    while total < 1024 {
        let Completion::Recv {
            result: Ok(Some(buf)),
            ..
        } = next(&mut ring)
        else {
            panic!("expected the rest of the data");
        };
        total += buf.len();
        ring.recycle(buf);
    }
    assert_eq!(total, 1024);
}

#[test]
fn waker_wakes_from_another_thread() {
    let mut ring = small_ring();
    let waker = Waker::new().unwrap();
    ring.poll_waker(&waker, 9);
    let remote = waker.clone();
    let t = std::thread::spawn(move || remote.wake());
    t.join().unwrap();
    assert!(matches!(
        next(&mut ring),
        Completion::Wake {
            token: 9,
            more: true
        }
    ));
    // Drained: a second wake produces a second completion.
    waker.wake();
    assert!(matches!(
        next(&mut ring),
        Completion::Wake {
            token: 9,
            more: true
        }
    ));
}

/// Waits once for a single, already-posted wake-up, and says how long the wait took.
fn time_one_wake(ring: &mut Ring) -> Duration {
    let waker = Waker::new().unwrap();
    ring.poll_waker(&waker, 9);
    ring.submit_and_wait(Some(Duration::from_millis(1)))
        .unwrap();
    waker.wake();
    let started = Instant::now();
    ring.submit_and_wait(Some(Duration::from_secs(2))).unwrap();
    let waited = started.elapsed();
    assert!(matches!(
        ring.next_completion(),
        Some(Completion::Wake { token: 9, .. })
    ));
    waited
}

#[test]
fn a_batching_wait_holds_out_for_more_completions_within_its_bound() {
    // Without batching one completion ends the wait at once; with a batch of 4 within 50 ms,
    // the lone completion is handed over when the 50 ms are up, long before the timeout.
    assert!(time_one_wake(&mut small_ring()) < Duration::from_millis(40));
    let mut ring = Ring::new(&RingConfig {
        sq_entries: 64,
        recv_buffers: 8,
        recv_buffer_bytes: 64,
        wait_batch: 4,
        wait_batch_usec: 50_000,
        ..RingConfig::default()
    })
    .unwrap();
    if !ring.batching() {
        eprintln!("skipped: this kernel has no IORING_FEAT_MIN_TIMEOUT (Linux 6.12)");
        return;
    }
    let waited = time_one_wake(&mut ring);
    assert!(
        waited >= Duration::from_millis(40) && waited < Duration::from_secs(1),
        "{waited:?}"
    );
}

fn registered_ring() -> Ring {
    Ring::new(&RingConfig {
        sq_entries: 64,
        recv_buffers: 8,
        recv_buffer_bytes: 64,
        register_ring_fd: true,
        ..RingConfig::default()
    })
    .unwrap()
}

#[test]
fn a_registered_ring_is_entered_by_index_and_given_back_on_drop() {
    let mut ring = registered_ring();
    assert!(ring.registered_ring_fd(), "Linux 5.18+ registers ring fds");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    ring.accept_multi(listener.as_raw_fd(), 1);
    let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    assert!(matches!(
        next(&mut ring),
        Completion::Accept {
            token: 1,
            result: Ok(_),
            ..
        }
    ));
    assert!(!small_ring().registered_ring_fd(), "off by default");
    // Rings made and dropped one after another give their index back: a thread has 16.
    for _ in 0..40 {
        assert!(registered_ring().registered_ring_fd());
    }
}

#[test]
fn dropping_a_ring_with_operations_in_flight_is_clean() {
    let mut ring = small_ring();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (conn, _) = listener.accept().unwrap();
    ring.accept_multi(listener.as_raw_fd(), 1);
    ring.recv_multi(conn.as_raw_fd(), 2);
    ring.submit_and_wait(Some(Duration::from_millis(1)))
        .unwrap();
    assert_eq!(ring.in_flight(), 2);
    drop(ring);
}

#[test]
fn connect_reaches_a_listener_over_v4_and_v6() {
    let mut ring = small_ring();
    // A host without IPv6 may skip that half, but only when it says so: a silent skip would let
    // a broken v6 path pass unnoticed.
    let skip_v6 = std::env::var_os("SQUALL_TEST_NO_IPV6").is_some_and(|v| v == "1");
    let mut families = 0;
    for bind in ["127.0.0.1:0", "[::1]:0"] {
        let listener = match TcpListener::bind(bind) {
            Ok(listener) => listener,
            Err(_) if bind.starts_with('[') && skip_v6 => continue,
            Err(e) => panic!(
                "binding {bind} failed ({e}); set SQUALL_TEST_NO_IPV6=1 on a host without IPv6"
            ),
        };
        let addr = listener.local_addr().unwrap();
        let domain = if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let fd = new_socket(domain);
        ring.connect(fd.as_raw_fd(), addr, 11);
        assert!(matches!(
            next(&mut ring),
            Completion::Connect {
                token: 11,
                result: Ok(())
            }
        ));
        let (_, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), addr.ip());
        families += 1;
    }
    // Counting what ran means a loop that connected nowhere cannot pass.
    let required = if skip_v6 { 1 } else { 2 };
    assert!(
        families >= required,
        "only {families} address families were exercised, {required} required"
    );
    // A closed port: the error comes back in the completion.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let fd = new_socket(libc::AF_INET);
    ring.connect(fd.as_raw_fd(), addr, 12);
    let Completion::Connect {
        token: 12,
        result: Err(e),
    } = next(&mut ring)
    else {
        panic!("expected a failed connect");
    };
    assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED));
}

fn new_socket(domain: i32) -> OwnedFd {
    // SAFETY: socket takes no pointers; on success the descriptor is new and ours.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: `fd` was just created and is owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[test]
fn tcp_notsent_lowat_is_set_on_a_connected_socket() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
    let (server, _) = listener.accept().expect("accept");
    crate::set_tcp_notsent_lowat(&server, 16 * 1024).expect("setsockopt");
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the local c_int we pass and updates
    // `len`; the descriptor stays open (borrowed from `server`) across the call.
    let result = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&server),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            std::ptr::from_mut(&mut value).cast::<libc::c_void>(),
            &mut len,
        )
    };
    assert_eq!(result, 0, "{}", std::io::Error::last_os_error());
    assert_eq!(value, 16 * 1024);
    drop(client);
}

#[test]
fn a_large_writev_goes_zero_copy_and_keeps_its_buffers_until_the_notification() {
    let mut ring = Ring::new(&RingConfig {
        sq_entries: 64,
        recv_buffers: 8,
        recv_buffer_bytes: 64,
        zero_copy_min_bytes: 16 * 1024,
        ..RingConfig::default()
    })
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (conn, _) = listener.accept().unwrap();
    let head = Bytes::from_static(b"HTTP/1.1 200 OK\r\n\r\n");
    let body = Bytes::from(vec![7u8; 20_000]);
    ring.writev(conn.as_raw_fd(), vec![head.clone(), body.clone()], 4);
    let Completion::Writev {
        token: 4,
        result: Ok(sent),
        bufs,
    } = next(&mut ring)
    else {
        panic!("expected the writev's result");
    };
    assert_eq!(sent, head.len() + body.len());
    assert_eq!(bufs, [head.clone(), body.clone()]);
    // The result is in, but the kernel may still read the buffers: the ring holds them until
    // the notification, which reports nothing.
    assert_eq!(ring.in_flight(), 1);
    let mut got = vec![0u8; sent];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got[..head.len()], &head[..]);
    assert!(got[head.len()..].iter().all(|&b| b == 7));
    for _ in 0..200 {
        if ring.in_flight() == 0 {
            break;
        }
        ring.submit_and_wait(Some(Duration::from_millis(10)))
            .unwrap();
        assert!(
            ring.next_completion().is_none(),
            "the notification is internal"
        );
    }
    assert_eq!(ring.in_flight(), 0);
    // Below the threshold: an ordinary writev, done with its one completion.
    ring.writev(conn.as_raw_fd(), vec![head.clone()], 5);
    assert!(matches!(
        next(&mut ring),
        Completion::Writev {
            token: 5,
            result: Ok(19),
            ..
        }
    ));
    assert_eq!(ring.in_flight(), 0);
}

/// A connected pair whose accepted end has 1,000 bytes waiting to be received.
fn thousand_bytes_waiting() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (conn, _) = listener.accept().unwrap();
    client.write_all(&[b'x'; 1000]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    (client, conn)
}

/// A single receive takes one buffer's worth however much is waiting, and ends (`more`
/// false): the rest stays in the socket until the next receive is asked for.
#[test]
fn recv_once_takes_one_buffer_and_ends() {
    let mut ring = small_ring();
    let (client, conn) = thousand_bytes_waiting();
    let mut total = 0;
    for round in 0..4 {
        ring.recv_once(conn.as_raw_fd(), 9);
        let Completion::Recv {
            token: 9,
            result: Ok(Some(buf)),
            more: false,
        } = next(&mut ring)
        else {
            panic!("round {round}: expected one buffer, and the end of the receive");
        };
        assert_eq!(buf.len(), 64, "one 64-byte buffer, not all 1000 bytes");
        total += buf.len();
        ring.recycle(buf);
        assert!(
            ring.next_completion().is_none(),
            "nothing more was received"
        );
    }
    assert_eq!(total, 256);
    drop(client);
    // The rest is still there for later receives, then the end of stream.
    let mut rest = 0;
    loop {
        ring.recv_once(conn.as_raw_fd(), 9);
        match next(&mut ring) {
            Completion::Recv {
                result: Ok(Some(buf)),
                more: false,
                ..
            } => {
                rest += buf.len();
                ring.recycle(buf);
            }
            Completion::Recv {
                result: Ok(None),
                more: false,
                ..
            } => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(total + rest, 1000);
}

/// A multishot receive with a total limit ends (`more` false) once the limit is reached,
/// however much more is waiting, having taken at most one buffer past it; the rest stays in
/// the socket. A kernel without the limit refuses the receive with `EINVAL` at once,
/// having received nothing.
#[test]
fn recv_multi_limited_ends_at_its_limit() {
    let mut ring = small_ring();
    let (_client, conn) = thousand_bytes_waiting();
    assert!(ring.multishot_limit());
    ring.recv_multi_limited(conn.as_raw_fd(), 9, 200);
    let mut total = 0;
    loop {
        match next(&mut ring) {
            Completion::Recv {
                token: 9,
                result: Err(e),
                more: false,
            } if total == 0 => {
                assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
                ring.refuse_multishot_limit();
                assert!(!ring.multishot_limit());
                return;
            }
            Completion::Recv {
                token: 9,
                result: Ok(Some(buf)),
                more,
            } => {
                total += buf.len();
                ring.recycle(buf);
                if !more {
                    break;
                }
                assert!(total < 200, "went on past the limit: {total} bytes");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!((200..200 + 64).contains(&total), "{total} bytes");
    assert!(ring.next_completion().is_none(), "the receive ended");
    // The rest is still in the socket.
    ring.recv_once(conn.as_raw_fd(), 9);
    let Completion::Recv {
        result: Ok(Some(buf)),
        ..
    } = next(&mut ring)
    else {
        panic!("the rest was not left in the socket");
    };
    assert_eq!(buf.len(), 64);
    ring.recycle(buf);
}

/// A directory with a file, a subdirectory, a symlink inside it and one leaving it.
fn file_tree() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("squall-uring-files-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("root/sub")).unwrap();
    std::fs::write(dir.join("root/a.txt"), b"hello, file").unwrap();
    std::fs::write(dir.join("outside.txt"), b"secret").unwrap();
    std::os::unix::fs::symlink("a.txt", dir.join("root/in")).unwrap();
    std::os::unix::fs::symlink("../outside.txt", dir.join("root/out")).unwrap();
    dir
}

fn open_dir(path: &std::path::Path) -> OwnedFd {
    let file = std::fs::File::open(path).unwrap();
    OwnedFd::from(file)
}

/// Opens `path` beneath `root` through the ring with `resolve`.
fn open_beneath(ring: &mut Ring, root: &OwnedFd, path: &str, resolve: u64) -> io::Result<OwnedFd> {
    let path = std::ffi::CString::new(path).unwrap();
    ring.openat2(root.as_raw_fd(), path, resolve, 7);
    let Completion::Open { token: 7, result } = next(ring) else {
        panic!("expected an open");
    };
    result
}

#[test]
fn files_open_beneath_their_root_and_read_at_an_offset() {
    let dir = file_tree();
    let mut ring = small_ring();
    let root = open_dir(&dir.join("root"));
    let strict = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_SYMLINKS;
    let file = open_beneath(&mut ring, &root, "a.txt", strict).unwrap();
    ring.statx(file.as_raw_fd(), 8);
    let Completion::Statx {
        token: 8,
        result: Ok(stat),
    } = next(&mut ring)
    else {
        panic!("expected a statx");
    };
    assert!(stat.is_file() && !stat.is_dir());
    assert_eq!(stat.size, 11);
    let meta = std::fs::metadata(dir.join("root/a.txt")).unwrap();
    assert_eq!(stat.inode, std::os::unix::fs::MetadataExt::ino(&meta));
    assert_eq!(stat.mtime_sec, std::os::unix::fs::MetadataExt::mtime(&meta));
    // A read at an offset appends to what the buffer holds, up to its capacity.
    let mut buf = Vec::with_capacity(6);
    buf.push(b'>');
    ring.read_at(file.as_raw_fd(), buf, 7, 9);
    let Completion::Read {
        token: 9,
        result: Ok(4),
        buf,
    } = next(&mut ring)
    else {
        panic!("expected a read of 4 bytes");
    };
    assert_eq!(buf, b">file");
    // At the end of the file, a read of nothing.
    ring.read_at(file.as_raw_fd(), Vec::with_capacity(8), 11, 10);
    let Completion::Read {
        token: 10,
        result: Ok(0),
        buf,
    } = next(&mut ring)
    else {
        panic!("expected the end of the file");
    };
    assert!(buf.is_empty());
    ring.close(file, 11);
    assert!(matches!(
        next(&mut ring),
        Completion::Close {
            token: 11,
            result: Ok(())
        }
    ));
    let sub = open_beneath(&mut ring, &root, "sub", strict).unwrap();
    ring.statx(sub.as_raw_fd(), 12);
    let Completion::Statx {
        result: Ok(stat), ..
    } = next(&mut ring)
    else {
        panic!("expected a statx");
    };
    assert!(stat.is_dir());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_outside_the_root_opens_and_symlinks_only_when_allowed() {
    let dir = file_tree();
    let mut ring = small_ring();
    let root = open_dir(&dir.join("root"));
    let beneath = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    let strict = beneath | libc::RESOLVE_NO_SYMLINKS;
    for path in [
        "../outside.txt",
        "/etc/passwd",
        "sub/../../outside.txt",
        "out",
    ] {
        for resolve in [strict, beneath] {
            let e = open_beneath(&mut ring, &root, path, resolve).unwrap_err();
            assert!(is_not_found(&e), "{path}: {e}");
        }
    }
    // A symlink that stays inside: refused without symlinks, followed with them.
    let e = open_beneath(&mut ring, &root, "in", strict).unwrap_err();
    assert!(is_not_found(&e), "{e}");
    assert!(open_beneath(&mut ring, &root, "in", beneath).is_ok());
    let e = open_beneath(&mut ring, &root, "missing", strict).unwrap_err();
    assert!(is_not_found(&e), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A read the kernel still holds when the ring goes (a pipe nobody writes to) is cancelled,
/// and its buffer comes back only with the cancellation's completion: `shutdown`, which
/// `Drop` runs, waits for the kernel to let go instead of freeing memory it may write into.
#[test]
fn a_read_in_flight_keeps_its_buffer_when_the_ring_is_dropped() {
    let (reader, mut writer) = std::io::pipe().unwrap();
    let mut ring = small_ring();
    ring.read_at(reader.as_raw_fd(), Vec::with_capacity(1 << 16), 0, 7);
    ring.submit_and_wait(Some(Duration::ZERO)).unwrap();
    let early = ring.next_completion();
    assert!(early.is_none(), "nothing to read yet: {early:?}");
    assert_eq!(ring.in_flight(), 1);
    let shutdown = ring.shutdown();
    assert_eq!(shutdown.in_flight, 0, "the kernel let go of every buffer");
    match &shutdown.completions[..] {
        [
            Completion::Read {
                token: 7,
                result: Err(e),
                buf,
            },
        ] => {
            assert_eq!(e.raw_os_error(), Some(libc::ECANCELED), "{e}");
            assert_eq!(
                (buf.len(), buf.capacity()),
                (0, 1 << 16),
                "the buffer, untouched"
            );
        }
        other => panic!("one cancelled read with its buffer: {other:?}"),
    }
    drop(ring);
    // The cancelled read took nothing: what is written now stays in the pipe for us.
    writer.write_all(b"after").unwrap();
    drop(writer);
    let mut rest = String::new();
    let mut reader = reader;
    reader.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "after");
}
