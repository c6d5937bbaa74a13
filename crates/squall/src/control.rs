//! The control socket: how `squall reload` asks the running server to reload and learns the
//! outcome, which SIGHUP alone cannot tell anyone.
//!
//! The server listens on a Unix socket (`[server] control`, or `$RUNTIME_DIRECTORY/control.sock`
//! under systemd, where the unit's `RuntimeDirectory=squall` makes `/run/squall/`). A client
//! sends `reload\n`; the control thread queues the request and raises SIGHUP in its own
//! process, so that a reload asked for here takes the very path a `kill -HUP` takes (same log
//! lines, same sd_notify messages). The main thread drains the queue before it reads the file,
//! and answers every request it drained with the outcome of that reload: a request is never
//! answered by a reload that read the file before the request came in.
//!
//! The answer is text, first line `applied`, `restart-needed` or `refused`, then the reasons,
//! one per line. The socket is mode 0600 in a directory only the service's user can enter:
//! whoever can reach it may reload the server, and nothing else.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use squall_config::{Config, Protocol, Workers};
use tracing::{debug, info, warn};

/// The socket's file name in `$RUNTIME_DIRECTORY` when `[server] control` is absent.
pub const SOCKET_NAME: &str = "control.sock";
/// The shipped unit's `RuntimeDirectory=squall`, where a server systemd started listens.
pub const SYSTEMD_RUNTIME_DIRECTORY: &str = "/run/squall";
/// How long `squall reload` waits for the outcome by default. A reload reads the file and
/// every certificate; far less than this, unless a disk hangs.
pub const RELOAD_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Time a client gets to send its command.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest command line read.
const REQUEST_BYTES_MAX: u64 = 256;

/// What a reload did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The file is in force for new requests.
    Applied,
    /// The file is in force, except for settings only a restart applies (listed).
    RestartNeeded(Vec<String>),
    /// The file was refused, for these reasons; the running configuration stays.
    Refused(String),
}

impl Outcome {
    /// The answer sent to a client, ending with a newline.
    pub fn to_wire(&self) -> String {
        match self {
            Outcome::Applied => "applied\n".to_owned(),
            Outcome::RestartNeeded(settings) => {
                format!("restart-needed\n{}\n", settings.join("\n"))
            }
            Outcome::Refused(reasons) => format!("refused\n{}\n", reasons.trim_end()),
        }
    }
}

/// A client waiting for the outcome of the next reload.
pub type Waiter = Sender<Outcome>;

/// The control socket the server listens on: `[server] control`, else `$RUNTIME_DIRECTORY`'s
/// (the first, if systemd gave several), else none.
pub fn socket_path(config: &Config) -> Option<PathBuf> {
    let configured = config.server.control.clone();
    let runtime_directory = std::env::var_os("RUNTIME_DIRECTORY");
    configured.or_else(|| default_socket(runtime_directory.as_deref(), false))
}

/// The settings that differ between `running` (what the process started with) and `new` and
/// that a reload cannot change, each as `key (running X, file says Y)`.
pub fn restart_only_changes(running: &Config, new: &Config, cores: usize) -> Vec<String> {
    let workers = |w: Workers| match w {
        Workers::Auto => cores,
        Workers::Count(n) => n.get(),
    };
    let mut changes = Vec::new();
    let mut differ = |key: &str, old: String, new: String| {
        if old != new {
            changes.push(format!("{key} (running {old}, file says {new})"));
        }
    };
    differ(
        "server.workers",
        workers(running.server.workers).to_string(),
        workers(new.server.workers).to_string(),
    );
    let admin = |c: &Config| {
        c.admin
            .as_ref()
            .map_or("none".into(), |a| a.listen.to_string())
    };
    differ("admin.listen", admin(running), admin(new));
    let path = |p: &Option<PathBuf>| {
        p.as_ref()
            .map_or("none".into(), |p| p.display().to_string())
    };
    differ(
        "log.access",
        path(&running.log.access),
        path(&new.log.access),
    );
    differ(
        "log.format",
        running.log.format.as_str().into(),
        new.log.format.as_str().into(),
    );
    differ(
        "server.control",
        path(&running.server.control),
        path(&new.server.control),
    );
    // HTTP/3's UDP sockets (and the receive buffers each worker's ring sets aside for them)
    // are made at start-up.
    let h3 = |c: &Config| {
        let h3 = c
            .listen
            .iter()
            .filter(|l| l.protocols.contains(&Protocol::H3));
        let addresses: Vec<String> = h3.map(|l| l.address.to_string()).collect();
        match addresses.is_empty() {
            true => "none".to_owned(),
            false => addresses.join(" "),
        }
    };
    differ("listen protocols \"h3\"", h3(running), h3(new));
    let gro = |c: &Config| c.quic.gro.to_string();
    differ("quic.gro", gro(running), gro(new));
    let steering = |c: &Config| c.quic.steering.to_string();
    differ("quic.steering", steering(running), steering(new));
    changes
}

