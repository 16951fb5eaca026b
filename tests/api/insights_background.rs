//! Insights on lives sampled as a background SDK samples them (issue 59): a fix every 5-15 min at
//! rest and 1-4 min on the move, the phone dozing 3-8 h at night, 8% outliers of which 40% claim a
//! good accuracy, half of them a *fallback position* that repeats (the same cell tower or Wi-Fi
//! position of each place, 300 m to 4 km away, 1-3 fixes in a row), and a move half way. The truth
//! is every place where the person spent time: no home, work or POI may lie farther than
//! [`PHANTOM_M`] from one. `cargo test -p waymark-tests --test api insights_background --
//! --nocapture` prints `BACKGROUND` lines per seed.

use chrono::{DateTime, Datelike, Duration, NaiveDate, Timelike, Utc, Weekday};
use chrono_tz::Tz;
use serde_json::{Value, json};
use shared::domain::insights::aggregate::Aggregate;
use shared::domain::insights::{self, Place, stays};
use shared::domain::locations::{self, Location};

use crate::both;
use crate::geofences::project;
use crate::helpers::{Backend, TestApp};
use crate::insights::{insights as get_insights, user_with};
use crate::life::{Pos, centre};
use crate::trace::{Rng, geodesic, offset};

const ZONE: Tz = chrono_tz::Europe::Berlin;
const HOME: Pos = (13.4050, 52.5200);
const NEW_HOME: Pos = (13.4530, 52.5080);
const OFFICE: Pos = (13.3777, 52.5163);
const GYM: Pos = (13.4200, 52.5300);
const SHOP: Pos = (13.4110, 52.5160);
const NEW_SHOP: Pos = (13.4480, 52.5050);
const CAFE: Pos = (13.3950, 52.5250);
const FRIEND: Pos = (13.3500, 52.4900);

/// An answer (home, work or POI) farther than this (meters) from every place of the life is a
/// phantom: places' polygons are 10-50 m beyond their stays, and a place's stays lie within 80 m.
pub const PHANTOM_M: f64 = 200.0;
/// Phantom answers over the 40 lives of the test, at most (211 before excursions were outliers,
/// 34 before fixes away followed by the night's silence were, 26 before spikes were).
const MAX_PHANTOMS: usize = 10;
/// Home and work within this distance (meters) of the truth are found.
const FOUND_M: f64 = 40.0;

/// A generated life: its fixes and its truth.
pub struct Background {
    pub fixes: Vec<Value>,
    /// What each fix is: 'r' at rest, 'm' moving, 'f' a fallback position, 'w' a wild fix.
    pub kinds: Vec<char>,
    /// Every place where the person spent time.
    pub places: Vec<Pos>,
    pub home: Pos,
    pub work: Pos,
}

struct Visit {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    at: Pos,
}

fn utc(d: NaiveDate, h: f64) -> DateTime<Utc> {
    let local = d.and_hms_opt(0, 0, 0).unwrap() + Duration::seconds((h * 3600.0) as i64);
    (0..3)
        .find_map(|k| local.checked_add_signed(Duration::hours(k))?.and_local_timezone(ZONE).earliest())
        .unwrap()
        .with_timezone(&Utc)
}

/// A day: home, a weekday at the office (the gym three evenings, the shop on Tuesday and
/// Thursday), a café on Saturday morning, a friend on some Sunday afternoons; the times vary.
fn day_plan(rng: &mut Rng, d: NaiveDate, home: Pos, shop: Pos) -> Vec<(f64, f64, Pos)> {
    let j = |rng: &mut Rng, h: f64| h + (rng.uniform() - 0.5) * 0.5;
    match d.weekday() {
        Weekday::Sat => vec![(0.0, j(rng, 10.0), home), (j(rng, 10.5), 11.5, CAFE), (12.0, 24.0, home)],
        Weekday::Sun if rng.uniform() < 0.5 => {
            vec![(0.0, 14.5, home), (15.0, j(rng, 18.0), FRIEND), (19.0, 24.0, home)]
        }
        Weekday::Sun => vec![(0.0, 24.0, home)],
        wd => {
            let mut p = vec![(0.0, j(rng, 7.5), home), (j(rng, 8.25), j(rng, 17.0), OFFICE)];
            match wd {
                Weekday::Mon | Weekday::Wed | Weekday::Fri => p.extend([(17.5, 18.5, GYM), (19.0, 24.0, home)]),
                _ => p.extend([(17.5, j(rng, 18.0), shop), (18.5, 24.0, home)]),
            }
            p
        }
    }
}

