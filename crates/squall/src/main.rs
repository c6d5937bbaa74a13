//! The `squall` binary: command line, start-up, signals; the workers live in [`worker`].
#![forbid(unsafe_code)]

mod access_log;
mod admin;
mod auth;
mod cache;
mod cli;
mod clients;
mod cluster;
mod control;
mod date;
mod descriptors;
mod error_pages;
mod listener;
mod metrics;
mod notify;
mod origin_tls;
mod prepare;
mod real_ip;
mod request_id;
mod resolve;
mod roots;
mod route_rules;
mod runtime;
mod server;
mod static_files;
mod ticket_watch;
mod timer;
mod tls;
mod trim;
mod upstream_events;
mod upstream_records;
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
        cli::Command::Check { config } => prepare::check(&config),
        cli::Command::Reload { config, timeout } => {
            control::reload_command(config.as_deref(), timeout)
        }
        cli::Command::Run { config } => server::run(config.as_deref()),
    }
}
