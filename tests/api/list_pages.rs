//! `page_number` paging of the lists keyed by id (`domain::list_pages`): every page of a
//! project's users (oldest first) and geofences (newest first), whole and in date ranges, and the
//! paging fields, equal to the naive answer (read the range, skip) through interleaved and
//! concurrent creates and deletes, ids spread over months and pages past the end; plus the
//! measurement of page cost against page number (`--ignored`).

use std::time::Instant;

use axum::http::StatusCode;
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{Value, json};
use shared::domain::geofences::{self, ListFilter};
use shared::domain::list_pages;
use shared::domain::users;
use shared::ids::{id_at, id_range};
use shared::paging::{Order, PAGE_SIZE, PageInfo, PageNumber};
use shared::project::Project;
use shared::store::{Cond, Item, Query, SkRange, Table};
use shared::time::DateRange;

use crate::both;
use crate::geofences::{circle, project};
use crate::helpers::{Key, TestApp};

/// Which list.
#[derive(Clone, Copy, Debug)]
pub(crate) enum List {
    Users,
    Fences,
    /// v1/v3 trips.
    Trips,
    /// Moving geofences (always listed in a date range).
    Moving,
}

impl List {
    fn pk(self, p: &Project) -> String {
        match self {
            List::Users => format!("{}#U", p.project_id),
            List::Fences => format!("{}#F", p.project_id),
            List::Trips => format!("{}#T1", p.project_id),
            List::Moving => format!("{}#MF", p.project_id),
        }
    }

    /// The range the list reads for `range` (moving geofences need one).
    fn range(self, range: Option<DateRange>) -> Option<DateRange> {
        match self {
            List::Moving => range.or(Some(DateRange { start: utc(2000, 1, 1, 0), end: utc(2100, 1, 1, 0) })),
            _ => range,
        }
    }

    /// The ids of one page, and its paging fields, as the list answers.
    async fn page(self, app: &TestApp, range: Option<DateRange>, n: usize) -> (Vec<String>, PageInfo) {
        let (s, p) = (app.state.store.as_ref(), project(app));
        let range = self.range(range);
        match self {
            List::Users => {
                let (got, info) = users::list(s, &p, range, None, PageNumber(n)).await.expect("users page");
                let docs: Vec<_> = got.into_iter().map(|u| u.doc).collect();
                let got = shared::store::from_jsons::<users::User>(&docs).expect("stored users");
                (got.into_iter().map(|u| u.id).collect(), info)
            }
            List::Fences => {
                let f = ListFilter { range, ..ListFilter::default() };
                let (got, info) = geofences::list(s, &p, &f, PageNumber(n)).await.expect("fences page");
                let got = shared::store::from_jsons::<geofences::Geofence>(&got).expect("stored fences");
                (got.into_iter().map(|g| g.id).collect(), info)
            }
            List::Trips => {
                let f = shared::domain::trips::ListFilter { range, ..Default::default() };
                let (got, info) = shared::domain::trips::list_v1(s, &p, &f, PageNumber(n)).await.expect("trips page");
                (got.iter().map(|t| t.decode().expect("stored trip").id).collect(), info)
            }
            List::Moving => {
                let r = range.expect("a range");
                let (got, info) = geofences::moving::list(s, &p, r, PageNumber(n)).await.expect("moving page");
                (got.into_iter().map(|g| g.id).collect(), info)
            }
        }
    }

    fn order(self) -> Order {
        match self {
            List::Users => Order::OldestFirst,
            _ => Order::NewestFirst,
        }
    }
}

