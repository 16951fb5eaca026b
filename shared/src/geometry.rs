//! GeoJSON geometry at the boundary, validated once; distances and encodings through `geo`,
//! `geohash` and `polyline`.

use geo::{Distance, Geodesic, Haversine, Point};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// The WGS 84 ellipsoid: equatorial radius in meters and first eccentricity squared.
const WGS84_A: f64 = 6_378_137.0;
const WGS84_E2: f64 = (2.0 - 1.0 / 298.257_223_563) / 298.257_223_563;
/// How far [`LngLat::distance_m`] measures by the chord (its error grows with the distance, to
/// about 1 µm at 50 km); beyond, by Karney's algorithm.
const CHORD_UP_TO_M: f64 = 50_000.0;

/// A validated WGS 84 position: longitude −180..=180, latitude −90..=90, both finite.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(into = "[f64; 2]")]
pub struct LngLat {
    pub lng: f64,
    pub lat: f64,
}

/// Deserializing validates ([`LngLat::parse`]), so a `LngLat` field in a request body is checked
/// where it is parsed and the error names its path. Read without a `Vec<f64>` per position (a trip
/// summary decodes 100,000 stored ones), with the messages reading through one gave.
impl<'de> Deserialize<'de> for LngLat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LngLat;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LngLat, A::Error> {
                let (mut pos, mut n) = ([0.0; 2], 0usize);
                while let Some(x) = seq.next_element::<f64>()? {
                    if let Some(slot) = pos.get_mut(n) {
                        *slot = x;
                    }
                    n += 1;
                }
                if n != 2 {
                    return Err(A::Error::custom(shape_message(n)));
                }
                LngLat::parse("", &pos).map_err(|e| A::Error::custom(e.msg.trim_start_matches(": ")))
            }
        }
        d.deserialize_seq(V)
    }
}

fn shape_message(numbers: usize) -> String {
    format!("must be [longitude, latitude], got {numbers} numbers")
}

impl From<LngLat> for [f64; 2] {
    fn from(p: LngLat) -> Self {
        [p.lng, p.lat]
    }
}

impl LngLat {
    /// Validate a `[lng, lat]` position from input; `field` names it in the error.
    pub fn parse(field: &str, pos: &[f64]) -> Result<Self, ApiError> {
        let [lng, lat] = pos else {
            return Err(ApiError::field(field, shape_message(pos.len())));
        };
        if !lng.is_finite() || !(-180.0..=180.0).contains(lng) {
            return Err(ApiError::field(field, format!("longitude {lng} is outside -180..180")));
        }
        if !lat.is_finite() || !(-90.0..=90.0).contains(lat) {
            return Err(ApiError::field(field, format!("latitude {lat} is outside -90..90")));
        }
        // Below a nanodegree (0.1 mm) a coordinate is zero; DynamoDB cannot store magnitudes
        // below 1e-130, so both backends agree on this.
        let tidy = |x: f64| if x.abs() < 1e-9 { 0.0 } else { x };
        Ok(Self { lng: tidy(*lng), lat: tidy(*lat) })
    }

    pub fn point(self) -> Point<f64> {
        Point::new(self.lng, self.lat)
    }

    /// Geodesic distance in meters on the WGS 84 ellipsoid: within 0.1 mm of Karney's algorithm
    /// (via `geo`), which answers beyond [`CHORD_UP_TO_M`]; nearer, [`Placed::distance_m`] does
    /// at about a sixth of its cost (fixes, fences and searches are nearly all that near).
    pub fn distance_m(self, other: LngLat) -> f64 {
        self.placed().distance_m(&other.placed())
    }

    /// This position with what distances from it are measured by ([`Placed`]).
    pub fn placed(self) -> Placed {
        let ((sin_lat, cos_lat), (sin_lng, cos_lng)) =
            (self.lat.to_radians().sin_cos(), self.lng.to_radians().sin_cos());
        let n = WGS84_A / (1.0 - WGS84_E2 * sin_lat * sin_lat).sqrt();
        let xyz = [n * cos_lat * cos_lng, n * cos_lat * sin_lng, n * (1.0 - WGS84_E2) * sin_lat];
        Placed { at: self, xyz, sin_lat, cos_lat }
    }

