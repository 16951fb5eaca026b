//! Test helpers: a fresh project on the chosen backend, and requests through the router without
//! sockets. Every test runs twice, on the embedded store and on DynamoDB Local (see [`both!`]).

use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys, IssuedProject};
use shared::store::{DynamoStore, EmbeddedStore, Store, TableNames};
use tower::ServiceExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    DynamoDb,
}

/// Table-name prefix of this test process on DynamoDB Local, so runs never share tables.
fn dynamo_prefix() -> String {
    std::env::var("WAYMARK_TEST_TABLE_PREFIX").unwrap_or_else(|_| format!("test-{}-", std::process::id()))
}

static TABLES_READY: AtomicBool = AtomicBool::new(false);

/// A DynamoDB Local store with this process's tables (see [`store`]).
/// An app on `backend` and a reading of the capacity units its store has consumed so far (always
/// 0 on the embedded store), for the cost measurements.
pub async fn metered_app(backend: Backend) -> (TestApp, Box<dyn Fn() -> f64>) {
    if matches!(backend, Backend::DynamoDb) {
        let store = dynamo_store().await;
        let app = TestApp::with_state(shared::AppState::new(store.clone())).await;
        (app, Box::new(move || store.consumed_capacity()))
    } else {
        (TestApp::new(backend).await, Box::new(|| 0.0))
    }
}

pub async fn dynamo_store() -> DynamoStore {
    assert!(
        std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some(),
        "AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with scripts/test.sh, which starts DynamoDB Local"
    );
    let store = DynamoStore::from_env(TableNames::with_prefix(&dynamo_prefix())).await;
    if !TABLES_READY.load(Ordering::Acquire) {
        store.ensure_tables().await.expect("creating tables in DynamoDB Local");
        TABLES_READY.store(true, Ordering::Release);
    }
    store
}

/// A store of the backend. DynamoDB Local must be running (scripts/test.sh starts it and sets
/// `AWS_ENDPOINT_URL_DYNAMODB`); without it the DynamoDB half of the suite fails, on purpose.
pub async fn store(backend: Backend) -> AppState {
    match backend {
        Backend::Embedded => AppState::new(EmbeddedStore::memory().expect("in-memory store")),
        Backend::DynamoDb => AppState::new(dynamo_store().await),
    }
}

/// Which credential a request carries.
#[derive(Debug, Clone, Copy)]
pub enum Key<'a> {
    Secret,
    Publishable,
    /// `Authorization: Bearer <access token>` (v2).
    Bearer,
    None,
    Raw(&'a str),
}

pub struct TestApp {
    pub state: AppState,
    pub router: Router,
    pub project: IssuedProject,
}

impl TestApp {
    pub async fn new(backend: Backend) -> Self {
        Self::with_state(store(backend).await).await
    }

    /// A fresh project on a store the caller built (e.g. to read its consumed capacity).
    pub async fn with_state(state: AppState) -> Self {
        let project =
            projects::create(state.store.as_ref(), "test", &ChosenKeys::default()).await.expect("project created");
        let router = local::app(state.clone());
        Self { state, router, project }
    }

    /// An app on DynamoDB Local tables of its own, named after `tag` (see [`both_alone!`]).
    pub async fn with_own_tables(tag: &str) -> Self {
        let _ = dynamo_store().await; // checks DynamoDB Local is there
        let prefix = format!("test-{}-{}-", std::process::id(), tag.replace('_', "-"));
        let store = DynamoStore::from_env(TableNames::with_prefix(&prefix)).await;
        store.ensure_tables().await.expect("tables");
        Self::with_state(AppState::new(store)).await
    }

    /// The same app with webhook endpoints allowed on loopback `http` (what
    /// `WAYMARK_WEBHOOK_ALLOW_PRIVATE=1` does for `waymark serve`).
    pub fn with_private_webhooks(mut self) -> Self {
        let mut c = (*self.state.config).clone();
        c.allow_private_webhooks = true;
        self.state.config = std::sync::Arc::new(c);
        self.router = local::app(self.state.clone());
        self
    }

    /// A second project on the same store (isolation tests).
    pub async fn other_project(&self) -> IssuedProject {
        projects::create(self.state.store.as_ref(), "other", &ChosenKeys::default()).await.expect("project created")
    }

