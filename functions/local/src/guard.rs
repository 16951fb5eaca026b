//! What keeps `waymark serve` answering while some clients misbehave: a header-read timeout that
//! is also the idle timeout of kept-alive connections (a connection on which no request began and
//! no answer was sent for it is closed), a whole-request timeout for requests with a body (sent
//! slowly), a bound on open connections, and per-key rate limits (429 with `Retry-After`). Body sizes are capped
//! for every route by `shared::http::service`. On AWS, API Gateway's throttling does this
//! (template.yaml).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{HeaderValue, Request, header};
use axum::response::Response;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use shared::ApiError;
use shared::http::in_envelope;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The limits, from the environment (docs/serve.md, "`waymark serve`": its options and limits).
#[derive(Debug, Clone)]
pub struct Limits {
    /// A client must send a request's headers within this; an idle connection closes after it.
    pub header_timeout: Duration,
    /// A request (headers, body and answer) must complete within this.
    pub request_timeout: Duration,
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Requests per second per key (0: no limit), with bursts of up to `burst`.
    pub rate: f64,
    pub burst: f64,
}

impl Limits {
    pub fn from_env(env: &shared::config::Env) -> Result<Self, String> {
        let num = |name: &str, default: f64| -> Result<f64, String> {
            match env.get(name) {
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite() && *n >= 0.0)
                    .ok_or_else(|| format!("{name}: '{v}' is not a number of at least 0")),
                None => Ok(default),
            }
        };
        let rate = num("WAYMARK_RATE_LIMIT", 1000.0)?;
        let header = num("WAYMARK_HEADER_TIMEOUT_SECS", 10.0)?;
        let request = num("WAYMARK_REQUEST_TIMEOUT_SECS", 30.0)?;
        let conns = num("WAYMARK_MAX_CONNECTIONS", 1024.0)?;
        // Batch marks take a request older than this for dead (`time::REQUEST_LIFETIME_SECONDS`).
        if request > shared::time::REQUEST_LIFETIME_SECONDS as f64 {
            return Err(format!(
                "WAYMARK_REQUEST_TIMEOUT_SECS: at most {} (no request may live longer)",
                shared::time::REQUEST_LIFETIME_SECONDS
            ));
        }
        if header == 0.0 || request == 0.0 || conns < 1.0 {
            return Err(
                "WAYMARK_HEADER_TIMEOUT_SECS, WAYMARK_REQUEST_TIMEOUT_SECS and WAYMARK_MAX_CONNECTIONS must be above 0"
                    .into(),
            );
        }
        Ok(Self {
            header_timeout: Duration::from_secs_f64(header),
            request_timeout: Duration::from_secs_f64(request),
            max_connections: conns as usize,
            rate,
            burst: num("WAYMARK_RATE_BURST", 2.0 * rate)?.max(1.0),
        })
    }
}

/// Serve `app` on `listener` within `limits` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let buckets = (limits.rate > 0.0).then(|| Arc::new(Buckets::new(limits.rate, limits.burst)));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.map_err(|e| e.to_string())?,
            () = &mut shutdown => return Ok(()),
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of file descriptors and the like: pass, and let connections close.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let activity = Arc::new(Activity::default());
        let permit = Arc::new(permit);
        let svc = Guarded {
            app: app.clone(),
            request_timeout: limits.request_timeout,
            buckets: buckets.clone(),
            activity: activity.clone(),
            permit: permit.clone(),
        };
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            // The header timeout is the watchdog's (Activity), not hyper's.
            let conn = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(None)
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades();
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended");
                },
                () = activity.idle_for(header_timeout) => tracing::debug!("idle connection closed"),
            }
            drop(permit);
        });
    }
}

/// What moved on a connection: requests begun and answers sent (`moves`), and answers not yet
/// sent whole (`busy`). The header timeout is kept by a watchdog reading these rather than by
/// hyper's header-read timer, which registered and removed a timer in the runtime's wheel for
/// every request (about 4 % of a warm GET's samples).
#[derive(Default)]
struct Activity {
    moves: AtomicU64,
    busy: AtomicUsize,
}

impl Activity {
    /// Completes once no request began and no answer was being sent for `limit`: a client that
    /// sends nothing, or its headers a byte at a time, or leaves a kept-alive connection idle.
    /// Checked each quarter of `limit`, so the connection closes between `limit` and 1.25 times
    /// it after it went quiet.
    async fn idle_for(&self, limit: Duration) {
        let (mut seen, mut quiet) = (0, 0);
        loop {
            tokio::time::sleep(limit / 4).await;
            let moves = self.moves.load(Ordering::Relaxed);
            if moves != seen || self.busy.load(Ordering::Relaxed) > 0 {
                (seen, quiet) = (moves, 0);
            } else {
                quiet += 1;
                if quiet == 4 {
                    return;
                }
            }
        }
    }
}

/// A request in progress on a connection, until its answer is sent whole (or dropped).
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.busy.fetch_add(1, Ordering::Relaxed);
        activity.moves.fetch_add(1, Ordering::Relaxed);
        Self(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
        self.0.moves.fetch_add(1, Ordering::Relaxed);
    }
}

/// An answer's body, holding its request's [`Busy`] until hyper has sent it (or given up).
struct Sending {
    body: Body,
    _busy: Busy,
}

