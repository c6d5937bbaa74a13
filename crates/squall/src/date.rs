//! The Date header value, formatted once per second per worker (as nginx's cached time).

use std::time::{SystemTime, UNIX_EPOCH};

pub struct DateCache {
    second: u64,
    value: [u8; 29],
}

impl DateCache {
    pub fn new() -> DateCache {
        let mut cache = DateCache {
            second: u64::MAX,
            value: [b' '; 29],
        };
        cache.update(SystemTime::now());
        cache
    }

    /// Re-formats the value if the wall-clock second changed.
    pub fn update(&mut self, now: SystemTime) {
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second != self.second {
            self.second = second;
            let text = httpdate::fmt_http_date(now);
            // IMF-fixdate is always 29 bytes ("Sun, 06 Nov 1994 08:49:37 GMT").
            self.value.copy_from_slice(&text.as_bytes()[..29]);
        }
    }

    pub fn get(&self) -> &[u8] {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_imf_fixdate() {
        let mut cache = DateCache::new();
        cache.update(UNIX_EPOCH + Duration::from_secs(784_111_777));
        assert_eq!(cache.get(), b"Sun, 06 Nov 1994 08:49:37 GMT");
    }
}