    pub async fn send(&self, req: Request<Body>) -> (StatusCode, Value) {
        let res = self.router.clone().oneshot(req).await.expect("router is infallible");
        let status = res.status();
        let bytes = res.into_body().collect().await.expect("body").to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("non-JSON body ({status}): {}", String::from_utf8_lossy(&bytes)));
        (status, body)
    }

    pub async fn call(&self, method: &str, uri: &str, key: Key<'_>, body: Option<&Value>) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(uri);
        match key {
            Key::Secret => req = req.header("Api-Key", &self.project.api_key),
            Key::Publishable => req = req.header("Api-Key", &self.project.publishable_key),
            Key::Bearer => req = req.header("Authorization", format!("Bearer {}", self.project.access_token)),
            Key::Raw(k) => req = req.header("api-key", k),
            Key::None => {}
        }
        let body = match body {
            Some(b) => {
                req = req.header("Content-Type", "application/json");
                Body::from(serde_json::to_vec(b).expect("json"))
            }
            None => Body::empty(),
        };
        self.send(req.body(body).expect("request")).await
    }

    pub async fn get(&self, uri: &str) -> (StatusCode, Value) {
        self.call("GET", uri, Key::Secret, None).await
    }
    pub async fn post(&self, uri: &str, body: &Value) -> (StatusCode, Value) {
        self.call("POST", uri, Key::Secret, Some(body)).await
    }

    /// Create a user and return its id.
    pub async fn create_user(&self, metadata: Value) -> String {
        let (status, body) = self
            .post("/v1/api/user/", &serde_json::json!({"app_type": 1, "device_token": "t", "metadata": metadata}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["data"]["user_id"].as_str().expect("user_id").to_owned()
    }
}

/// Assert a v1/v3 error envelope with this status whose message names `field`.
#[track_caller]
pub fn assert_error(status: StatusCode, body: &Value, expected: StatusCode, field: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["status"], false, "{body}");
    assert_eq!(body["code"], expected.as_u16(), "{body}");
    assert!(body["data"].is_null(), "{body}");
    let msg = body["msg"].as_str().unwrap_or_default();
    assert!(msg.contains(field), "message should name '{field}': {msg}");
}

/// [`both!`] for a test whose whole-registry sweeps would reach other tests' projects in the
/// DynamoDB tables this process shares (and theirs its own): on DynamoDB it gets tables of its own.
#[macro_export]
macro_rules! both_alone {
    ($name:ident, |$app:ident| $body:expr) => {
        $crate::both_on!($name, $crate::helpers::TestApp::with_own_tables(stringify!($name)), |$app| $body);
    };
}

/// Run a test body against both backends: `both!(name, |app| async move { ... });`.
#[macro_export]
macro_rules! both {
    ($name:ident, |$app:ident| $body:expr) => {
        $crate::both_on!($name, $crate::helpers::TestApp::new($crate::helpers::Backend::DynamoDb), |$app| $body);
    };
}

/// [`both!`] with the DynamoDB app made by `$dynamodb`.
#[macro_export]
macro_rules! both_on {
    ($name:ident, $dynamodb:expr, |$app:ident| $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn embedded() {
                let $app = $crate::helpers::TestApp::new($crate::helpers::Backend::Embedded).await;
                $body.await
            }

            #[tokio::test]
            async fn dynamodb() {
                let $app = $dynamodb.await;
                $body.await
            }
        }
    };
}

/// Every page of the list at `path` (a query string, `&page_number=N` added), and one past the
/// end: `data[field]`'s entries by `id_key` against `want` (10 a page), and `data.pages`.
pub async fn assert_api_pages(app: &TestApp, path: &str, field: &str, id_key: &str, want: &[String]) {
    let pages = want.len().div_ceil(10);
    for n in 1..=pages + 1 {
        let (s, r) = app.get(&format!("{path}&page_number={n}")).await;
        assert_eq!(s, StatusCode::OK, "{r}");
        let got: Vec<&str> = r["data"][field].as_array().unwrap().iter().map(|e| e[id_key].as_str().unwrap()).collect();
        let page: Vec<&str> = want.iter().skip((n - 1) * 10).take(10).map(String::as_str).collect();
        assert_eq!(got, page, "page {n} of {pages}: {path}");
        assert_eq!(r["data"]["pages"], pages, "{r}");
    }
}
