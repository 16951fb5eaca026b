//! Location ingest and history.

use axum::http::StatusCode;
use serde_json::{Value, json};
use shared::geometry::LngLat;

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};

fn loc(lng: f64, lat: f64, at: &str) -> Value {
    json!({"coordinates": [lng, lat], "recorded_at": at})
}

async fn ingest(app: &TestApp, user: &str, locations: Vec<Value>) -> Value {
    let (status, res) = app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": locations})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res["code"], 201);
    res["data"].clone()
}

fn recorded(res: &Value) -> Vec<String> {
    res["data"]["locations"].as_array().unwrap().iter().map(|l| l["recorded_at"].as_str().unwrap().to_owned()).collect()
}

both!(ingest_is_idempotent_and_accepts_out_of_order_batches, |app| async move {
    let u = app.create_user(json!({})).await;
    let batch = vec![loc(77.59, 12.97, "2024-05-01T10:00:00.000"), loc(77.60, 12.98, "2024-05-01T10:01:00.000")];
    let d = ingest(&app, &u, batch.clone()).await;
    assert_eq!((d["received"].clone(), d["stored"].clone(), d["duplicates"].clone()), (json!(2), json!(2), json!(0)));
    assert_eq!(d["user_id"], u.as_str());
    // The same batch again stores nothing; a fix inside a batch twice counts once.
    let d = ingest(&app, &u, batch.clone()).await;
    assert_eq!((d["stored"].clone(), d["duplicates"].clone()), (json!(0), json!(2)));
    let older = loc(77.50, 12.90, "2024-05-01T09:00:00.000");
    let d = ingest(&app, &u, vec![older.clone(), older, batch[0].clone()]).await;
    assert_eq!((d["received"].clone(), d["stored"].clone(), d["duplicates"].clone()), (json!(3), json!(1), json!(2)));

    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}")).await;
    assert_eq!(recorded(&res), ["2024-05-01T09:00:00.000", "2024-05-01T10:00:00.000", "2024-05-01T10:01:00.000"]);
    assert_eq!(res["data"]["app_id"], format!("{}_1", app.project.project_id));
    assert_eq!(res["data"]["user_id"], u.as_str());
    let first = &res["data"]["locations"][0];
    assert_eq!(first["coordinates"], json!({"type": "Point", "coordinates": [77.50, 12.90]}));
    assert_eq!(first["id"].as_str().unwrap().len(), 24);
    assert!(first["created_at"].is_string());

    // The newest by recorded_at, not the last sent.
    let (_, res) = app.get(&format!("/v1/api/user/?user_id={u}")).await;
    let last = &res["data"]["users"][0]["last_location_update"];
    assert_eq!(last["recorded_at"], "2024-05-01T10:01:00.000");
    assert_eq!(last["coordinates"]["coordinates"], json!([77.60, 12.98]));
});

both!(optional_fields_round_trip, |app| async move {
    let u = app.create_user(json!({})).await;
    let full = json!({"coordinates": [-0.1276, 51.5072], "recorded_at": "2024-05-01T10:00:00.123Z", "speed": 4.5,
        "accuracy": 8.0, "altitude": 35.2, "course": 90.0, "activity": "WALK", "battery_remaining": 77,
        "bat_stat": "Charging", "app_stat": "FOREGROUND", "gps_stat": true, "airplane_mode": false, "source": "HTTPS",
        "timezone_offset": "+0100"});
    ingest(&app, &u, vec![full.clone()]).await;
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}")).await;
    let l = &res["data"]["locations"][0];
    for k in [
        "speed",
        "accuracy",
        "altitude",
        "course",
        "activity",
        "battery_remaining",
        "bat_stat",
        "app_stat",
        "gps_stat",
        "airplane_mode",
        "source",
        "timezone_offset",
    ] {
        assert_eq!(l[k], full[k], "{k}");
    }
    assert_eq!(l["recorded_at"], "2024-05-01T10:00:00.123");
    assert!(l.get("vertical_accuracy").is_none());
});

both!(history_pages_and_filters_by_date_in_a_zone, |app| async move {
    let u = app.create_user(json!({})).await;
    // 24 fixes, one an hour through 2024-03-10 UTC.
    let locs = (0..24).map(|h| loc(10.0 + h as f64 / 100.0, 50.0, &format!("2024-03-10T{h:02}:30:00.000"))).collect();
    ingest(&app, &u, locs).await;
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}&start_date=2024-03-10&page_number=3")).await;
    assert_eq!(res["data"]["pages"], 3);
    assert_eq!(recorded(&res).len(), 4);
    assert_eq!(res["data"]["prev_page"], 2);
    assert!(res["data"]["next_page"].is_null());

    // 2024-03-10 in Tokyo (UTC+9) is 03-09T15:00Z..03-10T15:00Z: fixes 00:30..14:30 UTC.
    let (_, res) =
        app.get(&format!("/v1/api/location/?user_id={u}&start_date=2024-03-10&timezone_offset=Asia/Tokyo")).await;
    assert_eq!(res["data"]["pages"], 2, "{res}");
    let times = recorded(&res);
    assert_eq!(times[0], "2024-03-10T09:30:00.000", "timestamps come back in Tokyo time");
    let (_, res) =
        app.get(&format!("/v1/api/location/?user_id={u}&start_date=2024-03-11&timezone_offset=Asia/Tokyo")).await;
    assert_eq!(res["data"]["pages"], 1);
    assert_eq!(recorded(&res)[0], "2024-03-11T00:30:00.000");
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}&start_date=2024-03-09&end_date=2024-03-10")).await;
    assert_eq!(res["data"]["pages"], 3);
});

