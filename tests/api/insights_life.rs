//! Insights on synthetic lives with ground truth (tests/api/life.rs), on both backends: a move,
//! a job change, working from home, a shift worker, sparse and arrival/departure-only sampling, a
//! traveller, a café regular, time zones with DST, and place shapes as months accumulate. Each
//! case prints `INSIGHTS-CASE <name>: home/work error (m), POI precision/recall`; with
//! `WAYMARK_LIFE_EXPORT=<dir>` it also writes the fixes, the truth and Waymark's answer there for
//! scripts/compare/ (trackintel).

use axum::http::StatusCode;
use chrono::{Datelike, NaiveDate, Weekday};
use serde_json::{Value, json};

use crate::both;
use crate::helpers::{Key, TestApp, assert_error};
use crate::insights::{insights, user_with};
use crate::life::{DayPlan, Life, MATCH_M, Pos, Sampling, Truth, centre, live, reach_m, score};
use crate::trace::geodesic;

pub(crate) const HOME: Pos = (13.4050, 52.5200);
pub(crate) const NEW_HOME: Pos = (13.4530, 52.5080);
pub(crate) const OFFICE: Pos = (13.3777, 52.5163);
const NEW_OFFICE: Pos = (13.3300, 52.5050);
const GYM: Pos = (13.4200, 52.5300);
const CAFE: Pos = (13.3950, 52.5250);
const FACTORY: Pos = (13.4800, 52.4700);
const HOTELS: [Pos; 4] = [(11.5820, 48.1351), (9.9937, 53.5511), (6.9603, 50.9375), (13.7373, 51.0504)];
const CITY_HOTEL: Pos = (13.3600, 52.5400);
const MONDAY: (i32, u32, u32) = (2024, 4, 1);

pub(crate) fn monday() -> NaiveDate {
    NaiveDate::from_ymd_opt(MONDAY.0, MONDAY.1, MONDAY.2).unwrap()
}
fn weekday(d: NaiveDate) -> bool {
    !matches!(d.weekday(), Weekday::Sat | Weekday::Sun)
}

/// An office day, home otherwise; the gym Monday, Wednesday and Friday evenings.
pub(crate) fn commuter(d: NaiveDate, home: Pos, office: Option<Pos>) -> DayPlan {
    match office.filter(|_| weekday(d)) {
        Some(o) => {
            let mut p = vec![(0.0, 7.5, home), (8.0, 17.0, o)];
            if matches!(d.weekday(), Weekday::Mon | Weekday::Wed | Weekday::Fri) {
                p.extend([(17.5, 18.5, GYM), (19.0, 24.0, home)]);
            } else {
                p.push((17.5, 24.0, home));
            }
            p
        }
        None if d.weekday() == Weekday::Sat => vec![(0.0, 10.0, home), (10.5, 11.5, CAFE), (12.0, 24.0, home)],
        None if weekday(d) && matches!(d.weekday(), Weekday::Mon | Weekday::Wed | Weekday::Fri) => {
            vec![(0.0, 17.5, home), (18.0, 19.0, GYM), (19.5, 24.0, home)]
        }
        None => vec![(0.0, 24.0, home)],
    }
}

/// Everything the insights say of a life, scored against its truth and reported.
struct Answer {
    home: Vec<Value>,
    work: Vec<Value>,
    pois: Vec<Value>,
}

async fn judge(app: &TestApp, case: &str, life: &Life) -> Answer {
    let u = user_with(app, &life.fixes).await;
    let a = Answer {
        home: insights(app, "home", &u).await,
        work: insights(app, "work", &u).await,
        pois: insights(app, "poi", &u).await,
    };
    let s = score(&life.truth, &a.home, &a.work, &a.pois);
    let m = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.1} m"));
    eprintln!(
        "INSIGHTS-CASE {case}: home {} ({}), work {} ({} found), POI precision {:.2} recall {:.2} ({} POIs)",
        m(s.home_m),
        a.home.first().map_or("none".into(), |h| h["confidence"].to_string()),
        m(s.work_m),
        a.work.len(),
        s.poi_precision,
        s.poi_recall,
        a.pois.len()
    );
    if let Some(dir) = std::env::var_os("WAYMARK_LIFE_EXPORT") {
        export(app, &std::path::PathBuf::from(dir), case, &u, life, &a).await;
    }
    a
}

