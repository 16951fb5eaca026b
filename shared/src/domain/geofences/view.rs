//! A geofence as answers carry it, serialised straight from the stored fence: building a JSON
//! tree first was about a third of a warm geofences list's CPU. Fields are declared in sorted
//! order, as the tree (a sorted map) wrote them, so answers are byte for byte what they were;
//! [`super::geofence_json`] is this view as a value.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::Geofence;
use crate::geometry::{GeoPoint, LngLat};
use crate::store::{Doc, StoreError, from_json};

/// `is_enabled`: a flag, or for user/group-scoped fences `[flag, active_from, active_until]`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Enabled {
    Flag(bool),
    Window(bool, Option<String>, Option<String>),
}

impl Enabled {
    pub fn of(g: &Geofence) -> Self {
        if g.scoped {
            Self::Window(g.is_enabled, g.active_from.map(|t| t.format(None)), g.active_until.map(|t| t.format(None)))
        } else {
            Self::Flag(g.is_enabled)
        }
    }
}

/// A polygon's GeoJSON, keys sorted.
#[derive(Debug, Serialize)]
pub struct PolygonView<'a> {
    coordinates: [&'a Vec<LngLat>; 1],
    #[serde(rename = "type")]
    kind: &'static str,
}

impl<'a> PolygonView<'a> {
    pub fn new(ring: &'a Vec<LngLat>) -> Self {
        Self { coordinates: [ring], kind: "Polygon" }
    }
}

/// Metadata, `{}` when unset.
#[derive(Debug)]
pub struct Metadata<'a>(pub Option<&'a Map<String, Value>>);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(m) => m.serialize(s),
            None => s.serialize_map(Some(0))?.end(),
        }
    }
}

/// The fence as lists and reads show it: its id under `geofence_id` (v1) or `id` (v3), the
/// shape's fields for its kind, the scopes of a scoped fence, `counts` when asked for.
#[derive(Debug, Serialize)]
pub struct GeofenceView<'a> {
    account_id: &'a str,
    color_code: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<Value>,
    created_at: String,
    description: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    geofence_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    geometry: Option<PolygonView<'a>>,
    geometry_center: GeoPoint,
    #[serde(skip_serializing_if = "Option::is_none")]
    geometry_radius: Option<u32>,
    geometry_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    group_ids: Option<&'a Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    is_deleted: bool,
    is_enabled: Enabled,
    metadata: Metadata<'a>,
    project_id: &'a str,
    tag: &'a Option<String>,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_ids: Option<&'a Vec<String>>,
}

impl<'a> GeofenceView<'a> {
    /// `id_key`: "geofence_id" (v1) or "id" (v3).
    pub fn new(g: &'a Geofence, id_key: &str) -> Self {
        let v1 = id_key == "geofence_id";
        Self {
            account_id: &g.account_id,
            color_code: &g.color_code,
            counts: None,
            created_at: g.created_at.format(None),
            description: &g.description,
            geofence_id: v1.then_some(g.id.as_str()),
            geometry: g.ring.as_ref().map(PolygonView::new),
            geometry_center: g.center.into(),
            geometry_radius: g.radius_m,
            geometry_type: g.geometry_type.as_str(),
            group_ids: g.scoped.then_some(&g.group_ids),
            id: (!v1).then_some(g.id.as_str()),
            is_deleted: g.is_deleted,
            is_enabled: Enabled::of(g),
            metadata: Metadata(g.metadata.as_ref()),
            project_id: &g.project_id,
            tag: &g.tag,
            updated_at: g.updated_at.format(None),
            user_ids: g.scoped.then_some(&g.user_ids),
        }
    }

    /// With `counts: {events, users}`.
    pub fn with_counts(mut self, counts: Value) -> Self {
        self.counts = Some(counts);
        self
    }
}

/// A stored fence as lists show it ([`GeofenceView`] without counts or distance).
pub fn view_json(doc: &Doc, id_key: &'static str) -> Result<Box<RawValue>, StoreError> {
    crate::store::rendered("geofence", &GeofenceView::new(&from_json(doc)?, id_key))
}
