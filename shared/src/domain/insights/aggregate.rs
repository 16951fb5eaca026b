//! The per-user places aggregate: what the insight rules need of every stay, kept as stays close,
//! so that an insights request reads one small item instead of every stay. Per user
//! (`<project>#IA#<user>`): up to [`MAX_PLACES`] places of up to [`MAX_ANCHORS`] anchors each,
//! their totals, and only the recent figures the rules can still look at. Written in the
//! processor's transaction, checked on its `version`, so a concurrent writer makes the pass redo
//! rather than lose an update; a stay at or before `upto` is counted already.
//! See docs/insights.md, "Places (what a request reads)".

use std::collections::BTreeMap;

use chrono::{Datelike, Duration, NaiveDate};
use geo::Point;
use serde::{Deserialize, Serialize};

use super::places::{self, DAY_MIN_SECONDS, HALF_LIFE_DAYS, PLACE_RADIUS_M, Place, Plane, monday_of};
use super::rules::{MOVE_NIGHTS, NIGHT_MIN_SECONDS, WORK_WINDOW_WEEKS};
use super::stays::Stay;
use crate::domain::locations::Location;
use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::project::Project;
use crate::store::{Cond, Store, Table, WriteOp, get_as, to_item};
use crate::time::Timestamp;

/// Most places kept per user (the least weighted goes beyond).
pub const MAX_PLACES: usize = 32;
/// Most anchors per place (beyond, the two nearest are merged).
pub const MAX_ANCHORS: usize = 8;
/// A stay within this distance (meters) of an anchor's centre is counted on it.
pub const ANCHOR_M: f64 = 10.0;
/// Local dates this many days or more before the latest stay's start can gain no more time (a
/// stay starts after the previous one; the margin covers a change of time zone).
const SETTLE_DAYS: i64 = 2;

pub fn aggregate_pk(pid: &str, uid: &str) -> String {
    [pid, "#IA#", uid].concat()
}

/// An anchor: `[lng, lat (the mean of its stays' centres), weighted dwell (s), stays, sum of
/// their accuracies (m)]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Anchor(f64, f64, f64, u32, f64);

impl Anchor {
    fn at(&self) -> LngLat {
        LngLat { lng: self.0, lat: self.1 }
    }
    /// Take another's stays in: its centre moves to the mean of all their centres (less noisy
    /// than any one short stay's, and never more than [`ANCHOR_M`] from a merged one).
    fn absorb(&mut self, o: Anchor) {
        let (n, m) = (f64::from(self.3), f64::from(o.3));
        self.0 = (self.0 * n + o.0 * m) / (n + m).max(1.0);
        self.1 = (self.1 * n + o.1 * m) / (n + m).max(1.0);
        self.2 += o.2;
        self.3 += o.3;
        self.4 += o.4;
    }
}

/// A set of local dates, as bits from its first date (hex, 8 dates a byte: 92 characters a year),
/// so that places that merge count a date they share once.
#[derive(Debug, Clone, Default, PartialEq)]
struct DaySet {
    /// Days from the Common Era of bit 0.
    first: i32,
    bits: Vec<u8>,
}

impl DaySet {
    fn insert(&mut self, d: NaiveDate) {
        let n = d.num_days_from_ce();
        if self.bits.is_empty() {
            self.first = n;
        }
        if n < self.first {
            let bytes = (self.first - n + 7) / 8;
            self.bits.splice(0..0, std::iter::repeat_n(0, bytes as usize));
            self.first -= bytes * 8;
        }
        let k = (n - self.first) as usize;
        if self.bits.len() <= k / 8 {
            self.bits.resize(k / 8 + 1, 0);
        }
        self.bits[k / 8] |= 1 << (k % 8);
    }
    fn dates(&self) -> impl Iterator<Item = NaiveDate> + '_ {
        (0..self.bits.len() * 8)
            .filter(|k| self.bits[k / 8] & (1 << (k % 8)) != 0)
            .filter_map(|k| NaiveDate::from_num_days_from_ce_opt(self.first + k as i32))
    }
    fn union(&mut self, o: &DaySet) {
        for d in o.dates() {
            self.insert(d);
        }
    }
    fn len(&self) -> usize {
        self.bits.iter().map(|b| b.count_ones() as usize).sum()
    }
}

impl Serialize for DaySet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.first, hex::encode(&self.bits)).serialize(s)
    }
}

impl<'de> Deserialize<'de> for DaySet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (first, bits) = <(i32, String)>::deserialize(d)?;
        Ok(DaySet { first, bits: hex::decode(bits).map_err(serde::de::Error::custom)? })
    }
}

