//! What the Lambda tests share: template.yaml as JSON, the functions it must describe, the events
//! in `events/`, and a store that records which DynamoDB actions a request needs.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use shared::AppState;
use shared::store::{Item, Page, Query, SkRange, Store, StoreError, Table, WriteOp};
use tower::ServiceExt;

#[allow(dead_code)] // each test binary reads a part of it
#[path = "../template_yaml.rs"]
mod template_yaml;
pub use template_yaml::{Route, resource, resources_of, template, template_routes, workspace_root};

/// How a function's callers authenticate, which is also the envelope it answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Api-Key` header; v1/v3 envelope `{status, msg, code, data}`.
    ApiKey,
    /// `Authorization: Bearer <access token>`; v2 envelope `{code, message, description, ...}`.
    Bearer,
    /// No key: a token in the path is the credential; answers pages, assets and JSON of its own
    /// (no envelope).
    Public,
}

/// A Lambda function of template.yaml and the crate whose router it runs.
pub struct Function {
    /// Logical id in template.yaml.
    pub id: &'static str,
    /// The binary `sam build` packages (cargo-lambda `Binary`).
    pub binary: &'static str,
    /// Events in `events/` whose name starts with this belong to the function (the longest
    /// matching prefix wins: `trips-v2-` over `trips-`).
    pub event_prefix: &'static str,
    pub auth: Auth,
    pub router: fn() -> Router<AppState>,
}

/// The tracking function as template.yaml configures it: with the WebSocket API's URL
/// (`WAYMARK_STREAM_URL`), so its page mints a stream token (docs/streams.md).
fn tracking_as_deployed() -> Router<AppState> {
    let env = shared::config::Env::process();
    let stream_url = Some("wss://example.execute-api.us-east-1.amazonaws.com/v1".to_owned());
    tracking::router_with(tracking::PageConfig { stream_url, ..tracking::PageConfig::from_env(env) })
}

fn console_as_deployed() -> Router<AppState> {
    let env = shared::config::Env::process();
    let stream_url = Some("wss://example.execute-api.us-east-1.amazonaws.com/v1".to_owned());
    console::router_with(shared::pages::PageSettings { stream_url, ..shared::pages::PageSettings::from_env(env) })
}

pub const FUNCTIONS: &[Function] = &[
    Function {
        id: "UsersFunction",
        binary: "users",
        event_prefix: "users-",
        auth: Auth::ApiKey,
        router: users::router,
    },
    Function {
        id: "LocationsFunction",
        binary: "locations",
        event_prefix: "locations-",
        auth: Auth::ApiKey,
        router: locations::router,
    },
    Function {
        id: "GroupsFunction",
        binary: "groups",
        event_prefix: "groups-",
        auth: Auth::ApiKey,
        router: groups::router,
    },
    Function {
        id: "TripsFunction",
        binary: "trips",
        event_prefix: "trips-",
        auth: Auth::ApiKey,
        router: trips::router,
    },
    Function {
        id: "TripsV2Function",
        binary: "trips-v2",
        event_prefix: "trips-v2-",
        auth: Auth::Bearer,
        router: trips_v2::router,
    },
    Function {
        id: "GeofencesFunction",
        binary: "geofences",
        event_prefix: "geofences-",
        auth: Auth::ApiKey,
        router: geofences::router,
    },
    Function {
        id: "SearchFunction",
        binary: "search",
        event_prefix: "search-",
        auth: Auth::ApiKey,
        router: search::router,
    },
    Function {
        id: "MovingGeofencesFunction",
        binary: "moving-geofences",
        event_prefix: "moving-geofences-",
        auth: Auth::ApiKey,
        router: moving_geofences::router,
    },
    Function {
        id: "InsightsFunction",
        binary: "insights",
        event_prefix: "insights-",
        auth: Auth::ApiKey,
        router: insights::router,
    },
    Function {
        id: "TrackingFunction",
        binary: "tracking",
        event_prefix: "tracking-",
        auth: Auth::Public,
        router: tracking_as_deployed,
    },
    Function {
        id: "ConsoleFunction",
        binary: "console",
        event_prefix: "console-",
        auth: Auth::Public,
        router: console_as_deployed,
    },
    Function {
        id: "WebhooksFunction",
        binary: "webhooks",
        event_prefix: "webhooks-",
        auth: Auth::ApiKey,
        router: webhooks::router,
    },
    Function { id: "KeysFunction", binary: "keys", event_prefix: "keys-", auth: Auth::ApiKey, router: keys::router },
    Function {
        id: "SettingsFunction",
        binary: "settings",
        event_prefix: "settings-",
        auth: Auth::ApiKey,
        router: settings::router,
    },
];

