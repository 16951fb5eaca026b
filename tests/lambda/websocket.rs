//! Live streams on AWS (docs/streams.md, "AWS"): the WebSocket API's function fed the API Gateway
//! WebSocket events of `events/streams-ws-*.json` on a recording store (its DynamoDB actions held
//! to its policy both ways), and the fan-out of committed messages: a local HTTP server stands in
//! for the Management API endpoint and receives the `PostToConnection` calls the SDK makes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use shared::apigw::SignedApi;
use shared::domain::locations::{self, Location};
use shared::domain::projects::{self, ChosenKeys};
use shared::domain::streams::connections;
use shared::domain::streams::{Filter, protocol, tokens};
use shared::domain::trips::{self, Api, NewTrip};
use shared::store::{Store, Table};

use crate::events::{Answer::V1, Fixture, Setup};
use crate::streams::within_policy;
use crate::support::{WS_FUNCTION, event_names, event_text, event_with, manage_connections, resource, template};

/// What the stand-in endpoint received: (method, connection id, body, Authorization header).
#[derive(Debug, Clone)]
struct Call {
    method: &'static str,
    connection: String,
    body: String,
    authorization: String,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// A Management API endpoint on loopback: `POST /@connections/{id}` and
/// `DELETE /@connections/{id}`, answering 410 Gone for the connections in `gone`.
async fn management_api(gone: &[&str]) -> (String, Calls) {
    let calls: Calls = Arc::default();
    let gone: Arc<BTreeSet<String>> = Arc::new(gone.iter().map(|g| g.to_string()).collect());
    let record = |method: &'static str| {
        let (calls, gone) = (calls.clone(), gone.clone());
        move |Path(id): Path<String>, headers: HeaderMap, body: String| {
            let (calls, gone) = (calls.clone(), gone.clone());
            async move {
                let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                calls.lock().expect("calls").push(Call { method, connection: id.clone(), body, authorization });
                if gone.contains(&id) {
                    return (StatusCode::GONE, r#"{"message":"Gone"}"#);
                }
                (StatusCode::OK, "{}")
            }
        }
    };
    let app =
        axum::Router::new().route("/@connections/{id}", axum::routing::post(record("POST")).delete(record("DELETE")));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (format!("http://{addr}"), calls)
}

fn poster(url: &str) -> SignedApi {
    SignedApi::with_credentials(url, "us-east-1", "AKIDWAYMARKTEST", "waymark-test-secret")
}

/// A Management API that answers every connection, its signer, and a fixture whose user has a
/// trip (what most WebSocket events need first).
async fn on_a_trip() -> (Calls, SignedApi, Fixture) {
    let (url, calls) = management_api(&[]).await;
    let mut fx = Fixture::new().await;
    fx.setup(Setup::Trip(Api::V1)).await;
    (calls, poster(&url), fx)
}

/// Take what the endpoint received so far.
fn take(calls: &Calls) -> Vec<Call> {
    std::mem::take(&mut *calls.lock().expect("calls"))
}

/// The frames posted to one connection, as JSON.
fn frames_to(calls: &[Call], connection: &str) -> Vec<Value> {
    calls
        .iter()
        .filter(|c| c.method == "POST" && c.connection == connection)
        .map(|c| serde_json::from_str(&c.body).unwrap_or_else(|e| panic!("frame is not JSON ({e}): {}", c.body)))
        .collect()
}

/// events/<name>.json filled in, for connection `conn`, its body replaced when `body` is given.
fn ws_event(name: &str, values: &[(&str, &str)], conn: &str, body: Option<Value>) -> ApiGatewayWebsocketProxyRequest {
    let mut v: Value = serde_json::from_str(&event_with(name, values)).expect("event JSON");
    v["requestContext"]["connectionId"] = json!(conn);
    if let Some(b) = body {
        v["body"] = json!(b.to_string());
    }
    serde_json::from_value(v).unwrap_or_else(|e| panic!("events/{name}.json: not a WebSocket event: {e}"))
}

/// Connect with the secret key (events/streams-ws-connect-key.json) as `conn`.
async fn connect_key(fx: &Fixture, api: &SignedApi, conn: &str, key: &str) -> Value {
    let e = ws_event("streams-ws-connect-key", &[("REPLACE_API_KEY", key)], conn, None);
    streams_ws::handle(fx.store_ref(), api, e).await
}

async fn send(fx: &Fixture, api: &SignedApi, conn: &str, body: Value) -> Value {
    let e = ws_event("streams-ws-subscribe", &[("REPLACE_USER_ID", &fx.user_id)], conn, Some(body));
    streams_ws::handle(fx.store_ref(), api, e).await
}

impl Fixture {
    fn store_ref(&self) -> &dyn Store {
        &self.store
    }
}

#[test]
fn websocket_api_routes_every_event_to_its_function() {
    let t = template();
    let api = resource(&t, "StreamsWebSocketApi");
    assert_eq!(api["Type"], "AWS::ApiGatewayV2::Api");
    assert_eq!(api["Properties"]["ProtocolType"], "WEBSOCKET");
    assert_eq!(api["Properties"]["RouteSelectionExpression"], "$request.body.action");
    let routes: BTreeSet<String> = crate::support::resources_of(&t, "AWS::ApiGatewayV2::Route")
        .iter()
        .map(|(id, r)| {
            assert_eq!(r["Properties"]["Target"], json!({"Fn::Sub": "integrations/${StreamsWsIntegration}"}), "{id}");
            r["Properties"]["RouteKey"].as_str().expect("RouteKey").to_owned()
        })
        .collect();
    let want: BTreeSet<String> =
        ["$connect", "$disconnect", "$default", "subscribe", "unsubscribe"].map(String::from).into();
    assert_eq!(routes, want);
    let uri = resource(&t, "StreamsWsIntegration")["Properties"]["IntegrationUri"]["Fn::Sub"].as_str().expect("Sub");
    assert!(uri.contains("${StreamsWsFunction.Arn}"), "{uri}");
    assert_eq!(resource(&t, "StreamsWsPermission")["Properties"]["FunctionName"], json!({"Ref": WS_FUNCTION.0}));
    // Every events file of the WebSocket API is one of the function's events.
    let names: Vec<String> = event_names().into_iter().filter(|n| n.starts_with(WS_FUNCTION.2)).collect();
    assert_eq!(names.len(), 5, "{names:?}");
    for n in names {
        let v: Value = serde_json::from_str(&event_text(&n)).expect("JSON");
        let route = v["requestContext"]["routeKey"].as_str().unwrap_or_default();
        assert!(want.contains(route), "{n}: routeKey {route}");
    }

    // Whatever commits messages posts them (and may hang up a revoked token's connection); the
    // WebSocket function posts only. The endpoint is the stage's, in every one of them.
    let endpoint = json!({"Fn::Sub": "https://${StreamsWebSocketApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}/v1"});
    let arn = |m: &str| json!({"Fn::Sub": format!("arn:${{AWS::Partition}}:execute-api:${{AWS::Region}}:${{AWS::AccountId}}:${{StreamsWebSocketApi}}/v1/{m}/@connections/*")});
    let committers = [
        ("LocationsFunction", "functions/locations/src/main.rs"),
        ("TripsFunction", "functions/trips/src/main.rs"),
        ("TripsV2Function", "functions/trips-v2/src/main.rs"),
        ("ProcessorFunction", "functions/processor/src/bin/processor.rs"),
    ];
    for (id, main) in committers {
        let vars = &resource(&t, id)["Properties"]["Environment"]["Variables"];
        assert_eq!(vars["WAYMARK_WS_ENDPOINT"], endpoint, "{id}");
        assert_eq!(manage_connections(&t, id), vec![arn("POST"), arn("DELETE")], "{id}");
        let src = std::fs::read_to_string(crate::support::workspace_root().join(main)).expect(main);
        assert!(src.contains("shared::lambda::post_streams_from_env()"), "{main}: installs the fan-out");
    }
    let vars = &resource(&t, WS_FUNCTION.0)["Properties"]["Environment"]["Variables"];
    assert_eq!(vars["WAYMARK_WS_ENDPOINT"], endpoint);
    assert_eq!(manage_connections(&t, WS_FUNCTION.0), vec![arn("POST")]);
}

#[tokio::test]
async fn websocket_events_are_answered_within_the_function_policy() {
    let (calls, api, fx) = on_a_trip().await;
    let (store, p) = (fx.state.store.clone(), fx.caller());
    fx.store.take();

    // $connect with the secret key, a subscription to the user, its end, $disconnect.
    let conn = "L0SM9cOFvHcCIhw=";
    assert_eq!(connect_key(&fx, &api, conn, &fx.project.api_key).await, json!({"statusCode": 200}));
    let c = connections::get(store.as_ref(), conn).await.expect("get").expect("registered");
    assert_eq!((c.project_id.as_str(), c.token_hash.as_ref()), (p.project_id.as_str(), None));
    let sub = ws_event("streams-ws-subscribe", &[("REPLACE_USER_ID", &fx.user_id)], conn, None);
    assert_eq!(streams_ws::handle(fx.store_ref(), &api, sub).await, json!({"statusCode": 200}));
    let got = take(&calls);
    assert_eq!(frames_to(&got, conn), vec![json!({"subscription": "s1", "subscribed": true})]);
    assert!(got[0].authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDWAYMARKTEST/"), "{:?}", got[0]);
    assert!(got[0].authorization.contains("/us-east-1/execute-api/aws4_request"), "{:?}", got[0]);
    let c = connections::get(store.as_ref(), conn).await.expect("get").expect("registered");
    let s1 = &c.subscriptions["s1"];
    assert_eq!(
        s1.filter,
        Filter::parse(Some(&fx.user_id), None, None, Some("geofence.entry,location.updated")).unwrap()
    );
    let unsub = ws_event("streams-ws-unsubscribe", &[], conn, None);
    streams_ws::handle(fx.store_ref(), &api, unsub).await;
    assert_eq!(frames_to(&take(&calls), conn), vec![json!({"subscription": "s1", "unsubscribed": true})]);
    let gone = ws_event("streams-ws-disconnect", &[], conn, None);
    assert_eq!(streams_ws::handle(fx.store_ref(), &api, gone).await, json!({"statusCode": 200}));
    assert!(connections::get(store.as_ref(), conn).await.expect("get").is_none());

    // $connect with a stream token of the trip: its filter is the connection's.
    let trip = fx.trip_id.clone().expect("trip");
    let filter = Filter::parse(None, None, Some(&trip), None).unwrap();
    let minted = tokens::mint(store.as_ref(), &p, filter.clone(), 900, Some(&fx.project.api_key)).await.expect("token");
    let e = ws_event("streams-ws-connect-token", &[("REPLACE_STREAM_TOKEN", &minted.token)], "tok1=", None);
    assert_eq!(streams_ws::handle(fx.store_ref(), &api, e).await, json!({"statusCode": 200}));
    let c = connections::get(store.as_ref(), "tok1=").await.expect("get").expect("registered");
    assert_eq!(c.token_filter.as_ref(), Some(&filter));
    // A subscribe without a filter takes the token's.
    send(&fx, &api, "tok1=", json!({"action": "subscribe", "id": "t"})).await;
    assert_eq!(frames_to(&take(&calls), "tok1="), vec![json!({"subscription": "t", "subscribed": true})]);
    within_policy(WS_FUNCTION.0, &fx.store.take());

    // Refusals at $connect: the status the handshake gets, the body naming the field.
    let status = |v: &Value| (v["statusCode"].as_u64().unwrap_or(0), v["body"].as_str().unwrap_or("").to_owned());
    let (s, b) = status(&connect_key(&fx, &api, "x=", &fx.project.publishable_key).await);
    assert_eq!(s, 403, "{b}");
    assert!(b.contains("Api-Key:"), "{b}");
    let (s, b) = status(&connect_key(&fx, &api, "x=", "not-a-key-at-all-0123456789").await);
    assert_eq!((s, b.contains("Api-Key:")), (401, true), "{b}");
    let mut no_key = ws_event("streams-ws-connect-key", &[("REPLACE_API_KEY", "")], "x=", None);
    no_key.headers.remove("api-key");
    assert_eq!(status(&streams_ws::handle(fx.store_ref(), &api, no_key).await).0, 401);
    let unknown = ws_event("streams-ws-connect-token", &[("REPLACE_STREAM_TOKEN", "wm_st_0000")], "x=", None);
    let (s, b) = status(&streams_ws::handle(fx.store_ref(), &api, unknown).await);
    assert_eq!((s, b.contains("token:")), (401, true), "{b}");
    let mut both = ws_event("streams-ws-connect-token", &[("REPLACE_STREAM_TOKEN", &minted.token)], "x=", None);
    both.headers.insert("api-key", fx.project.api_key.parse().expect("header"));
    let (s, b) = status(&streams_ws::handle(fx.store_ref(), &api, both).await);
    assert_eq!((s, b.contains("token:")), (400, true), "{b}");
    // A revoked token opens nothing.
    let token_id = minted.json["token_id"].as_str().expect("token_id");
    tokens::revoke(store.as_ref(), &p, token_id).await.expect("revoke");
    let revoked = ws_event("streams-ws-connect-token", &[("REPLACE_STREAM_TOKEN", &minted.token)], "x=", None);
    assert_eq!(status(&streams_ws::handle(fx.store_ref(), &api, revoked).await).0, 401);
    assert!(connections::get(store.as_ref(), "x=").await.expect("get").is_none());
}

/// The error frame a subscribe of `body` gets on `conn`: (status, message).
async fn refused(fx: &Fixture, api: &SignedApi, calls: &Calls, conn: &str, body: Value) -> (u64, String) {
    send(fx, api, conn, body.clone()).await;
    let frames = frames_to(&take(calls), conn);
    assert_eq!(frames.len(), 1, "{body}: {frames:?}");
    let e = &frames[0]["error"];
    assert_eq!(frames[0]["subscription"], body["id"], "{body}: {frames:?}");
    (e["status"].as_u64().unwrap_or(0), e["message"].as_str().unwrap_or("").to_owned())
}

#[tokio::test]
async fn a_refused_subscribe_gets_an_error_frame_naming_the_field() {
    let (calls, api, fx) = on_a_trip().await;
    let (store, p) = (fx.state.store.clone(), fx.caller());
    connect_key(&fx, &api, "k=", &fx.project.api_key).await;
    let sub = |filter: Value| json!({"action": "subscribe", "id": "s1", "filter": filter});

    let (s, m) = refused(&fx, &api, &calls, "k=", sub(json!({"events": "location.updated,nope"}))).await;
    assert_eq!((s, m.starts_with("events[1]:")), (400, true), "{m}");
    let (s, m) = refused(&fx, &api, &calls, "k=", sub(json!({"user_id": "nobody"}))).await;
    assert_eq!((s, m.starts_with("user_id:")), (400, true), "a malformed id: {m}");
    let (s, m) = refused(&fx, &api, &calls, "k=", sub(json!({"user_id": "bbbbbbbbbbbbbbbbbbbbbbbb"}))).await;
    assert_eq!((s, m.starts_with("user_id:")), (404, true), "an unknown one: {m}");
    let (s, m) =
        refused(&fx, &api, &calls, "k=", json!({"action": "subscribe", "id": "s1", "since": "yesterday"})).await;
    assert_eq!((s, m.starts_with("since:")), (400, true), "{m}");
    let (s, m) = refused(&fx, &api, &calls, "k=", json!({"action": "unsubscribe", "id": "zz"})).await;
    assert_eq!((s, m.starts_with("id:")), (404, true), "{m}");
    let (s, m) = refused(&fx, &api, &calls, "k=", json!({"action": "listen", "id": "s1"})).await;
    assert_eq!((s, m.starts_with("action:")), (400, true), "{m}");
    // An id open already.
    send(&fx, &api, "k=", sub(json!({"user_id": fx.user_id}))).await;
    take(&calls);
    let (s, m) = refused(&fx, &api, &calls, "k=", sub(json!({}))).await;
    assert_eq!((s, m.starts_with("id:")), (409, true), "{m}");
    // A resume id older than retention (events/settings-update.json: 400 days).
    fx.ok("settings-update", V1(200)).await;
    let old = shared::ids::id_at(chrono::Utc::now() - chrono::Duration::days(500), 0);
    let body = json!({"action": "subscribe", "id": "old", "since": old});
    let (s, m) = refused(&fx, &api, &calls, "k=", body).await;
    assert_eq!((s, m.starts_with("since:"), m.contains("retention")), (410, true, true), "{m}");

    // A token of one trip: another trip is refused, as is another project's trip.
    let trip = fx.trip_id.clone().expect("trip");
    let other_trip =
        trips::create(store.as_ref(), &p, Api::V1, NewTrip { user_id: Some(fx.user_id.clone()), ..Default::default() })
            .await
            .expect("trip")
            .id;
    let minted = tokens::mint(store.as_ref(), &p, Filter::parse(None, None, Some(&trip), None).unwrap(), 900, None)
        .await
        .expect("token");
    let e = ws_event("streams-ws-connect-token", &[("REPLACE_STREAM_TOKEN", &minted.token)], "t=", None);
    assert_eq!(streams_ws::handle(fx.store_ref(), &api, e).await, json!({"statusCode": 200}));
    let (s, m) = refused(&fx, &api, &calls, "t=", sub(json!({"trip_id": other_trip}))).await;
    assert_eq!((s, m.starts_with("filter.trip_id:")), (403, true), "{m}");
    let other = projects::create(store.as_ref(), "other", &ChosenKeys::default()).await.expect("project");
    let other_p = shared::project::Project {
        project_id: other.project_id.clone(),
        account_id: other.account_id.clone(),
        kind: shared::project::KeyKind::Secret,
    };
    let theirs = trips::create(store.as_ref(), &other_p, Api::V1, NewTrip::default()).await.expect("trip").id;
    let (s, m) = refused(&fx, &api, &calls, "t=", sub(json!({"trip_id": theirs}))).await;
    assert_eq!((s, m.starts_with("filter.trip_id:")), (403, true), "{m}");
    // The other project's secret key does not see this project's trip.
    connect_key(&fx, &api, "o=", &other.api_key).await;
    let (s, m) = refused(&fx, &api, &calls, "o=", sub(json!({"trip_id": trip}))).await;
    assert_eq!((s, m.starts_with("trip_id:")), (404, true), "{m}");
    // The token's own trip is fine.
    send(&fx, &api, "t=", sub(json!({"trip_id": trip}))).await;
    assert_eq!(frames_to(&take(&calls), "t="), vec![json!({"subscription": "s1", "subscribed": true})]);

    // Limits: subscriptions per connection.
    for i in 0..connections::MAX_SUBSCRIPTIONS - 1 {
        send(&fx, &api, "k=", json!({"action": "subscribe", "id": format!("n{i}")})).await;
    }
    take(&calls);
    let (s, m) = refused(&fx, &api, &calls, "k=", json!({"action": "subscribe", "id": "more"})).await;
    assert_eq!((s, m.starts_with("id:")), (429, true), "{m}");
}

/// The stored webhook messages of the project, in id order: (id, body).
async fn stored_messages(store: &dyn Store, project_id: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = store
        .scan_all(Table::Main)
        .await
        .expect("scan")
        .into_iter()
        .filter(|i| i.get("pk").and_then(Value::as_str).is_some_and(|pk| pk.starts_with(&format!("{project_id}#WM#"))))
        .map(|i| {
            // Stored deflated (`webhooks::stored_body`): the body as sent.
            let body = shared::domain::webhooks::stored_body::decode(i["body"].as_str().expect("body"));
            (i["id"].as_str().expect("id").to_owned(), body.expect("a readable body"))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn committed_messages_are_posted_to_matching_connections_and_a_gone_one_is_dropped() {
    let (url, calls) = management_api(&["gone="]).await;
    let api = Arc::new(poster(&url));
    let mut fx = Fixture::new().await;
    fx.ok("users-update", V1(200)).await; // geofence events on for the user
    fx.setup(Setup::Fence).await;
    let store = fx.state.store.clone();
    let p = fx.caller();
    let user = fx.user_id.clone();

    // A: the fixture's subscription (the user's locations and fence entries); B: the user's trip
    // starts only; gone=: everything, but the endpoint answers it 410; tok=: a token of the
    // user's, revoked before the pass.
    for conn in ["A=", "B=", "gone="] {
        connect_key(&fx, &api, conn, &fx.project.api_key).await;
    }
    let a = ws_event("streams-ws-subscribe", &[("REPLACE_USER_ID", &user)], "A=", None);
    streams_ws::handle(fx.store_ref(), api.as_ref(), a).await;
    send(
        &fx,
        &api,
        "B=",
        json!({"action": "subscribe", "id": "b", "filter": {"user_id": user, "events": "trip.started"}}),
    )
    .await;
    // (Subscribed in the store directly: its acknowledgement would find it gone already.)
    let all = connections::get(store.as_ref(), "A=").await.expect("get").expect("A").subscriptions["s1"].clone();
    connections::update(store.as_ref(), "gone=", |c| {
        c.subscriptions.insert("g".into(), all.clone());
        Ok(())
    })
    .await
    .expect("subscribe gone=");
    let minted = tokens::mint(store.as_ref(), &p, Filter::parse(Some(&user), None, None, None).unwrap(), 900, None)
        .await
        .expect("token");
    let e = ws_event("streams-ws-connect-token", &[("REPLACE_STREAM_TOKEN", &minted.token)], "tok=", None);
    streams_ws::handle(fx.store_ref(), api.as_ref(), e).await;
    send(&fx, &api, "tok=", json!({"action": "subscribe", "id": "mine"})).await;
    tokens::revoke(store.as_ref(), &p, minted.json["token_id"].as_str().expect("id")).await.expect("revoke");
    let acks = take(&calls);
    assert_eq!(acks.len(), 3, "A, B and tok= acknowledged: {acks:?}");

    // The batch of events/locations-ingest.json stored as ingest stores it, then the processor's
    // pass from its stream event, with the stand-in endpoint as the function's.
    let ingest: Value = serde_json::from_str(&event_text("locations-ingest")).expect("event");
    let body: Value = serde_json::from_str(ingest["body"].as_str().expect("body")).expect("body");
    let batch: Vec<Location> = serde_json::from_value(body["locations"].clone()).expect("locations");
    let prepared = locations::prepare(&p, &user, batch);
    let pending = shared::pipeline::marks::mark_batch(store.as_ref(), &p, &user, &prepared).await.expect("mark");
    let stored = locations::store_prepared(store.as_ref(), &p, &user, prepared).await.expect("store");
    shared::pipeline::marks::batch_stored(store.as_ref(), pending, &stored)
        .await
        .expect("stored")
        .durable()
        .await
        .expect("sync");
    let values = [("REPLACE_PROJECT_ID", p.project_id.as_str()), ("REPLACE_USER_ID", user.as_str())];
    let stream: Value = serde_json::from_str(&event_with("processor-locations-stream", &values)).expect("event");
    let out = connections::with_poster(api.clone(), processor::process(fx.store_ref(), stream)).await;
    assert_eq!(out.expect("processor"), json!({"processed_users": 1, "batchItemFailures": []}));

    // A got exactly the stored messages (its location.updated and the fence entry), each body
    // byte for byte inside its frame, in id order; B and the others nothing.
    let messages = stored_messages(store.as_ref(), &p.project_id).await;
    let kinds: Vec<Value> =
        messages.iter().map(|(_, b)| serde_json::from_str::<Value>(b).unwrap()["type"].clone()).collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(kinds.contains(&json!("location.updated")) && kinds.contains(&json!("geofence.entry")), "{kinds:?}");
    let got = take(&calls);
    let to_a: Vec<&str> = got.iter().filter(|c| c.connection == "A=").map(|c| c.body.as_str()).collect();
    let want: Vec<String> = messages.iter().map(|(_, b)| protocol::message("s1", b)).collect();
    assert_eq!(to_a, want.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(frames_to(&got, "B=").is_empty(), "B subscribed to trip starts only: {got:?}");
    // gone=: posted once, answered 410, forgotten.
    assert_eq!(got.iter().filter(|c| c.connection == "gone=").count(), 1, "{got:?}");
    assert!(connections::get(store.as_ref(), "gone=").await.expect("get").is_none());
    // tok=: its token was revoked: closed, hung up, forgotten.
    let closed = frames_to(&got, "tok=");
    assert_eq!(closed.len(), 1, "{got:?}");
    assert_eq!((&closed[0]["subscription"], &closed[0]["closed"]["reason"]), (&json!("mine"), &json!("revoked")));
    assert!(got.iter().any(|c| c.method == "DELETE" && c.connection == "tok="), "{got:?}");
    assert!(connections::get(store.as_ref(), "tok=").await.expect("get").is_none());

    // Resume: a new subscription from before the first message gets them all, in id order,
    // after its acknowledgement, then is live (the next fan-out reaches it).
    let before =
        shared::ids::id_at(shared::ids::time_of(&messages[0].0).expect("time") - chrono::Duration::seconds(1), 0);
    send(&fx, &api, "B=", json!({"action": "subscribe", "id": "r", "filter": {"user_id": user}, "since": before}))
        .await;
    let mut want = vec![json!({"subscription": "r", "subscribed": true})];
    want.extend(
        messages
            .iter()
            .map(|(_, b)| json!({"subscription": "r", "message": serde_json::from_str::<Value>(b).unwrap()})),
    );
    assert_eq!(frames_to(&take(&calls), "B="), want);
    let b = connections::get(store.as_ref(), "B=").await.expect("get").expect("B");
    assert!(!b.subscriptions["r"].replaying, "live after its replay");
    // From the last one: nothing more.
    send(&fx, &api, "B=", json!({"action": "subscribe", "id": "r2", "since": messages[1].0})).await;
    assert_eq!(frames_to(&take(&calls), "B="), vec![json!({"subscription": "r2", "subscribed": true})]);
    let sent = connections::fan_out(
        fx.store_ref(),
        api.as_ref(),
        &p.project_id,
        &[shared::domain::streams::StreamMessage {
            id: shared::ids::new_id(),
            kind: "location.updated".into(),
            user_id: Some(user.clone()),
            trip_id: None,
            body: "{\"n\":1}".into(),
        }],
    )
    .await
    .expect("fan out");
    // A (s1), B (r and r2): three frames.
    assert_eq!(sent, 3);
    let got = take(&calls);
    assert_eq!(frames_to(&got, "B=").len(), 2, "{got:?}");
}
