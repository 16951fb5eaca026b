//! Long answers are gzipped for clients that accept it (a Lambda function may answer 6 MB at
//! most), short ones never; the gzipped body is the same document.

use std::io::Read;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

use crate::both;
use crate::helpers::TestApp;
use crate::trips::{control, create, ingest};

/// GET with the secret key, with or without `Accept-Encoding: gzip`: status, content encoding,
/// the body's bytes as sent.
async fn get_encoded(app: &TestApp, uri: &str, gzip: bool) -> (StatusCode, Option<String>, Vec<u8>) {
    let mut req = Request::builder().uri(uri).header("Api-Key", &app.project.api_key);
    if gzip {
        req = req.header("Accept-Encoding", "gzip");
    }
    let res = app.router.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let status = res.status();
    let enc = res.headers().get("content-encoding").map(|v| v.to_str().unwrap().to_owned());
    (status, enc, res.into_body().collect().await.unwrap().to_bytes().to_vec())
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).expect("a gzip stream");
    out
}

both!(long_answers_are_gzipped_when_accepted_and_short_ones_never, |app| async move {
    let u = app.create_user(json!({})).await;
    let t = create(&app, "v1", json!({"user_id": u})).await;
    let id = t["id"].as_str().unwrap().to_owned();
    let (status, res) =
        control(&app, "v1", json!({"trip_id": id, "action": "start", "started_at": "2024-03-10T07:59:00"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    for batch in 0..8 {
        let fixes = (0..100)
            .map(|i| {
                let n = batch * 100 + i;
                json!({"coordinates": [2.35 + n as f64 / 10_000.0, 48.85], "recorded_at": format!("2024-03-10T{:02}:{:02}:{:02}Z", 8 + n / 3600, n / 60 % 60, n % 60), "accuracy": 5})
            })
            .collect();
        ingest(&app, &u, fixes).await;
    }
    let (status, res) =
        control(&app, "v1", json!({"trip_id": id, "action": "end", "ended_at": "2024-03-10T08:20:00"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");

    let long = format!("/v1/api/trips/summary/?trip_id={id}");
    let (status, enc, plain) = get_encoded(&app, &long, false).await;
    assert_eq!((status, enc.as_deref()), (StatusCode::OK, None), "not asked for, not compressed");
    assert!(plain.len() > 65_535, "the summary is long: {} bytes", plain.len());
    let (status, enc, zipped) = get_encoded(&app, &long, true).await;
    assert_eq!((status, enc.as_deref()), (StatusCode::OK, Some("gzip")));
    assert!(zipped.len() * 4 < plain.len(), "{} bytes gzipped of {}", zipped.len(), plain.len());
    assert_eq!(gunzip(&zipped), plain, "the same document");

    let (status, enc, body) = get_encoded(&app, &format!("/v1/api/trips/?trip_id={id}"), true).await;
    assert_eq!((status, enc.as_deref()), (StatusCode::OK, None), "{}", String::from_utf8_lossy(&body));
    let v: serde_json::Value = serde_json::from_slice(&body).expect("a short answer, sent as it is");
    assert_eq!(v["code"], 200, "{v}");
});

both!(a_long_summary_is_sent_as_written_and_is_the_same_document_plain_and_gzipped, |app| async move {
    use shared::domain::trips::render::PIECES_FROM_POINTS;
    let u = app.create_user(json!({})).await;
    let t = create(&app, "v1", json!({"user_id": u})).await;
    let id = t["id"].as_str().unwrap().to_owned();
    let (status, res) =
        control(&app, "v1", json!({"trip_id": id, "action": "start", "started_at": "2024-03-10T06:59:00"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    // A fix a second along a line, a little over the route points a summary is sent in pieces from.
    let fixes = PIECES_FROM_POINTS + 300;
    for batch in (0..fixes).collect::<Vec<_>>().chunks(shared::domain::locations::MAX_BATCH) {
        let fixes = batch
            .iter()
            .map(|&n| {
                json!({"coordinates": [2.35 + n as f64 / 10_000.0, 48.85], "recorded_at": format!("2024-03-10T{:02}:{:02}:{:02}Z", 7 + n / 3600, n / 60 % 60, n % 60), "accuracy": 5})
            })
            .collect();
        ingest(&app, &u, fixes).await;
    }
    let (status, res) =
        control(&app, "v1", json!({"trip_id": id, "action": "end", "ended_at": "2024-03-10T09:00:00"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");

    for ver in ["v1", "v3"] {
        let uri = format!("/{ver}/api/trips/summary/?trip_id={id}");
        let req = Request::builder().uri(&uri).header("Api-Key", &app.project.api_key).body(Body::empty()).unwrap();
        let res = app.router.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["content-type"], "application/json");
        // Sent while written: no length known before the last piece.
        assert!(
            axum::body::HttpBody::size_hint(res.body()).exact().is_none(),
            "{ver}: the long summary was written whole first"
        );
        let plain = res.into_body().collect().await.unwrap().to_bytes().to_vec();
        let (status, enc, zipped) = get_encoded(&app, &uri, true).await;
        assert_eq!((status, enc.as_deref()), (StatusCode::OK, Some("gzip")));
        assert!(zipped.len() * 4 < plain.len(), "{ver}: {} bytes gzipped of {}", zipped.len(), plain.len());
        assert_eq!(gunzip(&zipped), plain, "{ver}: the same document");
        let v: serde_json::Value = serde_json::from_slice(&plain).expect("one JSON document");
        let route = v["data"]["route"].as_array().expect("route");
        assert!(route.len() >= PIECES_FROM_POINTS, "{ver}: {} route points: not sent in pieces", route.len());
        assert_eq!((&v["code"], &v["data"]["trip_id"]), (&json!(200), &json!(id)), "{ver}");
        // The figures run on across the pieces: cumulative, the last point's the trip's total.
        if ver == "v1" {
            let distances: Vec<f64> = route.iter().map(|p| p["distance"].as_f64().expect("distance")).collect();
            assert!(distances.windows(2).all(|w| w[0] <= w[1]), "cumulative distance never falls");
            assert_eq!(route.last().unwrap()["distance"], v["data"]["distance_covered"]);
        }
    }
});
