//! What every answered request leaves behind: its access log line, its response counters by
//! protocol and route, and its time. Written from one place, [`record`], which only the
//! downstream's `log_answer` and `log_bad_request` call: every answer, the protocol files'
//! own refusals too, ends through them.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::access_log;
use crate::metrics::WorkerCounters;

use super::super::conn::Conn;
use crate::worker::downstream::proto::Proto;

/// What every answered request is recorded in: the access log, if there is one, and the
/// per-route counters of the config in force.
pub(in crate::worker) struct RequestLog {
    pub access: Option<access_log::Batch>,
    pub routes: Arc<crate::metrics::RouteCounters>,
    pub worker: usize,
    /// `server.real_ip` in force: the logged client of a request (see `real_ip.rs`).
    pub real_ip: Option<Arc<squall_config::RealIp>>,
}

/// Records the answer to `head` (`None`: a request whose head could not be read) on `conn`.
fn record(
    log: &mut RequestLog,
    conn: &mut Conn,
    head: Option<&squall_h1::RequestHead>,
    status: http::StatusCode,
    bytes: usize,
    now: Instant,
    counters: &WorkerCounters,
) {
    let started = if head.is_some() {
        conn.request_started
    } else {
        conn.head_started.unwrap_or(now)
    };
    let elapsed = now.saturating_duration_since(started);
    counters.request_duration.observe(elapsed);
    match conn.proto {
        Proto::H2(_) => counters.requests_h2.inc(),
        Proto::H3(_) => counters.requests_h3.inc(),
        Proto::H1(_) | Proto::Undecided => counters.requests_h1.inc(),
    }
    let note = std::mem::take(&mut conn.log_note);
    if let Some(route) = note.route {
        log.routes.count(log.worker, route, status);
    }
    let Some(access) = &mut log.access else {
        return;
    };
    let peer = match (head, &log.real_ip) {
        (Some(head), Some(real_ip)) => {
            crate::real_ip::client(Some(real_ip), conn.peer, &head.headers)
        }
        _ => conn.peer,
    };
    let entry = access_log::Entry {
        peer,
        head,
        status: status.as_u16(),
        bytes,
        elapsed,
        upstream: note.upstream,
        cache: note.cache,
        request_id: note.request_id.unwrap_or_else(crate::request_id::next),
    };
    access.push(&entry, SystemTime::now(), counters);
}

impl super::Downstream<'_> {
    /// Counts the answer to `head` on connection `index` by its status class and writes its
    /// log line: how every answer ends.
    pub fn log_answer(
        &mut self,
        index: usize,
        head: Option<&squall_h1::RequestHead>,
        status: http::StatusCode,
        sent: usize,
    ) {
        self.log_counted(index, head, status, sent, WorkerCounters::count_response);
    }

    /// As [`Self::log_answer`], for a request refused as malformed or over a limit: counted
    /// as a bad request and under its refusal status as well.
    pub fn log_bad_request(
        &mut self,
        index: usize,
        head: Option<&squall_h1::RequestHead>,
        status: http::StatusCode,
        sent: usize,
    ) {
        self.log_counted(index, head, status, sent, WorkerCounters::count_bad_request);
    }

    /// Counts the answer with `count`, then writes its log line.
    fn log_counted(
        &mut self,
        index: usize,
        head: Option<&squall_h1::RequestHead>,
        status: http::StatusCode,
        sent: usize,
        count: fn(&WorkerCounters, http::StatusCode),
    ) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        count(self.counters, status);
        record(self.log, conn, head, status, sent, self.now, self.counters);
    }
}
