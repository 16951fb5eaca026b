//! Groups: adding users, membership queries, isolation.

use axum::http::StatusCode;
use serde_json::json;
use shared::domain::groups;
use shared::project::{KeyKind, Project};

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

both!(a_group_is_created_with_its_first_members, |app| async move {
    let a = app.create_user(json!({})).await;
    let b = app.create_user(json!({})).await;
    let (status, res) = app.post("/v1/api/group/", &json!({"description": "night shift", "users": [a, b, a]})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!((res["code"].clone(), res["msg"].clone()), (json!(201), json!("Success.")));
    let d = &res["data"];
    let id = d["group_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 24, "{d}");
    assert_eq!(d["project_id"], app.project.project_id.as_str());
    assert_eq!(d["description"], "night shift");
    assert!(d["created_at"].is_string() && d["updated_at"].is_string(), "{d}");
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(d["users"], json!(expected));
    let store = app.state.store.as_ref();
    let mut members = groups::members(store, &project(&app), &id).await.unwrap();
    members.sort();
    assert_eq!(members, expected);
    assert_eq!(groups::groups_of(store, &project(&app), &a).await.unwrap(), std::slice::from_ref(&id));
    // Adding users later uses the same id.
    let c = app.create_user(json!({})).await;
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": id, "users": [c]})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(groups::members(store, &project(&app), &id).await.unwrap().len(), 3);
});

both!(an_empty_created_group_can_scope_a_geofence, |app| async move {
    let (status, res) = app.post("/v1/api/group/", &json!({"description": "later"})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let id = res["data"]["group_id"].as_str().unwrap().to_owned();
    assert_eq!(res["data"]["users"], json!([]));
    let fence = json!({"coordinates": [2.35, 48.85], "geometry_radius": 100, "group_ids": [id], "user_ids": []});
    let (status, res) = app.post("/v1/api/geofence/", &fence).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res["data"]["group_ids"], json!([id]));
});

both!(group_create_names_bad_input_and_writes_nothing, |app| async move {
    let a = app.create_user(json!({})).await;
    let ghost = "0123456789abcdef01234567";
    let (status, res) = app.post("/v1/api/group/", &json!({"description": "x", "users": [a, ghost]})).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, ghost);
    assert!(groups::groups_of(app.state.store.as_ref(), &project(&app), &a).await.unwrap().is_empty());
    let (status, res) = app.post("/v1/api/group/", &json!({"users": []})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "users");
    let (status, res) = app.post("/v1/api/group/", &json!({"users": ["nope"]})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "users");
    let (status, res) = app.post("/v1/api/group/", &json!({"description": "x".repeat(5000)})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "description");
    let (status, res) = app.post("/v1/api/group/", &json!({"name": "east"})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "name");
    let (status, res) = app.post("/v1/api/group/", &json!({"description": 7})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "description");
    assert_eq!(res["errors"][0]["field"], "description", "{res}");
});

both!(another_project_cannot_fill_or_use_our_created_group, |app| async move {
    let ours = app.create_user(json!({})).await;
    let (_, res) = app.post("/v1/api/group/", &json!({"description": "ours", "users": [ours]})).await;
    let id = res["data"]["group_id"].as_str().unwrap().to_owned();
    let other = app.other_project().await;
    let key = Key::Raw(&other.api_key);
    let (status, res) = app.call("POST", "/v1/api/group/", key, Some(&json!({"users": [ours]}))).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, &ours);
    let fence = json!({"coordinates": [2.35, 48.85], "geometry_radius": 100, "group_ids": [id], "user_ids": []});
    let (status, res) = app.call("POST", "/v1/api/geofence/", Key::Raw(&other.api_key), Some(&fence)).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "group_ids");
    let (status, res) = app
        .call(
            "GET",
            &format!("/v1/api/search/users/?location=48.85,2.35&group_id={id}"),
            Key::Raw(&other.api_key),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["users"], json!([]));
    assert_eq!(groups::members(app.state.store.as_ref(), &project(&app), &id).await.unwrap(), [ours]);
});
