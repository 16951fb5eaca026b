//! Geofences, v1 and v3: the three lists (pages, filters, dates), deleting one or many, and
//! isolation between projects.

use axum::http::StatusCode;
use chrono::Utc;
use serde_json::{Value, json};

use crate::both;
use crate::geofences::{
    HOME, UNKNOWN_ID, circle, create_many, delete, fence, ids_of, list_ids, polygon, put, square, today_range, with,
};
use crate::helpers::{Key, assert_error};
use crate::trace::offset;

both!(v1_list_pages_and_filters, |app| async move {
    let mut ids = Vec::new();
    for i in 0..12 {
        let body = if i % 3 == 2 {
            polygon(&square(offset(HOME.0, HOME.1, i as f64 * 500.0, 0.0), 100.0))
        } else {
            circle(offset(HOME.0, HOME.1, i as f64 * 500.0, 0.0), 100)
        };
        let color = if i % 2 == 0 { "ff0000" } else { "00ff00" };
        let tag = if i < 4 { "early" } else { "late" };
        ids.push(fence(&app, with(body, json!({"color_code": color, "tag": tag}))).await);
    }
    // Newest first, as Roam lists them.
    let newest: Vec<String> = ids.iter().rev().cloned().collect();
    let (_, p1) = app.get("/v1/api/geofence/").await;
    let d = &p1["data"];
    assert_eq!(ids_of(&p1, "geofence_id"), newest[..10]);
    assert_eq!((d["next_page"].clone(), d["pages"].clone(), d["prev_page"].clone()), (json!(2), json!(2), Value::Null));
    assert_eq!(d["account_id"], app.project.account_id.as_str());
    assert_eq!(d["project_id"], app.project.project_id.as_str());
    let (_, p2) = app.get("/v1/api/geofence/?page_number=2").await;
    assert_eq!(ids_of(&p2, "geofence_id"), newest[10..]);
    assert_eq!((p2["data"]["next_page"].clone(), p2["data"]["prev_page"].clone()), (Value::Null, json!(1)));
    assert!(list_ids(&app, "/v1/api/geofence/?page_number=3").await.is_empty());

    let pick = |f: &dyn Fn(usize) -> bool| {
        ids.iter().enumerate().rev().filter(|(i, _)| f(*i)).map(|(_, id)| id.clone()).collect::<Vec<_>>()
    };
    assert_eq!(list_ids(&app, "/v1/api/geofence/?color_code=ff0000").await, pick(&|i| i % 2 == 0));
    assert_eq!(
        list_ids(&app, "/v1/api/geofence/?color_code=00FF00").await,
        pick(&|i| i % 2 == 1),
        "hex is case-insensitive"
    );
    assert_eq!(list_ids(&app, "/v1/api/geofence/?tag=early").await, pick(&|i| i < 4));
    assert_eq!(list_ids(&app, "/v1/api/geofence/?geometry_type=polygon").await, pick(&|i| i % 3 == 2));
    let circles = pick(&|i| i % 3 != 2);
    assert_eq!(circles.len(), 8);
    assert_eq!(list_ids(&app, "/v1/api/geofence/?geometry_type=circle").await, circles);
    assert_eq!(
        list_ids(&app, "/v1/api/geofence/?tag=late&color_code=ff0000&geometry_type=circle").await,
        pick(&|i| i >= 4 && i % 2 == 0 && i % 3 != 2)
    );
    let (_, res) = app.get("/v1/api/geofence/?tag=nothing").await;
    assert_eq!((res["data"]["pages"].clone(), res["data"]["geofences"].clone()), (json!(0), json!([])));
    assert_eq!(list_ids(&app, &format!("/v1/api/geofence/?geofence_id={}", ids[7])).await, [ids[7].clone()]);
    let (status, res) = app.get(&format!("/v1/api/geofence/?geofence_id={UNKNOWN_ID}")).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
    let (status, res) = app.get("/v1/api/geofence/?geometry_type=square").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "geometry_type");
    let (status, res) = app.get("/v1/api/geofence/?page_number=zero").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "page_number");
});

both!(v3_list_needs_both_dates, |app| async move {
    let a = fence(&app, circle(HOME, 100)).await;
    let b = fence(&app, polygon(&square(HOME, 100.0))).await;
    let (status, res) = app.get("/v3/api/geofence/").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "start_date");
    let today = Utc::now().format("%Y-%m-%d");
    let (status, res) = app.get(&format!("/v3/api/geofence/?start_date={today}")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "end_date");
    let (status, res) = app.get(&format!("/v3/api/geofence/?end_date={today}")).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "start_date");
    let (status, res) = app.get("/v3/api/geofence/?start_date=2024-02-02&end_date=2024-02-01").await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "end_date");
    let (status, res) = app.get(&format!("/v3/api/geofence/?{}", today_range())).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(ids_of(&res, "id"), [b.clone(), a.clone()], "newest first");
    assert!(res["data"]["geofences"][0].get("counts").is_none(), "counts only when asked");
    assert_eq!(res["data"]["geofences"][0]["geometry"]["type"], "Polygon");
    // The range is of creation dates.
    assert!(list_ids(&app, "/v3/api/geofence/?start_date=2020-01-01&end_date=2020-01-31").await.is_empty());
    assert_eq!(
        list_ids(&app, &format!("/v3/api/geofence/?{}&geofence_id={b}", today_range())).await,
        std::slice::from_ref(&b)
    );
    let (_, res) = app.get(&format!("/v3/api/geofence/?{}&count=True", today_range())).await;
    for g in res["data"]["geofences"].as_array().unwrap() {
        assert_eq!(g["counts"], json!({"events": 0, "users": 0}), "{g}");
    }
});