/// Fixes (CSV), truth and Waymark's places and stays (JSON) for scripts/compare/.
async fn export(app: &TestApp, dir: &std::path::Path, case: &str, user: &str, life: &Life, a: &Answer) {
    std::fs::create_dir_all(dir).unwrap();
    let mut csv = String::from("tracked_at,longitude,latitude,accuracy,zone\n");
    for f in &life.fixes {
        let c = &f["coordinates"];
        let (at, zone) = (f["recorded_at"].as_str().unwrap(), f["timezone_offset"].as_str().unwrap_or("UTC"));
        csv += &format!("{at}Z,{},{},{},{zone}\n", c[0], c[1], f["accuracy"]);
    }
    std::fs::write(dir.join(format!("{case}.csv")), csv).unwrap();
    let p = shared::project::Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: shared::project::KeyKind::Secret,
    };
    let stays = shared::domain::insights::stays(app.state.store.as_ref(), &p, user).await.unwrap();
    let pos = |p: Option<Pos>| p.map(|p| json!([p.0, p.1]));
    let out = json!({
        "truth": {"home": pos(life.truth.home), "work": pos(life.truth.work),
            "pois": life.truth.pois.iter().map(|p| json!([p.0, p.1])).collect::<Vec<_>>()},
        "waymark": {"home": pos(a.home.first().map(centre)), "work": pos(a.work.first().map(centre)),
            "pois": a.pois.iter().map(|p| { let c = centre(p); json!([c.0, c.1]) }).collect::<Vec<_>>(),
            "stays": stays.iter().map(|s| json!({"start": s.start.format(None), "end": s.end.format(None),
                "centre": [s.centre.lng, s.centre.lat]})).collect::<Vec<_>>()},
    });
    std::fs::write(dir.join(format!("{case}.json")), serde_json::to_string_pretty(&out).unwrap()).unwrap();
}

/// Within this distance (meters) of the truth, home and work are right.
const RIGHT_M: f64 = 40.0;

#[track_caller]
fn near(got: &[Value], truth: Pos, what: &str) {
    assert_eq!(got.len(), 1, "{what}: {got:?}");
    let d = geodesic(centre(&got[0]), truth);
    assert!(d < RIGHT_M, "{what} {d:.0} m off");
}

fn has_poi(pois: &[Value], p: Pos) -> bool {
    pois.iter().any(|i| geodesic(centre(i), p) < MATCH_M)
}

both!(a_move_makes_the_new_place_home_after_ten_nights_and_the_old_one_not, |app| async move {
    let moved_on = |d: NaiveDate, i: i64| commuter(d, if i >= 42 { NEW_HOME } else { HOME }, Some(OFFICE));
    let truth =
        |home| Truth { home: Some(home), work: Some(OFFICE), pois: vec![GYM, CAFE], tolerated: vec![HOME, NEW_HOME] };
    let settled = Life {
        fixes: live(monday(), 42 + 12, "Europe/Berlin", Sampling::Every(600), 11, moved_on),
        truth: truth(NEW_HOME),
    };
    let a = judge(&app, "move", &settled).await;
    near(&a.home, NEW_HOME, "new home");
    assert!(a.home[0]["confidence"] != "Low", "{}", a.home[0]);
    near(&a.work, OFFICE, "work");
    // Four nights are a trip, not a move.
    let early =
        Life { fixes: live(monday(), 42 + 4, "Europe/Berlin", Sampling::Every(600), 12, moved_on), truth: truth(HOME) };
    let a = judge(&app, "move-after-4-nights", &early).await;
    near(&a.home, HOME, "old home");
});

both!(a_job_change_moves_work_after_three_weeks, |app| async move {
    let plan = |d: NaiveDate, i: i64| commuter(d, HOME, Some(if i >= 35 { NEW_OFFICE } else { OFFICE }));
    let truth = Truth { home: Some(HOME), work: Some(NEW_OFFICE), pois: vec![GYM, CAFE], tolerated: vec![OFFICE] };
    let life = Life { fixes: live(monday(), 35 + 26, "Europe/Berlin", Sampling::Every(600), 21, plan), truth };
    let a = judge(&app, "job-change", &life).await;
    near(&a.home, HOME, "home");
    near(&a.work, NEW_OFFICE, "new work");
});

both!(working_from_home_has_no_work_and_the_gym_is_a_poi, |app| async move {
    let truth = Truth { home: Some(HOME), work: None, pois: vec![GYM, CAFE], tolerated: vec![] };
    let life = Life {
        fixes: live(monday(), 35, "Europe/Berlin", Sampling::Every(600), 31, |d, _| commuter(d, HOME, None)),
        truth,
    };
    let a = judge(&app, "work-from-home", &life).await;
    near(&a.home, HOME, "home");
    assert_eq!(a.home[0]["confidence"], "High");
    assert!(a.work.is_empty(), "no work: {:?}", a.work);
    assert!(has_poi(&a.pois, GYM) && has_poi(&a.pois, CAFE), "{:?}", a.pois);
});

