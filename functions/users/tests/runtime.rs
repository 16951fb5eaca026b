//! The real `users` binary under a real Lambda runtime loop: a minimal Lambda Runtime API (the
//! HTTP interface Lambda offers a custom runtime on `AWS_LAMBDA_RUNTIME_API`) hands it API Gateway
//! HTTP API events from `events/` and captures its answers, over tables in DynamoDB Local.
//!
//! Needs DynamoDB Local (`scripts/test.sh` starts it and sets `AWS_ENDPOINT_URL_DYNAMODB`); fails,
//! on purpose, without it.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::Value;
use shared::domain::projects::{self, ChosenKeys};
use shared::store::{DynamoStore, Store, TABLES, TableNames};
use tokio::sync::mpsc;

const FUNCTION_NAME: &str = "waymark-users";
const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:waymark-users";

/// What the function told the Runtime API.
enum Report {
    /// The first `GET .../invocation/next`: initialisation is over.
    Ready(Instant),
    Response {
        request_id: String,
        body: Bytes,
    },
    Error {
        request_id: String,
        body: Bytes,
    },
    InitError(Bytes),
    Unexpected(String),
}

impl Report {
    fn describe(&self) -> String {
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        match self {
            Report::Ready(_) => "a /next request".into(),
            Report::Response { request_id, body } => format!("the response to {request_id}: {}", text(body)),
            Report::Error { request_id, body } => format!("an invocation error for {request_id}: {}", text(body)),
            Report::InitError(body) => format!("an initialisation error: {}", text(body)),
            Report::Unexpected(what) => format!("a request the Runtime API does not offer: {what}"),
        }
    }
}

struct FakeRuntime {
    /// (request id, event) still to hand out.
    queue: Mutex<VecDeque<(String, String)>>,
    ready_seen: Mutex<bool>,
    reports: mpsc::UnboundedSender<Report>,
}

async fn next(State(rt): State<Arc<FakeRuntime>>) -> impl IntoResponse {
    {
        let mut seen = rt.ready_seen.lock().expect("lock");
        if !*seen {
            *seen = true;
            let _ = rt.reports.send(Report::Ready(Instant::now()));
        }
    }
    let job = rt.queue.lock().expect("lock").pop_front();
    let Some((request_id, event)) = job else {
        // No more work: hold the long poll, as Lambda does until it freezes the sandbox.
        std::future::pending::<()>().await;
        unreachable!()
    };
    let deadline = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() + 30_000;
    let mut headers = HeaderMap::new();
    headers.insert("Lambda-Runtime-Aws-Request-Id", request_id.parse().expect("header"));
    headers.insert("Lambda-Runtime-Deadline-Ms", deadline.to_string().parse().expect("header"));
    headers.insert("Lambda-Runtime-Invoked-Function-Arn", FUNCTION_ARN.parse().expect("header"));
    headers.insert(
        "Lambda-Runtime-Trace-Id",
        "Root=1-6632057c-0a1b2c3d4e5f60718293a4b5;Parent=53995c3f42cd8ad8;Sampled=0".parse().expect("header"),
    );
    headers.insert("Content-Type", "application/json".parse().expect("header"));
    (headers, event).into_response()
}

async fn response(State(rt): State<Arc<FakeRuntime>>, UrlPath(request_id): UrlPath<String>, body: Bytes) -> StatusCode {
    let _ = rt.reports.send(Report::Response { request_id, body });
    StatusCode::ACCEPTED
}

async fn error(State(rt): State<Arc<FakeRuntime>>, UrlPath(request_id): UrlPath<String>, body: Bytes) -> StatusCode {
    let _ = rt.reports.send(Report::Error { request_id, body });
    StatusCode::ACCEPTED
}

async fn init_error(State(rt): State<Arc<FakeRuntime>>, body: Bytes) -> StatusCode {
    let _ = rt.reports.send(Report::InitError(body));
    StatusCode::ACCEPTED
}

async fn unexpected(State(rt): State<Arc<FakeRuntime>>, method: Method, uri: Uri) -> StatusCode {
    let _ = rt.reports.send(Report::Unexpected(format!("{method} {uri}")));
    StatusCode::NOT_FOUND
}

fn runtime_api(rt: Arc<FakeRuntime>) -> Router {
    Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(response))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route("/2018-06-01/runtime/init/error", post(init_error))
        .fallback(unexpected)
        .with_state(rt)
}

/// The function process; killed when dropped, so a failing test leaves nothing running.
struct Function {
    child: Child,
    log: PathBuf,
}

impl Function {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn event(name: &str, api_key: &str) -> String {
    let path = workspace_root().join("events").join(format!("{name}.json"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace("REPLACE_API_KEY", api_key)
}

/// Wait for the next report, failing with the function's log if it exits or stays silent.
async fn report(rx: &mut mpsc::UnboundedReceiver<Report>, f: &mut Function, what: &str) -> Report {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
            return r;
        }
        if let Some(status) = f.child.try_wait().expect("child status") {
            panic!("the function exited ({status}) while waiting for {what}; its log:\n{}", f.log());
        }
        assert!(Instant::now() < give_up, "no {what} within 60 s; the function's log:\n{}", f.log());
    }
}

/// The answer to `request_id`: an API Gateway HTTP API (payload 2.0) response.
async fn answer(rx: &mut mpsc::UnboundedReceiver<Report>, f: &mut Function, request_id: &str) -> Value {
    match report(rx, f, &format!("the response to {request_id}")).await {
        Report::Response { request_id: id, body } => {
            assert_eq!(id, request_id, "response posted for the wrong invocation");
            serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("response is not JSON ({e}): {}", String::from_utf8_lossy(&body)))
        }
        other => {
            panic!("expected the response to {request_id}, got {}; the function's log:\n{}", other.describe(), f.log())
        }
    }
}