/// Binds the control socket at `path` and serves it on its own thread; each reload request
/// is handed to the main thread on the returned channel, followed by a SIGHUP.
pub fn start(path: &Path) -> anyhow::Result<Receiver<Waiter>> {
    let listener = bind(path)?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("squall-control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Err(e) = serve(stream, &tx) {
                    debug!("control connection: {e}");
                }
            }
        })?;
    info!("control socket on {}", path.display());
    Ok(rx)
}

/// Binds `path`, replacing a socket file no process listens on (left by a crash); a socket a
/// process answers on is another server's, and start-up stops.
fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    let fail = |e: std::io::Error| {
        anyhow::anyhow!("cannot listen on control socket {}: {e}", path.display())
    };
    if UnixStream::connect(path).is_ok() {
        anyhow::bail!(
            "control socket {} is in use: another squall runs with it",
            path.display()
        );
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    let listener = UnixListener::bind(path).map_err(fail)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
    Ok(listener)
}

/// Reads one command and answers it.
fn serve(stream: UnixStream, requests: &Sender<Waiter>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(REQUEST_BYTES_MAX)).read_line(&mut line)?;
    let answer = match line.trim() {
        "reload" => {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let queued = requests.send(tx).is_ok();
            if queued && let Err(e) = signal_hook::low_level::raise(signal_hook::consts::SIGHUP) {
                warn!("control: cannot raise SIGHUP: {e}");
            }
            match rx.recv() {
                Ok(outcome) => outcome.to_wire(),
                Err(_) => "refused\nthe server is stopping\n".to_owned(),
            }
        }
        other => format!("refused\nunknown command {other:?}; the commands are: reload\n"),
    };
    (&stream).write_all(answer.as_bytes())
}

