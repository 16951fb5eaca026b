//! What keeps `waymark serve` answering while some clients misbehave: a header-read timeout that
//! is also the idle timeout of kept-alive connections (hyper starts it whenever a connection
//! waits for a request), a whole-request timeout for requests with a body (sent slowly), a bound
//! on open connections, and per-key rate limits (429 with `Retry-After`). Body sizes are capped
//! for every route by `shared::http::service`. On AWS, API Gateway's throttling does this
//! (template.yaml).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::HttpBody;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use shared::ApiError;
use shared::http::in_envelope;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The limits, from the environment (README, "`waymark serve`": its options and limits).
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
    pub fn from_env() -> Result<Self, String> {
        let num = |name: &str, default: f64| -> Result<f64, String> {
            match std::env::var(name) {
                Ok(v) if !v.is_empty() => v
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite() && *n >= 0.0)
                    .ok_or_else(|| format!("{name}: '{v}' is not a number of at least 0")),
                _ => Ok(default),
            }
        };
        let rate = num("WAYMARK_RATE_LIMIT", 1000.0)?;
        let header = num("WAYMARK_HEADER_TIMEOUT_SECS", 10.0)?;
        let request = num("WAYMARK_REQUEST_TIMEOUT_SECS", 30.0)?;
        let conns = num("WAYMARK_MAX_CONNECTIONS", 1024.0)?;
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
    let timeout = limits.request_timeout;
    // Each layer is paid on every request: none for a limit switched off.
    let app = if limits.rate > 0.0 {
        app.layer(middleware::from_fn_with_state(Arc::new(Buckets::new(limits.rate, limits.burst)), rate_limit))
    } else {
        app
    };
    let app = app.layer(middleware::from_fn(move |req: Request, next: Next| within(timeout, req, next)));
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
        let svc = TowerToHyperService::new(app.clone());
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended");
            }
            drop(permit);
        });
    }
}

/// A request with a body not completed within `limit` (typically the body sent slowly) gets a
/// 408. One without a body has been received whole with its headers, which the header timeout
/// bounds: a 408 would blame the client for the server's time, and the timer cost every GET a
/// registration in the runtime's timer wheel.
async fn within(limit: Duration, req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let uri = req.uri().clone();
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => in_envelope(
            &uri,
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!("request: not received and answered within {} s; send the body at once", limit.as_secs_f64()),
            ),
        ),
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

async fn rate_limit(State(buckets): State<Arc<Buckets>>, req: Request, next: Next) -> Response {
    if buckets.rate > 0.0 {
        let key = [header::AUTHORIZATION.as_str(), "api-key"]
            .iter()
            .find_map(|h| req.headers().get(*h))
            .and_then(|v| v.to_str().ok());
        if let Some(key) = key
            && let Err(wait) = buckets.take(key)
        {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            let e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("api_key: more than {} requests per second with this key; retry after {secs} s", buckets.rate),
            );
            let mut r = in_envelope(req.uri(), e);
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
            return r;
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::Buckets;

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
