//! Nearby fence search: the index cells of one precision (chosen for the radius) that cover the
//! circle, read together; each copy taken for its id and shape, with a cheap lower bound (the
//! chord to its center) ruling out most far fences before the exact distance. Only the fences
//! shown are rendered.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::view::GeofenceView;
use super::{Geofence, cell_pk, index};
use crate::error::ApiError;
use crate::geometry::{LngLat, Placed};
use crate::project::Project;
use crate::store::{Query, Store, StoreError, Table, from_json};

/// A fence found: its id, its distance in meters (0 inside) and the fence.
#[derive(Debug, Clone)]
pub struct Hit {
    pub id: String,
    pub distance_m: f64,
    fence: Geofence,
}

impl Hit {
    /// The fence as a search shows it: its fields as v3 lists show them, then `distance` in
    /// meters to the centimetre, the search's own.
    pub fn view(&self) -> Result<FoundView, StoreError> {
        let view = crate::store::rendered("geofence found", &GeofenceView::new(&self.fence, "id"))?;
        let head = head_of(&view).map_err(|e| StoreError::Corrupt(format!("rendering geofence found: {e}")))?;
        Ok(FoundView { head, distance: (self.distance_m * 100.0).round() / 100.0 })
    }
}

/// A found fence as a search writes it ([`Hit::view`]): its fields as they are (written, never
/// parsed again), then its distance.
pub struct FoundView {
    head: String,
    distance: f64,
}

impl FoundView {
    /// About the bytes it writes.
    pub fn size_hint(&self) -> usize {
        self.head.len() + 40
    }

    /// Its JSON: the fields' text and the distance after them.
    fn write_to(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(if self.head.len() > 1 { b",\"distance\":" } else { b"\"distance\":" });
        serde_json::to_writer(&mut *out, &self.distance)?;
        out.push(b'}');
        Ok(())
    }
}

/// Found fences as a JSON array, written by hand into an answer.
pub fn write_found(found: &[FoundView], out: &mut Vec<u8>) -> serde_json::Result<()> {
    crate::body::write_array(out, found, FoundView::write_to)
}

/// What search measures of a fence.
#[derive(Debug)]
struct Measured {
    /// The center, placed once for every copy measured.
    center: Placed,
    shape: index::Shape,
    /// Meters from the center to the farthest vertex (0 for a circle).
    reach_m: f64,
}

/// How far the sphere may be from the ellipsoid, as a factor (haversine, which measures a
/// polygon's reach, is within 0.5 % of the geodesic; 1 % leaves room).
const SPHERE: f64 = 1.01;

impl Measured {
    fn of(g: &Geofence) -> Self {
        let reach_m = g.ring.iter().flatten().map(|v| g.center.haversine_m(*v)).fold(0.0, f64::max);
        Self { center: g.center.placed(), shape: g.shape(), reach_m }
    }

    /// Meters that the fence is at least from `at`, from the chord to its center alone (never
    /// longer than the geodesic). A polygon lies within the cap around its center that reaches its
    /// farthest vertex (caps are convex, so edges between vertices stay inside), widened for the
    /// sphere its reach was measured on, for edges drawn straight in longitude/latitude (the in/out
    /// rule) and for a few meters of rounding.
    fn distance_at_least(&self, at: &Placed) -> f64 {
        let c = self.center.chord_m(at);
        match self.shape {
            index::Shape::Polygon(_) => c - self.reach_m * SPHERE * 1.05 - 10.0,
            index::Shape::Circle { radius_m, .. } => c - radius_m,
        }
    }

    /// Meters from `at` to the fence (0 inside): [`index::Shape::distance_m`], a circle's from
    /// its placed center.
    fn distance_m(&self, at: &Placed) -> f64 {
        match self.shape {
            index::Shape::Circle { radius_m, .. } => (self.center.distance_m(at) - radius_m).max(0.0),
            index::Shape::Polygon(_) => self.shape.distance_m(at.at),
        }
    }
}

/// A view's fields, sorted, as the text of one JSON object without its closing brace (`{` alone
/// when it has none).
fn head_of(view: &RawValue) -> serde_json::Result<String> {
    let fields: BTreeMap<String, &RawValue> = serde_json::from_str(view.get())?;
    let mut head = serde_json::to_string(&fields)?;
    head.pop();
    Ok(head)
}

/// Fences whose shape comes within `radius_m` of `at`, nearest first (ties by id), and how many
/// index items were read.
pub async fn search(store: &dyn Store, p: &Project, at: LngLat, radius_m: f64) -> Result<(Vec<Hit>, usize), ApiError> {
    let reads = index::fence_search_reads(at, radius_m)?;
    let queries: Vec<Query> =
        reads.into_iter().map(|(c, range)| Query::new(cell_pk(&p.project_id, &c), range)).collect();
    let cells = store.query_docs_many(Table::Main, &queries).await?;
    let read = cells.iter().map(Vec::len).sum();
    let mut seen = std::collections::HashSet::with_capacity_and_hasher(read, foldhash::fast::RandomState::default());
    let (here, mut hits) = (at.placed(), Vec::new());
    for doc in cells.iter().flatten() {
        let g: Geofence = from_json(doc)?;
        let f = Measured::of(&g);
        if f.distance_at_least(&here) > radius_m || !seen.insert(g.id.clone()) {
            continue;
        }
        let d = f.distance_m(&here);
        if d <= radius_m {
            hits.push(Hit { id: g.id.clone(), distance_m: d, fence: g });
        }
    }
    hits.sort_by(|a, b| a.distance_m.total_cmp(&b.distance_m).then_with(|| a.id.cmp(&b.id)));
    Ok((hits, read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_found_fence_is_its_sorted_fields_then_its_distance() {
        let view = RawValue::from_string(r#"{"z":1,"a":"x \"q\"","m":[1,{"b":2}]}"#.into()).unwrap();
        let head = head_of(&view).unwrap();
        let none = head_of(&RawValue::from_string("{}".into()).unwrap()).unwrap();
        let found = [FoundView { head, distance: 12.5 }, FoundView { head: none, distance: 0.0 }];
        let mut out = Vec::new();
        write_found(&found, &mut out).unwrap();
        let want = r#"[{"a":"x \"q\"","m":[1,{"b":2}],"z":1,"distance":12.5},{"distance":0.0}]"#;
        assert_eq!(String::from_utf8(out).unwrap(), want);
        for f in &found {
            let mut one = Vec::new();
            f.write_to(&mut one).unwrap();
            assert!(f.size_hint() >= one.len(), "{} < {}", f.size_hint(), one.len());
        }
    }
}
