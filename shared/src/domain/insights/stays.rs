//! Stays, detected incrementally by the events processor as fixes arrive.
//!
//! A *run* is the fixes at one place: each fix within [`STAY_RADIUS_M`] of the run's centre (the
//! mean of its fixes) and at most [`MAX_GAP_SECONDS`] after the previous one joins it, so a stay
//! continues across a silent night or a phone that only reports on arrival and departure. A fix
//! away from the run is held: if the next fix is back at the place, the held one was an outlier
//! and is dropped; otherwise the run ends. From a stay, fixes away are held for up to
//! [`MAX_EXCURSION_SECONDS`]: back at the place within it, or after a silence at least as long
//! that followed them (the phone dozed off), they were an excursion (a phone's fallback position)
//! and are dropped. It ends at the first fix away when that came within
//! [`DEPARTURE_WINDOW_SECONDS`] of the last fix at the place (the person left in between), else at
//! the last fix there. A run of at least [`MIN_STAY_SECONDS`] is a stay; two fixes at one place
//! (arrival and departure) are enough when they agree: no farther apart than their accuracies
//! allow ([`TWO_FIX_AGREEMENT`]), since a pair 80 m apart is as often a fix on the way and a stray
//! one. A stay the device jumped to and back from, between stays ([`Run::spike`]), is none.
//! Fixes less accurate than [`MAX_ACCURACY_M`] are ignored.

use chrono::Offset;
use serde::{Deserialize, Serialize};

use crate::domain::locations::Location;
use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::project::Project;
use crate::store::{Cond, Item, Query, SkRange, Store, Table, WriteOp, get_as, query_as, to_item};
use crate::time::{Timestamp, Zone};

/// A fix joins a run within this distance (meters) of the run's centre.
pub const STAY_RADIUS_M: f64 = 80.0;
/// A run is a stay from this long (seconds) between its first fix and its end.
pub const MIN_STAY_SECONDS: i64 = 300;
/// Longest silence (seconds) a stay continues across when the device is at the same place before
/// and after it: 16 h covers a night with the phone asleep from evening arrival to morning
/// departure.
pub const MAX_GAP_SECONDS: i64 = 16 * 3600;
/// A stay ends at the first fix away when it came at most this long (seconds) after the last fix
/// at the place; after a longer silence, at the last fix there.
pub const DEPARTURE_WINDOW_SECONDS: i64 = 1800;
/// A fix back at the run's place at most this long (seconds) after the first fix away makes the
/// fixes away in between outliers, however many: a phone at rest that falls back to a cell-tower
/// or Wi-Fi position reports it for a few fixes, jumping there and back, and the same position
/// every time, so such bursts repeat at one spot (a place where no one stayed). The price: a
/// visit of under an hour that returns to where it left from counts at that place.
pub const MAX_EXCURSION_SECONDS: i64 = 3600;
/// A run is a spike when the fixes before and after it are this many times nearer each other
/// than either is to it ([`Run::spike`]).
pub const SPIKE_RATIO: f64 = 2.0;
/// ...and when both are at least this far (meters) from it: sampled every minute or faster, the
/// fixes just before and after a visit lie within a step of [`STAY_RADIUS_M`], and a visit
/// entered and left by one door would look like a spike.
pub const SPIKE_MIN_M: f64 = 3.0 * STAY_RADIUS_M;
/// Fixes with `horizontal_accuracy` (else `accuracy`) above this (meters) are ignored.
pub const MAX_ACCURACY_M: f64 = 50.0;
/// Accuracy (meters) assumed for a stay whose fixes carry none.
const DEFAULT_ACCURACY_M: f64 = 20.0;
/// A stay of two fixes needs them within this many times the root sum of squares of their
/// accuracies: with accuracy a 68% radius (iOS and Android), two fixes of one spot are farther
/// apart 1 time in 1,000. Two fixes 63 m apart that claim 15 m (52 m allowed) are not one spot.
pub const TWO_FIX_AGREEMENT: f64 = 2.45;
/// Accuracy (meters) at least assumed of each fix in that test: phones claim 3-5 m outdoors, and
/// two fixes at one table indoors are often 20-30 m apart.
const AGREEMENT_FLOOR_M: f64 = 10.0;

