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
    // Five weeks of a commuter (home at night and weekends, an office by day, a gym on Monday,
    // Wednesday and Friday evenings): home, work and POIs all have something to compare.
    let (home, office, gym) = ((13.4050, 52.5200), (13.3777, 52.5163), (13.4200, 52.5300));
    let monday = chrono::NaiveDate::from_ymd_opt(2024, 4, 1).unwrap();
    let fixes = crate::life::live(monday, 35, "Europe/Berlin", crate::life::Sampling::Every(600), 7, |d, _| {
        use chrono::Datelike;
        match d.weekday().num_days_from_monday() {
            5 | 6 => vec![(0.0, 24.0, home)],
            w if w % 2 == 0 && w < 5 => {
                vec![(0.0, 7.5, home), (8.0, 17.0, office), (17.5, 19.0, gym), (19.5, 24.0, home)]
            }
            _ => vec![(0.0, 7.5, home), (8.0, 17.0, office), (17.5, 24.0, home)],
        }
    });
    let user = app.create_user(json!({})).await;
    for batch in fixes.chunks(1000) {
        let body = json!({"user_id": user, "locations": batch});
        let (s, r) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    for (kind, key) in [("home", "home"), ("work", "work"), ("poi", "insights")] {
        let (status, v1) = app.get(&format!("/v1/api/insights/{kind}/?user_id={user}")).await;
        assert_eq!(status, StatusCode::OK, "{v1}");
        assert!(v1["data"][key].as_array().is_some_and(|l| !l.is_empty()), "{kind}: something to compare: {v1}");
        let (_, v3) = app.get(&format!("/v3/api/insights/{kind}?user_id={user}")).await;
        // Insights are computed on demand: `created_at` is when each answer was made.
        let computed = |mut v: serde_json::Value| {
            v["data"][key].as_array_mut().unwrap().iter_mut().for_each(|i| i["created_at"] = json!(null));
            v
        };
        assert_eq!(computed(v1), computed(v3), "{kind}");
        let other = app.other_project().await;
        let uri = format!("/v1/api/insights/{kind}/?user_id={user}");
        let (status, res) = app.call("GET", &uri, Key::Raw(&other.api_key), None).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, &user);
    }
});

both!(nearby_users_are_found_nearest_first_by_group_and_paged, |app| async move {
    let (a, b, c) =
        (app.create_user(json!({})).await, app.create_user(json!({})).await, app.create_user(json!({})).await);
    let home = (77.5946, 12.9716);
    for (u, dx) in [(&a, 50.0), (&b, 400.0), (&c, 3000.0)] {
        let p = crate::trace::offset(home.0, home.1, dx, 0.0);
        ingest(
            &app,
            u,
            vec![json!({"coordinates": [p.0, p.1], "recorded_at": "2024-03-01T08:00:00Z", "tz_offset": "+0530"})],
        )
        .await;
    }
    let (status, res) = app.post("/v1/api/group/user/", &json!({"group_id": "far", "users": [c]})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let at = format!("location={},{}", home.1, home.0);
    // 1000 m by default: the two near ones, nearest first, with their latest location's fields.
    let (status, res) = app.get(&format!("/v1/api/search/users/?{at}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let users = res["data"]["users"].as_array().unwrap();
    let ids: Vec<&str> = users.iter().map(|u| u["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str()], "{res}");
    assert_eq!(users[0]["tz_offset"], "+0530");
    assert_eq!(users[0]["app_id"], format!("{}_1", app.project.project_id));
    assert!(users[0]["distance"].as_f64().unwrap() < 60.0, "{res}");
    assert_eq!(users[0]["coordinates"]["type"], "Point");
    // Wider, by group, paged, and around a user.
    let (_, res) = app.get(&format!("/v1/api/search/users/?{at}&radius=10000&group_id=far")).await;
    assert_eq!(res["data"]["users"][0]["id"], c.as_str(), "{res}");
    let (_, res) = app.get(&format!("/v1/api/search/users/?{at}&radius=10000&page_limit=2&page_number=2")).await;
    assert_eq!((res["data"]["pages"].clone(), res["data"]["users"][0]["id"].clone()), (json!(2), json!(c)), "{res}");
    let (_, res) = app.get(&format!("/v1/api/search/users/?user_id={b}&radius=500")).await;
    assert_eq!(res["data"]["users"].as_array().unwrap().len(), 2, "{res}");
    for (q, field) in
        [("radius=50", "radius"), ("radius=10001", "radius"), ("page_limit=0", "page_limit"), ("colour=red", "colour")]
    {
        let (status, res) = app.get(&format!("/v1/api/search/users/?{at}&{q}")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
    // Another project's key finds none of them.
    let other = app.other_project().await;
    let (_, res) =
        app.call("GET", &format!("/v1/api/search/users/?{at}&radius=10000"), Key::Raw(&other.api_key), None).await;
    assert_eq!(res["data"]["users"], json!([]), "{res}");
});
