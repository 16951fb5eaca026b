//! GPX 1.1 export: a user's locations over a time range, or a trip's route, as one track of
//! one segment (`trkpt` with `ele` and `time`). Written by the `gpx` crate.

use crate::domain::locations::Location;
use crate::domain::trips::fix::TripFix;
use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::time::Timestamp;

/// What a track point says: where, when, how high and how fast.
pub struct TrackPoint {
    pub coordinates: LngLat,
    pub recorded_at: Timestamp,
    pub altitude: Option<f64>,
    pub speed: Option<f64>,
}

impl From<&Location> for TrackPoint {
    fn from(l: &Location) -> Self {
        TrackPoint { coordinates: l.coordinates, recorded_at: l.recorded_at, altitude: l.altitude, speed: l.speed }
    }
}

impl From<&TripFix> for TrackPoint {
    fn from(l: &TripFix) -> Self {
        TrackPoint { coordinates: l.coordinates, recorded_at: l.recorded_at, altitude: l.altitude, speed: l.speed }
    }
}

/// The GPX 1.1 document of `points` (in order) as one track named `name`.
pub fn gpx_track(name: &str, points: impl IntoIterator<Item = TrackPoint>) -> Result<String, ApiError> {
    let mut segment = gpx::TrackSegment::new();
    for l in points {
        let mut wp = gpx::Waypoint::new(geo::Point::new(l.coordinates.lng, l.coordinates.lat));
        wp.elevation = l.altitude;
        wp.speed = l.speed;
        let t =
            time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(l.recorded_at.0.timestamp_millis()) * 1_000_000)
                .map_err(ApiError::internal)?;
        wp.time = Some(t.into());
        segment.points.push(wp);
    }
    let mut track = gpx::Track::new();
    track.name = Some(name.to_owned());
    track.segments.push(segment);
    let doc = gpx::Gpx {
        version: gpx::GpxVersion::Gpx11,
        creator: Some("Waymark".to_owned()),
        tracks: vec![track],
        ..Default::default()
    };
    let mut out = Vec::new();
    gpx::write(&doc, &mut out).map_err(ApiError::internal)?;
    String::from_utf8(out).map_err(ApiError::internal)
}
