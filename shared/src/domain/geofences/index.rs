//! The geohash index of geofences: a fence is indexed under every cell of [`PRECISION`] that its
//! shape overlaps; an evaluation reads the one cell that holds the location, a search the cells
//! covering its circle as [`SearchPlan`] orders them. Exact geometry decides in the end.
//!
//! Precision 6 cells are about 1.2 km × 0.6 km at the equator (narrower towards the poles): a
//! 50 m fence falls in 1 to 4 cells, a 1000 m fence in about 6 to 15, and a location's cell holds
//! only the fences near it. A search reads a fence about once, not once per cell of its cover
//! that holds it ([`range_for`]), and a wide one reads only the cells its page needs: the rest
//! are counted ([`count_cell`]).
//! Shapes and search circles must stay between latitudes −85 and 85 and must not cross the
//! antimeridian; anything else is refused with 400.

use geo::{Contains, HaversineClosestPoint, Intersects, Rect};

use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::store::SkRange;

/// The precision of the index's cells.
pub const PRECISION: usize = 6;
/// The precision of the partitions that hold the index cells' counts (a partition holds the
/// counts of the 32 cells within one cell of this precision).
pub const COARSE_PRECISION: usize = 5;

/// A cell's width and height in degrees at a precision: of its 5 bits a character, longitude
/// takes the first and every other one (so one more than latitude when the count is odd).
fn cell_size(precision: usize) -> (f64, f64) {
    let bits = 5 * precision as i32;
    (360.0 / 2f64.powi((bits + 1) / 2), 180.0 / 2f64.powi(bits / 2))
}
/// Latitude limit of indexed shapes and searches.
pub const MAX_LAT: f64 = 85.0;
/// Meters per degree, for bounding boxes only (exact tests use `geo`): a degree of latitude is
/// at least 110,574 m (at the equator), a degree of longitude at least 111,320 m × cos(lat);
/// the box uses the smaller figures, with 1% to spare, so it always holds the whole circle.
const M_PER_DEG_LAT_MIN: f64 = 110_574.0;
const M_PER_DEG_LNG_EQ: f64 = 111_320.0;
const MARGIN: f64 = 1.01;

/// A shape that can be indexed and tested.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Circle { center: LngLat, radius_m: f64 },
    Polygon(geo::Polygon<f64>),
}

/// Bounding box (min lng, min lat, max lng, max lat) of a circle, refusing the areas the index
/// does not cover.
pub fn circle_bbox(field: &str, center: LngLat, radius_m: f64) -> Result<Rect<f64>, ApiError> {
    let dlat = radius_m * MARGIN / M_PER_DEG_LAT_MIN;
    let (lat0, lat1) = (center.lat - dlat, center.lat + dlat);
    if lat0 < -MAX_LAT || lat1 > MAX_LAT {
        return Err(ApiError::field(field, format!("areas beyond latitude ±{MAX_LAT} are not supported")));
    }
    let dlng = radius_m * MARGIN / (M_PER_DEG_LNG_EQ * lat1.abs().max(lat0.abs()).to_radians().cos());
    let (lng0, lng1) = (center.lng - dlng, center.lng + dlng);
    if lng0 < -180.0 || lng1 > 180.0 {
        return Err(ApiError::field(field, "areas crossing the antimeridian (longitude ±180) are not supported"));
    }
    Ok(Rect::new(geo::Coord { x: lng0, y: lat0 }, geo::Coord { x: lng1, y: lat1 }))
}

impl Shape {
    pub fn bbox(&self, field: &str) -> Result<Rect<f64>, ApiError> {
        match self {
            Shape::Circle { center, radius_m } => circle_bbox(field, *center, *radius_m),
            Shape::Polygon(p) => {
                let r = geo::BoundingRect::bounding_rect(p)
                    .ok_or_else(|| ApiError::field(field, "a polygon needs at least 3 distinct points"))?;
                if r.min().y < -MAX_LAT || r.max().y > MAX_LAT {
                    return Err(ApiError::field(field, format!("areas beyond latitude ±{MAX_LAT} are not supported")));
                }
                // A ring spanning more than half the globe in longitude is taken as crossing the
                // antimeridian (its edges would be read the short way round).
                if r.max().x - r.min().x > 180.0 {
                    return Err(ApiError::field(
                        field,
                        "areas crossing the antimeridian (longitude ±180) are not supported",
                    ));
                }
                Ok(r)
            }
        }
    }

