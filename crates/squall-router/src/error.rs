//! Why a router could not be built. Every error names the vhost (and route) index in spec order,
//! which the proxy maps back to the config file's line and column.

/// A spec the router refuses. Only at build time: matching never fails.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("vhost {vhost}: no hosts")]
    NoHosts { vhost: usize },
    #[error("vhost {vhost}: bad host {host:?}: {reason}")]
    BadHost {
        vhost: usize,
        host: String,
        reason: &'static str,
    },
    /// The same host (after lower-casing and dropping a trailing dot) in two places; `first` is
    /// the vhost that listed it first (equal to `vhost` for a repeat within one vhost).
    #[error("vhost {vhost}: duplicate host {host:?} (already listed by vhost {first})")]
    DuplicateHost {
        vhost: usize,
        host: String,
        first: usize,
    },
    #[error("vhost {vhost}: {count} routes, more than the limit of {max}")]
    TooManyRoutes {
        vhost: usize,
        count: usize,
        max: usize,
    },
    #[error("vhost {vhost} route {route}: {source}")]
    Pattern {
        vhost: usize,
        route: usize,
        #[source]
        source: PatternError,
    },
}

impl BuildError {
    /// The vhost at fault, as an index into the spec list.
    pub fn vhost(&self) -> usize {
        match self {
            BuildError::NoHosts { vhost }
            | BuildError::BadHost { vhost, .. }
            | BuildError::DuplicateHost { vhost, .. }
            | BuildError::TooManyRoutes { vhost, .. }
            | BuildError::Pattern { vhost, .. } => *vhost,
        }
    }

    /// The route at fault within its vhost, when one route is.
    pub fn route(&self) -> Option<usize> {
        match self {
            BuildError::Pattern { route, .. } => Some(*route),
            _ => None,
        }
    }
}

/// Why one route's pattern is bad.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// Boxed: `regex::Error` carries the whole pattern and a caret diagram.
    #[error("bad regex: {0}")]
    Regex(#[from] Box<regex::Error>),
    #[error("regex has more than {max} named groups")]
    TooManyNamedGroups { max: usize },
    #[error("bad template {template:?}: {reason}")]
    Template { template: String, reason: String },
}