/// Where a phone at `at` falls back to: two fixed positions (a cell tower, a Wi-Fi position) of
/// each place, 300 m to 4 km away, drawn once per life.
fn fallbacks(seed: u64, places: &[Pos]) -> Vec<(Pos, [Pos; 2])> {
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut far = |p: Pos| {
        let (r, a) = (300.0 + rng.uniform() * 3700.0, rng.uniform() * std::f64::consts::TAU);
        offset(p.0, p.1, r * a.cos(), r * a.sin())
    };
    places.iter().map(|&p| (p, [far(p), far(p)])).collect()
}

/// `days` days from Monday `start`, moving house after `move_after` days (if any).
pub fn background(start: NaiveDate, days: i64, move_after: Option<i64>, seed: u64) -> Background {
    let mut rng = Rng::new(seed);
    let mut visits: Vec<Visit> = Vec::new();
    for i in 0..days {
        let d = start + Duration::days(i);
        let moved = move_after.is_some_and(|m| i >= m);
        let (home, shop) = if moved { (NEW_HOME, NEW_SHOP) } else { (HOME, SHOP) };
        for (a, b, at) in day_plan(&mut rng, d, home, shop) {
            let (from, to) = (utc(d, a), utc(d, b));
            match visits.last_mut() {
                Some(v) if v.at == at && (from - v.to).num_seconds().abs() <= 60 => v.to = to,
                _ => visits.push(Visit { from, to, at }),
            }
        }
    }
    // Travel at walking speed, or 6 m/s (a bike, a tram) beyond 1.5 km: the person leaves late
    // rather than dawdling (a walk at 0.3 m/s sampled every 1-4 min makes stays on the way).
    for i in 1..visits.len() {
        let d = geodesic(visits[i - 1].at, visits[i].at);
        let travel = Duration::seconds((d / if d < 1500.0 { 1.4 } else { 6.0 }) as i64);
        let leave = visits[i].from - travel;
        if leave > visits[i - 1].to {
            visits[i - 1].to = leave;
        }
    }
    let mut places: Vec<Pos> = Vec::new();
    for v in &visits {
        if !places.contains(&v.at) {
            places.push(v.at);
        }
    }
    let fallback = fallbacks(seed, &places);
    let (mut fixes, mut kinds) = (Vec::new(), Vec::new());
    let (mut t, end) = (visits[0].from, visits.last().unwrap().to);
    let (mut k, mut episode) = (0, None::<(Pos, u32)>);
    let mut doze_night = None;
    while t <= end {
        while k + 1 < visits.len() && visits[k].to < t {
            k += 1;
        }
        let v = &visits[k];
        let at_rest = v.from <= t && t <= v.to;
        let truth = if at_rest || k == 0 {
            v.at
        } else {
            let p = &visits[k - 1];
            let f = (t - p.to).num_seconds() as f64 / (v.from - p.to).num_seconds().max(1) as f64;
            (p.at.0 + (v.at.0 - p.at.0) * f, p.at.1 + (v.at.1 - p.at.1) * f)
        };
        // An outlier: a fallback episode at rest (1-3 fixes at one position) or a lone wild fix.
        let mut fallen = false;
        // Outdoors on the way, the GPS is back: a fallback episode ends.
        let wild = match episode.take().filter(|_| at_rest) {
            Some((p, left)) => {
                fallen = true;
                episode = (left > 1).then_some((p, left - 1));
                Some(p)
            }
            None if rng.uniform() < 0.08 => {
                if at_rest && rng.uniform() < 0.5 {
                    let f = fallback.iter().find(|f| f.0 == v.at).unwrap().1[(rng.uniform() * 2.0) as usize];
                    let left = 1 + (rng.uniform() * 3.0) as u32;
                    episode = (left > 1).then_some((f, left - 1));
                    fallen = true;
                    Some(f)
                } else {
                    let (r, a) = (300.0 + rng.uniform() * 2700.0, rng.uniform() * std::f64::consts::TAU);
                    Some(offset(truth.0, truth.1, r * a.cos(), r * a.sin()))
                }
            }
            None => None,
        };
        let (pos, acc) = match wild {
            // Fallback positions move a few meters between reports (other towers, other APs).
            Some(p) => {
                let acc = if rng.uniform() < 0.4 { 8.0 + rng.uniform() * 20.0 } else { 100.0 + rng.uniform() * 1900.0 };
                (offset(p.0, p.1, rng.normal() * 3.0, rng.normal() * 3.0), acc)
            }
            None if at_rest => {
                (offset(truth.0, truth.1, rng.normal() * 8.0, rng.normal() * 8.0), 8.0 + rng.uniform() * 12.0)
            }
            None => (offset(truth.0, truth.1, rng.normal() * 5.0, rng.normal() * 5.0), 5.0 + rng.uniform() * 10.0),
        };
        kinds.push(match wild {
            Some(_) if fallen => 'f',
            Some(_) => 'w',
            None if at_rest => 'r',
            None => 'm',
        });
        fixes.push(json!({"coordinates": [pos.0, pos.1], "recorded_at": t.format("%Y-%m-%dT%H:%M:%S").to_string(),
            "accuracy": acc, "timezone_offset": "Europe/Berlin"}));
        let step = if at_rest { 300.0 + rng.uniform() * 600.0 } else { 60.0 + rng.uniform() * 180.0 };
        let mut next = t + Duration::seconds(step as i64);
        // Doze: once a night, at rest after 22:00 or before 02:00 local, silent for 3-8 h.
        let local = next.with_timezone(&ZONE);
        let night = if local.hour() < 12 { local.date_naive() - Duration::days(1) } else { local.date_naive() };
        if at_rest && (local.hour() >= 22 || local.hour() < 2) && doze_night != Some(night) {
            doze_night = Some(night);
            next += Duration::seconds((3.0 * 3600.0 + rng.uniform() * 5.0 * 3600.0) as i64);
            episode = None;
        }
        t = next;
    }
    let moved = move_after.is_some_and(|m| m < days);
    Background { fixes, kinds, places, home: if moved { NEW_HOME } else { HOME }, work: OFFICE }
}