both!(metadata_list_without_slash_uses_geofence_id, |app| async move {
    let north = fence(&app, with(circle(HOME, 100), json!({"metadata": {"zone": "north", "tier": "1"}}))).await;
    let south = fence(&app, with(polygon(&square(HOME, 100.0)), json!({"metadata": {"zone": "south"}}))).await;
    fence(&app, circle(HOME, 100)).await;
    let (status, res) = app.get("/v1/api/geofence?metadata=zone:north").await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let d = &res["data"];
    assert_eq!(ids_of(&res, "geofence_id"), std::slice::from_ref(&north));
    let g = &d["geofences"][0];
    assert!(g.get("id").is_none(), "{g}");
    assert_eq!(g["metadata"], json!({"zone": "north", "tier": "1"}));
    assert_eq!(
        (d["next_page"].clone(), d["pages"].clone(), d["prev_page"].clone()),
        (Value::Null, json!(1), Value::Null)
    );
    assert_eq!(list_ids(&app, "/v1/api/geofence?metadata=zone:south").await, [south]);
    assert!(list_ids(&app, "/v1/api/geofence?metadata=zone:north,tier:2").await.is_empty());
    assert_eq!(list_ids(&app, "/v1/api/geofence?metadata=zone:north,tier:1").await, std::slice::from_ref(&north));
    assert_eq!(list_ids(&app, "/v1/api/geofence").await.len(), 3);
    let (_, res) = app.get(&format!("/v1/api/geofence?metadata=zone:north&{}", today_range())).await;
    assert_eq!(ids_of(&res, "geofence_id"), [north]);
    assert!(list_ids(&app, "/v1/api/geofence?metadata=zone:north&start_date=2020-01-01").await.is_empty());
});

both!(delete_one_by_query_or_body_string, |app| async move {
    let ids = [
        fence(&app, circle(HOME, 100)).await,
        fence(&app, circle(HOME, 100)).await,
        fence(&app, polygon(&square(HOME, 100.0))).await,
        fence(&app, circle(HOME, 100)).await,
    ];
    let (status, res) = delete(&app, &format!("/v1/api/geofence/?geofence_id={}", ids[0]), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!((res["status"].clone(), res["code"].clone(), res["data"].clone()), (json!(true), json!(200), json!({})));
    let (status, res) = delete(&app, &format!("/v3/api/geofence/?geofence_id={}", ids[1]), None).await;
    assert_eq!((status, res["data"].clone()), (StatusCode::OK, json!({})), "{res}");
    let (status, res) = delete(&app, "/v1/api/geofence/", Some(json!({"geofence_id": ids[2]}))).await;
    assert_eq!((status, res["data"].clone()), (StatusCode::OK, json!({})), "{res}");
    assert_eq!(list_ids(&app, "/v1/api/geofence/").await, [ids[3].clone()]);
    assert_eq!(list_ids(&app, &format!("/v3/api/geofence/?{}", today_range())).await, [ids[3].clone()]);
    assert_eq!(list_ids(&app, "/v1/api/geofence").await, [ids[3].clone()]);
    for id in &ids[..3] {
        let (status, res) = app.get(&format!("/v1/api/geofence/?geofence_id={id}")).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
        let (status, res) = put(&app, "v1", json!({"geofence_id": id, "tag": "x"})).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
        let (status, res) = delete(&app, &format!("/v3/api/geofence/?geofence_id={id}"), None).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
    }
    // Search no longer finds them.
    let (_, res) = app.get(&format!("/v1/api/search/geofences/?location={},{}&radius=500", HOME.1, HOME.0)).await;
    assert_eq!(ids_of(&res, "id"), [ids[3].clone()], "{res}");
    let (status, res) = delete(&app, "/v1/api/geofence/", None).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "geofence_id");
    let (status, res) = delete(&app, "/v1/api/geofence/", Some(json!({"geofence_id": 7}))).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
});

