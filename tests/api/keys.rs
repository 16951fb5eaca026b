//! Key management: several keys per project, listed without the key, created (shown once) and
//! revoked at once; the last secret key stays; another project's key sees and changes none of it.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};

const BASE: &str = "/v1/api/keys/";

async fn listed(app: &TestApp, key: Key<'_>) -> Vec<Value> {
    let (status, res) = app.call("GET", BASE, key, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    res["data"]["keys"].as_array().unwrap().clone()
}

async fn create(app: &TestApp, key: Key<'_>, kind: &str, label: &str) -> Value {
    let (status, res) = app.call("POST", BASE, key, Some(&json!({"kind": kind, "label": label}))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    res["data"].clone()
}

both!(keys_are_listed_created_and_revoked_at_once, |app| async move {
    // The three keys issued with the project, never in clear.
    let keys = listed(&app, Key::Secret).await;
    let kinds: Vec<&str> = keys.iter().map(|k| k["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 3, "{keys:?}");
    for k in ["secret", "publishable", "access"] {
        assert!(kinds.contains(&k), "{k}: {keys:?}");
    }
    let text = serde_json::to_string(&keys).unwrap();
    for clear in [&app.project.api_key, &app.project.publishable_key, &app.project.access_token] {
        assert!(!text.contains(clear.as_str()), "a key in clear in the list");
    }
    let own = keys.iter().find(|k| k["kind"] == "secret").unwrap();
    assert!(own["last_used_at"].is_string(), "the key that listed was just used: {own}");
    assert!(own["created_at"].is_string() && own["hint"].as_str().unwrap().starts_with("wm_sk_…"), "{own}");

    // A new secret key works at once; it is shown only in the answer that creates it.
    let made = create(&app, Key::Secret, "secret", "ci deploys").await;
    let new_key = made["key"].as_str().unwrap().to_owned();
    assert!(new_key.starts_with("wm_sk_"), "{made}");
    assert_eq!(made["label"], "ci deploys");
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Raw(&new_key), None).await;
    assert_eq!(status, StatusCode::OK);
    let again = listed(&app, Key::Raw(&new_key)).await;
    assert_eq!(again.len(), 4);
    assert!(again.iter().all(|k| k.get("key").is_none()), "{again:?}");

    // Rotation: the old secret key is revoked with the new one; it fails at once.
    let old_id = own["key_id"].as_str().unwrap();
    let (status, res) = app.call("DELETE", &format!("{BASE}?key_id={old_id}"), Key::Raw(&new_key), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["key_id"], old_id);
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Secret, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a revoked key answers 401 at once");
    let (status, res) = app.call("DELETE", &format!("{BASE}?key_id={old_id}"), Key::Raw(&new_key), None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "key_id");

    // The last secret key cannot go; a publishable one can.
    let new_id = made["key_id"].as_str().unwrap();
    let (status, res) = app.call("DELETE", &format!("{BASE}?key_id={new_id}"), Key::Raw(&new_key), None).await;
    assert_error(status, &res, StatusCode::CONFLICT, "key_id");
    let pk = listed(&app, Key::Raw(&new_key)).await.into_iter().find(|k| k["kind"] == "publishable").unwrap();
    let (status, res) = app
        .call("DELETE", &format!("{BASE}?key_id={}", pk["key_id"].as_str().unwrap()), Key::Raw(&new_key), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (status, _) = app
        .call("POST", "/v1/api/user/", Key::Raw(&app.project.publishable_key), Some(&json!({"description": "x"})))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A v2 access token made here works as a Bearer token.
    let at = create(&app, Key::Raw(&new_key), "access", "").await["key"].as_str().unwrap().to_owned();
    let mut req = axum::http::Request::builder().method("GET").uri("/v2/trips");
    req = req.header("Authorization", format!("Bearer {at}"));
    let (status, res) = app.send(req.body(axum::body::Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{res}");
});

both!(bad_key_input_names_the_field_and_publishable_keys_are_refused, |app| async move {
    for (body, field) in [
        (json!({"kind": "admin"}), "kind"),
        (json!({"label": "x"}), "kind"),
        (json!({"kind": "secret", "label": "l".repeat(201)}), "label"),
        (json!({"kind": "secret", "scope": "all"}), "scope"),
    ] {
        let (status, res) = app.call("POST", BASE, Key::Secret, Some(&body)).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
    let (status, res) = app.call("DELETE", BASE, Key::Secret, None).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "key_id");
    let (status, res) = app.call("GET", &format!("{BASE}?kind=secret"), Key::Secret, None).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "kind");
    for (method, body) in [("GET", None), ("POST", Some(json!({"kind": "secret"}))), ("DELETE", None)] {
        let (status, res) = app.call(method, &format!("{BASE}?key_id=x"), Key::Publishable, body.as_ref()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method}: {res}");
    }
    assert_eq!(listed(&app, Key::Secret).await.len(), 3, "nothing was created");
});

both!(another_projects_key_sees_and_changes_none_of_them, |app| async move {
    let other = app.other_project().await;
    let mine = listed(&app, Key::Secret).await;
    let theirs = listed(&app, Key::Raw(&other.api_key)).await;
    let ids = |l: &[Value]| l.iter().map(|k| k["key_id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert!(ids(&mine).iter().all(|id| !ids(&theirs).contains(id)), "lists are per project");
    for id in ids(&mine) {
        let (status, res) = app.call("DELETE", &format!("{BASE}?key_id={id}"), Key::Raw(&other.api_key), None).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "key_id");
    }
    assert_eq!(listed(&app, Key::Secret).await.len(), 3);
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK);
});