impl HttpBody for Sending {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The app as a connection serves it: per-key rate limits and, for requests with a body, the
/// whole-request timeout. Written as the connection's service rather than as `from_fn` layers,
/// each of which cloned and boxed the router's service for every request.
#[derive(Clone)]
struct Guarded {
    app: Router,
    request_timeout: Duration,
    buckets: Option<Arc<Buckets>>,
    activity: Arc<Activity>,
    permit: Arc<OwnedSemaphorePermit>,
}

/// A connection's place among `max_connections`, handed to a WebSocket (the only requests that
/// outlive their connection's HTTP serving: an upgraded connection leaves hyper) so that it keeps
/// its place while open.
#[derive(Clone)]
pub struct ConnectionPlace(pub Arc<OwnedSemaphorePermit>);

impl hyper::service::Service<Request<Incoming>> for Guarded {
    type Response = Response<Sending>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Sending>, Infallible>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        let busy = Busy::new(&self.activity);
        if req.uri().path().starts_with(crate::streams::WS_PATH) {
            req.extensions_mut().insert(ConnectionPlace(self.permit.clone()));
        }
        let sent = |answer: Response| Ok(answer.map(|body| Sending { body, _busy: busy }));
        if let Some(r) = self.buckets.as_ref().and_then(|b| rate_limited(b, &req)) {
            return Box::pin(std::future::ready(sent(r)));
        }
        let app = self.app.clone();
        let limit = self.request_timeout;
        Box::pin(async move {
            let answer = within(limit, req.map(Body::new), app).await;
            sent(answer)
        })
    }
}

/// A request with a body not completed within `limit` (typically the body sent slowly) gets a
/// 408. One without a body has been received whole with its headers, which the header timeout
/// bounds: a 408 would blame the client for the server's time, and the timer cost every GET a
/// registration in the runtime's timer wheel.
async fn within(limit: Duration, req: Request<Body>, app: Router) -> Response {
    if req.body().is_end_stream() {
        return answer(app, req).await;
    }
    let uri = req.uri().clone();
    match tokio::time::timeout(limit, answer(app, req)).await {
        Ok(r) => r,
        Err(_) => in_envelope(
            &uri,
            ApiError::new(
                shared::error::Kind::Timeout,
                format!("request: not received and answered within {} s; send the body at once", limit.as_secs_f64()),
            ),
        ),
    }
}

/// The router's answer. It is always ready (its `poll_ready` does nothing), so it is called
/// straight away.
async fn answer(mut app: Router, req: Request<Body>) -> Response {
    match tower::Service::call(&mut app, req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// Token buckets per key (the raw header value; kept in memory only, never logged). Hand-written
/// because the limiter crates of this field (governor) bring more than these few lines.
struct Buckets {
    rate: f64,
    burst: f64,
    map: Mutex<HashMap<String, (f64, Instant)>>,
}

/// Buckets kept before full (idle) ones are dropped.
const MAX_BUCKETS: usize = 10_000;

impl Buckets {
    fn new(rate: f64, burst: f64) -> Self {
        Self { rate, burst, map: Mutex::new(HashMap::new()) }
    }

    /// Take a token for `key`, or say how long until one is there.
    fn take(&self, key: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_BUCKETS && !map.contains_key(key) {
            let (rate, burst) = (self.rate, self.burst);
            map.retain(|_, (tokens, at)| *tokens + rate * now.duration_since(*at).as_secs_f64() < burst);
        }
        // The key is copied only the first time it is seen, not on every request.
        if let Some(bucket) = map.get_mut(key) {
            return self.spend(bucket, now);
        }
        self.spend(map.entry(key.to_owned()).or_insert((self.burst, now)), now)
    }

    /// Refill `bucket` (tokens, last refill) up to `now` and take a token from it.
    fn spend(&self, (tokens, at): &mut (f64, Instant), now: Instant) -> Result<(), Duration> {
        *tokens = (*tokens + self.rate * now.duration_since(*at).as_secs_f64()).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - *tokens) / self.rate))
        }
    }
}

/// The 429 for a request over its key's rate, if it is.
fn rate_limited<B>(buckets: &Buckets, req: &Request<B>) -> Option<Response> {
    let key = [header::AUTHORIZATION.as_str(), "api-key"]
        .iter()
        .find_map(|h| req.headers().get(*h))
        .and_then(|v| v.to_str().ok())?;
    let wait = buckets.take(key).err()?;
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    let e = ApiError::new(
        shared::error::Kind::TooMany,
        format!("api_key: more than {} requests per second with this key; retry after {secs} s", buckets.rate),
    );
    let mut r = in_envelope(req.uri(), e);
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    Some(r)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{Activity, Buckets, Busy};

    #[tokio::test]
    async fn a_connection_is_idle_only_after_the_limit_with_nothing_in_progress() {
        let limit = Duration::from_millis(200);
        let activity = Arc::new(Activity::default());
        let t = Instant::now();
        activity.idle_for(limit).await;
        let quiet = t.elapsed();
        assert!(quiet >= limit && quiet < limit * 2, "idle after {quiet:?}");

        // An answer still being sent (a large one to a slow reader) keeps the connection.
        let busy = Busy::new(&activity);
        let held = tokio::time::timeout(limit * 3, activity.idle_for(limit)).await;
        assert!(held.is_err(), "closed while an answer was in progress");
        drop(busy);
        let t = Instant::now();
        activity.idle_for(limit).await;
        assert!(t.elapsed() >= limit, "idle after {:?}", t.elapsed());
    }

    #[test]
    fn a_bucket_allows_its_burst_then_the_rate() {
        let b = Buckets::new(10.0, 3.0);
        for _ in 0..3 {
            assert!(b.take("k").is_ok());
        }
        let wait = b.take("k").expect_err("burst spent");
        assert!(wait.as_millis() > 0 && wait.as_millis() <= 100, "{wait:?}");
        assert!(b.take("other").is_ok(), "keys have their own buckets");
        std::thread::sleep(std::time::Duration::from_millis(120));
        assert!(b.take("k").is_ok(), "refilled at the rate");
    }
}