both!(a_shift_worker_sleeps_at_home_by_day_and_works_at_night, |app| async move {
    let plan = |d: NaiveDate, _| {
        if weekday(d) {
            vec![
                (0.0, 6.0, if d.weekday() == Weekday::Mon { HOME } else { FACTORY }),
                (6.5, 21.5, HOME),
                (22.0, 24.0, FACTORY),
            ]
        } else {
            vec![(0.0, 6.0, if d.weekday() == Weekday::Sat { FACTORY } else { HOME }), (6.5, 24.0, HOME)]
        }
    };
    let truth = Truth { home: Some(HOME), work: Some(FACTORY), pois: vec![], tolerated: vec![] };
    let life = Life { fixes: live(monday(), 28, "Europe/Berlin", Sampling::Every(600), 41, plan), truth };
    let a = judge(&app, "shift-worker", &life).await;
    near(&a.home, HOME, "home");
    near(&a.work, FACTORY, "work");
});

both!(sparse_sampling_with_silent_nights_still_finds_home_and_work, |app| async move {
    let truth = Truth { home: Some(HOME), work: Some(OFFICE), pois: vec![], tolerated: vec![GYM, CAFE] };
    let life = Life {
        fixes: live(monday(), 35, "Europe/Berlin", Sampling::Sparse(20 * 60, 90 * 60), 51, |d, _| {
            commuter(d, HOME, Some(OFFICE))
        }),
        truth,
    };
    let a = judge(&app, "sparse", &life).await;
    near(&a.home, HOME, "home");
    near(&a.work, OFFICE, "work");
});

both!(with_a_fix_every_ten_minutes_and_a_move_every_poi_is_where_the_person_spent_time, |app| async move {
    // Seeds where, on two dates, the fix on the way 10 minutes before reaching the office and the
    // first fix there, a stray one, landed within 80 m of each other (a stay of those two fixes,
    // twice: a POI 632-646 m from every place of the life).
    let moved_on = |d: NaiveDate, i: i64| commuter(d, if i >= 42 { NEW_HOME } else { HOME }, Some(OFFICE));
    let places = [HOME, NEW_HOME, OFFICE, GYM, CAFE];
    for seed in [17, 27] {
        let truth =
            Truth { home: Some(NEW_HOME), work: Some(OFFICE), pois: vec![GYM, CAFE], tolerated: vec![HOME, NEW_HOME] };
        let fixes = live(monday(), 42 + 12, "Europe/Berlin", Sampling::Sparse(600, 600), seed, moved_on);
        let a = judge(&app, &format!("sparse-move-{seed}"), &Life { fixes, truth }).await;
        near(&a.home, NEW_HOME, "new home");
        near(&a.work, OFFICE, "work");
        for poi in &a.pois {
            let d = places.iter().map(|p| geodesic(centre(poi), *p)).fold(f64::MAX, f64::min);
            assert!(d < MATCH_M, "seed {seed}: a POI {d:.0} m from every place of the life: {poi}");
        }
    }
});

both!(arrival_and_departure_only_make_stays_home_and_work, |app| async move {
    let truth = Truth { home: Some(HOME), work: Some(OFFICE), pois: vec![GYM, CAFE], tolerated: vec![] };
    let life = Life {
        fixes: live(monday(), 35, "Europe/Berlin", Sampling::ArrivalDeparture, 61, |d, _| {
            commuter(d, HOME, Some(OFFICE))
        }),
        truth,
    };
    let a = judge(&app, "arrival-departure", &life).await;
    near(&a.home, HOME, "home");
    near(&a.work, OFFICE, "work");
    assert!(has_poi(&a.pois, GYM), "{:?}", a.pois);
});

