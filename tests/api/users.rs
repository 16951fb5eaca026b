//! Users: create, list/get, paging, filters, update, delete.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, assert_error};

/// The per-user event switches, all false at creation.
const EVENT_FLAGS: [&str; 7] = [
    "geofence_events",
    "motion_events",
    "location_events",
    "trips_events",
    "nearby_events",
    "location_listener",
    "event_listener",
];

const USER_FIELDS: [&str; 24] = [
    "id",
    "app_id",
    "device_token",
    "device_uuid",
    "description",
    "brand",
    "model",
    "os_version",
    "sdk_version",
    "device_arn",
    "geofence_events",
    "motion_events",
    "location_events",
    "trips_events",
    "nearby_events",
    "location_listener",
    "event_listener",
    "metadata",
    "is_deleted",
    "created_at",
    "updated_at",
    "last_location_update",
    "project_id",
    "account_id",
];

fn is_ts(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.3f").is_ok() && s.len() == 23)
}

both!(create_returns_every_documented_field, |app| async move {
    let body = json!({"app_type": 2, "device_token": "tok", "description": "courier 7", "metadata": {"team": "north"}});
    let (status, res) = app.post("/v1/api/user/", &body).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(res["status"], true);
    assert_eq!(res["code"], 201);
    let d = res["data"].as_object().unwrap();
    let mut keys: Vec<&str> = d.keys().map(String::as_str).collect();
    keys.sort();
    let mut expected = vec![
        "user_id",
        "app_id",
        "description",
        "geofence_events",
        "location_events",
        "trips_events",
        "nearby_events",
        "location_listener",
        "event_listener",
        "metadata",
        "sdk_version",
        "project_id",
        "account_id",
    ];
    expected.sort();
    assert_eq!(keys, expected);
    assert_eq!(d["app_id"], format!("{}_2", app.project.project_id));
    assert_eq!(d["project_id"], app.project.project_id.as_str());
    assert_eq!(d["account_id"], app.project.account_id.as_str());
    assert_eq!(d["description"], "courier 7");
    assert_eq!(d["metadata"], json!({"team": "north"}));
    for flag in
        ["geofence_events", "location_events", "trips_events", "nearby_events", "location_listener", "event_listener"]
    {
        assert_eq!(d[flag], false, "{flag}");
    }
    let id = d["user_id"].as_str().unwrap();
    assert_eq!(id.len(), 24);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
});

both!(user_id_alone_returns_that_user_with_every_field, |app| async move {
    let id = app.create_user(json!({"k": "v"})).await;
    app.create_user(json!({})).await;
    let (status, res) = app.get(&format!("/v1/api/user/?user_id={id}")).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let d = &res["data"];
    assert_eq!(d["account_id"], app.project.account_id.as_str());
    let users = d["users"].as_array().unwrap();
    assert_eq!(users.len(), 1);
    let u = users[0].as_object().unwrap();
    for f in USER_FIELDS {
        assert!(u.contains_key(f), "missing {f}");
    }
    assert_eq!(u.len(), USER_FIELDS.len(), "{u:?}");
    assert_eq!(u["id"], id.as_str());
    assert_eq!(u["last_location_update"], json!({}));
    assert_eq!(u["is_deleted"], false);
    assert!(is_ts(&u["created_at"]), "{}", u["created_at"]);

    let (status, res) = app.get(&format!("/v1/api/user/?user_id={id}&page_number=1")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "user_id");
    let (status, res) = app.get("/v1/api/user/?user_id=0123456789abcdef01234567").await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
});

