//! `GET /v1/api/trips/?user_id=` pages through the user's own list of trips (`trips::by_user`):
//! every page equal to the naive answer (the project's trips filtered by user, newest first)
//! through creates, reassignments and deletes; another project's key sees none of them.

use axum::http::StatusCode;
use serde_json::{Value, json};
use shared::paging::{PAGE_SIZE, PageInfo, PageNumber};
use shared::store::Table;

use crate::both;
use crate::helpers::{Key, TestApp};
use crate::trips::create;

fn id(t: &Value) -> String {
    t["id"].as_str().expect("id").to_owned()
}

/// The naive answer: every trip of the project (its unfiltered list, page by page), the user's
/// kept.
async fn naive(app: &TestApp, user: &str) -> Vec<String> {
    let mut out = Vec::new();
    for n in 1.. {
        let (status, res) = app.get(&format!("/v1/api/trips/?page_number={n}")).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        let trips = res["data"]["trips"].as_array().expect("trips").clone();
        if trips.is_empty() {
            break;
        }
        out.extend(trips.iter().filter(|t| t["user_id"] == user).map(id));
    }
    out
}

/// Every page of the user's list (and one past the end) against the naive answer.
async fn assert_exact(app: &TestApp, user: &str) {
    let all = naive(app, user).await;
    let pages = all.len().div_ceil(PAGE_SIZE);
    for n in 1..=pages + 1 {
        let (status, res) = app.get(&format!("/v1/api/trips/?user_id={user}&page_number={n}")).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        let got: Vec<String> = res["data"]["trips"].as_array().expect("trips").iter().map(id).collect();
        let want: Vec<String> = all.iter().skip((n - 1) * PAGE_SIZE).take(PAGE_SIZE).cloned().collect();
        assert_eq!(got, want, "{user}: page {n} of {pages}");
        let info = PageInfo::new(PageNumber(n), all.len());
        assert_eq!(res["data"]["pages"], info.pages, "{user}: page {n}");
        assert_eq!(res["data"]["next_page"], json!(info.next_page), "{user}: page {n}");
        assert_eq!(res["data"]["prev_page"], json!(info.prev_page), "{user}: page {n}");
    }
}

async fn reassign(app: &TestApp, trip: &str, user: &str) {
    let (status, res) =
        app.call("PUT", "/v1/api/trips/", Key::Secret, Some(&json!({"trip_id": trip, "user_id": user}))).await;
    // Roam answers a trip update with 201.
    assert_eq!(status, StatusCode::CREATED, "{res}");
}