/// Every page of the list (and two past the end) against the ids read in one query.
async fn assert_pages_exact(app: &TestApp, list: List, range: Option<DateRange>) {
    let s = app.state.store.as_ref();
    let sk = list.range(range).map(|r| id_range(&r)).map(|(a, b)| SkRange::Between(a, b)).unwrap_or(SkRange::All);
    let mut all: Vec<String> = s
        .query(Table::Main, &Query::new(list.pk(&project(app)), sk))
        .await
        .expect("query")
        .items
        .iter()
        .map(|i| i["sk"].as_str().expect("sk").to_owned())
        .collect();
    if list.order() == Order::NewestFirst {
        all.reverse();
    }
    let pages = all.len().div_ceil(PAGE_SIZE);
    for n in 1..=pages + 2 {
        let (ids, info) = list.page(app, range, n).await;
        let want: Vec<String> = all.iter().skip((n - 1) * PAGE_SIZE).take(PAGE_SIZE).cloned().collect();
        assert_eq!(ids, want, "{list:?} {range:?}: page {n} of {pages}");
        assert_eq!(info, PageInfo::new(PageNumber(n), all.len()), "{list:?}: paging fields of page {n}");
    }
}

/// Copies of `template` (an item of the list) with ids at these times, counted as creates are.
async fn insert_at(app: &TestApp, template: &Item, times: &[DateTime<Utc>]) -> Vec<String> {
    let s = app.state.store.as_ref();
    let mut ids = Vec::new();
    for (i, t) in times.iter().enumerate() {
        let id = id_at(*t, rand::random::<u64>() >> 20 | i as u64);
        let mut item = template.clone();
        item.insert("sk".into(), id.clone().into());
        item.insert("id".into(), id.clone().into());
        list_pages::insert(s, Table::Main, item).await.expect("inserted");
        ids.push(id);
    }
    ids
}

pub(crate) async fn create(app: &TestApp, list: List) -> String {
    match list {
        List::Users => app.create_user(json!({})).await,
        List::Fences => {
            let (status, res) = app.post("/v1/api/geofence/", &circle((13.4, 52.5), 100)).await;
            assert_eq!(status, StatusCode::CREATED, "{res}");
            res["data"]["id"].as_str().or(res["data"]["geofence_id"].as_str()).expect("id").to_owned()
        }
        List::Trips => {
            let (status, res) = app.post("/v3/api/trips/", &json!({"origins": [[13.4, 52.5]]})).await;
            assert_eq!(status, StatusCode::CREATED, "{res}");
            res["data"][0]["id"].as_str().expect("id").to_owned()
        }
        List::Moving => {
            let u = app.create_user(json!({})).await;
            let body = json!({"users": [u], "geometry_type": "circle", "geometry_radius": 100});
            let (status, res) = app.post("/v3/api/moving-geofence/", &body).await;
            assert_eq!(status, StatusCode::CREATED, "{res}");
            res["data"]["id"].as_str().expect("id").to_owned()
        }
    }
}

async fn delete(app: &TestApp, list: List, id: &str) {
    let uri = match list {
        List::Users => format!("/v1/api/user/?user_id={id}"),
        List::Fences => format!("/v1/api/geofence/?geofence_id={id}"),
        List::Trips => format!("/v3/api/trips/?trip_id={id}"),
        List::Moving => format!("/v3/api/moving-geofence/?geofence_id={id}"),
    };
    let (status, res) = app.call("DELETE", &uri, Key::Secret, None).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {res}");
}

async fn template(app: &TestApp, list: List) -> Item {
    let id = create(app, list).await;
    app.state.store.get(Table::Main, &list.pk(&project(app)), &id).await.expect("get").expect("item")
}

fn utc(y: i32, mo: u32, d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, 0, 0).single().expect("a time")
}

/// Times across every level of the counts: months apart, hours, seconds, one millisecond.
fn spread(n: usize) -> Vec<DateTime<Utc>> {
    let t0 = utc(2024, 1, 3, 5);
    (0..n)
        .map(|i| match i % 4 {
            0 => t0 + Duration::days(17 * i as i64),
            1 => t0 + Duration::minutes(37 * i as i64),
            2 => t0 + Duration::milliseconds(300 * i as i64),
            _ => t0 + Duration::days(40),
        })
        .collect()
}

