//! Whole answers kept for repeated GETs (`local::memo`, on the embedded store): served again while
//! nothing they were made from has changed, and never after. Every test of the suite reads
//! through the memo too; these show that it serves at all, and the changes that retire an answer:
//! a write of what it read, a revoked key, another project's key, an ETA that moves with time.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::geofences::{circle, delete, enabled_fence, put};
use crate::helpers::{Backend, Key, TestApp};

async fn embedded() -> TestApp {
    TestApp::new(Backend::Embedded).await
}

/// Answers the memo served so far (the embedded store always has one).
fn served_so_far(app: &TestApp) -> u64 {
    app.memo.as_ref().expect("a memo on the embedded store").served()
}

/// GET `uri` with `key` until its answer is served from the memo (the first reads may write: a
/// list's counts built at its first read, the key's `last_used_at`); the answer, equal to the one
/// made before it.
async fn twice(app: &TestApp, uri: &str, key: Key<'_>) -> Value {
    let (status, mut made) = app.call("GET", uri, key, None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {made}");
    for _ in 0..3 {
        let before = served_so_far(app);
        let (status, answer) = app.call("GET", uri, key, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {answer}");
        assert_eq!(made, answer, "{uri}");
        if served_so_far(app) == before + 1 {
            return answer["data"].clone();
        }
        made = answer;
    }
    panic!("{uri}: never served from the memo");
}

fn ids(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|e| e[key].as_str().unwrap_or_else(|| panic!("no {key} in {e}")).to_owned())
        .collect()
}

#[tokio::test]
async fn kept_answers_are_served_until_what_they_read_is_written() {
    let app = embedded().await;
    let a = app.create_user(json!({"n": 1})).await;
    assert_eq!(ids(&twice(&app, "/v1/api/user/", Key::Secret).await["users"], "id"), std::slice::from_ref(&a));

    // A new user is listed at once.
    let b = app.create_user(json!({"n": 2})).await;
    assert_eq!(ids(&twice(&app, "/v1/api/user/", Key::Secret).await["users"], "id"), [a.clone(), b]);

    // A changed user is shown changed, alone and in the list.
    let one = format!("/v1/api/user/?user_id={a}");
    assert_eq!(twice(&app, &one, Key::Secret).await["users"][0]["description"], Value::Null);
    let (status, res) =
        app.call("PUT", "/v1/api/user/", Key::Secret, Some(&json!({"user_id": a, "description": "moved"}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(twice(&app, &one, Key::Secret).await["users"][0]["description"], "moved");
    assert_eq!(twice(&app, "/v1/api/user/", Key::Secret).await["users"][0]["description"], "moved");

    // Fences: listed, found by search, changed, gone.
    let at = (13.40, 52.52);
    let fence = enabled_fence(&app, circle(at, 100)).await;
    let search = format!("/v1/api/search/geofences/?location={},{}&radius=1000", at.1, at.0 + 0.005);
    assert_eq!(
        ids(&twice(&app, "/v1/api/geofence/", Key::Secret).await["geofences"], "geofence_id"),
        std::slice::from_ref(&fence)
    );
    assert_eq!(ids(&twice(&app, &search, Key::Secret).await["geofences"], "id"), std::slice::from_ref(&fence));
    let (status, res) = put(&app, "v1", json!({"geofence_id": fence, "description": "office"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(twice(&app, "/v1/api/geofence/", Key::Secret).await["geofences"][0]["description"], "office");
    let (status, res) = delete(&app, &format!("/v1/api/geofence/?geofence_id={fence}"), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert!(twice(&app, "/v1/api/geofence/", Key::Secret).await["geofences"].as_array().unwrap().is_empty());
    assert!(twice(&app, &search, Key::Secret).await["geofences"].as_array().unwrap().is_empty());

    // Settings: each change shown at once (the first from the default, whatever it is).
    let mut shown = twice(&app, "/v1/api/project/settings/", Key::Secret).await["retention_days"].clone();
    for days in [40, 41] {
        let (status, res) =
            app.call("PUT", "/v1/api/project/settings/", Key::Secret, Some(&json!({"retention_days": days}))).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        assert_ne!(shown, days);
        shown = twice(&app, "/v1/api/project/settings/", Key::Secret).await["retention_days"].clone();
        assert_eq!(shown, days);
    }
}

#[tokio::test]
async fn a_revoked_key_and_another_projects_key_are_never_answered_from_kept_answers() {
    let app = embedded().await;
    app.create_user(json!({})).await;
    let (status, res) = app.call("POST", "/v1/api/keys/", Key::Secret, Some(&json!({"kind": "secret"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let (second, second_id) = (res["data"]["key"].as_str().unwrap().to_owned(), res["data"]["key_id"].clone());
    twice(&app, "/v1/api/user/", Key::Raw(&second)).await;
    let (status, res) =
        app.call("DELETE", &format!("/v1/api/keys/?key_id={}", second_id.as_str().unwrap()), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (status, res) = app.call("GET", "/v1/api/user/", Key::Raw(&second), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a revoked key was answered: {res}");

    // The same request with another project's key: that project's (empty) list.
    let other = app.other_project().await;
    let listed = twice(&app, "/v1/api/user/", Key::Secret).await;
    assert_eq!(listed["users"].as_array().unwrap().len(), 1);
    let theirs = twice(&app, "/v1/api/user/", Key::Raw(&other.api_key)).await;
    assert!(theirs["users"].as_array().unwrap().is_empty(), "{theirs}");
}

#[tokio::test]
async fn an_answer_that_depends_on_the_time_or_failed_is_not_kept() {
    let app = embedded().await;
    let user = app.create_user(json!({})).await;
    // A trip under way towards a destination: its ETA is read from the fixes at the time asked.
    let body = json!({"user_id": user, "origins": [[13.40, 52.52]], "destinations": [[13.45, 52.52]]});
    let (status, res) = app.post("/v1/api/trips/quick/", &body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let trip = res["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(res["data"][0]["is_started"], true, "{res}");
    let served = served_so_far(&app);
    for uri in [
        format!("/v1/api/trips/?trip_id={trip}"),
        format!("/v1/api/trips/?user_id={user}"),
        "/v1/api/user/?user_id=nobody".into(),
    ] {
        for _ in 0..2 {
            app.call("GET", &uri, Key::Secret, None).await;
        }
    }
    assert_eq!(served_so_far(&app), served, "an answer with an ETA, or an error, was served again");
}

/// The user's description as `n`, read through the memo.
async fn description(app: &TestApp, uri: &str) -> u64 {
    let (status, res) = app.call("GET", uri, Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    res["data"]["users"][0]["description"].as_str().unwrap_or("0").parse().expect("a number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_served_while_writes_run_never_go_back() {
    let app = std::sync::Arc::new(embedded().await);
    let user = app.create_user(json!({})).await;
    let uri = format!("/v1/api/user/?user_id={user}");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Readers see each write once it has returned, and never one older than they have seen.
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (app, uri, stop) = (app.clone(), uri.clone(), stop.clone());
            tokio::spawn(async move {
                let mut last = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let n = description(&app, &uri).await;
                    assert!(n >= last, "went back from {last} to {n}");
                    last = n;
                    // An answer served from the memo never waits: yield, so that the runtime can
                    // stop this loop when the writer's side fails.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for n in 1..=150u64 {
        let body = json!({"user_id": user, "description": n.to_string()});
        let (status, res) = app.call("PUT", "/v1/api/user/", Key::Secret, Some(&body)).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        assert_eq!(description(&app, &uri).await, n, "after write {n} returned");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    let served = served_so_far(&app);
    assert!(served > 100, "the readers were served from the memo: {served}");
}

#[tokio::test]
async fn a_history_page_is_kept_until_it_is_written_or_a_fix_it_counted_expires() {
    use crate::geofences::HOME;
    use crate::retention::{fix, send, set_retention, user_with_events, visit};
    use chrono::{Duration, Utc};

    let app = embedded().await;
    set_retention(&app, Key::Secret, json!(1)).await;
    let user = user_with_events(&app, Key::Secret).await;
    enabled_fence(&app, circle(HOME, 100)).await;
    let now = Utc::now();
    // A fix that expires (a day's retention) seconds from now, and a visit of the fence.
    let expiring = now - Duration::seconds(86_400 - 4);
    send(&app, Key::Secret, &user, vec![fix(900.0, expiring)]).await;
    send(&app, Key::Secret, &user, visit(now - Duration::minutes(30))).await;
    let locations = format!("/v1/api/location/?user_id={user}");
    let day = |d: i64| (now + Duration::days(d)).format("%Y-%m-%d").to_string();
    // The range cuts its cells: some counts are counted, not read from the history's counts.
    let events = format!("/v1/api/event/?user_id={user}&start_date={}&end_date={}", day(-1), day(1));
    let listed = |data: &Value, key: &str| data[key].as_array().expect("a list").len();
    assert_eq!(listed(&twice(&app, &locations, Key::Secret).await, "locations"), 4);
    assert_eq!(listed(&twice(&app, &events, Key::Secret).await, "events"), 2);

    // Another visit is listed at once, in both.
    send(&app, Key::Secret, &user, visit(now - Duration::minutes(10))).await;
    assert_eq!(listed(&twice(&app, &locations, Key::Secret).await, "locations"), 7);
    assert_eq!(listed(&twice(&app, &events, Key::Secret).await, "events"), 4);

    // Eleven fixes: the second page holds the newest alone, and counts the expiring one.
    let more = (0..4).map(|k| fix(10.0 * k as f64, now - Duration::minutes(5) + Duration::seconds(k))).collect();
    send(&app, Key::Secret, &user, more).await;
    let second = format!("{locations}&page_number=2");
    let page = twice(&app, &second, Key::Secret).await;
    assert_eq!((listed(&page, "locations"), page["pages"].clone()), (1, json!(2)), "{page}");

    // Once the first fix has expired, kept pages are not served again: it is gone from the
    // counts, and the second page with it.
    let wait = (expiring + Duration::days(1) - Utc::now()).num_milliseconds() + 1_100;
    tokio::time::sleep(std::time::Duration::from_millis(wait.max(0) as u64)).await;
    let (status, res) = app.call("GET", &second, Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!((listed(&res["data"], "locations"), res["data"]["pages"].clone()), (0, json!(1)), "{res}");
    let (status, res) = app.call("GET", &locations, Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(listed(&res["data"], "locations"), 10, "an expired fix was listed: {res}");
}
