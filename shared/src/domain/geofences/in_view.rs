//! Fences in a map's view ([`fences_in`]): the fences whose shapes meet a bounding box, read from
//! the geofence cell index (`<project>#C#<cell>` copies) cell by cell in the box's order (rows
//! from the south, each from the west: [`index::box_reads`]), each cell's fences in id order. A
//! fence in several cells of the box is listed once, in the first of them in that order (every
//! copy carries the fence's cells), so the cursor `<cell>.<fence id>` of a page's last fence is
//! stable: the next page starts after it whatever was written meanwhile. Only what a map draws is
//! answered ([`InView`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::index::{self, MAX_VIEW_CELLS, ViewCursor};
use super::view::{Enabled, PolygonView};
use super::{GeometryType, cell_pk};
use crate::error::ApiError;
use crate::geometry::{GeoPoint, LngLat};
use crate::project::Project;
use crate::store::{Query, Store, StoreError, Table, from_json};
use crate::time::Timestamp;

/// Most fences a page lists by default, and at most: a fence's answer is 5 to 50 times a
/// user position's, so pages are smaller than the users' (5,000 / 10,000).
pub const DEFAULT_VIEW_LIMIT: usize = 2_000;
pub const MAX_VIEW_LIMIT: usize = 5_000;
/// Cells read at a time: a page of 2,000 fences at city density (250 a km²) fills in about 20
/// cells, so a page stops reading soon after it is full.
const CELLS_A_ROUND: usize = index::CELL_READS_IN_FLIGHT;

/// What a view decodes of a stored copy (its other fields skipped unread).
#[derive(Debug, Deserialize)]
struct Drawn {
    id: String,
    geometry_type: GeometryType,
    center: LngLat,
    #[serde(default)]
    radius_m: Option<u32>,
    #[serde(default)]
    ring: Option<Vec<LngLat>>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    color_code: Option<String>,
    is_enabled: bool,
    #[serde(default)]
    active_from: Option<Timestamp>,
    #[serde(default)]
    active_until: Option<Timestamp>,
    #[serde(default)]
    scoped: bool,
    #[serde(default)]
    cells: Vec<String>,
}

impl Drawn {
    /// As [`super::Geofence::shape`].
    fn shape(&self) -> index::Shape {
        match (&self.ring, self.radius_m) {
            (Some(ring), _) => index::Shape::Polygon(super::polygon(ring)),
            (None, r) => index::Shape::Circle { center: self.center, radius_m: f64::from(r.unwrap_or(0)) },
        }
    }

    fn render(&self) -> Result<Box<RawValue>, StoreError> {
        let is_enabled = if self.scoped {
            Enabled::Window(
                self.is_enabled,
                self.active_from.map(|t| t.format(None)),
                self.active_until.map(|t| t.format(None)),
            )
        } else {
            Enabled::Flag(self.is_enabled)
        };
        let view = InView {
            color_code: &self.color_code,
            description: &self.description,
            geometry: self.ring.as_ref().map(PolygonView::new),
            geometry_center: self.center.into(),
            geometry_radius: self.radius_m,
            geometry_type: self.geometry_type.as_str(),
            id: &self.id,
            is_enabled,
        };
        crate::store::rendered("geofence in view", &view)
    }
}

/// A fence as a view lists it: what a map draws, under the names the geofence lists use (so a
/// client draws either the same way).
#[derive(Debug, Serialize)]
struct InView<'a> {
    color_code: &'a Option<String>,
    description: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    geometry: Option<PolygonView<'a>>,
    geometry_center: GeoPoint,
    #[serde(skip_serializing_if = "Option::is_none")]
    geometry_radius: Option<u32>,
    geometry_type: &'static str,
    id: &'a str,
    is_enabled: Enabled,
}

/// The project's live fences whose shapes meet `bbox` (west, south, east, north), at most
/// `limit`, after `after`, each once (see the module's doc), with the cursor of the last one
/// listed when more are there. A view wider than [`MAX_VIEW_CELLS`] cells is a 400 naming `bbox`.
pub async fn fences_in(
    store: &dyn Store,
    p: &Project,
    bbox: geo::Rect<f64>,
    limit: usize,
    after: Option<&ViewCursor>,
) -> Result<(Vec<Box<RawValue>>, Option<ViewCursor>), ApiError> {
    let reads = index::box_reads("bbox", &bbox, MAX_VIEW_CELLS)?;
    let order: HashMap<&str, usize, foldhash::fast::FixedState> =
        reads.iter().enumerate().map(|(k, (c, _))| (c.as_str(), k)).collect();
    let start = after.map_or(0, |a| order.get(a.cell.as_str()).copied().unwrap_or(reads.len()));
    let mut out = Vec::new();
    let mut last: Option<(usize, String)> = None;
    let mut at = start;
    while at < reads.len() {
        let round = &reads[at..reads.len().min(at + CELLS_A_ROUND)];
        // Eventually consistent: a map's view, read again on the next pan (half the read units).
        let queries: Vec<Query> =
            round.iter().map(|(c, r)| Query::new(cell_pk(&p.project_id, c), r.clone()).eventual()).collect();
        for (k, docs) in store.query_docs_many(Table::Main, &queries).await?.into_iter().enumerate() {
            let cell = at + k;
            let mut here: Vec<Drawn> = Vec::new();
            for doc in docs {
                let f: Drawn = from_json(&doc)?;
                // Listed in its first cell of the box only; after the cursor's fence in its cell.
                let first = f.cells.iter().filter_map(|c| order.get(c.as_str())).min();
                if first != Some(&cell)
                    || after.is_some_and(|a| cell == start && f.id.as_str() <= a.id.as_str())
                    || !f.shape().overlaps(&bbox)
                {
                    continue;
                }
                here.push(f);
            }
            here.sort_unstable_by(|a, b| a.id.cmp(&b.id));
            for f in here {
                if out.len() == limit {
                    let next = last.map(|(c, id)| ViewCursor { cell: reads[c].0.clone(), id });
                    return Ok((out, next));
                }
                out.push(f.render()?);
                last = Some((cell, f.id));
            }
        }
        at += round.len();
    }
    Ok((out, None))
}
