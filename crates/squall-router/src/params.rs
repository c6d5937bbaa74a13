//! Captured parameters of a match: the route's parameter names, borrowed from the router, and
//! each value's byte range in the request path. A fixed inline array of ranges, so a match
//! allocates nothing and `Matched` stays small enough to return by value cheaply; the router
//! refuses at build time a template or regex with more parameters than fit.

use std::ops::Range;

/// The most parameters one route may capture (template `{name}`s or regex named groups). Eight
/// covers any sane URL scheme and keeps [`Params`] under 100 bytes.
pub const PARAMS_MAX: usize = 8;

/// One capture: the parameter's name and where its value lies in the request path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param<'r> {
    pub name: &'r str,
    start: u32,
    end: u32,
}

impl Param<'_> {
    /// The value's byte range in the path the request was routed with.
    pub fn range(&self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    /// The value, cut from the path the request was routed with (`""` if given another path
    /// too short for the range).
    pub fn value<'p>(&self, path: &'p str) -> &'p str {
        path.get(self.range()).unwrap_or("")
    }
}

/// The captures of one match, in the order the parameters appear in the pattern. A regex named
/// group that took no part in the match is absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params<'r> {
    /// Every parameter name of the matched route; `spans[i]` belongs to `names[i]`.
    names: &'r [Box<str>],
    spans: [Span; PARAMS_MAX],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

/// A span for a parameter without a value (`start > end` never happens for a real range).
const ABSENT: Span = Span {
    start: u32::MAX,
    end: 0,
};

impl<'r> Params<'r> {
    pub(crate) const EMPTY: Params<'static> = Params {
        names: &[],
        spans: [ABSENT; PARAMS_MAX],
    };

    /// No values yet for a route with these parameter names (at most `PARAMS_MAX`, checked
    /// when the route was built).
    pub(crate) fn new(names: &'r [Box<str>]) -> Self {
        debug_assert!(
            names.len() <= PARAMS_MAX,
            "build step bounds parameters per route"
        );
        Params {
            names,
            spans: [ABSENT; PARAMS_MAX],
        }
    }

    /// Records the value of parameter `index`. Paths are shorter than 4 GiB (the proxy's URI
    /// limit is far lower), so the offsets fit `u32`.
    pub(crate) fn set(&mut self, index: usize, range: Range<usize>) {
        debug_assert!(
            u32::try_from(range.end).is_ok(),
            "paths are far shorter than 4 GiB"
        );
        if let Some(span) = self.spans.get_mut(index) {
            *span = Span {
                start: range.start as u32,
                end: range.end as u32,
            };
        }
    }

    /// How many parameters have a value.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    pub fn iter(&self) -> impl Iterator<Item = Param<'r>> + '_ {
        self.names
            .iter()
            .zip(&self.spans)
            .filter(|(_, s)| s.start <= s.end)
            .map(|(name, s)| Param {
                name,
                start: s.start,
                end: s.end,
            })
    }

    /// The byte range of the parameter called `name` in the routed path.
    pub fn get(&self, name: &str) -> Option<Range<usize>> {
        self.iter().find(|p| p.name == name).map(|p| p.range())
    }

    /// The value of the parameter called `name`, cut from `path` (the path that was routed).
    pub fn value<'p>(&self, name: &str, path: &'p str) -> Option<&'p str> {
        self.get(name).and_then(|r| path.get(r))
    }
}

impl Default for Params<'_> {
    fn default() -> Self {
        Params::EMPTY
    }
}
