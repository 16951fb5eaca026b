//! The insight rules at their boundaries, on both backends, from exact fixes (no scatter, so each
//! stay is where the plan says): confidence as docs/insights.md's table says (3, 4, 7 and 8
//! visit days for a POI, 13 and 14 days for work), a place seen from two ends that a later stay
//! joins counted once per date, a POI only where stays are, work across a change of daylight
//! saving time, `last_visited` inside the place's `geometry`.

use chrono::{Duration, NaiveDate, NaiveDateTime};
use serde_json::{Value, json};

use crate::both;
use crate::insights::{insights, user_with};
use crate::insights_life::{HOME, NEW_HOME, OFFICE, commuter, monday};
use crate::life::{Pos, Sampling, centre, live};
use crate::trace::{geodesic, offset};

/// A point `dx` meters east and `dy` north of `p`.
fn at(p: Pos, dx: f64, dy: f64) -> Pos {
    offset(p.0, p.1, dx, dy)
}

/// A day's plan: (from hour, to hour, place) in the zone's local time; between two entries the
/// person travels (two fixes far apart, so no stay is made on the way).
type Plan = Vec<(f64, f64, Pos)>;

/// Exact fixes of `plan(day index)` for `days` days from `start`: every 5 minutes at a place,
/// in `zone` (a fixed offset in hours, or Europe/Berlin as `None`).
fn fixes(start: NaiveDate, days: i64, zone: Option<i32>, plan: impl Fn(i64) -> Plan) -> Vec<Value> {
    let tz: chrono_tz::Tz = "Europe/Berlin".parse().expect("a zone");
    let utc = |local: NaiveDateTime| match zone {
        Some(h) => local - Duration::hours(h.into()),
        // A local time that summer time skips is taken an hour later.
        None => (local.and_local_timezone(tz).earliest())
            .or_else(|| (local + Duration::hours(1)).and_local_timezone(tz).earliest())
            .expect("a local time")
            .naive_utc(),
    };
    let name =
        zone.map_or("Europe/Berlin".to_owned(), |h| format!("{}{:02}:00", if h < 0 { '-' } else { '+' }, h.abs()));
    let mut out = Vec::new();
    let mut push = |t: NaiveDateTime, p: Pos| {
        out.push(json!({"coordinates": [p.0, p.1], "recorded_at": t.format("%Y-%m-%dT%H:%M:%S").to_string(),
            "accuracy": 10.0, "timezone_offset": name}));
    };
    let mut prev_end: Option<NaiveDateTime> = None;
    for i in 0..days {
        let midnight = (start + Duration::days(i)).and_hms_opt(0, 0, 0).expect("midnight");
        for (a, b, p) in plan(i) {
            let local = |h: f64| midnight + Duration::seconds((h * 3600.0).round() as i64);
            let (from, to) = (local(a), local(b));
            if let Some(end) = prev_end.filter(|e| (from - *e).num_minutes() >= 10) {
                // On the way: two fixes kilometres apart and from everything.
                let third = (from - end) / 3;
                push(utc(end + third), at(HOME, 4000.0, 3000.0 + i as f64 * 10.0));
                push(utc(end + third * 2), at(HOME, -4000.0, -3000.0));
            }
            let mut t = if prev_end.is_some_and(|e| e >= from) { from + Duration::minutes(5) } else { from };
            while t <= to {
                push(utc(t), p);
                t += Duration::minutes(5);
            }
            prev_end = Some(to);
        }
    }
    out
}

/// The insight whose centre is nearest `p`, if within 60 m.
fn found(list: &[Value], p: Pos) -> Option<&Value> {
    list.iter().find(|i| geodesic(centre(i), p) < 60.0)
}

both!(poi_confidence_follows_the_table_at_3_4_7_and_8_visit_days, |app| async move {
    // Four cafés, each seen from two ends 90 m apart (two places until a stay between them joins
    // them, on the last visit day): visited on 3, 4, 7 and 8 dates, every third day.
    let cafes: Vec<(usize, Pos)> =
        [3, 4, 7, 8].iter().enumerate().map(|(k, n)| (*n, at(HOME, -1500.0 + 1000.0 * k as f64, 1200.0))).collect();
    let plan = |i: i64| {
        let mut p: Plan = vec![(0.0, 9.0, HOME)];
        for (k, (n, cafe)) in cafes.iter().enumerate() {
            let h = 9.5 + 2.0 * k as f64;
            let visit = i % 3 == 0 && i / 3 < *n as i64;
            if visit && i / 3 == *n as i64 - 1 {
                p.push((h, h + 0.5, at(*cafe, 45.0, 0.0))); // between the two ends
            } else if visit {
                p.extend([(h, h + 0.3, *cafe), (h + 0.6, h + 0.9, at(*cafe, 90.0, 0.0))]);
            }
        }
        p.push((18.0, 24.0, HOME));
        p
    };
    let u = user_with(&app, &fixes(monday(), 28, Some(0), plan)).await;
    let pois = insights(&app, "poi", &u).await;
    assert_eq!(pois.len(), 4, "one POI a café: {pois:?}");
    for ((n, cafe), want) in cafes.iter().zip(["Low", "Medium", "Medium", "High"]) {
        let poi = found(&pois, at(*cafe, 45.0, 0.0)).unwrap_or_else(|| panic!("café of {n} days: {pois:?}"));
        assert_eq!(poi["confidence"], want, "{n} visit days");
    }
    let home = insights(&app, "home", &u).await;
    assert_eq!(home[0]["confidence"], "High", "28 days");
});