/// A function of template.yaml that is not behind the HTTP API: a DynamoDB stream feeds it, and a
/// schedule catches up with whatever the stream left (retries, crashed work).
pub struct EventFunction {
    /// Logical id in template.yaml.
    pub id: &'static str,
    /// The binary `sam build` packages (cargo-lambda `Binary`).
    pub binary: &'static str,
    /// The package of that binary (both event functions live in functions/processor).
    pub package: &'static str,
    /// The table whose stream feeds it.
    pub stream_table: &'static str,
    /// The partition-key prefix its stream filter lets through (None: every record).
    pub key_prefix: Option<&'static str>,
    /// The SQS queue that receives the stream batches it gave up on.
    pub failures_queue: &'static str,
    /// The shortest `Timeout` (seconds) that lets one invocation do its work.
    pub min_timeout: u64,
    /// Its events in `events/`: a stream batch (first) and the schedule's event.
    pub events: &'static [&'static str],
}

pub const EVENT_FUNCTIONS: &[EventFunction] = &[
    EventFunction {
        id: "ProcessorFunction",
        binary: "processor",
        package: "processor",
        stream_table: "LocationsTable",
        key_prefix: None,
        failures_queue: "ProcessorFailuresQueue",
        min_timeout: 60,
        events: &["processor-locations-stream", "schedule"],
    },
    EventFunction {
        id: "WebhookSenderFunction",
        binary: "webhook-sender",
        package: "processor",
        stream_table: "MainTable",
        key_prefix: Some("WORK#"),
        failures_queue: "WebhookSenderFailuresQueue",
        // Several attempts of one pass may each wait for the whole HTTP timeout.
        min_timeout: 6 * shared::domain::webhooks::deliver::DEFAULT_TIMEOUT_SECONDS,
        events: &["webhook-sender-work-stream", "schedule"],
    },
];

/// Whether `events/<name>.json` is an event of an [`EventFunction`] (not an HTTP API event).
pub fn is_stream_or_schedule_event(name: &str) -> bool {
    EVENT_FUNCTIONS.iter().any(|f| f.events.contains(&name))
}

/// The WebSocket API's function (docs/streams.md, "AWS"): logical id, binary (its package's
/// name too), and the prefix of its events in `events/` (API Gateway WebSocket events).
pub const WS_FUNCTION: (&str, &str, &str) = ("StreamsWsFunction", "streams-ws", "streams-ws-");

/// Whether `events/<name>.json` is an event of the WebSocket API.
pub fn is_websocket_event(name: &str) -> bool {
    name.starts_with(WS_FUNCTION.2)
}

/// The function an event file (`users-create`) belongs to.
pub fn function_of_event(name: &str) -> &'static Function {
    FUNCTIONS
        .iter()
        .filter(|f| name.starts_with(f.event_prefix))
        .max_by_key(|f| f.event_prefix.len())
        .unwrap_or_else(|| panic!("events/{name}.json: name does not start with a function's prefix"))
}

/// A DynamoDB permission: (table logical id, action such as `dynamodb:GetItem`).
pub type Permission = (String, String);

