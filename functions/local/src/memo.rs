//! Whole answers kept for repeated GETs: a dashboard or an app polling the same list gets the
//! answer made for the same request before, as long as nothing it was made from has changed.
//!
//! Never stale, by the embedded store's positions (`shared::store::reads`): an answer is kept
//! with every partition its request read and the position each had when the read began, and is
//! served only while none has been written since (nor was being written then), before the
//! earliest expiry of the items read. Only answers whose handler says they depend on nothing
//! else (`reads::pure`: not the clock, not a cache outside the store) are kept, only 200s, and
//! only for the same method, path, query and headers (the key included: the key check is one of
//! the reads, so revoking the key retires its answers). An answer is kept at most
//! [`MAX_AGE`], so that a key's `last_used_at` (noted hourly by the key check, which a kept
//! answer skips) stays within a minute of its granularity. On DynamoDB nothing is kept: other
//! processes write there too.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use foldhash::fast::RandomState;
use shared::ApiError;
use shared::store::Store;
use shared::store::reads::{self, Followed};

/// Bytes of answers kept at most; past it, all are dropped (those in use come back).
const MAX_BYTES: usize = 16 << 20;
/// Answers longer than this are not kept.
const MAX_ANSWER_BYTES: u64 = 256 << 10;
/// The longest an answer is kept (see the module's documentation).
pub const MAX_AGE: Duration = Duration::from_secs(60);

struct Kept {
    followed: Followed,
    born: Instant,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    bytes: usize,
}

#[derive(Default)]
struct Inner {
    answers: HashMap<Vec<u8>, Kept, RandomState>,
    bytes: usize,
}

pub struct Memo {
    /// The store the answers were read from: one that follows its writes.
    store: Arc<dyn Store>,
    inner: Mutex<Inner>,
    /// Answers served from here, for tests and measurements.
    served: AtomicU64,
}

/// The request's key in the memo: GETs only, by their path, query and every header in order.
fn key<B>(req: &Request<B>) -> Option<Vec<u8>> {
    if req.method() != Method::GET {
        return None;
    }
    let uri = req.uri().path_and_query().map_or("", |p| p.as_str());
    let size = uri.len() + req.headers().iter().map(|(n, v)| n.as_str().len() + v.len() + 2).sum::<usize>();
    let mut k = Vec::with_capacity(size);
    k.extend_from_slice(uri.as_bytes());
    for (name, value) in req.headers() {
        k.push(0);
        k.extend_from_slice(name.as_str().as_bytes());
        k.push(0);
        k.extend_from_slice(value.as_bytes());
    }
    Some(k)
}

impl Memo {
    /// A memo of answers read from `store`; none for a store that does not follow its writes
    /// (DynamoDB: [`Store::follows_writes`]).
    pub fn over(store: Arc<dyn Store>) -> Option<Self> {
        store.follows_writes().then(|| Self { store, inner: Mutex::default(), served: AtomicU64::new(0) })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer kept for `key`, if nothing it was made from has changed.
    fn get(&self, key: &[u8]) -> Option<Response> {
        let inner = self.inner();
        let k = inner.answers.get(key)?;
        if k.born.elapsed() >= MAX_AGE || k.followed.expired() || !self.store.unchanged(&k.followed.deps) {
            return None;
        }
        let mut r = Response::new(Body::from(k.body.clone()));
        *r.status_mut() = k.status;
        *r.headers_mut() = k.headers.clone();
        self.served.fetch_add(1, Ordering::Relaxed);
        Some(r)
    }

    /// How many answers were served from here.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// The answer kept for `req`; else its key, to keep the answer to be made ([`Memo::made`]),
    /// if it may be kept (a GET).
    pub fn kept<B>(&self, req: &Request<B>) -> Result<Response, Option<Vec<u8>>> {
        let key = key(req).ok_or(None)?;
        self.get(&key).ok_or(Some(key))
    }

    /// The answer to `req`: the one kept for it, or the one `app` makes (kept if it may be).
    pub async fn answer<F: Future<Output = Response>>(
        &self,
        req: Request<Body>,
        app: impl FnOnce(Request<Body>) -> F,
    ) -> Response {
        match self.kept(&req) {
            Ok(r) => r,
            Err(Some(key)) => self.made(key, app(req)).await,
            Err(None) => app(req).await,
        }
    }

    /// The answer `made` makes to the request of `key`, its reads noted, and kept if it may be.
    pub async fn made(&self, key: Vec<u8>, made: impl Future<Output = Response>) -> Response {
        match reads::recorded(made).await {
            (answer, Some(followed)) => self.keep(key, followed, answer).await,
            (answer, None) => answer,
        }
    }

    /// Keep `answer` to the request of `key`, made from the reads `followed`, if it is a 200 of
    /// a known length within [`MAX_ANSWER_BYTES`]; the answer to send either way.
    async fn keep(&self, key: Vec<u8>, followed: Followed, answer: Response) -> Response {
        let short = answer.body().size_hint().exact().is_some_and(|n| n <= MAX_ANSWER_BYTES);
        if answer.status() != StatusCode::OK || !short {
            return answer;
        }
        let (parts, body) = answer.into_parts();
        let Ok(body) = axum::body::to_bytes(body, MAX_ANSWER_BYTES as usize).await else {
            // Its length was announced: a body that fails to read now would have failed its
            // client too.
            return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "answer: could not be read").into_response();
        };
        let bytes = key.len()
            + body.len()
            + parts.headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 64).sum::<usize>()
            + followed.deps.len() * 24
            + 128;
        let kept = Kept {
            followed,
            born: Instant::now(),
            status: parts.status,
            headers: parts.headers.clone(),
            body: body.clone(),
            bytes,
        };
        {
            let mut inner = self.inner();
            if inner.bytes + bytes > MAX_BYTES {
                inner.answers.clear();
                inner.bytes = 0;
            }
            inner.bytes += bytes;
            if let Some(old) = inner.answers.insert(key, kept) {
                inner.bytes -= old.bytes;
            }
        }
        Response::from_parts(parts, Body::from(body))
    }
}
