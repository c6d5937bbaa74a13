//! Decoding and encoding 2,000 browser-like header blocks, ours beside the `hpack` crate's.
//!
//! Run with `cargo bench -p squall-hpack`; each benchmark's throughput line is blocks/s. The
//! corpus is generated here, deterministically: 20 connections of 100 requests each, half of
//! them Chrome and half Firefox (each browser's header order, `sec-*` fields and `accept`
//! values per destination), with per-connection hosts, user agents and cookie jars of 150-400
//! bytes that change now and then, and paths that differ on almost every request (scripts with
//! content hashes, product images, API calls with query strings). Blocks are encoded as one
//! connection would send them, so the dynamic table carries state from block to block, and each
//! iteration starts fresh contexts per connection, as a new set of connections would.
//!
//! The response benchmarks do the same for what Squall sends most: 2,000 cached responses
//! (`:status`, `date`, `content-type`, `content-length`, `etag`, `cache-control`, ...).
//!
//! Times are the benchmark thread's CPU time, not wall time: on the shared 2-core build
//! machine other jobs preempt the benchmark and wall-clock results swing by 2×, while CPU
//! time counts only the time the code actually ran.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cpu_time::ThreadTime;
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use squall_hpack::{DYNAMIC_TABLE_BYTES_DEFAULT, Decoder, Encoder};

const CONNECTIONS: usize = 20;
const BLOCKS_PER_CONNECTION: usize = 100;
const BLOCKS: usize = CONNECTIONS * BLOCKS_PER_CONNECTION;
const HEADER_LIST_BYTES_MAX: usize = 64 * 1024;

type Fields = Vec<(Bytes, Bytes)>;
/// Per connection, its header lists in order.
type Corpus = Vec<Vec<Fields>>;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16)]))
            .collect()
    }
}

const CHROME_UAS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/125.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
];
const FIREFOX_UAS: &[&str] = &[
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:128.0) Gecko/20100101 Firefox/128.0",
];
const WORDS: &[&str] = &[
    "shoes", "garden", "books", "kitchen", "sale", "new", "kids", "audio",
];

/// What is being fetched, which decides `accept`, `sec-fetch-*` and the path's shape.
#[derive(Clone, Copy)]
enum Destination {
    Document,
    Script,
    Style,
    Image,
    Fetch,
}

impl Destination {
    fn random(rng: &mut Rng) -> Self {
        match rng.below(20) {
            0..=1 => Self::Document,
            2..=6 => Self::Script,
            7..=8 => Self::Style,
            9..=16 => Self::Image,
            _ => Self::Fetch,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Document => "document",
            Self::Script => "script",
            Self::Style => "style",
            Self::Image => "image",
            Self::Fetch => "empty",
        }
    }

    fn accept(self, chrome: bool) -> &'static str {
        match (self, chrome) {
            (Self::Document, true) => {
                "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
            }
            (Self::Document, false) => {
                "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
            }
            (Self::Style, _) => "text/css,*/*;q=0.1",
            (Self::Image, true) => {
                "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
            }
            (Self::Image, false) => {
                "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
            }
            (Self::Script | Self::Fetch, _) => "*/*",
        }
    }

    fn path(self, rng: &mut Rng) -> String {
        match self {
            Self::Document => format!(
                "/{}/{}?page={}",
                rng.pick(WORDS),
                rng.pick(WORDS),
                rng.below(9)
            ),
            Self::Script => format!("/static/js/chunk-{}.{}.js", rng.below(300), rng.hex(8)),
            Self::Style => format!("/static/css/{}.{}.css", rng.pick(WORDS), rng.hex(8)),
            Self::Image => {
                format!(
                    "/img/products/{}/{}x{}.webp",
                    rng.below(100_000),
                    100 * (1 + rng.below(8)),
                    100 * (1 + rng.below(8))
                )
            }
            Self::Fetch => format!(
                "/api/v2/{}?id={}&ts={}",
                rng.pick(WORDS),
                rng.below(10_000),
                rng.next() % 1_000_000_000
            ),
        }
    }
}