/// What one life's insights say, measured against its truth.
#[derive(Debug, Default)]
pub struct Judged {
    /// Distance (m) from each answer (home, work, POIs) to the nearest place of the life.
    pub phantoms: Vec<f64>,
    pub home_m: Option<f64>,
    pub work_m: Option<f64>,
    pub pois: usize,
    pub stays: usize,
}

fn nearest_m(places: &[Pos], p: Pos) -> f64 {
    places.iter().map(|q| geodesic(*q, p)).fold(f64::MAX, f64::min)
}

/// Home, work and POIs (centres of their polygons) against the life.
pub fn judge(life: &Background, home: &[Value], work: &[Value], pois: &[Value], stays: usize) -> Judged {
    let all: Vec<Pos> = home.iter().chain(work).chain(pois).map(centre).collect();
    Judged {
        phantoms: all.iter().map(|p| nearest_m(&life.places, *p)).filter(|d| *d > PHANTOM_M).collect(),
        home_m: home.first().map(|h| geodesic(centre(h), life.home)),
        work_m: work.first().map(|w| geodesic(centre(w), life.work)),
        pois: pois.len(),
        stays,
    }
}

/// The insights of a life straight from the stay detector and the aggregate (no HTTP: fast enough
/// for many seeds; the API runs the same code, checked on a few seeds below).
pub async fn insights_of(app: &TestApp, life: &Background) -> Judged {
    let p = project(app);
    let user = app.create_user(json!({})).await;
    let fixes: Vec<Location> = life.fixes.iter().map(|f| serde_json::from_value(f.clone()).unwrap()).collect();
    let prepared = locations::prepare(&p, &user, fixes);
    let plan = stays::plan(app.state.store.as_ref(), &p, &user, &prepared).await.expect("stays");
    let mut agg = Aggregate::default();
    for s in &plan.closed {
        agg.fold(s);
    }
    let places: Vec<Place> = agg.places();
    let answer = |k| insights::answer(&places, k);
    let (h, w, poi) = (answer(insights::Kind::Home), answer(insights::Kind::Work), answer(insights::Kind::Poi));
    judge(life, &h, &w, &poi, plan.closed.len())
}

