//! Groups: adding users, membership queries, isolation.

use axum::http::StatusCode;
use serde_json::json;
use shared::auth::{KeyKind, Project};
use shared::domain::groups;

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};

fn project(app: &TestApp) -> Project {
    Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    }
}

both!(adding_users_records_membership_both_ways, |app| async move {
    let a = app.create_user(json!({})).await;
    let b = app.create_user(json!({})).await;
    for method in ["PUT", "POST"] {
        let (status, res) = app
            .call(method, "/v1/api/group/user/", Key::Secret, Some(&json!({"group_id": "drivers", "users": [a, b, a]})))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        assert_eq!(res["code"], 201);
        assert!(res["data"].as_str().unwrap().contains("drivers"));
    }
    app.call("PUT", "/v1/api/group/user", Key::Secret, Some(&json!({"group_id": "night", "users": [a]}))).await;
    let store = app.state.store.as_ref();
    let mut members = groups::members(store, &project(&app), "drivers").await.unwrap();
    members.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(members, expected);
    assert_eq!(groups::groups_of(store, &project(&app), &a).await.unwrap(), ["drivers", "night"]);
    assert_eq!(groups::groups_of(store, &project(&app), &b).await.unwrap(), ["drivers"]);
});

both!(unknown_users_are_named_and_nothing_is_added, |app| async move {
    let a = app.create_user(json!({})).await;
    let ghost = "0123456789abcdef01234567";
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "g", "users": [a, ghost]})).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, ghost);
    assert!(groups::members(app.state.store.as_ref(), &project(&app), "g").await.unwrap().is_empty());
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "g", "users": ["nope"]})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "users");
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "", "users": [a]})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "group_id");
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "g", "users": []})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "users");
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "g"})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "users");
});

both!(another_project_cannot_group_our_users, |app| async move {
    let ours = app.create_user(json!({})).await;
    let other = app.other_project().await;
    let body = json!({"group_id": "g", "users": [ours]});
    let (status, res) = app.call("POST", "/v1/api/group/user/", Key::Raw(&other.api_key), Some(&body)).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, &ours);
});