/// `squall reload [--config FILE]`: asks the server to reload, prints the outcome; 0 when the
/// file is in force (even if some settings wait for a restart), 1 when it was refused, or no
/// answer came within `timeout`.
///
/// A file with errors is still sent to the server when its socket can be found (the file's
/// `[server] control` is read even then): the server refuses it with the same reasons, logs
/// and counts the refusal, and the operator sees one answer, the server's.
pub fn reload_command(config: Option<&Path>, timeout: Duration) -> ExitCode {
    let loaded = config.map(squall_config::load);
    let configured = match (&loaded, config) {
        (Some(Ok(config)), _) => config.server.control.clone(),
        (Some(Err(_)), Some(file)) => squall_config::control_socket_written(file),
        _ => None,
    };
    let runtime_directory = std::env::var_os("RUNTIME_DIRECTORY");
    let systemd = Path::new(SYSTEMD_RUNTIME_DIRECTORY).is_dir();
    let found = configured.or_else(|| default_socket(runtime_directory.as_deref(), systemd));
    let errors = match &loaded {
        Some(Err(diagnostics)) => Some(diagnostics),
        _ => None,
    };
    let Some(path) = found else {
        if let Some(diagnostics) = errors {
            eprintln!("{diagnostics}");
            eprintln!("squall reload: the file has the errors above; no server was asked");
        } else {
            eprintln!(
                "squall reload: no control socket to reach the server: set [server] control in \
                 the file, or run the server under systemd (RuntimeDirectory=squall)"
            );
        }
        return ExitCode::FAILURE;
    };
    match ask(&path, "reload", timeout) {
        Ok(answer) => print_outcome(&answer),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            eprintln!(
                "squall reload: timed out: no outcome from the server within {timeout:?} ({})",
                path.display()
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            if let Some(diagnostics) = errors {
                eprintln!("{diagnostics}");
            }
            eprintln!(
                "squall reload: cannot reach the server at {}: {e} (is squall running?)",
                path.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// The control socket `squall reload` looks for when the file sets none: the server's under
/// systemd (`$RUNTIME_DIRECTORY/control.sock`, which the unit's `ExecReload=` sees), else the
/// shipped unit's (`/run/squall/control.sock`) when that directory exists, which is how an
/// operator's `sudo squall reload` finds a server systemd started.
fn default_socket(runtime_directory: Option<&OsStr>, systemd_directory: bool) -> Option<PathBuf> {
    let from_env = runtime_directory.and_then(|dirs| {
        let first = dirs.to_str()?.split(':').next()?;
        (!first.is_empty()).then(|| Path::new(first).join(SOCKET_NAME))
    });
    from_env.or_else(|| {
        systemd_directory.then(|| Path::new(SYSTEMD_RUNTIME_DIRECTORY).join(SOCKET_NAME))
    })
}

/// Sends `command` and reads the whole answer.
fn ask(path: &Path, command: &str, timeout: Duration) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(format!("{command}\n").as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

fn print_outcome(answer: &str) -> ExitCode {
    let (status, details) = answer.split_once('\n').unwrap_or((answer, ""));
    let details = details.trim_end();
    match status {
        "applied" => {
            println!("reload applied");
            ExitCode::SUCCESS
        }
        "restart-needed" => {
            println!("reload applied, but a restart is needed for:");
            for line in details.lines() {
                println!("  {line}");
            }
            ExitCode::SUCCESS
        }
        "refused" => {
            eprintln!("reload refused, the running configuration stays:");
            eprintln!("{details}");
            ExitCode::FAILURE
        }
        _ => {
            eprintln!("squall reload: the server answered {answer:?}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_restart_settings_are_listed() {
        let base = "[server]\nworkers = 2\n[[listen]]\naddress = \"127.0.0.1:1\"\n";
        let running = squall_config::parse(base, "a").unwrap();
        let same = squall_config::parse(&format!("{base}[limits]\nidle_timeout = \"5s\"\n"), "b");
        assert_eq!(
            restart_only_changes(&running, &same.unwrap(), 8),
            Vec::<String>::new()
        );
        let auto = base.replace("workers = 2", "workers = \"auto\"");
        let text = format!(
            "{auto}[admin]\nlisten = \"127.0.0.1:2\"\n[log]\naccess = \"x\"\n\
             [quic]\ngro = false\nsteering = false\n"
        );
        let changed = squall_config::parse(&text, "c").unwrap();
        assert_eq!(
            restart_only_changes(&running, &changed, 8),
            [
                "server.workers (running 2, file says 8)",
                "admin.listen (running none, file says 127.0.0.1:2)",
                "log.access (running none, file says x)",
                "quic.gro (running true, file says false)",
                "quic.steering (running true, file says false)",
            ]
        );
        // "auto" on a host of 2 cores is the 2 workers running.
        assert!(
            restart_only_changes(&running, &squall_config::parse(&auto, "d").unwrap(), 2)
                .is_empty()
        );
    }

    #[test]
    fn reload_finds_the_systemd_socket_by_default() {
        let run = Path::new("/run/squall/control.sock");
        let env = Some(OsStr::new("/run/x:/run/y"));
        assert_eq!(
            default_socket(env, true).as_deref(),
            Some(Path::new("/run/x/control.sock"))
        );
        assert_eq!(default_socket(None, true).as_deref(), Some(run));
        assert_eq!(
            default_socket(Some(OsStr::new("")), true).as_deref(),
            Some(run)
        );
        assert_eq!(default_socket(None, false), None);
    }

    #[test]
    fn the_wire_form_starts_with_the_status() {
        assert_eq!(Outcome::Applied.to_wire(), "applied\n");
        let restart = Outcome::RestartNeeded(vec!["a".into(), "b".into()]);
        assert_eq!(restart.to_wire(), "restart-needed\na\nb\n");
        assert_eq!(
            Outcome::Refused("x\ny\n".into()).to_wire(),
            "refused\nx\ny\n"
        );
    }
}