    /// Geodesic distance in meters from this position to the geodesic segment `a`–`b` on the
    /// WGS 84 ellipsoid (the nearest point of the segment, to well under a millimetre). The
    /// nearest point X is where the geodesic from X to this position meets the segment at a right
    /// angle: from a first guess, each step moves X along the segment by the along-track part of
    /// that geodesic (its length × the cosine of its angle with the segment at X), one direct and
    /// one inverse problem (Karney's, via geographiclib) a step. Off by a factor of about
    /// (distance / Earth's radius)² each step, so two or three steps reach the minimum where a
    /// bisection along the segment took some thirty.
    pub fn segment_distance_m(self, a: LngLat, b: LngLat) -> f64 {
        use geographiclib_rs::{DirectGeodesic, InverseGeodesic};
        let g = geographiclib_rs::Geodesic::wgs84();
        let (len, azi_a, _, _): (f64, f64, f64, f64) = g.inverse(a.lat, a.lng, b.lat, b.lng);
        let ends = self.distance_m(a).min(self.distance_m(b));
        if len < 1e-3 {
            return ends;
        }
        let (d_a, azi_ap, _, _): (f64, f64, f64, f64) = g.inverse(a.lat, a.lng, self.lat, self.lng);
        let mut s = (d_a * (azi_ap - azi_a).to_radians().cos()).clamp(0.0, len);
        let mut d = f64::INFINITY;
        for _ in 0..20 {
            let (lat, lng, azi_x): (f64, f64, f64) = g.direct(a.lat, a.lng, azi_a, s);
            let (dx, azi_xp, _, _): (f64, f64, f64, f64) = g.inverse(lat, lng, self.lat, self.lng);
            d = dx;
            let next = (s + dx * (azi_xp - azi_x).to_radians().cos()).clamp(0.0, len);
            if (next - s).abs() < 1e-5 {
                break;
            }
            s = next;
        }
        d.min(ends)
    }

    /// Great-circle distance in meters on a sphere (via `geo`): within 0.5% of the geodesic and
    /// several times cheaper; for radius tests of tens of meters where that error is millimetres.
    pub fn haversine_m(self, other: LngLat) -> f64 {
        Haversine.distance(self.point(), other.point())
    }

    /// The geohash cell of `precision` characters that holds this position.
    pub fn geohash(self, precision: usize) -> Result<String, ApiError> {
        geohash::encode(geo::Coord { x: self.lng, y: self.lat }, precision)
            .map_err(|e| ApiError::field("coordinates", format!("cannot be indexed ({e})")))
    }
}

/// A position made ready to measure distances from: its earth-centred, earth-fixed coordinates
/// in meters (on the ellipsoid's surface) and its latitude's sine and cosine. A search measures
/// one place against many fences, each placed once and kept: the trigonometry is done once a
/// position rather than once a distance (a fifth of a search made afresh).
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    pub at: LngLat,
    xyz: [f64; 3],
    sin_lat: f64,
    cos_lat: f64,
}

impl Placed {
    /// The straight line between the two through the earth, in meters: never longer than the
    /// geodesic, so a lower bound on it for no trigonometry.
    pub fn chord_m(&self, other: &Placed) -> f64 {
        let (a, b) = (self.xyz, other.xyz);
        ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
    }

    /// [`LngLat::distance_m`] between the two.
    pub fn distance_m(&self, other: &Placed) -> f64 {
        match self.chord_arc_m(other) {
            Some(d) => d,
            None => Geodesic.distance(self.at.point(), other.at.point()),
        }
    }

    /// The distance along the ellipsoid for positions within [`CHORD_UP_TO_M`]: the straight chord
    /// between them, lengthened to the arc of the ellipsoid's normal section in their direction,
    /// whose radius of curvature R is Euler's for that azimuth: arc = c (1 + c² / 24 R²). The
    /// normal section and the geodesic differ by far less than the 0.1 mm the tests hold it to
    /// (against geographiclib, at every latitude and azimuth).
    fn chord_arc_m(&self, other: &Placed) -> Option<f64> {
        let c = self.chord_m(other);
        if c > CHORD_UP_TO_M {
            return None;
        }
        // The azimuth from the meridian (M) and prime vertical (N) radii at the mean latitude,
        // whose sine and cosine follow from the two latitudes' (half the angle of their sum).
        let cos_sum = self.cos_lat * other.cos_lat - self.sin_lat * other.sin_lat;
        let (sin2_mean, cos_mean) = (((1.0 - cos_sum) / 2.0).max(0.0), ((1.0 + cos_sum) / 2.0).max(0.0).sqrt());
        let w = 1.0 - WGS84_E2 * sin2_mean;
        let n = WGS84_A / w.sqrt();
        let m = n * (1.0 - WGS84_E2) / w;
        let east = (other.at.lng - self.at.lng).to_radians() * n * cos_mean;
        let north = (other.at.lat - self.at.lat).to_radians() * m;
        let h2 = east * east + north * north;
        if h2 == 0.0 {
            return Some(c);
        }
        let r = m * n / (n * north * north / h2 + m * east * east / h2);
        Some(c * (1.0 + c * c / (24.0 * r * r)))
    }
}

