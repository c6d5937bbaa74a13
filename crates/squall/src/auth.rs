//! HTTP Basic authentication on a route (RFC 7617): the users file, the credential cache and
//! the verifier threads.
//!
//! A bcrypt or argon2 verification takes tens of milliseconds on purpose; done on a worker it
//! would stall every connection the worker serves. So:
//! - **credential cache**: an `Authorization` value that verified once is remembered, keyed by
//!   a 128-bit SipHash of the whole value under per-process random keys (never the password),
//!   in two bounded generations: a lookup that hits the older one moves the entry forward, and
//!   when the newer one is full the older is dropped. A browser resending the same header
//!   costs one hash and one lookup. The cache lives as long as the users file's table: a
//!   reload reads the file again and starts an empty cache, so a removed user is out at once.
//! - **verifier threads**: a miss is verified off the worker by a small pool behind a bounded
//!   queue; the request waits (parked) and the worker is woken with the verdict through its
//!   control channel, as a request waiting for another's cache fetch is. A full queue is
//!   answered 503 with `Retry-After`.
//! - **inline budget**: a request whose body follows its head cannot wait parked (its body is
//!   being read; see docs/ARCHITECTURE.md), so it is verified on the worker, within a budget of
//!   [`INLINE_BUDGET`] of verification per second per worker; past it, 503 with `Retry-After`.
//!   A browser's POST usually carries the credentials its GETs already verified: a cache hit.
//!
//! An unknown user is verified against another user's hash, so that the time of a refusal
//! does not tell which users exist. Failed attempts per client address are limited by the
//! caller (`limits.auth_failures_max`).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use squall_config::{AuthBasic, Diagnostic, HashScheme, User};

/// Verifier threads: verification is CPU work, and a few threads keep it from taking over the
/// cores the workers are pinned to.
const VERIFIER_THREADS: usize = 2;
/// Verifications waiting for a thread, process-wide; beyond it requests get 503.
const QUEUE_MAX: usize = 256;
/// Entries of one generation of a route's credential cache.
const CACHE_GENERATION_MAX: usize = 4096;
/// Verification a worker may do inline (requests with a body) per second.
pub const INLINE_BUDGET: Duration = Duration::from_millis(50);

/// A route's `auth_basic`: its users and its credential cache.
pub struct RouteAuth {
    /// `Basic realm="...", charset="UTF-8"`, the `WWW-Authenticate` value of a 401.
    pub challenge: Bytes,
    users: HashMap<String, User>,
    /// The hash an unknown user's password is checked against (and always fails).
    decoy: Option<User>,
    verified: Verified,
}

/// The credentials of a request that the cache does not know.
pub struct Credentials {
    key: u128,
    user: String,
    password: Vec<u8>,
}

/// What a request's `Authorization` field comes to before any slow work.
pub enum Check {
    /// No Basic credentials (no field, another scheme, or not decodable): 401.
    Missing,
    /// Verified before.
    Cached,
    /// To be verified.
    Verify(Credentials),
}

impl RouteAuth {
    /// Reads `auth.users_file`; every refused line is a `FILE:LINE: message` diagnostic.
    pub fn load(auth: &AuthBasic) -> Result<RouteAuth, Vec<Diagnostic>> {
        let path = &auth.users_file;
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![Diagnostic::whole_file(
                &file,
                format!("cannot read the auth_basic users_file: {e}"),
            )]
        })?;
        let users = squall_config::parse_users(&text).map_err(|problems| {
            let diagnostic = |(line, message)| Diagnostic {
                file: file.clone(),
                line,
                col: 0,
                message,
            };
            problems.into_iter().map(diagnostic).collect::<Vec<_>>()
        })?;
        Ok(RouteAuth::new(&auth.realm, users))
    }

    pub fn new(realm: &str, users: Vec<User>) -> RouteAuth {
        let challenge = format!("Basic realm=\"{realm}\", charset=\"UTF-8\"");
        RouteAuth {
            challenge: Bytes::from(challenge),
            decoy: users.first().cloned(),
            users: users.into_iter().map(|u| (u.name.clone(), u)).collect(),
            verified: Verified::new(),
        }
    }

    /// The quick part: decode the field and look the cache up.
    pub fn check(&self, authorization: Option<&[u8]>) -> Check {
        let Some(value) = authorization else {
            return Check::Missing;
        };
        let key = self.verified.key(value);
        if self.verified.contains(key) {
            return Check::Cached;
        }
        match basic_credentials(value) {
            Some((user, password)) => Check::Verify(Credentials {
                key,
                user,
                password,
            }),
            None => Check::Missing,
        }
    }

    /// The slow part: bcrypt or argon2 (constant time within the crates). A success is
    /// remembered.
    pub fn verify(&self, credentials: &Credentials) -> bool {
        let (user, known) = match self.users.get(&credentials.user) {
            Some(user) => (user, true),
            None => match &self.decoy {
                Some(decoy) => (decoy, false),
                None => return false,
            },
        };
        let matched = verify_hash(user, &credentials.password);
        let ok = matched && known;
        if ok {
            self.verified.insert(credentials.key);
        }
        ok
    }
}