both!(delete_many_takes_up_to_200_ids_all_or_nothing, |app| async move {
    let bodies = (0..205)
        .map(|i| {
            let (dx, dy) = ((i % 15) as f64 - 7.0, (i / 15) as f64 - 7.0);
            circle(offset(HOME.0, HOME.1, dx * 300.0, dy * 300.0), 50)
        })
        .collect();
    let ids: Vec<String> = create_many(&app, bodies).await.into_iter().map(|g| g.id).collect();
    let search = format!("/v1/api/search/geofences/?location={},{}&radius=3100&page_limit=100", HOME.1, HOME.0);
    let (_, res) = app.get(&search).await;
    assert_eq!(res["data"]["pages"], 3, "205 fences found before: {}", res["data"]["pages"]);

    // 201 ids: refused before anything is looked at.
    let (status, res) = delete(&app, "/v1/api/geofence", Some(json!({"geofence_id": &ids[..201]}))).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "geofence_id");
    let (status, res) = delete(&app, "/v3/api/geofence/", Some(json!({"geofence_id": []}))).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST, "geofence_id");
    // An unknown id among known ones: 404 naming it, and none is deleted.
    let mut some = ids[..5].to_vec();
    some.push(UNKNOWN_ID.to_owned());
    let (status, res) = delete(&app, "/v1/api/geofence", Some(json!({"geofence_id": some}))).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, UNKNOWN_ID);
    let (_, res) = app.get("/v1/api/geofence/").await;
    assert_eq!(res["data"]["pages"], 21, "nothing deleted");

    // 200 ids: all deleted (the bulk form on the bare v1 path and on the v3 path).
    let (status, res) = delete(&app, "/v1/api/geofence", Some(json!({"geofence_id": &ids[..200]}))).await;
    assert_eq!((status, res["data"].clone()), (StatusCode::OK, json!({})), "{res}");
    let newest = |from: usize| ids[from..].iter().rev().cloned().collect::<Vec<_>>();
    assert_eq!(list_ids(&app, "/v1/api/geofence/").await, newest(200));
    let (status, res) = delete(&app, "/v3/api/geofence/", Some(json!({"geofence_id": [ids[200], ids[201]]}))).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(list_ids(&app, "/v1/api/geofence/").await, newest(202));
    let (_, res) = app.get(&search).await;
    let mut found = ids_of(&res, "id");
    found.sort();
    assert_eq!(found, ids[202..], "search finds only what is left");
    // Deleted ids are unknown now.
    let (status, res) = delete(&app, "/v1/api/geofence", Some(json!({"geofence_id": [ids[0]]}))).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, &ids[0]);
});

both!(another_project_sees_none_of_our_fences, |app| async move {
    let ours = fence(&app, with(circle(HOME, 300), json!({"metadata": {"zone": "north"}, "is_enabled": true}))).await;
    let poly = fence(&app, polygon(&square(HOME, 200.0))).await;
    let other = app.other_project().await;
    let as_other = |method: &'static str, uri: String, body: Option<Value>| {
        let app = &app;
        let key = other.api_key.clone();
        async move { app.call(method, &uri, Key::Raw(&key), body.as_ref()).await }
    };
    for uri in [
        "/v1/api/geofence/".to_owned(),
        format!("/v3/api/geofence/?{}", today_range()),
        "/v1/api/geofence".to_owned(),
        "/v1/api/geofence?metadata=zone:north".to_owned(),
    ] {
        let (status, res) = as_other("GET", uri.clone(), None).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {res}");
        assert_eq!(res["data"]["geofences"], json!([]), "{uri}");
    }
    for id in [&ours, &poly] {
        for ver in ["v1", "v3"] {
            let uri = format!("/{ver}/api/geofence/?geofence_id={id}&{}", today_range());
            let (status, res) = as_other("GET", uri, None).await;
            assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
            let (status, res) =
                as_other("PUT", format!("/{ver}/api/geofence/"), Some(json!({"geofence_id": id, "tag": "x"}))).await;
            assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
            let (status, res) = as_other("DELETE", format!("/{ver}/api/geofence/?geofence_id={id}"), None).await;
            assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
        }
        let (status, res) = as_other("DELETE", "/v1/api/geofence/".into(), Some(json!({"geofence_id": id}))).await;
        assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
    }
    let (status, res) = as_other("DELETE", "/v1/api/geofence".into(), Some(json!({"geofence_id": [ours, poly]}))).await;
    assert_error(status, &res, StatusCode::NOT_FOUND, "geofence_id");
    let (status, res) =
        as_other("GET", format!("/v1/api/search/geofences/?location={},{}&radius=5000", HOME.1, HOME.0), None).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["data"]["geofences"], json!([]));
    // Ours are untouched.
    assert_eq!(list_ids(&app, "/v1/api/geofence/").await, [poly.clone(), ours.clone()]);
    let (_, res) = app.get(&format!("/v1/api/geofence/?geofence_id={ours}")).await;
    assert!(res["data"]["geofences"][0]["tag"].is_null());
});

// The domain function and the endpoint agree on what is stored.
both!(domain_create_and_endpoint_lists_agree, |app| async move {
    let made = create_many(&app, vec![circle(HOME, 60), polygon(&square(HOME, 80.0))]).await;
    let ids: Vec<String> = made.iter().map(|g| g.id.clone()).collect();
    let mut listed = list_ids(&app, "/v1/api/geofence/").await;
    listed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(listed, expected);
});