    /// Whether the shape overlaps the rectangle (a geohash cell, a map's view).
    pub fn overlaps(&self, cell: &Rect<f64>) -> bool {
        match self {
            Shape::Circle { center, radius_m } => {
                let clamped = LngLat {
                    lng: center.lng.clamp(cell.min().x, cell.max().x),
                    lat: center.lat.clamp(cell.min().y, cell.max().y),
                };
                // Haversine for the cover: a cell is included if within the radius plus 0.5%,
                // so the sphere/ellipsoid difference can only add a cell, never lose one.
                center.haversine_m(clamped) <= radius_m * 1.005
            }
            Shape::Polygon(p) => cell.intersects(p),
        }
    }

    /// Whether the point is inside (boundary included).
    pub fn contains(&self, p: LngLat) -> bool {
        match self {
            Shape::Circle { center, radius_m } => {
                // A point outside the circle's bounding box (`circle_bbox`, which holds the whole
                // circle) is outside: most fences of a cell are, and the box takes no geodesic.
                let reach = radius_m * MARGIN;
                let dlat = reach / M_PER_DEG_LAT_MIN;
                if (p.lat - center.lat).abs() > dlat {
                    return false;
                }
                let cos = (center.lat.abs() + dlat).to_radians().cos();
                if cos > 0.0 && (p.lng - center.lng).abs() * M_PER_DEG_LNG_EQ * cos > reach {
                    return false;
                }
                center.distance_m(p) <= *radius_m
            }
            Shape::Polygon(poly) => poly.intersects(&p.point()),
        }
    }

    /// Meters from the point to the shape (0 inside), geodesic on the WGS 84 ellipsoid: for
    /// polygons, to the nearest point of the boundary's geodesic edges. Only the edges the sphere
    /// puts within its error (0.5 %) of the nearest are measured on the ellipsoid.
    pub fn distance_m(&self, p: LngLat) -> f64 {
        match self {
            Shape::Circle { center, radius_m } => (center.distance_m(p) - radius_m).max(0.0),
            Shape::Polygon(poly) => {
                if poly.intersects(&p.point()) || poly.contains(&p.point()) {
                    return 0.0;
                }
                let on_sphere: Vec<(f64, geo::Line<f64>)> = poly
                    .exterior()
                    .lines()
                    .map(|l| match l.haversine_closest_point(&p.point()) {
                        geo::Closest::Intersection(q) | geo::Closest::SinglePoint(q) => {
                            (p.haversine_m(LngLat { lng: q.x(), lat: q.y() }), l)
                        }
                        geo::Closest::Indeterminate => (f64::INFINITY, l),
                    })
                    .collect();
                let nearest = on_sphere.iter().map(|(d, _)| *d).fold(f64::INFINITY, f64::min);
                on_sphere
                    .iter()
                    .filter(|(d, _)| *d <= nearest * SPHERE_MARGIN + 1.0)
                    .map(|(_, l)| {
                        let (a, b) = (LngLat { lng: l.start.x, lat: l.start.y }, LngLat { lng: l.end.x, lat: l.end.y });
                        p.segment_distance_m(a, b)
                    })
                    .fold(f64::INFINITY, f64::min)
            }
        }
    }

    /// The cells of [`PRECISION`] the shape overlaps.
    pub fn cells(&self, field: &str) -> Result<Vec<String>, ApiError> {
        let bbox = self.bbox(field)?;
        names(grid_in(field, &bbox, PRECISION, |cell| self.overlaps(cell))?)
    }
}

/// Index cells a search reads at once (a 10 km circle covers several hundred; unbounded, they
/// would all be in flight together).
pub const CELL_READS_IN_FLIGHT: usize = 32;

/// How far (as a factor) an edge's distance on the sphere may be from the nearest edge's and still
/// be the nearest on the ellipsoid: the sphere is within 0.5 % of the ellipsoid, both ways.
const SPHERE_MARGIN: f64 = 1.011;

/// Most cells of a bounding box examined: a 10 km search circle near latitude 85 spans ~6,800;
/// anything larger is refused before any work (a continent-sized polygon would take hours).
pub const MAX_BBOX_CELLS: i64 = 8_000;