/// One place of the aggregate (short field names: the item is read on every request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Agg {
    #[serde(rename = "i")]
    first_id: String,
    #[serde(rename = "s")]
    first_start: Timestamp,
    #[serde(rename = "n")]
    stays: u32,
    #[serde(rename = "a")]
    anchors: Vec<Anchor>,
    #[serde(rename = "d")]
    dwell_s: i64,
    #[serde(rename = "w")]
    weight: f64,
    #[serde(rename = "k")]
    weekday_weight: f64,
    /// Recent nights (see [`Aggregate::settle`]).
    #[serde(rename = "g", default)]
    nights: BTreeMap<NaiveDate, i64>,
    #[serde(rename = "t")]
    night_s: i64,
    /// Settled dates with [`DAY_MIN_SECONDS`] there (a set, not a count: two places that merge
    /// may share dates) ...
    #[serde(rename = "ds", default)]
    days: DaySet,
    /// ... and seconds of the dates not settled yet.
    #[serde(rename = "p", default)]
    per_day: BTreeMap<NaiveDate, i64>,
    /// Every date a stay there began on.
    #[serde(rename = "vs", default)]
    visits: DaySet,
    /// Weeks of the work window: weekday seconds and weekdays with any (bits, Monday first).
    #[serde(rename = "x", default)]
    weeks: BTreeMap<NaiveDate, (i64, u8)>,
    /// Its stay that ended last (its last fix cut to what an answer shows).
    #[serde(rename = "l")]
    last: Stay,
}

/// A user's places aggregate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    #[serde(default)]
    pub version: u64,
    /// Id of the newest stay counted.
    #[serde(default)]
    pub upto: Option<String>,
    /// End of the latest stay counted: the weights are decayed to it.
    #[serde(default)]
    at: Option<Timestamp>,
    /// Local dates before this are settled.
    #[serde(default)]
    settled: Option<NaiveDate>,
    #[serde(default)]
    places: Vec<Agg>,
}

fn decay(from: Timestamp, to: Timestamp) -> f64 {
    let days = (to.0 - from.0).num_seconds() as f64 / 86_400.0;
    0.5f64.powf(days / HALF_LIFE_DAYS)
}

/// The fields of a stay's last fix that an answer shows (`last_visited`), the rest dropped.
fn brief(l: &Location) -> Location {
    let v = serde_json::json!({
        "id": l.id, "coordinates": l.coordinates, "recorded_at": l.recorded_at, "created_at": l.created_at,
        "accuracy": l.accuracy, "horizontal_accuracy": l.horizontal_accuracy, "altitude": l.altitude,
    });
    serde_json::from_value(v).unwrap_or_else(|_| l.clone())
}

impl Agg {
    fn new(s: &Stay) -> Self {
        Agg {
            first_id: s.id.clone(),
            first_start: s.start,
            stays: 0,
            anchors: Vec::new(),
            dwell_s: 0,
            weight: 0.0,
            weekday_weight: 0.0,
            nights: BTreeMap::new(),
            night_s: 0,
            days: DaySet::default(),
            per_day: BTreeMap::new(),
            visits: DaySet::default(),
            weeks: BTreeMap::new(),
            last: Stay { last: brief(&s.last), ..s.clone() },
        }
    }

    fn near(&self, c: LngLat) -> bool {
        self.anchors.iter().any(|a| a.at().distance_m(c) <= PLACE_RADIUS_M)
    }

    fn scale(&mut self, f: f64) {
        self.weight *= f;
        self.weekday_weight *= f;
        for a in &mut self.anchors {
            a.2 *= f;
        }
    }

    /// Count stay `s` of weighted dwell `w`.
    fn add(&mut self, s: &Stay, w: f64) {
        let nearest = self
            .anchors
            .iter_mut()
            .map(|a| (a.at().distance_m(s.centre), a))
            .filter(|(d, _)| *d <= ANCHOR_M)
            .min_by(|a, b| a.0.total_cmp(&b.0));
        match nearest {
            Some((_, a)) => a.absorb(Anchor(s.centre.lng, s.centre.lat, w, 1, s.accuracy_m)),
            None => self.anchors.push(Anchor(s.centre.lng, s.centre.lat, w, 1, s.accuracy_m)),
        }
        self.cap_anchors();
        let sp = places::split(s);
        self.stays += 1;
        self.dwell_s += s.dwell_s();
        self.weight += w;
        if s.dwell_s() > 0 {
            self.weekday_weight += w * sp.weekday_s as f64 / s.dwell_s() as f64;
        }
        for (d, secs) in sp.nights {
            *self.nights.entry(d).or_default() += secs;
            self.night_s += secs;
        }
        for (d, secs) in sp.per_day {
            *self.per_day.entry(d).or_default() += secs;
        }
        for (wk, (secs, days)) in sp.weeks {
            let e = self.weeks.entry(wk).or_default();
            e.0 += secs;
            for d in days {
                e.1 |= 1 << d.weekday().num_days_from_monday();
            }
        }
        self.visits.insert(s.zone().local(s.start.0).date());
        if (s.start, &s.id) < (self.first_start, &self.first_id) {
            (self.first_start, self.first_id) = (s.start, s.id.clone());
        }
        if s.end >= self.last.end {
            self.last = Stay { last: brief(&s.last), ..s.clone() };
        }
    }