/// A detected stay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stay {
    /// The id of the fix that began it.
    pub id: String,
    /// Mean of its fixes.
    pub centre: LngLat,
    pub start: Timestamp,
    pub end: Timestamp,
    /// `timezone_offset` of its latest record (an offset or an IANA name), if any.
    #[serde(default)]
    pub zone: Option<String>,
    /// Mean accuracy (meters) of its fixes.
    #[serde(default = "default_accuracy")]
    pub accuracy_m: f64,
    /// Number of fixes.
    #[serde(default)]
    pub fixes: u32,
    /// Its last fix at the place.
    pub last: Location,
}

fn default_accuracy() -> f64 {
    DEFAULT_ACCURACY_M
}

impl Stay {
    pub fn dwell_s(&self) -> i64 {
        (self.end.0 - self.start.0).num_seconds().max(0)
    }
    /// Its time zone: the record's zone, else UTC.
    pub fn zone(&self) -> Zone {
        self.zone.as_deref().and_then(Zone::parse).unwrap_or(Zone::Fixed(chrono::Utc.fix()))
    }
}

/// The run of fixes in progress (older items, with other fields, read as a fresh run's).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct Run {
    n: f64,
    sum_lng: f64,
    sum_lat: f64,
    sum_acc: f64,
    n_acc: f64,
    first: Option<Location>,
    last: Option<Location>,
    /// Fixes away from the run, held until a later one says whether they were outliers.
    held: Vec<Location>,
    /// Where and when the fix before its first was: the last of the run before it (of the stay
    /// before a spike). Its place and time only: the run is rewritten by every pass.
    before: Option<Seen>,
    /// Whether that fix ended a stay.
    before_stayed: bool,
    /// The run before it, a stay that was a spike if this run is one ([`Run::spike`]).
    suspect: Option<Stay>,
    /// The one fix held by items written before `held`.
    pending: Option<Location>,
    zone: Option<String>,
    version: u64,
}

/// A fix's place and time.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Seen {
    at: LngLat,
    t: Timestamp,
}

impl Seen {
    fn of(l: &Location) -> Self {
        Seen { at: l.coordinates, t: l.recorded_at }
    }
}

fn accuracy_of(l: &Location) -> Option<f64> {
    l.horizontal_accuracy.or(l.accuracy)
}

/// Whether two fixes can be of one spot (see [`TWO_FIX_AGREEMENT`]).
fn agree(a: &Location, b: &Location) -> bool {
    let acc = |l: &Location| accuracy_of(l).unwrap_or(DEFAULT_ACCURACY_M).max(AGREEMENT_FLOOR_M);
    a.coordinates.distance_m(b.coordinates) <= TWO_FIX_AGREEMENT * acc(a).hypot(acc(b))
}

