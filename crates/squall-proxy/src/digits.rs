//! A decimal number written on the stack: lengths, ages and counts for field values, without
//! the allocation `to_string` makes, on the per-request paths of both crates that write them.

/// `n` in decimal.
pub fn itoa_buf(n: u64) -> ItoaBuf {
    let mut buf = ItoaBuf {
        bytes: [0; 20],
        start: 20,
    };
    let mut n = n;
    loop {
        buf.start -= 1;
        buf.bytes[buf.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return buf;
        }
    }
}

/// The digits [`itoa_buf`] wrote.
pub struct ItoaBuf {
    bytes: [u8; 20],
    start: usize,
}

impl ItoaBuf {
    pub fn as_bytes(&mut self) -> &[u8] {
        &self.bytes[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itoa_writes_decimal() {
        for n in [0u64, 7, 10, 99, 1234567, u64::MAX] {
            assert_eq!(itoa_buf(n).as_bytes(), n.to_string().as_bytes());
        }
    }
}