fn monday() -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 4, 1).unwrap()
}

/// 56 days, a move after 28 (if `moved`), seed `seed`.
fn life_of(seed: u64, moved: bool) -> Background {
    background(monday(), 56, moved.then_some(28), seed)
}

#[tokio::test]
async fn background_sampling_with_fallback_positions_and_a_move_makes_no_phantom_place() {
    let app = TestApp::new(Backend::Embedded).await;
    let (mut phantoms, mut lives, mut missed) = (Vec::new(), 0, Vec::new());
    for moved in [false, true] {
        for seed in 1..=20 {
            let life = life_of(seed, moved);
            // The generator keeps its truth: both kinds of outlier are in every life.
            let share = |k: char| life.kinds.iter().filter(|c| **c == k).count() as f64 / life.kinds.len() as f64;
            assert!(share('f') > 0.005 && share('w') > 0.005, "seed {seed}: fallback and wild fixes");
            let j = insights_of(&app, &life).await;
            let m = |x: Option<f64>| x.map_or("none".to_owned(), |x| format!("{x:.0} m"));
            println!(
                "BACKGROUND seed {seed} moved {moved}: {} fixes, {} stays, home {}, work {}, {} POIs, phantoms {:?}",
                life.fixes.len(),
                j.stays,
                m(j.home_m),
                m(j.work_m),
                j.pois,
                j.phantoms.iter().map(|d| d.round()).collect::<Vec<_>>()
            );
            lives += 1;
            phantoms.extend(j.phantoms.iter().map(|d| (seed, moved, *d)));
            if j.home_m.is_none_or(|d| d > FOUND_M) || j.work_m.is_none_or(|d| d > FOUND_M) {
                missed.push((seed, moved, j.home_m, j.work_m));
            }
        }
    }
    println!(
        "BACKGROUND all: {lives} lives, {} phantom answers {phantoms:?}, home/work missed {missed:?}",
        phantoms.len()
    );
    // Left: a fallback burst between stays at two places far apart (see docs/insights.md).
    assert!(phantoms.len() <= MAX_PHANTOMS, "answers where no one spent time: {phantoms:?}");
    assert!(missed.is_empty(), "home or work not found: {missed:?}");
}

both!(background_lives_through_the_api_have_no_phantom_place, |app| async move {
    for (seed, moved) in [(3, true), (8, false)] {
        let life = life_of(seed, moved);
        let u = user_with(&app, &life.fixes).await;
        let (h, w, poi) = (
            get_insights(&app, "home", &u).await,
            get_insights(&app, "work", &u).await,
            get_insights(&app, "poi", &u).await,
        );
        let j = judge(&life, &h, &w, &poi, 0);
        let direct = insights_of(&app, &life).await;
        assert_eq!(j.phantoms.len(), direct.phantoms.len(), "seed {seed}: the API as the direct path");
        assert!(j.home_m.is_some_and(|d| d < FOUND_M), "seed {seed}: home {:?}", j.home_m);
        assert!(j.work_m.is_some_and(|d| d < FOUND_M), "seed {seed}: work {:?}", j.work_m);
    }
});
