//! Bad input: a 400 (or 413/404/405) in the envelope naming what was wrong; never a 500.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

use crate::both;
use crate::helpers::assert_error;

both!(malformed_bodies_are_400_naming_the_field, |app| async move {
    let send = |body: &'static str, ctype: Option<&'static str>| {
        let app = &app;
        async move {
            let mut req = Request::post("/v1/api/user/").header("api-key", &app.project.api_key);
            if let Some(c) = ctype {
                req = req.header("content-type", c);
            }
            app.send(req.body(Body::from(body)).unwrap()).await
        }
    };
    let json_ct = Some("application/json");
    let (s, r) = send("{\"app_type\": 1,", json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "malformed JSON");
    let (s, r) = send(r#"{"app_type": "one", "device_token": "t"}"#, json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "app_type");
    let (s, r) = send(r#"{"device_token": "t"}"#, json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "app_type");
    let (s, r) = send(r#"{"app_type": 1}"#, json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "device_token");
    let (s, r) = send(r#"{"app_type": 3, "device_token": "t"}"#, json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "app_type");
    let (s, r) = send(r#"{"app_type": 1, "device_token": "t", "metadata": "x"}"#, json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "metadata");
    let (s, r) = send(r#"{"app_type": 1, "device_token": "t"}"#, None).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "Content-Type");
    let (s, r) = send(r#"{"app_type": 1, "device_token": "t"}"#, Some("text/plain")).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "Content-Type");
    let (s, r) = send("[1, 2]", json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "body");
    let (s, r) = send("", json_ct).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "body");
    // JSON with a charset parameter is still JSON.
    let (s, r) = send(r#"{"app_type": 1, "device_token": "t"}"#, Some("application/json; charset=utf-8")).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
});

both!(oversized_body_is_413, |app| async move {
    let big = format!(r#"{{"app_type": 1, "device_token": "{}"}}"#, "x".repeat(3 * 1024 * 1024));
    let req = Request::post("/v1/api/user/")
        .header("api-key", &app.project.api_key)
        .header("content-type", "application/json")
        .body(Body::from(big))
        .unwrap();
    let (s, r) = app.send(req).await;
    assert_error(s, &r, StatusCode::PAYLOAD_TOO_LARGE, "body");
});

both!(bad_query_parameters_are_400_naming_them, |app| async move {
    let u = app.create_user(json!({})).await;
    let cases = [
        ("/v1/api/user/?start_date=2024-02-30", "start_date"),
        ("/v1/api/user/?start_date=yesterday", "start_date"),
        ("/v1/api/user/?end_date=2024-01-01", "end_date"),
        ("/v1/api/user/?start_date=2024-01-02&end_date=2024-01-01", "end_date"),
        ("/v1/api/user/?start_date=2024-01-02&end_date=2024-01-02", "end_date"),
        ("/v1/api/user/?timezone_offset=Mars/Base", "timezone_offset"),
        ("/v1/api/user/?page_number=0", "page_number"),
        ("/v1/api/user/?page_number=two", "page_number"),
        ("/v1/api/user/?metadata=novalue", "metadata"),
        ("/v1/api/user/?page_number=1&page_number=2", "page_number"),
    ];
    for (uri, field) in cases {
        let (s, r) = app.get(uri).await;
        assert_error(s, &r, StatusCode::BAD_REQUEST, field);
        let loc_uri = uri.replacen("/v1/api/user/?", &format!("/v1/api/location/?user_id={u}&"), 1);
        if field != "metadata" {
            let (s, r) = app.get(&loc_uri).await;
            assert_error(s, &r, StatusCode::BAD_REQUEST, field);
        }
    }
});

both!(unknown_paths_and_methods_answer_in_the_envelope, |app| async move {
    let (s, r) = app.get("/v1/api/nothing/").await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "path");
    let (s, r) = app.call("PATCH", "/v1/api/user/", crate::helpers::Key::Secret, None).await;
    assert_error(s, &r, StatusCode::METHOD_NOT_ALLOWED, "PATCH");
    let (s, r) = app.call("DELETE", "/v1/api/location", crate::helpers::Key::Secret, None).await;
    assert_error(s, &r, StatusCode::METHOD_NOT_ALLOWED, "DELETE");
});

both!(input_dynamodb_cannot_store_is_refused_or_normalised_on_both_backends, |app| async move {
    let user = app.create_user(json!({})).await;
    for metadata in [json!({"": 1}), json!({"a": {"": 1}}), json!({"a": [1e-200]}), json!({"a": 1e200})] {
        let (s, r) =
            app.post("/v1/api/user/", &json!({"app_type": 1, "device_token": "t", "metadata": metadata})).await;
        assert_error(s, &r, StatusCode::BAD_REQUEST, "metadata");
    }
    let loc = |extra: serde_json::Value| {
        let mut l = json!({"coordinates": [1.0, 2.0], "recorded_at": "2024-01-01T00:00:00.000"});
        l.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({"user_id": user, "locations": [l]})
    };
    let (s, r) = app.post("/v1/api/location/", &loc(json!({"accuracy": 1.79e308}))).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "locations[0].accuracy");
    // A sub-nanodegree coordinate is zero.
    let (s, r) = app.post("/v1/api/location/", &loc(json!({"coordinates": [2.3e-283, 1.0]}))).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (_, r) = app.get(&format!("/v1/api/location/?user_id={user}")).await;
    assert_eq!(r["data"]["locations"][0]["coordinates"]["coordinates"], json!([0.0, 1.0]));
    // Long trip text is refused before it reaches a store.
    let long = "x".repeat(2000);
    let (s, r) = app.call("POST", "/v2/trips", crate::helpers::Key::Bearer, Some(&json!({"name": long}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert!(r["description"].as_str().unwrap().contains("name"), "{r}");
    let stop = json!({"address": long, "geometry": {"type": "Point", "coordinates": [1.0, 2.0]}});
    let (s, r) = app.call("POST", "/v2/trips", crate::helpers::Key::Bearer, Some(&json!({"stops": [stop]}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert!(r["description"].as_str().unwrap().contains("stops[0].address"), "{r}");
    // A path segment that is not UTF-8 answers in the v2 envelope.
    let (s, r) = app.call("GET", "/v2/trips/%FF", crate::helpers::Key::Bearer, None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(r["message"], "invalid_request_error");
});

both!(an_ingest_batch_that_is_not_an_array_of_locations_is_400_naming_it, |app| async move {
    let user = app.create_user(json!({})).await;
    let fix = |s: u32| json!({"coordinates": [13.4, 52.5], "recorded_at": format!("2024-01-01T00:00:{s:02}.000")});
    for locations in [json!({}), json!("x"), json!(null), json!(3)] {
        let (s, r) = app.post("/v1/api/location/", &json!({"user_id": user, "locations": locations})).await;
        assert_error(s, &r, StatusCode::BAD_REQUEST, "locations");
    }
    let (s, r) = app.post("/v1/api/location/", &json!({"user_id": user, "locations": []})).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "locations");
    // A bad element past the room made for a usual batch (128) is named by its index.
    let mut many: Vec<_> = (0..150).map(|k| fix(k % 60)).collect();
    many[140] = json!({"coordinates": [13.4, 52.5]});
    let (s, r) = app.post("/v1/api/location/", &json!({"user_id": user, "locations": many})).await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "locations[140]");
    // 150 distinct fixes are all stored.
    let many: Vec<_> = (0..150)
        .map(|k| json!({"coordinates": [13.4 + f64::from(k) * 1e-4, 52.5], "recorded_at": format!("2024-01-01T00:{:02}:{:02}.000", k / 60, k % 60)}))
        .collect();
    let (s, r) = app.post("/v1/api/location/", &json!({"user_id": user, "locations": many})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!((r["data"]["received"].clone(), r["data"]["stored"].clone()), (json!(150), json!(150)), "{r}");
});
