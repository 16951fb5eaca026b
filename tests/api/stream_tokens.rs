//! Stream tokens (`/v1/api/streams/tokens/`): what a browser opens a stream with instead of the
//! secret key. A token opens its own filter only, of its own project only; revoked or expired, it
//! opens nothing, and a stream it opened closes at its next message; so it is when the key or
//! console session that minted it is revoked or signed out.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both;
use crate::geofence_events::{send, tracked_user};
use crate::helpers::{Key, TestApp};
use crate::streams::{Sse, serve};

const TOKENS: &str = "/v1/api/streams/tokens/";

fn fix(at: chrono::DateTime<chrono::Utc>) -> Value {
    json!({"coordinates": [13.4, 52.5], "recorded_at": shared::time::Timestamp(at).format(None), "accuracy": 5.0})
}

async fn trip_of(app: &TestApp, user: &str) -> String {
    crate::trips::create(app, "v3", json!({"user_id": user})).await["id"].as_str().expect("trip id").to_owned()
}

async fn mint(app: &TestApp, key: Key<'_>, body: Value) -> (StatusCode, Value) {
    app.call("POST", TOKENS, key, Some(&body)).await
}

both!(a_stream_token_opens_its_own_trip_only_until_revoked_or_expired, |app| async move {
    let base = serve(&app).await;
    let user = tracked_user(&app).await;
    let (t1, t2) = (trip_of(&app, &user).await, trip_of(&app, &user).await);

    let (status, res) = mint(&app, Key::Secret, json!({"trip_id": t1, "ttl_seconds": 600})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let token = res["data"]["token"].as_str().expect("token").to_owned();
    let token_id = res["data"]["token_id"].as_str().expect("token_id").to_owned();
    assert!(token.starts_with("wm_st_"), "{res}");
    assert_eq!(res["data"]["filter"], json!({"trip_id": t1, "events": "*"}), "{res}");
    assert!(res["data"]["expires_at"].is_string(), "{res}");

    // Minting: the secret key only, for something of its project, a lifetime in range.
    for (key, body, want, field) in [
        (Key::Publishable, json!({"trip_id": t1}), StatusCode::FORBIDDEN, "Api-Key"),
        (Key::Secret, json!({"trip_id": "aaaaaaaaaaaaaaaaaaaaaaaa"}), StatusCode::NOT_FOUND, "trip_id"),
        (Key::Secret, json!({"trip_id": t1, "ttl_seconds": 0}), StatusCode::BAD_REQUEST, "ttl_seconds"),
        (Key::Secret, json!({"trip_id": t1, "ttl_seconds": 86_401}), StatusCode::BAD_REQUEST, "ttl_seconds"),
        (Key::Secret, json!({"trip_id": t1, "ttl_seconds": "1h"}), StatusCode::BAD_REQUEST, "ttl_seconds"),
        (Key::Secret, json!({"trip_id": t1, "user_id": user}), StatusCode::BAD_REQUEST, "trip_id"),
        (Key::Secret, json!({"events": "nope"}), StatusCode::BAD_REQUEST, "events[0]"),
    ] {
        let (status, res) = mint(&app, key, body.clone()).await;
        assert_eq!(status, want, "{body}: {res}");
        assert!(res["msg"].as_str().unwrap_or_default().starts_with(field), "{body}: {res}");
    }

    // Its own filter, repeated or not; never another, and not beside the key.
    let mut s = Sse::open(&base, "", &format!("token={token}"), None).await;
    Sse::open(&base, "", &format!("token={token}&trip_id={t1}"), None).await;
    for (query, want, field) in [
        (format!("token={token}&trip_id={t2}"), StatusCode::FORBIDDEN, "trip_id"),
        (format!("token={token}&user_id={user}"), StatusCode::FORBIDDEN, "user_id"),
        (format!("token={token}&events=geofence.entry"), StatusCode::FORBIDDEN, "events"),
        ("token=wm_st_000000000000000000000000000000000000000000000000".to_owned(), StatusCode::UNAUTHORIZED, "token"),
        (format!("trip_id={t1}"), StatusCode::UNAUTHORIZED, "Api-Key"),
    ] {
        let (status, res) = Sse::request(&base, "", &query, None).await;
        let err = res.err().unwrap_or_else(|| panic!("{query}: answered 200"));
        assert_eq!(status, want, "{query}: {err}");
        assert!(err["msg"].as_str().unwrap().starts_with(field), "{query}: {err}");
    }
    let (status, _) = Sse::request(&base, &app.project.api_key, &format!("token={token}"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a token and a key at once");

    // The trip's user's locations arrive on it.
    let now = chrono::Utc::now();
    send(&app, &user, &[fix(now - chrono::Duration::seconds(30))]).await;
    let got = s.take(1).await;
    assert_eq!(
        (got[0]["type"].as_str(), got[0]["data"]["user"]["user_id"].as_str()),
        (Some("location.updated"), Some(user.as_str()))
    );

    // Another project neither mints for our trip nor revokes our token; its own token opens
    // its own things only.
    let other = app.other_project().await;
    let (status, _) = mint(&app, Key::Raw(&other.api_key), json!({"trip_id": t1})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) =
        app.call("DELETE", &format!("{TOKENS}?token_id={token_id}"), Key::Raw(&other.api_key), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, res) = mint(&app, Key::Raw(&other.api_key), json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let theirs = res["data"]["token"].as_str().unwrap().to_owned();
    let (status, _) = Sse::request(&base, "", &format!("token={theirs}&trip_id={t1}"), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = Sse::request(&base, "", &format!("token={theirs}&user_id={user}"), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Revoked: it opens nothing, and the open stream closes at its next message.
    let (status, res) = app.call("DELETE", &format!("{TOKENS}?token_id={token_id}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (status, _) = app.call("DELETE", &format!("{TOKENS}?token_id={token_id}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "revoked once");
    let (status, _) = Sse::request(&base, "", &format!("token={token}"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    send(&app, &user, &[fix(now - chrono::Duration::seconds(20))]).await;
    let closed = s.next().await.expect("a closing event");
    assert_eq!(closed.event.as_deref(), Some("closed"), "{closed:?}");
    let why: Value = serde_json::from_str(&closed.data).unwrap();
    assert_eq!(why["reason"], "revoked", "{why}");
    assert_eq!(why["last_event_id"], got[0]["id"], "resume from the last message sent: {why}");

    // Expired: a token of one second (at most two) opens nothing three seconds later.
    let (_, res) = mint(&app, Key::Secret, json!({"user_id": user, "ttl_seconds": 1})).await;
    let short = res["data"]["token"].as_str().expect("token").to_owned();
    Sse::open(&base, "", &format!("token={short}"), None).await;
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let (status, _) = Sse::request(&base, "", &format!("token={short}"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "expired");
});

both!(a_stream_token_holds_only_while_the_key_or_session_that_minted_it_does, |app| async move {
    let base = serve(&app).await;
    let user = tracked_user(&app).await;
    // A console session of 10 minutes asks for a token of a day: it gets the session's end.
    let (status, s) =
        app.call("POST", "/v1/api/console/sessions/", Key::Secret, Some(&json!({"ttl_seconds": 600}))).await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    let session = s["data"]["token"].as_str().expect("session").to_owned();
    let (status, res) = mint(&app, Key::Raw(&session), json!({"ttl_seconds": 86_400})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res["data"]["expires_at"], s["data"]["expires_at"], "a session's token ends with it: {res}");
    let token = res["data"]["token"].as_str().expect("token").to_owned();
    let mut stream = Sse::open(&base, "", &format!("token={token}"), None).await;
    let now = chrono::Utc::now();
    send(&app, &user, &[fix(now - chrono::Duration::seconds(30))]).await;
    let got = stream.take(1).await;
    assert_eq!(got[0]["type"], "location.updated", "{got:?}");

    // Signing out ends the session's tokens: none opens, an open stream closes at its next message.
    let (status, res) = app.call("DELETE", "/v1/api/console/sessions/", Key::Raw(&session), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (status, _) = Sse::request(&base, "", &format!("token={token}"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a signed-out session's token");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    send(&app, &user, &[fix(now - chrono::Duration::seconds(20))]).await;
    let closed = stream.next().await.expect("a closing event");
    assert_eq!(closed.event.as_deref(), Some("closed"), "{closed:?}");

    // A revoked secret key's tokens end with it; the other key's live on.
    let (_, made) = app.call("POST", "/v1/api/keys/", Key::Secret, Some(&json!({"kind": "secret"}))).await;
    let key = made["data"]["key"].as_str().expect("key").to_owned();
    let key_id = made["data"]["key_id"].as_str().expect("key_id").to_owned();
    let (_, res) = mint(&app, Key::Raw(&key), json!({"user_id": user})).await;
    let theirs = res["data"]["token"].as_str().expect("token").to_owned();
    let (_, res) = mint(&app, Key::Secret, json!({"user_id": user})).await;
    let ours = res["data"]["token"].as_str().expect("token").to_owned();
    Sse::open(&base, "", &format!("token={theirs}"), None).await;
    let (status, res) = app.call("DELETE", &format!("/v1/api/keys/?key_id={key_id}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (status, _) = Sse::request(&base, "", &format!("token={theirs}"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a revoked key's token");
    Sse::open(&base, "", &format!("token={ours}"), None).await;
});