/// `Basic <base64(user:password)>` (RFC 7617 §2; the scheme name is case-insensitive). The
/// user-id cannot contain ':', the password can.
fn basic_credentials(value: &[u8]) -> Option<(String, Vec<u8>)> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let token = rest.trim_ascii();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

fn verify_hash(user: &User, password: &[u8]) -> bool {
    match user.scheme {
        HashScheme::Bcrypt => bcrypt::verify(password, &user.hash).unwrap_or(false),
        HashScheme::Argon2 => {
            use argon2::password_hash::{PasswordHash, PasswordVerifier};
            PasswordHash::new(&user.hash).is_ok_and(|hash| {
                argon2::Argon2::default()
                    .verify_password(password, &hash)
                    .is_ok()
            })
        }
    }
}

/// The bounded set of verified `Authorization` values, by keyed hash, in two generations.
struct Verified {
    keys: (RandomState, RandomState),
    generations: Mutex<(HashSet<u128>, HashSet<u128>)>,
}

impl Verified {
    fn new() -> Verified {
        Verified {
            keys: (RandomState::new(), RandomState::new()),
            generations: Mutex::new((HashSet::new(), HashSet::new())),
        }
    }

    fn key(&self, value: &[u8]) -> u128 {
        let (a, b) = (self.keys.0.hash_one(value), self.keys.1.hash_one(value));
        (u128::from(a) << 64) | u128::from(b)
    }

    fn contains(&self, key: u128) -> bool {
        let mut generations = self.lock();
        if generations.0.contains(&key) {
            return true;
        }
        if generations.1.remove(&key) {
            Self::push(&mut generations, key);
            return true;
        }
        false
    }

    fn insert(&self, key: u128) {
        Self::push(&mut self.lock(), key);
    }

    fn push(generations: &mut (HashSet<u128>, HashSet<u128>), key: u128) {
        if generations.0.len() >= CACHE_GENERATION_MAX {
            generations.1 = std::mem::take(&mut generations.0);
        }
        generations.0.insert(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashSet<u128>, HashSet<u128>)> {
        self.generations.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The outcome of a verification handed to the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Failed,
    /// Not verified: the queue was full.
    Busy,
}

/// A verification for the pool: `done` gets the verdict, on a verifier thread (or at once,
/// on the caller's, when the queue is full).
pub struct Job {
    pub auth: Arc<RouteAuth>,
    pub credentials: Credentials,
    pub done: Box<dyn FnOnce(Verdict) + Send>,
}

/// Hands `job` to the verifier threads (started on first use).
pub fn submit(job: Job) {
    static QUEUE: OnceLock<Option<crossbeam_channel::Sender<Job>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(start_verifiers);
    let refused = match queue {
        Some(queue) => queue.try_send(job).err().map(|e| e.into_inner()),
        None => Some(job),
    };
    if let Some(job) = refused {
        (job.done)(Verdict::Busy);
    }
}

fn start_verifiers() -> Option<crossbeam_channel::Sender<Job>> {
    let (tx, rx) = crossbeam_channel::bounded::<Job>(QUEUE_MAX);
    let mut started = 0;
    for i in 0..VERIFIER_THREADS {
        let rx = rx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("squall-auth{i}"))
            .spawn(move || {
                for job in rx {
                    let ok = job.auth.verify(&job.credentials);
                    (job.done)(if ok { Verdict::Ok } else { Verdict::Failed });
                }
            });
        match spawned {
            Ok(_) => started += 1,
            Err(e) => tracing::error!("cannot start an auth verifier thread: {e}"),
        }
    }
    (started > 0).then_some(tx)
}

/// A worker's inline verification time in the current one-second window.
#[derive(Debug, Clone, Copy)]
pub struct InlineBudget {
    window: Instant,
    spent: Duration,
}

impl InlineBudget {
    pub fn new(now: Instant) -> InlineBudget {
        InlineBudget {
            window: now,
            spent: Duration::ZERO,
        }
    }

