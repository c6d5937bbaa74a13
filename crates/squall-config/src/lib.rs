//! squall-config: Squall's TOML config file → validated runtime [`Config`], with every problem
//! reported as `FILE:LINE:COL: message`.
//!
//! The contract for the file is `docs/CONFIG.md`, the operator reference. Loading
//! runs in three steps, each in its own module:
//!
//! 1. `syntax`: TOML text → the raw schema (`raw`), which mirrors the file and denies unknown
//!    keys. Syntax and schema errors stop here.
//! 2. `validate`: raw schema → [`Config`], checking every rule of the contract and collecting
//!    all violations, each at the position of the offending value.
//! 3. [`load`] only: relative certificate paths are resolved against the file's directory.
//!
//! The crate does no I/O but reading the file in [`load`], so the binary can validate a new
//! file on SIGHUP and keep the old config if it fails. Several sections (certificates, cache,
//! upstreams, admin) are parsed and validated before the features that use them land, because
//! the file format is the contract and must not change under operators later.

#![forbid(unsafe_code)]

mod client;
mod cluster;
mod diagnostics;
mod ipnet;
mod model;
mod pages;
mod raw;
mod rewrite;
mod sites;
mod syntax;
mod template;
mod units;
mod validate;

use std::io::Read;
use std::path::Path;

pub use client::*;
pub use cluster::*;
pub use diagnostics::{Diagnostic, Diagnostics};
pub use ipnet::IpNet;
pub use model::*;
pub use pages::{ERROR_PAGE_BYTES_MAX, ErrorPage, ErrorPages, page_content_type};
pub use rewrite::{PathRewrite, RewritePart, parse_rewrite};
pub use sites::{Site, Sites};
pub use template::{Part, Template, Var, parse_template};
pub use units::{DURATION_MAX, parse_duration, parse_size};

/// Largest config file [`load`] reads. Real configs are a few KiB; the bound only stops a
/// wrong path (a log, a device) from being read into memory whole.
pub const CONFIG_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// Parses and validates config `text`; `file` is the name diagnostics use. Relative
/// certificate paths are returned as written (see [`Config::resolve_paths`]).
pub fn parse(text: &str, file: &str) -> Result<Config, Diagnostics> {
    parse_with_sites(text, file).map(|(config, _)| config)
}

/// [`parse`], with where the values the binary acts on sit in `text` (see [`Sites`]).
pub fn parse_with_sites(text: &str, file: &str) -> Result<(Config, Sites), Diagnostics> {
    let source = diagnostics::Source::new(file, text);
    let raw = syntax::deserialize(&source)?;
    let mut report = diagnostics::Report::new(&source);
    let config = validate::config(&raw, &mut report);
    report.finish()?;
    Ok((config, sites::collect(&raw, &source)))
}

/// Reads, parses and validates the config file at `path`, resolving relative paths against
/// its directory. An unreadable file gives one diagnostic without a position:
/// `FILE: cannot read: REASON`.
pub fn load(path: &Path) -> Result<Config, Diagnostics> {
    load_with_sites(path, None).map(|(config, _)| config)
}

/// [`load`], with where the values the binary acts on sit in the file (see [`Sites`]). With
/// `credentials` (systemd's `$CREDENTIALS_DIRECTORY`), relative `cert` and `key` paths are
/// resolved against it instead: they name credentials the unit loads (`LoadCredential=`).
pub fn load_with_sites(
    path: &Path,
    credentials: Option<&Path>,
) -> Result<(Config, Sites), Diagnostics> {
    let file = path.display().to_string();
    let text = read(path).map_err(|e| {
        Diagnostics(vec![Diagnostic::whole_file(
            &file,
            format!("cannot read: {e}"),
        )])
    })?;
    let (mut config, sites) = parse_with_sites(&text, &file)?;
    let dir = path.parent().unwrap_or(Path::new(""));
    config.resolve_paths_with(dir, credentials.unwrap_or(dir));
    Ok((config, sites))
}

/// The `[server] control` socket written in the config file at `path`, resolved like
/// [`load`] resolves it, read even when the rest of the file does not validate: `squall
/// reload` needs the socket to ask the server, which then refuses the file with its reasons
/// (and counts the refusal). `None` when the file cannot be read, is not TOML, or sets none.
pub fn control_socket_written(path: &Path) -> Option<std::path::PathBuf> {
    let text = read(path).ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    let control = table.get("server")?.as_table()?.get("control")?.as_str()?;
    if control.is_empty() {
        return None;
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    Some(dir.join(control))
}

fn read(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(CONFIG_BYTES_MAX + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > CONFIG_BYTES_MAX {
        let message = format!(
            "larger than {} MiB; is this the config file?",
            CONFIG_BYTES_MAX >> 20
        );
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            message,
        ));
    }
    Ok(text)
}