fn ranges() -> Vec<DateRange> {
    let r = |a, b| DateRange { start: a, end: b };
    vec![
        r(utc(2024, 1, 3, 0), utc(2024, 1, 4, 0)),
        r(utc(2024, 1, 3, 6), utc(2024, 6, 1, 0)),
        r(utc(2024, 2, 12, 0), utc(2030, 1, 1, 0)),
        r(utc(2020, 1, 1, 0), utc(2021, 1, 1, 0)),
    ]
}

async fn interleaved(app: TestApp, list: List) {
    let tpl = template(&app, list).await;
    assert_pages_exact(&app, list, None).await;
    let mut ids = insert_at(&app, &tpl, &spread(120)).await;
    for _ in 0..25 {
        ids.push(create(&app, list).await);
    }
    assert_pages_exact(&app, list, None).await;
    // Deletes at the front, middle and end, then creates again.
    for id in [ids[0].clone(), ids[1].clone(), ids[60].clone(), ids[61].clone(), ids[140].clone()] {
        delete(&app, list, &id).await;
    }
    assert_pages_exact(&app, list, None).await;
    for _ in 0..7 {
        create(&app, list).await;
    }
    for r in ranges() {
        assert_pages_exact(&app, list, Some(r)).await;
    }
    assert_pages_exact(&app, list, None).await;
    // Concurrent creates and deletes.
    let (adds, dels) = futures::future::join(
        futures::future::join_all((0..12).map(|_| create(&app, list))),
        futures::future::join_all(ids[70..82].iter().map(|id| delete(&app, list, id))),
    )
    .await;
    assert_eq!((adds.len(), dels.len()), (12, 12));
    assert_pages_exact(&app, list, None).await;
    assert_pages_exact(&app, list, Some(ranges()[2])).await;
}

both!(users_pages_are_exact_through_creates_and_deletes, |app| async move {
    interleaved(app, List::Users).await;
});

both!(geofence_pages_are_exact_through_creates_and_deletes, |app| async move {
    interleaved(app, List::Fences).await;
});

both!(trip_pages_are_exact_through_creates_and_deletes, |app| async move {
    interleaved(app, List::Trips).await;
});

both!(moving_geofence_pages_are_exact_through_creates_and_deletes, |app| async move {
    interleaved(app, List::Moving).await;
});

both!(the_lists_through_the_api_match_the_domain_pages, |app| async move {
    for _ in 0..23 {
        create(&app, List::Users).await;
        create(&app, List::Fences).await;
    }
    for (uri, list, field) in [
        ("/v1/api/user/?page_number=2", List::Users, "users"),
        ("/v1/api/geofence/?page_number=3", List::Fences, "geofences"),
    ] {
        let (status, res) = app.get(uri).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        let n = if field == "users" { 2 } else { 3 };
        let (want, info) = list.page(&app, None, n).await;
        let id = |v: &Value| v["id"].as_str().or(v["geofence_id"].as_str()).unwrap().to_owned();
        let got: Vec<String> = res["data"][field].as_array().unwrap().iter().map(id).collect();
        assert_eq!(got, want, "{uri}");
        assert_eq!(res["data"]["pages"], json!(info.pages));
    }
});

