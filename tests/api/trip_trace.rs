//! A trip driven end to end by a generated GPS trace: a few kilometers of road, one stop of
//! several minutes with wandering and wild fixes, a pause, and a batch that arrives after the end.

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp};
use crate::trace::{Fix, Trace, geodesic};

fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
}

async fn control(app: &TestApp, trip: &str, action: &str, field: &str, at: DateTime<Utc>) -> Value {
    let body = json!({"trip_id": trip, "action": action, field: ts(at)});
    let (status, res) = app.call("POST", "/v3/api/trips/controls/", Key::Secret, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{action}: {res}");
    res["data"][0].clone()
}

async fn ingest(app: &TestApp, user: &str, fixes: &[Fix]) {
    for batch in fixes.chunks(40) {
        let locs: Vec<Value> = batch.iter().map(Fix::json).collect();
        let body = json!({"user_id": user, "locations": locs});
        let (status, res) = app.call("POST", "/v1/api/location/", Key::Publishable, Some(&body)).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
    }
}

async fn summary(app: &TestApp, trip: &str) -> Value {
    let (status, res) = app.get(&format!("/v1/api/trips/summary/?trip_id={trip}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    res["data"].clone()
}

both!(a_driven_trip_reports_true_distance_stop_and_active_time, |app| async move {
    // Berlin: east along one street, north, then east again; a delivery stop on the second leg.
    let a = (13.37700, 52.51630);
    let b = (13.39900, 52.51630);
    let stop = (13.39900, 52.52100);
    let c = (13.39900, 52.52650);
    let d = (13.41800, 52.52650);
    let clean = geodesic(a, b) + geodesic(b, stop) + geodesic(stop, c) + geodesic(c, d);

    let t0 = Utc::now() - Duration::hours(3);
    let mut tr = Trace::new(42, t0, 4.0);
    tr.drive((a.0 - 0.0003, a.1), a, 1.0, 5, (30.0, 30.0)); // waiting at the origin
    let start_at = tr.now;
    tr.drive(a, b, 12.0, 2, (30.0, 34.0));
    tr.drive(b, stop, 10.0, 2, (34.0, 40.0));
    let stop_from = tr.now;
    tr.stay(stop, 150, 10, 6.0, 0, 40.0);
    let pause_at = tr.now;
    tr.stay(stop, 180, 10, 6.0, 3, 40.0); // paused: wandering and wild fixes, none counted
    let resume_at = tr.now;
    tr.stay(stop, 120, 10, 6.0, 2, 40.0);
    tr.drive(stop, c, 10.0, 2, (40.0, 41.0));
    let late_from = tr.fixes.len();
    tr.drive(c, d, 12.0, 2, (41.0, 47.0));
    let late_to = tr.fixes.len();
    let end_at = tr.now + Duration::seconds(1);
    let fixes = tr.fixes.clone();

    let user = app.create_user(json!({})).await;
    let body = json!({"user_id": user, "origins": [[a.0, a.1]], "destinations": [[d.0, d.1]]});
    let (_, res) = app.post("/v3/api/trips/", &body).await;
    let trip = res["data"][0]["id"].as_str().unwrap().to_owned();

    ingest(&app, &user, &fixes[..3]).await; // before the start: not part of the trip
    control(&app, &trip, "start", "started_at", start_at).await;
    let before_pause = fixes.iter().position(|f| f.at > pause_at).unwrap();
    ingest(&app, &user, &fixes[3..before_pause]).await;
    control(&app, &trip, "pause", "paused_at", pause_at).await;
    let after_resume = fixes.iter().position(|f| f.at > resume_at).unwrap();
    ingest(&app, &user, &fixes[before_pause..after_resume]).await;
    control(&app, &trip, "resume", "resumed_at", resume_at).await;
    ingest(&app, &user, &fixes[after_resume..late_from]).await;
    let ended = control(&app, &trip, "end", "ended_at", end_at).await;
    // The last leg was recorded offline and arrives after the end.
    let early_distance = ended["distance_covered"].as_f64().unwrap();
    assert!(early_distance < clean * 0.8, "last leg not yet known: {early_distance} vs {clean}");
    ingest(&app, &user, &fixes[late_from..late_to]).await;

    let (_, res) = app.get(&format!("/v3/api/trips/?trip_id={trip}")).await;
    let t = &res["data"][0];
    let distance = t["distance_covered"].as_f64().unwrap();
    eprintln!(
        "trip distance {distance:.1} m, clean route {clean:.1} m, error {:.3}%",
        (distance - clean) / clean * 100.0
    );
    assert!((distance - clean).abs() / clean < 0.01, "distance {distance:.1} m vs clean route {clean:.1} m");
    let expected_duration = (end_at - start_at - (resume_at - pause_at)).num_seconds();
    assert!(
        (t["duration"].as_i64().unwrap() - expected_duration).abs() <= 1,
        "{} vs {expected_duration}",
        t["duration"]
    );

    let s = summary(&app, &trip).await;
    assert_eq!(s["trip_status"], "completed");
    let sd = s["distance_covered"].as_f64().unwrap();
    assert!((sd - distance).abs() < 0.5, "summary {sd} vs trip {distance}");
    let route = s["route"].as_array().unwrap();
    // One stop, where it was, from its first fix to its last.
    let stops: Vec<&Value> = s["route_indexes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|seg| route[seg[0].as_u64().unwrap() as usize - 1]["activity"] == "STOP")
        .collect();
    assert_eq!(stops.len(), 1, "{}", s["route_indexes"]);
    // route_indexes are 1-based.
    let (first, last) = (stops[0][0].as_u64().unwrap() as usize - 1, stops[0][1].as_u64().unwrap() as usize - 1);
    let pts: Vec<(f64, f64)> = route[first..=last]
        .iter()
        .map(|p| {
            (p["coordinates"]["coordinates"][0].as_f64().unwrap(), p["coordinates"]["coordinates"][1].as_f64().unwrap())
        })
        .collect();
    let centre = (
        pts.iter().map(|p| p.0).sum::<f64>() / pts.len() as f64,
        pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64,
    );
    assert!(geodesic(centre, stop) < 15.0, "stop found {:.1} m away", geodesic(centre, stop));
    let first_at = route[first]["recorded_at"].as_str().unwrap();
    assert!(
        first_at >= ts(stop_from - Duration::seconds(30)).as_str()
            && first_at <= ts(stop_from + Duration::seconds(30)).as_str()
    );
    // Neither paused fixes nor wild ones are in the route.
    for p in route {
        let at = p["recorded_at"].as_str().unwrap();
        assert!(!(at > ts(pause_at).as_str() && at < ts(resume_at).as_str()), "paused fix {at} in route");
    }
    assert!(route.iter().all(|p| p["activity"] == "STOP" || p["activity"] == "MOVING"));
    let gain = s["total_elevation_gain"].as_f64().unwrap();
    assert!((10.0..=25.0).contains(&gain), "elevation gain {gain} (true 17)");
    let last = route.last().unwrap();
    assert_eq!(last["distance"].as_f64().unwrap(), sd, "cumulative per-point distance ends at the total");
    assert_eq!(last["duration"], s["duration"], "cumulative per-point duration ends at the total");

    // Events, in order.
    let types: Vec<&str> = t["events"].as_array().unwrap().iter().map(|e| e["event_type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["service:trip:created", "trip:started", "trip:user_reached_origin", "trip:user_left_origin", "trip:completed"],
        "{types:?}"
    );
    let reached = &t["events"][2];
    assert_eq!(reached["trip_location_id"], t["origins"][0]["id"]);
    assert!(reached["user_location_id"].as_str().is_some_and(|s| s.len() == 24));
    assert_eq!(t["origins"][0]["reached"], true);
    assert_eq!(t["origins"][0]["left"], true);
});

both!(v2_stops_get_arrival_and_departure_from_locations, |app| async move {
    let depot = (2.35220, 48.85660);
    let shop = (2.36500, 48.85660);
    let t0 = Utc::now() - Duration::hours(2);
    let mut tr = Trace::new(7, t0, 3.0);
    tr.stay(depot, 60, 10, 3.0, 0, 35.0);
    tr.drive(depot, shop, 8.0, 2, (35.0, 35.0));
    let arrive = tr.now;
    tr.stay(shop, 300, 10, 4.0, 0, 35.0);
    let leave = tr.now;
    tr.drive(shop, depot, 8.0, 2, (35.0, 35.0));
    let user = app.create_user(json!({"name": "Ana"})).await;
    let stop = |c: (f64, f64), name: &str| json!({"name": name, "geometry_radius": 60, "geometry": {"type": "Point", "coordinates": [c.0, c.1]}});
    let body = json!({"user_id": user, "name": "Round", "stops": [stop(depot, "depot"), stop(shop, "shop")]});
    let (_, res) = app.call("POST", "/v2/trips", Key::Bearer, Some(&body)).await;
    let id = res["trip"]["id"].as_str().unwrap().to_owned();
    assert_eq!(res["trip"]["user"]["name"], "Ana");
    let ctl = |action: &str, field: &str, at: DateTime<Utc>| json!({"action": action, field: ts(at)});
    let (status, res) =
        app.call("POST", &format!("/v2/trips/{id}/controls"), Key::Bearer, Some(&ctl("start", "started_at", t0))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    ingest(&app, &user, &tr.fixes).await;
    let (_, res) =
        app.call("POST", &format!("/v2/trips/{id}/controls"), Key::Bearer, Some(&ctl("end", "ended_at", tr.now))).await;
    let trip = &res["trip"];
    assert_eq!(trip["trip_state"], "ended");
    let shop_stop = &trip["stops"][1];
    let arrived = DateTime::parse_from_rfc3339(&format!("{}Z", shop_stop["arrived_at"].as_str().unwrap())).unwrap();
    let departed = DateTime::parse_from_rfc3339(&format!("{}Z", shop_stop["departed_at"].as_str().unwrap())).unwrap();
    assert!((arrived.with_timezone(&Utc) - arrive).num_seconds().abs() <= 20, "arrived {arrived} vs {arrive}");
    assert!((departed.with_timezone(&Utc) - leave).num_seconds().abs() <= 20, "departed {departed} vs {leave}");
    assert!(trip["stops"][0]["arrived_at"].is_string() && trip["stops"][0]["departed_at"].is_string());
    let clean = 2.0 * geodesic(depot, shop);
    let total = trip["total_distance"].as_f64().unwrap();
    assert!((total - clean).abs() / clean < 0.02, "{total} vs {clean}");
    assert!(trip["start_location"]["coordinates"].is_object() && trip["end_location"]["coordinates"].is_object());
    assert_eq!(trip["total_duration"], (tr.now - t0).num_seconds());
});

/// The distance algorithm alone, across noise levels and seeds, on straight legs, right-angle
/// turns and a winding road (radii 150 m and 80 m): always within 1% of the clean route.
#[test]
fn distance_is_within_one_percent_for_any_jitter_up_to_8_m() {
    use shared::domain::locations::Location;
    use shared::domain::trips::route;
    let a = (13.37700, 52.51630);
    let b = (13.39900, 52.51630);
    let c = (13.39900, 52.52650);
    let d = (13.41800, 52.52650);
    // A winding road: half circle of radius 150 m then an S-bend, as 40 short straight pieces.
    let mut curvy = vec![d];
    for i in 1..=20 {
        let th = std::f64::consts::PI * i as f64 / 20.0;
        let (lng, lat) = crate::trace::offset(d.0, d.1, 150.0 * th.sin(), 150.0 - 150.0 * th.cos());
        curvy.push((lng, lat));
    }
    let last = *curvy.last().unwrap();
    for i in 1..=20 {
        let th = std::f64::consts::PI * i as f64 / 20.0;
        let (lng, lat) = crate::trace::offset(last.0, last.1, -80.0 * th.sin(), 80.0 - 80.0 * th.cos());
        curvy.push((lng, lat));
    }
    for jitter in [0.0, 2.0, 4.0, 6.0, 8.0] {
        let mut errs = Vec::new();
        for seed in 1..=8u64 {
            let t0 = Utc::now() - Duration::hours(3);
            let mut tr = Trace::new(seed, t0, jitter);
            let mut clean = 0.0;
            let mut legs = vec![a, b, c, d];
            legs.extend(curvy.iter().skip(1));
            tr.fixes.push(Fix { lng: a.0, lat: a.1, at: tr.now, accuracy: 5.0, altitude: 0.0 });
            for w in legs.windows(2) {
                tr.drive(w[0], w[1], 11.0, 2, (0.0, 0.0));
                clean += geodesic(w[0], w[1]);
            }
            let locs: Vec<Location> = tr.fixes.iter().map(|f| serde_json::from_value(f.json()).unwrap()).collect();
            let r = route::analyse(&locs, &[]);
            errs.push((r.distance_m - clean) / clean * 100.0);
        }
        eprintln!("jitter {jitter} m: errors % {:?}", errs.iter().map(|e| format!("{e:.2}")).collect::<Vec<_>>());
        assert!(errs.iter().all(|e| e.abs() < 1.0), "jitter {jitter} m: {errs:?}");
    }
}