/// A GeoJSON Point, as responses carry coordinates; keys in sorted order, as answers built as
/// JSON trees (sorted maps) write them, so views serialised straight agree byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GeoPoint {
    pub coordinates: LngLat,
    #[serde(rename = "type")]
    pub kind: PointType,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PointType {
    Point,
}

impl From<LngLat> for GeoPoint {
    fn from(p: LngLat) -> Self {
        Self { kind: PointType::Point, coordinates: p }
    }
}

/// A GeoJSON Polygon with one validated, closed outer ring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeoPolygon {
    #[serde(rename = "type")]
    pub kind: PolygonType,
    pub coordinates: Vec<Vec<LngLat>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PolygonType {
    Polygon,
}

impl GeoPolygon {
    /// Validate a ring of `[lng, lat]`; it must be closed and have at least 4 positions (3 distinct).
    pub fn from_ring(field: &str, ring: &[Vec<f64>]) -> Result<Self, ApiError> {
        let pts = ring
            .iter()
            .enumerate()
            .map(|(i, p)| LngLat::parse(&format!("{field}[{i}]"), p))
            .collect::<Result<Vec<_>, _>>()?;
        if pts.len() < 4 {
            return Err(ApiError::field(field, "a polygon ring needs at least 4 positions"));
        }
        if pts.first() != pts.last() {
            return Err(ApiError::field(field, "a polygon ring must be closed (last position equal to the first)"));
        }
        Ok(Self { kind: PolygonType::Polygon, coordinates: vec![pts] })
    }
}

/// Google's encoded polyline of `(lng, lat)` points at precision 5.
pub fn encode_polyline(points: &[LngLat]) -> Result<String, ApiError> {
    let line: geo::LineString<f64> = points.iter().map(|p| geo::Coord { x: p.lng, y: p.lat }).collect();
    polyline::encode_coordinates(line, 5).map_err(ApiError::internal)
}

/// HyperTrack's time-aware polyline: for each point the deltas of latitude and longitude (×1e5)
/// and of the Unix time in seconds, each written with the encoded-polyline varint. The format has
/// no crate; the varint is the same one Google's polyline uses.
pub fn encode_time_aware_polyline(points: &[(LngLat, i64)]) -> String {
    let mut out = String::new();
    let (mut plat, mut plng, mut pt) = (0i64, 0i64, 0i64);
    for (p, t) in points {
        let lat = (p.lat * 1e5).round() as i64;
        let lng = (p.lng * 1e5).round() as i64;
        for delta in [lat - plat, lng - plng, t - pt] {
            push_varint(&mut out, delta);
        }
        (plat, plng, pt) = (lat, lng, *t);
    }
    out
}

fn push_varint(out: &mut String, v: i64) {
    let mut v = if v < 0 { !(v << 1) } else { v << 1 } as u64;
    while v >= 0x20 {
        out.push(char::from((((v & 0x1f) | 0x20) + 63) as u8));
        v >>= 5;
    }
    out.push(char::from((v + 63) as u8));
}

/// The `radius` of a nearby search (geofences or users), in meters: one parser and one set of
/// bounds for both. Roam documents 1000 m when left out and at most 10,000 m; its users search
/// also a least of 100 m (a geofence search takes any positive radius).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchRadius(pub f64);

impl SearchRadius {
    pub const DEFAULT_M: f64 = 1000.0;
    /// The search reads every index cell the circle covers (about 450 to 800 for 10 km).
    pub const MAX_M: f64 = 10_000.0;
    /// The least radius of the nearby users search, as Roam documents it.
    pub const MIN_USERS_M: f64 = 100.0;