/// One browser's connection: what stays the same from request to request. Values are `Bytes`
/// shared by every request that repeats them, as a client's or proxy's header maps share
/// them, so that the corpus fits in cache and the benchmark measures the codec, not misses
/// on 2,000 private copies of the same user agent.
struct Browser {
    chrome: bool,
    user_agent: Bytes,
    host: Bytes,
    cookie: Bytes,
    referer: Bytes,
}

/// A value that is the same in every request that has it.
fn fixed(value: &'static str) -> Bytes {
    Bytes::from_static(value.as_bytes())
}

impl Browser {
    fn new(rng: &mut Rng, index: usize) -> Self {
        let chrome = index.is_multiple_of(2);
        let host = format!("www.shop{index}.example.com");
        let user_agent = if chrome {
            rng.pick(CHROME_UAS)
        } else {
            rng.pick(FIREFOX_UAS)
        };
        let mut browser = Self {
            chrome,
            user_agent: fixed(user_agent),
            referer: Bytes::from(format!("https://{host}/")),
            host: Bytes::from(host),
            cookie: Bytes::new(),
        };
        browser.new_cookie(rng);
        browser
    }

    /// A cookie jar of 150-400 bytes: analytics ids, a session, consent, a cart.
    fn new_cookie(&mut self, rng: &mut Rng) {
        let mut cookie = format!(
            "_ga=GA1.2.{}.{}; _gid=GA1.2.{}.{}; session={}; consent=necessary%2Canalytics",
            rng.next() % 1_000_000_000,
            1_700_000_000 + rng.below(10_000_000),
            rng.next() % 1_000_000_000,
            1_700_000_000 + rng.below(10_000_000),
            rng.hex(32),
        );
        for _ in 0..rng.below(4) {
            cookie.push_str(&format!("; cart_{}={}", rng.hex(4), rng.hex(24)));
        }
        self.cookie = Bytes::from(cookie);
    }

    fn request(&mut self, rng: &mut Rng) -> Fields {
        if rng.below(20) == 0 {
            self.new_cookie(rng); // a tracking cookie was refreshed
        }
        let destination = Destination::random(rng);
        let path = Bytes::from(destination.path(rng));
        let fields = if self.chrome {
            self.chrome_request(destination, path.clone())
        } else {
            self.firefox_request(destination, path.clone())
        };
        if let Destination::Document = destination {
            let host = String::from_utf8_lossy(&self.host);
            let path = String::from_utf8_lossy(&path);
            self.referer = Bytes::from(format!("https://{host}{path}"));
        }
        fields.into_iter().map(|(n, v)| (fixed(n), v)).collect()
    }

    fn chrome_request(&self, destination: Destination, path: Bytes) -> Vec<(&'static str, Bytes)> {
        let document = matches!(destination, Destination::Document);
        let sec_ch_ua =
            "\"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"";
        let mut fields = vec![
            (":method", fixed("GET")),
            (":authority", self.host.clone()),
            (":scheme", fixed("https")),
            (":path", path),
            ("sec-ch-ua", fixed(sec_ch_ua)),
            ("sec-ch-ua-mobile", fixed("?0")),
            ("sec-ch-ua-platform", fixed("\"Windows\"")),
        ];
        if document {
            fields.push(("upgrade-insecure-requests", fixed("1")));
        }
        fields.push(("user-agent", self.user_agent.clone()));
        fields.push(("accept", fixed(destination.accept(true))));
        fields.push(("sec-fetch-site", fixed("same-origin")));
        fields.push((
            "sec-fetch-mode",
            fixed(if document { "navigate" } else { "no-cors" }),
        ));
        if document {
            fields.push(("sec-fetch-user", fixed("?1")));
        }
        fields.push(("sec-fetch-dest", fixed(destination.name())));
        fields.push(("referer", self.referer.clone()));
        fields.push(("accept-encoding", fixed("gzip, deflate, br, zstd")));
        fields.push(("accept-language", fixed("en-US,en;q=0.9")));
        fields.push(("cookie", self.cookie.clone()));
        fields.push((
            "priority",
            fixed(if document { "u=0, i" } else { "u=1, i" }),
        ));
        fields
    }

