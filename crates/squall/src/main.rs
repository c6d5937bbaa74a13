//! The `squall` binary: command line, start-up, signals; the workers live in [`worker`].
#![forbid(unsafe_code)]

mod access_log;
mod admin;
mod cache;
mod cli;
mod clients;
mod date;
mod listener;
mod metrics;
mod notify;
mod server;
mod timer;
mod tls;
mod worker;

use std::process::ExitCode;

/// The embedded default config, served by a bare `squall`.
pub const DEFAULT_CONFIG: &str = include_str!("../../../config/squall.toml");

fn main() -> ExitCode {
    let command = match cli::parse(std::env::args_os().skip(1)) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("squall: {message}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    match command {
        cli::Command::Help => {
            println!("{}", cli::USAGE);
            ExitCode::SUCCESS
        }
        cli::Command::Version => {
            println!(
                "squall {} (commit {})",
                env!("CARGO_PKG_VERSION"),
                env!("SQUALL_COMMIT")
            );
            ExitCode::SUCCESS
        }
        cli::Command::Check { config } => check(&config),
        cli::Command::Run { config } => server::run(config.as_deref()),
    }
}

/// `squall check --config FILE`: `ok`, or every diagnostic as `FILE:LINE:COL: message`.
fn check(path: &std::path::Path) -> ExitCode {
    match squall_config::load(path) {
        Ok(config) => match squall_proxy::Service::new(&config) {
            Ok(_) => {
                println!("ok");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                ExitCode::FAILURE
            }
        },
        Err(diagnostics) => {
            eprint!("{diagnostics}");
            ExitCode::FAILURE
        }
    }
}
