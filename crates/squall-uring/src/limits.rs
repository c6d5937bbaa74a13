//! Process limits the workers depend on.

use std::io;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft limit before and after.
///
/// Every connection is a descriptor; 10,000 idle keep-alive clients need the soft limit (often
/// 1,024) raised to what the administrator allowed (the hard limit, or `LimitNOFILE=` in systemd).
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the local we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the local we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(io::Error::last_os_error());
        }
        limit = raised;
    }
    Ok((before, limit.rlim_cur))
}

/// Gives the C allocator's free memory back to the system: glibc's `malloc_trim(0)`, which
/// releases the free pages inside every arena's heap, not only at its top (what
/// `M_TRIM_THRESHOLD` alone reaches). True if any memory was released; false, doing nothing,
/// where the C library is not glibc.
///
/// It locks each arena while it walks it, so an allocating thread may wait for the walk: call
/// it rarely, after a burst has passed.
pub fn release_free_memory() -> bool {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: malloc_trim takes no pointer and may be called from any thread at any time;
        // it only returns free memory, never memory in use.
        unsafe { libc::malloc_trim(0) != 0 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        false
    }
}

/// Sets `TCP_NOTSENT_LOWAT` on a TCP socket: the kernel then keeps at most about `bytes` of
/// not-yet-sent data queued on it, so the next bytes to go out are chosen by the application
/// (an HTTP/2 scheduler serving an urgent stream) rather than already sitting in the kernel
/// behind a large response. 0 is not passed: callers leave the option unset instead.
pub fn set_tcp_notsent_lowat(fd: &impl std::os::fd::AsRawFd, bytes: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads one c_int from the local we pass, of the length we pass; the
    // descriptor is borrowed for the call and stays open across it.
    let result = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            std::ptr::from_ref(&value).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
