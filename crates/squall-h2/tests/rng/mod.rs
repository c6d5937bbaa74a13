//! Test helper: xorshift64*, a random number generator whose fixed seed gives the same run
//! on every machine, without a dependency. The fuzz-style tests each draw their inputs
//! from one.

#![allow(dead_code)]

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A number in `0..n`, for `u64` bounds.
    pub fn below_u64(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
