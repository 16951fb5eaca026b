//! Nearby fence search ([`search_page`]): the fences of index cells wholly inside the circle are
//! counted from the cells' counts; only the cells the edge cuts and the nearest ones the page
//! needs are read ([`index::SearchPlan`]), each copy decoded for its id and shape alone, with a
//! cheap lower bound (the chord to its center) ruling out most far fences before the exact
//! distance. Only the fences shown are decoded whole and rendered.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::view::GeofenceView;
use super::{Geofence, cell_pk, counts_pk, index};
use crate::error::ApiError;
use crate::geometry::{LngLat, Placed};
use crate::project::Project;
use crate::store::{Doc, Query, SkRange, Store, StoreError, Table, from_json};

/// A fence found: its id, its distance in meters (0 inside) and its stored copy.
#[derive(Debug, Clone)]
pub struct Hit {
    pub id: String,
    pub distance_m: f64,
    doc: Doc,
}

impl Hit {
    /// The fence as a search shows it: its fields as v3 lists show them, then `distance` in
    /// meters to the centimetre, the search's own.
    pub fn view(&self) -> Result<FoundView, StoreError> {
        let fence: Geofence = from_json(&self.doc)?;
        let view = crate::store::rendered("geofence found", &GeofenceView::new(&fence, "id"))?;
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

/// What search decodes of a stored copy: its id and shape (the other fields skipped unread).
#[derive(Deserialize)]
struct Stored {
    id: String,
    center: LngLat,
    #[serde(default)]
    radius_m: Option<u32>,
    #[serde(default)]
    ring: Option<Vec<LngLat>>,
}

impl Stored {
    /// As [`Geofence::shape`] and [`Geofence::anchor`].
    fn shape(&self) -> index::Shape {
        match (&self.ring, self.radius_m) {
            (Some(ring), _) => index::Shape::Polygon(super::polygon(ring)),
            (None, r) => index::Shape::Circle { center: self.center, radius_m: f64::from(r.unwrap_or(0)) },
        }
    }
    fn anchor(&self) -> LngLat {
        self.ring.as_ref().and_then(|r| r.first().copied()).unwrap_or(self.center)
    }
}

impl Measured {
    fn of(g: &Stored) -> Self {
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

/// A fence found, its anchor told: counted from an inner cell's count, or not.
struct Found {
    hit: Hit,
    counted: bool,
}

/// Measures each copy in `docs` not measured before (`seen`); hands those within `radius_m` of
/// `here` to `keep`, with their anchors.
fn measure<'a>(
    docs: impl Iterator<Item = &'a Doc>,
    here: &Placed,
    radius_m: f64,
    seen: &mut std::collections::HashSet<String, foldhash::fast::RandomState>,
    mut keep: impl FnMut(Hit, LngLat),
) -> Result<(), ApiError> {
    for doc in docs {
        let g: Stored = from_json(doc)?;
        let f = Measured::of(&g);
        if f.distance_at_least(here) > radius_m || seen.contains(&g.id) {
            continue;
        }
        seen.insert(g.id.clone());
        let d = f.distance_m(here);
        if d <= radius_m {
            let anchor = g.anchor();
            keep(Hit { id: g.id, distance_m: d, doc: doc.clone() }, anchor);
        }
    }
    Ok(())
}

fn nearest_first(a: &Hit, b: &Hit) -> std::cmp::Ordering {
    a.distance_m.total_cmp(&b.distance_m).then_with(|| a.id.cmp(&b.id))
}

/// A count item of a cell.
#[derive(Deserialize)]
struct CellCount {
    sk: String,
    #[serde(default)]
    n: i64,
}

/// Page `page` (from 1) of `limit` fences whose shapes come within `radius_m` of `at`, nearest
/// first (ties by id), and how many there are in all,
/// without reading every fence in the circle ([`index::SearchPlan`]): the counts of the cells
/// wholly inside, the copies of the cells the circle's edge cuts, and the inner cells nearest
/// first until the page is settled (its last fence nearer than any unread cell).
pub async fn search_page(
    store: &dyn Store,
    p: &Project,
    at: LngLat,
    radius_m: f64,
    page: usize,
    limit: usize,
) -> Result<(Vec<Hit>, usize), ApiError> {
    let mut plan = index::SearchPlan::new(at, radius_m)?;
    let (ring, inner) = plan.ring_and_inner();
    let here = at.placed();
    let pid = &p.project_id;
    let cell_queries = |reads: Vec<(String, SkRange)>| -> Vec<Query> {
        reads.into_iter().map(|(c, range)| Query::new(cell_pk(pid, &c), range)).collect()
    };
    // First, together: the inner cells' counts, the ring, and the nearest inner cell.
    let partitions = plan.inner_by_partition();
    let mut queries: Vec<Query> = partitions.keys().map(|c| Query::new(counts_pk(pid, c), SkRange::All)).collect();
    let first = inner.len().min(1);
    queries.extend(cell_queries(plan.take(&[&ring[..], &inner[..first]].concat())));
    let docs = store.query_docs_many(Table::Main, &queries).await?;
    let (count_docs, copies) = docs.split_at(partitions.len());
    let mut counted = 0usize;
    for (names, docs) in partitions.values().zip(count_docs) {
        for doc in docs {
            let c: CellCount = from_json(doc)?;
            if names.contains(&c.sk) {
                let n = usize::try_from(c.n).map_err(|_| StoreError::Corrupt(format!("cell count {} below 0", c.n)))?;
                counted += n;
            }
        }
    }
    let mut seen = std::collections::HashSet::with_capacity_and_hasher(1024, Default::default());
    let mut found: Vec<Found> = Vec::new();
    measure(copies.iter().flatten(), &here, radius_m, &mut seen, |hit, anchor| {
        found.push(Found { hit, counted: plan.counted(anchor) })
    })?;
    // Every fence found but not counted is in the ring, read now: the total is known.
    let total = counted + found.iter().filter(|f| !f.counted).count();
    let (skip, want) = (page.saturating_sub(1).saturating_mul(limit), page.saturating_mul(limit).min(total));
    if skip >= total {
        return Ok((Vec::new(), total));
    }
    let mut next = first;
    loop {
        // Every fence nearer than the nearest unread cell has been read.
        let bound = inner.get(next).map_or(f64::INFINITY, |&i| plan.cells[i].near_m);
        if found.iter().filter(|f| f.hit.distance_m < bound).count() >= want || next == inner.len() {
            break;
        }
        // With `want` fences in hand, the cells nearer than the farthest of the nearest `want`;
        // else twice as many cells as read so far.
        let end = if found.len() >= want {
            let mut d: Vec<f64> = found.iter().map(|f| f.hit.distance_m).collect();
            let (_, kth, _) = d.select_nth_unstable_by(want - 1, f64::total_cmp);
            let kth = *kth;
            next + inner[next..].partition_point(|&i| plan.cells[i].near_m <= kth)
        } else {
            next + next.max(1)
        };
        let end = end.clamp(next + 1, inner.len());
        let queries = cell_queries(plan.take(&inner[next..end]));
        let docs = store.query_docs_many(Table::Main, &queries).await?;
        measure(docs.iter().flatten(), &here, radius_m, &mut seen, |hit, anchor| {
            found.push(Found { hit, counted: plan.counted(anchor) })
        })?;
        next = end;
    }
    let mut hits: Vec<Hit> = found.into_iter().map(|f| f.hit).collect();
    if want < hits.len() {
        hits.select_nth_unstable_by(want - 1, nearest_first);
        hits.truncate(want);
    }
    hits.sort_unstable_by(nearest_first);
    Ok((hits.into_iter().skip(skip).collect(), total))
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
