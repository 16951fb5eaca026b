//! The summary body written straight from the analysed route: a 100,000-point route as a tree of
//! `serde_json::Value` maps cost about a microsecond per map entry to build, copy and free, several
//! times what writing it out costs. Keys are written in the order the `Value` maps sorted them,
//! so the bytes are the same as before.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::route::{Route, active_seconds};
use super::{Summary, TripState};
use crate::geometry::LngLat;
use crate::time::Timestamp;

/// A trip summary as the API answers it; `detailed` adds v1's per-point figures and
/// `total_elevation_gain`. Per-point `distance`, `duration` and `elevation_gain` are cumulative
/// from the trip's start (as Roam's), so the last point's equal the trip's totals: the first point
/// counts the time since the start, the last the time until the end (or now, for a trip under way).
pub struct SummaryBody {
    pub summary: Summary,
    pub detailed: bool,
}

impl SummaryBody {
    /// A little more than the bytes of the body, so its buffer seldom grows: a route point takes
    /// about 220 of them with v1's per-point figures and 150 without, an excluded point 170.
    pub fn size_hint(&self) -> usize {
        let route = &self.summary.route;
        let point = if self.detailed { 240 } else { 160 };
        4096 + route.points.len() * point + route.excluded.len() * 180
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `{"coordinates": [lng, lat], "type": "Point"}`.
struct Point(LngLat);

impl Serialize for Point {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("coordinates", &self.0)?;
        m.serialize_entry("type", "Point")?;
        m.end()
    }
}

/// A slice written as a JSON array of what `f` makes of each element.
struct Each<'a, T, F>(&'a [T], F);

impl<'a, T, R: Serialize, F: Fn(&'a T) -> R> Serialize for Each<'a, T, F> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for x in self.0 {
            seq.serialize_element(&(self.1)(x))?;
        }
        seq.end()
    }
}

/// The `route` array, accumulating the per-point figures as it goes.
struct RouteBody<'a> {
    body: &'a SummaryBody,
    pauses: &'a [(Timestamp, Timestamp)],
}

impl Serialize for RouteBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (sum, detailed) = (&self.body.summary, self.body.detailed);
        let points = &sum.route.points;
        let last = points.len().saturating_sub(1);
        let (mut distance, mut gain) = (0.0, 0.0);
        let mut seq = s.serialize_seq(Some(points.len()))?;
        for (i, pt) in points.iter().enumerate() {
            let entry = PointEntry { pt, cumulative: None };
            let entry = if detailed {
                distance += pt.distance;
                gain += pt.elevation_gain;
                let duration = match (i == last, sum.trip.started_at) {
                    (true, _) => sum.duration_s,
                    (false, Some(start)) => {
                        active_seconds(start, pt.location.recorded_at, self.pauses).min(sum.duration_s)
                    }
                    (false, None) => 0,
                };
                PointEntry { cumulative: Some((round2(distance), duration, round2(gain))), ..entry }
            } else {
                entry
            };
            seq.serialize_element(&entry)?;
        }
        seq.end()
    }
}

struct PointEntry<'a> {
    pt: &'a super::route::RoutePoint,
    /// Cumulative distance, duration and elevation gain (v1).
    cumulative: Option<(f64, i64, f64)>,
}

impl Serialize for PointEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let l = &self.pt.location;
        let mut m = s.serialize_map(Some(if self.cumulative.is_some() { 7 } else { 4 }))?;
        m.serialize_entry("activity", self.pt.activity.as_str())?;
        m.serialize_entry("altitude", &l.altitude)?;
        m.serialize_entry("coordinates", &Point(l.coordinates))?;
        if let Some((distance, duration, gain)) = self.cumulative {
            m.serialize_entry("distance", &distance)?;
            m.serialize_entry("duration", &duration)?;
            m.serialize_entry("elevation_gain", &gain)?;
        }
        m.serialize_entry("recorded_at", &l.recorded_at)?;
        m.end()
    }
}

fn route_indexes(r: &Route) -> impl Serialize + '_ {
    Each(&r.segments, |&(a, b, _)| if a == b { vec![a + 1] } else { vec![a + 1, b + 1] })
}

impl Serialize for SummaryBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (sum, t) = (&self.summary, &self.summary.trip);
        let end = t.ended_at.unwrap_or(sum.computed_at);
        let pauses = t.pause_intervals(end);
        let status = match t.state {
            TripState::Ended => "completed",
            other => other.as_str(),
        };
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("distance_covered", &round2(sum.distance_m))?;
        m.serialize_entry("duration", &sum.duration_s)?;
        m.serialize_entry("excluded_points", &Each(&sum.route.excluded, Excluded))?;
        m.serialize_entry("gaps", &Each(&sum.route.gaps, GapEntry))?;
        m.serialize_entry("paused_intervals", &Each(&pauses, |&(a, b)| Paused(a, b)))?;
        m.serialize_entry("project_id", &t.project_id)?;
        m.serialize_entry("route", &RouteBody { body: self, pauses: &pauses })?;
        m.serialize_entry("route_indexes", &route_indexes(&sum.route))?;
        if self.detailed {
            m.serialize_entry("total_elevation_gain", &sum.route.elevation_gain_m.map(round2))?;
        }
        m.serialize_entry("trip_id", &t.id)?;
        m.serialize_entry("trip_status", status)?;
        m.serialize_entry("user_id", &t.user_id)?;
        m.end()
    }
}

struct Excluded<'a>(&'a super::route::ExcludedPoint);

impl Serialize for Excluded<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("coordinates", &Point(self.0.location.coordinates))?;
        m.serialize_entry("location_id", &self.0.location.id)?;
        m.serialize_entry("reason", self.0.reason.as_str())?;
        m.serialize_entry("recorded_at", &self.0.location.recorded_at)?;
        m.end()
    }
}

struct GapEntry<'a>(&'a super::route::Gap);

impl Serialize for GapEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let g = self.0;
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("bridged", &g.bridged)?;
        m.serialize_entry("distance", &round2(g.distance_m))?;
        m.serialize_entry("from", &g.from)?;
        m.serialize_entry("seconds", &(g.to.0 - g.from.0).num_seconds())?;
        m.serialize_entry("to", &g.to)?;
        m.end()
    }
}

struct Paused(Timestamp, Timestamp);

impl Serialize for Paused {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("paused_at", &self.0)?;
        m.serialize_entry("resumed_at", &self.1)?;
        m.end()
    }
}
