//! A real HTTP receiver for webhook tests: an axum server on a loopback port that records every
//! request, verifies its Standard Webhooks signature with the `standardwebhooks` crate (not our
//! signer), and answers as the test scripts it (failures, 429 with Retry-After, slowness).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

/// How the receiver answers the n-th attempt (from 0) of a message.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    Ok,
    /// 500 for the first n attempts of each message.
    FailFirst(usize),
    /// 429 with `Retry-After: 1` on the first attempt of each message.
    RateLimitFirst,
    /// Sleep this long before answering 200 (longer than the sender's timeout: a timeout).
    Slow(Duration),
}

#[derive(Debug, Clone)]
pub struct Got {
    pub id: String,
    pub body: Value,
    pub answered: u16,
    pub signature_ok: bool,
    pub signature_header: String,
    pub timestamp: String,
    pub raw: Vec<u8>,
    pub user_agent: String,
    pub at: Instant,
}

#[derive(Default)]
struct Inner {
    got: Vec<Got>,
    attempts: HashMap<String, usize>,
    secrets: Vec<String>,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    mode: Arc<Mutex<Mode>>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

impl Receiver {
    pub async fn start(mode: Mode) -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let mode = Arc::new(Mutex::new(mode));
        let app = Router::new().route("/hook", post(handle)).with_state((inner.clone(), mode.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner, mode, task: Arc::new(task) }
    }

    /// Secrets whose signatures count as valid (the endpoint's, once created).
    pub fn trust(&self, secret: &str) {
        self.inner.lock().unwrap().secrets.push(secret.to_owned());
    }
    pub fn set_mode(&self, m: Mode) {
        *self.mode.lock().unwrap() = m;
    }
    /// How many attempts at message `id` have arrived (counted before they are answered).
    pub fn attempts_of(&self, id: &str) -> Option<usize> {
        self.inner.lock().unwrap().attempts.get(id).map(|n| n + 1)
    }
    /// How many messages have had an attempt arrive (answered or not).
    pub fn arrived(&self) -> usize {
        self.inner.lock().unwrap().attempts.len()
    }
    pub fn got(&self) -> Vec<Got> {
        self.inner.lock().unwrap().got.clone()
    }
    /// Ids answered with a 2xx, in the order they were accepted.
    pub fn delivered(&self) -> Vec<String> {
        self.got().into_iter().filter(|g| (200..300).contains(&g.answered)).map(|g| g.id).collect()
    }

    /// Wait until `done` holds for what arrived (panics after `limit`).
    pub async fn wait_for(&self, limit: Duration, what: &str, done: impl Fn(&[Got]) -> bool) {
        let start = Instant::now();
        loop {
            if done(&self.got()) {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "waited {limit:?} for {what}; got {:#?}",
                self.got().iter().map(|g| (&g.id, g.answered)).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

type Shared = (Arc<Mutex<Inner>>, Arc<Mutex<Mode>>);

async fn handle(State((inner, mode)): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let mode = *mode.lock().unwrap();
    let (n, signature_ok) = {
        let mut g = inner.lock().unwrap();
        let n = *g.attempts.entry(id.clone()).and_modify(|n| *n += 1).or_insert(0);
        let ok = g
            .secrets
            .iter()
            .any(|s| standardwebhooks::Webhook::new(s).is_ok_and(|w| w.verify(&body, &headers).is_ok()));
        (n, ok)
    };
    let (status, retry_after) = match mode {
        Mode::Ok => (200, None),
        Mode::FailFirst(k) if n < k => (500, None),
        Mode::FailFirst(_) => (204, None),
        Mode::RateLimitFirst if n == 0 => (429, Some("1")),
        Mode::RateLimitFirst => (200, None),
        Mode::Slow(d) => {
            tokio::time::sleep(d).await;
            (200, None)
        }
    };
    let got = Got {
        id,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        answered: status,
        signature_ok,
        signature_header: headers.get("webhook-signature").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned(),
        timestamp: headers.get("webhook-timestamp").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned(),
        raw: body.to_vec(),
        user_agent: headers.get("user-agent").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned(),
        at: Instant::now(),
    };
    inner.lock().unwrap().got.push(got);
    let mut res =
        (StatusCode::from_u16(status).unwrap(), "received; a long answer is truncated in the log").into_response();
    if let Some(r) = retry_after {
        res.headers_mut().insert("retry-after", r.parse().unwrap());
    }
    res
}