    /// Whether a verification may run inline at `now`; when not, how long until it may.
    pub fn admit(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.window);
        if elapsed >= Duration::from_secs(1) {
            self.window = now;
            self.spent = Duration::ZERO;
        }
        if self.spent < INLINE_BUDGET {
            Ok(())
        } else {
            Err(Duration::from_secs(1).saturating_sub(elapsed))
        }
    }

    /// Charges a verification that took `took`.
    pub fn charge(&mut self, took: Duration) {
        self.spent += took;
    }
}

thread_local! {
    /// Each worker thread's inline budget.
    static INLINE: std::cell::Cell<Option<InlineBudget>> = const { std::cell::Cell::new(None) };
}

/// Verifies inline on this worker thread if its budget allows, or says how long until it does.
pub fn verify_inline(auth: &RouteAuth, credentials: &Credentials) -> Result<bool, Duration> {
    let now = Instant::now();
    let mut budget = INLINE.get().unwrap_or_else(|| InlineBudget::new(now));
    let admitted = budget.admit(now);
    let verdict = admitted.map(|()| auth.verify(credentials));
    budget.charge(now.elapsed());
    INLINE.set(Some(budget));
    verdict
}

/// The users files of every route with `auth_basic`, by route id (`None` for open routes).
pub fn load_routes(
    config: &squall_config::Config,
) -> Result<Vec<Option<Arc<RouteAuth>>>, Vec<Diagnostic>> {
    let mut problems = Vec::new();
    let routes = (config.vhost.iter().flat_map(|v| &v.routes))
        .map(|route| {
            let auth = route.auth_basic.as_ref()?;
            match RouteAuth::load(auth) {
                Ok(auth) => Some(Arc::new(auth)),
                Err(found) => {
                    // A file shared by several routes is reported once.
                    for d in found {
                        if !problems.contains(&d) {
                            problems.push(d);
                        }
                    }
                    None
                }
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(routes)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The users `path` holds, read as start-up reads them.
    fn users_of(path: &std::path::Path) -> Result<usize, Vec<Diagnostic>> {
        let auth = AuthBasic {
            realm: "r".to_owned(),
            users_file: path.to_owned(),
        };
        RouteAuth::load(&auth).map(|a| a.users.len())
    }

    fn auth_with(password: &str) -> RouteAuth {
        let hash = bcrypt::hash(password, 4).unwrap();
        let users = squall_config::parse_users(&format!("alice:{hash}\n")).unwrap();
        RouteAuth::new("Staff", users)
    }

    fn basic(user_pass: &str) -> Vec<u8> {
        let token = base64::engine::general_purpose::STANDARD.encode(user_pass);
        format!("Basic {token}").into_bytes()
    }

    #[test]
    fn the_challenge_names_the_realm_and_charset() {
        let auth = auth_with("pw");
        assert_eq!(
            &auth.challenge[..],
            b"Basic realm=\"Staff\", charset=\"UTF-8\""
        );
    }

    #[test]
    fn a_good_password_verifies_once_then_hits_the_cache() {
        let auth = auth_with("s3cret:with:colons");
        let header = basic("alice:s3cret:with:colons");
        let Check::Verify(credentials) = auth.check(Some(&header)) else {
            panic!("first sight is a verification");
        };
        assert!(auth.verify(&credentials));
        assert!(matches!(auth.check(Some(&header)), Check::Cached));
        let lower = [b"basic".as_slice(), &header[5..]].concat();
        assert!(
            matches!(auth.check(Some(&lower)), Check::Verify(_)),
            "another value is another key, even if it means the same"
        );
    }

    #[test]
    fn wrong_unknown_and_malformed_credentials_fail() {
        let auth = auth_with("pw");
        for (value, verifies) in [
            (basic("alice:wrong"), true),
            (basic("mallory:pw"), true),
            (basic("alice"), false),
            (b"Bearer abc".to_vec(), false),
            (b"Basic !!!".to_vec(), false),
            (b"Basic".to_vec(), false),
        ] {
            match auth.check(Some(&value)) {
                Check::Verify(c) => {
                    assert!(verifies, "{value:?}");
                    assert!(!auth.verify(&c), "{value:?}");
                    assert!(matches!(auth.check(Some(&value)), Check::Verify(_)));
                }
                Check::Missing => assert!(!verifies, "{value:?}"),
                Check::Cached => panic!("{value:?} cached"),
            }
        }
        assert!(matches!(auth.check(None), Check::Missing));
    }

    #[test]
    fn argon2_hashes_verify() {
        use argon2::password_hash::{PasswordHasher, SaltString};
        let salt = SaltString::encode_b64(b"saltsaltsaltsalt").unwrap();
        let params = argon2::Params::new(64, 1, 1, None).unwrap();
        let argon =
            argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let hash = argon.hash_password(b"pw", &salt).unwrap().to_string();
        let users = squall_config::parse_users(&format!("bob:{hash}\n")).unwrap();
        let auth = RouteAuth::new("r", users);
        let Check::Verify(good) = auth.check(Some(&basic("bob:pw"))) else {
            panic!()
        };
        assert!(auth.verify(&good));
        let Check::Verify(bad) = auth.check(Some(&basic("bob:nope"))) else {
            panic!()
        };
        assert!(!auth.verify(&bad));
    }

    #[test]
    fn the_cache_is_bounded_and_keeps_what_is_used() {
        let cache = Verified::new();
        let first = cache.key(b"first");
        cache.insert(first);
        for i in 0..CACHE_GENERATION_MAX * 3 / 2 {
            cache.insert(cache.key(format!("v{i}").as_bytes()));
            if i % 1000 == 0 {
                assert!(cache.contains(first), "used, so kept");
            }
        }
        let old = cache.key(b"v0");
        for i in 0..CACHE_GENERATION_MAX * 2 {
            cache.insert(cache.key(format!("w{i}").as_bytes()));
        }
        assert!(!cache.contains(old), "unused, so dropped");
        let g = cache.lock();
        assert!(g.0.len() + g.1.len() <= 2 * CACHE_GENERATION_MAX);
    }

    #[test]
    fn the_inline_budget_refills_each_second() {
        let t0 = Instant::now();
        let mut budget = InlineBudget::new(t0);
        assert!(budget.admit(t0).is_ok());
        budget.charge(INLINE_BUDGET);
        let wait = budget.admit(t0 + Duration::from_millis(300)).unwrap_err();
        assert_eq!(wait, Duration::from_millis(700));
        assert!(budget.admit(t0 + Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn a_users_file_with_a_weak_line_is_refused_naming_the_line() {
        let dir = std::env::temp_dir().join(format!("squall-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("users");
        let hash = bcrypt::hash("pw", 4).unwrap();
        std::fs::write(&path, format!("alice:{hash}\nbob:$apr1$abc$def\n")).unwrap();
        let problems = users_of(&path).unwrap_err();
        let shown: Vec<String> = problems.iter().map(|d| d.to_string()).collect();
        let expected = format!(
            "{}:2: an MD5 hash is refused: use bcrypt (htpasswd -B) or argon2",
            path.display()
        );
        assert_eq!(shown, [expected]);
        std::fs::write(&path, format!("alice:{hash}\n")).unwrap();
        assert_eq!(users_of(&path).unwrap(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
