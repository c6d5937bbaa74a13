//! Process limits the workers depend on.

use std::io;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the new soft limit.
///
/// Every connection is a descriptor; 10,000 idle keep-alive clients need the soft limit (often
/// 1,024) raised to what the administrator allowed (the hard limit, or `LimitNOFILE=` in systemd).
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the local we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
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
    Ok(limit.rlim_cur)
}