/// A cell of a precision by its column (from longitude −180) and row (from latitude −90).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Grid(i64, i64);

impl Grid {
    fn rect(self, precision: usize) -> Rect<f64> {
        let (cell_lng, cell_lat) = cell_size(precision);
        let min = geo::Coord { x: -180.0 + self.0 as f64 * cell_lng, y: -90.0 + self.1 as f64 * cell_lat };
        Rect::new(min, geo::Coord { x: min.x + cell_lng, y: min.y + cell_lat })
    }

    fn geohash(self, precision: usize) -> Result<String, ApiError> {
        geohash::encode(self.rect(precision).center(), precision).map_err(ApiError::internal)
    }
}

/// The cells of `precision` (as [`Grid`]s) whose rectangles meet `bbox` and pass `keep`, row by
/// row from the south.
fn grid_in(
    field: &str,
    bbox: &Rect<f64>,
    precision: usize,
    keep: impl Fn(&Rect<f64>) -> bool,
) -> Result<Vec<Grid>, ApiError> {
    let (cell_lng, cell_lat) = cell_size(precision);
    let i0 = ((bbox.min().x + 180.0) / cell_lng).floor() as i64;
    let i1 = ((bbox.max().x + 180.0) / cell_lng).floor() as i64;
    let j0 = ((bbox.min().y + 90.0) / cell_lat).floor() as i64;
    let j1 = ((bbox.max().y + 90.0) / cell_lat).floor() as i64;
    if (i1 - i0 + 1).saturating_mul(j1 - j0 + 1) > MAX_BBOX_CELLS {
        return Err(ApiError::field(
            field,
            "the area is too large for the index (a geofence may span a few kilometers)",
        ));
    }
    Ok((j0..=j1).flat_map(|j| (i0..=i1).map(move |i| Grid(i, j))).filter(|g| keep(&g.rect(precision))).collect())
}

/// The cells of the row below a cell that touch it.
const BELOW: [geohash::Direction; 3] = [geohash::Direction::SW, geohash::Direction::S, geohash::Direction::SE];

/// Sort-key prefixes of a fence's cell copies, by whether the fence is also in the cell to the
/// west, and in one of the three cells below (south-west, south, south-east; same precision). A copy with neither keeps the bare fence id, as
/// every copy did before these classes (so older copies read as this class, wherever they are);
/// the order west-only < bare id (hex) < south-only, with both after all, makes each set of
/// classes a search needs one sort-key range (see [`copy_range`]).
const WEST_ONLY: &str = "-";
const BELOW_ONLY: &str = "s";
const BOTH: &str = "x";
/// Above every fence id (24 lowercase hex digits) after a given first character.
const ID_END: &str = "~";

/// The sort key of the fence's copy in each of `cells` (as the fence records them), in their
/// order.
pub fn copy_sort_keys(cells: &[String], id: &str) -> Vec<String> {
    let set: std::collections::HashSet<&str> = cells.iter().map(String::as_str).collect();
    let has = |c: &str, d| geohash::neighbor(c, d).is_ok_and(|n| set.contains(n.as_str()));
    cells
        .iter()
        .map(|c| {
            let below = BELOW.iter().any(|d| has(c, *d));
            let prefix = match (has(c, geohash::Direction::W), below) {
                (false, false) => "",
                (true, false) => WEST_ONLY,
                (false, true) => BELOW_ONLY,
                (true, true) => BOTH,
            };
            format!("{prefix}{id}")
        })
        .collect()
}

/// The fence id in a copy's sort key.
pub fn copy_fence_id(sk: &str) -> &str {
    sk.strip_prefix([WEST_ONLY, BELOW_ONLY, BOTH].map(|p| p.as_bytes()[0] as char)).unwrap_or(sk)
}

/// The copies a search reads in a cell of its cover (cells of one precision), given whether the
/// cover holds the cell to its west (`west`) and all three below it (`below`). A copy that says
/// the fence is also in the cell to its west is skipped when the cover holds that cell, and one
/// that says the fence is in a cell below when the cover holds all three: the fence is in the
/// cover there too. Every fence meeting the cover is still read once at least: its cell within
/// the cover in the lowest row, westernmost, has no cell of the fence within the cover to its
/// west or below, so that copy is in the range read. A fence is then read about once (more
/// where its cells step out westwards row by row), not once per cell of the cover it is in.
fn range_for(west: bool, below: bool) -> SkRange {
    let upto = |prefix: &str| format!("{prefix}{ID_END}");
    match (west, below) {
        (false, false) => SkRange::All,
        (true, false) => SkRange::Between("0".into(), upto(BELOW_ONLY)),
        (false, true) => SkRange::Between(WEST_ONLY.into(), upto("f")),
        (true, true) => SkRange::Between("0".into(), upto("f")),
    }
}

