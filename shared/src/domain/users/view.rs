//! A stored user written as lists show it ([`super::UserView`]'s fields and bytes) from its
//! document's own text: decoding a whole [`super::User`] (a dozen strings allocated, then written
//! again) was most of a users page's CPU. Strings are copied as the document holds them: both
//! stores' documents are serde_json's writing of the record (`to_item`, the embedded store's
//! `encode`, DynamoDB's `encode_doc`), so their escapes are the ones an answer writes. Times,
//! metadata and the last location are decoded and written as before.

use chrono_tz::Tz;
use serde::de::Error as _;
use serde::ser::Serializer;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::domain::locations::Location;
use crate::domain::locations::view::{LastLocation, LocationView, ZonedTime};
use crate::store::{Doc, StoreError, doc_str};
use crate::time::Timestamp;

/// A string field as the document writes it, quotes and escapes included.
#[derive(Debug, Clone, Copy)]
struct Text<'a>(&'a RawValue);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'a RawValue>::deserialize(d)?;
        // A record's string field: anything else fails as decoding the record did.
        if raw.get().starts_with('"') { Ok(Text(raw)) } else { Err(D::Error::custom("expected a string")) }
    }
}

impl Serialize for Text<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// The stored user's fields a list shows (the document's others are skipped unread).
#[derive(Deserialize)]
struct Stored<'a> {
    #[serde(borrow)]
    account_id: Text<'a>,
    app_type: u8,
    #[serde(borrow)]
    brand: Text<'a>,
    created_at: Timestamp,
    #[serde(borrow)]
    description: Option<Text<'a>>,
    #[serde(borrow)]
    device_arn: Text<'a>,
    #[serde(borrow)]
    device_token: Text<'a>,
    #[serde(borrow)]
    device_uuid: Text<'a>,
    event_listener: bool,
    geofence_events: bool,
    #[serde(borrow)]
    id: Text<'a>,
    is_deleted: bool,
    last_location_update: Option<Location>,
    location_events: bool,
    location_listener: bool,
    metadata: Option<Map<String, Value>>,
    #[serde(borrow)]
    model: Text<'a>,
    motion_events: bool,
    nearby_events: bool,
    #[serde(borrow)]
    os_version: Text<'a>,
    #[serde(borrow)]
    project_id: Text<'a>,
    #[serde(borrow)]
    sdk_version: Text<'a>,
    trips_events: bool,
    updated_at: Timestamp,
}

/// `<project_id>_<app_type>` ([`super::app_id`]).
struct AppId<'a>(Text<'a>, u8);

impl Serialize for AppId<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw = self.0.0.get();
        let inner = &raw[1..raw.len() - 1];
        if inner.contains('\\') {
            let project: String = serde_json::from_str(raw).map_err(serde::ser::Error::custom)?;
            s.collect_str(&format_args!("{project}_{}", self.1))
        } else {
            s.collect_str(&format_args!("{inner}_{}", self.1))
        }
    }
}

/// [`super::UserView`]'s fields in its order, from [`Stored`].
#[derive(Serialize)]
struct View<'a> {
    account_id: Text<'a>,
    app_id: AppId<'a>,
    brand: Text<'a>,
    created_at: ZonedTime,
    description: Option<Text<'a>>,
    device_arn: Text<'a>,
    device_token: Text<'a>,
    device_uuid: Text<'a>,
    event_listener: bool,
    geofence_events: bool,
    id: Text<'a>,
    is_deleted: bool,
    last_location_update: LastLocation<'a>,
    location_events: bool,
    location_listener: bool,
    metadata: &'a Option<Map<String, Value>>,
    model: Text<'a>,
    motion_events: bool,
    nearby_events: bool,
    os_version: Text<'a>,
    project_id: Text<'a>,
    sdk_version: Text<'a>,
    trips_events: bool,
    updated_at: ZonedTime,
}

