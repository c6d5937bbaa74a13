//! Splicing a file to a socket through a pipe: byte-exact, short splices, a full socket's
//! `EAGAIN` and the poll that waits for room, and a poll cancelled.

use super::*;

/// A connected pair: the accepted side (nonblocking, as a splice needs it) and the client.
fn tcp_pair() -> (OwnedFd, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let server = OwnedFd::from(server);
    set_nonblocking(&server).unwrap();
    (server, client)
}

/// A file of `len` bytes that are not all alike, at a path of its own.
fn pattern_file(len: usize) -> (std::fs::File, Vec<u8>) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("squall-uring-splice-{}-{n}", std::process::id()));
    let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    (file, bytes)
}

fn splice_result(ring: &mut Ring, token: u64) -> io::Result<usize> {
    match next(ring) {
        Completion::Splice { token: t, result } if t == token => result,
        other => panic!("expected splice {token}: {other:?}"),
    }
}

/// What a transfer does: the file into the pipe while it is empty, then the pipe into the
/// socket until it is empty again, waiting for room on `EAGAIN`. Returns the short splices
/// to the socket and the waits for room.
fn transfer(
    ring: &mut Ring,
    file: &std::fs::File,
    len: usize,
    pipe: &Pipe,
    socket: &OwnedFd,
) -> (usize, usize) {
    let (mut offset, mut short, mut waits) = (0usize, 0, 0);
    while offset < len {
        let want = (len - offset).min(pipe.capacity());
        ring.splice(
            file.as_raw_fd(),
            Some(offset as u64),
            pipe.write_end(),
            want as u32,
            1,
        );
        let mut piped = splice_result(ring, 1).unwrap();
        assert!(piped > 0 && piped <= want, "{piped} of {want}");
        offset += piped;
        while piped > 0 {
            ring.splice(pipe.read_end(), None, socket.as_raw_fd(), piped as u32, 2);
            match splice_result(ring, 2) {
                Ok(n) => {
                    assert!(n > 0 && n <= piped);
                    short += usize::from(n < piped);
                    piped -= n;
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    waits += 1;
                    ring.poll_once(socket.as_raw_fd(), libc::POLLOUT as u32, 3);
                    let Completion::Poll {
                        token: 3,
                        result: Ok(events),
                    } = next(ring)
                    else {
                        panic!("expected the poll");
                    };
                    assert_ne!(events & libc::POLLOUT as u32, 0);
                }
                Err(e) => panic!("splice to the socket: {e}"),
            }
        }
    }
    (short, waits)
}

#[test]
fn a_file_goes_through_a_pipe_to_a_socket_byte_exact() {
    let mut ring = small_ring();
    let (file, bytes) = pattern_file(300_001);
    let pipe = Pipe::new(64 * 1024).unwrap();
    assert!(pipe.capacity() >= 4096, "{}", pipe.capacity());
    let (server, mut client) = tcp_pair();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        got
    });
    transfer(&mut ring, &file, bytes.len(), &pipe, &server);
    drop(server);
    let got = reader.join().unwrap();
    assert_eq!(got.len(), bytes.len());
    assert!(got == bytes, "the bytes differ");
    // The kernel ran the splices on its io-wq threads (this process's `iou-wrk-*`).
    let workers = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("iou-wrk"))
        .count();
    assert!(workers > 0, "no io-wq thread: the splice ran inline");
}

