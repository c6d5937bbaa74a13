//! What to start for a run: the server's config written into the run folder and its command
//! line, checked with `squall check` for Squall, translated for a peer server (`peer.rs`).

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::Settings;
use crate::build::Target;
use crate::scaling::cpu_ranges;
use crate::scenario::Scenario;
use crate::server::{Spec, StartError};
use crate::util::{last_line, wait_bounded};

/// How long `squall check` may take; it only parses a file, but an old build might not know
/// `check` and start serving instead.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// What to start for `target`: writes the config into `dir` and, for Squall, validates it with
/// `squall check` first, so that a build lacking a feature says so in its own words.
pub fn server_spec(
    target: &Target,
    scenario: &Scenario,
    settings: &Settings,
    dir: &Path,
    port: u16,
) -> Result<Spec, StartError> {
    let addr = ([127, 0, 0, 1], port).into();
    let log = dir.join("server.log");
    match target {
        Target::Squall(bin) => {
            let config = dir.join("squall.toml");
            let text = scenario.squall_config(port, settings.workers)?;
            fs::write(&config, text).context("writing squall.toml")?;
            squall_check(bin, &config)?;
            let args = vec!["--config".into(), config.to_string_lossy().into_owned()];
            Ok(Spec {
                program: bin.clone(),
                args,
                cpus: cpu_ranges(&settings.server_cpus),
                log,
                addr,
            })
        }
        Target::Peer(peer, bin) => {
            let layout = crate::peer::Layout {
                dir,
                port,
                protocol: scenario.load.protocol,
                root: running_as_root(),
                workers: settings.workers,
                server_cpus: &settings.server_cpus,
            };
            let launch = crate::peer::launch(*peer, &scenario.squall_table(port), &layout)
                .map_err(StartError::Unsupported)?;
            if let Some(certificate) = &launch.self_signed {
                self_signed_certificate(certificate)?;
            }
            for (path, contents) in &launch.files {
                fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(Spec {
                program: bin.clone(),
                args: launch.args,
                cpus: cpu_ranges(&settings.server_cpus),
                log,
                addr,
            })
        }
    }
}

/// Whether this process runs as root (`Uid:` in `/proc/self/status`, real uid first), which
/// h2o needs to be told.
fn running_as_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next())
            == Some("0")
    })
}

/// Generates the certificate and key a peer serves, as Squall's `self_signed = true` does in
/// memory: ECDSA P-256, signed with SHA-256.
fn self_signed_certificate(certificate: &crate::peer::SelfSigned) -> Result<()> {
    let log_path = certificate.cert.with_file_name("openssl.txt");
    let log = File::create(&log_path).context("creating openssl.txt")?;
    let mut child = Command::new("openssl")
        .args(certificate.openssl_args())
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("duplicating openssl.txt")?)
        .stderr(log)
        .spawn()
        .context("running openssl req")?;
    match wait_bounded(&mut child, CHECK_TIMEOUT)? {
        Some(status) if status.success() => Ok(()),
        Some(status) => {
            let text = fs::read_to_string(&log_path).unwrap_or_default();
            bail!("openssl req failed ({status}): {}", last_line(&text))
        }
        None => bail!("openssl req did not finish"),
    }
}

fn squall_check(bin: &Path, config: &Path) -> Result<(), StartError> {
    let output_path = config.with_file_name("check.txt");
    let output = File::create(&output_path).context("creating check.txt")?;
    let mut child = Command::new(bin)
        .arg("check")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(output.try_clone().context("duplicating check.txt")?)
        .stderr(output)
        .spawn()
        .with_context(|| format!("running {} check", bin.display()))?;
    let status = wait_bounded(&mut child, CHECK_TIMEOUT)?;
    let text = fs::read_to_string(&output_path).unwrap_or_default();
    match status {
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(StartError::Unsupported(format!(
            "`squall check` rejected the config ({status}): {}",
            text.lines().next().unwrap_or("no output")
        ))),
        None => Err(StartError::Unsupported(
            "`squall check` did not finish".into(),
        )),
    }
}
