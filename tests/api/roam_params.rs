//! No documented parameter is silently ignored: geofence lists filter by dates, user and group;
//! a geofence update changes geometry, scope and window; unknown parameters are named in a 400.

use axum::http::StatusCode;
use serde_json::json;

use crate::both;
use crate::geofences::{HOME, circle, fence, list_ids, put, square, today_range, with};
use crate::helpers::{Key, assert_error};
use crate::search::search;

both!(geofence_lists_filter_by_dates_user_and_group, |app| async move {
    let u = app.create_user(json!({})).await;
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "north", "users": [u]})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let everyone = fence(&app, circle(HOME, 100)).await;
    let mine = fence(&app, with(circle(HOME, 100), json!({"user_ids": [u]}))).await;
    let ours = fence(&app, with(circle(HOME, 100), json!({"group_ids": ["north"]}))).await;
    for base in ["/v1/api/geofence/", "/v1/api/geofence"] {
        assert_eq!(list_ids(&app, &format!("{base}?user_id={u}")).await, vec![mine.clone()], "{base}");
        assert_eq!(list_ids(&app, &format!("{base}?group_id=north")).await, vec![ours.clone()], "{base}");
        assert_eq!(list_ids(&app, &format!("{base}?{}", today_range())).await.len(), 3, "{base}");
        assert!(list_ids(&app, &format!("{base}?start_date=2020-01-01&end_date=2020-01-02")).await.is_empty());
    }
    let v3 = format!("/v3/api/geofence/?{}&user_id={u}", today_range());
    assert_eq!(list_ids(&app, &v3).await, vec![mine.clone()]);
    // `?geofence_id=` on the bare path finds that fence (it was the metadata list, ignoring it).
    assert_eq!(list_ids(&app, &format!("/v1/api/geofence?geofence_id={everyone}")).await, vec![everyone.clone()]);
    // A parameter no list takes is named.
    for uri in ["/v1/api/geofence/?colour=red", "/v1/api/geofence?trip_type=x", "/v3/api/geofence/?tags=a"] {
        let (status, res) = app.get(uri).await;
        let name = uri.split(['?', '=']).nth(1).unwrap();
        assert_error(status, &res, StatusCode::BAD_REQUEST, name);
    }
    for uri in [
        "/v1/api/trips/?trip_type=quick",
        "/v1/api/user/?sort=asc",
        "/v1/api/location/?user_id=x&order=desc",
        "/v1/api/search/geofences/?location=1,2&limit=5",
        "/v3/api/moving-geofence/?start_date=2024-01-01&end_date=2024-01-02&tag=x",
        "/v1/api/event/?start_date=2024-01-01&end_date=2024-01-02&event_type=entry",
    ] {
        let (status, res) = app.get(uri).await;
        let name = uri.rsplit('&').next().unwrap().rsplit('?').next().unwrap().split('=').next().unwrap();
        assert_error(status, &res, StatusCode::BAD_REQUEST, name);
    }
});

both!(geofence_update_changes_geometry_scope_and_window, |app| async move {
    let u = app.create_user(json!({})).await;
    let id = fence(&app, circle(HOME, 100)).await;
    let far = crate::trace::offset(HOME.0, HOME.1, 3000.0, 0.0);
    // A new center and radius: search finds it at the new place only.
    let (status, res) =
        put(&app, "v1", json!({"geofence_id": id, "coordinates": [far.0, far.1], "geometry_radius": 250.0})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(
        (res["data"]["geometry_radius"].clone(), res["data"]["geometry_center"]["coordinates"].clone()),
        (json!(250), json!([far.0, far.1]))
    );
    let near = |p: (f64, f64)| format!("/v1/api/search/geofences/?location={},{}&radius=100", p.1, p.0);
    assert_eq!(search(&app, &near(HOME)).await["data"]["geofences"], json!([]));
    assert_eq!(search(&app, &near(far)).await["data"]["geofences"][0]["id"], id.as_str());
    // Into a polygon (no geometry_type needed), and only the radius of a circle back.
    let ring: Vec<[f64; 2]> = square(HOME, 100.0).iter().map(|p| [p.0, p.1]).collect();
    let (status, res) = put(&app, "v3", json!({"geofence_id": id, "coordinates": ring})).await;
    assert_eq!((status, res["data"]["geometry_type"].clone()), (StatusCode::OK, json!("polygon")), "{res}");
    assert_eq!(search(&app, &near(far)).await["data"]["geofences"], json!([]), "left its old cells");
    assert_eq!(search(&app, &near(HOME)).await["data"]["geofences"][0]["id"], id.as_str());
    let (status, res) = put(&app, "v1", json!({"geofence_id": id, "geometry_type": "circle"})).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "coordinates");
    // Scope and window.
    let body = json!({"geofence_id": id, "user_ids": [u], "enable_at": "2024-03-01T00:00:00", "disable_at": "2024-04-01T00:00:00"});
    let (status, res) = put(&app, "v1", body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let d = &res["data"];
    assert_eq!((d["user_ids"].clone(), d["group_ids"].clone()), (json!([u]), json!([])), "{d}");
    assert_eq!(d["is_enabled"], json!([false, "2024-03-01T00:00:00.000", "2024-04-01T00:00:00.000"]), "{d}");
    let (_, res) = put(&app, "v1", json!({"geofence_id": id, "is_enabled": [true, null, "2024-05-01T00:00:00"]})).await;
    assert_eq!(res["data"]["is_enabled"], json!([true, null, "2024-05-01T00:00:00.000"]), "{res}");
    for (body, field) in [
        (json!({"geofence_id": id, "enable_at": "2024-06-01T00:00:00"}), "disable_at"),
        (json!({"geofence_id": id, "user_ids": ["0123456789abcdef01234567"]}), "user_ids"),
        (json!({"geofence_id": id, "geometry_type": "square"}), "geometry_type"),
        (json!({"geofence_id": id, "colour": "red"}), "colour"),
    ] {
        let (status, res) = put(&app, "v1", body.clone()).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
    // A moving fence takes a new radius, and names what it cannot take.
    let (_, res) = app.post("/v3/api/moving-geofence/", &json!({"users": [u], "geometry_radius": 100})).await;
    let m = res["data"]["id"].as_str().unwrap().to_owned();
    let (status, res) = app
        .call("PUT", "/v3/api/moving-geofence/", Key::Secret, Some(&json!({"geofence_id": m, "geometry_radius": 300})))
        .await;
    assert_eq!((status, res["data"]["geometry_radius"].clone()), (StatusCode::OK, json!(300)), "{res}");
    let (status, res) = app
        .call(
            "PUT",
            "/v3/api/moving-geofence/",
            Key::Secret,
            Some(&json!({"geofence_id": m, "coordinates": [1.0, 2.0]})),
        )
        .await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "coordinates");
    // Another project's key changes nothing.
    let other = app.other_project().await;
    let (status, res) = app
        .call(
            "PUT",
            "/v1/api/geofence/",
            Key::Raw(&other.api_key),
            Some(&json!({"geofence_id": id, "coordinates": [far.0, far.1]})),
        )
        .await;
    assert_error(status, &res, StatusCode::NOT_FOUND, &id);
});