/// Splices what `piped` bytes of the pipe the socket takes until it is full (its peer reads
/// nothing): short splices, then `EAGAIN`, until a poll for room (token 3, left armed) does
/// not fire. Returns what is left in the pipe and what the socket took.
fn fill_socket(
    ring: &mut Ring,
    pipe: &Pipe,
    socket: &OwnedFd,
    mut piped: usize,
) -> (usize, usize, OpId) {
    let mut took = 0;
    // Until the peer's receive buffer is full too: before that, its ACKs free room again.
    loop {
        loop {
            ring.splice(pipe.read_end(), None, socket.as_raw_fd(), piped as u32, 2);
            match splice_result(ring, 2) {
                Ok(n) => {
                    assert!(n > 0 && n < piped, "a short splice: {n} of {piped}");
                    (piped, took) = (piped - n, took + n);
                }
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "{e}");
                    break;
                }
            }
        }
        let poll = ring.poll_once(socket.as_raw_fd(), libc::POLLOUT as u32, 3);
        ring.submit_and_wait(Some(Duration::from_millis(100)))
            .unwrap();
        match ring.next_completion() {
            None => return (piped, took, poll),
            Some(Completion::Poll { token: 3, .. }) => {}
            Some(other) => panic!("{other:?}"),
        }
    }
}

/// Small socket buffers both ways, so that a client that reads nothing fills them at once.
fn narrow(server: &OwnedFd, client: &TcpStream) {
    socket2::SockRef::from(server)
        .set_send_buffer_size(4096)
        .unwrap();
    socket2::SockRef::from(client)
        .set_recv_buffer_size(32 * 1024)
        .unwrap();
}