    fn firefox_request(&self, destination: Destination, path: Bytes) -> Vec<(&'static str, Bytes)> {
        let document = matches!(destination, Destination::Document);
        vec![
            (":method", fixed("GET")),
            (":path", path),
            (":authority", self.host.clone()),
            (":scheme", fixed("https")),
            ("user-agent", self.user_agent.clone()),
            ("accept", fixed(destination.accept(false))),
            ("accept-language", fixed("en-US,en;q=0.5")),
            ("accept-encoding", fixed("gzip, deflate, br, zstd")),
            ("referer", self.referer.clone()),
            ("cookie", self.cookie.clone()),
            ("sec-fetch-dest", fixed(destination.name())),
            (
                "sec-fetch-mode",
                fixed(if document { "navigate" } else { "no-cors" }),
            ),
            ("sec-fetch-site", fixed("same-origin")),
            ("priority", fixed(if document { "u=0, i" } else { "u=2" })),
            ("te", fixed("trailers")),
        ]
    }
}

fn request_corpus() -> Corpus {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..CONNECTIONS)
        .map(|index| {
            let mut browser = Browser::new(&mut rng, index);
            (0..BLOCKS_PER_CONNECTION)
                .map(|_| browser.request(&mut rng))
                .collect()
        })
        .collect()
}

/// Responses a cache sends: each object keeps its own `date`, `etag`, length and age.
fn response_corpus() -> Corpus {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let types = [
        "text/html; charset=utf-8",
        "application/javascript",
        "text/css",
        "image/webp",
    ];
    (0..CONNECTIONS)
        .map(|_| {
            (0..BLOCKS_PER_CONNECTION)
                .map(|_| response(&mut rng, &types))
                .collect()
        })
        .collect()
}

