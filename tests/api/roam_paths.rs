//! The v1 paths Roam documents beside the v3 ones: trip delete, moving geofences and insights
//! answer at `/v1/api/...` as they do at `/v3/api/...`, and another project's key sees nothing.

use axum::http::StatusCode;
use serde_json::json;

use crate::both;
use crate::helpers::{Key, assert_error};
use crate::trips::{create, ingest};

both!(v1_trip_delete_is_the_v3_delete, |app| async move {
    let user = app.create_user(json!({})).await;
    let t = create(&app, "v1", json!({"user_id": user, "origins": [[77.59, 12.97]]})).await;
    let id = t["id"].as_str().unwrap();
    let other = app.other_project().await;
    let uri = format!("/v1/api/trips/?trip_id={id}");
    let (status, res) = app.call("DELETE", &uri, Key::Raw(&other.api_key), None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, id);
    let (status, res) = app.call("DELETE", &uri, Key::Secret, None).await;
    assert_eq!((status, res["code"].clone(), res["data"].clone()), (StatusCode::OK, json!(200), json!(null)), "{res}");
    let (status, res) = app.get(&format!("/v1/api/trips/?trip_id={id}")).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, id);
    let (status, res) = app.call("DELETE", "/v1/api/trips", Key::Secret, None).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
});

both!(v1_moving_geofences_are_the_v3_ones, |app| async move {
    let user = app.create_user(json!({})).await;
    let (status, res) = app
        .post("/v1/api/moving-geofence/", &json!({"users": [user], "geometry_type": "circle", "geometry_radius": 150}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let id = res["data"]["id"].as_str().unwrap().to_owned();
    let today = chrono::Utc::now().date_naive();
    let range = format!("start_date={}&end_date={}", today.pred_opt().unwrap(), today.succ_opt().unwrap());
    // Listed at both paths alike.
    let (_, v1) = app.get(&format!("/v1/api/moving-geofence/?{range}")).await;
    let (_, v3) = app.get(&format!("/v3/api/moving-geofence/?{range}")).await;
    assert_eq!(v1["data"], v3["data"]);
    assert_eq!(v1["data"]["geofences"][0]["id"], id.as_str());
    // Another project sees and changes nothing.
    let other = app.other_project().await;
    let (_, res) = app.call("GET", &format!("/v1/api/moving-geofence/?{range}"), Key::Raw(&other.api_key), None).await;
    assert_eq!(res["data"]["geofences"], json!([]), "{res}");
    let uri = format!("/v1/api/moving-geofence/?geofence_id={id}");
    let (status, res) = app.call("DELETE", &uri, Key::Raw(&other.api_key), None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, &id);
    let (status, res) =
        app.call("PUT", "/v1/api/moving-geofence", Key::Secret, Some(&json!({"geofence_id": id, "tag": "v1"}))).await;
    assert_eq!((status, res["data"]["tag"].clone()), (StatusCode::OK, json!("v1")), "{res}");
    let (status, res) = app.call("DELETE", &uri, Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (_, res) = app.get(&format!("/v1/api/moving-geofence/?{range}")).await;
    assert_eq!(res["data"]["geofences"], json!([]), "{res}");
});

both!(v1_insights_are_the_v3_ones, |app| async move {
    let user = app.create_user(json!({})).await;
    ingest(&app, &user, vec![json!({"coordinates": [77.59, 12.97], "recorded_at": "2024-03-01T08:00:00Z"})]).await;
    for kind in ["home", "work", "poi"] {
        let (status, v1) = app.get(&format!("/v1/api/insights/{kind}/?user_id={user}")).await;
        assert_eq!(status, StatusCode::OK, "{v1}");
        let (_, v3) = app.get(&format!("/v3/api/insights/{kind}?user_id={user}")).await;
        assert_eq!(v1, v3, "{kind}");
        let other = app.other_project().await;
        let uri = format!("/v1/api/insights/{kind}/?user_id={user}");
        let (status, res) = app.call("GET", &uri, Key::Raw(&other.api_key), None).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, &user);
    }
});
