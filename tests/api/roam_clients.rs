//! What Roam's clients send and read, beyond the documented examples (issue 43): the trip export
//! link (`/trips/export/`), Roam's `error` object on every v1/v3 error, `trip_type` on trip
//! lists, the geofence window on create and the polygon create answer. Each also tried with
//! another project's key.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{Duration, Utc};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::both;
use crate::geofence_events::{DAY, all_events, at, fix, send, tracked_user};
use crate::geofences::{HOME, circle, create_fence, polygon, square, today_range, with};
use crate::helpers::{Key, TestApp, assert_error};
use crate::trips::{control, create, ingest, ts};

/// The path of an absolute `download_url` (the test router answers paths, not hosts).
fn path_of(url: &Value) -> String {
    let url = url.as_str().unwrap_or_else(|| panic!("download_url is not text: {url}"));
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    format!("/{}", rest.split_once('/').map_or("", |(_, p)| p))
}

/// GET without a key: status, content type, body text.
async fn fetch(app: &TestApp, path: &str) -> (StatusCode, String, String) {
    let req = Request::get(path).body(Body::empty()).unwrap();
    let res = app.router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let ty = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let body = String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    (status, ty, body)
}

async fn export(app: &TestApp, ver: &str, id: &str, key: Key<'_>) -> (StatusCode, Value) {
    app.call("GET", &format!("/{ver}/api/trips/export/?trip_id={id}&type=gpx"), key, None).await
}

