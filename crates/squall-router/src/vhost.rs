//! One vhost's routes, compiled, and the order in which a request tries them.
//!
//! CONFIG.md's order: exact routes first, then regex and template routes in file order, then
//! prefix routes longest first. Each kind has its own index (hash map, segment trie, literal
//! index, radix tree); within the order, every candidate's conditions are checked and a failing
//! one passes the request on to the next candidate rather than ending the search.

use std::collections::HashMap;

use http::{HeaderName, HeaderValue, Method};
use regex::Regex;

use crate::error::{BuildError, PatternError};
use crate::hash::FxBuild;
use crate::params::{PARAMS_MAX, Params};
use crate::radix::RadixTree;
use crate::regex_index::{self, RegexIndex, RegexIndexBuilder};
use crate::smallbuf::SmallBuf;
use crate::template::{Template, TemplateTrie};
use crate::{Pattern, RouteRequest, RouteSpec};

/// The most routes one vhost may have. Route indices are `u32` in the indexes; a million is far
/// beyond any config and keeps a mistaken generated one from eating the memory.
pub(crate) const ROUTES_PER_VHOST_MAX: usize = 1 << 20;

pub(crate) struct Vhost<A> {
    routes: Vec<Route<A>>,
    /// Path -> exact routes on it, in file order (several when their conditions differ).
    exact: HashMap<Box<str>, Vec<u32>, FxBuild>,
    templates: TemplateTrie,
    regexes: RegexIndex,
    /// Prefix -> prefix routes with it, in file order.
    prefixes: RadixTree<Vec<u32>>,
}

struct Route<A> {
    action: A,
    conditions: Conditions,
    matcher: Matcher,
}

/// What a route needs at match time beyond its index entry.
enum Matcher {
    /// Exact and prefix routes: the index entry is the whole match.
    Indexed,
    /// Kept to extract the winner's captures.
    Template(Template),
    /// The index only says the regex may match; it still runs.
    Regex(RegexRoute),
}

/// Request conditions of one route (Tempesta's http_chain rules, nginx's `if`s).
struct Conditions {
    methods: Option<Box<[Method]>>,
    headers: Box<[(HeaderName, HeaderValue)]>,
}

/// A route's index, action and captures, as [`crate::Router::route`] returns them.
pub(crate) type Hit<'r, A> = (usize, &'r A, Params<'r>);

impl<A> Vhost<A> {
    /// Compiles the routes of the vhost at `vhost` (its index, for errors).
    pub(crate) fn new(vhost: usize, specs: Vec<RouteSpec<A>>) -> Result<Self, BuildError> {
        if specs.len() > ROUTES_PER_VHOST_MAX {
            let (count, max) = (specs.len(), ROUTES_PER_VHOST_MAX);
            return Err(BuildError::TooManyRoutes { vhost, count, max });
        }
        let mut exact: HashMap<Box<str>, Vec<u32>, FxBuild> = HashMap::default();
        let mut templates = TemplateTrie::new();
        let mut regexes = RegexIndexBuilder::default();
        let mut prefixes = RadixTree::new();
        let mut routes = Vec::with_capacity(specs.len());
        for (index, spec) in specs.into_iter().enumerate() {
            let fail = |source| BuildError::Pattern {
                vhost,
                route: index,
                source,
            };
            let id = index as u32; // fits: at most ROUTES_PER_VHOST_MAX routes, checked above
            let matcher = match spec.pattern {
                Pattern::Exact(path) => {
                    exact.entry(path.into()).or_default().push(id);
                    Matcher::Indexed
                }
                Pattern::Prefix(prefix) => {
                    prefixes
                        .entry(prefix.as_bytes())
                        .get_or_insert_with(Vec::new)
                        .push(id);
                    Matcher::Indexed
                }
                Pattern::Template(text) => {
                    let template = Template::parse(&text).map_err(|reason| {
                        fail(PatternError::Template {
                            template: text,
                            reason,
                        })
                    })?;
                    templates.insert(&template, id);
                    Matcher::Template(template)
                }
                Pattern::Regex(source) => {
                    let route = RegexRoute::new(&source).map_err(fail)?;
                    regexes.add(id, regex_index::keys(&source));
                    Matcher::Regex(route)
                }
            };
            let conditions = Conditions {
                methods: spec.methods.map(Vec::into_boxed_slice),
                headers: spec.headers.into_boxed_slice(),
            };
            routes.push(Route {
                action: spec.action,
                conditions,
                matcher,
            });
        }
        let regexes = regexes.build(|id| match &routes[id as usize].matcher {
            Matcher::Regex(route) => route.regex.as_str().to_owned(),
            _ => String::new(), // unreachable: only regex routes are in the regex index
        });
        Ok(Vhost {
            routes,
            exact,
            templates,
            regexes,
            prefixes,
        })
    }

