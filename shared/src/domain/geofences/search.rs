//! Nearby fence search: the index cells of one precision (chosen for the radius) that cover the
//! circle, read together; each copy decoded first for its id and shape only, a cheap lower bound
//! on the sphere ruling out most far fences before the exact distance; the whole fence shown only
//! for the hits of the page a caller shows (see [`Hit::view_json`]).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{cell_pk, index, polygon};
use crate::auth::Project;
use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::store::{Cond, Query, Store, StoreError, Table, WriteOp, from_json, to_item};

/// A fence found: its id, its distance in meters (0 inside) and its stored copy.
#[derive(Debug, Clone)]
pub struct Hit {
    pub id: String,
    pub distance_m: f64,
    doc: Vec<u8>,
}

impl Hit {
    /// The fence as a search shows it: as v3 lists show it (kept between requests, see
    /// [`crate::rendered`]), then `distance` in meters to the centimetre, the search's own.
    pub fn view_json(&self) -> Result<Box<RawValue>, StoreError> {
        let listed = super::view::view_json(&self.doc, "id")?;
        let meters = serde_json::to_string(&((self.distance_m * 100.0).round() / 100.0));
        let open = listed.get().strip_suffix('}').filter(|o| o.len() > 1);
        let json = open.zip(meters.ok()).map(|(o, m)| format!("{o},\"distance\":{m}}}"));
        json.and_then(|j| RawValue::from_string(j).ok())
            .ok_or_else(|| StoreError::Corrupt(format!("fence {}: its view is not an object", self.id)))
    }
}

/// The fields of a stored fence that search needs; serde skips the rest unparsed.
#[derive(Deserialize)]
struct Indexed {
    id: String,
    center: LngLat,
    radius_m: Option<u32>,
    ring: Option<Vec<LngLat>>,
}

/// How far the sphere may be from the ellipsoid, as a factor (haversine is within 0.5 % of the
/// geodesic; 1 % leaves room).
const SPHERE: f64 = 1.01;

impl Indexed {
    /// Meters that the fence is at least from `at`, from haversine distances alone. A polygon lies
    /// within the cap around its center that reaches its farthest vertex (caps are convex, so
    /// edges between vertices stay inside), widened for the sphere, for edges drawn straight in
    /// longitude/latitude (the in/out rule) and for a few meters of rounding.
    fn distance_at_least(&self, at: LngLat) -> f64 {
        let h = self.center.haversine_m(at) / SPHERE;
        match (&self.ring, self.radius_m) {
            (Some(ring), _) => {
                let reach = ring.iter().map(|v| self.center.haversine_m(*v)).fold(0.0, f64::max);
                h - reach * 1.05 - 10.0
            }
            (None, r) => h - f64::from(r.unwrap_or(0)),
        }
    }

    /// The exact distance (geodesic on WGS 84; 0 inside), as [`Geofence::shape`] measures it.
    fn distance_m(self, at: LngLat) -> f64 {
        match (self.ring, self.radius_m) {
            (Some(ring), _) => index::Shape::Polygon(polygon(&ring)).distance_m(at),
            (None, r) => {
                index::Shape::Circle { center: self.center, radius_m: f64::from(r.unwrap_or(0)) }.distance_m(at)
            }
        }
    }
}

/// Fences whose shape comes within `radius_m` of `at`, nearest first (ties by id), and how many
/// index items were read.
pub async fn search(store: &dyn Store, p: &Project, at: LngLat, radius_m: f64) -> Result<(Vec<Hit>, usize), ApiError> {
    let coarse = radius_m >= index::COARSE_FROM_M && coarse_indexed(store, &p.project_id).await?;
    let cover = index::fence_search_cells(at, radius_m, coarse)?;
    let set: std::collections::HashSet<String> = cover.iter().cloned().collect();
    let queries: Vec<Query> =
        cover.iter().map(|c| Query::new(cell_pk(&p.project_id, c), index::copy_range(c, &set))).collect();
    let cells = store.query_docs_many(Table::Main, &queries).await?;
    let read = cells.iter().map(Vec::len).sum();
    let mut seen = std::collections::HashSet::with_capacity(read);
    let mut hits = Vec::new();
    for doc in cells.into_iter().flatten() {
        let f: Indexed = from_json(&doc)?;
        if f.distance_at_least(at) > radius_m || !seen.insert(f.id.clone()) {
            continue;
        }
        let id = f.id.clone();
        let d = f.distance_m(at);
        if d <= radius_m {
            hits.push(Hit { id, distance_m: d, doc });
        }
    }
    hits.sort_by(|a, b| a.distance_m.total_cmp(&b.distance_m).then_with(|| a.id.cmp(&b.id)));
    Ok((hits, read))
}

/// The item saying every fence of the project has its coarse (precision 5) copies: written with
/// the project, since fences created before those copies existed have only fine ones. Without it,
/// wide searches read the fine cells: slower, never a fence missed.
fn coarse_marker_pk(project_id: &str) -> String {
    format!("{project_id}#C5")
}

/// The marker's write, for a new project's creation.
pub fn coarse_indexed_from_start(project_id: &str) -> Result<WriteOp, ApiError> {
    let item = to_item(&coarse_marker_pk(project_id), "-", &serde_json::json!({"coarse_cells": true}))?;
    Ok(WriteOp::Put { table: Table::Main, item, cond: Cond::None })
}

/// Whether every fence of the project has its coarse copies. A marker is never taken away, so a
/// project once seen marked is remembered for the process's life and wide searches stop reading it.
pub async fn coarse_indexed(store: &dyn Store, project_id: &str) -> Result<bool, ApiError> {
    static MARKED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::OnceLock::new();
    let marked = MARKED.get_or_init(Default::default);
    if marked.lock().unwrap_or_else(|e| e.into_inner()).contains(project_id) {
        return Ok(true);
    }
    let found = store.get(Table::Main, &coarse_marker_pk(project_id), "-").await?.is_some();
    if found {
        marked.lock().unwrap_or_else(|e| e.into_inner()).insert(project_id.to_owned());
    }
    Ok(found)
}
