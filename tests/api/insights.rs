//! Insights from generated histories: home, work and places, on both backends.

use axum::http::StatusCode;
use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc, Weekday};
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};
use crate::trace::{Rng, geodesic, offset};

const HOME: (f64, f64) = (13.4050, 52.5200);
const OFFICE: (f64, f64) = (13.3777, 52.5163);
const GYM: (f64, f64) = (13.4200, 52.5300);
const CAFE: (f64, f64) = (13.3950, 52.5250);
const MUSEUM: (f64, f64) = (13.3980, 52.5170);
const HOTEL_NY: (f64, f64) = (-73.9857, 40.7484);
const OFFICE_NY: (f64, f64) = (-74.0110, 40.7069);
/// A fix every 10 minutes.
const STEP_MIN: i64 = 10;

/// A day plan in local time: (from hour, to hour, place); gaps are travel.
type Plan = Vec<(f64, f64, (f64, f64))>;

fn plan_for(day: NaiveDate, week: i64, night_shift: bool) -> (Plan, i32) {
    let wd = day.weekday();
    if week == 2 {
        // A week in New York (UTC-5): hotel nights, the client's office on weekdays.
        let mut p = vec![(0.0, 8.0, HOTEL_NY), (20.0, 24.0, HOTEL_NY)];
        if !matches!(wd, Weekday::Sat | Weekday::Sun) {
            p.push((9.0, 18.0, OFFICE_NY));
        } else {
            p.push((8.0, 20.0, HOTEL_NY));
        }
        return (p, -5 * 3600);
    }
    if night_shift {
        // Works 22:00-06:00 on weekdays, sleeps at home by day.
        let mut p = vec![(6.5, 21.5, HOME)];
        if matches!(wd, Weekday::Mon | Weekday::Tue | Weekday::Wed | Weekday::Thu | Weekday::Fri) {
            p.push((22.0, 24.0, OFFICE));
            p.push((0.0, 6.0, if wd == Weekday::Mon { HOME } else { OFFICE }));
        } else {
            p.push((0.0, 6.0, HOME));
            p.push((21.5, 24.0, HOME));
        }
        return (p, 3600);
    }
    let mut p = vec![(0.0, 7.5, HOME)];
    match wd {
        Weekday::Sat => {
            p.extend([(7.5, 10.0, HOME), (10.5, 12.0, CAFE), (12.5, 24.0, HOME)]);
            if week == 1 {
                p[2] = (10.5, 12.0, MUSEUM); // once, instead of the café
            }
        }
        Weekday::Sun => p.push((7.5, 24.0, HOME)),
        _ => {
            p.push((8.0, 17.5, OFFICE));
            if matches!(wd, Weekday::Mon | Weekday::Wed | Weekday::Fri) {
                p.extend([(18.0, 19.0, GYM), (19.5, 24.0, HOME)]);
            } else {
                p.push((18.0, 24.0, HOME));
            }
        }
    }
    (p, 3600)
}

/// Fixes for `days` days from `start` (a Monday), noisy, with a few wild ones.
fn history(start: NaiveDate, days: i64, seed: u64, night_shift: bool) -> Vec<Value> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for d in 0..days {
        let day = start + Duration::days(d);
        let (plan, off) = plan_for(day, d / 7, night_shift);
        let tz = format!("{}{:02}00", if off < 0 { '-' } else { '+' }, off.abs() / 3600);
        let mut m = 0;
        while m < 24 * 60 {
            let h = m as f64 / 60.0;
            let local = day.and_hms_opt(0, 0, 0).unwrap() + Duration::minutes(m);
            let at: DateTime<Utc> = (local - Duration::seconds(off as i64)).and_utc();
            m += STEP_MIN;
            let here = plan.iter().find(|(a, b, _)| *a <= h && h < *b).map(|p| p.2);
            let (pos, accuracy) = match here {
                Some(place) => {
                    let wild = rng.uniform() < 0.01;
                    if wild {
                        (offset(place.0, place.1, 400.0 + rng.uniform() * 300.0, 300.0), 250.0)
                    } else {
                        (offset(place.0, place.1, rng.normal() * 8.0, rng.normal() * 8.0), 10.0)
                    }
                }
                // Travelling: somewhere between places, moving.
                None => (offset(HOME.0, HOME.1, 1500.0 * rng.uniform() - 750.0, 1500.0 * rng.uniform() - 750.0), 15.0),
            };
            out.push(json!({"coordinates": [pos.0, pos.1], "recorded_at": at.format("%Y-%m-%dT%H:%M:%S").to_string(),
                "accuracy": accuracy, "timezone_offset": tz}));
        }
    }
    out
}

