//! The summary body written straight from the analysed route: a 100,000-point route as a tree of
//! `serde_json::Value` maps cost about a microsecond per map entry to build, copy and free, several
//! times what writing it out costs. Keys are written in the order the `Value` maps sorted them,
//! so the bytes are the same as before.

use std::ops::Range;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::ser::{CompactFormatter, Formatter};

use super::route::{Route, active_seconds};
use super::{Summary, TripState};
use crate::body::{Envelope, ObjectWriter, SUCCESS};
use crate::geometry::LngLat;
use crate::stats::round2;
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
        4096 + route.points.len() * self.point_hint() + route.excluded.len() * 180
    }

    /// A little more than the bytes of one route point.
    fn point_hint(&self) -> usize {
        if self.detailed { 240 } else { 160 }
    }
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

/// The `route` array of the points in `range`, accumulating the per-point figures as it goes
/// from `carried` (the distance and elevation gain of the points before the range).
struct RouteBody<'a> {
    body: &'a SummaryBody,
    pauses: &'a [(Timestamp, Timestamp)],
    range: Range<usize>,
    carried: (f64, f64),
}

impl<'a> RouteBody<'a> {
    /// The range's points, each with the figures v1 adds, summed in order from `carried`.
    fn entries(&self) -> impl Iterator<Item = PointEntry<'a>> {
        let (sum, detailed, pauses) = (&self.body.summary, self.body.detailed, self.pauses);
        let last = sum.route.points.len().saturating_sub(1);
        let (mut distance, mut gain) = self.carried;
        let range = self.range.clone();
        sum.route.points[range.clone()].iter().zip(range).map(move |(pt, i)| {
            if !detailed {
                return PointEntry { pt, cumulative: None };
            }
            distance += pt.distance;
            gain += pt.elevation_gain;
            let duration = match (i == last, sum.trip.started_at) {
                (true, _) => sum.duration_s,
                (false, Some(start)) => active_seconds(start, pt.location.recorded_at, pauses).min(sum.duration_s),
                (false, None) => 0,
            };
            PointEntry { pt, cumulative: Some((round2(distance), duration, round2(gain))) }
        })
    }

    /// The array's bytes as serde_json writes [`RouteBody`] (a test holds them equal), pushed
    /// directly: through serde, the constant keys were escaped and written call by call, which
    /// was a third of a long route's writing.
    fn write_to(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        crate::body::write_array(out, self.entries(), |entry, out| entry.write_to(out))
    }
}

impl Serialize for RouteBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.range.len()))?;
        for entry in self.entries() {
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

impl PointEntry<'_> {
    /// The bytes [`PointEntry`]'s `Serialize` gives through serde_json: the keys and the
    /// activity are constants that need no escaping; numbers go through serde_json's formatter.
    fn write_to(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let l = &self.pt.location;
        out.extend_from_slice(b"{\"activity\":\"");
        out.extend_from_slice(self.pt.activity.as_str().as_bytes());
        out.extend_from_slice(b"\",\"altitude\":");
        match l.altitude {
            Some(a) => number(out, a),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"coordinates\":{\"coordinates\":[");
        number(out, l.coordinates.lng);
        out.push(b',');
        number(out, l.coordinates.lat);
        out.extend_from_slice(b"],\"type\":\"Point\"}");
        if let Some((distance, duration, gain)) = self.cumulative {
            out.extend_from_slice(b",\"distance\":");
            number(out, distance);
            out.extend_from_slice(b",\"duration\":");
            let _ = CompactFormatter.write_i64(out, duration);
            out.extend_from_slice(b",\"elevation_gain\":");
            number(out, gain);
        }
        out.extend_from_slice(b",\"recorded_at\":");
        let mut buf = [0u8; 23];
        match crate::time::write_utc(l.recorded_at.0, &mut buf) {
            Some(text) => {
                out.push(b'"');
                out.extend_from_slice(text.as_bytes());
                out.push(b'"');
            }
            None => serde_json::to_writer(&mut *out, &l.recorded_at)?,
        }
        out.push(b'}');
        Ok(())
    }
}

/// A float as serde_json writes one: its shortest round-trip form, `null` when not finite.
fn number(out: &mut Vec<u8>, x: f64) {
    // Writing into a Vec cannot fail.
    let _ = if x.is_finite() { CompactFormatter.write_f64(out, x) } else { CompactFormatter.write_null(out) };
}

fn route_indexes(r: &Route) -> impl Serialize + '_ {
    Each(&r.segments, |&(a, b, _)| if a == b { vec![a + 1] } else { vec![a + 1, b + 1] })
}

impl Serialize for SummaryBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        let pauses = self.pauses();
        self.entries(&mut m, &pauses, |m| {
            let all = 0..self.summary.route.points.len();
            m.serialize_entry("route", &RouteBody { body: self, pauses: &pauses, range: all, carried: (0.0, 0.0) })
        })?;
        m.end()
    }
}

