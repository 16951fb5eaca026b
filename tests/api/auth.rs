//! Keys: 401 without a valid one, 403 for the publishable key outside SDK operations, and
//! isolation between projects.

use axum::http::StatusCode;
use serde_json::json;

use crate::both;
use crate::helpers::{Key, assert_error};

both!(missing_or_unknown_key_is_401_everywhere, |app| async move {
    let ops = [
        ("GET", "/v1/api/user/"),
        ("POST", "/v1/api/user/"),
        ("PUT", "/v1/api/user/"),
        ("DELETE", "/v1/api/user/?user_id=x"),
        ("GET", "/v1/api/location/?user_id=x"),
        ("POST", "/v1/api/location/"),
        ("PUT", "/v1/api/group/user/"),
        ("POST", "/v1/api/group/user/"),
    ];
    let body = json!({});
    for (method, uri) in ops {
        for key in [Key::None, Key::Raw("wm_sk_00000000000000000000000000000000"), Key::Raw("")] {
            let (status, res) = app.call(method, uri, key, Some(&body)).await;
            assert_error(status, &res, StatusCode::UNAUTHORIZED, "Api-Key");
        }
        // The v2 access token is not an API key.
        let tok = app.project.access_token.clone();
        let (status, res) = app.call(method, uri, Key::Raw(&tok), Some(&body)).await;
        assert_error(status, &res, StatusCode::UNAUTHORIZED, "Api-Key");
    }
});

both!(publishable_key_only_does_what_the_sdk_does, |app| async move {
    let (status, res) =
        app.call("POST", "/v1/api/user/", Key::Publishable, Some(&json!({"app_type": 1, "device_token": "t"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let u = res["data"]["user_id"].as_str().unwrap().to_owned();
    let (status, _) =
        app.call("PUT", "/v1/api/user/", Key::Publishable, Some(&json!({"user_id": u, "description": "x"}))).await;
    assert_eq!(status, StatusCode::OK);
    let batch =
        json!({"user_id": u, "locations": [{"coordinates": [1.0, 2.0], "recorded_at": "2024-01-01T00:00:00.000"}]});
    let (status, _) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&batch)).await;
    assert_eq!(status, StatusCode::CREATED);
    for (method, uri, body) in [
        ("GET", "/v1/api/user/".to_owned(), None),
        ("GET", format!("/v1/api/user/?user_id={u}"), None),
        ("DELETE", format!("/v1/api/user/?user_id={u}"), None),
        ("GET", format!("/v1/api/location/?user_id={u}"), None),
        ("PUT", "/v1/api/group/user/".to_owned(), Some(json!({"group_id": "g", "users": [u]}))),
        ("POST", "/v1/api/group/user/".to_owned(), Some(json!({"group_id": "g", "users": [u]}))),
    ] {
        let (status, res) = app.call(method, &uri, Key::Publishable, body.as_ref()).await;
        assert_error(status, &res, StatusCode::FORBIDDEN, "publishable");
    }
});

both!(header_name_is_case_insensitive, |app| async move {
    for name in ["Api-Key", "api-key", "API-KEY", "Api-key"] {
        let req = axum::http::Request::get("/v1/api/user/")
            .header(name, &app.project.api_key)
            .body(axum::body::Body::empty())
            .unwrap();
        let (status, _) = app.send(req).await;
        assert_eq!(status, StatusCode::OK, "{name}");
    }
});

both!(one_project_sees_nothing_of_another, |app| async move {
    let ours = app.create_user(json!({"team": "a"})).await;
    let batch =
        json!({"user_id": ours, "locations": [{"coordinates": [1.0, 2.0], "recorded_at": "2024-01-01T00:00:00.000"}]});
    app.post("/v1/api/location/", &batch).await;
    let b = app.other_project().await;
    let key = Key::Raw(&b.api_key);
    let (status, res) = app.call("GET", "/v1/api/user/", key, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(res["data"]["users"], json!([]));
    assert_eq!(res["data"]["account_id"], b.account_id.as_str());
    let (status, res) = app.call("GET", &format!("/v1/api/user/?user_id={ours}"), key, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = app.call("GET", &format!("/v1/api/location/?user_id={ours}"), key, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = app.call("POST", "/v1/api/location/", key, Some(&batch)).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) =
        app.call("PUT", "/v1/api/user/", key, Some(&json!({"user_id": ours, "description": "mine"}))).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = app.call("DELETE", &format!("/v1/api/user/?user_id={ours}"), key, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    // Ours is untouched.
    let (_, res) = app.get(&format!("/v1/api/user/?user_id={ours}")).await;
    assert_eq!(res["data"]["users"][0]["description"], json!(null));
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={ours}")).await;
    assert_eq!(res["data"]["locations"].as_array().unwrap().len(), 1);
});