both!(a_traveller_sleeps_in_hotels_that_are_neither_home_nor_poi, |app| async move {
    // Every Wednesday night in another city's hotel (a day there on Thursday), and once a night
    // in a hotel in the home city.
    let plan = |d: NaiveDate, i: i64| {
        let week = (i / 7) as usize;
        match d.weekday() {
            Weekday::Wed => vec![(0.0, 7.5, HOME), (8.0, 17.0, OFFICE), (20.0, 24.0, HOTELS[week % 4])],
            Weekday::Thu => vec![(0.0, 8.0, HOTELS[week % 4]), (9.0, 17.0, HOTELS[week % 4]), (21.0, 24.0, HOME)],
            Weekday::Sat if week == 2 => vec![(0.0, 10.0, HOME), (20.0, 24.0, CITY_HOTEL)],
            Weekday::Sun if week == 2 => vec![(0.0, 11.0, CITY_HOTEL), (12.0, 24.0, HOME)],
            _ => commuter(d, HOME, Some(OFFICE)),
        }
    };
    let truth = Truth { home: Some(HOME), work: Some(OFFICE), pois: vec![GYM, CAFE], tolerated: vec![] };
    let life = Life { fixes: live(monday(), 28, "Europe/Berlin", Sampling::Every(600), 71, plan), truth };
    let a = judge(&app, "traveller", &life).await;
    near(&a.home, HOME, "home");
    near(&a.work, OFFICE, "work");
    for h in HOTELS.iter().chain([&CITY_HOTEL]) {
        assert!(!has_poi(&a.pois, *h), "a hotel of one night is no POI: {:?}", a.pois);
    }
});

both!(a_cafe_every_morning_for_ten_minutes_is_a_poi, |app| async move {
    let plan = |d: NaiveDate, _| {
        if weekday(d) {
            vec![(0.0, 7.5, HOME), (7.75, 7.9167, CAFE), (8.25, 17.0, OFFICE), (17.5, 24.0, HOME)]
        } else {
            vec![(0.0, 24.0, HOME)]
        }
    };
    let truth = Truth { home: Some(HOME), work: Some(OFFICE), pois: vec![CAFE], tolerated: vec![] };
    let life = Life { fixes: live(monday(), 21, "Europe/Berlin", Sampling::Every(180), 81, plan), truth };
    let a = judge(&app, "cafe-regular", &life).await;
    assert!(has_poi(&a.pois, CAFE), "{:?}", a.pois);
    let cafe = a.pois.iter().find(|i| geodesic(centre(i), CAFE) < MATCH_M).unwrap();
    assert_eq!(cafe["confidence"], "High", "15 mornings");
    near(&a.work, OFFICE, "work");
});

both!(time_zones_are_offsets_or_iana_names_with_dst, |app| async move {
    // Berlin switches to summer time on 2024-03-31: the answer's offset follows the zone.
    let before = NaiveDate::from_ymd_opt(2024, 3, 4).unwrap();
    let plan = |d: NaiveDate, _| commuter(d, HOME, Some(OFFICE));
    let truth = Truth { home: Some(HOME), work: Some(OFFICE), pois: vec![GYM, CAFE], tolerated: vec![] };
    let winter =
        Life { fixes: live(before, 24, "Europe/Berlin", Sampling::Every(600), 91, plan), truth: truth.clone() };
    let a = judge(&app, "dst-winter", &winter).await;
    assert_eq!(a.home[0]["tz_offset"], "+0100");
    let across =
        Life { fixes: live(before, 35, "Europe/Berlin", Sampling::Every(600), 92, plan), truth: truth.clone() };
    let a = judge(&app, "dst-across", &across).await;
    assert_eq!(a.home[0]["tz_offset"], "+0200");
    near(&a.work, OFFICE, "work across DST");
    // Kolkata by offset: nights are local nights, so home is right and work is the office.
    const FLAT: Pos = (77.5946, 12.9716);
    const DESK: Pos = (77.6399, 12.9781);
    let india = |d: NaiveDate, _| commuter(d, FLAT, Some(DESK));
    let t = Truth { home: Some(FLAT), work: Some(DESK), pois: vec![], tolerated: vec![GYM, CAFE] };
    let kolkata = Life { fixes: live(monday(), 28, "+05:30", Sampling::Every(600), 93, india), truth: t };
    let a = judge(&app, "fixed-offset", &kolkata).await;
    assert_eq!(a.home[0]["tz_offset"], "+0530");
    near(&a.home, FLAT, "home");
    near(&a.work, DESK, "work");
    // Anything else is refused, naming the field.
    let u = app.create_user(json!({})).await;
    for bad in ["Mars/Olympus", "+5", "CET+1", "+25:00"] {
        let fix = json!({"coordinates": [13.4, 52.5], "recorded_at": "2024-04-01T08:00:00", "timezone_offset": bad});
        let (s, r) = app
            .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": u, "locations": [fix]})))
            .await;
        assert_error(s, &r, StatusCode::BAD_REQUEST, "locations[0].timezone_offset");
    }
});