/// The envelope inside an API Gateway v2 response: a JSON body whose `code` is the HTTP status.
fn envelope(resp: &Value) -> Value {
    assert_eq!(resp["isBase64Encoded"], false, "{resp}");
    let content_type = resp["headers"]["content-type"].as_str().unwrap_or_default();
    assert!(content_type.starts_with("application/json"), "content-type {content_type:?}: {resp}");
    let body = resp["body"].as_str().unwrap_or_else(|| panic!("body is not a string: {resp}"));
    let env: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {body}"));
    assert_eq!(resp["statusCode"], env["code"], "{resp}");
    env
}

#[tokio::test]
async fn users_binary_answers_api_gateway_events_through_the_runtime_api() {
    let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").expect(
        "AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with scripts/test.sh, which starts DynamoDB Local",
    );

    // Tables of this run only, and a project in them.
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
    let prefix = format!("runtime-{}-{nanos}-", std::process::id());
    let names = TableNames::with_prefix(&prefix);
    let store = DynamoStore::from_env(names.clone()).await;
    store.ensure_tables().await.expect("creating tables in DynamoDB Local");
    let project = projects::create(&store, "runtime", &ChosenKeys::default()).await.expect("project");

    // Two invocations: a cold one that creates a user, a warm one that lists it.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let rt = Arc::new(FakeRuntime {
        queue: Mutex::new(VecDeque::from([
            ("c0ffee00-0000-4000-8000-000000000001".to_owned(), event("users-create", &project.api_key)),
            ("c0ffee00-0000-4000-8000-000000000002".to_owned(), event("users-list", &project.api_key)),
        ])),
        ready_seen: Mutex::new(false),
        reports: tx,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, runtime_api(rt)).await });

    // The environment Lambda gives a provided.al2023 function, plus what template.yaml adds.
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("users-runtime-{nanos}.log"));
    let log_file = std::fs::File::create(&log).expect("log file");
    // WAYMARK_USERS_BIN runs another build of the function (e.g. target/release/users) instead.
    let binary =
        std::env::var_os("WAYMARK_USERS_BIN").map_or_else(|| env!("CARGO_BIN_EXE_users").into(), PathBuf::from);
    let mut cmd = Command::new(&binary);
    cmd.env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{FUNCTION_NAME}"))
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "2024/05/01/[$LATEST]0123456789abcdef0123456789abcdef")
        .env("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
        .env("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023")
        .env("_HANDLER", "bootstrap")
        .env("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true")
        .env("RUST_LOG", "info")
        .env("AWS_REGION", std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()))
        .env("AWS_ACCESS_KEY_ID", std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_else(|_| "local".into()))
        .env("AWS_SECRET_ACCESS_KEY", std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|_| "local".into()))
        .env("AWS_ENDPOINT_URL_DYNAMODB", &endpoint);
    for def in TABLES {
        cmd.env(def.env, names.get(def.table));
    }
    cmd.stdin(Stdio::null()).stdout(log_file.try_clone().expect("log file")).stderr(log_file);

    let spawned = Instant::now();
    let mut f = Function {
        child: cmd.spawn().unwrap_or_else(|e| panic!("spawning {}: {e}", binary.display())),
        log: log.clone(),
    };

    let ready = match report(&mut rx, &mut f, "the first /next request").await {
        Report::Ready(at) => at,
        other => panic!("expected the first /next request, got {}; the function's log:\n{}", other.describe(), f.log()),
    };
    let create = answer(&mut rx, &mut f, "c0ffee00-0000-4000-8000-000000000001").await;
    let first_answer = Instant::now();
    let list = answer(&mut rx, &mut f, "c0ffee00-0000-4000-8000-000000000002").await;
    let second_answer = Instant::now();
    eprintln!(
        "{}: cold start, spawn to first /next: {:.1} ms; first answer after {:.1} ms; warm invocation {:.1} ms",
        binary.display(),
        (ready - spawned).as_secs_f64() * 1e3,
        (first_answer - spawned).as_secs_f64() * 1e3,
        (second_answer - first_answer).as_secs_f64() * 1e3,
    );

    let created = envelope(&create);
    assert_eq!(created["status"], true, "{created}");
    assert_eq!(created["code"], 201, "{created}");
    let user_id = created["data"]["user_id"].as_str().expect("user_id").to_owned();

    let listed = envelope(&list);
    assert_eq!(listed["status"], true, "{listed}");
    assert_eq!(listed["code"], 200, "{listed}");
    assert_eq!(listed["data"]["account_id"], project.account_id.as_str(), "{listed}");
    let users = listed["data"]["users"].as_array().unwrap_or_else(|| panic!("users: {listed}"));
    assert_eq!(users.len(), 1, "{listed}");
    assert_eq!(users[0]["id"], user_id.as_str(), "{listed}");

    // Nothing else was reported (errors, unknown paths).
    if let Ok(r) = rx.try_recv() {
        panic!("unexpected report: {}; the function's log:\n{}", r.describe(), f.log());
    }
    drop(f);
    let _ = std::fs::remove_file(&log);
}
