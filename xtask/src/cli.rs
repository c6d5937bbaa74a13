//! The command line of `cargo xtask`: every flag of `bench`, `tidy`, `fuzz` and `soak`, with its
//! default (`h3load`'s are h2load's, in `h3load.rs`).
//!
//! `bench/README.md` documents every flag; a change here needs a change there.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Squall's project automation.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compare two builds of Squall (or Squall and nginx, h2o or varnish) under h2load.
    Bench(Box<BenchArgs>),
    /// Check crate dependency order, `#![forbid(unsafe_code)]`, file sizes and protocol branches.
    Tidy,
    /// Run every `cargo fuzz` target in turn (see docs/TESTING.md).
    Fuzz(crate::fuzz::FuzzArgs),
    /// Run Squall for minutes under mixed traffic and scheduled faults, and judge it.
    Soak(SoakArgs),
    /// Load an HTTP/3 server as h2load loads HTTP/1.1 and HTTP/2 ones, with h2load's report.
    H3load(crate::h3load::H3loadArgs),
}

/// A bounded soak test with faults; see docs/TESTING.md ("Soak").
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long the load runs: `10m`, `90s`, `1h`, or seconds (60 s to 24 h).
    #[arg(long, default_value = "10m", value_parser = crate::soak::parse_duration)]
    pub duration: std::time::Duration,
    /// Requests per second in total, over every generator.
    #[arg(long, default_value_t = 500.0, value_parser = soak_rate)]
    pub rate: f64,
    /// Where the report goes; $CARGO_TARGET_DIR/soak/DATE/ (target/soak/DATE/) if absent.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Use this squall binary instead of building the working tree in release.
    #[arg(long, value_name = "PATH")]
    pub bin: Option<PathBuf>,
}

/// `--rate`: from 20 (every generator still gets a request a second) to 1,000,000.
fn soak_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if (20.0..=1e6).contains(&rate) => Ok(rate),
        _ => Err(format!("{text:?}: a rate from 20 to 1000000 requests/s")),
    }
}

/// Load-test two builds side by side; see `bench/README.md`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Git ref of the baseline build.
    #[arg(long, default_value = "main", conflicts_with = "vs")]
    pub base: String,
    /// Git ref of the build under test; the working tree (uncommitted changes included) if absent.
    #[arg(long)]
    pub head: Option<String>,
    /// Run only this scenario (a file stem in bench/scenarios); repeat for more. All if absent.
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    /// Measured runs per build and scenario, interleaved A B A B ...
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Seconds of measurement per run (after the warm-up).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=600))]
    pub duration: u32,
    /// Seconds of warm-up load before each measured run (not counted).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=60))]
    pub warmup: u32,
    /// Client connections (h2load -c); the scenario's value if absent.
    #[arg(long)]
    pub connections: Option<u32>,
    /// Requests in flight per connection (h2load -m); the scenario's value if absent.
    #[arg(long)]
    pub streams: Option<u32>,
    /// Where results go; $CARGO_TARGET_DIR/bench/DATE/ (target/bench/DATE/ when unset) if absent.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Exit 1 when a scenario's CPU per request (head/base, medians) grows by more than PCT
    /// percent, or is too noisy to tell (a coefficient of variation over 10% in either build).
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// Compare head against a peer server instead of a base build.
    #[arg(long, value_enum)]
    pub vs: Option<Peer>,
    /// Open loop at R requests/s in total (h2load --rps, split over the connections).
    #[arg(long, value_name = "R", conflicts_with = "find_max")]
    pub rate: Option<f64>,
    /// Search the highest rate with mean latency under 5 ms and at least 95% successes.
    #[arg(long)]
    pub find_max: bool,
    /// Use this prebuilt squall binary as base instead of building --base.
    #[arg(long, value_name = "PATH", conflicts_with = "vs")]
    pub base_bin: Option<PathBuf>,
    /// Use this prebuilt squall binary as head instead of building --head.
    #[arg(long, value_name = "PATH")]
    pub head_bin: Option<PathBuf>,
    /// CPU the server is pinned to.
    #[arg(long, default_value_t = 1, conflicts_with = "workers")]
    pub server_cpu: usize,
    /// CPU h2load is pinned to.
    #[arg(long, default_value_t = 0, conflicts_with = "workers")]
    pub load_cpu: usize,
    /// Run every scenario at each of these worker counts (`1,2,4`): the server on the first N
    /// CPUs with N workers, the load generator on the rest, and a scaling table per scenario.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', num_args = 1..,
          value_parser = crate::scaling::parse_workers, conflicts_with = "find_max")]
    pub workers: Vec<u32>,
    /// No latency percentiles: the load generator logs no line per request (h2load's log costs
    /// it about 1 µs of CPU per request, so a client-bound run sends up to ~10% fewer).
    #[arg(long)]
    pub no_percentiles: bool,
    /// List the scenarios (those of --scenario, if given) and exit.
    #[arg(long)]
    pub list: bool,
}