async fn delete(app: &TestApp, trip: &str) {
    let (status, res) = app.call("DELETE", &format!("/v1/api/trips/?trip_id={trip}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
}

/// Trips of `a` (13), `b` (4) and of nobody (3), interleaved; their ids by user.
async fn seed(app: &TestApp, a: &str, b: &str) -> (Vec<String>, Vec<String>) {
    let (mut of_a, mut of_b) = (Vec::new(), Vec::new());
    for i in 0..20 {
        let body = match i % 5 {
            0 if of_b.len() < 4 => json!({"user_id": b}),
            1 if i < 15 => json!({}),
            _ => json!({"user_id": a}),
        };
        let t = id(&create(app, "v1", body.clone()).await);
        match body["user_id"].as_str() {
            Some(u) if u == a => of_a.push(t),
            Some(_) => of_b.push(t),
            None => {}
        }
    }
    (of_a, of_b)
}

both!(a_users_trip_pages_are_exact_through_creates_moves_and_deletes, |app| async move {
    let a = app.create_user(json!({})).await;
    let b = app.create_user(json!({})).await;
    let (of_a, of_b) = seed(&app, &a, &b).await;
    assert_eq!((of_a.len(), of_b.len()), (13, 4));
    assert_exact(&app, &a).await;
    assert_exact(&app, &b).await;
    // Two of a's go to b, one of b's is deleted, a trip of nobody's is given to a.
    reassign(&app, &of_a[0], &b).await;
    reassign(&app, &of_a[7], &b).await;
    delete(&app, &of_b[1]).await;
    let (_, res) = app.get("/v1/api/trips/").await;
    let nobodys = res["data"]["trips"].as_array().unwrap().iter().find(|t| t["user_id"].is_null()).map(id).unwrap();
    reassign(&app, &nobodys, &a).await;
    let naive_a = naive(&app, &a).await;
    assert_eq!(naive_a.len(), 12);
    assert!(naive_a.contains(&nobodys) && !naive_a.contains(&of_a[0]));
    assert_eq!(naive(&app, &b).await.len(), 5);
    assert_exact(&app, &a).await;
    assert_exact(&app, &b).await;
    // Reassigned to the user it has: nothing moves.
    reassign(&app, &of_a[1], &a).await;
    assert_exact(&app, &a).await;
    // A date range (the trips were made just now): whole, and ending before them.
    let (_, res) = app.get(&format!("/v3/api/trips/?start_date=2000-01-01&end_date=2099-01-01&user_id={a}")).await;
    assert_eq!(res["data"].as_array().map(Vec::len), Some(PAGE_SIZE), "{res}");
    let (_, res) = app.get(&format!("/v3/api/trips/?start_date=2000-01-01&end_date=2000-01-02&user_id={a}")).await;
    assert_eq!(res["data"], json!([]), "{res}");
    // Another project's key: none of them.
    let other = app.other_project().await;
    let (status, res) = app.call("GET", &format!("/v1/api/trips/?user_id={a}"), Key::Raw(&other.api_key), None).await;
    assert_eq!((status, &res["data"]["trips"]), (StatusCode::OK, &json!([])), "{res}");
    assert!(of_a.iter().all(|t| !res.to_string().contains(t.as_str())), "{res}");
});

/// A v2 list, every page through `starting_after` (`limit` 4): the ids in order.
async fn v2_pages(app: &TestApp, query: &str) -> Vec<String> {
    let (mut out, mut after) = (Vec::new(), String::new());
    loop {
        let uri = format!("/v2/trips?limit=4&{query}{after}");
        let (status, res) = app.call("GET", &uri, Key::Bearer, None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {res}");
        let page: Vec<String> = res["trips"].as_array().expect("trips").iter().map(id).collect();
        out.extend(page.iter().cloned());
        if res["has_more"] != true {
            return out;
        }
        after = format!("&starting_after={}", page.last().expect("a page before more"));
    }
}

/// The user's v2 trips, newest first, paged, against the project's list paged and filtered.
async fn assert_v2_exact(app: &TestApp, user: &str) {
    let all = v2_pages(app, "").await;
    let mut want = Vec::new();
    for t in &all {
        let (_, res) = app.call("GET", &format!("/v2/trips/{t}"), Key::Bearer, None).await;
        if res["trip"]["user"]["id"] == user {
            want.push(t.clone());
        }
    }
    assert!(want.len() >= 4, "the user has v2 trips: {want:?}");
    assert_eq!(v2_pages(app, &format!("user_id={user}&")).await, want, "{user}");
    // Newer than the oldest, three at a time: the three just newer, newest first.
    let uri = format!("/v2/trips?user_id={user}&limit=3&ending_before={}", want[want.len() - 1]);
    let (_, res) = app.call("GET", &uri, Key::Bearer, None).await;
    let newer: Vec<String> = res["trips"].as_array().expect("trips").iter().map(id).collect();
    assert_eq!(newer, want[want.len() - 4..want.len() - 1], "{uri}");
}

async fn v2_trip(app: &TestApp, body: Value) -> String {
    let (status, res) = app.call("POST", "/v2/trips", Key::Bearer, Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    id(&res["trip"])
}

both!(a_users_v2_trips_are_their_own_list, |app| async move {
    let a = app.create_user(json!({})).await;
    let b = app.create_user(json!({})).await;
    let mut of_a = Vec::new();
    for i in 0..14 {
        let body = match i % 3 {
            0 => json!({"user_id": b}),
            1 if i > 9 => json!({}),
            _ => json!({"user_id": a}),
        };
        let t = v2_trip(&app, body.clone()).await;
        if body["user_id"] == a.as_str() {
            of_a.push(t);
        }
    }
    assert_v2_exact(&app, &a).await;
    assert_v2_exact(&app, &b).await;
    // Moved, deleted, moved again and listed.
    let (status, res) =
        app.call("PUT", &format!("/v2/trips/{}", of_a[0]), Key::Bearer, Some(&json!({"user_id": b}))).await;
    assert!(status.is_success(), "{res}");
    let (status, res) = app.call("DELETE", &format!("/v2/trips/{}", of_a[1]), Key::Bearer, None).await;
    assert!(status.is_success(), "{res}");
    assert_v2_exact(&app, &a).await;
    assert_v2_exact(&app, &b).await;
    let s = app.state.store.as_ref();
    let pid = app.project.project_id.clone();
    let (status, res) =
        app.call("PUT", &format!("/v2/trips/{}", of_a[2]), Key::Bearer, Some(&json!({"user_id": b}))).await;
    assert!(status.is_success(), "{res}");
    assert_v2_exact(&app, &a).await;
    assert_v2_exact(&app, &b).await;
    // The answer comes from the user's own list: an entry taken out behind its back is missing.
    let listed = v2_pages(&app, &format!("user_id={a}&")).await;
    s.delete(Table::Main, &format!("{pid}#TU2#{a}"), &listed[0], shared::store::Cond::None).await.unwrap();
    assert_eq!(v2_pages(&app, &format!("user_id={a}&")).await, listed[1..]);
    // Another project's token: none of them.
    let other = app.other_project().await;
    let req = axum::http::Request::builder()
        .uri(format!("/v2/trips?user_id={a}"))
        .header("Authorization", format!("Bearer {}", other.access_token))
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, res) = app.send(req).await;
    assert_eq!((status, &res["trips"]), (StatusCode::OK, &json!([])), "{res}");
    assert!(of_a.iter().all(|t| !res.to_string().contains(t.as_str())), "{res}");
});