    /// Merge the two nearest anchors while there are too many: the anchors keep covering the
    /// place's extent (merging the lightest would shrink a sprawling place, and stays at its
    /// edge would start places of their own).
    fn cap_anchors(&mut self) {
        while self.anchors.len() > MAX_ANCHORS {
            let mut best = (f64::MAX, 0, 1);
            for i in 0..self.anchors.len() {
                for j in i + 1..self.anchors.len() {
                    let d = self.anchors[i].at().distance_m(self.anchors[j].at());
                    if d < best.0 {
                        best = (d, i, j);
                    }
                }
            }
            let gone = self.anchors.remove(best.2);
            self.anchors[best.1].absorb(gone);
        }
    }

    fn merge(&mut self, o: Agg) {
        self.anchors.extend(o.anchors);
        self.cap_anchors();
        self.stays += o.stays;
        self.dwell_s += o.dwell_s;
        self.weight += o.weight;
        self.weekday_weight += o.weekday_weight;
        for (d, secs) in o.nights {
            *self.nights.entry(d).or_default() += secs;
        }
        self.night_s += o.night_s;
        self.days.union(&o.days);
        for (d, secs) in o.per_day {
            *self.per_day.entry(d).or_default() += secs;
        }
        self.visits.union(&o.visits);
        for (wk, (secs, bits)) in o.weeks {
            let e = self.weeks.entry(wk).or_default();
            e.0 += secs;
            e.1 |= bits;
        }
        if (o.first_start, &o.first_id) < (self.first_start, &self.first_id) {
            (self.first_start, self.first_id) = (o.first_start, o.first_id);
        }
        if o.last.end > self.last.end {
            self.last = o.last;
        }
    }

    /// Fold dates before `cut` into the counts; keep the nights and weeks the rules can use.
    fn settle(&mut self, cut: NaiveDate, first_week: Option<NaiveDate>) {
        let recent = self.per_day.split_off(&cut);
        for (d, _) in self.per_day.iter().filter(|(_, s)| **s >= DAY_MIN_SECONDS) {
            self.days.insert(*d);
        }
        self.per_day = recent;
        // A settled night shorter than NIGHT_MIN_SECONDS is nobody's night; of the others, the
        // move rule looks at most at the latest MOVE_NIGHTS (see `super::night_places`).
        let recent = self.nights.split_off(&cut);
        let kept: Vec<(NaiveDate, i64)> = self
            .nights
            .iter()
            .rev()
            .filter(|(_, s)| **s >= NIGHT_MIN_SECONDS)
            .take(MOVE_NIGHTS)
            .map(|(d, s)| (*d, *s))
            .collect();
        self.nights = kept.into_iter().chain(recent).collect();
        if let Some(first) = first_week {
            self.weeks = self.weeks.split_off(&first);
        }
    }

    /// The place as the insight rules read it.
    fn place(&self) -> Place {
        let weights: Vec<f64> = self.anchors.iter().map(|a| a.2.max(1e-9)).collect();
        let cost = |k: usize| {
            let c = self.anchors[k].at();
            self.anchors.iter().zip(&weights).map(|(a, w)| w * c.distance_m(a.at())).sum::<f64>()
        };
        let medoid =
            (0..self.anchors.len()).map(|k| (k, cost(k))).min_by(|a, b| a.1.total_cmp(&b.1)).map_or(0, |(k, _)| k);
        let centre = self.anchors.get(medoid).map_or(self.last.centre, Anchor::at);
        let at: Vec<LngLat> = self.anchors.iter().map(Anchor::at).collect();
        let plane = Plane::around(&at);
        let points: Vec<(Point<f64>, f64, usize)> =
            self.anchors.iter().map(|a| (plane.to_xy(a.at()), a.4 / f64::from(a.3.max(1)), a.3 as usize)).collect();
        Place {
            stays: self.stays as usize,
            first_id: self.first_id.clone(),
            first_start: self.first_start,
            last: self.last.clone(),
            centre,
            polygon: places::outline(&plane, plane.to_xy(centre), &points, plane.to_xy(self.last.last.coordinates)),
            dwell_s: self.dwell_s,
            weight: self.weight,
            weekday_weight: self.weekday_weight,
            nights: self.nights.clone(),
            night_s: self.night_s,
            days: self.days.len() + self.per_day.values().filter(|s| **s >= DAY_MIN_SECONDS).count(),
            visit_days: self.visits.len(),
            weeks: self.weeks.iter().map(|(w, (secs, bits))| (*w, (*secs, bits.count_ones() as usize))).collect(),
        }
    }
}

