//! What h3load counts, and its report: text in h2load's words and layout, so that the bench's
//! h2load parser (`crate::h2load::parse`) reads an HTTP/3 run as it reads any other.

use std::fmt::Write as _;
use std::time::Duration;

/// The counts and samples of one stream worker, one connection, or the whole run (merged).
/// As h2load counts: `failed` (derived) includes `errored`; `succeeded` is a 2xx or 3xx.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Requests sent (a request in flight when a timing-based run ends is started, not done).
    pub started: u64,
    /// Requests answered with a whole response, whatever its status.
    pub done: u64,
    /// Requests that got no whole response: a reset stream, a lost connection, or (counted
    /// requests) never sent because every connection failed.
    pub errored: u64,
    /// Responses by status class: 2xx, 3xx, 4xx, 5xx (others count as failed only).
    pub classes: [u64; 4],
    /// Response body bytes received.
    pub body_bytes: u64,
    /// Time for each done request, from sending its headers to its response's end, in µs.
    pub request_us: Vec<f64>,
    /// Per connection: the QUIC handshake, from the first Initial to the connection's
    /// establishment, in µs (h2load's "time for connect" over TLS: TCP connect and handshake).
    pub connect_us: Vec<f64>,
    /// Per connection: from its start to its first response head, in µs.
    pub first_byte_us: Vec<f64>,
    /// Per connection: its done requests per second of the run.
    pub client_rates: Vec<f64>,
    /// Connections that never got established.
    pub connect_errors: u64,
    /// The first error met, for one line on stderr.
    pub first_error: Option<String>,
}

impl Tally {
    /// Counts one whole response.
    pub fn response(&mut self, status: u16, body_bytes: u64, elapsed: Duration) {
        self.done += 1;
        self.body_bytes += body_bytes;
        self.request_us.push(elapsed.as_secs_f64() * 1e6);
        if let Some(class @ 0..=3) = (status / 100).checked_sub(2) {
            self.classes[usize::from(class)] += 1;
        }
    }

    /// Counts a request that got no whole response.
    pub fn error(&mut self, what: impl FnOnce() -> String) {
        self.errored += 1;
        self.note(what);
    }

    /// Keeps `what` if it is the first error.
    pub fn note(&mut self, what: impl FnOnce() -> String) {
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }

    /// 2xx and 3xx responses.
    pub fn succeeded(&self) -> u64 {
        self.classes[0] + self.classes[1]
    }

    /// Requests that did not succeed: errored ones and unsuccessful statuses.
    pub fn failed(&self) -> u64 {
        self.errored + self.done - self.succeeded()
    }

    /// Adds `other`'s counts and samples to this one's.
    pub fn merge(&mut self, other: Tally) {
        self.started += other.started;
        self.done += other.done;
        self.errored += other.errored;
        for (mine, theirs) in self.classes.iter_mut().zip(other.classes) {
            *mine += theirs;
        }
        self.body_bytes += other.body_bytes;
        self.request_us.extend(other.request_us);
        self.connect_us.extend(other.connect_us);
        self.first_byte_us.extend(other.first_byte_us);
        self.client_rates.extend(other.client_rates);
        self.connect_errors += other.connect_errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// How the run was bounded, as the report's heading says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// `-D SECS`
    Timed(u32),
    /// `-n N`
    Counted(u64),
}

/// Everything the report prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub mode: Mode,
    pub connections: u32,
    pub streams: u32,
    /// From the start to the last request done (or, timed, to the end of the duration).
    pub elapsed: Duration,
    /// ALPN as the first established connection negotiated it (`h3`).
    pub protocol: Option<String>,
    pub tally: Tally,
}

impl Summary {
    /// The report, in h2load's layout and words.
    pub fn text(&self) -> String {
        let t = &self.tally;
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let mut out = String::new();
        let how = match self.mode {
            Mode::Timed(secs) => format!(
                "Timing-based test with 0s of warm-up time and {secs}s of main duration for \
                 measurements."
            ),
            Mode::Counted(count) => format!("{count} total requests."),
        };
        let _ = writeln!(
            out,
            "spawning thread #0: {} total client(s). {how}",
            self.connections
        );
        let _ = writeln!(
            out,
            "HTTP/3 over QUIC: {} stream(s) in flight per connection.",
            self.streams
        );
        if let Some(protocol) = &self.protocol {
            let _ = writeln!(out, "TLS Protocol: TLSv1.3");
            let _ = writeln!(out, "Cipher: {}", super::tls::CIPHER);
            let _ = writeln!(out, "Server Temp Key: {}", super::tls::KEY_EXCHANGE);
            let _ = writeln!(out, "Application protocol: {protocol}");
        }
        let _ = writeln!(out);
        let total = match self.mode {
            Mode::Timed(_) => t.done,
            Mode::Counted(count) => count,
        };
        let _ = writeln!(
            out,
            "finished in {}, {:.2} req/s, {:.2}MB/s",
            duration(secs * 1e6),
            t.done as f64 / secs,
            t.body_bytes as f64 / secs / 1e6
        );
        let _ = writeln!(
            out,
            "requests: {total} total, {} started, {} done, {} succeeded, {} failed, {} errored, \
             0 timeout",
            t.started,
            t.done,
            t.succeeded(),
            t.failed(),
            t.errored
        );
        let [s2, s3, s4, s5] = t.classes;
        let _ = writeln!(out, "status codes: {s2} 2xx, {s3} 3xx, {s4} 4xx, {s5} 5xx");
        let _ = writeln!(
            out,
            "traffic: {:.2}MB ({}) data (response bodies; QUIC, HTTP/3 framing and QPACK not \
             counted)",
            t.body_bytes as f64 / 1e6,
            t.body_bytes
        );
        let _ = writeln!(
            out,
            "                     min         max         mean         sd        +/- sd"
        );
        let rows = [
            ("time for request:", &t.request_us),
            ("time for connect:", &t.connect_us),
            ("time to 1st byte:", &t.first_byte_us),
        ];
        for (name, samples) in rows {
            let s = Spread::of(samples);
            let _ = writeln!(
                out,
                "{name} {:>10}  {:>10}  {:>10}  {:>10}  {:>8.2}%",
                duration(s.min),
                duration(s.max),
                duration(s.mean),
                duration(s.sd),
                s.within_sd
            );
        }
        let s = Spread::of(&t.client_rates);
        let _ = writeln!(
            out,
            "req/s           : {:>10.2}  {:>10.2}  {:>10.2}  {:>10.2}  {:>8.2}%",
            s.min, s.max, s.mean, s.sd, s.within_sd
        );
        out
    }
}

