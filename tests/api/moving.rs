//! Moving geofences: CRUD shapes, and entry/exit when users come near a followed user.

use axum::http::StatusCode;
use serde_json::json;

use crate::both;
use crate::helpers::{TestApp, assert_error};

const PATH: &str = "/v3/api/moving-geofence/";

async fn user_with_events(app: &TestApp) -> String {
    let id = app.create_user(json!({})).await;
    let (s, r) = app
        .call(
            "PUT",
            "/v1/api/user/",
            crate::helpers::Key::Secret,
            Some(&json!({"user_id": id, "geofence_events": true})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    id
}

/// Put a user at `(lng, lat)` at minute `m` of 2024-05-01 10:00.
async fn at(app: &TestApp, user: &str, lng: f64, lat: f64, m: u32) {
    let body = json!({"user_id": user, "locations": [{"coordinates": [lng, lat], "recorded_at": format!("2024-05-01T10:{m:02}:00.000")}]});
    let (s, r) = app.post("/v1/api/location/", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
}

async fn events_of(app: &TestApp, fence: &str) -> Vec<(String, String)> {
    let (s, r) =
        app.get(&format!("/v1/api/event/?start_date=2024-05-01&end_date=2024-05-02&geofence_id={fence}")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    r["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["event_type"].as_str().unwrap().to_owned(), e["user_id"].as_str().unwrap().to_owned()))
        .collect()
}

both!(create_update_list_delete_shapes, |app| async move {
    let f = app.create_user(json!({})).await;
    let body = json!({"users": [f], "geometry_type": "circle", "geometry_radius": 100, "only_once": true,
        "description": "escort", "tag": "t", "color_code": "0f0", "metadata": {"k": "v"}});
    let (s, r) = app.post(PATH, &body).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!(r["code"], 201);
    let d = &r["data"];
    for k in [
        "id",
        "account_id",
        "project_id",
        "geometry_type",
        "geometry_radius",
        "is_enabled",
        "is_deleted",
        "created_at",
        "updated_at",
        "only_once",
        "users",
    ] {
        assert!(d.get(k).is_some(), "missing {k}: {d}");
    }
    assert_eq!(
        (d["geometry_type"].clone(), d["geometry_radius"].clone(), d["is_enabled"].clone()),
        (json!("circle"), json!(100), json!(false))
    );
    assert_eq!(d["users"], json!([f]));
    let id = d["id"].as_str().unwrap().to_owned();
    for (bad, field) in [
        (json!({"users": [f], "geometry_type": "circle", "geometry_radius": 49}), "geometry_radius"),
        (json!({"users": [f], "geometry_type": "circle", "geometry_radius": 1001}), "geometry_radius"),
        (json!({"users": [f], "geometry_type": "circle"}), "geometry_radius"),
        (json!({"users": [f], "geometry_type": "polygon", "geometry_radius": 100}), "geometry_type"),
        (json!({"users": [], "geometry_type": "circle", "geometry_radius": 100}), "users"),
        (json!({"geometry_type": "circle", "geometry_radius": 100}), "users"),
    ] {
        let (s, r) = app.post(PATH, &bad).await;
        assert_error(s, &r, StatusCode::BAD_REQUEST, field);
    }
    let (s, r) = app
        .post(PATH, &json!({"users": ["0123456789abcdef01234567"], "geometry_type": "circle", "geometry_radius": 100}))
        .await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "0123456789abcdef01234567");

    let (s, r) = app
        .call(
            "PUT",
            PATH,
            crate::helpers::Key::Secret,
            Some(&json!({"geofence_id": id, "is_enabled": true, "tag": "u"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["is_enabled"].clone(), r["data"]["tag"].clone()), (json!(true), json!("u")));
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let (s, r) = app.get(PATH).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "start_date");
    let (s, r) = app.get(&format!("{PATH}?start_date={today}&end_date=2999-01-01&count=True")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let d = &r["data"];
    assert_eq!(d["users"], json!([f]));
    assert_eq!(d["geofences"][0]["counts"], json!({"events": 0, "users": 0}));
    assert_eq!(d["pages"], 1);
    let (s, _) = app.call("DELETE", &format!("{PATH}?geofence_id={id}"), crate::helpers::Key::Secret, None).await;
    assert_eq!(s, StatusCode::OK);
    let (_, r) = app.get(&format!("{PATH}?start_date={today}&end_date=2999-01-01")).await;
    assert_eq!(r["data"]["geofences"], json!([]));
    let (s, r) = app.call("DELETE", &format!("{PATH}?geofence_id={id}"), crate::helpers::Key::Secret, None).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "geofence_id");
});

both!(users_coming_near_a_followed_user_enter_and_leave, |app| async move {
    let followed = app.create_user(json!({})).await;
    let other = user_with_events(&app).await;
    let quiet = app.create_user(json!({})).await; // geofence_events off
    let (_, r) = app
        .post(
            PATH,
            &json!({"users": [followed], "geometry_type": "circle", "geometry_radius": 200, "is_enabled": true}),
        )
        .await;
    let fence = r["data"]["id"].as_str().unwrap().to_owned();
    let base = (13.40, 52.52);
    at(&app, &followed, base.0, base.1, 0).await;
    at(&app, &other, base.0 + 0.01, base.1, 1).await; // ~680 m away: outside
    at(&app, &quiet, base.0 + 0.001, base.1, 1).await; // inside, but its events are off
    assert!(events_of(&app, &fence).await.is_empty());
    at(&app, &other, base.0 + 0.002, base.1, 2).await; // ~136 m: inside
    at(&app, &other, base.0 + 0.01, base.1, 3).await; // out again
    // Now the followed user moves to the other user.
    at(&app, &followed, base.0 + 0.0095, base.1, 4).await;
    let ev = events_of(&app, &fence).await;
    let kinds: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(kinds, ["motion:geofence:entry", "motion:geofence:exit", "motion:geofence:entry"], "{ev:?}");
    assert!(ev.iter().all(|e| e.1 == other));
});

both!(only_once_enters_a_pair_once, |app| async move {
    let followed = app.create_user(json!({})).await;
    let other = user_with_events(&app).await;
    let (_, r) = app.post(PATH, &json!({"users": [followed], "geometry_type": "circle", "geometry_radius": 200, "is_enabled": true, "only_once": true})).await;
    let fence = r["data"]["id"].as_str().unwrap().to_owned();
    at(&app, &followed, 13.40, 52.52, 0).await;
    for (i, dx) in [0.01, 0.001, 0.01, 0.001, 0.01].iter().enumerate() {
        at(&app, &other, 13.40 + dx, 52.52, 1 + i as u32).await;
    }
    let kinds: Vec<String> = events_of(&app, &fence).await.into_iter().map(|e| e.0).collect();
    assert_eq!(kinds, ["motion:geofence:entry", "motion:geofence:exit"], "one entry per pair, ever");
});

both!(a_disabled_moving_fence_and_another_project_fire_nothing, |app| async move {
    let followed = app.create_user(json!({})).await;
    let other = user_with_events(&app).await;
    let (_, r) = app.post(PATH, &json!({"users": [followed], "geometry_type": "circle", "geometry_radius": 200})).await;
    let fence = r["data"]["id"].as_str().unwrap().to_owned();
    at(&app, &followed, 13.40, 52.52, 0).await;
    at(&app, &other, 13.4001, 52.52, 1).await;
    assert!(events_of(&app, &fence).await.is_empty(), "disabled by default");
    let b = app.other_project().await;
    let (s, r) = app
        .call(
            "GET",
            &format!("{PATH}?start_date=2024-01-01&end_date=2999-01-01&geofence_id={fence}"),
            crate::helpers::Key::Raw(&b.api_key),
            None,
        )
        .await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "geofence_id");
    let (s, r) = app
        .call(
            "PUT",
            PATH,
            crate::helpers::Key::Raw(&b.api_key),
            Some(&json!({"geofence_id": fence, "is_enabled": true})),
        )
        .await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "geofence_id");
});
