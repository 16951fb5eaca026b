//! Cross-project isolation of the operations issue 16 added: for every operation of keys,
//! webhooks, erasure and settings (and the insights, read from a per-user aggregate), a secret key of project B neither sees nor changes project A's
//! data (404 naming the id for A's ids, as elsewhere; its own project's answer otherwise), and A's
//! data reads the same afterwards.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};

/// What B's key gets.
enum Expect {
    /// An error of this status whose message names this field.
    Refused(StatusCode, &'static str),
    /// An answer about B's own project, with this status, naming none of A's ids.
    Own(StatusCode),
}

/// Everything of A that B could reach, as A's own key reads it.
async fn snapshot(app: &TestApp, user: &str, wh: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let (_, keys) = app.get("/v1/api/keys/").await;
    // `last_used_at` moves as A's key reads; the keys themselves must not.
    let keys: Vec<Value> = keys["data"]["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| json!([k["key_id"], k["kind"], k["label"], k["hint"], k["created_at"]]))
        .collect();
    out.push(json!(keys));
    for uri in [
        "/v1/api/webhooks/".to_owned(),
        format!("/v1/api/webhooks/?webhook_id={wh}"),
        format!("/v1/api/webhooks/deliveries/?webhook_id={wh}"),
        "/v1/api/project/settings/".to_owned(),
        format!("/v1/api/user/?user_id={user}"),
        format!("/v1/api/location/?user_id={user}"),
        format!("/v3/api/insights/home/?user_id={user}"),
        format!("/v3/api/insights/poi/?user_id={user}"),
    ] {
        let (status, res) = app.get(&uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {res}");
        out.push(res["data"].clone());
    }
    out
}

both!(another_projects_key_reaches_none_of_keys_webhooks_erasure_and_settings, |app| async move {
    let app = app.with_private_webhooks();
    // A: a user with a fix, a webhook endpoint, settings of its own.
    let user = app.create_user(json!({})).await;
    let fix = json!({"coordinates": [1.0, 2.0], "recorded_at": "2024-01-01T00:00:00.000"});
    let (status, res) = app.post("/v1/api/location/", &json!({"user_id": user, "locations": [fix]})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let (status, res) =
        app.post("/v1/api/webhooks/", &json!({"url": "http://127.0.0.1:9/hook", "events": ["*"]})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let wh = res["data"]["webhook_id"].as_str().expect("webhook_id").to_owned();
    let settings = json!({"retention_days": 30, "tracking_link_ttl_hours": 5});
    let (status, res) = app.call("PUT", "/v1/api/project/settings/", Key::Secret, Some(&settings)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (_, res) = app.get("/v1/api/keys/").await;
    let a_keys: Vec<String> =
        res["data"]["keys"].as_array().unwrap().iter().map(|k| k["key_id"].as_str().unwrap().to_owned()).collect();
    let before = snapshot(&app, &user, &wh).await;

    let b = app.other_project().await;
    let since = json!({"webhook_id": wh, "since": "2024-01-01T00:00:00"});
    let nf = |field| Expect::Refused(StatusCode::NOT_FOUND, field);
    let mut ops: Vec<(&str, String, Option<Value>, Expect)> = vec![
        // Keys: B lists and creates its own; A's keys are unknown ids to it.
        ("GET", "/v1/api/keys/".into(), None, Expect::Own(StatusCode::OK)),
        (
            "POST",
            "/v1/api/keys/".into(),
            Some(json!({"kind": "secret", "label": "b"})),
            Expect::Own(StatusCode::CREATED),
        ),
        // Webhooks: every operation.
        ("GET", "/v1/api/webhooks/".into(), None, Expect::Own(StatusCode::OK)),
        ("GET", format!("/v1/api/webhooks/?webhook_id={wh}"), None, nf("webhook_id")),
        ("PUT", "/v1/api/webhooks/".into(), Some(json!({"webhook_id": wh, "enabled": false})), nf("webhook_id")),
        ("POST", "/v1/api/webhooks/rotate-secret/".into(), Some(json!({"webhook_id": wh})), nf("webhook_id")),
        ("POST", "/v1/api/webhooks/test/".into(), Some(json!({"webhook_id": wh})), nf("webhook_id")),
        ("GET", format!("/v1/api/webhooks/deliveries/?webhook_id={wh}"), None, nf("webhook_id")),
        ("POST", "/v1/api/webhooks/replay/".into(), Some(since), nf("webhook_id")),
        ("DELETE", format!("/v1/api/webhooks/?webhook_id={wh}"), None, nf("webhook_id")),
        (
            "POST",
            "/v1/api/webhooks/".into(),
            Some(json!({"url": "http://127.0.0.1:9/b", "events": ["*"]})),
            Expect::Own(StatusCode::CREATED),
        ),
        // Erasure.
        ("DELETE", format!("/v1/api/user/?user_id={user}"), None, nf("user_id")),
        // Insights (read from A's aggregate by A's key only).
        ("GET", format!("/v1/api/insights/home/?user_id={user}"), None, nf("user_id")),
        ("GET", format!("/v3/api/insights/home/?user_id={user}"), None, nf("user_id")),
        ("GET", format!("/v3/api/insights/work/?user_id={user}"), None, nf("user_id")),
        ("GET", format!("/v3/api/insights/poi/?user_id={user}"), None, nf("user_id")),
        // Settings: B reads and changes its own.
        ("GET", "/v1/api/project/settings/".into(), None, Expect::Own(StatusCode::OK)),
        ("PUT", "/v1/api/project/settings/".into(), Some(json!({"retention_days": 1})), Expect::Own(StatusCode::OK)),
    ];
    ops.extend(a_keys.iter().map(|id| ("DELETE", format!("/v1/api/keys/?key_id={id}"), None, nf("key_id"))));
    let a_ids: Vec<&str> = a_keys.iter().map(String::as_str).chain([wh.as_str(), user.as_str()]).collect();
    for (method, uri, body, expect) in &ops {
        let (status, res) = app.call(method, uri, Key::Raw(&b.api_key), body.as_ref()).await;
        match expect {
            Expect::Refused(want, field) => assert_error(status, &res, *want, field),
            Expect::Own(want) => {
                assert_eq!(status, *want, "{method} {uri}: {res}");
                let text = res.to_string();
                assert!(a_ids.iter().all(|id| !text.contains(id)), "{method} {uri} shows A's data: {res}");
            }
        }
    }
    // B's change is in B's settings, beside its default TTL (A's is 5 hours).
    let (_, res) = app.call("GET", "/v1/api/project/settings/", Key::Raw(&b.api_key), None).await;
    assert_eq!(res["data"], json!({"tracking_link_ttl_hours": 24, "retention_days": 1}), "{res}");

    assert_eq!(snapshot(&app, &user, &wh).await, before, "A's data is unchanged");
});

both!(another_projects_key_sees_none_of_our_paged_lists, |app| async move {
    use crate::list_pages::{List, create};
    // A: two pages and more of each list that pages by counts; B: a few of its own.
    let mut a_ids = Vec::new();
    for list in [List::Users, List::Fences, List::Trips, List::Moving] {
        for _ in 0..13 {
            a_ids.push(create(&app, list).await);
        }
    }
    let b = app.other_project().await;
    let b_app = TestApp { state: app.state.clone(), router: app.router.clone(), project: b };
    let b_trip = create(&b_app, List::Trips).await;
    let days = "start_date=2000-01-01&end_date=2100-01-01";
    // (list, its field, B's own count, A's pages: each moving fence made a user of A's)
    let lists = [
        ("/v1/api/user/?", "users", 0, 3),
        ("/v1/api/geofence/?", "geofences", 0, 2),
        ("/v1/api/trips/?", "trips", 1, 2),
        (&format!("/v3/api/moving-geofence/?{days}&") as &str, "geofences", 0, 2),
    ];
    for (uri, field, own, a_pages) in lists {
        for n in 1..=3 {
            let uri = format!("{uri}page_number={n}");
            let (status, res) = app.call("GET", &uri, Key::Raw(&b_app.project.api_key), None).await;
            assert_eq!(status, StatusCode::OK, "{uri}: {res}");
            let text = res.to_string();
            assert!(a_ids.iter().all(|id| !text.contains(id.as_str())), "{uri} shows A's data: {res}");
            assert_eq!(res["data"]["pages"], json!(own), "{uri}: {res}");
            let items = res["data"][field].as_array().map(Vec::len).unwrap_or(0);
            assert_eq!(items, if n == 1 { own } else { 0 }, "{uri}: {res}");
        }
        // A's own key still pages A's.
        let (_, res) = app.get(&format!("{uri}page_number=2")).await;
        assert_eq!(res["data"]["pages"], json!(a_pages), "{uri}: {res}");
    }
    assert!(!b_trip.is_empty());
});