/// min, max, mean, standard deviation (of the population, as h2load computes it) and the share
/// of samples within one deviation of the mean, in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Spread {
    min: f64,
    max: f64,
    mean: f64,
    sd: f64,
    within_sd: f64,
}

impl Spread {
    fn of(samples: &[f64]) -> Spread {
        if samples.is_empty() {
            return Spread::default();
        }
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let sd = variance.sqrt();
        let within = samples.iter().filter(|x| (*x - mean).abs() <= sd).count();
        Spread {
            min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean,
            sd,
            within_sd: within as f64 / n * 100.0,
        }
    }
}

/// µs as h2load prints a time: `410us`, `1.02ms`, `3.00s`.
fn duration(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.0}us")
    } else if us < 1e6 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2load;

    fn tally() -> Tally {
        let mut t = Tally::default();
        for (status, us) in [(200, 400), (200, 600), (301, 1_500), (404, 700), (503, 800)] {
            t.started += 1;
            t.response(status, 13, Duration::from_micros(us));
        }
        t.started += 2;
        t.error(|| "stream reset".into());
        t.error(|| "later".into());
        t.connect_us = vec![900.0, 1_100.0];
        t.first_byte_us = vec![2_000.0, 2_500.0];
        t.client_rates = vec![1.0, 1.5];
        t
    }

    #[test]
    fn counts_as_h2load_does() {
        let t = tally();
        assert_eq!((t.started, t.done, t.errored), (7, 5, 2));
        assert_eq!(t.classes, [2, 1, 1, 1]);
        assert_eq!((t.succeeded(), t.failed()), (3, 4));
        assert_eq!(t.first_error.as_deref(), Some("stream reset"));
        let mut merged = Tally::default();
        merged.merge(t.clone());
        merged.merge(t);
        assert_eq!((merged.done, merged.request_us.len()), (10, 10));
        assert_eq!(merged.classes, [4, 2, 2, 2]);
        assert_eq!(merged.first_error.as_deref(), Some("stream reset"));
    }

    #[test]
    fn the_report_reads_as_an_h2load_report() {
        let summary = Summary {
            mode: Mode::Timed(2),
            connections: 2,
            streams: 10,
            elapsed: Duration::from_secs(2),
            protocol: Some("h3".into()),
            tally: tally(),
        };
        let text = summary.text();
        let report = h2load::parse(&text).expect("h2load's parser reads it");
        assert_eq!(report.application_protocol.as_deref(), Some("h3"));
        assert_eq!(report.finished_secs, 2.0);
        assert_eq!(report.req_per_sec, 2.5);
        assert_eq!((report.total, report.started, report.done), (5, 7, 5));
        assert_eq!((report.succeeded, report.failed, report.errored), (3, 4, 2));
        assert_eq!(report.http_failures(), 2);
        assert_eq!(
            (report.status_2xx, report.status_3xx, report.status_5xx),
            (2, 1, 1)
        );
        assert_eq!(report.request.min_us, 400.0);
        assert_eq!(report.request.max_us, 1_500.0);
        assert_eq!(report.request.mean_us, 800.0);
        assert_eq!(report.connect.mean_us, 1_000.0);
        assert_eq!(report.connect.sd_us, 100.0);
        assert_eq!(report.first_byte.max_us, 2_500.0);
        let tls = report.tls.expect("the TLS lines");
        assert_eq!(
            tls.summary(),
            "TLSv1.3, TLS_AES_128_GCM_SHA256, X25519 253 bits"
        );
        // A counted run says its count; one that never connected has no TLS lines.
        let counted = Summary {
            mode: Mode::Counted(100),
            protocol: None,
            tally: Tally::default(),
            ..summary
        };
        let report = h2load::parse(&counted.text()).expect("parses");
        assert_eq!((report.total, report.done), (100, 0));
        assert_eq!((report.tls, report.application_protocol), (None, None));
        assert_eq!(report.request.mean_us, 0.0);
    }

    #[test]
    fn times_in_h2load_units() {
        assert_eq!(duration(410.2), "410us");
        assert_eq!(duration(12_980.0), "12.98ms");
        assert_eq!(duration(3_000_000.0), "3.00s");
        let s = Spread::of(&[1.0, 2.0, 3.0, 10.0]);
        assert_eq!((s.min, s.max, s.mean), (1.0, 10.0, 4.0));
        assert_eq!(s.within_sd, 75.0);
    }
}
