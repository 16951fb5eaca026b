//! GPX 1.1 export of a user's locations and of a trip's route, read back with the `gpx` crate.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

use crate::both;
use crate::helpers::{TestApp, assert_error};
use crate::trips::{control, create, ingest};

/// GET with the secret key (or `key`), answering status, content type and body text.
async fn get_raw(app: &TestApp, uri: &str, key: &str) -> (StatusCode, String, String) {
    let req = Request::builder().uri(uri).header("Api-Key", key).body(Body::empty()).unwrap();
    let res = app.router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let ty = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let body = String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    (status, ty, body)
}

fn parse(doc: &str) -> gpx::Gpx {
    gpx::read(doc.as_bytes()).unwrap_or_else(|e| panic!("not GPX ({e}): {doc}"))
}

both!(a_users_locations_export_as_gpx_1_1, |app| async move {
    let u = app.create_user(json!({})).await;
    let fixes = (0..5)
        .map(|m| json!({"coordinates": [2.35 + m as f64 / 1000.0, 48.85], "recorded_at": format!("2024-03-10T08:{:02}:00Z", m * 10), "altitude": 30.0 + m as f64}))
        .collect();
    ingest(&app, &u, fixes).await;
    let key = app.project.api_key.clone();
    let uri = format!("/v1/api/location/gpx/?user_id={u}&start_date=2024-03-10T08:10:00&end_date=2024-03-10T08:30:00");
    let (status, ty, body) = get_raw(&app, &uri, &key).await;
    assert_eq!((status, ty.as_str()), (StatusCode::OK, "application/gpx+xml"), "{body}");
    let doc = parse(&body);
    assert_eq!(doc.version, gpx::GpxVersion::Gpx11);
    let points = &doc.tracks[0].segments[0].points;
    assert_eq!(points.len(), 3, "the range, inclusive: {body}");
    assert_eq!((points[0].point().x(), points[0].point().y()), (2.351, 48.85));
    assert_eq!(points[0].elevation, Some(31.0));
    let t = points[0].time.unwrap();
    assert_eq!(
        time::OffsetDateTime::from(t).unix_timestamp(),
        chrono::DateTime::parse_from_rfc3339("2024-03-10T08:10:00Z").unwrap().timestamp()
    );
    // Without dates: all of them. Bad input and another project are refused as JSON errors.
    let (_, _, body) = get_raw(&app, &format!("/v1/api/location/gpx/?user_id={u}"), &key).await;
    assert_eq!(parse(&body).tracks[0].segments[0].points.len(), 5);
    let (status, res) = app.get("/v1/api/location/gpx/").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "user_id");
    let (status, res) = app.get(&format!("/v1/api/location/gpx/?user_id={u}&start_date=soon")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "start_date");
    let other = app.other_project().await;
    let (status, _, body) = get_raw(&app, &format!("/v1/api/location/gpx/?user_id={u}"), &other.api_key).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
});

both!(a_trips_route_exports_as_gpx_1_1, |app| async move {
    let u = app.create_user(json!({})).await;
    let t = create(&app, "v1", json!({"user_id": u})).await;
    let id = t["id"].as_str().unwrap().to_owned();
    let (status, res) =
        control(&app, "v1", json!({"trip_id": id, "action": "start", "started_at": "2024-03-10T07:59:00"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let fixes = (0..4).map(|m| json!({"coordinates": [2.35 + m as f64 / 500.0, 48.85], "recorded_at": format!("2024-03-10T08:0{m}:00Z")})).collect();
    ingest(&app, &u, fixes).await;
    let key = app.project.api_key.clone();
    for ver in ["v1", "v3"] {
        let (status, ty, body) = get_raw(&app, &format!("/{ver}/api/trips/gpx/?trip_id={id}"), &key).await;
        assert_eq!((status, ty.as_str()), (StatusCode::OK, "application/gpx+xml"), "{body}");
        let doc = parse(&body);
        let points = &doc.tracks[0].segments[0].points;
        assert_eq!(points.len(), 4, "{body}");
        assert!(doc.tracks[0].name.as_deref().is_some_and(|n| n.contains(&id)));
    }
    let other = app.other_project().await;
    let (status, _, body) = get_raw(&app, &format!("/v1/api/trips/gpx/?trip_id={id}"), &other.api_key).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, res) = app.get("/v1/api/trips/gpx/").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
});