/// What a function's `Policies` allow on the template's tables. Only explicit policy documents
/// are understood (SAM policy templates such as DynamoDBCrudPolicy grant far more than we use).
pub fn allowed(t: &Value, function_id: &str) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    let policies = resource(t, function_id)["Properties"]["Policies"].as_array().cloned().unwrap_or_default();
    for (i, policy) in policies.iter().enumerate() {
        let statements = policy["Statement"]
            .as_array()
            .unwrap_or_else(|| panic!("{function_id}.Policies[{i}]: expected a policy document with Statement"));
        for s in statements {
            assert_eq!(s["Effect"], "Allow", "{function_id}: only Allow statements are expected: {s}");
            let actions = one_or_many(&s["Action"]);
            // The WebSocket API's Management API (checked by `manage_connections`).
            if actions == [json!("execute-api:ManageConnections")] {
                continue;
            }
            for r in one_or_many(&s["Resource"]) {
                let table = match &r["Fn::GetAtt"] {
                    Value::Array(a) if a.len() == 2 && a[1] == "Arn" => a[0].as_str().expect("GetAtt target"),
                    _ => panic!("{function_id}: Resource {r} is not !GetAtt <Table>.Arn"),
                };
                for a in &actions {
                    let a = a.as_str().unwrap_or_else(|| panic!("{function_id}: Action {a}"));
                    out.insert((table.to_owned(), a.to_owned()));
                }
            }
        }
    }
    out
}

/// The `execute-api:ManageConnections` resources a function's policies grant (as written).
pub fn manage_connections(t: &Value, function_id: &str) -> Vec<Value> {
    let policies = resource(t, function_id)["Properties"]["Policies"].as_array().cloned().unwrap_or_default();
    policies
        .iter()
        .flat_map(|p| p["Statement"].as_array().cloned().unwrap_or_default())
        .filter(|s| one_or_many(&s["Action"]) == [json!("execute-api:ManageConnections")])
        .flat_map(|s| one_or_many(&s["Resource"]))
        .collect()
}

fn one_or_many(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        Value::Null => Vec::new(),
        other => vec![other.clone()],
    }
}

// ---------------------------------------------------------------------------------------------
// Routers

/// A router's whole answer.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON (panics on anything else).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("non-JSON body ({}): {}", self.status, String::from_utf8_lossy(&self.body)))
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// Whether this is the answer of `shared::http::service`'s fallbacks (no such path or method)
    /// rather than of a route's handler.
    pub fn is_fallback(&self) -> bool {
        match self.status {
            StatusCode::METHOD_NOT_ALLOWED => true,
            StatusCode::NOT_FOUND => {
                let body: Option<Value> = serde_json::from_slice(&self.body).ok();
                let msg = body.as_ref().and_then(|b| b.get("msg").or_else(|| b.get("description")));
                msg.and_then(Value::as_str).is_some_and(|m| m.contains("no endpoint at"))
            }
            _ => false,
        }
    }
}

/// Send one request through a finished router.
pub async fn send_raw<B>(router: &Router, req: axum::http::Request<B>) -> Reply
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let res = router.clone().oneshot(req.map(Body::new)).await.expect("router is infallible");
    let (parts, body) = res.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Reply { status: parts.status, headers: parts.headers, body }
}

/// Send one request through a finished router; the body must be JSON.
pub async fn send<B>(router: &Router, req: axum::http::Request<B>) -> (StatusCode, Value)
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let reply = send_raw(router, req).await;
    (reply.status, reply.json())
}

// ---------------------------------------------------------------------------------------------
// events/

/// Names of the HTTP API events in `events/` (those of [`FUNCTIONS`]), sorted.
pub fn http_event_names() -> Vec<String> {
    event_names().into_iter().filter(|n| !is_stream_or_schedule_event(n) && !is_websocket_event(n)).collect()
}

