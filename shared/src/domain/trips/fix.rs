//! A stored fix as a trip's figures read it: only what the analysis, the summary body and the
//! GPX route use. Decoded straight from the stored record, the other attributes skipped: a full
//! [`Location`] is about 550 bytes with a dozen optional strings, and moving 100,000 of them
//! through a summary (decode, judge, route points) cost more in memory traffic and page faults
//! than the analysis itself.

use serde::Deserialize;

use super::gps::Positioned;
use crate::domain::locations::Location;
use crate::geometry::LngLat;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TripFix {
    /// The stored record's id (empty for a fix not stored yet).
    #[serde(default)]
    pub id: String,
    pub coordinates: LngLat,
    pub recorded_at: Timestamp,
    #[serde(default)]
    pub accuracy: Option<f64>,
    #[serde(default)]
    pub horizontal_accuracy: Option<f64>,
    #[serde(default)]
    pub vertical_accuracy: Option<f64>,
    #[serde(default)]
    pub altitude: Option<f64>,
    #[serde(default)]
    pub speed: Option<f64>,
}

impl From<&Location> for TripFix {
    fn from(l: &Location) -> Self {
        TripFix {
            id: l.id.clone(),
            coordinates: l.coordinates,
            recorded_at: l.recorded_at,
            accuracy: l.accuracy,
            horizontal_accuracy: l.horizontal_accuracy,
            vertical_accuracy: l.vertical_accuracy,
            altitude: l.altitude,
            speed: l.speed,
        }
    }
}

impl Positioned for TripFix {
    fn position(&self) -> LngLat {
        self.coordinates
    }
    fn at(&self) -> Timestamp {
        self.recorded_at
    }
    // As `Location`'s: the horizontal accuracy when sent, else the plain one.
    fn reported_accuracy(&self) -> Option<f64> {
        self.horizontal_accuracy.or(self.accuracy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_record_decodes_to_the_fields_its_location_has() {
        let doc = serde_json::json!({
            "pk": "p#u", "sk": "0190", "id": "0190abc", "coordinates": [13.4, 52.5],
            "recorded_at": "2024-03-01T10:00:00.250", "accuracy": 12.0, "altitude": 34.5,
            "vertical_accuracy": 7.5, "speed": 3.0, "address": "Somewhere", "battery_remaining": 40,
        });
        let bytes = serde_json::to_vec(&doc).unwrap();
        let fix: TripFix = serde_json::from_slice(&bytes).unwrap();
        let loc: Location = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(fix, TripFix::from(&loc));
        assert_eq!(fix.reported_accuracy(), loc.reported_accuracy());
    }
}
