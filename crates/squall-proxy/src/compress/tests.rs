//! The compressor against the crates' own decoders: every split of the input, flushes that
//! make what was pushed decodable at once, and the stats.

use std::io::Write;

use super::*;

const LEVELS: Levels = Levels {
    gzip: 6,
    brotli: 4,
    zstd: 3,
};

/// Some text that compresses, and some bytes that do not.
fn input() -> Vec<u8> {
    let mut data = Vec::new();
    for i in 0..40u32 {
        data.extend_from_slice(format!("<li class=\"item\">entry {i}</li>\n").as_bytes());
    }
    let mut x = 0x2545_f491_u32;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data.push(x as u8);
    }
    data
}

/// Compresses `data` cut into pieces of `size` bytes, flushing after each piece when `flush`.
fn compress(coding: Coding, data: &[u8], size: usize, flush: bool) -> (Vec<u8>, Stats) {
    let mut c = Compressor::new(coding, LEVELS).unwrap();
    let mut out = Vec::new();
    for piece in data.chunks(size) {
        out.extend_from_slice(&c.push(piece).unwrap());
        if flush {
            out.extend_from_slice(&c.flush().unwrap());
        }
    }
    let (rest, stats) = c.finish().unwrap();
    out.extend_from_slice(&rest);
    (out, stats)
}

#[test]
fn every_split_decodes_to_the_input() {
    let data = input();
    for coding in Coding::PREFERENCE {
        for size in 1..=data.len() {
            // Flushing at every piece is the worst case; without flushes, every 7th size (the
            // coding buffers either way, the splits only change where input arrives).
            for flush in [true, false].into_iter().filter(|f| *f || size % 7 == 0) {
                let (out, stats) = compress(coding, &data, size, flush);
                let decoded = decode(coding, &out).unwrap();
                assert!(decoded == data, "{coding:?} size {size} flush {flush}");
                assert_eq!(stats.bytes_in, data.len() as u64);
                assert_eq!(stats.bytes_out, out.len() as u64);
            }
        }
        let (whole, _) = compress(coding, &data, data.len(), false);
        assert!(whole.len() < data.len(), "{coding:?} compresses");
    }
}

#[test]
fn an_empty_body_is_a_valid_stream() {
    for coding in Coding::PREFERENCE {
        let c = Compressor::new(coding, LEVELS).unwrap();
        let (out, stats) = c.finish().unwrap();
        assert!(!out.is_empty(), "{coding:?} writes its framing");
        assert_eq!(decode(coding, &out).unwrap(), b"");
        assert_eq!(stats.bytes_in, 0);
    }
}

/// A streaming decoder's output so far.
fn decoded_so_far(coding: Coding, compressed: &[u8]) -> Vec<u8> {
    match coding {
        Coding::Gzip => {
            let mut d = flate2::write::GzDecoder::new(Vec::new());
            d.write_all(compressed).unwrap();
            d.flush().unwrap();
            d.get_ref().clone()
        }
        Coding::Brotli => {
            let mut d = brotli::DecompressorWriter::new(Vec::new(), 4096);
            d.write_all(compressed).unwrap();
            d.flush().unwrap();
            d.get_ref().clone()
        }
        Coding::Zstd => {
            let mut d = zstd::stream::write::Decoder::new(Vec::new()).unwrap();
            d.write_all(compressed).unwrap();
            d.flush().unwrap();
            d.get_ref().clone()
        }
    }
}

#[test]
fn a_flush_makes_every_event_so_far_decodable() {
    for coding in Coding::PREFERENCE {
        let mut c = Compressor::new(coding, LEVELS).unwrap();
        let mut sent = Vec::new();
        let mut pushed = Vec::new();
        for i in 0..20 {
            let event = format!("data: event {i}\n\n");
            pushed.extend_from_slice(event.as_bytes());
            sent.extend_from_slice(&c.push(event.as_bytes()).unwrap());
            sent.extend_from_slice(&c.flush().unwrap());
            assert_eq!(
                decoded_so_far(coding, &sent),
                pushed,
                "{coding:?}: after event {i}"
            );
        }
        assert!(c.flush().unwrap().is_empty(), "no input, no flush");
    }
}

#[test]
fn output_is_handed_out_and_not_kept() {
    for coding in Coding::PREFERENCE {
        let mut c = Compressor::new(coding, LEVELS).unwrap();
        let mut total = 0;
        for _ in 0..64 {
            total += c.push(&input()).unwrap().len();
            total += c.flush().unwrap().len();
        }
        let stats = c.stats();
        assert_eq!(stats.bytes_out, total as u64, "{coding:?}");
        assert_eq!(stats.bytes_in, 64 * input().len() as u64);
    }
}

#[test]
fn tokens_round_trip() {
    for coding in Coding::PREFERENCE {
        assert_eq!(Coding::from_token(coding.token().as_bytes()), Some(coding));
        let upper = coding.token().to_ascii_uppercase();
        assert_eq!(Coding::from_token(upper.as_bytes()), Some(coding));
        assert_eq!(Coding::PREFERENCE[coding as usize], coding);
    }
    assert_eq!(Coding::from_token(b"X-GZIP"), Some(Coding::Gzip));
    assert_eq!(Coding::from_token(b"deflate"), None);
}
