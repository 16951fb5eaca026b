//! A location as answers carry it (lists, a user's last location, nearby users, trip events),
//! serialised straight from the record: a JSON tree per location was built, written and dropped
//! before. Fields are declared in sorted order, as the tree (a sorted map) wrote them, so answers
//! are byte for byte what they were; [`super::location_json`] is this view as a value.

use chrono_tz::Tz;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use super::Location;
use crate::geometry::GeoPoint;
use crate::store::{Doc, StoreError, from_json};
use crate::time::Timestamp;

/// A time in the answer's zone (UTC when none is asked for).
#[derive(Debug, Clone, Copy)]
pub struct ZonedTime(pub Timestamp, pub Option<Tz>);

impl Serialize for ZonedTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.1 {
            None => self.0.serialize(s),
            Some(_) => s.serialize_str(&self.0.format(self.1)),
        }
    }
}

/// A user's latest location, `{}` when there is none.
#[derive(Debug)]
pub struct LastLocation<'a>(pub Option<LocationView<'a>>);

impl Serialize for LastLocation<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(l) => l.serialize(s),
            None => serde::ser::SerializeMap::end(s.serialize_map(Some(0))?),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct LocationView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    accuracy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    activity: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    airplane_mode: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    altitude: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_context: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_stat: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bat_saver_mode: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bat_stat: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    battery_remaining: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    battery_saver: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    battery_status: Option<&'a str>,
    coordinates: GeoPoint,
    #[serde(skip_serializing_if = "Option::is_none")]
    course: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created_at: Option<ZonedTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_manufacturer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at: Option<ZonedTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gps_stat: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gps_status: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    horizontal_accuracy: Option<f64>,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    location_permission: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    motion_stat: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    net_stat: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    network_status: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    os_version: Option<&'a str>,
    recorded_at: ZonedTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    speed: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<ZonedTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone_offset: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracking_mode: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tz_offset: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vertical_accuracy: Option<f64>,
}

impl<'a> LocationView<'a> {
    pub fn new(l: &'a Location, tz: Option<Tz>) -> Self {
        let at = |t: Option<Timestamp>| t.map(|t| ZonedTime(t, tz));
        Self {
            accuracy: l.accuracy,
            activity: l.activity.as_deref(),
            address: l.address.as_deref(),
            airplane_mode: l.airplane_mode,
            altitude: l.altitude,
            app_context: l.app_context.as_deref(),
            app_stat: l.app_stat.as_deref(),
            bat_saver_mode: l.bat_saver_mode,
            bat_stat: l.bat_stat.as_deref(),
            battery_remaining: l.battery_remaining,
            battery_saver: l.battery_saver,
            battery_status: l.battery_status.as_deref(),
            coordinates: GeoPoint::from(l.coordinates),
            course: l.course,
            created_at: at(l.created_at),
            device_manufacturer: l.device_manufacturer.as_deref(),
            device_model: l.device_model.as_deref(),
            ended_at: at(l.ended_at),
            gps_stat: l.gps_stat,
            gps_status: l.gps_status,
            horizontal_accuracy: l.horizontal_accuracy,
            id: &l.id,
            location_permission: l.location_permission,
            motion_stat: l.motion_stat,
            net_stat: l.net_stat,
            network_status: l.network_status,
            os_version: l.os_version.as_deref(),
            recorded_at: ZonedTime(l.recorded_at, tz),
            source: l.source.as_deref(),
            speed: l.speed,
            started_at: at(l.started_at),
            timezone_offset: l.timezone_offset.as_deref(),
            tracking_mode: l.tracking_mode.as_deref(),
            tz_offset: l.tz_offset.as_deref(),
            vertical_accuracy: l.vertical_accuracy,
        }
    }
}

/// A stored fix as lists show it ([`LocationView`]).
pub fn view_json(doc: &Doc, tz: Option<Tz>) -> Result<Box<RawValue>, StoreError> {
    crate::store::rendered("location", &LocationView::new(&from_json(doc)?, tz))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// How answers were built before: the stored record as a tree, coordinates and times replaced.
    fn as_tree(l: &Location, tz: Option<Tz>) -> Value {
        let mut v = serde_json::to_value(l).unwrap();
        let m = v.as_object_mut().unwrap();
        m.insert("coordinates".into(), json!(GeoPoint::from(l.coordinates)));
        for (k, t) in [
            ("recorded_at", Some(l.recorded_at)),
            ("created_at", l.created_at),
            ("started_at", l.started_at),
            ("ended_at", l.ended_at),
        ] {
            if let Some(t) = t {
                m.insert(k.into(), t.format(tz).into());
            }
        }
        v
    }

    #[test]
    fn the_view_writes_what_the_tree_wrote_byte_for_byte() {
        // Every field set (names from the record's own serialisation, so a field added to
        // `Location` and not to the view fails here), then none of the optional ones.
        let full: Location = serde_json::from_value(json!({
            "id": "0193a1b2c3d4e5f60718293a", "coordinates": [13.404954, 52.520008],
            "recorded_at": "2026-11-25T10:00:00.123", "created_at": "2026-11-25T10:00:01.000",
            "started_at": "2026-11-25T09:00:00.000", "ended_at": "2026-11-25T11:00:00.000",
            "speed": 12.5, "accuracy": 4.2, "horizontal_accuracy": 4.2, "vertical_accuracy": 3.1,
            "altitude": 34.75, "course": 271.3, "activity": "IN_VEHICLE", "address": "Unter den Linden \"5\"",
            "timezone_offset": "+0100", "net_stat": true, "gps_stat": false, "motion_stat": true,
            "gps_status": true, "app_stat": "foreground", "app_context": "ctx", "battery_remaining": 87,
            "bat_stat": "charging", "bat_saver_mode": false, "airplane_mode": false,
            "location_permission": true, "source": "gps", "tracking_mode": "active", "tz_offset": "+0100",
            "battery_status": "charging", "battery_saver": false, "network_status": true,
            "device_manufacturer": "Fairphone", "device_model": "FP5", "os_version": "Android 15"
        }))
        .unwrap();
        let stored = serde_json::to_value(&full).unwrap();
        let view = serde_json::to_value(LocationView::new(&full, None)).unwrap();
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&stored), keys(&view), "the view names every field of the record");
        let bare: Location = serde_json::from_value(json!({
            "coordinates": [-0.1, 51.5], "recorded_at": "2026-01-01T00:00:00.000"
        }))
        .unwrap();
        for l in [&full, &bare] {
            for tz in [None, Some(chrono_tz::America::Sao_Paulo), Some(chrono_tz::Asia::Kolkata)] {
                let tree = serde_json::to_string(&as_tree(l, tz)).unwrap();
                assert_eq!(serde_json::to_string(&LocationView::new(l, tz)).unwrap(), tree);
            }
        }
    }
}