impl Run {
    fn centre(&self) -> LngLat {
        LngLat { lng: self.sum_lng / self.n.max(1.0), lat: self.sum_lat / self.n.max(1.0) }
    }
    /// Begin the run with its first fix.
    fn begin(&mut self, l: &Location) {
        self.first = Some(l.clone());
        self.add(l);
    }
    fn add(&mut self, l: &Location) {
        self.n += 1.0;
        self.sum_lng += l.coordinates.lng;
        self.sum_lat += l.coordinates.lat;
        if let Some(a) = accuracy_of(l) {
            self.sum_acc += a;
            self.n_acc += 1.0;
        }
        self.last = Some(l.clone());
        if l.timezone_offset.is_some() {
            self.zone = l.timezone_offset.clone();
        }
    }
    /// Take the next fix (in `recorded_at` order), closing stays into `closed`.
    fn step(&mut self, l: &Location, closed: &mut Vec<Stay>) {
        let Some(last) = self.last.as_ref() else {
            self.begin(l);
            return;
        };
        self.held.splice(0..0, self.pending.take());
        let since = (l.recorded_at.0 - last.recorded_at.0).num_seconds();
        let in_time = since <= MAX_GAP_SECONDS;
        let here = self.centre().distance_m(l.coordinates) <= STAY_RADIUS_M;
        // An excursion from a stay (a silence before its first fix, a night, is not away) lasts.
        let soon = self.stay(None).is_some()
            && self
                .held
                .first()
                .is_none_or(|h| (l.recorded_at.0 - h.recorded_at.0).num_seconds() <= MAX_EXCURSION_SECONDS);
        // Back after a silence of an excursion's length that followed the fixes away, which
        // spanned no more than one: nothing shows the person away for longer than those fixes,
        // and a fallback burst just before the phone dozes off looks exactly so.
        let after_silence = self.stay(None).is_some()
            && matches!((self.held.first(), self.held.last()), (Some(a), Some(b))
                if (b.recorded_at.0 - a.recorded_at.0).num_seconds() <= MAX_EXCURSION_SECONDS
                    && (l.recorded_at.0 - b.recorded_at.0).num_seconds() >= MAX_EXCURSION_SECONDS);
        if in_time && here && (self.held.len() <= 1 || soon || after_silence) {
            self.held.clear(); // back at the place: the fixes away were outliers
            self.add(l);
            if self.stay(None).is_some() {
                self.suspect = None; // a stay where the spike before it jumped back
            }
            return;
        }
        if in_time && !here && (self.held.is_empty() || soon) {
            self.held.push(l.clone());
            return;
        }
        // Away for longer than an excursion, or back after too long a silence: the run ends, and
        // the fixes held are taken again from a new run.
        let held = std::mem::take(&mut self.held);
        let away = held.first().unwrap_or(l);
        let stay = self.stay(Some(away));
        // The run before was a spike if this one, the place its fixes jumped back to, is a stay.
        closed.extend(self.suspect.take().filter(|_| stay.is_none()));
        let spike = stay.is_some() && self.spike(away);
        let mut next = Run { version: self.version, ..Run::default() };
        match stay {
            // From a stay and back toward it: dropped, and the next run follows that stay.
            Some(_) if spike && self.before_stayed => {
                next.before = self.before.take();
                next.before_stayed = true;
            }
            // Back toward a place: a spike if the next run stays there.
            Some(s) if spike => {
                next.suspect = Some(s);
                next.before = self.last.as_ref().map(Seen::of);
            }
            stay => {
                next.before_stayed = stay.is_some();
                closed.extend(stay);
                next.before = self.last.as_ref().map(Seen::of);
            }
        }
        let mut fixes = held.iter().chain([l]);
        if let Some(first) = fixes.next() {
            next.begin(first);
        }
        *self = next;
        for h in fixes {
            self.step(h, closed);
        }
    }
    /// Whether the run, ending with `away` the first fix after it, looks like a spike: the
    /// device jumped to it and back, within an hour ([`MAX_EXCURSION_SECONDS`]) from the fix
    /// before it to `away`, which are [`SPIKE_RATIO`] times nearer each other than either is to
    /// the run and at least [`SPIKE_MIN_M`] from it. A phone that falls back to a far-off position
    /// (a cell tower's, a Wi-Fi network's) for a few fixes at the end of a stay, or at the start
    /// of one, does that: it is a spike when the place before it or after it is a stay. A person
    /// who goes somewhere and back arrives and leaves by fixes of the way (themselves no stay).
    /// The price: a visit of under an hour between stays, with no fix of the way before or after
    /// it, at places much nearer each other than to it, counts at none.
    fn spike(&self, away: &Location) -> bool {
        let Some(before) = &self.before else {
            return false;
        };
        let quick = (away.recorded_at.0 - before.t.0).num_seconds() <= MAX_EXCURSION_SECONDS;
        let at = self.centre();
        let near = before.at.distance_m(at).min(away.coordinates.distance_m(at));
        quick && near >= SPIKE_MIN_M && SPIKE_RATIO * before.at.distance_m(away.coordinates) < near
    }
    /// The stays not closed yet: the suspect spike before the run, and the run if long enough.
    fn open(&self) -> Vec<Stay> {
        self.suspect.iter().cloned().chain(self.stay(None)).collect()
    }
    /// The run as a stay, if it lasted long enough; `away` is the first fix after it.
    fn stay(&self, away: Option<&Location>) -> Option<Stay> {
        let (first, last) = (self.first.as_ref()?, self.last.as_ref()?);
        let end = match away {
            Some(a) if (a.recorded_at.0 - last.recorded_at.0).num_seconds() <= DEPARTURE_WINDOW_SECONDS => {
                a.recorded_at
            }
            _ => last.recorded_at,
        };
        let long_enough = (end.0 - first.recorded_at.0).num_seconds() >= MIN_STAY_SECONDS;
        // Two fixes are its only evidence: they must agree (three or more rarely err together).
        let evidenced = self.n > 2.0 || (self.n == 2.0 && agree(first, last));
        (long_enough && evidenced).then(|| Stay {
            id: first.id.clone(),
            centre: self.centre(),
            start: first.recorded_at,
            end,
            zone: self.zone.clone(),
            accuracy_m: if self.n_acc > 0.0 { self.sum_acc / self.n_acc } else { DEFAULT_ACCURACY_M },
            fixes: self.n as u32,
            last: last.clone(),
        })
    }
}

