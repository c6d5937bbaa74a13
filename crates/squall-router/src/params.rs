//! Captured parameters of a match: names borrowed from the router, values as byte ranges into the
//! request path. A fixed inline array, so a match allocates nothing; the router refuses at build
//! time a template or regex with more parameters than fit.

use std::ops::Range;

/// The most parameters one route may capture (template `{name}`s or regex named groups). Eight
/// covers any sane URL scheme and keeps [`Params`] small enough to return by value.
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

    /// The value, cut from the path the request was routed with.
    pub fn value<'p>(&self, path: &'p str) -> &'p str {
        &path[self.range()]
    }
}

/// The captures of one match, in the order they appear in the pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params<'r> {
    len: u8,
    items: [Param<'r>; PARAMS_MAX],
}

const _: () = assert!(PARAMS_MAX <= u8::MAX as usize);

impl<'r> Params<'r> {
    pub(crate) const EMPTY: Params<'static> =
        Params { len: 0, items: [Param { name: "", start: 0, end: 0 }; PARAMS_MAX] };

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &Param<'r>> {
        self.items[..self.len()].iter()
    }

    /// The byte range of the parameter called `name` in the routed path.
    pub fn get(&self, name: &str) -> Option<Range<usize>> {
        self.iter().find(|p| p.name == name).map(Param::range)
    }

    /// The value of the parameter called `name`, cut from `path` (the path that was routed).
    pub fn value<'p>(&self, name: &str, path: &'p str) -> Option<&'p str> {
        self.get(name).map(|r| &path[r])
    }

    /// Appends a capture. The build step proved every route captures at most `PARAMS_MAX`
    /// parameters and paths are shorter than 4 GiB (the proxy's URI limit is far lower), so the
    /// debug assertions only guard that proof.
    pub(crate) fn push(&mut self, name: &'r str, range: Range<usize>) {
        debug_assert!(self.len() < PARAMS_MAX, "build step bounds captures per route");
        debug_assert!(u32::try_from(range.end).is_ok(), "paths are far shorter than 4 GiB");
        let len = self.len();
        if let Some(slot) = self.items.get_mut(len) {
            *slot = Param { name, start: range.start as u32, end: range.end as u32 };
            self.len += 1;
        }
    }
}

impl Default for Params<'_> {
    fn default() -> Self {
        Params::EMPTY
    }
}