/// The cell that holds the point.
pub fn cell_of(p: LngLat) -> Result<String, ApiError> {
    p.geohash(PRECISION)
}

/// The cells of [`PRECISION`] covering a circle (nearby users are indexed in them too).
pub fn search_cells(center: LngLat, radius_m: f64) -> Result<Vec<String>, ApiError> {
    names(cover_grid(center, radius_m)?)
}

/// The cells of [`PRECISION`] meeting a bounding box, or a 400 naming `field` past `max` cells
/// (a map's view of users: a wider one is asked to zoom in).
pub fn box_cells(field: &str, bbox: &Rect<f64>, max: usize) -> Result<Vec<String>, ApiError> {
    let (w, h) = cell_size(PRECISION);
    let cols = ((bbox.max().x + 180.0) / w).floor() - ((bbox.min().x + 180.0) / w).floor() + 1.0;
    let rows = ((bbox.max().y + 90.0) / h).floor() - ((bbox.min().y + 90.0) / h).floor() + 1.0;
    if cols * rows > max as f64 {
        return Err(ApiError::field(
            field,
            format!("spans {} index cells of about 1.2 × 0.6 km, more than {max}: zoom in", (cols * rows) as u64),
        ));
    }
    names(grid_in(field, bbox, PRECISION, |_| true)?)
}

/// [`box_cells`], each with the copies a listing of the box reads there ([`range_for`]): a copy
/// saying its fence is also in the cell to the west, or in a cell below, is skipped where the box
/// holds those cells, as they come first in the box's order (rows from the south, each from the
/// west) and the fence is read there.
pub fn box_reads(field: &str, bbox: &Rect<f64>, max: usize) -> Result<Vec<(String, SkRange)>, ApiError> {
    let names = box_cells(field, bbox, max)?;
    let grid = grid_in(field, bbox, PRECISION, |_| true)?;
    let (Some(&Grid(i0, j0)), Some(&Grid(i1, _))) = (grid.first(), grid.last()) else { return Ok(Vec::new()) };
    let has = |i: i64, j: i64| (i0..=i1).contains(&i) && j >= j0;
    Ok(names
        .into_iter()
        .zip(grid)
        .map(|(name, Grid(i, j))| (name, range_for(has(i - 1, j), (-1..=1).all(|d| has(i + d, j - 1)))))
        .collect())
}

/// The fine cell whose rectangle (closed, as [`Grid::rect`] computes it) holds `p`: floor may
/// put a point on a cell's edge one cell off, so the neighbour is taken when the rectangle says so.
fn grid_of(p: LngLat, precision: usize) -> Grid {
    let (w, h) = cell_size(precision);
    let bits = 5 * precision as u32;
    let (cols, rows) = (1i64 << bits.div_ceil(2), 1i64 << (bits / 2));
    let mut g = Grid(
        (((p.lng + 180.0) / w).floor() as i64).clamp(0, cols - 1),
        (((p.lat + 90.0) / h).floor() as i64).clamp(0, rows - 1),
    );
    let r = g.rect(precision);
    if p.lng < r.min().x {
        g.0 -= 1;
    } else if p.lng > r.max().x {
        g.0 += 1;
    }
    if p.lat < r.min().y {
        g.1 -= 1;
    } else if p.lat > r.max().y {
        g.1 += 1;
    }
    Grid(g.0.clamp(0, cols - 1), g.1.clamp(0, rows - 1))
}

/// The cell a fence is counted in for search totals: the fine cell holding its anchor (a point of
/// its shape: a circle's center, a polygon's first vertex). Its first [`COARSE_PRECISION`]
/// characters name the partition of counts it is kept in.
pub fn count_cell(anchor: LngLat) -> Result<String, ApiError> {
    grid_of(anchor, PRECISION).geohash(PRECISION)
}