/// Names (without `.json`) of the files in `events/`, sorted.
pub fn event_names() -> Vec<String> {
    let dir = workspace_root().join("events");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.file_stem().expect("stem").to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn event_text(name: &str) -> String {
    let path = workspace_root().join("events").join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The placeholders events may carry (`REPLACE_...`). None is a part of another, so they can be
/// filled in any order.
pub const PLACEHOLDERS: &[&str] = &[
    "REPLACE_API_KEY",
    "REPLACE_ACCESS_TOKEN",
    "REPLACE_USER_ID",
    "REPLACE_TRIP_ID",
    "REPLACE_GEOFENCE_ID",
    "REPLACE_SECOND_GEOFENCE_ID",
    "REPLACE_TRACKING_TOKEN",
    "REPLACE_START_DATE",
    "REPLACE_END_DATE",
    "REPLACE_WEBHOOK_ID",
    "REPLACE_SESSION_ID",
    "REPLACE_STREAM_TOKEN_ID",
    "REPLACE_EVENT_ID",
    "REPLACE_PROJECT_ID",
    "REPLACE_KEY_ID",
    "REPLACE_STREAM_TOKEN",
];

/// The event with its placeholders filled in from `values` (placeholder, value); every
/// placeholder it carries must be given one.
pub fn event_with(name: &str, values: &[(&str, &str)]) -> String {
    let mut text = event_text(name);
    for (placeholder, value) in values {
        assert!(PLACEHOLDERS.contains(placeholder), "{placeholder} is not in PLACEHOLDERS");
        text = text.replace(placeholder, value);
    }
    if let Some(left) = PLACEHOLDERS.iter().find(|p| text.contains(**p)) {
        panic!("events/{name}.json: {left} is not filled in (its case's setup does not provide it)");
    }
    assert!(!text.contains("REPLACE_"), "events/{name}.json: a placeholder that is not in PLACEHOLDERS");
    text
}

// ---------------------------------------------------------------------------------------------
// A store that records the DynamoDB actions each call needs

/// Wraps a store and notes, per call, the IAM action DynamoDB would check (a transaction is
/// checked per item: `PutItem` / `DeleteItem`).
#[derive(Clone)]
pub struct Recording {
    inner: Arc<dyn Store>,
    log: Arc<Mutex<BTreeSet<Permission>>>,
    /// DynamoDB actions (each item of a transaction counts) since the last [`Recording::actions`].
    actions: Arc<std::sync::atomic::AtomicUsize>,
}

impl Recording {
    pub fn new(inner: impl Store) -> Self {
        Self { inner: Arc::new(inner), log: Arc::default(), actions: Arc::default() }
    }

    /// How many DynamoDB actions were recorded since the last call, and start afresh.
    pub fn actions(&self) -> usize {
        self.actions.swap(0, std::sync::atomic::Ordering::Relaxed)
    }

    /// What was recorded since the last call, and start afresh.
    pub fn take(&self) -> BTreeSet<Permission> {
        std::mem::take(&mut *self.log.lock().expect("log"))
    }

    fn note(&self, table: Table, action: &str) {
        self.actions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.log.lock().expect("log").insert((table.def().resource.to_owned(), format!("dynamodb:{action}")));
    }
}

#[async_trait]
impl Store for Recording {
    async fn get(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.note(table, "GetItem");
        self.inner.get(table, pk, sk).await
    }
    async fn put(&self, table: Table, item: Item, cond: shared::store::Cond) -> Result<(), StoreError> {
        self.note(table, "PutItem");
        self.inner.put(table, item, cond).await
    }
    async fn delete(&self, table: Table, pk: &str, sk: &str, cond: shared::store::Cond) -> Result<(), StoreError> {
        self.note(table, "DeleteItem");
        self.inner.delete(table, pk, sk, cond).await
    }
    async fn query(&self, table: Table, q: &Query) -> Result<Page, StoreError> {
        self.note(table, "Query");
        self.inner.query(table, q).await
    }
    async fn count(&self, table: Table, pk: &str, range: &SkRange) -> Result<usize, StoreError> {
        self.note(table, "Query");
        self.inner.count(table, pk, range).await
    }
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        for op in &ops {
            match op {
                WriteOp::Put { table, .. } => self.note(*table, "PutItem"),
                WriteOp::Delete { table, .. } => self.note(*table, "DeleteItem"),
                WriteOp::Add { table, .. } => self.note(*table, "UpdateItem"),
                WriteOp::Check { table, .. } => self.note(*table, "ConditionCheckItem"),
            }
        }
        self.inner.transact(ops).await
    }
    async fn put_new(&self, table: Table, items: Vec<Item>) -> Result<Vec<bool>, StoreError> {
        self.note(table, "PutItem");
        self.inner.put_new(table, items).await
    }
    async fn delete_many(&self, table: Table, keys: Vec<(String, String)>) -> Result<(), StoreError> {
        self.note(table, "BatchWriteItem");
        self.inner.delete_many(table, keys).await
    }
    async fn scan_all(&self, table: Table) -> Result<Vec<Item>, StoreError> {
        self.note(table, "Scan");
        self.inner.scan_all(table).await
    }
    async fn ensure_tables(&self) -> Result<(), StoreError> {
        for def in shared::store::TABLES {
            self.note(def.table, "ListTables");
        }
        self.inner.ensure_tables().await
    }
}