both!(points_encoded_decodes_back_to_the_stored_points, |app| async move {
    let u = app.create_user(json!({})).await;
    let pts = [(-122.41942, 37.77493), (-122.41, 37.78), (-122.4, 37.791), (-122.395, 37.8)];
    let locs = pts.iter().enumerate().map(|(i, (x, y))| loc(*x, *y, &format!("2024-06-01T08:0{i}:00.000"))).collect();
    ingest(&app, &u, locs).await;
    let (status, res) = app.get(&format!("/v1/api/location/?user_id={u}&points_encoded=true&page_number=7")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let d = &res["data"];
    assert_eq!(d["count"], 4);
    let line = polyline::decode_polyline(d["polyline"].as_str().unwrap(), 5).unwrap();
    let decoded: Vec<(f64, f64)> = line.coords().map(|c| (c.x, c.y)).collect();
    for (a, b) in decoded.iter().zip(pts.iter()) {
        assert!((a.0 - b.0).abs() < 1e-5 && (a.1 - b.1).abs() < 1e-5, "{a:?} vs {b:?}");
    }
    let timed = decode_time_aware_polyline(d["time_aware_polyline"].as_str().unwrap()).unwrap();
    assert_eq!(timed.len(), 4);
    let t0 = chrono::NaiveDateTime::parse_from_str("2024-06-01T08:00:00", "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp();
    for (i, (p, t)) in timed.iter().enumerate() {
        assert_eq!(*t, t0 + 60 * i as i64);
        assert!((p.lng - pts[i].0).abs() < 1e-5 && (p.lat - pts[i].1).abs() < 1e-5);
    }
    assert!(d.get("locations").is_none());
});

both!(batch_errors_name_the_location, |app| async move {
    let u = app.create_user(json!({})).await;
    let bad = |l: Value| json!({"user_id": u, "locations": [loc(1.0, 1.0, "2024-01-01T00:00:00.000"), l]});
    let cases = [
        (bad(loc(181.0, 0.0, "2024-01-01T00:00:00.000")), "locations[1].coordinates"),
        (bad(loc(0.0, -91.0, "2024-01-01T00:00:00.000")), "locations[1].coordinates"),
        (bad(json!({"coordinates": [1.0], "recorded_at": "2024-01-01T00:00:00.000"})), "locations[1].coordinates"),
        (bad(json!({"coordinates": [1.0, 2.0], "recorded_at": "tuesday"})), "locations[1].recorded_at"),
        (bad(json!({"coordinates": [1.0, 2.0]})), "recorded_at"),
        (
            bad(json!({"coordinates": [1.0, 2.0], "recorded_at": "2024-01-01T00:00:00.000", "speed": "fast"})),
            "locations[1].speed",
        ),
        (json!({"user_id": u, "locations": []}), "locations"),
        (json!({"user_id": u, "locations": vec![loc(1.0, 1.0, "2024-01-01T00:00:00.000"); 1001]}), "locations"),
    ];
    for (body, field) in cases {
        let (status, res) = app.call("POST", "/v1/api/location/", Key::Secret, Some(&body)).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
    // Nothing of a rejected batch was stored.
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}")).await;
    assert_eq!(res["data"]["locations"], json!([]));
    // A non-finite number cannot be written in JSON; an overflowing one is rejected by the parser.
    let raw =
        format!(r#"{{"user_id":"{u}","locations":[{{"coordinates":[1e999,2],"recorded_at":"2024-01-01T00:00:00"}}]}}"#);
    let req = axum::http::Request::post("/v1/api/location/")
        .header("api-key", &app.project.api_key)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(raw))
        .unwrap();
    let (status, res) = app.send(req).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "body");

    let (status, res) = app
        .post(
            "/v1/api/location/",
            &json!({"user_id": "0123456789abcdef01234567", "locations": [loc(1.0, 1.0, "2024-01-01T00:00:00")]}),
        )
        .await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = app.get("/v1/api/location/").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "user_id");
    let (status, res) = app.get(&format!("/v1/api/location/?user_id={u}&points_encoded=maybe")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "points_encoded");
});

both!(a_full_batch_of_a_thousand_is_stored, |app| async move {
    let u = app.create_user(json!({})).await;
    let locs: Vec<Value> = (0..1000)
        .map(|i| {
            loc(
                13.4 + i as f64 * 1e-4,
                52.5,
                &format!("2024-07-01T{:02}:{:02}:{:02}.000", i / 3600, (i / 60) % 60, i % 60),
            )
        })
        .collect();
    let d = ingest(&app, &u, locs).await;
    assert_eq!(d["stored"], 1000);
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}&page_number=100")).await;
    assert_eq!(res["data"]["pages"], 100);
    assert_eq!(recorded(&res).last().unwrap(), "2024-07-01T00:16:39.000");
});

