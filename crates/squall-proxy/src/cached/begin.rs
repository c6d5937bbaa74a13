//! Where a request on a cached route goes before any exchange exists, and where a request that
//! waited for another's fetch goes once woken: pure functions of the store, the in-flight
//! table and the wall clock, whose answer the driver carries out (serve, 504, park, or one
//! or two [`Fetch`]es, each the start of a [`super::CachedExchange`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{Method, header};
use squall_cache::{
    Admission, CLIENT_CONDITIONALS, CacheKey, Decision, Entry, Fill, FillLimits, FillRequest,
    InFlight, Join, Lookup, RequestCacheControl, ResponseRules, Served, Store, Ticket,
};
use squall_h1::RequestHead;

/// A request head's fields as the cache reads them, without building a map.
pub struct CacheFields<'a>(pub &'a squall_h1::Fields);

impl squall_cache::RequestFields for CacheFields<'_> {
    fn values<'a>(&'a self, name: &'a http::HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0.get_all(name).map(|v| v.as_bytes())
    }
}

/// What a cached route's requests are looked up and filled under: the store, the fill's
/// limits and response rules, and the route's settings.
#[derive(Clone, Debug)]
pub struct CachedRoute {
    pub store: Arc<Store>,
    pub limits: FillLimits,
    pub rules: ResponseRules,
    /// `request_no_cache = "ignore"`: lookups go without the client's reload directives.
    pub ignore_reload: bool,
    /// `cache.hit_for_pass`: how long a key whose response could never be stored passes
    /// (zero: never).
    pub hit_for_pass: Duration,
}

/// A fetch from the origin through a fill: the request as it goes to the origin (its
/// conditionals those of the stale entry when revalidating), and the fill that watches it.
#[derive(Debug)]
pub struct Fetch {
    pub head: RequestHead,
    pub plan: FillPlan,
}

/// The cache side of a [`Fetch`], which [`super::CachedExchange::new`] takes.
#[derive(Debug)]
pub struct FillPlan {
    pub(super) fill: Fill,
    /// The fetch answers nobody: a revalidation in the background, or a ranged miss's whole
    /// object.
    pub(super) background: bool,
    pub(super) hit_for_pass: Duration,
}

impl FillPlan {
    /// Whether the fetch answers nobody.
    pub fn background(&self) -> bool {
        self.background
    }
}

/// What the driver does with the request itself.
#[derive(Debug)]
pub enum Answer {
    /// Not the cache's (a method the lookup policy bypasses): forward as on any route.
    Bypass(RequestHead),
    /// Answer from `entry`, labelled `served`, as `head` asks (its conditionals, its range).
    Serve {
        head: RequestHead,
        entry: Arc<Entry>,
        served: Served,
    },
    /// 504 without asking the origin (only-if-cached, RFC 9111 §5.2.1.7).
    GatewayTimeout(RequestHead),
    /// Park behind the key's fetch until woken, then [`after_wait`]; `fetched` when that
    /// fetch is this request's own (a ranged miss).
    Park {
        head: RequestHead,
        key: CacheKey,
        fetched: bool,
    },
    /// Go to the origin.
    Fetch(Box<Fetch>),
}

/// The counter a decision moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Nothing,
    Hit,
    Stale,
    Miss,
    /// A miss on a key that passes (hit-for-pass).
    Pass,
    Coalesced,
}

/// A request's way on a cached route: what answers it, and a fetch that answers nobody to
/// start beside it (a stale entry's revalidation, a ranged miss's whole object).
#[derive(Debug)]
pub struct Begun {
    pub answer: Answer,
    pub background: Option<Box<Fetch>>,
    pub count: Count,
}

impl Begun {
    fn only(answer: Answer, count: Count) -> Begun {
        Begun {
            answer,
            background: None,
            count,
        }
    }

    fn serve(head: RequestHead, entry: Arc<Entry>, served: Served, count: Count) -> Begun {
        Begun::only(
            Answer::Serve {
                head,
                entry,
                served,
            },
            count,
        )
    }
}