both!(a_place_keeps_its_shape_as_months_accumulate, |app| async move {
    let plan = |d: NaiveDate, _| commuter(d, HOME, Some(OFFICE));
    let truth = Truth { home: Some(HOME), work: Some(OFFICE), pois: vec![GYM, CAFE], tolerated: vec![] };
    let month =
        Life { fixes: live(monday(), 28, "Europe/Berlin", Sampling::Every(1200), 101, plan), truth: truth.clone() };
    let a = judge(&app, "one-month", &month).await;
    let months = Life { fixes: live(monday(), 112, "Europe/Berlin", Sampling::Every(1200), 101, plan), truth };
    let b = judge(&app, "four-months", &months).await;
    for (x, y, truth) in [(&a.home[0], &b.home[0], HOME), (&a.work[0], &b.work[0], OFFICE)] {
        assert!(geodesic(centre(x), centre(y)) < 15.0, "centre moved {:.0} m", geodesic(centre(x), centre(y)));
        assert!(geodesic(centre(y), truth) < 20.0, "{:.0} m off", geodesic(centre(y), truth));
        assert!(
            reach_m(y) < 80.0 && reach_m(y) < reach_m(x) + 20.0,
            "grew from {:.0} to {:.0} m",
            reach_m(x),
            reach_m(y)
        );
    }
});

/// Work 10 h 20 min a week, right beside the weekend: Monday 00:00-05:10 and Friday 18:50-24:00
/// local. An hour's error in local time moves an hour into Sunday or Saturday and leaves 9 h 20
/// min, under the 10 h a working week needs: the work rule sees the offset exactly or not at all.
fn edge_shifts(d: NaiveDate, home: Pos, work: Pos) -> DayPlan {
    match d.weekday() {
        Weekday::Mon => vec![(0.0, 5.0 + 10.0 / 60.0, work), (5.75, 24.0, home)],
        Weekday::Fri => vec![(0.0, 18.25, home), (18.0 + 50.0 / 60.0, 24.0, work)],
        Weekday::Sat => vec![(0.5, 24.0, home)],
        Weekday::Sun => vec![(0.0, 23.5, home)],
        _ => vec![(0.0, 24.0, home)],
    }
}

/// A day's plan from the day, home and work.
type PlanOf = fn(NaiveDate, Pos, Pos) -> DayPlan;

/// An office 9-17 on weekdays.
fn nine_to_five(d: NaiveDate, home: Pos, office: Pos) -> DayPlan {
    if weekday(d) { vec![(0.0, 8.5, home), (9.0, 17.0, office), (17.5, 24.0, home)] } else { vec![(0.0, 24.0, home)] }
}

both!(work_is_found_in_three_weeks_across_both_changes_of_daylight_saving_time, |app| async move {
    // Three weeks (the fewest work needs) with the change in the middle, in Berlin and New York,
    // spring and autumn: an office 9-17 sampled every 5-15 minutes, and the edge shifts above.
    const NY_HOME: Pos = (-73.9857, 40.7484);
    const NY_OFFICE: Pos = (-74.0110, 40.7069);
    let d = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).expect("a date");
    let cases = [
        ("Europe/Berlin", d(2024, 3, 18), "+0200", HOME, OFFICE),
        ("Europe/Berlin", d(2024, 10, 14), "+0100", HOME, OFFICE),
        ("America/New_York", d(2024, 2, 26), "-0400", NY_HOME, NY_OFFICE),
        ("America/New_York", d(2024, 10, 21), "-0500", NY_HOME, NY_OFFICE),
    ];
    for (k, (zone, start, offset, home, office)) in cases.into_iter().enumerate() {
        let truth = Truth { home: Some(home), work: Some(office), pois: vec![], tolerated: vec![] };
        let plans: [(&str, Sampling, PlanOf); 2] =
            [("9-17", Sampling::Sparse(300, 900), nine_to_five), ("edge-shifts", Sampling::Every(300), edge_shifts)];
        for (name, sampling, plan) in plans {
            // Monday of the first week to Friday of the third.
            let fixes = live(start, 19, zone, sampling, 200 + k as u64, |d, _| plan(d, home, office));
            let case = format!("dst-{name}-{zone}-{start}");
            let a = judge(&app, &case, &Life { fixes, truth: truth.clone() }).await;
            near(&a.work, office, &case);
            assert_eq!(a.work[0]["tz_offset"], offset, "{case}");
            assert!(!has_poi(&a.pois, office), "{case}: the office is work, not a POI");
        }
    }
});
