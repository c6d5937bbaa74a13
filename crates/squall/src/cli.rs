//! The command line of CONFIG.md: `squall [-c FILE]`, `squall check --config FILE`, `squall version`.
//!
//! Hand-rolled rather than clap: four forms, and the binary's start-up stays small.

use std::ffi::OsString;
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: squall [--config FILE]          run in the foreground (default: the embedded config)
       squall check --config FILE      validate FILE: print ok, or FILE:LINE:COL: message lines
       squall version                  print the version and the commit it was built from

environment: SQUALL_LOG=info|debug|squall=trace,...  (log filter; logs go to stderr)";

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run { config: Option<PathBuf> },
    Check { config: PathBuf },
    Version,
    Help,
}

pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    let mut args = args.into_iter();
    let mut subcommand = None;
    let mut config = None;
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-c" | "--config") => {
                let file = args.next().ok_or("--config needs a FILE")?;
                config = Some(PathBuf::from(file));
            }
            Some(s) if s.starts_with("--config=") => config = Some(PathBuf::from(&s[9..])),
            Some("-h" | "--help" | "help") => return Ok(Command::Help),
            Some("-V" | "--version") => return Ok(Command::Version),
            Some(s @ ("check" | "version")) if subcommand.is_none() => {
                subcommand = Some(s.to_owned())
            }
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    match subcommand.as_deref() {
        None => Ok(Command::Run { config }),
        Some("version") => Ok(Command::Version),
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
        assert!(parse_str(&["check"]).is_err());
        assert!(parse_str(&["--config"]).is_err());
        assert!(parse_str(&["bogus"]).is_err());
    }
}