impl CachedRoute {
    /// The request directives a lookup goes by.
    pub fn control(&self, control: RequestCacheControl) -> RequestCacheControl {
        if self.ignore_reload {
            control.without_reload()
        } else {
            control
        }
    }

    /// The fetch of `key` for `head` as the client sent it: revalidating `stale` when it has
    /// validators, leading the key when it has a `ticket`.
    pub fn fetch(
        &self,
        mut head: RequestHead,
        key: CacheKey,
        stale: Option<Arc<Entry>>,
        ticket: Option<Ticket>,
        wall: SystemTime,
    ) -> Box<Fetch> {
        let request = FillRequest {
            key,
            method: head.method.clone(),
            headers: head.headers.to_header_map(),
        };
        let fill = Fill::new(
            self.store.clone(),
            self.limits,
            request,
            stale,
            ticket,
            wall,
        )
        .with_rules(self.rules.clone());
        origin_conditionals(&fill, &mut head.headers);
        Box::new(Fetch {
            head,
            plan: FillPlan {
                fill,
                background: false,
                hit_for_pass: self.hit_for_pass,
            },
        })
    }

    /// The fetch of `key` for the store alone, leading the key with `ticket`: the
    /// revalidation of `stale` (RFC 5861 §3), or the whole object a range was asked of. It
    /// asks as a plain GET, with the stale entry's validators if any: the client's
    /// conditionals and range concern its own answer, and a HEAD would bring no body to store.
    pub fn background(
        &self,
        head: &RequestHead,
        key: CacheKey,
        stale: Option<Arc<Entry>>,
        ticket: Ticket,
        wall: SystemTime,
    ) -> Box<Fetch> {
        let mut head = head.clone();
        head.method = Method::GET;
        for name in CLIENT_CONDITIONALS.into_iter().chain([header::RANGE]) {
            head.headers.remove(name);
        }
        head.expect_continue = false;
        let mut fetch = self.fetch(head, key, stale, Some(ticket), wall);
        fetch.plan.background = true;
        fetch
    }
}

/// Where `head` goes on a cached route at `wall`: `borrowed` is the `local_ttl` of a key
/// another node owns (its local copy is used only that long after it arrived); `waiter`
/// stands for the request in the in-flight table if it parks.
pub fn begin<W: Clone + Send + 'static>(
    route: &CachedRoute,
    inflight: &InFlight<W>,
    head: RequestHead,
    key: CacheKey,
    borrowed: Option<Duration>,
    waiter: W,
    wall: SystemTime,
) -> Begun {
    let fields = CacheFields(&head.headers);
    let control = match squall_cache::lookup_policy(&head.method, &fields) {
        Lookup::Use(control) => route.control(control),
        Lookup::Bypass => return Begun::only(Answer::Bypass(head), Count::Nothing),
    };
    let entry = route.store.lookup(&key, &fields);
    let entry = entry.filter(|e| borrowed.is_none_or(|ttl| borrowed_fresh(e, ttl, wall)));
    let decision = squall_cache::decide(entry, &control, wall);
    match squall_cache::admit(inflight, &key, decision, waiter.clone(), wall) {
        Admission::Serve(entry, served) => {
            let count = if served == Served::Stale {
                Count::Stale
            } else {
                Count::Hit
            };
            Begun::serve(head, entry, served, count)
        }
        Admission::GatewayTimeout => Begun::only(Answer::GatewayTimeout(head), Count::Nothing),
        Admission::Wait => {
            let answer = Answer::Park {
                head,
                key,
                fetched: false,
            };
            Begun::only(answer, Count::Coalesced)
        }
        Admission::Fetch {
            stale,
            ticket: Some(ticket),
        } if is_ranged(&head) => {
            let background = route.background(&head, key.clone(), stale, ticket, wall);
            ranged_miss(route, inflight, head, key, background, waiter, wall)
        }
        Admission::Fetch { stale, ticket } => {
            let fetch = route.fetch(head, key, stale, ticket, wall);
            Begun::only(Answer::Fetch(fetch), Count::Miss)
        }
        // The key's last response was not storable: straight to the origin, coalescing with
        // nobody (what comes back may still be stored).
        Admission::Pass { stale } => {
            let fetch = route.fetch(head, key, stale, None, wall);
            Begun::only(Answer::Fetch(fetch), Count::Pass)
        }
        Admission::ServeAndRevalidate { entry, ticket } => {
            let background = route.background(&head, key, Some(entry.clone()), ticket, wall);
            let served = Served::Stale;
            Begun {
                answer: Answer::Serve {
                    head,
                    entry,
                    served,
                },
                background: Some(background),
                count: Count::Stale,
            }
        }
    }
}