both!(work_confidence_follows_the_table_at_13_and_14_days, |app| async move {
    // An office of two buildings 90 m apart (a morning in one, an afternoon in the other), joined
    // by a stay between them on the last office day.
    let office = at(HOME, 2000.0, -500.0);
    for (n, want) in [(13, "Medium"), (14, "High")] {
        let weekdays: Vec<i64> = (0..28).filter(|i| i % 7 < 5).take(n).collect();
        let plan = |i: i64| {
            if !weekdays.contains(&i) {
                return vec![(0.0, 24.0, HOME)];
            }
            let mut p = vec![(0.0, 7.5, HOME), (8.0, 12.0, office), (12.5, 16.5, at(office, 90.0, 0.0))];
            if Some(&i) == weekdays.last() {
                // Back after more than an hour away (a shorter trip out and back is an excursion of
                // the afternoon's stay, `stays::MAX_EXCURSION_SECONDS`).
                p.push((18.2, 18.7, at(office, 45.0, 0.0)));
            }
            p.push((19.0, 24.0, HOME));
            p
        };
        let u = user_with(&app, &fixes(monday(), 28, Some(0), plan)).await;
        let work = insights(&app, "work", &u).await;
        assert_eq!(work.len(), 1, "{n} days: {work:?}");
        assert!(found(&work, at(office, 45.0, 0.0)).is_some(), "{work:?}");
        assert_eq!(work[0]["confidence"], want, "{n} office days");
    }
});

/// Whether `p` is inside the closed ring of an insight's geometry (ray casting).
fn inside(i: &Value, p: Pos) -> bool {
    let ring: Vec<Pos> = i["geometry"]["coordinates"][0]
        .as_array()
        .expect("a ring")
        .iter()
        .map(|c| (c[0].as_f64().expect("lng"), c[1].as_f64().expect("lat")))
        .collect();
    let mut inside = false;
    for w in ring.windows(2) {
        let ((x1, y1), (x2, y2)) = (w[0], w[1]);
        if (y1 > p.1) != (y2 > p.1) && p.0 < x1 + (p.1 - y1) / (y2 - y1) * (x2 - x1) {
            inside = !inside;
        }
    }
    inside
}

both!(last_visited_is_inside_the_place_geometry, |app| async move {
    // Lives with 8 m scatter: the last fix of a stay is often farther from the place's centre
    // than the stays' centres are.
    let moved = |d: NaiveDate, i: i64| commuter(d, if i >= 42 { NEW_HOME } else { HOME }, Some(OFFICE));
    let plain = |d: NaiveDate, _| commuter(d, HOME, Some(OFFICE));
    let lives = [
        live(monday(), 54, "Europe/Berlin", Sampling::Every(600), 11, moved),
        live(monday(), 35, "Europe/Berlin", Sampling::Sparse(20 * 60, 90 * 60), 51, plain),
        live(monday(), 28, "Europe/Berlin", Sampling::Every(600), 1, plain),
    ];
    let (mut outside, mut all) = (Vec::new(), 0);
    for fixes in &lives {
        let u = user_with(&app, fixes).await;
        for kind in ["home", "work", "poi"] {
            for i in insights(&app, kind, &u).await {
                let c = &i["last_visited"]["coordinates"]["coordinates"];
                let p = (c[0].as_f64().expect("lng"), c[1].as_f64().expect("lat"));
                all += 1;
                if !inside(&i, p) {
                    outside.push(format!("{kind} {}", i["last_visited"]));
                }
            }
        }
    }
    assert!(all >= 12, "{all} insights");
    assert!(outside.is_empty(), "{} of {all} outside their geometry: {outside:?}", outside.len());
});

both!(work_is_found_in_three_weeks_across_a_change_of_daylight_saving_time, |app| async move {
    // Berlin: summer time from Sunday 31 March 2024, winter time from Sunday 27 October; three
    // working weeks (the fewest work needs) with the change in the middle.
    let office = at(HOME, 2000.0, -500.0);
    let plan = |i: i64| match i % 7 {
        5 | 6 => vec![(0.0, 24.0, HOME)],
        _ => vec![(0.0, 7.5, HOME), (8.0, 17.0, office), (17.5, 24.0, HOME)],
    };
    for (start, offset) in [((2024, 3, 18), "+0200"), ((2024, 10, 14), "+0100")] {
        let start = NaiveDate::from_ymd_opt(start.0, start.1, start.2).expect("a Monday");
        let u = user_with(&app, &fixes(start, 19, None, plan)).await;
        let work = insights(&app, "work", &u).await;
        assert_eq!(work.len(), 1, "from {start}: {work:?}");
        assert!(found(&work, office).is_some(), "{work:?}");
        assert_eq!(work[0]["tz_offset"], offset);
        assert!(found(&insights(&app, "poi", &u).await, office).is_none(), "the office is work, not a POI");
    }
});
