//! The command line of docs/CONFIG.md: `squall [-c FILE]`, `squall check --config FILE`,
//! `squall reload [--config FILE]`, `squall version`.
//!
//! Hand-rolled rather than clap: five forms, and the binary's start-up stays small.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::control::RELOAD_TIMEOUT_DEFAULT;

pub const USAGE: &str = "\
usage: squall [--config FILE]          run in the foreground (default: the embedded config)
       squall check --config FILE      validate FILE: print ok, or FILE:LINE:COL: message lines
       squall reload [--config FILE] [--timeout 30s]
                                       make the running server reload its file and wait for
                                       the outcome (the server is found by FILE's [server]
                                       control, or $RUNTIME_DIRECTORY/control.sock, or
                                       /run/squall/control.sock, the systemd unit's)
       squall version                  print the version and the commit it was built from

environment: SQUALL_LOG=info|debug|squall=trace,...  (log filter; logs go to stderr)";

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run {
        config: Option<PathBuf>,
    },
    Check {
        config: PathBuf,
    },
    Reload {
        config: Option<PathBuf>,
        timeout: Duration,
    },
    Version,
    Help,
}

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    let mut args = args.into_iter();
    let mut subcommand = None;
    let mut config = None;
    let mut timeout = None;
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-c" | "--config") => {
                let file = args.next().ok_or("--config needs a FILE")?;
                config = Some(PathBuf::from(file));
            }
            Some(s) if s.starts_with("--config=") => config = Some(PathBuf::from(&s[9..])),
            Some("--timeout") => {
                let value = args.next().ok_or("--timeout needs a duration, as in 30s")?;
                let value = value
                    .to_str()
                    .ok_or("--timeout needs a duration, as in 30s")?;
                timeout = Some(
                    squall_config::parse_duration(value).map_err(|e| format!("--timeout: {e}"))?,
                );
            }
            Some("-h" | "--help" | "help") => return Ok(Command::Help),
            Some("-V" | "--version") => return Ok(Command::Version),
            Some(s @ ("check" | "reload" | "version")) if subcommand.is_none() => {
                subcommand = Some(s.to_owned())
            }
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    if timeout.is_some() && subcommand.as_deref() != Some("reload") {
        return Err("--timeout is for reload".into());
    }
    match subcommand.as_deref() {
        None => Ok(Command::Run { config }),
        Some("version") => Ok(Command::Version),
        Some("reload") => Ok(Command::Reload {
            config,
            timeout: timeout.unwrap_or(RELOAD_TIMEOUT_DEFAULT),
        }),
        Some(_) => Ok(Command::Check {
            config: config.ok_or("check needs --config FILE")?,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Command, String> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn forms_of_the_command_line() {
        assert_eq!(parse_str(&[]), Ok(Command::Run { config: None }));
        let file = Some(PathBuf::from("a.toml"));
        assert_eq!(
            parse_str(&["-c", "a.toml"]),
            Ok(Command::Run {
                config: file.clone()
            })
        );
        assert_eq!(
            parse_str(&["--config=a.toml"]),
            Ok(Command::Run { config: file })
        );
        assert_eq!(
            parse_str(&["check", "--config", "a.toml"]),
            Ok(Command::Check {
                config: "a.toml".into()
            })
        );
        assert_eq!(parse_str(&["version"]), Ok(Command::Version));
        assert_eq!(
            parse_str(&["reload"]),
            Ok(Command::Reload {
                config: None,
                timeout: RELOAD_TIMEOUT_DEFAULT
            })
        );
        assert_eq!(
            parse_str(&["reload", "-c", "a.toml", "--timeout", "2s"]),
            Ok(Command::Reload {
                config: Some("a.toml".into()),
                timeout: Duration::from_secs(2)
            })
        );
        assert!(parse_str(&["reload", "--timeout", "2"]).is_err());
        assert!(parse_str(&["--timeout", "2s"]).is_err());
        assert!(parse_str(&["check"]).is_err());
        assert!(parse_str(&["--config"]).is_err());
        assert!(parse_str(&["bogus"]).is_err());
    }
}
