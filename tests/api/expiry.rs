//! Items whose TTL attribute (`expires_at`) has passed are not read, on either store, although
//! DynamoDB's TTL deletes them only later (up to about two days) and the embedded store only
//! when the retention sweeper runs: lists, counts, encodings and exports leave them out.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use shared::domain::locations::locations_pk;
use shared::expiry::TTL_ATTRIBUTE;
use shared::store::{Cond, Item, Table};

use crate::geofences::{HOME, circle, enabled_fence};
use crate::helpers::{Key, TestApp};
use crate::retention::{items, send, user_with_events, visit};
use crate::{both, both_alone};

/// Mark stored items expired a minute ago, as TTL would find them: still stored, past expiry.
async fn expire(app: &TestApp, table: Table, stored: Vec<Item>) {
    for mut item in stored {
        item.insert(TTL_ATTRIBUTE.into(), json!(Utc::now().timestamp() - 60));
        app.state.store.put(table, item, Cond::None).await.expect("put");
    }
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

both!(expired_fixes_and_events_are_not_read_before_they_are_deleted, |app| async move {
    let pid = app.project.project_id.clone();
    let fence = enabled_fence(&app, circle(HOME, 100)).await;
    let user = user_with_events(&app, Key::Secret).await;
    let start = Utc::now() - Duration::hours(3);
    send(&app, Key::Secret, &user, visit(start)).await;
    send(&app, Key::Secret, &user, visit(start + Duration::hours(1))).await;

    // The first visit's fixes, and its entry event in all three lists.
    let lpk = locations_pk(&pid, &user);
    let fixes = items(&app, Table::Locations, &lpk).await;
    assert_eq!(fixes.len(), 6);
    let gone: Vec<String> = fixes[..3].iter().map(|f| f["sk"].as_str().unwrap().to_owned()).collect();
    expire(&app, Table::Locations, fixes[..3].to_vec()).await;
    use shared::domain::geofences::events::{events_pk, fence_events_pk};
    let events = items(&app, Table::Main, &events_pk(&pid, &user)).await;
    assert_eq!(events.len(), 4, "two entries and two exits");
    let entry = events[0]["sk"].as_str().unwrap().to_owned();
    for pk in [events_pk(&pid, &user), fence_events_pk(&pid, &fence, &user), format!("{pid}#UE#{user}")] {
        let copy = items(&app, Table::Main, &pk).await.into_iter().filter(|e| e["sk"] == entry.as_str()).collect();
        expire(&app, Table::Main, copy).await;
    }

    // Still stored, not read: the list and its page count, the encoded line, the GPX export.
    assert_eq!(items(&app, Table::Locations, &lpk).await.len(), 6);
    let (status, res) = app.get(&format!("/v1/api/location/?user_id={user}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let listed = ids(&res["data"]["locations"]);
    assert_eq!(listed.len(), 3, "{res}");
    assert!(listed.iter().all(|id| !gone.contains(id)), "{res}");
    let (_, res) = app.get(&format!("/v1/api/location/?user_id={user}&points_encoded=true")).await;
    assert_eq!(res["data"]["count"], 3, "{res}");
    let req = axum::http::Request::get(format!("/v1/api/location/gpx/?user_id={user}"))
        .header("Api-Key", &app.project.api_key)
        .body(axum::body::Body::empty())
        .unwrap();
    let res = tower::ServiceExt::oneshot(app.router.clone(), req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body = http_body_util::BodyExt::collect(res.into_body()).await.unwrap().to_bytes();
    assert_eq!(String::from_utf8_lossy(&body).matches("<trkpt").count(), 3, "{}", String::from_utf8_lossy(&body));

    // Events: the project's, the fence's and the user's lists.
    let days = format!(
        "start_date={}&end_date={}",
        (start - Duration::days(1)).format("%Y-%m-%d"),
        (Utc::now() + Duration::days(1)).format("%Y-%m-%d")
    );
    for filter in [String::new(), format!("&geofence_id={fence}"), format!("&user_id={user}")] {
        let (status, res) = app.get(&format!("/v1/api/event/?{days}{filter}")).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        let listed = ids(&res["data"]["events"]);
        assert_eq!(listed.len(), 3, "{filter}: {res}");
        assert!(!listed.contains(&entry), "{filter}: {res}");
    }
});

/// The message id an outbox item belongs to (pending entries are keyed `<user>#<id>`).
/// The (first) message id an item stands for: its sort key, or a pending entry's second part
/// (`<user>#<id>`, or a run's `<user>#<first id>#<hash>`).
fn message_id(item: &Item) -> String {
    let sk = item["sk"].as_str().expect("sk");
    sk.split('#').nth(1).unwrap_or(sk).to_owned()
}

/// The deliveries or messages the items stand for: a pending run holds several.
fn entries(items: &[Item]) -> usize {
    items.iter().map(|i| 1 + i.get("more").and_then(Value::as_array).map_or(0, Vec::len)).sum()
}

/// Whether the item carries the TTL of a copy whose id is `id`, with one day of retention.
fn expires_a_day_after_its_id(item: &Item, id: &str) -> bool {
    let t = shared::ids::time_of(id).expect("a time-ordered id").timestamp();
    item.get(TTL_ATTRIBUTE) == Some(&json!(t + 86_400))
}

/// The user's trip events listed from `since` to tomorrow (page 1), and the number of pages.
async fn trip_events_since(app: &TestApp, user: &str, since: chrono::DateTime<Utc>) -> (Vec<String>, u64) {
    let to = (Utc::now() + Duration::days(1)).date_naive();
    let q = format!("/v1/api/event/trips/?user_id={user}&start_date={}&end_date={to}", since.date_naive());
    let (status, res) = app.get(&q).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let ids = res["data"]["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    (ids, res["data"]["pages"].as_u64().unwrap())
}

both_alone!(trip_events_and_webhook_messages_expire_with_the_retention, |app| async move {
    let app = app.with_private_webhooks();
    let pid = app.project.project_id.clone();
    let now = Utc::now();
    let kinds = json!(["location.updated", "geofence.entry", "geofence.exit", "trip.created", "trip.started"]);
    let (status, res) =
        app.post("/v1/api/webhooks/", &json!({"url": "http://127.0.0.1:9/hook", "events": kinds})).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let wh = res["data"]["webhook_id"].as_str().expect("webhook_id").to_owned();
    enabled_fence(&app, circle(HOME, 100)).await;
    let user = user_with_events(&app, Key::Secret).await;
    // The user's outbox shard (domain::webhooks::outbox::user_shard).
    let shard = shared::domain::webhooks::outbox::user_shard(Some(&user));
    let outbox =
        [format!("{pid}#WM#{shard:02}"), format!("{pid}#WL#{wh}#{shard:02}"), format!("{pid}#WP#{wh}#{shard:02}")];
    let ute = format!("{pid}#UTE#{user}");

    // Before retention: an old visit (its messages carry no expiry), and an old entry of the
    // user's trip-events index, as an earlier version wrote them.
    send(&app, Key::Secret, &user, visit(now - Duration::days(40))).await;
    let old_id = shared::ids::id_at(now - Duration::days(40), 1);
    let old = json!({"pk": ute, "sk": old_id, "id": old_id, "trip_id": "t", "user_id": user,
        "event_type": "service:trip:created", "created_at": shared::time::Timestamp(now - Duration::days(40)),
        "is_deleted": false});
    let Value::Object(old) = old else { unreachable!() };
    app.state.store.put(Table::Main, old, Cond::None).await.expect("put");
    // Deliveries enter the log at their first attempt.
    crate::webhooks::log_pass(&app).await;
    let before: Vec<usize> = {
        let mut n = Vec::new();
        for pk in &outbox {
            n.push(entries(&items(&app, Table::Main, pk).await));
        }
        n
    };
    assert!(before.iter().all(|&n| n >= 3), "location, entry and exit messages: {before:?}");

    // With retention: a new visit's messages, and a trip's events in the user's index.
    crate::retention::set_retention(&app, Key::Secret, json!(1)).await;
    send(&app, Key::Secret, &user, visit(now - Duration::hours(1))).await;
    let trip = crate::trips::create(&app, "v1", json!({"user_id": user})).await;
    let (status, res) = crate::trips::control(&app, "v1", json!({"trip_id": trip["id"], "action": "start"})).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    crate::webhooks::log_pass(&app).await;
    for pk in outbox.iter().chain([&ute]) {
        let all = items(&app, Table::Main, pk).await;
        let recent = all.iter().filter(|i| shared::ids::time_of(&message_id(i)).unwrap() > now - Duration::days(2));
        let mut n = 0;
        for i in recent {
            assert!(expires_a_day_after_its_id(i, &message_id(i)), "{pk}: {i:?}");
            n += entries(std::slice::from_ref(i));
        }
        assert!(n >= 2, "{pk}: {all:?}");
    }

    // The trip events list counts the old entry (its counts built by this first read)...
    let (ids, _) = trip_events_since(&app, &user, now - Duration::days(41)).await;
    assert_eq!(ids.last(), Some(&old_id), "{ids:?}");
    // So does the endpoint's delivery log.
    let (status, res) = app.get(&format!("/v1/api/webhooks/deliveries/?webhook_id={wh}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");

    // The sweep removes the old messages with their deliveries and pending entries, and the
    // old index entry; what is recent stays.
    let swept = shared::pipeline::retention::sweep_one(
        app.state.store.as_ref(),
        &pid,
        shared::pipeline::retention::Budget::items(shared::pipeline::retention::RUN_BUDGET),
        shared::time::Timestamp::now(),
    )
    .await
    .expect("sweep");
    assert!(swept.finished, "{swept:?}");
    for (pk, n) in outbox.iter().zip(before) {
        let left = items(&app, Table::Main, pk).await;
        assert!(left.iter().all(|i| i.get(TTL_ATTRIBUTE).is_some()), "{pk}: {left:?}");
        assert!(!left.is_empty() && left.len() < n + 10, "{pk}: {left:?}");
    }
    let left = items(&app, Table::Main, &ute).await;
    assert!(left.iter().all(|i| i["sk"] != old_id.as_str()), "{left:?}");
    assert!(left.len() >= 2, "the trip's created and started events stay: {left:?}");
    // ...and no longer once it is swept (the sweep marks the list's counts to recount).
    let (ids, pages) = trip_events_since(&app, &user, now - Duration::days(41)).await;
    assert!(!ids.contains(&old_id), "{ids:?}");
    assert_eq!((ids.len(), pages), (2, 1), "{ids:?}");
    assert_eq!(crate::history_pages::counted(&app, Table::Main, &ute).await, Some(2), "the list's counts");
    // The delivery log too: a read recounts what the sweep took out.
    let (status, res) = app.get(&format!("/v1/api/webhooks/deliveries/?webhook_id={wh}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let logged = items(&app, Table::Main, &outbox[1]).await.len();
    assert_eq!(
        crate::history_pages::counted(&app, Table::Main, &outbox[1]).await,
        Some(logged as u64),
        "the log's counts"
    );
});