/// How far the sphere (haversine) may be from the ellipsoid, as a factor, with room to spare: it
/// is within 0.5 % ([`SPHERE_MARGIN`]'s reason).
const PLAN_MARGIN: f64 = 1.01;

/// A fine cell of a search's cover, as [`SearchPlan`] reads it.
#[derive(Debug, Clone)]
pub struct CoverCell {
    grid: Grid,
    /// Its geohash.
    pub name: String,
    /// Meters every point of the cell is at least from the search's center.
    pub near_m: f64,
    /// Every point of the cell lies within the radius: every fence counted in it is found.
    pub inner: bool,
}

/// The reads of a search that counts what it finds without reading all of it. The fine cells
/// covering the circle are of two kinds: inner cells, wholly within the radius, and the ring, the
/// cells the circle's edge cuts. A fence counted in an inner cell ([`count_cell`]) has a point
/// there, so it is found: those are added from the counts unread. Every other fence found is in
/// a cell of the ring: its count cell is in the ring, or outside the circle, and then its shape
/// (connected) crosses the circle's edge, in a ring cell. So the ring's copies and the inner
/// cells' counts give the total exactly. The nearest fences are then read from the inner cells
/// outward ([`SearchPlan::take`]): a fence nearer than the nearest unread cell has a point in a
/// read cell, so it has been read.
#[derive(Debug)]
pub struct SearchPlan {
    pub cells: Vec<CoverCell>,
    inner: std::collections::HashSet<Grid, foldhash::fast::FixedState>,
    read: std::collections::HashSet<Grid, foldhash::fast::FixedState>,
}