/// A stored user as lists show it: [`super::UserView`] of the decoded record, byte for byte.
pub fn view_json(doc: &Doc, tz: Option<Tz>) -> Result<Box<RawValue>, StoreError> {
    let u: Stored = serde_json::from_str(doc_str(doc)?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let view = View {
        account_id: u.account_id,
        app_id: AppId(u.project_id, u.app_type),
        brand: u.brand,
        created_at: ZonedTime(u.created_at, tz),
        description: u.description,
        device_arn: u.device_arn,
        device_token: u.device_token,
        device_uuid: u.device_uuid,
        event_listener: u.event_listener,
        geofence_events: u.geofence_events,
        id: u.id,
        is_deleted: u.is_deleted,
        last_location_update: LastLocation(u.last_location_update.as_ref().map(|l| LocationView::new(l, tz))),
        location_events: u.location_events,
        location_listener: u.location_listener,
        metadata: &u.metadata,
        model: u.model,
        motion_events: u.motion_events,
        nearby_events: u.nearby_events,
        os_version: u.os_version,
        project_id: u.project_id,
        sdk_version: u.sdk_version,
        trips_events: u.trips_events,
        updated_at: ZonedTime(u.updated_at, tz),
    };
    crate::store::rendered("user", &view)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{User, UserView};
    use super::*;
    use crate::store::{from_json, to_item};

    /// The document a store hands out for `u` (both stores write serde_json's text of the item).
    fn doc_of(u: &User) -> Doc {
        Doc::from(serde_json::to_vec(&to_item("p#U", &u.id, u).unwrap()).unwrap())
    }

    fn user(extra: Value) -> User {
        let mut v = json!({
            "id": "0193a1b2c3d4e5f60718293a", "project_id": "0193a1b2c3d4e5f60718293b",
            "account_id": "acc-1", "app_type": 2, "device_token": "tok", "device_uuid": "",
            "description": null, "brand": "Fairphone", "model": "FP5", "os_version": "15",
            "sdk_version": "3.1.0", "device_arn": "", "geofence_events": true, "motion_events": false,
            "location_events": true, "trips_events": false, "nearby_events": false,
            "location_listener": true, "event_listener": false, "metadata": null, "is_deleted": false,
            "created_at": "2026-11-25T10:00:00.123", "updated_at": "2026-11-28T23:59:59.999",
            "last_location_update": null, "version": 3
        });
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_view_from_the_document_is_the_view_of_the_record_byte_for_byte() {
        let users = [
            user(json!({})),
            // Escapes, quotes, non-ASCII and control characters in strings; the project id too.
            user(json!({
                "project_id": "p\"roj\\ect\u{1}", "description": "Zoë's \"phone\"\n\ttab",
                "brand": "Bäck\u{7f}", "device_token": "</script>", "device_arn": "arn:aws:sns:eu:1:\u{2028}",
                "metadata": {"z": [1, 2.5, {"b": null, "a": "x"}], "a": true, "m": "\u{0}"},
                "is_deleted": true, "app_type": 1
            })),
            user(json!({
                "last_location_update": {
                    "id": "0193a1b2c3d4e5f60718293c", "coordinates": [13.404954, 52.520008],
                    "recorded_at": "2026-11-25T10:00:00.123", "speed": 12.5, "accuracy": 4.2,
                    "activity": "IN_VEHICLE", "address": "Unter den Linden \"5\"", "battery_remaining": 87
                },
                "created_at": "1999-12-31T23:59:59.000"
            })),
        ];
        for u in &users {
            let doc = doc_of(u);
            for tz in [None, Some(chrono_tz::Europe::Berlin), Some(chrono_tz::Asia::Kolkata)] {
                let before =
                    crate::store::rendered("user", &UserView::new(&from_json::<User>(&doc).unwrap(), tz)).unwrap();
                assert_eq!(view_json(&doc, tz).unwrap().get(), before.get());
            }
        }
    }

    #[test]
    fn a_document_whose_strings_are_not_strings_is_corrupt() {
        let mut item = to_item("p#U", "x", &user(json!({}))).unwrap();
        item.insert("brand".into(), json!(5));
        let doc = Doc::from(serde_json::to_vec(&item).unwrap());
        assert!(matches!(view_json(&doc, None), Err(StoreError::Corrupt(_))));
        assert!(from_json::<User>(&doc).is_err());
    }
}