    /// The `radius` parameter: the default when absent, else a number from `min` (exclusive
    /// when 0) to [`Self::MAX_M`]; a 400 naming `radius` otherwise.
    pub fn parse(s: Option<&str>, min: f64) -> Result<Self, ApiError> {
        let Some(s) = s else { return Ok(Self(Self::DEFAULT_M)) };
        let max = Self::MAX_M;
        let r: f64 = s
            .trim()
            .parse()
            .ok()
            .filter(|r: &f64| r.is_finite())
            .ok_or_else(|| ApiError::field("radius", format!("'{s}' is not a number of meters")))?;
        let ok = r <= max && if min > 0.0 { r >= min } else { r > 0.0 };
        if !ok {
            let least = if min > 0.0 { format!("from {min}") } else { "above 0".to_owned() };
            return Err(ApiError::field("radius", format!("{r} is not {least} to {max} meters")));
        }
        Ok(Self(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_with_the_messages_a_vec_gave() {
        // What deserializing through `Vec<f64>` said, as the type did before.
        #[derive(Debug, Deserialize)]
        #[serde(try_from = "Vec<f64>")]
        struct Old(#[allow(dead_code)] LngLat);
        impl TryFrom<Vec<f64>> for Old {
            type Error = String;
            fn try_from(v: Vec<f64>) -> Result<Self, String> {
                LngLat::parse("", &v).map(Old).map_err(|e| e.msg.trim_start_matches(": ").to_owned())
            }
        }
        #[derive(Debug, Deserialize)]
        struct New {
            #[allow(dead_code)]
            c: LngLat,
        }
        #[derive(Debug, Deserialize)]
        struct Was {
            #[allow(dead_code)]
            c: Old,
        }
        for body in [
            r#"{"c": [13.4, 52.5]}"#,
            r#"{"c": [13.4]}"#,
            r#"{"c": []}"#,
            r#"{"c": [1, 2, 3]}"#,
            r#"{"c": [200, 0]}"#,
            r#"{"c": [0, -91]}"#,
            r#"{"c": ["a", 1]}"#,
            r#"{"c": "x"}"#,
            r#"{"c": {"lng": 1}}"#,
            r#"{"c": null}"#,
        ] {
            // Without serde_json's position, as the API answers (`extract.rs`): the new error is
            // placed at the array's end, the old one at the object's.
            let msg = |e: serde_json::Error| e.to_string().split(" at line ").next().unwrap_or_default().to_owned();
            let new = serde_json::from_str::<New>(body).map(|n| n.c).map_err(msg);
            let was = serde_json::from_str::<Was>(body).map(|w| w.c.0).map_err(msg);
            assert_eq!(new, was, "{body}");
        }
        let p: LngLat = serde_json::from_str("[1e-12, 52.5]").unwrap();
        assert_eq!(p, LngLat { lng: 0.0, lat: 52.5 });
    }

    #[test]
    fn search_radius_has_one_set_of_bounds() {
        assert_eq!(SearchRadius::parse(None, 0.0).unwrap().0, 1000.0);
        assert_eq!(SearchRadius::parse(Some("10000"), SearchRadius::MIN_USERS_M).unwrap().0, 10_000.0);
        assert_eq!(SearchRadius::parse(Some("20.5"), 0.0).unwrap().0, 20.5);
        for (s, min) in [("99", 100.0), ("10000.5", 0.0), ("0", 0.0), ("x", 0.0), ("NaN", 0.0), ("-5", 0.0)] {
            assert!(SearchRadius::parse(Some(s), min).unwrap_err().msg.starts_with("radius:"), "{s}");
        }
    }

    #[test]
    fn rejects_out_of_range_and_wrong_arity() {
        assert!(LngLat::parse("c", &[181.0, 0.0]).is_err());
        assert!(LngLat::parse("c", &[0.0, -90.5]).is_err());
        assert!(LngLat::parse("c", &[0.0]).is_err());
        assert!(LngLat::parse("c", &[f64::NAN, 0.0]).is_err());
        assert!(LngLat::parse("c", &[-180.0, 90.0]).is_ok());
    }

    #[test]
    fn distances_are_karneys_geodesic_to_a_tenth_of_a_millimetre() {
        use geo::{Destination, Distance, Geodesic};
        // A fixed sequence of pseudo-random pairs: every latitude to the poles, every azimuth,
        // across the antimeridian, from a centimetre to twice the chord's reach.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut worst: f64 = 0.0;
        for k in 0..20_000 {
            let from = geo::Point::new(360.0 * next() - 180.0, 179.8 * next() - 89.9);
            let length = 0.01 * (2.0 * CHORD_UP_TO_M / 0.01).powf(next());
            let to = Geodesic.destination(from, 360.0 * next(), length);
            let (a, b) = (LngLat { lng: from.x(), lat: from.y() }, LngLat { lng: to.x(), lat: to.y() });
            let exact = Geodesic.distance(from, to);
            let err = (a.distance_m(b) - exact).abs();
            assert!(err < 1e-4, "pair {k}: {a:?} to {b:?}, {exact} m, off by {err} m");
            worst = worst.max(err);
        }
        // The pairs from the poles' own points, and a point to itself.
        let pole = LngLat { lng: 0.0, lat: 90.0 };
        assert!(
            (pole.distance_m(LngLat { lng: 123.0, lat: 89.99 })
                - Geodesic.distance(pole.point(), geo::Point::new(123.0, 89.99)))
            .abs()
                < 1e-4
        );
        assert_eq!(pole.distance_m(pole), 0.0);
        assert!(worst > 0.0, "measured against Karney's, not against itself");
    }

    #[test]
    fn segment_distance_matches_a_dense_walk_along_the_geodesic() {
        use geo::{Bearing, Destination, Distance, Geodesic};
        // Segments of 1-3 km at several latitudes, points off them to the side and beyond the
        // ends; the reference walks the geodesic in 2 cm steps.
        let cases = [
            ((13.40, 52.52), (13.43, 52.53), (13.41, 52.535)),
            ((-0.12, 51.50), (-0.12, 51.52), (-0.10, 51.51)),
            ((151.20, -33.87), (151.22, -33.86), (151.25, -33.85)),
            ((18.0, 69.6), (18.05, 69.61), (18.02, 69.59)),
            ((-58.40, -34.60), (-58.38, -34.61), (-58.39, -34.605)),
        ];
        for (a, b, p) in cases {
            let (a, b, p) =
                (LngLat { lng: a.0, lat: a.1 }, LngLat { lng: b.0, lat: b.1 }, LngLat { lng: p.0, lat: p.1 });
            let len = Geodesic.distance(a.point(), b.point());
            let az = Geodesic.bearing(a.point(), b.point());
            let steps = (len / 0.02) as usize;
            let walk = (0..=steps)
                .map(|k| {
                    Geodesic.distance(p.point(), Geodesic.destination(a.point(), az, len * k as f64 / steps as f64))
                })
                .fold(f64::INFINITY, f64::min);
            let got = p.segment_distance_m(a, b);
            assert!((got - walk).abs() < 0.01, "{got} vs {walk}");
        }
    }

    #[test]
    fn geodesic_distance_paris_london() {
        let paris = LngLat { lng: 2.3522, lat: 48.8566 };
        let london = LngLat { lng: -0.1276, lat: 51.5072 };
        let d = paris.distance_m(london);
        assert!((d - 343_900.0).abs() < 1_000.0, "{d}");
    }

    #[test]
    fn time_aware_polyline_matches_hypertrack_reference() {
        // Reference vector from HyperTrack's time-aware-polyline README (lat, lng, time).
        let pts = [
            (LngLat { lng: 72.92506, lat: 19.13626 }, 1_469_079_789),
            (LngLat { lng: 72.92495, lat: 19.13597 }, 1_469_079_795),
            (LngLat { lng: 72.92469, lat: 19.13553 }, 1_469_079_801),
        ];
        let s = encode_time_aware_polyline(&pts);
        assert_eq!(s, "spxsBsdb|Lymo`qvAx@TKvAr@K");
    }

    #[test]
    fn polygon_ring_must_be_closed() {
        let open = vec![vec![0.0, 0.0], vec![1.0, 0.0], vec![1.0, 1.0], vec![0.0, 1.0]];
        assert!(GeoPolygon::from_ring("coordinates", &open).is_err());
        let mut closed = open.clone();
        closed.push(vec![0.0, 0.0]);
        assert!(GeoPolygon::from_ring("coordinates", &closed).is_ok());
    }
}
