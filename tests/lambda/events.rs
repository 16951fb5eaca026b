//! Every file in `events/` is a well-formed API Gateway HTTP API (payload 2.0) event of a route in
//! template.yaml and, with its placeholders filled in, succeeds through its function's router,
//! parsed exactly as `lambda_http` parses what Lambda delivers. The DynamoDB actions each event
//! needs are checked against the function's policies in template.yaml, both ways.

use std::collections::{BTreeMap, BTreeSet};

use axum::Router;
use axum::http::StatusCode;
use chrono::{Duration, Utc};
use lambda_http::RequestExt;
use lambda_http::request::RequestContext;
use serde_json::{Value, json};
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys, IssuedProject};
use shared::domain::trips::{self, Action, Api, NewTrip, WaypointInput, WaypointKind};
use shared::geometry::LngLat;
use shared::project::{KeyKind, Project};
use shared::store::EmbeddedStore;
use shared::time::Timestamp;

use crate::support::{
    Auth, FUNCTIONS, Function, PLACEHOLDERS, Permission, Recording, Reply, allowed, event_text, event_with,
    function_of_event, http_event_names, send, send_raw, template, template_routes,
};

mod checks;
use checks::{check_data, check_effect, routine};

/// What an event must answer (always HTTP 200): the v1/v3 envelope with its body `code`, the
/// v2 envelope with its `code` and `message`, or (public functions) a body of this content type
/// with the page's security headers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer {
    V1(u16),
    V2(u16, &'static str),
    Public(&'static str),
    /// A file (200) of this content type, asking for a key like any v1 operation.
    File(&'static str),
}

/// What must exist before an event runs (besides the project and a user, which always do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setup {
    Nothing,
    /// The user's location history (events/locations-ingest.json).
    History,
    /// A trip of the user, created and not started (`REPLACE_TRIP_ID`).
    Trip(Api),
    /// A trip of the user started before the history, then the history ingested (so the trip's
    /// summary has a route).
    StartedTrip(Api),
    /// As `StartedTrip(Api::V1)`, with its origin at the history's first fix: ingesting the history
    /// records a trip event caused by a fix (what events/trips-events-list.json lists, with it).
    ReachedTrip,
    /// The user in group `drivers-north` (events/groups-add-put.json).
    Group,
    /// A geofence at the end of the history (events/geofences-v1-create-circle.json,
    /// `REPLACE_GEOFENCE_ID`).
    Fence,
    /// That geofence and a polygon around it (`REPLACE_SECOND_GEOFENCE_ID`).
    TwoFences,
    /// A moving geofence following the user (events/moving-geofences-create.json,
    /// `REPLACE_GEOFENCE_ID`).
    MovingFence,
    /// Three weeks of the user's routine (home at night and at weekends, the office by day on
    /// weekdays, a café on alternate evenings), ingested through the locations function, which
    /// stores the stays insights read (work needs several weeks).
    Routine,
    /// A trip of the user started before the history, the history ingested, and the trip's
    /// tracking token taken from its `trip_tracking_url` (`REPLACE_TRACKING_TOKEN`).
    Tracked,
    /// The user's fence visit: another user parked at the end of the history, a moving geofence
    /// following them, the user's geofence events on (events/users-update.json), the geofence of
    /// `Fence`, then the user's history ingested, which ends inside both fences (two entries).
    Visited,
    /// A webhook endpoint (events/webhooks-create.json, `REPLACE_WEBHOOK_ID`).
    Webhook,
    /// That endpoint and a test event queued for it (events/webhooks-test.json,
    /// `REPLACE_EVENT_ID`).
    WebhookTested,
    /// A console session (events/keys-console-session-open.json, `REPLACE_SESSION_ID`).
    Session,
    /// A stream token for the user (events/keys-stream-token-mint.json, `REPLACE_STREAM_TOKEN_ID`).
    StreamToken,
}

/// Each event, what it must answer, and what it needs first.
struct Case {
    name: &'static str,
    answer: Answer,
    setup: Setup,
}

const fn case(name: &'static str, answer: Answer, setup: Setup) -> Case {
    Case { name, answer, setup }
}

use Answer::{File, Public, V1, V2};
use Setup::{
    Fence, Group, History, MovingFence, Nothing, ReachedTrip, Routine, Session, StartedTrip, StreamToken, Tracked,
    Trip, TwoFences, Visited, Webhook, WebhookTested,
};

const CASES: &[Case] = &[
    case("users-create", V1(201), Nothing),
    case("users-list", V1(200), Nothing),
    case("users-get", V1(200), Nothing),
    case("users-update", V1(200), Nothing),
    case("users-delete", V1(200), History),
    case("locations-ingest", V1(201), Nothing),
    case("locations-list", V1(200), History),
    case("locations-list-encoded", V1(200), History),
    case("groups-add-put", V1(201), Nothing),
    case("groups-add-post", V1(201), Nothing),
    case("groups-create", V1(201), Nothing),
    case("trips-v1-create", V1(201), Nothing),
    case("trips-v1-list", V1(200), Trip(Api::V1)),
    case("trips-v1-get", V1(200), Trip(Api::V1)),
    case("trips-v1-update", V1(201), Trip(Api::V1)),
    case("trips-v1-summary", V1(200), StartedTrip(Api::V1)),
    case("trips-v1-controls", V1(200), Trip(Api::V1)),
    case("trips-v1-quick", V1(201), Nothing),
    case("trips-v3-create", V1(201), Nothing),
    case("trips-v3-list", V1(200), Trip(Api::V1)),
    case("trips-v3-get", V1(200), Trip(Api::V1)),
    case("trips-v3-update", V1(201), Trip(Api::V1)),
    case("trips-v3-delete", V1(200), Trip(Api::V1)),
    case("trips-v1-delete", V1(200), Trip(Api::V1)),
    case("trips-v3-summary", V1(200), StartedTrip(Api::V1)),
    case("trips-v3-controls", V1(200), Trip(Api::V1)),
    case("trips-v3-quick", V1(201), Nothing),
    case("trips-v1-revoke-link", V1(200), Trip(Api::V2)),
    case("settings-get", V1(200), Nothing),
    case("settings-update", V1(200), Nothing),
    case("trips-v2-create", V2(201, "trip_created"), Nothing),
    case("trips-v2-list", V2(200, "trip_list_success"), Trip(Api::V2)),
    case("trips-v2-get", V2(200, "trip_object"), Trip(Api::V2)),
    case("trips-v2-update", V2(200, "trip_updated"), Trip(Api::V2)),
    case("trips-v2-delete", V2(200, "trip_deleted"), Trip(Api::V2)),
    case("trips-v2-summary", V2(200, "trip_summary"), StartedTrip(Api::V2)),
    case("trips-v2-controls", V2(201, "trip_started"), Trip(Api::V2)),
    case("locations-ingest-fenced", V1(201), Visited),
    case("geofences-v1-create-circle", V1(201), Nothing),
    case("geofences-v3-create-polygon", V1(201), Nothing),
    case("geofences-v1-create-scoped", V1(201), Group),
    case("geofences-v1-update", V1(200), Fence),
    case("geofences-v3-update", V1(200), Fence),
    case("geofences-v1-list", V1(200), Fence),
    case("geofences-v3-list", V1(200), Visited),
    case("geofences-v1-list-metadata", V1(200), Fence),
    case("geofences-v1-delete-query", V1(200), Fence),
    case("geofences-v1-delete-body", V1(200), Fence),
    case("geofences-v3-delete-array", V1(200), TwoFences),
    case("geofences-events-list", V1(200), Visited),
    case("search-by-location", V1(200), Fence),
    case("search-by-user", V1(200), Visited),
    case("search-users", V1(200), Visited),
    case("locations-gpx", File("application/gpx+xml"), History),
    case("trips-v1-gpx", File("application/gpx+xml"), StartedTrip(Api::V1)),
    case("trips-events-list", V1(200), ReachedTrip),
    case("trips-v3-gpx", File("application/gpx+xml"), StartedTrip(Api::V1)),
    case("trips-v1-export", V1(200), StartedTrip(Api::V1)),
    case("trips-v3-export", V1(200), StartedTrip(Api::V1)),
    case("tracking-gpx", Public("application/gpx+xml"), Tracked),
    case("moving-geofences-create", V1(201), Nothing),
    case("moving-geofences-update", V1(200), MovingFence),
    case("moving-geofences-list", V1(200), MovingFence),
    case("moving-geofences-delete", V1(200), MovingFence),
    case("insights-home", V1(200), Routine),
    case("insights-work", V1(200), Routine),
    case("insights-poi", V1(200), Routine),
    case("moving-geofences-v1-create", V1(201), Nothing),
    case("moving-geofences-v1-update", V1(200), MovingFence),
    case("moving-geofences-v1-list", V1(200), MovingFence),
    case("moving-geofences-v1-delete", V1(200), MovingFence),
    case("insights-v1-home", V1(200), Routine),
    case("insights-v1-work", V1(200), Routine),
    case("insights-v1-poi", V1(200), Routine),
    case("tracking-page", Public("text/html"), Tracked),
    case("tracking-data", Public("application/json"), Tracked),
    case("tracking-asset", Public("text/javascript"), Nothing),
    case("webhooks-create", V1(201), Nothing),
    case("webhooks-list", V1(200), Webhook),
    case("webhooks-get", V1(200), Webhook),
    case("webhooks-update", V1(200), Webhook),
    case("webhooks-delete", V1(200), Webhook),
    case("webhooks-rotate-secret", V1(200), Webhook),
    case("webhooks-test", V1(201), Webhook),
    case("webhooks-deliveries", V1(200), WebhookTested),
    case("webhooks-replay", V1(200), WebhookTested),
    case("keys-list", V1(200), Nothing),
    case("keys-create", V1(201), Nothing),
    case("keys-revoke", V1(200), Nothing),
    case("keys-console-session-open", V1(201), Nothing),
    case("keys-console-session-end", V1(200), Session),
    case("keys-stream-token-mint", V1(201), Nothing),
    case("keys-stream-token-revoke", V1(200), StreamToken),
    case("search-users-in-view", V1(200), Visited),
    case("search-geofences-in-view", V1(200), Fence),
    case("console-page", Public("text/html"), Nothing),
    case("console-asset", Public("text/javascript"), Nothing),
];

/// Permissions a function needs on paths none of the events takes: (function, table, action, why).
/// Each must be granted and must stay unused by the events (else drop it from this list).
/// (LocationsFunction's DeleteItem on MainTable, once listed here, is taken by
/// events/locations-ingest-fenced.json: leaving a fence deletes the user's state item, and moving
/// to another index cell deletes the user's position item there.)
const BEYOND_EVENTS: &[(&str, &str, &str, &str)] = &[
    // The first use of a key in an hour notes `last_used_at`; the fixtures' setups have used the
    // key just before, so these read-only functions' events never need to.
    ("SearchFunction", "MainTable", "dynamodb:PutItem", "a key's last_used_at, hourly"),
    ("InsightsFunction", "MainTable", "dynamodb:PutItem", "a key's last_used_at, hourly"),
    // Only for a user whose stays predate the places aggregate: the first request builds it from
    // them (domain::insights::aggregate); the routine's ingest has built it already.
    ("InsightsFunction", "MainTable", "dynamodb:Query", "stays read once to build a missing aggregate"),
    // Only in a project made before each user's list of trips: its first list by user enters
    // the trips, each conditional on the trip as read (trips::by_user).
    ("TripsFunction", "MainTable", "dynamodb:ConditionCheckItem", "trips entered in their users' lists, once"),
    ("TripsV2Function", "MainTable", "dynamodb:ConditionCheckItem", "trips entered in their users' lists, once"),
    // Only when an ingest raced an erasure: its processing pass deletes the fixes it stored.
    ("LocationsFunction", "LocationsTable", "dynamodb:BatchWriteItem", "fixes stored for an erased user"),
];

/// Actions a function takes on a share of its calls, drawn at random, so an event may or may not
/// show them: granted, never required of a run, allowed in one.
const NOW_AND_THEN: &[(&str, &str, &str, &str)] = &[
    // history_pages::deltas: a writer folds a bucket's finished deltas in one write in eight.
    ("LocationsFunction", "LocationsTable", "dynamodb:DeleteItem", "count deltas folded, 1 write in 8"),
];

/// Locations in events/locations-ingest.json (and in events/locations-ingest-fenced.json).
const INGESTED: u64 = 3;

#[test]
fn every_event_file_is_covered() {
    // Stream and schedule events are the event functions' (tests/lambda/streams.rs).
    let files: BTreeSet<String> = http_event_names().into_iter().collect();
    let cases: BTreeSet<String> = CASES.iter().map(|c| c.name.to_owned()).collect();
    assert_eq!(files, cases, "HTTP API events in events/ vs CASES in tests/lambda/events.rs");
}

#[test]
fn events_are_http_api_events_of_template_routes() {
    let t = template();
    let mut covered: BTreeMap<&str, BTreeSet<(String, String)>> = BTreeMap::new();
    for name in http_event_names() {
        let text = event_text(&name);
        let f = function_of_event(&name);
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("events/{name}.json: {e}"));
        let ctx = &v["requestContext"];
        let method = ctx["http"]["method"].as_str().unwrap_or_else(|| panic!("{name}: requestContext.http.method"));
        let path = v["rawPath"].as_str().unwrap_or_else(|| panic!("{name}: rawPath"));
        // The route key names the route as declared (`/v2/trips/{id}/`); rawPath is that route
        // with `pathParameters` filled in.
        let route_key = v["routeKey"].as_str().unwrap_or_else(|| panic!("{name}: routeKey"));
        let route_path = route_key
            .strip_prefix(method)
            .and_then(|r| r.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{name}: routeKey '{route_key}' is not '{method} <path>'"));
        let params: BTreeMap<String, String> = match v.get("pathParameters") {
            None => BTreeMap::new(),
            Some(p) => serde_json::from_value(p.clone()).unwrap_or_else(|e| panic!("{name}: pathParameters: {e}")),
        };
        let names: BTreeSet<&str> =
            route_path.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect();
        assert_eq!(
            names,
            params.keys().map(String::as_str).collect::<BTreeSet<_>>(),
            "{name}: pathParameters vs the parameters of {route_path}"
        );
        let filled = params.iter().fold(route_path.to_owned(), |p, (k, val)| p.replace(&format!("{{{k}}}"), val));
        assert_eq!(filled, path, "{name}: rawPath vs routeKey with pathParameters filled in");
        assert_eq!(v["version"], "2.0", "{name}: payload version");
        assert_eq!(ctx["routeKey"], route_key, "{name}: requestContext.routeKey");
        assert_eq!(ctx["http"]["path"], path, "{name}: requestContext.http.path");
        assert_eq!(ctx["stage"], "$default", "{name}: the HTTP API's stage");
        assert_eq!(v["isBase64Encoded"], false, "{name}: isBase64Encoded");
        let headers = &v["headers"];
        match f.auth {
            Auth::ApiKey => {
                assert_eq!(headers["api-key"], "REPLACE_API_KEY", "{name}: api-key header placeholder");
                assert!(headers.get("authorization").is_none(), "{name}: {} takes no Authorization", f.id);
            }
            Auth::Bearer => {
                assert_eq!(
                    headers["authorization"], "Bearer REPLACE_ACCESS_TOKEN",
                    "{name}: authorization header placeholder"
                );
                assert!(headers.get("api-key").is_none(), "{name}: {} takes no Api-Key", f.id);
            }
            Auth::Public => {
                for h in ["api-key", "authorization"] {
                    assert!(headers.get(h).is_none(), "{name}: {} is public, a browser sends no {h}", f.id);
                }
            }
        }
        let unknown = PLACEHOLDERS.iter().fold(text.clone(), |t, p| t.replace(p, ""));
        assert!(!unknown.contains("REPLACE_"), "{name}: a placeholder that is not one of {PLACEHOLDERS:?}");
        let query = v["rawQueryString"].as_str().unwrap_or_else(|| panic!("{name}: rawQueryString"));
        if !query.is_empty() {
            let parsed: BTreeMap<String, String> = serde_urlencoded::from_str(query).expect("query");
            let given: BTreeMap<String, String> = serde_json::from_value(v["queryStringParameters"].clone())
                .unwrap_or_else(|e| panic!("{name}: queryStringParameters: {e}"));
            assert_eq!(parsed, given, "{name}: queryStringParameters vs rawQueryString");
        }
        // POST and PUT carry a JSON body; DELETE may (geofences take ids in the body); GET not.
        match (method, v.get("body")) {
            ("POST" | "PUT", _) | ("DELETE", Some(_)) => {
                let body = v["body"].as_str().unwrap_or_else(|| panic!("{name}: body must be a string"));
                serde_json::from_str::<Value>(body).unwrap_or_else(|e| panic!("{name}: body is not JSON: {e}"));
                assert_eq!(headers["content-type"], "application/json", "{name}: content-type");
            }
            (_, body) => assert!(body.is_none(), "{name}: a {method} event carries no body"),
        }

        let req = lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{name}: lambda_http: {e}"));
        assert!(
            matches!(req.request_context_ref(), Some(RequestContext::ApiGatewayV2(_))),
            "{name}: lambda_http did not read it as an HTTP API event"
        );
        assert_eq!(req.method().as_str(), method, "{name}");
        assert_eq!(req.uri().path(), path, "{name}");
        for (k, val) in &params {
            assert_eq!(req.path_parameters_ref().and_then(|p| p.first(k)), Some(val.as_str()), "{name}: {k}");
        }

        let route = (method.to_owned(), route_path.to_owned());
        assert!(
            template_routes(&t, f.id).contains(&route),
            "{name}: {route_key} is not a route of {} in template.yaml",
            f.id
        );
        covered.entry(f.id).or_default().insert(route);
    }
    // One event per operation at least, in either spelling (the tracking page's link and the
    // data it polls have no trailing slash).
    for f in FUNCTIONS {
        for (m, p) in template_routes(&t, f.id) {
            let bare = p.trim_end_matches('/');
            let spellings = [p.clone(), bare.to_owned(), format!("{bare}/")];
            assert!(
                covered.get(f.id).is_some_and(|c| spellings.iter().any(|p| c.contains(&(m.clone(), p.clone())))),
                "{}: no event in events/ for {m} {p}",
                f.id
            );
        }
    }
}

/// When the trips of `Setup::StartedTrip` start: before the first fix of the ingested history
/// (2024-05-01T10:00:00.000).
const STARTED_AT: &str = "2024-05-01T09:59:00.000";

/// A project on a recording in-memory store, with one user created through the users function.
pub(crate) struct Fixture {
    pub(crate) state: AppState,
    pub(crate) store: Recording,
    pub(crate) project: IssuedProject,
    pub(crate) user_id: String,
    pub(crate) trip_id: Option<String>,
    geofence_id: Option<String>,
    second_geofence_id: Option<String>,
    tracking_token: Option<String>,
    pub(crate) webhook_id: Option<String>,
    event_id: Option<String>,
    session_id: Option<String>,
    stream_token_id: Option<String>,
}

impl Fixture {
    pub(crate) async fn new() -> Self {
        let store = Recording::new(EmbeddedStore::memory().expect("in-memory store"));
        let state = AppState::new(store.clone());
        let project =
            projects::create(state.store.as_ref(), "lambda-events", &ChosenKeys::default()).await.expect("project");
        let mut fx = Self {
            state,
            store,
            project,
            user_id: "REPLACE_USER_ID".into(),
            trip_id: None,
            geofence_id: None,
            second_geofence_id: None,
            tracking_token: None,
            webhook_id: None,
            event_id: None,
            session_id: None,
            stream_token_id: None,
        };
        let body = fx.ok("users-create", V1(201)).await;
        fx.user_id = body["data"]["user_id"].as_str().expect("user_id").to_owned();
        fx
    }

    /// The project as its keys resolve it.
    pub(crate) fn caller(&self) -> Project {
        Project {
            project_id: self.project.project_id.clone(),
            account_id: self.project.account_id.clone(),
            kind: KeyKind::Secret,
        }
    }

    pub(crate) async fn setup(&mut self, setup: Setup) {
        let (api, started) = match setup {
            Setup::Nothing => return,
            Setup::History => {
                self.ok("locations-ingest", V1(201)).await;
                return;
            }
            Setup::Trip(api) => (api, false),
            Setup::StartedTrip(api) => (api, true),
            Setup::ReachedTrip => (Api::V1, true),
            Setup::Group => {
                self.ok("groups-add-put", V1(201)).await;
                return;
            }
            Setup::Fence => {
                self.geofence_id = Some(self.created("geofences-v1-create-circle").await);
                return;
            }
            Setup::TwoFences => {
                self.geofence_id = Some(self.created("geofences-v1-create-circle").await);
                self.second_geofence_id = Some(self.created("geofences-v3-create-polygon").await);
                return;
            }
            Setup::MovingFence => {
                self.geofence_id = Some(self.created("moving-geofences-create").await);
                return;
            }
            Setup::Routine => {
                let fixes = routine();
                for batch in fixes.chunks(shared::domain::locations::MAX_BATCH) {
                    let body = self.ingest(batch).await;
                    assert_eq!(body["data"]["stored"], batch.len(), "setup: ingest: {body}");
                }
                return;
            }
            Setup::Tracked => (Api::V1, true),
            Setup::Webhook | Setup::WebhookTested => {
                let body = self.ok("webhooks-create", V1(201)).await;
                self.webhook_id = Some(body["data"]["webhook_id"].as_str().expect("webhook_id").to_owned());
                if setup == Setup::WebhookTested {
                    let body = self.ok("webhooks-test", V1(201)).await;
                    self.event_id = Some(body["data"]["event_id"].as_str().expect("event_id").to_owned());
                    self.park_deliveries().await;
                }
                return;
            }
            Setup::Session => {
                let body = self.ok("keys-console-session-open", V1(201)).await;
                self.session_id = Some(body["data"]["session_id"].as_str().expect("session_id").to_owned());
                return;
            }
            Setup::StreamToken => {
                let body = self.ok("keys-stream-token-mint", V1(201)).await;
                self.stream_token_id = Some(body["data"]["token_id"].as_str().expect("token_id").to_owned());
                return;
            }
            Setup::Visited => {
                let other = self.ok("users-create", V1(201)).await["data"]["user_id"].as_str().expect("id").to_owned();
                let user = std::mem::replace(&mut self.user_id, other);
                self.ok("locations-ingest", V1(201)).await;
                self.created("moving-geofences-create").await;
                self.user_id = user;
                self.ok("users-update", V1(200)).await;
                self.geofence_id = Some(self.created("geofences-v1-create-circle").await);
                self.ok("locations-ingest", V1(201)).await;
                return;
            }
        };
        let store = self.state.store.as_ref();
        let p = self.caller();
        let origin = (setup == Setup::ReachedTrip).then(|| WaypointInput {
            kind: WaypointKind::Origin,
            coordinates: LngLat { lng: -0.1276, lat: 51.5072 },
            radius_m: None,
            name: None,
            description: None,
            metadata: None,
            address: None,
        });
        let new = NewTrip {
            user_id: Some(self.user_id.clone()),
            waypoints: origin.into_iter().collect(),
            ..NewTrip::default()
        };
        let trip = trips::create(store, &p, api, new).await.expect("setup: create trip");
        if started {
            let at: Timestamp = serde_json::from_value(json!(STARTED_AT)).expect("timestamp");
            trips::control(store, &p, api, &trip.id, Action::Start, Some(at)).await.expect("setup: start trip");
        }
        self.trip_id = Some(trip.id);
        if started {
            self.ok("locations-ingest", V1(201)).await;
        }
        if setup == Setup::Tracked {
            // The token as the link carries it: <TrackingBaseUrl>/<token>.
            let body = self.ok("trips-v1-get", V1(200)).await;
            let url = body["data"][0]["trip_tracking_url"].as_str().expect("trip_tracking_url");
            let token = url.rsplit('/').next().expect("token").to_owned();
            assert_eq!(token, trip.tracking_token, "trip_tracking_url {url} does not end with the trip's token");
            self.tracking_token = Some(token);
        }
    }

    /// The endpoint's queued deliveries taken into its log as the sender does for a disabled
    /// endpoint (pending, no attempt, no request to its URL), and the endpoint enabled again.
    async fn park_deliveries(&self) {
        use shared::domain::webhooks::{self, deliver};
        let (store, p) = (self.state.store.as_ref(), self.caller());
        let wh = self.webhook_id.clone().expect("webhook");
        let enable = |on: bool| {
            webhooks::modify(store, &p, &wh, move |e| {
                e.enabled = on;
                Ok(())
            })
        };
        enable(false).await.expect("disable");
        let cfg = deliver::DeliveryConfig {
            schedule: vec![std::time::Duration::from_secs(60)],
            timeout: std::time::Duration::from_secs(1),
            disable_after: std::time::Duration::from_secs(3600),
            allow_private: false,
        };
        deliver::Worker::new(self.state.store.clone(), cfg).expect("worker").run_once().await.expect("park");
        enable(true).await.expect("enable");
    }

    /// Ingest `locations` for the user through events/locations-ingest.json with its body
    /// replaced, as the SDK would send a batch.
    async fn ingest(&self, locations: &[Value]) -> Value {
        let text = self.filled("locations-ingest");
        let mut event: Value = serde_json::from_str(&text).expect("event");
        event["body"] = json!(json!({"user_id": self.user_id, "locations": locations}).to_string());
        let req = lambda_http::request::from_str(&event.to_string()).expect("lambda_http");
        let (status, body) = send(&self.router(function_of_event("locations-ingest")), req).await;
        assert_eq!(status, StatusCode::CREATED, "setup: ingest: {body}");
        body
    }

    /// Run a create event; the id it answers.
    async fn created(&self, name: &str) -> String {
        let body = self.ok(name, V1(201)).await;
        // v1 geofences answer `geofence_id` (as Roam's), everything else `id`.
        let d = &body["data"];
        d["id"]
            .as_str()
            .or_else(|| d["geofence_id"].as_str())
            .unwrap_or_else(|| panic!("{name}: no id: {body}"))
            .to_owned()
    }

    fn router(&self, f: &Function) -> Router {
        shared::http::service((f.router)(), self.state.clone())
    }

    /// events/<name>.json with its placeholders filled in.
    fn filled(&self, name: &str) -> String {
        let today = Utc::now().date_naive();
        let (start, end) = ((today - Duration::days(1)).to_string(), (today + Duration::days(1)).to_string());
        // The key a revocation takes: the fixture's publishable key.
        let key_id = shared::domain::keys::key_id(&shared::domain::keys::hash_secret(&self.project.publishable_key));
        let mut values = vec![
            ("REPLACE_KEY_ID", key_id.as_str()),
            ("REPLACE_API_KEY", self.project.api_key.as_str()),
            ("REPLACE_ACCESS_TOKEN", self.project.access_token.as_str()),
            ("REPLACE_USER_ID", self.user_id.as_str()),
            ("REPLACE_START_DATE", start.as_str()),
            ("REPLACE_END_DATE", end.as_str()),
        ];
        for (placeholder, value) in [
            ("REPLACE_TRIP_ID", &self.trip_id),
            ("REPLACE_GEOFENCE_ID", &self.geofence_id),
            ("REPLACE_SECOND_GEOFENCE_ID", &self.second_geofence_id),
            ("REPLACE_TRACKING_TOKEN", &self.tracking_token),
            ("REPLACE_WEBHOOK_ID", &self.webhook_id),
            ("REPLACE_EVENT_ID", &self.event_id),
            ("REPLACE_SESSION_ID", &self.session_id),
            ("REPLACE_STREAM_TOKEN_ID", &self.stream_token_id),
        ] {
            if let Some(v) = value {
                values.push((placeholder, v.as_str()));
            }
        }
        event_with(name, &values)
    }

    /// Feed events/<name>.json to its function's router, as Lambda would.
    async fn run(&self, name: &str) -> Reply {
        let text = self.filled(name);
        let req = lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{name}: lambda_http: {e}"));
        send_raw(&self.router(function_of_event(name)), req).await
    }

    /// Run an event that must succeed; its body (JSON, or a public function's text as a string).
    pub(crate) async fn ok(&self, name: &str, answer: Answer) -> Value {
        let reply = self.run(name).await;
        // Every answer names its request by API Gateway's id (what its logs carry).
        let sent: Value = serde_json::from_str(&self.filled(name)).unwrap();
        if let Some(id) = sent["requestContext"]["requestId"].as_str() {
            assert_eq!(reply.header("x-request-id"), id, "{name}: x-request-id");
        }
        if let Public(content_type) = answer {
            let text = String::from_utf8_lossy(&reply.body).into_owned();
            assert_eq!(reply.status, StatusCode::OK, "{name}: {text}");
            let ty = reply.header("content-type");
            assert!(ty.starts_with(content_type), "{name}: content-type {ty}, not {content_type}");
            // What every answer of the public function carries (docs/tracking-page.md).
            for (h, want) in [("referrer-policy", "no-referrer"), ("x-content-type-options", "nosniff")] {
                assert_eq!(reply.header(h), want, "{name}: {h}");
            }
            assert!(reply.header("content-security-policy").contains("default-src 'none'"), "{name}: CSP");
            return if content_type == "application/json" { reply.json() } else { Value::String(text) };
        }
        if let File(content_type) = answer {
            let text = String::from_utf8_lossy(&reply.body).into_owned();
            assert_eq!(reply.status, StatusCode::OK, "{name}: {text}");
            let ty = reply.header("content-type");
            assert!(ty.starts_with(content_type), "{name}: content-type {ty}, not {content_type}");
            return Value::String(text);
        }
        let (status, body) = (reply.status, reply.json());
        assert_eq!(Value::from(status.as_u16()), body["code"], "{name}: the HTTP status is the body's code: {body}");
        match answer {
            V1(code) => {
                assert_eq!(body["status"], true, "{name}: {body}");
                assert_eq!(body["code"], code, "{name}: {body}");
            }
            V2(code, message) => {
                assert_eq!(body["code"], code, "{name}: {body}");
                assert_eq!(body["message"], message, "{name}: {body}");
                assert!(body["description"].is_string(), "{name}: description: {body}");
                assert!(body.get("status").is_none(), "{name}: the v2 envelope has no status: {body}");
            }
            Public(_) | File(_) => unreachable!("answered above"),
        }
        body
    }
}

#[tokio::test]
async fn every_event_succeeds_through_its_function_within_its_policy() {
    let t = template();
    let mut used: BTreeMap<&str, BTreeSet<Permission>> = BTreeMap::new();
    for case in CASES {
        let f = function_of_event(case.name);
        let kind = |a: Answer| match a {
            V1(_) | File(_) => Auth::ApiKey,
            V2(..) => Auth::Bearer,
            Public(_) => Auth::Public,
        };
        assert_eq!(kind(case.answer), f.auth, "{}: {} answers as {:?} functions do", case.name, f.id, f.auth);
        let mut fx = Fixture::new().await;
        fx.setup(case.setup).await;
        fx.store.take();
        let body = fx.ok(case.name, case.answer).await;
        let data = match case.answer {
            V1(_) => &body["data"],
            V2(..) | Public(_) | File(_) => &body,
        };
        check_data(case.name, &fx, data);

        let needed = fx.store.take();
        check_effect(case.name, &fx).await;
        let granted = allowed(&t, f.id);
        let missing: Vec<&Permission> = needed.difference(&granted).collect();
        assert!(missing.is_empty(), "{}: {} needs {missing:?}, which template.yaml does not grant", case.name, f.id);
        used.entry(f.id).or_default().extend(needed);
    }
    for f in FUNCTIONS {
        let granted = allowed(&t, f.id);
        let mut needed = used.remove(f.id).unwrap_or_default();
        for (id, table, action, why) in BEYOND_EVENTS.iter().filter(|b| b.0 == f.id) {
            let p = (table.to_string(), action.to_string());
            assert!(
                granted.contains(&p),
                "{id}: BEYOND_EVENTS lists {p:?} ({why}), which template.yaml does not grant"
            );
            assert!(!needed.contains(&p), "{id}: {p:?} is used by an event now: drop it from BEYOND_EVENTS");
            needed.insert(p);
        }
        for (id, table, action, why) in NOW_AND_THEN.iter().filter(|b| b.0 == f.id) {
            let p = (table.to_string(), action.to_string());
            assert!(granted.contains(&p), "{id}: NOW_AND_THEN lists {p:?} ({why}), which template.yaml does not grant");
            needed.insert(p);
        }
        let unused: Vec<&Permission> = granted.difference(&needed).collect();
        assert!(
            unused.is_empty(),
            "{}: template.yaml grants {unused:?}, which none of its events uses (least privilege: drop it, \
             or add an event in events/ that needs it)",
            f.id
        );
    }
}
