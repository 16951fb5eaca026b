//! Items whose TTL attribute (`expires_at`) has passed are not read, on either store, although
//! DynamoDB's TTL deletes them only later (up to about two days) and the embedded store only
//! when the retention sweeper runs: lists, counts, encodings and exports leave them out.

use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use shared::domain::locations::locations_pk;
use shared::domain::retention::TTL_ATTRIBUTE;
use shared::store::{Cond, Item, Table};

use crate::both;
use crate::geofences::{HOME, circle, enabled_fence};
use crate::helpers::{Key, TestApp};
use crate::retention::{items, send, user_with_events, visit};

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
    let events = items(&app, Table::Main, &format!("{pid}#E")).await;
    assert_eq!(events.len(), 4, "two entries and two exits");
    let entry = events[0]["sk"].as_str().unwrap().to_owned();
    for pk in [format!("{pid}#E"), format!("{pid}#FE#{fence}"), format!("{pid}#UE#{user}")] {
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