/// Page cost against page number on a list of users (`WAYMARK_PAGES_USERS`, 100,000 by default;
/// on DynamoDB Local `WAYMARK_PAGES_USERS_DYNAMODB`, 20,000): run with `--ignored --nocapture`
/// (DynamoDB Local adds capacity units read and written).
#[tokio::test]
#[ignore]
async fn user_page_cost_does_not_grow_with_the_page_number() {
    let size = |var: &str, n| std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(n);
    for backend in [crate::helpers::Backend::Embedded, crate::helpers::Backend::DynamoDb] {
        let dynamo = matches!(backend, crate::helpers::Backend::DynamoDb);
        let n: usize =
            if dynamo { size("WAYMARK_PAGES_USERS_DYNAMODB", 20_000) } else { size("WAYMARK_PAGES_USERS", 100_000) };
        if n == 0 || (dynamo && std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_none()) {
            continue;
        }
        let (app, units) = crate::helpers::metered_app(backend).await;
        let p = project(&app);
        let s = app.state.store.clone();
        let t = Instant::now();
        let (u0, body) = (units(), json!({"app_type": 1, "device_token": "t"}));
        use futures::StreamExt;
        futures::stream::iter(0..n)
            .for_each_concurrent(8, |_| {
                let (s, p, body) = (s.clone(), p.clone(), body.clone());
                async move {
                    users::create(s.as_ref(), &p, serde_json::from_value(body).unwrap()).await.expect("user");
                }
            })
            .await;
        eprintln!(
            "[{backend:?}] created {n} users in {:.1} s, {:.1} WCU a create",
            t.elapsed().as_secs_f64(),
            (units() - u0) / n as f64
        );
        let s = app.state.store.as_ref();
        let pk = users::users_pk(&p.project_id);
        let last = n.div_ceil(PAGE_SIZE);
        let measure = |label: String, f: std::time::Duration, u: f64| {
            eprintln!("[{backend:?}] {label:<40} {:>9.2} ms {u:>8.1} RCU", f.as_secs_f64() * 1e3);
        };
        for page in [1, 2, last / 4, last / 2, last] {
            // The least of 5 reads (the machine is shared), and the units of one.
            let mut best = std::time::Duration::MAX;
            let (mut got, mut info, mut used) = (Vec::new(), PageInfo::new(PageNumber(1), 0), 0.0);
            for _ in 0..5 {
                let (u0, t) = (units(), Instant::now());
                (got, info) = users::list(s, &p, None, None, PageNumber(page)).await.unwrap();
                best = best.min(t.elapsed());
                used = units() - u0;
            }
            measure(format!("page {page} (counted, least of 5)"), best, used);
            assert_eq!((got.len(), info.pages), (PAGE_SIZE.min(n - (page - 1) * PAGE_SIZE), last));
            // The former way: count the list, read up to the page and skip.
            let (u0, t) = (units(), Instant::now());
            let (old, _) = shared::domain::list_pages::list_page::<users::User>(
                s,
                Table::Main,
                &pk,
                SkRange::All,
                PageNumber(page),
                None,
            )
            .await
            .unwrap();
            measure(format!("page {page} (count and skip, before)"), t.elapsed(), units() - u0);
            let docs: Vec<_> = got.iter().map(|u| u.doc.clone()).collect();
            let got = shared::store::from_jsons::<users::User>(&docs).unwrap();
            assert_eq!(old.iter().map(|u| &u.id).collect::<Vec<_>>(), got.iter().map(|u| &u.id).collect::<Vec<_>>());
        }
        // Create and delete one user more: their cost in capacity units, against the former
        // create (one conditional put of the record).
        let (u0, t) = (units(), Instant::now());
        let u = users::create(s, &p, serde_json::from_value(json!({"app_type": 1, "device_token": "t"})).unwrap());
        let u = u.await.unwrap();
        measure("create a user, counted (units written)".into(), t.elapsed(), units() - u0);
        let item = shared::store::to_item(&format!("{pk}-before"), &u.id, &u).unwrap();
        let (u0, t) = (units(), Instant::now());
        s.put(Table::Main, item, Cond::NotExists).await.unwrap();
        measure("its record alone (the create before)".into(), t.elapsed(), units() - u0);
        let id = u.id;
        let (u0, t) = (units(), Instant::now());
        let (status, res) = app.call("DELETE", &format!("/v1/api/user/?user_id={id}"), Key::Secret, None).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        measure("delete it (erasure, units read and written)".into(), t.elapsed(), units() - u0);
    }
}