fn response(rng: &mut Rng, types: &[&'static str]) -> Fields {
    let status = if rng.below(10) == 0 { "304" } else { "200" };
    let date = format!(
        "Mon, 21 Oct 2024 20:{:02}:{:02} GMT",
        rng.below(60),
        rng.below(60)
    );
    let modified = format!("Tue, 0{} Jan 2024 10:00:00 GMT", 1 + rng.below(9));
    let fields = [
        (":status", fixed(status)),
        ("date", Bytes::from(date)),
        ("content-type", fixed(types[rng.below(types.len())])),
        (
            "content-length",
            Bytes::from(rng.below(200_000).to_string()),
        ),
        ("etag", Bytes::from(format!("\"{}\"", rng.hex(16)))),
        (
            "cache-control",
            fixed("public, max-age=31536000, immutable"),
        ),
        ("last-modified", Bytes::from(modified)),
        ("age", Bytes::from(rng.below(86_400).to_string())),
        ("vary", fixed("Accept-Encoding")),
        ("server", fixed("squall")),
        ("x-cache", fixed("HIT")),
    ];
    fields.into_iter().map(|(n, v)| (fixed(n), v)).collect()
}

/// Encodes each connection's lists with a fresh encoder of ours, as a client would send them.
fn encode_corpus(corpus: &Corpus) -> Vec<Vec<Vec<u8>>> {
    corpus
        .iter()
        .map(|lists| {
            let mut encoder = Encoder::new();
            lists
                .iter()
                .map(|fields| {
                    let mut out = BytesMut::new();
                    encoder.encode(
                        fields.iter().map(|(n, v)| (&n[..], &v[..], false)),
                        &mut out,
                    );
                    out.to_vec()
                })
                .collect()
        })
        .collect()
}

fn bench_decode(c: &mut Criterion<ThreadCpuTime>, what: &str, corpus: &Corpus) {
    let blocks = encode_corpus(corpus);
    let bytes: usize = blocks.iter().flatten().map(Vec::len).sum();
    let fields: usize = corpus.iter().flatten().map(Vec::len).sum();
    println!("{what}: {BLOCKS} blocks, {fields} fields, {bytes} bytes encoded");
    let mut group = c.benchmark_group(format!("decode {BLOCKS} {what}"));
    group.throughput(Throughput::Elements(BLOCKS as u64));
    group.bench_function("squall-hpack", |b| {
        b.iter(|| {
            for connection in &blocks {
                let mut decoder = Decoder::new(DYNAMIC_TABLE_BYTES_DEFAULT);
                for block in connection {
                    let result = decoder.decode(block, HEADER_LIST_BYTES_MAX, |field| {
                        black_box(field);
                    });
                    debug_assert!(result.is_ok());
                }
            }
        })
    });
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("hpack 0.3", |b| {
        b.iter(|| {
            for connection in &blocks {
                let mut decoder = hpack::Decoder::new();
                for block in connection {
                    let result = decoder.decode_with_cb(block, |name, value| {
                        black_box((name, value));
                    });
                    debug_assert!(result.is_ok());
                }
            }
        })
    });
    group.finish();
}

fn bench_encode(c: &mut Criterion<ThreadCpuTime>, what: &str, corpus: &Corpus) {
    print_sizes(what, corpus);
    let mut group = c.benchmark_group(format!("encode {BLOCKS} {what}"));
    group.throughput(Throughput::Elements(BLOCKS as u64));
    let mut out = BytesMut::with_capacity(16 * 1024);
    group.bench_function("squall-hpack", |b| {
        b.iter(|| {
            for lists in corpus {
                let mut encoder = Encoder::new();
                for fields in lists {
                    out.clear();
                    encoder.encode(
                        fields.iter().map(|(n, v)| (&n[..], &v[..], false)),
                        &mut out,
                    );
                    black_box(&out);
                }
            }
        })
    });
    group.bench_function("hpack 0.3", |b| {
        b.iter(|| {
            for lists in corpus {
                let mut encoder = hpack::Encoder::new();
                for fields in lists {
                    black_box(encoder.encode(fields.iter().map(|(n, v)| (&n[..], &v[..]))));
                }
            }
        })
    });
    group.finish();
}

/// The compression each encoder achieves on the corpus, for the record beside the speed.
fn print_sizes(what: &str, corpus: &Corpus) {
    let raw: usize = corpus
        .iter()
        .flatten()
        .flatten()
        .map(|(n, v)| n.len() + v.len())
        .sum();
    let ours: usize = encode_corpus(corpus).iter().flatten().map(Vec::len).sum();
    let theirs: usize = corpus
        .iter()
        .map(|lists| {
            let mut encoder = hpack::Encoder::new();
            let blocks = lists
                .iter()
                .map(|f| encoder.encode(f.iter().map(|(n, v)| (&n[..], &v[..]))));
            blocks.map(|block| block.len()).sum::<usize>()
        })
        .sum();
    println!(
        "{what}: names and values {raw} bytes; encoded by squall-hpack {ours}, by hpack {theirs}"
    );
}

fn requests(c: &mut Criterion<ThreadCpuTime>) {
    let corpus = request_corpus();
    bench_decode(c, "browser requests", &corpus);
    bench_encode(c, "browser requests", &corpus);
}

fn responses(c: &mut Criterion<ThreadCpuTime>) {
    let corpus = response_corpus();
    bench_decode(c, "cached responses", &corpus);
    bench_encode(c, "cached responses", &corpus);
}

/// Criterion measurement: CPU time of the benchmark thread (see the module documentation).
struct ThreadCpuTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = ThreadTime;
    type Value = Duration;

    fn start(&self) -> ThreadTime {
        ThreadTime::now()
    }

    fn end(&self, start: ThreadTime) -> Duration {
        start.elapsed()
    }

    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }

    fn zero(&self) -> Duration {
        Duration::ZERO
    }

    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

/// Formats nanoseconds of CPU time, and throughputs as elements (blocks) per CPU second.
struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical_ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = match typical_ns {
            ns if ns < 1e3 => (1.0, "ns"),
            ns if ns < 1e6 => (1e-3, "µs"),
            ns if ns < 1e9 => (1e-6, "ms"),
            _ => (1e-9, "s"),
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }

    fn scale_throughputs(
        &self,
        typical_ns: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let per_iteration = match *throughput {
            Throughput::Elements(n) | Throughput::ElementsAndBytes { elements: n, .. } => n,
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Bits(n) => n,
        } as f64;
        let (divisor, unit) = match per_iteration * 1e9 / typical_ns {
            rate if rate < 1e3 => (1.0, " elem/s"),
            rate if rate < 1e6 => (1e3, "Kelem/s"),
            _ => (1e6, "Melem/s"),
        };
        values
            .iter_mut()
            .for_each(|v| *v = per_iteration * 1e9 / *v / divisor);
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = requests, responses
}
criterion_main!(benches);
