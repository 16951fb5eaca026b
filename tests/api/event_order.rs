//! One order for a fix's events across static and moving fences: exits, then entries, then
//! dwells (docs/events.md), in the events list, in the webhook delivery log and in the order a
//! real receiver gets them. Static and moving fences are evaluated apart; the order must not
//! depend on which kind fired nor on the events' hashes.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both_alone;
use crate::geofence_events::{all_events, at, fix, send, tracked_user};
use crate::geofences::{HOME, circle, enabled_fence};
use crate::receiver::{Mode, Receiver};
use crate::webhooks::{subscribe, worker};

/// Users driven along the same path: the order of events of one kind on one fix follows their
/// hashes, so with a tie between kinds each user would have even odds on each mixed fix.
const USERS: usize = 4;
const WAIT: Duration = Duration::from_secs(60);

/// (kind without `motion:geofence:`, fence) of each event, in list order.
fn kinds(events: &[&Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            let kind = e["event_type"].as_str().unwrap().trim_start_matches("motion:geofence:").to_owned();
            (kind, e["geofence_id"].as_str().unwrap().to_owned())
        })
        .collect()
}

both_alone!(a_fixs_events_keep_one_order_across_static_and_moving_fences, |app| async move {
    let app = app.with_private_webhooks();
    let rx = Receiver::start(Mode::Ok).await;
    let (wh, _) = subscribe(&app, &rx, json!(["geofence.entry", "geofence.exit", "geofence.dwell"])).await;

    // A followed user stands at `a`: a moving fence of 100 m around them. A static fence of
    // 150 m at `b`, 200 m east; `o`, 80 m east of `a`, is inside both.
    let a = HOME;
    let (b, o, far) = (at(a, 200.0, 0.0), at(a, 80.0, 0.0), at(a, 0.0, -1000.0));
    let followed = app.create_user(json!({})).await;
    send(&app, &followed, &[fix(a, 0)]).await;
    let body = json!({"users": [followed], "geometry_radius": 100, "is_enabled": true});
    let (s, r) = app.post("/v3/api/moving-geofence/", &body).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let moving = r["data"]["id"].as_str().unwrap().to_owned();
    let fixed = enabled_fence(&app, circle(b, 150)).await;

    // One fix a batch (moving fences are evaluated at a batch's newest fix), minute by minute.
    let path = [(far, 0), (a, 1), (b, 2), (o, 3), (b, 9), (a, 10), (far, 11)];
    let (m, f) = (moving.as_str(), fixed.as_str());
    let want: Vec<(String, String)> = [
        ("entry", m), // 1: into the moving fence
        ("exit", m),  // 2: out of it and into the static one, on the same fix
        ("entry", f),
        ("entry", m), // 3: inside both
        ("exit", m),  // 9: out of the moving fence, 7 min in the static one: its dwell
        ("dwell", f),
        ("exit", f), // 10: out of the static fence, into the moving one
        ("entry", m),
        ("exit", m), // 11: away
    ]
    .iter()
    .map(|(k, g)| ((*k).to_owned(), (*g).to_owned()))
    .collect();

    let mut users = Vec::new();
    for _ in 0..USERS {
        users.push(tracked_user(&app).await);
    }
    for (p, minute) in path {
        for u in &users {
            send(&app, u, &[fix(p, minute * 60)]).await;
        }
    }

    // The events list, per user and for the project.
    let listed = all_events(&app, "").await;
    let mut by_id = BTreeMap::new();
    for u in &users {
        let mine = all_events(&app, &format!("user_id={u}")).await;
        assert_eq!(kinds(&mine.iter().collect::<Vec<_>>()), want, "{u}'s events list: {mine:#?}");
        let in_project: Vec<&Value> = listed.iter().filter(|e| e["user_id"] == u.as_str()).collect();
        assert_eq!(kinds(&in_project), want, "the project's list for {u}");
        by_id.extend(mine.into_iter().map(|e| (e["id"].as_str().unwrap().to_owned(), e)));
    }

    // Webhooks: as the receiver got them (each user's own run is in order), and the delivery log.
    // The worker starts once every pass is committed: on DynamoDB a pass's outbox entries are
    // written concurrently, and a worker running meanwhile can see a later one before an earlier
    // one (a race of its own, apart from the order of the ids that this test holds).
    let _w = worker(&app);
    let total = want.len() * USERS;
    rx.wait_for(WAIT, "every geofence event delivered", |got| {
        got.iter().filter(|g| (200..300).contains(&g.answered)).count() >= total
    })
    .await;
    let mut first_seen: Vec<String> = Vec::new();
    for id in rx.delivered() {
        if !first_seen.contains(&id) {
            first_seen.push(id);
        }
    }
    assert_eq!(first_seen.len(), total, "each event delivered: {first_seen:?}");
    let got = rx.got();
    for u in &users {
        let bodies: Vec<&Value> = first_seen
            .iter()
            .map(|id| &got.iter().find(|g| &g.id == id).unwrap().body["data"])
            .filter(|d| d["user_id"] == u.as_str())
            .collect();
        assert_eq!(kinds(&bodies), want, "deliveries to the receiver for {u}");
    }
    let mut logged = Vec::new();
    for page in 1.. {
        let (s, r) = app.get(&format!("/v1/api/webhooks/deliveries/?webhook_id={wh}&page_number={page}")).await;
        assert_eq!(s, StatusCode::OK, "{r}");
        let d = r["data"]["deliveries"].as_array().unwrap().clone();
        if d.is_empty() {
            break;
        }
        logged.extend(d);
    }
    assert_eq!(logged.len(), total, "the delivery log: {logged:#?}");
    for u in &users {
        let events: Vec<&Value> = logged
            .iter()
            .map(|d| &by_id[d["event_id"].as_str().unwrap()])
            .filter(|e| e["user_id"] == u.as_str())
            .collect();
        assert_eq!(kinds(&events), want, "the delivery log for {u}");
    }
});