/// Peer servers that `--vs` knows how to configure (`peer.rs` and one module each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Peer {
    /// nginx, one process: `respond` routes, proxy and cached proxy routes, TLS, h2c and h2.
    Nginx,
    /// h2o 2.2, one thread: `respond` routes (as files), plain proxy routes, TLS, h2c and h2;
    /// no cache.
    H2o,
    /// varnish 7.1: cached proxy routes over cleartext HTTP/1.1 only.
    Varnish,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(args.iter().copied()))
    }

    fn bench(args: &[&str]) -> BenchArgs {
        match parse(args).expect("valid command line").command {
            Command::Bench(bench) => *bench,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn defaults_follow_the_issue() {
        let args = bench(&["bench"]);
        assert_eq!(args.base, "main");
        assert_eq!(args.head, None);
        assert_eq!(args.runs, 5);
        assert_eq!(args.duration, 10);
        assert!(args.scenarios.is_empty());
        assert!(!args.find_max);
    }

    #[test]
    fn every_flag_parses() {
        let args = bench(&[
            "bench",
            "--base",
            "HEAD~3",
            "--head",
            "HEAD",
            "--scenario",
            "h1-small",
            "--scenario",
            "h1-close",
            "--runs",
            "3",
            "--duration",
            "2",
            "--connections",
            "8",
            "--streams",
            "4",
            "--out",
            "/tmp/x",
            "--fail-above",
            "5",
            "--rate",
            "1000",
            "--no-percentiles",
        ]);
        assert!(args.no_percentiles);
        assert!(!bench(&["bench"]).no_percentiles);
        assert_eq!(args.scenarios, ["h1-small", "h1-close"]);
        assert_eq!(args.connections, Some(8));
        assert_eq!(args.streams, Some(4));
        assert_eq!(args.fail_above, Some(5.0));
        assert_eq!(args.rate, Some(1000.0));
        assert_eq!(
            bench(&["bench", "--vs", "nginx", "--find-max"]).vs,
            Some(Peer::Nginx)
        );
        assert_eq!(bench(&["bench", "--vs", "h2o"]).vs, Some(Peer::H2o));
        assert_eq!(bench(&["bench", "--vs", "varnish"]).vs, Some(Peer::Varnish));
        assert!(parse(&["bench", "--vs", "apache"]).is_err());
    }

    #[test]
    fn fuzz_takes_a_time_and_targets() {
        let Command::Fuzz(args) = parse(&["fuzz", "--time", "90s", "--target", "request"])
            .expect("valid command line")
            .command
        else {
            panic!("not parsed as fuzz");
        };
        assert_eq!(args.time, std::time::Duration::from_secs(90));
        assert_eq!(args.targets, ["request"]);
        let Command::Fuzz(args) = parse(&["fuzz"]).unwrap().command else {
            panic!("not parsed as fuzz");
        };
        assert_eq!(args.time, std::time::Duration::from_secs(600));
        assert!(parse(&["fuzz", "--time", "0s"]).is_err());
    }

    #[test]
    fn soak_takes_a_duration_a_rate_an_out_and_a_bin() {
        let Command::Soak(args) = parse(&["soak"]).expect("valid").command else {
            panic!("not parsed as soak");
        };
        assert_eq!(args.duration, std::time::Duration::from_secs(600));
        assert_eq!(args.rate, 500.0);
        assert_eq!((args.out, args.bin), (None, None));
        let Command::Soak(args) = parse(&[
            "soak",
            "--duration",
            "2m",
            "--rate",
            "300",
            "--out",
            "/tmp/s",
            "--bin",
            "/b",
        ])
        .expect("valid")
        .command
        else {
            panic!("not parsed as soak");
        };
        assert_eq!(args.duration, std::time::Duration::from_secs(120));
        assert_eq!(args.rate, 300.0);
        assert_eq!(args.out, Some(PathBuf::from("/tmp/s")));
        assert_eq!(args.bin, Some(PathBuf::from("/b")));
        assert!(parse(&["soak", "--duration", "10s"]).is_err());
        assert!(parse(&["soak", "--rate", "0"]).is_err());
        assert!(parse(&["soak", "--rate", "many"]).is_err());
    }

    #[test]
    fn h3load_takes_what_the_bench_gives_h2load() {
        let plan = crate::h2load::Plan {
            url: "https://127.0.0.1:9/a".into(),
            connections: 20,
            streams: 10,
            headers: vec!["Accept-Encoding: gzip".into()],
            stop: crate::h2load::Stop::Duration(5),
            rate: Some(4_000.0),
            connect_rate: None,
            protocol: crate::scenario::Protocol::H3,
            threads: 1,
        };
        let mut line = vec!["h3load".to_string()];
        line.extend(plan.args());
        let words: Vec<&str> = line.iter().map(String::as_str).collect();
        let Command::H3load(args) = parse(&words).expect("valid").command else {
            panic!("not parsed as h3load");
        };
        assert_eq!((args.connections, args.streams), (20, 10));
        assert_eq!((args.duration, args.requests), (Some(5), None));
        assert_eq!(args.rps, Some(200.0));
        assert_eq!(args.headers, ["Accept-Encoding: gzip"]);
        assert_eq!(args.url, "https://127.0.0.1:9/a");
        let Command::H3load(args) = parse(&["h3load", "-n", "100", "https://h/"])
            .unwrap()
            .command
        else {
            panic!("not parsed as h3load");
        };
        assert_eq!(
            (args.connections, args.streams, args.requests),
            (1, 1, Some(100))
        );
        assert_eq!(args.log_file, None);
        let Command::H3load(args) = parse(&["h3load", "--log-file=/tmp/h3.log", "https://h/"])
            .unwrap()
            .command
        else {
            panic!("not parsed as h3load");
        };
        assert_eq!(args.log_file, Some(PathBuf::from("/tmp/h3.log")));
        assert!(parse(&["h3load", "-D", "5", "-n", "5", "https://h/"]).is_err());
        assert!(parse(&["h3load", "-c", "0", "https://h/"]).is_err());
        assert!(parse(&["h3load"]).is_err());
    }

    #[test]
    fn contradictions_are_refused() {
        assert!(parse(&["bench", "--vs", "nginx", "--base", "main"]).is_err());
        assert!(parse(&["bench", "--rate", "10", "--find-max"]).is_err());
        assert!(parse(&["bench", "--runs", "0"]).is_err());
        assert!(parse(&["bench", "--workers", "1,2", "--find-max"]).is_err());
        assert!(parse(&["bench", "--workers", "2", "--server-cpu", "3"]).is_err());
        assert!(parse(&["bench", "--workers", "0"]).is_err());
    }

    #[test]
    fn workers_are_a_list() {
        assert_eq!(bench(&["bench", "--workers", "1,2,4"]).workers, [1, 2, 4]);
        assert_eq!(bench(&["bench", "--workers", "8"]).workers, [8]);
        assert!(bench(&["bench"]).workers.is_empty());
        assert_eq!(
            bench(&["bench", "--workers", "2", "--vs", "nginx"]).vs,
            Some(Peer::Nginx)
        );
    }
}
