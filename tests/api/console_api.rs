//! What the console needs of the API: sessions the secret key opens for a browser tab (sign in,
//! use, sign out, end by id, end with the key that opened them; no key management and no second
//! session from a session; the publishable key refused), the users in a map's view
//! (`/v1/api/users/positions/`) and the geofences in it (`/v1/api/geofences/in-view/`), each
//! project seeing its own only.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};

const SESSIONS: &str = "/v1/api/console/sessions/";

async fn open(app: &TestApp, key: Key<'_>) -> Value {
    let (status, res) = app.call("POST", SESSIONS, key, Some(&json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    res["data"].clone()
}

both!(a_console_session_acts_as_the_secret_key_until_signed_out, |app| async move {
    let s = open(&app, Key::Secret).await;
    let token = s["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("wm_cs_"), "{s}");
    // In UTC, as every time the API answers.
    let expires =
        chrono::NaiveDateTime::parse_from_str(s["expires_at"].as_str().unwrap(), "%Y-%m-%dT%H:%M:%S%.f").unwrap();
    let hours = (expires - chrono::Utc::now().naive_utc()).num_minutes() as f64 / 60.0;
    assert!((7.9..=8.1).contains(&hours), "8 hours by default: {s}");

    // It reads and writes as the secret key does.
    let (status, res) = app.call("GET", "/v1/api/user/", Key::Raw(&token), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let body = json!({"app_type": 1, "device_token": "t", "description": "from the console"});
    let (status, res) = app.call("POST", "/v1/api/user/", Key::Raw(&token), Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    // It is not listed with the project's keys.
    let (_, keys) = app.call("GET", "/v1/api/keys/", Key::Raw(&token), None).await;
    assert_eq!(keys["data"]["keys"].as_array().unwrap().len(), 3, "{keys}");

    // But it makes no key and no other session: a stolen tab must not outlive itself.
    let (status, res) = app.call("POST", "/v1/api/keys/", Key::Raw(&token), Some(&json!({"kind": "secret"}))).await;
    assert_error(status, &res, StatusCode::FORBIDDEN, "Api-Key");
    let (status, res) = app.call("POST", SESSIONS, Key::Raw(&token), Some(&json!({}))).await;
    assert_error(status, &res, StatusCode::FORBIDDEN, "Api-Key");

    // Signing out ends it at once.
    let (status, res) = app.call("DELETE", SESSIONS, Key::Raw(&token), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["session_id"], s["session_id"], "{res}");
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Raw(&token), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a signed-out session answers 401");
    // The secret key itself is no session to sign out.
    let (status, res) = app.call("DELETE", SESSIONS, Key::Secret, None).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "Api-Key");
});

both!(sessions_are_refused_to_the_publishable_key_and_checked, |app| async move {
    let (status, res) = app.call("POST", SESSIONS, Key::Publishable, Some(&json!({}))).await;
    assert_error(status, &res, StatusCode::FORBIDDEN, "Api-Key");
    assert!(res["msg"].as_str().unwrap().contains("publishable"), "a clear message: {res}");
    let (status, res) = app.call("POST", SESSIONS, Key::Raw("wm_sk_nothing"), Some(&json!({}))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{res}");
    let (status, res) = app.call("POST", SESSIONS, Key::None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{res}");
    for bad in [json!({"ttl_seconds": 59}), json!({"ttl_seconds": 86_401}), json!({"ttl_seconds": "1h"})] {
        let (status, res) = app.call("POST", SESSIONS, Key::Secret, Some(&bad)).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "ttl_seconds");
    }
    let (status, res) = app.call("POST", SESSIONS, Key::Secret, Some(&json!({"user_id": "x"}))).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "user_id");
    // No body is `{}`.
    let (status, res) = app.call("POST", SESSIONS, Key::Secret, None).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    // A short one ends by itself.
    let (status, res) = app.call("POST", SESSIONS, Key::Secret, Some(&json!({"ttl_seconds": 60}))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
});

both!(sessions_end_by_id_and_with_the_key_that_opened_them, |app| async move {
    // A second secret key opens two sessions; the first key ends one by id.
    let (_, made) = app.call("POST", "/v1/api/keys/", Key::Secret, Some(&json!({"kind": "secret"}))).await;
    let key = made["data"]["key"].as_str().unwrap().to_owned();
    let key_id = made["data"]["key_id"].as_str().unwrap().to_owned();
    let a = open(&app, Key::Raw(&key)).await;
    let b = open(&app, Key::Raw(&key)).await;
    let url = format!("{SESSIONS}?session_id={}", a["session_id"].as_str().unwrap());
    let (status, res) = app.call("DELETE", &url, Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (status, res) = app.call("DELETE", &url, Key::Secret, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "session_id");
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Raw(a["token"].as_str().unwrap()), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let b_token = b["token"].as_str().unwrap();
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Raw(b_token), None).await;
    assert_eq!(status, StatusCode::OK, "the other session lives on");

    // Revoking the key ends the sessions it opened.
    let (status, res) = app.call("DELETE", &format!("/v1/api/keys/?key_id={key_id}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Raw(b_token), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a revoked key's sessions end with it");

    // Another project's key cannot end this project's session.
    let c = open(&app, Key::Secret).await;
    let other = app.other_project().await;
    let url = format!("{SESSIONS}?session_id={}", c["session_id"].as_str().unwrap());
    let (status, res) = app.call("DELETE", &url, Key::Raw(&other.api_key), None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "session_id");
    let (status, _) = app.call("GET", "/v1/api/user/", Key::Raw(c["token"].as_str().unwrap()), None).await;
    assert_eq!(status, StatusCode::OK);
});

async fn place(app: &TestApp, key: Key<'_>, user: &str, lng: f64, lat: f64) {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
    let body = json!({"user_id": user, "locations": [{"coordinates": [lng, lat], "recorded_at": now, "accuracy": 5}]});
    let (status, res) = app.call("POST", "/v1/api/location/", key, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
}

async fn in_view(app: &TestApp, key: Key<'_>, query: &str) -> (StatusCode, Value) {
    app.call("GET", &format!("/v1/api/users/positions/?{query}"), key, None).await
}

fn ids(res: &Value) -> Vec<String> {
    let mut v: Vec<String> =
        res["data"]["positions"].as_array().unwrap().iter().map(|p| p["user_id"].as_str().unwrap().into()).collect();
    v.sort();
    v
}

both!(a_maps_view_lists_the_users_inside_it, |app| async move {
    // Three users in Berlin, one in Potsdam; one moves out of the view.
    let mut berlin = Vec::new();
    for (i, (lng, lat)) in [(13.40, 52.52), (13.41, 52.515), (13.38, 52.51)].into_iter().enumerate() {
        let u = app.create_user(json!({"n": i})).await;
        place(&app, Key::Secret, &u, lng, lat).await;
        berlin.push(u);
    }
    let potsdam = app.create_user(json!({})).await;
    place(&app, Key::Secret, &potsdam, 13.06, 52.40).await;
    let view = "bbox=13.35,52.50,13.45,52.53";
    let (status, res) = in_view(&app, Key::Secret, view).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let mut want = berlin.clone();
    want.sort();
    assert_eq!(ids(&res), want, "{res}");
    assert_eq!(res["data"]["truncated"], false);
    let first = &res["data"]["positions"][0];
    assert!(first["coordinates"].as_array().unwrap().len() == 2 && first["recorded_at"].is_string(), "{first}");

    // A user who moves out of the view leaves it; the one who arrives joins it.
    place(&app, Key::Secret, &berlin[0], 13.06, 52.401).await;
    place(&app, Key::Secret, &potsdam, 13.42, 52.52).await;
    let (_, res) = in_view(&app, Key::Secret, view).await;
    let mut want = vec![berlin[1].clone(), berlin[2].clone(), potsdam.clone()];
    want.sort();
    assert_eq!(ids(&res), want, "{res}");

    // `limit` cuts and says so; `next` pages on to the rest, each user once.
    let (_, res) = in_view(&app, Key::Secret, &format!("{view}&limit=2")).await;
    assert_eq!(res["data"]["positions"].as_array().unwrap().len(), 2, "{res}");
    assert_eq!(res["data"]["truncated"], true, "{res}");
    let next = res["data"]["next"].as_str().expect("a cursor").to_owned();
    let (status, rest) = in_view(&app, Key::Secret, &format!("{view}&limit=2&cursor={next}")).await;
    assert_eq!(status, StatusCode::OK, "{rest}");
    assert_eq!(
        (rest["data"]["truncated"].clone(), rest["data"]["next"].clone()),
        (json!(false), Value::Null),
        "{rest}"
    );
    let mut paged = [ids(&res), ids(&rest)].concat();
    paged.sort();
    assert_eq!(paged, want, "two pages list every user once");
    let (_, whole) = in_view(&app, Key::Secret, view).await;
    assert_eq!(whole["data"]["next"], Value::Null, "{whole}");
    // A cursor of another view, or none at all, is refused naming it.
    for bad in [format!("bbox=13.0,52.0,13.1,52.1&cursor={next}"), format!("{view}&cursor=nonsense")] {
        let (status, res) = in_view(&app, Key::Secret, &bad).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "cursor");
    }

    // Another project sees none of them, and its own only.
    let other = app.other_project().await;
    let (status, res) = in_view(&app, Key::Raw(&other.api_key), view).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(ids(&res), Vec::<String>::new(), "{res}");
    // A console session sees what the key sees; the publishable key nothing.
    let s = open(&app, Key::Secret).await;
    let (_, res) = in_view(&app, Key::Raw(s["token"].as_str().unwrap()), view).await;
    assert_eq!(ids(&res).len(), 3, "{res}");
    let (status, _) = in_view(&app, Key::Publishable, view).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
});

both!(a_bad_or_too_wide_view_is_a_400_naming_the_field, |app| async move {
    for bad in [
        "",
        "bbox=1,2,3",
        "bbox=a,b,c,d",
        "bbox=13.4,52.5,13.3,52.6",
        "bbox=13.3,52.6,13.4,52.5",
        "bbox=-181,0,0,1",
        "bbox=0,-91,1,0",
        "bbox=NaN,0,1,1",
        "bbox=0,40,10,50",
    ] {
        let (status, res) = in_view(&app, Key::Secret, bad).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "bbox");
    }
    for bad in ["limit=0", "limit=10001", "limit=x"] {
        let (status, res) = in_view(&app, Key::Secret, &format!("bbox=13.35,52.50,13.45,52.53&{bad}")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "limit");
    }
    let (status, res) = in_view(&app, Key::Secret, "bbox=13.35,52.50,13.45,52.53&page=2").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "page");
});

const FENCES_IN_VIEW: &str = "/v1/api/geofences/in-view/";

async fn fences_in_view(app: &TestApp, key: Key<'_>, query: &str) -> (StatusCode, Value) {
    app.call("GET", &format!("{FENCES_IN_VIEW}?{query}"), key, None).await
}

fn fence_ids(res: &Value) -> Vec<String> {
    res["data"]["geofences"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().into()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

both!(a_maps_view_lists_the_fences_meeting_it_once_each, |app| async move {
    use crate::geofences::{circle, fence, polygon, square, with};
    let view = "bbox=13.35,52.50,13.45,52.53";
    // A 1 km circle (in a dozen index cells), a small disabled one, a polygon, a circle whose
    // centre is east of the view but reaches into it; one just east that does not reach it, and
    // one in Potsdam.
    let named = |body: Value, name: &str| with(body, json!({"description": name, "color_code": "3366ff"}));
    let big = fence(&app, with(named(circle((13.40, 52.52), 1000), "big"), json!({"is_enabled": true}))).await;
    let small = fence(&app, named(circle((13.41, 52.515), 50), "small")).await;
    let poly = fence(&app, named(polygon(&square((13.38, 52.51), 200.0)), "poly")).await;
    let edge = fence(&app, circle((13.455, 52.52), 1000)).await;
    let _near = fence(&app, circle((13.452, 52.52), 50)).await;
    let _potsdam = fence(&app, circle((13.06, 52.40), 500)).await;
    let want = sorted(vec![big.clone(), small.clone(), poly.clone(), edge.clone()]);

    let (status, res) = fences_in_view(&app, Key::Secret, view).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(sorted(fence_ids(&res)), want, "each fence meeting the view once: {res}");
    assert_eq!((res["data"]["truncated"].clone(), res["data"]["next"].clone()), (json!(false), Value::Null));
    let by_id = |id: &str| res["data"]["geofences"].as_array().unwrap().iter().find(|f| f["id"] == id).unwrap().clone();
    let b = by_id(&big);
    assert_eq!(
        b,
        json!({"id": big, "description": "big", "color_code": "3366ff", "geometry_type": "circle",
            "geometry_center": {"type": "Point", "coordinates": [13.40, 52.52]}, "geometry_radius": 1000,
            "is_enabled": true}),
        "what a map draws, under the lists' names"
    );
    assert_eq!(by_id(&small)["is_enabled"], false);
    let p = by_id(&poly);
    assert_eq!(
        (p["geometry_type"].clone(), p["geometry"]["type"].clone()),
        (json!("polygon"), json!("Polygon")),
        "{p}"
    );
    assert_eq!(p["geometry"]["coordinates"][0].as_array().unwrap().len(), 5, "a closed ring: {p}");

    // A page at a time (`limit`), `next` to the end: every fence once, the same ones.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let q = match &cursor {
            Some(c) => format!("{view}&limit=1&cursor={c}"),
            None => format!("{view}&limit=1"),
        };
        let (status, res) = fences_in_view(&app, Key::Secret, &q).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        assert_eq!(fence_ids(&res).len(), 1, "{res}");
        paged.extend(fence_ids(&res));
        pages.push((q, res.clone()));
        cursor = res["data"]["next"].as_str().map(str::to_owned);
        assert_eq!(res["data"]["truncated"], cursor.is_some(), "{res}");
        if cursor.is_none() {
            break;
        }
        assert!(pages.len() < 10, "paging must end");
    }
    assert_eq!(sorted(paged.clone()), want, "pages list every fence once: {paged:?}");
    // A cursor is stable: asked again, the same page; after a fence is created in the view,
    // paging on from the first page's cursor lists none of that page again and the rest once.
    let (q, page2) = &pages[1];
    let (_, again) = fences_in_view(&app, Key::Secret, q).await;
    assert_eq!(again["data"], page2["data"], "the same page");
    let later = fence(&app, circle((13.36, 52.505), 50)).await;
    let mut rest = Vec::new();
    let mut cursor = pages[0].1["data"]["next"].as_str().map(str::to_owned);
    while let Some(c) = cursor {
        let (status, res) = fences_in_view(&app, Key::Secret, &format!("{view}&limit=2&cursor={c}")).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        rest.extend(fence_ids(&res));
        cursor = res["data"]["next"].as_str().map(str::to_owned);
    }
    rest.retain(|id| *id != later);
    assert_eq!(rest, paged[1..].to_vec(), "paged on from a cursor: the same fences, in the same order");
    // A cursor of another view, or none at all, is refused naming it.
    let next = pages[0].1["data"]["next"].as_str().unwrap().to_owned();
    for bad in [
        format!("bbox=13.0,52.0,13.1,52.1&cursor={next}"),
        format!("{view}&cursor=nonsense"),
        format!("{view}&cursor={}.x", &next[..6]),
    ] {
        let (status, res) = fences_in_view(&app, Key::Secret, &bad).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "cursor");
    }

    // A deleted fence leaves the view.
    let (status, res) = app.call("DELETE", &format!("/v1/api/geofence/?geofence_id={small}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (_, res) = fences_in_view(&app, Key::Secret, view).await;
    assert!(!fence_ids(&res).contains(&small), "{res}");

    // Another project's key sees none of them, only its own, and this one never its fence.
    let other = app.other_project().await;
    let (status, res) = fences_in_view(&app, Key::Raw(&other.api_key), view).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(fence_ids(&res), Vec::<String>::new(), "{res}");
    let (status, made) =
        app.call("POST", "/v1/api/geofence/", Key::Raw(&other.api_key), Some(&circle((13.40, 52.52), 1000))).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let theirs = made["data"]["geofence_id"].as_str().unwrap().to_owned();
    let (_, res) = fences_in_view(&app, Key::Raw(&other.api_key), view).await;
    assert_eq!(fence_ids(&res), vec![theirs.clone()], "{res}");
    let (_, res) = fences_in_view(&app, Key::Secret, view).await;
    assert!(!fence_ids(&res).contains(&theirs) && fence_ids(&res).contains(&big), "{res}");
    // A console session sees what the key sees; the publishable key nothing.
    let s = open(&app, Key::Secret).await;
    let (_, res) = fences_in_view(&app, Key::Raw(s["token"].as_str().unwrap()), view).await;
    assert!(fence_ids(&res).contains(&big), "{res}");
    let (status, _) = fences_in_view(&app, Key::Publishable, view).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
});

both!(a_bad_or_too_wide_fence_view_is_a_400_naming_the_field, |app| async move {
    for bad in ["", "bbox=1,2,3", "bbox=a,b,c,d", "bbox=13.4,52.5,13.3,52.6", "bbox=-181,0,0,1", "bbox=0,40,10,50"] {
        let (status, res) = fences_in_view(&app, Key::Secret, bad).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "bbox");
    }
    for bad in ["limit=0", "limit=5001", "limit=x"] {
        let (status, res) = fences_in_view(&app, Key::Secret, &format!("bbox=13.35,52.50,13.45,52.53&{bad}")).await;
        assert_error(status, &res, StatusCode::BAD_REQUEST, "limit");
    }
    let (status, res) = fences_in_view(&app, Key::Secret, "bbox=13.35,52.50,13.45,52.53&page=2").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "page");
});