both!(roam_sdk_fields_round_trip, |app| async move {
    // What current Roam SDKs send with each fix (docs.roam.ai "Location Updates").
    let u = app.create_user(json!({})).await;
    let fix = json!({"coordinates": [77.6168, 12.9001], "recorded_at": "2024-05-01T10:00:00.000", "speed": 5,
        "altitude": 892.75, "course": -1, "horizontal_accuracy": 17.07, "vertical_accuracy": 20.6, "activity": "MOVING",
        "app_context": "F", "tracking_mode": "active", "tz_offset": "+0530", "battery_status": "unplugged",
        "battery_remaining": 51, "battery_saver": false, "network_status": true, "location_permission": true,
        "device_manufacturer": "Google", "device_model": "Pixel 8", "os_version": "14", "gps_status": true});
    ingest(&app, &u, vec![fix.clone()]).await;
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}")).await;
    let l = &res["data"]["locations"][0];
    for (k, v) in fix.as_object().unwrap() {
        if k == "coordinates" || k == "speed" || k == "course" {
            continue;
        }
        assert_eq!(&l[k], v, "{k}: {l}");
    }
    assert_eq!((l["speed"].as_f64(), l["course"].as_f64()), (Some(5.0), Some(-1.0)), "{l}");
    // The latest location of the user carries them too.
    let (_, res) = app.get(&format!("/v1/api/user/?user_id={u}")).await;
    assert_eq!(res["data"]["users"][0]["last_location_update"]["tz_offset"], "+0530", "{res}");
    // Free text is bounded like the other fields.
    let mut long = fix.clone();
    long["tracking_mode"] = json!("x".repeat(513));
    let (status, res) = app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": u, "locations": [long]})))
        .await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "locations[0].tracking_mode");
});

both!(start_and_end_dates_may_be_date_times, |app| async move {
    // Roam's own example lists locations between two date-times.
    let u = app.create_user(json!({})).await;
    let locs =
        (0..6).map(|m| loc(10.0 + m as f64 / 1000.0, 50.0, &format!("2024-03-10T08:{:02}:00.000", m * 10))).collect();
    ingest(&app, &u, locs).await;
    let (status, res) = app
        .get(&format!("/v1/api/location/?user_id={u}&start_date=2024-03-10T08:10:00&end_date=2024-03-10T08:30:00"))
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(recorded(&res), ["2024-03-10T08:10:00.000", "2024-03-10T08:20:00.000", "2024-03-10T08:30:00.000"]);
    // A date-time start alone runs to the end of its day; a date end is the whole day.
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={u}&start_date=2024-03-10T08:35:00")).await;
    assert_eq!(recorded(&res), ["2024-03-10T08:40:00.000", "2024-03-10T08:50:00.000"]);
    let (_, res) =
        app.get(&format!("/v1/api/location/?user_id={u}&start_date=2024-03-10T08:45:00Z&end_date=2024-03-10")).await;
    assert_eq!(recorded(&res), ["2024-03-10T08:50:00.000"]);
    // Zone-less date-times are in timezone_offset when it is given (Berlin is UTC+1 in March).
    let uri = format!("/v1/api/location/?user_id={u}&start_date=2024-03-10T09:45:00&timezone_offset=Europe/Berlin");
    let (_, res) = app.get(&uri).await;
    assert_eq!(recorded(&res), ["2024-03-10T09:50:00.000"], "local times returned");
    for (start, end, field) in [
        ("2024-03-10T08:30:00", "2024-03-10T08:10:00", "end_date"),
        ("2024-03-10T25:00:00", "2024-03-11", "start_date"),
        ("2024-03-10", "tomorrow-at-noon", "end_date"),
    ] {
        let (status, res) = app.get(&format!("/v1/api/location/?user_id={u}&start_date={start}&end_date={end}")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, field);
    }
});

/// A time-aware polyline (HyperTrack's format) back into `(position, unix seconds)`, as a client
/// decodes it.
fn decode_time_aware_polyline(s: &str) -> Option<Vec<(LngLat, i64)>> {
    let bytes = s.as_bytes();
    let (mut i, mut acc, mut out) = (0usize, [0i64; 3], Vec::new());
    while i < bytes.len() {
        for slot in acc.iter_mut() {
            let (mut result, mut shift) = (0u64, 0u32);
            loop {
                let b = u64::from(*bytes.get(i)?).checked_sub(63)?;
                i += 1;
                result |= (b & 0x1f).checked_shl(shift)?;
                shift += 5;
                if b < 0x20 {
                    break;
                }
            }
            let d = if result & 1 == 1 { !(result >> 1) as i64 } else { (result >> 1) as i64 };
            *slot += d;
        }
        out.push((LngLat { lng: acc[1] as f64 / 1e5, lat: acc[0] as f64 / 1e5 }, acc[2]));
    }
    Some(out)
}