impl Aggregate {
    /// Count stay `s`, unless it is at or before `upto` (counted already). Stays come in id
    /// (start) order: the processor closes them so.
    pub fn fold(&mut self, s: &Stay) {
        if self.upto.as_ref().is_some_and(|u| s.id <= *u) {
            return;
        }
        self.upto = Some(s.id.clone());
        // Decay everything to the latest end; a stay ending earlier weighs its own age.
        let at = match self.at {
            Some(at) if at >= s.end => at,
            Some(at) => {
                let f = decay(at, s.end);
                self.places.iter_mut().for_each(|p| p.scale(f));
                s.end
            }
            None => s.end,
        };
        self.at = Some(at);
        let w = s.dwell_s() as f64 * decay(s.end, at);
        // The places it links: the earliest takes the others in.
        let linked: Vec<usize> = (0..self.places.len()).filter(|&i| self.places[i].near(s.centre)).collect();
        let by_age = |p: &Agg| (p.first_start, p.first_id.clone());
        let target = match linked.iter().copied().min_by_key(|&i| by_age(&self.places[i])) {
            None => {
                self.places.push(Agg::new(s));
                self.places.len() - 1
            }
            Some(keep) => {
                let others: Vec<Agg> =
                    linked.iter().rev().filter(|&&i| i != keep).map(|&i| self.places.remove(i)).collect();
                let keep = keep - linked.iter().filter(|&&i| i < keep).count();
                for o in others {
                    self.places[keep].merge(o);
                }
                keep
            }
        };
        self.places[target].add(s, w);
        self.settle(s);
        if self.places.len() > MAX_PLACES
            && let Some(i) =
                (0..self.places.len()).min_by(|&a, &b| self.places[a].weight.total_cmp(&self.places[b].weight))
        {
            self.places.remove(i);
        }
    }

    fn settle(&mut self, newest: &Stay) {
        let cut = newest.zone().local(newest.start.0).date() - Duration::days(SETTLE_DAYS);
        let cut = self.settled.map_or(cut, |c| c.max(cut));
        self.settled = Some(cut);
        let first_week = self
            .places
            .iter()
            .map(|p| &p.last)
            .max_by_key(|s| s.end)
            .map(|s| monday_of(s.zone().local(s.end.0).date()) - Duration::weeks(WORK_WINDOW_WEEKS - 1));
        for p in &mut self.places {
            p.settle(cut, first_week);
        }
    }

    /// The places, most weight first (ties by their first stay's id).
    pub fn places(&self) -> Vec<Place> {
        let mut out: Vec<Place> = self.places.iter().map(Agg::place).collect();
        out.sort_by(|a, b| b.weight.total_cmp(&a.weight).then_with(|| a.first_id.cmp(&b.first_id)));
        out
    }
}

/// The user's aggregate as stored, if any.
pub async fn read(store: &dyn Store, p: &Project, user_id: &str) -> Result<Option<Aggregate>, ApiError> {
    Ok(get_as(store, Table::Main, &aggregate_pk(&p.project_id, user_id), "-").await?)
}

/// The write that counts `closed` (the stays a processor pass closes, in order): a put checked
/// on the version read, for the pass's transaction. A user's first closed stay creates the
/// aggregate (stays and the aggregate commit in the same pass, so no stay is ever stored
/// without it).
pub async fn plan(store: &dyn Store, p: &Project, user_id: &str, closed: &[Stay]) -> Result<Option<WriteOp>, ApiError> {
    if closed.is_empty() {
        return Ok(None);
    }
    let found = read(store, p, user_id).await?;
    let cond = found.as_ref().map_or(Cond::NotExists, |a| Cond::Equals("version", a.version.into()));
    let mut agg = found.unwrap_or_default();
    for s in closed {
        agg.fold(s);
    }
    agg.version += 1;
    Ok(Some(WriteOp::Put {
        table: Table::Main,
        item: to_item(&aggregate_pk(&p.project_id, user_id), "-", &agg)?,
        cond,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_set_counts_a_date_once_whatever_the_order_and_round_trips() {
        let d = |day: u32| NaiveDate::from_ymd_opt(2024, 4, day).expect("a date");
        let (mut a, mut b) = (DaySet::default(), DaySet::default());
        for day in [10, 12, 30] {
            a.insert(d(day));
        }
        for day in [12, 1, 30, 3] {
            b.insert(d(day)); // the second date is before the first: bits are prepended
        }
        a.union(&b);
        assert_eq!(a.dates().collect::<Vec<_>>(), [1, 3, 10, 12, 30].map(d));
        assert_eq!(a.len(), 5);
        let json = serde_json::to_value(&a).expect("serialised");
        assert_eq!(serde_json::from_value::<DaySet>(json).expect("read back"), a);
    }
}