/// A started trip with four fixes; its id.
async fn travelled(app: &TestApp, started: chrono::DateTime<Utc>) -> String {
    let u = app.create_user(json!({})).await;
    let id = create(app, "v1", json!({"user_id": u})).await["id"].as_str().unwrap().to_owned();
    let (status, res) = control(app, "v1", json!({"trip_id": id, "action": "start", "started_at": ts(started)})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let fixes = (0..4)
        .map(|m| {
            json!({"coordinates": [2.35 + m as f64 / 500.0, 48.85], "recorded_at": ts(started + Duration::minutes(m + 1))})
        })
        .collect();
    ingest(app, &u, fixes).await;
    id
}

both!(the_export_link_answers_the_trips_gpx_without_a_key, |app| async move {
    let id = travelled(&app, Utc::now() - Duration::hours(1)).await;
    let mut link = String::new();
    for ver in ["v1", "v3"] {
        let (status, res) = export(&app, ver, &id, Key::Secret).await;
        assert_eq!((status, res["code"].clone(), res["msg"].clone()), (StatusCode::OK, json!(200), json!("Success.")));
        link = path_of(&res["data"]["download_url"]);
        let (status, ty, body) = fetch(&app, &link).await;
        assert_eq!((status, ty.as_str()), (StatusCode::OK, "application/gpx+xml"), "{link}: {body}");
        let doc = gpx::read(body.as_bytes()).unwrap_or_else(|e| panic!("not GPX ({e}): {body}"));
        assert_eq!(doc.version, gpx::GpxVersion::Gpx11);
        assert_eq!(doc.tracks[0].segments[0].points.len(), 4, "{body}");
        assert!(!body.contains(&id), "the public file names no trip: {body}");
    }
    // Bad input names the parameter; `type` is Roam's format name and gpx the one there is.
    for (q, field) in [
        (format!("trip_id={id}&type=kml"), "type"),
        (format!("trip_id={id}"), "type"),
        ("type=gpx".to_owned(), "trip_id"),
        (format!("trip_id={id}&type=gpx&format=x"), "format"),
    ] {
        let (status, res) = app.get(&format!("/v1/api/trips/export/?{q}")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
        assert_eq!(res["error"]["ErrorCode"], "GS402", "{res}");
        assert!(res["error"]["details"][field].is_array(), "{res}");
    }
    // Another project's key: no such trip there, and no link.
    let other = app.other_project().await;
    let (status, res) = export(&app, "v1", &id, Key::Raw(&other.api_key)).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    assert!(res["data"].is_null());
    // Revoked with the tracking link: the old download link is dead, a new export works.
    let (status, res) = app.post("/v1/api/trips/revoke-link/", &json!({"trip_id": id})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(fetch(&app, &link).await.0, StatusCode::NOT_FOUND);
    let (_, res) = export(&app, "v1", &id, Key::Secret).await;
    let fresh = path_of(&res["data"]["download_url"]);
    assert_ne!(fresh, link);
    assert_eq!(fetch(&app, &fresh).await.0, StatusCode::OK);
    // Deleted: both the export and the link are gone.
    let (status, res) = app.call("DELETE", &format!("/v3/api/trips/?trip_id={id}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(fetch(&app, &fresh).await.0, StatusCode::NOT_FOUND);
    let (status, _) = export(&app, "v1", &id, Key::Secret).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
});

both!(the_export_link_expires_with_the_tracking_link, |app| async move {
    let now = Utc::now();
    let id = travelled(&app, now - Duration::hours(30)).await;
    let (status, res) = export(&app, "v1", &id, Key::Secret).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let link = path_of(&res["data"]["download_url"]);
    let (status, res) =
        control(&app, "v1", json!({"trip_id": id, "action": "end", "ended_at": ts(now - Duration::hours(25))})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    // Ended 25 h ago, links live 24 h by default: the link is dead, and none is handed out.
    assert_eq!(fetch(&app, &link).await.0, StatusCode::NOT_FOUND);
    let (status, res) = export(&app, "v3", &id, Key::Secret).await;
    assert_error(status, &res, StatusCode::CONFLICT, "tracking_link_ttl_hours");
    assert_eq!(res["error"]["ErrorCode"], "GS400", "{res}");
    // A longer lifetime brings it back, as it does the tracking page.
    let body = json!({"tracking_link_ttl_hours": 48});
    let (status, res) = app.call("PUT", "/v1/api/project/settings/", Key::Secret, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(fetch(&app, &link).await.0, StatusCode::OK);
    let (status, _) = export(&app, "v3", &id, Key::Secret).await;
    assert_eq!(status, StatusCode::OK);
});

/// One operation of each endpoint group: (method, path, body, a body or query missing a
/// required field and the field, a bad value and its field).
struct Case {
    method: &'static str,
    path: &'static str,
    missing: (Option<Value>, &'static str, &'static str),
    bad: (Option<Value>, &'static str, &'static str),
}

fn cases() -> Vec<Case> {
    let c = |method, path, missing, bad| Case { method, path, missing, bad };
    vec![
        c(
            "POST",
            "/v1/api/user/",
            (Some(json!({"app_type": 1})), "", "device_token"),
            (Some(json!({"app_type": 3, "device_token": "t"})), "", "app_type"),
        ),
        c("GET", "/v1/api/location/", (None, "", "user_id"), (None, "?user_id=x", "user_id")),
        c(
            "PUT",
            "/v1/api/group/user/",
            (Some(json!({"users": ["0123456789abcdef01234567"]})), "", "group_id"),
            (Some(json!({"group_id": "g", "users": "u"})), "", "users"),
        ),
        c("GET", "/v1/api/trips/summary/", (None, "", "trip_id"), (None, "?trip_id=x&detail=1", "detail")),
        c("GET", "/v3/api/trips/", (None, "", "start_date"), (None, "?trip_type=soon", "trip_type")),
        c(
            "POST",
            "/v3/api/geofence/",
            (Some(json!({"geometry_type": "circle", "geometry_radius": 100})), "", "coordinates"),
            (
                Some(json!({"coordinates": [1.0, 2.0], "geometry_type": "circles", "geometry_radius": 100})),
                "",
                "geometry_type",
            ),
        ),
        c(
            "POST",
            "/v3/api/moving-geofence/",
            (Some(json!({"geometry_radius": 100})), "", "users"),
            (Some(json!({"users": ["0123456789abcdef01234567"], "geometry_radius": 5})), "", "geometry_radius"),
        ),
        c("GET", "/v1/api/search/geofences/", (None, "", "location"), (None, "?location=91,0", "location")),
        c("GET", "/v3/api/insights/home/", (None, "", "user_id"), (None, "?user_id=x&days=3", "days")),
        c(
            "GET",
            "/v1/api/event/",
            (None, "", "start_date"),
            (None, "?start_date=soon&end_date=2024-01-02", "start_date"),
        ),
        c("DELETE", "/v1/api/webhooks/", (None, "", "webhook_id"), (None, "?webhook_id=x&force=1", "force")),
        c("DELETE", "/v1/api/keys/", (None, "", "key_id"), (None, "?key_id=x&force=1", "force")),
        // Settings has no required field: an unknown one stands in for the missing one.
        c(
            "PUT",
            "/v1/api/project/settings/",
            (Some(json!({"link_ttl": 5})), "", "link_ttl"),
            (Some(json!({"tracking_link_ttl_hours": -1})), "", "tracking_link_ttl_hours"),
        ),
    ]
}

/// Roam's error object beside Waymark's list: GS402 with `{field: [messages]}` for a field,
/// GS401 with the reason as text for a key problem.
#[track_caller]
fn assert_roam_error(res: &Value, code: &str, field: Option<&str>) {
    let e = &res["error"];
    assert_eq!(e["ErrorCode"], code, "{res}");
    assert!(e["ErrorMessage"].as_str().is_some_and(|m| !m.is_empty()), "{res}");
    match field {
        Some(f) => {
            let msgs = e["details"][f].as_array().unwrap_or_else(|| panic!("details.{f}: {res}"));
            assert_eq!(msgs.len(), 1, "{res}");
            assert_eq!(res["errors"][0]["field"], f, "{res}");
            assert_eq!(msgs[0], res["errors"][0]["message"], "{res}");
        }
        None => assert_eq!(e["details"], res["msg"], "{res}"),
    }
}

both!(every_group_answers_roams_error_object, |app| async move {
    let other = app.other_project().await;
    for c in cases() {
        let (body, query, field) = &c.missing;
        let uri = format!("{}{query}", c.path);
        let what = format!("{} {uri}", c.method);
        // No key, and a key that is no project's: GS401, the reason as text.
        for key in [Key::None, Key::Raw("wm_sk_not-a-key-of-any-project")] {
            let (status, res) = app.call(c.method, &uri, key, body.as_ref()).await;
            assert_error(status, &res, StatusCode::UNAUTHORIZED, "Api-Key");
            assert_roam_error(&res, "GS401", None);
        }
        let (status, res) = app.call(c.method, &uri, Key::Secret, body.as_ref()).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
        assert_roam_error(&res, "GS402", Some(field));
        // Another project's key gets the same answer: the fault is in the request.
        let (_, theirs) = app.call(c.method, &uri, Key::Raw(&other.api_key), body.as_ref()).await;
        assert_eq!(theirs["error"], res["error"], "{what}");
        let (body, query, field) = &c.bad;
        let uri = format!("{}{query}", c.path);
        let (status, res) = app.call(c.method, &uri, Key::Secret, body.as_ref()).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
        assert_roam_error(&res, "GS402", Some(field));
    }
    // An unknown id: GS404; the publishable key where the secret one is needed: GS401.
    let (status, res) = app.get("/v1/api/trips/summary/?trip_id=0123456789abcdef01234567").await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    assert_roam_error(&res, "GS404", None);
    let (status, res) = app.call("GET", "/v1/api/trips/", Key::Publishable, None).await;
    assert_error(status, &res, StatusCode::FORBIDDEN, "Api-Key");
    assert_roam_error(&res, "GS401", None);
    // v2 keeps its own error shape.
    let (status, res) = app.call("GET", "/v2/trips/nope", Key::None, None).await;
    assert_eq!((status, res.get("error")), (StatusCode::UNAUTHORIZED, None), "{res}");
});

both!(trip_type_lists_completed_active_or_upcoming_trips, |app| async move {
    let u = app.create_user(json!({})).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(create(&app, "v1", json!({"user_id": u})).await["id"].as_str().unwrap().to_owned());
    }
    let (ended, active, upcoming) = (&ids[0], &ids[1], &ids[2]);
    let now = Utc::now();
    for (id, action, field, t) in [
        (ended, "start", "started_at", now - Duration::hours(2)),
        (ended, "end", "ended_at", now - Duration::hours(1)),
        (active, "start", "started_at", now - Duration::minutes(30)),
    ] {
        let (status, res) = control(&app, "v1", json!({"trip_id": id, "action": action, field: ts(t)})).await;
        assert_eq!(status, StatusCode::OK, "{res}");
    }
    let listed = |res: &Value, v3: bool| -> Vec<String> {
        let list = if v3 { &res["data"] } else { &res["data"]["trips"] };
        list.as_array()
            .unwrap_or_else(|| panic!("{res}"))
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    for (kind, want) in [
        ("completed", vec![ended.clone()]),
        ("active", vec![active.clone()]),
        ("upcoming", vec![upcoming.clone()]),
        ("all", vec![upcoming.clone(), active.clone(), ended.clone()]),
    ] {
        for (base, v3) in
            [(format!("/v1/api/trips/?user_id={u}&"), false), (format!("/v3/api/trips/?{}&", today_range()), true)]
        {
            let uri = format!("{base}trip_type={kind}");
            let (status, res) = app.get(&uri).await;
            assert_eq!(status, StatusCode::OK, "{uri}: {res}");
            assert_eq!(listed(&res, v3), want, "{uri}");
        }
        // One trip by id: listed when it is of that type.
        let (_, res) = app.get(&format!("/v1/api/trips/?trip_id={ended}&trip_type={kind}")).await;
        assert_eq!(
            listed(&json!({"data": {"trips": res["data"]}}), false).len(),
            usize::from(kind == "completed" || kind == "all")
        );
    }
    // `is_started: true` on create (a client sends it): created started, so active.
    let (status, res) = app.post("/v1/api/trips/", &json!({"user_id": u, "is_started": true})).await;
    assert_eq!((status, res["data"][0]["is_started"].clone()), (StatusCode::CREATED, json!(true)), "{res}");
    let started = res["data"][0]["id"].clone();
    let (_, res) = app.get(&format!("/v1/api/trips/?user_id={u}&trip_type=active")).await;
    assert_eq!(res["data"]["trips"][0]["id"], started, "{res}");
    let (status, res) = app.get(&format!("/v1/api/trips/?user_id={u}&trip_type=finished")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_type");
    // Another project lists none of these.
    let other = app.other_project().await;
    let (status, res) = app.call("GET", "/v1/api/trips/?trip_type=all", Key::Raw(&other.api_key), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(listed(&res, false), Vec::<String>::new());
});

both!(a_geofence_created_with_a_window_fires_only_inside_it, |app| async move {
    let u = tracked_user(&app).await;
    // DAY's fixes fall after this window: the fence must stay silent. The same fence without a
    // window, a little further on the path, fires.
    let window = json!({"is_enabled": true, "enable_at": "2024-04-01T00:00:00", "disable_at": "2024-04-02T00:00:00"});
    let mut fences = Vec::new();
    for (ver, place) in [("v1", HOME), ("v3", at(HOME, 2000.0, 0.0))] {
        let d = create_fence(&app, ver, &with(circle(place, 100), window.clone())).await;
        assert_eq!(d["is_enabled"], json!([true, "2024-04-01T00:00:00.000", "2024-04-02T00:00:00.000"]), "{ver}: {d}");
        fences.push(d["geofence_id"].as_str().unwrap().to_owned());
    }
    let open = create_fence(&app, "v1", &with(circle(at(HOME, 4000.0, 0.0), 100), json!({"is_enabled": true}))).await;
    let open = open["geofence_id"].as_str().unwrap().to_owned();
    let fixes: Vec<Value> = [HOME, at(HOME, 2000.0, 0.0), at(HOME, 4000.0, 0.0)]
        .iter()
        .enumerate()
        .map(|(i, p)| fix(*p, i as i64 * 600))
        .collect();
    send(&app, &u, &fixes).await;
    let fired: Vec<String> = all_events(&app, &format!("user_id={u}"))
        .await
        .iter()
        .filter(|e| e["event_type"] == "motion:geofence:entry")
        .map(|e| e["geofence_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(fired, vec![open], "{DAY}: windows {fences:?}");
    // The pairing rule and the order, as on update.
    for (more, field) in [
        (json!({"enable_at": "2024-04-01T00:00:00"}), "disable_at"),
        (json!({"disable_at": "2024-04-01T00:00:00"}), "enable_at"),
        (json!({"enable_at": "2024-04-02T00:00:00", "disable_at": "2024-04-01T00:00:00"}), "disable_at"),
        (json!({"enable_at": "soon", "disable_at": null}), "enable_at"),
    ] {
        let (status, res) = app.post("/v3/api/geofence/", &with(circle(HOME, 100), more)).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
    // Another project sees none of these fences.
    let other = app.other_project().await;
    let uri = format!("/v3/api/geofence/?{}", today_range());
    let (status, res) = app.call("GET", &uri, Key::Raw(&other.api_key), None).await;
    assert_eq!((status, res["data"]["geofences"].clone()), (StatusCode::OK, json!([])), "{res}");
});

both!(the_polygon_create_answer_carries_geometry_type, |app| async move {
    let u = app.create_user(json!({})).await;
    let ring = square(HOME, 100.0);
    for body in [polygon(&ring), with(polygon(&ring), json!({"user_ids": [u], "group_ids": []}))] {
        for ver in ["v1", "v3"] {
            let d = create_fence(&app, ver, &body).await;
            assert_eq!(d["geometry_type"], "polygon", "{ver}: {d}");
            assert_eq!(d["geometry"]["type"], "Polygon", "{ver}: {d}");
        }
    }
});