#[test]
fn a_full_socket_takes_a_short_splice_then_says_eagain_and_a_poll_waits_for_room() {
    let mut ring = small_ring();
    let (file, bytes) = pattern_file(512 * 1024 + 3);
    let pipe = Pipe::new(512 * 1024).unwrap();
    let (server, client) = tcp_pair();
    narrow(&server, &client);
    // The client reads nothing yet: the socket fills, and the splice comes back (it does not
    // hold an io-wq thread until the client reads) with what it took, then with EAGAIN.
    let want = bytes.len().min(pipe.capacity());
    ring.splice(file.as_raw_fd(), Some(0), pipe.write_end(), want as u32, 1);
    let piped = splice_result(&mut ring, 1).unwrap();
    let (piped, mut took, _) = fill_socket(&mut ring, &pipe, &server, piped);
    let mut piped = piped;
    let expected = bytes.clone();
    let reader = std::thread::spawn(move || {
        let mut client = client;
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        assert!(
            got == expected,
            "the bytes differ ({} of {})",
            got.len(),
            expected.len()
        );
    });
    let Completion::Poll {
        token: 3,
        result: Ok(events),
    } = next(&mut ring)
    else {
        panic!("expected the poll");
    };
    assert_ne!(events & libc::POLLOUT as u32, 0);
    // The rest of the pipe, then the rest of the file.
    while piped > 0 {
        ring.splice(pipe.read_end(), None, server.as_raw_fd(), piped as u32, 2);
        match splice_result(&mut ring, 2) {
            Ok(n) => (piped, took) = (piped - n, took + n),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                ring.poll_once(server.as_raw_fd(), libc::POLLOUT as u32, 3);
                assert!(matches!(next(&mut ring), Completion::Poll { token: 3, .. }));
            }
            Err(e) => panic!("{e}"),
        }
    }
    let rest = bytes.len() - took;
    let mut offset = took;
    while offset < bytes.len() {
        let want = (bytes.len() - offset).min(pipe.capacity());
        ring.splice(
            file.as_raw_fd(),
            Some(offset as u64),
            pipe.write_end(),
            want as u32,
            1,
        );
        let mut piped = splice_result(&mut ring, 1).unwrap();
        offset += piped;
        while piped > 0 {
            ring.splice(pipe.read_end(), None, server.as_raw_fd(), piped as u32, 2);
            match splice_result(&mut ring, 2) {
                Ok(n) => piped -= n,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    ring.poll_once(server.as_raw_fd(), libc::POLLOUT as u32, 3);
                    assert!(matches!(next(&mut ring), Completion::Poll { token: 3, .. }));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(rest > 0);
    drop(server);
    reader.join().unwrap();
}

#[test]
fn a_poll_waiting_for_room_is_cancelled() {
    let mut ring = small_ring();
    let (file, bytes) = pattern_file(256 * 1024);
    let pipe = Pipe::new(256 * 1024).unwrap();
    let (server, client) = tcp_pair();
    narrow(&server, &client);
    let want = bytes.len().min(pipe.capacity());
    ring.splice(file.as_raw_fd(), Some(0), pipe.write_end(), want as u32, 1);
    let piped = splice_result(&mut ring, 1).unwrap();
    let (piped, _, poll) = fill_socket(&mut ring, &pipe, &server, piped);
    assert!(
        piped > 0,
        "the client reads nothing: the socket fills first"
    );
    assert_eq!(ring.in_flight(), 1, "the poll for room");
    ring.cancel(poll, 4);
    let (mut cancelled, mut reported) = (false, false);
    while !(cancelled && reported) {
        match next(&mut ring) {
            Completion::Poll {
                token: 3,
                result: Err(e),
            } => {
                assert_eq!(e.raw_os_error(), Some(libc::ECANCELED));
                cancelled = true;
            }
            Completion::Cancel { token: 4 } => reported = true,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn a_pipe_grows_to_what_it_is_asked_for_within_the_limit() {
    let max: usize = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024 * 1024);
    let pipe = Pipe::new(256 * 1024).unwrap();
    if max >= 256 * 1024 {
        assert!(pipe.capacity() >= 256 * 1024, "{}", pipe.capacity());
    }
    // Past the limit (unprivileged): refused, and the pipe keeps its size.
    let huge = Pipe::new(1 << 30).unwrap();
    assert!(huge.capacity() >= 4096);
    let [read, write] = huge.into_ends();
    assert_ne!(read.as_raw_fd(), write.as_raw_fd());
}

/// A nonblocking socket (as a splice leaves a client's) changes nothing for the ring's own
/// operations: a receive with nothing to read waits, and a writev to a full socket takes what
/// fits and then waits for room, where the system calls would say `EAGAIN`.
#[test]
fn the_rings_socket_operations_wait_on_a_nonblocking_socket() {
    let mut ring = small_ring();
    let (server, mut client) = tcp_pair();
    socket2::SockRef::from(&server)
        .set_send_buffer_size(4096)
        .unwrap();
    ring.recv_multi(server.as_raw_fd(), 5);
    let big = Bytes::from(vec![7u8; 1024 * 1024]);
    ring.writev(server.as_raw_fd(), vec![big.clone()], 6);
    // What the socket takes at once comes back (a short writev, never `EAGAIN`); the rest
    // then waits for the client, and the receive waits for bytes.
    let mut sent = 0;
    let waited_from = Instant::now();
    while waited_from.elapsed() < Duration::from_millis(200) {
        ring.submit_and_wait(Some(Duration::from_millis(20)))
            .unwrap();
        while let Some(completion) = ring.next_completion() {
            let Completion::Writev {
                token: 6,
                result: Ok(n),
                ..
            } = completion
            else {
                panic!("only a short writev before the client reads: {completion:?}");
            };
            assert!(n > 0);
            sent += n;
            ring.writev(server.as_raw_fd(), vec![big.slice(sent..)], 6);
        }
    }
    assert!(sent < big.len(), "the socket cannot take 1 MiB at once");
    let reader = std::thread::spawn(move || {
        let mut got = vec![0; 1024 * 1024];
        client.read_exact(&mut got).unwrap();
        client.write_all(b"more").unwrap();
        (got, client)
    });
    let mut received = false;
    while sent < big.len() || !received {
        match next(&mut ring) {
            Completion::Writev {
                token: 6,
                result: Ok(n),
                ..
            } => {
                sent += n;
                if sent < big.len() {
                    ring.writev(server.as_raw_fd(), vec![big.slice(sent..)], 6);
                }
            }
            Completion::Recv {
                token: 5,
                result: Ok(Some(buf)),
                ..
            } => {
                assert_eq!(ring.recv_bytes(&buf), b"more");
                ring.recycle(buf);
                received = true;
            }
            other => panic!("{other:?}"),
        }
    }
    let (got, _client) = reader.join().unwrap();
    assert!(got.iter().all(|&b| b == 7));
}