impl SummaryBody {
    /// The body's entries into `m`, sorted, the route's written by `route`.
    fn entries<M: SerializeMap>(
        &self,
        m: &mut M,
        pauses: &[(Timestamp, Timestamp)],
        route: impl FnOnce(&mut M) -> Result<(), M::Error>,
    ) -> Result<(), M::Error> {
        let (sum, t) = (&self.summary, &self.summary.trip);
        let status = match t.state {
            TripState::Ended => "completed",
            other => other.as_str(),
        };
        m.serialize_entry("distance_covered", &round2(sum.distance_m))?;
        m.serialize_entry("duration", &sum.duration_s)?;
        m.serialize_entry("excluded_points", &Each(&sum.route.excluded, Excluded))?;
        m.serialize_entry("gaps", &Each(&sum.route.gaps, GapEntry))?;
        m.serialize_entry("paused_intervals", &Each(pauses, |&(a, b)| Paused(a, b)))?;
        m.serialize_entry("project_id", &t.project_id)?;
        route(m)?;
        m.serialize_entry("route_indexes", &route_indexes(&sum.route))?;
        if self.detailed {
            m.serialize_entry("total_elevation_gain", &sum.route.elevation_gain_m.map(round2))?;
        }
        m.serialize_entry("trip_id", &t.id)?;
        m.serialize_entry("trip_status", status)?;
        m.serialize_entry("user_id", &t.user_id)
    }

    fn pauses(&self) -> Vec<(Timestamp, Timestamp)> {
        let t = &self.summary.trip;
        t.pause_intervals(t.ended_at.unwrap_or(self.summary.computed_at))
    }

    /// The v1/v3 answer's bytes, byte for byte the envelope around [`SummaryBody`]'s
    /// serialization. A long route is sent in pieces instead ([`SummaryBody::in_pieces`]).
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        Envelope::ok(SUCCESS, self).to_json(self.size_hint())
    }
}

/// The figures carried into each part of `points` cut at `bounds`: sums over the points before
/// it, in order (so each part goes on from exactly what one pass would have reached).
fn carried_into(points: &[super::route::RoutePoint], bounds: &[usize]) -> Vec<(f64, f64)> {
    let parts = bounds.len() - 1;
    let mut carried = vec![(0.0, 0.0); parts];
    let (mut distance, mut gain) = (0.0, 0.0);
    for k in 1..parts {
        for pt in &points[bounds[k - 1]..bounds[k]] {
            distance += pt.distance;
            gain += pt.elevation_gain;
        }
        carried[k] = (distance, gain);
    }
    carried
}

/// Route points from which a summary is sent in pieces as they are written
/// ([`SummaryBody::in_pieces`]) rather than whole: about 1 MB of JSON.
pub const PIECES_FROM_POINTS: usize = 4096;

/// Route points a piece: about 450 kB of JSON with v1's figures (sent, and gzipped, each on its
/// own while the next are written).
pub const PIECE_POINTS: usize = 2048;

/// A summary's answer in pieces of at most `PIECE_POINTS` route points, each written when asked
/// for, from any thread: the first holds the envelope up to the route, the last what follows it;
/// put end to end, they are the bytes [`SummaryBody::to_json`] writes (a test holds them equal).
pub struct SummaryPieces {
    body: SummaryBody,
    pauses: Vec<(Timestamp, Timestamp)>,
    /// The answer before its route's points, and after them.
    head: Vec<u8>,
    tail: Vec<u8>,
    bounds: Vec<usize>,
    carried: Vec<(f64, f64)>,
}

impl SummaryBody {
    /// Whether the answer is long enough to be sent in pieces.
    pub fn long(&self) -> bool {
        self.summary.route.points.len() >= PIECES_FROM_POINTS
    }

    /// The answer in pieces of `piece_points` route points.
    pub fn in_pieces(self, piece_points: usize) -> serde_json::Result<SummaryPieces> {
        let n = self.summary.route.points.len();
        let count = n.div_ceil(piece_points.max(1)).max(1);
        let bounds: Vec<usize> = (0..=count).map(|k| (k * piece_points).min(n)).collect();
        let carried = carried_into(&self.summary.route.points, &bounds);
        let pauses = self.pauses();
        // The envelope around an empty route, cut where the route's points go.
        let at = std::cell::Cell::new(0);
        let mut head = Envelope::ok(SUCCESS, &self).to_json_with(4096, |body, out| {
            let mut m = ObjectWriter::new(out);
            body.entries(&mut m, &pauses, |m| {
                m.entry_written("route", |out| {
                    at.set(out.len());
                    out.extend_from_slice(b"[]");
                    Ok(())
                })
            })?;
            m.end()
        })?;
        let mut tail = head.split_off(at.get());
        tail.remove(0);
        Ok(SummaryPieces { body: self, pauses, head, tail, bounds, carried })
    }
}