both!(twenty_five_users_page_in_creation_order, |app| async move {
    let mut ids = Vec::new();
    for _ in 0..25 {
        ids.push(app.create_user(json!({})).await);
    }
    let page = |n: u32| {
        let app = &app;
        async move { app.get(&format!("/v1/api/user/?page_number={n}")).await.1["data"].clone() }
    };
    let (p1, p2, p3, p4) = (page(1).await, page(2).await, page(3).await, page(4).await);
    let ids_of = |d: &Value| {
        d["users"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(ids_of(&p1), ids[0..10]);
    assert_eq!(ids_of(&p2), ids[10..20]);
    assert_eq!(ids_of(&p3), ids[20..25]);
    assert!(ids_of(&p4).is_empty());
    assert_eq!(
        (p1["next_page"].clone(), p1["pages"].clone(), p1["prev_page"].clone()),
        (json!(2), json!(3), Value::Null)
    );
    assert_eq!((p2["next_page"].clone(), p2["prev_page"].clone()), (json!(3), json!(1)));
    assert_eq!((p3["next_page"].clone(), p3["prev_page"].clone()), (Value::Null, json!(2)));
    assert_eq!(
        (p4["next_page"].clone(), p4["pages"].clone(), p4["prev_page"].clone()),
        (Value::Null, json!(3), json!(3))
    );
});

both!(empty_list_has_null_paging, |app| async move {
    let (_, res) = app.get("/v1/api/user/").await;
    let d = &res["data"];
    assert_eq!(
        (d["next_page"].clone(), d["pages"].clone(), d["prev_page"].clone()),
        (Value::Null, json!(0), Value::Null)
    );
    assert_eq!(d["users"], json!([]));
});

both!(metadata_filter_requires_every_pair, |app| async move {
    let a = app.create_user(json!({"team": "red", "tier": "gold"})).await;
    app.create_user(json!({"team": "red", "tier": "silver"})).await;
    app.create_user(json!({"team": "blue"})).await;
    let (_, res) = app.get("/v1/api/user/?metadata=team:red,tier:gold").await;
    let users = res["data"]["users"].as_array().unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["id"], a.as_str());
    let (_, res) = app.get("/v1/api/user/?metadata=team:red").await;
    assert_eq!(res["data"]["users"].as_array().unwrap().len(), 2);
    assert_eq!(res["data"]["pages"], 1);
});

both!(date_filter_and_timezone_shift_created_at, |app| async move {
    let id = app.create_user(json!({})).await;
    let now = chrono::Utc::now();
    let today = now.format("%Y-%m-%d").to_string();
    let yesterday = (now - chrono::Duration::days(1)).format("%Y-%m-%d").to_string();
    let ids =
        |res: &Value| res["data"]["users"].as_array().unwrap().iter().map(|u| u["id"].clone()).collect::<Vec<_>>();

    let (_, res) = app.get(&format!("/v1/api/user/?start_date={today}")).await;
    assert_eq!(ids(&res), vec![json!(id)]);
    let (_, res) = app.get(&format!("/v1/api/user/?start_date={yesterday}&end_date={today}")).await;
    assert_eq!(ids(&res), vec![json!(id)]);
    let (_, res) = app.get("/v1/api/user/?start_date=2020-01-01&end_date=2020-02-01").await;
    assert!(ids(&res).is_empty());

    // In UTC+14 the local day differs from the UTC day for most of the UTC day.
    let tz: chrono_tz::Tz = "Pacific/Kiritimati".parse().unwrap();
    let local_today = now.with_timezone(&tz).format("%Y-%m-%d").to_string();
    let (_, res) = app.get(&format!("/v1/api/user/?start_date={local_today}&timezone_offset=Pacific/Kiritimati")).await;
    assert_eq!(ids(&res), vec![json!(id)], "{res}");
    let utc_created = app.get(&format!("/v1/api/user/?user_id={id}")).await.1["data"]["users"][0]["created_at"].clone();
    let local_created = res["data"]["users"][0]["created_at"].clone();
    let parse =
        |v: &Value| chrono::NaiveDateTime::parse_from_str(v.as_str().unwrap(), "%Y-%m-%dT%H:%M:%S%.3f").unwrap();
    assert_eq!(parse(&local_created) - parse(&utc_created), chrono::Duration::hours(14));
});

both!(update_changes_only_given_fields_and_delete_hides_user, |app| async move {
    let id = app.create_user(json!({"a": "1"})).await;
    let body = json!({"user_id": id, "description": "new", "geofence_events": true, "device_token": "real"});
    let (status, res) = app.call("PUT", "/v1/api/user/", Key::Publishable, Some(&body)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let (_, res) = app.get(&format!("/v1/api/user/?user_id={id}")).await;
    let u = &res["data"]["users"][0];
    assert_eq!(u["description"], "new");
    assert_eq!(u["geofence_events"], true);
    assert_eq!(u["motion_events"], false);
    assert_eq!(u["device_token"], "real");
    assert_eq!(u["metadata"], json!({"a": "1"}));

    let other = app.create_user(json!({})).await;
    let (status, res) = app.call("DELETE", &format!("/v1/api/user/?user_id={id}"), Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["is_deleted"], true);
    let (_, res) = app.get("/v1/api/user/").await;
    let users = res["data"]["users"].as_array().unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["id"], other.as_str());
    assert_eq!(res["data"]["pages"], 1);
    let (status, res) = app.get(&format!("/v1/api/user/?user_id={id}")).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
    let (status, res) = app.call("DELETE", &format!("/v1/api/user/?user_id={id}"), Key::Secret, None).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "user_id");
});

both!(concurrent_updates_lose_nothing, |app| async move {
    let id = app.create_user(json!({})).await;
    let calls = EVENT_FLAGS.iter().map(|f| {
        let body = json!({"user_id": id, *f: true});
        let app = &app;
        async move { app.call("PUT", "/v1/api/user", Key::Secret, Some(&body)).await }
    });
    for (status, res) in futures::future::join_all(calls).await {
        assert_eq!(status, StatusCode::OK, "{res}");
    }
    let (_, res) = app.get(&format!("/v1/api/user/?user_id={id}")).await;
    for f in EVENT_FLAGS {
        assert_eq!(res["data"]["users"][0][f], true, "{f} lost");
    }
});