impl SearchPlan {
    pub fn new(center: LngLat, radius_m: f64) -> Result<Self, ApiError> {
        let cells = cover_grid(center, radius_m)?
            .into_iter()
            .map(|g| {
                let r = g.rect(PRECISION);
                let (lo, hi) = (r.min(), r.max());
                let clamped = LngLat { lng: center.lng.clamp(lo.x, hi.x), lat: center.lat.clamp(lo.y, hi.y) };
                // The farthest point of a cell is a corner (on the sphere, distance along a
                // parallel grows with the difference of longitude, and along a meridian has no
                // maximum inside a segment); the nearest is the clamped point, to well under the
                // margin at these sizes.
                let far = [(lo.x, lo.y), (lo.x, hi.y), (hi.x, lo.y), (hi.x, hi.y)]
                    .into_iter()
                    .map(|(lng, lat)| center.haversine_m(LngLat { lng, lat }))
                    .fold(0.0, f64::max);
                Ok(CoverCell {
                    grid: g,
                    name: g.geohash(PRECISION)?,
                    near_m: (center.haversine_m(clamped) / PLAN_MARGIN - 1.0).max(0.0),
                    inner: far * PLAN_MARGIN + 1.0 <= radius_m,
                })
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        let inner = cells.iter().filter(|c| c.inner).map(|c| c.grid).collect();
        Ok(Self { cells, inner, read: Default::default() })
    }

    /// Whether a fence with this anchor is counted in an inner cell (so found, and in the total
    /// from the counts).
    pub fn counted(&self, anchor: LngLat) -> bool {
        self.inner.contains(&grid_of(anchor, PRECISION))
    }

    /// The indices of the ring's cells, and of the inner cells nearest first.
    pub fn ring_and_inner(&self) -> (Vec<usize>, Vec<usize>) {
        let (mut inner, ring): (Vec<usize>, Vec<usize>) = (0..self.cells.len()).partition(|&i| self.cells[i].inner);
        inner.sort_by(|&a, &b| self.cells[a].near_m.total_cmp(&self.cells[b].near_m).then(a.cmp(&b)));
        (ring, inner)
    }

    /// The inner cells' names, by the partition of counts that holds them (its coarse cell).
    pub fn inner_by_partition(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut out = std::collections::BTreeMap::<String, Vec<String>>::new();
        for c in self.cells.iter().filter(|c| c.inner) {
            out.entry(c.name[..COARSE_PRECISION].to_owned()).or_default().push(c.name.clone());
        }
        out
    }

    /// The reads of these cells (indices), each with its range of copies ([`range_for`]) told
    /// against every cell read so far and these: a fence meeting the cells read by then is still
    /// read once at least, in its westernmost cell of their lowest row.
    pub fn take(&mut self, cells: &[usize]) -> Vec<(String, SkRange)> {
        self.read.extend(cells.iter().map(|&i| self.cells[i].grid));
        let has = |i, j| self.read.contains(&Grid(i, j));
        cells
            .iter()
            .map(|&c| {
                let Grid(i, j) = self.cells[c].grid;
                (self.cells[c].name.clone(), range_for(has(i - 1, j), (-1..=1).all(|d| has(i + d, j - 1))))
            })
            .collect()
    }
}

/// The cells of [`PRECISION`] covering a circle, as places in the grid.
fn cover_grid(center: LngLat, radius_m: f64) -> Result<Vec<Grid>, ApiError> {
    let circle = Shape::Circle { center, radius_m };
    grid_in("radius", &circle.bbox("radius")?, PRECISION, |cell| circle.overlaps(cell))
}

/// The geohashes of cells of [`PRECISION`].
fn names(cells: Vec<Grid>) -> Result<Vec<String>, ApiError> {
    cells.into_iter().map(|g| g.geohash(PRECISION)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copies a search reads in `cell` of its `cover`, told from the cells' names and their
    /// geohash neighbours: what [`SearchPlan::take`] tells from the grid.
    fn copy_range(cell: &str, cover: &std::collections::HashSet<String>) -> SkRange {
        let has = |d| geohash::neighbor(cell, d).is_ok_and(|n| cover.contains(&n));
        range_for(has(geohash::Direction::W), BELOW.iter().all(|d| has(*d)))
    }

    #[test]
    fn a_circle_is_indexed_in_every_cell_it_touches_and_only_those() {
        let c = LngLat { lng: 77.5946, lat: 12.9716 };
        let shape = Shape::Circle { center: c, radius_m: 1000.0 };
        let cells = shape.cells("c").unwrap();
        assert!(cells.contains(&cell_of(c).unwrap()));
        // Every point of the circle's edge lies in an indexed cell.
        for k in 0..360 {
            let a = (k as f64).to_radians();
            let p = LngLat {
                lng: c.lng + 999.0 * a.cos() / (M_PER_DEG_LNG_EQ * c.lat.to_radians().cos()),
                lat: c.lat + 999.0 * a.sin() / M_PER_DEG_LAT_MIN,
            };
            assert!(cells.contains(&cell_of(p).unwrap()), "edge point {k}° not covered");
        }
        assert!(cells.len() <= 20 && cells.iter().all(|c| c.len() == PRECISION), "{cells:?}");
    }

    #[test]
    fn cell_sizes_are_the_geohash_cells() {
        for precision in [PRECISION, COARSE_PRECISION] {
            let r = geohash::decode_bbox(&"u33dbc".chars().take(precision).collect::<String>()).unwrap();
            let (w, h) = cell_size(precision);
            assert!((r.width() - w).abs() < 1e-12 && (r.height() - h).abs() < 1e-12, "{precision}");
        }
    }

    #[test]
    fn copy_keys_say_which_neighbours_hold_the_fence_and_searches_read_each_fence_once() {
        let c = LngLat { lng: 10.5, lat: 51.0 };
        let shape = Shape::Circle { center: c, radius_m: 1000.0 };
        let cells = shape.cells("c").unwrap();
        let sks = copy_sort_keys(&cells, "0123456789abcdef01234567");
        assert!(sks.iter().all(|sk| copy_fence_id(sk) == "0123456789abcdef01234567"));
        // A search around the fence reads it once or a few times, not once per cell it shares.
        for radius in [500.0, 1000.0, 3000.0] {
            let cover: Vec<String> = search_cells(c, radius).unwrap();
            let set: std::collections::HashSet<String> = cover.iter().cloned().collect();
            let read = cells
                .iter()
                .zip(&sks)
                .filter(|(cell, sk)| {
                    set.contains(*cell)
                        && match copy_range(cell, &set) {
                            SkRange::All => true,
                            SkRange::Between(a, b) => a.as_str() <= sk.as_str() && sk.as_str() <= b.as_str(),
                            SkRange::Prefix(p) => sk.starts_with(&p),
                        }
                })
                .count();
            let in_cover = cells.iter().filter(|c| set.contains(*c)).count();
            assert!((1..=4).contains(&read) && read < in_cover, "radius {radius}: read {read} of {in_cover}");
        }
    }

    #[test]
    fn a_searchs_reads_are_its_cells_with_their_copy_ranges() {
        for (lng, lat) in [(10.5, 51.0), (-73.98, 40.75), (151.2, -33.87), (0.0, 0.0), (-0.001, 84.9)] {
            for radius in [50.0, 1000.0, 2500.0, 5000.0, 10_000.0] {
                let at = LngLat { lng, lat };
                let Ok(cells) = search_cells(at, radius) else {
                    assert!(SearchPlan::new(at, radius).is_err());
                    continue;
                };
                let set: std::collections::HashSet<String> = cells.iter().cloned().collect();
                let by_name: Vec<(String, SkRange)> = cells.iter().map(|c| (c.clone(), copy_range(c, &set))).collect();
                let mut plan = SearchPlan::new(at, radius).unwrap();
                let all: Vec<usize> = (0..plan.cells.len()).collect();
                assert_eq!(plan.take(&all), by_name, "{lng},{lat} {radius} m");
            }
        }
    }

    #[test]
    fn a_box_reads_every_fence_in_its_first_cell_of_the_box() {
        let bbox = Rect::new(geo::Coord { x: 13.35, y: 52.50 }, geo::Coord { x: 13.45, y: 52.53 });
        let reads = box_reads("bbox", &bbox, 1_500).unwrap();
        assert_eq!(reads.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>(), box_cells("bbox", &bbox, 1_500).unwrap());
        let order: std::collections::HashMap<&str, usize> =
            reads.iter().enumerate().map(|(k, (c, _))| (c.as_str(), k)).collect();
        let id = "0123456789abcdef01234567";
        let (mut skipped, mut copies) = (0, 0);
        // Circles along and across the box's edges and inside it.
        for (lng, lat) in [(13.35, 52.50), (13.40, 52.515), (13.45, 52.53), (13.352, 52.52), (13.40, 52.499)] {
            for radius in [50.0, 400.0, 1000.0] {
                let cells = Shape::Circle { center: LngLat { lng, lat }, radius_m: radius }.cells("c").unwrap();
                let first = cells.iter().filter_map(|c| order.get(c.as_str())).min().copied();
                for (cell, sk) in cells.iter().zip(copy_sort_keys(&cells, id)) {
                    let Some(&at) = order.get(cell.as_str()) else { continue };
                    copies += 1;
                    let read = match &reads[at].1 {
                        SkRange::All => true,
                        SkRange::Between(a, b) => a.as_str() <= sk.as_str() && sk.as_str() <= b.as_str(),
                        SkRange::Prefix(p) => sk.starts_with(p.as_str()),
                    };
                    assert!(read || Some(at) != first, "{lng},{lat} {radius}: its first cell {cell} not read");
                    skipped += usize::from(!read);
                }
            }
        }
        assert!(skipped * 2 > copies, "most copies after the first are skipped: {skipped} of {copies}");
    }

    #[test]
    fn a_count_cell_holds_its_anchor_even_on_an_edge() {
        let (w, h) = cell_size(PRECISION);
        let mut points = vec![LngLat { lng: 0.0, lat: 0.0 }, LngLat { lng: 13.405, lat: 52.52 }];
        // Points exactly on cells' edges and corners (user coordinates can be such binary fractions).
        for k in [1.0, 7.0, 1234.0] {
            points.push(LngLat { lng: -180.0 + k * w, lat: -90.0 + (k + 8000.0) * h });
            points.push(LngLat { lng: 10.0 + k * w * 0.5, lat: 50.0 });
        }
        for p in points {
            let g = grid_of(p, PRECISION);
            let r = g.rect(PRECISION);
            assert!(r.min().x <= p.lng && p.lng <= r.max().x && r.min().y <= p.lat && p.lat <= r.max().y, "{p:?}");
            let name = count_cell(p).unwrap();
            let cell = geohash::decode_bbox(&name).unwrap();
            assert!(cell.min().x <= p.lng && p.lng <= cell.max().x, "{p:?} in {name}");
            assert!(cell.min().y <= p.lat && p.lat <= cell.max().y, "{p:?} in {name}");
        }
    }

    #[test]
    fn a_plans_inner_cells_are_within_the_radius_and_its_bounds_are_below_every_point() {
        for (lng, lat) in [(13.405, 52.52), (77.5946, 12.9716), (-73.98, 40.75), (0.0, 0.0), (10.0, 70.0)] {
            let at = LngLat { lng, lat };
            for radius in [300.0, 1000.0, 5000.0, 10_000.0] {
                let plan = SearchPlan::new(at, radius).unwrap();
                assert_eq!(
                    plan.cells.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
                    search_cells(at, radius).unwrap(),
                    "the plan covers the circle as the fine cover does"
                );
                let inner = plan.cells.iter().filter(|c| c.inner).count();
                assert!(radius < 5000.0 || inner > 0, "{lng},{lat} {radius}: no inner cell");
                for c in &plan.cells {
                    let r = geohash::decode_bbox(&c.name).unwrap();
                    // A 5 × 5 grid of each cell's points, edges and corners included.
                    for i in 0..5 {
                        for j in 0..5 {
                            let p = LngLat {
                                lng: r.min().x + r.width() * f64::from(i) / 4.0,
                                lat: r.min().y + r.height() * f64::from(j) / 4.0,
                            };
                            let d = at.distance_m(p);
                            assert!(c.near_m <= d, "{} near {} > {d}", c.name, c.near_m);
                            assert!(!c.inner || d < radius, "{} inner, yet {p:?} is {d} m off", c.name);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn polygon_boundary_counts_as_inside() {
        let poly = geo::Polygon::new(
            geo::LineString::from(vec![(0.0, 0.0), (0.01, 0.0), (0.01, 0.01), (0.0, 0.01), (0.0, 0.0)]),
            vec![],
        );
        let s = Shape::Polygon(poly);
        assert!(s.contains(LngLat { lng: 0.005, lat: 0.0 }));
        assert!(s.contains(LngLat { lng: 0.0, lat: 0.0 }));
        assert!(!s.contains(LngLat { lng: 0.005, lat: -0.0001 }));
        assert_eq!(s.distance_m(LngLat { lng: 0.005, lat: 0.0 }), 0.0);
        let d = s.distance_m(LngLat { lng: 0.005, lat: -0.001 });
        assert!((d - 110.6).abs() < 1.0, "{d}");
    }

    #[test]
    fn a_huge_polygon_is_refused_before_any_work() {
        let ring = geo::LineString::from(vec![(-80.0, -40.0), (90.0, -40.0), (0.0, 2.0), (-80.0, -40.0)]);
        let started = std::time::Instant::now();
        assert!(Shape::Polygon(geo::Polygon::new(ring, vec![])).cells("coordinates").is_err());
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
    }

    #[test]
    fn antimeridian_and_polar_areas_are_refused() {
        assert!(circle_bbox("c", LngLat { lng: 179.999, lat: 0.0 }, 500.0).is_err());
        assert!(circle_bbox("c", LngLat { lng: 0.0, lat: 84.999 }, 500.0).is_err());
        assert!(circle_bbox("c", LngLat { lng: 0.0, lat: 60.0 }, 500.0).is_ok());
    }
}

/// Most index cells a map's view reads, of users or of fences (about 40 × 25 km at mid
/// latitudes): a wider view is a 400 naming `bbox`.
pub const MAX_VIEW_CELLS: usize = 1_500;

/// Where a page of a map's view ended: the index cell and the id (a user's or a fence's) it ended
/// at; the next page starts after them, in the same order. Written `<cell>.<id>`.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewCursor {
    pub cell: String,
    pub id: String,
}

impl ViewCursor {
    pub fn encode(&self) -> String {
        format!("{}.{}", self.cell, self.id)
    }

    /// Parsed against the view's cells: a cursor of another view (its cell not among them), an
    /// id `id_ok` refuses or anything else is a 400 naming `cursor`.
    pub fn parse(s: &str, bbox: &Rect<f64>, id_ok: impl Fn(&str) -> bool) -> Result<Self, ApiError> {
        let bad = || {
            ApiError::field("cursor", format!("'{s}' is not a cursor of this bbox (pass `next` with the same bbox)"))
        };
        let (cell, id) = s.split_once('.').ok_or_else(bad)?;
        let cells = box_cells("bbox", bbox, MAX_VIEW_CELLS)?;
        if !id_ok(id) || !cells.iter().any(|c| c == cell) {
            return Err(bad());
        }
        Ok(ViewCursor { cell: cell.into(), id: id.into() })
    }
}