impl crate::body::Pieces for SummaryPieces {
    fn count(&self) -> usize {
        self.bounds.len() - 1
    }

    fn piece(&self, k: usize) -> serde_json::Result<Vec<u8>> {
        let range = self.bounds[k]..self.bounds[k + 1];
        let last = k + 2 == self.bounds.len();
        let size = 64 + range.len() * self.body.point_hint() + if last { self.tail.len() } else { 0 };
        let route = RouteBody { body: &self.body, pauses: &self.pauses, range, carried: self.carried[k] };
        // Each piece's points are written as an array of their own: the first's `[` opens the
        // route (the head ends with `"route":`), the others' becomes the comma between pieces;
        // the closing `]` is dropped, the tail begins with the route's.
        let mut out = Vec::with_capacity(size + if k == 0 { self.head.len() } else { 0 });
        if k == 0 {
            out.extend_from_slice(&self.head);
        }
        let at = out.len();
        route.write_to(&mut out)?;
        out.pop();
        if k > 0 {
            out[at] = b',';
        }
        if last {
            out.extend_from_slice(&self.tail);
        }
        Ok(out)
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

#[cfg(test)]
mod tests {
    use super::super::fix::TripFix;
    use super::super::route::{Activity, RoutePoint};
    use super::*;
    use crate::domain::trips::{Summary, Trip};

    fn summary(points: usize, detailed: bool) -> SummaryBody {
        let trip: Trip = serde_json::from_value(serde_json::json!({
            "id": "t1", "project_id": "p1", "account_id": "a1", "api": "v1", "user_id": "u1",
            "name": null, "description": null, "metadata": null, "waypoints": [], "state": "ended",
            "is_deleted": false, "started_at": "2024-03-01T10:00:00.000", "ended_at": "2024-03-01T12:00:00.000",
            "pauses": [{"paused_at": "2024-03-01T10:30:00.000", "resumed_at": "2024-03-01T10:40:00.000"}],
            "start_location": null, "end_location": null, "distance_m": null, "duration_s": null,
            "elevation_gain_m": null, "tracking_token": "x", "created_at": "2024-03-01T10:00:00.000",
            "updated_at": "2024-03-01T10:00:00.000", "version": 1,
        }))
        .expect("a trip");
        let start = trip.started_at.expect("started");
        let route = super::super::route::Route {
            points: (0..points)
                .map(|i| RoutePoint {
                    location: TripFix {
                        id: format!("l{i}"),
                        coordinates: LngLat { lng: 13.4 + i as f64 * 1e-5, lat: 52.5 },
                        recorded_at: Timestamp(start.0 + chrono::Duration::milliseconds(i as i64 * 997)),
                        accuracy: Some(5.0),
                        horizontal_accuracy: None,
                        vertical_accuracy: None,
                        altitude: (i % 3 != 0).then_some(30.0 + (i % 7) as f64),
                        speed: None,
                    },
                    activity: if i % 50 < 10 { Activity::Stop } else { Activity::Moving },
                    // Figures whose sums round differently in another order.
                    distance: 0.1 + (i % 13) as f64 * 0.37,
                    elevation_gain: (i % 5) as f64 * 0.01,
                })
                .collect(),
            distance_m: 1234.5,
            ..Default::default()
        };
        SummaryBody {
            summary: Summary { trip, route, distance_m: 1234.5, duration_s: 6600, computed_at: start },
            detailed,
        }
    }

    #[test]
    fn a_route_in_pieces_put_end_to_end_is_the_answer_written_whole() {
        use crate::body::Pieces;
        for (points, detailed) in [(0, true), (1, true), (2, false), (5, true), (1001, true), (1001, false)] {
            let body = summary(points, detailed);
            let whole = body.to_json().expect("json");
            // As serde_json writes the envelope around the body's JSON value.
            let tree = serde_json::to_vec(&serde_json::json!({
                "code": 200, "data": serde_json::to_value(&body).expect("json"), "msg": SUCCESS, "status": true,
            }))
            .expect("json");
            assert!(whole == tree, "{points} points: the answer differs from its JSON value's");
            let v: serde_json::Value = serde_json::from_slice(&whole).expect("valid JSON");
            assert_eq!(v["data"]["route"].as_array().map(Vec::len), Some(points));
            for piece_points in [1, 2, 3, 500, 1000, 1001, 5000] {
                let pieces = summary(points, detailed).in_pieces(piece_points).expect("pieces");
                assert_eq!(pieces.count(), points.div_ceil(piece_points).max(1));
                // Asked for in another order than sent: each piece stands on its own.
                let mut written: Vec<Vec<u8>> =
                    (0..pieces.count()).rev().map(|k| pieces.piece(k).expect("piece")).collect();
                written.reverse();
                assert!(written.concat() == whole, "{points} points in pieces of {piece_points}: the bytes differ");
            }
        }
    }
}
