//! Connection IDs that name the worker owning the connection.
//!
//! Every worker has its own UDP socket in one `SO_REUSEPORT` group on the listener's port. The
//! kernel would spread packets by their addresses' hash, which sends a connection's packets to
//! another worker as soon as the client's address changes (NAT rebinding, migration), and
//! gives no say over where the packets of a new connection go. So Squall's connection IDs say
//! whose they are: their first byte, taken modulo the number of workers, is the owning
//! worker's index, and a classic BPF program on the group (in `squall-uring`) sends each
//! packet to the socket of the worker its destination connection ID names. A client's first
//! Initial packets carry a connection ID the client chose: the same program sends them all to
//! one worker (the ID's first byte modulo the workers), and that worker's reply gives the
//! client an ID of its own.
//!
//! The rest of the ID is random, and so is the first byte within the worker's residue class
//! (`worker + k * workers`), so that an observer learns at most which worker a connection is
//! on, as with any load balancer that routes by connection ID (QUIC-LB, RFC 9000 §5.1).

use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, InvalidCid};

/// The length of Squall's connection IDs: 1 byte for the worker, 7 random (2^56 per worker).
pub const CID_BYTES: usize = 8;

/// Generates the connection IDs of one worker's endpoint.
#[derive(Clone, Copy, Debug)]
pub struct WorkerCids {
    worker: u8,
    workers: u8,
}

impl WorkerCids {
    /// The IDs of worker `worker` out of `workers` (at least 1, `worker < workers`; both are
    /// clamped into range, so a bad pair still makes valid IDs).
    pub fn new(worker: u8, workers: u8) -> WorkerCids {
        let workers = workers.max(1);
        WorkerCids {
            worker: worker % workers,
            workers,
        }
    }

    /// Which worker a connection ID names (its first byte modulo the workers); `None` for an
    /// empty ID.
    pub fn owner(cid: &[u8], workers: u8) -> Option<u8> {
        cid.first().map(|byte| byte % workers.max(1))
    }
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut bytes = [0u8; CID_BYTES];
        random(&mut bytes);
        // The first byte: `worker + k * workers` for a random k that keeps it a byte.
        let classes = (u16::from(u8::MAX) - u16::from(self.worker)) / u16::from(self.workers) + 1;
        let k = u16::from(bytes[0]) % classes;
        bytes[0] = (u16::from(self.worker) + k * u16::from(self.workers)) as u8;
        ConnectionId::new(&bytes)
    }

    /// An ID of ours has our length and names this worker: anything else in a short-header
    /// packet is not for us (a stateless reset is the most it may get).
    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        match WorkerCids::owner(cid, self.workers) {
            Some(owner) if cid.len() == CID_BYTES && owner == self.worker => Ok(()),
            _ => Err(InvalidCid),
        }
    }

    fn cid_len(&self) -> usize {
        CID_BYTES
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// Fills `bytes` from the system's random source (aws-lc-rs, as TLS does).
pub(crate) fn random(bytes: &mut [u8]) {
    // A failing system RNG leaves nothing safe to do: TLS could not run either.
    if aws_lc_rs::rand::fill(bytes).is_err() {
        panic!("the system random number generator failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_worker_and_vary() {
        for workers in [1u8, 2, 3, 7, 16, 255] {
            for worker in 0..workers {
                let mut cids = WorkerCids::new(worker, workers);
                let mut first_bytes = std::collections::HashSet::new();
                let mut ids = std::collections::HashSet::new();
                for _ in 0..64 {
                    let cid = cids.generate_cid();
                    assert_eq!(cid.len(), CID_BYTES);
                    assert_eq!(WorkerCids::owner(&cid, workers), Some(worker));
                    assert!(cids.validate(&cid).is_ok());
                    first_bytes.insert(cid[0]);
                    ids.insert(cid.to_vec());
                }
                assert_eq!(ids.len(), 64, "random IDs do not repeat");
                // With few workers the first byte takes many values, not one per worker.
                if workers <= 16 {
                    assert!(first_bytes.len() > 1, "{worker}/{workers}: {first_bytes:?}");
                }
            }
        }
    }

    #[test]
    fn another_workers_id_or_length_is_not_ours() {
        let mine = WorkerCids::new(1, 4);
        let other = WorkerCids::new(2, 4).generate_cid();
        assert!(mine.validate(&other).is_err());
        let short = ConnectionId::new(&[1, 2, 3]);
        assert!(mine.validate(&short).is_err());
        assert_eq!(WorkerCids::owner(&[], 4), None);
        assert_eq!(WorkerCids::owner(&[9], 4), Some(1));
    }
}