    pub(crate) fn route_count(&self) -> usize {
        self.routes.len()
    }

    /// The first route in CONFIG.md's order whose pattern and conditions match.
    pub(crate) fn route<'r>(&'r self, req: &RouteRequest<'_>) -> Option<Hit<'r, A>> {
        self.route_exact(req)
            .or_else(|| self.route_in_file_order(req))
            .or_else(|| self.route_prefix(req))
    }

    fn route_exact<'r>(&'r self, req: &RouteRequest<'_>) -> Option<Hit<'r, A>> {
        if self.exact.is_empty() {
            return None;
        }
        let ids = self.exact.get(req.path)?;
        self.first_admitted(ids, req)
    }

    /// Regex and template routes, interleaved in file order: both indexes hand over candidate
    /// route indices, which are sorted and tried in turn.
    fn route_in_file_order<'r>(&'r self, req: &RouteRequest<'_>) -> Option<Hit<'r, A>> {
        if self.templates.is_empty() && self.regexes.is_empty() {
            return None;
        }
        let mut candidates = SmallBuf::new();
        self.templates.collect(req.path, &mut candidates);
        self.regexes.collect(req.path, &mut candidates);
        candidates.sort_dedup();
        candidates.as_slice().iter().find_map(|&id| {
            let route = &self.routes[id as usize];
            if !route.conditions.admit(req) {
                return None;
            }
            let params = match &route.matcher {
                Matcher::Template(template) => template.captures(req.path),
                Matcher::Regex(regex) => regex.captures(req.path)?,
                Matcher::Indexed => return None, // unreachable: not in these indexes
            };
            Some((id as usize, &route.action, params))
        })
    }

    fn route_prefix<'r>(&'r self, req: &RouteRequest<'_>) -> Option<Hit<'r, A>> {
        if self.prefixes.is_empty() {
            return None;
        }
        self.prefixes
            .find_longest_first(req.path.as_bytes(), |ids| self.first_admitted(ids, req))
    }

    /// The first of `ids` (already matched by path) whose conditions admit the request.
    fn first_admitted<'r>(&'r self, ids: &[u32], req: &RouteRequest<'_>) -> Option<Hit<'r, A>> {
        ids.iter().find_map(|&id| {
            let route = &self.routes[id as usize];
            route
                .conditions
                .admit(req)
                .then_some((id as usize, &route.action, Params::EMPTY))
        })
    }
}

impl Conditions {
    fn admit(&self, req: &RouteRequest<'_>) -> bool {
        self.methods
            .as_ref()
            .is_none_or(|methods| methods.contains(req.method))
            && self
                .headers
                .iter()
                .all(|(name, value)| req.headers.has_value(name, value))
    }
}

/// A regex route's compiled pattern and its named groups.
struct RegexRoute {
    regex: Regex,
    /// Named groups in pattern order, and their group indices: what [`Params`] reports.
    names: Box<[Box<str>]>,
    groups: Box<[usize]>,
}

impl RegexRoute {
    /// Compiles with the `regex` defaults (the syntax `regex_index::keys` assumes).
    fn new(source: &str) -> Result<Self, PatternError> {
        let regex = Regex::new(source).map_err(|e| PatternError::Regex(Box::new(e)))?;
        let (groups, names): (Vec<usize>, Vec<Box<str>>) = regex
            .capture_names()
            .enumerate()
            .filter_map(|(group, name)| Some((group, name?.into())))
            .unzip();
        if names.len() > PARAMS_MAX {
            return Err(PatternError::TooManyNamedGroups { max: PARAMS_MAX });
        }
        Ok(RegexRoute {
            regex,
            names: names.into(),
            groups: groups.into(),
        })
    }

    /// `None` if the regex does not match `path`, else its named groups. Only a regex with
    /// named groups pays for `captures` (which allocates the group positions).
    fn captures(&self, path: &str) -> Option<Params<'_>> {
        if self.names.is_empty() {
            return self.regex.is_match(path).then_some(Params::EMPTY);
        }
        let captures = self.regex.captures(path)?;
        let mut params = Params::new(&self.names);
        for (index, &group) in self.groups.iter().enumerate() {
            if let Some(m) = captures.get(group) {
                params.set(index, m.range());
            }
        }
        Some(params)
    }
}