pub(crate) async fn user_with(app: &TestApp, fixes: &[Value]) -> String {
    let u = app.create_user(json!({})).await;
    for batch in fixes.chunks(1000) {
        let (s, r) = app
            .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": u, "locations": batch})))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    u
}

pub(crate) async fn insights(app: &TestApp, kind: &str, user: &str) -> Vec<Value> {
    let (s, r) = app.get(&format!("/v3/api/insights/{kind}/?user_id={user}")).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["data"]["user_id"], user);
    let key = if kind == "poi" { "insights" } else { kind };
    r["data"][key].as_array().unwrap_or_else(|| panic!("{r}")).clone()
}

/// Centre of an insight's geometry.
fn centre(i: &Value) -> (f64, f64) {
    let ring = i["geometry"]["coordinates"][0].as_array().unwrap();
    let xs: Vec<f64> = ring.iter().map(|p| p[0].as_f64().unwrap()).collect();
    let ys: Vec<f64> = ring.iter().map(|p| p[1].as_f64().unwrap()).collect();
    let mid =
        |v: &[f64]| (v.iter().cloned().fold(f64::MAX, f64::min) + v.iter().cloned().fold(f64::MIN, f64::max)) / 2.0;
    (mid(&xs), mid(&ys))
}

const MONDAY: fn() -> NaiveDate = || NaiveDate::from_ymd_opt(2024, 4, 1).unwrap();

both!(four_weeks_find_home_work_and_the_places_visited_repeatedly, |app| async move {
    let u = user_with(&app, &history(MONDAY(), 28, 1, false)).await;
    let home = insights(&app, "home", &u).await;
    assert_eq!(home.len(), 1, "{home:?}");
    let h = &home[0];
    for k in ["id", "geometry", "last_visited", "tz_offset", "confidence", "type", "created_at"] {
        assert!(h.get(k).is_some(), "missing {k}: {h}");
    }
    for k in ["id", "coordinates", "accuracy", "altitude", "recorded_at", "started_at", "created_at"] {
        assert!(h["last_visited"].get(k).is_some(), "last_visited misses {k}: {h}");
    }
    assert_eq!(h["type"], "home");
    assert_eq!(h["geometry"]["type"], "Polygon");
    assert!(geodesic(centre(h), HOME) < 50.0, "home {:.0} m off", geodesic(centre(h), HOME));
    assert_eq!(h["confidence"], "High");
    assert_eq!(h["tz_offset"], "+0100");
    let work = insights(&app, "work", &u).await;
    assert_eq!(work.len(), 1, "{work:?}");
    assert!(geodesic(centre(&work[0]), OFFICE) < 50.0, "work {:.0} m off", geodesic(centre(&work[0]), OFFICE));
    assert_eq!(work[0]["type"], "work");
    let pois = insights(&app, "poi", &u).await;
    let near = |p: (f64, f64)| pois.iter().any(|i| geodesic(centre(i), p) < 50.0);
    assert!(near(GYM), "gym missing: {pois:?}");
    assert!(near(CAFE), "café missing: {pois:?}");
    assert!(!near(MUSEUM), "the museum was visited once");
    assert!(pois.iter().all(|i| i["type"] == "poi"));
});

both!(confidence_rises_with_weeks_and_one_day_is_too_little, |app| async move {
    let one_week = user_with(&app, &history(MONDAY(), 7, 2, false)).await;
    let home = insights(&app, "home", &one_week).await;
    assert_eq!(home.len(), 1);
    assert_eq!(home[0]["confidence"], "Medium");
    let one_day = user_with(&app, &history(MONDAY(), 1, 3, false)).await;
    for kind in ["home", "work", "poi"] {
        assert!(insights(&app, kind, &one_day).await.is_empty(), "{kind}");
    }
});

both!(a_night_shift_worker_gets_the_right_home, |app| async move {
    let u = user_with(&app, &history(MONDAY(), 28, 4, true)).await;
    let home = insights(&app, "home", &u).await;
    assert_eq!(home.len(), 1);
    assert!(geodesic(centre(&home[0]), HOME) < 50.0, "home {:.0} m off", geodesic(centre(&home[0]), HOME));
    let work = insights(&app, "work", &u).await;
    assert!(geodesic(centre(&work[0]), OFFICE) < 50.0);
});

both!(unknown_users_and_other_projects_see_nothing, |app| async move {
    let u = user_with(&app, &history(MONDAY(), 3, 5, false)).await;
    let (s, r) = app.get("/v3/api/insights/home/?user_id=0123456789abcdef01234567").await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
    let (s, r) = app.get("/v3/api/insights/home/").await;
    assert_error(s, &r, StatusCode::BAD_REQUEST, "user_id");
    let b = app.other_project().await;
    let (s, r) = app.call("GET", &format!("/v3/api/insights/home/?user_id={u}"), Key::Raw(&b.api_key), None).await;
    assert_error(s, &r, StatusCode::NOT_FOUND, "user_id");
});
