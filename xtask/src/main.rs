//! Project automation for Squall, run as `cargo xtask <command>` (alias in `.cargo/config.toml`).
//!
//! - `bench`: build two versions of Squall (or Squall and nginx, h2o or varnish) and compare
//!   them under h2load, scenario by scenario, with a markdown table and raw JSON
//!   (`bench/README.md`).
//! - `tidy`: check the architecture rules that a compiler cannot: crate dependency order and
//!   `#![forbid(unsafe_code)]` everywhere but `squall-uring` (docs/ARCHITECTURE.md, "Architecture invariants"). `cargo test -p xtask`
//!   runs it too.
//! - `fuzz`: run every `cargo fuzz` target in turn for a given time (docs/TESTING.md); never
//!   run by CI or `cargo test`.
//! - `h3load`: the HTTP/3 load generator the bench runs for `protocol = "h3"` scenarios (h2load
//!   1.52 has no HTTP/3): h2load's options and report, on hyperium's h3 over quinn.
//! - `soak`: Squall for minutes under mixed traffic and scheduled faults, sampled every second
//!   and judged (docs/TESTING.md); never run by CI or `cargo test`.
#![forbid(unsafe_code)]

mod bench;
mod build;
mod cli;
mod find_max;
mod fuzz;
mod h2load;
mod h2o;
mod h3load;
mod latency;
mod layout;
mod nginx;
mod origin;
mod peer;
mod progress;
mod report;
mod run;
mod scaling;
mod scenario;
mod server;
mod soak;
mod stats;
mod tidy;
mod util;
mod varnish;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Bench(args) => bench::main(&args),
        cli::Command::Tidy => tidy::main(),
        cli::Command::Fuzz(args) => fuzz::main(&args),
        cli::Command::Soak(args) => soak::main(&args),
        cli::Command::H3load(args) => h3load::main(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
