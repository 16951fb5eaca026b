//! A trip's summary, v1 and v3: its route, distance and duration.

use super::*;

/// A summary's fields, v1/v3 and v2 alike, sorted.
pub(crate) const SUMMARY_KEYS: [&str; 12] = [
    "distance_covered",
    "duration",
    "excluded_points",
    "gaps",
    "paused_intervals",
    "project_id",
    "route",
    "route_indexes",
    "total_elevation_gain",
    "trip_id",
    "trip_status",
    "user_id",
];

both!(summary_reports_route_distance_and_duration, |app| async move {
    let (id, user) = trip_with_user(&app, "v1").await;
    let now = Utc::now();
    let start = now - Duration::minutes(30);
    control_ok(&app, "v1", &id, "start", json!({"started_at": ts(start)})).await;
    // Two fixes 11 m apart three minutes apart (a stop), then one far away (moving), plus one
    // from before the trip that must not count.
    ingest(
        &app,
        &user,
        vec![
            json!({"coordinates": [77.50, 12.90], "recorded_at": ts(now - Duration::minutes(40)), "altitude": 0.0}),
            json!({"coordinates": [77.59, 12.97], "recorded_at": ts(now - Duration::minutes(25)), "altitude": 10.0}),
            json!({"coordinates": [77.5901, 12.97], "recorded_at": ts(now - Duration::minutes(22)), "altitude": 12.0}),
            json!({"coordinates": [77.60, 12.98], "recorded_at": ts(now - Duration::minutes(15)), "altitude": 40.0}),
        ],
    )
    .await;
    let ended = control_ok(&app, "v1", &id, "end", json!({"ended_at": ts(now - Duration::minutes(10))})).await;
    assert_eq!(ended["duration"], 20 * 60);
    let distance = ended["distance_covered"].as_f64().unwrap();
    assert!((1000.0..2000.0).contains(&distance), "{ended}");

    let (status, res) = app.get(&format!("/v1/api/trips/summary/?trip_id={id}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["code"], 200);
    let s = res["data"].as_object().unwrap();
    let mut keys: Vec<&str> = s.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, SUMMARY_KEYS);
    assert_eq!(s["trip_id"], id.as_str());
    assert_eq!(s["user_id"], user.as_str());
    assert_eq!(s["project_id"], app.project.project_id.as_str());
    assert_eq!(s["trip_status"], "completed");
    assert_eq!(s["duration"], 20 * 60);
    assert_eq!(s["distance_covered"], ended["distance_covered"], "summary and stored figures agree");
    let gain = s["total_elevation_gain"].as_f64().unwrap();
    // The stop counts once at its median altitude (11 m); the climb to 40 m is 29 m.
    assert_eq!(gain, 29.0, "the 2 m rise is noise, the 29 m one is not");
    let route = s["route"].as_array().unwrap();
    assert_eq!(route.len(), 3, "{}", s["route"]);
    let activity: Vec<&str> = route.iter().map(|p| p["activity"].as_str().unwrap()).collect();
    assert_eq!(activity, ["STOP", "STOP", "MOVING"]);
    assert_eq!(s["route_indexes"], json!([[1, 2], [3]]), "1-based, as Roam numbers them");
    assert_eq!(route[0]["coordinates"], json!({"type": "Point", "coordinates": [77.59, 12.97]}));
    assert_eq!(route[0]["altitude"], 10.0);
    assert_eq!(route[2]["recorded_at"], ts(now - Duration::minutes(15)));
    for p in route {
        let mut k: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort();
        assert_eq!(k, ["activity", "altitude", "coordinates", "distance", "duration", "elevation_gain", "recorded_at"]);
    }
    // Cumulative from the trip's start; the last point's figures are the trip's totals.
    let durations: Vec<i64> = route.iter().map(|p| p["duration"].as_i64().unwrap()).collect();
    assert_eq!(durations, [300, 480, 1200]);
    let gains: Vec<f64> = route.iter().map(|p| p["elevation_gain"].as_f64().unwrap()).collect();
    assert_eq!((gains[0], gains[1], gains[2]), (0.0, 0.0, gain));
    assert_eq!(route[0]["distance"], 0.0);
    assert_eq!(route[1]["distance"], 0.0, "wandering inside a stop adds nothing");
    assert_eq!(route[2]["distance"], s["distance_covered"]);
    assert_eq!(route[2]["distance"].as_f64().unwrap(), distance);

    // v3: the same without per-point figures and total_elevation_gain.
    let (status, res) = app.get(&format!("/v3/api/trips/summary/?trip_id={id}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let s3 = &res["data"];
    assert!(s3.get("total_elevation_gain").is_none(), "{s3}");
    for f in ["trip_id", "user_id", "project_id", "trip_status", "distance_covered", "duration", "route_indexes"] {
        assert_eq!(s3[f], s[f], "{f}");
    }
    for p in s3["route"].as_array().unwrap() {
        let mut k: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort();
        assert_eq!(k, ["activity", "altitude", "coordinates", "recorded_at"]);
    }

    for ver in VERSIONS {
        let (status, res) = app.get(&format!("/{ver}/api/trips/summary/")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "trip_id");
        let (status, res) = app.get(&format!("/{ver}/api/trips/summary/?trip_id={UNKNOWN_ID}")).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "trip_id");
    }

    // A trip not started yet has an empty summary.
    let t = create(&app, "v3", json!({})).await;
    let (_, res) = app.get(&format!("/v3/api/trips/summary/?trip_id={}", t["id"].as_str().unwrap())).await;
    let s = &res["data"];
    assert_eq!(s["trip_status"], "created");
    assert_eq!(s["route"], json!([]));
    assert_eq!(s["route_indexes"], json!([]));
    assert_eq!(s["distance_covered"], 0.0);
    assert_eq!(s["duration"], 0);
    assert!(s["user_id"].is_null());
});