/// A range of an object not stored: the whole object is fetched once, in the `background`
/// (RFC 9110 §14.2 lets the cache choose), and the request parks behind that fetch as its
/// own follower, to be served from the entry; one too large to store is asked for by range
/// after all, on wake-up. If it cannot follow (the key has all the followers it may, or
/// passes), it goes to the origin with its range now.
fn ranged_miss<W: Clone + Send + 'static>(
    route: &CachedRoute,
    inflight: &InFlight<W>,
    head: RequestHead,
    key: CacheKey,
    background: Box<Fetch>,
    waiter: W,
    wall: SystemTime,
) -> Begun {
    let answer = match inflight.join(&key, waiter, wall) {
        Join::Follower => Answer::Park {
            head,
            key,
            fetched: true,
        },
        _ => Answer::Fetch(route.fetch(head, key, None, None, wall)),
    };
    Begun {
        answer,
        background: Some(background),
        count: Count::Miss,
    }
}

/// A request parked since `since` behind the fetch of `key` was woken (that fetch ended, or
/// its wait ran out): serve what is stored now, or go to the origin with no ticket and no
/// stale entry. An entry stored since it parked answers its `no-cache` too, so a reload storm
/// makes one origin request, not one each. `fetched`: the fetch was its own (a ranged miss),
/// whose entry is its `MISS`, already counted.
pub fn after_wait(
    route: &CachedRoute,
    head: RequestHead,
    key: CacheKey,
    since: SystemTime,
    fetched: bool,
    wall: SystemTime,
) -> Begun {
    let fields = CacheFields(&head.headers);
    let control = route.control(squall_cache::request_cache_control(&fields));
    let entry = route.store.lookup(&key, &fields);
    match squall_cache::decide_after_wait(entry, &control, wall, since) {
        Decision::Hit(entry) => {
            let (served, count) = if fetched {
                (Served::Miss, Count::Nothing)
            } else {
                (Served::Hit, Count::Hit)
            };
            Begun::serve(head, entry, served, count)
        }
        _ => {
            let fetch = route.fetch(head, key, None, None, wall);
            Begun::only(Answer::Fetch(fetch), Count::Nothing)
        }
    }
}

/// The fill's rewrite of the conditionals of the request to the origin
/// ([`Fill::origin_request_headers`]), applied to the head's fields.
fn origin_conditionals(fill: &Fill, headers: &mut squall_h1::Fields) {
    let Some(validators) = fill.origin_conditionals() else {
        return;
    };
    for name in CLIENT_CONDITIONALS {
        headers.remove(name);
    }
    for (name, value) in validators {
        headers.insert(name, value);
    }
}

/// A GET with a Range: on a miss, the whole object is fetched for the store and the range
/// served from it.
fn is_ranged(head: &RequestHead) -> bool {
    head.method == Method::GET && head.headers.contains_key(header::RANGE)
}

/// Whether a copy of another node's object, which arrived at `entry`'s response time, is
/// still within `local_ttl`.
fn borrowed_fresh(entry: &Entry, local_ttl: Duration, wall: SystemTime) -> bool {
    let age = wall.duration_since(entry.freshness.response_time);
    age.is_ok_and(|age| age <= local_ttl)
}