pub(crate) fn stays_pk(pid: &str, uid: &str) -> String {
    [pid, "#ST#", uid].concat()
}
pub(crate) fn run_pk(pid: &str, uid: &str) -> String {
    [pid, "#SS#", uid].concat()
}

/// What a range of new fixes changes of the stays: the run in progress (a state, written in the
/// processor's transaction) and the stays it closed, in order (facts with deterministic ids: the
/// first fix's id), with their items.
pub struct StaysPlan {
    pub run: WriteOp,
    pub closed: Vec<Stay>,
    pub stays: Vec<Item>,
}

/// Extend the user's stays with `fixes` (new, past the processor's watermark, in order).
pub async fn plan(store: &dyn Store, p: &Project, user_id: &str, fixes: &[Location]) -> Result<StaysPlan, ApiError> {
    let run: Option<Run> = get_as(store, Table::Main, &run_pk(&p.project_id, user_id), "-").await?;
    let version = run.as_ref().map_or(0, |r| r.version);
    let mut run = run.unwrap_or_default();
    let mut closed = Vec::new();
    for l in fixes.iter().filter(|l| accuracy_of(l).is_none_or(|a| a <= MAX_ACCURACY_M)) {
        run.step(l, &mut closed);
    }
    run.version = version + 1;
    let run_op = WriteOp::Put {
        table: Table::Main,
        item: to_item(&run_pk(&p.project_id, user_id), "-", &run)?,
        cond: Cond::None,
    };
    let stays_pk = stays_pk(&p.project_id, user_id);
    let stays = closed.iter().map(|s| to_item(&stays_pk, &s.id, s)).collect::<Result<Vec<_>, _>>()?;
    Ok(StaysPlan { run: run_op, closed, stays })
}

/// The run in progress as committed: its stay, if long enough, after the stay before it that
/// may yet prove a spike (counted until it does).
pub async fn open_run(store: &dyn Store, p: &Project, user_id: &str) -> Result<Vec<Stay>, ApiError> {
    let run: Option<Run> = get_as(store, Table::Main, &run_pk(&p.project_id, user_id), "-").await?;
    Ok(run.map(|r| r.open()).unwrap_or_default())
}

