//! Streams on AWS over both stores (docs/streams.md, "AWS"): the WebSocket function's connections
//! (counted, version-checked, expiring) and the fan-out of what an ingest commits, posted to a
//! local HTTP server standing in for API Gateway's Management API.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest;
use axum::extract::Path;
use axum::http::StatusCode;
use serde_json::{Value, json};
use shared::apigw::SignedApi;
use shared::domain::streams::{connections, protocol, resume};
use shared::project::{KeyKind, Project};

use crate::both;
use crate::geofence_events::{send, tracked_user};
use crate::helpers::TestApp;

type Calls = Arc<Mutex<Vec<(String, String)>>>;

/// `POST /@connections/{id}` on loopback, recording (connection, body); 410 for `gone`.
async fn endpoint(gone: &'static str) -> (String, Calls) {
    let calls: Calls = Arc::default();
    let keep = calls.clone();
    let app = axum::Router::new().route(
        "/@connections/{id}",
        axum::routing::post(move |Path(id): Path<String>, body: String| {
            let keep = keep.clone();
            async move {
                keep.lock().expect("calls").push((id.clone(), body));
                if id == gone { StatusCode::GONE } else { StatusCode::OK }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (format!("http://{addr}"), calls)
}

/// events/<name>.json for connection `conn`, with `values` filled in and the body replaced.
fn event(name: &str, values: &[(&str, &str)], conn: &str, body: Option<Value>) -> ApiGatewayWebsocketProxyRequest {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../events").join(format!("{name}.json"));
    let mut text = std::fs::read_to_string(&path).expect("event file");
    for (k, v) in values {
        text = text.replace(k, v);
    }
    let mut v: Value = serde_json::from_str(&text).expect("event JSON");
    v["requestContext"]["connectionId"] = json!(conn);
    if let Some(b) = body {
        v["body"] = json!(b.to_string());
    }
    serde_json::from_value(v).expect("a WebSocket event")
}

fn take(calls: &Calls, conn: &str) -> Vec<Value> {
    let mut all = calls.lock().expect("calls");
    let mine: Vec<Value> =
        all.iter().filter(|(c, _)| c == conn).map(|(_, b)| serde_json::from_str(b).expect("frame")).collect();
    all.retain(|(c, _)| c != conn);
    mine
}

both!(websocket_connections_get_what_an_ingest_commits_and_resume, |app| async move {
    let app: TestApp = app;
    let (url, calls) = endpoint("gone=").await;
    let api = Arc::new(SignedApi::with_credentials(&url, "us-east-1", "AKIDWAYMARKTEST", "test-secret"));
    let store = app.state.store.clone();
    let p = Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    };
    let user = tracked_user(&app).await;
    let key = app.project.api_key.clone();
    for conn in ["a=", "b=", "gone="] {
        let e = event("streams-ws-connect-key", &[("REPLACE_API_KEY", &key)], conn, None);
        assert_eq!(streams_ws::handle(store.as_ref(), api.as_ref(), e).await, json!({"statusCode": 200}));
    }
    let sub = |filter: Value| json!({"action": "subscribe", "id": "s1", "filter": filter});
    for (conn, filter) in
        [("a=", json!({"user_id": user, "events": "location.updated"})), ("b=", json!({"events": "trip.ended"}))]
    {
        let e = event("streams-ws-subscribe", &[("REPLACE_USER_ID", &user)], conn, Some(sub(filter)));
        streams_ws::handle(store.as_ref(), api.as_ref(), e).await;
        assert_eq!(take(&calls, conn), vec![json!({"subscription": "s1", "subscribed": true})], "{conn}");
    }
    // gone= subscribes in the store itself (its acknowledgement would find it gone at once).
    let all = connections::get(store.as_ref(), "a=").await.expect("get").expect("a=").subscriptions["s1"].clone();
    connections::update(store.as_ref(), "gone=", |c| {
        c.subscriptions.insert("g".into(), all.clone());
        Ok(())
    })
    .await
    .expect("subscribed");
    assert_eq!(connections::of_project(store.as_ref(), &p.project_id).await.expect("query").len(), 3);

    // A fix through the API: its pass commits the user's location.updated, posted to a= (the
    // stored body, byte for byte, in its frame) and gone= (410: forgotten), not to b=.
    let fix = json!({"coordinates": [13.4, 52.5], "recorded_at": shared::time::Timestamp::now().format(None), "accuracy": 5.0});
    connections::with_poster(api.clone(), send(&app, &user, &[fix])).await;
    let stored = resume::page(store.as_ref(), &p, &"0".repeat(24)).await.expect("stored");
    let located: Vec<_> = stored.iter().filter(|m| m.kind == "location.updated").collect();
    assert_eq!(located.len(), 1, "{stored:?}");
    let frame: Value = serde_json::from_str(&protocol::message("s1", &located[0].body)).expect("frame");
    assert_eq!(take(&calls, "a="), vec![frame]);
    assert!(take(&calls, "b=").is_empty());
    assert_eq!(take(&calls, "gone=").len(), 1);
    assert!(connections::get(store.as_ref(), "gone=").await.expect("get").is_none());

    // b= resumes the user's messages from the start: the stored ones after its acknowledgement.
    let since = json!({"action": "subscribe", "id": "r", "filter": {"user_id": user}, "since": "0".repeat(24)});
    let e = event("streams-ws-subscribe", &[("REPLACE_USER_ID", &user)], "b=", Some(since));
    streams_ws::handle(store.as_ref(), api.as_ref(), e).await;
    let frames = take(&calls, "b=");
    assert_eq!(frames[0], json!({"subscription": "r", "subscribed": true}));
    let ids: Vec<&Value> = frames[1..].iter().map(|f| &f["message"]["id"]).collect();
    let mine: Vec<Value> = stored.iter().filter(|m| m.user_id.as_deref() == Some(&user)).map(|m| json!(m.id)).collect();
    assert_eq!(ids, mine.iter().collect::<Vec<_>>());
    assert!(!mine.is_empty());

    // $disconnect forgets a connection; the project keeps the other.
    let e = event("streams-ws-disconnect", &[], "a=", None);
    streams_ws::handle(store.as_ref(), api.as_ref(), e).await;
    let left: BTreeSet<String> = connections::of_project(store.as_ref(), &p.project_id)
        .await
        .expect("query")
        .into_iter()
        .map(|c| c.connection_id)
        .collect();
    assert_eq!(left, BTreeSet::from(["b=".to_owned()]));
});

type Seen = Arc<Mutex<Vec<(String, String, axum::http::HeaderMap, String)>>>;

/// The Management API's calls as `SignedApi` makes them are signed exactly as the AWS SDK signs
/// them: each SDK call's headers, signed again by `SignedApi` at the SDK's time, give the SDK's
/// Authorization header; and both address the same path.
#[tokio::test]
async fn signed_calls_are_signed_as_the_sdk_signs_them() {
    use aws_sdk_apigatewaymanagement::config::{BehaviorVersion, Credentials, Region};
    let seen: Seen = Arc::default();
    let keep = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let keep = keep.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20).await.expect("body");
            let body = String::from_utf8(body.to_vec()).expect("text");
            keep.lock().expect("seen").push((
                parts.method.to_string(),
                parts.uri.path().to_owned(),
                parts.headers,
                body,
            ));
            (StatusCode::OK, "{}")
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });

    let (key, secret, region) = ("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "eu-west-1");
    let config = aws_sdk_apigatewaymanagement::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(Credentials::new(key, secret, None, None, "test"))
        .http_client(shared::sdk_http::sdk_http_client())
        .endpoint_url(&url)
        .build();
    let sdk = aws_sdk_apigatewaymanagement::Client::from_conf(config);
    let conn = "L0SM9cOFvHcCIhw=";
    let frame = r#"{"subscription":"s1","message":{"id":"018f"}}"#;
    sdk.post_to_connection()
        .connection_id(conn)
        .data(aws_sdk_apigatewaymanagement::primitives::Blob::new(frame.as_bytes()))
        .send()
        .await
        .expect("post");
    sdk.delete_connection().connection_id(conn).send().await.expect("delete");

    let mine = SignedApi::with_credentials(&url, region, key, secret);
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 2);
    for (method, path, headers, body) in seen {
        let auth = headers["authorization"].to_str().expect("authorization");
        let signed = auth.split("SignedHeaders=").nth(1).and_then(|s| s.split(',').next()).expect("SignedHeaders");
        let date = headers["x-amz-date"].to_str().expect("x-amz-date");
        let at = chrono::NaiveDateTime::parse_from_str(date, "%Y%m%dT%H%M%SZ").expect("date").and_utc();
        let pass: Vec<(&str, &str)> = signed
            .split(';')
            .filter(|h| *h != "x-amz-date")
            .map(|h| (h, headers[h].to_str().expect("header")))
            .collect();
        let req = mine.request_with(&method, conn, &pass, body.as_bytes(), at.into()).expect("signed");
        assert_eq!(req.headers()["authorization"], auth, "{method}: {pass:?}");
        assert_eq!(req.uri().path(), path, "{method}");
        // What it sends of its own: the same path, signed for the same service and region.
        let own = mine.request(&method, conn, body.as_bytes(), at.into()).expect("signed");
        assert_eq!(own.uri().path(), path);
        let own_auth = own.headers()["authorization"].to_str().expect("authorization");
        let scope = |a: &str| a.split(", ").next().map(str::to_owned);
        assert_eq!(scope(own_auth), scope(auth), "{method}");
    }
}