/// The user's stays, the run in progress included when it is long enough.
pub async fn stays(store: &dyn Store, p: &Project, user_id: &str) -> Result<Vec<Stay>, ApiError> {
    let mut out: Vec<Stay> =
        query_as(store, Table::Main, &Query::new(stays_pk(&p.project_id, user_id), SkRange::All)).await?;
    if let Some(run) = get_as::<Run>(store, Table::Main, &run_pk(&p.project_id, user_id), "-").await? {
        out.extend(run.open());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_ts;

    fn fix(i: u32, at: &str, dx_m: f64) -> Location {
        serde_json::from_value(serde_json::json!({
            "id": format!("{i:024x}"), "coordinates": [13.4 + dx_m / 67_800.0, 52.52],
            "recorded_at": parse_ts("t", at).unwrap().format("%Y-%m-%dT%H:%M:%S").to_string(), "accuracy": 10.0,
        }))
        .unwrap()
    }

    fn run(fixes: &[Location]) -> (Vec<Stay>, Option<Stay>) {
        let (mut r, mut closed) = (Run::default(), Vec::new());
        for f in fixes {
            r.step(f, &mut closed);
        }
        closed.extend(r.suspect.clone());
        (closed, r.stay(None))
    }

    #[test]
    fn arrival_and_departure_alone_make_a_stay_across_the_night() {
        let (closed, open) = run(&[
            fix(1, "2024-04-01T18:00:00", 0.0),
            fix(2, "2024-04-02T07:30:00", 10.0),
            fix(3, "2024-04-02T07:50:00", 3000.0),
            fix(4, "2024-04-02T08:10:00", 6000.0),
            // An hour after the first fix away with none back: the stay ended (MAX_EXCURSION_SECONDS).
            fix(5, "2024-04-02T08:55:00", 9000.0),
        ]);
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].start.0.to_rfc3339(), "2024-04-01T18:00:00+00:00");
        assert_eq!(closed[0].end.0.to_rfc3339(), "2024-04-02T07:50:00+00:00", "ends at the first fix away");
        assert!(open.is_none());
    }

    #[test]
    fn two_fixes_make_a_stay_only_when_their_accuracies_allow_one_spot() {
        // 10 m each: up to 2.45 * 14.1 = 35 m apart.
        for (dx, stays) in [(25.0, 1), (60.0, 0)] {
            let (closed, _) = run(&[
                fix(1, "2024-04-01T08:00:00", 0.0),
                fix(2, "2024-04-01T08:10:00", dx),
                fix(3, "2024-04-01T08:20:00", 3000.0),
                fix(4, "2024-04-01T08:30:00", 6000.0),
                fix(5, "2024-04-01T09:25:00", 9000.0),
            ]);
            assert_eq!(closed.len(), stays, "{dx} m apart");
        }
    }

    #[test]
    fn one_stray_fix_does_not_split_a_stay_and_a_longer_silence_ends_it() {
        let (closed, open) = run(&[
            fix(1, "2024-04-01T08:00:00", 0.0),
            fix(2, "2024-04-01T08:10:00", 500.0),
            fix(3, "2024-04-01T08:20:00", 5.0),
            fix(4, "2024-04-02T08:21:00", 5.0),
            fix(5, "2024-04-02T08:40:00", 5.0),
        ]);
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].end.0.to_rfc3339(), "2024-04-01T08:20:00+00:00");
        assert_eq!(closed[0].fixes, 2);
        assert_eq!(open.map(|s| s.dwell_s()), Some(19 * 60));
    }

    #[test]
    fn fixes_away_just_before_the_phone_dozes_off_at_the_place_are_an_excursion() {
        // Home, two fixes at a far-off fallback position, the night's silence, home again.
        let (closed, open) = run(&[
            fix(1, "2024-04-01T21:00:00", 0.0),
            fix(2, "2024-04-01T21:20:00", 5.0),
            fix(3, "2024-04-01T21:35:00", 1500.0),
            fix(4, "2024-04-01T21:50:00", 1502.0),
            fix(5, "2024-04-02T04:50:00", 3.0),
            fix(6, "2024-04-02T05:05:00", 4.0),
        ]);
        assert!(closed.is_empty(), "no stay at the fallback position: {closed:?}");
        assert_eq!(open.map(|h| h.fixes), Some(4), "one stay at home across the night");
        // Away for longer than an excursion before the silence: a stay there, as before.
        let (closed, open) = run(&[
            fix(1, "2024-04-01T19:00:00", 0.0),
            fix(2, "2024-04-01T19:20:00", 5.0),
            fix(3, "2024-04-01T19:35:00", 1500.0),
            fix(4, "2024-04-01T20:05:00", 1502.0),
            fix(5, "2024-04-01T20:40:00", 1499.0),
            fix(6, "2024-04-02T04:50:00", 3.0),
        ]);
        assert_eq!(closed.len(), 1, "home: {closed:?}");
        assert_eq!(open.map(|v| (v.fixes, v.dwell_s())), Some((3, 65 * 60)), "then the visit");
    }

    #[test]
    fn a_repeated_fallback_position_left_and_back_within_the_hour_is_an_excursion() {
        // At home for 20 min, two fixes at the same far-off position (a cell tower's), back home.
        let (closed, open) = run(&[
            fix(1, "2024-04-01T20:00:00", 0.0),
            fix(2, "2024-04-01T20:20:00", 5.0),
            fix(3, "2024-04-01T20:35:00", 1500.0),
            fix(4, "2024-04-01T20:50:00", 1502.0),
            fix(5, "2024-04-01T21:05:00", 3.0),
            fix(6, "2024-04-01T21:20:00", 4.0),
        ]);
        assert!(closed.is_empty(), "no stay at the fallback position: {closed:?}");
        let home = open.expect("still at home");
        assert_eq!((home.fixes, home.dwell_s()), (4, 80 * 60), "the excursion's fixes dropped");
    }

    fn fix_at(i: u32, at: &str, dx_m: f64, dy_m: f64) -> Location {
        let mut f = fix(i, at, dx_m);
        f.coordinates.lat += dy_m / 111_320.0;
        f
    }

    #[test]
    fn a_fallback_spike_at_the_end_of_a_stay_makes_no_stay_when_the_next_place_is_near() {
        // Home, two fixes 1.5 km off, then a shop 300 m from home: no way there or back.
        let (closed, open) = run(&[
            fix(1, "2024-04-01T20:00:00", 0.0),
            fix(2, "2024-04-01T20:15:00", 5.0),
            fix(3, "2024-04-01T20:30:00", 3.0),
            fix(4, "2024-04-01T20:40:00", 1500.0),
            fix(5, "2024-04-01T20:50:00", 1502.0),
            fix_at(6, "2024-04-01T21:00:00", 0.0, 300.0),
            fix_at(7, "2024-04-01T21:20:00", 3.0, 302.0),
            fix_at(8, "2024-04-01T21:40:00", 1.0, 298.0),
            fix_at(9, "2024-04-01T22:10:00", 2.0, 301.0),
        ]);
        assert_eq!(closed.iter().map(|s| s.fixes).collect::<Vec<_>>(), [3], "home only: {closed:?}");
        assert_eq!(open.map(|s| s.fixes), Some(4), "then the shop");
    }

    #[test]
    fn a_fallback_spike_at_the_start_of_a_stay_makes_no_stay() {
        // On the way to an office at 0 m, two fixes 1.5 km beyond it, then the office.
        let mut fixes = vec![
            fix(1, "2024-04-01T08:00:00", -2000.0),
            fix(2, "2024-04-01T08:03:00", -1000.0),
            fix(3, "2024-04-01T08:06:00", -400.0),
            fix(4, "2024-04-01T08:15:00", 1500.0),
            fix(5, "2024-04-01T08:25:00", 1503.0),
        ];
        for (i, at) in ["08:33", "08:45", "09:00", "09:20", "09:45", "10:30"].iter().enumerate() {
            fixes.push(fix(6 + i as u32, &format!("2024-04-01T{at}:00"), i as f64));
        }
        let (closed, open) = run(&fixes);
        assert!(closed.is_empty(), "no stay at the fallback position: {closed:?}");
        assert_eq!(open.map(|s| s.fixes), Some(6), "the office");
    }

    #[test]
    fn a_visit_reached_and_left_by_one_road_is_a_stay() {
        // A fix every 5 min: on the way, 25 min at a shop 450 m down the road, back the same way
        // (the spike's shape, but fixes of the way on both sides; seen on GeoLife's walks).
        let (closed, _) = run(&[
            fix(1, "2024-04-01T10:00:00", -900.0),
            fix(2, "2024-04-01T10:05:00", -450.0),
            fix(3, "2024-04-01T10:10:00", 0.0),
            fix(4, "2024-04-01T10:15:00", 4.0),
            fix(5, "2024-04-01T10:25:00", 2.0),
            fix(6, "2024-04-01T10:35:00", 3.0),
            fix(7, "2024-04-01T10:40:00", -450.0),
            fix(8, "2024-04-01T10:45:00", -900.0),
            fix(9, "2024-04-01T10:50:00", -1350.0),
            fix(10, "2024-04-01T11:45:00", -1800.0),
            fix(11, "2024-04-01T12:50:00", -2250.0),
        ]);
        assert_eq!(closed.iter().map(|s| (s.fixes, s.dwell_s() / 60)).collect::<Vec<_>>(), [(4, 30)]);
    }

    #[test]
    fn a_visit_next_door_between_stays_is_a_stay() {
        // Home, 20 min at a cafe 200 m away, then a shop 90 m the other side of home: no fix of
        // the way, but too near to be a jump (SPIKE_MIN_M).
        let (closed, open) = run(&[
            fix(1, "2024-04-01T10:00:00", 0.0),
            fix(2, "2024-04-01T10:10:00", 3.0),
            fix(3, "2024-04-01T10:20:00", 200.0),
            fix(4, "2024-04-01T10:40:00", 202.0),
            fix(5, "2024-04-01T10:50:00", -90.0),
            fix(6, "2024-04-01T11:10:00", -92.0),
            fix(7, "2024-04-01T12:00:00", -91.0),
        ]);
        assert_eq!(closed.iter().map(|s| s.fixes).collect::<Vec<_>>(), [2, 2], "home and the cafe: {closed:?}");
        assert!(open.is_some(), "then the shop");
    }
}
